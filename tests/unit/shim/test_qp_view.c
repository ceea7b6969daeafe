/* SPDX-License-Identifier: MIT */
/*
 * test_qp_view.c - r2cc's modifies and queries of a program's QP leave
 * qp->state as the program set it: the provider is called directly, and
 * what a provider or libibverbs stores there is put back.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "qp_view.h"

static struct {
	int calls, lib_calls;
	int mask;
	enum ibv_qp_state to; /* what the call asked for / answered */
	int ret;
	bool writes_state; /* the provider stores the state itself (EFA) */
} f;

static int prov_modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	f.calls++;
	f.mask = mask;
	f.to = attr->qp_state;
	if (f.writes_state && !f.ret)
		qp->state = attr->qp_state;
	return f.ret;
}

static int prov_query(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		      struct ibv_qp_init_attr *init)
{
	(void)qp;
	(void)init;
	f.calls++;
	f.mask = mask;
	attr->qp_state = f.to;
	attr->rq_psn = 0x123456;
	return f.ret;
}

/* libibverbs' ibv_modify_qp and ibv_query_qp, as rdma-core v44 has them */
static int lib_modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	int ret;

	f.lib_calls++;
	ret = prov_modify(qp, attr, mask);
	if (!ret && (mask & IBV_QP_STATE))
		qp->state = attr->qp_state;
	return ret;
}

static int lib_query(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		     struct ibv_qp_init_attr *init)
{
	int ret;

	f.lib_calls++;
	ret = prov_query(qp, attr, mask, init);
	if (!ret && (mask & IBV_QP_STATE))
		qp->state = attr->qp_state;
	return ret;
}

static struct ibv_context ctx;
static struct ibv_qp qp;

static void setup(void)
{
	memset(&f, 0, sizeof(f));
	memset(&ctx, 0, sizeof(ctx));
	memset(&qp, 0, sizeof(qp));
	ctx.ops._compat_modify_qp =
		(void *(*)(void))(void (*)(void))prov_modify;
	ctx.ops._compat_query_qp = (void *(*)(void))(void (*)(void))prov_query;
	qp.context = &ctx;
	qp.state = IBV_QPS_RTS; /* what the program set */
}

TestSuite(qp_view, .init = setup);

Test(qp_view, the_fence_reaches_the_provider_and_the_program_reads_rts)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	cr_assert_eq(r2cc_qp_modify_unseen(&qp, &a, IBV_QP_STATE, lib_modify),
		     0);
	cr_assert_eq(f.calls, 1);
	cr_assert_eq(f.lib_calls, 0, "the provider is called directly");
	cr_assert_eq(f.to, IBV_QPS_ERR);
	cr_assert_eq(f.mask, IBV_QP_STATE);
	cr_assert_eq(qp.state, IBV_QPS_RTS);
}

Test(qp_view, a_recycle_through_reset_is_not_seen)
{
	static const enum ibv_qp_state steps[] = { IBV_QPS_ERR, IBV_QPS_RESET,
						   IBV_QPS_INIT, IBV_QPS_RTR,
						   IBV_QPS_RTS };
	size_t i;

	f.writes_state = true; /* EFA-like: the provider stores it too */
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct ibv_qp_attr a = { .qp_state = steps[i] };

		cr_assert_eq(r2cc_qp_modify_unseen(&qp, &a, IBV_QP_STATE,
						   lib_modify),
			     0);
		cr_assert_eq(f.to, steps[i]);
		cr_assert_eq(qp.state, IBV_QPS_RTS, "step %zu", i);
	}
}

Test(qp_view, the_providers_error_is_returned)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	f.ret = 22;
	cr_assert_eq(r2cc_qp_modify_unseen(&qp, &a, IBV_QP_STATE, lib_modify),
		     22);
	cr_assert_eq(qp.state, IBV_QPS_RTS);
}

Test(qp_view, without_the_providers_entry_libibverbs_is_called_and_undone)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	ctx.ops._compat_modify_qp = NULL;
	cr_assert_eq(r2cc_qp_modify_unseen(&qp, &a, IBV_QP_STATE, lib_modify),
		     0);
	cr_assert_eq(f.lib_calls, 1);
	cr_assert_eq(f.to, IBV_QPS_ERR);
	cr_assert_eq(qp.state, IBV_QPS_RTS);
}

Test(qp_view, a_query_answers_and_leaves_the_state)
{
	struct ibv_qp_attr a = { 0 };
	struct ibv_qp_init_attr init;

	f.to = IBV_QPS_ERR; /* the fenced primary's real state */
	cr_assert_eq(r2cc_qp_query_unseen(&qp, &a, IBV_QP_STATE | IBV_QP_RQ_PSN,
					  &init, lib_query),
		     0);
	cr_assert_eq(f.lib_calls, 0);
	cr_assert_eq(a.qp_state, IBV_QPS_ERR, "r2cc reads the real state");
	cr_assert_eq(a.rq_psn, 0x123456);
	cr_assert_eq(qp.state, IBV_QPS_RTS, "the program's view is kept");

	ctx.ops._compat_query_qp = NULL;
	cr_assert_eq(r2cc_qp_query_unseen(&qp, &a, IBV_QP_STATE, &init,
					  lib_query),
		     0);
	cr_assert_eq(f.lib_calls, 1);
	cr_assert_eq(qp.state, IBV_QPS_RTS);
}

/* What libibverbs alone does, so the tests above prove something. */
Test(qp_view, libibverbs_itself_stores_the_fence)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	cr_assert_eq(lib_modify(&qp, &a, IBV_QP_STATE), 0);
	cr_assert_eq(qp.state, IBV_QPS_ERR);
}
