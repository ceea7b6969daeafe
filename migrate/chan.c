/* SPDX-License-Identifier: MIT */
/*
 * chan.c - the control channel: addresses, listeners, and the one thread
 * that serves every connection (poll with a bounded timeout), and the
 * API. Connections and frames: chan_conn.c; resolves: chan_res.c; sends,
 * gathered into one frame per peer: chan_send.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "chan_conn.h"
#include "chan_hosts.h"
#include "chan_res.h"
#include "chan_send.h"

struct chan_state cs = { .lock = PTHREAD_MUTEX_INITIALIZER,
			 .out_lock = PTHREAD_MUTEX_INITIALIZER,
			 .wake_lock = PTHREAD_MUTEX_INITIALIZER,
			 .wake_fd = -1,
			 .rdv_fd = -1,
			 .direct_fd = -1 };

static void tell_lost(void);

/* The wake-up eventfd made (0 or -errno), or closed: under wake_lock, a
 * thread still sending after the stop writes to no other descriptor. */
static int wake_open(bool open)
{
	int ret = 0;

	pthread_mutex_lock(&cs.wake_lock);
	if (cs.wake_fd >= 0)
		close(cs.wake_fd);
	cs.wake_fd = open ? eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) : -1;
	if (open && cs.wake_fd < 0)
		ret = -errno;
	pthread_mutex_unlock(&cs.wake_lock);
	return ret;
}

static int rail_of_if(const char *name)
{
	int i;

	for (i = 0; i < cs.nrail; i++)
		if (!strcmp(cs.rail_if[i], name))
			return i;
	return -1;
}

int chan_rail_addrs(uint32_t rails, struct in_addr *out, int max)
{
	struct ifaddrs *ifa, *i;
	int n = 0, rail;

	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i && n < max; i = i->ifa_next) {
		const struct sockaddr_in *sin = (const void *)i->ifa_addr;

		rail = sin && sin->sin_family == AF_INET ?
			       rail_of_if(i->ifa_name) :
			       -1;
		if (rail >= 0 && rail < R2CC_CTRL_RAIL_MAX &&
		    (rails & (1U << rail)))
			out[n++] = sin->sin_addr;
	}
	freeifaddrs(ifa);
	return n;
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
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(fd, SOMAXCONN) ||
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

/* The owner works through a backlog of peers' messages: each peer with
 * an open channel hears a KEEPALIVE every MIG_CHAN_BUSY_MS meanwhile
 * (the lock held), so that its waits for our answers tell a process at
 * work from a silent one. */
static void say_busy(uint64_t now)
{
	const uint64_t busy = MIG_CHAN_BUSY_MS * 1000000ULL;
	uint64_t since = cs.hooks.busy_since ? cs.hooks.busy_since() : 0;
	struct r2cc_ctrl_msg m;
	struct peer *p;

	if (!since || since > now || now - since < busy ||
	    now - cs.busy_said_ns < busy)
		return;
	cs.busy_said_ns = now;
	for (p = cs.peer_list; p; p = p->next) {
		if (!p->id || p->conn < 0)
			continue;
		memset(&m, 0, sizeof(m));
		m.hdr.type = R2CC_CTRL_KEEPALIVE;
		m.keepalive_ns = now;
		if (chan_send_raw(p->id, &m))
			r2cc_dbg("peer %016llx: no KEEPALIVE sent",
				 (unsigned long long)p->id);
	}
}

static void *chan_thread(void *arg)
{
	struct pollfd *pfd = NULL;
	int *map = NULL, cap = 0;
	uint32_t *gen = NULL;
	uint64_t last_tick = 0;
	sigset_t all;

	(void)arg;
	/* as top -H and /proc/PID/task show it */
	pthread_setname_np(pthread_self(), "r2cc-chan");
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
			if (cs.conns[i]->out_len > cs.conns[i]->out_off)
				pfd[n].events |= POLLOUT;
			gen[n] = cs.conns[i]->gen;
			map[n++] = i;
		}
		pthread_mutex_unlock(&cs.lock);
		k = poll(pfd, (nfds_t)n, TICK_MS);
		pthread_mutex_lock(&cs.lock);
		chan_outbox_flush(0); /* what other threads sent */
		tell_lost();
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
				if (pfd[i].revents & POLLOUT)
					chan_conn_writable(map[i]);
				if (cs.conns[map[i]]->role != C_FREE &&
				    cs.conns[map[i]]->gen == gen[i] &&
				    pfd[i].revents & ~POLLOUT)
					chan_conn_readable(map[i]);
			}
		}
		chan_expire(chan_now_ns());
		say_busy(chan_now_ns());
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

void chan_refused(enum r2cc_refusal why, uint64_t *count, bool *said,
		  const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	(*count)++;
	r2cc_status_refused(why);
	if (*said)
		return;
	*said = true;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r2cc_warn("control channel: %s", msg);
}

void chan_lost(uint64_t peer)
{
	uint64_t *v;
	unsigned int i;

	for (i = 0; i < cs.nlost; i++)
		if (cs.lost[i] == peer)
			return;
	if (cs.nlost == cs.lost_cap) {
		v = reallocarray(cs.lost, cs.lost_cap ? 2 * cs.lost_cap : 8,
				 sizeof(*v));
		if (!v)
			return; /* (its next loss tells) */
		cs.lost = v;
		cs.lost_cap = cs.lost_cap ? 2 * cs.lost_cap : 8;
	}
	cs.lost[cs.nlost++] = peer;
	chan_wake();
}

/* The owner told of the peers chan_lost() noted (the lock held, dropped
 * for the hook). */
static void tell_lost(void)
{
	uint64_t peer;

	while (cs.nlost) {
		peer = cs.lost[--cs.nlost];
		if (!cs.hooks.on_lost)
			continue;
		pthread_mutex_unlock(&cs.lock);
		cs.hooks.on_lost(peer);
		pthread_mutex_lock(&cs.lock);
	}
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
int chan_conn_budget(void)
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
	pthread_mutex_init(&cs.wake_lock, NULL);
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
	cs.peer_by_gid = cfg->peer_by_gid;
	chan_hosts_set(cfg->peers, cfg->node_map);
	cs.nrail = cfg->nrail < R2CC_CTRL_RAIL_MAX ? cfg->nrail :
						     R2CC_CTRL_RAIL_MAX;
	for (i = 0; i < cs.nrail; i++)
		snprintf(cs.rail_if[i], sizeof(cs.rail_if[i]), "%s",
			 cfg->rail_if[i] ? cfg->rail_if[i] : "");
	cs.conn_max = chan_conn_budget();
	cs.lookups.n = MIG_CHAN_LOOKUPS_START;
	ret = -ENOMEM;
	if (!atomic_load_explicit(&cs.peers.table, memory_order_relaxed) &&
	    r2cc_map_init(&cs.peers))
		goto fail;
	ret = -EIO;
	if (!cs.key.self)
		goto fail;
	ret = wake_open(true);
	if (ret)
		goto fail;
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
	wake_open(false);
	cs.rdv_fd = cs.direct_fd = -1;
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
	/* what came after the last round goes nowhere (counted) */
	pthread_mutex_lock(&cs.out_lock);
	for (i = 0; i < (int)cs.outbox.n; i++) {
		cs.st.batch_lost += cs.outbox.v[i].b.n;
		r2cc_ctrl_batch_free(&cs.outbox.v[i].b);
	}
	free(cs.outbox.v);
	cs.nlost = 0;
	memset(&cs.outbox, 0, sizeof(cs.outbox));
	cs.out_bytes = 0;
	pthread_mutex_unlock(&cs.out_lock);
	chan_peers_say("at the end");
	for (i = 0; i < cs.nconn; i++) {
		cs.conns[i]->res = -1;
		chan_conn_close(i);
	}
	/* (apart: a close looks at the other connections) */
	for (i = 0; i < cs.nconn; i++) {
		free(cs.conns[i]->buf);
		free(cs.conns[i]->out);
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
	wake_open(false);
	cs.rdv_fd = cs.direct_fd = -1;
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
