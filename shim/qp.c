/* SPDX-License-Identifier: MIT */
/*
 * qp.c - queue pairs, SRQs and AHs. QPs are registered with their QP number
 * and the attributes the program gives ibv_modify_qp (what a backup QP must
 * copy); extended QPs get their ibv_wr_* builders recorded.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim_int.h"

/* ibv_modify_qp mask bits and the attribute fields they carry. */
#define F(bit, field)                                            \
	{                                                        \
		bit, offsetof(struct ibv_qp_attr, field),        \
			sizeof(((struct ibv_qp_attr *)0)->field) \
	}
static const struct {
	int bit;
	size_t off, len;
} attr_fields[] = {
	F(IBV_QP_STATE, qp_state),
	F(IBV_QP_CUR_STATE, cur_qp_state),
	F(IBV_QP_EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify),
	F(IBV_QP_ACCESS_FLAGS, qp_access_flags),
	F(IBV_QP_PKEY_INDEX, pkey_index),
	F(IBV_QP_PORT, port_num),
	F(IBV_QP_QKEY, qkey),
	F(IBV_QP_AV, ah_attr),
	F(IBV_QP_PATH_MTU, path_mtu),
	F(IBV_QP_TIMEOUT, timeout),
	F(IBV_QP_RETRY_CNT, retry_cnt),
	F(IBV_QP_RNR_RETRY, rnr_retry),
	F(IBV_QP_RQ_PSN, rq_psn),
	F(IBV_QP_MAX_QP_RD_ATOMIC, max_rd_atomic),
	F(IBV_QP_ALT_PATH, alt_ah_attr),
	F(IBV_QP_MIN_RNR_TIMER, min_rnr_timer),
	F(IBV_QP_SQ_PSN, sq_psn),
	F(IBV_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic),
	F(IBV_QP_PATH_MIG_STATE, path_mig_state),
	F(IBV_QP_CAP, cap),
	F(IBV_QP_DEST_QPN, dest_qp_num),
	F(IBV_QP_RATE_LIMIT, rate_limit),
};
#undef F

static void attr_merge(struct r2cc_qp *q, const struct ibv_qp_attr *a, int mask)
{
	size_t i;

	for (i = 0; i < sizeof(attr_fields) / sizeof(attr_fields[0]); i++)
		if (mask & attr_fields[i].bit)
			memcpy((char *)&q->attr + attr_fields[i].off,
			       (const char *)a + attr_fields[i].off,
			       attr_fields[i].len);
	q->attr_mask |= mask;
}

/* ibv_wr_complete succeeded: count the batch like ibv_post_send would. */
static void batch_done(struct r2cc_wr_recorder *rec, void *arg)
{
	unsigned int i;

	for (i = 0; i < rec->committed; i++)
		r2cc_stat_wr(((struct r2cc_qp *)arg)->st, &rec->wr[i]);
}

struct r2cc_wr_recorder *r2cc_wr_rec_of(struct ibv_qp_ex *qpx)
{
	struct r2cc_qp *q = r2cc_lookup(&qpx->qp_base, R2CC_OBJ_QP);

	return q ? q->rec : NULL;
}

static void record_builders(struct r2cc_qp *q,
			    const struct ibv_qp_init_attr_ex *ax)
{
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(q->qp);

	if (!qpx)
		return;
	q->rec =
		r2cc_wr_rec_new(ax->cap.max_send_wr ? ax->cap.max_send_wr : 1,
				ax->cap.max_send_sge ? ax->cap.max_send_sge : 1,
				ax->cap.max_inline_data);
	if (!q->rec) {
		r2cc_err("QP %#x: cannot record ibv_wr_* batches (%m)", q->qpn);
		return;
	}
	q->rec->on_commit = batch_done;
	q->rec->arg = q;
	r2cc_wr_rec_patch(q->rec, qpx);
}

/* The ibv_wr_* operations a protected QP may use: the send log's. */
#define REPLAYABLE_OPS                                                    \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |             \
	 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |   \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

/* A diverted ibv_wr_complete: the batch, posted like ibv_post_send. */
static int rec_post(struct r2cc_wr_recorder *rec, struct ibv_send_wr *chain,
		    void *arg)
{
	struct r2cc_qp *q = arg;
	struct ibv_send_wr *bad = NULL;

	(void)rec;
	if (!chain)
		return 0;
	return r2cc_mig_post_send(q->mig, chain, &bad, q->ctx->post_send,
				  NULL); /* (counted by batch_done) */
}

/* An r2cc_qp that was never registered. */
static void qp_free(void *obj)
{
	struct r2cc_qp *q = obj;

	r2cc_status_qp_del(q->slot);
	free(q);
}

/* A destroyed QP: its counters are kept for the stats file. */
static void qp_retire(void *obj)
{
	r2cc_stats_retire(obj);
}

struct ibv_qp *r2cc_qp_created(struct r2cc_ctx *c, struct ibv_qp *qp,
			       enum ibv_qp_type type, struct ibv_srq *srq,
			       const struct ibv_qp_init_attr_ex *ax,
			       const struct ibv_qp_cap *cap, bool sig_all)
{
	struct r2cc_srq *sq = srq ? r2cc_lookup(srq, R2CC_OBJ_SRQ) : NULL;
	bool has_srq = srq != NULL;
	struct r2cc_qp *q;
	int saved = errno;

	if (sq && sq->mig && !r2cc_mig_srq_joinable(sq->mig)) {
		r2cc_err("QP on an SRQ r2cc moved to its backup rail: refused "
			 "(the WRs left on it are the backup's now)");
		if (r2cc_real.ibv_destroy_qp(qp))
			r2cc_err("that QP could not be destroyed");
		errno = EBUSY;
		return NULL;
	}

	q = calloc(1, sizeof(*q));
	if (q) {
		q->type = R2CC_OBJ_QP;
		q->qp = qp;
		q->ctx = c;
		q->qpn = qp->qp_num;
		q->qp_type = type;
		q->has_srq = has_srq;
		q->rail = c->rail;
		snprintf(q->dev, sizeof(q->dev), "%s",
			 ibv_get_device_name(c->ctx->device));
		q->slot = r2cc_status_qp_add(q->qpn, type, q->rail, q->dev);
		q->st = q->slot ? &q->slot->st : &q->st_own;
	}
	errno = saved;
	if (!r2cc_obj_add(qp, q, R2CC_OBJ_QP, qp_free)) {
		if (sq)
			r2cc_mig_srq_break(sq->mig, "a QP on it is untracked");
		errno = saved;
		return qp;
	}
	r2cc_map_insert(&r2cc_shim.qpn, r2cc_qpn_key(c, q->qpn), q);
	/* Only now: the builders find their recorder through the registry. */
	if (ax && (ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		record_builders(q, ax);
	/* On an SRQ: protected with it, or not at all */
	if (type == IBV_QPT_RC && (!has_srq || (sq && sq->mig)) &&
	    r2cc_shim.protecting &&
	    (!ax || !(ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ||
	     (q->rec && !(ax->send_ops_flags & ~REPLAYABLE_OPS))))
		r2cc_qp_protect_new(q, cap, sig_all, sq ? sq->mig : NULL);
	if (!q->mig && q->slot && !atomic_load(&q->slot->unprot))
		r2cc_status_qp_unprot(q->slot,
				      type != IBV_QPT_RC ? R2CC_UNPROT_NOT_RC :
				      !r2cc_shim.protecting || !r2cc_mig_on() ?
							   R2CC_UNPROT_OFF :
				      q->rail < 0 ? R2CC_UNPROT_NO_RAIL :
						    R2CC_UNPROT_UNSUPPORTED);
	/* One QP on the SRQ r2cc cannot follow takes WRs no count covers */
	if (sq && !q->mig)
		r2cc_mig_srq_break(sq->mig, "a QP on it cannot be protected");
	if (q->mig && q->rec) {
		/* ibv_wr_* batches go through the send log too. */
		q->rec->post = rec_post;
		q->rec->divert = true;
	}
	errno = saved;
	return qp;
}

R2CC_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
					 struct ibv_qp_init_attr *attr)
{
	struct r2cc_ctx *c;
	struct ibv_qp *qp;

	R2CC_ENTER(ibv_create_qp, NULL, pd, attr);
	qp = r2cc_real.ibv_create_qp(pd, attr);
	c = qp ? r2cc_lookup(pd->context, R2CC_OBJ_CTX) : NULL;
	if (c)
		qp = r2cc_qp_created(c, qp, attr->qp_type, attr->srq, NULL,
				     &attr->cap, attr->sq_sig_all);
	return qp;
}

R2CC_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			      int mask)
{
	struct r2cc_qp *q;
	bool lowered = false;
	int ret;

	R2CC_ENTER(ibv_modify_qp, ENOSYS, qp, attr, mask);
	q = r2cc_lookup(qp, R2CC_OBJ_QP);
	/* A connection the program set up and now ends (not a QP it puts
	 * through RESET before connecting it) */
	if (q && q->mig && (mask & IBV_QP_STATE) &&
	    (attr->qp_state == IBV_QPS_ERR ||
	     attr->qp_state == IBV_QPS_RESET) &&
	    (q->attr_mask & IBV_QP_STATE) && q->attr.qp_state >= IBV_QPS_RTR &&
	    q->attr.qp_state <= IBV_QPS_SQE)
		r2cc_mig_closed(q->mig);
	if (q && q->mig && (mask & IBV_QP_STATE) &&
	    attr->qp_state == IBV_QPS_RTS &&
	    r2cc_mig_state(q->mig) == R2CC_PROT_MIGRATED) {
		/* A responder that failed over at RTR: its primary is in
		 * ERR, the backup takes the move; the program reads RTS, as
		 * libibverbs would have stored it. */
		attr_merge(q, attr, mask);
		ret = r2cc_qp_rts(q);
		if (!ret)
			qp->state = IBV_QPS_RTS;
		return ret;
	}
	if (q && q->mig && (mask & (IBV_QP_RETRY_CNT | IBV_QP_TIMEOUT)) &&
	    r2cc_mig_peer_runs(q->mig, MIG_PEER_WAIT_MS)) {
		/* A protected QP must find a black hole fast, and at all: rxe
		 * (and any HCA following the spec's 3 bits literally) retries
		 * 7 times forever, so 6; and its ACK timeout is lowered so
		 * that its tries end within R2CC_DETECT_MS (0, no timeout,
		 * too). The program still reads what it set. Not for a QP
		 * whose peer runs no r2cc: nothing would fail it over. */
		struct ibv_qp_attr a = *attr;
		unsigned int tries;
		int t;

		if ((mask & IBV_QP_RETRY_CNT) && a.retry_cnt > 6)
			a.retry_cnt = 6;
		tries = (mask & IBV_QP_RETRY_CNT) ? a.retry_cnt + 1U : 7U;
		t = r2cc_rc_timeout_for(r2cc_shim.cfg.detect_ms, tries);
		if ((mask & IBV_QP_TIMEOUT) && (!a.timeout || a.timeout > t))
			a.timeout = (uint8_t)t;
		r2cc_dbg("QP %#x: retry_cnt %u, ACK timeout %u for its "
			 "failover (the program's: %u, %u)",
			 qp->qp_num, a.retry_cnt, a.timeout, attr->retry_cnt,
			 attr->timeout);
		ret = r2cc_real.ibv_modify_qp(qp, &a, mask);
		lowered = a.timeout != attr->timeout ||
			  a.retry_cnt != attr->retry_cnt;
	} else {
		ret = r2cc_real.ibv_modify_qp(qp, attr, mask);
	}
	q = ret ? NULL : q;
	if (q) {
		attr_merge(q, attr, mask);
		if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTR)
			r2cc_qp_rtr(q);
		if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTS)
			r2cc_qp_rts(q);
		/* (once the QP is at RTS in migrate's eyes too) */
		if (lowered)
			r2cc_mig_lowered(q->mig);
	}
	return ret;
}

R2CC_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			     int mask, struct ibv_qp_init_attr *init)
{
	struct r2cc_qp *q;
	int ret;

	R2CC_ENTER(ibv_query_qp, ENOSYS, qp, attr, mask, init);
	q = r2cc_lookup(qp, R2CC_OBJ_QP);
	if (!q || !q->mig)
		return r2cc_real.ibv_query_qp(qp, attr, mask, init);
	ret = r2cc_qp_query_unseen(qp, attr, mask, init,
				   r2cc_real.ibv_query_qp);
	if (ret)
		return ret;
	/* A QP r2cc fenced, or that runs on its backup, is for the program
	 * still where it put it (RTR or RTS), not in r2cc's ERR, a
	 * recycle's RESET or the SQD of its timeout's way back. */
	if (r2cc_mig_covers(q->mig) || r2cc_mig_untuning(q->mig))
		attr->qp_state = attr->cur_qp_state = q->attr.qp_state;
	/* What the program set, not what r2cc lowered (ibv_modify_qp) */
	if (q->attr_mask & IBV_QP_RETRY_CNT)
		attr->retry_cnt = q->attr.retry_cnt;
	if (q->attr_mask & IBV_QP_TIMEOUT)
		attr->timeout = q->attr.timeout;
	/* As libibverbs does, with the state the program is shown. */
	if (mask & IBV_QP_STATE)
		qp->state = attr->qp_state;
	return 0;
}

R2CC_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct r2cc_qp *q;
	int ret;

	R2CC_ENTER(ibv_destroy_qp, ENOSYS, qp);
	q = r2cc_lookup(qp, R2CC_OBJ_QP);
	/* Protection first: the health and control threads must not fence
	 * a QP the provider has freed. (Should the destroy fail, the QP
	 * runs on, unprotected.) */
	if (q)
		r2cc_mig_release(q->mig);
	ret = r2cc_real.ibv_destroy_qp(qp);
	if (!ret && q) {
		r2cc_mig_free(q->mig);
		q->mig = NULL;
		r2cc_map_remove(&r2cc_shim.qpn, r2cc_qpn_key(q->ctx, q->qpn));
		r2cc_obj_del(qp, q, qp_retire);
	}
	return ret;
}

static void srq_free(void *obj)
{
	struct r2cc_srq *s = obj;

	r2cc_mig_srq_release(s->mig);
	free(s);
}

R2CC_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
					   struct ibv_srq_init_attr *attr)
{
	struct r2cc_ctx *c;
	struct r2cc_srq *s;
	struct ibv_srq *srq;
	int saved;

	R2CC_ENTER(ibv_create_srq, NULL, pd, attr);
	srq = r2cc_real.ibv_create_srq(pd, attr);
	c = srq ? r2cc_lookup(pd->context, R2CC_OBJ_CTX) : NULL;
	if (!c)
		return srq;
	saved = errno;
	s = calloc(1, sizeof(*s));
	if (s) {
		s->type = R2CC_OBJ_SRQ;
		s->srq = srq;
		s->ctx = c;
		if (r2cc_shim.protecting && c->rail >= 0)
			s->mig = r2cc_mig_srq_new(srq, &attr->attr);
	}
	errno = saved;
	r2cc_obj_add(srq, s, R2CC_OBJ_SRQ, srq_free);
	return srq;
}

R2CC_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
			       int mask)
{
	R2CC_ENTER(ibv_modify_srq, ENOSYS, srq, attr, mask);
	return r2cc_real.ibv_modify_srq(srq, attr, mask);
}

R2CC_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	struct r2cc_srq *s;
	int ret;

	R2CC_ENTER(ibv_destroy_srq, ENOSYS, srq);
	s = r2cc_lookup(srq, R2CC_OBJ_SRQ);
	ret = r2cc_real.ibv_destroy_srq(srq);
	if (!ret && s)
		r2cc_obj_del(srq, s, srq_free);
	return ret;
}

R2CC_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd,
					 struct ibv_ah_attr *attr)
{
	R2CC_ENTER(ibv_create_ah, NULL, pd, attr);
	return r2cc_real.ibv_create_ah(pd, attr);
}

R2CC_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	R2CC_ENTER(ibv_destroy_ah, ENOSYS, ah);
	return r2cc_real.ibv_destroy_ah(ah);
}
