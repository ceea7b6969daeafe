/* SPDX-License-Identifier: MIT */
/*
 * datapath.c - the inline verbs (ibv_post_send, ibv_post_recv, ibv_poll_cq,
 * ibv_req_notify_cq, ibv_post_srq_recv) reach the provider through
 * ctx->ops; r2cc replaces those entries after the real open, and wraps the
 * extended QP/CQ constructors of the verbs_context (extended CQs' polls:
 * cq_ex.c). No allocation, lock or
 * system call here: a registry lookup, counters, then the provider.
 */
#include "shim_int.h"

#define unlikely(x) __builtin_expect(!!(x), 0)

static inline struct r2cc_ctx *ctx_of(struct ibv_context *ctx)
{
	return r2cc_lookup(ctx, R2CC_OBJ_CTX);
}

static int dp_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad)
{
	struct r2cc_qp *q = r2cc_lookup(qp, R2CC_OBJ_QP);
	struct ibv_send_wr *w, *stop = NULL;
	int ret;

	if (unlikely(!q))
		return ctx_of(qp->context)->post_send(qp, wr, bad);
	if (unlikely(q->mig)) /* (it counts them) */
		return r2cc_mig_post_send(q->mig, wr, bad, q->ctx->post_send,
					  q->st);
	ret = q->ctx->post_send(qp, wr, bad);
	if (unlikely(ret))
		stop = *bad; /* WRs before it were posted */
	for (w = wr; w && w != stop; w = w->next)
		r2cc_stat_wr(q->st, w);
	return ret;
}

/* How many receive WRs of @wr the provider took: those before @stop. */
static uint64_t recv_posted(struct ibv_recv_wr *wr, struct ibv_recv_wr *stop)
{
	uint64_t n = 0;

	for (; wr && wr != stop; wr = wr->next)
		n++;
	return n;
}

static int dp_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad)
{
	struct r2cc_qp *q = r2cc_lookup(qp, R2CC_OBJ_QP);
	int ret;

	if (unlikely(!q))
		return ctx_of(qp->context)->post_recv(qp, wr, bad);
	if (unlikely(q->mig))
		ret = r2cc_mig_post_recv(q->mig, wr, bad, q->ctx->post_recv);
	else
		ret = q->ctx->post_recv(qp, wr, bad);
	r2cc_stat_add(&q->st->posted_recv, recv_posted(wr, ret ? *bad : NULL));
	return ret;
}

static int dp_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			    struct ibv_recv_wr **bad)
{
	struct r2cc_srq *s = r2cc_lookup(srq, R2CC_OBJ_SRQ);

	if (unlikely(!s))
		return ctx_of(srq->context)->post_srq_recv(srq, wr, bad);
	if (unlikely(s->mig))
		return r2cc_mig_srq_post(s->mig, wr, bad,
					 s->ctx->post_srq_recv);
	return s->ctx->post_srq_recv(srq, wr, bad);
}

/*
 * @got completions polled into @wc from @kept on, in the program's terms:
 * through migrate/ (logs retired, a fenced QP's hidden), those delivered
 * counted and moved down after the @kept before them. Returns the new
 * count kept.
 */
static int take_batch(struct r2cc_ctx *c, struct ibv_cq *cq,
		      struct r2cc_mig_cq *mc, struct ibv_wc *wc, int kept,
		      int got, bool *behind, uint64_t pushed)
{
	int i, end = kept + got;

	for (i = kept; i < end; i++) {
		struct r2cc_qp *q;
		int r;

		/* Pushed since this poll began: a racing move back's
		 * synthesised completions (the primary's own that follow
		 * them may be in this batch), or what an earlier completion
		 * of the batch completed after itself. The rest of the batch
		 * goes behind. */
		if (mc && !*behind && r2cc_mig_pushed(mc) != pushed) {
			*behind = true;
			r2cc_dbg_dp("CQ %p: %d completions go behind a push",
				    (void *)cq, end - i);
		}
		r = r2cc_wc_judge_qp(c, mc, &wc[i], *behind, &q);
		/* Stashed behind completions that precede it: the rest of
		 * this batch queues behind it. */
		*behind |= r == 2;
		if (r != 1)
			continue;
		if (q)
			r2cc_count_wc_of(q, wc[i].status == IBV_WC_SUCCESS,
					 wc[i].opcode & IBV_WC_RECV,
					 wc[i].byte_len);
		wc[kept++] = wc[i];
	}
	return kept;
}

/* @n completions in @wc counted against their QPs */
static void count_wcs(struct r2cc_ctx *c, const struct ibv_wc *wc, int n)
{
	int i;

	for (i = 0; i < n; i++)
		r2cc_count_wc(c, wc[i].qp_num, wc[i].status == IBV_WC_SUCCESS,
			      wc[i].opcode & IBV_WC_RECV, wc[i].byte_len);
}

/*
 * A CQ protected QPs may complete on. What migrate/ stashed for it comes
 * first (synthesised completions, or a fenced QP's hidden ones given back
 * when its move was abandoned: older than anything still in the CQ); then
 * the CQ, through migrate/; then, once the CQ is empty, the backups' (a
 * fenced QP's consumed receives still in the CQ come before anything its
 * backup completes). A push to the stash since the poll began puts the
 * rest of the batch behind it. The CQ is polled again while what it gave
 * was r2cc's own and it may hold more: a program that polls one at a time
 * (rping) would otherwise take a hidden completion for an empty CQ, and
 * never reach the backups' behind it.
 */
static int poll_protected(struct r2cc_ctx *c, struct ibv_cq *cq, int n,
			  struct ibv_wc *wc)
{
	struct r2cc_cq *q = r2cc_lookup(cq, R2CC_OBJ_CQ);
	struct r2cc_mig_cq *mc = q ? q->mc : NULL;
	int kept, got, want, more;
	bool behind = false;
	uint64_t pushed;

	if (!mc) { /* no protected QP has been on it */
		got = c->poll_cq(cq, n, wc);
		count_wcs(c, wc, got);
		return got;
	}
	pushed = r2cc_mig_pushed(mc);
	kept = r2cc_mig_poll_stash(mc, n, wc);
	count_wcs(c, wc, kept);
	while (kept < n) {
		want = n - kept;
		got = c->poll_cq(cq, want, wc + kept);
		if (got < 0)
			return kept ? kept : got;
		kept = take_batch(c, cq, mc, wc, kept, got, &behind, pushed);
		if (got < want)
			break; /* the CQ is empty */
		if (behind) {
			/* What went behind comes before the CQ's next */
			pushed = r2cc_mig_pushed(mc);
			more = r2cc_mig_poll_stash(mc, n - kept, wc + kept);
			count_wcs(c, wc + kept, more);
			kept += more;
			behind = false;
		}
	}
	if (kept < n && r2cc_mig_cq_busy(mc)) {
		more = r2cc_mig_poll_more(mc, n - kept, wc + kept);
		count_wcs(c, wc + kept, more);
		kept += more;
	}
	return kept;
}

static int dp_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct r2cc_ctx *c = ctx_of(cq->context);
	int got;

	/* (poll_protected() counts what it returns) */
	if (unlikely(r2cc_shim.protecting))
		return poll_protected(c, cq, n, wc);
	got = c->poll_cq(cq, n, wc);
	count_wcs(c, wc, got);
	return got;
}

static int dp_req_notify_cq(struct ibv_cq *cq, int solicited)
{
	int ret = ctx_of(cq->context)->req_notify_cq(cq, solicited);

	if (unlikely(r2cc_shim.protecting) && !ret) {
		struct r2cc_cq *q = r2cc_lookup(cq, R2CC_OBJ_CQ);
		struct r2cc_mig_cq *mc = q ? q->mc : NULL;

		/* Completions of migrated QPs land elsewhere: their
		 * backups' events ring this CQ. */
		if (mc)
			r2cc_mig_cq_arm(mc);
	}
	return ret;
}

static struct ibv_cq_ex *dp_create_cq_ex(struct ibv_context *ctx,
					 struct ibv_cq_init_attr_ex *attr)
{
	struct r2cc_ctx *c = ctx_of(ctx);
	uint64_t asked = attr->wc_flags;
	struct ibv_cq_ex *cqx;
	struct r2cc_cq *q;

	/* What r2cc reads of each completion to protect the CQ's QPs,
	 * besides what the program asked for; without them if the provider
	 * cannot (its QPs then run unprotected). */
	attr->wc_flags = r2cc_cq_ex_flags(asked);
	cqx = c->create_cq_ex(ctx, attr);
	attr->wc_flags = asked;
	if (!cqx)
		cqx = c->create_cq_ex(ctx, attr);
	if (!cqx)
		return NULL;
	q = r2cc_cq_created(c, ibv_cq_ex_to_cq(cqx));
	if (q) {
		q->extended = true;
		r2cc_cq_ex_patch(q, cqx);
	}
	return cqx;
}

static struct ibv_qp *dp_create_qp_ex(struct ibv_context *ctx,
				      struct ibv_qp_init_attr_ex *attr)
{
	struct r2cc_ctx *c = ctx_of(ctx);
	struct ibv_qp *qp = c->create_qp_ex(ctx, attr);

	if (qp)
		qp = r2cc_qp_created(c, qp, attr->qp_type, attr->srq, attr,
				     &attr->cap, attr->sq_sig_all);
	return qp;
}

void r2cc_ops_patch(struct r2cc_ctx *c)
{
	struct ibv_context *ctx = c->ctx;
	struct verbs_context *vctx = verbs_get_ctx(ctx);

	c->post_send = ctx->ops.post_send;
	c->post_recv = ctx->ops.post_recv;
	c->post_srq_recv = ctx->ops.post_srq_recv;
	c->poll_cq = ctx->ops.poll_cq;
	c->req_notify_cq = ctx->ops.req_notify_cq;
	if (c->post_send)
		ctx->ops.post_send = dp_post_send;
	if (c->post_recv)
		ctx->ops.post_recv = dp_post_recv;
	if (c->post_srq_recv)
		ctx->ops.post_srq_recv = dp_post_srq_recv;
	if (c->poll_cq)
		ctx->ops.poll_cq = dp_poll_cq;
	if (c->req_notify_cq)
		ctx->ops.req_notify_cq = dp_req_notify_cq;
	if (!vctx)
		return;
	c->create_qp_ex = vctx->create_qp_ex;
	c->create_cq_ex = vctx->create_cq_ex;
	if (c->create_qp_ex)
		vctx->create_qp_ex = dp_create_qp_ex;
	if (c->create_cq_ex)
		vctx->create_cq_ex = dp_create_cq_ex;
}
