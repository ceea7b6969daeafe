/* SPDX-License-Identifier: MIT */
/*
 * wake.c - a program asleep on its completion channel: news it cannot
 * see (a standby's completion, one r2cc stashed) raises its CQ's event;
 * the standbys' CQs are armed with it (bcq.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bcq.h"
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

void r2cc_mig_cq_arm(struct r2cc_mig_cq *mc)
{
	atomic_store(&mc->armed, 1);
	r2cc_mig_bcq_arm(mc);
}

void r2cc_mig_ring_ready(int fd, void *arg)
{
	struct ibv_comp_channel *ch = arg;
	struct ibv_cq *cq;
	void *ctx;

	(void)fd;
	/* The fd is non-blocking: every event pending, then EAGAIN. */
	while (!ps.v.get_cq_event(ch, &cq, &ctx)) {
		/* Acknowledged after: a destroy of its CQ (ctx) waits for
		 * that, so the CQ's object and its program's CQ outlive the
		 * handler, which waits for no lock such a destroy holds. */
		r2cc_mig_bcq_event(ctx);
		ps.v.ack_cq_events(cq, 1);
	}
}

void r2cc_mig_wake(struct r2cc_mig_qp *mq)
{
	r2cc_mig_ring(mq, mq->scq);
	if (mq->rcq != mq->scq)
		r2cc_mig_ring(mq, mq->rcq);
}
