/* SPDX-License-Identifier: MIT */
/*
 * test_manyqps.c - many protected QPs on one program CQ, their standbys
 * on one shared CQ (bcq.c): past any fixed number, every moved QP's
 * completions reach the program, their CQ is armed with the program's,
 * a QP with much to deliver does not starve the others, a drain or a
 * destroyed standby takes only its own; messages find their QP by index among many, also when QPNs
 * repeat across devices and peers; whether r2cc runs on a peer node is
 * kept for any number of nodes. The peer is played as in
 * test_failover.c (fo_fixture.c).
 */
#include <criterion/criterion.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* before fo_fixture.h: its global mq would shadow their parameters */
#include "bcq.h"
#include "mig_int.h"
#include "objects.h"
#include "wake.h"

#include "fo_fixture.h"

#define NQ 200 /* more than a CQ's list ever held before it grew */

static struct fo_extra *qs;
static int narmed;

static int count_arm(struct ibv_cq *cq, int solicited)
{
	(void)cq;
	(void)solicited;
	narmed++;
	return 0;
}

static void many_setup(void)
{
	int i;

	setup();
	qs = calloc(NQ, sizeof(*qs));
	cr_assert(qs);
	for (i = 0; i < NQ; i++)
		fo_extra_on(&qs[i], i);
}

static void many_teardown(void)
{
	int i;

	for (i = 0; i < NQ; i++) {
		r2cc_mig_release(qs[i].mq);
		r2cc_mig_test_free(qs[i].mq);
	}
	free(qs);
	memset(&extra_bcq, 0, sizeof(extra_bcq));
	teardown();
}

#define WRID(i, k) ((uint64_t)(i) << 8 | (k))

/* QP @i moves with @nwr WRs outstanding, replayed on its standby */
static void move(int i, int nwr)
{
	fo_extra_moves(&qs[i], i, nwr, WRID(i, 0));
}

Test(manyqps, every_moved_qps_completions_reach_the_program, .init = many_setup,
     .fini = many_teardown, .timeout = 30)
{
	static bool seen[NQ];
	struct ibv_wc wc[16];
	int i, n, total = 0;

	/* The standbys' one CQ armed as the first QP moves, and not again
	 * (with the others, or the program's CQ) while no event of it came */
	ctx.ops.req_notify_cq = count_arm;
	narmed = 0;
	for (i = 0; i < NQ; i++)
		move(i, 1);
	cr_assert_eq(narmed, 1, "their one standby CQ armed %d times", narmed);
	r2cc_mig_cq_arm(mc);
	cr_assert_eq(narmed, 1, "an armed CQ not armed again");
	ctx.ops.req_notify_cq = f_req_notify;
	while ((n = r2cc_mig_poll_more(mc, 16, wc)) > 0) {
		for (int k = 0; k < n; k++) {
			int q = (int)(wc[k].wr_id >> 8);

			cr_assert(q >= 0 && q < NQ && !seen[q],
				  "wr_id %llu once",
				  (unsigned long long)wc[k].wr_id);
			cr_assert_eq(wc[k].qp_num, qs[q].prim.qp.qp_num,
				     "in the program's QP's terms");
			seen[q] = true;
		}
		total += n;
		cr_assert(total <= NQ);
	}
	cr_assert_eq(total, NQ, "%d of %d completions delivered", total, NQ);
}

static struct ibv_cq *event_cq; /* the one event get_event() has */

static int get_event(struct ibv_comp_channel *ch, struct ibv_cq **cq,
		     void **cq_context)
{
	(void)ch;
	if (!event_cq)
		return -1;
	*cq = event_cq;
	*cq_context = event_cq->cq_context;
	event_cq = NULL;
	return 0;
}

static void ack_events(struct ibv_cq *cq, unsigned int n)
{
	(void)cq;
	(void)n;
}

Test(manyqps, a_standby_cq_is_armed_again_after_its_event, .init = many_setup,
     .fini = many_teardown, .timeout = 30)
{
	int i;

	for (i = 0; i < NQ; i++)
		move(i, 1);
	ps.v.get_cq_event = get_event;
	ps.v.ack_cq_events = ack_events;
	ctx.ops.req_notify_cq = count_arm;
	narmed = 0;
	event_cq = &extra_bcq.cq; /* a completion's event, while awake */
	r2cc_mig_ring_ready(-1, NULL);
	cr_expect_eq(narmed, 0, "not armed again for an awake program");
	r2cc_mig_cq_arm(mc);
	cr_expect_eq(narmed, 1, "the program's arm arms that one alone");
	r2cc_mig_cq_arm(mc);
	cr_expect_eq(narmed, 1);
	ctx.ops.req_notify_cq = f_req_notify;
}

Test(manyqps, a_busy_qp_does_not_starve_the_others, .init = many_setup,
     .fini = many_teardown, .timeout = 30)
{
	struct ibv_wc wc;
	int i, others = 0;

	move(0, 8); /* all it may have outstanding */
	move(1, 1);
	move(2, 1);
	/* One at a time, as a program polling with n = 1: the two others'
	 * come within a few polls, not after all of QP 0's. */
	for (i = 0; i < 4; i++) {
		cr_assert_eq(r2cc_mig_poll_more(mc, 1, &wc), 1);
		if (wc.wr_id >> 8)
			others++;
	}
	cr_assert_eq(others, 2, "QPs 1 and 2 served within 4 polls");
}

/* A standby destroyed with completions still in the CQ it shares: they
 * go with it, not to a standby made later with its QP number. */
Test(manyqps, a_gone_standbys_completions_go_with_it, .init = many_setup,
     .fini = many_teardown, .timeout = 30)
{
	struct ibv_wc wc[4];

	add_wc(&extra_bcq, 0xdead, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND,
	       qs[3].back.qp.qp_num);
	r2cc_mig_release(qs[3].mq);
	r2cc_mig_test_free(qs[3].mq);
	fo_extra_on(&qs[3], 3); /* the same QP numbers */
	move(3, 1);
	cr_assert_eq(r2cc_mig_poll_more(mc, 4, wc), 1);
	cr_assert_eq(wc[0].wr_id, WRID(3, 0), "wr_id %#llx",
		     (unsigned long long)wc[0].wr_id);
	cr_assert_eq(r2cc_mig_poll_more(mc, 4, wc), 0);
}

/* A move's drain takes its QP's completions from the shared CQ; the
 * others' it polled meanwhile reach the program after all, in order. */
Test(manyqps, a_drain_leaves_the_others_completions_in_order,
     .init = many_setup, .fini = many_teardown, .timeout = 30)
{
	struct ibv_wc w, wc[8];
	int n, k, at[2] = { -1, -1 };

	move(1, 2);
	move(2, 2);
	r2cc_qlock_lock(&qs[2].mq->lock);
	cr_assert(r2cc_mig_bcq_take(qs[2].mq, &w));
	cr_assert_eq(w.wr_id, WRID(2, 0));
	r2cc_qlock_unlock(&qs[2].mq->lock);
	n = r2cc_mig_poll_more(mc, 8, wc);
	cr_assert_eq(n, 3, "%d delivered", n);
	for (k = 0; k < n; k++) {
		cr_assert_neq(wc[k].wr_id, WRID(2, 0), "delivered twice");
		if (wc[k].wr_id == WRID(1, 0) || wc[k].wr_id == WRID(1, 1))
			at[wc[k].wr_id & 1] = k;
	}
	cr_assert(at[0] >= 0 && at[0] < at[1], "QP 1's in order");
}

static int ndestroyed;

static int count_destroy(struct ibv_cq *cq)
{
	(void)cq;
	ndestroyed++;
	return 0;
}

/* The program destroys its CQ: the standby CQ its QPs' standbys used
 * goes first (before the doorbell, and waiting for an event of it in
 * hand), not while a standby is still on it. */
Test(manyqps, a_program_cqs_close_destroys_its_idle_standby_cq,
     .init = many_setup, .timeout = 30)
{
	int i;

	move(5, 1);
	ps.v.destroy_cq = count_destroy;
	r2cc_mig_cq_close(mc);
	cr_assert_eq(ndestroyed, 0, "destroyed under its standbys");
	for (i = 0; i < NQ; i++) {
		r2cc_mig_release(qs[i].mq);
		r2cc_mig_test_free(qs[i].mq);
	}
	r2cc_mig_cq_close(mc);
	cr_assert_eq(ndestroyed, 1);
	r2cc_mig_cq_close(mc);
	cr_assert_eq(ndestroyed, 1, "destroyed twice");
	ps.v.destroy_cq = (int (*)(struct ibv_cq *))f_destroy;
	free(qs);
	teardown();
}

/* Two devices' QPs may share a QPN, and two peers' QPs too: each
 * message finds its own QP, before and after the others are released. */
Test(manyqps, qps_are_found_by_qpn_among_repeats, .init = setup,
     .fini = teardown)
{
	struct ibv_qp_cap cap = { .max_send_wr = 4, .max_recv_wr = 4 };
	struct fake_qp p[3] = { 0 };
	struct r2cc_mig_qp *q[3];
	int i;

	for (i = 0; i < 3; i++) {
		p[i].qp.context = &ctx;
		p[i].qp.qp_num = 0x77; /* all alike */
		q[i] = r2cc_mig_qp_new(&p[i].qp, &cap, false, mc, mc, NULL,
				       NULL);
		cr_assert(q[i]);
		/* peers 1 and 2 have a QP 0x99; peer 2 also has 0x98 */
		r2cc_mig_test_bound(q[i], NULL, NULL, i ? 2 : 1,
				    i == 2 ? 0x98 : 0x99, 0x100);
	}
	pthread_mutex_lock(&ps.lock);
	cr_assert_eq(r2cc_mig_by_dest(1, 0x99), q[0]);
	cr_assert_eq(r2cc_mig_by_dest(2, 0x99), q[1]);
	cr_assert_eq(r2cc_mig_by_dest(2, 0x98), q[2]);
	cr_assert_null(r2cc_mig_by_dest(1, 0x98));
	cr_assert_eq(r2cc_mig_by_cookie(q[1]->cookie), q[1]);
	pthread_mutex_unlock(&ps.lock);
	r2cc_mig_release(q[1]);
	pthread_mutex_lock(&ps.lock);
	cr_assert_eq(r2cc_mig_by_dest(1, 0x99), q[0]);
	cr_assert_null(r2cc_mig_by_dest(2, 0x99));
	cr_assert_eq(r2cc_mig_by_dest(2, 0x98), q[2]);
	cr_assert_null(r2cc_mig_by_cookie(q[1]->cookie));
	pthread_mutex_unlock(&ps.lock);
	r2cc_mig_release(q[0]);
	r2cc_mig_release(q[2]);
	pthread_mutex_lock(&ps.lock);
	cr_assert_null(r2cc_mig_by_dest(1, 0x99));
	cr_assert_null(r2cc_mig_by_dest(2, 0x98));
	cr_assert_null(r2cc_mig_by_qpn(0x77));
	pthread_mutex_unlock(&ps.lock);
	for (i = 0; i < 3; i++)
		r2cc_mig_test_free(q[i]);
}

/* Destroyed QPs do not pile up: once MIG_RETIRED have been freed and a
 * second has passed, each free frees the oldest for good (the heap in
 * use stays put), and not before. */
static void make_free(int n, uint32_t base)
{
	struct ibv_qp_cap cap = { .max_send_wr = 4, .max_recv_wr = 4 };
	static struct fake_qp p;
	struct r2cc_mig_qp *q;
	int i;

	p.qp.context = &ctx;
	for (i = 0; i < n; i++) {
		p.qp.qp_num = base + (uint32_t)i;
		q = r2cc_mig_qp_new(&p.qp, &cap, false, mc, mc, NULL, NULL);
		cr_assert(q);
		r2cc_mig_release(q);
		r2cc_mig_free(q);
		r2cc_mig_free(q); /* a second time: nothing */
	}
}

/* mallinfo2() does not see ASan's or TSan's heap: under them the frees
 * still run (a use after free or a double free shows), the sizes are not
 * checked */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HEAP_SEEN false
#else
#define HEAP_SEEN true
#endif

Test(manyqps, freed_qps_are_freed_for_good_a_ring_and_a_second_later,
     .init = setup, .fini = teardown, .timeout = 60)
{
	size_t before, young, after;

	make_free(MIG_RETIRED, 0x9000);
	before = mallinfo2().uordblks;
	make_free(MIG_RETIRED / 2,
		  0xa000); /* the oldest are not a second old */
	young = mallinfo2().uordblks;
	if (HEAP_SEEN)
		cr_assert_gt(young, before + 200 * 1024,
			     "freed before a second");
	usleep(1100 * 1000);
	before = mallinfo2().uordblks;
	make_free(MIG_RETIRED, 0xb000);
	after = mallinfo2().uordblks;
	if (HEAP_SEEN)
		cr_assert_lt(after, before + 64 * 1024,
			     "%zu bytes more after %d QPs made and freed",
			     after - before, MIG_RETIRED);
}

/* Whether a peer node runs r2cc is kept for every node seen: a job of 128
 * nodes on 8 rails has a thousand peer GIDs (a ring of 256 forgot the
 * oldest, whose QPs then waited for the word again). */
Test(manyqps, every_peer_nodes_r2cc_is_remembered, .init = setup,
     .fini = teardown, .timeout = 20)
{
	uint8_t gid[16] = { [10] = 0xff, [11] = 0xff };
	int i;

	for (i = 0; i < 1024; i++) {
		gid[14] = (uint8_t)(i >> 8);
		gid[15] = (uint8_t)i;
		cr_assert_eq(r2cc_mig_test_node(gid, -1), -1, "new: unknown");
		cr_assert_eq(r2cc_mig_test_node(gid, i % 3 != 0), i % 3 != 0);
	}
	for (i = 0; i < 1024; i++) {
		gid[14] = (uint8_t)(i >> 8);
		gid[15] = (uint8_t)i;
		cr_assert_eq(r2cc_mig_test_node(gid, -1), i % 3 != 0,
			     "node %d forgotten", i);
	}
	gid[15] = 7;
	gid[14] = 0;
	cr_assert_eq(r2cc_mig_test_node(gid, 0), 0, "the latest word wins");
}
