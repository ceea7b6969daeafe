/* SPDX-License-Identifier: MIT */
/*
 * r2cc-gen's out-of-band channel: one TCP connection per peer (a client
 * dials its --peers servers at consecutive ports of the server's management
 * address, a server takes its --peers clients on one port) carries the setup
 * (QP numbers, keys, addresses), the start signal and the final tally. A
 * step that talks to every peer sends to all of them before it reads from
 * any, so no order of peers can deadlock. Every call is bounded.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gen.h"

#define OOB_MAGIC 0x72326f62U /* "r2ob" */
#define OOB_VERSION 2
#define OOB_ACCEPT_S 60 /* how long a server waits for its clients */
#define OOB_CONNECT_S 30

/* A record being built or read, big-endian fields: the largest is one
 * peer's QPs in the exchange. */
#define OOB_QP_BYTES 28
struct rec {
	uint8_t b[24 + OOB_QP_BYTES * GEN_MAX_QPS];
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

/* Every client, in the order they come, within OOB_ACCEPT_S in all. */
static int oob_accept(struct gen *g)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(g->o.port) };
	struct pollfd pfd = { .events = POLLIN };
	double deadline = gen_now() + OOB_ACCEPT_S;
	int one = 1, i, ret = 0, ms;

	pfd.fd = socket(AF_INET, SOCK_STREAM, 0);
	if (pfd.fd < 0)
		return -errno;
	setsockopt(pfd.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(pfd.fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(pfd.fd, g->o.peers)) {
		ret = -errno;
		close(pfd.fd);
		return ret;
	}
	for (i = 0; i < g->o.peers && !ret; i++) {
		ms = (int)((deadline - gen_now()) * 1000);
		if (ms > 0 && poll(&pfd, 1, ms) == 1)
			g->peer[i].fd = accept(pfd.fd, NULL, NULL);
		else
			errno = ETIMEDOUT;
		if (g->peer[i].fd < 0)
			ret = -errno;
	}
	close(pfd.fd);
	return ret;
}

/* The server may not listen yet: retry until the deadline. */
static int oob_connect(struct gen *g, int port)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM };
	double deadline = gen_now() + OOB_CONNECT_S;
	struct addrinfo *ai;
	char svc[16];
	int fd = -ETIMEDOUT;

	snprintf(svc, sizeof(svc), "%d", port);
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

/* Connect (client) or accept every client (server), then bound every
 * call. */
int gen_oob_open(struct gen *g)
{
	int i, ret = 0;

	g->peer = calloc(g->o.peers, sizeof(*g->peer));
	if (!g->peer)
		return -ENOMEM;
	for (i = 0; i < g->o.peers; i++)
		g->peer[i].fd = -1;
	if (g->client)
		for (i = 0; i < g->o.peers && !ret; i++) {
			g->peer[i].fd = oob_connect(g, g->o.port + i);
			if (g->peer[i].fd < 0)
				ret = g->peer[i].fd;
		}
	else
		ret = oob_accept(g);
	for (i = 0; i < g->o.peers && !ret; i++)
		ret = io_timeouts(g->peer[i].fd, g->o.stall_limit > 10 ?
							 g->o.stall_limit :
							 10);
	return ret;
}

void gen_oob_close(struct gen *g)
{
	int i;

	for (i = 0; g->peer && i < g->o.peers; i++)
		if (g->peer[i].fd >= 0)
			close(g->peer[i].fd);
	free(g->peer);
	g->peer = NULL;
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
static int rec_send(struct gen_peer *p, struct rec *r)
{
	uint32_t n = htobe32(r->n);
	int ret = send_all(p->fd, &n, 4);

	return ret ? ret : send_all(p->fd, r->b, r->n);
}

static int rec_recv(struct gen_peer *p, struct rec *r, size_t want)
{
	uint32_t n;
	int ret = recv_all(p->fd, &n, 4);

	if (ret)
		return ret;
	n = be32toh(n);
	if (n != want || n > sizeof(r->b))
		return -EPROTO;
	r->n = 0;
	return recv_all(p->fd, r->b, n);
}

/* One client's hello; the first sets the QPs per peer and the message
 * size, the others must agree. */
static int hello_in(struct gen *g, struct gen_peer *p, int first)
{
	struct rec r;
	uint32_t qps, max_msg;
	int ret = rec_recv(p, &r, 28);

	if (ret)
		return ret;
	if (get32(&r) != OOB_MAGIC || get32(&r) != OOB_VERSION)
		return -EPROTO;
	qps = get32(&r);
	max_msg = get32(&r);
	p->seed = get64(&r);
	p->base = get32(&r);
	if (qps < 1 || qps > GEN_MAX_QPS || max_msg < 1024 ||
	    max_msg > (1U << 20) || p->base + qps > GEN_MAX_ALL_QPS ||
	    (!first && (qps != (uint32_t)g->o.qps || max_msg != g->o.max_msg)))
		return -EPROTO;
	g->o.qps = qps;
	g->o.max_msg = max_msg;
	return 0;
}

/* The client's parameters; the server adopts them. A client tells each
 * server the wire index of its QPs there (they follow its own order). */
int gen_oob_hello(struct gen *g)
{
	struct rec r;
	int i, ret = 0;

	for (i = 0; g->client && i < g->o.peers && !ret; i++) {
		r.n = 0;
		put32(&r, OOB_MAGIC);
		put32(&r, OOB_VERSION);
		put32(&r, g->o.qps);
		put32(&r, g->o.max_msg);
		put64(&r, g->o.seed);
		put32(&r, i * g->o.qps);
		ret = rec_send(&g->peer[i], &r);
	}
	for (i = 0; !g->client && i < g->o.peers && !ret; i++)
		ret = hello_in(g, &g->peer[i], !i);
	g->nqps = g->o.qps * g->o.peers;
	return ret;
}

/* Our address, MTU and the QPs towards peer @i. */
static int exchange_out(struct gen *g, int i)
{
	struct rec me = { .n = 0 };
	struct gen_qp *q = &g->qp[i * g->o.qps];
	int k;

	put32(&me, g->port.lid);
	put32(&me, g->port.active_mtu);
	memcpy(me.b + me.n, g->gid.raw, 16);
	me.n += 16;
	for (k = 0; k < g->o.qps; k++, q++) {
		put32(&me, q->qp->qp_num);
		put32(&me, q->psn);
		put32(&me, g->mr->rkey);
		put64(&me, (uintptr_t)q->wreg);
		put64(&me, (uintptr_t)q->rreg);
	}
	return rec_send(&g->peer[i], &me);
}

static int exchange_in(struct gen *g, int i)
{
	struct gen_peer *p = &g->peer[i];
	struct gen_qp *q = &g->qp[i * g->o.qps];
	struct rec you;
	int k, ret;

	ret = rec_recv(p, &you, 24 + (size_t)OOB_QP_BYTES * g->o.qps);
	if (ret)
		return ret;
	p->lid = get32(&you);
	p->path_mtu = get32(&you);
	if (g->port.active_mtu < p->path_mtu)
		p->path_mtu = g->port.active_mtu;
	memcpy(p->gid.raw, you.b + you.n, 16);
	you.n += 16;
	for (k = 0; k < g->o.qps; k++, q++) {
		q->peer.qpn = get32(&you);
		q->peer.psn = get32(&you);
		q->peer.rkey = get32(&you);
		q->peer.waddr = get64(&you);
		q->peer.raddr = get64(&you);
	}
	return 0;
}

/* Both sides: address, MTU and each QP's number, PSN, keys and regions. */
int gen_oob_exchange(struct gen *g)
{
	int i, ret = 0;

	for (i = 0; i < g->o.peers && !ret; i++)
		ret = exchange_out(g, i);
	for (i = 0; i < g->o.peers && !ret; i++)
		ret = exchange_in(g, i);
	return ret;
}

int gen_oob_sync(struct gen *g, char tag)
{
	char got = 0;
	int i, ret = 0;

	for (i = 0; i < g->o.peers && !ret; i++)
		ret = send_all(g->peer[i].fd, &tag, 1);
	for (i = 0; i < g->o.peers && !ret; i++) {
		ret = recv_all(g->peer[i].fd, &got, 1);
		if (!ret && got != tag)
			ret = -EPROTO;
	}
	return ret;
}

/* The failure counters a server sends each client (all of its own). */
#define OOB_TALLY 6
static void tally(struct gen *g, uint64_t *f[OOB_TALLY])
{
	f[0] = &g->st.mismatches;
	f[1] = &g->st.duplicates;
	f[2] = &g->st.losses;
	f[3] = &g->st.order_errors;
	f[4] = &g->st.errors;
	f[5] = &g->st.longest_stall_ms;
}

/* A server's record to one client: that client's messages verified and
 * their bytes, then the server's failure counters. */
static int summary_out(struct gen *g, int i)
{
	const struct gen_qp *q = &g->qp[i * g->o.qps];
	uint64_t ops = 0, bytes = 0, *f[OOB_TALLY];
	struct rec r = { .n = 0 };
	unsigned int k;

	for (k = 0; k < (unsigned int)g->o.qps; k++, q++) {
		ops += q->ops;
		bytes += q->bytes;
	}
	put32(&r, OOB_MAGIC);
	put64(&r, ops);
	put64(&r, bytes);
	tally(g, f);
	for (k = 0; k < OOB_TALLY; k++)
		put64(&r, *f[k]);
	return rec_send(&g->peer[i], &r);
}

/*
 * End of the run. The client says how many messages it posted on each of
 * a server's QPs; the server checks that it verified exactly those: fewer
 * are losses, more are duplicates (a stream that went past the client's
 * count), and answers with its counters (summary_out). @p: the server's
 * peer whose record came (the client: NULL, to every server).
 */
int gen_oob_end(struct gen *g, struct gen_peer *p)
{
	struct rec r;
	struct gen_qp *q;
	uint32_t want;
	int i, k, ret = 0;

	for (i = 0; g->client && i < g->o.peers && !ret; i++) {
		r.n = 0;
		put32(&r, OOB_MAGIC);
		for (k = 0, q = &g->qp[i * g->o.qps]; k < g->o.qps; k++, q++)
			put32(&r, q->tposted);
		ret = rec_send(&g->peer[i], &r);
	}
	if (g->client)
		return ret;
	ret = rec_recv(p, &r, 4 + 4 * (size_t)g->o.qps);
	if (ret)
		return ret;
	if (get32(&r) != OOB_MAGIC)
		return -EPROTO;
	q = &g->qp[(p - g->peer) * g->o.qps];
	for (k = 0; k < g->o.qps; k++, q++) {
		want = get32(&r);
		if ((int32_t)(want - q->in.next) > 0)
			gen_fail(g, &g->st.losses,
				 "qp %u: client posted %u messages, %u arrived",
				 q->idx, want, q->in.next);
		else if (want != q->in.next)
			gen_fail(g, &g->st.duplicates,
				 "qp %u: client posted %u, got to seq %u",
				 q->idx, want, q->in.next - 1);
	}
	return summary_out(g, (int)(p - g->peer));
}

/* A server's record: the client adds its counters to its own (its
 * longest stall: the larger one); the messages it verified must be the
 * ones that server credited. */
static int summary_in(struct gen *g, int i)
{
	const struct gen_qp *q = &g->qp[i * g->o.qps];
	uint64_t v, acked = 0, *f[OOB_TALLY];
	unsigned int k;
	struct rec r;
	int ret;

	tally(g, f);
	ret = rec_recv(&g->peer[i], &r, 4 + 16 + 8 * OOB_TALLY);
	if (ret)
		return ret;
	if (get32(&r) != OOB_MAGIC)
		return -EPROTO;
	for (k = 0; k < (unsigned int)g->o.qps; k++, q++)
		acked += q->tacked;
	v = get64(&r);
	if (v != acked)
		gen_fail(g, &g->st.errors,
			 "server %d verified %" PRIu64
			 " messages, credited %" PRIu64,
			 i, v, acked);
	g->st.bytes_verified += get64(&r);
	for (k = 0; k < OOB_TALLY; k++) {
		v = get64(&r);
		if (f[k] == &g->st.longest_stall_ms)
			*f[k] = v > *f[k] ? v : *f[k];
		else
			*f[k] += v;
	}
	return 0;
}

/* The client: every server's counters, added to its own. */
int gen_oob_summary(struct gen *g)
{
	int i, ret = 0;

	for (i = 0; i < g->o.peers && !ret; i++)
		ret = summary_in(g, i);
	return ret;
}
