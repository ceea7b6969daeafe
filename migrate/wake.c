/* SPDX-License-Identifier: MIT */
/*
 * wake.c - a program asleep on its completion channel: news it cannot
 * see (a standby's completion, one r2cc stashed) raises its CQ's event;
 * the standbys' CQs listed on the program's, and armed with it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bell.h"
#include "mig_int.h"
#include "wake.h"

/*
 * Wake a program sleeping on @mc's completion channel (lock held): its CQ
 * has news it cannot see raise an event (a backup's completion, or one
 * r2cc stashed). If the program armed @mc since the last ring, a
 * zero-length WR posted on @mq's primary, which is in ERR, flushes at once
 * into @mc and raises the event; the flush itself is dropped when polled
 * (R2CC_RING_WRID). A primary a move back recycled rings @mc's doorbell
 * instead (bell.c). One ring per arming: the CQ never fills with them.
 */
void r2cc_mig_ring(struct r2cc_mig_qp *mq, struct r2cc_mig_cq *mc)
{
	int ret;

	if (!mc || !atomic_exchange(&mc->armed, 0))
		return;
	/* Only into ERR: a recycled primary would send it. */
	if (!mq->perr) {
		ret = r2cc_mig_bell_ring(mc);
		if (ret)
			atomic_store(&mc->armed, 1);
		return;
	}
	/* A send when it lands on @mc: rxe flushes a send posted in ERR at
	 * once (its post rings the kernel), a receive only when something
	 * else runs the QP. */
	if (mc == mq->scq && mq->psend) {
		struct ibv_send_wr w = { .wr_id = R2CC_RING_WRID,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		ret = mq->psend(mq->qp, &w, &bad);
	} else if (mc == mq->rcq && mq->precv) {
		struct ibv_recv_wr w = { .wr_id = R2CC_RING_WRID }, *bad;

		ret = mq->precv(mq->qp, &w, &bad);
	} else {
		ret = ENOSYS;
	}
	if (ret) {
		atomic_store(&mc->armed, 1);
		r2cc_dbg("QP %#x: no completion event raised (%s)", mq->qpn,
			 strerror(ret));
	}
}

static void arm_backups(struct r2cc_mig_qp *mq)
{
	if (mq->bscq)
		mq->bscq->context->ops.req_notify_cq(mq->bscq, 0);
	if (mq->brcq && mq->brcq != mq->bscq)
		mq->brcq->context->ops.req_notify_cq(mq->brcq, 0);
}

void r2cc_mig_cq_arm(struct r2cc_mig_cq *mc)
{
	int i;

	atomic_store(&mc->armed, 1);
	if (!__atomic_load_n(&mc->nqps, __ATOMIC_ACQUIRE))
		return;
	/* Under the list's lock: a QP being destroyed detaches its backup
	 * CQs (under it) before it destroys them. */
	pthread_mutex_lock(&mc->lock);
	for (i = 0; i < mc->nqps; i++)
		mc->bcq[i]->context->ops.req_notify_cq(mc->bcq[i], 0);
	pthread_mutex_unlock(&mc->lock);
}

void r2cc_mig_ring_ready(int fd, void *arg)
{
	struct ibv_comp_channel *ch = arg;
	struct ibv_cq *cq;
	void *ctx;

	(void)fd;
	/* The fd is non-blocking: every event pending, then EAGAIN. */
	while (!ps.v.get_cq_event(ch, &cq, &ctx)) {
		struct r2cc_mig_qp *mq = ctx; /* never freed */

		/* Acked first: a destroy of this CQ waits for it. */
		ps.v.ack_cq_events(cq, 1);
		pthread_mutex_lock(&mq->lock);
		if (cq == mq->bscq || cq == mq->brcq) {
			cq->context->ops.req_notify_cq(cq, 0);
			r2cc_mig_ring(mq, cq == mq->bscq ? mq->scq : mq->rcq);
		}
		pthread_mutex_unlock(&mq->lock);
	}
}

static void cq_attach(struct r2cc_mig_cq *mc, struct r2cc_mig_qp *mq,
		      struct ibv_cq *bcq)
{
	pthread_mutex_lock(&mc->lock);
	if (mc->nqps < R2CC_MIG_CQ_QPS) {
		__atomic_store_n(&mc->qps[mc->nqps], mq, __ATOMIC_RELEASE);
		__atomic_store_n(&mc->bcq[mc->nqps], bcq, __ATOMIC_RELEASE);
		__atomic_store_n(&mc->nqps, mc->nqps + 1, __ATOMIC_RELEASE);
	} else {
		r2cc_err("QP %#x: too many migrated QPs on one CQ", mq->qpn);
	}
	pthread_mutex_unlock(&mc->lock);
}

void r2cc_mig_cq_join(struct r2cc_mig_qp *mq)
{
	cq_attach(mq->scq, mq, mq->bscq);
	if (mq->rcq != mq->scq || mq->brcq != mq->bscq)
		cq_attach(mq->rcq, mq, mq->brcq);
	arm_backups(mq);
}

void r2cc_mig_cq_detach(struct r2cc_mig_qp *mq)
{
	struct r2cc_mig_cq *cqs[2] = { mq->scq, mq->rcq };
	int c, i;

	for (c = 0; c < 2; c++) {
		if (!cqs[c])
			continue;
		pthread_mutex_lock(&cqs[c]->lock);
		for (i = 0; i < cqs[c]->nqps; i++) {
			int last = cqs[c]->nqps - 1;

			if (cqs[c]->qps[i] != mq)
				continue;
			__atomic_store_n(&cqs[c]->qps[i], cqs[c]->qps[last],
					 __ATOMIC_RELEASE);
			__atomic_store_n(&cqs[c]->bcq[i], cqs[c]->bcq[last],
					 __ATOMIC_RELEASE);
			__atomic_store_n(&cqs[c]->nqps, last, __ATOMIC_RELEASE);
			i--;
		}
		pthread_mutex_unlock(&cqs[c]->lock);
	}
}

void r2cc_mig_wake(struct r2cc_mig_qp *mq)
{
	r2cc_mig_ring(mq, mq->scq);
	if (mq->rcq != mq->scq)
		r2cc_mig_ring(mq, mq->rcq);
}
