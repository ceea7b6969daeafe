/* SPDX-License-Identifier: MIT */
/*
 * early.c - the peer's QP_BINDs that came before our QP reached RTR: a
 * peer's QP may be connected long before ours (a job's ranks bring up
 * their QPs in their own order), so every one is kept, in a hash by the
 * pair of QPNs that grows to a budget, until our QP reaches RTR and takes
 * it (bind.c), or until it is so old that its QP will never come.
 */
#include <errno.h>
#include <stdlib.h>

#include "early.h"
#include "tick.h"

/* Binds kept at most (about 100 bytes each): past it one is dropped, and
 * the connection it was for runs unprotected. */
#define EARLY_MAX 65536
/* A bind whose QP has not reached RTR after this long is dropped: the
 * program made no such connection here after all (or gave it up). */
#define EARLY_TTL_MS 600000
#define EARLY_SWEEP_MS 10000

static bool same_pair(const struct r2cc_ctrl_qp_bind *a,
		      const struct r2cc_ctrl_qp_bind *b)
{
	return a->local.qpn == b->local.qpn && a->peer.qpn == b->peer.qpn &&
	       !memcmp(a->local.gid, b->local.gid, 16) &&
	       !memcmp(a->peer.gid, b->peer.gid, 16);
}

/* The bucket of the bind from the peer's QP @local to our @peer. */
static struct r2cc_mig_early **bucket(uint32_t local, uint32_t peer)
{
	uint32_t h = local * 0x9e3779b1u ^ peer * 0x85ebca6bu;

	h ^= h >> 15;
	return &ps.early[h & (ps.early_nb - 1)];
}

/* Twice the buckets (from 64): kept as they are if there is no memory,
 * only the chains are longer. */
static void grow(void)
{
	unsigned int nb = ps.early_nb ? 2 * ps.early_nb : 64, i;
	struct r2cc_mig_early **old = ps.early, *e, *next;
	unsigned int onb = ps.early_nb;

	ps.early = calloc(nb, sizeof(*ps.early));
	if (!ps.early) {
		ps.early = old;
		return;
	}
	ps.early_nb = nb;
	for (i = 0; i < onb; i++)
		for (e = old[i]; e; e = next) {
			struct r2cc_mig_early **b =
				bucket(e->b.local.qpn, e->b.peer.qpn);

			next = e->next;
			e->next = *b;
			*b = e;
		}
	free(old);
}

static void dropped(const struct r2cc_ctrl_qp_bind *b, const char *why)
{
	/* One line at warning level, the rest at debug: a flood of them
	 * is one cause. */
	r2cc_status_refused(R2CC_REFUSE_EARLY_BIND);
	if (!ps.early_dropped++)
		r2cc_warn("peer QP %#x's bind to QP %#x dropped (%s): that "
			  "connection runs unprotected (counted; further "
			  "drops at debug level)",
			  b->local.qpn, b->peer.qpn, why);
	else
		r2cc_dbg("peer QP %#x's bind to QP %#x dropped (%s)",
			 b->local.qpn, b->peer.qpn, why);
}

void r2cc_mig_early_keep(uint64_t peer, const struct r2cc_ctrl_qp_bind *b)
{
	struct r2cc_mig_early **head, *e;

	if (ps.nearly >= ps.early_nb)
		grow();
	if (!ps.early_nb) {
		dropped(b, "no memory");
		return;
	}
	head = bucket(b->local.qpn, b->peer.qpn);
	for (e = *head; e; e = e->next)
		if (e->peer == peer && same_pair(&e->b, b)) {
			e->b = *b; /* the newer: BIND_AGAIN, its new standby */
			e->at_ns = r2cc_mig_now_ns();
			return;
		}
	if (ps.nearly >= EARLY_MAX) {
		dropped(b, "too many binds waiting for their QP");
		return;
	}
	e = malloc(sizeof(*e));
	if (!e) {
		dropped(b, "no memory");
		return;
	}
	e->peer = peer;
	e->at_ns = r2cc_mig_now_ns();
	e->b = *b;
	e->next = *head;
	*head = e;
	__atomic_store_n(&ps.nearly, ps.nearly + 1, __ATOMIC_RELAXED);
}

static void take_out(struct r2cc_mig_early **pe)
{
	struct r2cc_mig_early *e = *pe;

	*pe = e->next;
	free(e);
	__atomic_store_n(&ps.nearly, ps.nearly - 1, __ATOMIC_RELAXED);
}

bool r2cc_mig_early_take(const struct r2cc_mig_qp *mq, uint64_t *peer,
			 struct r2cc_ctrl_qp_bind *b)
{
	struct r2cc_mig_early **pe;

	if (!ps.nearly)
		return false;
	for (pe = bucket(mq->dest_qpn, mq->qpn); *pe; pe = &(*pe)->next) {
		if (!r2cc_mig_bind_is_for(mq, &(*pe)->b))
			continue;
		*peer = (*pe)->peer;
		*b = (*pe)->b;
		take_out(pe);
		return true;
	}
	return false;
}

void r2cc_mig_early_sweep(void)
{
	struct r2cc_mig_early **pe;
	unsigned int i;
	uint64_t now;

	if (!__atomic_load_n(&ps.nearly, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&ps.lock);
	now = r2cc_mig_now_ns();
	if (!r2cc_mig_past(ps.early_swept_ns, now, EARLY_SWEEP_MS))
		goto out;
	ps.early_swept_ns = now;
	for (i = 0; i < ps.early_nb; i++)
		for (pe = &ps.early[i]; *pe;) {
			if (!r2cc_mig_past((*pe)->at_ns, now, EARLY_TTL_MS)) {
				pe = &(*pe)->next;
				continue;
			}
			dropped(&(*pe)->b, "its QP never came");
			take_out(pe);
		}
out:
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_early_clear(void)
{
	unsigned int i;

	for (i = 0; i < ps.early_nb; i++)
		while (ps.early[i])
			take_out(&ps.early[i]);
	free(ps.early);
	ps.early = NULL;
	ps.early_nb = 0;
}

uint64_t r2cc_mig_early_dropped(void)
{
	uint64_t n;

	pthread_mutex_lock(&ps.lock);
	n = ps.early_dropped;
	pthread_mutex_unlock(&ps.lock);
	return n;
}
