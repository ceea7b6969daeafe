/* SPDX-License-Identifier: MIT */
/*
 * probe.c - path probes (probe.h): a non-blocking TCP connect from our
 * rail address to the peer's r2cc port on its rail address, polled by the
 * control thread's tick. A table of the paths asked about, each with its
 * probe in flight (or not), when it last got through and when the next
 * one is due. A path is probed for one of two askers, each with its own
 * entry: failback.c (has it healed? a clean streak, backing off while
 * dark) and keepalive.c (is it still there? one every period, counting
 * the misses in a row). The table grows as paths are asked about and is
 * found by a hash of (source, destination, port, asker); a failback
 * path nobody asked about for MIG_PROBE_IDLE_MS is forgotten.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "map.h"
#include "probe.h"

struct path {
	uint32_t src, dst; /* IPv4, network order */
	uint16_t port;
	int fd; /* in flight, or -1 */
	uint64_t start_ns; /* of the probe in flight */
	uint64_t ok_ns; /* the last one that got through, 0: none */
	uint64_t next_ns; /* no new probe before */
	uint32_t gap_ms; /* after the next failure */
	uint32_t gap0_ms; /* the first gap, again after a success */
	uint32_t streak; /* clean handshakes in a row */
	bool keep; /* a keepalive's (r2cc_probe_keep) */
	uint32_t every_ms; /* keepalive: the period */
	uint64_t oks; /* keepalive: handshakes through */
	uint32_t fail_row; /* keepalive: unanswered in a row since */
	uint64_t asked_ns; /* failback: when it was last asked about */
};

/* The paths (n of them, room for cap) and their index: path + 1, or 0
 * (empty), mask + 1 slots, at most half full */
static struct {
	struct path *v;
	unsigned int n, cap;
	uint32_t *idx;
	uint32_t mask;
} pt;

static uint32_t hash(uint32_t src, uint32_t dst, uint16_t port, bool keep)
{
	uint64_t h = ((uint64_t)src << 32 | dst) * 0x9e3779b97f4a7c15ULL;

	h ^= ((uint64_t)port << 1 | keep) * 0xc2b2ae3d27d4eb4fULL;
	return (uint32_t)(h >> 32);
}

static bool is(const struct path *p, uint32_t src, uint32_t dst, uint16_t port,
	       bool keep)
{
	return p->src == src && p->dst == dst && p->port == port &&
	       p->keep == keep;
}

/* The index slot of the key: its path's, or the empty one */
static uint32_t *slot(uint32_t src, uint32_t dst, uint16_t port, bool keep)
{
	uint32_t i = hash(src, dst, port, keep) & pt.mask;

	while (pt.idx[i] && !is(&pt.v[pt.idx[i] - 1], src, dst, port, keep))
		i = (i + 1) & pt.mask;
	return &pt.idx[i];
}

/* The index made again for the paths there are, with room for @want (at
 * most half full): 0, or -ENOMEM. One big enough is reused when a new
 * one cannot be had, so a path forgotten always finds room. */
static int reindex(unsigned int want)
{
	unsigned int i;
	int ret = r2cc_idx_empty(&pt.idx, &pt.mask, want);

	if (ret)
		return ret;
	for (i = 0; i < pt.n; i++) {
		const struct path *p = &pt.v[i];

		*slot(p->src, p->dst, p->port, p->keep) = i + 1;
	}
	return 0;
}

/* Path @i forgotten, its probe closed: the last one takes its place */
static void forget(unsigned int i)
{
	if (pt.v[i].fd >= 0)
		close(pt.v[i].fd);
	pt.v[i] = pt.v[--pt.n];
	reindex(pt.n);
}

/* ::ffff:a.b.c.d -> a.b.c.d (network order): 0, or -EAFNOSUPPORT */
static int ipv4_of(const uint8_t gid[16], uint32_t *out)
{
	static const uint8_t pre[12] = { 0, 0, 0, 0, 0,	   0,
					 0, 0, 0, 0, 0xff, 0xff };

	if (memcmp(gid, pre, sizeof(pre)))
		return -EAFNOSUPPORT;
	memcpy(out, gid + 12, 4);
	return 0;
}

static void done(struct path *p, bool ok, uint64_t now)
{
	close(p->fd);
	p->fd = -1;
	if (p->keep) {
		/* Any handshake will do (a retransmitted SYN too): the
		 * question is whether the path is there at all. */
		if (ok) {
			p->oks++;
			p->fail_row = 0;
		} else {
			p->fail_row++;
		}
		p->next_ns = now + (uint64_t)p->every_ms * 1000000ULL;
		return;
	}
	/* Clean: through without a retransmitted SYN */
	if (ok && now - p->start_ns < MIG_PROBE_CLEAN_MS * 1000000ULL) {
		p->gap_ms = p->gap0_ms;
		if (++p->streak >= MIG_PROBE_STREAK) {
			p->ok_ns = now;
			p->streak = 0;
		}
		p->next_ns = now + MIG_PROBE_EVERY_MS * 1000000ULL;
		return;
	}
	p->streak = 0;
	p->next_ns = now + (uint64_t)p->gap_ms * 1000000ULL;
	p->gap_ms = p->gap_ms * 2 > MIG_PROBE_MAX_GAP_MS ?
			    MIG_PROBE_MAX_GAP_MS :
			    p->gap_ms * 2;
}

static void start(struct path *p, uint64_t now)
{
	struct sockaddr_in src = { .sin_family = AF_INET,
				   .sin_addr.s_addr = p->src },
			   dst = { .sin_family = AF_INET,
				   .sin_port = htons(p->port),
				   .sin_addr.s_addr = p->dst };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	p->start_ns = now;
	p->fd = fd;
	if (fd < 0) {
		p->next_ns = now + (uint64_t)p->gap_ms * 1000000ULL;
		return;
	}
	/* From our address on the rail: the route out is that rail's. */
	if (bind(fd, (struct sockaddr *)&src, sizeof(src))) {
		done(p, false, now);
		return;
	}
	if (!connect(fd, (struct sockaddr *)&dst, sizeof(dst)))
		done(p, true, now);
	else if (errno == ECONNREFUSED)
		done(p, true, now); /* a reset came back over the path */
	else if (errno != EINPROGRESS)
		done(p, false, now);
}

int r2cc_probe_poll(uint64_t now)
{
	unsigned int i;
	int err, busy = 0;

	for (i = 0; i < pt.n; i++) {
		struct path *p = &pt.v[i];
		struct pollfd pfd = { .fd = p->fd, .events = POLLOUT };
		socklen_t len = sizeof(err);

		if (!p->keep && p->fd < 0 && p->asked_ns < now &&
		    now - p->asked_ns >= MIG_PROBE_IDLE_MS * 1000000ULL) {
			forget(i--); /* (the last one is at @i now) */
			continue;
		}
		if (p->fd < 0)
			continue;
		if (poll(&pfd, 1, 0) == 1) {
			err = 0;
			if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len))
				err = errno;
			done(p, !err || err == ECONNREFUSED, now);
		} else if (now - p->start_ns >=
			   MIG_PROBE_WAIT_MS * 1000000ULL) {
			done(p, false, now);
		} else {
			busy++;
		}
	}
	return busy;
}

/* The entry of (@sgid, @dgid, @port) for @keep's asker, made if new:
 * 0, -EAFNOSUPPORT, -ENOENT (none, not made) or -ENOSPC (no memory). */
static int lookup(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t port,
		  bool keep, bool make, struct path **out)
{
	struct path *p, *v;
	uint32_t src, dst, *sl;
	unsigned int cap;

	*out = NULL;
	if (ipv4_of(sgid, &src) || ipv4_of(dgid, &dst))
		return -EAFNOSUPPORT;
	if (pt.idx && *(sl = slot(src, dst, port, keep))) {
		*out = &pt.v[*sl - 1];
		return 0;
	}
	if (!make)
		return -ENOENT;
	if (pt.n == pt.cap) {
		cap = pt.cap ? 2 * pt.cap : 16;
		v = reallocarray(pt.v, cap, sizeof(*v));
		if (!v)
			return -ENOSPC;
		pt.v = v;
		pt.cap = cap;
	}
	if ((!pt.idx || 2 * (pt.n + 1) > pt.mask + 1) && reindex(pt.n + 1))
		return -ENOSPC;
	p = &pt.v[pt.n];
	memset(p, 0, sizeof(*p));
	p->src = src;
	p->dst = dst;
	p->port = port;
	p->keep = keep;
	p->fd = -1;
	*slot(src, dst, port, keep) = ++pt.n;
	*out = p;
	return 0;
}

int r2cc_probe_path(const uint8_t sgid[16], const uint8_t dgid[16],
		    uint16_t port, uint64_t since_ns, uint64_t now_ns,
		    uint32_t gap_ms)
{
	struct path *p;
	int ret = lookup(sgid, dgid, port, false, true, &p);

	if (ret)
		return ret;
	p->asked_ns = now_ns;
	if (!p->gap0_ms)
		p->gap_ms = p->gap0_ms = gap_ms ? gap_ms : 1000;
	if (p->ok_ns > since_ns)
		return 1;
	if (p->fd < 0 && now_ns >= p->next_ns) {
		start(p, now_ns);
		if (p->fd < 0 && p->ok_ns > since_ns)
			return 1;
	}
	return 0;
}

int r2cc_probe_keep(const uint8_t sgid[16], const uint8_t dgid[16],
		    uint16_t port, uint64_t now_ns, uint32_t every_ms,
		    struct r2cc_probe_count *c)
{
	struct path *p;
	int ret = lookup(sgid, dgid, port, true, true, &p);

	if (ret)
		return ret;
	p->every_ms = every_ms;
	p->gap_ms = every_ms; /* (a socket that cannot be made) */
	if (p->fd < 0 && now_ns >= p->next_ns)
		start(p, now_ns);
	c->ok = p->oks;
	c->fail_row = p->fail_row;
	return 0;
}

void r2cc_probe_keep_end(const uint8_t sgid[16], const uint8_t dgid[16],
			 uint16_t port)
{
	struct path *p;

	if (!lookup(sgid, dgid, port, true, false, &p))
		forget((unsigned int)(p - pt.v));
}

void r2cc_probe_reset(void)
{
	unsigned int i;

	for (i = 0; i < pt.n; i++)
		if (pt.v[i].fd >= 0)
			close(pt.v[i].fd);
	free(pt.v);
	free(pt.idx);
	memset(&pt, 0, sizeof(pt));
}
