# SPDX-License-Identifier: MIT
# multirail: four rails, faults one after the other. standby: r2cc-gen
# with 8 QPs on rail 0 under r2cc (standbys spread over rails 1-3); node
# b's rail 1 loses its carrier while the QPs run on rail 0: the QPs whose
# standby was there get a new one on rail 2 or 3, bound again with the
# peer (both ends' r2cc-ctl show every QP ready, none on rail 1); then
# rail 0 dies on b: every QP moves to its standby, none to rail 1, every
# byte verified (0 mismatches, duplicates, losses, order errors, errors).
# alldown: every rail of b dies at once: the generator fails (errors
# counted) within its stall bound and 30 s, never hangs.
# Prints per case METRIC multirail.<case>.moves, .errors, .mismatches,
# .losses, .duplicates, and fault -> first completion on the new rail.
# lab-rails: 4
# lab-timeout: 600

. "$REPO/tests/lab/lib/fo.sh"

QPS=8

# mr_ready NAME NOT SECS: this node's r2cc-ctl shows all QPS generator QPs
# ready, none with its standby on rail NOT (polled for SECS s; the last
# view in $LAB/$NODE.NAME.conn.json). True when it did.
mr_ready() {
	local i
	for i in $(seq $(($3 * 4))); do
		"$CTL" -j conn show > "$LAB/$NODE.$1.conn.json" 2>&1
		jq -e --argjson n $QPS --argjson not "$2" '[.[] |
			select(.comm == "r2cc-gen" and .protection == "ready" and
			.backup_rail != $not)] | length == $n' \
			"$LAB/$NODE.$1.conn.json" > /dev/null 2>&1 && return 0
		sleep 0.25
	done
	return 1
}

# mr_figures NAME LOG: the case's figures from the generator's summary
# line (node b) and r2cc's log on this node.
mr_figures() {
	local name=$1 log=$2 line k
	life_check "multirail.$name" "$log"
	metric "multirail.$name.$NODE.moves" "$(grep -c 'moved to backup QP' "$log")"
	metric "multirail.$name.$NODE.fence_to_first_us" "$(sed -n 's/.*first completion on the backup \([0-9]*\) us.*/\1/p' "$log" |
		awk '$1 > m { m = $1 } END { print m + 0 }')"
	# fault (b's clock) -> the slowest QP's first completion on its new
	# rail (this node's; both VMs' clocks follow the host's)
	metric "multirail.$name.$NODE.failover_ms" "$(sed -n 's/.*first completion on the backup .* at \([0-9.]*\)$/\1/p' "$log" |
		awk -v f="$(cat "$LAB/mr.$name.fault" 2>/dev/null || echo 0)" \
			'f > 0 { d = ($1 - f) * 1000; if (d > m) m = d } END { printf "%d", m }')"
	[ "$NODE" = b ] || return 0
	line=$(gen_line "mr.$name")
	for k in mismatches duplicates losses order_errors errors; do
		metric "multirail.$name.$k" "$(field "$line" $k | grep . || echo none)"
	done
	if gen_clean "$line"; then
		check pass "multirail.$name.gen" "ops=$(field "$line" ops) bytes_verified=$(field "$line" bytes_verified) longest_stall_ms=$(field "$line" longest_stall_ms)"
	else
		check fail "multirail.$name.gen" "${line:-no summary line}"
	fi
}

# ---- standby: the standby's rail dies, then the QPs' own -----------------
N=mr.standby
LOG=$LAB/$NODE.$N.log
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LOG"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"
R2CC="$R2CC R2CC_DETECT_MS=2000"
(
	# every QP ready first (standbys spread over rails 1-3), then b's
	# rail 1 down: ready again with none on rail 1 (both ends), then
	# b's rail 0 down
	mr_ready $N.before -1 90 || log "$N: not all ready before the fault"
	cp "$LAB/$NODE.$N.before.conn.json" "$LAB/$NODE.$N.first.conn.json"
	if [ "$NODE" = b ]; then
		sleep 2
		fault_carrier 1 down
		log "$N: rail 1 down"
	fi
	if mr_ready $N.rebound 1 40; then
		check pass "multirail.standby.rebound" "$(jq -c '[.[] | select(.comm == "r2cc-gen") | {qpn, backup_rail}]' "$LAB/$NODE.$N.rebound.conn.json")"
	else
		check fail "multirail.standby.rebound" "$(jq -c '[.[] | select(.comm == "r2cc-gen") | {qpn, protection, backup_rail}]' "$LAB/$NODE.$N.rebound.conn.json" 2>&1 | head -c 400)"
	fi
	if [ "$NODE" = b ]; then
		sleep 2
		date +%s.%N > "$LAB/$N.fault"
		fault_carrier 0 down
		log "$N: rail 0 down"
	fi
) &
CASE_PID=$!
pair $N ok 200 18600 "$R2CC $GEN -q $QPS -i 1" \
	"$R2CC $GEN -q $QPS -t 60 -i 1 \$SERVER"
wait "$CASE_PID"
if [ "$NODE" = b ]; then
	fault_clear 0
	fault_clear 1
	wait_port_active 0 30
	wait_port_active 1 30
fi
# the standbys on rail 1 at first, and where they went
metric "multirail.standby.$NODE.on_rail1_before" "$(jq '[.[] | select(.comm == "r2cc-gen" and .backup_rail == 1)] | length' "$LAB/$NODE.$N.first.conn.json" 2>/dev/null || echo none)"
metric "multirail.standby.$NODE.bound_again" "$(grep -cE 'bound again|this side.s follows' "$LOG")"
moved=$(grep -c 'moved to backup QP' "$LOG")
bad_rail=$(grep 'moved to backup QP' "$LOG" | grep -c '(rail 1)')
if [ "$moved" -ge $QPS ] && [ "$bad_rail" = 0 ]; then
	check pass "multirail.standby.moved" "$moved QPs moved, to rails $(sed -n 's/.*moved to backup QP .* (rail \([0-9]\)).*/\1/p' "$LOG" | sort | uniq -c | tr -s ' \n' ' ')"
else
	check fail "multirail.standby.moved" "$moved moved, $bad_rail to rail 1: $(grep -E 'fenced|unprotected|failed|abandoned' "$LOG" | head -3 | cut -c1-160)"
fi
mr_figures standby "$LOG"
barrier "$N.cleared" 120

# ---- alldown: all four rails die at once on b: no rail is left to that
# peer, so the program sees the native errors, in bounded time ----------
N=mr.alldown
LOG=$LAB/$NODE.$N.log
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LOG"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"
rails_b() {
	local r
	for r in 0 1 2 3; do host_link b $r "$1" & done
	wait
}
[ "$NODE" = b ] && fault_midrun $N rails_b off
pair $N fail $((STALL + 60)) 18600 "$R2CC $GEN -q $QPS -i 1" \
	"$R2CC $GEN -q $QPS -t 60 -i 1 \$SERVER"
if [ "$NODE" = b ]; then
	end=$(date +%s.%N)
	seen=$([ -e "$LAB/$N.fault" ] && echo 1)
	wait "$FAULT_PID"
	judge_fail $N "$end" "$seen"
	rails_b on
	for r in 0 1 2 3; do wait_port_active $r 30; done
fi
life_check multirail.alldown "$LOG"
metric "multirail.alldown.$NODE.moves" "$(grep -c 'moved to backup QP' "$LOG")"
# QPs left with no rail: not moved, a move abandoned, or their backup
# flushed to the program
metric "multirail.alldown.$NODE.native" "$(grep -cE 'is down too: no move|abandoned|no rail left' "$LOG")"
barrier "$N.cleared" 120
