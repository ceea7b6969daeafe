# SPDX-License-Identifier: MIT
# scale: a job's shape. Four ranks per node, each its own r2cc-gen
# process: each rank on b (a client) has Q QPs to each of the four ranks
# on a (servers), all of a process's QPs on one CQ, all on rail 0 with
# their standbys on rails 1-3. Once every QP on both nodes is protected,
# b's rail 0 loses its carrier: every QP moves (both nodes), then the
# carrier returns and every QP moves back; the clients then end and
# every byte is verified by every rank (0 mismatches, duplicates,
# losses, order errors, errors). Run with Q = 32 (128 QPs a process,
# 512 a node, 1024 in all) and again with twice that; a native run of the first
# shape (no r2cc) gives the memory a QP takes without protection, and a
# short run with NCCL's queue sizes (8 QPs a peer, each made for 512 send
# WRs and 256 receives), native and protected, gives theirs (METRIC
# scale.nccl[.native].heap_bytes_per_qp, .pinned_bytes_per_qp).
# Prints per run METRIC scale.<run>.qps, .protected (ready, or already
# moved: now and then rxe leaves a QP without an ACK under this load and
# r2cc moves it, .moved_before_fault), .off_rail0 (on a standby after the
# fault), .moved (by the fault), .moved_back, .fault_to_first_moved_ms,
# .fault_to_last_moved_ms (fault -> a QP's first completion on its new
# rail, over both nodes),
# .frames_per_moved_qp (control frames both nodes sent from the fault
# to the last move, per QP moved), .heap_bytes_per_qp and
# .pinned_bytes_per_qp (r2cc-gen's memory line, both nodes' processes),
# .<node>.cpu_s.<thread> (CPU seconds each thread name of a node's ranks
# took from the work's start to every QP moved: r2cc-gen the program's,
# r2cc-* r2cc's), then scale.failover_ratio (2x run over 1x run, fault
# to last moved) and scale.cpu_ratio (the same of .r2cc_cpu_s, the CPU
# seconds of r2cc's threads on both nodes).
# lab-rails: 4
# lab-timeout: 1500

. "$REPO/tests/lab/lib/fo.sh"

RANKS=4
PORT=18700
# Q: R2CC_LAB_SCALE_Q on the host (tests/lab/run; default 32, tests/check
# 16: on a slow machine the 2048-QP run's moves back outlast rxe's retry
# budget, issue 16)
SCALE_Q=${LAB_scale_q:-32}
GEN="$BUILD/tools/r2cc-gen -d $(rail_ibdev 0) -g 1 -s 1024 --window 2 --timeout 20 --stall-limit 60 --peers $RANKS"
GEN_ARGS= # more of r2cc-gen's options for a run (its queue sizes)
# 2048 QPs a node on one emulated CPU: with 32 WRs in flight each, rxe's
# retransmissions collapse the emulated link, and even with 2 (--window
# 2) a QP now and then waits seconds for an ACK (at r2cc's retry count
# of 6 and an ACK timeout of 1 s, the native run fails with retries
# exceeded). An ACK timeout of 4 s (--timeout 20) and a black hole's
# bound (R2CC_DETECT_MS) of 30 s keep emulation stalls from passing for
# a fault; the pulled cable is a carrier event.
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_SECRET_FILE=$SECRET"
R2CC="$R2CC R2CC_CTRL_IF=$(mgmt_dev) R2CC_DETECT_MS=30000"

# stats_sum NAME EXPR: jq EXPR (of one process's figures, e.g.
# .qps_ready) summed over this node's r2cc-gen processes in r2cc-ctl's
# stats (the view kept in $LAB/$NODE.NAME.stats.json).
stats_sum() {
	"$CTL" -j stats show > "$LAB/$NODE.$1.stats.json" 2>&1
	jq "[.[] | select(.comm == \"r2cc-gen\") | $2] | add // 0" \
		"$LAB/$NODE.$1.stats.json" 2>/dev/null || echo 0
}

# until_sum NAME EXPR WANT SECS: poll stats_sum until EXPR reaches WANT
# (at most SECS s). True when it did.
until_sum() {
	local end=$(($(date +%s) + $4))
	while [ "$(date +%s)" -lt $end ]; do
		[ "$(stats_sum "$1" "$2")" -ge "$3" ] && return 0
		nap 0.5
	done
	return 1
}

# thread_cpu NAME: CPU time (clock ticks, user + system) of each thread
# of this node's r2cc-gen processes, by thread name, into
# $LAB/$NODE.NAME.cpu ("NAME TICKS" lines: r2cc-gen is the program's own
# threads, r2cc-* r2cc's).
thread_cpu() {
	local p t
	for p in $(pgrep -x r2cc-gen); do
		for t in /proc/"$p"/task/*; do
			echo "$(cat "$t/comm" 2>/dev/null) $(awk '{ print $14 + $15 }' "$t/stat" 2>/dev/null)"
		done
	done > "$LAB/$NODE.$1.cpu"
}

# cpu_between NAME A B: what each thread name took from snapshot A to B of
# run NAME (seconds, all of this node's ranks), as metrics
# NAME.NODE.cpu_s.THREAD.
cpu_between() {
	awk -v a="$LAB/$NODE.$1.$2.cpu" '
		FILENAME == a { t[$1] -= $2; next } { t[$1] += $2 }
		END { for (n in t) printf "%s %.2f\n", n, t[n] / 100 }' \
		"$LAB/$NODE.$1.$2.cpu" "$LAB/$NODE.$1.$3.cpu" |
		while read -r n s; do metric "$1.$NODE.cpu_s.$n" "$s"; done
}

# net_snap NAME: this node's TCP counters and its sockets (queues, RTO,
# retransmissions), for a control connection that stalls.
net_snap() {
	{
		nstat -asz 2>/dev/null | grep -E '^(Tcp|TcpExt|Ip|Udp)[A-Za-z]* '
		ss -tnoi 2>/dev/null
	} > "$LAB/$NODE.$1.net"
}

# logs NAME: r2cc's logs of both nodes' ranks in run NAME.
logs() { cat "$LAB"/[ab].$1.*.log 2>/dev/null; }

# ranks NAME PROT Q SECS: this node's four ranks of run NAME (PROT: the
# r2cc environment, or empty for a native run), in the background (PIDs
# in RANK_PIDS), the clients once the servers listen; the clients run at
# most SECS s (they end earlier at SIGINT). Protected ranks connect and
# hold their work until SIGUSR1 (r2cc-gen --hold).
ranks() {
	local name=$1 prot=$2 q=$3 t=$4 j env more="${2:+--hold} $GEN_ARGS"
	RANK_PIDS=()
	[ "$NODE" = b ] && barrier "$name.ready" 120
	for ((j = 0; j < RANKS; j++)); do
		env=
		[ -n "$prot" ] && env="$prot R2CC_LOG_FILE=$LAB/$NODE.$name.$j.log"
		if [ "$NODE" = a ]; then
			bounded $((t + 120)) env $env $GEN $more \
				-p $((PORT + j)) -i 10 \
				> "$LAB/a.$name.$j.out" 2>&1 &
		else
			bounded $((t + 60)) env $env $GEN $more \
				-p $PORT -q "$q" -t "$t" \
				--seed $((j + 1)) -i 10 "$(mgmt_ip a)" \
				> "$LAB/b.$name.$j.out" 2>&1 &
		fi
		RANK_PIDS+=($!)
	done
	[ "$NODE" = a ] || return 0
	for ((j = 0; j < RANKS; j++)); do
		wait_listen $((PORT + j)) 60 || log "$name: rank $j not listening"
	done
	barrier "$name.ready" 120
}

# any_alive PID...: one of them still runs.
any_alive() {
	local p
	for p in "$@"; do
		kill -0 "$p" 2>/dev/null && return 0
	done
	return 1
}

# ranks_end NAME: every rank's summary line clean (both nodes; run on b
# once both are done). Prints the failures.
ranks_end() {
	local f line bad=0
	for f in "$LAB"/[ab].$1.[0-9].out; do
		line=$(grep '^r2cc-gen: role=' "$f" | tail -1)
		if ! gen_clean "$line" || [ "$(field "$line" ops)" = 0 ]; then
			bad=$((bad + 1))
			echo "$(basename "$f"): ${line:-no summary line} $(grep -m2 'FAIL' "$f" | cut -c1-160 | tr '\n' ' ')"
		fi
	done
	return $bad
}

# mem_per_qp NAME KEY: KEY of every rank's memory line (both nodes),
# summed, over the QPs.
mem_per_qp() {
	sed -n 's/^r2cc-gen: memory //p' "$LAB"/[ab].$1.[0-9].out |
		tr ' ' '\n' | awk -F= -v k="$2" '
			$1 == "qps" { q += $2 } $1 == k { s += $2 }
			END { if (q) printf "%d", s / q; else print "none" }'
}

# ---- native: the first shape without r2cc: the memory a QP takes ----------
N=scale.native
ranks $N "" "$SCALE_Q" 10
wait "${RANK_PIDS[@]}"
barrier $N.done 300
if [ "$NODE" = b ]; then
	if out=$(ranks_end $N); then
		check pass $N.gen "$((2 * RANKS)) ranks clean"
	else
		check fail $N.gen "$out"
	fi
	metric $N.heap_bytes_per_qp "$(mem_per_qp $N heap_bytes)"
	metric $N.pinned_bytes_per_qp "$(mem_per_qp $N pinned_bytes)"
fi

# node_sum NAME KEY: KEY's metric of run NAME, both nodes summed.
node_sum() {
	sed -n "s/^METRIC $1\.[ab]\.$2 //p" "$LAB"/[ab].results |
		awk '{ s += $1 } END { print s + 0 }'
}

# r2cc_cpu NAME: CPU seconds r2cc's threads of both nodes' ranks took in
# run NAME, from the work's start to every QP moved (cpu_between).
r2cc_cpu() {
	sed -n "s/^METRIC $1\.[ab]\.cpu_s\.r2cc-\([a-z]*\) /\1 /p" "$LAB"/[ab].results |
		awk '$1 != "gen" { s += $2 } END { printf "%.2f\n", s }'
}

# ---- memory of an NCCL-sized QP (512 send WRs, 256 receives) -------------
# mem_run NAME PROT: 8 QPs a peer, 5 s of work (protected: once every QP
# is, then the clients end at SIGINT: their -t counts the hold too),
# every rank clean; the memory a QP took.
mem_run() {
	local name=$1 prot=$2 want=$((RANKS * RANKS * 8))
	ranks "$name" "$prot" 8 "$([ -n "$prot" ] && echo 300 || echo 5)"
	if [ -n "$prot" ]; then
		until_sum "$name.protected" .protected $want 120 ||
			log "$name: only $(stats_sum "$name.protected" .protected) of $want protected"
		metric "$name.$NODE.protected" "$(stats_sum "$name.protected" .protected)"
		barrier "$name.protected" 150
		pkill -USR1 -x r2cc-gen
		[ "$NODE" = b ] && sleep 5 && pkill -INT -x r2cc-gen
	fi
	wait "${RANK_PIDS[@]}"
	barrier "$name.done" 120
	[ "$NODE" = b ] || return 0
	if out=$(ranks_end "$name"); then
		check pass "$name.gen" "$((2 * RANKS)) ranks clean"
	else
		check fail "$name.gen" "$out"
	fi
	if [ -n "$prot" ]; then
		[ "$(node_sum "$name" protected)" -ge $((2 * want)) ] &&
			check pass "$name.protected" "all $((2 * want)) QPs" ||
			check fail "$name.protected" "$(node_sum "$name" protected) of $((2 * want)) QPs"
	fi
	metric "$name.heap_bytes_per_qp" "$(mem_per_qp "$name" heap_bytes)"
	metric "$name.pinned_bytes_per_qp" "$(mem_per_qp "$name" pinned_bytes)"
}
GEN_ARGS="--sq-size 512 --rq-size 256"
mem_run scale.nccl.native ""
mem_run scale.nccl "$R2CC"
GEN_ARGS=

# ---- protected runs: Q and 2Q QPs a peer ---------------------------------
# scale_run NAME Q: the run above, under r2cc, rail 0 pulled on b and back.
scale_run() {
	local name=$1 q=$2 want t0 m0 m1 back i
	local prot='.qps_ready + .qps_migrated'
	want=$((RANKS * RANKS * q))
	ranks "$name" "$R2CC" "$q" 900
	t0=$(date +%s)
	# protected: ready, or already on its standby (a QP rxe left without
	# an ACK under the emulation's load, which r2cc moved)
	if until_sum "$name.protected" "$prot" $want 240; then
		log "$name: $want QPs protected after $(($(date +%s) - t0)) s"
	else
		log "$name: only $(stats_sum "$name.protected" "$prot") of $want protected"
		log "$name: unprotected, by reason: $(jq -r '[.[]
			| select(.comm == "r2cc-gen") | to_entries[]
			| select((.key | startswith("unprotected_")) and .value > 0)]
			| group_by(.key)
			| map("\(.[0].key | ltrimstr("unprotected_")) \(map(.value) | add)")
			| join(", ")' "$LAB/$NODE.$name.protected.stats.json")"
		"$CTL" conn show > "$LAB/$NODE.$name.unprotected.conn" 2>&1
	fi
	metric "$name.$NODE.protected" "$(stats_sum "$name.protected" "$prot")"
	m0=$(stats_sum "$name.protected" .qps_migrated)
	metric "$name.$NODE.moved_before_fault" "$m0"
	stats_sum "$name.before" .ctrl_frames_out > "$LAB/$NODE.$name.frames0"
	barrier "$name.protected" 300
	# the work starts once every QP is protected: under emulation a QP
	# not yet protected may lose its ACKs for its whole retry budget
	thread_cpu "$name.fault"
	net_snap "$name.fault"
	pkill -USR1 -x r2cc-gen
	if [ "$NODE" = b ]; then
		sleep 2
		fault_now "$name" fault_carrier 0 down
	fi
	# every QP off rail 0: on its standby
	until_sum "$name.moved" .qps_migrated $want 300 ||
		log "$name: only $(stats_sum "$name.moved" .qps_migrated) of $want on a standby"
	thread_cpu "$name.moved"
	net_snap "$name.moved"
	cpu_between "$name" fault moved
	stats_sum "$name.after" .ctrl_frames_out > "$LAB/$NODE.$name.frames1"
	m1=$(stats_sum "$name.moved" .qps_migrated)
	metric "$name.$NODE.off_rail0" "$m1"
	metric "$name.$NODE.moved" $((m1 - m0))
	barrier "$name.moved" 320
	[ "$NODE" = b ] && fault_carrier 0 up
	# the fault's moves undone: each QP it moved is back on rail 0
	i=$(($(date +%s) + 300))
	while [ "$(date +%s)" -lt $i ]; do
		back=$(cat "$LAB/$NODE.$name".*.log | grep -c 'moved back to rail 0')
		[ "$back" -ge $((m1 - m0)) ] &&
			[ "$(stats_sum "$name.back" "$prot")" -ge $want ] && break
		nap 0.5
	done
	metric "$name.$NODE.moved_back" "$back"
	net_snap "$name.back"
	barrier "$name.back" 320
	[ "$NODE" = b ] && pkill -INT -x r2cc-gen
	# the clients drain and end; still running after 30 s, what r2cc
	# knows of each QP is kept (a stall's evidence)
	i=$(($(date +%s) + 30))
	while any_alive "${RANK_PIDS[@]}" && [ "$(date +%s)" -lt $i ]; do
		sleep 1
	done
	any_alive "${RANK_PIDS[@]}" &&
		"$CTL" conn show > "$LAB/$NODE.$name.stuck.conn" 2>&1
	wait "${RANK_PIDS[@]}"
	barrier "$name.done" 300
	[ "$NODE" = b ] || return 0
	scale_judge "$name" "$q"
}

# scale_judge NAME Q: both nodes' figures, on b.
scale_judge() {
	local name=$1 q=$2 want out n f0 f1 moved firsts
	want=$((2 * RANKS * RANKS * q))
	metric "$name.qps" $want
	for k in protected moved_before_fault off_rail0 moved moved_back; do
		metric "$name.$k" "$(node_sum "$name" $k)"
	done
	n=$(node_sum "$name" protected)
	[ "$n" -ge $want ] &&
		check pass "$name.protected" "$n of $want QPs" ||
		check fail "$name.protected" "$n of $want QPs: $(logs "$name" | grep -E 'unprotected|refused|cannot|failed' | sed 's/QP 0x[0-9a-f]*/QP/' | sort | uniq -c | sort -rn | head -3 | cut -c1-160 | tr '\n' ' ')"
	n=$(node_sum "$name" off_rail0)
	[ "$n" -ge $want ] &&
		check pass "$name.moved" "$n of $want QPs off rail 0 ($(node_sum "$name" moved) moved by the fault, $(node_sum "$name" moved_before_fault) before it)" ||
		check fail "$name.moved" "$n of $want QPs off rail 0: $(logs "$name" | grep -E 'abandon|unprotected|failed' | sed 's/QP 0x[0-9a-f]*/QP/' | sort | uniq -c | sort -rn | head -3 | cut -c1-160 | tr '\n' ' ')"
	n=$(node_sum "$name" moved_back)
	[ "$n" -ge "$(node_sum "$name" moved)" ] &&
		check pass "$name.back" "$n QPs moved back to rail 0" ||
		check fail "$name.back" "$n of $(node_sum "$name" moved) moved back"
	if out=$(ranks_end "$name"); then
		check pass "$name.gen" "$((2 * RANKS)) ranks clean: $(grep -h '^r2cc-gen: role=client' "$LAB"/b.$name.[0-9].out | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^bytes_verified=/) { split($i, v, "="); s += v[2] } } END { print s + 0 }') bytes verified"
	else
		check fail "$name.gen" "$out"
	fi
	# (a file: the guest has no /dev/fd for a process substitution)
	logs "$name" > "$LAB/all.$name.log"
	life_check "$name" "$LAB/all.$name.log"
	# fault -> each QP's first completion on its new rail (the moves
	# after the fault: the VMs' clocks both follow the host's). A QP
	# moved back says it again for its primary: each (process, QP)
	# counts once, its earliest after the fault.
	firsts=$(logs "$name" | sed -n 's/^r2cc\[\([0-9]*\)\].*QP \(0x[0-9a-f]*\): first completion on the backup [0-9]* us .* at \([0-9.]*\)$/\1.\2 \3/p' |
		awk -v f="$(cat "$LAB/$name.fault" 2>/dev/null || echo 0)" '
			NF == 2 && $2 > f && (!($1 in t) || $2 < t[$1]) { t[$1] = $2 }
			END { for (q in t) printf "%.0f\n", (t[q] - f) * 1000 }')
	metric "$name.fault_to_first_moved_ms" "$(echo "$firsts" | sort -n | sed -n '1p')"
	metric "$name.fault_to_last_moved_ms" "$(echo "$firsts" | sort -n | sed -n '$p')"
	f0=$(($(cat "$LAB/a.$name.frames0") + $(cat "$LAB/b.$name.frames0")))
	f1=$(($(cat "$LAB/a.$name.frames1") + $(cat "$LAB/b.$name.frames1")))
	moved=$(node_sum "$name" moved)
	metric "$name.frames_per_moved_qp" "$(awk -v f=$((f1 - f0)) -v m="$moved" 'BEGIN { if (m) printf "%.3f", f / m; else print "none" }')"
	metric "$name.heap_bytes_per_qp" "$(mem_per_qp "$name" heap_bytes)"
	metric "$name.pinned_bytes_per_qp" "$(mem_per_qp "$name" pinned_bytes)"
}

scale_run scale.x1 "$SCALE_Q"
barrier scale.x1.cleared 120
scale_run scale.x2 $((2 * SCALE_Q))

if [ "$NODE" = b ]; then
	x1=$(sed -n 's/^METRIC scale.x1.fault_to_last_moved_ms //p' "$LAB/b.results")
	x2=$(sed -n 's/^METRIC scale.x2.fault_to_last_moved_ms //p' "$LAB/b.results")
	metric scale.failover_ratio "$(awk -v a="$x1" -v b="$x2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "none" }')"
	# the CPU r2cc's threads took for it, both nodes: on one emulated
	# CPU shared with the busy generators, the time above is mostly
	# their share of it
	x1=$(r2cc_cpu scale.x1)
	x2=$(r2cc_cpu scale.x2)
	metric scale.x1.r2cc_cpu_s "$x1"
	metric scale.x2.r2cc_cpu_s "$x2"
	metric scale.cpu_ratio "$(awk -v a="$x1" -v b="$x2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "none" }')"
fi
