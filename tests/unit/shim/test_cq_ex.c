/* SPDX-License-Identifier: MIT */
/*
 * test_cq_ex.c - extended CQs under the shim (shim/cq_ex.c) on a scripted
 * provider CQ: without protection the provider's walk is the program's,
 * counted; with it, the walk is r2cc's: what migrate/ stashed comes first,
 * then the CQ's, read through r2cc's copy, each taken from the provider by
 * a walk of its own (start_poll, end_poll: never its next_poll), never
 * ended after a start that found nothing.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "shim_int.h"

struct r2cc_shim_state r2cc_shim;

#define MAXW 16

static struct fake_cq {
	struct ibv_cq_ex cqx; /* first: the provider gets &cqx */
	struct ibv_wc wc[MAXW];
	int head, n;
	int cur; /* the completion the walk is at, -1 none */
	int starts, ends, open;
} f;

static struct ibv_context ctx;
static struct r2cc_ctx rc;
static struct r2cc_cq *q;
static struct r2cc_qp qp;

/* The walk moves on to the next scripted completion, if any. */
static int f_take(void)
{
	if (f.head == f.n)
		return ENOENT;
	f.cur = f.head++;
	f.cqx.wr_id = f.wc[f.cur].wr_id;
	f.cqx.status = f.wc[f.cur].status;
	return 0;
}

static int f_start(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr)
{
	(void)cq;
	(void)attr;
	cr_assert_eq(f.open, 0, "a walk started inside another");
	if (f_take())
		return ENOENT;
	f.starts++;
	f.open = 1;
	return 0;
}

static int f_next(struct ibv_cq_ex *cq)
{
	(void)cq;
	cr_assert_eq(f.open, 1, "next_poll outside a walk");
	return f_take();
}

static void f_end(struct ibv_cq_ex *cq)
{
	(void)cq;
	cr_assert_eq(f.open, 1, "end_poll outside a walk");
	f.open = 0;
	f.ends++;
	f.cur = -1;
}

#define F_READ(type, name, field)                       \
	static type f_read_##name(struct ibv_cq_ex *cq) \
	{                                               \
		(void)cq;                               \
		cr_assert_geq(f.cur, 0);                \
		return (type)f.wc[f.cur].field;         \
	}
F_READ(enum ibv_wc_opcode, opcode, opcode)
F_READ(uint32_t, byte_len, byte_len)
F_READ(uint32_t, qp_num, qp_num)
F_READ(unsigned int, wc_flags, wc_flags)
F_READ(__be32, imm_data, imm_data)
#undef F_READ

static uint64_t f_read_ts(struct ibv_cq_ex *cq)
{
	(void)cq;
	return 1000 + (uint64_t)f.cur;
}

static void add(uint64_t wr_id, enum ibv_wc_opcode op, uint32_t len)
{
	struct ibv_wc *w = &f.wc[f.n++];

	memset(w, 0, sizeof(*w));
	w->wr_id = wr_id;
	w->opcode = op;
	w->byte_len = len;
	w->qp_num = 0x11;
	if (op == IBV_WC_RECV_RDMA_WITH_IMM) {
		w->wc_flags = IBV_WC_WITH_IMM;
		w->imm_data = htobe32(0xabc);
	}
}

static void make(bool protecting)
{
	memset(&f, 0, sizeof(f));
	memset(&rc, 0, sizeof(rc));
	memset(&qp, 0, sizeof(qp));
	f.cur = -1;
	f.cqx.context = &ctx;
	f.cqx.start_poll = f_start;
	f.cqx.next_poll = f_next;
	f.cqx.end_poll = f_end;
	f.cqx.read_opcode = f_read_opcode;
	f.cqx.read_byte_len = f_read_byte_len;
	f.cqx.read_qp_num = f_read_qp_num;
	f.cqx.read_wc_flags = f_read_wc_flags;
	f.cqx.read_imm_data = f_read_imm_data;
	f.cqx.read_completion_ts = f_read_ts;
	cr_assert_eq(r2cc_map_init(&r2cc_shim.reg), 0);
	cr_assert_eq(r2cc_map_init(&r2cc_shim.qpn), 0);
	r2cc_shim.protecting = protecting;
	rc.type = R2CC_OBJ_CTX;
	rc.ctx = &ctx;
	/* An unprotected QP of the program, for the counters */
	qp.type = R2CC_OBJ_QP;
	qp.st = &qp.st_own;
	cr_assert_eq(r2cc_map_insert(&r2cc_shim.qpn, r2cc_qpn_key(&rc, 0x11),
				     &qp),
		     0);
	q = calloc(1, sizeof(*q));
	q->type = R2CC_OBJ_CQ;
	q->cq = ibv_cq_ex_to_cq(&f.cqx);
	q->ctx = &rc;
	q->extended = true;
	cr_assert_eq(r2cc_map_insert(&r2cc_shim.reg, (uintptr_t)q->cq, q), 0);
	r2cc_cq_ex_patch(q, &f.cqx);
	cr_assert_not_null(q->ex);
}

static void unmake(void)
{
	r2cc_mig_cq_free(q->mc);
	r2cc_cq_ex_free(q);
	free(q);
	r2cc_map_destroy(&r2cc_shim.reg);
	r2cc_map_destroy(&r2cc_shim.qpn);
}

/* The program's walk: every wr_id, in the order shown, into @ids. */
static int walk(uint64_t *ids, int max)
{
	int n = 0,
	    ret = ibv_start_poll(&f.cqx, &(struct ibv_poll_cq_attr){ 0 });

	if (ret)
		return ret == ENOENT ? 0 : -ret;
	do {
		cr_assert_eq(ibv_wc_read_qp_num(&f.cqx), 0x11);
		ids[n++] = f.cqx.wr_id;
	} while (n < max && !ibv_next_poll(&f.cqx));
	ibv_end_poll(&f.cqx);
	return n;
}

Test(cq_ex, unprotected_the_providers_walk_is_the_programs, .fini = unmake)
{
	uint64_t ids[MAXW];

	make(false);
	cr_assert_eq(r2cc_cq_ex_flags(IBV_WC_EX_WITH_QP_NUM),
		     IBV_WC_EX_WITH_QP_NUM, "nothing added");
	cr_assert_eq(f.cqx.read_opcode, f_read_opcode, "readers untouched");
	add(1, IBV_WC_SEND, 0);
	add(2, IBV_WC_RECV, 64);
	cr_assert_eq(walk(ids, MAXW), 2);
	cr_assert_eq(ids[0], 1);
	cr_assert_eq(ids[1], 2);
	cr_assert_eq(f.starts, 1);
	cr_assert_eq(f.ends, 1);
	cr_assert_eq(qp.st->polled, 2, "counted");
	cr_assert_eq(qp.st->bytes_polled, 64);
}

Test(cq_ex, protected_the_walk_is_read_through_r2ccs_copy, .fini = unmake)
{
	uint64_t ids[MAXW];

	make(true);
	cr_assert(r2cc_cq_ex_flags(0) & IBV_WC_EX_WITH_QP_NUM);
	cr_assert(r2cc_cq_mergeable(q));
	cr_assert_neq(f.cqx.read_opcode, f_read_opcode, "r2cc reads");
	add(1, IBV_WC_RECV_RDMA_WITH_IMM, 4096);
	add(2, IBV_WC_RDMA_WRITE, 0);
	cr_assert_eq(ibv_start_poll(&f.cqx, &(struct ibv_poll_cq_attr){ 0 }),
		     0);
	cr_assert_eq(f.cqx.wr_id, 1);
	cr_assert_eq(ibv_wc_read_opcode(&f.cqx), IBV_WC_RECV_RDMA_WITH_IMM);
	cr_assert_eq(ibv_wc_read_byte_len(&f.cqx), 4096);
	cr_assert(ibv_wc_read_wc_flags(&f.cqx) & IBV_WC_WITH_IMM);
	cr_assert_eq(be32toh(ibv_wc_read_imm_data(&f.cqx)), 0xabc);
	cr_assert_eq(ibv_wc_read_completion_ts(&f.cqx), 1000,
		     "the provider's own, for its completion");
	cr_assert_eq(f.open, 0, "taken: the provider's walk ended");
	cr_assert_eq(ibv_next_poll(&f.cqx), 0);
	cr_assert_eq(f.cqx.wr_id, 2);
	cr_assert_eq(ibv_wc_read_opcode(&f.cqx), IBV_WC_RDMA_WRITE);
	cr_assert_eq(ibv_wc_read_completion_ts(&f.cqx), 1001);
	/* The end of the CQ: a start that finds nothing, no end after it */
	cr_assert_eq(ibv_next_poll(&f.cqx), ENOENT);
	ibv_end_poll(&f.cqx);
	cr_assert_eq(f.starts, 2);
	cr_assert_eq(f.ends, 2);
	cr_assert_eq(f.open, 0);
	cr_assert_eq(qp.st->polled, 2);
	/* An empty CQ: ENOENT, and no end owed */
	cr_assert_eq(walk(ids, MAXW), 0);
	cr_assert_eq(f.ends, 2);
}

Test(cq_ex, what_migrate_stashed_comes_before_the_cq, .fini = unmake)
{
	struct ibv_wc w = { .wr_id = 100,
			    .opcode = IBV_WC_RECV,
			    .byte_len = 8,
			    .qp_num = 0x11 };
	uint64_t ids[MAXW];

	make(true);
	q->mc = r2cc_mig_cq_new(NULL, 16);
	cr_assert_not_null(q->mc);
	add(1, IBV_WC_SEND, 0);
	add(2, IBV_WC_SEND, 0);
	/* synthesised successes, or a fenced QP's given back */
	cr_assert_eq(r2cc_mig_stash(q->mc, &w), 0);
	w.wr_id = 101;
	cr_assert_eq(r2cc_mig_stash(q->mc, &w), 0);
	cr_assert_eq(ibv_start_poll(&f.cqx, &(struct ibv_poll_cq_attr){ 0 }),
		     0);
	cr_assert_eq(f.cqx.wr_id, 100);
	cr_assert_eq(ibv_wc_read_byte_len(&f.cqx), 8);
	cr_assert_eq(ibv_wc_read_completion_ts(&f.cqx), 0,
		     "no provider completion behind a stashed one");
	cr_assert_eq(f.starts, 0, "the CQ not touched yet");
	ibv_end_poll(&f.cqx);
	cr_assert_eq(f.ends, 0);
	cr_assert_eq(walk(ids, MAXW), 3);
	cr_assert_eq(ids[0], 101);
	cr_assert_eq(ids[1], 1);
	cr_assert_eq(ids[2], 2);
	cr_assert_eq(f.starts, 2);
	cr_assert_eq(f.ends, 2);
	cr_assert_eq(f.open, 0);
}

Test(cq_ex, a_cq_without_the_readers_r2cc_needs_cannot_be_merged,
     .fini = unmake)
{
	memset(&f, 0, sizeof(f));
	make(true);
	r2cc_cq_ex_free(q);
	f.cqx.start_poll = f_start;
	f.cqx.next_poll = f_next;
	f.cqx.end_poll = f_end;
	f.cqx.read_opcode = f_read_opcode;
	f.cqx.read_wc_flags = NULL; /* not asked for, not given */
	r2cc_cq_ex_patch(q, &f.cqx);
	cr_assert_not(r2cc_cq_mergeable(q));
	cr_assert_eq(f.cqx.read_opcode, f_read_opcode);
}
