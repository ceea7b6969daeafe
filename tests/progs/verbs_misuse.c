/* SPDX-License-Identifier: MIT */
/*
 * verbs_misuse.c - calls verbs wrongly on purpose (bad arguments, objects
 * still in use, invalid transitions) and prints what each call returned,
 * with errno. Run with and without the shim: the outputs must be equal.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void say_ptr(const char *name, void *p)
{
	if (p)
		printf("%-28s ok\n", name);
	else
		printf("%-28s NULL errno=%s\n", name, strerrorname_np(errno));
}

static void say_int(const char *name, int ret)
{
	if (ret < 0)
		printf("%-28s %d errno=%s\n", name, ret,
		       strerrorname_np(errno));
	else
		printf("%-28s %d\n", name, ret);
}

static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *cq, int wr)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = wr,
			 .max_recv_wr = wr,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &a);
}

/* Verbs on a QP that is still in RESET. */
static void qp_cases(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr)
{
	struct ibv_sge sge = { (uintptr_t)mr->addr, 64, mr->lkey };
	struct ibv_send_wr swr = { .sg_list = &sge,
				   .num_sge = 1,
				   .opcode = IBV_WR_SEND },
			   *bs;
	struct ibv_recv_wr rwr = { .sg_list = &sge, .num_sge = 1 }, *br;
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_RTS };
	struct ibv_qp_init_attr init;
	struct ibv_wc wc;

	say_int("modify_qp reset->rts", ibv_modify_qp(qp, &attr, IBV_QP_STATE));
	say_int("post_send in reset", ibv_post_send(qp, &swr, &bs));
	say_int("post_recv in reset", ibv_post_recv(qp, &rwr, &br));
	say_int("poll_cq empty", ibv_poll_cq(cq, 1, &wc));
	say_int("req_notify_cq", ibv_req_notify_cq(cq, 0));
	memset(&attr, 0, sizeof(attr));
	say_int("query_qp", ibv_query_qp(qp, &attr, IBV_QP_STATE, &init));
	printf("%-28s %d\n", "query_qp state", attr.qp_state);
	say_int("destroy_cq in use", ibv_destroy_cq(cq));
}

int main(int argc, char **argv)
{
	const char *want = argc > 1 ? argv[1] : "rxe0";
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	struct ibv_comp_channel *ch;
	struct ibv_pd *pd;
	struct ibv_cq *cq, *ccq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	static char buf[8192];
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), want))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "verbs_misuse: no device %s\n", want);
		return 2;
	}
	pd = ibv_alloc_pd(ctx);
	say_ptr("alloc_pd", pd);
	say_ptr("reg_mr bad access", ibv_reg_mr(pd, buf, 4096, 0x7fffffff));
	say_ptr("reg_mr rwrite w/o lwrite",
		ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE));
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	say_ptr("reg_mr", mr);
	say_int("rereg_mr bad flags",
		ibv_rereg_mr(mr, 1 << 20, NULL, NULL, 0, 0));
	say_int("dealloc_pd with mr", ibv_dealloc_pd(pd));
	say_ptr("create_cq cqe -1", ibv_create_cq(ctx, -1, NULL, NULL, 0));
	say_ptr("create_cq cqe huge",
		ibv_create_cq(ctx, 1 << 30, NULL, NULL, 0));
	ch = ibv_create_comp_channel(ctx);
	say_ptr("create_comp_channel", ch);
	ccq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	say_ptr("create_cq on channel", ccq);
	say_int("destroy_channel in use", ibv_destroy_comp_channel(ch));
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	say_ptr("create_cq", cq);
	say_ptr("create_qp wr huge", rc_qp(pd, cq, 1 << 30));
	qp = rc_qp(pd, cq, 16);
	say_ptr("create_qp", qp);
	if (qp && cq && mr)
		qp_cases(qp, cq, mr);
	say_int("resize_cq", ibv_resize_cq(cq, 128));
	say_int("destroy_qp", ibv_destroy_qp(qp));
	say_int("destroy_cq", ibv_destroy_cq(cq));
	say_int("destroy_cq channel", ibv_destroy_cq(ccq));
	say_int("destroy_channel", ibv_destroy_comp_channel(ch));
	say_int("dereg_mr", ibv_dereg_mr(mr));
	say_int("dealloc_pd", ibv_dealloc_pd(pd));
	say_int("close_device", ibv_close_device(ctx));
	ibv_free_device_list(list);
	return 0;
}
