/* SPDX-License-Identifier: MIT */
/*
 * bench_wr: the data-path benchmark. Two RC QPs on one device, looped back to
 * each other; bench_loop() posts n RDMA WRITEs through the inline verbs, so
 * callgrind --toggle-collect=bench_loop counts user instructions per WR.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define WR_SIZE 64 /* bytes per RDMA WRITE */
#define SIG_EVERY 16 /* every 16th WR (and the last) is signaled */
#define WINDOW 64 /* at most this many WRs outstanding */
#define POLL_BATCH 4
#define BUF_SZ 8192 /* source half, then destination half */
#define IB_PORT 1
#define TIMEOUT_S 60

struct bench {
	struct ibv_qp *qp; /* borrowed: the sending QP */
	struct ibv_cq *cq; /* borrowed: its send CQ */
	uint64_t laddr;
	uint32_t lkey;
	uint64_t raddr;
	uint32_t rkey;
	double deadline; /* CLOCK_MONOTONIC seconds */
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
};

int bench_loop(struct bench *b, long n);

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * The measured loop. noinline/noclone keep the symbol callgrind toggles on;
 * everything it calls (the provider's post_send/poll_cq, later the shim's
 * wrappers) is counted with it. Returns 0, or -1 on any error or timeout.
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
	int i, k;

	wr.wr.rdma.remote_addr = b->raddr;
	wr.wr.rdma.rkey = b->rkey;
	while (done < n) {
		while (posted < n && posted - done < WINDOW) {
			posted++;
			wr.wr_id = posted;
			wr.send_flags =
				(posted % SIG_EVERY == 0 || posted == n) ?
					IBV_SEND_SIGNALED :
					0;
			if (ibv_post_send(b->qp, &wr, &bad))
				return -1;
		}
		k = ibv_poll_cq(b->cq, POLL_BATCH, wc);
		b->polls++;
		if (k < 0)
			return -1;
		/* Check the clock only now and then: it costs instructions. */
		if (k == 0 && (++b->empty & 1023) == 0 && now_s() > b->deadline)
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

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_wr -d DEV [-g GIDX] [-T] -n N\n"
		"  -T  start an idle thread first, so that the process is\n"
		"      multi-threaded as NCCL, UCX and MPI processes are\n");
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
	for (i = 0; i < 2; i++) {
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

/* RESET -> INIT -> RTR -> RTS towards dqpn on our own GID. */
static int connect_qp(struct res *r, struct ibv_qp *qp, uint32_t dqpn, int gidx)
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
	a.dest_qp_num = dqpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = r->port.lid;
	a.ah_attr.port_num = IB_PORT;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.grh.sgid_index = gidx;
	a.ah_attr.grh.dgid = r->gid;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
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

/* Runs the loop once; the destination must then hold the source bytes. */
static int measure(struct res *r, long n)
{
	struct bench b = { .qp = r->qp[0],
			   .cq = r->cq[0],
			   .laddr = (uintptr_t)r->buf,
			   .lkey = r->mr->lkey,
			   .raddr = (uintptr_t)r->buf + BUF_SZ / 2,
			   .rkey = r->mr->rkey };
	int i, ret;

	for (i = 0; i < BUF_SZ / 2; i++) {
		r->buf[i] = (uint8_t)(i * 13 + 1);
		r->buf[BUF_SZ / 2 + i] = 0;
	}
	b.deadline = now_s() + TIMEOUT_S;
	ret = bench_loop(&b, n);
	if (ret)
		fprintf(stderr, "bench_wr: loop failed after %ld completions\n",
			b.signaled);
	else if (memcmp(r->buf, r->buf + BUF_SZ / 2, WR_SIZE)) {
		fprintf(stderr, "bench_wr: data not written\n");
		ret = -1;
	}
	printf("bench_wr: wrs=%ld signaled=%ld polls=%ld empty=%ld\n", n,
	       b.signaled, b.polls, b.empty);
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
	struct res r = { 0 };
	const char *dev = NULL;
	int ch, gidx = 1, ret;
	pthread_t t;
	long n = 0;

	while ((ch = getopt(argc, argv, "d:g:n:Th")) != -1) {
		switch (ch) {
		case 'T':
			if (pthread_create(&t, NULL, idle, NULL)) {
				perror("bench_wr: pthread_create");
				return 1;
			}
			pthread_detach(t);
			break;
		case 'd':
			dev = optarg;
			break;
		case 'g':
			gidx = atoi(optarg);
			break;
		case 'n':
			n = atol(optarg);
			break;
		default:
			usage();
		}
	}
	if (!dev || n <= 0 || optind != argc)
		usage();
	ret = setup(&r, dev, gidx);
	if (!ret)
		ret = connect_qp(&r, r.qp[0], r.qp[1]->qp_num, gidx) ||
		      connect_qp(&r, r.qp[1], r.qp[0]->qp_num, gidx);
	if (ret)
		perror("bench_wr: setup");
	else
		ret = measure(&r, n);
	teardown(&r);
	return ret ? 1 : 0;
}
