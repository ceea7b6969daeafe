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
# program in bounded time; the generator reads its QPs' qp->state as RTS
# before every post throughout; ibv_rc_pingpong, ibv_srq_pingpong and
# perftest's ib_write_bw, ib_send_bw and ib_read_bw finish across a rail
# kill (MPI and the other stacks: the stacks scenario); the
# same fault without r2cc kills the generator and ib_write_bw. Prints fault
# -> first backup completion, WRs replayed and bytes re-sent per node, and
# the generator's longest stall.
# lab-timeout: 1500

. "$REPO/tests/lab/lib/fo.sh"

PP="ibv_rc_pingpong -d $(rail_ibdev 0) -g 1 -n 6000 -s 1024"
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=debug R2CC_LOG_FILE=$LAB/$NODE.fo.bind.log"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"

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
pair fo.oneside ok 200 18517 "$R2C1 ${PP/-n 6000/-n 200 -p 18517}" \
	"${PP/-n 6000/-n 200 -p 18517} \$SERVER"
if [ "$NODE" = a ]; then
	log=$LAB/a.fo.oneside.log
	if grep -q "unprotected: the peer's node runs no r2cc" "$log" &&
		! grep -q 'for its failover' "$log"; then
		check pass fo.oneside.timeout "unprotected, its timeout left as set: $(grep -m1 'unprotected' "$log" | sed 's/.*QP/QP/' | cut -c1-120)"
	else
		check fail fo.oneside.timeout "$(grep -E 'unprotected|for its failover|not known' "$log" | head -3 | cut -c1-200)"
	fi
fi

# No secret: no control channel; the program is unaffected.
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LAB/$NODE.fo.nokey.log"
pair fo.nokey ok 200 18516 "$R2CC ${PP/-n 6000/-n 200 -p 18516}" \
	"$R2CC ${PP/-n 6000/-n 200 -p 18516} \$SERVER"
grep -q 'no R2CC_SECRET_FILE' "$LAB/$NODE.fo.nokey.log" &&
	check pass fo.nokey.log "unprotected, said once" ||
	check fail fo.nokey.log "$(head -5 "$LAB/$NODE.fo.nokey.log")"

# Carrier down on node b's rail 0 (port event there; a learns from b).
gen_fo fo.carrier b fault_carrier 0 down
[ "$NODE" = b ] && { fault_clear 0; wait_port_active 0 30; }
barrier fo.carrier.cleared 60

# Peers found without the IPv4 address in their GID: the ways for
# InfiniBand and IPv6 GIDs, forced here on RoCE (R2CC_PEER_BY_GID=0). On
# b, every QP's resolve asks the job's nodes (R2CC_PEERS) in turn (b's
# own node first for some: it knows no owner); on a, R2CC_NODE_MAP alone
# names the node of b's rail-0 GID. All are protected and move at the
# carrier fault.
if [ "$NODE" = a ]; then
	nodes="R2CC_NODE_MAP=::ffff:$(rail_ip b 0)=$(mgmt_ip b)"
	said="R2CC_NODE_MAP: 1 of 1 GIDs' nodes with an address"
else
	nodes="R2CC_PEERS=$(mgmt_ip a),$(mgmt_ip b)"
	said="the job's nodes: 2 of 2 with an address"
fi
FO_ENV="R2CC_PEER_BY_GID=0 $nodes" gen_fo fo.nodes b fault_carrier 0 down
[ "$NODE" = b ] && { fault_clear 0; wait_port_active 0 30; }
log=$LAB/$NODE.fo.nodes.log
if grep -q "$said" "$log" && ! grep -q 'unprotected' "$log"; then
	check pass fo.nodes.found "every QP's peer found (${nodes%%=*})"
else
	check fail fo.nodes.found "$(grep -E "job's nodes|NODE_MAP|unprotected|no owner" "$log" | head -3 | cut -c1-200)"
fi
barrier fo.nodes.cleared 60

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
	nap 8
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
# verified and no error seen. Their standbys' rail still down on b, both
# ends leave them unarmed (unprotected, not one end armed towards a
# standby the other lacks) until it is up again, then re-arm them: rail 0
# killed once more moves every QP onto its re-armed standby.
backup_dies() {
	fault_carrier 0 down
	fault_mark
	at 5
	fault_clear 0
	at 10
	fault_carrier 1 down
	at 16
	fault_clear 1
	at 24
	fault_carrier 0 down
}
GEN_T=45 FO_ENV="R2CC_FAILBACK_HOLD_MS=60000" gen_fo fo.backupdies b backup_dies
log=$LAB/$NODE.fo.backupdies.log
n=$(grep -c 'moved back to rail 0' "$log")
moved=$(grep -c 'moved to backup QP' "$log")
if [ "$n" -gt 0 ] && [ "$((2 * n))" = "$moved" ]; then
	check pass fo.backupdies.back "$n QPs moved back at once; $(grep -m1 'moved back to rail 0' "$log" | sed 's/.*: \([0-9]* WRs replayed.*\)/\1/')"
else
	check fail fo.backupdies.back "moved back $n, moved $moved (twice each expected): $(grep -E 'backup failed|abandon|did not happen|unprotected' "$log" | head -3)"
fi
unarmed=$(grep -c 'not re-armed (' "$log")
again=$(grep -c 'protected again: backup QP .* on rail 1' "$log")
if [ "$unarmed" = "$n" ] && [ "$again" = "$n" ]; then
	check pass fo.backupdies.rearmed "$n unarmed while rail 1 was down ($(grep -m1 -o 'not re-armed ([^)]*)' "$log")), then re-armed"
else
	check fail fo.backupdies.rearmed "of $n moved back: $unarmed unarmed, $again re-armed: $(grep -E 'not re-armed|unprotected' "$log" | head -2 | cut -c1-160)"
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
	gen_clean "$line" &&
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

PP="ibv_rc_pingpong -d $(rail_ibdev 0) -g 1 -n 10000 -s 1024"
prog_fo fo.pingpong 8 "$PP" "$PP"
# 8 QPs on one SRQ each side: they move with it.
SP="ibv_srq_pingpong -d $(rail_ibdev 0) -g 1 -n 20000 -s 1024 -q 8"
prog_fo fo.srq_pingpong 8 "$SP" "$SP"
# perftest: the write_bw and read_bw servers never move their QP past RTR
# (r2cc protects from RTR on); -D 20 with the kill 10 s in. -F: perftest's
# clock calibration, which fails now and then under TCG, makes a report
# of 0, not an exit.
for t in write send read; do
	BW="ib_${t}_bw -F -d $(rail_ibdev 0) -x 1 -D 20"
	prog_fo "fo.ib_${t}_bw" 10 "$BW" "$BW"
done

# Baseline, same run: the same carrier fault without r2cc kills the
# generator (its stall bound) and ib_write_bw (hung until its bound). (How
# long the generator then takes to exit is rxe's and the generator's
# business: gen-baseline bounds it.)
# (Only with baselines: R2CC_LAB_BASELINES=1, tests/lab/run's default.)
baselines || return 0
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
BW="ib_write_bw -F -d $(rail_ibdev 0) -x 1 -n 8000"
if [ "$NODE" = b ]; then
	( sleep 12; fault_carrier 0 down ) &
	FAULT_PID=$!
fi
pair fo.base.ib_write_bw fail 90 18515 "$BW" "$BW \$SERVER"
if [ "$NODE" = b ]; then
	wait "$FAULT_PID"
	fault_clear 0
fi
