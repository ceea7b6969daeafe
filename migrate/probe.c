/* SPDX-License-Identifier: MIT */
/*
 * probe.c - path probes (probe.h): a non-blocking TCP connect from our
 * rail address to the peer's r2cc port on its rail address, polled by the
 * control thread's tick. A table of the paths asked about, each with its
 * probe in flight (or not), when it last got through and when the next
 * one is due. A path is probed for one of two askers, each with its own
 * entry: failback.c (has it healed? a clean streak, backing off while
 * dark) and keepalive.c (is it still there? one every period, counting
 * the misses in a row).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "probe.h"

#define MAX_PATHS 256

struct path {
	bool used;
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
};

static struct path paths[MAX_PATHS];

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
	int i, err, busy = 0;

	for (i = 0; i < MAX_PATHS; i++) {
		struct path *p = &paths[i];
		struct pollfd pfd = { .fd = p->fd, .events = POLLOUT };
		socklen_t len = sizeof(err);

		if (!p->used || p->fd < 0)
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

/* The entry of (@sgid, @dgid, @port) for @keep's asker, made if new. */
static int lookup(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t port,
		  bool keep, bool make, struct path **out)
{
	struct path *p = NULL, *free_slot = NULL;
	uint32_t src, dst;
	int i;

	if (ipv4_of(sgid, &src) || ipv4_of(dgid, &dst))
		return -EAFNOSUPPORT;
	for (i = 0; i < MAX_PATHS && !p; i++) {
		if (!paths[i].used) {
			if (!free_slot)
				free_slot = &paths[i];
		} else if (paths[i].src == src && paths[i].dst == dst &&
			   paths[i].port == port && paths[i].keep == keep) {
			p = &paths[i];
		}
	}
	if (!p && make) {
		if (!free_slot)
			return -ENOSPC;
		p = free_slot;
		memset(p, 0, sizeof(*p));
		p->used = true;
		p->src = src;
		p->dst = dst;
		p->port = port;
		p->keep = keep;
		p->fd = -1;
	}
	*out = p;
	return p ? 0 : -ENOENT;
}

int r2cc_probe_path(const uint8_t sgid[16], const uint8_t dgid[16],
		    uint16_t port, uint64_t since_ns, uint64_t now_ns,
		    uint32_t gap_ms)
{
	struct path *p;
	int ret = lookup(sgid, dgid, port, false, true, &p);

	if (ret)
		return ret;
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

	if (lookup(sgid, dgid, port, true, false, &p))
		return;
	if (p->fd >= 0)
		close(p->fd);
	p->used = false;
}

void r2cc_probe_reset(void)
{
	int i;

	for (i = 0; i < MAX_PATHS; i++) {
		if (paths[i].used && paths[i].fd >= 0)
			close(paths[i].fd);
		paths[i].used = false;
	}
}
