/* SPDX-License-Identifier: MIT */
/*
 * objects.c - the protection's objects: a program CQ's and a program QP's
 * state, made with them and released with them, and what the shim and
 * the placement ask of all of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bcq.h"
#include "mig_int.h"
#include "objects.h"
#include "srq.h"
#include "standby.h"
#include "tick.h"
#include "untune.h"
#include "wake.h"

/*
 * The QPs indexed (ps.lock held): by resolve cookie, and by their own and
 * their peer's QPN, each a chain (QPNs repeat across devices and peers).
 */
static uintptr_t qpn_key(uint32_t qpn)
{
	return (uintptr_t)qpn + R2CC_MAP_KEY_MIN;
}

static struct r2cc_mig_qp **link_of(struct r2cc_mig_qp *mq, bool dest)
{
	return dest ? &mq->dest_next : &mq->qpn_next;
}

static int chain_add(struct r2cc_map *m, bool dest, uint32_t qpn,
		     struct r2cc_mig_qp *mq)
{
	*link_of(mq, dest) = r2cc_map_lookup(m, qpn_key(qpn));
	return r2cc_map_insert(m, qpn_key(qpn), mq);
}

static void chain_del(struct r2cc_map *m, bool dest, uint32_t qpn,
		      struct r2cc_mig_qp *mq)
{
	struct r2cc_mig_qp *head = r2cc_map_lookup(m, qpn_key(qpn)), **pp;
	struct r2cc_mig_qp *next = *link_of(mq, dest);

	*link_of(mq, dest) = NULL;
	if (head == mq && next) /* replacing a value: no memory needed */
		r2cc_map_insert(m, qpn_key(qpn), next);
	else if (head == mq)
		r2cc_map_remove(m, qpn_key(qpn));
	else
		for (pp = head ? link_of(head, dest) : NULL; pp && *pp;
		     pp = link_of(*pp, dest))
			if (*pp == mq) {
				*pp = next;
				break;
			}
}

static int maps_ready(void)
{
	struct r2cc_map *m[] = { &ps.by_cookie, &ps.by_qpn, &ps.by_dest };
	unsigned int i;

	for (i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if (!atomic_load_explicit(&m[i]->table, memory_order_relaxed) &&
		    r2cc_map_init(m[i]))
			return -ENOMEM;
	return 0;
}

struct r2cc_mig_qp *r2cc_mig_by_cookie(uint64_t cookie)
{
	return r2cc_map_lookup(&ps.by_cookie, (uintptr_t)cookie + 1);
}

struct r2cc_mig_qp *r2cc_mig_by_qpn(uint32_t qpn)
{
	return r2cc_map_lookup(&ps.by_qpn, qpn_key(qpn));
}

struct r2cc_mig_qp *r2cc_mig_by_dest(uint64_t peer, uint32_t dest_qpn)
{
	struct r2cc_mig_qp *mq;

	for (mq = r2cc_map_lookup(&ps.by_dest, qpn_key(dest_qpn));
	     mq && mq->peer != peer; mq = mq->dest_next)
		;
	return mq;
}

void r2cc_mig_unknown(const char *what, uint64_t peer, uint32_t dest_qpn)
{
	static struct r2cc_log_limit lim;
	static unsigned int told;
	struct r2cc_mig_qp *mq;
	unsigned int n = 0, same = 0;
	enum r2cc_log_say say;
	uint64_t held;
	bool why;

	r2cc_status_ctrl_add(R2CC_CTRL_MSGS_DROPPED, 1);
	/* (a peer can send these at any rate) */
	say = r2cc_log_limit_pass(&lim, &held);
	if (say == R2CC_LOG_HOLD)
		return;
	/* Why, for the first few (a bug to find, or a peer confused), at
	 * debug level after: a QP connected to that QPN with another peer,
	 * or not indexed; or none (the program destroyed it: a server
	 * whose client went away), and that peer's QPs */
	why = told < 8 || r2cc_log_get_level() >= R2CC_LOG_DEBUG;
	told += told < 8;
	r2cc_warn("%s for an unknown QP %#x from peer %016llx: dropped (%llu "
		  "more held back%s)",
		  what, dest_qpn, (unsigned long long)peer,
		  (unsigned long long)held, r2cc_log_limit_tail(say));
	for (mq = ps.qps; why && mq; mq = mq->next) {
		if (mq->dest_qpn == dest_qpn && n++ < 4)
			r2cc_warn("  QP %#x is connected to it: peer %016llx, "
				  "%sindexed, life %d",
				  mq->qpn, (unsigned long long)mq->peer,
				  mq->dest_indexed ? "" : "not ",
				  (int)mq->life);
		if (mq->peer == peer)
			same++;
	}
	if (why)
		r2cc_warn("  %u QPs connected to it, %u with that peer", n,
			  same);
}

int r2cc_mig_set_dest(struct r2cc_mig_qp *mq, uint32_t dest_qpn)
{
	int ret;

	if (mq->dest_indexed)
		chain_del(&ps.by_dest, true, mq->dest_qpn, mq);
	mq->dest_indexed = false;
	mq->dest_qpn = dest_qpn;
	ret = chain_add(&ps.by_dest, true, dest_qpn, mq);
	mq->dest_indexed = !ret;
	return ret;
}

struct r2cc_mig_cq *r2cc_mig_cq_new(struct ibv_cq *cq, int cqe)
{
	struct r2cc_mig_cq *mc = calloc(1, sizeof(*mc));

	if (!mc)
		return NULL;
	mc->cq = cq;
	/* Room for a full CQ of synthesised completions. */
	mc->stash = r2cc_wcstash_new(cqe > 0 ? (uint32_t)cqe * 2 : 64);
	if (!mc->stash) {
		free(mc);
		return NULL;
	}
	pthread_mutex_init(&mc->lock, NULL);
	return mc;
}

void r2cc_mig_cq_free(struct r2cc_mig_cq *mc)
{
	if (!mc)
		return;
	r2cc_mig_bell_free(mc);
	r2cc_mig_bcq_free_all(mc);
	r2cc_wcstash_free(mc->stash);
	pthread_mutex_destroy(&mc->lock);
	free(mc);
}

bool r2cc_mig_cq_busy(struct r2cc_mig_cq *mc)
{
	return !r2cc_wcstash_empty(mc->stash) ||
	       __atomic_load_n(&mc->nlive, __ATOMIC_RELAXED);
}

struct r2cc_mig_qp *
r2cc_mig_qp_new(struct ibv_qp *qp, const struct ibv_qp_cap *cap, bool sig_all,
		struct r2cc_mig_cq *scq, struct r2cc_mig_cq *rcq,
		struct r2cc_mig_srq *srq, struct r2cc_status_qp *slot)
{
	struct r2cc_mig_qp *mq;

	if (!r2cc_mig_on() || !scq || !rcq)
		return NULL;
	mq = calloc(1, sizeof(*mq));
	if (!mq)
		return NULL;
	/* Up to twice what the provider reported, plus one: rxe rounds a
	 * queue up to 2^k - 1 and reports what was asked for (128 takes
	 * 255), and a program may fill what it was given (libfabric's rxm
	 * does); each log starts at what was reported, plus one (at most
	 * R2CC_LOG_FIRST), and grows when a program posts past it. The
	 * receive log grows past that too: posted minus polled also counts
	 * what the CQ holds. */
	mq->rlog = r2cc_recvlog_new(cap->max_recv_wr + 1 < R2CC_LOG_FIRST ?
					    cap->max_recv_wr + 1 :
					    R2CC_LOG_FIRST,
				    cap->max_recv_sge ? cap->max_recv_sge : 1);
	mq->slog = r2cc_sendlog_new(2 * cap->max_send_wr + 1,
				    cap->max_send_sge ? cap->max_send_sge : 1,
				    cap->max_inline_data, sig_all);
	if (!mq->rlog || !mq->slog) {
		r2cc_recvlog_free(mq->rlog);
		r2cc_sendlog_free(mq->slog);
		free(mq);
		r2cc_warn("QP %#x: no memory to log it: unprotected",
			  qp->qp_num);
		r2cc_status_qp_unprot(slot, R2CC_UNPROT_BUDGET);
		return NULL;
	}
	r2cc_qlock_init(&mq->lock);
	mq->tune_tail = &mq->tune_held;
	mq->qp = qp;
	mq->pd = qp->pd;
	mq->qpn = qp->qp_num;
	mq->cap = *cap;
	mq->sig_all = sig_all;
	mq->scq = scq;
	mq->rcq = rcq;
	mq->slot = slot;
	mq->rail = -1;
	mq->backup_rail = -1;
	mq->fb.peer_psn = R2CC_PSN_NONE;
	mq->fb.round_peer_psn = R2CC_PSN_NONE;
	mq->life = R2CC_LIFE_RUN; /* logged from its creation on */
	if (srq)
		r2cc_mig_srq_joined(mq, srq);
	pthread_mutex_lock(&ps.lock);
	mq->cookie = ++ps.next_cookie;
	if (maps_ready() ||
	    r2cc_map_insert(&ps.by_cookie, (uintptr_t)mq->cookie + 1, mq)) {
		pthread_mutex_unlock(&ps.lock);
		goto nomem;
	}
	if (chain_add(&ps.by_qpn, false, mq->qpn, mq)) {
		r2cc_map_remove(&ps.by_cookie, (uintptr_t)mq->cookie + 1);
		pthread_mutex_unlock(&ps.lock);
		goto nomem;
	}
	mq->next = ps.qps;
	ps.qps = mq;
	pthread_mutex_unlock(&ps.lock);
	return mq;
nomem:
	r2cc_mig_srq_left(mq);
	r2cc_recvlog_free(mq->rlog);
	r2cc_sendlog_free(mq->slog);
	free(mq);
	r2cc_warn("QP %#x: no memory to index it: unprotected", qp->qp_num);
	r2cc_status_qp_unprot(slot, R2CC_UNPROT_BUDGET);
	return NULL;
}

/*
 * Freed QPs, in the order they were freed (ps.lock), each really freed
 * once MIG_RETIRED more have come after it and a second has passed: a
 * thread polling one of its CQs may still hold a pointer read from the
 * CQ's list (r2cc_mig_poll_more()), or from the shim's QP for a
 * completion polled after the destroy. The memory of destroyed QPs stays
 * bounded by the larger of MIG_RETIRED and a second's worth of them.
 */
static struct {
	struct r2cc_mig_qp *head, *tail; /* linked by next */
	unsigned int n;
} retired;

static void qp_free(struct r2cc_mig_qp *mq)
{
	free(mq);
}

void r2cc_mig_free(struct r2cc_mig_qp *mq)
{
	uint64_t now = r2cc_mig_now_ns();
	struct r2cc_mig_qp *old;

	if (!mq)
		return;
	pthread_mutex_lock(&ps.lock);
	if (mq->freed_ns) { /* (freed twice: once is all) */
		pthread_mutex_unlock(&ps.lock);
		return;
	}
	mq->freed_ns = now;
	mq->next = NULL;
	if (retired.tail)
		retired.tail->next = mq;
	else
		retired.head = mq;
	retired.tail = mq;
	retired.n++;
	while (retired.n > MIG_RETIRED &&
	       r2cc_mig_past(retired.head->freed_ns, now, 1000)) {
		old = retired.head;
		retired.head = old->next;
		retired.n--;
		qp_free(old);
	}
	if (!retired.head)
		retired.tail = NULL;
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_release(struct r2cc_mig_qp *mq)
{
	struct r2cc_mig_qp **pp;

	if (!mq)
		return;
	pthread_mutex_lock(&ps.lock);
	/* Placement is being asked about the program's QP (rebind.c): the
	 * provider must not free it meanwhile. Bounded by that call (local
	 * queries, no network, none of the program's locks). */
	while (mq->placing)
		pthread_cond_wait(&ps.placed_cv, &ps.lock);
	for (pp = &ps.qps; *pp && *pp != mq; pp = &(*pp)->next)
		;
	if (*pp) {
		*pp = mq->next;
		r2cc_map_remove(&ps.by_cookie, (uintptr_t)mq->cookie + 1);
		chain_del(&ps.by_qpn, false, mq->qpn, mq);
		if (mq->dest_indexed)
			chain_del(&ps.by_dest, true, mq->dest_qpn, mq);
		mq->dest_indexed = false;
	}
	pthread_mutex_unlock(&ps.lock);
	r2cc_qlock_lock(&mq->lock);
	/* Under its lock: a replay cannot list it again meanwhile. */
	r2cc_mig_bcq_detach(mq);
	r2cc_mig_srq_left(mq);
	r2cc_mig_step(mq, R2CC_MEV_RELEASE);
	r2cc_mig_backup_destroy(mq);
	r2cc_sendlog_free(mq->slog);
	r2cc_recvlog_free(mq->rlog);
	r2cc_mig_untune_drop(mq);
	free(mq->held);
	mq->slog = NULL;
	mq->rlog = NULL;
	mq->held = NULL;
	mq->nheld = mq->held_cap = 0;
	r2cc_qlock_unlock(&mq->lock);
}

bool r2cc_mig_covers(const struct r2cc_mig_qp *mq)
{
	/* A racy read is fine: an event raced with a move either way. */
	return mq && r2cc_mig_logs(mq) &&
	       (r2cc_mig_moving(mq) || mq->on_backup);
}

void r2cc_mig_rail_loads(uint32_t *n, int nrail)
{
	struct r2cc_mig_qp *mq;

	pthread_mutex_lock(&ps.lock);
	for (mq = ps.qps; mq; mq = mq->next)
		if (r2cc_mig_logs(mq) && mq->backup_rail >= 0 &&
		    mq->backup_rail < nrail)
			n[mq->backup_rail]++;
	pthread_mutex_unlock(&ps.lock);
}
