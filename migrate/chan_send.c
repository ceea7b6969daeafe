/* SPDX-License-Identifier: MIT */
/*
 * chan_send.c - the control channel's sends: a message written on one of
 * its peer's open connections, and the gathering of messages into one
 * frame per peer (a thread's holds, the outbox through which threads not
 * the channel's send).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "chan_conn.h"
#include "chan_int.h"
#include "chan_send.h"

int chan_send_raw(uint64_t peer, struct r2cc_ctrl_msg *m)
{
	struct peer *p = cs.running ? chan_peer_find(peer) : NULL;
	int ret = -ENOTCONN;

	/* A connection that fails the write is closed; the frame goes out
	 * on another one open to the peer, if any. */
	while (p && p->conn >= 0) {
		int i = p->conn;

		m->hdr.receiver = peer;
		m->hdr.seq = ++cs.seq;
		ret = chan_conn_write(i, m);
		if (ret != -EIO)
			break;
		chan_conn_close_why(i, "a write failed");
		ret = -ENOTCONN;
	}
	return ret;
}

/* The messages gathered for @h sent (the lock held): one as itself, more
 * as a BATCH; then none are. */
static void send_gathered(struct chan_gathered *h)
{
	struct r2cc_ctrl_msg *m = malloc(sizeof(*m));
	uint32_t off = 0;
	int ret = -ENOMEM;

	if (m && h->b.n == 1) {
		struct r2cc_ctrl_msg b = { 0 };

		r2cc_ctrl_batch_msg(&h->b, &b);
		ret = r2cc_ctrl_batch_next(&b, &off, m) ?
			      chan_send_raw(h->peer, m) :
			      -EINVAL;
	} else if (m) {
		memset(m, 0, sizeof(*m));
		r2cc_ctrl_batch_msg(&h->b, m);
		ret = chan_send_raw(h->peer, m);
		if (!ret) {
			cs.st.batches_out++;
			cs.st.batched_out += h->b.n;
		}
	}
	if (ret) {
		cs.st.batch_lost += h->b.n;
		r2cc_warn("peer %016llx: %u control messages not sent (%s)",
			  (unsigned long long)h->peer, h->b.n, strerror(-ret));
		chan_lost(h->peer);
	}
	free(m);
	h->b.n = 0;
	h->b.len = 0;
}

/*
 * The outbox: every message about a QP sent by a thread that is not the
 * channel's, or by any thread inside a hold, queued in the order of the
 * r2cc_chan_send() calls (the callers' own locks order them), a run of
 * entries per peer, each entry one frame to be. Appended to under
 * out_lock alone; taken out whole and sent by whoever flushes, under
 * cs.lock. Its bytes are bounded: past MIG_CHAN_OUTBOX_MAX the caller
 * sends itself, the queue first.
 */
#define MIG_CHAN_OUTBOX_MAX (16u << 20)

/* The last entry of @peer in @g, or a new one after it (out_lock): NULL
 * when there is no room. A full one stays where it is: a new one. */
static struct chan_gathered *entry_of(struct chan_gathering *g, uint64_t peer,
				      bool fresh)
{
	struct chan_gathered *v;
	unsigned int i;

	for (i = g->n; !fresh && i-- > 0;)
		if (g->v[i].peer == peer)
			return &g->v[i];
	if (g->n == g->cap) {
		v = reallocarray(g->v, g->cap ? 2 * g->cap : 8, sizeof(*v));
		if (!v)
			return NULL;
		g->v = v;
		g->cap = g->cap ? 2 * g->cap : 8;
	}
	memset(&g->v[g->n], 0, sizeof(g->v[0]));
	g->v[g->n].peer = peer;
	return &g->v[g->n++];
}

/* @m queued for @peer (out_lock held): 0, -ENOTCONN (no connection at a
 * glance), -EINVAL (a BATCH does not carry it), -ENOSPC (the queue is at
 * its bound) or -ENOMEM. */
static int enqueue(uint64_t peer, struct r2cc_ctrl_msg *m)
{
	/* (the peers' map and each peer are read without cs.lock: a peer
	 * once heard of stays, its connection index is atomic) */
	struct peer *p = cs.running ? chan_peer_find(peer) : NULL;
	struct chan_gathered *h;
	uint32_t was;
	int ret;

	if (!p || p->conn < 0)
		return -ENOTCONN;
	if (cs.out_bytes >= MIG_CHAN_OUTBOX_MAX)
		return -ENOSPC;
	h = entry_of(&cs.outbox, peer, false);
	if (!h)
		return -ENOMEM;
	was = h->b.len;
	ret = r2cc_ctrl_batch_add(&h->b, m);
	if (ret == -ENOSPC) { /* that frame is full: the next one */
		h = entry_of(&cs.outbox, peer, true);
		was = 0;
		ret = h ? r2cc_ctrl_batch_add(&h->b, m) : -ENOMEM;
	}
	if (!ret)
		cs.out_bytes += h->b.len - was;
	return ret;
}

void chan_outbox_flush(uint64_t peer)
{
	struct chan_gathering g = { 0 }, rest = { 0 };
	unsigned int i;

	/* Taken out under out_lock, sent after: a thread queueing a
	 * message never waits on a write. (@peer: its entries only; the
	 * others stay, in order.) */
	pthread_mutex_lock(&cs.out_lock);
	g = cs.outbox;
	memset(&cs.outbox, 0, sizeof(cs.outbox));
	cs.out_bytes = 0;
	for (i = 0; peer && i < g.n; i++) {
		if (g.v[i].peer == peer)
			continue;
		if (entry_of(&rest, g.v[i].peer, true)) {
			rest.v[rest.n - 1].b = g.v[i].b;
			cs.out_bytes += g.v[i].b.len;
		} else { /* no memory to keep it: lost, counted */
			cs.st.batch_lost += g.v[i].b.n;
			r2cc_ctrl_batch_free(&g.v[i].b);
		}
		g.v[i].b = (struct r2cc_ctrl_batch){ 0 };
	}
	if (peer)
		cs.outbox = rest;
	pthread_mutex_unlock(&cs.out_lock);
	for (i = 0; i < g.n; i++) {
		if (g.v[i].b.n)
			send_gathered(&g.v[i]);
		r2cc_ctrl_batch_free(&g.v[i].b);
	}
	free(g.v);
}

/* This thread's holds (r2cc_chan_hold()): its sends wait in the outbox
 * until the outermost flush. */
static __thread unsigned int held;

int r2cc_chan_send(uint64_t peer, struct r2cc_ctrl_msg *m)
{
	bool chan_thread = pthread_equal(pthread_self(), cs.thread);
	int ret = -EINVAL;

	/* A thread not the channel's, or one holding, queues it (takes no
	 * cs.lock); what cannot be queued (or finds no connection at a
	 * glance: one may be opening) is sent below, the queue first. */
	if ((held || !chan_thread) && cs.running) {
		pthread_mutex_lock(&cs.out_lock);
		ret = enqueue(peer, m);
		pthread_mutex_unlock(&cs.out_lock);
		if (!ret) {
			if (!held)
				chan_wake();
			return 0;
		}
	}
	pthread_mutex_lock(&cs.lock);
	chan_outbox_flush(peer); /* what was queued before it, first */
	ret = chan_send_raw(peer, m);
	pthread_mutex_unlock(&cs.lock);
	return ret;
}

void r2cc_chan_hold(void)
{
	held++;
}

void r2cc_chan_flush(void)
{
	if (!held || --held)
		return;
	if (!pthread_equal(pthread_self(), cs.thread)) {
		chan_wake(); /* the channel thread sends them */
		return;
	}
	pthread_mutex_lock(&cs.lock);
	chan_outbox_flush(0);
	pthread_mutex_unlock(&cs.lock);
}
