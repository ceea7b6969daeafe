# SPDX-License-Identifier: MIT
# failover: r2cc protects the program's RC connections and moves them to a
# backup rail when their rail dies (DESIGN §4-6). Binding: under the shim,
# with a job secret on both nodes, every RC QP an unmodified program
# connects on rail 0 gets a backup QP on rail 1 bound to the peer's
# (r2cc-ctl shows it "ready") with a retry count and ACK timeout for its
# failover; one whose peer runs no r2cc, or without a secret, runs
# unprotected and unharmed, with the program's own. Failover: r2cc-gen
# verifies every byte across carrier down, black hole, one-sided cut,
# flap and 30% loss (0 mismatches, duplicates, losses, order errors,
# errors), r2cc-ctl shows the QPs migrated; QPs on
# an SRQ (r2cc-gen --srq) move with it, its receives once; once a
# failed rail is back for the hold, the QPs move back to it and are
# protected again (the per-rail timeline shows the traffic return), and
# when the backup's rail dies while the QPs run on it and theirs is back,
# they move back at once; after a black hole (no event) they move back
# once a probe of the path gets through; with R2CC_KEEPALIVE, idle QPs
# leave a black hole before they send into it; lazy backups
# (R2CC_BACKUP=lazy) are made at the failover; both rails down fails the
# program in bounded time; ibv_rc_pingpong,
# ibv_srq_pingpong and perftest's
# ib_write_bw, ib_send_bw and ib_read_bw finish across a rail kill, and so
# does an Open MPI job over libfabric's verbs;ofi_rxm (checked messages); the
# same fault without r2cc kills the generator and ib_write_bw. Prints fault
# -> first backup completion, WRs replayed and bytes re-sent per node, and
# the generator's longest stall.
# lab-timeout: 1500

SHIM=$BUILD/shim/libr2cc-shim.so
CTL=$BUILD/tools/r2cc-ctl
SECRET=/tmp/r2cc.secret
# Every node holds the same job secret, readable by its owner only.
printf 'r2cc-lab-job-secret-%044d' 7 > "$SECRET"
chmod 600 "$SECRET"
PP="ibv_rc_pingpong -d $(rail_ibdev 0) -g 1 -n 20000 -s 1024"
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=debug R2CC_LOG_FILE=$LAB/$NODE.fo.bind.log"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"

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
			sleep 0.5
		done
	) &
	CTL_PID=$!
}

ctl_wait fo.bind ready
pair fo.bind ok 200 18515 "$R2CC $PP" "$R2CC $PP \$SERVER"
wait "$CTL_PID"
if jq -e 'any(.[]; .dev == "rxe0" and .protection == "ready" and
	.backup_rail == 1 and .backup_qpn > 0)' "$LAB/$NODE.fo.bind.conn.json" \
	> /dev/null; then
	check pass fo.bind.ctl "$(jq -c '[.[] | {qpn, dev, protection, backup_rail, backup_qpn}]' "$LAB/$NODE.fo.bind.conn.json")"
else
	check fail fo.bind.ctl "$(head -c 600 "$LAB/$NODE.fo.bind.conn.json")"
fi
grep -q '^r2cc_qp_protected{.*dev="rxe0".*} 1$' "$LAB/$NODE.fo.bind.metrics" &&
	check pass fo.bind.metrics "r2cc_qp_protected 1" ||
	check fail fo.bind.metrics "see $NODE.fo.bind.metrics"
grep -q 'protected: backup QP' "$LAB/$NODE.fo.bind.log" &&
	check pass fo.bind.log "$(grep -m1 'protected: backup QP' "$LAB/$NODE.fo.bind.log" | cut -c1-160)" ||
	check fail fo.bind.log "$(grep -E 'unprotected|control|secret' "$LAB/$NODE.fo.bind.log" | head -3)"

grep -q 'for its failover' "$LAB/$NODE.fo.bind.log" &&
	check pass fo.bind.timeout "$(grep -m1 'for its failover' "$LAB/$NODE.fo.bind.log" | sed 's/.*QP/QP/')" ||
	check fail fo.bind.timeout "no retry count and ACK timeout set for its failover"

# The peer runs no r2cc (b's program without the shim): a's QP runs
# unprotected, said once, and keeps the retry count and ACK timeout its
# program set: r2cc shortens them only for a QP it can fail over.
R2C1="LD_PRELOAD=$SHIM R2CC_LOG=debug R2CC_LOG_FILE=$LAB/$NODE.fo.oneside.log"
R2C1="$R2C1 R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"
pair fo.oneside ok 200 18517 "$R2C1 ${PP/-n 20000/-n 200 -p 18517}" \
	"${PP/-n 20000/-n 200 -p 18517} \$SERVER"
if [ "$NODE" = a ]; then
	log=$LAB/a.fo.oneside.log
	if grep -q 'unprotected: the peer runs no r2cc' "$log" &&
		! grep -q 'for its failover' "$log"; then
		check pass fo.oneside.timeout "unprotected, its timeout left as set: $(grep -m1 'unprotected' "$log" | sed 's/.*QP/QP/' | cut -c1-120)"
	else
		check fail fo.oneside.timeout "$(grep -E 'unprotected|for its failover|not known' "$log" | head -3 | cut -c1-200)"
	fi
fi

# No secret: no control channel; the program is unaffected.
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LAB/$NODE.fo.nokey.log"
pair fo.nokey ok 200 18516 "$R2CC ${PP/-n 20000/-n 200 -p 18516}" \
	"$R2CC ${PP/-n 20000/-n 200 -p 18516} \$SERVER"
grep -q 'no R2CC_SECRET_FILE' "$LAB/$NODE.fo.nokey.log" &&
	check pass fo.nokey.log "unprotected, said once" ||
	check fail fo.nokey.log "$(head -5 "$LAB/$NODE.fo.nokey.log")"

# gen_fo NAME FAULT_NODE FAULT...: r2cc-gen under r2cc on rail 0, the
# fault applied mid-run on FAULT_NODE; every byte must verify, nothing may
# be lost or duplicated, and the program must see no error. Prints what
# r2cc did: failover latency (fault -> first completion on the backup),
# WRs replayed, bytes re-sent.
gen_fo() {
	local name=$1 fnode=$2 line k bad=0 log
	shift 2
	log=$LAB/$NODE.$name.log
	R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$log"
	R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"
	R2CC="$R2CC R2CC_DETECT_MS=2000${FO_ENV:+ $FO_ENV}"
	[ "$NODE" = "$fnode" ] && fault_midrun "$name" "$@"
	ctl_wait "$name" migrated
	pair "$name" ok 150 18600 "$R2CC $GEN${GEN_X:+ $GEN_X} -i 1" \
		"$R2CC $GEN${GEN_X:+ $GEN_X} -t ${GEN_T:-30} -i 1 \$SERVER"
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
		for k in mismatches duplicates losses order_errors errors; do
			[ "$(field "$line" $k)" = 0 ] || bad=1
		done
		if [ -n "$line" ] && [ $bad = 0 ]; then
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
	if grep -q 'moved to backup QP' "$log"; then
		check pass "$name.moved" "$(grep -c 'moved to backup QP' "$log") QPs; $(grep -m1 'moved to backup QP' "$log" | sed 's/.*: \([0-9]* WRs replayed.*\)/\1/')"
		metric "$name.$NODE.wrs_replayed" "$(sed -n 's/.*: \([0-9]*\) WRs replayed.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')"
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

STALL=10
# --timeout 16 (268 ms, 7 tries: about 2 s) and R2CC_DETECT_MS=2000 (which
# keeps it: r2cc lowers a QP's timeout to fit its detection bound, 500 ms
# and 67 ms by default), as in ctl: with 67 ms, rail 0 silent for half a
# second at the start of a case that follows a fault (fo.blackhole,
# fo.cut, fo.idlehole: no fault applied yet) failed QPs still binding,
# unprotected; a black hole still shows well within the stall limit.
GEN="$BUILD/tools/r2cc-gen -d $(rail_ibdev 0) -g 1 -p 18600 -s 8192 --timeout 16 --stall-limit $STALL"
# Carrier down on node b's rail 0 (port event there; a learns from b).
gen_fo fo.carrier b fault_carrier 0 down
[ "$NODE" = b ] && { fault_clear 0; wait_port_active 0 30; }
barrier fo.carrier.cleared 60

# A QP r2cc cannot move beside those it can, on the same device context (a
# UD QP: r2cc-gen --ud): the port's events are the program's again (b's
# generator hears rail 0's port error), and the RC QPs still fail over
# with every byte verified.
FO_ASYNC="port error" GEN_X=--ud gen_fo fo.mixed b fault_carrier 0 down
[ "$NODE" = b ] && { fault_clear 0; wait_port_active 0 30; }
barrier fo.mixed.cleared 60

# Black hole on node a's egress (no event anywhere): b's requests time out
# (protected QPs retry 6 times, not rxe's endless 7), a's replies too.
gen_fo fo.blackhole a fault_blackhole 0
[ "$NODE" = a ] && fault_clear 0
barrier fo.blackhole.cleared 60

# One-sided cut, seen only by the receiving side: QEMU drops node a's
# rail-0 link (a's carrier, fo.carrier on the other node); a runs the
# generator's server, which the client's WRs target; the client on b
# sees a black hole and learns of it from a.
gen_fo fo.cut a fault_carrier 0 down
[ "$NODE" = a ] && { fault_clear 0; wait_port_active 0 30; }
barrier fo.cut.cleared 60

# Flap on node b: down, up, down — one failover, no storm, no error.
gen_fo fo.flap b fault_flap 0 "down 1 up 1 down 0"
[ "$NODE" = b ] && { sleep 3; fault_clear 0; wait_port_active 0 30; }
barrier fo.flap.cleared 60

# QPs on an SRQ (each side's 4 QPs share one, as UCX's rc_verbs does):
# the SRQ moves with its QPs. Carrier down on b (b's QPs fenced by the
# event, a's by b's word), then a black hole on a's egress (every QP
# fenced by its own CQ error, or by its SRQ's move); every byte verified.
GEN_X=--srq gen_fo fo.srq b fault_carrier 0 down
[ "$NODE" = b ] && { fault_clear 0; wait_port_active 0 30; }
barrier fo.srq.cleared 60
GEN_X=--srq gen_fo fo.srqhole a fault_blackhole 0
[ "$NODE" = a ] && fault_clear 0
barrier fo.srqhole.cleared 60
for c in fo.srq fo.srqhole; do
	log=$LAB/$NODE.$c.log
	grep -q 'SRQ: .* receives re-posted' "$log" &&
		check pass "$c.srq" "$(grep -m1 'SRQ: .* receives re-posted' "$log" | sed 's/.*SRQ: //')" ||
		check fail "$c.srq" "$(grep -E 'SRQ|unprotected|abandon' "$log" | head -3)"
done

# Primary restored: b's rail 0 down for 6 s, then back. Once it has been
# up for the hold (3 s here), both ends move every QP back to rail 0 (the
# same exactly-once move, backup fenced), re-arm the backups, and a second
# carrier loss 14 s later fails them over again. The per-rail timeline
# (r2cc-ctl watch, the devices' own counters) shows rail 0's traffic
# leave, come back, and leave again.
[ "$NODE" = b ] && { "$CTL" watch -i 1 -n 45 > "$LAB/b.fo.failback.timeline" 2>&1 & WATCH_PID=$!; }
FO_ENV="R2CC_FAILBACK_HOLD_MS=3000" GEN_T=40 \
	gen_fo fo.failback b fault_flap 0 "down 6 up 14 down 0"
log=$LAB/$NODE.fo.failback.log
n=$(grep -c 'moved back to rail 0' "$log")
armed=$(grep -c 'protected again' "$log")
moved=$(grep -c 'moved to backup QP' "$log")
if [ "$n" -gt 0 ] && [ "$armed" = "$n" ] && [ "$moved" -ge $((2 * n)) ]; then
	check pass fo.failback.moves "$n QPs moved back and re-armed, $moved moves to the backup; $(grep -m1 'moved back to rail 0' "$log" | sed 's/.*: \([0-9]* WRs replayed.*\)/\1/')"
	metric "fo.failback.$NODE.qps_moved_back" "$n"
	metric "fo.failback.$NODE.failback_wrs_replayed" "$(sed -n 's/.*moved back to rail 0: \([0-9]*\) WRs replayed.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')"
	metric "fo.failback.$NODE.failback_fence_to_moved_us" "$(sed -n 's/.*moved back to rail 0: .*, \([0-9]*\) us after the fence/\1/p' "$log" | sort -n | tail -1)"
else
	check fail fo.failback.moves "moved back $n, re-armed $armed, failovers $moved: $(grep -E 'back|abandon|re-arm|unprotected' "$log" | head -3)"
fi
if [ "$NODE" = b ]; then
	fault_clear 0
	wait_port_active 0 30
	wait "$WATCH_PID"
	# rail 0 carries traffic, then none, then again, then none
	phases=$(awk '$2 == "rxe0" { for (i = 3; i <= NF; i++)
		if ($i ~ /^roce_txpps=/) { split($i, v, "="); busy = v[2] > 200 }
		if (busy != last) { s = s (busy ? "T" : "0"); last = busy } }
		END { print s }' last=x "$LAB/b.fo.failback.timeline")
	# Throughput on the backup against the primary, side by side in
	# one run: the mean RoCE packets/s of each rail's busy seconds.
	metric fo.failback.backup_over_primary_pps "$(awk '
		{ for (i = 3; i <= NF; i++) if ($i ~ /^roce_txpps=/) {
			split($i, v, "="); if (v[2] > 200) { s[$2] += v[2]; n[$2]++ } } }
		END { if (n["rxe0"] && n["rxe1"])
			printf "%.2f", (s["rxe1"] / n["rxe1"]) / (s["rxe0"] / n["rxe0"]) }' \
		"$LAB/b.fo.failback.timeline")"
	case $phases in
	*T0T0*) check pass fo.failback.timeline "rail 0 busy/idle phases: $phases" ;;
	*) check fail fo.failback.timeline "rail 0 busy/idle phases: ${phases:-none} (see b.fo.failback.timeline)" ;;
	esac
fi
barrier fo.failback.cleared 60

# Lazy backups (R2CC_BACKUP=lazy, both ends): the QPs are protected with
# no backup QP; at b's carrier loss each end makes its backup on rail 1,
# the FAILOVER exchange connects the two (each replays once the peer says
# its backup is connected to ours) and the move is the same exactly-once
# one. Every byte verified. (The move back of a lazy QP - its backup
# parked in RESET, taken out at the next failover - is unit-tested:
# test_failover.c; the flap that would show it here is fo.failback's.)
FO_ENV="R2CC_BACKUP=lazy" gen_fo fo.lazy b fault_carrier 0 down
log=$LAB/$NODE.fo.lazy.log
lazy=$(grep -c 'protected (lazy)' "$log")
made=$(grep -c 'backup QP .* made on rail 1 (lazy)' "$log")
moved=$(grep -c 'moved to backup QP' "$log")
if [ "$lazy" -gt 0 ] && [ "$made" = "$lazy" ] && [ "$moved" = "$lazy" ] &&
	! grep -q 'protected: backup QP' "$log"; then
	check pass fo.lazy.moves "$lazy QPs protected with no backup QP, $made backups made at the failover, $moved moved"
else
	check fail fo.lazy.moves "lazy $lazy, backups made $made, moved $moved: $(grep -E 'lazy|abandon|unprotected|not connected|protected:' "$log" | head -3 | cut -c1-200)"
fi
[ "$NODE" = b ] && { fault_clear 0; wait_port_active 0 30; }
barrier fo.lazy.cleared 60

# A black hole on a's rail 0 for 8 s, then gone: no event anywhere says
# it is over. From the hold (3 s) after the failover on, each side probes
# the path (a TCP handshake from its rail-0 address to the peer's), again
# after 3 s, 6 s... while it stays dark; once 8 in a row get through
# cleanly (1 s apart), the QPs move back to rail 0 (a side that proposes
# on its own probes says so; the other follows); every byte verified.
hole_for() {
	fault_blackhole 0
	sleep 8
	fault_clear 0
}
FO_ENV="R2CC_FAILBACK_HOLD_MS=3000" GEN_T=40 gen_fo fo.holeback a hole_for
log=$LAB/$NODE.fo.holeback.log
n=$(grep -c 'moved back to rail 0' "$log")
# either side's probes (the other follows its proposal)
probed=$(cat "$LAB"/[ab].fo.holeback.log | grep -c 'gets through again (probe)')
if [ "$n" -gt 0 ] && [ "$probed" -gt 0 ]; then
	check pass fo.holeback.moves "$n QPs moved back, $probed on a probe's word; $(cat "$LAB"/[ab].fo.holeback.log | grep -m1 'gets through again' | sed 's/.*QP/QP/')"
else
	check fail fo.holeback.moves "moved back $n, probes through $probed: $(grep -E 'probe|back|abandon' "$log" | head -3)"
fi
[ "$NODE" = a ] && fault_clear 0
barrier fo.holeback.cleared 60

# Keepalive (R2CC_KEEPALIVE_MS=500): the generator goes idle 6 s into the
# run for 24 s; 4 s into the pause (the idle path's probes got through by
# then) a black hole on a's rail 0. Nothing in flight would find it before
# the traffic resumes; the keepalive does: 3 probes in a row unanswered,
# nothing completed meanwhile, the idle QPs fail over (reason keepalive,
# the peer follows) with no WR to replay, and the traffic resumes on
# rail 1; every byte verified.
FAULT_AT='^r2cc-gen: paused' FAULT_DELAY=4 \
	FO_ENV="R2CC_KEEPALIVE=1 R2CC_KEEPALIVE_MS=500" \
	GEN_X="--pause-at 6 --pause-for 24" GEN_T=40 \
	gen_fo fo.idlehole a fault_blackhole 0
if [ "$NODE" = b ]; then
	ka=$(cat "$LAB"/[ab].fo.idlehole.log | grep -c 'fenced (keepalive)')
	replayed=$(cat "$LAB"/[ab].fo.idlehole.log |
		sed -n 's/.*: \([0-9]*\) WRs replayed.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
	# fault -> the first keepalive verdict (either side's)
	metric fo.idlehole.keepalive_ms "$(cat "$LAB"/[ab].fo.idlehole.log |
		sed -n 's/.*QPs fail over, at \([0-9.]*\)$/\1/p' |
		awk -v f="$(cat "$LAB/fo.idlehole.fault" 2>/dev/null || echo 0)" \
			'f > 0 && (m == "" || ($1 - f) * 1000 < m) { m = ($1 - f) * 1000 } END { printf "%d", m }')"
	if [ "$ka" -gt 0 ] && [ "$replayed" = 0 ] &&
		grep -q '^r2cc-gen: resumed' "$LAB/b.fo.idlehole.out"; then
		check pass fo.idlehole.keepalive "$ka QPs fenced by a keepalive, $replayed WRs replayed; $(cat "$LAB"/[ab].fo.idlehole.log | grep -m1 'QPs fail over' | sed 's/.*keepalive:/keepalive:/')"
	else
		check fail fo.idlehole.keepalive "fenced by a keepalive: $ka, WRs replayed: $replayed: $(cat "$LAB"/[ab].fo.idlehole.log | grep -E 'keepalive|fenced' | head -3 | cut -c1-200)"
	fi
fi
[ "$NODE" = a ] && fault_clear 0
barrier fo.idlehole.cleared 60

# The backup's rail fails while the QPs run on it and their own rail is
# back (within the hold: no planned move yet): both ends move them back
# to rail 0 at once, with no hold (an urgent move back), every byte
# verified and no error seen.
backup_dies() {
	fault_carrier 0 down
	sleep 5
	fault_clear 0
	sleep 5
	fault_carrier 1 down
}
FO_ENV="R2CC_FAILBACK_HOLD_MS=60000" gen_fo fo.backupdies b backup_dies
log=$LAB/$NODE.fo.backupdies.log
n=$(grep -c 'moved back to rail 0' "$log")
moved=$(grep -c 'moved to backup QP' "$log")
if [ "$n" -gt 0 ] && [ "$n" = "$moved" ]; then
	check pass fo.backupdies.back "$n QPs moved back at once; $(grep -m1 'moved back to rail 0' "$log" | sed 's/.*: \([0-9]* WRs replayed.*\)/\1/')"
else
	check fail fo.backupdies.back "moved back $n of $moved: $(grep -E 'backup failed|abandon|did not happen|unprotected' "$log" | head -3)"
fi
if [ "$NODE" = b ]; then
	fault_clear 1
	fault_clear 0
	wait_port_active 0 30
	wait_port_active 1 30
fi
barrier fo.backupdies.cleared 60

# 30% loss both ways on rail 0: RC retransmits; no error reaches the
# program (a failover, if the loss ever beats 7 tries, is counted).
LOSSLOG=$LAB/$NODE.fo.loss.log
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LOSSLOG"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"
# (mid-run: RoCE resolves the peer's address at RTR, and a lost ARP
# fails the connection before any traffic — rxe's own behaviour.)
fault_midrun fo.loss fault_loss 0 30
pair fo.loss ok 150 18600 "$R2CC $GEN -i 1" "$R2CC $GEN -t 20 -i 1 \$SERVER"
wait "$FAULT_PID"
fault_clear 0
if [ "$NODE" = b ]; then
	line=$(record fo.loss)
	bad=0
	for k in mismatches duplicates losses order_errors errors; do
		[ "$(field "$line" $k)" = 0 ] || bad=1
	done
	[ -n "$line" ] && [ $bad = 0 ] &&
		check pass fo.loss.gen "ops=$(field "$line" ops), failovers: $(grep -c 'moved to backup QP' "$LOSSLOG")" ||
		check fail fo.loss.gen "${line:-no summary line}"
fi
barrier fo.loss.cleared 60

# Both rails down on node b: no backup left. The program sees an error,
# as it would without r2cc, within its bound — no hang. The host cuts both
# of b's NICs in QEMU (b sees carrier loss on each, a a black hole), not
# `ip link set down` in b: a virtio NIC set down keeps the frames left in
# its TX ring, each holding its rxe QP: the program's ibv_destroy_qp then
# waits for them in the kernel (__rxe_cleanup gives up after 50 s a QP),
# and once rxe has freed the QP anyway, bringing the link up oopses the
# guest (rxe_skb_tx_dtor on the freed QP) — with or without r2cc.
rails_b() {
	local p
	host_link b 0 "$1" & p=$!
	host_link b 1 "$1"
	wait $p
}
[ "$NODE" = b ] && fault_midrun fo.both rails_b off
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LAB/$NODE.fo.both.log"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"
pair fo.both fail $((STALL + 60)) 18600 "$R2CC $GEN -i 1" "$R2CC $GEN -t 60 -i 1 \$SERVER"
if [ "$NODE" = b ]; then
	end=$(date +%s.%N)
	seen=$([ -e "$LAB/fo.both.fault" ] && echo 1)
	wait "$FAULT_PID"
	judge_fail fo.both "$end" "$seen"
	rails_b on
	wait_port_active 0 30
	wait_port_active 1 30
fi
barrier fo.both.cleared 60

# The peer's r2cc never answers (node a's program stopped, SIGSTOP, before
# b's rail 0 dies): b's fenced QPs give up after their bound (5 s) and the
# program sees the native errors (flushes), not a stall. (a's server is
# ended with the case, still stopped: only b's side is judged.)
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LAB/$NODE.fo.nopeer.log"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"
rm -f "$LAB/fo.nopeer.stopped"
if [ "$NODE" = a ]; then
	fault_midrun fo.nopeer sh -c "pkill -STOP -x r2cc-gen && echo stopped > $LAB/fo.nopeer.stopped && sleep 20 && pkill -CONT -x r2cc-gen"
else
	fault_after "$LAB/fo.nopeer.stopped" stopped 90 0.5 fo.nopeer \
		fault_carrier 0 down
fi
pair fo.nopeer fail $((STALL + 90)) 18600 "$R2CC $GEN -i 1" "$R2CC $GEN -t 60 -i 1 \$SERVER"
if [ "$NODE" = b ]; then
	end=$(date +%s.%N)
	seen=$([ -e "$LAB/fo.nopeer.fault" ] && echo 1)
	wait "$FAULT_PID"
	judge_fail fo.nopeer "$end" "$seen"
	why=$(sed -n 's/.*FAILED: //p' "$LAB/b.fo.nopeer.out" | head -1)
	case $why in
	*"no progress"*|"") check fail fo.nopeer.native "not a completion error: ${why:-none}" ;;
	*) check pass fo.nopeer.native "$why" ;;
	esac
	fault_clear 0
	wait_port_active 0 30
	grep -q 'failover abandoned' "$LAB/b.fo.nopeer.log" &&
		check pass fo.nopeer.abandoned "$(grep -m1 'failover abandoned' "$LAB/b.fo.nopeer.log" | cut -c1-160)" ||
		check fail fo.nopeer.abandoned "$(grep -E 'fenced|moved|failover' "$LAB/b.fo.nopeer.log" | head -3)"
else
	pkill -CONT -x r2cc-gen
	wait "$FAULT_PID"
fi
barrier fo.nopeer.cleared 120

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
		( sleep "$delay"; fault_carrier 0 down; log "$name: rail 0 down" ) &
		FAULT_PID=$!
	fi
	pair "$name" ok 240 18515 "$R2CC $srv" "$R2CC $cli \$SERVER"
	[ "$NODE" = b ] && rail0_back
	grep -q 'moved to backup QP' "$log" &&
		check pass "$name.moved" "$(grep -c 'moved to backup QP' "$log") QPs moved" ||
		check fail "$name.moved" "$(grep -E 'fenced|unprotected|failed|protected' "$log" | head -3)"
	barrier "$name.cleared" 120
}

PP="ibv_rc_pingpong -d $(rail_ibdev 0) -g 1 -n 30000 -s 1024"
prog_fo fo.pingpong 8 "$PP" "$PP"
# 8 QPs on one SRQ each side: they move with it.
SP="ibv_srq_pingpong -d $(rail_ibdev 0) -g 1 -n 20000 -s 1024 -q 8"
prog_fo fo.srq_pingpong 8 "$SP" "$SP"
# perftest: the write_bw and read_bw servers never move their QP past RTR
# (r2cc protects from RTR on); -D 20 with the kill 10 s in. A run whose
# report alone failed (perftest's clock calibration under TCG, after the
# traffic) counts as finished: a rerun would start on the dead rail.
PT=$REPO/tests/lab/lib/perftest-retry
for t in write send read; do
	BW="PERFTEST_REPORT=optional $PT ib_${t}_bw -d $(rail_ibdev 0) -x 1 -D 20"
	prog_fo "fo.ib_${t}_bw" 10 "$BW" "$BW"
done

# fo.mpi: an Open MPI job (2 ranks, one per node) across the same kill.
# compat's UCX cannot be protected (rc_verbs puts every QP on an SRQ) and
# Debian's openib BTL cannot run on RoCE (its only connection manager, udcm,
# is InfiniBand-only; the rdmacm one is not built), so the job runs over
# libfabric instead: pml cm, mtl ofi, provider verbs;ofi_rxm, one RC QP per
# peer made through rdma_cm, with its own receive queue (FI_OFI_RXM_USE_SRX=0).
# FI_VERBS_IFACE keeps it on rail 0, FI_UNIVERSE_SIZE keeps rxm's CQs within
# rxe's limit. FI_OFI_RXM_SAR_LIMIT sends every size as SENDs (eager up to
# 16 KiB, segmented above): with rxm's rendezvous (RDMA READs) r2cc's receive
# log of the QP fills up (ENOSPC) and the QP runs unprotected. The program,
# tests/progs/mpi_pingpong, checks every word of every message and must end
# with errors=0; node b kills rail 0 once the job has run some seconds, and
# r2cc must have moved the QP on both nodes.
mpi_fo() {
	local name=fo.mpi log=$LAB/$NODE.fo.mpi.log out=$LAB/a.fo.mpi.out
	local net rc start dt line
	. "$REPO/tests/lab/lib/mpi.sh"
	mpi_setup mpi_pingpong || return 0
	# What each rank runs with, by host name (the node's own netdevs).
	cat > "$LAB/$name.env.node-$NODE" <<-EOT
	export LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$log
	export R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)
	export FI_VERBS_IFACE=$(rail_dev 0)
	EOT
	if [ "$NODE" = a ]; then
		printf '#!/bin/sh\n. %s.$(hostname)\nexec %s "$@"\n' \
			"$LAB/$name.env" "$(cat "$LAB/mpi.prog")" > "$LAB/$name.rank"
		chmod +x "$LAB/$name.rank"
	fi
	rm -f "$LAB/$name.fault"
	barrier "$name.start" 300 || return 0
	if [ "$NODE" = b ]; then
		fault_after "$out" '^mpi_pingpong: progress' 180 4 "$name" \
			fault_carrier 0 down
	else
		net=$(mgmt_ip a)
		net=${net%.*}.0/24
		start=$(date +%s)
		log "$name: mpirun"
		bounded 300 mpirun --allow-run-as-root -np 2 \
			--host node-a:1,node-b:1 --mca oob_tcp_if_include "$net" \
			--mca btl self --mca pml cm --mca mtl ofi \
			--mca mtl_ofi_provider_include 'verbs;ofi_rxm' \
			-x PMIX_MCA_gds -x FI_OFI_RXM_USE_SRX=0 \
			-x FI_UNIVERSE_SIZE=8 -x FI_OFI_RXM_SAR_LIMIT=4194304 \
			"$LAB/$name.rank" -t 30 > "$out" 2>&1
		rc=$?
		dt=$(($(date +%s) - start))
		line=$(grep '^mpi_pingpong: ranks=' "$out")
		if [ ! -e "$LAB/$name.fault" ]; then
			check fail "$name.run" "the job ended before the fault (exit $rc after ${dt}s)"
		elif [ $rc -eq 0 ] && [[ $line == *" errors=0" ]]; then
			check pass "$name.run" "$line ${dt}s"
		else
			check fail "$name.run" "exit $rc after ${dt}s: ${line:-no summary} (see ${out##*/})"
		fi
		metric "$name.seconds" "$dt"
	fi
	barrier "$name.end" 360
	[ "$NODE" = b ] && rail0_back
	grep -q 'protected: backup QP' "$log" &&
		check pass "$name.protected" "$(grep -c 'protected: backup QP' "$log") QPs" ||
		check fail "$name.protected" "$(grep -E 'unprotected|secret|control' "$log" | head -3)"
	grep -q 'moved to backup QP' "$log" &&
		check pass "$name.moved" "$(grep -c 'moved to backup QP' "$log") QPs; $(grep -m1 'moved to backup QP' "$log" | sed 's/.*: \([0-9]* WRs replayed.*\)/\1/')" ||
		check fail "$name.moved" "$(grep -E 'fenced|unprotected|failed|abandoned' "$log" | head -3)"
	barrier "$name.cleared" 120
}
mpi_fo

# Baseline, same run: the same carrier fault without r2cc kills the
# generator (its stall bound) and ib_write_bw (hung until its bound). (How
# long the generator then takes to exit is rxe's and the generator's
# business: gen-baseline bounds it.)
[ "$NODE" = b ] && fault_midrun fo.base fault_carrier 0 down
pair fo.base fail $((STALL + 90)) 18600 "$GEN -i 1" "$GEN -t 60 -i 1 \$SERVER"
if [ "$NODE" = b ]; then
	wait "$FAULT_PID"
	line=$(record fo.base)
	[ "$(field "$line" errors)" -gt 0 ] 2> /dev/null &&
		check pass fo.base.line "errors=$(field "$line" errors): $(sed -n 's/.*FAILED: //p' "$LAB/b.fo.base.out" | head -1)" ||
		check fail fo.base.line "${line:-no summary line}"
	fault_clear 0
	wait_port_active 0 30
fi
barrier fo.base.cleared 120
# A count, not a duration (-D): a pulled cable is a silent drop for the
# peer and rxe retries forever at retry_cnt 7 (perftest's), so the run
# hangs, and a duration run would end on time and report success anyway.
# 8000 x 64 KiB take 25-50 s here (the fault comes 12 s in): finished by
# the bound, the rail was not broken.
BW="$PT ib_write_bw -d $(rail_ibdev 0) -x 1 -n 8000"
if [ "$NODE" = b ]; then
	( sleep 12; fault_carrier 0 down ) &
	FAULT_PID=$!
fi
pair fo.base.ib_write_bw fail 90 18515 "$BW" "$BW \$SERVER"
if [ "$NODE" = b ]; then
	wait "$FAULT_PID"
	fault_clear 0
fi
