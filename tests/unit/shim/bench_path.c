/* SPDX-License-Identifier: MIT */
/*
 * bench_path.c - what the protected data path costs per WR, in
 * instructions, with the provider taken out: the real shim/datapath.c and
 * libr2cc_migrate.a over a provider that completes every WR the moment it
 * is posted (a SEND takes a receive posted on the same QP), the QP bound
 * to a played peer with its standby at RTS (tests/unit/migrate/fo_fixture).
 * bench_path.sh runs it under callgrind, once per case, and prints the
 * figures; bench_small() and bench_large() run the same loop over N and
 * 2N WRs, so their difference over N is the cost of one WR, set-up
 * excluded. Every completion is checked (order, status, count).
 *
 * usage: bench_path CASE [native|shim]
 *   CASE: write (64 B RDMA WRITE, 1 in 16 signaled), sigall (every one
 *   signaled), send (SEND and its receive, 1 in 16 signaled), moved (write,
 *   after the QP moved to its standby), poll (an empty poll of the CQ with
 *   another NPOLLQ protected QPs on it), pollmoved (the same, those QPs
 *   moved to their standbys); native: the provider's own ops, the shim not
 *   in them; shim: the shim's, the QPs not protected (no job secret)
 */
#include <criterion/criterion.h> /* tests/unit/tsan's: no runner */
#include <stdarg.h>
#include <string.h>

#include "fo_fixture.h"
#include "shim_int.h"

#define N 2000 /* WRs in bench_small; bench_large: 2N */
#define WR_SIZE 64
#define SIG_EVERY 16
#define WINDOW 64 /* WRs outstanding at most */
#define POLL_BATCH 4
#define RING 256 /* completions or receives a ring holds */

void r2cc_ut_fail(const char *file, int line, bool fatal, const char *expr,
		  const char *fmt, ...)
{
	va_list ap;

	(void)fatal;
	fprintf(stderr, "bench_path: %s:%d: %s:", file, line, expr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/*
 * The provider: two QPs (the program's, its backup), each with a CQ ring
 * and a receive ring. Side 0 is the program's QP and CQ, 1 the backup's.
 */
struct ring {
	struct ibv_wc wc[RING];
	unsigned int head, tail;
	uint64_t rq[RING]; /* receives posted, not yet consumed */
	unsigned int rhead, rtail;
};

static struct ring rings[2];
static struct ibv_context pctx; /* the program's context */
static struct ibv_cq pcq; /* the program's CQ */

static struct ring *ring_of_qp(const struct ibv_qp *qp)
{
	return &rings[qp == &back.qp];
}

static void complete(struct ring *r, uint64_t id, enum ibv_wc_opcode op,
		     uint32_t qpn)
{
	struct ibv_wc *wc = &r->wc[r->tail++ % RING];

	memset(wc, 0, sizeof(*wc));
	wc->wr_id = id;
	wc->opcode = op;
	wc->qp_num = qpn;
	wc->byte_len = WR_SIZE;
}

static int b_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad)
{
	struct ring *r = ring_of_qp(qp);

	for (; wr; wr = wr->next) {
		if (r->tail - r->head >= RING - 2) {
			*bad = wr;
			return ENOMEM;
		}
		if (wr->opcode == IBV_WR_SEND) {
			if (r->rhead == r->rtail) {
				*bad = wr;
				return EINVAL; /* (as RNR, at once) */
			}
			complete(r, r->rq[r->rhead++ % RING], IBV_WC_RECV,
				 qp->qp_num);
		}
		if (wr->send_flags & IBV_SEND_SIGNALED)
			complete(r, wr->wr_id,
				 wr->opcode == IBV_WR_SEND ? IBV_WC_SEND :
							     IBV_WC_RDMA_WRITE,
				 qp->qp_num);
	}
	return 0;
}

static int b_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad)
{
	struct ring *r = ring_of_qp(qp);

	for (; wr; wr = wr->next) {
		if (r->rtail - r->rhead >= RING) {
			*bad = wr;
			return ENOMEM;
		}
		r->rq[r->rtail++ % RING] = wr->wr_id;
	}
	return 0;
}

static int b_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct ring *r = &rings[cq == &bcq.cq];
	int got = 0;

	if (cq != &pcq && cq != &bcq.cq)
		return 0; /* an extra QP's backup CQ: nothing on it */
	while (got < n && r->head != r->tail)
		wc[got++] = r->wc[r->head++ % RING];
	return got;
}

static int b_req_notify(struct ibv_cq *cq, int solicited)
{
	(void)cq;
	(void)solicited;
	return 0;
}

static void provider_ops(struct ibv_context *c)
{
	c->ops.post_send = b_post_send;
	c->ops.post_recv = b_post_recv;
	c->ops.poll_cq = b_poll_cq;
	c->ops.req_notify_cq = b_req_notify;
}

#define NPOLLQ 64
static struct fo_extra extra[NPOLLQ];

/* NPOLLQ more protected QPs on the program's CQ; moved to their standbys
 * if @moved (their replayed WR polled there) */
static void extra_qps(bool moved)
{
	struct ibv_wc wc[8];
	int i;

	fo_capture = true; /* (what they tell the peer) */
	for (i = 0; i < NPOLLQ; i++) {
		fo_extra_on(&extra[i], i);
		if (moved)
			fo_extra_moves(&extra[i], i, 1, 0x7000 + (uint64_t)i);
	}
	for (i = 0; moved && i < NPOLLQ;)
		i += r2cc_mig_poll_more(mc, 8, wc);
}

static struct r2cc_ctx rc;
static struct r2cc_cq rcq;
static struct r2cc_qp rqp;

enum how { PROTECTED, NATIVE, SHIM };

/* The protected QP (NCCL-sized), its standby at RTS, seen through the
 * shim unless @how is NATIVE (and protected by it if PROTECTED); moved to
 * its standby if @moved; NPOLLQ more on its CQ if @more, moved if
 * @xmoved. */
static void bench_setup(enum how how, bool moved, bool more, bool xmoved)
{
	start();
	fo_cap = (struct ibv_qp_cap){ .max_send_wr = 512,
				      .max_recv_wr = 256,
				      .max_send_sge = 1,
				      .max_recv_sge = 1 };
	setup_on(NULL);
	if (moved) {
		fo_rails();
		fo_to_the_standby();
		/* the peer's MRs on the standby's rail: 8, the WRITEs' last */
		for (uint32_t k = 2; k <= 9; k++)
			r2cc_mig_test_peer_mr(PEER, 1, k, 0x10000 | k);
	}
	if (more)
		extra_qps(xmoved);
	/* r2cc's own rail contexts are not the shim's: the backup posts and
	 * polls on the provider straight */
	provider_ops(&ctx);
	provider_ops(&pctx);
	prim.qp.context = &pctx;
	pcq.context = &pctx;
	if (how == NATIVE)
		return;
	cr_assert_eq(r2cc_map_init(&r2cc_shim.reg), 0);
	cr_assert_eq(r2cc_map_init(&r2cc_shim.qpn), 0);
	r2cc_shim.protecting = how == PROTECTED;
	rc = (struct r2cc_ctx){ .type = R2CC_OBJ_CTX, .ctx = &pctx, .id = 1 };
	r2cc_ops_patch(&rc);
	rcq = (struct r2cc_cq){ .type = R2CC_OBJ_CQ,
				.cq = &pcq,
				.ctx = &rc,
				.mc = how == PROTECTED ? mc : NULL };
	rqp = (struct r2cc_qp){ .type = R2CC_OBJ_QP,
				.qp = &prim.qp,
				.ctx = &rc,
				.qpn = prim.qp.qp_num,
				.mig = how == PROTECTED ? mq : NULL };
	rqp.st = &rqp.st_own;
	cr_assert_eq(r2cc_map_insert(&r2cc_shim.reg, (uintptr_t)&pctx, &rc), 0);
	cr_assert_eq(r2cc_map_insert(&r2cc_shim.reg, (uintptr_t)&pcq, &rcq), 0);
	cr_assert_eq(r2cc_map_insert(&r2cc_shim.reg, (uintptr_t)&prim.qp, &rqp),
		     0);
	cr_assert_eq(r2cc_map_insert(&r2cc_shim.qpn, r2cc_qpn_key(&rc, rqp.qpn),
				     &rqp),
		     0);
}

struct loop {
	bool empty; /* polls of the empty CQ, no WR */
	enum ibv_wr_opcode op;
	unsigned int sig_every;
	uint64_t next_id; /* the first WR's id (ids run on across loops) */
	uint64_t recvd; /* receives completed, in order */
	uint64_t polled; /* completions polled */
};

/*
 * @n WRs of @l's kind posted and polled through the inline verbs, at most
 * WINDOW outstanding; every completion checked. 0, or -1 on a wrong one.
 */
static inline int run(struct loop *l, long n)
{
	struct ibv_sge sge = { .addr = 0x1000, .length = WR_SIZE, .lkey = 7 };
	struct ibv_send_wr wr = { .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = l->op },
			   *bad;
	struct ibv_sge rsge = { .addr = 0x8000, .length = WR_SIZE, .lkey = 7 };
	struct ibv_recv_wr rwr = { .sg_list = &rsge, .num_sge = 1 }, *rbad;
	uint64_t first = l->next_id, end = first + (uint64_t)n;
	uint64_t posted = first, done = first;
	struct ibv_wc wc[POLL_BATCH];
	int i, k;

	wr.wr.rdma.remote_addr = 0x2000;
	wr.wr.rdma.rkey = 9;
	if (l->empty) {
		for (; n; n--)
			if (ibv_poll_cq(&pcq, POLL_BATCH, wc))
				return -1;
		return 0;
	}
	while (done < end) {
		while (posted < end && posted - done < WINDOW) {
			if (l->op == IBV_WR_SEND) {
				rwr.wr_id = posted;
				if (ibv_post_recv(&prim.qp, &rwr, &rbad))
					return -1;
			}
			wr.wr_id = posted;
			wr.send_flags = (posted + 1 - first) % l->sig_every &&
							posted + 1 < end ?
						0 :
						IBV_SEND_SIGNALED;
			if (ibv_post_send(&prim.qp, &wr, &bad))
				return -1;
			posted++;
		}
		k = ibv_poll_cq(&pcq, POLL_BATCH, wc);
		l->polled += (uint64_t)(k > 0 ? k : 0);
		for (i = 0; i < k; i++) {
			if (wc[i].status != IBV_WC_SUCCESS ||
			    wc[i].qp_num != prim.qp.qp_num)
				return -1;
			if (wc[i].opcode == IBV_WC_RECV) {
				if (wc[i].wr_id != l->recvd++)
					return -1;
				continue;
			}
			if (wc[i].wr_id < done || wc[i].wr_id >= posted)
				return -1;
			done = wc[i].wr_id + 1;
		}
		if (k < 0)
			return -1;
	}
	l->next_id = end;
	return l->op == IBV_WR_SEND && l->recvd != end ? -1 : 0;
}

/* The two measured loops: callgrind's inclusive count of each */
int bench_small(struct loop *l);
int bench_large(struct loop *l);

__attribute__((noinline, noclone)) int bench_small(struct loop *l)
{
	return run(l, N);
}

__attribute__((noinline, noclone)) int bench_large(struct loop *l)
{
	return run(l, 2 * N);
}

int main(int argc, char **argv)
{
	struct loop l = { .op = IBV_WR_RDMA_WRITE, .sig_every = SIG_EVERY };
	const char *c = argc > 1 ? argv[1] : "";
	const char *h = argc > 2 ? argv[2] : "";
	enum how how = !strcmp(h, "native") ? NATIVE :
		       !strcmp(h, "shim")   ? SHIM :
					      PROTECTED;
	bool moved = !strcmp(c, "moved"), polls = !strcmp(c, "pollmoved");
	uint64_t wrs;

	if (!strcmp(c, "sigall"))
		l.sig_every = 1;
	else if (!strcmp(c, "send"))
		l.op = IBV_WR_SEND;
	else if (!strcmp(c, "poll"))
		l.empty = true;
	else if (polls)
		l.empty = true;
	else if (strcmp(c, "write") && !moved) {
		fprintf(stderr, "usage: bench_path write|sigall|send|moved|"
				"poll|pollmoved [native|shim]\n");
		return 2;
	}
	if ((how != PROTECTED && (moved || polls)) ||
	    (how == PROTECTED && *h)) {
		fprintf(stderr, "bench_path: %s: protected only\n", c);
		return 2;
	}
	bench_setup(how, moved, l.empty, polls);
	/* once unmeasured: the logs grown to what the window needs */
	if (run(&l, 4 * WINDOW) || bench_small(&l) || bench_large(&l)) {
		fprintf(stderr, "bench_path: %s: a completion went wrong\n", c);
		return 1;
	}
	if (r2cc_mig_state(mq) !=
	    (moved ? R2CC_PROT_MIGRATED : R2CC_PROT_READY)) {
		fprintf(stderr, "bench_path: %s: protection ended (%d)\n", c,
			r2cc_mig_state(mq));
		return 1;
	}
	for (int i = 0; l.empty && i < NPOLLQ; i++)
		if (r2cc_mig_state(extra[i].mq) !=
		    (polls ? R2CC_PROT_MIGRATED : R2CC_PROT_READY)) {
			fprintf(stderr, "bench_path: %s: QP %d not as set\n", c,
				i);
			return 1;
		}
	/* Through the shim, each WR counted once, with its bytes */
	wrs = how == NATIVE || l.empty ? 0 : 4 * WINDOW + 3 * N;
	if (how != NATIVE && !l.empty &&
	    (rqp.st->posted[l.op == IBV_WR_SEND ? R2CC_ST_SEND :
						  R2CC_ST_WRITE] != wrs ||
	     rqp.st->bytes_posted != wrs * WR_SIZE ||
	     rqp.st->posted_recv != (l.op == IBV_WR_SEND ? wrs : 0) ||
	     rqp.st->polled != l.polled)) {
		fprintf(stderr,
			"bench_path: %s: %llu WRs, %llu bytes, %llu "
			"receives, %llu completions counted; %llu posted, "
			"%llu polled\n",
			c,
			(unsigned long long)(rqp.st->posted[R2CC_ST_SEND] +
					     rqp.st->posted[R2CC_ST_WRITE]),
			(unsigned long long)rqp.st->bytes_posted,
			(unsigned long long)rqp.st->posted_recv,
			(unsigned long long)rqp.st->polled,
			(unsigned long long)wrs, (unsigned long long)l.polled);
		return 1;
	}
	printf("bench_path: %s %s: %d + %d WRs done\n", c, *h ? h : "protected",
	       N, 2 * N);
	return 0;
}
