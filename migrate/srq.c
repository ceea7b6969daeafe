/* SPDX-License-Identifier: MIT */
/*
 * srq.c - shared receive queues: the QPs on one SRQ move as a group. Each
 * QP keeps its own send log and fence; the receives are the SRQ's, logged
 * here and moved once, when every QP on it is fenced and each peer has
 * said how many of its receives were consumed (DESIGN §6 for SRQs). The
 * backups of the group share one backup SRQ, so the group's backups all
 * sit on one rail (the first QP's placement pins it; QP_BIND tells the
 * peer). An SRQ a QP on it cannot follow (a peer without r2cc, a QP that
 * never got its backup) runs unprotected, its QPs too: their moves could
 * not be exact.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "complete.h"
#include "fence.h"
#include "mig_int.h"
#include "move.h"
#include "post.h"
#include "srq.h"
#include "tick.h"

/* ---- the program's SRQ ---- */

struct r2cc_mig_srq *r2cc_mig_srq_new(struct ibv_srq *srq,
				      const struct ibv_srq_attr *attr)
{
	struct r2cc_mig_srq *s;

	if (!r2cc_mig_on() || !ps.v.create_srq || !ps.v.destroy_srq)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	/* Room for the SRQ and as many consumed ones waiting to be polled;
	 * the log grows beyond that if need be. */
	s->log = r2cc_srqlog_new(2 * attr->max_wr + 1,
				 attr->max_sge ? attr->max_sge : 1);
	if (!s->log) {
		free(s);
		r2cc_warn("SRQ: no memory for its log: unprotected");
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	s->srq = srq;
	s->pd = srq->pd;
	s->max_wr = attr->max_wr;
	s->max_sge = attr->max_sge;
	s->backup_rail = -1;
	pthread_mutex_lock(&ps.lock);
	s->next = ps.srqs;
	ps.srqs = s;
	pthread_mutex_unlock(&ps.lock);
	return s;
}

void r2cc_mig_srq_release(struct r2cc_mig_srq *s)
{
	struct r2cc_mig_srq **pp;

	if (!s)
		return;
	pthread_mutex_lock(&ps.lock);
	for (pp = &ps.srqs; *pp && *pp != s; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = s->next;
	pthread_mutex_unlock(&ps.lock);
	/* No QP uses it: verbs refuses to destroy an SRQ QPs are on, and
	 * the backups go with their QPs. */
	if (s->bsrq && ps.v.destroy_srq(s->bsrq))
		r2cc_warn("backup SRQ: destroy failed");
	r2cc_srqlog_free(s->log);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

bool r2cc_mig_srq_joinable(struct r2cc_mig_srq *s)
{
	bool ok;

	if (!s)
		return true;
	pthread_mutex_lock(&s->lock);
	/* Moved: the WRs left in the program's SRQ were re-posted on the
	 * backup's; a QP taking them would share their buffers. */
	ok = s->where == R2CC_SRQ_HOME || s->where == R2CC_SRQ_BROKEN;
	pthread_mutex_unlock(&s->lock);
	return ok;
}

/* One WR on the backup SRQ, keys translated (s->lock held). */
static int backup_post(struct r2cc_mig_srq *s, const struct ibv_recv_wr *wr)
{
	struct ibv_sge sge[R2CC_MIG_MAX_SGE];
	struct ibv_recv_wr w = *wr, *bad;
	int ret;

	w.next = NULL;
	ret = r2cc_mig_sge_xlate(s->pd, s->backup_rail, wr->sg_list,
				 wr->num_sge, sge);
	if (ret)
		return ret;
	w.sg_list = sge;
	ret = s->bsrq->context->ops.post_srq_recv(s->bsrq, &w, &bad);
	return ret > 0 ? -ret : ret;
}

/* Logging stops: the SRQ and its QPs run unprotected (s->lock held; the
 * next sweep unprotects the QPs). */
static void broken(struct r2cc_mig_srq *s, const char *why)
{
	if (s->where == R2CC_SRQ_BROKEN)
		return;
	r2cc_warn("SRQ: %s: it and its QPs run unprotected", why);
	s->where = R2CC_SRQ_BROKEN;
	atomic_store(&ps.srq_sweep, true);
}

int r2cc_mig_srq_post(struct r2cc_mig_srq *s, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad,
		      int (*post)(struct ibv_srq *, struct ibv_recv_wr *,
				  struct ibv_recv_wr **))
{
	struct ibv_recv_wr *w, *stop = NULL;
	int ret = 0, err;

	pthread_mutex_lock(&s->lock);
	s->ppost = post;
	if (s->where == R2CC_SRQ_HOME || s->where == R2CC_SRQ_BROKEN) {
		ret = post(s->srq, wr, bad);
		if (ret)
			stop = *bad;
	}
	for (w = wr; w && w != stop && s->where != R2CC_SRQ_BROKEN;
	     w = w->next) {
		/* Moved for good (no move back): no log any more */
		if (s->where == R2CC_SRQ_AWAY) {
			if ((err = backup_post(s, w))) {
				*bad = w;
				ret = -err;
				break;
			}
			continue;
		}
		err = r2cc_srqlog_append(s->log, w,
					 s->where != R2CC_SRQ_MOVING);
		if (!err)
			continue;
		if (s->where == R2CC_SRQ_MOVING) {
			/* On no queue, and nowhere to keep it: refused. */
			*bad = w;
			ret = ENOMEM;
			break;
		}
		broken(s, "its receive log is full");
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* ---- its QPs ---- */

void r2cc_mig_srq_joined(struct r2cc_mig_qp *mq, struct r2cc_mig_srq *s)
{
	mq->srq = s;
	/* The backup's receive CQ holds its share of the SRQ's WRs. */
	if (mq->cap.max_recv_wr < s->max_wr)
		mq->cap.max_recv_wr = s->max_wr;
	pthread_mutex_lock(&s->lock);
	s->nqps++;
	if (s->where == R2CC_SRQ_MOVING || s->where == R2CC_SRQ_AWAY)
		/* It moved since the shim asked (r2cc_mig_srq_joinable) */
		r2cc_err("QP %#x joined an SRQ r2cc moved meanwhile: "
			 "unprotected, its receives may share buffers with "
			 "the backup's",
			 mq->qpn);
	if (s->where != R2CC_SRQ_HOME) {
		r2cc_status_qp_unprot(mq->slot, R2CC_UNPROT_UNSUPPORTED);
		r2cc_mig_stop_logging(mq);
	}
	pthread_mutex_unlock(&s->lock);
}

void r2cc_mig_srq_break(struct r2cc_mig_srq *s, const char *why)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	if (s->where == R2CC_SRQ_HOME)
		broken(s, why);
	pthread_mutex_unlock(&s->lock);
}

void r2cc_mig_srq_left(struct r2cc_mig_qp *mq)
{
	struct r2cc_mig_srq *s = mq->srq;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->nqps--;
	pthread_mutex_unlock(&s->lock);
}

int r2cc_mig_srq_pin(struct r2cc_mig_qp *mq, struct r2cc_mig_desc *d)
{
	struct r2cc_mig_srq *s = mq->srq;
	struct ibv_srq_init_attr ia;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	if (s->where != R2CC_SRQ_HOME) {
		ret = -EBUSY;
	} else if (s->backup_rail < 0) {
		/* On the shadow of the SRQ's own PD (its WRs' MRs') */
		memset(&ia, 0, sizeof(ia));
		ia.attr.max_wr = s->max_wr;
		ia.attr.max_sge = s->max_sge;
		ret = ps.env.rail_res(s->pd, d->backup_rail, &ctx, &pd);
		s->bsrq = ret ? NULL : ps.v.create_srq(pd, &ia);
		if (s->bsrq)
			s->backup_rail = d->backup_rail;
		else if (!ret)
			ret = errno ? -errno : -ENOMEM;
	} else if (s->backup_rail != d->backup_rail) {
		ret = ps.env.rail_res(mq->pd, s->backup_rail, &d->backup_ctx,
				      &d->backup_pd);
		if (!ret)
			d->backup_rail = s->backup_rail;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

void r2cc_mig_srq_retire(struct r2cc_mig_qp *mq, uint64_t wr_id, bool ok)
{
	struct r2cc_mig_srq *s = mq->srq;

	pthread_mutex_lock(&s->lock);
	/* A success is a receive the peer counts as consumed */
	if (ok)
		mq->srq_polled++;
	if ((s->where == R2CC_SRQ_HOME || s->where == R2CC_SRQ_MOVING) &&
	    r2cc_srqlog_retire(s->log, wr_id)) {
		if (s->where == R2CC_SRQ_HOME)
			broken(s, "a receive completion its log does not know");
		else
			r2cc_dbg("QP %#x: SRQ receive %#llx not in the log",
				 mq->qpn, (unsigned long long)wr_id);
	}
	pthread_mutex_unlock(&s->lock);
}

void r2cc_mig_srq_fenced(struct r2cc_mig_qp *mq)
{
	struct r2cc_mig_srq *s = mq->srq;

	pthread_mutex_lock(&s->lock);
	if (s->where == R2CC_SRQ_HOME) {
		s->where = R2CC_SRQ_MOVING;
		s->move_ns = r2cc_mig_now_ns();
		r2cc_info("SRQ: QP %#x fenced: the SRQ and its %d QPs move to "
			  "rail %d",
			  mq->qpn, s->nqps, s->backup_rail);
	}
	pthread_mutex_unlock(&s->lock);
	atomic_store(&ps.srq_sweep, true);
}

int r2cc_mig_srq_ack(struct r2cc_mig_qp *mq, uint64_t consumed, bool taken)
{
	struct r2cc_mig_srq *s = mq->srq;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	if (s->where != R2CC_SRQ_MOVING) {
		ret = -EPIPE;
	} else {
		mq->srq_consumed = consumed;
		mq->srq_acked = true;
		s->taken |= taken;
	}
	pthread_mutex_unlock(&s->lock);
	atomic_store(&ps.srq_sweep, true);
	return ret;
}

/* ---- the group's move (ps.lock held) ---- */

/*
 * Move the SRQ's receives if every QP on it is fenced and acknowledged
 * (s->lock held): the unpolled consumed ones (the peers' counts less what
 * was polled) stay, the rest go to the backup SRQ in posting order. A
 * message partly received when its QP was fenced took a WR out of order:
 * then the move waits until the consumed ones are polled. 1: moved, 0:
 * not yet, <0: it cannot be made.
 */
static int try_move(struct r2cc_mig_srq *s, uint64_t now, const char **why)
{
	struct r2cc_srqlog_stats st;
	struct r2cc_recv_replay res;
	struct r2cc_mig_qp *mq;
	struct ibv_recv_wr *w;
	int64_t owed = 0;
	int ret;

	for (mq = ps.qps; mq; mq = mq->next) {
		if (mq->srq != s)
			continue;
		if (!mq->srq_acked) {
			*why = "a peer never said what it consumed";
			return r2cc_mig_past(s->move_ns, now,
					     MIG_FENCE_BOUND_MS) ?
				       -ETIMEDOUT :
				       0;
		}
		owed += (int64_t)(mq->srq_consumed - mq->srq_polled);
	}
	r2cc_srqlog_get_stats(s->log, &st);
	if (owed < 0 || owed > st.live - st.unposted) {
		*why = "the peers' consumed counts do not fit its log";
		return -ERANGE;
	}
	if (s->taken && owed) {
		*why = "consumed receives never polled";
		return r2cc_mig_past(s->move_ns, now, MIG_FENCE_BOUND_MS) ?
			       -ETIMEDOUT :
			       0;
	}
	ret = r2cc_srqlog_split(s->log, (uint32_t)owed, &res);
	for (w = res.first; !ret && w; w = w->next)
		ret = backup_post(s, w);
	if (ret) {
		*why = "the backup SRQ refused its receives";
		return ret;
	}
	r2cc_srqlog_posted(s->log);
	s->where = R2CC_SRQ_AWAY;
	r2cc_info("SRQ: %u receives re-posted on rail %d, %u consumed before "
		  "the fence",
		  res.nrepost, s->backup_rail, res.npending);
	return 1;
}

static void sweep_one(struct r2cc_mig_srq *s, uint64_t now, bool all)
{
	struct r2cc_recv_replay res;
	struct r2cc_mig_qp *mq;
	const char *why = NULL;
	struct ibv_recv_wr *w, *bad;
	bool lost = false, done;
	int where, ret = 0;

	pthread_mutex_lock(&s->lock);
	where = s->where;
	done = s->done;
	pthread_mutex_unlock(&s->lock);
	/* At home, only when one of its QPs changed (@all) */
	if (where == R2CC_SRQ_AWAY || done || (where == R2CC_SRQ_HOME && !all))
		return;
	/* Every QP on it follows a move; one that cannot (unprotected, or
	 * not bound yet) sinks it: decided before any is fenced, so that
	 * the others then give up unfenced, as without r2cc. */
	for (mq = ps.qps; mq && !lost; mq = mq->next) {
		if (mq->srq != s)
			continue;
		r2cc_qlock_lock(&mq->lock);
		lost = !r2cc_mig_logs(mq) ||
		       (where == R2CC_SRQ_MOVING && !r2cc_mig_moving(mq) &&
			r2cc_mig_state(mq) != R2CC_PROT_READY);
		r2cc_qlock_unlock(&mq->lock);
	}
	for (mq = ps.qps; mq && !lost && where == R2CC_SRQ_MOVING;
	     mq = mq->next) {
		if (mq->srq != s)
			continue;
		r2cc_qlock_lock(&mq->lock);
		if (!r2cc_mig_moving(mq))
			r2cc_mig_fence(mq, R2CC_CTRL_WHY_SRQ);
		lost = !r2cc_mig_moving(mq); /* the fence itself failed */
		r2cc_qlock_unlock(&mq->lock);
	}
	pthread_mutex_lock(&s->lock);
	if (lost && s->where == R2CC_SRQ_MOVING) {
		why = "a QP on it cannot move";
		ret = -EPIPE;
	} else if (lost) {
		broken(s, "a QP on it is unprotected");
	} else if (s->where == R2CC_SRQ_MOVING) {
		ret = try_move(s, now, &why);
	}
	if (ret < 0) {
		/* The move is off: WRs logged meanwhile go where the
		 * program put them, and every QP on it gives up. */
		r2cc_err("SRQ: its move failed (%s)", why);
		s->where = R2CC_SRQ_BROKEN;
		r2cc_srqlog_unposted(s->log, &res);
		for (w = res.first; w; w = w->next)
			if (!s->ppost || s->ppost(s->srq, w, &bad))
				r2cc_err("SRQ: wr_id %#llx posted nowhere",
					 (unsigned long long)w->wr_id);
	}
	where = s->where;
	/* moved or broken: its QPs are told below, nothing more to sweep */
	s->done = where == R2CC_SRQ_AWAY || where == R2CC_SRQ_BROKEN;
	pthread_mutex_unlock(&s->lock);
	if (where == R2CC_SRQ_HOME || where == R2CC_SRQ_MOVING)
		return;
	for (mq = ps.qps; mq; mq = mq->next) {
		if (mq->srq != s)
			continue;
		r2cc_qlock_lock(&mq->lock);
		if (where == R2CC_SRQ_AWAY)
			r2cc_mig_recv_moved(mq);
		else
			r2cc_mig_fail(mq, why ? why : "its SRQ is unprotected");
		r2cc_qlock_unlock(&mq->lock);
	}
}

void r2cc_mig_srq_sweep(void)
{
	struct r2cc_mig_srq *s;
	uint64_t now = r2cc_mig_now_ns();
	bool all = atomic_exchange(&ps.srq_sweep, false);

	for (s = ps.srqs; s; s = s->next)
		sweep_one(s, now, all);
}
