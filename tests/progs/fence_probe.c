/* SPDX-License-Identifier: MIT */
/*
 * fence_probe.c - measures, on a real verbs stack, the facts r2cc's fence
 * and PSN replay rely on: PSN accounting, what ibv_query_qp says in ERR,
 * receive/send flushes, QP reuse, an RNR NAK behind a READ reply, retry
 * timing and the round trip through SQD. Prints `fact NAME=VALUE'.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MTU_BYTES 1024
#define BUF_SIZE (512 * 1024)
#define RBUF 8192 /* one receive buffer */
#define REMOTE_OFF (256 * 1024) /* WRITE/READ target area */
#define PSN_MASK 0xffffffU
#define MAXQ 8

struct ep { /* what one QP tells its peer */
	uint32_t qpn, psn, rkey, pad;
	uint64_t addr;
	uint8_t gid[16];
};

struct opts {
	const char *dev, *server, *test, *name, *ops, *hole, *unhole, *retries;
	int gidx, ibport, tcpport, k, m, n;
	uint32_t psn;
	double wait;
} o = { .dev = "rxe0",
	.test = "acct",
	.ops = "send:5000",
	.retries = "7:14,7:8,1:14,1:8",
	.gidx = 1,
	.ibport = 1,
	.tcpport = 18700,
	.k = 8,
	.m = 3,
	.n = 6,
	.wait = 30 };

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_mr *mr;
static char *buf;
static union ibv_gid gid;
static int sock, client;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "fence_probe: %s: %s\n", what, strerror(err));
	exit(1);
}

static void fact(const char *name, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void fact(const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("fact %s.%s=", o.name ? o.name : o.test, name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* ---- out-of-band TCP: every exchange is symmetric (send, then receive) */

static void xchg(const void *out, void *in, size_t len)
{
	size_t d;
	ssize_t k;

	for (d = 0; d < len; d += k)
		if ((k = send(sock, (const char *)out + d, len - d,
			      MSG_NOSIGNAL)) <= 0)
			die("oob send", k < 0 ? errno : EPIPE);
	for (d = 0; d < len; d += k)
		if ((k = recv(sock, (char *)in + d, len - d, 0)) <= 0)
			die("oob recv", k < 0 ? errno : ECONNRESET);
}

/* Barrier that also swaps one value with the peer. */
static uint64_t sync64(uint64_t v)
{
	uint64_t in;

	v = htobe64(v);
	xchg(&v, &in, 8);
	return be64toh(in);
}

static void oob_open(void)
{
	struct timeval tv = { .tv_sec = 60 };
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM },
			*ai;
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(o.tcpport) };
	char svc[16];
	int one = 1, l, i;

	if (!client) {
		l = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1))
			die("listen", errno);
		setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		sock = accept(l, NULL, NULL);
		if (sock < 0)
			die("accept", errno);
		close(l);
	} else {
		snprintf(svc, sizeof(svc), "%d", o.tcpport);
		if (getaddrinfo(o.server, svc, &hints, &ai))
			die("getaddrinfo", EHOSTUNREACH);
		for (i = 0; i < 150; i++) {
			sock = socket(AF_INET, SOCK_STREAM, 0);
			if (!connect(sock, ai->ai_addr, ai->ai_addrlen))
				break;
			close(sock);
			sock = -1;
			usleep(200000);
		}
		if (sock < 0)
			die("connect", errno);
		freeaddrinfo(ai);
	}
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* ---- verbs helpers */

static void dev_open(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	int i;

	for (i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), o.dev))
			ctx = ibv_open_device(l[i]);
	if (!ctx)
		die(o.dev, ENODEV);
	ibv_free_device_list(l);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	buf = calloc(1, BUF_SIZE);
	if (!pd || !cq || !buf)
		die("pd/cq", errno);
	mr = ibv_reg_mr(pd, buf, BUF_SIZE,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr || ibv_query_gid(ctx, o.ibport, o.gidx, &gid))
		die("mr/gid", errno);
	fcntl(ctx->async_fd, F_SETFL,
	      fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
}

static int to_init(struct ibv_qp *qp);

static struct ibv_qp *qp_new(struct ibv_srq *srq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.srq = srq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64,
			 .max_recv_wr = srq ? 0 : 64,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	/* INIT at once: rxe refuses receives posted in RESET (EINVAL) */
	if (!qp || to_init(qp))
		die("create_qp/INIT", errno);
	return qp;
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = o.ibport,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS);
}

static int to_rtr(struct ibv_qp *qp, const struct ep *r)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = r->qpn,
		.rq_psn = r->psn,
		.max_dest_rd_atomic = 4,
		.min_rnr_timer = 12,
		.ah_attr = { .is_global = 1,
			     .port_num = o.ibport,
			     .grh = { .hop_limit = 1, .sgid_index = o.gidx } },
	};

	memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER);
}

static int to_rts(struct ibv_qp *qp, uint32_t psn, int retry, int tmo)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = psn,
		.timeout = tmo,
		.retry_cnt = retry,
		.rnr_retry = 7,
		.max_rd_atomic = 4,
	};

	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state s, double *us)
{
	struct ibv_qp_attr a = { .qp_state = s };
	double t = now();
	int ret = ibv_modify_qp(qp, &a, IBV_QP_STATE);

	if (us)
		*us = (now() - t) * 1e6;
	return ret;
}

/* Swap endpoints with the peer and bring qp (in INIT) to RTS; our sq starts
 * at psn. */
static struct ep connect_qp(struct ibv_qp *qp, uint32_t psn, int retry, int tmo)
{
	struct ep me = { .qpn = htobe32(qp->qp_num),
			 .psn = htobe32(psn),
			 .rkey = htobe32(mr->rkey),
			 .addr = htobe64((uintptr_t)buf) },
		  r;

	memcpy(me.gid, gid.raw, 16);
	xchg(&me, &r, sizeof(r));
	r.qpn = be32toh(r.qpn);
	r.psn = be32toh(r.psn);
	r.rkey = be32toh(r.rkey);
	r.addr = be64toh(r.addr);
	if (to_rtr(qp, &r) || to_rts(qp, psn, retry, tmo))
		die("connect (RTR/RTS)", errno);
	return r;
}

static void query(struct ibv_qp *qp, uint32_t *sq, uint32_t *rq, int *st)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int ret = ibv_query_qp(
		qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &ia);

	if (ret) {
		printf("query_qp failed: %s\n", strerror(ret));
		*sq = *rq = ~0U;
		*st = -1;
		return;
	}
	*sq = a.sq_psn;
	*rq = a.rq_psn;
	*st = a.qp_state;
}

static void post_recv(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t id,
		      int slot)
{
	struct ibv_sge s = { (uintptr_t)buf + slot * RBUF, RBUF, mr->lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 },
			   *bad;
	int ret = srq ? ibv_post_srq_recv(srq, &w, &bad) :
			ibv_post_recv(qp, &w, &bad);

	if (ret)
		die("post_recv", ret);
}

static int post_send(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t id,
		     uint32_t len, const struct ep *r, int signaled)
{
	struct ibv_sge s = { (uintptr_t)buf + REMOTE_OFF, len, mr->lkey };
	struct ibv_send_wr w = {
		.wr_id = id, .sg_list = &s, .num_sge = len ? 1 : 0,
		.opcode = op, .send_flags = signaled ? IBV_SEND_SIGNALED : 0,
		.imm_data = htonl(0x1234),
		.wr.rdma = { .remote_addr = r->addr + REMOTE_OFF,
			     .rkey = r->rkey },
	}, *bad;

	if (op == IBV_WR_RDMA_READ) /* land beside the source area */
		s.addr += 128 * 1024;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	    op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		s.addr += 128 * 1024;
		s.length = 8;
		w.num_sge = 1;
		w.wr.atomic.remote_addr = r->addr + REMOTE_OFF;
		w.wr.atomic.rkey = r->rkey;
		w.wr.atomic.compare_add = 1;
		w.wr.atomic.swap = 2;
	}
	return ibv_post_send(qp, &w, &bad);
}

/* Poll up to n completions within ms; returns how many came. */
static int poll_n(struct ibv_wc *wc, int n, double ms, double *last_ms)
{
	double t0 = now(), end = t0 + ms / 1000;
	int got = 0, k;

	while (got < n && now() < end) {
		k = ibv_poll_cq(cq, n - got, wc + got);
		if (k < 0)
			die("poll_cq", EIO);
		if (k && last_ms)
			*last_ms = (now() - t0) * 1000;
		got += k;
		if (!k)
			usleep(200);
	}
	return got;
}

static uint32_t pkts(uint32_t len)
{
	return len ? (len + MTU_BYTES - 1) / MTU_BYTES : 1;
}

/* Async events (e.g. LAST_WQE_REACHED) seen within ms, as a list. */
static void async_events(double ms, char *out, size_t len)
{
	struct ibv_async_event ev;
	double end = now() + ms / 1000;
	size_t n = 0;

	out[0] = 0;
	while (now() < end) {
		if (ibv_get_async_event(ctx, &ev)) {
			usleep(1000);
			continue;
		}
		n += snprintf(out + n, len - n, "%s%s", n ? "," : "",
			      ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
		if (n >= len)
			break;
	}
	if (!out[0])
		snprintf(out, len, "none");
}

static const char *wcs(enum ibv_wc_status s)
{
	static char other[32];

	switch (s) {
	case IBV_WC_SUCCESS:
		return "SUCCESS";
	case IBV_WC_WR_FLUSH_ERR:
		return "WR_FLUSH_ERR";
	case IBV_WC_RETRY_EXC_ERR:
		return "RETRY_EXC_ERR";
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return "RNR_RETRY_EXC_ERR";
	case IBV_WC_REM_OP_ERR:
		return "REM_OP_ERR";
	default:
		snprintf(other, sizeof(other), "status%d", s);
		return other;
	}
}

static uint32_t psn_diff(uint32_t a, uint32_t b)
{
	return (a - b) & PSN_MASK;
}

/* ---- fact 1, 4, 5: PSN accounting per WR, and query_qp in ERR */

static const struct {
	const char *name;
	enum ibv_wr_opcode op;
	int recv; /* consumes a receive WR at the responder */
} optab[] = {
	{ "send", IBV_WR_SEND, 1 },
	{ "write", IBV_WR_RDMA_WRITE, 0 },
	{ "writeimm", IBV_WR_RDMA_WRITE_WITH_IMM, 1 },
	{ "read", IBV_WR_RDMA_READ, 0 },
	{ "fadd", IBV_WR_ATOMIC_FETCH_AND_ADD, 0 },
	{ "cas", IBV_WR_ATOMIC_CMP_AND_SWP, 0 },
};
#define NOPS (sizeof(optab) / sizeof(optab[0]))

struct wr_spec {
	int op;
	uint32_t len;
};

static int parse_ops(struct wr_spec *w, int max)
{
	char *s = strdup(o.ops), *save, *t;
	int n = 0, i;

	for (t = strtok_r(s, ",", &save); t && n < max;
	     t = strtok_r(NULL, ",", &save)) {
		char *c = strchr(t, ':');

		if (!c)
			die(t, EINVAL);
		*c = 0;
		for (i = 0; i < (int)NOPS && strcmp(optab[i].name, t); i++)
			;
		if (i == (int)NOPS)
			die(t, EINVAL);
		w[n].op = i;
		w[n++].len = strtoul(c + 1, NULL, 0);
	}
	free(s);
	return n;
}

static void test_acct(void)
{
	struct wr_spec w[16];
	int n = parse_ops(w, 16), i, st, sst, nrecv = 0;
	uint32_t sq, rq, sq0, rq0, sq1, rq1, total = 0, expect = 0;
	struct ibv_qp *qp = qp_new(NULL);
	struct ibv_wc wc;
	const char *side;
	char key[64];
	struct ep r;
	double us;
	uint64_t v;

	for (i = 0; i < n; i++)
		if (!client && optab[w[i].op].recv)
			post_recv(qp, NULL, 100 + nrecv, nrecv), nrecv++;
	r = connect_qp(qp, o.psn, 7, 14);
	query(qp, &sq, &rq, &st);
	/* client: sq0 = its sq_psn; rq0 = the responder's rq_psn */
	v = sync64(client ? sq : rq);
	sq0 = client ? sq : (uint32_t)v;
	rq0 = client ? (uint32_t)v : rq;
	sq1 = sq0;
	rq1 = rq0;
	if (client)
		fact("start", "sq_psn=0x%06x rq_psn=0x%06x", sq0, rq0);
	for (i = 0; i < n; i++) {
		const char *nm = optab[w[i].op].name;

		if (client) {
			if (post_send(qp, optab[w[i].op].op, i, w[i].len, &r,
				      1) ||
			    poll_n(&wc, 1, 5000, NULL) != 1 ||
			    wc.status != IBV_WC_SUCCESS)
				die("acct: WR did not complete", EIO);
		} else if (optab[w[i].op].recv &&
			   (poll_n(&wc, 1, 5000, NULL) != 1 ||
			    wc.status != IBV_WC_SUCCESS)) {
			die("acct: no receive completion", EIO);
		}
		sync64(0); /* the WR is complete at both ends */
		query(qp, &sq, &rq, &st);
		v = sync64(client ? sq : rq);
		sq1 = client ? sq : (uint32_t)v;
		rq1 = client ? (uint32_t)v : rq;
		if (client) {
			snprintf(key, sizeof(key), "%s%u.pkts", nm, w[i].len);
			fact(key, "%u", pkts(w[i].len));
			snprintf(key, sizeof(key), "%s%u.sq_adv", nm, w[i].len);
			fact(key, "%u", psn_diff(sq1, sq0));
			snprintf(key, sizeof(key), "%s%u.rq_adv", nm, w[i].len);
			fact(key, "%u", psn_diff(rq1, rq0));
		}
		expect += pkts(w[i].len);
		sq0 = sq1;
		rq0 = rq1;
	}
	total = psn_diff(rq1, o.psn);
	if (client) {
		fact("end", "sq_psn=0x%06x rq_psn=0x%06x", sq1, rq1);
		fact("expected_total", "%u", expect);
		fact("sq_total", "%u", psn_diff(sq1, o.psn));
		fact("rq_total", "%u", total);
	}
	/* Fence both ends, then read the PSNs back. */
	if (to_state(qp, IBV_QPS_ERR, &us))
		die("modify to ERR", errno);
	usleep(100000);
	query(qp, &sq, &rq, &st);
	side = client ? "requester" : "responder";
	snprintf(key, sizeof(key), "%s.modify_err_us", side);
	fact(key, "%.0f", us);
	snprintf(key, sizeof(key), "%s.err_query", side);
	fact(key, "state=%d sq_psn=0x%06x rq_psn=0x%06x", st, sq, rq);
	snprintf(key, sizeof(key), "%s.err_psn_kept", side);
	fact(key, "%s",
	     st == IBV_QPS_ERR && (client ? sq == sq1 : rq == rq1) ? "yes" :
								     "no");
	/* The client also reports what the responder read in ERR. */
	v = sync64(((uint64_t)st << 48) | ((uint64_t)sq << 24) | rq);
	if (client) {
		sst = v >> 48;
		fact("responder_err_rq_psn", "0x%06x", (uint32_t)v & PSN_MASK);
		fact("responder_err_state", "%d", sst);
		fact("responder_err_sq_psn", "0x%06x",
		     (uint32_t)(v >> 24) & PSN_MASK);
		fact("responder_err_rq_equals_rts", "%s",
		     ((uint32_t)v & PSN_MASK) == rq1 ? "yes" : "no");
		fact("requester_err_sq_equals_rts", "%s",
		     sq == sq1 ? "yes" : "no");
	}
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;
}

/* ---- fact 2: receive flush, plain RQ or SRQ */

static void test_rflush(int use_srq)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 64,
						  .max_sge = 1 } };
	struct ibv_srq *srq = NULL;
	struct ibv_qp *qp, *qp2;
	struct ibv_wc wc[64];
	int i, got, order = 1, flushst = 1, left = o.k - o.m;
	double us, last = 0;
	char ev[256], ids[512];
	size_t n = 0;
	struct ep r;

	if (use_srq && !client && !(srq = ibv_create_srq(pd, &sa)))
		die("create_srq", errno);
	qp = qp_new(srq);
	if (!client)
		for (i = 0; i < o.k; i++)
			post_recv(qp, srq, 100 + i, i);
	r = connect_qp(qp, o.psn, 7, 14);
	if (client) {
		for (i = 0; i < o.m; i++)
			if (post_send(qp, IBV_WR_SEND, i, 64, &r, 1))
				die("post_send", EIO);
		if (poll_n(wc, o.m, 5000, NULL) != o.m)
			die("rflush: sends did not complete", EIO);
	} else {
		if (poll_n(wc, o.m, 5000, NULL) != o.m)
			die("rflush: receives did not complete", EIO);
		for (i = 0; i < o.m; i++)
			if (wc[i].status || wc[i].wr_id != (uint64_t)100 + i)
				die("rflush: unexpected receive", EIO);
	}
	sync64(0); /* nothing more is in flight towards the responder */
	if (!client) {
		if (to_state(qp, IBV_QPS_ERR, &us))
			die("modify to ERR", errno);
		got = poll_n(wc, left, 2000, &last);
		/* anything beyond what was posted would also be news */
		got += poll_n(wc + got, 64 - got, 100, NULL);
		for (i = 0; i < got; i++) {
			order &= wc[i].wr_id == (uint64_t)100 + o.m + i;
			flushst &= wc[i].status == IBV_WC_WR_FLUSH_ERR;
			n += snprintf(ids + n, sizeof(ids) - n, "%s%lu",
				      i ? "," : "", (unsigned long)wc[i].wr_id);
		}
		async_events(300, ev, sizeof(ev));
		fact("posted", "%d", o.k);
		fact("consumed", "%d", o.m);
		fact("modify_err_us", "%.0f", us);
		fact("flushed", "%d", got);
		fact("flushed_wr_ids", "%s", got ? ids : "none");
		fact("flush_in_order", "%s", got && order ? "yes" : "no");
		fact("flush_status_all_WR_FLUSH_ERR", "%s",
		     got && flushst ? "yes" : "no");
		fact("last_flush_ms_after_modify_returned", "%.1f", last);
		fact("last_flush_ms_after_modify_called", "%.1f",
		     last + us / 1000);
		fact("async_events", "%s", ev);
	}
	if (!use_srq) {
		sync64(0);
		return;
	}
	/* Are the SRQ's receives still there? A new QP on it consumes them. */
	qp2 = qp_new(srq);
	r = connect_qp(qp2, o.psn + 0x100, 7, 14);
	if (client) {
		for (i = 0; i < left; i++)
			if (post_send(qp2, IBV_WR_SEND, i, 64, &r, 1))
				die("post_send", EIO);
		got = poll_n(wc, left, 5000, NULL);
		for (i = 0; i < got; i++)
			if (wc[i].status)
				got = -1;
		fact("resend_ok", "%s", got == left ? "yes" : "no");
	} else {
		got = poll_n(wc, left, 5000, NULL);
		n = 0;
		order = 1;
		for (i = 0; i < got; i++) {
			order &= wc[i].wr_id == (uint64_t)100 + o.m + i &&
				 wc[i].status == IBV_WC_SUCCESS &&
				 wc[i].qp_num == qp2->qp_num;
			n += snprintf(ids + n, sizeof(ids) - n, "%s%lu",
				      i ? "," : "", (unsigned long)wc[i].wr_id);
		}
		fact("srq_reused_by_new_qp", "%d", got);
		fact("srq_reused_wr_ids", "%s", got ? ids : "none");
		fact("srq_reused_in_order", "%s", got && order ? "yes" : "no");
	}
	sync64(0);
}

/* ---- fact 3: send flush with the ACKs black-holed */

static void run_cmd(const char *what, const char *cmd)
{
	int rc = cmd ? system(cmd) : -1;

	printf("%s: `%s' -> %d\n", what, cmd ? cmd : "(none)", rc);
	if (rc)
		die(what, EIO);
}

/* Outstanding WRs, ACKs black-holed. With the default retry 7 (endless on
 * rxe) nothing completes until the program moves the QP to ERR; with a
 * small --retries the QP fails by itself (RETRY_EXC) first. */
static void test_sflush(void)
{
	struct ibv_qp *qp = qp_new(NULL);
	struct ibv_wc wc[64];
	int i, got = 0, pre = 0, order = 1, unsig = 0, st, rt = 7, tm = 14;
	uint32_t sq, rq, rq_hole;
	double us, last = 0;
	char ids[1024];
	size_t n = 0;
	struct ep r;

	if (sscanf(o.retries, "%d:%d", &rt, &tm) != 2)
		die(o.retries, EINVAL);
	r = connect_qp(qp, o.psn, rt, tm);
	sync64(0);
	if (!client)
		run_cmd("hole", o.hole);
	sync64(0);
	if (client) {
		for (i = 0; i < o.n; i++)
			if (post_send(qp, IBV_WR_RDMA_WRITE, 200 + i, 4096, &r,
				      (i % 2 == 0) || i == o.n - 1))
				die("post_send", EIO);
		usleep(o.wait * 1e6);
		pre = poll_n(wc, 64, 1, NULL);
		query(qp, &sq, &rq, &st);
		fact("retry_timeout", "%d:%d", rt, tm);
		fact("posted",
		     "%d (WRITE 4096, odd ones unsignaled but the last)", o.n);
		fact("completions_before_err", "%d", pre);
		fact("state_before_err", "%d", st);
	}
	sync64(0); /* the WRs have been out for o.wait seconds */
	query(qp, &sq, &rq, &st);
	rq_hole = sync64(rq);
	if (client) {
		fact("responder_rq_adv_before_err", "%u",
		     psn_diff(rq_hole, o.psn));
		fact("requester_sq_adv_before_err", "%u", psn_diff(sq, o.psn));
		if (to_state(qp, IBV_QPS_ERR, &us))
			die("modify to ERR", errno);
		got = pre + poll_n(wc + pre, o.n - pre, 2000, &last);
		got += poll_n(wc + got, 64 - got, 100, NULL);
		for (i = 0; i < got; i++) {
			order &= wc[i].wr_id == (uint64_t)200 + i;
			unsig += (wc[i].wr_id - 200) % 2 == 1 &&
				 wc[i].wr_id != (uint64_t)200 + o.n - 1;
			n += snprintf(ids + n, sizeof(ids) - n, "%s%lu:%s",
				      i ? " " : "", (unsigned long)wc[i].wr_id,
				      wcs(wc[i].status));
		}
		fact("modify_err_us", "%.0f", us);
		fact("completions_after_err", "%d", got - pre);
		fact("completions", "%s", got ? ids : "none");
		fact("in_order", "%s", got && order ? "yes" : "no");
		fact("unsignaled_completed", "%d", unsig);
		fact("first_status", "%s", got ? wcs(wc[0].status) : "none");
		fact("last_ms", "%.1f", last);
	}
	sync64(0);
	if (!client) {
		run_cmd("unhole", o.unhole);
		if (to_state(qp, IBV_QPS_ERR, &us))
			die("modify to ERR", errno);
		query(qp, &sq, &rq, &st);
		fact("responder_modify_err_us", "%.0f", us);
		fact("responder_err_state", "%d", st);
		fact("responder_err_rq_adv", "%u", psn_diff(rq, o.psn));
	}
	sync64(0);
}

/* ---- fact 6: reuse a QP object for another remote QP */

static void test_reuse(void)
{
	struct ibv_qp *qp = qp_new(NULL), *qp2 = NULL;
	struct ibv_wc wc;
	double us_err, us_reset;
	int ok, ret;
	struct ep r;

	if (!client) {
		qp2 = qp_new(NULL);
		post_recv(qp, NULL, 300, 0);
		post_recv(qp2, NULL, 400, 1);
	}
	r = connect_qp(qp, o.psn, 7, 14);
	if (client) {
		ok = !post_send(qp, IBV_WR_SEND, 1, 64, &r, 1) &&
		     poll_n(&wc, 1, 5000, NULL) == 1 && !wc.status;
		fact("first_send_ok", "%s", ok ? "yes" : "no");
		if (to_state(qp, IBV_QPS_ERR, &us_err))
			die("modify to ERR", errno);
		poll_n(&wc, 1, 200, NULL);
		ret = to_init(qp);
		fact("err_to_init_ret", "%s", ret ? strerror(ret) : "0");
		ret = to_state(qp, IBV_QPS_RESET, &us_reset);
		fact("err_to_reset_ret", "%s", ret ? strerror(ret) : "0");
		fact("modify_err_us", "%.0f", us_err);
		fact("modify_reset_us", "%.0f", us_reset);
	} else {
		ok = poll_n(&wc, 1, 5000, NULL) == 1 && !wc.status &&
		     wc.qp_num == qp->qp_num;
		fact("first_recv_on_qp1", "%s", ok ? "yes" : "no");
	}
	sync64(0);
	/* The client reconnects its same QP object to the server's qp2. */
	if (client) {
		uint32_t old = qp->qp_num;

		if (to_init(qp))
			die("RESET to INIT", errno);
		r = connect_qp(qp, o.psn + 0x1000, 7, 14);
		ok = !post_send(qp, IBV_WR_SEND, 2, 64, &r, 1) &&
		     poll_n(&wc, 1, 5000, NULL) == 1 && !wc.status;
		fact("new_remote_qpn", "0x%x", r.qpn);
		fact("same_local_qpn", "%s", qp->qp_num == old ? "yes" : "no");
		fact("send_after_reconnect_ok", "%s", ok ? "yes" : "no");
	} else {
		connect_qp(qp2, o.psn + 0x2000, 7, 14);
		ok = poll_n(&wc, 1, 5000, NULL) == 1 && !wc.status &&
		     wc.qp_num == qp2->qp_num && wc.wr_id == 400;
		fact("recv_on_new_qp", "%s", ok ? "yes" : "no");
	}
	sync64(0);
}

/* ---- fact 6b: what RESET leaves of receives posted before an ERR */

/*
 * The server posts 32 receives, the QP goes to ERR and, o.wait seconds
 * later, to RESET (r2cc re-arms a fenced standby so); then the flushes
 * the CQ holds are counted, the QP is connected again (to a new QP of the
 * client) with no receive posted, and the client SENDs once. A receive
 * completing then took a WR posted before the ERR: RESET left it in the
 * queue, and a re-armed QP would hand a message to a stale buffer.
 */
static void test_rqreset(void)
{
	struct ibv_qp *qp = qp_new(NULL);
	struct ibv_wc wc[64];
	int i, got, flushed = 0;
	struct ep r;

	if (!client)
		for (i = 0; i < 32; i++)
			post_recv(qp, NULL, 900 + i, i);
	r = connect_qp(qp, o.psn, 7, 14);
	sync64(0);
	if (!client) {
		if (to_state(qp, IBV_QPS_ERR, NULL))
			die("modify to ERR", errno);
		if (o.wait > 0)
			usleep(o.wait * 1e6);
		if (to_state(qp, IBV_QPS_RESET, NULL))
			die("modify to RESET", errno);
		got = poll_n(wc, 64, 200, NULL);
		for (i = 0; i < got; i++)
			flushed += wc[i].status == IBV_WC_WR_FLUSH_ERR;
		fact("flushed_by_reset", "%d", flushed);
		if (to_init(qp))
			die("RESET to INIT", errno);
		connect_qp(qp, o.psn + 0x1000, 7, 14);
		got = poll_n(wc, 1, 3000, NULL);
		fact("stale_recv_after_reset", "%s", got ? "yes" : "no");
		if (got)
			fact("stale_recv_wr_id", "%llu status %s",
			     (unsigned long long)wc[0].wr_id,
			     ibv_wc_status_str(wc[0].status));
	} else {
		struct ibv_qp *qp2 = qp_new(NULL);

		(void)r;
		r = connect_qp(qp2, o.psn + 0x2000, 7, 14);
		if (post_send(qp2, IBV_WR_SEND, 1, 64, &r, 1))
			die("post_send", EIO);
		got = poll_n(wc, 1, 3000, NULL);
		fact("send_completed", "%s",
		     got && !wc[0].status ? "yes" : "no");
	}
	sync64(0);
}

/* The device's hw counter @name (rxe: ports/1/hw_counters), -1 if none */
static long hw_counter(const char *name)
{
	char path[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/%d/hw_counters/%s", o.dev,
		 o.ibport, name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* ---- fact 6c: a SEND behind a multi-packet READ, no receive posted
 *
 * What each of r2cc's moves makes: the peer replays a READ (128 KiB
 * here, 128 response packets) and a SEND behind it into a QP whose
 * receives are not re-posted yet (they come --wait seconds later; with
 * --wait 0 before the client posts). Facts: each WR's status in order
 * and the client QP's state after, and the RNR NAKs the client's device
 * counted meanwhile: whether rxe's requester takes the RNR NAK that
 * meets its READ reply in its stride. */
static void test_readrnr(void)
{
	struct ibv_qp *qp = qp_new(NULL);
	struct ibv_wc wc[2];
	uint32_t sq, rq;
	struct ep r;
	int st, got;

	if (!client && o.wait <= 0)
		post_recv(qp, NULL, 1, 0);
	r = connect_qp(qp, o.psn, 7, 14);
	sync64(0);
	if (!client) {
		if (o.wait > 0) {
			usleep(o.wait * 1e6);
			post_recv(qp, NULL, 1, 0);
		}
		got = poll_n(wc, 1, 10000, NULL);
		fact("recv", "%s", got ? wcs(wc[0].status) : "none");
	} else {
		long rnr = hw_counter("rcvd_rnr_err");

		if (post_send(qp, IBV_WR_RDMA_READ, 1, 128 * 1024, &r, 1) ||
		    post_send(qp, IBV_WR_SEND, 2, 64, &r, 1))
			die("post_send", EIO);
		got = poll_n(wc, 2, 10000, NULL);
		fact("read", "%s", got > 0 ? wcs(wc[0].status) : "none");
		fact("send", "%s", got > 1 ? wcs(wc[1].status) : "none");
		fact("rnr_naks", "%ld",
		     rnr < 0 ? -1 : hw_counter("rcvd_rnr_err") - rnr);
		query(qp, &sq, &rq, &st);
		fact("qp_state", "%s",
		     st == IBV_QPS_RTS ? "RTS" :
		     st == IBV_QPS_ERR ? "ERR" :
					 "other");
	}
	sync64(0);
}

/* ---- fact 7: time to RETRY_EXC under a black hole */

static void test_retry(void)
{
	int rt[MAXQ], tm[MAXQ], nq = 0, i, got, k;
	struct ibv_qp *qp[MAXQ];
	struct ep r[MAXQ];
	char *s = strdup(o.retries), *t, *save;
	double t0, when[MAXQ];
	struct ibv_wc wc;
	int status[MAXQ];
	char key[32];

	for (t = strtok_r(s, ",", &save); t && nq < MAXQ;
	     t = strtok_r(NULL, ",", &save)) {
		if (sscanf(t, "%d:%d", &rt[nq], &tm[nq]) != 2)
			die(t, EINVAL);
		nq++;
	}
	free(s);
	for (i = 0; i < nq; i++) {
		qp[i] = qp_new(NULL);
		r[i] = connect_qp(qp[i], o.psn + i * 0x10000, rt[i], tm[i]);
	}
	if (client) {
		for (i = 0; i < nq; i++)
			if (post_send(qp[i], IBV_WR_RDMA_WRITE, 600 + i, 64,
				      &r[i], 1))
				die("post_send", EIO);
		for (i = 0; i < nq; i++)
			if (poll_n(&wc, 1, 5000, NULL) != 1 || wc.status)
				die("retry: warm-up write failed", EIO);
	}
	sync64(0);
	run_cmd("hole", o.hole); /* both directions: a full black hole */
	sync64(0);
	if (client) {
		for (i = 0; i < nq; i++) {
			status[i] = -1;
			if (post_send(qp[i], IBV_WR_RDMA_WRITE, i, 64, &r[i],
				      1))
				die("post_send", EIO);
		}
		t0 = now();
		for (got = 0; got < nq && now() - t0 < o.wait;) {
			k = ibv_poll_cq(cq, 1, &wc);
			if (k <= 0) {
				usleep(1000);
				continue;
			}
			if (wc.wr_id < (uint64_t)nq && status[wc.wr_id] < 0) {
				status[wc.wr_id] = wc.status;
				when[wc.wr_id] = now() - t0;
				got++;
			}
		}
		fact("window_s", "%.0f", o.wait);
		for (i = 0; i < nq; i++) {
			snprintf(key, sizeof(key), "r%dt%d", rt[i], tm[i]);
			if (status[i] < 0)
				fact(key, "none");
			else
				fact(key, "%s@%.2fs", wcs(status[i]), when[i]);
		}
	}
	sync64(0);
	run_cmd("unhole", o.unhole);
	sync64(0);
}

/* ---- fact 8: the device removed under a connected QP */

/* Poll up to n completions within ms: how many, or -1 once a poll fails
 * (no exit: what fails is the fact). */
static int poll_try(struct ibv_wc *wc, int n, double ms)
{
	double end = now() + ms / 1000;
	int got = 0, k;

	while (got < n && now() < end) {
		k = ibv_poll_cq(cq, n - got, wc + got);
		if (k < 0)
			return -1;
		got += k;
		if (!k)
			usleep(200);
	}
	return got;
}

/* A NIC that dies whole, as rxe can show it: the client's device is
 * removed (--hole: a command that starts the removal in the background
 * and returns) while its QP is connected. Which async events come within
 * --wait s, and what a post, a poll, a query and a move to ERR return
 * then. Whether the removal waits for the program is the scenario's to
 * time (it ends with the program). */
static void test_devdel(void)
{
	struct ibv_qp *qp = qp_new(NULL);
	struct ibv_qp_attr a;
	struct ibv_wc wc[8];
	struct timespec ts;
	char evs[256];
	int ret, got, st;
	uint32_t sq, rq;
	struct ep r;

	r = connect_qp(qp, o.psn, 7, 14);
	sync64(0);
	if (client) {
		ret = post_send(qp, IBV_WR_RDMA_WRITE, 1, 4096, &r, 1);
		got = ret ? 0 : poll_n(wc, 1, 5000, NULL);
		fact("write_before", "%s",
		     got ? wcs(wc[0].status) :
		     ret ? strerror(ret) :
			   "none");
		run_cmd("remove", o.hole);
		async_events(o.wait * 1000, evs, sizeof(evs));
		fact("async_events", "%s", evs);
		ret = post_send(qp, IBV_WR_RDMA_WRITE, 2, 4096, &r, 1);
		fact("post_send_after", "%d%s%s", ret, ret ? " " : "",
		     ret ? strerror(ret) : "");
		got = ret ? 0 : poll_try(wc, 1, 3000);
		fact("write_after", "%s",
		     got ? wcs(wc[0].status) :
		     ret ? "not posted" :
			   "none");
		query(qp, &sq, &rq, &st);
		fact("query_after_state", "%d", st);
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_ERR;
		ret = ibv_modify_qp(qp, &a, IBV_QP_STATE);
		fact("modify_err_after", "%d%s%s", ret, ret ? " " : "",
		     ret ? strerror(ret) : "");
		got = poll_try(wc, 8, 1000);
		fact("flushes_after", "%d", got);
		ret = ibv_destroy_qp(qp);
		fact("destroy_qp_after", "%d", ret);
		clock_gettime(CLOCK_REALTIME, &ts);
		fact("done_at", "%lld.%09ld", (long long)ts.tv_sec, ts.tv_nsec);
	}
	sync64(0);
}

/* ---- fact 9: a connected QP's ACK timeout and retry count changed
 * through SQD (RTS -> SQD, SQD -> SQD with them, SQD -> RTS): r2cc gives a
 * QP it cannot protect the program's own back so. A send posted while the
 * send queue drains: does it go once the QP is at RTS again, after an
 * empty post, or only with the next real one? Then whether the new pair
 * is what a black hole meets. */

static void test_sqd(void)
{
	struct ibv_qp *qp = qp_new(NULL);
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	struct ibv_send_wr *bad;
	struct ibv_wc wc[8];
	double t0, drained = -1, rexc = -1;
	int i, ret, got, n;
	struct ep r;

	/* r2cc's pair for a failover within a few ms */
	r = connect_qp(qp, o.psn, 1, 8);
	sync64(0);
	if (client) {
		for (i = 0; i < 4; i++)
			if (post_send(qp, IBV_WR_RDMA_WRITE, i, 65536, &r, 1))
				die("post_send", EIO);
		ret = to_state(qp, IBV_QPS_SQD, NULL);
		fact("to_sqd", "%s", ret ? strerror(ret) : "0");
		memset(&a, 0, sizeof(a));
		ret = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
		fact("state", "%d", ret ? -1 : (int)a.qp_state);
		fact("draining_at_once", "%d", ret ? -1 : (int)a.sq_draining);
		memset(&a, 0, sizeof(a));
		a.timeout = 16;
		a.retry_cnt = 3;
		ret = ibv_modify_qp(qp, &a, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT);
		fact("modify_while_draining", "%s", ret ? strerror(ret) : "0");
		ret = post_send(qp, IBV_WR_RDMA_WRITE, 4, 64, &r, 1);
		fact("post_in_sqd", "%s", ret ? strerror(ret) : "0");
		for (t0 = now(); now() - t0 < 5;) {
			if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
				break;
			if (!a.sq_draining) {
				drained = (now() - t0) * 1000;
				break;
			}
			usleep(100);
		}
		fact("drained_ms", "%.1f", drained);
		memset(&a, 0, sizeof(a));
		a.timeout = 16;
		a.retry_cnt = 3;
		ret = ibv_modify_qp(qp, &a, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT);
		fact("modify_drained", "%s", ret ? strerror(ret) : "0");
		ret = to_state(qp, IBV_QPS_RTS, NULL);
		fact("to_rts", "%s", ret ? strerror(ret) : "0");
		memset(&a, 0, sizeof(a));
		ret = ibv_query_qp(
			qp, &a,
			IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &ia);
		fact("pair_after", "%d:%d", ret ? -1 : (int)a.retry_cnt,
		     ret ? -1 : (int)a.timeout);
		got = poll_n(wc, 5, 2000, NULL);
		for (i = 0; i < got; i++)
			if (wc[i].status)
				die("sqd: a write failed", EIO);
		fact("completed", "%d", got);
		/* An empty post is no doorbell on rxe: EINVAL */
		ret = ibv_post_send(qp, NULL, &bad);
		fact("empty_post", "%s", ret ? strerror(ret) : "0");
		n = got + poll_n(wc + got, 5 - got, 500, NULL);
		fact("completed_after_empty_post", "%d", n);
		if (post_send(qp, IBV_WR_RDMA_WRITE, 5, 64, &r, 1))
			die("post_send", EIO);
		n += poll_n(wc, 6 - n, 2000, NULL);
		fact("completed_after_next_post", "%d", n);
	}
	sync64(0);
	run_cmd("hole", o.hole);
	sync64(0);
	if (client) {
		if (post_send(qp, IBV_WR_RDMA_WRITE, 9, 64, &r, 1))
			die("post_send", EIO);
		t0 = now();
		got = poll_n(wc, 1, o.wait * 1000, NULL);
		if (got)
			rexc = now() - t0;
		fact("black_hole", "%s@%.2fs", got ? wcs(wc[0].status) : "none",
		     rexc);
	}
	sync64(0);
	run_cmd("unhole", o.unhole);
	sync64(0);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: fence_probe [-d DEV] [-g GIDX] [-i IBPORT] [-p TCPPORT]\n"
		"  [-t acct|rflush|srqflush|sflush|reuse|rqreset|readrnr|retry|devdel|\n"
		"      sqd]\n"
		"  [--psn N]\n"
		"  [--ops send:5000,write:16384,...] [-k K] [-m M] [-n N]\n"
		"  [--hole CMD] [--unhole CMD] [--retries 7:14,1:8] [--wait S]\n"
		"  [--name FACT-PREFIX]\n"
		"  [SERVER]   (no SERVER: be the server)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "psn", 1, NULL, 'P' },     { "ops", 1, NULL, 'O' },
		{ "hole", 1, NULL, 'H' },    { "unhole", 1, NULL, 'U' },
		{ "retries", 1, NULL, 'R' }, { "wait", 1, NULL, 'W' },
		{ "name", 1, NULL, 'N' },    { 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "d:g:i:p:t:k:m:n:h", lo, NULL)) !=
	       -1) {
		switch (c) {
		case 'd':
			o.dev = optarg;
			break;
		case 'g':
			o.gidx = atoi(optarg);
			break;
		case 'i':
			o.ibport = atoi(optarg);
			break;
		case 'p':
			o.tcpport = atoi(optarg);
			break;
		case 't':
			o.test = optarg;
			break;
		case 'k':
			o.k = atoi(optarg);
			break;
		case 'm':
			o.m = atoi(optarg);
			break;
		case 'n':
			o.n = atoi(optarg);
			break;
		case 'P':
			o.psn = strtoul(optarg, NULL, 0) & PSN_MASK;
			break;
		case 'O':
			o.ops = optarg;
			break;
		case 'H':
			o.hole = optarg;
			break;
		case 'U':
			o.unhole = optarg;
			break;
		case 'R':
			o.retries = optarg;
			break;
		case 'W':
			o.wait = atof(optarg);
			break;
		case 'N':
			o.name = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind < argc)
		o.server = argv[optind];
	client = o.server != NULL;
	if (o.k > 64 || o.m > o.k || o.n > 60)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	dev_open();
	oob_open();
	if (!strcmp(o.test, "acct"))
		test_acct();
	else if (!strcmp(o.test, "rflush"))
		test_rflush(0);
	else if (!strcmp(o.test, "srqflush"))
		test_rflush(1);
	else if (!strcmp(o.test, "sflush"))
		test_sflush();
	else if (!strcmp(o.test, "reuse"))
		test_reuse();
	else if (!strcmp(o.test, "rqreset"))
		test_rqreset();
	else if (!strcmp(o.test, "readrnr"))
		test_readrnr();
	else if (!strcmp(o.test, "retry"))
		test_retry();
	else if (!strcmp(o.test, "devdel"))
		test_devdel();
	else if (!strcmp(o.test, "sqd"))
		test_sqd();
	else
		usage();
	printf("fence_probe: %s done\n", o.test);
	return 0;
}
