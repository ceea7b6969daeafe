/* SPDX-License-Identifier: MIT */
/*
 * test_early.c - the peer's QP_BINDs that came before our QP reached RTR
 * (early.c): every one kept (not a ring: a peer that brings up hundreds
 * of QPs before ours loses none), the newer bind of a pair replacing the
 * older, the budget's overflow dropped and counted, one whose QP never
 * came dropped by the sweep.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "early.h"
#include "tick.h"

#define PEER 0x77

/* Peer QP @i's bind to our QP @i (its local, our peer) */
static struct r2cc_ctrl_qp_bind bind_of(uint32_t i, uint32_t psn)
{
	struct r2cc_ctrl_qp_bind b;

	memset(&b, 0, sizeof(b));
	b.local.qpn = 0x10000 + i;
	b.local.gid[0] = 0xfe;
	b.peer.qpn = 0x20000 + i;
	b.peer.gid[0] = 0xfd;
	b.psn = psn;
	b.mtu = 3;
	return b;
}

/* Our QP @i at RTR, as bind_is_for() sees it */
static void our_qp(struct r2cc_mig_qp *mq, uint32_t i)
{
	memset(mq, 0, sizeof(*mq));
	mq->qpn = 0x20000 + i;
	mq->gid[0] = 0xfd;
	mq->dest_qpn = 0x10000 + i;
	mq->dest_gid[0] = 0xfe;
}

static void keep(uint32_t i, uint32_t psn)
{
	struct r2cc_ctrl_qp_bind b = bind_of(i, psn);

	pthread_mutex_lock(&ps.lock);
	r2cc_mig_early_keep(PEER, &b);
	pthread_mutex_unlock(&ps.lock);
}

static bool take(uint32_t i, struct r2cc_ctrl_qp_bind *b)
{
	static struct r2cc_mig_qp mq;
	uint64_t peer = 0;
	bool ok;

	our_qp(&mq, i);
	pthread_mutex_lock(&ps.lock);
	ok = r2cc_mig_early_take(&mq, &peer, b);
	pthread_mutex_unlock(&ps.lock);
	if (ok)
		cr_assert_eq(peer, PEER);
	return ok;
}

static void empty(void)
{
	pthread_mutex_lock(&ps.lock);
	r2cc_mig_early_clear();
	ps.early_dropped = ps.early_swept_ns = 0;
	pthread_mutex_unlock(&ps.lock);
}

TestSuite(early, .init = empty, .fini = empty);

Test(early, a_thousand_binds_before_their_qps_are_all_kept)
{
	struct r2cc_ctrl_qp_bind b;
	uint32_t i;

	for (i = 0; i < 1000; i++)
		keep(i, i);
	cr_assert_eq(ps.nearly, 1000);
	/* Taken in another order than kept */
	for (i = 1000; i-- > 0;) {
		cr_assert(take(i, &b), "bind %u kept", i);
		cr_assert_eq(b.psn, i);
	}
	cr_assert_eq(ps.nearly, 0);
	cr_assert_not(take(3, &b), "taken once");
	cr_assert_eq(r2cc_mig_early_dropped(), 0);
}

Test(early, a_newer_bind_of_a_pair_replaces_the_older)
{
	struct r2cc_ctrl_qp_bind b;

	keep(5, 0x100);
	keep(6, 0x200);
	keep(5, 0x300); /* its standby moved: BIND_AGAIN */
	cr_assert_eq(ps.nearly, 2);
	cr_assert(take(5, &b));
	cr_assert_eq(b.psn, 0x300);
	cr_assert_not(take(5, &b));
	cr_assert(take(6, &b));
	cr_assert_eq(b.psn, 0x200);
}

Test(early, past_the_budget_a_bind_is_dropped_and_counted)
{
	struct r2cc_ctrl_qp_bind b;
	uint32_t i, n = 0;

	for (i = 0; r2cc_mig_early_dropped() == 0; i++) {
		cr_assert_lt(i, 1u << 20, "a budget, not unbounded");
		keep(i, 0);
	}
	n = ps.nearly;
	cr_assert_eq(n, i - 1, "every bind before the budget kept");
	cr_assert_geq(n, 4096);
	cr_assert(take(0, &b));
	cr_assert_not(take(i - 1, &b), "the one past it dropped");
	keep(i, 0); /* room again */
	cr_assert_eq(r2cc_mig_early_dropped(), 1);
	cr_assert(take(i, &b));
}

Test(early, a_bind_whose_qp_never_came_is_swept)
{
	struct r2cc_ctrl_qp_bind b;

	keep(1, 0);
	keep(2, 0);
	r2cc_mig_early_sweep();
	cr_assert_eq(ps.nearly, 2, "young: kept");
	if (r2cc_mig_now_ns() < 700ULL * 1000000000ULL)
		cr_skip_test("the monotonic clock is too young to age a bind");
	/* Bind 1 aged past its time, the sweep due */
	for (unsigned int i = 0; i < ps.early_nb; i++)
		for (struct r2cc_mig_early *e = ps.early[i]; e; e = e->next)
			if (e->b.local.qpn == 0x10001)
				e->at_ns = 0;
	ps.early_swept_ns = 0;
	r2cc_mig_early_sweep();
	cr_assert_eq(ps.nearly, 1);
	cr_assert_eq(r2cc_mig_early_dropped(), 1);
	cr_assert_not(take(1, &b));
	cr_assert(take(2, &b));
}
