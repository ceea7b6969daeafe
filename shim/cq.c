/* SPDX-License-Identifier: MIT */
/*
 * cq.c - completion queues and channels: CQs (plain and extended) are
 * registered so that polling can be attributed per QP; completion channels
 * and CQ events pass through.
 */
#include <errno.h>
#include <stdlib.h>

#include "shim_int.h"

struct r2cc_cq *r2cc_cq_created(struct r2cc_ctx *c, struct ibv_cq *cq)
{
	struct r2cc_cq *q;
	int saved = errno;

	q = calloc(1, sizeof(*q));
	if (q) {
		q->type = R2CC_OBJ_CQ;
		q->cq = cq;
		q->ctx = c;
	}
	errno = saved;
	return r2cc_obj_add(cq, q, R2CC_OBJ_CQ, free);
}

static void cq_free(void *obj)
{
	struct r2cc_cq *q = obj;

	r2cc_mig_cq_free(q->mc);
	r2cc_cq_ex_free(q);
	free(q);
}

R2CC_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe,
					 void *cq_context,
					 struct ibv_comp_channel *ch,
					 int comp_vector)
{
	struct r2cc_ctx *c;
	struct ibv_cq *cq;

	R2CC_ENTER(ibv_create_cq, NULL, ctx, cqe, cq_context, ch, comp_vector);
	cq = r2cc_real.ibv_create_cq(ctx, cqe, cq_context, ch, comp_vector);
	c = cq ? r2cc_lookup(ctx, R2CC_OBJ_CTX) : NULL;
	if (c)
		r2cc_cq_created(c, cq);
	return cq;
}

R2CC_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	R2CC_ENTER(ibv_resize_cq, ENOSYS, cq, cqe);
	return r2cc_real.ibv_resize_cq(cq, cqe);
}

R2CC_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct r2cc_cq *q;
	int ret;

	R2CC_ENTER(ibv_destroy_cq, ENOSYS, cq);
	q = r2cc_lookup(cq, R2CC_OBJ_CQ);
	if (q)
		r2cc_mig_cq_close(q->mc);
	ret = r2cc_real.ibv_destroy_cq(cq);
	if (!ret && q)
		r2cc_obj_del(cq, q, cq_free);
	return ret;
}

R2CC_EXPORT struct ibv_comp_channel *
ibv_create_comp_channel(struct ibv_context *ctx)
{
	R2CC_ENTER(ibv_create_comp_channel, NULL, ctx);
	return r2cc_real.ibv_create_comp_channel(ctx);
}

R2CC_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	R2CC_ENTER(ibv_destroy_comp_channel, ENOSYS, ch);
	return r2cc_real.ibv_destroy_comp_channel(ch);
}

R2CC_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ch,
				 struct ibv_cq **cq, void **cq_context)
{
	R2CC_ENTER(ibv_get_cq_event, -1, ch, cq, cq_context);
	return r2cc_real.ibv_get_cq_event(ch, cq, cq_context);
}

R2CC_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	R2CC_ENTER_VOID(ibv_ack_cq_events, cq, nevents);
	r2cc_real.ibv_ack_cq_events(cq, nevents);
}
