# SPDX-License-Identifier: MIT
# demo: what tools/demo shows — the failover demo. r2cc-gen (every byte
# verified) runs across the two lab nodes on rail 0 under libr2cc-shim.so;
# rail 0's cable is pulled mid-run on node b and plugged back in later. The
# job finishes, and an operator sees what happened: r2cc's log (fence,
# replay, first completion on the backup, the move back to rail 0 once it
# has been up for the hold), r2cc-ctl's view of the
# connections, and a per-second throughput timeline per rail from the
# devices' own counters. Then the same fault without r2cc: the job dies.
# (Not part of the test suite: the failover scenario checks all of it.)
# lab-timeout: 500

. "$REPO/tests/lab/lib/gen.sh"
SHIM=$LAB_SHIM
CTL=$LAB_CTL
SECRET=/tmp/r2cc.secret
printf 'r2cc-lab-job-secret-%044d' 7 > "$SECRET"
chmod 600 "$SECRET"
STALL=10
GEN="$LAB_GEN -d $(rail_ibdev 0) -g 1 -p 18600 -s 8192 --stall-limit $STALL"
LOGF=$LAB/$NODE.demo.r2cc.log
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LOGF"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"

if [ "$NODE" = b ]; then
	"$CTL" watch -i 1 -n 40 > "$LAB/b.timeline" 2>&1 &
	WATCH_PID=$!
	(
		sleep 10
		log "demo: pulling rail 0's cable on node b"
		fault_carrier 0 down
		sleep 2
		"$CTL" conn show > "$LAB/b.demo.conn" 2>&1
		sleep 10
		log "demo: rail 0 back"
		fault_clear 0
	) &
	FAULT_PID=$!
fi
pair demo.with-r2cc ok 150 18600 "$R2CC $GEN -i 5" "$R2CC $GEN -t 35 -i 5 \$SERVER"
if [ "$NODE" = a ]; then
	pair demo.without-r2cc fail 120 18600 "$GEN" "$GEN"
else
	wait "$FAULT_PID"
	wait "$WATCH_PID"
	wait_port_active 0 30
	# What an operator sees, printed by `tests/lab/run -s` (tools/demo)
	# right after the job's own output.
	{
	echo "== the job under r2cc (node b), its shim: $(LD_PRELOAD=$SHIM \
		grep -m1 -o '/[^ ]*libr2cc-shim\.so' /proc/self/maps)"
	grep '^r2cc-gen: role=client' "$LAB/b.demo.with-r2cc.out"
	echo
	echo "== what r2cc did (node b's log):"
	grep -E 'down \(|up \(|fenced|moved|moving back|re-posted|first completion|protected again' \
		"$LOGF" | sed 's/^r2cc\[[0-9]*\]: [0-9:.]* //'
	echo
	echo "== r2cc-ctl conn show, 2 s after the fault:"
	cat "$LAB/b.demo.conn"
	echo
	echo "== throughput per rail, one line per rail per second (r2cc-ctl watch):"
	cat "$LAB/b.timeline"
	} > "$LAB/b.demo.with-r2cc.what-happened.out"
	echo "== the same fault without r2cc:"
	fault_midrun demo.without-r2cc fault_carrier 0 down
	pair demo.without-r2cc fail 120 18600 "$GEN" "$GEN -t 60 -i 1 \$SERVER"
	wait "$FAULT_PID"
	grep -E '^r2cc-gen: (role=client|client: FAILED)' \
		"$LAB/b.demo.without-r2cc.out"
	fault_clear 0
fi
