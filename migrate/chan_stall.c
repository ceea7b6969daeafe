/* SPDX-License-Identifier: MIT */
/*
 * chan_stall.c - a control connection TCP cannot get through is
 * replaced. A channel that runs over a rail's address (the management
 * network did not take the call in time) dies with that rail: no reset
 * comes back, TCP retransmits with a doubling timer, and every move with
 * that peer would wait its whole bound for an answer. Once the timer has
 * backed off CHAN_STALL_BACKOFF times, frames to the peer go on another
 * connection to it (one open already, or one dialled to another of its
 * addresses), the frames TCP may not have delivered first, as they were
 * (same seq, same MAC): the peer's replay window drops the ones it had.
 * A rail's down event (r2cc_chan_rail_down()) replaces the channels from
 * its addresses at once, without waiting for TCP's timer: the moves that
 * event starts need that channel. The call says it replaces the old one
 * (R2CC_CTRL_HELLO_REPLACES), and the peer's frames follow it.
 */
#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "chan_conn.h"

/* Consecutive retransmission timeouts without an ACK: at least
 * 0.2 + 0.4 + 0.8 s with Linux's smallest timer, some seconds at most on
 * a path that answered fast before. */
#define CHAN_STALL_BACKOFF 3
/* Connections looked at: those written to within this */
#define CHAN_STALL_LOOK_MS 60000
/* Kept frames are trimmed to what TCP has not delivered past this size */
#define TAIL_TRIM 16384
#define TAIL_FIRST 4096

/* Bytes written to @c that its peer has not acknowledged: in the kernel
 * (SIOCOUTQ: unacknowledged and unsent) and in our own queue. */
static size_t pending(const struct conn *c)
{
	int q = 0;

	if (ioctl(c->fd, SIOCOUTQ, &q) || q < 0)
		q = 0;
	return (size_t)q + (c->out_len - c->out_off);
}

/* @c's kept frames back to the oldest one not wholly acknowledged. */
static void trim(struct conn *c)
{
	size_t keep = pending(c), off = 0;

	while (off < c->tail_len) {
		int n = r2cc_ctrl_frame_len(c->tail + off, c->tail_len - off);

		if (n <= 0 || c->tail_len - off - (size_t)n < keep)
			break;
		off += (size_t)n;
	}
	memmove(c->tail, c->tail + off, c->tail_len - off);
	c->tail_len -= off;
}

void chan_tail_add(struct conn *c, const uint8_t *frame, size_t len)
{
	size_t cap;
	uint8_t *t;

	if (c->tail_len + len > c->tail_cap && c->tail_len >= TAIL_TRIM)
		trim(c);
	if (c->tail_len + len > MIG_CHAN_OUT_MAX) {
		/* TCP holds more than we keep: a replacement cannot send
		 * all of it again */
		c->tail_len = 0;
		c->tail_cut = true;
	}
	if (c->tail_len + len > c->tail_cap) {
		for (cap = c->tail_cap ? c->tail_cap : TAIL_FIRST;
		     cap < c->tail_len + len;)
			cap *= 2;
		t = realloc(c->tail, cap);
		if (!t) {
			c->tail_len = 0;
			c->tail_cut = true;
			return;
		}
		c->tail = t;
		c->tail_cap = cap;
	}
	memcpy(c->tail + c->tail_len, frame, len);
	c->tail_len += len;
	c->put_ns = chan_now_ns();
}

void chan_tail_drop(struct conn *c)
{
	free(c->tail);
	c->tail = NULL;
	c->tail_len = c->tail_cap = 0;
	c->tail_cut = false;
}

static bool (*stall_probe)(int fd); /* tests' */
static int (*rail_probe)(int fd);

void r2cc_chan_test_stall_probe(bool (*probe)(int fd))
{
	pthread_mutex_lock(&cs.lock);
	stall_probe = probe;
	pthread_mutex_unlock(&cs.lock);
}

void r2cc_chan_test_rail_probe(int (*probe)(int fd))
{
	pthread_mutex_lock(&cs.lock);
	rail_probe = probe;
	pthread_mutex_unlock(&cs.lock);
}

void r2cc_chan_rail_down(int rail)
{
	if (rail < 0 || rail >= R2CC_CTRL_RAIL_MAX)
		return;
	atomic_fetch_or(&cs.rails_down, 1U << rail);
	chan_wake();
}

/* The rails that went down since the last look, and our addresses on
 * them (read once a look) */
struct rails_down {
	uint32_t bits;
	int n;
	struct in_addr addr[2 * R2CC_CTRL_RAIL_MAX];
};

/* Is connection @i's own end on one of the rails in @d? */
static bool on_rail(int i, const struct rails_down *d)
{
	struct sockaddr_in sa = { 0 };
	socklen_t len = sizeof(sa);
	int k, rail;

	if (!d->bits)
		return false;
	if (rail_probe) {
		rail = rail_probe(cs.conns[i]->fd);
		return rail >= 0 && rail < R2CC_CTRL_RAIL_MAX &&
		       (d->bits & (1U << rail));
	}
	if (getsockname(cs.conns[i]->fd, (struct sockaddr *)&sa, &len) ||
	    sa.sin_family != AF_INET)
		return false;
	for (k = 0; k < d->n; k++)
		if (d->addr[k].s_addr == sa.sin_addr.s_addr)
			return true;
	return false;
}

/* Has TCP stopped getting through on connection @i? */
static bool stalled(int i)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (stall_probe)
		return stall_probe(cs.conns[i]->fd);
	memset(&ti, 0, sizeof(ti));
	return !getsockopt(cs.conns[i]->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) &&
	       ti.tcpi_backoff >= CHAN_STALL_BACKOFF;
}

/* Is connection @i still the open one it was (slot @gen)? */
static bool still_open(int i, uint32_t gen)
{
	return i >= 0 && i < cs.nconn && cs.conns[i]->role == C_OPEN &&
	       cs.conns[i]->gen == gen;
}

/*
 * @p's frames move from connection @from to @to: what arrived on @from
 * read first (the peer's kernel counts it delivered), the frames @from
 * may not have delivered sent again on @to, then @from closed. When
 * some of them were no longer kept, the peer is told lost (chan_lost())
 * by the close, as for any channel that ends.
 */
static void move_frames(struct peer *p, int from, int to)
{
	uint32_t gf = cs.conns[from]->gen, gt = cs.conns[to]->gen;
	char a[200], b[200];
	unsigned int n = 0;
	size_t off = 0;
	struct conn *c;

	chan_conn_readable(from); /* may drop the lock: look again */
	if (!still_open(to, gt))
		return;
	if (!still_open(from, gf)) {
		p->conn = to;
		return;
	}
	c = cs.conns[from];
	trim(c);
	while (off < c->tail_len) {
		int len = r2cc_ctrl_frame_len(c->tail + off, c->tail_len - off);

		if (len <= 0 || (size_t)len > c->tail_len - off ||
		    chan_conn_put(to, c->tail + off, (size_t)len))
			break;
		off += (size_t)len;
		n++;
	}
	chan_conn_describe(from, a, sizeof(a));
	chan_conn_describe(to, b, sizeof(b));
	r2cc_info("control channel to %016llx stalled (%s): now on %s, %u "
		  "frames it may not have delivered sent again%s",
		  (unsigned long long)p->id, a, b, n,
		  c->tail_cut || off < c->tail_len ? " (not all were kept)" :
						     "");
	cs.st.stalled++;
	cs.st.resent += n;
	p->conn = to;
	if (!c->tail_cut && off == c->tail_len)
		c->peer = 0; /* nothing lost with it: closed unsaid */
	chan_conn_close_why(from, "TCP could not get through");
}

/* Dial another of @p's addresses than the one stalled connection @i
 * reaches, on none of the rails in @down; the call's HELLO moves the
 * frames (chan_stall_hello()). */
static void redial(struct peer *p, int i, uint32_t down)
{
	struct sockaddr_in sa = { 0 };
	socklen_t len = sizeof(sa);
	int k, j;

	if (p->redial >= 0 && p->redial < cs.nconn &&
	    cs.conns[p->redial]->gen == p->redial_gen &&
	    cs.conns[p->redial]->role == C_HELLO)
		return; /* a call under way */
	p->redial = -1;
	getpeername(cs.conns[i]->fd, (struct sockaddr *)&sa, &len);
	for (k = 0; k < p->naddr; k++) {
		const struct r2cc_ctrl_addr *a =
			&p->addr[(p->redial_next + k) % p->naddr];

		if (a->family != 4 || !memcmp(a->addr, &sa.sin_addr, 4) ||
		    (a->rail < R2CC_CTRL_RAIL_MAX && (down & (1U << a->rail))))
			continue;
		p->redial_next = (p->redial_next + k + 1) % p->naddr;
		j = chan_conn_dial(a, C_HELLO, -1);
		if (j < 0)
			continue;
		cs.conns[j]->peer = p->id;
		cs.conns[j]->replaces = true;
		cs.conns[j]->deadline_ns =
			chan_now_ns() + MIG_CHAN_STEP_MS * 1000000ULL;
		p->redial = j;
		p->redial_gen = cs.conns[j]->gen;
		r2cc_info("control channel to %016llx stalled: calling it at "
			  "%u.%u.%u.%u (rail %u)",
			  (unsigned long long)p->id, a->addr[0], a->addr[1],
			  a->addr[2], a->addr[3], a->rail);
		return;
	}
}

void chan_stall_check(uint64_t now)
{
	struct rails_down d = { .bits = atomic_load_explicit(
					&cs.rails_down, memory_order_relaxed) };
	struct peer *p;

	if (!d.bits && now - cs.stall_check_ns < TICK_MS * 1000000ULL)
		return;
	d.bits = atomic_exchange(&cs.rails_down, 0);
	if (d.bits)
		d.n = chan_rail_addrs(
			d.bits, d.addr,
			(int)(sizeof(d.addr) / sizeof(d.addr[0])));
	cs.stall_check_ns = now;
	for (p = cs.peer_list; p; p = p->next) {
		int i = p->conn, j;

		if (i < 0 || cs.conns[i]->role != C_OPEN)
			continue;
		/* (a connection written to long ago has nothing owed) */
		if (!on_rail(i, &d) &&
		    (now - cs.conns[i]->put_ns >
			     CHAN_STALL_LOOK_MS * 1000000ULL ||
		     !stalled(i)))
			continue;
		j = chan_conn_other_open(p->id, i);
		if (j >= 0 && !stalled(j) && !on_rail(j, &d))
			move_frames(p, i, j);
		else
			redial(p, i, d.bits);
	}
}

void chan_stall_hello(struct peer *p, int i, bool replaces)
{
	bool ours = p->redial == i && cs.conns[i]->gen == p->redial_gen;

	if (ours)
		p->redial = -1;
	if (p->conn >= 0 && p->conn != i && cs.conns[p->conn]->role == C_OPEN &&
	    (ours || replaces || stalled(p->conn)))
		move_frames(p, p->conn, i);
}
