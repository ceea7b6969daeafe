/* SPDX-License-Identifier: MIT */
/*
 * keys.c - the peer's memory keys: its MR_KEYS and MR_INVAL (each MR's
 * R_Key on the rails of its standbys), kept per peer process in a map
 * the data path reads without a lock; and ours, announced once per
 * (PD, rail) to each peer bound to a QP of that PD, then as the program
 * registers and deregisters, and told again, whole, to a peer whose
 * messages may have been lost.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "chan.h"
#include "keys.h"
#include "map.h"

_Static_assert(sizeof(uintptr_t) >= 8, "map keys hold a rail and an R_Key");

/* A (PD, rail) whose MRs a peer was told of; stale: what it was told
 * may have been lost since (told again, whole, at the next chance). */
struct sent {
	const void *pd;
	int rail;
	bool stale;
};

/* One peer process: its keys, by (rail, R_Key); what it was told. */
struct r2cc_mig_pkeys {
	struct r2cc_mig_pkeys *next; /* ps.pkeys_list */
	uint64_t peer;
	struct r2cc_map keys; /* key_of() -> val_of(its shadow's R_Key) */
	bool full_said; /* under ps.lock, like all below */
	struct sent *sent;
	unsigned int nsent, sent_cap;
};

static uintptr_t key_of(int rail, uint32_t rkey)
{
	return (uintptr_t)(rail + 1) << 32 | rkey;
}

static void *val_of(uint32_t backup_rkey)
{
	return (void *)((uintptr_t)1 << 32 | backup_rkey);
}

static struct r2cc_mig_pkeys *pkeys_find(uint64_t peer)
{
	if (peer < R2CC_MAP_KEY_MIN)
		return NULL;
	return r2cc_map_lookup(&ps.pkeys, (uintptr_t)peer);
}

/* @peer's, made when first needed (ps.lock held); NULL: no memory. */
static struct r2cc_mig_pkeys *pkeys_get(uint64_t peer)
{
	struct r2cc_mig_pkeys *pk = pkeys_find(peer);

	if (pk || peer < R2CC_MAP_KEY_MIN)
		return pk;
	pk = calloc(1, sizeof(*pk));
	if (!pk)
		return NULL;
	pk->peer = peer;
	if (r2cc_map_init(&pk->keys))
		goto fail;
	if (!atomic_load_explicit(&ps.pkeys.table, memory_order_relaxed) &&
	    r2cc_map_init(&ps.pkeys))
		goto fail_keys;
	if (r2cc_map_insert(&ps.pkeys, (uintptr_t)peer, pk))
		goto fail_keys;
	pk->next = ps.pkeys_list;
	ps.pkeys_list = pk;
	return pk;
fail_keys:
	r2cc_map_destroy(&pk->keys);
fail:
	free(pk);
	r2cc_warn("no memory for a peer's memory keys");
	return NULL;
}

void r2cc_mig_keys_put(uint64_t peer, int rail, uint32_t rkey,
		       uint32_t backup_rkey)
{
	struct r2cc_mig_pkeys *pk = pkeys_get(peer);
	uintptr_t k = key_of(rail, rkey);

	if (!pk)
		return;
	/* (its count: every writer of the map holds ps.lock) */
	if (!r2cc_map_lookup(&pk->keys, k) &&
	    pk->keys.count >= MIG_PEER_KEYS_MAX) {
		atomic_fetch_add(&ps.keys_dropped, 1);
		r2cc_status_refused(R2CC_REFUSE_PEER_KEYS);
		if (!pk->full_said)
			r2cc_warn("peer %016llx: more than %u memory keys, "
				  "those past them not kept (a move needing "
				  "them fails)",
				  (unsigned long long)peer, MIG_PEER_KEYS_MAX);
		pk->full_said = true;
		return;
	}
	r2cc_map_insert(&pk->keys, k, val_of(backup_rkey));
}

void r2cc_mig_keys_lost(uint64_t peer)
{
	struct r2cc_mig_pkeys *pk;
	unsigned int i;

	pthread_mutex_lock(&ps.lock);
	pk = pkeys_find(peer);
	if (pk && pk->nsent) {
		r2cc_dbg("peer %016llx: memory keys to be announced again",
			 (unsigned long long)peer);
		for (i = 0; i < pk->nsent; i++)
			pk->sent[i].stale = true;
		atomic_store(&ps.keys_stale, true);
	}
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_got_mr_keys(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	int i;

	for (i = 0; i < m->mr_keys.n; i++)
		r2cc_mig_keys_put(peer, m->mr_keys.rail, m->mr_keys.mr[i].rkey,
				  m->mr_keys.mr[i].backup_rkey);
}

void r2cc_mig_got_mr_inval(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	struct r2cc_mig_pkeys *pk = pkeys_find(peer);
	int i, rail;

	for (i = 0; pk && i < m->mr_inval.n; i++)
		for (rail = 0; rail < R2CC_HEALTH_RAILS; rail++)
			r2cc_map_remove(&pk->keys,
					key_of(rail, m->mr_inval.rkey[i]));
}

static struct sent *sent_of(struct r2cc_mig_pkeys *pk, const void *pd, int rail)
{
	unsigned int i;

	for (i = 0; i < pk->nsent; i++)
		if (pk->sent[i].pd == pd && pk->sent[i].rail == rail)
			return &pk->sent[i];
	return NULL;
}

/* @n keys in frames of at most R2CC_CTRL_MAX_MRS: 0 or -errno. */
static int send_keys(uint64_t peer, int rail, const struct r2cc_ctrl_mr *mr,
		     int n)
{
	struct r2cc_ctrl_msg *m = calloc(1, sizeof(*m));
	int i, k, ret = 0;

	if (!m)
		return -ENOMEM;
	for (i = 0; i < n && !ret; i += k) {
		k = n - i < R2CC_CTRL_MAX_MRS ? n - i : R2CC_CTRL_MAX_MRS;
		m->hdr.type = R2CC_CTRL_MR_KEYS;
		m->mr_keys.rail = (uint8_t)rail;
		m->mr_keys.n = (uint16_t)k;
		memcpy(m->mr_keys.mr, mr + i, (size_t)k * sizeof(*mr));
		ret = r2cc_chan_send(peer, m);
	}
	free(m);
	return ret;
}

/* All of @pd's keys on @rail to @peer: 0 or -errno. */
static int send_all(uint64_t peer, const void *pd, int rail)
{
	struct r2cc_ctrl_mr *mr = NULL;
	int n, ret;

	n = ps.env.mr_keys(pd, rail, &mr);
	if (n < 0)
		return n;
	ret = send_keys(peer, rail, mr, n);
	free(mr);
	return ret;
}

/* @s told again to @pk's peer (ps.lock held): 0 or -errno. */
static int resend(struct r2cc_mig_pkeys *pk, struct sent *s)
{
	int ret = send_all(pk->peer, s->pd, s->rail);

	if (!ret)
		s->stale = false;
	return ret;
}

int r2cc_mig_keys_announce(uint64_t peer, const void *pd, int rail)
{
	struct r2cc_mig_pkeys *pk = pkeys_get(peer);
	struct sent *s;
	int ret;

	if (!pk)
		return -ENOMEM;
	s = sent_of(pk, pd, rail);
	if (s)
		return s->stale ? resend(pk, s) : 0;
	if (pk->nsent == pk->sent_cap) {
		s = reallocarray(pk->sent, pk->sent_cap ? pk->sent_cap * 2 : 4,
				 sizeof(*s));
		if (!s)
			return -ENOMEM;
		pk->sent = s;
		pk->sent_cap = pk->sent_cap ? pk->sent_cap * 2 : 4;
	}
	ret = send_all(peer, pd, rail);
	if (ret)
		return ret;
	pk->sent[pk->nsent].pd = pd;
	pk->sent[pk->nsent].rail = rail;
	pk->sent[pk->nsent++].stale = false;
	return 0;
}

static bool chan_open(uint64_t peer)
{
	struct r2cc_chan_peer_stats st;

	return !r2cc_chan_peer_stats(peer, &st) && st.open;
}

void r2cc_mig_keys_tick(void)
{
	struct r2cc_mig_pkeys *pk;
	unsigned int i;
	bool left = false;

	if (!atomic_exchange(&ps.keys_stale, false))
		return;
	pthread_mutex_lock(&ps.lock);
	for (pk = ps.pkeys_list; pk; pk = pk->next)
		for (i = 0; i < pk->nsent; i++)
			if (pk->sent[i].stale &&
			    (!chan_open(pk->peer) || resend(pk, &pk->sent[i])))
				left = true;
	if (left)
		atomic_store(&ps.keys_stale, true);
	pthread_mutex_unlock(&ps.lock);
}

/* MR_KEYS of @mr (or, with no @mr, @m: an MR_INVALIDATE) to every peer
 * told of @pd's MRs, on each rail it was told of them. */
static void announce(const void *pd, const void *mr, struct r2cc_ctrl_msg *m)
{
	struct r2cc_mig_pkeys *pk;
	unsigned int i;
	int ret;

	pthread_mutex_lock(&ps.lock);
	for (pk = ps.pkeys_list; pk; pk = pk->next) {
		for (i = 0; i < pk->nsent; i++) {
			if (pk->sent[i].pd != pd)
				continue;
			/* (the whole PD: this one with them) */
			if (mr && pk->sent[i].stale) {
				resend(pk, &pk->sent[i]);
				continue;
			}
			if (mr && ps.env.mr_key(mr, pk->sent[i].rail,
						&m->mr_keys.mr[0]))
				continue; /* no shadow there */
			if (mr)
				m->mr_keys.rail = (uint8_t)pk->sent[i].rail;
			ret = r2cc_chan_send(pk->peer, m);
			if (ret)
				r2cc_warn("peer %016llx: memory key change not "
					  "sent (%s)",
					  (unsigned long long)pk->peer,
					  strerror(-ret));
			if (!mr)
				break; /* an R_Key is gone on every rail */
		}
	}
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_mr_new(const void *pd, const void *mr)
{
	struct r2cc_ctrl_msg *m;

	if (!ps.on || !ps.env.mr_key || !(m = calloc(1, sizeof(*m))))
		return;
	m->hdr.type = R2CC_CTRL_MR_KEYS;
	m->mr_keys.n = 1;
	announce(pd, mr, m);
	free(m);
}

void r2cc_mig_mr_gone(const void *pd, uint32_t rkey)
{
	struct r2cc_ctrl_msg *m;

	if (!ps.on || !(m = calloc(1, sizeof(*m))))
		return;
	m->hdr.type = R2CC_CTRL_MR_INVALIDATE;
	m->mr_inval.n = 1;
	m->mr_inval.rkey[0] = rkey;
	announce(pd, NULL, m);
	free(m);
}

int r2cc_mig_rkey_xlate(struct r2cc_mig_qp *mq, uint32_t rkey, uint32_t *out)
{
	struct r2cc_mig_pkeys *pk = mq->pkeys;
	void *v;

	/* A peer's keys, once made, last until the module stops */
	if (!pk || pk->peer != mq->peer) {
		pk = pkeys_find(mq->peer);
		mq->pkeys = pk;
	}
	v = pk ? r2cc_map_lookup(&pk->keys, key_of(mq->backup_rail, rkey)) :
		 NULL;

	if (!v)
		return -ENOENT;
	*out = (uint32_t)(uintptr_t)v;
	return 0;
}
