/* SPDX-License-Identifier: MIT */
/*
 * test_poll.c - the shim's ibv_poll_cq (shim/datapath.c) over a protected
 * QP on the move's scripted verbs (tests/unit/migrate/fo_fixture.h): a
 * program that polls one completion at a time after its QP moved gets
 * the backup's completions, though the CQ gave one of r2cc's own first
 * (rping did not: it hung after every failover).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "fo_fixture.h"
#include "shim_int.h"

static struct ibv_context pctx; /* the program's CQ's context */
static struct fake_cq pcq; /* the program's CQ */
static struct r2cc_ctx rc;
static struct r2cc_cq rcq;
static struct r2cc_qp rqp;

/* The fixture's protected QP, seen through the shim: its context's ops
 * patched, its CQ and QP registered. */
static void shim_on(void)
{
	setup();
	cr_assert_eq(r2cc_map_init(&r2cc_shim.reg), 0);
	cr_assert_eq(r2cc_map_init(&r2cc_shim.qpn), 0);
	r2cc_shim.protecting = true;
	memset(&pcq, 0, sizeof(pcq));
	pctx.ops.poll_cq = f_poll_cq;
	pcq.cq.context = &pctx;
	rc = (struct r2cc_ctx){ .type = R2CC_OBJ_CTX, .ctx = &pctx, .id = 1 };
	r2cc_ops_patch(&rc);
	rcq = (struct r2cc_cq){
		.type = R2CC_OBJ_CQ, .cq = &pcq.cq, .ctx = &rc, .mc = mc
	};
	rqp = (struct r2cc_qp){ .type = R2CC_OBJ_QP,
				.qp = &prim.qp,
				.ctx = &rc,
				.qpn = prim.qp.qp_num,
				.mig = mq };
	rqp.st = &rqp.st_own;
	cr_assert_eq(r2cc_map_insert(&r2cc_shim.reg, (uintptr_t)&pctx, &rc), 0);
	cr_assert_eq(r2cc_map_insert(&r2cc_shim.reg, (uintptr_t)&pcq.cq, &rcq),
		     0);
	cr_assert_eq(r2cc_map_insert(&r2cc_shim.qpn, r2cc_qpn_key(&rc, rqp.qpn),
				     &rqp),
		     0);
}

static void shim_off(void)
{
	teardown();
	r2cc_map_destroy(&r2cc_shim.reg);
	r2cc_map_destroy(&r2cc_shim.qpn);
}

Test(poll, one_at_a_time_reaches_the_backup_behind_a_hidden_completion,
     .init = shim_on, .fini = shim_off, .timeout = 20)
{
	struct ibv_wc wc;

	cr_assert_eq(rc.poll_cq, f_poll_cq);
	cr_assert_neq(pctx.ops.poll_cq, f_poll_cq, "the shim's poll in ops");
	post(1);
	/* The path dies: its error, polled, is r2cc's; the QP fenced */
	add_wc(&pcq, 1, IBV_WC_RETRY_EXC_ERR, IBV_WC_SEND, prim.qp.qp_num);
	cr_assert_eq(ibv_poll_cq(&pcq.cq, 1, &wc), 0);
	cr_assert_eq(prim.state, IBV_QPS_ERR);
	/* The peer executed nothing: 1 replays on the backup */
	peer_says(R2CC_CTRL_FAILOVER, true, 0x500, 0);
	peer_says(R2CC_CTRL_FAILOVER_ACK, true, 0x500, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	cr_assert_eq(back.nsent, 1);
	/* The CQ gives one of r2cc's own (its completion-event WR's flush)
	 * before the backup's success: a poll for one must not stop there */
	add_wc(&pcq, R2CC_RING_WRID, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND,
	       prim.qp.qp_num);
	add_wc(&bcq, 1, IBV_WC_SUCCESS, IBV_WC_SEND, back.qp.qp_num);
	cr_assert_eq(ibv_poll_cq(&pcq.cq, 1, &wc), 1);
	cr_assert_eq(wc.wr_id, 1);
	cr_assert_eq(wc.status, IBV_WC_SUCCESS);
	cr_assert_eq(wc.qp_num, prim.qp.qp_num);
	cr_assert_eq(ibv_poll_cq(&pcq.cq, 1, &wc), 0, "nothing more");
	cr_assert_eq(rqp.st->polled, 1, "counted once");
}
