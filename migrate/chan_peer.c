/* SPDX-License-Identifier: MIT */
/*
 * chan_peer.c - the peer processes the control channel knows: found,
 * remembered (within MIG_CHAN_PEERS_MAX), when each was last heard and
 * answered, and what went each way (r2cc_chan_peer_say()).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chan_conn.h"

struct peer *chan_peer_find(uint64_t id)
{
	if (id < R2CC_MAP_KEY_MIN)
		return NULL;
	return r2cc_map_lookup(&cs.peers, (uintptr_t)id);
}

/* @id's, remembered from now on; NULL: past MIG_CHAN_PEERS_MAX, or no
 * memory (said once, counted). */
struct peer *chan_peer_get(uint64_t id)
{
	struct peer *p = chan_peer_find(id);

	if (p || id < R2CC_MAP_KEY_MIN)
		return p;
	if (cs.npeers < MIG_CHAN_PEERS_MAX && (p = calloc(1, sizeof(*p)))) {
		p->id = id;
		p->conn = -1;
		p->redial = -1;
		if (!r2cc_map_insert(&cs.peers, (uintptr_t)id, p)) {
			p->next = cs.peer_list;
			cs.peer_list = p;
			cs.npeers++;
			return p;
		}
		free(p);
	}
	chan_refused(R2CC_REFUSE_CTRL_PEER, &cs.st.peer_budget, &cs.peers_said,
		     "%u peer processes remembered (budget %u): frames of "
		     "others are dropped",
		     cs.npeers, MIG_CHAN_PEERS_MAX);
	return NULL;
}

/* @peer's time at @off in its struct peer, 0 if none (not running, or
 * never heard from) */
static uint64_t peer_time(uint64_t peer, size_t off)
{
	struct peer *p;
	uint64_t t = 0;

	pthread_mutex_lock(&cs.lock);
	p = cs.running ? chan_peer_find(peer) : NULL;
	if (p)
		memcpy(&t, (const char *)p + off, sizeof(t));
	pthread_mutex_unlock(&cs.lock);
	return t;
}

uint64_t r2cc_chan_heard_ns(uint64_t peer)
{
	return peer_time(peer, offsetof(struct peer, heard_ns));
}

void r2cc_chan_answered(uint64_t peer)
{
	struct peer *p;

	pthread_mutex_lock(&cs.lock);
	p = cs.running ? chan_peer_find(peer) : NULL;
	if (p)
		p->answered_ns = chan_now_ns();
	pthread_mutex_unlock(&cs.lock);
}

uint64_t r2cc_chan_answered_ns(uint64_t peer)
{
	return peer_time(peer, offsetof(struct peer, answered_ns));
}

static void peer_stats(const struct peer *p, struct r2cc_chan_peer_stats *st)
{
	const struct conn *c = p->conn >= 0 ? cs.conns[p->conn] : NULL;

	st->frames_out = p->frames_out;
	st->msgs_out = p->msgs_out;
	st->frames_in = p->frames_in;
	st->msgs_in = p->msgs_in;
	st->sent_ns = p->sent_ns;
	st->heard_ns = p->heard_ns;
	st->queued = c ? c->out_len - c->out_off : 0;
	st->open = c != NULL;
}

int r2cc_chan_peer_stats(uint64_t peer, struct r2cc_chan_peer_stats *st)
{
	struct peer *p;

	pthread_mutex_lock(&cs.lock);
	p = cs.running ? chan_peer_find(peer) : NULL;
	if (p)
		peer_stats(p, st);
	pthread_mutex_unlock(&cs.lock);
	return p ? 0 : -ENOENT;
}

/* "never" or "N ms ago" */
static const char *ago(char *buf, size_t len, uint64_t then, uint64_t now)
{
	if (!then)
		return "never";
	snprintf(buf, len, "%llu ms ago",
		 (unsigned long long)((now - then) / 1000000));
	return buf;
}

/* One line: what went each way between us and @p (cs.lock held). */
static void peer_say(const struct peer *p, const char *why, uint64_t now)
{
	struct r2cc_chan_peer_stats st;
	char out[32], in[32], d[200] = "not open";
	int i, others = 0;

	peer_stats(p, &st);
	if (p->conn >= 0)
		chan_conn_describe(p->conn, d, sizeof(d));
	for (i = 0; i < cs.nconn; i++)
		others += i != p->conn && cs.conns[i]->role != C_FREE &&
			  cs.conns[i]->peer == p->id;
	r2cc_info("peer %016llx (pid %u): %s; control channel %s (%d more "
		  "open), frames out %llu (%llu messages, the last %s, %zu "
		  "bytes the socket has not taken), in %llu (%llu messages, "
		  "the last %s)",
		  (unsigned long long)p->id, p->pid, why, d, others,
		  (unsigned long long)st.frames_out,
		  (unsigned long long)st.msgs_out,
		  ago(out, sizeof(out), st.sent_ns, now), st.queued,
		  (unsigned long long)st.frames_in,
		  (unsigned long long)st.msgs_in,
		  ago(in, sizeof(in), st.heard_ns, now));
}

void r2cc_chan_peer_say(uint64_t peer, const char *why)
{
	struct peer *p;
	uint64_t now = chan_now_ns();

	pthread_mutex_lock(&cs.lock);
	p = cs.running ? chan_peer_find(peer) : NULL;
	if (p &&
	    (!p->said_ns || now - p->said_ns >= MIG_CHAN_SAY_MS * 1000000ULL)) {
		p->said_ns = now;
		peer_say(p, why, now);
	}
	pthread_mutex_unlock(&cs.lock);
}

void chan_peers_say(const char *why)
{
	const struct peer *p;
	uint64_t now = chan_now_ns();

	for (p = cs.peer_list; p; p = p->next)
		if (p->frames_out || p->frames_in)
			peer_say(p, why, now);
}
