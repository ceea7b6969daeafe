# SPDX-License-Identifier: MIT
# detect: the shim watches every rail while a program runs. Node b runs an
# unmodified program under the shim on rail 1 while rail 0's carrier goes
# down for 3 s and comes back; r2cc's log must show rail 0 down and up
# again (carrier or port event, whichever came first), its statistics one
# down and one up, and the program must be undisturbed; while the rail is
# down, r2cc-ctl shows the program's QP and the rail down (JSON, Prometheus
# text). Prints the time from the fault to its detection.
# lab-timeout: 300

SHIM=$BUILD/shim/libr2cc-shim.so
LOGF=$LAB/b.r2cc.log
ST=$LAB/b.detect.stats
# Long enough to outlive the fault (up about 10 s in, each change a round
# trip to the host): 30000 iterations take 30-60 s under TCG.
PP="ibv_rc_pingpong -d rxe1 -g 1 -n 30000 -s 1024"
if [ "$NODE" = b ]; then
	rm -f "$LOGF"
	(
		sleep 5
		fault_carrier 0 down
		echo "$CARRIER_T" > "$LAB/b.fault.down"
		sleep 1.5
		# While rail 0 is down: what r2cc-ctl shows of the program.
		CTL=$BUILD/tools/r2cc-ctl
		"$CTL" -j conn show > "$LAB/b.ctl.conn.json" 2> "$LAB/b.ctl.err"
		echo "exit $?" >> "$LAB/b.ctl.err"
		"$CTL" metrics > "$LAB/b.ctl.metrics" 2>> "$LAB/b.ctl.err"
		"$CTL" -j events > "$LAB/b.ctl.events.json" 2>> "$LAB/b.ctl.err"
		sleep 1.5
		fault_clear 0
		echo "$CARRIER_T" > "$LAB/b.fault.up"
	) &
	FAULT_PID=$!
fi
pair detect.rail1 ok 200 18515 "$PP" \
	"LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LOGF R2CC_STATS=$ST $PP \$SERVER"
[ "$NODE" = b ] || return 0
wait "$FAULT_PID"
wait_port_active 0 30 || check fail detect.port-back "rxe0 not ACTIVE again"

# at SECONDS of the first "rail 0 ... STATE" line in r2cc's log
detected() {
	sed -n "s/.*rail 0 (rxe0, [a-z0-9]*): $1 (\([a-z ]*\)) at \([0-9.]*\).*/\2 \1/p" \
		"$LOGF" | head -1
}
for st in down up; do
	got=$(detected "$st")
	if [ -n "$got" ] && [ -e "$LAB/b.fault.$st" ]; then
		ms=$(awk -v d="${got%% *}" -v f="$(cat "$LAB/b.fault.$st")" \
			'BEGIN { printf "%d", (d - f) * 1000 }')
		check pass "detect.$st" "by ${got#* } after ${ms} ms"
		metric "detect_${st}_ms" "$ms"
	else
		check fail "detect.$st" "no \`rail 0 ... $st' line in b.r2cc.log"
	fi
done
grep -q '^rail 0 dev=rxe0 .* downs=1 ups=1' "$ST" &&
	check pass detect.stats "$(grep '^rail 0' "$ST")" ||
	check fail detect.stats "$(grep '^rail 0' "$ST" || echo "no stats")"

# What r2cc-ctl showed mid-fault, and that it removes nothing live.
jq -e 'length >= 1 and any(.[]; .dev == "rxe1" and .posted > 0 and
	.comm == "ibv_rc_pingpong")' "$LAB/b.ctl.conn.json" > /dev/null &&
	check pass ctl.conn "$(jq -c '[.[] | {pid, qpn, dev, posted, polled}]' "$LAB/b.ctl.conn.json")" ||
	check fail ctl.conn "$(cat "$LAB/b.ctl.conn.json" "$LAB/b.ctl.err")"
if grep -q '^r2cc_rail_up{pid="[0-9]*",dev="rxe0"} 0$' "$LAB/b.ctl.metrics" &&
	grep -q '^r2cc_rail_down_events_total{pid="[0-9]*",dev="rxe0"} 1$' "$LAB/b.ctl.metrics" &&
	grep -q '^r2cc_wr_posted_total{.*dev="rxe1".*op="send"} [1-9]' "$LAB/b.ctl.metrics"; then
	check pass ctl.metrics "rail rxe0 down, 1 down event, sends counted"
else
	check fail ctl.metrics "see b.ctl.metrics"
fi
jq -e 'any(.[]; .dev == "rxe0" and .state == "down")' \
	"$LAB/b.ctl.events.json" > /dev/null &&
	check pass ctl.events "$(jq -r '.[] | "\(.time) \(.dev) \(.state) (\(.cause))"' "$LAB/b.ctl.events.json" | tr '\n' ';')" ||
	check fail ctl.events "$(cat "$LAB/b.ctl.events.json")"
# The program has exited: its record is gone, r2cc-ctl says so.
"$BUILD/tools/r2cc-ctl" conn show > /dev/null 2>&1
rc=$?
[ $rc -eq 4 ] && check pass ctl.gone "no process running r2cc (exit 4)" ||
	check fail ctl.gone "exit $rc after the program ended"
