/* SPDX-License-Identifier: MIT */
/*
 * wake.c - a program asleep on its completion channel: news it cannot
 * see (a standby's completion, one r2cc stashed) raises its CQ's event;
 * the standbys' CQs listed on the program's, and armed with it.
 */
#include <errno.h>
#include <limits.h>
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

/* Is @mq's standby CQ @bcq armed, its event not come yet? (Read without
 * the QP's lock, as ring_busy() reads its CQs.) */
static _Atomic bool *armed_of(struct r2cc_mig_qp *mq, const struct ibv_cq *bcq)
{
	return bcq != __atomic_load_n(&mq->bscq, __ATOMIC_RELAXED) &&
			       bcq == __atomic_load_n(&mq->brcq,
						      __ATOMIC_RELAXED) ?
		       &mq->brcq_armed :
		       &mq->bscq_armed;
}

/* Arm @mq's standby CQ @bcq, unless it is armed already: a CQ stays
 * armed until its next completion's event, and on rxe each arm is a
 * system call, which a program asleep on a CQ with hundreds of moved
 * QPs would pay for every one at every sleep. */
static void arm(struct r2cc_mig_qp *mq, struct ibv_cq *bcq)
{
	_Atomic bool *armed = armed_of(mq, bcq);

	if (atomic_exchange(armed, true))
		return;
	if (bcq->context->ops.req_notify_cq(bcq, 0))
		atomic_store(armed, false); /* tried again at the next arm */
}

static void arm_backups(struct r2cc_mig_qp *mq)
{
	if (mq->bscq)
		arm(mq, mq->bscq);
	if (mq->brcq && mq->brcq != mq->bscq)
		arm(mq, mq->brcq);
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
		arm(mc->list->e[i].qp, mc->list->e[i].bcq);
	pthread_mutex_unlock(&mc->lock);
}

/* An event of @mq's standby CQ @cq while the QP's lock is held elsewhere
 * (a move works on it: hundreds of ms under load). This thread reads and
 * writes every peer's frames and does not wait for it: the program CQ's
 * doorbell rings (its own lock only). */
static void ring_busy(struct r2cc_mig_qp *mq, struct ibv_cq *cq)
{
	/* Without the QP's lock: its program CQs are its own for its life;
	 * a standby CQ remade meanwhile makes this event a stale one, and a
	 * ring too many is harmless. */
	struct ibv_cq *bs = __atomic_load_n(&mq->bscq, __ATOMIC_RELAXED),
		      *br = __atomic_load_n(&mq->brcq, __ATOMIC_RELAXED);
	struct r2cc_mig_cq *mc = cq == bs ? mq->scq : cq == br ? mq->rcq : NULL;

	if (!mc || !atomic_exchange(&mc->armed, 0))
		return;
	if (r2cc_mig_bell_ring(mc)) {
		/* the program's next arm arms this CQ again */
		atomic_store(&mc->armed, 1);
		r2cc_dbg("QP %#x: no completion event raised (its doorbell)",
			 mq->qpn);
	}
}

void r2cc_mig_ring_ready(int fd, void *arg)
{
	struct ibv_comp_channel *ch = arg;
	struct ibv_cq *cq;
	void *ctx;

	(void)fd;
	/* The fd is non-blocking: every event pending, then EAGAIN. */
	while (!ps.v.get_cq_event(ch, &cq, &ctx)) {
		struct r2cc_mig_qp *mq = ctx; /* (objects.c: kept) */

		/* Acked first: a destroy of this CQ waits for it. */
		ps.v.ack_cq_events(cq, 1);
		atomic_store(armed_of(mq, cq), false);
		if (!r2cc_qlock_trylock(&mq->lock)) {
			ring_busy(mq, cq);
			continue;
		}
		if (cq == mq->bscq || cq == mq->brcq) {
			struct r2cc_mig_cq *mc =
				cq == mq->bscq ? mq->scq : mq->rcq;

			/* Not armed again here: the program, woken (or
			 * awake: not armed), arms its CQ, and with it this
			 * one, before it sleeps again (r2cc_mig_cq_arm()),
			 * so that an awake program's standby completions
			 * raise no events. Only a ring that failed waits
			 * for the next completion. */
			r2cc_mig_ring(mq, mc);
			if (mc && atomic_load(&mc->armed))
				arm(mq, cq);
		}
		r2cc_qlock_unlock(&mq->lock);
	}
}

/* How many entries a QP on @scq and @rcq may take on @mc: its two
 * standby CQs may both feed one program CQ. */
static int entries(const struct r2cc_mig_cq *mc, const struct r2cc_mig_cq *scq,
		   const struct r2cc_mig_cq *rcq)
{
	return (mc == scq) + (mc == rcq);
}

static int reserve(struct r2cc_mig_cq *mc, int n)
{
	struct r2cc_mig_cqlist *l = mc->list, *nl;
	int cap;

	if (l && mc->nresv + n <= l->cap) {
		mc->nresv += n;
		return 0;
	}
	for (cap = l ? l->cap : 16; cap < mc->nresv + n; cap *= 2)
		if (cap > INT_MAX / 4)
			return -ENOMEM;
	nl = calloc(1, sizeof(*nl) + (size_t)cap * sizeof(nl->e[0]));
	if (!nl)
		return -ENOMEM;
	nl->cap = cap;
	nl->old = l;
	if (l)
		memcpy(nl->e, l->e, (size_t)mc->nqps * sizeof(nl->e[0]));
	/* Before nqps can count past the old list's end. */
	__atomic_store_n(&mc->list, nl, __ATOMIC_RELEASE);
	mc->nresv += n;
	return 0;
}

int r2cc_mig_cq_reserve(struct r2cc_mig_cq *scq, struct r2cc_mig_cq *rcq)
{
	int ret;

	pthread_mutex_lock(&scq->lock);
	ret = reserve(scq, entries(scq, scq, rcq));
	pthread_mutex_unlock(&scq->lock);
	if (ret || rcq == scq)
		return ret;
	pthread_mutex_lock(&rcq->lock);
	ret = reserve(rcq, 1);
	pthread_mutex_unlock(&rcq->lock);
	if (ret) {
		pthread_mutex_lock(&scq->lock);
		scq->nresv--;
		pthread_mutex_unlock(&scq->lock);
	}
	return ret;
}

void r2cc_mig_cq_unreserve(struct r2cc_mig_cq *scq, struct r2cc_mig_cq *rcq)
{
	struct r2cc_mig_cq *cqs[2] = { scq, rcq };
	int c;

	for (c = 0; c < 2; c++) {
		if (c && rcq == scq)
			break;
		pthread_mutex_lock(&cqs[c]->lock);
		cqs[c]->nresv -= entries(cqs[c], scq, rcq);
		pthread_mutex_unlock(&cqs[c]->lock);
	}
}

void r2cc_mig_cq_list_free(struct r2cc_mig_cq *mc)
{
	struct r2cc_mig_cqlist *l = mc->list, *old;

	for (; l; l = old) {
		old = l->old;
		free(l);
	}
	mc->list = NULL;
}

static void cq_attach(struct r2cc_mig_cq *mc, struct r2cc_mig_qp *mq,
		      struct ibv_cq *bcq)
{
	struct r2cc_mig_cqent *e;

	pthread_mutex_lock(&mc->lock);
	if (mc->list && mc->nqps < mc->list->cap) {
		e = &mc->list->e[mc->nqps];
		__atomic_store_n(&e->qp, mq, __ATOMIC_RELEASE);
		__atomic_store_n(&e->bcq, bcq, __ATOMIC_RELEASE);
		__atomic_store_n(&mc->nqps, mc->nqps + 1, __ATOMIC_RELEASE);
	} else {
		/* A QP joins only after its reserve() succeeded. */
		r2cc_err("QP %#x: no room on its CQ's list: a bug", mq->qpn);
	}
	pthread_mutex_unlock(&mc->lock);
}

void r2cc_mig_cq_join(struct r2cc_mig_qp *mq)
{
	/* Listed once: a QP moving on from one standby to another. */
	r2cc_mig_cq_detach(mq);
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
		struct r2cc_mig_cq *mc = cqs[c];

		if (!mc || (c && mc == cqs[0]))
			continue;
		pthread_mutex_lock(&mc->lock);
		for (i = 0; i < mc->nqps; i++) {
			struct r2cc_mig_cqent *e = mc->list->e,
					      *last = &e[mc->nqps - 1];

			if (e[i].qp != mq)
				continue;
			__atomic_store_n(&e[i].qp, last->qp, __ATOMIC_RELEASE);
			__atomic_store_n(&e[i].bcq, last->bcq,
					 __ATOMIC_RELEASE);
			__atomic_store_n(&mc->nqps, mc->nqps - 1,
					 __ATOMIC_RELEASE);
			i--;
		}
		pthread_mutex_unlock(&mc->lock);
	}
}

void r2cc_mig_wake(struct r2cc_mig_qp *mq)
{
	r2cc_mig_ring(mq, mq->scq);
	if (mq->rcq != mq->scq)
		r2cc_mig_ring(mq, mq->rcq);
}
