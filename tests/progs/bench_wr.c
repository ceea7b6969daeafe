/* SPDX-License-Identifier: MIT */
/*
 * bench_wr: the data-path benchmark. Two RC QPs on one device, looped back to
 * each other; bench_loop() posts n RDMA WRITEs through the inline verbs, so
 * callgrind --toggle-collect=bench_loop counts user instructions per WR.
 *
 * Two-node mode: a server (-S PORT) and a client (-C HOST:PORT) with one RC
 * QP each, connected through a TCP exchange of QPN, PSN, LID, GID, buffer
 * address and rkey; the client runs the same bench_loop toward the server's
 * buffer, then says so, and the server checks the bytes and exits. Under
 * r2cc with a job secret on both nodes, that QP is protected.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define WR_SIZE 64 /* bytes per RDMA WRITE */
#define SIG_EVERY 16 /* default: every 16th WR (and the last) is signaled */
#define WINDOW 64 /* at most this many WRs outstanding */
#define POLL_BATCH 4
#define BUF_SZ 8192 /* source half, then destination half */
#define IB_PORT 1
#define TIMEOUT_S 60 /* default bound on every wait (-t) */
#define MSG_SZ 128 /* one line of connection info, NUL-padded */
#define CALIB_POLLS 1000 /* empty polls bench_empty makes (client) */

struct bench {
	struct ibv_qp *qp; /* borrowed: the sending QP */
	struct ibv_cq *cq; /* borrowed: its send CQ */
	uint64_t laddr;
	uint32_t lkey;
	uint64_t raddr;
	uint32_t rkey;
	double deadline; /* CLOCK_MONOTONIC seconds */
	int sig_every; /* every sig_every-th WR (and the last) is signaled */
	long nap_us; /* pause after an empty poll (0: none) */
	long signaled; /* completions polled */
	long polls; /* ibv_poll_cq calls, empty ones included */
	long empty; /* ibv_poll_cq calls that found nothing */
};

struct res {
	struct ibv_context *ctx; /* owned */
	struct ibv_pd *pd; /* owned */
	struct ibv_mr *mr; /* owned */
	struct ibv_cq *cq[2]; /* owned */
	struct ibv_qp *qp[2]; /* owned: qp[0] sends, qp[1] is its target */
	uint8_t *buf; /* owned: BUF_SZ */
	union ibv_gid gid;
	struct ibv_port_attr port;
	int nqp; /* 2 looped back, 1 in two-node mode */
};

/* One end of a connection, as the two nodes exchange it. */
struct end {
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	union ibv_gid gid;
	uint64_t addr; /* its buffer */
	uint32_t rkey;
};

struct opts {
	const char *dev;
	int gidx;
	long n;
	int sig_every;
	int timeout; /* seconds, every wait */
	const char *go; /* -w: the client starts once this file exists */
	long nap_us; /* -i */
	const char *port; /* -S */
	char *host; /* -C HOST:PORT, split at the last ':' */
	const char *cport;
};

int bench_loop(struct bench *b, long n);
int bench_empty(struct bench *b, long m);
int bench_nap(struct bench *b);

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * After an empty poll: counts it, checks the deadline (only now and then
 * without a pause: the clock costs instructions) and pauses nap_us. Across
 * the wire the loop waits for ACKs; a pause makes it poll less often while
 * it waits, and callgrind's second toggle (--toggle-collect=bench_nap)
 * keeps the pause out of bench_loop's count. Returns 1 past the deadline.
 */
__attribute__((noinline, noclone)) int bench_nap(struct bench *b)
{
	struct timespec ts = { .tv_nsec = b->nap_us * 1000 };

	if (b->nap_us)
		nanosleep(&ts, NULL);
	return ((++b->empty & 1023) == 0 || b->nap_us) && now_s() > b->deadline;
}

/*
 * The measured loop. noinline/noclone keep the symbol callgrind toggles on;
 * everything it calls (the provider's post_send/poll_cq, later the shim's
 * wrappers) is counted with it, bench_nap too unless toggled as well.
 * Returns 0, or -1 on any error or timeout.
 */
__attribute__((noinline, noclone)) int bench_loop(struct bench *b, long n)
{
	struct ibv_sge sge = { .addr = b->laddr,
			       .length = WR_SIZE,
			       .lkey = b->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };
	struct ibv_wc wc[POLL_BATCH];
	struct ibv_send_wr *bad;
	long posted = 0, done = 0;
	int i, k, left = b->sig_every;

	wr.wr.rdma.remote_addr = b->raddr;
	wr.wr.rdma.rkey = b->rkey;
	while (done < n) {
		while (posted < n && posted - done < WINDOW) {
			posted++;
			wr.wr_id = posted;
			/* a count down, not a division per WR */
			wr.send_flags = 0;
			if (--left == 0 || posted == n) {
				wr.send_flags = IBV_SEND_SIGNALED;
				left = b->sig_every;
			}
			if (ibv_post_send(b->qp, &wr, &bad))
				return -1;
		}
		k = ibv_poll_cq(b->cq, POLL_BATCH, wc);
		b->polls++;
		if (k < 0)
			return -1;
		if (k == 0 && bench_nap(b))
			return -1;
		for (i = 0; i < k; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				return -1;
			done = wc[i].wr_id;
			b->signaled++;
		}
	}
	return 0;
}

/*
 * Polls the drained CQ m times. Across the wire bench_loop waits for the
 * peer's ACKs by polling, and how many of its polls find nothing depends
 * on the emulated wire's timing; callgrind (--toggle-collect=bench_empty
 * as well) gives what one empty poll costs here, so that the caller can
 * take the empty polls bench_loop reports off its count.
 */
__attribute__((noinline, noclone)) int bench_empty(struct bench *b, long m)
{
	struct ibv_wc wc[POLL_BATCH];
	int k = 0;
	long i;

	for (i = 0; i < m; i++)
		k |= ibv_poll_cq(b->cq, POLL_BATCH, wc);
	return k;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_wr -d DEV [-g GIDX] [-T] [-s K] [-t SEC] -n N\n"
		"       bench_wr -d DEV [-g GIDX] [-t SEC] -S PORT\n"
		"       bench_wr -d DEV [-g GIDX] [-T] [-s K] [-t SEC] [-w FILE]"
		" [-i US] -n N -C HOST:PORT\n"
		"  -T  start an idle thread first, so that the process is\n"
		"      multi-threaded as NCCL, UCX and MPI processes are\n"
		"  -s  signal every K-th WR (and the last; default 16, at most"
		" %d)\n"
		"  -t  bound on every wait, in seconds (default %d)\n"
		"  -S  serve one client on TCP PORT: keep a QP for its WRITEs\n"
		"      until it is done, then check the bytes and exit\n"
		"  -C  run the loop toward the server at HOST:PORT\n"
		"  -w  the client waits until FILE exists before the loop\n"
		"  -i  pause US microseconds (< 1000000) after an empty poll\n",
		WINDOW, TIMEOUT_S);
	exit(2);
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_context *ctx = NULL;
	struct ibv_device **list;
	int i, n;

	list = ibv_get_device_list(&n);
	if (!list)
		return NULL;
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			break;
	if (i < n)
		ctx = ibv_open_device(list[i]);
	else
		fprintf(stderr, "bench_wr: no device %s\n", name);
	ibv_free_device_list(list);
	return ctx;
}

static int setup(struct res *r, const char *dev, int gidx)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = WINDOW,
			 .max_recv_wr = 1,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.sq_sig_all = 0,
	};
	int i;

	r->ctx = open_dev(dev);
	if (!r->ctx)
		return -1;
	if (ibv_query_port(r->ctx, IB_PORT, &r->port) ||
	    ibv_query_gid(r->ctx, IB_PORT, gidx, &r->gid))
		return -1;
	r->buf = aligned_alloc(4096, BUF_SZ);
	r->pd = ibv_alloc_pd(r->ctx);
	if (!r->buf || !r->pd)
		return -1;
	r->mr = ibv_reg_mr(r->pd, r->buf, BUF_SZ,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!r->mr)
		return -1;
	for (i = 0; i < r->nqp; i++) {
		r->cq[i] = ibv_create_cq(r->ctx, WINDOW, NULL, NULL, 0);
		if (!r->cq[i])
			return -1;
		ia.send_cq = r->cq[i];
		ia.recv_cq = r->cq[i];
		r->qp[i] = ibv_create_qp(r->pd, &ia);
		if (!r->qp[i])
			return -1;
	}
	return 0;
}

/* This side's end of QP qp, its first send PSN psn. */
static void local_end(const struct res *r, struct ibv_qp *qp, uint32_t psn,
		      struct end *e)
{
	e->qpn = qp->qp_num;
	e->psn = psn & 0xffffff;
	e->lid = r->port.lid;
	e->gid = r->gid;
	e->addr = (uintptr_t)r->buf;
	e->rkey = r->mr->rkey;
}

/* RESET -> INIT -> RTR -> RTS towards the remote end re, sending from psn. */
static int connect_qp(struct res *r, struct ibv_qp *qp, const struct end *re,
		      uint32_t psn, int gidx)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = IB_PORT,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = r->port.active_mtu;
	a.dest_qp_num = re->qpn;
	a.rq_psn = re->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = re->lid;
	a.ah_attr.port_num = IB_PORT;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.grh.sgid_index = gidx;
	a.ah_attr.grh.dgid = re->gid;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

static void teardown(struct res *r)
{
	int i;

	for (i = 1; i >= 0; i--) {
		if (r->qp[i])
			ibv_destroy_qp(r->qp[i]);
		if (r->cq[i])
			ibv_destroy_cq(r->cq[i]);
	}
	if (r->mr)
		ibv_dereg_mr(r->mr);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	if (r->ctx)
		ibv_close_device(r->ctx);
	free(r->buf);
}

/* The bytes the loop writes: the source half of the buffer. */
static uint8_t pattern(int i)
{
	return (uint8_t)(i * 13 + 1);
}

static void fill(uint8_t *buf)
{
	int i;

	for (i = 0; i < BUF_SZ / 2; i++) {
		buf[i] = pattern(i);
		buf[BUF_SZ / 2 + i] = 0;
	}
}

/* The destination half holds what the loop wrote. */
static int written(const uint8_t *buf)
{
	int i;

	for (i = 0; i < WR_SIZE; i++)
		if (buf[BUF_SZ / 2 + i] != pattern(i))
			return 0;
	return 1;
}

/*
 * Runs the loop once on qp[0] toward raddr/rkey (the destination half of a
 * buffer); prints the summary line. Returns 0, or -1 on failure.
 */
static int measure(struct res *r, const struct opts *o, uint64_t raddr,
		   uint32_t rkey, long calib)
{
	struct bench b = { .qp = r->qp[0],
			   .cq = r->cq[0],
			   .laddr = (uintptr_t)r->buf,
			   .lkey = r->mr->lkey,
			   .raddr = raddr + BUF_SZ / 2,
			   .rkey = rkey,
			   .sig_every = o->sig_every,
			   .nap_us = o->nap_us };
	int ret;

	b.deadline = now_s() + o->timeout;
	ret = bench_loop(&b, o->n);
	if (ret)
		fprintf(stderr, "bench_wr: loop failed after %ld completions\n",
			b.signaled);
	printf("bench_wr: wrs=%ld signaled=%ld polls=%ld empty=%ld\n", o->n,
	       b.signaled, b.polls, b.empty);
	if (!ret && calib) {
		ret = bench_empty(&b, calib) ? -1 : 0;
		printf("bench_wr: empty_polls_calibrated=%ld%s\n", calib,
		       ret ? " (the CQ was not empty)" : "");
	}
	fflush(stdout);
	return ret;
}

/* Two QPs on one device, looped back to each other. */
static int run_loopback(struct res *r, const struct opts *o)
{
	struct end e0, e1;

	r->nqp = 2;
	if (setup(r, o->dev, o->gidx))
		goto fail;
	local_end(r, r->qp[0], 0, &e0);
	local_end(r, r->qp[1], 0, &e1);
	if (connect_qp(r, r->qp[0], &e1, 0, o->gidx) ||
	    connect_qp(r, r->qp[1], &e0, 0, o->gidx))
		goto fail;
	fill(r->buf);
	if (measure(r, o, (uintptr_t)r->buf, r->mr->rkey, 0))
		return -1;
	if (!written(r->buf)) {
		fprintf(stderr, "bench_wr: data not written\n");
		return -1;
	}
	return 0;
fail:
	perror("bench_wr: setup");
	return -1;
}

/* ---- two-node mode: the TCP exchange, every wait bounded ---------------- */

/* Waits until fd is ready for ev or the deadline passes (0, or -1). */
static int wait_fd(int fd, short ev, double deadline, const char *what)
{
	struct pollfd p = { .fd = fd, .events = ev };
	double left;
	int k;

	for (;;) {
		left = deadline - now_s();
		if (left <= 0) {
			fprintf(stderr, "bench_wr: timed out waiting for %s\n",
				what);
			return -1;
		}
		k = poll(&p, 1, (int)(left * 1000) + 1);
		if (k > 0)
			return 0;
		if (k < 0 && errno != EINTR) {
			fprintf(stderr, "bench_wr: poll (%s): %s\n", what,
				strerror(errno));
			return -1;
		}
	}
}

/* Sends (rd 0) or receives (rd 1) exactly len bytes by the deadline. */
static int xfer(int fd, void *buf, size_t len, int rd, double deadline,
		const char *what)
{
	uint8_t *p = buf;
	ssize_t k;

	while (len) {
		if (wait_fd(fd, rd ? POLLIN : POLLOUT, deadline, what))
			return -1;
		k = rd ? recv(fd, p, len, 0) : send(fd, p, len, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			fprintf(stderr, "bench_wr: %s: %s\n", what,
				k ? strerror(errno) :
				    "peer closed the connection");
			return -1;
		}
		p += k;
		len -= k;
	}
	return 0;
}

static int send_end(int fd, const struct end *e, double deadline)
{
	char m[MSG_SZ] = { 0 }, g[33];
	int i;

	for (i = 0; i < 16; i++)
		snprintf(g + 2 * i, 3, "%02x", e->gid.raw[i]);
	snprintf(m, sizeof(m), "%u %u %u %s %llu %u", e->qpn, e->psn, e->lid, g,
		 (unsigned long long)e->addr, e->rkey);
	return xfer(fd, m, sizeof(m), 0, deadline, "sending our QP's info");
}

static int recv_end(int fd, struct end *e, double deadline)
{
	char m[MSG_SZ], g[33];
	unsigned long long addr;
	unsigned int lid, b;
	int i;

	if (xfer(fd, m, sizeof(m), 1, deadline, "the peer's QP info"))
		return -1;
	m[MSG_SZ - 1] = 0;
	if (sscanf(m, "%u %u %u %32s %llu %u", &e->qpn, &e->psn, &lid, g, &addr,
		   &e->rkey) != 6 ||
	    strlen(g) != 32) {
		fprintf(stderr, "bench_wr: bad QP info from the peer: `%s'\n",
			m);
		return -1;
	}
	for (i = 0; i < 16; i++) {
		if (sscanf(g + 2 * i, "%2x", &b) != 1)
			return -1;
		e->gid.raw[i] = (uint8_t)b;
	}
	e->lid = (uint16_t)lid;
	e->addr = addr;
	return 0;
}

/* One byte of the protocol: R(eady), D(one), K (bytes checked), B(ad). */
static int send_byte(int fd, char c, double deadline)
{
	return xfer(fd, &c, 1, 0, deadline, "sending to the peer");
}

static int recv_byte(int fd, char *c, double deadline, const char *what)
{
	return xfer(fd, c, 1, 1, deadline, what);
}

/* The server's listening socket on port, or -1. */
static int tcp_listen(const char *port)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *ai;
	int fd, one = 1, rc;

	rc = getaddrinfo(NULL, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "bench_wr: port `%s': %s\n", port,
			gai_strerror(rc));
		return -1;
	}
	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
	if (fd >= 0 &&
	    (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	     bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 1))) {
		fprintf(stderr, "bench_wr: listen on port %s: %s\n", port,
			strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

/* Connects to host:port, retrying until the deadline; the socket or -1. */
static int tcp_connect(const char *host, const char *port, double deadline)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai;
	int fd, rc, err = 0;

	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "bench_wr: %s:%s: %s\n", host, port,
			gai_strerror(rc));
		return -1;
	}
	do {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0)
			break;
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		err = errno;
		close(fd);
		fd = -1;
		usleep(100000);
	} while (now_s() < deadline);
	if (fd < 0)
		fprintf(stderr, "bench_wr: no server at %s:%s: %s\n", host,
			port, strerror(err ? err : errno));
	freeaddrinfo(ai);
	return fd;
}

/* -S: one client's QP served; its WRITEs checked once it says it is done. */
static int run_server(struct res *r, const struct opts *o)
{
	double deadline = now_s() + o->timeout;
	struct end me, peer;
	int lfd, fd = -1, ret = -1;
	uint32_t psn = (uint32_t)lrand48();
	char c;

	r->nqp = 1;
	if (setup(r, o->dev, o->gidx)) {
		perror("bench_wr: setup");
		return -1;
	}
	fill(r->buf);
	lfd = tcp_listen(o->port);
	if (lfd < 0)
		return -1;
	if (wait_fd(lfd, POLLIN, deadline, "a client")) {
		close(lfd);
		return -1;
	}
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	close(lfd);
	if (fd < 0) {
		perror("bench_wr: accept");
		return -1;
	}
	local_end(r, r->qp[0], psn, &me);
	if (recv_end(fd, &peer, deadline) || send_end(fd, &me, deadline))
		goto out;
	if (connect_qp(r, r->qp[0], &peer, me.psn, o->gidx)) {
		perror("bench_wr: connecting the QP");
		goto out;
	}
	printf("bench_wr: server qpn=0x%x peer_qpn=0x%x\n", me.qpn, peer.qpn);
	fflush(stdout);
	if (send_byte(fd, 'R', deadline) ||
	    recv_byte(fd, &c, deadline, "the client to be done"))
		goto out;
	ret = written(r->buf) ? 0 : -1;
	if (send_byte(fd, ret ? 'B' : 'K', deadline))
		ret = -1;
	printf("bench_wr: server done, data %s\n", ret ? "NOT written" : "ok");
out:
	close(fd);
	return ret;
}

/* Waits until the file path exists (bounded). */
static int wait_file(const char *path, double deadline)
{
	struct stat st;

	while (stat(path, &st)) {
		if (now_s() > deadline) {
			fprintf(stderr, "bench_wr: no %s after the timeout\n",
				path);
			return -1;
		}
		usleep(50000);
	}
	return 0;
}

/* -C: the loop toward the server's buffer, then done said and checked. */
static int run_client(struct res *r, const struct opts *o)
{
	double deadline = now_s() + o->timeout;
	struct end me, peer;
	uint32_t psn = (uint32_t)lrand48();
	int fd, ret = -1;
	char c;

	r->nqp = 1;
	if (setup(r, o->dev, o->gidx)) {
		perror("bench_wr: setup");
		return -1;
	}
	fill(r->buf);
	fd = tcp_connect(o->host, o->cport, deadline);
	if (fd < 0)
		return -1;
	local_end(r, r->qp[0], psn, &me);
	if (send_end(fd, &me, deadline) || recv_end(fd, &peer, deadline))
		goto out;
	if (connect_qp(r, r->qp[0], &peer, me.psn, o->gidx)) {
		perror("bench_wr: connecting the QP");
		goto out;
	}
	if (recv_byte(fd, &c, deadline, "the server's QP") || c != 'R')
		goto out;
	printf("bench_wr: client qpn=0x%x peer_qpn=0x%x\n", me.qpn, peer.qpn);
	fflush(stdout);
	/* The go file: what the caller waited for (the QP protected). */
	if (o->go && wait_file(o->go, now_s() + o->timeout))
		goto out;
	ret = measure(r, o, peer.addr, peer.rkey, CALIB_POLLS);
	deadline = now_s() + o->timeout;
	if (send_byte(fd, 'D', deadline) ||
	    recv_byte(fd, &c, deadline, "the server's check"))
		ret = -1;
	else if (c != 'K') {
		fprintf(stderr, "bench_wr: data not written at the server\n");
		ret = -1;
	}
out:
	close(fd);
	return ret;
}

/* -T: a thread that only waits. glibc's system-call wrappers take their
 * cancellable path in a multi-threaded process, which costs instructions
 * around rxe's doorbell write(); -T makes runs comparable. */
static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	struct opts o = { .gidx = 1,
			  .sig_every = SIG_EVERY,
			  .timeout = TIMEOUT_S };
	struct res r = { 0 };
	int ch, ret;
	pthread_t t;
	char *colon;

	while ((ch = getopt(argc, argv, "C:d:g:i:n:s:S:t:Tw:h")) != -1) {
		switch (ch) {
		case 'T':
			if (pthread_create(&t, NULL, idle, NULL)) {
				perror("bench_wr: pthread_create");
				return 1;
			}
			pthread_detach(t);
			break;
		case 'C':
			o.host = optarg;
			break;
		case 'd':
			o.dev = optarg;
			break;
		case 'g':
			o.gidx = atoi(optarg);
			break;
		case 'n':
			o.n = atol(optarg);
			break;
		case 's':
			o.sig_every = atoi(optarg);
			break;
		case 'S':
			o.port = optarg;
			break;
		case 't':
			o.timeout = atoi(optarg);
			break;
		case 'i':
			o.nap_us = atol(optarg);
			break;
		case 'w':
			o.go = optarg;
			break;
		default:
			usage();
		}
	}
	if (!o.dev || optind != argc || (o.port && o.host) ||
	    (!o.port && o.n <= 0) || o.sig_every < 1 || o.sig_every > WINDOW ||
	    o.timeout < 1 || o.nap_us < 0 || o.nap_us >= 1000000)
		usage();
	if (o.host) {
		colon = strrchr(o.host, ':');
		if (!colon || colon == o.host || !colon[1])
			usage();
		*colon = 0;
		o.cport = colon + 1;
	}
	srand48(getpid() ^ (long)(now_s() * 1e6));
	if (o.port)
		ret = run_server(&r, &o);
	else if (o.host)
		ret = run_client(&r, &o);
	else
		ret = run_loopback(&r, &o);
	teardown(&r);
	return ret ? 1 : 0;
}
