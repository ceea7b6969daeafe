# SPDX-License-Identifier: MIT
# fo.sh: what the scenarios that move connections across a rail kill share
# (failover, stacks): the job secret, r2cc-ctl's view while a program
# runs, r2cc-gen under r2cc with a fault mid-run (gen_fo), unmodified
# programs across a kill of rail 0 (prog_fo) and an Open MPI job across
# it (mpi_fo, after mpi.sh's mpi_setup).

# (SAN_SHIM: the sanitize scenario's, with the ASan runtime before it)
SHIM=${SAN_SHIM:-$BUILD/shim/libr2cc-shim.so}
CTL=$BUILD/tools/r2cc-ctl
SECRET=/tmp/r2cc.secret
# Every node holds the same job secret, readable by its owner only.
printf 'r2cc-lab-job-secret-%044d' 7 > "$SECRET"
chmod 600 "$SECRET"

. "$REPO/tests/lab/lib/gen.sh"

# ctl_wait NAME STATE: r2cc-ctl's view (JSON, Prometheus text) of the
# running program once one of its QPs is in protection STATE (or after
# about 60 s: the last view is kept either way).
ctl_wait() {
	(
		for i in $(seq 120); do
			"$CTL" -j conn show > "$LAB/$NODE.$1.conn.json" 2>&1
			"$CTL" metrics > "$LAB/$NODE.$1.metrics" 2>&1
			jq -e "any(.[]; .protection == \"$2\")" \
				"$LAB/$NODE.$1.conn.json" > /dev/null 2>&1 && break
			nap 0.5
		done
	) &
	CTL_PID=$!
}

# gen_fo NAME FAULT_NODE FAULT...: r2cc-gen under r2cc on rail 0, the
# fault applied mid-run on FAULT_NODE; every byte must verify, nothing may
# be lost or duplicated, and the program must see no error. Prints what
# r2cc did: failover latency (fault -> first completion on the backup),
# WRs replayed, bytes re-sent.
gen_fo() {
	local name=$1 fnode=$2 line log
	shift 2
	log=$LAB/$NODE.$name.log
	R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$log"
	R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"
	R2CC="$R2CC R2CC_DETECT_MS=2000${FO_ENV:+ $FO_ENV}"
	[ "$NODE" = "$fnode" ] && fault_midrun "$name" "$@"
	ctl_wait "$name" migrated
	pair "$name" ok 150 18600 "$R2CC $GEN${GEN_X:+ $GEN_X} -i 1" \
		"$R2CC $GEN${GEN_X:+ $GEN_X} -t ${GEN_T:-15} -i 1 \$SERVER"
	[ "$NODE" = "$fnode" ] && wait "$FAULT_PID"
	wait "$CTL_PID"
	# r2cc-ctl saw the QPs on their backup rail, a failover counted
	if jq -e 'any(.[]; .dev == "rxe0" and .protection == "migrated" and
		.backup_rail == 1 and .failovers == 1)' \
		"$LAB/$NODE.$name.conn.json" > /dev/null 2>&1; then
		check pass "$name.ctl" "$(jq -c '[.[] | {qpn, protection, backup_rail, failovers}]' "$LAB/$NODE.$name.conn.json")"
	else
		check fail "$name.ctl" "$(head -c 400 "$LAB/$NODE.$name.conn.json")"
	fi
	if [ "$NODE" = b ]; then
		line=$(record "$name")
		if gen_clean "$line"; then
			check pass "$name.gen" "ops=$(field "$line" ops) bytes_verified=$(field "$line" bytes_verified) longest_stall_ms=$(field "$line" longest_stall_ms)"
		else
			check fail "$name.gen" "${line:-no summary line}"
		fi
	fi
	# what the generator saw first, on either side (the run folder
	# is gone after CI: the first failures go in the check)
	if grep -q 'r2cc-gen: .*FAIL at' "$LAB/$NODE.$name.out"; then
		check fail "$name.first" "$(grep -m3 'r2cc-gen: .*FAIL at' "$LAB/$NODE.$name.out" | cut -c1-200 | tr '\n' ' ')"
	fi
	# the failed rail's port events were r2cc's, not the program's; with
	# FO_ASYNC=EVENT the program has a QP r2cc cannot move beside the
	# others on that device: the faulting node's program hears EVENT
	if [ -n "$FO_ASYNC" ]; then
		if [ "$NODE" != "$fnode" ]; then
			:
		elif grep -q "async event: $FO_ASYNC" "$LAB/$NODE.$name.out"; then
			check pass "$name.async" "the program heard: $(grep -m1 "async event: $FO_ASYNC" "$LAB/$NODE.$name.out")"
		else
			check fail "$name.async" "no \"$FO_ASYNC\" event reached the program: $(grep -m2 'async event' "$LAB/$NODE.$name.out" | tr '\n' ' ')"
		fi
	elif grep -q 'async event' "$LAB/$NODE.$name.out"; then
		check fail "$name.async" "$(grep -m2 'async event' "$LAB/$NODE.$name.out" | tr '\n' ' ')"
	else
		check pass "$name.async" "no async event reached the program"
	fi
	# r2cc's own account, on this node
	life_check "$name" "$log"
	if grep -q 'moved to backup QP' "$log"; then
		check pass "$name.moved" "$(grep -c 'moved to backup QP' "$log") QPs; $(grep -m1 'moved to backup QP' "$log" | sed 's/.*: \([0-9]* WRs replayed.*\)/\1/')"
		metric "$name.$NODE.wrs_replayed" "$(wrs_replayed "$log")"
		metric "$name.$NODE.bytes_resent" "$(sed -n 's/.*replayed (\([0-9]*\) bytes).*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')"
		# fault (the faulting node's clock) -> first completion on a
		# backup (this node's), the slowest QP; the VMs' clocks both
		# follow the host's
		# (the first failover of each QP: fo.failback has two)
		firsts=$(sed -n 's/.*QP \(0x[0-9a-f]*\): first completion on the backup \([0-9]*\) us .* at \([0-9.]*\)$/\1 \2 \3/p' "$log" | awk '!seen[$1]++')
		metric "$name.$NODE.fence_to_first_us" "$(echo "$firsts" | awk '$2 > m { m = $2 } END { print m + 0 }')"
		metric "$name.$NODE.failover_ms" "$(echo "$firsts" |
			awk -v f="$(cat "$LAB/$name.fault" 2>/dev/null || echo 0)" \
				'f > 0 { d = ($3 - f) * 1000; if (d > m) m = d } END { printf "%d", m }')"
	else
		check fail "$name.moved" "$(grep -E 'fenced|failover|unprotected|failed' "$log" | head -3)"
	fi
}

# wrs_replayed LOG: the WRs r2cc replayed, all moves in LOG together.
wrs_replayed() {
	sed -n 's/.*: \([0-9]*\) WRs replayed.*/\1/p' "$1" |
		awk '{ s += $1 } END { print s + 0 }'
}

# life_check NAME LOG: NAME.life fails when r2cc's LOG shows a life event
# its QP's state refused (migrate/life.c: a bug in the move's logic).
life_check() {
	if grep -q 'refused in state' "$2"; then
		check fail "$1.life" "$(grep -m3 'refused in state' "$2" | cut -c1-160 | tr '\n' ' ')"
	fi
}

# moved_check NAME LOG [WHY]: NAME.moved passes when r2cc's LOG shows a
# QP moved to its backup; else it fails with LOG's first lines matching
# WHY (an extended regex; default: fences, refusals and failures).
moved_check() {
	local name=$1 log=$2 why=${3:-fenced|unprotected|failed}

	life_check "$name" "$log"
	grep -q 'moved to backup QP' "$log" &&
		check pass "$name.moved" "$(grep -c 'moved to backup QP' "$log") QPs moved" ||
		check fail "$name.moved" "$(grep -E "$why" "$log" | head -3)"
}

STALL=10
# --timeout 16 (268 ms, 7 tries: about 2 s) and R2CC_DETECT_MS=2000 (which
# keeps it: r2cc lowers a QP's timeout to fit its detection bound, 500 ms
# and 67 ms by default), as in ctl: with 67 ms, rail 0 silent for half a
# second at the start of a case that follows a fault (fo.blackhole,
# fo.cut, fo.idlehole: no fault applied yet) failed QPs still binding,
# unprotected; a black hole still shows well within the stall limit.
GEN="$BUILD/tools/r2cc-gen -d $(rail_ibdev 0) -g 1 -p 18600 -s 8192 --timeout 16 --stall-limit $STALL"

# rail0_back: node b's rail-0 fault is over (FAULT_PID) and cleared.
rail0_back() {
	wait "$FAULT_PID"
	fault_clear 0
	wait_port_active 0 30
}

# Unmodified programs across a rail kill (carrier down on node b, some
# seconds into the run): they must finish normally, and r2cc must have
# moved their connections.
# prog_fo NAME DELAY SERVER CLIENT
prog_fo() {
	local name=$1 delay=$2 srv=$3 cli=$4 log=$LAB/$NODE.$1.log
	R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$log"
	R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"
	if [ "$NODE" = b ]; then
		( nap "$delay"; fault_carrier 0 down; log "$name: rail 0 down" ) &
		FAULT_PID=$!
	fi
	pair "$name" ok 240 18515 "$R2CC $srv" "$R2CC $cli \$SERVER"
	[ "$NODE" = b ] && rail0_back
	moved_check "$name" "$log" 'fenced|unprotected|failed|protected'
	barrier "$name.cleared" 120
}

# cov_watch NAME OUT PATTERN: r2cc-ctl's view of this node's QPs while
# NAME runs, 2 s after OUT has a line matching PATTERN (before the fault,
# which comes later) and 8 s after the fault ($LAB/NAME.fault); cov_check
# NAME judges them: every connected RC QP protected before and after, and
# moved unless its path missed the fault (a QP connected to itself on the
# node that kept its cable). Protected before: ready, or already moved
# (under emulation rxe now and then gives a QP retries exceeded with no
# fault, and r2cc moves it: counted apart).
cov_watch() {
	local name=$1 out=$2 pat=$3
	rm -f "$LAB/$NODE.$name.before.done"
	(
		for i in $(seq 1800); do
			grep -q "$pat" "$out" 2> /dev/null && break
			nap 0.1
		done
		nap 2
		"$CTL" -j conn show > "$LAB/$NODE.$name.before.json" 2>&1
		: > "$LAB/$NODE.$name.before.done"
		for i in $(seq 1800); do
			[ -e "$LAB/$name.fault" ] && break
			nap 0.1
		done
		nap 8
		"$CTL" -j conn show > "$LAB/$NODE.$name.after.json" 2>&1
	) &
	COV_PID=$!
}

# cov_fault NAME CMD...: in the background, once both nodes' cov_watch
# have taken their view before the fault (2 minutes at most), wait 1 s and
# apply it (fault_now; FAULT_PID, as fault_after). The
# view and the fault were two timers racing (2 s and 3 s after the same
# line, each polled apart): on a slow guest the "before" view came after
# the fault and showed the QP already moved.
cov_fault() {
	local name=$1
	shift
	(
		for i in $(seq 1200); do
			[ -e "$LAB/a.$name.before.done" ] &&
				[ -e "$LAB/b.$name.before.done" ] && break
			nap 0.1
		done
		nap 1
		fault_now "$name" "$@"
	) &
	FAULT_PID=$!
}

cov_check() {
	local name=$1 rc='[.[] | select(.type == "RC" and .peer_qpn > 0)]'
	local total prot early after moved self
	# A run that ended early never showed what the watcher waits for
	kill "$COV_PID" 2> /dev/null
	wait "$COV_PID" 2> /dev/null
	total=$(jq "$rc | length" "$LAB/$NODE.$name.before.json" 2> /dev/null)
	prot=$(jq "$rc | map(select(.protection == \"ready\" or
		.protection == \"migrated\")) | length" \
		"$LAB/$NODE.$name.before.json" 2> /dev/null)
	early=$(jq "$rc | map(select(.protection == \"migrated\")) | length" \
		"$LAB/$NODE.$name.before.json" 2> /dev/null)
	after=$(jq "$rc | map(select(.protection == \"ready\" or
		.protection == \"migrated\")) | length" \
		"$LAB/$NODE.$name.after.json" 2> /dev/null)
	moved=$(jq "$rc | map(select(.protection == \"migrated\")) | length" \
		"$LAB/$NODE.$name.after.json" 2> /dev/null)
	self=$(jq "$rc | map(select(.protection == \"ready\" and
		.peer_qpn == .qpn)) | length" "$LAB/$NODE.$name.after.json" \
		2> /dev/null)
	metric "$name.$NODE.rc_qps" "${total:-0}"
	metric "$name.$NODE.protected" "${prot:-0}"
	metric "$name.$NODE.moved" "${moved:-0}"
	if [ "${total:-0}" -gt 0 ] && [ "$prot" = "$total" ] &&
		[ "$after" = "$total" ] &&
		[ $((moved + self)) -eq "$total" ]; then
		check pass "$name.coverage" "$prot of $total RC QPs protected before the fault$([ "${early:-0}" -gt 0 ] && echo " ($early already moved: no fault yet)"), $moved moved after it$([ "${self:-0}" -gt 0 ] && echo ", $self connected to itself on a rail that worked")"
	else
		check fail "$name.coverage" "RC QPs ${total:-none}, protected ${prot:-none} before and ${after:-none} after, moved ${moved:-none} (see $NODE.$name.before.json, .after.json)"
	fi
}

# mpi_rank NAME LOG: what each rank of job NAME runs (node a writes
# $LAB/NAME.rank, the program of mpi_setup): the environment of its node,
# by host name (the node's own netdevs), r2cc's log in LOG, and r2cc
# loaded unless MPI_BASE is set. Both nodes call it.
mpi_rank() {
	local name=$1 log=$2
	cat > "$LAB/$name.env.node-$NODE" <<-EOT
	export R2CC_LOG=info R2CC_LOG_FILE=$log
	export R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)
	export FI_VERBS_IFACE=$(rail_dev 0)
	EOT
	[ -n "${MPI_BASE:-}" ] ||
		echo "export LD_PRELOAD=$SHIM" >> "$LAB/$name.env.node-$NODE"
	if [ "$NODE" = a ]; then
		printf '#!/bin/sh\n. %s.$(hostname)\nexec %s "$@"\n' \
			"$LAB/$name.env" "$(cat "$LAB/mpi.prog")" > "$LAB/$name.rank"
		chmod +x "$LAB/$name.rank"
	fi
}

# mpi_launch NAME BOUND OUT "PROG_ARGS" MPIRUN_OPTS...: from node a, job
# NAME's 2 ranks (one a node, mpi_rank's) with PROG_ARGS, its output in
# OUT, for at most BOUND seconds; its exit status.
mpi_launch() {
	local name=$1 bound=$2 out=$3 args=$4 net
	shift 4
	net=$(mgmt_ip a)
	net=${net%.*}.0/24
	log "$name: mpirun $* $args"
	bounded "$bound" mpirun --allow-run-as-root -np 2 \
		--host node-a:1,node-b:1 --mca oob_tcp_if_include "$net" \
		-x PMIX_MCA_gds "$@" "$LAB/$name.rank" $args > "$out" 2>&1
}

# mpi_fo NAME MPIRUN_OPTS...: an Open MPI job (2 ranks, one per node,
# tests/progs/mpi_pingpong, which checks every word of every message,
# eager sizes and rendezvous, and must end with errors=0) under r2cc
# across a pull of node b's rail-0 cable some seconds into the run; r2cc
# must have protected the job's RC QPs and moved them, on both nodes.
# With MPI_BASE=1, the same job and fault without r2cc: the job must die
# or hang (bounded). MPI_PP_ARGS: more mpi_pingpong options (sizes, -a).
# Debian's openib BTL cannot run on RoCE (its only connection manager,
# udcm, is InfiniBand-only).
mpi_fo() {
	local name=$1 log=$LAB/$NODE.$1.log out=$LAB/a.$1.out
	local rc start dt line bound=300
	shift
	[ -n "${MPI_BASE:-}" ] && bound=110
	mpi_rank "$name" "$log"
	rm -f "$LAB/$name.fault"
	barrier "$name.start" 300 || return 0
	[ -n "${MPI_BASE:-}" ] || cov_watch "$name" "$out" '^mpi_pingpong: progress'
	if [ "$NODE" = b ] && [ -n "${MPI_BASE:-}" ]; then
		fault_after "$out" '^mpi_pingpong: progress' 180 4 "$name" \
			fault_carrier 0 down
	elif [ "$NODE" = b ]; then
		cov_fault "$name" fault_carrier 0 down
	else
		start=$(date +%s)
		mpi_launch "$name" $bound "$out" "-t 20 ${MPI_PP_ARGS:-}" "$@"
		rc=$?
		dt=$(($(date +%s) - start))
		line=$(grep '^mpi_pingpong: ranks=' "$out")
		if [ ! -e "$LAB/$name.fault" ]; then
			check fail "$name.run" "the job ended before the fault (exit $rc after ${dt}s)"
		elif [ -n "${MPI_BASE:-}" ]; then
			[ $rc -ne 0 ] &&
				check pass "$name.run" "failed as expected without r2cc: exit $rc after ${dt}s" ||
				check fail "$name.run" "finished without r2cc: $line"
		elif [ $rc -eq 0 ] && [[ $line == *" errors=0" ]]; then
			check pass "$name.run" "$line ${dt}s"
			metric "$name.bytes_verified" "$(field "$line" bytes)"
		else
			check fail "$name.run" "exit $rc after ${dt}s: ${line:-no summary} $(grep -m2 -iE 'assert|error|abort' "$out" | cut -c1-200 | tr '\n' ' ')(see ${out##*/})"
		fi
		metric "$name.seconds" "$dt"
	fi
	barrier "$name.end" $((bound + 60))
	[ "$NODE" = b ] && rail0_back
	if [ -z "${MPI_BASE:-}" ]; then
		cov_check "$name"
		grep -q 'protected: backup QP' "$log" &&
			check pass "$name.protected" "$(grep -c 'protected: backup QP' "$log") QPs" ||
			check fail "$name.protected" "$(grep -E 'unprotected|secret|control' "$log" | head -3)"
		grep -q 'moved to backup QP' "$log" &&
			check pass "$name.moved" "$(grep -c 'moved to backup QP' "$log") QPs; $(grep -m1 'moved to backup QP' "$log" | sed 's/.*: \([0-9]* WRs replayed.*\)/\1/')" ||
			check fail "$name.moved" "$(grep -E 'fenced|unprotected|failed|abandoned' "$log" | head -3)"
		metric "$name.$NODE.wrs_replayed" "$(wrs_replayed "$log")"
	fi
	barrier "$name.cleared" 120
}
