/* SPDX-License-Identifier: MIT */
/*
 * mw_probe - memory windows, as a program uses them, on one device: QP A
 * (on PD 1) and QP B (on PD 2) connected to each other. A type 2 window
 * on PD 2 is bound by B (IBV_WR_BIND_MW) over B's buffer; A writes
 * through it (RDMA WRITE, checked in B's buffer), then invalidates it
 * with a SEND_WITH_INV that B receives; A's next write through it must
 * fail (remote access error): the window is gone. One line per step, the same with and
 * without r2cc (the lab compares them); exit 0 when every step did what
 * the verbs say.
 *
 * mw_probe DEVICE GID_INDEX
 */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEN 4096

static struct ibv_context *ctx;
static struct ibv_cq *cq;
static union ibv_gid gid;
static int gidx, bad;

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static struct ibv_qp *qp_new(struct ibv_pd *pd)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq,
				       .recv_cq = cq,
				       .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 8,
						.max_recv_wr = 8,
						.max_send_sge = 1,
						.max_recv_sge = 1 } };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (!qp)
		die("ibv_create_qp");
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		die("INIT");
	return qp;
}

/* @qp to RTS towards @peer (on the same device). */
static void qp_connect(struct ibv_qp *qp, uint32_t peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR,
				 .path_mtu = IBV_MTU_1024,
				 .dest_qp_num = peer,
				 .rq_psn = 0x100,
				 .max_dest_rd_atomic = 1,
				 .min_rnr_timer = 12,
				 .ah_attr = { .is_global = 1,
					      .port_num = 1,
					      .grh = { .dgid = gid,
						       .sgid_index = gidx,
						       .hop_limit = 64 } } };

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x100;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

/* The next completion (5 s at most): its status, or -1. */
static int wait_wc(struct ibv_wc *wc)
{
	int i;

	for (i = 0; i < 5000; i++) {
		if (ibv_poll_cq(cq, 1, wc) > 0)
			return wc->status;
		usleep(1000);
	}
	return -1;
}

/* Post @wr on @qp, wait for its completion: print STEP's outcome. */
static int step(const char *name, struct ibv_qp *qp, struct ibv_send_wr *wr,
		enum ibv_wc_status want)
{
	struct ibv_send_wr *b;
	struct ibv_wc wc;
	int st;

	if (ibv_post_send(qp, wr, &b)) {
		printf("mw_probe: %s: post failed\n", name);
		bad = 1;
		return -1;
	}
	st = wait_wc(&wc);
	printf("mw_probe: %s: %s\n", name,
	       st < 0 ? "no completion" : ibv_wc_status_str(wc.status));
	if (st != (int)want)
		bad = 1;
	return st;
}

int main(int argc, char **argv)
{
	struct ibv_device **devs;
	struct ibv_pd *pd1, *pd2;
	struct ibv_mr *mr1, *mr2;
	struct ibv_qp *qa, *qb;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	char *b1, *b2;
	int i, n;

	if (argc != 3) {
		fprintf(stderr, "usage: mw_probe DEVICE GID_INDEX\n");
		return 2;
	}
	gidx = atoi(argv[2]);
	devs = ibv_get_device_list(&n);
	for (i = 0; devs && i < n; i++)
		if (!strcmp(ibv_get_device_name(devs[i]), argv[1]))
			ctx = ibv_open_device(devs[i]);
	if (!ctx)
		die("no such device");
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		die("ibv_query_gid");
	cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	pd1 = ibv_alloc_pd(ctx);
	pd2 = ibv_alloc_pd(ctx);
	b1 = calloc(1, LEN);
	b2 = calloc(1, LEN);
	if (!cq || !pd1 || !pd2 || !b1 || !b2)
		die("setup");
	mr1 = ibv_reg_mr(pd1, b1, LEN, IBV_ACCESS_LOCAL_WRITE);
	mr2 = ibv_reg_mr(pd2, b2, LEN,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_MW_BIND);
	if (!mr1 || !mr2)
		die("ibv_reg_mr");
	qa = qp_new(pd1);
	qb = qp_new(pd2);
	qp_connect(qa, qb->qp_num);
	qp_connect(qb, qa->qp_num);
	/* Whatever would protect them has had its round trips. */
	sleep(3);

	mw = ibv_alloc_mw(pd2, IBV_MW_TYPE_2);
	if (!mw)
		die("ibv_alloc_mw");
	struct ibv_send_wr bind = {
		.wr_id = 1,
		.opcode = IBV_WR_BIND_MW,
		.send_flags = IBV_SEND_SIGNALED,
		.bind_mw = { .mw = mw,
			     .rkey = ibv_inc_rkey(mw->rkey),
			     .bind_info = { .mr = mr2,
					    .addr = (uintptr_t)b2,
					    .length = LEN,
					    .mw_access_flags =
						    IBV_ACCESS_REMOTE_WRITE } }
	};
	step("bind", qb, &bind, IBV_WC_SUCCESS);
	uint32_t rkey = bind.bind_mw.rkey;

	memset(b1, 0x5a, 64);
	struct ibv_sge sge = { .addr = (uintptr_t)b1,
			       .length = 64,
			       .lkey = mr1->lkey };
	struct ibv_send_wr wr = { .wr_id = 2,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = (uintptr_t)b2,
					       .rkey = rkey } };
	step("write through the window", qa, &wr, IBV_WC_SUCCESS);
	printf("mw_probe: bytes landed: %s\n",
	       memcmp(b1, b2, 64) ? "no" : "yes");
	if (memcmp(b1, b2, 64))
		bad = 1;

	/* B receives A's SEND_WITH_INV, which invalidates the window. */
	struct ibv_sge rsge = { .addr = (uintptr_t)b2 + 2048,
				.length = 64,
				.lkey = mr2->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 3, .sg_list = &rsge, .num_sge = 1 },
			   *rb;
	if (ibv_post_recv(qb, &rwr, &rb))
		die("ibv_post_recv");
	struct ibv_send_wr inv = { .wr_id = 4,
				   .sg_list = &sge,
				   .num_sge = 1,
				   .opcode = IBV_WR_SEND_WITH_INV,
				   .send_flags = IBV_SEND_SIGNALED,
				   .invalidate_rkey = rkey };
	step("send with invalidate", qa, &inv, IBV_WC_SUCCESS);
	n = wait_wc(&wc);
	/* What the receive says of the invalidation is the provider's to
	 * report (the lab's rxe gave no IBV_WC_WITH_INV with the window's
	 * rkey): printed; the next write judges whether the window is gone. */
	printf("mw_probe: receive: %s, with invalidate: %s\n",
	       n < 0 ? "no completion" : ibv_wc_status_str(wc.status),
	       n >= 0 && (wc.wc_flags & IBV_WC_WITH_INV) ? "yes" : "no");
	if (n != IBV_WC_SUCCESS)
		bad = 1;

	wr.wr_id = 5;
	step("write through the invalidated window", qa, &wr,
	     IBV_WC_REM_ACCESS_ERR);
	printf("mw_probe: result=%s\n", bad ? "FAIL" : "PASS");
	return bad;
}
