/* SPDX-License-Identifier: MIT */
/*
 * bcq.c - the standbys' CQs, shared: the backups of the QPs on one
 * program CQ complete on one CQ per rail (a few, when they outgrow one),
 * so that a program's poll after a move polls a CQ per rail, not one
 * per moved QP. What a poll takes from one goes to its standby's slot
 * (by QP number), in the CQ's order; a QP takes its slot's completions
 * under its own lock: at the program's polls once it has moved onto its
 * backup (joined), in a move's drains otherwise. Lock order: a QP's
 * lock, then a standby CQ's (only tried the other way), then its program
 * CQ's.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "bcq.h"
#include "bell.h"
#include "complete.h"
#include "wake.h"

/* The largest standby CQ made to hold more standbys (entries): beyond,
 * another CQ; one standby that needs more gets one its size. */
#define BCQ_MAX_CQE 16384
/* Completions one poll takes from a standby CQ at a time */
#define BCQ_BATCH 16

/* ---- a slot's ring (b->lock held) -------------------------------------- */

static int ring_push(struct r2cc_mig_bslot *s, const struct ibv_wc *wc)
{
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? 2 * s->cap : 8, i;
		struct ibv_wc *w;

		if (cap > UINT32_MAX / 2 ||
		    !(w = malloc((size_t)cap * sizeof(*w))))
			return -ENOMEM;
		for (i = 0; i < s->n; i++)
			w[i] = s->wc[(s->head + i) % s->cap];
		free(s->wc);
		s->wc = w;
		s->cap = cap;
		s->head = 0;
	}
	s->wc[(s->head + s->n) % s->cap] = *wc;
	s->n++;
	return 0;
}

static bool ring_pop(struct r2cc_mig_bslot *s, struct ibv_wc *wc)
{
	if (!s->n)
		return false;
	*wc = s->wc[s->head];
	s->head = (s->head + 1) % s->cap;
	s->n--;
	return true;
}

static void ready_add(struct r2cc_mig_bcq *b, struct r2cc_mig_bslot *s)
{
	/* (room for every slot: made at attach) */
	if (s->ready || !s->joined || !s->n || b->nready >= b->ready_cap)
		return;
	s->ready = true;
	b->ready[b->nready++] = s;
}

static void ready_del(struct r2cc_mig_bcq *b, struct r2cc_mig_bslot *s)
{
	uint32_t i;

	if (!s->ready)
		return;
	for (i = 0; i < b->nready; i++)
		if (b->ready[i] == s) {
			b->ready[i] = b->ready[--b->nready];
			break;
		}
	s->ready = false;
}

/* Up to @max completions of @b's CQ into their slots (lock held). */
static void fill(struct r2cc_mig_bcq *b, int max)
{
	struct ibv_wc wc[BCQ_BATCH];
	int got, i, done = 0;

	if (!b->cq)
		return;
	do {
		got = b->cq->context->ops.poll_cq(b->cq, BCQ_BATCH, wc);
		for (i = 0; i < got; i++) {
			struct r2cc_mig_bslot *s = r2cc_map_lookup(
				&b->by_qpn,
				(uintptr_t)wc[i].qp_num + R2CC_MAP_KEY_MIN);

			if (!s) /* of a standby destroyed since: dropped */
				continue;
			if (ring_push(s, &wc[i])) {
				r2cc_err("standby QP %#x: no memory for a "
					 "completion: wr_id %#llx lost",
					 wc[i].qp_num,
					 (unsigned long long)wc[i].wr_id);
				continue;
			}
			ready_add(b, s);
		}
		done += got > 0 ? got : 0;
	} while (got == BCQ_BATCH && done < max);
}

/* ---- the program CQ's list of standby CQs with a moved QP -------------- */

/* Room on @mc's list for one standby CQ more (mc->lock held). */
static int list_room(struct r2cc_mig_cq *mc)
{
	struct r2cc_mig_cqlist *l = mc->list, *nl;
	int cap;

	if (l && mc->nbcq < l->cap)
		return 0;
	cap = l ? 2 * l->cap : 4;
	if (cap > INT_MAX / 4)
		return -ENOMEM;
	nl = calloc(1, sizeof(*nl) + (size_t)cap * sizeof(nl->e[0]));
	if (!nl)
		return -ENOMEM;
	nl->cap = cap;
	nl->old = l;
	if (l)
		memcpy(nl->e, l->e, (size_t)mc->nlive * sizeof(nl->e[0]));
	/* Before nlive can count past the old list's end. */
	__atomic_store_n(&mc->list, nl, __ATOMIC_RELEASE);
	return 0;
}

/* @b on its program CQ's list or off it (b->lock held). */
static void list_set(struct r2cc_mig_bcq *b, bool on)
{
	struct r2cc_mig_cq *mc = b->mc;
	int i;

	pthread_mutex_lock(&mc->lock);
	for (i = 0; i < mc->nlive && mc->list->e[i] != b; i++)
		;
	if (on && i == mc->nlive) {
		__atomic_store_n(&mc->list->e[i], b, __ATOMIC_RELEASE);
		__atomic_store_n(&mc->nlive, mc->nlive + 1, __ATOMIC_RELEASE);
	} else if (!on && i < mc->nlive) {
		__atomic_store_n(&mc->list->e[i], mc->list->e[mc->nlive - 1],
				 __ATOMIC_RELEASE);
		__atomic_store_n(&mc->nlive, mc->nlive - 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&mc->lock);
}

/* Slot @s of @b joined (@on) or not (b->lock held): @b is on its program
 * CQ's list while a slot of it is joined. */
static void set_joined(struct r2cc_mig_bcq *b, struct r2cc_mig_bslot *s,
		       bool on)
{
	if (s->joined != on) {
		s->joined = on;
		if (on ? !b->njoined++ : !--b->njoined)
			list_set(b, on);
	}
	if (on)
		ready_add(b, s); /* what came before the move */
	else
		ready_del(b, s);
}

/* ---- standby CQs ------------------------------------------------------- */

static struct r2cc_mig_bcq *bcq_new(struct r2cc_mig_cq *mc,
				    struct ibv_context *ctx,
				    struct ibv_comp_channel *ch, int need)
{
	struct r2cc_mig_bcq *b, *o;
	int cqe = 0;

	if (list_room(mc))
		return NULL;
	/* Twice what the rail's CQs of @mc hold so far: a few CQs for
	 * many standbys, and room for at most as many again. */
	for (o = mc->bcqs; o; o = o->next)
		if (o->ctx == ctx && o->ch == ch && cqe < BCQ_MAX_CQE)
			cqe += 2 * o->cqe;
	if (cqe > BCQ_MAX_CQE)
		cqe = BCQ_MAX_CQE;
	if (cqe < need)
		cqe = need;
	b = calloc(1, sizeof(*b));
	if (!b || r2cc_map_init(&b->by_qpn)) {
		free(b);
		return NULL;
	}
	b->mc = mc;
	b->ctx = ctx;
	b->ch = ch;
	pthread_mutex_init(&b->lock, NULL);
	b->cq = ps.v.create_cq(ctx, cqe, b, ch, 0);
	if (!b->cq && cqe > need)
		b->cq = ps.v.create_cq(ctx, cqe = need, b, ch, 0);
	if (!b->cq) {
		pthread_mutex_destroy(&b->lock);
		r2cc_map_destroy(&b->by_qpn);
		free(b);
		return NULL;
	}
	b->cqe = cqe;
	b->next = mc->bcqs;
	mc->bcqs = b;
	mc->nbcq++;
	return b;
}

/* A place for a standby on @mc's CQs of @ctx: @need entries. */
static int slot_attach(struct r2cc_mig_qp *mq, struct r2cc_mig_bslot *s,
		       struct r2cc_mig_cq *mc, struct ibv_context *ctx,
		       struct ibv_comp_channel *ch, int need)
{
	struct r2cc_mig_bcq *b;
	struct r2cc_mig_bslot **r;
	int ret = 0;

	pthread_mutex_lock(&mc->lock);
	for (b = mc->bcqs; b; b = b->next)
		if (b->ctx == ctx && b->ch == ch &&
		    __atomic_load_n(&b->cq, __ATOMIC_RELAXED) &&
		    b->cqe - b->used >= need)
			break;
	if (!b)
		b = bcq_new(mc, ctx, ch, need);
	if (b)
		b->used += need;
	pthread_mutex_unlock(&mc->lock);
	if (!b)
		return errno ? errno : ENOMEM;
	pthread_mutex_lock(&b->lock);
	if (b->nslots + 1 > b->ready_cap) {
		/* room on the ready list for every slot */
		uint32_t cap = b->ready_cap ? 2 * b->ready_cap : 8;

		r = realloc(b->ready, (size_t)cap * sizeof(*r));
		if (r) {
			b->ready = r;
			b->ready_cap = cap;
		} else {
			ret = ENOMEM;
		}
	}
	if (!ret) {
		s->mq = mq;
		s->need = need;
		s->bqpn = 0;
		s->wc = NULL;
		s->head = s->n = s->cap = 0;
		s->ready = s->joined = false;
		/* (read by a poll of another CQ it was on: see bcq_poll1()) */
		__atomic_store_n(&s->b, b, __ATOMIC_RELAXED);
		s->next = b->slots;
		b->slots = s;
		b->nslots++;
	}
	pthread_mutex_unlock(&b->lock);
	if (ret) {
		pthread_mutex_lock(&mc->lock);
		b->used -= need;
		pthread_mutex_unlock(&mc->lock);
	}
	return ret;
}

static void slot_leave(struct r2cc_mig_bslot *s)
{
	struct r2cc_mig_bcq *b = s->b;
	struct r2cc_mig_bslot **pp;

	if (!b)
		return;
	pthread_mutex_lock(&b->lock);
	/* Its QP is destroyed: what it left goes (a QP made later may
	 * get its number). */
	fill(b, b->cqe);
	if (s->bqpn)
		r2cc_map_remove(&b->by_qpn,
				(uintptr_t)s->bqpn + R2CC_MAP_KEY_MIN);
	set_joined(b, s, false);
	for (pp = &b->slots; *pp && *pp != s; pp = &(*pp)->next)
		;
	if (*pp) {
		*pp = s->next;
		b->nslots--;
	}
	free(s->wc);
	s->wc = NULL;
	s->head = s->n = s->cap = 0;
	s->bqpn = 0;
	__atomic_store_n(&s->b, NULL, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&b->lock);
	pthread_mutex_lock(&b->mc->lock);
	b->used -= s->need;
	pthread_mutex_unlock(&b->mc->lock);
}

int r2cc_mig_bcq_attach(struct r2cc_mig_qp *mq, struct ibv_context *ctx,
			struct ibv_comp_channel *ch, int scqe, int rcqe)
{
	bool one = mq->rcq == mq->scq;
	int ret;

	r2cc_mig_bcq_leave(mq);
	ret = slot_attach(mq, &mq->bs[0], mq->scq, ctx, ch,
			  one ? scqe + rcqe : scqe);
	if (!ret && !one)
		ret = slot_attach(mq, &mq->bs[1], mq->rcq, ctx, ch, rcqe);
	if (ret) {
		r2cc_mig_bcq_leave(mq);
		return ret;
	}
	return 0;
}

int r2cc_mig_bcq_bind(struct r2cc_mig_qp *mq, uint32_t bqpn)
{
	int c, ret = 0;

	for (c = 0; c < 2 && !ret; c++) {
		struct r2cc_mig_bslot *s = &mq->bs[c];

		if (!s->b)
			continue;
		pthread_mutex_lock(&s->b->lock);
		ret = -r2cc_map_insert(&s->b->by_qpn,
				       (uintptr_t)bqpn + R2CC_MAP_KEY_MIN, s);
		if (!ret)
			s->bqpn = bqpn;
		pthread_mutex_unlock(&s->b->lock);
	}
	return ret;
}

void r2cc_mig_bcq_leave(struct r2cc_mig_qp *mq)
{
	slot_leave(&mq->bs[0]);
	slot_leave(&mq->bs[1]);
}

void r2cc_mig_bcq_empty(struct r2cc_mig_qp *mq)
{
	int c;

	for (c = 0; c < 2; c++) {
		struct r2cc_mig_bslot *s = &mq->bs[c];

		if (!s->b)
			continue;
		pthread_mutex_lock(&s->b->lock);
		fill(s->b, s->b->cqe);
		s->head = s->n = 0;
		ready_del(s->b, s);
		pthread_mutex_unlock(&s->b->lock);
	}
}

bool r2cc_mig_bcq_take(struct r2cc_mig_qp *mq, struct ibv_wc *wc)
{
	struct r2cc_mig_bslot *s = r2cc_mig_bslot_of(mq, true);
	bool got;

	if (!s->b)
		return false;
	pthread_mutex_lock(&s->b->lock);
	if (!s->n)
		fill(s->b, BCQ_BATCH);
	got = ring_pop(s, wc);
	pthread_mutex_unlock(&s->b->lock);
	return got;
}

/* What slot @s of @b holds, to the program (up to @n; a QP's lock, then
 * @b's for each completion): how many delivered. */
static int slot_take(struct r2cc_mig_bcq *b, struct r2cc_mig_bslot *s, int n,
		     struct ibv_wc *wc)
{
	struct r2cc_mig_qp *mq = s->mq;
	int got = 0, r;
	bool more;

	r2cc_qlock_lock(&mq->lock);
	while (got < n && r2cc_wcstash_empty(b->mc->stash)) {
		pthread_mutex_lock(&b->lock);
		/* (its standby may have gone or moved meanwhile) */
		more = s->b == b && s->joined && ring_pop(s, &wc[got]);
		pthread_mutex_unlock(&b->lock);
		if (!more)
			break;
		r = r2cc_mig_backup_wc(mq, s == &mq->bs[1], &wc[got]);
		if (r > 0)
			got++;
	}
	pthread_mutex_lock(&b->lock);
	if (s->b == b)
		ready_add(b, s);
	pthread_mutex_unlock(&b->lock);
	r2cc_qlock_unlock(&mq->lock);
	return got;
}

static int bcq_poll1(struct r2cc_mig_bcq *b, int n, struct ibv_wc *wc)
{
	struct r2cc_mig_bslot *rd[BCQ_BATCH];
	int nrd = 0, got = 0, i;

	pthread_mutex_lock(&b->lock);
	fill(b, BCQ_BATCH);
	while (nrd < BCQ_BATCH && b->nready) {
		struct r2cc_mig_bslot *s = b->ready[--b->nready];

		s->ready = false;
		rd[nrd++] = s;
	}
	pthread_mutex_unlock(&b->lock);
	for (i = 0; i < nrd; i++) {
		if (got < n && r2cc_wcstash_empty(b->mc->stash)) {
			got += slot_take(b, rd[i], n - got, wc + got);
			continue;
		}
		/* Not reached: back on the list (a slot gone to another CQ
		 * meanwhile is that CQ's: its QP's lock is not held here). */
		pthread_mutex_lock(&b->lock);
		if (__atomic_load_n(&rd[i]->b, __ATOMIC_RELAXED) == b)
			ready_add(b, rd[i]);
		pthread_mutex_unlock(&b->lock);
	}
	return got;
}

/*
 * The list is read without mc->lock: a standby CQ lives as long as its
 * program CQ, and an outgrown list is not freed before it either, so a
 * stale entry polls a CQ no moved QP uses (what it takes waits in its
 * slots).
 */
int r2cc_mig_bcq_poll(struct r2cc_mig_cq *mc, int n, struct ibv_wc *wc)
{
	const struct r2cc_mig_cqlist *l;
	unsigned int i, k, nb;
	int got = 0;

	nb = (unsigned int)__atomic_load_n(&mc->nlive, __ATOMIC_ACQUIRE);
	if (!nb)
		return 0;
	/* Published before nlive could count past an older list's end. */
	l = __atomic_load_n(&mc->list, __ATOMIC_ACQUIRE);
	if (nb > (unsigned int)l->cap)
		nb = (unsigned int)l->cap;
	/* From where the last poll stopped: a CQ with much to deliver does
	 * not starve the others. */
	i = atomic_load_explicit(&mc->poll_from, memory_order_relaxed) % nb;
	for (k = 0; k < nb && got < n && r2cc_wcstash_empty(mc->stash); k++) {
		struct r2cc_mig_bcq *b =
			__atomic_load_n(&l->e[i], __ATOMIC_ACQUIRE);

		if (b)
			got += bcq_poll1(b, n - got, wc + got);
		if (++i == nb)
			i = 0;
	}
	atomic_store_explicit(&mc->poll_from, i, memory_order_relaxed);
	return got;
}

/* ---- events ------------------------------------------------------------ */

/* Arm @b unless it is armed: a CQ stays armed until its next
 * completion's event, and on rxe each arm is a system call. */
static void arm(struct r2cc_mig_bcq *b)
{
	/* (NULL: destroyed, r2cc_mig_cq_close(); the object lives until
	 * this event's handler is done) */
	struct ibv_cq *cq = __atomic_load_n(&b->cq, __ATOMIC_RELAXED);

	if (!cq || atomic_exchange(&b->armed, true))
		return;
	if (cq->context->ops.req_notify_cq(cq, 0))
		atomic_store(&b->armed,
			     false); /* tried again at the next arm */
}

void r2cc_mig_bcq_arm(struct r2cc_mig_cq *mc)
{
	int i;

	if (!__atomic_load_n(&mc->nlive, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&mc->lock);
	for (i = 0; i < mc->nlive; i++)
		arm(mc->list->e[i]);
	pthread_mutex_unlock(&mc->lock);
}

void r2cc_mig_bcq_event(struct r2cc_mig_bcq *b)
{
	struct r2cc_mig_cq *mc = b->mc;
	struct r2cc_mig_bslot *s;
	int tries = 0;

	atomic_store(&b->armed, false);
	/* Not armed again here: the program, woken (or awake: not armed),
	 * arms its CQ, and with it this one, before it sleeps again, so
	 * that an awake program's standby completions raise no events. */
	if (!atomic_load(&mc->armed))
		return;
	/* A moved QP's primary in ERR flushes a WR into the program's CQ
	 * (r2cc_mig_ring()): one of the first few whose lock is free (a move
	 * may hold one: not waited for); else the CQ's doorbell. */
	pthread_mutex_lock(&b->lock);
	for (s = b->slots; s && tries < 8 && atomic_load(&mc->armed);
	     s = s->next) {
		if (!s->joined || (tries++, !r2cc_qlock_trylock(&s->mq->lock)))
			continue;
		if (s->mq->perr)
			r2cc_mig_ring(s->mq, mc);
		r2cc_qlock_unlock(&s->mq->lock);
	}
	pthread_mutex_unlock(&b->lock);
	if (atomic_exchange(&mc->armed, 0) && r2cc_mig_bell_ring(mc)) {
		/* Not rung: its next completion tries again. */
		atomic_store(&mc->armed, 1);
		arm(b);
	}
}

/* ---- a QP moves onto its backup, or off it ----------------------------- */

/* @mq's slots joined (@on) or not: polled with its program CQs, their
 * CQs listed there while a slot of theirs is joined. */
static void joined(struct r2cc_mig_qp *mq, bool on)
{
	int c;

	for (c = 0; c < 2; c++) {
		struct r2cc_mig_bslot *s = &mq->bs[c];
		struct r2cc_mig_bcq *b = s->b;

		if (!b)
			continue;
		pthread_mutex_lock(&b->lock);
		set_joined(b, s, on);
		pthread_mutex_unlock(&b->lock);
		if (on)
			arm(b);
	}
}

void r2cc_mig_bcq_join(struct r2cc_mig_qp *mq)
{
	joined(mq, true);
}

void r2cc_mig_bcq_detach(struct r2cc_mig_qp *mq)
{
	joined(mq, false);
}

void r2cc_mig_cq_close(struct r2cc_mig_cq *mc)
{
	struct r2cc_mig_bcq *b;
	struct ibv_cq *cq;

	if (!mc)
		return;
	pthread_mutex_lock(&mc->lock);
	b = mc->bcqs; /* (only ever pushed at the head) */
	pthread_mutex_unlock(&mc->lock);
	for (; b; b = b->next) {
		/* A standby still on it: the program destroys a CQ its QPs
		 * use, which fails; kept until the CQ is freed. */
		pthread_mutex_lock(&b->lock);
		cq = b->slots ? NULL : b->cq;
		if (cq)
			__atomic_store_n(&b->cq, NULL, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&b->lock);
		/* Returns once the event of it in hand is acknowledged:
		 * after its handler (r2cc_mig_ring_ready()); no lock held,
		 * the handler may take any. */
		if (!cq || !ps.v.destroy_cq(cq))
			continue;
		r2cc_warn("standby CQ: destroy failed");
		pthread_mutex_lock(&b->lock);
		__atomic_store_n(&b->cq, cq, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&b->lock);
	}
	r2cc_mig_bell_free(mc);
}

void r2cc_mig_bcq_free_all(struct r2cc_mig_cq *mc)
{
	struct r2cc_mig_cqlist *l, *old;
	struct r2cc_mig_bcq *b, *next;

	for (b = mc->bcqs; b; b = next) {
		next = b->next;
		if (b->slots)
			r2cc_err("a standby CQ freed with standbys on it: a "
				 "bug");
		if (b->cq && ps.v.destroy_cq(b->cq))
			r2cc_warn("standby CQ: destroy failed");
		r2cc_map_destroy(&b->by_qpn);
		free(b->ready);
		pthread_mutex_destroy(&b->lock);
		free(b);
	}
	mc->bcqs = NULL;
	mc->nbcq = 0;
	for (l = mc->list; l; l = old) {
		old = l->old;
		free(l);
	}
	mc->list = NULL;
	mc->nlive = 0;
}
