/* SPDX-License-Identifier: MIT */
/*
 * wr_record.c - wrappers for the ibv_wr_* builders of an extended QP: each
 * records the call into preallocated ibv_send_wr entries, then calls the
 * provider's builder. Nothing here allocates after r2cc_wr_rec_new().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wr_record.h"

struct r2cc_wr_recorder *r2cc_wr_rec_new(unsigned int cap, unsigned int max_sge,
					 size_t max_inline)
{
	struct r2cc_wr_recorder *rec;

	if (!cap || !max_sge) {
		errno = EINVAL;
		return NULL;
	}
	rec = calloc(1, sizeof(*rec));
	if (!rec)
		return NULL;
	rec->cap = cap;
	rec->max_sge = max_sge;
	rec->inline_cap = max_inline * cap;
	rec->wr = calloc(cap, sizeof(*rec->wr));
	rec->sge = calloc((size_t)cap * max_sge, sizeof(*rec->sge));
	rec->inline_buf = malloc(rec->inline_cap ? rec->inline_cap : 1);
	if (!rec->wr || !rec->sge || !rec->inline_buf) {
		r2cc_wr_rec_free(rec);
		errno = ENOMEM;
		return NULL;
	}
	return rec;
}

void r2cc_wr_rec_free(struct r2cc_wr_recorder *rec)
{
	if (!rec)
		return;
	free(rec->wr);
	free(rec->sge);
	free(rec->inline_buf);
	free(rec);
}

/* A new entry for the WR the program just started building. */
static struct ibv_send_wr *rec_begin(struct ibv_qp_ex *qpx,
				     enum ibv_wr_opcode op)
{
	struct r2cc_wr_recorder *rec = r2cc_wr_rec_of(qpx);
	struct ibv_send_wr *wr;

	if (!rec)
		return NULL;
	if (rec->n >= rec->cap) {
		rec->overflow = true;
		return NULL;
	}
	wr = &rec->wr[rec->n++];
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = qpx->wr_id;
	wr->send_flags = qpx->wr_flags;
	wr->opcode = op;
	wr->sg_list = &rec->sge[(size_t)(rec->n - 1) * rec->max_sge];
	return wr;
}

/* The entry being built, for the wr_set_* calls that follow a builder. */
static struct ibv_send_wr *rec_cur(struct ibv_qp_ex *qpx,
				   struct r2cc_wr_recorder **recp)
{
	struct r2cc_wr_recorder *rec = r2cc_wr_rec_of(qpx);

	*recp = rec;
	if (!rec || !rec->n || rec->overflow)
		return NULL;
	return &rec->wr[rec->n - 1];
}

static void w_start(struct ibv_qp_ex *qpx)
{
	struct r2cc_wr_recorder *rec = r2cc_wr_rec_of(qpx);

	if (rec) {
		rec->n = 0;
		rec->inline_used = 0;
		rec->overflow = false;
		rec->unsupported = false;
		if (!rec->divert)
			rec->orig.wr_start(qpx);
	}
}

static int w_complete(struct ibv_qp_ex *qpx)
{
	struct r2cc_wr_recorder *rec = r2cc_wr_rec_of(qpx);
	int ret;

	if (!rec)
		return EINVAL;
	if (rec->divert) {
		/* Nothing reached the provider: post the batch through r2cc
		 * (its ibv_post_send, which every provider keeps). */
		rec->committed = rec->n;
		ret = rec->overflow || rec->unsupported ?
			      EINVAL :
			      rec->post(rec, r2cc_wr_rec_chain(rec), rec->arg);
		rec->n = 0;
		if (ret)
			rec->committed = 0;
	} else {
		ret = rec->orig.wr_complete(qpx);
	}
	if (!ret) {
		rec->committed = rec->n;
		if (rec->on_commit)
			rec->on_commit(rec, rec->arg);
	}
	return ret;
}

static void w_abort(struct ibv_qp_ex *qpx)
{
	struct r2cc_wr_recorder *rec = r2cc_wr_rec_of(qpx);

	if (rec) {
		rec->n = 0;
		if (!rec->divert)
			rec->orig.wr_abort(qpx);
	}
}

#define REC_OR_RET(qpx, op)                                 \
	struct ibv_send_wr *wr = rec_begin(qpx, op);        \
	struct r2cc_wr_recorder *rec = r2cc_wr_rec_of(qpx); \
	if (!rec)                                           \
		return;

static void w_send(struct ibv_qp_ex *qpx)
{
	REC_OR_RET(qpx, IBV_WR_SEND);
	(void)wr;
	if (!rec->divert)
		rec->orig.wr_send(qpx);
}

static void w_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	REC_OR_RET(qpx, IBV_WR_SEND_WITH_IMM);
	if (wr)
		wr->imm_data = imm;
	if (!rec->divert)
		rec->orig.wr_send_imm(qpx, imm);
}

static void w_send_inv(struct ibv_qp_ex *qpx, uint32_t inv_rkey)
{
	REC_OR_RET(qpx, IBV_WR_SEND_WITH_INV);
	if (wr)
		wr->invalidate_rkey = inv_rkey;
	if (!rec->divert)
		rec->orig.wr_send_inv(qpx, inv_rkey);
}

static void w_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr)
{
	REC_OR_RET(qpx, IBV_WR_RDMA_WRITE);
	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = addr;
	}
	if (!rec->divert)
		rec->orig.wr_rdma_write(qpx, rkey, addr);
}

static void w_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
			     uint64_t addr, __be32 imm)
{
	REC_OR_RET(qpx, IBV_WR_RDMA_WRITE_WITH_IMM);
	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = addr;
		wr->imm_data = imm;
	}
	if (!rec->divert)
		rec->orig.wr_rdma_write_imm(qpx, rkey, addr, imm);
}

static void w_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr)
{
	REC_OR_RET(qpx, IBV_WR_RDMA_READ);
	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = addr;
	}
	if (!rec->divert)
		rec->orig.wr_rdma_read(qpx, rkey, addr);
}

static void w_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr,
		      uint64_t compare, uint64_t swap)
{
	REC_OR_RET(qpx, IBV_WR_ATOMIC_CMP_AND_SWP);
	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = addr;
		wr->wr.atomic.compare_add = compare;
		wr->wr.atomic.swap = swap;
	}
	if (!rec->divert)
		rec->orig.wr_atomic_cmp_swp(qpx, rkey, addr, compare, swap);
}

static void w_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr,
			uint64_t add)
{
	REC_OR_RET(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD);
	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = addr;
		wr->wr.atomic.compare_add = add;
	}
	if (!rec->divert)
		rec->orig.wr_atomic_fetch_add(qpx, rkey, addr, add);
}

static void w_local_inv(struct ibv_qp_ex *qpx, uint32_t inv_rkey)
{
	REC_OR_RET(qpx, IBV_WR_LOCAL_INV);
	if (wr)
		wr->invalidate_rkey = inv_rkey;
	if (!rec->divert)
		rec->orig.wr_local_inv(qpx, inv_rkey);
}

static void w_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
		      const struct ibv_mw_bind_info *info)
{
	REC_OR_RET(qpx, IBV_WR_BIND_MW);
	/* A bind cannot be replayed on another rail's MR. */
	rec->unsupported = true;
	(void)wr;
	if (!rec->divert)
		rec->orig.wr_bind_mw(qpx, mw, rkey, info);
}

/* Operations r2cc does not replay: the batch is marked, then passed on. */
static void w_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr,
			   const void *val)
{
	REC_OR_RET(qpx, IBV_WR_ATOMIC_WRITE);
	rec->unsupported = true;
	(void)wr;
	if (!rec->divert)
		rec->orig.wr_atomic_write(qpx, rkey, addr, val);
}

static void w_send_tso(struct ibv_qp_ex *qpx, void *hdr, uint16_t hdr_sz,
		       uint16_t mss)
{
	REC_OR_RET(qpx, IBV_WR_TSO);
	rec->unsupported = true;
	(void)wr;
	if (!rec->divert)
		rec->orig.wr_send_tso(qpx, hdr, hdr_sz, mss);
}

static void w_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t srqn)
{
	struct r2cc_wr_recorder *rec = r2cc_wr_rec_of(qpx);

	if (!rec)
		return;
	rec->unsupported = true;
	if (!rec->divert)
		rec->orig.wr_set_xrc_srqn(qpx, srqn);
}

static void w_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr,
		      uint32_t len)
{
	struct r2cc_wr_recorder *rec;
	struct ibv_send_wr *wr = rec_cur(qpx, &rec);

	if (!rec)
		return;
	if (wr) {
		wr->sg_list[0] = (struct ibv_sge){ addr, len, lkey };
		wr->num_sge = 1;
	}
	if (!rec->divert)
		rec->orig.wr_set_sge(qpx, lkey, addr, len);
}

static void w_set_sge_list(struct ibv_qp_ex *qpx, size_t n,
			   const struct ibv_sge *list)
{
	struct r2cc_wr_recorder *rec;
	struct ibv_send_wr *wr = rec_cur(qpx, &rec);

	if (!rec)
		return;
	if (wr && n > rec->max_sge)
		rec->overflow = true;
	else if (wr) {
		memcpy(wr->sg_list, list, n * sizeof(*list));
		wr->num_sge = (int)n;
	}
	if (!rec->divert)
		rec->orig.wr_set_sge_list(qpx, n, list);
}

/* Inline data may be reused by the program as soon as the call returns:
 * keep a copy, described by the entry's SGEs (lkey 0, IBV_SEND_INLINE). */
static void rec_inline(struct r2cc_wr_recorder *rec, struct ibv_send_wr *wr,
		       size_t n, const struct ibv_data_buf *buf)
{
	size_t i;

	if (n > rec->max_sge) {
		rec->overflow = true;
		return;
	}
	for (i = 0; i < n; i++) {
		char *dst = rec->inline_buf + rec->inline_used;

		if (buf[i].length > rec->inline_cap - rec->inline_used) {
			rec->overflow = true;
			return;
		}
		memcpy(dst, buf[i].addr, buf[i].length);
		rec->inline_used += buf[i].length;
		wr->sg_list[i] = (struct ibv_sge){ (uintptr_t)dst,
						   (uint32_t)buf[i].length, 0 };
	}
	wr->num_sge = (int)n;
	wr->send_flags |= IBV_SEND_INLINE;
}

static void w_set_inline(struct ibv_qp_ex *qpx, void *addr, size_t len)
{
	struct r2cc_wr_recorder *rec;
	struct ibv_send_wr *wr = rec_cur(qpx, &rec);
	struct ibv_data_buf b = { addr, len };

	if (!rec)
		return;
	if (wr)
		rec_inline(rec, wr, 1, &b);
	if (!rec->divert)
		rec->orig.wr_set_inline_data(qpx, addr, len);
}

static void w_set_inline_list(struct ibv_qp_ex *qpx, size_t n,
			      const struct ibv_data_buf *list)
{
	struct r2cc_wr_recorder *rec;
	struct ibv_send_wr *wr = rec_cur(qpx, &rec);

	if (!rec)
		return;
	if (wr)
		rec_inline(rec, wr, n, list);
	if (!rec->divert)
		rec->orig.wr_set_inline_data_list(qpx, n, list);
}

static void w_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
			  uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct r2cc_wr_recorder *rec;
	struct ibv_send_wr *wr = rec_cur(qpx, &rec);

	if (!rec)
		return;
	if (wr) {
		wr->wr.ud.ah = ah;
		wr->wr.ud.remote_qpn = remote_qpn;
		wr->wr.ud.remote_qkey = remote_qkey;
	}
	if (!rec->divert)
		rec->orig.wr_set_ud_addr(qpx, ah, remote_qpn, remote_qkey);
}

/* Install a wrapper only where the provider has the builder. */
#define PATCH(field, fn)                 \
	do {                             \
		if (qpx->field)          \
			qpx->field = fn; \
	} while (0)

void r2cc_wr_rec_patch(struct r2cc_wr_recorder *rec, struct ibv_qp_ex *qpx)
{
	rec->orig = *qpx;
	PATCH(wr_start, w_start);
	PATCH(wr_complete, w_complete);
	PATCH(wr_abort, w_abort);
	PATCH(wr_send, w_send);
	PATCH(wr_send_imm, w_send_imm);
	PATCH(wr_send_inv, w_send_inv);
	PATCH(wr_rdma_write, w_rdma_write);
	PATCH(wr_rdma_write_imm, w_rdma_write_imm);
	PATCH(wr_rdma_read, w_rdma_read);
	PATCH(wr_atomic_cmp_swp, w_cmp_swp);
	PATCH(wr_atomic_fetch_add, w_fetch_add);
	PATCH(wr_local_inv, w_local_inv);
	PATCH(wr_bind_mw, w_bind_mw);
	PATCH(wr_set_sge, w_set_sge);
	PATCH(wr_set_sge_list, w_set_sge_list);
	PATCH(wr_set_inline_data, w_set_inline);
	PATCH(wr_set_inline_data_list, w_set_inline_list);
	PATCH(wr_set_ud_addr, w_set_ud_addr);
	PATCH(wr_atomic_write, w_atomic_write);
	PATCH(wr_send_tso, w_send_tso);
	PATCH(wr_set_xrc_srqn, w_set_xrc_srqn);
}

struct ibv_send_wr *r2cc_wr_rec_chain(struct r2cc_wr_recorder *rec)
{
	unsigned int i;

	if (!rec->committed || rec->overflow || rec->unsupported)
		return NULL;
	for (i = 0; i < rec->committed; i++)
		rec->wr[i].next =
			i + 1 < rec->committed ? &rec->wr[i + 1] : NULL;
	return rec->wr;
}
