/* SPDX-License-Identifier: MIT */
/*
 * chan.c - the control channel: addresses, listeners, and the one thread
 * that serves every connection (poll with a bounded timeout); the API,
 * and the gathering of messages into one frame per peer (a thread's
 * holds, the outbox through which other threads send). Connections and
 * frames: chan_conn.c; resolves: chan_res.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "chan_conn.h"
#include "chan_res.h"

struct chan_state cs = { .lock = PTHREAD_MUTEX_INITIALIZER,
			 .out_lock = PTHREAD_MUTEX_INITIALIZER,
			 .wake_fd = -1,
			 .rdv_fd = -1,
			 .direct_fd = -1 };

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
		chan_outbox_flush(0); /* what other threads sent */
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
				chan_accept_on(pfd[i].fd);
			} else if (cs.conns[map[i]]->role == C_FREE ||
				   cs.conns[map[i]]->gen != gen[i]) {
				continue; /* closed (and reused) meanwhile */
			} else if (cs.conns[map[i]]->connecting) {
				chan_conn_connected(map[i]);
			} else {
				chan_conn_readable(map[i]);
			}
		}
		chan_expire(chan_now_ns());
		if (cs.hooks.on_tick && cs.running &&
		    chan_now_ns() - last_tick >= TICK_MS * 1000000ULL) {
			last_tick = chan_now_ns();
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

/* @m to @peer on one of its open connections, now (the lock held). */
static int send_raw(uint64_t peer, struct r2cc_ctrl_msg *m)
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
		chan_conn_close(i);
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
		ret = r2cc_ctrl_batch_next(&b, &off, m) ? send_raw(h->peer, m) :
							  -EINVAL;
	} else if (m) {
		memset(m, 0, sizeof(*m));
		r2cc_ctrl_batch_msg(&h->b, m);
		ret = send_raw(h->peer, m);
		if (!ret) {
			cs.st.batches_out++;
			cs.st.batched_out += h->b.n;
		}
	}
	if (ret) {
		cs.st.batch_lost += h->b.n;
		r2cc_warn("peer %016llx: %u control messages not sent (%s)",
			  (unsigned long long)h->peer, h->b.n, strerror(-ret));
	}
	free(m);
	h->b.n = 0;
	h->b.len = 0;
}

/* What @g holds for @peer (or, @peer 0, for everyone) sent (the lock
 * held); a peer's batch kept for reuse unless @release. */
static void send_all(struct chan_gathering *g, uint64_t peer, bool release)
{
	unsigned int i;

	for (i = 0; i < g->n; i++) {
		if (peer && g->v[i].peer != peer)
			continue;
		if (g->v[i].b.n)
			send_gathered(&g->v[i]);
		if (release)
			r2cc_ctrl_batch_free(&g->v[i].b);
	}
	if (release && !peer)
		g->n = 0;
}

/* @m gathered in @g for @peer (the lock that guards @g held; @g's
 * batches that fill up are sent only when @send): 0, -ENOTCONN, -EINVAL
 * (a message a BATCH does not carry), -ENOSPC or -ENOMEM. */
static int gather(struct chan_gathering *g, uint64_t peer,
		  struct r2cc_ctrl_msg *m, bool send)
{
	/* (the peers' map and each peer are read without cs.lock: a peer
	 * once heard of stays, its connection index is atomic) */
	struct peer *p = cs.running ? chan_peer_find(peer) : NULL;
	struct chan_gathered *h = NULL, *v;
	unsigned int i;
	int ret;

	if (!p || p->conn < 0)
		return -ENOTCONN;
	for (i = 0; i < g->n && !h; i++)
		if (g->v[i].peer == peer)
			h = &g->v[i];
	if (!h) {
		if (g->n == g->cap) {
			v = reallocarray(g->v, g->cap ? 2 * g->cap : 8,
					 sizeof(*v));
			if (!v)
				return -ENOMEM;
			g->v = v;
			g->cap = g->cap ? 2 * g->cap : 8;
		}
		h = &g->v[g->n++];
		memset(h, 0, sizeof(*h));
		h->peer = peer;
	}
	ret = r2cc_ctrl_batch_add(&h->b, m);
	if (ret == -ENOSPC && send) { /* full: that one goes now */
		send_gathered(h);
		ret = r2cc_ctrl_batch_add(&h->b, m);
	}
	return ret;
}

/* This thread's gathering between r2cc_chan_hold() and its flush. */
static __thread struct {
	unsigned int depth;
	struct chan_gathering g;
} held;

void chan_outbox_flush(uint64_t peer)
{
	struct chan_gathering g = { 0 };
	struct chan_gathered one;
	unsigned int i;

	/* Taken out under out_lock, sent after: a thread handing a message
	 * over never waits on a write. */
	pthread_mutex_lock(&cs.out_lock);
	if (!peer) {
		g = cs.outbox;
		memset(&cs.outbox, 0, sizeof(cs.outbox));
	}
	for (i = 0; peer && i < cs.outbox.n; i++)
		if (cs.outbox.v[i].peer == peer && cs.outbox.v[i].b.n) {
			one = cs.outbox.v[i];
			memset(&cs.outbox.v[i].b, 0, sizeof(one.b));
			g.v = &one;
			g.n = 1;
		}
	pthread_mutex_unlock(&cs.out_lock);
	send_all(&g, 0, true);
	if (!peer)
		free(g.v);
}

/* @m to the channel thread's outbox (not the channel thread, no hold):
 * 0, or -ENOTCONN, -EINVAL, -ENOSPC, -ENOMEM (not handed over). */
static int to_outbox(uint64_t peer, struct r2cc_ctrl_msg *m)
{
	int ret;

	pthread_mutex_lock(&cs.out_lock);
	ret = gather(&cs.outbox, peer, m, false);
	pthread_mutex_unlock(&cs.out_lock);
	if (!ret)
		chan_wake();
	return ret;
}

int r2cc_chan_send(uint64_t peer, struct r2cc_ctrl_msg *m)
{
	int ret = -EINVAL;

	/* another thread (the program's) hands it over, takes no cs.lock;
	 * what cannot go there (or finds no connection at a glance: one
	 * may be opening) is sent below, as the channel thread would */
	if (!held.depth && cs.running &&
	    !pthread_equal(pthread_self(), cs.thread) && !to_outbox(peer, m))
		return 0;
	pthread_mutex_lock(&cs.lock);
	if (held.depth)
		ret = gather(&held.g, peer, m, true);
	if (ret == -EINVAL || ret == -ENOSPC || ret == -ENOMEM) {
		/* not gathered: what was, for that peer, goes first (an
		 * MR_INVALIDATE before the MR_KEYS of a key reused) */
		chan_outbox_flush(peer);
		send_all(&held.g, peer, false);
		ret = send_raw(peer, m);
	}
	pthread_mutex_unlock(&cs.lock);
	return ret;
}

void r2cc_chan_hold(void)
{
	held.depth++;
}

void r2cc_chan_flush(void)
{
	if (!held.depth || --held.depth)
		return;
	pthread_mutex_lock(&cs.lock);
	chan_outbox_flush(0); /* (older: first) */
	send_all(&held.g, 0, true);
	pthread_mutex_unlock(&cs.lock);
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
		chan_wake();
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
	pthread_mutex_init(&cs.out_lock, NULL);
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
	chan_wake();
	pthread_join(cs.thread, NULL);
	pthread_mutex_lock(&cs.lock);
	chan_outbox_flush(0); /* what came after the last round */
	pthread_mutex_lock(&cs.out_lock);
	free(cs.outbox.v);
	memset(&cs.outbox, 0, sizeof(cs.outbox));
	pthread_mutex_unlock(&cs.out_lock);
	for (i = 0; i < cs.nconn; i++) {
		cs.conns[i]->res = -1;
		chan_conn_close(i);
	}
	/* (apart: a close looks at the other connections) */
	for (i = 0; i < cs.nconn; i++) {
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
