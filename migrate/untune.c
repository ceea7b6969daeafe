/* SPDX-License-Identifier: MIT */
/*
 * untune.c - a QP r2cc stopped protecting gets back the ACK timeout,
 * retry count and RNR retry count the program set. r2cc lowers them on
 * the program's QP for a failover within R2CC_DETECT_MS (the shim at RTS,
 * a move back's recycle); without a failover they only make the QP more
 * fragile than the program asked. Verbs change them on a connected QP in
 * SQD alone (and some providers take an RC QP to SQD for none: mlx5's
 * modify table has no RTS to SQD; there they stay r2cc's, said once).
 * The program's next post takes the QP from RTS to SQD; drained at once,
 * it gets the program's values and RTS again, and the post goes on. Else
 * the post, and any until the send queue drained, are held here (copied:
 * the program may reuse an inline buffer) and the control thread's tick
 * ends the trip and posts them, in order, nobody's thread blocked. A post
 * must follow the return to RTS: rxe 6.1 does not look at its send queue
 * again then, so sends queued but not started when SQD began would wait
 * for the next post (fence-facts measures it).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "mig_int.h"
#include "tick.h"
#include "untune.h"

/* A send the program posted while its QP was in SQD, copied */
struct r2cc_mig_held_wr {
	struct r2cc_mig_held_wr *next;
	struct ibv_send_wr wr; /* its sg_list: sge */
	struct ibv_sge sge[]; /* num_sge of them; an inline send's bytes
			       * after them */
};

/* How long a post that took its QP to SQD waits for the drain at most
 * before it is held: what an idle QP's provider takes to notice */
#define MIG_UNTUNE_SPIN_NS 200000ULL

/* Which moves of enum r2cc_mig_tune are legal, by state */
static const uint8_t legal[R2CC_TUNE_N] = {
	[R2CC_TUNE_OWN] = 1U << R2CC_TUNE_LOWERED,
	[R2CC_TUNE_LOWERED] = 1U << R2CC_TUNE_DUE,
	[R2CC_TUNE_DUE] = 1U << R2CC_TUNE_SQD | 1U << R2CC_TUNE_OWN |
			  1U << R2CC_TUNE_KEPT,
	[R2CC_TUNE_SQD] = 1U << R2CC_TUNE_OWN | 1U << R2CC_TUNE_KEPT,
	[R2CC_TUNE_KEPT] = 0,
};

/* The one transition of mq->tune: @from to @to, if @mq is in @from and
 * the move is legal. (A compare-and-swap: the shim marks a QP lowered,
 * and the data path gives one up, without a lock.) */
static bool tune_step(struct r2cc_mig_qp *mq, enum r2cc_mig_tune from,
		      enum r2cc_mig_tune to)
{
	uint32_t cur = from;

	if (from >= R2CC_TUNE_N || !(legal[from] & 1U << to))
		return false;
	return atomic_compare_exchange_strong(&mq->tune, &cur, (uint32_t)to);
}

void r2cc_mig_lowered(struct r2cc_mig_qp *mq)
{
	if (!mq || !tune_step(mq, R2CC_TUNE_OWN, R2CC_TUNE_LOWERED))
		return;
	/* Given up while the program's modify_qp lowered them */
	if (atomic_load(&mq->state) == R2CC_PROT_NONE)
		r2cc_mig_untune_due(mq);
}

void r2cc_mig_untune_due(struct r2cc_mig_qp *mq)
{
	tune_step(mq, R2CC_TUNE_LOWERED, R2CC_TUNE_DUE);
}

bool r2cc_mig_untuning(const struct r2cc_mig_qp *mq)
{
	return mq && atomic_load_explicit(&mq->tune, memory_order_relaxed) ==
			     R2CC_TUNE_SQD;
}

bool r2cc_mig_sqd_event(struct r2cc_mig_qp *mq)
{
	unsigned int n = mq ? atomic_load(&mq->sqd_owed) : 0;

	while (n && !atomic_compare_exchange_weak(&mq->sqd_owed, &n, n - 1))
		;
	return n > 0;
}

/* The state of @mq's QP (-1: the query failed), and in *@draining
 * whether its send queue still drains. */
static int qp_state(struct r2cc_mig_qp *mq, bool *draining)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	memset(&a, 0, sizeof(a));
	if (ps.v.query_qp(mq->qp, &a, IBV_QP_STATE, &ia))
		return -1;
	*draining = a.sq_draining;
	return a.qp_state;
}

/* Said once per process at warning level, then at debug level */
static void say(struct r2cc_mig_qp *mq, _Atomic bool *said, const char *what,
		int err)
{
	bool before = atomic_exchange(said, true);

	r2cc_log_at(before ? R2CC_LOG_DEBUG : R2CC_LOG_WARN,
		    "QP %#x: %s (%s%s)", mq->qpn, what, strerror(err),
		    before ? "" : "; further ones at debug level");
}

/* @wr copied onto mq's held list: 0 or an errno (mq lock held). */
static int hold(struct r2cc_mig_qp *mq, const struct ibv_send_wr *wr)
{
	struct r2cc_mig_held_wr *h;
	uint64_t len = r2cc_wr_inline(wr) ? r2cc_wr_len(wr) : 0;
	int n = wr->num_sge;

	if (n < 0 || (uint32_t)n > mq->cap.max_send_sge ||
	    len > mq->cap.max_inline_data)
		return EINVAL;
	h = malloc(sizeof(*h) + (size_t)n * sizeof(h->sge[0]) + len);
	if (!h)
		return ENOMEM;
	r2cc_wr_copy(&h->wr, wr, h->sge, (char *)&h->sge[n]);
	h->next = NULL;
	*mq->tune_tail = h;
	mq->tune_tail = &h->next;
	return 0;
}

/* The held sends to the provider, in order (mq lock held, the QP at RTS):
 * one it refuses now is said (the program was told it went). */
static void post_held(struct r2cc_mig_qp *mq)
{
	static _Atomic bool said;
	struct r2cc_mig_held_wr *h;
	struct ibv_send_wr *bad;
	int ret;

	while ((h = mq->tune_held)) {
		mq->tune_held = h->next;
		ret = mq->psend(mq->qp, &h->wr, &bad);
		if (ret)
			say(mq, &said,
			    "a send held while its ACK timeout was put back "
			    "was refused at RTS: lost",
			    ret);
		free(h);
	}
	mq->tune_tail = &mq->tune_held;
}

/* In SQD: once drained, the program's values and back to RTS, then the
 * held sends (mq lock held). True: still in SQD. */
static bool from_sqd(struct r2cc_mig_qp *mq)
{
	static _Atomic bool said_pair, said_rts, said_done;
	bool before;
	struct ibv_qp_attr a;
	bool draining = false;
	int st = qp_state(mq, &draining), err, ret;

	if (st != IBV_QPS_SQD) {
		/* the program ended it meanwhile, or it failed: what is held
		 * goes where the provider says (flushed, or refused) */
		tune_step(mq, R2CC_TUNE_SQD, R2CC_TUNE_OWN);
		post_held(mq);
		return false;
	}
	if (draining)
		return true;
	memset(&a, 0, sizeof(a));
	a.timeout = mq->attr.timeout;
	a.retry_cnt = mq->attr.retry_cnt;
	a.rnr_retry = mq->attr.rnr_retry;
	err = ps.v.modify_qp(mq->qp, &a,
			     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY);
	if (err)
		say(mq, &said_pair,
		    "the provider refused the program's ACK timeout and "
		    "retry counts in SQD: it keeps r2cc's",
		    err);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	ret = ps.v.modify_qp(mq->qp, &a, IBV_QP_STATE);
	if (ret) {
		say(mq, &said_rts, "not back at RTS from SQD yet: tried again",
		    ret);
		return true;
	}
	tune_step(mq, R2CC_TUNE_SQD, err ? R2CC_TUNE_KEPT : R2CC_TUNE_OWN);
	post_held(mq);
	if (!err) {
		before = atomic_exchange(&said_done, true);
		r2cc_log_at(before ? R2CC_LOG_DEBUG : R2CC_LOG_INFO,
			    "QP %#x unprotected: its ACK timeout %u, retry "
			    "counts %u and %u are the program's again%s",
			    mq->qpn, mq->attr.timeout, mq->attr.retry_cnt,
			    mq->attr.rnr_retry,
			    before ? "" : " (further ones at debug level)");
	}
	return false;
}

/* The program's QP, at RTS, to SQD (mq lock held): false if it is not
 * there (then the post goes on as it is). */
static bool to_sqd(struct r2cc_mig_qp *mq)
{
	static _Atomic bool said;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD };
	bool draining;
	int err;

	/* Its connection is on the backup (made with the program's
	 * values), or r2cc failed its primary: nothing lowered is live */
	if (mq->on_backup || mq->perr || !mq->rts || !mq->psend ||
	    qp_state(mq, &draining) != IBV_QPS_RTS) {
		tune_step(mq, R2CC_TUNE_DUE, R2CC_TUNE_OWN);
		return false;
	}
	atomic_fetch_add(&mq->sqd_owed, 1);
	err = ps.v.modify_qp(mq->qp, &a, IBV_QP_STATE);
	if (!err)
		return tune_step(mq, R2CC_TUNE_DUE, R2CC_TUNE_SQD);
	atomic_fetch_sub(&mq->sqd_owed, 1);
	/* (not if another thread of the program moved it meanwhile) */
	if (qp_state(mq, &draining) == IBV_QPS_RTS) {
		say(mq, &said,
		    "unprotected, but the provider takes it to SQD for none: "
		    "it keeps r2cc's ACK timeout and retry counts",
		    err);
		tune_step(mq, R2CC_TUNE_DUE, R2CC_TUNE_KEPT);
	} else {
		tune_step(mq, R2CC_TUNE_DUE, R2CC_TUNE_OWN);
	}
	return false;
}

/* Just taken to SQD: back at RTS if its send queue drains within
 * MIG_UNTUNE_SPIN_NS (an idle QP's does, once the provider has looked;
 * rxe looks from a tasklet), on the program's thread. True: still in
 * SQD, for the tick. */
static bool drained_soon(struct r2cc_mig_qp *mq)
{
	uint64_t end = r2cc_mig_now_ns() + MIG_UNTUNE_SPIN_NS;
	bool sqd;

	while ((sqd = from_sqd(mq)) && r2cc_mig_now_ns() < end)
		sched_yield();
	return sqd;
}

bool r2cc_mig_untune_post(struct r2cc_mig_qp *mq, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad, int *ret)
{
	uint32_t t = atomic_load_explicit(&mq->tune, memory_order_relaxed);
	struct ibv_send_wr *w;

	if (t == R2CC_TUNE_DUE &&
	    (r2cc_mig_logs(mq) || !to_sqd(mq) || !drained_soon(mq)))
		return false; /* at RTS: posted as it comes */
	if (atomic_load(&mq->tune) != R2CC_TUNE_SQD)
		return false;
	*ret = 0;
	for (w = wr; w; w = w->next) {
		*ret = hold(mq, w);
		if (*ret) {
			*bad = w;
			break;
		}
	}
	atomic_store(&ps.untune, true);
	return true;
}

void r2cc_mig_untune_drop(struct r2cc_mig_qp *mq)
{
	struct r2cc_mig_held_wr *h;

	while ((h = mq->tune_held)) {
		mq->tune_held = h->next;
		free(h);
	}
	mq->tune_tail = &mq->tune_held;
}

void r2cc_mig_untune_tick(void)
{
	struct r2cc_mig_qp *mq;
	bool again = false;

	if (!atomic_exchange(&ps.untune, false))
		return;
	for (mq = ps.qps; mq; mq = mq->next) {
		if (atomic_load(&mq->tune) != R2CC_TUNE_SQD)
			continue;
		r2cc_qlock_lock(&mq->lock);
		if (atomic_load(&mq->tune) == R2CC_TUNE_SQD)
			again |= from_sqd(mq);
		r2cc_qlock_unlock(&mq->lock);
	}
	if (again)
		atomic_store(&ps.untune, true);
}
