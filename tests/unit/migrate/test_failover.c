/* SPDX-License-Identifier: MIT */
/*
 * test_failover.c - the move (post.c, complete.c, fence.c, move.c) with
 * a scripted verbs table: QPs and CQs whose provider ops record what is
 * posted and hand back scripted completions. The peer is
 * played by calling r2cc_mig_got_failover() as the control thread would.
 * Checked: the fenced primary's completions hidden, the replay decision
 * from the peer's rq_psn, the backup's completions merged into the
 * program's CQ with its qp_num and wr_ids in order, posts after the move
 * going to the backup, an abandoned move giving back what it hid (in
 * order, then flushes for what was posted meanwhile), r2cc's own
 * completion-event WR never reaching the program, and two QPs on one SRQ
 * moving together: the consumed, unpolled receives left to the fenced
 * QPs, the rest re-posted on the backup SRQ in posting order; a QP
 * that cannot follow its SRQ sinks the move without being fenced; a lazy
 * QP's backup made at the fence and replayed into only once both
 * backups are connected.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bind.h"
#include "fo_fixture.h"
#include "tick.h"

Test(failover, hides_the_fenced_primary_and_merges_the_backup_in_order,
     .init = setup, .fini = teardown, .timeout = 20)
{
	struct ibv_wc wc[8];
	int n;

	post(1);
	post(2);
	post(3); /* PSNs 0x500, 0x501, 0x502 */
	cr_assert_eq(prim.nsent, 3);
	cr_assert_eq(primary_wc(1, IBV_WC_SUCCESS), 1, "delivered");
	/* The path dies: the error is r2cc's, the primary fenced. */
	cr_assert_eq(primary_wc(2, IBV_WC_RETRY_EXC_ERR), 0, "hidden");
	cr_assert_eq(prim.state, IBV_QPS_ERR);
	cr_assert_eq(back.nsent, 0, "nothing replayed before the peer's psn");
	/* The peer executed up to, not including, 0x501: 2 and 3 replay. */
	peer_says(R2CC_CTRL_FAILOVER, true, 0x501, 0);
	cr_assert_eq(back.nsent, 2);
	cr_assert_eq(back.sent[0], 2);
	cr_assert_eq(back.sent[1], 3);
	cr_assert_eq(primary_wc(3, IBV_WC_WR_FLUSH_ERR), 0, "hidden");
	peer_says(R2CC_CTRL_FAILOVER_ACK, true, 0x501, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	/* The backup's completions, in the program's terms. */
	add_wc(&bcq, 2, IBV_WC_SUCCESS, IBV_WC_SEND, back.qp.qp_num);
	add_wc(&bcq, 3, IBV_WC_SUCCESS, IBV_WC_SEND, back.qp.qp_num);
	n = r2cc_mig_poll_more(mc, 8, wc);
	cr_assert_eq(n, 2);
	cr_assert_eq(wc[0].wr_id, 2);
	cr_assert_eq(wc[1].wr_id, 3);
	cr_assert_eq(wc[0].qp_num, prim.qp.qp_num);
	cr_assert_eq(wc[1].qp_num, prim.qp.qp_num);
	/* A late flush of the old primary stays hidden; new work goes to
	 * the backup. */
	cr_assert_eq(primary_wc(3, IBV_WC_WR_FLUSH_ERR), 0);
	post(4);
	cr_assert_eq(prim.nsent, 3);
	cr_assert_eq(back.nsent, 3);
	cr_assert_eq(back.sent[2], 4);
}

Test(failover, a_zero_length_rdma_write_after_the_move_needs_no_rkey,
     .init = setup, .fini = teardown, .timeout = 20)
{
	struct ibv_sge sge = { .addr = 0x1000, .length = 100, .lkey = 7 };
	struct ibv_send_wr wr = { .wr_id = 7,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	post(1);
	cr_assert_eq(primary_wc(1, IBV_WC_RETRY_EXC_ERR), 0);
	peer_says(R2CC_CTRL_FAILOVER, true, 0x501, 0);
	peer_says(R2CC_CTRL_FAILOVER_ACK, true, 0x501, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	/* UCX's flush: no bytes, rkey 0, which the peer never announced */
	cr_assert_eq(r2cc_mig_post_send(mq, &wr, &bad, f_post_send, NULL), 0);
	cr_assert_eq(back.nsent, 1);
	cr_assert_eq(back.sent[0], 7);
	cr_assert_eq(back.last_rkey, 0);
	/* With bytes to move, the same unknown key cannot go */
	wr.wr_id = 8;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	cr_assert_neq(r2cc_mig_post_send(mq, &wr, &bad, f_post_send, NULL), 0);
	cr_assert_eq(back.nsent, 1);
}

Test(failover, a_connection_the_program_ends_flushes_to_the_program,
     .init = setup, .fini = teardown, .timeout = 20)
{
	struct ibv_wc wc[8];

	post(1);
	post(2);
	/* rdma_disconnect: the program's QP to ERR. Its flushes are its
	 * own, not a path's fault: delivered, nothing fenced or moved. */
	r2cc_mig_closed(mq);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_NONE);
	cr_assert_eq(primary_wc(1, IBV_WC_WR_FLUSH_ERR), 1, "delivered");
	cr_assert_eq(primary_wc(2, IBV_WC_WR_FLUSH_ERR), 1, "delivered");
	cr_assert_neq(prim.state, IBV_QPS_ERR, "r2cc fenced nothing");
	cr_assert_eq(back.nsent, 0);
	cr_assert_eq(r2cc_mig_poll_more(mc, 8, wc), 0);
}

Test(failover, a_moved_connection_the_program_ends_flushes_on_the_backup,
     .init = setup, .fini = teardown, .timeout = 20)
{
	struct ibv_wc wc[8];

	post(1);
	cr_assert_eq(primary_wc(1, IBV_WC_RETRY_EXC_ERR), 0);
	peer_says(R2CC_CTRL_FAILOVER, true, 0x500, 0);
	peer_says(R2CC_CTRL_FAILOVER_ACK, true, 0x500, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	cr_assert_eq(back.nsent, 1);
	/* The work outstanding on the backup flushes there, and reaches the
	 * program as its provider reports it. */
	r2cc_mig_closed(mq);
	cr_assert_eq(back.state, IBV_QPS_ERR);
	add_wc(&bcq, 1, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, back.qp.qp_num);
	cr_assert_eq(r2cc_mig_poll_more(mc, 8, wc), 1);
	cr_assert_eq(wc[0].wr_id, 1);
	cr_assert_eq(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	cr_assert_eq(wc[0].qp_num, prim.qp.qp_num);
}

Test(failover, a_memory_window_operation_ends_protection_as_it_is_posted,
     .init = setup, .fini = teardown, .timeout = 20)
{
	struct ibv_send_wr wr = { .wr_id = 9,
				  .opcode = IBV_WR_LOCAL_INV,
				  .send_flags = IBV_SEND_SIGNALED,
				  .invalidate_rkey = 0x1234 },
			   *bad;

	post(1);
	cr_assert_eq(r2cc_mig_post_send(mq, &wr, &bad, f_post_send, NULL), 0);
	/* Unprotected before the QP's lock let go of it: its completion,
	 * and the ones before it, are the program's, as the provider
	 * reports them */
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_NONE);
	cr_assert_eq(prim.nsent, 2);
	cr_assert_eq(primary_wc(1, IBV_WC_SUCCESS), 1, "delivered");
	cr_assert_eq(primary_wc_of(9, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, false),
		     1, "delivered");
	post(3);
	cr_assert_eq(primary_wc(3, IBV_WC_RETRY_EXC_ERR), 1,
		     "the native error: no move");
	cr_assert_neq(prim.state, IBV_QPS_ERR, "r2cc fenced nothing");
	cr_assert_eq(back.nsent, 0);
}

Test(failover, work_the_peer_executed_completes_without_a_replay, .init = setup,
     .fini = teardown, .timeout = 20)
{
	struct ibv_wc wc[8];

	post(1);
	post(2);
	cr_assert_eq(primary_wc(1, IBV_WC_RETRY_EXC_ERR), 0);
	/* The peer executed both (its rq_psn is past 0x501): no replay,
	 * two successes synthesised, in order. */
	peer_says(R2CC_CTRL_FAILOVER, true, 0x502, 0);
	cr_assert_eq(back.nsent, 0);
	cr_assert_eq(r2cc_mig_poll_stash(mc, 8, wc), 2);
	cr_assert_eq(wc[0].wr_id, 1);
	cr_assert_eq(wc[1].wr_id, 2);
	cr_assert_eq(wc[0].status, IBV_WC_SUCCESS);
	cr_assert_eq(wc[0].qp_num, prim.qp.qp_num);
}

Test(failover, a_refused_move_gives_back_what_it_hid_in_order, .init = setup,
     .fini = teardown, .timeout = 20)
{
	struct ibv_wc wc[8];

	post(1);
	post(2);
	cr_assert_eq(primary_wc(1, IBV_WC_RETRY_EXC_ERR), 0);
	cr_assert_eq(primary_wc(2, IBV_WC_WR_FLUSH_ERR), 0);
	post(3); /* fenced: logged, posted nowhere */
	cr_assert_eq(prim.nsent, 2);
	cr_assert_eq(back.nsent, 0);
	peer_says(R2CC_CTRL_FAILOVER, false, 0, 0); /* it cannot move */
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_FAILED);
	cr_assert_eq(r2cc_mig_poll_stash(mc, 8, wc), 3);
	cr_assert_eq(wc[0].wr_id, 1);
	cr_assert_eq(wc[0].status, IBV_WC_RETRY_EXC_ERR);
	cr_assert_eq(wc[1].wr_id, 2);
	cr_assert_eq(wc[1].status, IBV_WC_WR_FLUSH_ERR);
	cr_assert_eq(wc[2].wr_id, 3);
	cr_assert_eq(wc[2].status, IBV_WC_WR_FLUSH_ERR);
	/* From now on the program's QP is its own. */
	cr_assert_eq(primary_wc(9, IBV_WC_WR_FLUSH_ERR), 1);
}

/* A move whose peer does not answer: given up once the peer process
 * has been silent for the bound too, or at the longest bound even if it
 * is heard from (a peer that moves a thousand QPs answers late). */
Test(failover, a_silent_peer_ends_the_move_at_the_bound, .init = setup,
     .fini = teardown, .timeout = 20)
{
	post(1);
	cr_assert_eq(primary_wc(1, IBV_WC_RETRY_EXC_ERR), 0);
	cr_assert_eq(prim.state, IBV_QPS_ERR, "fenced");
	r2cc_mig_test_fault_ago(mq, MIG_FENCE_BOUND_MS + 1000);
	fo_heard_ns = r2cc_mig_now_ns(); /* it answers other QPs */
	r2cc_mig_tick();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY,
		     "given up while the peer is heard from");
	fo_heard_ns = r2cc_mig_now_ns() - (MIG_FENCE_BOUND_MS + 1) * 1000000ULL;
	r2cc_mig_tick();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_FAILED,
		     "not given up with the peer silent");
	cr_assert_eq(primary_wc(1, IBV_WC_RETRY_EXC_ERR), 1,
		     "the hidden error not given back");
}

/* Heard from, but none of our moves answered lately: given up at the
 * longest bound. */
Test(failover, a_busy_peer_ends_the_move_at_the_longest_bound, .init = setup,
     .fini = teardown, .timeout = 20)
{
	post(1);
	cr_assert_eq(primary_wc(1, IBV_WC_RETRY_EXC_ERR), 0);
	r2cc_mig_test_fault_ago(mq, MIG_FENCE_MAX_MS - 1000);
	fo_heard_ns = r2cc_mig_now_ns();
	r2cc_mig_tick();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	r2cc_mig_test_fault_ago(mq, MIG_FENCE_MAX_MS + 1000);
	fo_heard_ns = r2cc_mig_now_ns();
	fo_answered_ns =
		r2cc_mig_now_ns() - (MIG_FENCE_BOUND_MS + 1) * 1000000ULL;
	r2cc_mig_tick();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_FAILED);
}

/* A peer that moves thousands of QPs at once answers the last ones past
 * the longest bound: while it still answers moves of ours, the move
 * waits, up to the ceiling. */
Test(failover, a_peer_still_moving_ours_is_waited_for_to_the_ceiling,
     .init = setup, .fini = teardown, .timeout = 20)
{
	post(1);
	cr_assert_eq(primary_wc(1, IBV_WC_RETRY_EXC_ERR), 0);
	r2cc_mig_test_fault_ago(mq, MIG_FENCE_MAX_MS + 1000);
	fo_heard_ns = fo_answered_ns = r2cc_mig_now_ns();
	r2cc_mig_tick();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY,
		     "given up while the peer still moves our QPs");
	r2cc_mig_test_fault_ago(mq, MIG_FENCE_CEIL_MS - 1000);
	fo_heard_ns = fo_answered_ns = r2cc_mig_now_ns();
	r2cc_mig_tick();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	r2cc_mig_test_fault_ago(mq, MIG_FENCE_CEIL_MS + 1000);
	fo_heard_ns = fo_answered_ns = r2cc_mig_now_ns();
	r2cc_mig_tick();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_FAILED,
		     "not given up at the ceiling");
}

/*
 * On the backup after a failover, a READ, a WRITE and a SEND, all executed
 * by the peer; then both ends move the QP back: the READ is read again on
 * the primary (its data may not have landed), the WRITE and SEND complete
 * by synthesis once it has (which may be before the peer's ACK).
 */
static void moved_back_behind_a_reread(void)
{
	struct ibv_wc wc[8];

	post(1); /* PSN 0x500 */
	cr_assert_eq(primary_wc(1, IBV_WC_RETRY_EXC_ERR), 0);
	peer_says(R2CC_CTRL_FAILOVER, true, 0x500, 0);
	peer_says(R2CC_CTRL_FAILOVER_ACK, true, 0x500, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	add_wc(&bcq, 1, IBV_WC_SUCCESS, IBV_WC_SEND, back.qp.qp_num);
	cr_assert_eq(r2cc_mig_poll_more(mc, 8, wc), 1);
	r2cc_mig_test_peer_mr(PEER, 1, 9, 0x10009);
	post_op(2, IBV_WR_RDMA_READ); /* on the backup: PSN 0x101 */
	post_op(3, IBV_WR_RDMA_WRITE);
	post_op(4, IBV_WR_SEND);
	cr_assert_eq(back.nsent, 4);
	r2cc_mig_test_move_back(mq, 0x900, PEER_FB_PSN);
	cr_assert_eq(back.state, IBV_QPS_ERR, "the backup fenced");
	peer_says_why(R2CC_CTRL_FAILOVER, R2CC_CTRL_WHY_FAILBACK, true, 0x104,
		      0);
	fo_peer_fb(R2CC_CTRL_FB_POSTED, 0, PEER_FB_PSN);
	cr_assert_eq(prim.nsent, 2, "only the READ replays");
	cr_assert_eq(prim.sent[1], 2);
	cr_assert_eq(r2cc_mig_poll_stash(mc, 8, wc), 0,
		     "nothing completes before the READ");
}

/*
 * The program's unsignaled READ and signaled SEND, both executed by the
 * peer: the READ is read again on the backup, posted signaled (nothing
 * else would say it is done), its completion hidden, and then the SEND
 * completes - not before, and the job does not wait for ever (lab: scale,
 * 27 QPs of 1024 stuck with both WRs uncompleted).
 */
Test(failover, an_unsignaled_reread_completes_the_send_behind_it, .init = setup,
     .fini = teardown, .timeout = 20)
{
	struct ibv_wc wc[8];
	int n;

	r2cc_mig_test_peer_mr(PEER, 1, 9, 0x10009); /* the READ's rkey */
	post_flags(1, IBV_WR_RDMA_READ, 0); /* PSN 0x500 */
	post(2); /* 0x501 */
	peer_moves(PEER_QPN, 0x502, 0, false);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	cr_assert_eq(back.nsent, 1, "only the READ replays");
	cr_assert_eq(back.sent[0], 1);
	cr_assert(back.flags[0] & IBV_SEND_SIGNALED, "posted signaled");
	cr_assert_eq(r2cc_mig_poll_more(mc, 8, wc), 0,
		     "the SEND waits for the READ");
	add_wc(&bcq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, back.qp.qp_num);
	n = r2cc_mig_poll_more(mc, 8, wc);
	n += r2cc_mig_poll_more(mc, 8, wc + n);
	cr_assert_eq(n, 1, "the READ's own completion hidden");
	cr_assert_eq(wc[0].wr_id, 2);
	cr_assert_eq(wc[0].opcode, IBV_WC_SEND);
	cr_assert_eq(wc[0].status, IBV_WC_SUCCESS);
}

/* The poll queues in the stash already (something was pushed since it
 * began): the READ goes there before the WRITE and SEND after it. */
Test(failover, a_reread_queued_behind_comes_before_the_work_after_it,
     .init = setup, .fini = teardown, .timeout = 20)
{
	struct ibv_wc wc[8];
	uint64_t pushed;

	moved_back_behind_a_reread();
	pushed = r2cc_mig_pushed(mc);
	cr_assert_eq(primary_wc_of(2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, true),
		     2, "stashed");
	cr_assert_eq(r2cc_mig_pushed(mc) - pushed, 3);
	cr_assert_eq(r2cc_mig_poll_stash(mc, 8, wc), 3);
	cr_assert_eq(wc[0].wr_id, 2);
	cr_assert_eq(wc[0].opcode, IBV_WC_RDMA_READ);
	cr_assert_eq(wc[1].wr_id, 3);
	cr_assert_eq(wc[1].opcode, IBV_WC_RDMA_WRITE);
	cr_assert_eq(wc[2].wr_id, 4);
	cr_assert_eq(wc[2].opcode, IBV_WC_SEND);
}

/* Not queueing: the READ is delivered now, the two after it wait in the
 * stash, and the count of pushes moved (the poll puts the rest of its
 * batch behind them). */
Test(failover, a_reread_delivered_now_leaves_the_work_after_it_stashed,
     .init = setup, .fini = teardown, .timeout = 20)
{
	struct ibv_wc wc[8];
	uint64_t pushed;

	moved_back_behind_a_reread();
	pushed = r2cc_mig_pushed(mc);
	cr_assert_eq(primary_wc_of(2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, false),
		     1, "delivered");
	cr_assert_eq(r2cc_mig_pushed(mc) - pushed, 2);
	cr_assert_eq(r2cc_mig_poll_stash(mc, 8, wc), 2);
	cr_assert_eq(wc[0].wr_id, 3);
	cr_assert_eq(wc[1].wr_id, 4);
}

/* The move back done, the backup cannot be re-armed (here: no peer to
 * tell): the QP runs unprotected from now on, but what the log owes still
 * completes behind the READ; what is posted since passes through. */
Test(failover, a_qp_unprotected_after_a_move_still_completes_what_it_owes,
     .init = setup, .fini = teardown, .timeout = 20)
{
	struct ibv_wc wc[8];

	moved_back_behind_a_reread();
	peer_says_why(R2CC_CTRL_FAILOVER_ACK, R2CC_CTRL_WHY_FAILBACK, true,
		      0x104, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_NONE, "not re-armed");
	cr_assert_eq(r2cc_mig_poll_stash(mc, 8, wc), 0);
	cr_assert_eq(primary_wc_of(2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, false),
		     1, "delivered");
	cr_assert_eq(r2cc_mig_poll_stash(mc, 8, wc), 2);
	cr_assert_eq(wc[0].wr_id, 3);
	cr_assert_eq(wc[0].status, IBV_WC_SUCCESS);
	cr_assert_eq(wc[1].wr_id, 4);
	post(5);
	cr_assert_eq(prim.sent[prim.nsent - 1], 5, "passthrough");
	cr_assert_eq(primary_wc(5, IBV_WC_SUCCESS), 1);
	cr_assert_eq(r2cc_mig_poll_stash(mc, 8, wc), 0);
}

/* The move back fails after the replay (both new QPs to ERR): the READ
 * read again flushes, and the work the peer executed after it flushes
 * behind it, as it would without r2cc. */
Test(failover, a_move_failed_after_its_replay_flushes_what_it_owes,
     .init = setup, .fini = teardown, .timeout = 20)
{
	struct ibv_wc wc[8];

	moved_back_behind_a_reread();
	r2cc_mig_test_unprotect(mq);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_FAILED);
	cr_assert_eq(primary_wc_of(2, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_READ,
				   false),
		     1, "delivered");
	cr_assert_eq(r2cc_mig_poll_stash(mc, 8, wc), 2);
	cr_assert_eq(wc[0].wr_id, 3);
	cr_assert_eq(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	cr_assert_eq(wc[1].wr_id, 4);
	cr_assert_eq(wc[1].status, IBV_WC_WR_FLUSH_ERR);
}

Test(failover, the_event_wr_never_reaches_the_program, .init = setup,
     .fini = teardown, .timeout = 20)
{
	cr_assert_eq(primary_wc(R2CC_RING_WRID, IBV_WC_WR_FLUSH_ERR), 0);
	cr_assert_eq(primary_wc(R2CC_RING_WRID, IBV_WC_LOC_QP_OP_ERR), 0);
}

/* ---- two QPs on one SRQ ---- */

static struct fake_qp prim2, back2;
static struct fake_cq bcq2;
static struct r2cc_mig_srq *srq;
static struct r2cc_mig_qp *mq2;

/* The module on, one lazy QP READY at RTS, no backup made yet. */
static void setup_lazy(void)
{
	start();
	qp_on(NULL, NULL);
	cr_assert_eq(nmade, 0, "no backup before a failover");
}

/* The peer's FAILOVER naming its lazy backup (connected to ours or not) */
static void peer_lazy_says(uint32_t rq_psn, bool connected)
{
	struct r2cc_ctrl_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_FAILOVER;
	m.failover.qpn = PEER_QPN;
	m.failover.reason = R2CC_CTRL_WHY_CQ_ERROR;
	m.failover.flags = R2CC_CTRL_FO_PSN_VALID | R2CC_CTRL_FO_BACKUP |
			   (connected ? R2CC_CTRL_FO_CONNECTED : 0);
	m.failover.rq_psn = rq_psn;
	m.failover.bqpn = 0x61;
	m.failover.bpsn = 0x700;
	r2cc_mig_test_peer_says(PEER, &m);
}

Test(failover, a_lazy_backup_is_made_at_the_fence_and_replays_once_both_connect,
     .init = setup_lazy, .fini = teardown, .timeout = 20)
{
	post(1);
	post(2);
	cr_assert_eq(primary_wc(1, IBV_WC_RETRY_EXC_ERR), 0, "hidden");
	cr_assert_eq(prim.state, IBV_QPS_ERR);
	cr_assert_eq(nmade, 1, "the backup made at the fence");
	cr_assert_eq(back.state, IBV_QPS_INIT, "not connected yet");
	/* The peer's backup, not yet connected to ours: ours connects to
	 * it, nothing replays into a QP that may still be in INIT. */
	peer_lazy_says(0x500, false);
	cr_assert_eq(back.state, IBV_QPS_RTS);
	cr_assert_eq(back.nsent, 0, "no replay before the peer's is connected");
	/* Now it is: the replay runs, once. */
	peer_lazy_says(0x500, true);
	cr_assert_eq(back.nsent, 2);
	cr_assert_eq(back.sent[0], 1);
	cr_assert_eq(back.sent[1], 2);
	peer_lazy_says(0x500, true);
	cr_assert_eq(back.nsent, 2, "a repeated FAILOVER replays nothing");
	peer_says(R2CC_CTRL_FAILOVER_ACK, true, 0x500, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	cr_assert_eq(nmade, 1);
}

/* A backup holds one send WR more than the program's QP: room for the
 * READ that clears a reused QP's completer ahead of a full replay */
Test(failover, a_backup_has_a_send_slot_to_spare, .init = setup_lazy,
     .fini = teardown, .timeout = 20)
{
	post(1);
	cr_assert_eq(primary_wc(1, IBV_WC_RETRY_EXC_ERR), 0, "hidden");
	cr_assert_eq(nmade, 1, "the backup made at the fence");
	cr_assert_eq(made_cap.max_send_wr, mq->cap.max_send_wr + 1);
	cr_assert_eq(made_cap.max_recv_wr, mq->cap.max_recv_wr);
	cr_assert(mq->bspare);
}

Test(failover, a_lazy_peer_connected_first_lets_the_replay_run_at_once,
     .init = setup_lazy, .fini = teardown, .timeout = 20)
{
	post(1);
	/* The peer fenced first, its backup made; told, this side makes
	 * its own, connects it and replays at once only when the peer's
	 * is connected to ours: not yet (it could not know ours). */
	peer_lazy_says(0x500, false);
	cr_assert_eq(nmade, 1);
	cr_assert_eq(prim.state, IBV_QPS_ERR);
	cr_assert_eq(back.state, IBV_QPS_RTS);
	cr_assert_eq(back.nsent, 0);
	peer_lazy_says(0x500, true);
	cr_assert_eq(back.nsent, 1);
}

Test(failover, a_lazy_backup_is_parked_after_the_move_back_and_reused,
     .init = setup_lazy, .fini = teardown, .timeout = 20)
{
	uint32_t psn;

	post(1);
	cr_assert_eq(primary_wc(1, IBV_WC_RETRY_EXC_ERR), 0);
	peer_lazy_says(0x500, true);
	peer_says(R2CC_CTRL_FAILOVER_ACK, true, 0x500, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	/* Moved back (nothing outstanding): the backup is parked, not
	 * re-armed, and the QP is protected again. */
	add_wc(&bcq, 1, IBV_WC_SUCCESS, IBV_WC_SEND, back.qp.qp_num);
	cr_assert_eq(r2cc_mig_poll_more(mc, 8, (struct ibv_wc[8]){ 0 }), 1);
	r2cc_mig_test_move_back(mq, 0x900, PEER_FB_PSN);
	/* The peer executed WR 1, the backup's first (its PSN random) */
	psn = (back.sq_psn + 1) & 0xffffff;
	peer_says_why(R2CC_CTRL_FAILOVER, R2CC_CTRL_WHY_FAILBACK, true, psn, 0);
	peer_says_why(R2CC_CTRL_FAILOVER_ACK, R2CC_CTRL_WHY_FAILBACK, true, psn,
		      0);
	fo_peer_fb(R2CC_CTRL_FB_POSTED, 0, PEER_FB_PSN);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	cr_assert_eq(back.state, IBV_QPS_RESET, "parked");
	/* The next fault takes it out of RESET: no new backup QP. */
	post(2);
	cr_assert_eq(primary_wc(2, IBV_WC_RETRY_EXC_ERR), 0);
	cr_assert_eq(back.state, IBV_QPS_INIT);
	cr_assert_eq(nmade, 1);
	peer_lazy_says(0x900, true);
	cr_assert_eq(back.state, IBV_QPS_RTS);
	cr_assert_eq(back.nsent, 2, "WR 1 before, WR 2 replayed now");
	cr_assert_eq(back.sent[1], 2);
}

static void setup_srq(void)
{
	struct ibv_srq_attr sa = { .max_wr = 8, .max_sge = 1 };
	struct ibv_qp_cap cap = { .max_send_wr = 8, .max_send_sge = 1 };
	struct ibv_qp_attr a;

	start();
	memset(&psrq, 0, sizeof(psrq));
	memset(&bsrq, 0, sizeof(bsrq));
	ctx.ops.post_srq_recv = f_post_srq;
	psrq.srq.context = bsrq.srq.context = &ctx;
	srq = r2cc_mig_srq_new(&psrq.srq, &sa);
	cr_assert(srq);
	r2cc_mig_test_srq_bound(srq, &bsrq.srq, 1);
	setup_on(srq);
	memset(&prim2, 0, sizeof(prim2));
	memset(&back2, 0, sizeof(back2));
	memset(&bcq2, 0, sizeof(bcq2));
	prim2.qp.context = back2.qp.context = bcq2.cq.context = &ctx;
	prim2.qp.qp_num = 0x12;
	back2.qp.qp_num = 0x52;
	mq2 = r2cc_mig_qp_new(&prim2.qp, &cap, false, mc, mc, srq, NULL);
	cr_assert(mq2);
	r2cc_mig_test_bound(mq2, &back2.qp, &bcq2.cq, PEER, PEER_QPN + 1,
			    0x200);
	memset(&a, 0, sizeof(a));
	a.path_mtu = IBV_MTU_1024;
	a.sq_psn = 0x600;
	cr_assert_eq(r2cc_mig_rts(mq2, &a), 0);
}

static void teardown_srq(void)
{
	r2cc_mig_release(mq2);
	r2cc_mig_test_free(mq2);
	teardown();
	r2cc_mig_srq_release(srq);
}

static void srq_post(uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = 0x2000, .length = 64, .lkey = 9 };
	struct ibv_recv_wr wr = { .wr_id = wr_id,
				  .sg_list = &sge,
				  .num_sge = 1 },
			   *bad;

	cr_assert_eq(r2cc_mig_srq_post(srq, &wr, &bad, f_post_srq), 0);
}

/* A receive of @wr_id completing on @q's primary: 1 delivered. */
static int recv_wc(struct r2cc_mig_qp *q, uint32_t qpn, uint64_t wr_id)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = wr_id;
	wc.opcode = IBV_WC_RECV;
	wc.qp_num = qpn;
	return r2cc_mig_wc(q, mc, &wc, false);
}

Test(failover, qps_on_an_srq_move_together_and_its_receives_once,
     .init = setup_srq, .fini = teardown_srq, .timeout = 20)
{
	uint64_t id;

	for (id = 100; id < 106; id++)
		srq_post(id);
	cr_assert_eq(psrq.n, 6);
	cr_assert_eq(recv_wc(mq, 0x11, 100), 1, "delivered");
	/* The first QP's path dies: it is fenced, the SRQ moves... */
	cr_assert_eq(primary_wc(77, IBV_WC_RETRY_EXC_ERR), 0);
	cr_assert_eq(prim.state, IBV_QPS_ERR);
	srq_post(106); /* while it moves: on no queue yet */
	cr_assert_eq(psrq.n, 6);
	cr_assert_eq(bsrq.n, 0);
	/* ...so the other QP on it is fenced too. */
	r2cc_mig_test_sweep();
	cr_assert_eq(prim2.state, IBV_QPS_ERR, "its SRQ's other QP fenced");
	/* Consumed: 100, 101 by the first (101 not polled), 102 by the
	 * second (not polled): two stay, the rest moves, in order. */
	peer_moves(PEER_QPN, 0x500, 2, false);
	r2cc_mig_test_sweep();
	cr_assert_eq(bsrq.n, 0, "not before every QP's peer answered");
	peer_moves(PEER_QPN + 1, 0x600, 1, false);
	r2cc_mig_test_sweep();
	cr_assert_eq(bsrq.n, 4);
	for (id = 0; id < 4; id++)
		cr_assert_eq(bsrq.ids[id], 103 + id, "re-post %llu: %llu",
			     (unsigned long long)id,
			     (unsigned long long)bsrq.ids[id]);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	cr_assert_eq(r2cc_mig_state(mq2), R2CC_PROT_MIGRATED);
	/* The fenced QPs' consumed receives still reach the program. */
	cr_assert_eq(recv_wc(mq, 0x11, 101), 1);
	cr_assert_eq(recv_wc(mq2, 0x12, 102), 1);
	/* New receives go to the backup SRQ. */
	srq_post(107);
	cr_assert_eq(bsrq.n, 5);
	cr_assert_eq(bsrq.ids[4], 107);
	cr_assert_eq(psrq.n, 6);
	cr_assert(!r2cc_mig_srq_joinable(srq), "no new QP on a moved SRQ");
}

Test(failover, a_partly_received_send_holds_the_srq_until_polled,
     .init = setup_srq, .fini = teardown_srq, .timeout = 20)
{
	uint64_t id;

	for (id = 100; id < 104; id++)
		srq_post(id);
	cr_assert_eq(primary_wc(77, IBV_WC_RETRY_EXC_ERR), 0);
	r2cc_mig_test_sweep();
	/* The second QP's peer was mid-SEND: it took a WR out of order
	 * (say 100), the first QP consumed 101: which WRs are consumed is
	 * known only once polled. */
	peer_moves(PEER_QPN, 0x500, 1, false);
	peer_moves(PEER_QPN + 1, 0x600, 0, true);
	r2cc_mig_test_sweep();
	cr_assert_eq(bsrq.n, 0, "waits for the consumed one to be polled");
	cr_assert_eq(recv_wc(mq, 0x11, 101), 1);
	r2cc_mig_test_sweep();
	cr_assert_eq(bsrq.n, 3);
	cr_assert_eq(bsrq.ids[0], 100);
	cr_assert_eq(bsrq.ids[1], 102);
	cr_assert_eq(bsrq.ids[2], 103);
}

Test(failover, an_srq_with_an_unprotected_qp_is_unprotected, .init = setup_srq,
     .fini = teardown_srq, .timeout = 20)
{
	srq_post(100);
	/* The second QP's peer runs no r2cc: the SRQ cannot move. */
	r2cc_mig_test_unprotect(mq2);
	r2cc_mig_test_sweep();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_NONE);
	srq_post(101);
	cr_assert_eq(psrq.n, 2, "posts go on to the program's SRQ");
	/* A fault now is the program's, as without r2cc. */
	cr_assert_eq(primary_wc(77, IBV_WC_RETRY_EXC_ERR), 1);
	cr_assert_eq(prim.state, IBV_QPS_RESET, "not fenced by r2cc");
}

Test(failover, a_qp_that_cannot_follow_its_srq_is_not_fenced_for_it,
     .init = setup_srq, .fini = teardown_srq, .timeout = 20)
{
	srq_post(100);
	/* The second QP is still binding (not ready) when the first's path
	 * dies: the SRQ cannot move; the first gives up its move, the
	 * second is left alone (not fenced), as without r2cc. */
	r2cc_mig_test_state(mq2, R2CC_PROT_BINDING);
	cr_assert_eq(primary_wc(77, IBV_WC_RETRY_EXC_ERR), 0);
	r2cc_mig_test_sweep();
	cr_assert_eq(prim2.state, IBV_QPS_RESET, "not fenced for the SRQ");
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_FAILED);
	cr_assert_eq(r2cc_mig_state(mq2), R2CC_PROT_NONE);
	srq_post(101);
	cr_assert_eq(psrq.n, 2, "posts go on to the program's SRQ");
	cr_assert_eq(bsrq.n, 0);
}

/* ---- may a QP's ACK timeout be lowered (r2cc_mig_peer_runs)? ---- */

static const uint8_t gid_a[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 1 };
static const uint8_t gid_b[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 2 };
static const uint8_t gid_c[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 3 };
static struct fake_qp nodeq[5];
static struct r2cc_mig_qp *nodemq[5];
static struct r2cc_status_qp nodeslot[5]; /* (their why, only) */

/* QP @i binding to a peer on @gid's node */
static struct r2cc_mig_qp *binding_qp(int i, const uint8_t gid[16])
{
	struct ibv_qp_cap cap = { .max_send_wr = 8,
				  .max_recv_wr = 8,
				  .max_send_sge = 1,
				  .max_recv_sge = 1 };

	memset(&nodeq[i], 0, sizeof(nodeq[i]));
	nodeq[i].qp.context = &ctx;
	nodeq[i].qp.qp_num = 0x60 + (uint32_t)i;
	memset(&nodeslot[i], 0, sizeof(nodeslot[i]));
	nodemq[i] = r2cc_mig_qp_new(&nodeq[i].qp, &cap, false, mc, mc, NULL,
				    &nodeslot[i]);
	cr_assert(nodemq[i]);
	r2cc_mig_test_binding(nodemq[i], gid);
	return nodemq[i];
}

struct later {
	struct r2cc_mig_qp *mq;
	uint64_t peer;
	enum r2cc_chan_res_end how;
};

/* The control thread's resolve ends 200 ms from now. */
static void *resolve_later(void *arg)
{
	struct later *l = arg;

	usleep(200000);
	r2cc_mig_test_resolved(l->mq, l->peer, l->how);
	return NULL;
}

static void setup_nodes(void)
{
	start();
	mc = r2cc_mig_cq_new(NULL, 16);
	cr_assert(mc);
}

static void teardown_nodes(void)
{
	int i;

	for (i = 0; i < 5; i++) {
		if (!nodemq[i])
			continue;
		r2cc_mig_release(nodemq[i]);
		r2cc_mig_test_free(nodemq[i]);
		nodemq[i] = NULL;
	}
	r2cc_mig_cq_free(mc);
	r2cc_mig_stop();
}

Test(failover, the_timeout_is_lowered_only_for_a_peer_that_runs_r2cc,
     .init = setup_nodes, .fini = teardown_nodes, .timeout = 30)
{
	struct later l;
	pthread_t t;
	int i;

	/* The first QP to a node waits for its own resolve (still under
	 * way at RTS) and learns that the peer runs r2cc. */
	l.mq = binding_qp(0, gid_a);
	l.peer = PEER;
	l.how = R2CC_RES_FOUND;
	cr_assert_eq(pthread_create(&t, NULL, resolve_later, &l), 0);
	cr_assert(r2cc_mig_peer_runs(l.mq, 10000), "waited for the resolve");
	pthread_join(t, NULL);
	/* The next QP to that node needs no wait: its node ran r2cc (with
	 * no resolve ever ending, waiting would answer false). */
	cr_assert(r2cc_mig_peer_runs(binding_qp(1, gid_a), 10000));

	/* A node without r2cc: its first QP learns it (its last refusal
	 * comes later), the next one to it is not lowered and does not wait
	 * (the test's own bound). */
	l.mq = binding_qp(2, gid_b);
	l.peer = 0;
	l.how = R2CC_RES_NO_R2CC;
	for (i = 1; i < MIG_RESOLVES; i++)
		r2cc_mig_test_resolved(l.mq, 0, R2CC_RES_NO_R2CC);
	cr_assert_eq(pthread_create(&t, NULL, resolve_later, &l), 0);
	cr_assert_not(r2cc_mig_peer_runs(l.mq, 10000));
	pthread_join(t, NULL);
	cr_assert_eq(r2cc_mig_state(l.mq), R2CC_PROT_NONE, "unprotected");
	cr_assert_not(r2cc_mig_peer_runs(binding_qp(3, gid_b), 60000));

	/* No answer within the bound: left as the program set it. */
	cr_assert_not(r2cc_mig_peer_runs(binding_qp(4, gid_c), 100));
	/* An unprotected QP never, whatever its node. */
	r2cc_mig_test_unprotect(nodemq[1]);
	cr_assert_not(r2cc_mig_peer_runs(nodemq[1], 100));
}

/* A node whose rendezvous refused the call MIG_RESOLVES times runs no
 * r2cc: the QP is unprotected, and so is the next QP to that node at
 * once, whatever its resolve says. (Each refusal here asks again: those
 * asks end in their own time, and count too.) */
Test(failover, a_node_that_refused_the_call_runs_no_r2cc, .init = setup_nodes,
     .fini = teardown_nodes, .timeout = 30)
{
	struct r2cc_mig_qp *q = binding_qp(1, gid_b);
	int i;

	for (i = 0; i < MIG_RESOLVES; i++)
		r2cc_mig_test_resolved(q, 0, R2CC_RES_NO_R2CC);
	cr_assert_eq(r2cc_mig_state(q), R2CC_PROT_NONE);
	cr_assert_eq(nodeslot[1].unprot, R2CC_UNPROT_NO_PEER);
	cr_assert_eq(r2cc_mig_test_node(gid_b, -1), 0, "its node not known");
	r2cc_mig_test_resolved(binding_qp(2, gid_b), 0, R2CC_RES_UNANSWERED);
	cr_assert_eq(r2cc_mig_state(nodemq[2]), R2CC_PROT_NONE,
		     "asked again on a node known to run no r2cc");
	/* Refusals do not unsay a node whose r2cc answered another QP */
	cr_assert_eq(r2cc_mig_test_node(gid_a, R2CC_NODE_R2CC), R2CC_NODE_R2CC);
	q = binding_qp(3, gid_a);
	for (i = 0; i < MIG_RESOLVES; i++)
		r2cc_mig_test_resolved(q, 0, R2CC_RES_NO_R2CC);
	cr_assert_eq(r2cc_mig_state(q), R2CC_PROT_NONE);
	cr_assert_eq(r2cc_mig_test_node(gid_a, -1), R2CC_NODE_R2CC);
}

/* A node whose r2cc knows no owner of the QP (its process may not have
 * published it yet) is asked again, MIG_RESOLVES times in all; then the
 * QP runs unprotected, but the node is known to run r2cc. Here each new
 * ask goes to this process's own rendezvous, which owns no such QP. */
Test(failover, an_owner_the_node_does_not_know_is_asked_for_a_few_times,
     .init = setup_nodes, .fini = teardown_nodes, .timeout = 30)
{
	static const uint8_t gid_lo[16] = { [10] = 0xff, [11] = 0xff, 127,
					    0,		 0,	      1 };
	struct r2cc_mig_qp *q;
	int i;

	q = binding_qp(1, gid_lo);
	r2cc_mig_test_resolved(q, 0, R2CC_RES_NO_OWNER);
	cr_assert_eq(r2cc_mig_state(q), R2CC_PROT_BINDING,
		     "given up at the first unknown owner");
	for (i = 0; i < 200 && r2cc_mig_state(q) == R2CC_PROT_BINDING; i++)
		usleep(50 * 1000);
	cr_assert_eq(r2cc_mig_state(q), R2CC_PROT_NONE, "asked again for ever");
	cr_assert_eq(nodeslot[1].unprot, R2CC_UNPROT_NO_PEER);
	cr_assert_eq(r2cc_mig_test_node(gid_lo, -1), 1,
		     "its node answered: it runs r2cc");
}

/* A resolve that got no answer (a step past its bound under load) says
 * nothing of the node (silent: the next QP's RTS does not wait on it,
 * and lowers nothing): the QP is asked for again, past MIG_RESOLVES
 * times, until MIG_RESOLVE_MS after its first ask; then it runs
 * unprotected as unreachable. (The test's own bound, 10 s, is what a
 * wait of 20 s for the next QP's word would break.) */
Test(failover, an_unanswered_resolve_is_asked_again_within_its_bound,
     .init = setup_nodes, .fini = teardown_nodes, .timeout = 10)
{
	struct r2cc_mig_qp *q = binding_qp(1, gid_c);
	int i;

	for (i = 0; i <= MIG_RESOLVES; i++) {
		r2cc_mig_test_resolved(q, 0, R2CC_RES_UNANSWERED);
		cr_assert_eq(r2cc_mig_state(q), R2CC_PROT_BINDING,
			     "given up after %d unanswered resolves", i + 1);
	}
	cr_assert_eq(r2cc_mig_test_node(gid_c, -1), R2CC_NODE_SILENT,
		     "the node judged");
	cr_assert_not(r2cc_mig_peer_runs(binding_qp(2, gid_c), 20000));
	r2cc_mig_test_resolve_ago(q, MIG_RESOLVE_MS + 1);
	r2cc_mig_test_resolved(q, 0, R2CC_RES_UNANSWERED);
	cr_assert_eq(r2cc_mig_state(q), R2CC_PROT_NONE, "asked for ever");
	cr_assert_eq(nodeslot[1].unprot, R2CC_UNPROT_UNREACHABLE);
	cr_assert_eq(r2cc_mig_test_node(gid_c, -1), R2CC_NODE_SILENT,
		     "the node judged");
}

/* A binding QP whose QP_BIND got no answer (lost with a connection: a
 * queued send reports nothing) sends it again after MIG_BIND_AGAIN_MS,
 * after twice that once it went twice; one that has not waited so long
 * does not. (No channel to the peer here: a bind sent again fails, and
 * the QP is left unprotected, which shows that it went.) */
Test(failover, an_unanswered_bind_is_sent_again, .init = setup_nodes,
     .fini = teardown_nodes, .timeout = 30)
{
	struct r2cc_mig_qp *late = binding_qp(0, gid_a);
	struct r2cc_mig_qp *young = binding_qp(1, gid_a);
	struct r2cc_mig_qp *twice = binding_qp(2, gid_a);
	struct r2cc_mig_qp *twice_late = binding_qp(3, gid_a);

	r2cc_mig_test_bind_out(late, PEER, 1, MIG_BIND_AGAIN_MS + 100);
	r2cc_mig_test_bind_out(young, PEER, 1, MIG_BIND_AGAIN_MS / 2);
	r2cc_mig_test_bind_out(twice, PEER, 2, MIG_BIND_AGAIN_MS * 3 / 2);
	r2cc_mig_test_bind_out(twice_late, PEER, 2,
			       MIG_BIND_AGAIN_MS * 2 + 100);
	r2cc_mig_bind_tick();
	cr_assert_eq(r2cc_mig_state(late), R2CC_PROT_NONE, "not sent again");
	cr_assert_eq(r2cc_mig_state(young), R2CC_PROT_BINDING,
		     "sent again too soon");
	cr_assert_eq(r2cc_mig_state(twice), R2CC_PROT_BINDING,
		     "sent a third time at 1.5 x");
	cr_assert_eq(r2cc_mig_state(twice_late), R2CC_PROT_NONE,
		     "not sent a third time at 2 x");
}
