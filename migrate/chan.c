/* SPDX-License-Identifier: MIT */
/*
 * chan.c - the control channel: listeners, connections, framing and the
 * resolve state machine, all served by one thread (poll with a bounded
 * timeout). Other threads only send, under the channel lock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sys/resource.h>

#include "chan.h"
#include "map.h"
#include "policy.h"

#define TICK_MS 200
#define MAX_WATCH 16
/* LOOKUPs a resolve may send, each on a fresh connection, while the
 * rendezvous accepts them and answers none (see conn_close()) */
#define LOOKUP_TRIES 3

enum conn_role {
	C_FREE,
	C_ACCEPTED, /* a peer called us: LOOKUP or HELLO first */
	C_LOOKUP, /* we ask a rendezvous */
	C_HELLO, /* we open a direct channel */
	C_OPEN, /* HELLO exchanged: frames go to the owner's hooks */
};

struct conn {
	enum conn_role role;
	int fd;
	uint32_t gen; /* new at each use of the slot: handlers that may
		       * close and reuse it compare */
	bool connecting; /* non-blocking connect in progress */
	uint64_t peer; /* once known */
	int res; /* the resolve this connection serves, or -1 */
	uint64_t deadline_ns; /* for connect and the reply; 0 when open */
	uint8_t *buf; /* cap bytes: CONN_BUF, up to R2CC_CTRL_FRAME_MAX */
	size_t have, cap;
};

struct peer {
	uint64_t id; /* 0: free */
	struct r2cc_ctrl_replay win; /* its seqs we accepted */
	struct peer *next; /* cs.peer_list */
	int conn; /* open connection, or -1 */
	uint32_t pid;
	int naddr;
	struct r2cc_ctrl_addr addr[R2CC_CTRL_MAX_ADDRS];
};

struct res {
	bool used, started;
	uint64_t since_ns; /* asked for (a start may wait for a connection) */
	int tries; /* rendezvous connections dialled */
	uint64_t cookie;
	struct r2cc_ctrl_qp_ref q;
	uint64_t owner;
	int naddr, next; /* the owner's addresses, the next to try */
	struct r2cc_ctrl_addr addr[R2CC_CTRL_MAX_ADDRS];
};

static struct {
	pthread_mutex_t lock; /* everything below */
	bool running;
	pid_t pid;
	pthread_t thread;
	int wake_fd, rdv_fd, direct_fd;
	uint16_t rdv_port, direct_port;
	struct r2cc_ctrl_key key;
	struct r2cc_chan_hooks hooks;
	char pref_if[IF_NAMESIZE];
	char rail_if[R2CC_CTRL_RAIL_MAX][IF_NAMESIZE];
	int nrail;
	/* Connections and resolves: slots made as needed, kept and reused;
	 * their indices stay valid. conn_max: the connections' budget. */
	struct conn **conns;
	int nconn, conn_max;
	struct res **res;
	int nres;
	/* Every peer process heard from (its replay window outlives its
	 * connections), by id */
	struct r2cc_map peers;
	struct peer *peer_list;
	unsigned int npeers;
	bool conns_said, peers_said, res_said;
	/* Our last seq, to every peer: each sees it increase (with gaps),
	 * which is all its replay window needs. */
	uint64_t seq;
	struct r2cc_chan_stats st;
	/* Other fds the thread serves (r2cc_chan_watch()) */
	struct watch {
		int fd;
		void (*ready)(int fd, void *arg);
		void *arg;
	} watch[MAX_WATCH];
	int nwatch;
} cs = { .lock = PTHREAD_MUTEX_INITIALIZER,
	 .wake_fd = -1,
	 .rdv_fd = -1,
	 .direct_fd = -1 };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void wake(void)
{
	uint64_t one = 1;
	ssize_t n = write(cs.wake_fd, &one, sizeof(one));

	(void)n; /* a full counter wakes the thread anyway */
}

/* ---- addresses ---- */

static int rail_of_if(const char *name)
{
	int i;

	for (i = 0; i < cs.nrail; i++)
		if (!strcmp(cs.rail_if[i], name))
			return i;
	return -1;
}

int r2cc_chan_addrs(struct r2cc_ctrl_addr *out, int max, uint16_t port)
{
	struct ifaddrs *ifa, *i;
	int pass, n = 0;

	if (getifaddrs(&ifa))
		return -errno;
	/* Pass 0: the preferred interface (or every non-rail one), then
	 * the rails: a peer tries them in this order. */
	for (pass = 0; pass < 2; pass++) {
		for (i = ifa; i && n < max; i = i->ifa_next) {
			const struct sockaddr_in *sin =
				(const void *)i->ifa_addr;
			int rail;

			if (!sin || sin->sin_family != AF_INET ||
			    (i->ifa_flags & IFF_LOOPBACK) ||
			    !(i->ifa_flags & IFF_UP))
				continue;
			rail = rail_of_if(i->ifa_name);
			if (pass == 0 &&
			    (rail >= 0 || (cs.pref_if[0] &&
					   strcmp(cs.pref_if, i->ifa_name))))
				continue;
			if (pass == 1 && rail < 0)
				continue;
			memset(&out[n], 0, sizeof(out[n]));
			out[n].family = 4;
			out[n].rail =
				rail < 0 ? R2CC_CTRL_RAIL_MGMT : (uint8_t)rail;
			out[n].port = port;
			memcpy(out[n].addr, &sin->sin_addr, 4);
			n++;
		}
	}
	freeifaddrs(ifa);
	return n;
}

/* ---- sockets ---- */

static int listen_on(uint16_t port, bool shared, uint16_t *bound)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t len = sizeof(sin);
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (shared)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(fd, 64) ||
	    getsockname(fd, (struct sockaddr *)&sin, &len)) {
		int e = -errno;

		close(fd);
		return e;
	}
	*bound = ntohs(sin.sin_port);
	return fd;
}

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
		c->fd = fd;
		c->gen++;
		c->connecting = false;
		c->peer = 0;
		c->res = res;
		c->have = 0;
		c->deadline_ns = now_ns() + MIG_CHAN_STEP_MS * 1000000ULL;
		return i;
	}
	cs.st.conn_budget++;
	r2cc_status_refused(R2CC_REFUSE_CTRL_CONN);
	if (!cs.conns_said)
		r2cc_warn("control channel: %d connections open, its budget "
			  "(a quarter of RLIMIT_NOFILE): further resolves "
			  "wait, new peers' calls are refused",
			  cs.conn_max);
	cs.conns_said = true;
	return -EMFILE;
}

static struct peer *peer_find(uint64_t id)
{
	if (id < R2CC_MAP_KEY_MIN)
		return NULL;
	return r2cc_map_lookup(&cs.peers, (uintptr_t)id);
}

/* @id's, remembered from now on; NULL: past MIG_CHAN_PEERS_MAX, or no
 * memory (said once, counted). */
static struct peer *peer_get(uint64_t id)
{
	struct peer *p = peer_find(id);

	if (p || id < R2CC_MAP_KEY_MIN)
		return p;
	if (cs.npeers < MIG_CHAN_PEERS_MAX && (p = calloc(1, sizeof(*p)))) {
		p->id = id;
		p->conn = -1;
		if (!r2cc_map_insert(&cs.peers, (uintptr_t)id, p)) {
			p->next = cs.peer_list;
			cs.peer_list = p;
			cs.npeers++;
			return p;
		}
		free(p);
	}
	cs.st.peer_budget++;
	r2cc_status_refused(R2CC_REFUSE_CTRL_PEER);
	if (!cs.peers_said)
		r2cc_warn("control channel: %u peer processes remembered "
			  "(budget %u): frames of others are dropped",
			  cs.npeers, MIG_CHAN_PEERS_MAX);
	cs.peers_said = true;
	return NULL;
}

static void res_end(int r, uint64_t peer);

/* Another open connection to @peer than @i, or -1. Two processes that
 * resolve each other at once each dial the other: both channels open, and
 * the peer stays reachable while either does. */
static int other_open(uint64_t peer, int i)
{
	int j;

	for (j = 0; j < cs.nconn; j++)
		if (j != i && cs.conns[j]->role == C_OPEN &&
		    cs.conns[j]->peer == peer)
			return j;
	return -1;
}

static void conn_close(int i)
{
	struct conn *c = cs.conns[i];
	struct peer *p;

	if (c->role == C_FREE)
		return;
	r2cc_dbg("control connection %d (role %d) closed", i, c->role);
	close(c->fd);
	p = c->role == C_OPEN ? peer_find(c->peer) : NULL;
	if (p && p->conn == i)
		p->conn = other_open(p->id, i);
	if (c->res >= 0 && c->role == C_LOOKUP && !c->connecting &&
	    cs.res[c->res]->tries < LOOKUP_TRIES) {
		/* Connected and asked, and no answer: the listener that took
		 * it belongs to a process that serves no more (one stuck
		 * exiting keeps its place in the port's SO_REUSEPORT group).
		 * A fresh connection is likely another listener's: ask again
		 * (expire() dials it). */
		cs.res[c->res]->started = false;
	} else if (c->res >= 0 && c->role != C_OPEN) {
		res_end(c->res, 0);
	}
	c->role = C_FREE;
	c->fd = -1;
	if (c->cap > CONN_BUF) { /* a large frame's room: not kept */
		free(c->buf);
		c->buf = NULL;
		c->cap = 0;
	}
}

/* Connect (non-blocking) to @a; the conn waits for POLLOUT. */
static int conn_dial(const struct r2cc_ctrl_addr *a, enum conn_role role,
		     int res)
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

/* Room in @fd's send buffer by @end_ns (now_ns()), or false. */
static bool wait_writable(int fd, uint64_t end_ns)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	uint64_t now = now_ns();

	if (now >= end_ns)
		return false;
	return poll(&p, 1, (int)((end_ns - now + 999999) / 1000000)) > 0;
}

/* Encode and write one frame; the lock is held. The sockets do not block:
 * a full send buffer (a burst of failovers, a peer slow to read) is
 * waited out, for MIG_CHAN_STEP_MS at most, not taken for a dead peer. */
static int conn_write(int i, struct r2cc_ctrl_msg *m)
{
	static uint8_t frame[R2CC_CTRL_FRAME_MAX]; /* under cs.lock */
	struct conn *c = cs.conns[i];
	uint64_t end = 0; /* set at the first full buffer */
	size_t off = 0;
	int len;

	m->hdr.sender = cs.key.self;
	len = r2cc_ctrl_encode(&cs.key, m, frame, sizeof(frame));
	if (len < 0)
		return len;
	while (off < (size_t)len) {
		ssize_t n = send(c->fd, frame + off, (size_t)len - off,
				 MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (!end)
				end = now_ns() + MIG_CHAN_STEP_MS * 1000000ULL;
			if (wait_writable(c->fd, end))
				continue;
		}
		if (n <= 0) {
			cs.st.send_fail++;
			return -EIO;
		}
		off += (size_t)n;
	}
	cs.st.sent++;
	return 0;
}

/* ---- resolve ---- */

static void res_end(int r, uint64_t peer)
{
	struct res *x = cs.res[r];
	uint64_t cookie = x->cookie;
	int i;

	if (!x->used)
		return;
	r2cc_dbg("resolve of QP %#x: %s %016llx", x->q.qpn,
		 peer ? "owner" : "no owner", (unsigned long long)peer);
	x->used = false;
	for (i = 0; i < cs.nconn; i++)
		if (cs.conns[i]->res == r)
			cs.conns[i]->res = -1;
	if (!peer)
		cs.st.conn_fail++;
	else
		cs.st.conn_ok++;
	pthread_mutex_unlock(&cs.lock);
	cs.hooks.on_resolved(cookie, peer);
	pthread_mutex_lock(&cs.lock);
}

/* Dial the owner's next address, or give up. */
static void res_next_addr(int r)
{
	struct res *x = cs.res[r];

	while (x->next < x->naddr) {
		if (conn_dial(&x->addr[x->next++], C_HELLO, r) >= 0)
			return;
	}
	res_end(r, 0);
}

static void res_start(int r)
{
	struct res *x = cs.res[r];
	struct r2cc_ctrl_addr a = { .family = 4, .port = cs.rdv_port };
	static const uint8_t v4map[12] = { [10] = 0xff, [11] = 0xff };
	int ret;

	x->started = true;
	x->tries++;
	if (memcmp(x->q.gid, v4map, sizeof(v4map))) {
		r2cc_info("QP %#x: peer GID is not IPv4-mapped RoCE: "
			  "no control channel",
			  x->q.qpn);
		res_end(r, 0);
		return;
	}
	memcpy(a.addr, x->q.gid + 12, 4);
	ret = conn_dial(&a, C_LOOKUP, r);
	if ((ret == -EMFILE || ret == -ENFILE) &&
	    now_ns() - x->since_ns < MIG_CHAN_RES_WAIT_MS * 1000000ULL) {
		x->started = false; /* no connection to spare: later */
		x->tries--;
	} else if (ret < 0) {
		res_end(r, 0);
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
	cs.st.res_budget++;
	r2cc_status_refused(R2CC_REFUSE_RESOLVE);
	if (!cs.res_said)
		r2cc_warn("control channel: %d resolves under way (budget "
			  "%d): a QP past them runs unprotected",
			  cs.nres, MIG_CHAN_RES_MAX);
	cs.res_said = true;
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
		cs.res[r]->since_ns = now_ns();
		cs.res[r]->cookie = cookie;
		cs.res[r]->q = *q;
		ret = 0;
	}
out:
	pthread_mutex_unlock(&cs.lock);
	if (!ret)
		wake();
	return ret;
}

/* ---- frames ---- */

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
	n = r2cc_chan_addrs(m.hello.addr, R2CC_CTRL_MAX_ADDRS, cs.direct_port);
	m.hello.naddr = n > 0 ? (uint8_t)n : 0;
	if (conn_write(i, &m))
		conn_close(i);
}

/* A peer's HELLO: remember its addresses; the connection is open. */
static void got_hello(int i, const struct r2cc_ctrl_msg *m)
{
	struct conn *c = cs.conns[i];
	struct peer *p = peer_get(m->hdr.sender);

	if (!p) {
		conn_close(i);
		return;
	}
	p->pid = m->hello.pid;
	p->naddr = m->hello.naddr;
	memcpy(p->addr, m->hello.addr, sizeof(p->addr));
	if (c->role == C_ACCEPTED)
		send_hello(i, m->hdr.sender);
	if (c->role == C_FREE)
		return;
	if (p->conn >= 0 && p->conn != i)
		r2cc_dbg("peer %016llx: a second channel",
			 (unsigned long long)p->id);
	p->conn = i;
	c->peer = p->id;
	c->deadline_ns = 0;
	if (c->role == C_HELLO && c->res >= 0) {
		int r = c->res;

		c->role = C_OPEN;
		res_end(r, p->id);
		return;
	}
	c->role = C_OPEN;
}

static void serve_lookup(int i, const struct r2cc_ctrl_msg *m)
{
	struct r2cc_ctrl_msg rep;

	memset(&rep, 0, sizeof(rep));
	rep.hdr.type = R2CC_CTRL_LOOKUP_REPLY;
	rep.hdr.receiver = m->hdr.sender;
	rep.lookup_reply.what = m->lookup;
	pthread_mutex_unlock(&cs.lock);
	cs.hooks.lookup(&m->lookup, &rep.lookup_reply);
	pthread_mutex_lock(&cs.lock);
	rep.hdr.seq = ++cs.seq;
	cs.st.lookups_served++;
	if (!rep.lookup_reply.found)
		rep.lookup_reply.naddr = 0;
	if (cs.conns[i]->role != C_FREE && conn_write(i, &rep))
		conn_close(i);
}

static void got_reply(int i, const struct r2cc_ctrl_msg *m)
{
	const struct r2cc_ctrl_lookup_reply *lr = &m->lookup_reply;
	struct conn *c = cs.conns[i];
	struct res *x = c->res >= 0 ? cs.res[c->res] : NULL;
	struct peer *p;
	int r = c->res;

	if (!x || lr->what.qpn != x->q.qpn ||
	    memcmp(lr->what.gid, x->q.gid, 16)) {
		conn_close(i);
		return;
	}
	c->res = -1;
	conn_close(i); /* the rendezvous is done with */
	if (!lr->found || !lr->owner) {
		res_end(r, 0);
		return;
	}
	x->owner = lr->owner;
	p = peer_find(lr->owner);
	if (p && p->conn >= 0) {
		res_end(r, p->id);
		return;
	}
	x->naddr = lr->naddr;
	memcpy(x->addr, lr->addr, sizeof(x->addr));
	x->next = 0;
	res_next_addr(r);
}

/* One whole frame from connection @i. */
static void got_frame(int i, const uint8_t *buf, size_t len)
{
	struct conn *c = cs.conns[i];
	struct r2cc_ctrl_msg *m = malloc(sizeof(*m));
	struct peer *p;
	int rc;

	if (!m) {
		conn_close(i);
		return;
	}
	rc = r2cc_ctrl_decode(&cs.key, buf, len, m);
	if (!rc) {
		p = peer_get(m->hdr.sender);
		rc = p ? r2cc_ctrl_replay_accept(&p->win, m->hdr.seq) : -ENOMEM;
	}
	r2cc_ctrl_count(&cs.st.rx, rc);
	if (rc) {
		r2cc_warn("control frame dropped: %s", strerror(-rc));
		conn_close(i); /* a stream out of step cannot recover */
		goto out;
	}
	switch (m->hdr.type) {
	case R2CC_CTRL_HELLO:
		if (c->role == C_ACCEPTED || c->role == C_HELLO)
			got_hello(i, m);
		break;
	case R2CC_CTRL_LOOKUP:
		if (c->role == C_ACCEPTED)
			serve_lookup(i, m);
		break;
	case R2CC_CTRL_LOOKUP_REPLY:
		if (c->role == C_LOOKUP)
			got_reply(i, m);
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

static void conn_readable(int i)
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
			conn_close(i);
			return;
		}
		if (flen > 0 && (size_t)flen > c->cap) {
			/* a frame larger than the room: grown for it */
			uint8_t *b = realloc(c->buf, (size_t)flen);

			if (!b) {
				conn_close(i);
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
			conn_close(i);
			return;
		}
		c->have += (size_t)n;
	}
}

/* A non-blocking connect finished: send the first frame. */
static void conn_connected(int i)
{
	struct conn *c = cs.conns[i];
	struct r2cc_ctrl_msg m;
	socklen_t sl = sizeof(int);
	int err = 0;

	getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
	c->connecting = false;
	if (err) {
		r2cc_dbg("control connect: %s", strerror(err));
		int r = c->res;
		bool hello = c->role == C_HELLO;

		c->res = -1;
		conn_close(i);
		if (r >= 0 && hello)
			res_next_addr(r);
		else if (r >= 0)
			res_end(r, 0);
		return;
	}
	if (c->role == C_HELLO) {
		send_hello(i,
			   c->res >= 0 ? cs.res[c->res]->owner : R2CC_CTRL_ANY);
		return;
	}
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_LOOKUP;
	m.hdr.receiver = R2CC_CTRL_ANY;
	m.hdr.seq = ++cs.seq;
	m.lookup = cs.res[c->res]->q;
	if (conn_write(i, &m))
		conn_close(i);
}

static void accept_on(int lfd)
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

static void expire(uint64_t now)
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
			conn_close(i);
			res_next_addr(r);
			continue;
		}
		conn_close(i);
	}
	for (i = 0; i < cs.nres; i++)
		if (cs.res[i]->used && !cs.res[i]->started)
			res_start(i);
}

/* The poll set's arrays, for @n entries: true, or false (no memory: the
 * old ones, and the connections past them wait for a later round). */
static bool poll_room(struct pollfd **pfd, int **map, uint32_t **gen, int *cap,
		      int n)
{
	struct pollfd *p;
	uint32_t *g;
	int *m;

	if (n <= *cap)
		return true;
	p = reallocarray(*pfd, (size_t)n, sizeof(*p));
	if (p)
		*pfd = p;
	m = p ? reallocarray(*map, (size_t)n, sizeof(*m)) : NULL;
	if (m)
		*map = m;
	g = m ? reallocarray(*gen, (size_t)n, sizeof(*g)) : NULL;
	if (g)
		*gen = g;
	if (g)
		*cap = n;
	return g;
}

static void *chan_thread(void *arg)
{
	struct pollfd *pfd = NULL;
	int *map = NULL, cap = 0;
	uint32_t *gen = NULL;
	uint64_t last_tick = 0;
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&cs.lock);
	while (cs.running) {
		int n = 0, i, k;

		if (!poll_room(&pfd, &map, &gen, &cap,
			       cs.nconn + 3 + MAX_WATCH) &&
		    cap < 3 + MAX_WATCH) {
			pthread_mutex_unlock(&cs.lock);
			poll(NULL, 0, TICK_MS); /* no memory: a tick later */
			pthread_mutex_lock(&cs.lock);
			continue;
		}
		pfd[n].fd = cs.wake_fd;
		pfd[n].events = POLLIN;
		map[n++] = -1;
		pfd[n].fd = cs.rdv_fd;
		pfd[n].events = POLLIN;
		map[n++] = -2;
		pfd[n].fd = cs.direct_fd;
		pfd[n].events = POLLIN;
		map[n++] = -3;
		for (i = 0; i < cs.nwatch; i++) {
			pfd[n].fd = cs.watch[i].fd;
			pfd[n].events = POLLIN;
			map[n++] = -4 - i;
		}
		for (i = 0; i < cs.nconn && n < cap; i++) {
			if (cs.conns[i]->role == C_FREE)
				continue;
			pfd[n].fd = cs.conns[i]->fd;
			pfd[n].events =
				cs.conns[i]->connecting ? POLLOUT : POLLIN;
			gen[n] = cs.conns[i]->gen;
			map[n++] = i;
		}
		pthread_mutex_unlock(&cs.lock);
		k = poll(pfd, (nfds_t)n, TICK_MS);
		pthread_mutex_lock(&cs.lock);
		for (i = 0; k > 0 && i < n && cs.running; i++) {
			if (!pfd[i].revents)
				continue;
			if (map[i] == -1) {
				uint64_t v;
				ssize_t r = read(cs.wake_fd, &v, sizeof(v));

				(void)r;
			} else if (map[i] <= -4) {
				struct watch w = cs.watch[-4 - map[i]];

				pthread_mutex_unlock(&cs.lock);
				w.ready(w.fd, w.arg);
				pthread_mutex_lock(&cs.lock);
			} else if (map[i] < -1) {
				accept_on(pfd[i].fd);
			} else if (cs.conns[map[i]]->role == C_FREE ||
				   cs.conns[map[i]]->gen != gen[i]) {
				continue; /* closed (and reused) meanwhile */
			} else if (cs.conns[map[i]]->connecting) {
				conn_connected(map[i]);
			} else {
				conn_readable(map[i]);
			}
		}
		expire(now_ns());
		if (cs.hooks.on_tick && cs.running &&
		    now_ns() - last_tick >= TICK_MS * 1000000ULL) {
			last_tick = now_ns();
			pthread_mutex_unlock(&cs.lock);
			cs.hooks.on_tick();
			pthread_mutex_lock(&cs.lock);
		}
	}
	pthread_mutex_unlock(&cs.lock);
	free(pfd);
	free(map);
	free(gen);
	return NULL;
}

/* ---- API ---- */

int r2cc_chan_send(uint64_t peer, struct r2cc_ctrl_msg *m)
{
	struct peer *p;
	int ret = -ENOTCONN;

	pthread_mutex_lock(&cs.lock);
	p = cs.running ? peer_find(peer) : NULL;
	/* A connection that fails the write is closed; the frame goes out
	 * on another one open to the peer, if any. */
	while (p && p->conn >= 0) {
		int i = p->conn;

		m->hdr.receiver = peer;
		m->hdr.seq = ++cs.seq;
		ret = conn_write(i, m);
		if (ret != -EIO)
			break;
		conn_close(i);
		ret = -ENOTCONN;
	}
	pthread_mutex_unlock(&cs.lock);
	return ret;
}

int r2cc_chan_watch(int fd, void (*ready)(int fd, void *arg), void *arg)
{
	int ret = -ENOSPC;

	pthread_mutex_lock(&cs.lock);
	if (!cs.running) {
		ret = -ENOTCONN;
	} else if (cs.nwatch < MAX_WATCH) {
		cs.watch[cs.nwatch].fd = fd;
		cs.watch[cs.nwatch].ready = ready;
		cs.watch[cs.nwatch++].arg = arg;
		ret = 0;
	}
	pthread_mutex_unlock(&cs.lock);
	if (!ret)
		wake();
	return ret;
}

/* The connections r2cc may hold: a quarter of the descriptors the
 * process may open (its own work needs the rest), at least 16. */
static int conn_budget(void)
{
	struct rlimit rl;
	rlim_t n = 1024;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY)
		n = rl.rlim_cur;
	else if (!getrlimit(RLIMIT_NOFILE, &rl))
		n = 1 << 20;
	n /= 4;
	if (n > MIG_CHAN_CONNS_MAX)
		n = MIG_CHAN_CONNS_MAX;
	return n < 16 ? 16 : (int)n;
}

static void after_fork_child(void)
{
	/* The thread is not in the child: the child runs unprotected, and
	 * the lock may have been held by a parent thread at fork. */
	pthread_mutex_init(&cs.lock, NULL);
	cs.running = false;
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, after_fork_child);
}

int r2cc_chan_start(const struct r2cc_chan_cfg *cfg,
		    const struct r2cc_ctrl_key *key,
		    const struct r2cc_chan_hooks *hooks)
{
	static pthread_once_t atfork = PTHREAD_ONCE_INIT;
	int i, ret;

	pthread_mutex_lock(&cs.lock);
	if (cs.running) {
		pthread_mutex_unlock(&cs.lock);
		return -EALREADY;
	}
	cs.key = *key;
	cs.key.self = r2cc_ctrl_new_id();
	cs.hooks = *hooks;
	snprintf(cs.pref_if, sizeof(cs.pref_if), "%s",
		 cfg->pref_if ? cfg->pref_if : "");
	cs.nrail = cfg->nrail < R2CC_CTRL_RAIL_MAX ? cfg->nrail :
						     R2CC_CTRL_RAIL_MAX;
	for (i = 0; i < cs.nrail; i++)
		snprintf(cs.rail_if[i], sizeof(cs.rail_if[i]), "%s",
			 cfg->rail_if[i] ? cfg->rail_if[i] : "");
	cs.conn_max = conn_budget();
	ret = -ENOMEM;
	if (!atomic_load_explicit(&cs.peers.table, memory_order_relaxed) &&
	    r2cc_map_init(&cs.peers))
		goto fail;
	ret = -EIO;
	if (!cs.key.self)
		goto fail;
	cs.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (cs.wake_fd < 0) {
		ret = -errno;
		goto fail;
	}
	cs.rdv_fd = listen_on(cfg->port, true, &cs.rdv_port);
	if (cs.rdv_fd < 0) {
		ret = cs.rdv_fd;
		r2cc_warn("control port %u: %s (another user holds it?)",
			  cfg->port, strerror(-ret));
		goto fail;
	}
	cs.direct_fd = listen_on(0, false, &cs.direct_port);
	if (cs.direct_fd < 0) {
		ret = cs.direct_fd;
		goto fail;
	}
	cs.pid = getpid();
	cs.running = true;
	ret = -pthread_create(&cs.thread, NULL, chan_thread, NULL);
	if (ret) {
		cs.running = false;
		goto fail;
	}
	pthread_once(&atfork, register_atfork);
	pthread_mutex_unlock(&cs.lock);
	return 0;
fail:
	if (cs.rdv_fd >= 0)
		close(cs.rdv_fd);
	if (cs.direct_fd >= 0)
		close(cs.direct_fd);
	if (cs.wake_fd >= 0)
		close(cs.wake_fd);
	cs.rdv_fd = cs.direct_fd = cs.wake_fd = -1;
	r2cc_ctrl_key_wipe(&cs.key);
	pthread_mutex_unlock(&cs.lock);
	return ret;
}

void r2cc_chan_stop(void)
{
	int i;

	pthread_mutex_lock(&cs.lock);
	if (!cs.running || cs.pid != getpid()) {
		pthread_mutex_unlock(&cs.lock);
		return;
	}
	cs.running = false;
	pthread_mutex_unlock(&cs.lock);
	wake();
	pthread_join(cs.thread, NULL);
	pthread_mutex_lock(&cs.lock);
	for (i = 0; i < cs.nconn; i++) {
		cs.conns[i]->res = -1;
		conn_close(i);
		free(cs.conns[i]->buf);
		free(cs.conns[i]);
	}
	free(cs.conns);
	cs.conns = NULL;
	cs.nconn = 0;
	for (i = 0; i < cs.nres; i++)
		free(cs.res[i]);
	free(cs.res);
	cs.res = NULL;
	cs.nres = 0;
	cs.nwatch = 0; /* the fds stay their owners' */
	close(cs.rdv_fd);
	close(cs.direct_fd);
	close(cs.wake_fd);
	cs.rdv_fd = cs.direct_fd = cs.wake_fd = -1;
	r2cc_ctrl_key_wipe(&cs.key);
	pthread_mutex_unlock(&cs.lock);
}

bool r2cc_chan_running(void)
{
	return cs.running && cs.pid == getpid();
}

uint64_t r2cc_chan_self(void)
{
	return r2cc_chan_running() ? cs.key.self : 0;
}

uint16_t r2cc_chan_port(void)
{
	return cs.direct_port;
}

void r2cc_chan_get_stats(struct r2cc_chan_stats *st)
{
	pthread_mutex_lock(&cs.lock);
	*st = cs.st;
	pthread_mutex_unlock(&cs.lock);
}
