/* SPDX-License-Identifier: MIT */
/*
 * chan_conn.c - the control channel's connections: slots made as needed
 * within their budget, non-blocking connects, framing both ways, HELLO,
 * the peer processes heard from, and the frames handed to the owner.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "chan_conn.h"
#include "chan_res.h"

static void sock_opts(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* A frame buffer's first size: most frames are far smaller than the
 * largest (R2CC_CTRL_FRAME_MAX), grown to that when one needs it. */
#define CONN_BUF 4096

/* Slot @i exists: 0, or -ENOMEM. */
static int conn_slot(int i)
{
	struct conn **a;
	int n;

	if (i < cs.nconn)
		return 0;
	n = cs.nconn ? 2 * cs.nconn : 16;
	if (n > cs.conn_max)
		n = cs.conn_max;
	a = reallocarray(cs.conns, (size_t)n, sizeof(*a));
	if (!a)
		return -ENOMEM;
	cs.conns = a;
	for (; cs.nconn < n; cs.nconn++) {
		a[cs.nconn] = calloc(1, sizeof(**a));
		if (!a[cs.nconn])
			return i < cs.nconn ? 0 : -ENOMEM;
		a[cs.nconn]->role = C_FREE;
		a[cs.nconn]->fd = -1;
		a[cs.nconn]->res = -1;
	}
	return 0;
}

static int conn_new(int fd, enum conn_role role, int res)
{
	int i;

	for (i = 0; i < cs.conn_max; i++) {
		struct conn *c;

		if (conn_slot(i))
			return -ENOMEM;
		c = cs.conns[i];
		if (c->role != C_FREE)
			continue;
		if (!c->buf) {
			c->buf = malloc(CONN_BUF);
			c->cap = CONN_BUF;
		}
		if (!c->buf)
			return -ENOMEM;
		c->role = role;
		cs.nopen++;
		cs.nlookup += role == C_LOOKUP;
		c->fd = fd;
		c->gen++;
		c->connecting = false;
		c->peer = 0;
		c->res = res;
		c->have = 0;
		c->replaces = false;
		c->deadline_ns = chan_now_ns() + MIG_CHAN_STEP_MS * 1000000ULL;
		return i;
	}
	/* (the program may have raised its RLIMIT_NOFILE since the start) */
	if (chan_conn_budget() > cs.conn_max) {
		cs.conn_max = chan_conn_budget();
		return conn_new(fd, role, res);
	}
	chan_refused(R2CC_REFUSE_CTRL_CONN, &cs.st.conn_budget, &cs.conns_said,
		     "%d connections open, its budget (a quarter of "
		     "RLIMIT_NOFILE): further resolves wait, new peers' calls "
		     "are refused",
		     cs.conn_max);
	return -EMFILE;
}

/* Another open connection to @peer than @i, or -1. Two processes that
 * resolve each other at once each dial the other: both channels open, and
 * the peer stays reachable while either does. */
int chan_conn_other_open(uint64_t peer, int i)
{
	int j;

	for (j = 0; j < cs.nconn; j++)
		if (j != i && cs.conns[j]->role == C_OPEN &&
		    cs.conns[j]->peer == peer)
			return j;
	return -1;
}

size_t chan_conn_describe(int i, char *buf, size_t len)
{
	const struct conn *c = cs.conns[i];
	struct sockaddr_in a = { 0 }, b = { 0 };
	socklen_t la = sizeof(a), lb = sizeof(b), lt;
	char sa[INET_ADDRSTRLEN] = "?", sb[INET_ADDRSTRLEN] = "?";
	struct tcp_info ti;
	int n;

	if (!getsockname(c->fd, (struct sockaddr *)&a, &la))
		inet_ntop(AF_INET, &a.sin_addr, sa, sizeof(sa));
	if (!getpeername(c->fd, (struct sockaddr *)&b, &lb))
		inet_ntop(AF_INET, &b.sin_addr, sb, sizeof(sb));
	n = snprintf(buf, len, "%s:%u -> %s:%u", sa, ntohs(a.sin_port), sb,
		     ntohs(b.sin_port));
	memset(&ti, 0, sizeof(ti));
	lt = sizeof(ti);
	if (n >= 0 && (size_t)n < len &&
	    !getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &lt))
		n += snprintf(buf + n, len - (size_t)n,
			      ", TCP: rto %u ms, backoff %u, unacked %u, "
			      "retransmitted %u, data heard %u ms ago",
			      ti.tcpi_rto / 1000, ti.tcpi_backoff,
			      ti.tcpi_unacked, ti.tcpi_total_retrans,
			      ti.tcpi_last_data_recv);
	return n < 0 ? 0 : (size_t)n;
}

/* An open channel ends: which, between which addresses (a channel over
 * a rail dies with it), and whether the peer has another. */
static void say_closed(int i, const char *why)
{
	const struct conn *c = cs.conns[i];
	char d[192];

	chan_conn_describe(i, d, sizeof(d));
	r2cc_info("control channel to %016llx (%s) closed%s: %s",
		  (unsigned long long)c->peer, d,
		  c->out_off < c->out_len ? " with frames unsent" : "", why);
}

void chan_conn_close(int i)
{
	chan_conn_close_why(i, "by this process");
}

void chan_conn_close_why(int i, const char *why)
{
	struct conn *c = cs.conns[i];
	struct peer *p;

	if (c->role == C_FREE)
		return;
	r2cc_dbg("control connection %d (role %d) closed", i, c->role);
	p = c->role == C_OPEN ? chan_peer_find(c->peer) : NULL;
	if (p && cs.running)
		say_closed(i, why);
	close(c->fd);
	if (p && p->conn == i)
		p->conn = chan_conn_other_open(p->id, i);
	/* What either end had not read on it is gone (ours by the close,
	 * the peer's by the reset it causes) */
	if (p)
		chan_lost(p->id);
	if (c->res >= 0 && c->role == C_LOOKUP) {
		cs.st.lookups_lost++;
		chan_lookup_window_on(&cs.lookups, false, chan_now_ns());
	}
	if (c->res >= 0 && c->role == C_LOOKUP && !c->connecting &&
	    cs.res[c->res]->tries < LOOKUP_TRIES) {
		/* Connected and asked, and no answer: the listener that took
		 * it belongs to a process that serves no more (one stuck
		 * exiting keeps its place in the port's SO_REUSEPORT group).
		 * A fresh connection is likely another listener's: ask again
		 * (chan_expire() dials it). */
		cs.res[c->res]->started = false;
	} else if (c->res >= 0 && c->role == C_LOOKUP) {
		chan_res_miss(c->res, R2CC_RES_UNANSWERED,
			      "its lookup got no answer");
	} else if (c->res >= 0 && c->role != C_OPEN) {
		chan_res_fail(c->res, R2CC_RES_UNANSWERED,
			      "the owner did not say HELLO");
	}
	cs.nlookup -= c->role == C_LOOKUP;
	c->role = C_FREE;
	cs.nopen--;
	c->fd = -1;
	c->out_off = c->out_len = 0;
	chan_tail_drop(c);
	if (c->out_cap > CONN_BUF) {
		free(c->out);
		c->out = NULL;
		c->out_cap = 0;
	}
	if (c->cap > CONN_BUF) { /* a large frame's room: not kept */
		free(c->buf);
		c->buf = NULL;
		c->cap = 0;
	}
}

/* Connect (non-blocking) to @a; the conn waits for POLLOUT. */
int chan_conn_dial(const struct r2cc_ctrl_addr *a, enum conn_role role, int res)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(a->port) };
	int fd, i;

	if (a->family != 4)
		return -EAFNOSUPPORT;
	memcpy(&sin.sin_addr, a->addr, 4);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	sock_opts(fd);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) &&
	    errno != EINPROGRESS) {
		int e = -errno;

		close(fd);
		return e;
	}
	i = conn_new(fd, role, res);
	if (i < 0) {
		close(fd);
		return i;
	}
	cs.conns[i]->connecting = true;
	return i;
}

/* Connection @c waits on its peer to read (C_OPEN: its deadline is the
 * stall bound), or waits no more. Other roles keep their own deadline. */
static void out_deadline(struct conn *c)
{
	if (c->role != C_OPEN)
		return;
	c->deadline_ns =
		c->out_off < c->out_len ?
			chan_now_ns() + MIG_CHAN_OUT_STALL_MS * 1000000ULL :
			0;
}

/* Bytes *@off.. of @buf (@len) to @fd, as many as its socket takes now,
 * *@off advanced: 0 (all sent, or the socket full), or -EIO. */
static int send_now(int fd, const uint8_t *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t n = send(fd, buf + *off, len - *off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0)
			return -EIO;
		*off += (size_t)n;
	}
	return 0;
}

/* As much of @c's kept output as its socket takes: 0, or -EIO. */
static int out_send(struct conn *c)
{
	size_t before = c->out_off;

	if (send_now(c->fd, c->out, c->out_len, &c->out_off))
		return -EIO;
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_off != before || !c->out_len)
		out_deadline(c);
	return 0;
}

/* @len bytes of @frame after @c's kept output: 0, or -EIO (past
 * MIG_CHAN_OUT_MAX, or no memory). */
static int out_keep(struct conn *c, const uint8_t *frame, size_t len)
{
	size_t kept = c->out_len - c->out_off, cap;
	uint8_t *o;

	if (kept + len > MIG_CHAN_OUT_MAX) {
		r2cc_warn("control connection to %016llx: %zu bytes its peer "
			  "has not read: closed",
			  (unsigned long long)c->peer, kept);
		return -EIO;
	}
	if (c->out_off) { /* what was sent is not kept */
		memmove(c->out, c->out + c->out_off, kept);
		c->out_off = 0;
		c->out_len = kept;
	}
	if (kept + len > c->out_cap) {
		for (cap = c->out_cap ? c->out_cap : CONN_BUF;
		     cap < kept + len;)
			cap *= 2;
		o = realloc(c->out, cap);
		if (!o)
			return -EIO;
		c->out = o;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, frame, len);
	c->out_len += len;
	if (!kept)
		out_deadline(c);
	return 0;
}

void chan_conn_writable(int i)
{
	if (out_send(cs.conns[i])) {
		cs.st.send_fail++;
		chan_conn_close_why(i, "a send failed");
	}
}

int chan_conn_put(int i, const uint8_t *frame, size_t len)
{
	struct conn *c = cs.conns[i];
	size_t off = 0;

	/* (behind kept frames: kept too, their order holds) */
	if ((c->out_len == c->out_off && send_now(c->fd, frame, len, &off)) ||
	    (off < len && out_keep(c, frame + off, len - off))) {
		cs.st.send_fail++;
		return -EIO;
	}
	chan_tail_add(c, frame, len);
	return 0;
}

/* The messages frame @m carries: a BATCH's, or itself */
static uint32_t frame_msgs(const struct r2cc_ctrl_msg *m)
{
	return m->hdr.type == R2CC_CTRL_BATCH ? m->batch.n : 1;
}

/* Encode and send one frame; the lock is held. The sockets do not block:
 * a frame the socket does not take now goes after the ones kept, in
 * order, as the peer reads. */
int chan_conn_write(int i, struct r2cc_ctrl_msg *m)
{
	static uint8_t frame[R2CC_CTRL_FRAME_MAX]; /* under cs.lock */
	struct peer *p;
	int len;

	m->hdr.sender = cs.key.self;
	len = r2cc_ctrl_encode(&cs.key, m, frame, sizeof(frame));
	if (len < 0)
		return len;
	if (chan_conn_put(i, frame, (size_t)len))
		return -EIO;
	cs.st.sent++;
	p = chan_peer_find(m->hdr.receiver);
	if (p) {
		p->frames_out++;
		p->msgs_out += frame_msgs(m);
		p->sent_ns = chan_now_ns();
	}
	r2cc_status_ctrl_add(R2CC_CTRL_FRAMES_OUT, 1);
	r2cc_status_ctrl_add(R2CC_CTRL_MSGS_OUT, frame_msgs(m));
	r2cc_status_ctrl_add(R2CC_CTRL_BYTES_OUT, (uint64_t)len);
	return 0;
}

static void send_hello(int i, uint64_t to)
{
	struct r2cc_ctrl_msg m;
	int n;

	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_HELLO;
	m.hdr.receiver = to;
	m.hdr.seq = ++cs.seq;
	m.hello.ver_min = m.hello.ver_max = R2CC_CTRL_VERSION;
	m.hello.pid = (uint32_t)cs.pid;
	if (cs.conns[i]->replaces)
		m.hello.flags = R2CC_CTRL_HELLO_REPLACES;
	n = r2cc_chan_addrs(m.hello.addr, R2CC_CTRL_MAX_ADDRS, cs.direct_port);
	m.hello.naddr = n > 0 ? (uint8_t)n : 0;
	if (chan_conn_write(i, &m))
		chan_conn_close(i);
}

/* A peer's HELLO: remember its addresses; the connection is open. */
static void got_hello(int i, const struct r2cc_ctrl_msg *m)
{
	struct conn *c = cs.conns[i];
	struct peer *p = chan_peer_get(m->hdr.sender);

	if (!p) {
		chan_conn_close(i);
		return;
	}
	p->pid = m->hello.pid;
	p->naddr = m->hello.naddr;
	memcpy(p->addr, m->hello.addr, sizeof(p->addr));
	if (c->role == C_ACCEPTED)
		send_hello(i, m->hdr.sender);
	if (c->role == C_FREE)
		return;
	/* Frames go on the first channel open to a peer for as long as it
	 * stays open: switching to a second one (both ends dialled at once)
	 * would let frames still in flight on the first arrive after newer
	 * ones, and past the peer's replay window they are dropped. */
	if (p->conn < 0)
		p->conn = i;
	else if (p->conn != i)
		r2cc_dbg("peer %016llx: a second channel, frames stay on the "
			 "first",
			 (unsigned long long)p->id);
	c->peer = p->id;
	if (c->role == C_HELLO && c->res >= 0) {
		uint64_t id = p->id;
		int r = c->res;

		if (cs.res[r]->owner && cs.res[r]->owner != p->id)
			r2cc_warn("resolve of QP %#x: %016llx answered the "
				  "call to its owner %016llx",
				  cs.res[r]->q.qpn, (unsigned long long)p->id,
				  (unsigned long long)cs.res[r]->owner);
		c->role = C_OPEN;
		out_deadline(c); /* (none, or the stall bound) */
		chan_res_end(r, id, R2CC_RES_FOUND);
		chan_res_opened(id);
		return;
	}
	c->role = C_OPEN;
	out_deadline(c);
	chan_res_opened(p->id);
	chan_stall_hello(p, i, m->hello.flags & R2CC_CTRL_HELLO_REPLACES);
}

/* A BATCH's messages to the owner, one by one, what they make it send
 * gathered (one frame per peer); their bytes copied first: the lock is
 * dropped, and the connection's buffer may go meanwhile. */
static void got_batch(struct r2cc_ctrl_msg *m)
{
	uint8_t *body = malloc(m->batch.len ? m->batch.len : 1);
	struct r2cc_ctrl_msg *one = malloc(sizeof(*one));
	uint32_t off = 0;

	if (!body || !one) {
		r2cc_warn("control BATCH of %u dropped: no memory", m->batch.n);
		free(body);
		free(one);
		return;
	}
	memcpy(body, m->batch.body, m->batch.len);
	m->batch.body = body;
	cs.st.batches_in++;
	pthread_mutex_unlock(&cs.lock);
	r2cc_chan_hold();
	while (r2cc_ctrl_batch_next(m, &off, one))
		cs.hooks.on_msg(m->hdr.sender, one);
	r2cc_chan_flush();
	pthread_mutex_lock(&cs.lock);
	free(one);
	free(body);
}

/* Connection @i sent what failed a frame's check (@rc, counted in rx
 * already): closed, a stream out of step cannot recover. */
static void refuse(int i, int rc)
{
	static struct r2cc_log_limit lim;
	enum r2cc_log_say say;
	uint64_t held;

	r2cc_status_ctrl_add(R2CC_CTRL_FRAMES_REFUSED, 1);
	say = r2cc_log_limit_pass(&lim, &held);
	if (say != R2CC_LOG_HOLD)
		r2cc_warn("control frame dropped: %s (%llu more held back%s)",
			  strerror(-rc), (unsigned long long)held,
			  r2cc_log_limit_tail(say));
	chan_conn_close_why(i, "a frame failed its check");
}

/* One whole frame from connection @i. */
static void got_frame(int i, const uint8_t *buf, size_t len)
{
	struct conn *c = cs.conns[i];
	struct r2cc_ctrl_msg *m = malloc(sizeof(*m));
	struct peer *p;
	int rc;

	if (!m) {
		chan_conn_close(i);
		return;
	}
	rc = r2cc_ctrl_decode(&cs.key, buf, len, m);
	if (!rc && m->hdr.type == R2CC_CTRL_LOOKUP_REPLY) {
		/* It carries our LOOKUP's seq, new on each: fresh by that,
		 * whatever the answering process sent anyone since */
		rc = c->role == C_LOOKUP && m->hdr.seq == c->asked ? 0 :
								     -ESTALE;
	} else if (!rc) {
		p = chan_peer_get(m->hdr.sender);
		rc = p ? r2cc_ctrl_replay_accept(&p->win, m->hdr.seq) : -ENOMEM;
		if (!rc) {
			p->heard_ns = chan_now_ns();
			p->frames_in++;
			p->msgs_in += frame_msgs(m);
			/* A peer at work on a backlog (chan.c, say_busy())
			 * works on what we wait for too, to a ceiling
			 * (r2cc_mig_waited()) */
			if (m->hdr.type == R2CC_CTRL_KEEPALIVE)
				p->answered_ns = p->heard_ns;
		}
	}
	r2cc_ctrl_count(&cs.st.rx, rc);
	if ((rc == -EALREADY || rc == -ESTALE) &&
	    m->hdr.type != R2CC_CTRL_LOOKUP_REPLY) {
		/* Sent again after a stall (chan_stall.c): had already, or
		 * from before the window; the stream stays in step. */
		cs.st.duplicates++;
		r2cc_dbg("control frame %llu of %016llx dropped: %s",
			 (unsigned long long)m->hdr.seq,
			 (unsigned long long)m->hdr.sender, strerror(-rc));
		goto out;
	}
	if (rc) {
		refuse(i, rc);
		goto out;
	}
	r2cc_status_ctrl_add(R2CC_CTRL_FRAMES_IN, 1);
	r2cc_status_ctrl_add(R2CC_CTRL_MSGS_IN, frame_msgs(m));
	r2cc_status_ctrl_add(R2CC_CTRL_BYTES_IN, len);
	switch (m->hdr.type) {
	case R2CC_CTRL_HELLO:
		if (c->role == C_ACCEPTED || c->role == C_HELLO)
			got_hello(i, m);
		break;
	case R2CC_CTRL_LOOKUP:
		if (c->role == C_ACCEPTED)
			chan_serve_lookup(i, m);
		break;
	case R2CC_CTRL_LOOKUP_REPLY:
		if (c->role == C_LOOKUP)
			chan_got_reply(i, m);
		break;
	case R2CC_CTRL_BATCH:
		if (c->role == C_OPEN && c->peer == m->hdr.sender)
			got_batch(m);
		break;
	default:
		if (c->role != C_OPEN || c->peer != m->hdr.sender)
			break;
		pthread_mutex_unlock(&cs.lock);
		cs.hooks.on_msg(m->hdr.sender, m);
		pthread_mutex_lock(&cs.lock);
	}
out:
	free(m);
}

void chan_conn_readable(int i)
{
	struct conn *c = cs.conns[i];
	uint32_t gen = c->gen;

	for (;;) {
		ssize_t n;
		int flen;

		flen = r2cc_ctrl_frame_len(c->buf, c->have);
		if (flen > 0 && c->have >= (size_t)flen) {
			got_frame(i, c->buf, (size_t)flen);
			if (c->role == C_FREE || c->gen != gen)
				return; /* closed, perhaps reused */
			memmove(c->buf, c->buf + flen, c->have - (size_t)flen);
			c->have -= (size_t)flen;
			continue;
		}
		if (flen < 0 && flen != -EAGAIN) {
			r2cc_ctrl_count(&cs.st.rx, flen);
			refuse(i, flen);
			return;
		}
		if (flen > 0 && (size_t)flen > c->cap) {
			/* a frame larger than the room: grown for it */
			uint8_t *b = realloc(c->buf, (size_t)flen);

			if (!b) {
				chan_conn_close(i);
				return;
			}
			c->buf = b;
			c->cap = (size_t)flen;
		}
		n = recv(c->fd, c->buf + c->have, c->cap - c->have,
			 MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			chan_conn_close_why(i, n ? strerror(errno) :
						   "the peer closed it");
			return;
		}
		c->have += (size_t)n;
	}
}

/* A non-blocking connect finished: send the first frame. */
void chan_conn_connected(int i)
{
	struct conn *c = cs.conns[i];
	bool hello = c->role == C_HELLO;
	socklen_t sl = sizeof(int);
	struct r2cc_ctrl_msg m;
	int err = 0, r = c->res;

	getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
	c->connecting = false;
	if (err) {
		r2cc_dbg("control connect: %s", strerror(err));
		c->res = -1;
		chan_conn_close(i);
		if (r >= 0 && hello)
			chan_res_next_addr(r);
		else if (r >= 0 && err == ECONNREFUSED)
			chan_res_miss(r, R2CC_RES_NO_R2CC,
				      "the rendezvous refused the call");
		else if (r >= 0)
			chan_res_miss(r, R2CC_RES_UNANSWERED,
				      "the rendezvous did not take the call");
		return;
	}
	if (c->role == C_HELLO) {
		send_hello(i, c->res >= 0 ? cs.res[c->res]->owner :
			      c->peer	  ? c->peer :
					    R2CC_CTRL_ANY);
		if (c->role == C_HELLO)
			c->deadline_ns =
				chan_now_ns() + MIG_CHAN_HELLO_MS * 1000000ULL;
		return;
	}
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_LOOKUP;
	m.hdr.receiver = R2CC_CTRL_ANY;
	m.hdr.seq = c->asked = ++cs.seq;
	m.lookup = cs.res[c->res]->q;
	if (chan_conn_write(i, &m))
		chan_conn_close(i);
}

void chan_accept_on(int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		sock_opts(fd);
		if (conn_new(fd, C_ACCEPTED, -1) < 0)
			close(fd);
	}
}

void chan_expire(uint64_t now)
{
	int i;

	for (i = 0; i < cs.nconn; i++) {
		struct conn *c = cs.conns[i];

		if (c->role == C_FREE || !c->deadline_ns ||
		    now < c->deadline_ns)
			continue;
		if (c->role == C_HELLO && c->res >= 0) {
			int r = c->res;

			c->res = -1;
			chan_conn_close(i);
			chan_res_next_addr(r);
			continue;
		}
		chan_conn_close_why(i, "its step or its reader's stall bound "
				       "passed");
	}
	for (i = 0; i < cs.nres; i++)
		if (cs.res[i]->used && !cs.res[i]->started)
			chan_res_start(i);
	chan_stall_check(now);
}
