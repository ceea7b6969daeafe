/* SPDX-License-Identifier: MIT */
/*
 * qp_view.c - what a program reads of its own struct ibv_qp without a call.
 * libibverbs' ibv_modify_qp and ibv_query_qp store the new state in
 * qp->state after the provider's call; r2cc's fence, queries and the
 * recycle of a move back must not, or a program that reads it (UCX's
 * rc_verbs asserts RTS before each post) sees r2cc's ERR.
 */
#include "qp_view.h"

/*
 * The provider's own entry point, which libibverbs keeps in the context's
 * public ops for ABI compatibility (rdma-core's verbs_set_ops: "if any ever
 * get changed incompatibly they should be set to NULL instead"). Cast
 * through void (*)(void), the type that converts to any other.
 */
static r2cc_modify_qp_fn provider_modify(const struct ibv_qp *qp)
{
	void *(*fn)(void) = qp->context->ops._compat_modify_qp;

	return fn ? (r2cc_modify_qp_fn)(void (*)(void))fn : NULL;
}

static r2cc_query_qp_fn provider_query(const struct ibv_qp *qp)
{
	void *(*fn)(void) = qp->context->ops._compat_query_qp;

	return fn ? (r2cc_query_qp_fn)(void (*)(void))fn : NULL;
}

int r2cc_qp_modify_unseen(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			  r2cc_modify_qp_fn lib)
{
	r2cc_modify_qp_fn fn = provider_modify(qp);
	enum ibv_qp_state seen = qp->state;
	int ret;

	ret = fn ? fn(qp, attr, mask) : lib(qp, attr, mask);
	/* A provider that keeps the state there itself (EFA does), or
	 * libibverbs: for a moment only, on that path. */
	if (qp->state != seen)
		qp->state = seen;
	return ret;
}

int r2cc_qp_query_unseen(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			 struct ibv_qp_init_attr *init, r2cc_query_qp_fn lib)
{
	r2cc_query_qp_fn fn = provider_query(qp);
	enum ibv_qp_state seen = qp->state;
	int ret;

	ret = fn ? fn(qp, attr, mask, init) : lib(qp, attr, mask, init);
	if (qp->state != seen)
		qp->state = seen;
	return ret;
}
