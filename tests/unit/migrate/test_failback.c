/* SPDX-License-Identifier: MIT */
/*
 * test_failback.c - the move back's handshake (failback.c): both ends
 * propose, recycle their primaries, say READY and move. A side that gave
 * up waiting for the peer's READY (a thousand QPs' recycles ahead of it at
 * the peer) joins the peer's move when it comes after all, its primary
 * connected again as it was for that round; a move back on a round this
 * side never said READY in is refused. The peer is played through the
 * captured sends (fo_fixture.c wraps r2cc_chan_send).
 */
#include <criterion/criterion.h>
#include <infiniband/verbs.h>
#include <string.h>

#include "mig_int.h" /* (before the fixture: its mq is global) */
#include "fo_fixture.h"
#include "standby.h"
#include "tick.h"

#define PEER_PSN 0x777

static void fb_setup(void)
{
	setup();
	fo_rails();
	/* the primary's rail known too: a move back looks at it */
	cr_assert_eq(r2cc_health_add_rail(0, "rxe0", "r2cc-none0"), 0);
	r2cc_health_report(0, R2CC_RAIL_UP, R2CC_CAUSE_CARRIER);
}

/* A round: the peer proposes (its backup failed: no hold), ours follows
 * at once, both primaries recycle; our READY goes out. Its PSN. */
static uint32_t round_begun(void)
{
	const struct r2cc_ctrl_msg *r;

	fo_peer_fb(R2CC_CTRL_FB_PROPOSE, R2CC_CTRL_FB_URGENT, PEER_PSN);
	r = fo_last(R2CC_CTRL_FAILBACK);
	cr_assert(r && r->failback.phase == R2CC_CTRL_FB_READY, "READY sent");
	cr_assert_eq(prim.state, IBV_QPS_RTS, "the primary recycled");
	cr_assert_eq(prim.rq_psn, PEER_PSN, "towards the peer's");
	/* (the program left rdma_cm's 0: 655 ms a NAK, the peer's replay
	 * racing our re-posted receives) */
	cr_assert_eq(prim.min_rnr_timer, MIG_RNR_TIMER);
	cr_assert_eq(prim.sq_psn, r->failback.psn);
	cr_assert_eq(back.state, IBV_QPS_RTS, "the standby carries on");
	return r->failback.psn;
}

/* The peer moves back on that round: its FAILOVER, its ACK, and its
 * receives re-posted (POSTED). */
static void peer_moves_back(void)
{
	uint32_t psn = (back.sq_psn + 1) & 0xffffff; /* it executed WR 1 */

	peer_says_why(R2CC_CTRL_FAILOVER, R2CC_CTRL_WHY_FAILBACK, true, psn, 0);
	peer_says_why(R2CC_CTRL_FAILOVER_ACK, R2CC_CTRL_WHY_FAILBACK, true, psn,
		      0);
	fo_peer_fb(R2CC_CTRL_FB_POSTED, 0, PEER_PSN);
}

/* Messages of @type sent since fo_nsent was @from */
static int sent_since(int from, uint8_t type)
{
	int i, n = 0;

	for (i = from; i < fo_nsent; i++)
		n += fo_sent[i % FO_SENT].hdr.type == type;
	return n;
}

/* Moved back: the standby fenced, the QP on its primary (re-arming) */
static void moved_back(uint32_t psn)
{
	const struct r2cc_ctrl_msg *f = fo_last(R2CC_CTRL_FAILOVER);

	cr_assert(f && f->failover.reason == R2CC_CTRL_WHY_FAILBACK &&
			  f->failover.flags & R2CC_CTRL_FO_PSN_VALID,
		  "our side of the move told");
	cr_assert_eq(back.state, IBV_QPS_ERR, "the standby fenced");
	cr_assert_eq(prim.state, IBV_QPS_RTS);
	cr_assert_eq(prim.sq_psn, psn, "from the round's PSN");
	cr_assert_eq(prim.rq_psn, PEER_PSN);
	cr_assert_neq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED, "moved back");
	cr_assert_neq(r2cc_mig_state(mq), R2CC_PROT_FAILED);
	post_op(2, IBV_WR_SEND);
	cr_assert_eq(prim.sent[prim.nsent - 1], 2, "WR 2 on the primary");
}

/* The peer moves back on no round of ours: refused, still on the
 * standby. */
static void refused(void)
{
	const struct r2cc_ctrl_msg *f;

	peer_says_why(R2CC_CTRL_FAILOVER, R2CC_CTRL_WHY_FAILBACK, true, 0x501,
		      0);
	f = fo_last(R2CC_CTRL_FAILOVER);
	cr_assert(f && !(f->failover.flags & R2CC_CTRL_FO_PSN_VALID),
		  "refused");
	cr_assert_eq(back.state, IBV_QPS_RTS, "on its standby");
}

Test(failback, both_ready_move_back, .init = fb_setup, .fini = teardown,
     .timeout = 10)
{
	uint32_t psn;

	fo_on_the_standby();
	psn = round_begun();
	fo_peer_fb(R2CC_CTRL_FB_READY, 0, PEER_PSN);
	cr_assert_eq(back.state, IBV_QPS_ERR, "both READY: the standby fenced");
	peer_moves_back();
	moved_back(psn);
}

Test(failback, rnr_timers_capped_at_0_64_ms)
{
	cr_assert_eq(r2cc_mig_rnr_timer(0), MIG_RNR_TIMER, "655.36 ms");
	cr_assert_eq(r2cc_mig_rnr_timer(1), 1, "0.01 ms");
	cr_assert_eq(r2cc_mig_rnr_timer(MIG_RNR_TIMER), MIG_RNR_TIMER);
	cr_assert_eq(r2cc_mig_rnr_timer(MIG_RNR_TIMER + 1), MIG_RNR_TIMER);
	cr_assert_eq(r2cc_mig_rnr_timer(31), MIG_RNR_TIMER, "491.52 ms");
}

/* The primary left with a READ under way (rxe may keep its response's
 * place across RESET): back on it, a zero-length READ of r2cc's goes
 * first, its PSN before the replay's, its completion never delivered.
 * The standby was fresh: nothing ahead of the replay there. */
Test(failback, a_primary_left_mid_read_is_healed_first, .init = fb_setup,
     .fini = teardown, .timeout = 10)
{
	uint32_t psn;
	int n;

	r2cc_mig_test_peer_mr(PEER, 1, 9, 0x10009);
	/* 4 packets at the fixture's MTU of 1024 */
	post_sized(1, IBV_WR_RDMA_READ, 4096, IBV_SEND_SIGNALED);
	fo_rail_down(0);
	peer_moves(PEER_QPN, 0x500, 0, false);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	cr_assert_eq(back.nsent, 1);
	cr_assert_eq(back.sent[0], 1, "the READ first on the standby");
	r2cc_health_report(0, R2CC_RAIL_UP, R2CC_CAUSE_CARRIER);
	psn = round_begun();
	n = prim.nsent;
	fo_peer_fb(R2CC_CTRL_FB_READY, 0, PEER_PSN);
	/* the READ not executed on the standby either */
	peer_says_why(R2CC_CTRL_FAILOVER, R2CC_CTRL_WHY_FAILBACK, true,
		      back.sq_psn, 0);
	peer_says_why(R2CC_CTRL_FAILOVER_ACK, R2CC_CTRL_WHY_FAILBACK, true,
		      back.sq_psn, 0);
	fo_peer_fb(R2CC_CTRL_FB_POSTED, 0, PEER_PSN);
	cr_assert_eq(prim.sq_psn, psn);
	cr_assert_eq(prim.nsent, n + 2);
	cr_assert_eq(prim.sent[n], R2CC_HEAL_WRID, "the heal first");
	cr_assert_not(prim.flags[n] & IBV_SEND_SIGNALED);
	cr_assert_eq(prim.sent[n + 1], 1, "then the READ again");
	cr_assert_eq(r2cc_sendlog_peek(mq->slog, 0)->first_psn,
		     (psn + 1) & 0xffffff, "after the heal's PSN");
	cr_assert_eq(primary_wc_of(R2CC_HEAL_WRID, IBV_WC_SUCCESS,
				   IBV_WC_RDMA_READ, false),
		     0, "hidden");
	cr_assert_eq(primary_wc_of(1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, false),
		     1, "the READ's delivered");
	cr_assert(mq->bstale, "the standby left reading: healed when used");
	cr_assert_not(mq->pstale);
}

/* Moving back, our replay waits for the peer's receives on its primary:
 * its FAILOVER brings our ACK at once (what its SENDs will find
 * consumed), the replay comes with its POSTED of this round, once, and
 * takes what the program posted meanwhile with it. Our receives are
 * re-posted on its ACK, and our POSTED says so. */
Test(failback, a_move_back_replays_once_the_peers_receives_are_reposted,
     .init = fb_setup, .fini = teardown, .timeout = 10)
{
	const struct r2cc_ctrl_msg *a, *r;
	uint32_t psn;
	int n, from;

	fo_on_the_standby(); /* WR 1 done: one of the peer's receives */
	post_op(2, IBV_WR_SEND);
	post_op(3, IBV_WR_SEND);
	cr_assert_eq(back.nsent, 3);
	psn = round_begun();
	fo_peer_fb(R2CC_CTRL_FB_READY, 0, PEER_PSN);
	cr_assert_eq(back.state, IBV_QPS_ERR, "the standby fenced");
	n = prim.nsent;
	from = fo_nsent;
	/* it executed WR 2, not WR 3 */
	peer_says_why(R2CC_CTRL_FAILOVER, R2CC_CTRL_WHY_FAILBACK, true,
		      (back.sq_psn + 2) & 0xffffff, 0);
	a = fo_last(R2CC_CTRL_FAILOVER_ACK);
	cr_assert(a && sent_since(from, R2CC_CTRL_FAILOVER_ACK) == 1,
		  "our ACK at once");
	cr_assert_eq(a->failover.recvs, 2, "WRs 1 and 2 took receives");
	cr_assert_eq(prim.nsent, n, "no replay before its receives");
	post_op(4, IBV_WR_SEND); /* logged, posted by the replay */
	cr_assert_eq(prim.nsent, n);
	fo_peer_fb(R2CC_CTRL_FB_POSTED, 0, PEER_PSN + 1);
	cr_assert_eq(prim.nsent, n, "another round's POSTED moves nothing");
	peer_says_why(R2CC_CTRL_FAILOVER_ACK, R2CC_CTRL_WHY_FAILBACK, true,
		      (back.sq_psn + 2) & 0xffffff, 0);
	r = fo_last(R2CC_CTRL_FAILBACK);
	cr_assert(r && r->failback.phase == R2CC_CTRL_FB_POSTED &&
			  r->failback.psn == psn,
		  "ours re-posted, the peer told");
	cr_assert_eq(prim.nsent, n);
	fo_peer_fb(R2CC_CTRL_FB_POSTED, 0, PEER_PSN);
	cr_assert_eq(prim.nsent, n + 2, "WRs 3 and 4 replayed");
	cr_assert_eq(prim.sent[n], 3);
	cr_assert_eq(prim.sent[n + 1], 4);
	cr_assert_eq(sent_since(from, R2CC_CTRL_FAILOVER_ACK), 1,
		     "no second ACK");
	cr_assert_eq(mq->life, R2CC_LIFE_RUN, "moved back");
	fo_peer_fb(R2CC_CTRL_FB_POSTED, 0, PEER_PSN);
	cr_assert_eq(prim.nsent, n + 2, "a POSTED again replays nothing");
}

/* Its READY lost (or behind a backlog at the peer): the peer's move, on
 * our READY, still finds the primary recycled for it. */
Test(failback, a_move_back_without_the_peers_ready_is_joined, .init = fb_setup,
     .fini = teardown, .timeout = 10)
{
	uint32_t psn;

	fo_on_the_standby();
	psn = round_begun();
	peer_moves_back();
	moved_back(psn);
}

/* Given up: the peer silent past the bound, the primary back in ERR. Its
 * READY then is stale, but its move (it had ours) is joined: the primary
 * connected again as it was. */
Test(failback, a_round_given_up_here_is_joined_when_the_peer_moves,
     .init = fb_setup, .fini = teardown, .timeout = 10)
{
	uint32_t psn;

	fo_on_the_standby();
	psn = round_begun();
	r2cc_mig_test_fb_ago(mq, MIG_FENCE_BOUND_MS + 1000);
	r2cc_mig_tick();
	cr_assert_eq(prim.state, IBV_QPS_ERR, "given up: the primary in ERR");
	cr_assert_eq(back.state, IBV_QPS_RTS, "still on the standby");
	prim.rq_psn = prim.sq_psn = 0;
	fo_peer_fb(R2CC_CTRL_FB_READY, 0, PEER_PSN);
	cr_assert_eq(back.state, IBV_QPS_RTS, "a stale READY moves nothing");
	peer_moves_back();
	moved_back(psn);
}

/* No round of ours (nothing proposed, no READY said): the peer's primary
 * cannot be connected to ours, the move is refused and the QP stays on
 * its standby. */
Test(failback, a_move_back_on_no_round_is_refused, .init = fb_setup,
     .fini = teardown, .timeout = 10)
{
	fo_on_the_standby();
	refused();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
}

/* The peer proposed again after the round we said READY in: that round
 * is over, a move on it is refused. */
Test(failback, a_round_the_peer_proposed_past_is_not_joined, .init = fb_setup,
     .fini = teardown, .timeout = 10)
{
	fo_on_the_standby();
	round_begun();
	r2cc_mig_test_fb_ago(mq, MIG_FENCE_BOUND_MS + 1000);
	r2cc_mig_tick();
	cr_assert_eq(prim.state, IBV_QPS_ERR, "given up");
	fo_peer_fb(R2CC_CTRL_FB_PROPOSE, 0, PEER_PSN + 1); /* refused: hold */
	refused();
	cr_assert_eq(prim.state, IBV_QPS_ERR);
}

/* A round that is not urgent starts in the tick, not in the handler of
 * the peer's PROPOSE (a tick starts MIG_FB_STARTS at most: recycles are
 * slow, and the messages of moves under way must not wait behind them). */
Test(failback, a_round_starts_in_the_tick, .init = fb_setup, .fini = teardown,
     .timeout = 10)
{
	const struct r2cc_ctrl_msg *r;
	uint32_t psn;

	/* Only this test's ticks: the channel thread's own could start the
	 * round between the PROPOSE's handler and the check after it */
	r2cc_mig_test_quiet(true);
	fo_on_the_standby();
	r2cc_mig_test_fb_hold(0);
	r2cc_mig_tick();
	r = fo_last(R2CC_CTRL_FAILBACK);
	cr_assert(r && r->failback.phase == R2CC_CTRL_FB_PROPOSE &&
			  r->failback.flags & R2CC_CTRL_FB_RECOVERED,
		  "ours proposed: rail 0 came back");
	fo_peer_fb(R2CC_CTRL_FB_PROPOSE, R2CC_CTRL_FB_RECOVERED, PEER_PSN);
	r = fo_last(R2CC_CTRL_FAILBACK);
	cr_assert_eq(r->failback.phase, R2CC_CTRL_FB_PROPOSE, "not started");
	cr_assert_neq(prim.state, IBV_QPS_RTS, "recycled in the handler");
	r2cc_mig_tick();
	r = fo_last(R2CC_CTRL_FAILBACK);
	cr_assert(r && r->failback.phase == R2CC_CTRL_FB_READY, "READY sent");
	cr_assert_eq(prim.state, IBV_QPS_RTS, "the primary recycled");
	cr_assert_eq(prim.rq_psn, PEER_PSN, "towards the peer's");
	psn = r->failback.psn;
	fo_peer_fb(R2CC_CTRL_FB_READY, 0, PEER_PSN);
	cr_assert_eq(back.state, IBV_QPS_ERR, "both READY: the standby fenced");
	peer_moves_back();
	moved_back(psn);
}

/* The peer gave up the round we recycled for and proposes another: our
 * primary is connected to the old round's PSN, so that round ends here
 * too (the primary back in ERR), and the new one starts afresh: a READY
 * of it never moves the QP onto a primary connected to the old PSN. */
Test(failback, a_new_proposal_ends_the_round_begun, .init = fb_setup,
     .fini = teardown, .timeout = 10)
{
	const struct r2cc_ctrl_msg *r;

	fo_on_the_standby();
	round_begun();
	fo_peer_fb(R2CC_CTRL_FB_PROPOSE, R2CC_CTRL_FB_URGENT, PEER_PSN + 1);
	r = fo_last(R2CC_CTRL_FAILBACK);
	cr_assert(r && r->failback.phase == R2CC_CTRL_FB_READY,
		  "the new round begun");
	cr_assert_eq(prim.state, IBV_QPS_RTS, "the primary recycled again");
	cr_assert_eq(prim.rq_psn, PEER_PSN + 1, "towards the new round");
	cr_assert_eq(prim.sq_psn, r->failback.psn);
	fo_peer_fb(R2CC_CTRL_FB_READY, 0, PEER_PSN + 1);
	cr_assert_eq(back.state, IBV_QPS_ERR, "both READY: the standby fenced");
}
