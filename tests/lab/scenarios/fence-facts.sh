# SPDX-License-Identifier: MIT
# fence-facts: measures on the kernel's rxe the facts that r2cc's fence and
# PSN replay rely on (DESIGN.md §6) with tests/progs/fence_probe: PSN
# accounting per opcode (24-bit wrap included), ibv_query_qp in ERR, receive
# flush with and without an SRQ, send flush with the ACKs black-holed, QP
# reuse after ERR -> RESET (and what RESET leaves of posted receives), a
# SEND behind a READ into a QP with no receive posted yet, the
# time to RETRY_EXC for retry_cnt/timeout
# pairs, an ACK timeout and retry count changed through SQD, and what a
# program sees when its rxe device is removed under a connected QP (a NIC
# that dies whole). Every measured value is a FACT
# line; each check says whether it matches what the design assumes.
# Server on node a (responder), client on
# node b (requester). sflush black-holes node a's rail-0 egress (requests
# arrive, ACKs are lost); retry black-holes both nodes' rail 0.
# lab-timeout: 540
# lab-tier: study

FP="$BUILD/tests/progs/fence_probe -d $(rail_ibdev 0) -g 1 -p 18700"
HOLE="tc qdisc replace dev $(rail_dev 0) root netem loss 100%"
UNHOLE="tc qdisc del dev $(rail_dev 0) root"
FACTS=$LAB/facts

# probe NAME SECONDS ARGS...: one fence_probe pair; node b then files the
# facts both sides printed as FACT lines.
probe() {
	local name=$1 t=$2; shift 2
	rdma statistic show link "$(rail_ibdev 0)/1" > "$LAB/$NODE.$name.stat0"
	pair "$name" ok "$t" 18700 "$FP $*" "$FP $* \$SERVER"
	rdma statistic show link "$(rail_ibdev 0)/1" > "$LAB/$NODE.$name.stat1"
	ip neigh show dev "$(rail_dev 0)" >> "$LAB/$NODE.$name.stat1"
	[ "$NODE" = b ] || return 0
	grep -h '^fact ' "$LAB/a.$name.out" "$LAB/b.$name.out" |
		sed 's/^fact //' | tee -a "$FACTS" | sed 's/^/FACT /' >> "$RESULTS"
}
# fv KEY: a fact's value (empty if it was not measured). Reads the facts
# file once: forks are slow under emulation.
declare -A F
fv() {
	local k v
	if [ -z "${F_LOADED:-}" ]; then
		while IFS='=' read -r k v; do F[$k]=$v; done < "$FACTS"
		F_LOADED=1
	fi
	echo "${F[$1]:-}"
}
# want NAME KEY VALUE: the fact KEY equals VALUE.
want() {
	local got; got=$(fv "$2")
	[ "$got" = "$3" ] && check pass "$1" "$2=$got" ||
		check fail "$1" "$2=${got:-unmeasured}, expected $3"
}
# want_match NAME KEY REGEX
want_match() {
	local got; got=$(fv "$2")
	[[ $got =~ $3 ]] && check pass "$1" "$2=$got" ||
		check fail "$1" "$2=${got:-unmeasured}, expected /$3/"
}
# want_pkts PREFIX: each WR advanced sq_psn and rq_psn by its packet count.
want_pkts() {
	local k n
	fv "$1" > /dev/null
	for k in $(printf '%s\n' "${!F[@]}" | sed -n "s/^$1\.\([a-z]*[0-9]*\)\.pkts$/\1/p" | sort); do
		n=$(fv "$1.$k.pkts")
		want "$1.$k.sq_adv" "$1.$k.sq_adv" "$n"
		want "$1.$k.rq_adv" "$1.$k.rq_adv" "$n"
	done
	want "$1.rq_total" "$1.rq_total" "$(fv "$1.expected_total")"
	want "$1.sq_total" "$1.sq_total" "$(fv "$1.expected_total")"
}

[ "$NODE" = b ] && : > "$FACTS"

# 1, 4, 5: PSN accounting and query_qp in ERR (SENDs only; every opcode
# from PSN 0; every opcode across the 24-bit wrap).
probe acct-send 60 -t acct --name acct-send --psn 0x100 \
	--ops send:5000,send:0,send:1,send:1024,send:1025
probe acct-mix 60 -t acct --name acct-mix --psn 0 \
	--ops send:5000,write:16384,writeimm:3000,read:4096,read:1,write:0,send:0,fadd:8,cas:8
probe acct-wrap 60 -t acct --name acct-wrap --psn 0xfffff0 \
	--ops send:5000,write:16384,writeimm:3000,read:4096,read:1,write:0,send:0,fadd:8,cas:8
# 2: receive flush, plain RQ then SRQ (8 posted, 3 consumed).
probe rflush 60 -t rflush -k 8 -m 3
probe srqflush 60 -t srqflush -k 8 -m 3
# 3: send flush, ACKs black-holed, 6 WRITEs outstanding (odd ones
# unsignaled, the last signaled), ERR after 1 s.
probe sflush 60 -t sflush -n 6 --wait 1 --hole "'$HOLE'" --unhole "'$UNHOLE'"
# The same with retry 1, timeout 14: the QP fails by itself within the 1 s.
probe sflush-rexc 60 -t sflush --name sflush-rexc -n 6 --wait 1 \
	--retries 1:14 --hole "'$HOLE'" --unhole "'$UNHOLE'"
# 6: reuse of a QP object for a new remote QP.
probe reuse 60 -t reuse --psn 0x500
# 6b: receives posted, ERR, then RESET at once or 0.1 s later (as r2cc
# re-arms a fenced standby): the flushes the CQ holds, and whether a
# receive posted before the ERR still takes a message once the QP is
# connected again.
probe rqreset 60 -t rqreset --psn 0x600
probe rqreset-late 60 -t rqreset --name rqreset-late --psn 0x680 --wait 0.1
# 6c: a READ (128 KiB) and a SEND behind it into a QP whose receive is
# posted first, or 50 ms late (each of r2cc's moves: the peer's replay
# races the re-post of our receives): statuses and the QP's state.
probe readrnr-first 60 -t readrnr --name readrnr-first --psn 0x700 --wait 0
probe readrnr 60 -t readrnr --psn 0x780 --wait 0.05
# 7: retry_cnt:timeout pairs under a full black hole (both nodes drop
# their rail-0 egress), 30 s window.
probe retry 90 -t retry --retries 7:14,7:8,1:14,1:8,3:14,6:8 --wait 30 \
	--hole "'$HOLE'" --unhole "'$UNHOLE'"
# 9: an ACK timeout and retry count changed through SQD (r2cc's own pair,
# 1:8, back to 3:16 with 4 WRITEs of 64 KiB in flight and one posted in
# SQD), then a full black hole meets the new pair: RETRY_EXC after about
# 4 x 268 ms, not within a few ms. A WRITE posted in SQD, or posted before
# it and not started yet, waits for the next post once the QP is at RTS
# again (migrate/untune.c holds what is posted in SQD and posts it then).
probe sqd 90 -t sqd --psn 0x700 --wait 20 \
	--hole "'$HOLE'" --unhole "'$UNHOLE'"
# 8: a NIC that dies whole: node b's rxe0 deleted (rdma link delete, in
# the background) under its probe's connected QP: the async events, what
# post, poll, query and ERR return after it, and whether the removal
# waits for the program (done when the probe, still holding the device,
# says it is done).
RM=$LAB/b.devdel.rm
if [ "$NODE" = b ]; then
	cat > "$LAB/b.devdel.sh" <<-DEL
		( t0=\$(date +%s.%N); rdma link delete $(rail_ibdev 0)
		  echo "rc=\$? t0=\$t0 t1=\$(date +%s.%N)" > $RM ) > /dev/null 2>&1 &
	DEL
fi
pair devdel ok 90 18700 "$FP -t devdel --wait 5" \
	"$FP -t devdel --wait 5 --hole 'sh $LAB/b.devdel.sh' \$SERVER"
if [ "$NODE" = b ]; then
	for i in $(seq 300); do [ -s "$RM" ] && break; sleep 0.1; done
	grep -h '^fact ' "$LAB/a.devdel.out" "$LAB/b.devdel.out" |
		sed 's/^fact //' >> "$FACTS"
	# rc, t0 and t1 of the removal; when the probe was done with it
	eval "$(cat "$RM" 2>/dev/null)"
	pend=$(sed -n 's/^fact devdel.done_at=//p' "$LAB/b.devdel.out")
	{
		echo "devdel.removal_rc=${rc:-none (not done 30 s after the program)}"
		[ -n "${t1:-}" ] && awk -v a="$t0" -v b="$t1" -v e="$pend" 'BEGIN {
			printf "devdel.removal_s=%.2f\n", b - a
			printf "devdel.removal_waited_for_program=%s\n", (e > 0 && b >= e ? "yes" : "no") }'
	} >> "$FACTS"
	grep '^devdel\.' "$FACTS" | sed 's/^/FACT /' >> "$RESULTS"
	rdma link add "$(rail_ibdev 0)" type rxe netdev "$(rail_dev 0)" ||
		log "devdel: $(rail_ibdev 0) not added back"
	wait_port_active 0 30
fi

[ "$NODE" = b ] || return 0
for p in acct-send acct-mix acct-wrap; do
	want_pkts $p
	want "$p.err.requester_sq" $p.requester_err_sq_equals_rts yes
	want "$p.err.responder_rq" $p.responder_err_rq_equals_rts yes
	want "$p.err.requester_kept" $p.requester.err_psn_kept yes
	want "$p.err.responder_kept" $p.responder.err_psn_kept yes
done
want rflush.flushed rflush.flushed 5
want rflush.order rflush.flush_in_order yes
want rflush.status rflush.flush_status_all_WR_FLUSH_ERR yes
want srqflush.flushed srqflush.flushed 0
want srqflush.kept srqflush.srq_reused_by_new_qp 5
want srqflush.kept_order srqflush.srq_reused_in_order yes
want sflush.none_before sflush.completions_before_err 0
want sflush.all_back sflush.completions_after_err 6
want sflush.order sflush.in_order yes
want sflush-rexc.before sflush-rexc.completions_before_err 6
want_match sflush-rexc.statuses sflush-rexc.completions '^200:RETRY_EXC_ERR( [0-9]+:WR_FLUSH_ERR)+$'
want sflush-rexc.executed sflush-rexc.responder_err_rq_adv 24
# The responder executed every WR although the requester saw no completion.
want sflush.executed sflush.responder_rq_adv_before_err 24
want sflush.executed_err sflush.responder_err_rq_adv 24
want_match sflush.statuses sflush.completions '^(200:[A-Z_0-9a-z]+ )?([0-9]+:WR_FLUSH_ERR ?)+$'
want reuse.reset reuse.err_to_reset_ret 0
want reuse.reconnect reuse.send_after_reconnect_ok yes
want reuse.new_qp reuse.recv_on_new_qp yes
# RESET right after an ERR leaves no receive behind on rxe: each is
# flushed to the CQ by then (r2cc's re-armed standby may rely on it).
want rqreset.flushed rqreset.flushed_by_reset 32
want rqreset.none_left rqreset.stale_recv_after_reset no
want rqreset-late.flushed rqreset-late.flushed_by_reset 32
want rqreset-late.none_left rqreset-late.stale_recv_after_reset no
want readrnr-first.read readrnr-first.read SUCCESS
want readrnr-first.send readrnr-first.send SUCCESS
want readrnr-first.qp readrnr-first.qp_state RTS
want readrnr-first.recv readrnr-first.recv SUCCESS
# The receive 50 ms late: RNR NAKs meet the READ's reply (counted in
# readrnr.rnr_naks), and the requester rides them out.
want readrnr.read readrnr.read SUCCESS
want readrnr.send readrnr.send SUCCESS
want readrnr.qp readrnr.qp_state RTS
# rxe's removal waits for the program to close the device, which works
# on meanwhile: it cannot show r2cc a NIC that dies whole.
want devdel.no_event devdel.async_events none
want devdel.works_on devdel.write_after SUCCESS
want devdel.query devdel.query_after_state 3
want devdel.waits devdel.removal_waited_for_program yes
want sqd.to_sqd sqd.to_sqd 0
want sqd.to_rts sqd.to_rts 0
want sqd.pair sqd.pair_after 3:16
# Of the 4 in flight, one not started when SQD began waits too; the one
# posted in SQD always does, through an empty post; the next post rings.
want_match sqd.in_flight sqd.completed '^[0-4]$'
want sqd.posted_in_sqd_waits sqd.completed_after_empty_post \
	"$(fv sqd.completed)"
want sqd.next_post_rings sqd.completed_after_next_post 6
want_match sqd.black_hole sqd.black_hole '^RETRY_EXC_ERR@([1-9]|0\.[5-9])'
want retry.r7t14 retry.r7t14 none
want_match retry.r1t8 retry.r1t8 '^RETRY_EXC_ERR@'
want_match retry.r1t14 retry.r1t14 '^RETRY_EXC_ERR@'
want retry.r7t8 retry.r7t8 none
want_match retry.r3t14 retry.r3t14 '^RETRY_EXC_ERR@'
want_match retry.r6t8 retry.r6t8 '^RETRY_EXC_ERR@'
true
