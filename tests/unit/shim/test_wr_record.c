/* SPDX-License-Identifier: MIT */
/*
 * test_wr_record.c - recording of ibv_wr_* batches on an extended QP: a
 * scripted provider QP logs what reaches it, and the recorded batch must
 * replay as the same ibv_send_wr chain.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "wr_record.h"

/* The "provider": counts calls and checks arguments pass through. */
static struct {
	int start, complete, abort, write, send_imm, sge, inl, bind;
	uint32_t rkey, lkey;
	uint64_t raddr;
	int complete_ret;
} prov;

static void p_start(struct ibv_qp_ex *q)
{
	(void)q;
	prov.start++;
}
static int p_complete(struct ibv_qp_ex *q)
{
	(void)q;
	prov.complete++;
	return prov.complete_ret;
}
static void p_abort(struct ibv_qp_ex *q)
{
	(void)q;
	prov.abort++;
}
static void p_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t a)
{
	(void)q;
	prov.write++;
	prov.rkey = rkey;
	prov.raddr = a;
}
static void p_send_imm(struct ibv_qp_ex *q, __be32 imm)
{
	(void)q;
	(void)imm;
	prov.send_imm++;
}
static void p_send(struct ibv_qp_ex *q)
{
	(void)q;
}
static void p_sge(struct ibv_qp_ex *q, uint32_t lkey, uint64_t a, uint32_t l)
{
	(void)q;
	(void)a;
	(void)l;
	prov.sge++;
	prov.lkey = lkey;
}
static void p_inl(struct ibv_qp_ex *q, void *a, size_t l)
{
	(void)q;
	(void)a;
	(void)l;
	prov.inl++;
}
static void p_bind(struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t rkey,
		   const struct ibv_mw_bind_info *i)
{
	(void)q;
	(void)mw;
	(void)rkey;
	(void)i;
	prov.bind++;
}

static struct ibv_qp_ex qpx;
static struct r2cc_wr_recorder *rec;
static int commits;

/* The seam wr_record.c calls to find the recorder of a QP. */
struct r2cc_wr_recorder *r2cc_wr_rec_of(struct ibv_qp_ex *q)
{
	return q == &qpx ? rec : NULL;
}

static void on_commit(struct r2cc_wr_recorder *r, void *arg)
{
	(void)r;
	(void)arg;
	commits++;
}

static void setup(void)
{
	memset(&prov, 0, sizeof(prov));
	memset(&qpx, 0, sizeof(qpx));
	qpx.wr_start = p_start;
	qpx.wr_complete = p_complete;
	qpx.wr_abort = p_abort;
	qpx.wr_rdma_write = p_write;
	qpx.wr_send_imm = p_send_imm;
	qpx.wr_send = p_send;
	qpx.wr_set_sge = p_sge;
	qpx.wr_set_inline_data = p_inl;
	qpx.wr_bind_mw = p_bind;
	rec = r2cc_wr_rec_new(4, 2, 64);
	cr_assert_not_null(rec);
	rec->on_commit = on_commit;
	commits = 0;
	r2cc_wr_rec_patch(rec, &qpx);
}

static void teardown(void)
{
	r2cc_wr_rec_free(rec);
}

TestSuite(wr_record, .init = setup, .fini = teardown, .timeout = 5);

Test(wr_record, batch_replays_as_send_wr_chain)
{
	char data[8] = "abcdefg";
	struct ibv_send_wr *w;

	ibv_wr_start(&qpx);
	qpx.wr_id = 11;
	qpx.wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(&qpx, 0x1234, 0xdead0000);
	ibv_wr_set_sge(&qpx, 0x77, 0x1000, 4096);
	qpx.wr_id = 12;
	qpx.wr_flags = 0;
	ibv_wr_send_imm(&qpx, htobe32(99));
	ibv_wr_set_inline_data(&qpx, data, sizeof(data));
	memset(data, 'x', sizeof(data)); /* the program reuses its buffer */
	cr_assert_eq(ibv_wr_complete(&qpx), 0);

	/* The provider saw every call with its arguments. */
	cr_assert_eq(prov.start, 1);
	cr_assert_eq(prov.complete, 1);
	cr_assert_eq(prov.write, 1);
	cr_assert_eq(prov.rkey, 0x1234);
	cr_assert_eq(prov.raddr, 0xdead0000);
	cr_assert_eq(prov.lkey, 0x77);
	cr_assert_eq(prov.send_imm, 1);
	cr_assert_eq(prov.inl, 1);
	cr_assert_eq(commits, 1);

	w = r2cc_wr_rec_chain(rec);
	cr_assert_not_null(w);
	cr_assert_eq(w->wr_id, 11);
	cr_assert_eq(w->opcode, IBV_WR_RDMA_WRITE);
	cr_assert_eq(w->send_flags, IBV_SEND_SIGNALED);
	cr_assert_eq(w->wr.rdma.rkey, 0x1234);
	cr_assert_eq(w->wr.rdma.remote_addr, 0xdead0000);
	cr_assert_eq(w->num_sge, 1);
	cr_assert_eq(w->sg_list[0].lkey, 0x77);
	cr_assert_eq(w->sg_list[0].addr, 0x1000);
	cr_assert_eq(w->sg_list[0].length, 4096);
	w = w->next;
	cr_assert_not_null(w);
	cr_assert_eq(w->wr_id, 12);
	cr_assert_eq(w->opcode, IBV_WR_SEND_WITH_IMM);
	cr_assert_eq(be32toh(w->imm_data), 99);
	cr_assert(w->send_flags & IBV_SEND_INLINE);
	cr_assert_eq(w->num_sge, 1);
	cr_assert_eq(w->sg_list[0].length, sizeof(data));
	cr_assert_str_eq((char *)(uintptr_t)w->sg_list[0].addr, "abcdefg");
	cr_assert_null(w->next);
}

Test(wr_record, abort_discards_and_failed_complete_does_not_commit)
{
	ibv_wr_start(&qpx);
	ibv_wr_rdma_write(&qpx, 1, 2);
	ibv_wr_abort(&qpx);
	cr_assert_eq(prov.abort, 1);
	cr_assert_null(r2cc_wr_rec_chain(rec));

	prov.complete_ret = ENOMEM;
	ibv_wr_start(&qpx);
	ibv_wr_rdma_write(&qpx, 1, 2);
	ibv_wr_set_sge(&qpx, 1, 2, 3);
	cr_assert_eq(ibv_wr_complete(&qpx), ENOMEM);
	cr_assert_eq(commits, 0);
	cr_assert_null(r2cc_wr_rec_chain(rec));
}

Test(wr_record, overflow_and_unreplayable_batches_are_flagged)
{
	int i;

	ibv_wr_start(&qpx);
	for (i = 0; i < 5; i++) { /* cap is 4 */
		ibv_wr_rdma_write(&qpx, 1, 2);
		ibv_wr_set_sge(&qpx, 1, 2, 3);
	}
	cr_assert_eq(ibv_wr_complete(&qpx), 0);
	cr_assert_eq(prov.write, 5, "the provider still gets every WR");
	cr_assert(rec->overflow);
	cr_assert_null(r2cc_wr_rec_chain(rec));

	ibv_wr_start(&qpx);
	cr_assert(!rec->overflow, "wr_start resets the batch");
	ibv_wr_bind_mw(&qpx, NULL, 5, NULL);
	cr_assert_eq(ibv_wr_complete(&qpx), 0);
	cr_assert_eq(prov.bind, 1);
	cr_assert(rec->unsupported);
	cr_assert_null(r2cc_wr_rec_chain(rec));
}

Test(wr_record, inline_data_beyond_capacity_overflows)
{
	static char big[4 * 64 + 1];

	ibv_wr_start(&qpx);
	ibv_wr_send_imm(&qpx, 0);
	ibv_wr_set_inline_data(&qpx, big, sizeof(big));
	cr_assert_eq(ibv_wr_complete(&qpx), 0);
	cr_assert(rec->overflow);
	cr_assert_null(r2cc_wr_rec_chain(rec));
}

Test(wr_record, unpatched_builders_stay_null)
{
	cr_assert_null(qpx.wr_rdma_read, "no provider builder, no wrapper");
	cr_assert_null(qpx.wr_atomic_write);
}
