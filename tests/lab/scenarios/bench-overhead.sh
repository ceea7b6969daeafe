# SPDX-License-Identifier: MIT
# bench-overhead: what r2cc adds to the data path, in user-space
# instructions per work request. bench_wr posts 1-SGE 64-byte RDMA WRITEs
# (every 16th signaled) and polls them; callgrind counts the instructions
# of the thread inside bench_loop (provider and shim included) for N=2000
# and N=4000, without and with the shim, in this one run. Per WR is
# (I(4000) - I(2000)) / 2000, so set-up costs cancel out.
#
# Unprotected (node a alone): two RC QPs on rxe0 looped back in one
# process; the shim cannot protect them (no peer process, no secret).
# The figure that counts is taken with bench_wr -T (an idle thread in both
# runs): r2cc runs a rail-monitor thread, and in any multi-threaded process
# glibc's system-call wrappers take their cancellable path, which on rxe
# costs instructions around the doorbell write() of every post. NCCL, UCX
# and MPI processes are multi-threaded anyway; the single-threaded figure is
# printed beside it (single_threaded_added). Target: at most 100 added.
#
# Protected (both nodes, first): bench_wr's server (-S) on node b, its
# client (-C, over the management network) on node a under callgrind, one
# RC QP each on rail 0, both under the shim with the job secret, so the QP
# gets a standby on rail 1. The client waits for a go file (-w) that this
# script makes only once `r2cc-ctl -j conn show` on a shows the QP ready;
# each figure is set beside the same client run natively (no shim, no
# secret, same N): WRITE every 16th signaled
# (protected_added_instructions_per_wr, the headline), every WR signaled
# (-s 1), and after a move (rail 0's cable pulled on a once the QP is
# ready, the go file once it shows migrated: the loop runs on the
# standby). Across the wire the loop waits for ACKs by polling, as many
# empty polls as the emulated wire's timing makes: the client pauses 2 ms
# after each (-i, in bench_nap: not counted), polls its drained CQ 1000
# times at the end (bench_empty, counted apart), and each of the loop's
# empty polls is taken off its count at that cost (loop_only; the cost of
# one and their number go to metrics per run).
# A case that does not run, or whose QP is never shown ready
# (migrated), fails. The protected figures are reported as measured with
# the 100-instruction target beside them, not judged by it (today they
# are well above it). The protected path, before and after a move, may
# call no libc function that the native client's does not.
# The whole scenario took 258 s and 266 s in two lab runs (2-core host, TCG).
# lab-timeout: 720

. "$REPO/tests/lab/lib/fo.sh"

BW_BIN=$BUILD/tests/progs/bench_wr
BW="$BW_BIN -d rxe0 -g 1"
# --separate-threads: count the thread that runs bench_loop (part 1) only,
# not r2cc's rail monitor or any other thread.
CG="valgrind --tool=callgrind --toggle-collect=bench_loop --separate-threads=yes"
for f in "$SHIM" "$BW_BIN"; do
	[ -e "$f" ] || { check fail built "no $f: build first"; return 0; }
done
if [ "$NODE" = a ] && ! command -v valgrind > /dev/null; then
	check fail valgrind "not installed: run tools/install-deps"
fi
barrier bo.start 120 || return 0

# cg NAME N [ENV...]: $BW under callgrind; prints the instruction total.
cg() {
	local name=$1 n=$2 out=$LAB/a.$1.out
	shift 2
	bounded 900 env "$@" $CG --callgrind-out-file="$LAB/a.$name.cg" \
		$BW -n "$n" > "$out" 2>&1 ||
		{ check fail "$name" "exit $? (see a.$name.out)"; return 1; }
	grep -q "^bench_wr: wrs=$n " "$out" ||
		{ check fail "$name" "no summary (see a.$name.out)"; return 1; }
	# The main thread's file: a.NAME.cg-01.
	mv "$LAB/a.$name.cg-01" "$LAB/a.$name.cg" 2>/dev/null ||
		{ check fail "$name" "no callgrind output for thread 1"; return 1; }
	awk '$1 == "totals:" { print $2; exit }' "$LAB/a.$name.cg"
}

# calls FILE: the functions run inside bench_loop, "file:fn [object]".
calls() {
	callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
		sed -n 's/^ *[0-9,]\+ ([^)]*)  *\([^ ].*\)$/\1/p' | sort -u
}

# per_wr I2000 I4000: instructions per WR (empty if either is missing).
per_wr() {
	[ -n "$1" ] && [ -n "$2" ] && echo $(( ($2 - $1) / 2000 ))
}

# ---- two nodes: the protected QP ------------------------------------------
PORT=18700
GO=/tmp/bench-go
# Under valgrind r2cc's control thread runs slowly (a QP was ready about
# 4 s after the client started, under TCG): generous bounds, but one case
# that fails makes the next ones wait less.
TN_T=420 # a whole run, either side
WAIT_T=240 # bench_wr's waits (-t): server, go file, loop
R2CC_T=90 # the QP shown ready (or migrated); 20 s once a case failed
# The client pauses after an empty poll (bench_nap, not counted): it
# polls far less while it waits for the wire (a run of 4000 WRs without
# a pause made 36452 empty polls, another 2466).
NAP_US=2000

# r2cc_env NAME: the environment of a program under r2cc, job secret set.
r2cc_env() {
	echo "LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LAB/$NODE.$1.log" \
		"R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)" \
		"R2CC_DETECT_MS=2000"
}

# ctl_until NAME STATE SECONDS: r2cc-ctl on this node shows a QP in
# protection STATE within SECONDS (its last view: $LAB/$NODE.NAME.conn.json).
ctl_until() {
	local end=$((SECONDS + $3))
	while [ $SECONDS -lt $end ]; do
		"$CTL" -j conn show > "$LAB/$NODE.$1.conn.json" 2>&1
		jq -e "any(.[]; .protection == \"$2\")" \
			"$LAB/$NODE.$1.conn.json" > /dev/null 2>&1 && return 0
		nap 1
	done
	return 1
}

# go_when NAME [pull]: in the background (GO_PID), once the client's QP
# is protected (and, with pull, rail 0's cable pulled on this node and
# the QP migrated), the go file made; checks NAME.protected (NAME.moved).
# When that never comes, the go file is made all the same (the client
# ends in its time) and $LAB/a.NAME.unprotected says its figure is void.
go_when() {
	local name=$1 pull=$2 t=$R2CC_T
	[ -e "$LAB/a.bo.unprotected" ] && t=20
	rm -f "$GO"
	(
		if ! ctl_until "$name" ready $t; then
			check fail "$name.protected" "no QP ready within ${t}s: $(head -c 300 "$LAB/a.$name.conn.json")"
		else
			check pass "$name.protected" "$(jq -c '[.[] | {qpn, protection, backup_rail}]' "$LAB/a.$name.conn.json")"
			if [ -z "$pull" ]; then
				: > "$GO"
				exit 0
			fi
			if ! fault_carrier 0 down; then
				check fail "$name.pull" "rail 0's carrier still up"
			elif ! ctl_until "$name.moved" migrated $t; then
				check fail "$name.moved" "no QP migrated within ${t}s: $(head -c 300 "$LAB/a.$name.moved.conn.json")"
			else
				check pass "$name.moved" "$(jq -c '[.[] | {qpn, protection, on_rail}]' "$LAB/a.$name.moved.conn.json")"
				: > "$GO"
				exit 0
			fi
		fi
		: > "$LAB/a.$name.unprotected"
		: > "$LAB/a.bo.unprotected"
		: > "$GO"
	) &
	GO_PID=$!
}

# loop_only NAME TOTAL: bench_loop's count without its empty polls.
# Across the wire the loop waits for the peer's ACKs by polling, and how
# many polls find nothing follows the emulated wire's timing, not the
# code (fewer with the pause, but still some): TOTAL (bench_loop
# and bench_empty, callgrind's two toggles) less bench_empty's M empty
# polls of the drained CQ, less bench_loop's empty polls at the cost of
# one of those each. Each empty poll's cost goes to a metric.
loop_only() {
	local e m x
	e=$(callgrind_annotate --inclusive=yes --threshold=100 \
		"$LAB/a.$1.cg" 2> /dev/null |
		sed -n 's/^ *\([0-9,]\+\) ([^)]*)  *[^ ]*:bench_empty \[.*/\1/p' |
		head -1 | tr -d ,)
	m=$(sed -n 's/^bench_wr: empty_polls_calibrated=\([0-9]*\)$/\1/p' \
		"$LAB/a.$1.out")
	x=$(sed -n 's/^bench_wr: wrs=.* empty=\([0-9]*\)$/\1/p' "$LAB/a.$1.out")
	if [ -z "$e" ] || [ -z "$m" ] || [ -z "$x" ]; then
		check fail "$1" "no empty-poll calibration (see a.$1.out)" >&2
		return 1
	fi
	metric "$1.empty_polls" "$x"
	metric "$1.empty_poll_instructions" $((e / m))
	echo $(($2 - e - x * e / m))
}

# tn NAME N MODE [OPTS...]: one two-node run, N WRs: the server on b, the
# client on a under callgrind with OPTS; MODE native (no shim, no
# secret), prot (both under r2cc, the loop once the QP is ready) or moved
# (prot, the loop once the QP migrated off rail 0). On a, prints the
# instruction total (nothing if the run failed: its check says why).
tn() {
	local name=$1 n=$2 mode=$3 env= rc pid total
	shift 3
	[ "$mode" = native ] || env=$(r2cc_env "$name")
	if [ "$NODE" = b ]; then
		bounded $TN_T env $env $BW -t $WAIT_T -S $PORT \
			> "$LAB/b.$name.out" 2>&1 &
		pid=$!
		wait_listen $PORT 60 || log "$name: server not listening"
		barrier "bo.$name.ready" $TN_T
		wait $pid
		rc=$?
		[ $rc = 0 ] || check fail "$name.server" "exit $rc (see b.$name.out)"
		barrier "bo.$name.done" $TN_T
		return 0
	fi
	# (only the total on stdout: check and log lines go to stderr)
	{
		barrier "bo.$name.ready" $TN_T || return 0
		rm -f "$GO"
		case $mode in
		native) : > "$GO" ;;
		prot) go_when "$name" ;;
		moved) go_when "$name" pull ;;
		esac
	} >&2
	local BW="$BW_BIN -d rxe0 -g 1 -T -t $WAIT_T -w $GO"
	local CG="$CG --toggle-collect=bench_empty --toggle-collect=bench_nap"
	BW="$BW -i $NAP_US -C $(mgmt_ip b):$PORT $*"
	total=$(cg "$name" "$n" $env) && total=$(loop_only "$name" "$total") ||
		total=
	{
		[ "$mode" = native ] || wait "$GO_PID"
		if [ "$mode" = moved ]; then
			fault_clear 0
			wait_port_active 0 30 || log "$name: rail 0 not active again"
		fi
		barrier "bo.$name.done" $TN_T
	} >&2
	[ -e "$LAB/a.$name.unprotected" ] || echo "$total"
}

# Every case runs on both nodes in this order; each one's figure only if
# both its runs gave a total.
tn2=$(tn tn.native2000 2000 native)
tn4=$(tn tn.native4000 4000 native)
pr2=$(tn tn.prot2000 2000 prot)
pr4=$(tn tn.prot4000 4000 prot)
sn2=$(tn tn.native.s1.2000 2000 native -s 1)
sn4=$(tn tn.native.s1.4000 4000 native -s 1)
sp2=$(tn tn.prot.s1.2000 2000 prot -s 1)
sp4=$(tn tn.prot.s1.4000 4000 prot -s 1)
mv2=$(tn tn.moved2000 2000 moved)
mv4=$(tn tn.moved4000 4000 moved)
[ "$NODE" = a ] || return 0

# protected NAME NATIVE PROTECTED: one protected figure, as measured, the
# target beside it; fails only when a case gave no figure.
protected() {
	local name=$1 added
	if [ -z "$2" ] || [ -z "$3" ]; then
		check fail "overhead.$name" "no figure: a run failed (see its check)" >&2
		return 1
	fi
	added=$(($3 - $2))
	metric "${name}_added_instructions_per_wr" "$added"
	metric "${name}_instructions_per_wr" "$3"
	check pass "overhead.$name" "${name}_added_instructions_per_wr=$added native=$2 $name=$3 (measured; target <= 100 $([ "$added" -le 100 ] && echo met || echo 'not met'))" >&2
	echo "$added"
}
tnat=$(per_wr "$tn2" "$tn4")
[ -n "$tnat" ] && metric two_node_native_instructions_per_wr "$tnat"
p_added=$(protected protected "$tnat" "$(per_wr "$pr2" "$pr4")")
snat=$(per_wr "$sn2" "$sn4")
[ -n "$snat" ] && metric two_node_native_every_signaled_instructions_per_wr "$snat"
s_added=$(protected protected_every_signaled "$snat" "$(per_wr "$sp2" "$sp4")")
m_added=$(protected moved "$tnat" "$(per_wr "$mv2" "$mv4")")
pline="protected_added_instructions_per_wr=${p_added:-none} every_signaled_added=${s_added:-none} moved_added=${m_added:-none} two_node_native=${tnat:-none} (target <= 100, not judged)"

echo "$pline" > "$LAB/a.bench-overhead.txt"
log "$pline"

# No libc function on the protected path that the native client's does
# not call (the inclusive lists inside bench_loop and bench_empty; also
# after a move).
libc_extra() { # libc_extra NATIVE_CG SHIM_CG: "fn,fn" or "none"
	local x
	x=$(comm -13 <(calls "$1") <(calls "$2") |
		grep -E 'libc\.so|ld-linux|libpthread' |
		sed 's/^[^:]*:\([^ ]*\) .*/\1/' | sort -u | paste -sd, -)
	echo "${x:-none}"
}
for c in prot4000:protected moved4000:moved; do
	f=$LAB/a.tn.${c%%:*}.cg
	if [ -z "$tn4" ] || [ ! -e "$f" ] || [ -e "$LAB/a.tn.${c%%:*}.unprotected" ]; then
		check fail "overhead.${c#*:}.no-libc" "no run to compare"
		continue
	fi
	x=$(libc_extra "$LAB/a.tn.native4000.cg" "$f")
	metric "${c#*:}_libc_calls" "$x"
	if [ "$x" = none ]; then
		check pass "overhead.${c#*:}.no-libc" "no libc call (allocation, lock, system call) beside the native client's; $(calls "$f" | grep -c 'libr2cc-shim') shim functions on the path"
	else
		check fail "overhead.${c#*:}.no-libc" "the protected path calls into libc: $x"
	fi
done

# ---- node a alone: the unprotected QP (loopback) --------------------------
BW="$BW_BIN -d rxe0 -g 1 -T"
n2=$(cg native2000 2000) && n4=$(cg native4000 4000) &&
s2=$(cg shim2000 2000 LD_PRELOAD=$SHIM) &&
s4=$(cg shim4000 4000 LD_PRELOAD=$SHIM) || return 0
BW=${BW% -T}
o2=$(cg st.native2000 2000) && o4=$(cg st.native4000 4000) &&
t2=$(cg st.shim2000 2000 LD_PRELOAD=$SHIM) &&
t4=$(cg st.shim4000 4000 LD_PRELOAD=$SHIM) || return 0

native=$(( (n4 - n2) / 2000 ))
shimmed=$(( (s4 - s2) / 2000 ))
added=$(( shimmed - native ))
st_added=$(( (t4 - t2 - o4 + o2) / 2000 ))
line="shim_added_instructions_per_wr=$added native=$native shimmed=$shimmed single_threaded_added=$st_added"
printf '%s\n' "$line" "$pline" > "$LAB/a.bench-overhead.txt"
metric shim_added_instructions_per_wr "$added"
metric native_instructions_per_wr "$native"
metric shimmed_instructions_per_wr "$shimmed"
metric single_threaded_added_per_wr "$st_added"
if [ "$added" -le 100 ] && [ "$added" -ge 0 ]; then
	check pass overhead.instructions "$line (target <= 100); $pline"
else
	check fail overhead.instructions "$line (target <= 100); $pline"
fi

# Nothing the shim does on the data path calls into libc: no allocation,
# no lock, no system call wrapper beyond what the provider itself calls.
calls "$LAB/a.native4000.cg" > "$LAB/a.calls.native"
calls "$LAB/a.shim4000.cg" > "$LAB/a.calls.shim"
extra=$(comm -13 "$LAB/a.calls.native" "$LAB/a.calls.shim" |
	grep -v 'libr2cc-shim\.so\]')
bad=$(grep -E 'libc\.so|ld-linux|libpthread' <<< "$extra" | tr '\n' ' ')
if [ ! -s "$LAB/a.calls.native" ]; then
	check fail overhead.no-libc "callgrind_annotate listed nothing"
elif [ -n "$bad" ]; then
	check fail overhead.no-libc "the shim's data path calls into libc: $bad"
else
	check pass overhead.no-libc "no libc call (allocation, lock, system call) added; $(grep -c 'libr2cc-shim' "$LAB/a.calls.shim") shim functions on the path"
fi

# The same number of system calls per WR with and without the shim.
sc() { # sc N [ENV...]: system calls bench_wr makes in total, the fewer
	# of two runs (a lock the monitor thread holds at that moment, or its
	# join at exit, costs the main thread a futex now and then: not a
	# call per WR, which every run makes)
	local n=$1 i c min=
	shift
	for i in 1 2; do
		# Without -f: the thread that posts and polls, not r2cc's
		# monitor.
		bounded 300 env "$@" strace -c -o "$LAB/a.strace.$n.$#.$i" \
			$BW -n "$n" > /dev/null 2>&1
		c=$(awk '$NF == "total" { print $4 }' "$LAB/a.strace.$n.$#.$i")
		[ -z "$min" ] || [ "${c:-0}" -lt "$min" ] && min=${c:-0}
	done
	echo "$min"
}
if command -v strace > /dev/null; then
	d_native=$(( $(sc 4000) - $(sc 2000) ))
	d_shim=$(( $(sc 4000 LD_PRELOAD=$SHIM) - $(sc 2000 LD_PRELOAD=$SHIM) ))
	metric syscalls_per_2000_wr.native "$d_native"
	metric syscalls_per_2000_wr.shim "$d_shim"
	[ "$d_native" = "$d_shim" ] &&
		check pass overhead.syscalls "$d_native system calls per 2000 WRs either way" ||
		check fail overhead.syscalls "native $d_native, shim $d_shim per 2000 WRs"
fi
