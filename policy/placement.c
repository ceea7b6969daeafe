/* SPDX-License-Identifier: MIT */
/*
 * placement.c - choose the rail for a connection's backup: spread backups
 * over the usable rails in proportion to capacity, prefer the memory's
 * PCIe switch and NUMA node, and break ties the same way on both ends.
 */
#include <errno.h>
#include <string.h>

#include "policy.h"

/* What a candidate is ranked by, computed once per call */
struct cand {
	int index;
	uint32_t backups;
	uint32_t cap; /* Mb/s, unknown already replaced */
	int shared; /* PCI path components shared with the GPU */
	bool same_numa;
	uint64_t hash; /* of (salt, index) */
};

/* splitmix64's finaliser: every input bit moves every output bit */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t len)
{
	while (len--) {
		h ^= *p++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* GID and QPN as bytes, the QPN big-endian so that hosts of any
 * byte order hash it alike */
static void end_bytes(const uint8_t gid[16], uint32_t qpn, uint8_t out[20])
{
	memcpy(out, gid, 16);
	out[16] = (uint8_t)(qpn >> 24);
	out[17] = (uint8_t)(qpn >> 16);
	out[18] = (uint8_t)(qpn >> 8);
	out[19] = (uint8_t)qpn;
}

uint64_t r2cc_place_salt(const uint8_t gid_a[16], uint32_t qpn_a,
			 const uint8_t gid_b[16], uint32_t qpn_b)
{
	uint8_t a[20], b[20];
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a offset basis */

	end_bytes(gid_a, qpn_a, a);
	end_bytes(gid_b, qpn_b, b);
	/* Canonical order: the smaller (GID, QPN) first, whoever calls */
	if (memcmp(a, b, sizeof(a)) > 0) {
		h = fnv1a(h, b, sizeof(b));
		h = fnv1a(h, a, sizeof(a));
	} else {
		h = fnv1a(h, a, sizeof(a));
		h = fnv1a(h, b, sizeof(b));
	}
	return mix64(h);
}

int r2cc_pci_shared(const char *a, const char *b)
{
	int n = 0;
	size_t la, lb;

	if (!a || !b)
		return 0;
	while (*a && *b) {
		la = strcspn(a, "/");
		lb = strcspn(b, "/");
		if (la != lb || memcmp(a, b, la) || !la)
			break;
		n++;
		a += la;
		b += lb;
		if (*a != '/' || *b != '/')
			break;
		a++;
		b++;
	}
	return n;
}

/*
 * <0 if @x goes before @y. Every key is compared exactly (backups per Mb/s
 * by cross-multiplying: both factors are u32, so the products fit in u64),
 * so the order is total and the same on every host.
 */
static int cand_cmp(const struct cand *x, const struct cand *y)
{
	uint64_t lx = (uint64_t)x->backups * y->cap;
	uint64_t ly = (uint64_t)y->backups * x->cap;

	if (lx != ly)
		return lx < ly ? -1 : 1;
	if (x->shared != y->shared)
		return x->shared > y->shared ? -1 : 1;
	if (x->same_numa != y->same_numa)
		return x->same_numa ? -1 : 1;
	if (x->cap != y->cap)
		return x->cap > y->cap ? -1 : 1;
	/*
	 * Rendezvous hashing: which of the equal rails wins depends only on
	 * (salt, index), not on the order of @rails or on which other rails
	 * tie, so both ends agree, and connections (different salts) rotate
	 * over the equal rails evenly.
	 */
	if (x->hash != y->hash)
		return x->hash > y->hash ? -1 : 1;
	return x->index < y->index ? -1 : (x->index > y->index);
}

/* Indexes unique, the primary present: its link layer, or -EINVAL */
static int check_rails(const struct r2cc_place_rail *rails, int n, int primary,
		       enum r2cc_link_layer *ll)
{
	bool found = false;
	int i, j;

	for (i = 0; i < n; i++) {
		for (j = 0; j < i; j++)
			if (rails[j].index == rails[i].index)
				return -EINVAL;
		if (rails[i].index == primary) {
			*ll = rails[i].link_layer;
			found = true;
		}
	}
	return found ? 0 : -EINVAL;
}

/* The slowest known capacity among candidates: what an unknown one counts */
static uint32_t unknown_cap(const struct r2cc_place_rail *rails, int n,
			    int primary, enum r2cc_link_layer ll)
{
	uint32_t cap = 0;
	int i;

	for (i = 0; i < n; i++) {
		if (rails[i].index == primary || !rails[i].up ||
		    rails[i].link_layer != ll || !rails[i].cap_mbps)
			continue;
		if (!cap || rails[i].cap_mbps < cap)
			cap = rails[i].cap_mbps;
	}
	return cap ? cap : 1;
}

int r2cc_place_order(const struct r2cc_place_rail *rails, int n, int primary,
		     const struct r2cc_mem_loc *loc, uint64_t salt, int *out,
		     int max)
{
	struct cand c[R2CC_PLACE_RAILS_MAX], t;
	const struct r2cc_place_rail *r;
	enum r2cc_link_layer ll = R2CC_LL_UNKNOWN;
	uint32_t dflt;
	int i, j, nc = 0;

	if (!rails || n < 0 || n > R2CC_PLACE_RAILS_MAX || max < 0 ||
	    (max && !out) || check_rails(rails, n, primary, &ll))
		return -EINVAL;
	if (ll == R2CC_LL_UNKNOWN)
		return 0; /* no rail is known to be able to stand in for it */
	dflt = unknown_cap(rails, n, primary, ll);
	for (i = 0; i < n; i++) {
		r = &rails[i];
		if (r->index == primary || !r->up || r->link_layer != ll)
			continue;
		t.index = r->index;
		t.backups = r->backups;
		t.cap = r->cap_mbps ? r->cap_mbps : dflt;
		t.shared = loc && loc->gpu_path[0] ?
				   r2cc_pci_shared(loc->gpu_path, r->pci_path) :
				   0;
		t.same_numa = loc && loc->numa_node >= 0 &&
			      r->numa_node == loc->numa_node;
		t.hash = mix64(salt ^ mix64((uint64_t)(uint32_t)r->index));
		/* Insertion sort: at most R2CC_PLACE_RAILS_MAX, no allocation */
		for (j = nc; j > 0 && cand_cmp(&t, &c[j - 1]) < 0; j--)
			c[j] = c[j - 1];
		c[j] = t;
		nc++;
	}
	for (i = 0; i < nc && i < max; i++)
		out[i] = c[i].index;
	return nc;
}

int r2cc_place_choose(const struct r2cc_place_rail *rails, int n, int primary,
		      const struct r2cc_mem_loc *loc, uint64_t salt)
{
	int best, ret;

	ret = r2cc_place_order(rails, n, primary, loc, salt, &best, 1);
	if (ret < 0)
		return ret;
	return ret ? best : -ENODEV;
}
