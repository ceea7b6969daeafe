/* SPDX-License-Identifier: MIT */
/*
 * r2cc-nccl: the verbs traffic of NCCL's IB transport (net_ib, 2.2x), with
 * every byte checked, for r2cc's lab (no GPU needed). Learnt from NCCL's
 * source, written anew:
 * - libibverbs is opened with dlopen() and its functions found with
 *   dlvsym(..., "IBVERBS_1.1"), as NCCL's default build does; the inline
 *   data path goes through the context's ops;
 * - each connection is a send comm and a receive comm with Q QPs each;
 *   the receiver grants a buffer slot by posting one receive per QP and
 *   RDMA-writing an inline CTS entry (address, size, rkey, index) into the
 *   sender's FIFO, signaled now and then; the sender sees the entry in its
 *   memory, splits the request over its QPs and writes each chunk with a
 *   signaled WRITE_WITH_IMM (immediate: the size); the request is done
 *   when every QP's immediate came; several requests are in flight;
 * - the receiver "flushes" each request with a local RDMA READ of one byte
 *   on a QP connected to itself (NCCL's GPU Direct flush);
 * - one CQ for every QP; a detached thread blocked in ibv_get_async_event
 *   takes QP_FATAL, CQ_ERR and DEVICE_FATAL as fatal, PORT_ERR as a
 *   warning, as NCCL's does.
 * Both ends send and receive on every connection. Prints one line,
 *   r2cc-nccl: role=R conns=C qps=Q reqs=N bytes_verified=B errors=E fatal_events=F
 * and exits 0 only when nothing failed.
 *
 * usage: r2cc-nccl -d DEV [-g GIDX] [-p PORT] [-c CONNS] [-q QPS] [-t SECS]
 *        [--no-flush] [--stall S] [--timeout T] [SERVER]
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "nccl.h"

struct verbs v;

static void die(const char *what)
{
	fprintf(stderr, "r2cc-nccl: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* libibverbs as NCCL's wrappers find it: by handle and version. */
static void load_verbs(void)
{
	void *h = dlopen("libibverbs.so", RTLD_NOW);

	if (!h)
		h = dlopen("libibverbs.so.1", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "r2cc-nccl: %s\n", dlerror());
		exit(2);
	}
#define SYM(name)                                                           \
	do {                                                                \
		*(void **)&v.name = dlvsym(h, "ibv_" #name, "IBVERBS_1.1"); \
		if (!v.name) {                                              \
			fprintf(stderr, "r2cc-nccl: no ibv_%s\n", #name);   \
			exit(2);                                            \
		}                                                           \
	} while (0)
	SYM(get_device_list);
	SYM(free_device_list);
	SYM(get_device_name);
	SYM(open_device);
	SYM(get_async_event);
	SYM(ack_async_event);
	SYM(event_type_str);
	SYM(wc_status_str);
	SYM(query_port);
	SYM(query_gid);
	SYM(alloc_pd);
	SYM(reg_mr);
	SYM(create_cq);
	SYM(create_qp);
	SYM(modify_qp);
#undef SYM
}

double nc_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void nc_fail(struct nc *n, const char *fmt, ...)
{
	va_list ap;

	atomic_fetch_add(&n->errors, 1);
	if (n->reported++ >= 10)
		return;
	fprintf(stderr, "r2cc-nccl: %s: FAIL at %.1f s: ",
		n->server ? "server" : "client", nc_now() - n->t0);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* NCCL's async thread, detached and blocked in the call: fatal events
 * end the job, a port error warns. */
static void *async_thread(void *arg)
{
	struct nc *n = arg;
	struct ibv_async_event ev;

	while (!v.get_async_event(n->ctx, &ev)) {
		switch (ev.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_CQ_ERR:
		case IBV_EVENT_DEVICE_FATAL:
			atomic_fetch_add(&n->fatal, 1);
			fprintf(stderr, "r2cc-nccl: fatal async event: %s\n",
				v.event_type_str(ev.event_type));
			break;
		default:
			fprintf(stderr, "r2cc-nccl: async event: %s\n",
				v.event_type_str(ev.event_type));
			break;
		}
		v.ack_async_event(&ev);
	}
	return NULL;
}

static struct ibv_mr *reg(struct nc *n, void *p, size_t len)
{
	struct ibv_mr *mr =
		v.reg_mr(n->pd, p, len,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ);

	if (!mr)
		die("ibv_reg_mr");
	return mr;
}

static void open_dev(struct nc *n)
{
	struct ibv_device **l = v.get_device_list(NULL);
	int i;

	for (i = 0; l && l[i]; i++)
		if (!strcmp(v.get_device_name(l[i]), n->dev))
			break;
	if (!l || !l[i]) {
		fprintf(stderr, "r2cc-nccl: no device %s\n", n->dev);
		exit(2);
	}
	n->ctx = v.open_device(l[i]);
	v.free_device_list(l);
	if (!n->ctx || v.query_port(n->ctx, 1, &n->port) ||
	    v.query_gid(n->ctx, 1, n->gidx, &n->gid))
		die("open the device");
	n->pd = v.alloc_pd(n->ctx);
	n->cq = n->pd ? v.create_cq(n->ctx, 4096, NULL, NULL, 0) : NULL;
	if (!n->cq)
		die("PD and CQ");
}

static struct ibv_qp *new_qp(struct nc *n, struct nc_qpinfo *me)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = n->cq,
		.recv_cq = n->cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 2 * NC_MAX_REQS * 2,
			 .max_recv_wr = NC_MAX_REQS * 2,
			 .max_send_sge = 1,
			 .max_recv_sge = 1,
			 .max_inline_data = sizeof(struct nc_cts) },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						    IBV_ACCESS_REMOTE_READ };
	struct ibv_qp *qp = v.create_qp(n->pd, &ia);

	if (!qp || v.modify_qp(qp, &a,
			       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS))
		die("ibv_create_qp");
	me->qpn = qp->qp_num;
	me->psn = (uint32_t)lrand48() & 0xffffff;
	memcpy(me->gid, n->gid.raw, 16);
	return qp;
}

/* RTR towards @peer, then RTS: NCCL's timeout (NCCL_IB_TIMEOUT, 20 by
 * default), retry 7. */
static void connect_qp(struct nc *n, struct ibv_qp *qp,
		       const struct nc_qpinfo *me, const struct nc_qpinfo *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = n->port.active_mtu,
		.dest_qp_num = peer->qpn,
		.rq_psn = peer->psn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = { .is_global = 1,
			     .port_num = 1,
			     .grh = { .hop_limit = 255,
				      .sgid_index = (uint8_t)n->gidx } },
	};

	memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
	if (v.modify_qp(qp, &a,
			IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				IBV_QP_MAX_DEST_RD_ATOMIC |
				IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS,
				  .timeout = (uint8_t)n->timeout,
				  .retry_cnt = 7,
				  .rnr_retry = 7,
				  .sq_psn = me->psn,
				  .max_rd_atomic = 1 };
	if (v.modify_qp(qp, &a,
			IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

/* Every comm's QPs and memory, wired to the peer's through the TCP
 * exchange: our receive comm c talks to the peer's send comm c. */
static void setup(struct nc *n)
{
	struct nc_wire me, peer;
	int c, q;

	memset(&me, 0, sizeof(me));
	for (c = 0; c < n->conns; c++) {
		struct nc_comm *s = &n->send[c], *r = &n->recv[c];

		s->mr = reg(n, s->buf, sizeof(s->buf));
		s->fifo_mr = reg(n, (void *)s->fifo, sizeof(s->fifo));
		r->mr = reg(n, r->buf, sizeof(r->buf));
		r->cts_mr = reg(n, r->cts, sizeof(r->cts));
		for (q = 0; q < n->qps; q++) {
			s->qp[q] = new_qp(n, &me.send[c][q]);
			r->qp[q] = new_qp(n, &me.recv[c][q]);
		}
		me.fifo_addr[c] = (uintptr_t)s->fifo;
		me.fifo_rkey[c] = s->fifo_mr->rkey;
	}
	if (n->flush) {
		struct nc_qpinfo self;

		n->flush_mr = reg(n, &n->flush_byte, sizeof(n->flush_byte));
		n->flush_qp = new_qp(n, &self);
		connect_qp(n, n->flush_qp, &self, &self);
	}
	me.secs = n->secs;
	nc_oob_swap(n, &me, &peer, sizeof(me));
	if (n->server)
		n->secs = peer.secs;
	for (c = 0; c < n->conns; c++) {
		for (q = 0; q < n->qps; q++) {
			connect_qp(n, n->send[c].qp[q], &me.send[c][q],
				   &peer.recv[c][q]);
			connect_qp(n, n->recv[c].qp[q], &me.recv[c][q],
				   &peer.send[c][q]);
		}
		n->recv[c].fifo_addr = peer.fifo_addr[c];
		n->recv[c].fifo_rkey = peer.fifo_rkey[c];
	}
	nc_oob_swap(n, &me, &peer, 1); /* both connected */
}

static void usage(int rc)
{
	fprintf(rc ? stderr : stdout,
		"usage: r2cc-nccl -d DEV [-g GIDX] [-p PORT] [-c CONNS] "
		"[-q QPS] [-t SECS]\n"
		"                 [--no-flush] [--stall S] [--timeout T] "
		"[SERVER]\n"
		"NCCL's IB transport traffic (CTS FIFO, WRITE_WITH_IMM, GPU "
		"flush READ),\nevery byte checked. -c connections (1..%d, "
		"default 2), -q QPs each (1..%d,\ndefault 2), -t seconds "
		"(client; default 20), --stall: no progress for S s\nis an "
		"error (default 10), --timeout: the QPs' ACK timeout exponent\n"
		"(1..31, NCCL_IB_TIMEOUT; default 20). Without SERVER: the "
		"server.\n",
		NC_MAX_CONNS, NC_MAX_QPS);
	exit(rc);
}

static void parse(struct nc *n, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "no-flush", no_argument, NULL, 'F' },
		{ "stall", required_argument, NULL, 'S' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	n->gidx = 1;
	n->tcp_port = 18700;
	n->conns = 2;
	n->qps = 2;
	n->secs = 20;
	n->stall = 10;
	n->timeout = 20;
	n->flush = 1;
	while ((ch = getopt_long(argc, argv, "d:g:p:c:q:t:h", lo, NULL)) !=
	       -1) {
		switch (ch) {
		case 'd':
			n->dev = optarg;
			break;
		case 'g':
			n->gidx = atoi(optarg);
			break;
		case 'p':
			n->tcp_port = atoi(optarg);
			break;
		case 'c':
			n->conns = atoi(optarg);
			break;
		case 'q':
			n->qps = atoi(optarg);
			break;
		case 't':
			n->secs = atof(optarg);
			break;
		case 'F':
			n->flush = 0;
			break;
		case 'S':
			n->stall = atof(optarg);
			break;
		case 'T':
			n->timeout = atoi(optarg);
			break;
		case 'h':
			usage(0);
			break;
		default:
			usage(2);
		}
	}
	if (!n->dev || n->conns < 1 || n->conns > NC_MAX_CONNS || n->qps < 1 ||
	    n->qps > NC_MAX_QPS || n->secs <= 0 || n->stall <= 0 ||
	    n->timeout < 1 || n->timeout > 31 || n->tcp_port <= 0 ||
	    n->tcp_port > 65535 || argc - optind > 1)
		usage(2);
	n->server = optind == argc;
	n->peer_host = n->server ? NULL : argv[optind];
}

int main(int argc, char **argv)
{
	static struct nc n;
	pthread_t at;
	uint64_t bytes = 0, reqs = 0;
	int c, rc;

	parse(&n, argc, argv);
	srand48(getpid());
	load_verbs();
	nc_oob_open(&n);
	open_dev(&n);
	setup(&n);
	if (pthread_create(&at, NULL, async_thread, &n) || pthread_detach(at))
		die("pthread_create");
	n.t0 = nc_now();
	nc_run(&n);
	for (c = 0; c < n.conns; c++) {
		bytes += n.recv[c].bytes_verified;
		reqs += n.recv[c].done;
	}
	rc = n.errors || n.fatal || !bytes;
	printf("r2cc-nccl: role=%s conns=%d qps=%d reqs=%" PRIu64
	       " bytes_verified=%" PRIu64 " errors=%u fatal_events=%u%s\n",
	       n.server ? "server" : "client", n.conns, n.qps, reqs, bytes,
	       (unsigned)n.errors, (unsigned)n.fatal, rc ? " FAILED" : "");
	return rc;
}
