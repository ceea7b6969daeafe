/* SPDX-License-Identifier: MIT */
/*
 * paths.c - the paths the protected QPs run on, counted once a tick
 * (paths.h): a growable array of paths and an open-addressing index of
 * them by a hash of (rail, GID, peer's GID), rebuilt at each count.
 */
#include <stdlib.h>
#include <string.h>

#include "keepalive.h"
#include "map.h"
#include "paths.h"

static struct {
	struct r2cc_mig_path **v; /* n of them, room for cap */
	unsigned int n, cap;
	uint32_t *idx; /* index + 1 into v, 0: empty; mask + 1 slots */
	uint32_t mask;
	bool nomem_said;
} pt;

static uint64_t hash(int rail, const uint8_t gid[16], const uint8_t dgid[16])
{
	uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)(unsigned int)rail;
	int i;

	for (i = 0; i < 16; i++)
		h = (h ^ gid[i]) * 0x100000001b3ULL;
	for (i = 0; i < 16; i++)
		h = (h ^ dgid[i]) * 0x100000001b3ULL;
	return h;
}

static bool is(const struct r2cc_mig_path *p, int rail, const uint8_t gid[16],
	       const uint8_t dgid[16])
{
	return p->rail == rail && !memcmp(p->gid, gid, 16) &&
	       !memcmp(p->dest_gid, dgid, 16);
}

/* The index slot of the key: its path's, or the empty one to take. */
static uint32_t *slot(int rail, const uint8_t gid[16], const uint8_t dgid[16])
{
	uint32_t i = (uint32_t)hash(rail, gid, dgid) & pt.mask;

	while (pt.idx[i] && !is(pt.v[pt.idx[i] - 1], rail, gid, dgid))
		i = (i + 1) & pt.mask;
	return &pt.idx[i];
}

/* The index rebuilt for @want paths, at most half full (in the table it
 * has when a new one cannot be had and it is big enough): 0 or -1. */
static int reindex(unsigned int want)
{
	unsigned int i;

	if (r2cc_idx_empty(&pt.idx, &pt.mask, want))
		return -1;
	for (i = 0; i < pt.n; i++)
		*slot(pt.v[i]->rail, pt.v[i]->gid, pt.v[i]->dest_gid) = i + 1;
	return 0;
}

static struct r2cc_mig_path *add(const struct r2cc_mig_qp *mq)
{
	struct r2cc_mig_path **v, *p;

	if (pt.n == pt.cap) {
		v = reallocarray(pt.v, pt.cap ? 2 * pt.cap : 16, sizeof(*v));
		if (!v)
			return NULL;
		pt.v = v;
		pt.cap = pt.cap ? 2 * pt.cap : 16;
	}
	if (2 * (pt.n + 1) > pt.mask + 1 && reindex(pt.n + 1))
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->rail = mq->rail;
	memcpy(p->gid, mq->gid, 16);
	memcpy(p->dest_gid, mq->dest_gid, 16);
	pt.v[pt.n++] = p;
	*slot(p->rail, p->gid, p->dest_gid) = pt.n;
	return p;
}

/* A QP's successful completions so far: its errors read first (each is
 * counted in polled too), so a racing error cannot make it wrap. */
static uint64_t ok_of(const struct r2cc_status_qp *slot)
{
	uint64_t err = atomic_load_explicit(&slot->st.polled_err,
					    memory_order_acquire);
	uint64_t all =
		atomic_load_explicit(&slot->st.polled, memory_order_acquire);

	return all > err ? all - err : 0;
}

bool r2cc_mig_path_counts(const struct r2cc_mig_qp *mq)
{
	/* READY: carried by its own QP (a move makes it MIGRATED once it
	 * has moved; a fenced one adds what it had, which does not grow) */
	return mq->slot && r2cc_mig_state(mq) == R2CC_PROT_READY;
}

struct r2cc_mig_path *r2cc_mig_path_of(const struct r2cc_mig_qp *mq)
{
	uint32_t i;

	if (!pt.idx)
		return NULL;
	i = *slot(mq->rail, mq->gid, mq->dest_gid);
	return i ? pt.v[i - 1] : NULL;
}

struct r2cc_mig_path *r2cc_mig_path_at(unsigned int i)
{
	return i < pt.n ? pt.v[i] : NULL;
}

void r2cc_mig_paths_count(void)
{
	struct r2cc_mig_path *p;
	struct r2cc_mig_qp *mq;
	unsigned int i, kept;

	for (i = 0; i < pt.n; i++)
		pt.v[i]->nready = 0, pt.v[i]->ok = 0;
	/* No QP's lock: failback.c counts with one held. The state is
	 * atomic, the rest of what is read fixed since the QP's RTR. */
	for (mq = ps.qps; mq; mq = mq->next) {
		if (r2cc_mig_path_counts(mq)) {
			p = pt.idx ? r2cc_mig_path_of(mq) : NULL;
			if (!p && !(p = add(mq)) && !pt.nomem_said) {
				r2cc_warn("no memory to count a path: its QPs "
					  "are not kept alive");
				pt.nomem_said = true;
			}
			if (p) {
				p->nready++;
				p->ok += ok_of(mq->slot);
			}
		}
	}
	for (i = kept = 0; i < pt.n; i++) {
		if (pt.v[i]->nready) {
			pt.v[kept++] = pt.v[i];
			continue;
		}
		r2cc_mig_ka_path_gone(pt.v[i]);
		free(pt.v[i]);
	}
	if (kept != pt.n) {
		pt.n = kept;
		reindex(pt.n); /* never fails: the table it has is big enough */
	}
}

void r2cc_mig_paths_clear(void)
{
	unsigned int i;

	for (i = 0; i < pt.n; i++) {
		r2cc_mig_ka_path_gone(pt.v[i]);
		free(pt.v[i]);
	}
	pt.n = 0;
	if (pt.idx)
		memset(pt.idx, 0, (pt.mask + 1) * sizeof(*pt.idx));
}
