# SPDX-License-Identifier: MIT
# The scenario library, sourced in each lab guest: who we are, where the rails
# are, a barrier between the nodes, result reporting and the fault primitives.
# Every wait here is bounded.

LAB=/lab                       # the run folder, shared with the host (9p)
NODE=$LAB_node                 # a or b
PEER=$([ "$NODE" = a ] && echo b || echo a)
RAILS=${LAB_rails:-2}
REPO=$LAB_repo
BUILD=$LAB_build
RESULTS=$LAB/$NODE.results
# The r2cc the demo runs: the build tree's, or (tests/lab/run -i) the
# installed one, the shim by its bare name as a job preloads it.
if [ "${LAB_installed:-0}" = 1 ]; then
	LAB_SHIM=libr2cc-shim.so
	LAB_CTL=$(command -v r2cc-ctl)
	LAB_GEN=$(command -v r2cc-gen)
else
	LAB_SHIM=$BUILD/shim/libr2cc-shim.so
	LAB_CTL=$BUILD/tools/r2cc-ctl
	LAB_GEN=$BUILD/tools/r2cc-gen
fi

node_num() { [ "$1" = a ] && echo 1 || echo 2; }
# Rail i of node n is 10.10.i.n/24 on the wire shared with the peer's rail i;
# the management network is 10.10.99.n. These exist only on QEMU's emulated
# wires between the two VMs.
rail_ip() { echo "10.10.$2.$(node_num "$1")"; }
mgmt_ip() { echo "10.10.99.$(node_num "$1")"; }
rail_ibdev() { echo "rxe$1"; }
rail_mac() { printf '52:54:00:72:0%s:%02x' "$1" "$2"; }
# Netdev by MAC, so that PCI enumeration order does not matter.
mac_dev() {
	local f a
	for f in /sys/class/net/*/address; do
		read -r a < "$f" || continue
		[ "$a" = "$1" ] || continue
		f=${f%/address}
		echo "${f##*/}"
		return 0
	done
	return 1
}
rail_dev() { mac_dev "$(rail_mac "$NODE" "$1")"; }
mgmt_dev() { mac_dev "$(rail_mac "$NODE" 99)"; }

log() { printf '[%s %(%T)T] %s\n' "$NODE" -1 "$*"; }

# nap SECS: sleep without a fork. Under TCG, with the guest's one CPU kept
# busy by the program under test, forking and exec'ing sleep(1) takes most
# of a second, and a fault schedule made of such steps drifted by seconds
# (a 5 s carrier loss lasted 13 s): read -t on a FIFO no one writes to is
# bash's own. Falls back to sleep(1) if the FIFO cannot be made.
LAB_NAP_FD=
if mkfifo "/tmp/lab-nap.$$" 2> /dev/null; then
	exec {LAB_NAP_FD}<> "/tmp/lab-nap.$$" || LAB_NAP_FD=
	rm -f "/tmp/lab-nap.$$"
fi
nap() {
	if [ -n "$LAB_NAP_FD" ]; then
		read -r -t "$1" -u "$LAB_NAP_FD" _
		return 0
	fi
	sleep "$1"
}
# now_us: the time in microseconds (no fork)
now_us() { REPLY=${EPOCHREALTIME//[.,]/}; }
# nap_until US: nap until that time (now_us's clock); at once if past.
nap_until() {
	local d
	now_us
	d=$(($1 - REPLY))
	[ $d -gt 0 ] || return 0
	printf -v d '%d.%06d' $((d / 1000000)) $((d % 1000000))
	nap "$d"
}
# secs_us SECS: REPLY = SECS ("5", "1.5") in microseconds
secs_us() {
	local i=${1%%.*} f=0
	[ "$i" = "$1" ] || f=${1#*.}000000
	REPLY=$((10#${i:-0} * 1000000 + 10#${f:0:6}))
}
# fault_mark, at SECS: a fault schedule timed from one instant (the moment
# the last fault_carrier's change showed, else now), not from the end of
# the step before: at 5 ... at 10 are 5 s apart however long a step took.
fault_mark() {
	if [ -n "$CARRIER_T" ]; then
		FAULT_MARK=${CARRIER_T//[.,]/}
	else
		now_us
		FAULT_MARK=$REPLY
	fi
}
at() {
	secs_us "$1"
	nap_until $((FAULT_MARK + REPLY))
}

# check STATUS NAME [DETAIL...]: one result line for the host.
check() {
	local st=$1 name=$2; shift 2
	echo "CHECK $st $name $*" >> "$RESULTS"
	log "check $st $name $*"
}
# baselines: the run includes the cases that show a fault without r2cc
# (R2CC_LAB_BASELINES=1, tests/lab/run's default; tests/check runs them
# only with R2CC_CHECK_FULL=1): the proof that the faults the other cases
# survive are fatal to the same programs without r2cc.
baselines() { [ "${LAB_baselines:-1}" = 1 ]; }
# metric NAME VALUE: a figure for the host's report.
metric() { echo "METRIC $1 $2" >> "$RESULTS"; }

# bounded SECONDS CMD...: run CMD, killed after SECONDS (exit 124).
bounded() {
	local t=$1; shift
	timeout -k 5 "$t" "$@"
}

# barrier NAME [SECONDS]: wait until the peer reached the same barrier.
barrier() {
	local name=$1 t=${2:-120} end
	mkdir -p "$LAB/barrier"
	: > "$LAB/barrier/$name.$NODE"
	end=$((SECONDS + t))
	while [ ! -e "$LAB/barrier/$name.$PEER" ]; do
		if [ $SECONDS -ge $end ]; then
			check fail "barrier.$name" "peer not there after ${t}s"
			return 1
		fi
		nap 0.1
	done
}

# wait_listen PORT [SECONDS]: a local TCP listener is up on PORT.
wait_listen() {
	local port=$1 end=$((SECONDS + ${2:-30}))
	while ! ss -Hltn "sport = :$port" | grep -q .; do
		[ $SECONDS -ge $end ] && return 1
		nap 0.1
	done
}

# pair NAME EXPECT SECONDS PORT SERVER_CMD CLIENT_CMD (PORT - : no TCP wait)
# Runs a client/server program across the nodes: the server on node a, the
# client on node b (its command may use $SERVER, a's management address, so
# that the out-of-band exchange never depends on the rail under test).
# EXPECT is ok (both sides exit 0) or fail (the client fails, within SECONDS).
# Output goes to $LAB/$NODE.NAME.out. Returns 0 when the expectation held.
pair() {
	local name=$1 expect=$2 t=$3 port=$4 srv=$5 cli=$6
	local out=$LAB/$NODE.$name.out rc start end
	SERVER=$(mgmt_ip a)
	export SERVER
	if [ "$NODE" = a ]; then
		bounded "$t" stdbuf -oL -eL bash -c "$srv" > "$out" 2>&1 &
		local pid=$!
		if [ "$port" = - ]; then
			sleep 3 # not a TCP listener (e.g. rdma_cm): give it time
		else
			wait_listen "$port" 60 || log "$name: server not listening on $port"
		fi
		barrier "$name.ready" || { kill $pid 2>/dev/null; return 1; }
		if [ "$expect" = ok ]; then
			wait $pid; rc=$?
			barrier "$name.done" $((t + 30))
		else
			# The client's failure is the result; the server would wait
			# for a peer that is gone, so end it once the client is done.
			barrier "$name.done" $((t + 30))
			kill $pid 2>/dev/null
			wait $pid; rc=$?
		fi
		if [ "$expect" = ok ]; then
			[ $rc -eq 0 ] && check pass "$name.server" ||
				check fail "$name.server" "exit $rc (see $(basename "$out"))"
		else
			check pass "$name.server" "exit $rc"
		fi
		[ "$expect" = fail ] || [ $rc -eq 0 ]
	else
		barrier "$name.ready" $((t + 60)) || return 1
		start=$(date +%s.%N)
		bounded "$t" stdbuf -oL -eL bash -c "$cli" > "$out" 2>&1; rc=$?
		end=$(date +%s.%N)
		barrier "$name.done" $((t + 30))
		local dt
		dt=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
		if [ "$expect" = ok ]; then
			[ $rc -eq 0 ] && check pass "$name.client" "${dt}s" ||
				check fail "$name.client" "exit $rc after ${dt}s (see $(basename "$out"))"
			[ $rc -eq 0 ]
		else
			[ $rc -ne 0 ] && check pass "$name.client" "failed as expected: exit $rc after ${dt}s" ||
				check fail "$name.client" "succeeded although the rail is broken"
			[ $rc -ne 0 ]
		fi
	fi
}

# ---- fault primitives, by rail number -------------------------------------

# fault_carrier RAIL down|up: this node's rail NIC loses (regains) its
# carrier, by QEMU's `set_link` from the host: a pulled cable. The guest's
# netdev stays administratively up and rxe raises a port event. Not `ip
# link set down`: rxe frees the skbs still in the virtio transmit ring at
# the next `ip link set up`, and if their QPs were destroyed meanwhile
# (the case's programs ended) the guest oopses in rxe_skb_tx_dtor.
# Returns once the guest's netdev shows it (5-10 s at most), CARRIER_T set to
# the last moment it still showed the old state: the host's round trip is
# not the fault's (the guest sees QEMU's change within milliseconds).
# FAULT_T, when empty, is set to it too (fault_after: the first change of
# a fault is what a failover is timed from).
fault_carrier() {
	local off=$LAB/$NODE.carrier-off st t hl rc i=0 link=on
	local f=/sys/class/net/$(rail_dev "$1")/operstate
	[ "$2" = down ] && link=off
	host_link "$NODE" "$1" $link &
	hl=$!
	CARRIER_T=$EPOCHREALTIME
	while t=$EPOCHREALTIME && read -r st < "$f" && [ "$st" != "$2" ] &&
		[ $((i++)) -lt 1000 ]; do
		CARRIER_T=$t
		nap 0.005
	done
	FAULT_T=${FAULT_T:-$CARRIER_T}
	wait "$hl"
	rc=$?
	[ "$2" = down ] && [ $rc = 0 ] && echo "$1" >> "$off"
	[ "$2" = up ] && [ -e "$off" ] && sed -i "/^$1\$/d" "$off"
	return $rc
}

# fault_blackhole RAIL: every packet this node sends on the rail is dropped;
# link and port stay up and no event is raised.
fault_blackhole() {
	tc qdisc replace dev "$(rail_dev "$1")" root netem loss 100%
}

# fault_loss RAIL PERCENT [DELAY_MS]: partial loss (and delay) on egress.
fault_loss() {
	local d=""
	[ -n "$3" ] && d="delay ${3}ms"
	tc qdisc replace dev "$(rail_dev "$1")" root netem loss "$2%" $d
}

# fault_flap RAIL SCHEDULE: carrier changes in the background, e.g.
# "down 2 up 3 down 2 up 0" (state, then seconds to hold it): the first
# change before it returns, the rest in the background. Sets FLAP_PID; the
# schedule ends with the link in its last state.
fault_flap() {
	local rail=$1 t=0
	set -- $2
	# the first change now (FAULT_T: the fault's time), the rest after,
	# each timed from the first (fault_mark)
	fault_carrier "$rail" "$1"
	echo "$CARRIER_T $1" >> "$LAB/$NODE.flap.log"
	fault_mark
	(
		while [ $# -ge 4 ]; do
			secs_us "$2"
			t=$((t + REPLY))
			nap_until $((FAULT_MARK + t))
			fault_carrier "$rail" "$3"
			echo "$CARRIER_T $3" >> "$LAB/$NODE.flap.log"
			shift 2
		done
		# hold the last state for its time, as before
		[ $# -ge 2 ] && secs_us "$2" && nap_until $((FAULT_MARK + t + REPLY))
	) &
	FLAP_PID=$!
}

# host_link NODE RAIL on|off: QEMU's monitor `set_link` on that VM's rail
# NIC, done by the host (a one-sided cut: the other side sees a black hole).
host_link() {
	local node=$1 rail=$2 state=$3 i=0
	local req ans
	[ -d "$LAB/hostreq" ] || mkdir -p "$LAB/hostreq"
	req=$LAB/hostreq/${EPOCHREALTIME//[.,]/}000.$NODE
	echo "set_link $node r$rail $state" > "$req.tmp"
	mv "$req.tmp" "$req"
	while [ ! -e "$req.done" ]; do
		i=$((i + 1))
		[ $i -gt 600 ] && { log "host_link: no answer from host"; return 1; }
		nap 0.05
	done
	# (the host may have created the file and not written it yet)
	read -r ans < "$req.done" || { nap 0.2; read -r ans < "$req.done"; }
	[ "${ans%% *}" = ok ]
}

# fault_clear RAIL: undo every fault this node put on the rail.
fault_clear() {
	local dev; dev=$(rail_dev "$1")
	[ -n "$FLAP_PID" ] && kill "$FLAP_PID" 2>/dev/null
	FLAP_PID=
	tc qdisc del dev "$dev" root 2>/dev/null
	grep -qsx "$1" "$LAB/$NODE.carrier-off" && fault_carrier "$1" up
}

# wait_port_active RAIL [SECONDS]: the rxe port is ACTIVE again.
wait_port_active() {
	local end=$((SECONDS + ${2:-30}))
	while ! rdma link show "$(rail_ibdev "$1")/1" | grep -q 'state ACTIVE'; do
		[ $SECONDS -ge $end ] && return 1
		nap 0.1
	done
}

# qdisc_drops RAIL: packets the rail's root qdisc (netem) dropped so far.
qdisc_drops() {
	tc -s qdisc show dev "$(rail_dev "$1")" root |
		sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1
}

# operstate RAIL: the rail netdev's operational state (up, down, ...).
operstate() { cat "/sys/class/net/$(rail_dev "$1")/operstate"; }

# rxe_counter RAIL NAME: one of the rxe device's hardware counters.
rxe_counter() {
	rdma statistic show link "$(rail_ibdev "$1")/1" |
		tr ' ' '\n' | awk -v k="$2" 'f { print; exit } $0 == k { f = 1 }'
}

# ---- ssh between the nodes (for launchers such as mpirun) -----------------

# ssh_setup: root logins by key between the nodes over the management network,
# the way a cluster launcher expects them. Node a makes a key pair in the run
# folder; both nodes trust it and run sshd on their management address (host
# keys: the host's, or made in the overlay). Run on both nodes.
ssh_setup() {
	local dir=$LAB/ssh
	mkdir -p /root/.ssh /run/sshd
	chmod 700 /root/.ssh
	if [ "$NODE" = a ]; then
		mkdir -p "$dir"
		rm -f "$dir/id_ed25519" "$dir/id_ed25519.pub"
		ssh-keygen -q -t ed25519 -N '' -C r2cc-lab -f "$dir/id_ed25519" ||
			return 1
	fi
	barrier ssh.key 60 || return 1
	cp "$dir/id_ed25519" "$dir/id_ed25519.pub" /root/.ssh/ || return 1
	chmod 600 /root/.ssh/id_ed25519
	cp "$dir/id_ed25519.pub" /root/.ssh/authorized_keys
	chmod 600 /root/.ssh/authorized_keys
	printf '%s\n' "Host *" "	StrictHostKeyChecking no" \
		"	UserKnownHostsFile /dev/null" "	LogLevel ERROR" \
		"	BatchMode yes" "	ConnectTimeout 30" > /root/.ssh/config
	ssh-keygen -A > /dev/null || return 1
	/usr/sbin/sshd -o ListenAddress="$(mgmt_ip "$NODE")" -o UsePAM=no \
		-o PermitRootLogin=prohibit-password -o MaxStartups=100 \
		-E "$LAB/$NODE.sshd.log" || return 1
	wait_listen 22 30 || return 1
	barrier ssh.up 60
}

# ssh_peer_ok [SECONDS]: a command runs on the peer over ssh (3 tries, each
# bounded; what ssh said goes to $LAB/$NODE.ssh_peer.out).
ssh_peer_ok() {
	local try out
	for try in 1 2 3; do
		out=$(bounded "${1:-60}" ssh "node-$PEER" hostname 2>&1)
		echo "try $try: exit $? output \`$out'" >> "$LAB/$NODE.ssh_peer.out"
		[ "$out" = "node-$PEER" ] && return 0
		sleep 2
	done
	return 1
}
