/* SPDX-License-Identifier: MIT */
/*
 * probe.c - path probes (probe.h): a non-blocking TCP connect from our
 * rail address to the peer's r2cc port on its rail address, polled by the
 * control thread's tick. A table of the paths asked about, each with its
 * probe in flight (or not), when it last got through and when the next
 * one is due.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "probe.h"

#define MAX_PATHS 64

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
	/* Clean: through without a retransmitted SYN */
	if (ok && now - p->start_ns < R2CC_PROBE_CLEAN_MS * 1000000ULL) {
		p->gap_ms = p->gap0_ms;
		if (++p->streak >= R2CC_PROBE_STREAK) {
			p->ok_ns = now;
			p->streak = 0;
		}
		p->next_ns = now + R2CC_PROBE_EVERY_MS * 1000000ULL;
		return;
	}
	p->streak = 0;
	p->next_ns = now + (uint64_t)p->gap_ms * 1000000ULL;
	p->gap_ms = p->gap_ms * 2 > R2CC_PROBE_MAX_GAP_MS ?
			    R2CC_PROBE_MAX_GAP_MS :
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
			   R2CC_PROBE_WAIT_MS * 1000000ULL) {
			done(p, false, now);
		} else {
			busy++;
		}
	}
	return busy;
}

int r2cc_probe_path(const uint8_t sgid[16], const uint8_t dgid[16],
		    uint16_t port, uint64_t since_ns, uint64_t now_ns,
		    uint32_t gap_ms)
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
			   paths[i].port == port) {
			p = &paths[i];
		}
	}
	if (!p) {
		if (!free_slot)
			return -ENOSPC;
		p = free_slot;
		memset(p, 0, sizeof(*p));
		p->used = true;
		p->src = src;
		p->dst = dst;
		p->port = port;
		p->fd = -1;
		p->gap_ms = p->gap0_ms = gap_ms ? gap_ms : 1000;
	}
	if (p->ok_ns > since_ns)
		return 1;
	if (p->fd < 0 && now_ns >= p->next_ns) {
		start(p, now_ns);
		if (p->fd < 0 && p->ok_ns > since_ns)
			return 1;
	}
	return 0;
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
