# SPDX-License-Identifier: MIT
# compat: unmodified verbs programs across the nodes, each run once without
# and once with LD_PRELOAD=libr2cc-shim.so. A case passes when both runs
# succeed with the same functional result and r2cc's statistics file shows
# that it saw the traffic.
# lab-timeout: 2100

SHIM=$BUILD/shim/libr2cc-shim.so
[ -e "$SHIM" ] || { check fail shim.built "no $SHIM: build first"; return 0; }

# stat_sum FILE FIELD: FIELD summed over the file's qp lines.
stat_sum() {
	awk -v f="$2" '$1 == "qp" { for (i = 2; i <= NF; i++) {
		split($i, kv, "="); if (kv[1] == f) s += kv[2] } }
		END { print s + 0 }' "$1" 2>/dev/null
}

# result FILE: the lines that carry a program's functional result (for MPI
# the summary, not the per-rank lines, whose order varies).
result() {
	grep -E '^ *[0-9]+ +[0-9]+ +[0-9.]+|bytes in|iters in|verbs_loader:|mpi_allreduce: ranks=' "$1" |
		sed -E 's/[0-9]+\.[0-9]+//g' | tr -s ' \t' ' ' | head -3
}

# compat NAME PORT SERVER_CMD CLIENT_CMD SIDE FIELD MIN
# SIDE (a server, b client) must show FIELD >= MIN in r2cc's stats.
compat() {
	local name=$1 port=$2 srv=$3 cli=$4 side=$5 field=$6 min=$7
	local st=$LAB/$NODE.$name.stats got
	pair "$name.native" ok 150 "$port" "$srv" "$cli"
	rm -f "$st"
	pair "$name.r2cc" ok 150 "$port" \
		"LD_PRELOAD=$SHIM R2CC_STATS=$st $srv" \
		"LD_PRELOAD=$SHIM R2CC_STATS=$st $cli"
	[ "$NODE" = "$side" ] || return 0
	got=$(stat_sum "$st" "$field")
	[ "${got:-0}" -ge "$min" ] &&
		check pass "$name.stats" "$field=$got" ||
		check fail "$name.stats" "$field=${got:-none}, want >= $min (see $(basename "$st"))"
	# Every PD and MR is mirrored on the other rail, none failed.
	if [ "$RAILS" -gt 1 ]; then
		mirror=$(grep '^mirror ' "$st")
		case "$mirror" in
		*" mrs=0 "*|"") check fail "$name.mirror" "no shadow MR: ${mirror:-no stats}";;
		*" failed=0") check pass "$name.mirror" "${mirror#mirror }";;
		*) check fail "$name.mirror" "$mirror";;
		esac
	fi
	if [ "$(result "$LAB/$NODE.$name.native.out")" = "$(result "$LAB/$NODE.$name.r2cc.out")" ]; then
		check pass "$name.same-result"
	else
		check fail "$name.same-result" "outputs differ (see $NODE.$name.*.out)"
	fi
}

G="-d rxe0 -g 1"
N=200
compat rc_pingpong 18515 "ibv_rc_pingpong $G -n $N" \
	"ibv_rc_pingpong $G -n $N \$SERVER" b send $N
compat rc_pingpong_events 18515 "ibv_rc_pingpong $G -e -n $N" \
	"ibv_rc_pingpong $G -e -n $N \$SERVER" b send $N
compat rc_pingpong_newsend 18515 "ibv_rc_pingpong $G -N -n $N" \
	"ibv_rc_pingpong $G -N -n $N \$SERVER" b send $N
compat uc_pingpong 18515 "ibv_uc_pingpong $G -n $N" \
	"ibv_uc_pingpong $G -n $N \$SERVER" b send $N
compat ud_pingpong 18515 "ibv_ud_pingpong $G -n $N -s 1024" \
	"ibv_ud_pingpong $G -n $N -s 1024 \$SERVER" b send $N
compat srq_pingpong 18515 "ibv_srq_pingpong $G -n $N" \
	"ibv_srq_pingpong $G -n $N \$SERVER" b send $N

# perftest, with -F: under TCG its clock calibration fails now and then,
# which has nothing to do with RDMA; -F makes that a report of 0 rather
# than an exit of one end before the final exchange.
P="-F -d rxe0 -x 1 -n $N"
for api in "" "--use_old_post_send"; do
	sfx=${api:+_oldapi}
	for t in write:write read:read send:send atomic:atomic; do
		prog=ib_${t%%:*}_bw
		compat "$prog$sfx" 18515 "$prog $P $api" \
			"$prog $P $api \$SERVER" b "${t#*:}" $N
	done
done
compat ib_write_lat 18515 "ib_write_lat $P" \
	"ib_write_lat $P \$SERVER" b write $N

# Like NCCL: libibverbs reached only through dlopen() and dlvsym().
VL="$BUILD/tests/progs/verbs_loader -d rxe0 -g 1 -p 18520 -n $N"
compat verbs_loader 18520 "$VL" "$VL \$SERVER" b write $N

# librdmacm: rping over rail 0's address (RDMA CM, not TCP).
compat rping - "rping -s -a $(rail_ip a 0) -C 100 -V" \
	"rping -c -a $(rail_ip a 0) -C 100 -V" b send 100

# Misuse: bad arguments, busy objects, invalid transitions return the same
# values and errno with the shim as without (node a alone).
if [ "$NODE" = a ]; then
	m=$BUILD/tests/progs/verbs_misuse
	bounded 60 "$m" rxe0 > "$LAB/a.misuse.native.out" 2>&1
	rc1=$?
	LD_PRELOAD=$SHIM R2CC_STATS=$LAB/a.misuse.stats bounded 60 "$m" rxe0 \
		> "$LAB/a.misuse.r2cc.out" 2>&1
	rc2=$?
	n=$(grep -c . "$LAB/a.misuse.native.out")
	if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$n" -gt 20 ] &&
		cmp -s "$LAB/a.misuse.native.out" "$LAB/a.misuse.r2cc.out"; then
		check pass misuse.same "$n calls, identical results"
	else
		check fail misuse.same "exit $rc1/$rc2, $n lines (diff a.misuse.*.out)"
	fi
fi
barrier misuse.done 120

# Open MPI (tests/lab/lib/mpi.sh): the same 2-rank job over verbs without
# and with the shim in every rank, then over TCP as the control that shows
# the rxe counters measure the job. -x hands the shim to the ranks only.
. "$REPO/tests/lab/lib/mpi.sh"
mpi_setup || return 0
mpi_job mpi.native "${MPI_UCX[@]}" || return 0
mpi_check_verbs mpi.native
rm -f "$LAB"/mpi.r2cc.*.stats
mpi_job mpi.r2cc "${MPI_UCX[@]}" -x LD_PRELOAD="$SHIM" \
	-x R2CC_STATS="$LAB/mpi.r2cc.%h.%p.stats" || return 0
mpi_check_verbs mpi.r2cc
if [ "$NODE" = a ]; then
	if [ "$(result "$LAB/a.mpi.mpi.native.out")" = "$(result "$LAB/a.mpi.mpi.r2cc.out")" ]; then
		check pass mpi.same-result
	else
		check fail mpi.same-result "outputs differ (see a.mpi.mpi.*.out)"
	fi
	# Each rank's shim saw its RDMA traffic: one stats file per rank.
	n=0
	for f in "$LAB"/mpi.r2cc.*.stats; do
		[ -e "$f" ] || continue
		w=$(($(stat_sum "$f" write) + $(stat_sum "$f" send)))
		[ "$w" -gt 0 ] && n=$((n + 1))
		metric "mpi.r2cc.$(basename "$f" .stats).write+send" "$w"
	done
	[ $n -eq 2 ] && check pass mpi.stats "both ranks' shims counted their WRs" ||
		check fail mpi.stats "$n of 2 ranks have stats with traffic"
fi
mpi_job mpi.tcp --mca pml ob1 --mca btl self,tcp || return 0
sent=$(mpi_delta mpi.tcp.before mpi.tcp.after rxe0.sent_pkts)
[ "$sent" -lt 100 ] && check pass "mpi.tcp.rxe0-idle.$NODE" "$sent" ||
	check fail "mpi.tcp.rxe0-idle.$NODE" "$sent packets on rxe0 over TCP"
