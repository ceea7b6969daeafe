# SPDX-License-Identifier: MIT
# soak: a long run (tests/lab/soak MINUTES; not part of the test command).
# r2cc-gen with 8 QPs runs under r2cc across four rails for the whole
# time, every byte verified, and beside it an Open MPI job (2 ranks,
# tests/progs/mpi_pingpong on rail 0: eager sizes and rendezvous, point
# to point and MPI_Allreduce, every word checked) over libfabric's
# verbs;ofi_rxm, or with R2CC_SOAK_MPI=ucx over UCX (whose QPs share an
# SRQ, which stays on its standby: the next fault on that rail fails the
# job), while node b meets one fault after another: a random kind
# (carrier down, black hole on b's egress, a flap, 30 % loss), on a
# random rail, for 5-15 s, every 20-40 s, each cleared before the next.
# Ends with the totals: faults by kind, QPs moved and moved back (each
# program's), bytes verified, and no mismatch, duplicate, loss, order
# error or error, no stall past the bound (the generator's, the gap
# between the MPI job's progress lines); and each program's memory every
# minute on both nodes, which must not grow past a bound from the second
# minute to the last.
# lab-rails: 4
# lab-timeout: 1500

. "$REPO/tests/lab/lib/fo.sh"
. "$REPO/tests/lab/lib/mpi.sh"

MIN=$(cat "$BUILD/lab/soak.minutes" 2> /dev/null || echo 20)
STACK=$(cat "$BUILD/lab/soak.mpi" 2> /dev/null || echo rxm)
SECS=$((MIN * 60))
QPS=8
STALL=20
# growth of a program's resident memory from its second minute's sample
# to its last that still passes (logs grow to the queues' depth early;
# the first minute's sample may come before the MPI job's buffers exist)
RSS_GROWTH_KB=$((16 * 1024))
LOGF=$LAB/$NODE.soak.log
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LOGF"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev) R2CC_DETECT_MS=2000"
SGEN="$BUILD/tools/r2cc-gen -d $(rail_ibdev 0) -g 1 -p 18600 -s 8192 -q $QPS --timeout 16 --stall-limit $STALL"

# each program's VmRSS (kB) every minute while it runs
(
	for i in $(seq $((MIN + 5))); do
		nap 60
		for p in r2cc-gen mpi_pingpong; do
			pid=$(pgrep -x $p | head -1)
			[ -n "$pid" ] || continue
			awk -v t="$i" '/^VmRSS/ { print t, $2 }' \
				"/proc/$pid/status" >> "$LAB/$NODE.soak.$p.rss" 2> /dev/null
		done
	done
) &
RSS_PID=$!

# each rail's rxe counters every 5 s (retries, sequence errors, RNR: what
# a stall on one path was made of), a wall-clock time before each sample
(
	for i in $(seq $(((MIN + 5) * 12))); do
		nap 5
		date +%T
		rdma statistic show
	done > "$LAB/$NODE.soak.rxe-counters" 2>&1
) &
CNT_PID=$!

# The MPI job over STACK: from 20 s after the generator starts to 100 s
# before it ends (node a launches it; both nodes' r2cc logs in MPI_LOG).
MPI_LOG=$LAB/$NODE.soak.mpi.log
MPI_OUT=$LAB/a.soak.mpi.out
MPI=
if mpi_setup mpi_pingpong; then
	mpi_rank soak.mpi "$MPI_LOG"
	barrier soak.mpi.ready 120 && MPI=1
fi
if [ "$NODE" = a ] && [ -n "$MPI" ]; then
	(
		nap 20
		if [ "$STACK" = ucx ]; then
			set -- "${MPI_UCX[@]}"
		else
			set -- "${MPI_RXM[@]}"
		fi
		mpi_launch soak.mpi $((SECS + 120)) "$MPI_OUT" \
			"-a -t $((SECS - 120)) -s 8,4096,65536,1048576" "$@"
		echo $? > "$LAB/a.soak.mpi.rc"
	) &
	MPI_PID=$!
fi

if [ "$NODE" = b ]; then
	(
		nap 30 # the QPs protected and running
		end=$((SECONDS + SECS - 90))
		while [ $SECONDS -lt $end ]; do
			rail=$((RANDOM % RAILS))
			hold=$((5 + RANDOM % 11))
			case $((RANDOM % 4)) in
			0) kind=carrier; fault_carrier "$rail" down ;;
			1) kind=blackhole; fault_blackhole "$rail" ;;
			2) kind=flap; fault_flap "$rail" "down 1 up 1 down 1 up 0" ;;
			3) kind=loss; fault_loss "$rail" 30 ;;
			esac
			echo "$(date +%s) $kind $rail $hold" >> "$LAB/b.soak.faults"
			log "soak: $kind on rail $rail for ${hold}s"
			nap "$hold"
			fault_clear "$rail"
			wait_port_active "$rail" 30 || log "soak: rail $rail not ACTIVE again"
			nap $((20 + RANDOM % 21))
		done
	) &
	FAULT_PID=$!
fi
pair soak ok $((SECS + 300)) 18600 "$R2CC $SGEN -i 1" \
	"$R2CC $SGEN -t $SECS -i 1 \$SERVER"
[ "$NODE" = b ] && wait "$FAULT_PID"
[ "$NODE" = a ] && [ -n "$MPI" ] && wait "$MPI_PID"
kill "$RSS_PID" "$CNT_PID" 2> /dev/null

# rss_check PROG: PROG's memory from its second minute's sample (its
# first, if it has only one) to its last
rss_check() {
	local f=$LAB/$NODE.soak.$1.rss rss
	rss=$(awk 'NR <= 2 { f = $2 } { l = $2 } END { if (NR) print f, l }' "$f" 2> /dev/null)
	if [ -z "$rss" ]; then
		check fail "soak.$NODE.$1.memory" "no sample"
		return
	fi
	set -- "$1" $rss
	metric "soak.$NODE.$1.rss_start_kb" "$2"
	metric "soak.$NODE.$1.rss_last_kb" "$3"
	[ $(($3 - $2)) -le $RSS_GROWTH_KB ] &&
		check pass "soak.$NODE.$1.memory" "${2} kB at the start, ${3} kB at the last minute ($(wc -l < "$f") samples, one a minute)" ||
		check fail "soak.$NODE.$1.memory" "${2} kB at the start, ${3} kB at the last minute (bound +${RSS_GROWTH_KB} kB)"
}

life_check soak "$LOGF"
moved=$(grep -c 'moved to backup QP' "$LOGF")
back=$(grep -c 'moved back to' "$LOGF")
metric "soak.$NODE.moves" "$moved"
metric "soak.$NODE.moves_back" "$back"
rss_check r2cc-gen
if [ -n "$MPI" ]; then
	life_check soak.mpi "$MPI_LOG"
	metric "soak.$NODE.mpi.moves" "$(grep -c 'moved to backup QP' "$MPI_LOG")"
	metric "soak.$NODE.mpi.moves_back" "$(grep -c 'moved back to' "$MPI_LOG")"
	rss_check mpi_pingpong
fi
if [ "$NODE" = a ] && [ -n "$MPI" ]; then
	line=$(grep '^mpi_pingpong: ranks=' "$MPI_OUT")
	# the longest time between progress lines (one every 2 s), seconds
	gap=$(sed -n 's/^mpi_pingpong: progress .* t=\([0-9.]*\) .*/\1/p' "$MPI_OUT" |
		awk 'NR > 1 && $1 - p > g { g = $1 - p } { p = $1 } END { printf "%d", g }')
	metric soak.mpi.longest_gap_s "${gap:-none}"
	if [ "$(cat "$LAB/a.soak.mpi.rc" 2> /dev/null)" = 0 ] &&
		[[ $line == *" errors=0" ]] && [ -n "$gap" ] && [ "$gap" -le $STALL ]; then
		check pass soak.mpi "$STACK: $line; longest gap between progress lines ${gap} s"
		metric soak.mpi.bytes_verified "$(field "$line" bytes)"
	else
		check fail soak.mpi "$STACK: exit $(cat "$LAB/a.soak.mpi.rc" 2> /dev/null), longest gap ${gap:-none} s: ${line:-no summary} $(grep -m2 -iE 'assert|error|abort' "$MPI_OUT" | cut -c1-200 | tr '\n' ' ')"
	fi
fi
if [ "$NODE" = b ]; then
	for k in carrier blackhole flap loss; do
		metric "soak.faults.$k" "$(grep -c " $k " "$LAB/b.soak.faults" 2> /dev/null)"
	done
	metric soak.faults "$(wc -l < "$LAB/b.soak.faults" 2> /dev/null)"
	line=$(record soak)
	if gen_clean "$line" && [ "$(field "$line" longest_stall_ms)" -le $((STALL * 1000)) ]; then
		check pass soak.gen "$(wc -l < "$LAB/b.soak.faults") faults in ${MIN} min; $moved moves, $back moves back here; ops=$(field "$line" ops) bytes_verified=$(field "$line" bytes_verified) longest_stall_ms=$(field "$line" longest_stall_ms)"
	else
		check fail soak.gen "${line:-no summary line}"
	fi
fi
barrier soak.end 120
