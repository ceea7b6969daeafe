/* SPDX-License-Identifier: MIT */
/*
 * r2cc-gen's out-of-band channel: one TCP connection to the server's
 * management address carries the setup (QP numbers, keys, addresses), the
 * start signal and the final tally. Every call is bounded by a timeout.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gen.h"

#define OOB_MAGIC 0x72326f62U /* "r2ob" */
#define OOB_VERSION 1
#define OOB_ACCEPT_S 60 /* how long a server waits for its client */
#define OOB_CONNECT_S 30

/* A record being built or read, big-endian fields. */
struct rec {
	uint8_t b[4096];
	size_t n;
};

static void put32(struct rec *r, uint32_t v)
{
	v = htobe32(v);
	memcpy(r->b + r->n, &v, 4);
	r->n += 4;
}

static void put64(struct rec *r, uint64_t v)
{
	v = htobe64(v);
	memcpy(r->b + r->n, &v, 8);
	r->n += 8;
}

static uint32_t get32(struct rec *r)
{
	uint32_t v;

	memcpy(&v, r->b + r->n, 4);
	r->n += 4;
	return be32toh(v);
}

static uint64_t get64(struct rec *r)
{
	uint64_t v;

	memcpy(&v, r->b + r->n, 8);
	r->n += 8;
	return be64toh(v);
}

static int io_timeouts(int fd, double secs)
{
	struct timeval tv = { .tv_sec = (time_t)secs,
			      .tv_usec = (secs - (time_t)secs) * 1e6 };

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		return -errno;
	return 0;
}

static int oob_accept(struct gen *g)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(g->o.port) };
	struct pollfd pfd = { .events = POLLIN };
	int one = 1, fd = -1;

	pfd.fd = socket(AF_INET, SOCK_STREAM, 0);
	if (pfd.fd < 0)
		return -errno;
	setsockopt(pfd.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(pfd.fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(pfd.fd, 1)) {
		fd = -errno;
		close(pfd.fd);
		return fd;
	}
	if (poll(&pfd, 1, OOB_ACCEPT_S * 1000) == 1)
		fd = accept(pfd.fd, NULL, NULL);
	else
		errno = ETIMEDOUT;
	if (fd < 0)
		fd = -errno;
	close(pfd.fd);
	return fd;
}

/* The server may not listen yet: retry until the deadline. */
static int oob_connect(struct gen *g)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM };
	double deadline = gen_now() + OOB_CONNECT_S;
	struct addrinfo *ai;
	char svc[16];
	int fd = -ETIMEDOUT;

	snprintf(svc, sizeof(svc), "%d", g->o.port);
	if (getaddrinfo(g->o.server, svc, &hints, &ai))
		return -EHOSTUNREACH;
	while (gen_now() < deadline) {
		fd = socket(ai->ai_family, ai->ai_socktype, 0);
		if (fd < 0) {
			fd = -errno;
			break;
		}
		/* SO_SNDTIMEO bounds connect() itself on Linux */
		if (!io_timeouts(fd, 5) &&
		    !connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		close(fd);
		fd = -ETIMEDOUT;
		usleep(200000);
	}
	freeaddrinfo(ai);
	return fd;
}

/* Connect (client) or accept one client (server), then bound every call. */
int gen_oob_open(struct gen *g)
{
	int fd = g->client ? oob_connect(g) : oob_accept(g), ret;

	if (fd < 0)
		return fd;
	g->fd = fd;
	ret = io_timeouts(fd, g->o.stall_limit > 10 ? g->o.stall_limit : 10);
	return ret;
}

static int send_all(int fd, const void *buf, size_t len)
{
	size_t done;
	ssize_t k;

	for (done = 0; done < len; done += k) {
		k = send(fd, (const char *)buf + done, len - done,
			 MSG_NOSIGNAL);
		if (k <= 0)
			return k < 0 ? -errno : -EPIPE;
	}
	return 0;
}

static int recv_all(int fd, void *buf, size_t len)
{
	size_t done;
	ssize_t k;

	for (done = 0; done < len; done += k) {
		k = recv(fd, (char *)buf + done, len - done, 0);
		if (k <= 0)
			return k < 0 ? -errno : -ECONNRESET;
	}
	return 0;
}

/* A record on the wire: its length, then its bytes. */
static int rec_send(struct gen *g, struct rec *r)
{
	uint32_t n = htobe32(r->n);
	int ret = send_all(g->fd, &n, 4);

	return ret ? ret : send_all(g->fd, r->b, r->n);
}

static int rec_recv(struct gen *g, struct rec *r, size_t want)
{
	uint32_t n;
	int ret = recv_all(g->fd, &n, 4);

	if (ret)
		return ret;
	n = be32toh(n);
	if (n != want)
		return -EPROTO;
	r->n = 0;
	return recv_all(g->fd, r->b, n);
}

/* The client's parameters; the server adopts them. */
int gen_oob_hello(struct gen *g)
{
	struct rec r = { .n = 0 };
	int ret;

	if (g->client) {
		put32(&r, OOB_MAGIC);
		put32(&r, OOB_VERSION);
		put32(&r, g->o.qps);
		put32(&r, g->o.max_msg);
		put64(&r, g->o.seed);
		return rec_send(g, &r);
	}
	ret = rec_recv(g, &r, 24);
	if (ret)
		return ret;
	if (get32(&r) != OOB_MAGIC || get32(&r) != OOB_VERSION)
		return -EPROTO;
	g->o.qps = get32(&r);
	g->o.max_msg = get32(&r);
	g->o.seed = get64(&r);
	if (g->o.qps < 1 || g->o.qps > GEN_MAX_QPS || g->o.max_msg < 1024 ||
	    g->o.max_msg > (1U << 20))
		return -EPROTO;
	return 0;
}

/* Both sides: address, MTU and each QP's number, PSN, keys and regions. */
int gen_oob_exchange(struct gen *g)
{
	struct rec me = { .n = 0 }, you;
	int i, ret;

	put32(&me, g->port.lid);
	put32(&me, g->port.active_mtu);
	memcpy(me.b + me.n, g->gid.raw, 16);
	me.n += 16;
	for (i = 0; i < g->o.qps; i++) {
		put32(&me, g->qp[i].qp->qp_num);
		put32(&me, g->qp[i].psn);
		put32(&me, g->mr->rkey);
		put64(&me, (uintptr_t)g->qp[i].wreg);
		put64(&me, (uintptr_t)g->qp[i].rreg);
	}
	ret = rec_send(g, &me);
	if (!ret)
		ret = rec_recv(g, &you, me.n);
	if (ret)
		return ret;
	g->peer_lid = get32(&you);
	g->path_mtu = get32(&you);
	if (g->port.active_mtu < g->path_mtu)
		g->path_mtu = g->port.active_mtu;
	memcpy(g->peer_gid.raw, you.b + you.n, 16);
	you.n += 16;
	for (i = 0; i < g->o.qps; i++) {
		g->qp[i].peer.qpn = get32(&you);
		g->qp[i].peer.psn = get32(&you);
		g->qp[i].peer.rkey = get32(&you);
		g->qp[i].peer.waddr = get64(&you);
		g->qp[i].peer.raddr = get64(&you);
	}
	return 0;
}

int gen_oob_sync(struct gen *g, char tag)
{
	char got = 0;
	int ret = send_all(g->fd, &tag, 1);

	if (!ret)
		ret = recv_all(g->fd, &got, 1);
	if (!ret && got != tag)
		ret = -EPROTO;
	return ret;
}

/*
 * End of the run. The client says how many messages it posted on each QP;
 * the server checks that it verified exactly those: fewer are losses, more
 * are duplicates (a stream that went past the client's count).
 */
int gen_oob_end(struct gen *g)
{
	struct rec r = { .n = 0 };
	uint32_t want;
	int i, ret;

	if (g->client) {
		put32(&r, OOB_MAGIC);
		for (i = 0; i < g->o.qps; i++)
			put32(&r, g->qp[i].tposted);
		return rec_send(g, &r);
	}
	ret = rec_recv(g, &r, 4 + 4 * g->o.qps);
	if (ret)
		return ret;
	if (get32(&r) != OOB_MAGIC)
		return -EPROTO;
	for (i = 0; i < g->o.qps; i++) {
		want = get32(&r);
		if ((int32_t)(want - g->qp[i].in.next) > 0)
			gen_fail(g, &g->st.losses,
				 "qp %d: client posted %u messages, %u arrived",
				 i, want, g->qp[i].in.next);
		else if (want != g->qp[i].in.next)
			gen_fail(g, &g->st.duplicates,
				 "qp %d: client posted %u, got to seq %u", i,
				 want, g->qp[i].in.next - 1);
	}
	return 0;
}

/*
 * The server's counters to the client, which adds them to its own (its
 * longest stall: the larger one; its ops: already counted by credit).
 */
int gen_oob_summary(struct gen *g)
{
	uint64_t *f[] = { &g->st.ops,	     &g->st.bytes_verified,
			  &g->st.mismatches, &g->st.duplicates,
			  &g->st.losses,     &g->st.order_errors,
			  &g->st.errors,     &g->st.longest_stall_ms };
	struct rec r = { .n = 0 };
	unsigned int i, n = sizeof(f) / sizeof(f[0]);
	uint64_t v, acked = 0;
	int ret;

	if (!g->client) {
		put32(&r, OOB_MAGIC);
		for (i = 0; i < n; i++)
			put64(&r, *f[i]);
		return rec_send(g, &r);
	}
	ret = rec_recv(g, &r, 4 + 8 * n);
	if (ret)
		return ret;
	if (get32(&r) != OOB_MAGIC)
		return -EPROTO;
	for (i = 0; i < (unsigned int)g->o.qps; i++)
		acked += g->qp[i].tacked;
	for (i = 0; i < n; i++) {
		v = get64(&r);
		/* the client counted the server's messages by credit */
		if (f[i] == &g->st.ops && v != acked)
			gen_fail(g, &g->st.errors,
				 "server verified %" PRIu64
				 " messages, credited %" PRIu64,
				 v, acked);
		if (f[i] == &g->st.ops)
			continue;
		if (f[i] == &g->st.longest_stall_ms)
			*f[i] = v > *f[i] ? v : *f[i];
		else
			*f[i] += v;
	}
	return 0;
}
