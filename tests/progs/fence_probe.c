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

#include "fence_probe.h"

struct opts o = { .dev = "rxe0",
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

struct ibv_context *ctx;
struct ibv_pd *pd;
struct ibv_cq *cq;
struct ibv_mr *mr;
char *buf;
union ibv_gid gid;
int sock, client;

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void die(const char *what, int err)
{
	fprintf(stderr, "fence_probe: %s: %s\n", what, strerror(err));
	exit(1);
}

void fact(const char *name, const char *fmt, ...)
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

void xchg(const void *out, void *in, size_t len)
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
uint64_t sync64(uint64_t v)
{
	uint64_t in;

	v = htobe64(v);
	xchg(&v, &in, 8);
	return be64toh(in);
}

void oob_open(void)
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

void dev_open(void)
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

struct ibv_qp *qp_new(struct ibv_srq *srq)
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

int to_init(struct ibv_qp *qp)
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

int to_rtr(struct ibv_qp *qp, const struct ep *r)
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

int to_rts(struct ibv_qp *qp, uint32_t psn, int retry, int tmo)
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

int to_state(struct ibv_qp *qp, enum ibv_qp_state s, double *us)
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
struct ep connect_qp(struct ibv_qp *qp, uint32_t psn, int retry, int tmo)
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

void query(struct ibv_qp *qp, uint32_t *sq, uint32_t *rq, int *st)
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

void post_recv(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t id, int slot)
{
	struct ibv_sge s = { (uintptr_t)buf + slot * RBUF, RBUF, mr->lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 },
			   *bad;
	int ret = srq ? ibv_post_srq_recv(srq, &w, &bad) :
			ibv_post_recv(qp, &w, &bad);

	if (ret)
		die("post_recv", ret);
}

int post_send(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t id,
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
int poll_n(struct ibv_wc *wc, int n, double ms, double *last_ms)
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

uint32_t pkts(uint32_t len)
{
	return len ? (len + MTU_BYTES - 1) / MTU_BYTES : 1;
}

/* Async events (e.g. LAST_WQE_REACHED) seen within ms, as a list. */
void async_events(double ms, char *out, size_t len)
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

const char *wcs(enum ibv_wc_status s)
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

uint32_t psn_diff(uint32_t a, uint32_t b)
{
	return (a - b) & PSN_MASK;
}

/* The shell command @cmd (a --hole or --unhole); exits if it failed */
void run_cmd(const char *what, const char *cmd)
{
	int rc = cmd ? system(cmd) : -1;

	printf("%s: `%s' -> %d\n", what, cmd ? cmd : "(none)", rc);
	if (rc)
		die(what, EIO);
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
