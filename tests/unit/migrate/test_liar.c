/* SPDX-License-Identifier: MIT */
/*
 * test_liar.c - a peer that holds the job key but lies (issue 18's
 * hostile peer, at the unit level; the peer is played as in
 * test_failover.c): an rq_psn past all that was sent or before what the
 * program already saw complete, more receives consumed than were posted,
 * a FAILOVER for a QP it does not own or one that has moved already.
 * Each time r2cc refuses: nothing is replayed twice, no success is made
 * up for work the peer cannot have executed, the QP at worst gets the
 * native errors, at once, and the other QPs are untouched.
 */
#include <criterion/criterion.h>
#include <string.h>

/* before fo_fixture.h: its global mq would shadow their parameters */
#include "mig_int.h"

#include "fo_fixture.h"

/* What the program polls from the stash: no success among @n. */
static int no_success(int n, struct ibv_wc *wc)
{
	int i, got = r2cc_mig_poll_stash(mc, n, wc);

	for (i = 0; i < got; i++)
		cr_assert_neq(wc[i].status, IBV_WC_SUCCESS,
			      "wr_id %llu made up as done",
			      (unsigned long long)wc[i].wr_id);
	return got;
}

/* Two SENDs out (PSNs 0x500, 0x501), the first failed: fenced. */
static void two_out_fenced(void)
{
	post(1);
	post(2);
	cr_assert_eq(primary_wc(1, IBV_WC_RETRY_EXC_ERR), 0);
	cr_assert_eq(prim.state, IBV_QPS_ERR);
}

Test(liar, an_rq_psn_past_all_that_was_sent_is_refused, .init = setup,
     .fini = teardown, .timeout = 20)
{
	struct ibv_wc wc[8];

	two_out_fenced();
	peer_says(R2CC_CTRL_FAILOVER, true, 0x600, 0);
	cr_assert_eq(back.nsent, 0, "replayed on a lie");
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_FAILED);
	/* (WR 2's flush comes from the fenced primary itself) */
	cr_assert_eq(no_success(8, wc), 1, "the native error, at once");
	cr_assert_eq(wc[0].wr_id, 1);
	cr_assert_eq(wc[0].status, IBV_WC_RETRY_EXC_ERR);
}

Test(liar, an_rq_psn_before_what_completed_is_refused, .init = setup,
     .fini = teardown, .timeout = 20)
{
	struct ibv_wc wc[8];

	post(1);
	cr_assert_eq(primary_wc(1, IBV_WC_SUCCESS), 1); /* 0x500 executed */
	post(2); /* PSN 0x501 */
	cr_assert_eq(primary_wc(2, IBV_WC_RETRY_EXC_ERR), 0);
	/* It claims not even the completed WR arrived: replaying from
	 * there would execute it twice */
	peer_says(R2CC_CTRL_FAILOVER, true, 0x4ff, 0);
	cr_assert_eq(back.nsent, 0, "replayed on a lie");
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_FAILED);
	cr_assert_eq(no_success(8, wc), 1);
	cr_assert_eq(wc[0].wr_id, 2);
}

Test(liar, more_receives_consumed_than_posted_is_refused, .init = setup,
     .fini = teardown, .timeout = 20)
{
	struct ibv_recv_wr rwr = { .wr_id = 50 }, *rbad;
	struct ibv_wc wc[8];

	cr_assert_eq(r2cc_mig_post_recv(mq, &rwr, &rbad, f_post_recv), 0);
	two_out_fenced();
	peer_says(R2CC_CTRL_FAILOVER, true, 0x500, 0);
	cr_assert_eq(back.nsent, 2, "the sends replayed");
	peer_says(R2CC_CTRL_FAILOVER_ACK, true, 0x500, 100);
	cr_assert_eq(back.nrecv, 0, "receives moved on a lie");
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_FAILED);
	cr_assert_eq(mq->life, R2CC_LIFE_OFF, "the move not ended at once");
	no_success(8, wc);
}

Test(liar, a_failover_for_a_qp_of_another_peer_is_dropped, .init = setup,
     .fini = teardown, .timeout = 20)
{
	struct r2cc_ctrl_msg m;

	post(1);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_FAILOVER;
	m.failover.qpn = PEER_QPN; /* ours is connected to PEER's QP */
	m.failover.reason = R2CC_CTRL_WHY_PEER;
	m.failover.flags = R2CC_CTRL_FO_PSN_VALID;
	m.failover.rq_psn = 0x500;
	r2cc_mig_test_peer_says(PEER + 1, &m);
	m.failover.qpn = PEER_QPN + 7; /* no such QP of PEER's */
	r2cc_mig_test_peer_says(PEER, &m);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	cr_assert_neq(prim.state, IBV_QPS_ERR, "fenced on a stranger's word");
	cr_assert_eq(back.nsent, 0);
}

Test(liar, a_second_failover_of_a_moved_qp_replays_nothing_again, .init = setup,
     .fini = teardown, .timeout = 20)
{
	struct ibv_wc wc[8];

	two_out_fenced();
	peer_moves(PEER_QPN, 0x500, 0, false);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	cr_assert_eq(back.nsent, 2);
	peer_moves(PEER_QPN, 0x500, 0, false);
	peer_moves(PEER_QPN, 0x400, 5, false);
	cr_assert_eq(back.nsent, 2, "replayed twice");
	cr_assert_neq(back.state, IBV_QPS_ERR);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	cr_assert_eq(r2cc_mig_poll_stash(mc, 8, wc), 0);
}
