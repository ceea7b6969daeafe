# SPDX-License-Identifier: MIT
# Host side of the soft-RoCE lab: the cached Debian kernel, the busybox
# initramfs, and two QEMU (TCG) nodes wired rail-to-rail by socket netdevs on
# 127.0.0.1. Sourced by tests/lab/run.

lab_die() { echo "lab: $*" >&2; exit 2; }

# The Debian kernel the metapackage linux-image-amd64 points at, unless
# R2CC_LAB_KERNEL names one.
lab_kernel_version() {
	if [ -n "${R2CC_LAB_KERNEL:-}" ]; then
		echo "$R2CC_LAB_KERNEL"
		return
	fi
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ { sub("linux-image-", "", $2); print $2; exit }'
}

# lab_fetch_kernel DIR: download (once) and unpack the kernel package into
# DIR/<version>, with modules.dep. Sets KVER and KROOT.
lab_fetch_kernel() {
	local cache=$1 tmp deb
	KVER=$(lab_kernel_version)
	if [ -z "$KVER" ]; then
		apt-get update -q > /dev/null 2>&1
		KVER=$(lab_kernel_version)
	fi
	[ -n "$KVER" ] || lab_die "cannot tell which kernel linux-image-amd64 uses (run apt-get update)"
	KROOT=$cache/$KVER
	[ -e "$KROOT/.complete" ] && return 0
	echo "lab: fetching kernel $KVER (once; cached in $cache)" >&2
	rm -rf "$KROOT"
	tmp=$(mktemp -d "$cache/dl.XXXXXX")
	(cd "$tmp" && apt-get download -q "linux-image-$KVER" >/dev/null 2>&1) ||
		{ rm -rf "$tmp"; lab_die "apt-get download linux-image-$KVER failed"; }
	deb=$(ls "$tmp"/*.deb)
	mkdir -p "$KROOT"
	dpkg -x "$deb" "$KROOT" || lab_die "cannot unpack $deb"
	rm -rf "$tmp"
	depmod -b "$KROOT" "$KVER" || lab_die "depmod failed"
	touch "$KROOT/.complete"
}

# lab_modules_ordered: the module list with dependencies, each dependency
# before its users, each module once (paths relative to the modules dir).
lab_modules_ordered() {
	local mdir=$KROOT/lib/modules/$KVER mod
	declare -A seen=()
	_lab_add() {
		local path=$1 deps d i
		[ -n "${seen[$path]:-}" ] && return
		seen[$path]=1
		deps=$(awk -F': *' -v p="$path" '$1 == p { print $2; exit }' "$mdir/modules.dep")
		# modules.dep lists a module's dependencies users-first: load from the end.
		read -ra d <<< "$deps"
		for ((i = ${#d[@]} - 1; i >= 0; i--)); do _lab_add "${d[i]}"; done
		echo "$path"
	}
	while read -r mod; do
		case "$mod" in ''|'#'*) continue;; esac
		local p
		p=$(grep -m1 -E "(^|/)$mod\.ko(\.xz|\.zst)?:" "$mdir/modules.dep" | cut -d: -f1)
		[ -n "$p" ] || lab_die "module $mod not in kernel $KVER"
		_lab_add "$p"
	done < "$LAB_LIB/modules.list"
}

# lab_build_initrd OUT: busybox-static + modules + init, packed with cpio.
lab_build_initrd() {
	local out=$1 stage mdir=$KROOT/lib/modules/$KVER p name
	if [ -e "$out" ] && [ "$out" -nt "$LAB_LIB/init" ] &&
		[ "$out" -nt "$LAB_LIB/modules.list" ]; then
		return 0
	fi
	[ -x /bin/busybox ] || lab_die "no /bin/busybox: install busybox-static"
	readelf -l /bin/busybox 2>/dev/null | grep -q INTERP &&
		lab_die "/bin/busybox is dynamically linked: install busybox-static"
	stage=$(mktemp -d "${out%/*}/initrd.XXXXXX")
	mkdir -p "$stage"/{bin,dev,proc,sys,modules}
	cp /bin/busybox "$stage/bin/busybox"
	cp "$LAB_LIB/init" "$stage/init"
	chmod 755 "$stage/init"
	mknod -m 600 "$stage/dev/console" c 5 1
	mknod -m 666 "$stage/dev/null" c 1 3
	lab_modules_ordered > "$stage/modules.paths" || { rm -rf "$stage"; return 1; }
	while read -r p; do
		name=$(basename "$p"); name=${name%%.ko*}
		case "$p" in
		*.xz) xz -dc "$mdir/$p" > "$stage/modules/$name.ko";;
		*.zst) zstd -qdc "$mdir/$p" > "$stage/modules/$name.ko";;
		*) cp "$mdir/$p" "$stage/modules/$name.ko";;
		esac
		echo "$name" >> "$stage/modules/order"
	done < "$stage/modules.paths"
	rm "$stage/modules.paths"
	(cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) > "$out.tmp" &&
		mv "$out.tmp" "$out"
	rm -rf "$stage"
}

# lab_udp_drops: datagrams the host's full UDP receive buffers dropped
# so far. The lab's wires are QEMU's socket netdevs, UDP on 127.0.0.1,
# each socket with the host's default receive buffer (QEMU sets none):
# a READ's response burst overflows it while the receiving QEMU is busy
# emulating, and each drop is an ACK timeout and a retransmission in rxe.
lab_udp_drops() {
	awk '$1 == "Udp:" && $2 ~ /^[0-9]+$/ { print $6 }' /proc/net/snmp
}

# lab_udp_buffers: each socket netdev's receive buffer is the host's
# net.core.rmem_default (QEMU sets none): raised to LAB_RMEM for the
# lab's run, so that a burst waits in the buffer instead of being dropped
# (at 208 KiB, scale's failover lost thousands of datagrams, each an ACK
# timeout of seconds in rxe). Prints the value to put back (nothing when
# it was large enough or cannot be changed).
LAB_RMEM=4194304
lab_udp_buffers() {
	local cur
	cur=$(sysctl -n net.core.rmem_default 2> /dev/null) || return 0
	[[ $cur =~ ^[0-9]+$ ]] && [ "$cur" -lt $LAB_RMEM ] || return 0
	sysctl -q -w net.core.rmem_default=$LAB_RMEM > /dev/null 2>&1 ||
		{ echo "lab: cannot raise net.core.rmem_default (UDP drops likely)" >&2; return 0; }
	echo "$cur"
}

# lab_udp_buffers_restore OLD: lab_udp_buffers' change undone
lab_udp_buffers_restore() {
	[ -n "$1" ] && sysctl -q -w net.core.rmem_default="$1" > /dev/null 2>&1
	return 0
}

# lab_port_base N: a base port with N consecutive free UDP ports. QEMU's
# socket netdevs are bound but unconnected UDP sockets (and set
# SO_REUSEADDR, so a second lab could bind the same ports and steal the
# first one's packets): list them all, -a.
lab_port_base() {
	local n=$1 base=${R2CC_LAB_PORT_BASE:-17100} p ok tries=0
	while [ $tries -lt 50 ]; do
		ok=1
		for ((p = base; p < base + n; p++)); do
			ss -Huan "sport = :$p" | grep -q . && { ok=0; break; }
		done
		[ $ok = 1 ] && { echo "$base"; return 0; }
		[ -n "${R2CC_LAB_PORT_BASE:-}" ] && lab_die "ports $base..$((base + n - 1)) are in use"
		base=$((base + n)); tries=$((tries + 1))
	done
	lab_die "no free UDP port range found"
}

# lab_start_vm NODE RUNDIR PORTBASE SCENARIO TIMEOUT: boot one node. Rail i
# of a and b are the two ends of one UDP socket pair; so is the management
# NIC (index 99, last pair). Writes RUNDIR/qemu-NODE.pid.
lab_start_vm() {
	local node=$1 run=$2 base=$3 scen=$4 tmo=$5 i me peer id mac
	local -a net=()
	for ((i = 0; i <= LAB_RAILS; i++)); do
		if [ $i -eq $LAB_RAILS ]; then id=mgmt; mac=99; else id=r$i; mac=$i; fi
		if [ "$node" = a ]; then me=$((base + 2 * i)); peer=$((me + 1))
		else peer=$((base + 2 * i)); me=$((peer + 1)); fi
		net+=(-netdev "socket,id=$id,udp=127.0.0.1:$peer,localaddr=127.0.0.1:$me"
		      -device "virtio-net-pci,netdev=$id,mac=$(printf '52:54:00:72:0%s:%02x' "$node" "$mac")")
	done
	# maxcpus 2 or more, even for one vCPU: TCG translates the guest's
	# memory barriers and locked instructions into real ones only when
	# the machine may run more than one vCPU (max_cpus > 1). With one,
	# they are dropped, yet QEMU's main loop reads and writes the virtio
	# rings at the same time as the vCPU: the guest's "publish the avail
	# index, then read avail_event" raced QEMU's "set avail_event, then
	# read the index", both missed the other, no kick was sent, and the
	# NIC's transmit queue stayed full for good (NETDEV WATCHDOG; QEMU's
	# queue: used == last_avail == shadow_avail, nothing in flight).
	qemu-system-x86_64 \
		-nodefaults -no-user-config -no-reboot \
		-accel tcg,thread=multi -cpu "${R2CC_LAB_CPU:-max}" \
		-smp "$LAB_CPUS,maxcpus=$((LAB_CPUS > 1 ? LAB_CPUS : 2))" -m "$LAB_MEM" \
		-display none -serial "file:$run/console-$node.log" \
		-monitor "unix:$run/monitor-$node.sock,server=on,wait=off" \
		-pidfile "$run/qemu-$node.pid" -daemonize \
		-kernel "$KROOT/boot/vmlinuz-$KVER" -initrd "$LAB_INITRD" \
		-append "console=ttyS0 loglevel=4 panic=-1 r2cc.node=$node r2cc.rails=$LAB_RAILS r2cc.scenario=$scen r2cc.timeout=$tmo r2cc.repo=$REPO r2cc.build=$BUILD r2cc.installed=${LAB_INSTALLED:-0} r2cc.baselines=${R2CC_LAB_BASELINES:-1} r2cc.scale_q=${R2CC_LAB_SCALE_Q:-32}" \
		-virtfs local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$run,mount_tag=run,security_model=none,multidevs=remap" \
		"${net[@]}" > "$run/qemu-$node.log" 2>&1
}

# lab_monitor NODE RUNDIR CMD: one command on that VM's QEMU monitor.
lab_monitor() {
	printf '%s\n' "$3" | timeout 10 socat - "UNIX-CONNECT:$2/monitor-$1.sock" > /dev/null
}

# lab_monitor_out NODE RUNDIR CMD: the same, printing the answer (the
# monitor's echo of the command and its escape codes left out).
lab_monitor_out() {
	printf '%s\n' "$3" | timeout 10 socat - "UNIX-CONNECT:$2/monitor-$1.sock" 2>&1 |
		tr -d '\r' | sed 's/\x1b\[[0-9;]*[A-Za-z]//g; /^(qemu)/d; /^QEMU .* monitor/d'
}

# lab_nic_hung RUNDIR: prints "node N ethX" and succeeds once a node's
# kernel reported a transmit queue of an emulated NIC hung (NETDEV
# WATCHDOG: the ring full for 5 s and never given back; see maxcpus in
# lab_start_vm for the cause found). Nothing the programs in the guest do
# can end it, so the run cannot pass.
lab_nic_hung() {
	local node line
	for node in a b; do
		line=$(grep -m1 -o 'eth[0-9]*: NETDEV WATCHDOG' "$1/console-$node.log" 2>/dev/null) &&
			{ echo "node $node ${line%%:*}"; return 0; }
	done
	return 1
}

# lab_nic_state NODE RUNDIR: what QEMU holds of that VM's virtio queues.
lab_nic_state() {
	local p q
	for p in $(lab_monitor_out "$1" "$2" "info virtio" | sed -n 's/^\(\/machine[^ ]*\) \[virtio-net\]$/\1/p'); do
		for q in 0 1; do
			lab_monitor_out "$1" "$2" "info virtio-queue-status $p $q"
		done
	done
	lab_monitor_out "$1" "$2" "info network"
}

# lab_serve_requests RUNDIR: carry out what the guests asked of the host.
lab_serve_requests() {
	local run=$1 req verb node nic state
	for req in "$run"/hostreq/*; do
		case "$req" in *'*'|*.done|*.tmp) continue;; esac
		[ -e "$req.done" ] && continue
		read -r verb node nic state < "$req"
		if [ "$verb" = set_link ] && [[ $node =~ ^[ab]$ ]] &&
			[[ $nic =~ ^r[0-9]$ ]] && [[ $state =~ ^(on|off)$ ]] &&
			lab_monitor "$node" "$run" "set_link $nic $state"; then
			echo "ok $(date +%s.%N)" > "$req.done"
		else
			echo "failed" > "$req.done"
		fi
	done
}

lab_kill_pidfile() {
	local pid
	[ -e "$1" ] || return 0
	pid=$(cat "$1" 2>/dev/null)
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
	# Only a QEMU we started: check its command line before killing.
	grep -qa qemu-system "/proc/$pid/cmdline" 2>/dev/null || return 0
	kill "$pid" 2>/dev/null
	sleep 1
	kill -9 "$pid" 2>/dev/null
	return 0
}
