/* SPDX-License-Identifier: MIT */
/*
 * chan_res.c - the control channel's resolves: which process owns a
 * (GID, QPN), asked with a LOOKUP of its node's rendezvous port (whichever
 * r2cc process there accepted answers from the node's status records),
 * then a direct channel opened to the owner; and the LOOKUPs we answer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chan_conn.h"
#include "chan_hosts.h"
#include "chan_res.h"
#include "neigh.h"

/* The GID's entry, if resolve @r is the one sweeping for it */
static struct chan_gid_node *sweeping(int r)
{
	struct chan_gid_node *g = chan_gid_node(cs.res[r]->q.gid, false);

	return g && g->st == GN_SEARCH && g->res == r &&
			       g->cookie == cs.res[r]->cookie ?
		       g :
		       NULL;
}

/* Resolve @r's sweep ended @how: its GID's next resolve knows */
static void sweep_end(int r, enum r2cc_chan_res_end how)
{
	struct chan_gid_node *g = sweeping(r);

	if (!g)
		return;
	if (how == R2CC_RES_FOUND) {
		g->st = GN_FOUND;
		memcpy(g->addr, cs.res[r]->at, 4);
	} else {
		g->st = GN_FAILED;
		g->how = how;
		g->ns = chan_now_ns();
	}
}

void chan_res_end(int r, uint64_t peer, enum r2cc_chan_res_end how)
{
	struct res *x = cs.res[r];
	uint64_t cookie = x->cookie;
	int i;

	if (!x->used)
		return;
	if (peer)
		r2cc_dbg("resolve of QP %#x: owner %016llx", x->q.qpn,
			 (unsigned long long)peer);
	if (x->sweep)
		sweep_end(r, how);
	x->used = false;
	x->waits = false;
	for (i = 0; i < cs.nconn; i++)
		if (cs.conns[i]->res == r)
			cs.conns[i]->res = -1;
	/* Its call to the owner failed: the owner took none at any of
	 * its addresses, nor would it take the calls of the resolves that
	 * waited on this one (each asked again, with a fresh lookup, by
	 * its QP: MIG_RESOLVES). Answered by another process (the owner's
	 * port taken over): one of them calls in its turn. */
	for (i = 0; x->owner && peer != x->owner && i < cs.nres; i++) {
		struct res *w = cs.res[i];

		if (!w->used || !w->waits || w->owner != x->owner)
			continue;
		w->waits = false;
		if (peer) {
			chan_res_next_addr(i);
			break;
		}
		w->owner = 0; /* (its end wakes none) */
		chan_res_end(i, 0, R2CC_RES_UNANSWERED);
	}
	if (!peer)
		cs.st.conn_fail++;
	else
		cs.st.conn_ok++;
	pthread_mutex_unlock(&cs.lock);
	cs.hooks.on_resolved(cookie, peer, peer ? R2CC_RES_FOUND : how);
	pthread_mutex_lock(&cs.lock);
}

void chan_res_fail(int r, enum r2cc_chan_res_end how, const char *why)
{
	/* Each reason at info level once (the whys are literals), then at
	 * debug level: thousands of QPs may resolve in vain at once. */
	static const char *said[16];
	unsigned int i;

	for (i = 0; i < 16 && said[i] && said[i] != why; i++)
		;
	if (cs.res[r]->used && i < 16 && !said[i]) {
		said[i] = why;
		r2cc_info("resolve of QP %#x: no owner: %s (further ones for "
			  "it at debug level)",
			  cs.res[r]->q.qpn, why);
	} else if (cs.res[r]->used) {
		r2cc_dbg("resolve of QP %#x: no owner: %s", cs.res[r]->q.qpn,
			 why);
	}
	chan_res_end(r, 0, how);
}

void chan_res_miss(int r, enum r2cc_chan_res_end how, const char *why)
{
	struct res *x = cs.res[r];
	int n;

	if (!x->used || !x->sweep) {
		chan_res_fail(r, how, why);
		return;
	}
	n = chan_hosts_count();
	x->silent |= how == R2CC_RES_UNANSWERED;
	x->none |= how == R2CC_RES_NO_OWNER;
	r2cc_dbg("resolve of QP %#x: node %u.%u.%u.%u: %s", x->q.qpn, x->at[0],
		 x->at[1], x->at[2], x->at[3], why);
	if (n > 0 && x->swept < (unsigned int)n &&
	    chan_now_ns() - x->sweep_ns < MIG_CHAN_SWEEP_MS * 1000000ULL) {
		x->started = false; /* the next node, at the next round */
		x->next_node = true;
		x->tries = 0;
		return;
	}
	chan_res_fail(r,
		      x->silent ? R2CC_RES_UNANSWERED :
		      x->none	? R2CC_RES_NO_OWNER :
				  R2CC_RES_NO_R2CC,
		      x->swept < (unsigned int)(n > 0 ? n : 0) ?
			      "the job's nodes not all asked in time" :
			      "no node of the job's knows an owner");
}

/* Is a call to @owner under way (HELLO not answered yet) for a resolve
 * other than @r? */
static bool calling(uint64_t owner, int r)
{
	int i;

	for (i = 0; i < cs.nconn; i++) {
		const struct conn *c = cs.conns[i];

		if (c->role == C_HELLO && c->res >= 0 && c->res != r &&
		    cs.res[c->res]->used && cs.res[c->res]->owner == owner)
			return true;
	}
	return false;
}

void chan_res_opened(uint64_t peer)
{
	int r;

	for (r = 0; r < cs.nres; r++)
		if (cs.res[r]->used && cs.res[r]->waits &&
		    cs.res[r]->owner == peer)
			chan_res_end(r, peer, R2CC_RES_FOUND);
}

/* Dial the owner's next address, or give up. */
void chan_res_next_addr(int r)
{
	struct res *x = cs.res[r];

	while (x->next < x->naddr) {
		const struct r2cc_ctrl_addr *a = &x->addr[x->next++];

		if (x->next > 1)
			r2cc_info(
				"resolve of QP %#x: the owner's address %d "
				"of %d did not take the call; now %u.%u.%u.%u "
				"(rail %u)",
				x->q.qpn, x->next - 1, x->naddr, a->addr[0],
				a->addr[1], a->addr[2], a->addr[3], a->rail);
		if (chan_conn_dial(a, C_HELLO, r) >= 0)
			return;
	}
	chan_res_fail(r, R2CC_RES_UNANSWERED,
		      "no address of the owner took the call");
}

void chan_lookup_window_on(struct chan_lookup_window *w, bool answered,
			   uint64_t now_ns)
{
	if (w->n < MIG_CHAN_LOOKUPS_MIN || w->n > MIG_CHAN_LOOKUPS)
		w->n = MIG_CHAN_LOOKUPS_START;
	if (answered) {
		w->answered_ns = now_ns;
		if (w->n < MIG_CHAN_LOOKUPS)
			w->n++;
		return;
	}
	/* One congestion, one halving: the lookups under way when it began
	 * go unanswered together */
	if (w->cut_ns && now_ns - w->cut_ns < MIG_CHAN_STEP_MS * 1000000ULL)
		return;
	w->cut_ns = now_ns;
	w->n = w->n / 2 < MIG_CHAN_LOOKUPS_MIN ? MIG_CHAN_LOOKUPS_MIN :
						 w->n / 2;
}

/* Lookups under way at most: the window, within half the connections'
 * budget, at least one. */
static int chan_lookups_max(void)
{
	int n = cs.conn_max / 2;

	if (n > cs.lookups.n)
		n = cs.lookups.n;
	return n < 1 ? 1 : n;
}

/* Resolve @r sweeps the job's @n nodes (if any) for its GID (@g: its
 * entry, if there is room for one) */
static void sweep_begin(int r, struct chan_gid_node *g, int n)
{
	struct res *x = cs.res[r];

	x->sweep = true;
	x->next_node = x->silent = x->none = false;
	x->host0 = n > 0 ? chan_gid_hash(x->q.gid) % (unsigned int)n : 0;
	x->swept = 0;
	x->sweep_ns = chan_now_ns();
	if (g) {
		g->st = GN_SEARCH;
		g->res = r;
		g->cookie = x->cookie;
	}
}

/* The node a resolve whose GID names none asks now (@a): the one that
 * answered for its GID before, else the one R2CC_NODE_MAP or its IPoIB
 * neighbour names, and the job's nodes in turn. 0, or
 * -EAGAIN (it waits: the nodes' names are being resolved, or another
 * resolve sweeps for the GID), or -errno with *@how, *@why: given up. */
static int node_of(int r, uint8_t a[4], enum r2cc_chan_res_end *how,
		   const char **why)
{
	struct res *x = cs.res[r];
	struct chan_gid_node *g;
	int n, m;

	if (x->sweep) { /* the same node again, or the next one */
		n = chan_hosts_count();
		if (x->next_node && n <= 0) {
			*how = R2CC_RES_UNANSWERED;
			*why = "the job's nodes are gone";
			return -ENOENT;
		}
		if (x->next_node)
			chan_hosts_addr((x->host0 + x->swept++) %
						(unsigned int)n,
					x->at);
		x->next_node = false;
		memcpy(a, x->at, 4);
		return 0;
	}
	g = chan_gid_node(x->q.gid, true);
	if (g && g->st == GN_FOUND) {
		memcpy(a, g->addr, 4);
		return 0;
	}
	if (g && g->st == GN_SEARCH && g->res != r && cs.res[g->res]->used &&
	    cs.res[g->res]->cookie == g->cookie)
		return -EAGAIN;
	if (g && g->st == GN_FAILED &&
	    chan_now_ns() - g->ns < MIG_CHAN_SWEEP_GAP_MS * 1000000ULL) {
		*how = g->how;
		*why = "no node of the job's knew an owner a moment ago";
		return -ENOENT;
	}
	n = chan_hosts_count();
	m = chan_hosts_mapped(x->q.gid, x->at);
	if (m == -EAGAIN)
		return m;
	if (!m || !r2cc_neigh_lookup(x->q.gid, x->at)) {
		/* R2CC_NODE_MAP or an IPoIB neighbour names its node: that
		 * one is asked first */
		sweep_begin(r, g, n);
		memcpy(a, x->at, 4);
		return 0;
	}
	if (n == -EAGAIN)
		return n;
	if (n <= 0) {
		*how = R2CC_RES_NO_R2CC;
		*why = cs.peer_by_gid ?
			       "its GID carries no IPv4 address and "
			       "no node of the job has one "
			       "(R2CC_PEERS)" :
			       "R2CC_PEER_BY_GID is off and no node "
			       "of the job has an address (R2CC_PEERS)";
		return -ENOENT;
	}
	sweep_begin(r, g, n);
	chan_hosts_addr(x->host0, x->at);
	x->swept = 1;
	memcpy(a, x->at, 4);
	return 0;
}

void chan_res_start(int r)
{
	struct res *x = cs.res[r];
	struct r2cc_ctrl_addr a = { .family = 4, .port = cs.rdv_port };
	static const uint8_t v4map[12] = { [10] = 0xff, [11] = 0xff };
	enum r2cc_chan_res_end how;
	uint64_t since = x->since_ns;
	const char *why;
	int ret;

	x->started = true;
	x->tries++;
	if (cs.peer_by_gid && !memcmp(x->q.gid, v4map, sizeof(v4map))) {
		memcpy(a.addr, x->q.gid + 12, 4);
	} else {
		ret = node_of(r, a.addr, &how, &why);
		if (ret == -EAGAIN &&
		    chan_now_ns() - since < MIG_CHAN_RES_WAIT_MS * 1000000ULL) {
			x->started = false;
			x->tries--;
			return;
		}
		if (ret) {
			chan_res_fail(
				r, ret == -EAGAIN ? R2CC_RES_UNANSWERED : how,
				ret == -EAGAIN ? "the job's nodes not "
						 "known in time" :
						 why);
			return;
		}
	}
	memcpy(x->at, a.addr, 4);
	/* No connection to spare: no dial, it waits (bounded). Lookups take
	 * half the budget at most (and the window): a process binding
	 * hundreds of QPs at once must leave room for its peers' calls.
	 * While others' lookups are answered, its turn comes: the bound
	 * counts from the later of its ask and the last answer. */
	ret = cs.nopen < cs.conn_max && cs.nlookup < chan_lookups_max() ?
		      chan_conn_dial(&a, C_LOOKUP, r) :
		      -EMFILE;
	if (cs.lookups.answered_ns > since)
		since = cs.lookups.answered_ns;
	if ((ret == -EMFILE || ret == -ENFILE) &&
	    chan_now_ns() - since < MIG_CHAN_RES_WAIT_MS * 1000000ULL) {
		x->started = false;
		x->tries--;
	} else if (ret == -EMFILE || ret == -ENFILE) {
		chan_res_fail(r, R2CC_RES_UNANSWERED,
			      "no connection to spare in time");
	} else if (ret < 0) {
		chan_res_miss(r,
			      ret == -ECONNREFUSED ? R2CC_RES_NO_R2CC :
						     R2CC_RES_UNANSWERED,
			      "the rendezvous could not be dialled");
	}
}

/* A free resolve slot (grown as needed), or -1: past MIG_CHAN_RES_MAX,
 * or no memory (said once, counted). */
static int res_slot(void)
{
	struct res **a;
	int r, n;

	for (r = 0; r < cs.nres; r++)
		if (!cs.res[r]->used)
			return r;
	n = cs.nres ? 2 * cs.nres : 64;
	if (n > MIG_CHAN_RES_MAX)
		n = MIG_CHAN_RES_MAX;
	a = n > cs.nres ? reallocarray(cs.res, (size_t)n, sizeof(*a)) : NULL;
	if (a) {
		cs.res = a;
		for (; cs.nres < n && (a[cs.nres] = calloc(1, sizeof(**a)));
		     cs.nres++)
			;
	}
	if (r < cs.nres)
		return r;
	chan_refused(R2CC_REFUSE_RESOLVE, &cs.st.res_budget, &cs.res_said,
		     "%d resolves under way (budget %d): a QP past them runs "
		     "unprotected",
		     cs.nres, MIG_CHAN_RES_MAX);
	return -1;
}

int r2cc_chan_resolve(const struct r2cc_ctrl_qp_ref *q, uint64_t cookie)
{
	int r, ret = -ENOMEM;

	pthread_mutex_lock(&cs.lock);
	if (!cs.running) {
		ret = -ENOTCONN;
		goto out;
	}
	r = res_slot();
	if (r >= 0) {
		memset(cs.res[r], 0, sizeof(*cs.res[r]));
		cs.res[r]->used = true;
		cs.res[r]->since_ns = chan_now_ns();
		cs.res[r]->cookie = cookie;
		cs.res[r]->q = *q;
		ret = 0;
	}
out:
	pthread_mutex_unlock(&cs.lock);
	if (!ret)
		chan_wake();
	return ret;
}

void chan_serve_lookup(int i, const struct r2cc_ctrl_msg *m)
{
	struct r2cc_ctrl_msg rep;

	memset(&rep, 0, sizeof(rep));
	rep.hdr.type = R2CC_CTRL_LOOKUP_REPLY;
	rep.hdr.receiver = m->hdr.sender;
	rep.lookup_reply.what = m->lookup;
	pthread_mutex_unlock(&cs.lock);
	cs.hooks.lookup(&m->lookup, &rep.lookup_reply);
	pthread_mutex_lock(&cs.lock);
	rep.hdr.seq = m->hdr.seq; /* the asker's: the answer is fresh */
	cs.st.lookups_served++;
	if (!rep.lookup_reply.found)
		rep.lookup_reply.naddr = 0;
	if (cs.conns[i]->role != C_FREE && chan_conn_write(i, &rep))
		chan_conn_close(i);
}

void chan_got_reply(int i, const struct r2cc_ctrl_msg *m)
{
	const struct r2cc_ctrl_lookup_reply *lr = &m->lookup_reply;
	struct conn *c = cs.conns[i];
	struct res *x = c->res >= 0 ? cs.res[c->res] : NULL;
	struct peer *p;
	int r = c->res;

	if (!x || lr->what.qpn != x->q.qpn ||
	    memcmp(lr->what.gid, x->q.gid, 16)) {
		chan_conn_close(i);
		return;
	}
	c->res = -1;
	chan_conn_close(i); /* the rendezvous is done with */
	chan_lookup_window_on(&cs.lookups, true, chan_now_ns());
	if (!lr->found || !lr->owner) {
		chan_res_miss(r, R2CC_RES_NO_OWNER,
			      "the node's rendezvous knows no owner");
		return;
	}
	if (x->sweep) {
		sweep_end(r, R2CC_RES_FOUND);
		r2cc_dbg("resolve of QP %#x: its GID's node is %u.%u.%u.%u",
			 x->q.qpn, x->at[0], x->at[1], x->at[2], x->at[3]);
	}
	x->owner = lr->owner;
	p = chan_peer_find(lr->owner);
	if (p && p->conn >= 0) {
		chan_res_end(r, p->id, R2CC_RES_FOUND);
		return;
	}
	x->naddr = lr->naddr;
	memcpy(x->addr, lr->addr, sizeof(x->addr));
	x->next = 0;
	/* One call to an owner at a time: every call that succeeds stays
	 * open (a second channel is never closed: frames may be on it),
	 * and a rank resolves hundreds of QPs of one owner at once */
	if (calling(lr->owner, r)) {
		x->waits = true;
		return;
	}
	chan_res_next_addr(r);
}
