/* SPDX-License-Identifier: MIT */
/*
 * test_post.c - the post's common path (post.c): a chain the send log
 * cannot hold to its end ends protection there, yet every WR of it is
 * posted where the QP runs (the program's QP, or its standby after a
 * move) and counted once; the peer is played as in test_failover.c.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "fo_fixture.h"
#include "policy.h"

#define CHAIN 24 /* more than the log's limit (2 * 8 + 1) */

/* A chain of CHAIN unsignaled 64-byte WRITEs (rkey 9), posted with the
 * counters: the post's return */
static int post_chain(struct r2cc_qp_stats *st)
{
	static struct ibv_sge sge = { .addr = 0x1000, .length = 64, .lkey = 7 };
	static struct ibv_send_wr wr[CHAIN];
	struct ibv_send_wr *bad = NULL;
	int i;

	memset(wr, 0, sizeof(wr));
	for (i = 0; i < CHAIN; i++) {
		wr[i].wr_id = 100 + (uint64_t)i;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].wr.rdma.remote_addr = 0x2000;
		wr[i].wr.rdma.rkey = 9;
		wr[i].next = i + 1 < CHAIN ? &wr[i + 1] : NULL;
	}
	return r2cc_mig_post_send(mq, wr, &bad, f_post_send, st);
}

Test(post, a_chain_past_the_log_is_posted_whole_on_the_program_qp,
     .init = setup, .fini = teardown, .timeout = 20)
{
	struct r2cc_qp_stats st;

	memset(&st, 0, sizeof(st));
	cr_assert_eq(post_chain(&st), 0);
	cr_assert_eq(prim.nsent, CHAIN, "the provider took the chain");
	cr_assert_eq(st.posted[R2CC_ST_WRITE], CHAIN, "each counted once");
	cr_assert_eq(st.bytes_posted, 64 * CHAIN);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_NONE, "unprotected now");
}

Test(post, a_chain_past_the_log_is_posted_whole_on_the_standby, .init = setup,
     .fini = teardown, .timeout = 20)
{
	struct r2cc_qp_stats st;

	fo_rails();
	fo_to_the_standby(); /* WR 1 replayed and done there */
	r2cc_mig_test_peer_mr(PEER, 1, 9, 0x10009);
	memset(&st, 0, sizeof(st));
	cr_assert_eq(post_chain(&st), 0);
	cr_assert_eq(back.nsent, 1 + CHAIN, "all of it on the standby");
	cr_assert_eq(back.last_rkey, 0x10009, "translated to its rail");
	cr_assert_eq(st.posted[R2CC_ST_WRITE], CHAIN, "each counted once");
	cr_assert_eq(st.bytes_posted, 64 * CHAIN);
}
