/* SPDX-License-Identifier: MIT */
/*
 * post.c - the program's posts on a protected QP: logged under the QP's
 * lock and posted on the path that carries it (keys translated for the
 * standby's rail), or only logged while a move has not moved that
 * direction yet; what cannot be logged or replayed ends protection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "complete.h"
#include "fence.h"
#include "keys.h"
#include "mig_int.h"
#include "module.h"
#include "post.h"
#include "sendlog_int.h"
#include "untune.h"

/* Logging stops for good: the QP runs as if r2cc were not there (a move
 * that has replayed nothing yet is abandoned). */
void r2cc_mig_give_up(struct r2cc_mig_qp *mq, const char *why, int err)
{
	if (mq->life == R2CC_LIFE_FENCED || mq->life == R2CC_LIFE_RECVS) {
		r2cc_mig_abandon(mq, why);
		return;
	}
	if (!r2cc_mig_logs(mq))
		return;
	r2cc_mig_stop_logging(mq);
	r2cc_warn("QP %#x: %s (%s): unprotected from now on", mq->qpn, why,
		  strerror(err < 0 ? -err : err));
	if (r2cc_mig_state(mq) != R2CC_PROT_MIGRATED)
		r2cc_mig_set_none(mq, err == EOPNOTSUPP ?
					      R2CC_UNPROT_UNSUPPORTED :
				      err == EPIPE ? R2CC_UNPROT_ENDED :
						     R2CC_UNPROT_LOG_FULL);
}

int r2cc_mig_sge_xlate(const void *pd, int rail, const struct ibv_sge *in,
		       int n, struct ibv_sge *out)
{
	int i;

	if (n > R2CC_MIG_MAX_SGE)
		return -E2BIG;
	for (i = 0; i < n; i++) {
		out[i] = in[i];
		if (!in[i].length && !in[i].lkey)
			continue;
		if (ps.env.lkey_xlate(pd, rail, in[i].lkey, &out[i].lkey))
			return -ENOENT;
	}
	return 0;
}

static int sge_xlate(const struct r2cc_mig_qp *mq, const struct ibv_sge *in,
		     int n, struct ibv_sge *out)
{
	return r2cc_mig_sge_xlate(mq->pd, mq->backup_rail, in, n, out);
}

/* Post one send WR on the backup, keys translated. */
int r2cc_mig_backup_send(struct r2cc_mig_qp *mq, const struct ibv_send_wr *wr)
{
	struct ibv_sge sge[R2CC_MIG_MAX_SGE];
	struct ibv_send_wr w = *wr, *bad;
	int ret;

	w.next = NULL;
	if (!(wr->send_flags & IBV_SEND_INLINE)) {
		ret = sge_xlate(mq, wr->sg_list, wr->num_sge, sge);
		if (ret)
			return ret;
		w.sg_list = sge;
	}
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		/* A zero-length one names no memory, and its R_Key need not
		 * be valid (IB spec C9-88): UCX flushes with a 0-byte WRITE
		 * to rkey 0, which no registration translates. */
		ret = r2cc_mig_rkey_xlate(mq, wr->wr.rdma.rkey,
					  &w.wr.rdma.rkey);
		if (ret && !r2cc_wr_len(wr))
			ret = 0;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		ret = r2cc_mig_rkey_xlate(mq, wr->wr.atomic.rkey,
					  &w.wr.atomic.rkey);
		break;
	default:
		ret = 0;
	}
	if (ret)
		return ret;
	if (mq->sig_all)
		w.send_flags |= IBV_SEND_SIGNALED;
	ret = mq->bqp->context->ops.post_send(mq->bqp, &w, &bad);
	return ret > 0 ? -ret : ret;
}

int r2cc_mig_backup_recv(struct r2cc_mig_qp *mq, const struct ibv_recv_wr *wr)
{
	struct ibv_sge sge[R2CC_MIG_MAX_SGE];
	struct ibv_recv_wr w = *wr, *bad;
	int ret;

	w.next = NULL;
	ret = sge_xlate(mq, wr->sg_list, wr->num_sge, sge);
	if (ret)
		return ret;
	w.sg_list = sge;
	ret = mq->bqp->context->ops.post_recv(mq->bqp, &w, &bad);
	return ret > 0 ? -ret : ret;
}

/* A WR on the program's QP from r2cc (a replay back, or a re-post):
 * through the provider's own post the program last used. */
int r2cc_mig_primary_send(struct r2cc_mig_qp *mq, const struct ibv_send_wr *wr)
{
	struct ibv_send_wr w = *wr, *bad;
	int ret;

	if (!mq->psend)
		return -ENOSYS;
	w.next = NULL;
	ret = mq->psend(mq->qp, &w, &bad);
	return ret > 0 ? -ret : ret;
}

int r2cc_mig_primary_recv(struct r2cc_mig_qp *mq, const struct ibv_recv_wr *wr)
{
	struct ibv_recv_wr w = *wr, *bad;
	int ret;

	if (!mq->precv)
		return -ENOSYS;
	w.next = NULL;
	ret = mq->precv(mq->qp, &w, &bad);
	return ret > 0 ? -ret : ret;
}

/*
 * Where the program's sends (receives) go now: 0 the primary, 1 the
 * backup, -1 nowhere yet (moving, and that direction not moved yet:
 * @moved says it is; logged, and posted by the move). A QP no longer
 * logging stays where it was.
 */
static int side_of(const struct r2cc_mig_qp *mq, bool moved)
{
	if (!r2cc_mig_moving(mq))
		return mq->on_backup;
	return moved ? !mq->on_backup : -1;
}

/* r2cc_mig_refuse(), mq lock held */
static void refuse(struct r2cc_mig_qp *mq, const char *why)
{
	if (mq->life == R2CC_LIFE_RUN)
		r2cc_mig_give_up(mq, why, EOPNOTSUPP);
	else
		r2cc_mig_fail(mq, why);
}

void r2cc_mig_refuse(struct r2cc_mig_qp *mq, const char *why)
{
	r2cc_qlock_lock(&mq->lock);
	refuse(mq, why);
	r2cc_qlock_unlock(&mq->lock);
}

/* Does @wr bind or invalidate a memory window? */
static inline bool mw_wr(const struct ibv_send_wr *wr)
{
	_Static_assert(IBV_WR_BIND_MW == IBV_WR_LOCAL_INV + 1 &&
			       IBV_WR_SEND_WITH_INV == IBV_WR_LOCAL_INV + 2,
		       "verbs' memory-window opcodes");

	return (unsigned int)wr->opcode - IBV_WR_LOCAL_INV <= 2;
}

/* Does @wr's chain hold such a WR? */
static bool mw_op(const struct ibv_send_wr *wr)
{
	for (; wr; wr = wr->next)
		if (mw_wr(wr))
			return true;
	return false;
}

/* r2cc_mig_post_send() off its common path: lock held */
static int post_send(struct r2cc_mig_qp *mq, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad,
		     int (*post)(struct ibv_qp *, struct ibv_send_wr *,
				 struct ibv_send_wr **))
{
	struct ibv_send_wr *w, *stop = NULL;
	int ret = 0, err, side;
	uint32_t tune;

	/* A window bound or invalidated cannot be replayed on another rail
	 * (nor its rkey translated there): refused before it is posted. */
	if (r2cc_mig_logs(mq) && mw_op(wr))
		refuse(mq, "it posts memory-window operations");
	/* Given up with r2cc's ACK timeout on it: the way back (untune.c) */
	tune = atomic_load_explicit(&mq->tune, memory_order_relaxed);
	if ((tune == R2CC_TUNE_DUE || tune == R2CC_TUNE_SQD) &&
	    r2cc_mig_untune_post(mq, wr, bad, &ret))
		return ret;
	side = side_of(mq, mq->life == R2CC_LIFE_SENDS);
	if (side == 0) {
		ret = post(mq->qp, wr, bad);
		if (ret)
			stop = *bad;
		if (!r2cc_mig_logs(mq))
			return ret;
	}
	for (w = wr; w && w != stop; w = w->next) {
		if (side == 1 && (err = r2cc_mig_backup_send(mq, w))) {
			*bad = w;
			ret = -err;
			break;
		}
		if (!r2cc_mig_logs(mq))
			continue;
		err = r2cc_sendlog_append(mq->slog, w, NULL);
		if (err) {
			r2cc_mig_give_up(mq, "send log", err);
			if (side < 0) {
				*bad = w; /* posted nowhere */
				ret = ENOMEM;
				break;
			}
			continue; /* posted: the rest of the chain too */
		}
		if (side < 0)
			mq->unposted_sends++;
	}
	return ret;
}

/* The WRs of @wr before @stop counted as posted (none if !@st) */
static void count_posted(struct r2cc_qp_stats *st, struct ibv_send_wr *wr,
			 struct ibv_send_wr *stop)
{
	for (; st && wr && wr != stop; wr = wr->next)
		r2cc_stat_posted(st, wr->opcode, r2cc_wr_len(wr));
}

/*
 * The log gave up at @w, which is posted (the provider took the chain up
 * to @stop, or @w went to the standby): @w counted, and the rest of the
 * chain posted on the standby too if the QP runs there, unlogged. 0, or
 * the standby's error (*@bad set).
 */
static int post_unlogged(struct r2cc_mig_qp *mq, struct ibv_send_wr *w,
			 struct ibv_send_wr *stop, struct ibv_send_wr **bad,
			 struct r2cc_qp_stats *st)
{
	struct ibv_send_wr *first = w;
	int err;

	for (; w != stop; w = w->next) {
		if (mq->on_backup && w != first &&
		    (err = r2cc_mig_backup_send(mq, w))) {
			*bad = w;
			return -err;
		}
		count_posted(st, w, w->next);
	}
	return 0;
}

int r2cc_mig_post_send(struct r2cc_mig_qp *mq, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad,
		       int (*post)(struct ibv_qp *, struct ibv_send_wr *,
				   struct ibv_send_wr **),
		       struct r2cc_qp_stats *st)
{
	struct ibv_send_wr *w, *stop = NULL;
	uint64_t len = 0;
	int ret;

	r2cc_qlock_lock(&mq->lock);
	mq->psend = post;
	/* The common case: protected, on the program's QP or (moved) its
	 * backup, no memory window in the chain if on the backup; posted,
	 * then logged and counted in one pass */
	if (__builtin_expect(mq->life != R2CC_LIFE_RUN ||
				     (mq->on_backup && mw_op(wr)),
			     0)) {
		ret = post_send(mq, wr, bad, post);
		r2cc_qlock_unlock(&mq->lock);
		count_posted(st, wr, ret ? *bad : NULL);
		return ret;
	}
	ret = mq->on_backup ? 0 : post(mq->qp, wr, bad);
	if (ret)
		stop = *bad;
	for (w = wr; w != stop; w = w->next) {
		int err;

		if (mq->on_backup) {
			if ((err = r2cc_mig_backup_send(mq, w))) {
				*bad = w;
				ret = -err;
				break;
			}
		} else if (__builtin_expect(mw_wr(w), 0)) {
			/* On the program's QP, a memory window's WR (posted,
			 * as post_send() would after refusing) ends protection
			 * here; a moved QP's chain was checked before */
			refuse(mq, "it posts memory-window operations");
			err = post_unlogged(mq, w, stop, bad, st);
			if (err)
				ret = err;
			break;
		}
		err = r2cc_sendlog_put(mq->slog, w, &len);
		if (__builtin_expect(err, 0)) {
			r2cc_mig_give_up(mq, "send log", err);
			err = post_unlogged(mq, w, stop, bad, st);
			if (err)
				ret = err;
			break;
		}
		if (st)
			r2cc_stat_posted(st, w->opcode, len);
	}
	r2cc_qlock_unlock(&mq->lock);
	return ret;
}

/* @mq's receive log grew (it starts at R2CC_LOG_FIRST: said once past
 * the queue's own size) */
static void recvlog_grown(const struct r2cc_mig_qp *mq)
{
	struct r2cc_recvlog_stats st;

	r2cc_recvlog_get_stats(mq->rlog, &st);
	if (st.outstanding > mq->cap.max_recv_wr + 1)
		r2cc_info("QP %#x: receive log grown: %u receives posted and "
			  "not yet polled (max_recv_wr %u)",
			  mq->qpn, st.outstanding, mq->cap.max_recv_wr);
}

int r2cc_mig_post_recv(struct r2cc_mig_qp *mq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad,
		       int (*post)(struct ibv_qp *, struct ibv_recv_wr *,
				   struct ibv_recv_wr **))
{
	struct ibv_recv_wr *w, *stop = NULL;
	int ret = 0, err, side;

	r2cc_qlock_lock(&mq->lock);
	mq->precv = post;
	/* The common case: protected, on the program's QP; posted, then
	 * logged */
	if (__builtin_expect(mq->life == R2CC_LIFE_RUN && !mq->on_backup, 1)) {
		ret = post(mq->qp, wr, bad);
		if (ret)
			stop = *bad;
		for (w = wr; w != stop; w = w->next) {
			err = r2cc_recvlog_append(mq->rlog, w);
			if (__builtin_expect(err == 1, 0)) {
				recvlog_grown(mq);
			} else if (__builtin_expect(err, 0)) {
				r2cc_mig_give_up(mq, "receive log", err);
				break;
			}
		}
		r2cc_qlock_unlock(&mq->lock);
		return ret;
	}
	side = side_of(mq, mq->life == R2CC_LIFE_RECVS);
	if (side == 0) {
		ret = post(mq->qp, wr, bad);
		if (ret)
			stop = *bad;
		if (!r2cc_mig_logs(mq))
			goto out;
	}
	for (w = wr; w && w != stop; w = w->next) {
		if (side == 1 && (err = r2cc_mig_backup_recv(mq, w))) {
			*bad = w;
			ret = -err;
			break;
		}
		if (!r2cc_mig_logs(mq))
			continue;
		err = r2cc_recvlog_append(mq->rlog, w);
		if (err == 1) {
			recvlog_grown(mq);
			err = 0;
		}
		if (err) {
			r2cc_mig_give_up(mq, "receive log", err);
			if (side < 0) {
				*bad = w;
				ret = ENOMEM;
				break;
			}
			continue;
		}
		if (side < 0)
			mq->unposted_recvs++;
	}
out:
	r2cc_qlock_unlock(&mq->lock);
	return ret;
}
