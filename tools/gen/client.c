/* SPDX-License-Identifier: MIT */
/*
 * r2cc-gen's client: posts the operation mix on every QP within the server's
 * credits and its own send-queue room, checks send completions against
 * posting order, verifies READ data and takes credits from the server.
 */
#include <endian.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "gen.h"

static const enum ibv_wr_opcode opcode[GEN_K_MAX] = {
	[GEN_K_SEND] = IBV_WR_SEND,
	[GEN_K_SEND_IMM] = IBV_WR_SEND_WITH_IMM,
	[GEN_K_WRITE] = IBV_WR_RDMA_WRITE,
	[GEN_K_WRITE_IMM] = IBV_WR_RDMA_WRITE_WITH_IMM,
};

/* What a successful send completion of each kind reports. */
static const enum ibv_wc_opcode wc_opcode[GEN_K_MAX] = {
	[GEN_K_SEND] = IBV_WC_SEND,
	[GEN_K_SEND_IMM] = IBV_WC_SEND,
	[GEN_K_WRITE] = IBV_WC_RDMA_WRITE,
	[GEN_K_WRITE_IMM] = IBV_WC_RDMA_WRITE,
	[GEN_K_READ] = IBV_WC_RDMA_READ,
	[GEN_K_NOTIFY] = IBV_WC_SEND,
};

/* Header and payload of message seq, into buf (len bytes in all). */
static void make_msg(struct gen_qp *q, unsigned int kind, uint32_t seq,
		     uint8_t *buf, uint32_t len)
{
	struct gen_hdr h = { .magic = GEN_MAGIC,
			     .qp = q->wire,
			     .kind = kind,
			     .seq = seq,
			     .len = len - GEN_HDR_LEN,
			     .slot = seq % GEN_CREDITS };

	gen_fill(q->seed, q->wire, seq, 0, buf + GEN_HDR_LEN, h.len);
	h.sum = gen_sum(q->wire, seq, buf + GEN_HDR_LEN, h.len);
	gen_hdr_encode(&h, buf);
}

/* The next send WR of q: its buffer slot, record and wr_id. */
static uint8_t *next_wr(struct gen *g, struct gen_qp *q, struct ibv_send_wr *wr,
			struct ibv_sge *sge, uint32_t len)
{
	uint64_t idx = q->sq.posted;
	uint8_t *buf = q->sbuf + (idx % GEN_SQ_DEPTH) * g->sslot;

	memset(wr, 0, sizeof(*wr));
	sge->addr = (uintptr_t)buf;
	sge->length = len;
	sge->lkey = g->mr->lkey;
	wr->sg_list = sge;
	wr->num_sge = 1;
	/* 3 of 4 unsignaled; post_batch() signals each batch's last WR */
	wr->send_flags = idx % 4 == 3 ? IBV_SEND_SIGNALED : 0;
	wr->wr_id = GEN_WRID(0, q->idx, gen_sq_post(&q->sq, wr->send_flags));
	return buf;
}

/* A plain WRITE is followed by a NOTIFY naming its region and seq. */
static void add_notify(struct gen *g, struct gen_qp *q, const uint8_t *region,
		       struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	struct gen_wr *w = &q->wr[q->sq.posted % GEN_SQ_DEPTH];
	struct gen_hdr h;
	uint8_t *buf = next_wr(g, q, wr, sge, GEN_HDR_LEN);

	gen_hdr_decode(region, GEN_HDR_LEN, &h);
	h.kind = GEN_K_NOTIFY;
	gen_hdr_encode(&h, buf);
	wr->opcode = IBV_WR_SEND_WITH_IMM;
	wr->imm_data = htobe32(h.seq);
	if (GEN_HDR_LEN <= g->lim.max_inline)
		wr->send_flags |= IBV_SEND_INLINE;
	*w = (struct gen_wr){ GEN_K_NOTIFY, h.seq, GEN_HDR_LEN, 0 };
}

static int build_op(struct gen *g, struct gen_qp *q, const struct gen_op *op,
		    struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	struct gen_wr *w = &q->wr[q->sq.posted % GEN_SQ_DEPTH];
	uint8_t *buf = next_wr(g, q, wr, sge, op->len);

	*w = (struct gen_wr){ op->kind, 0, op->len, op->off };
	if (op->kind == GEN_K_READ) {
		w->seq = q->rseq++;
		memset(buf, 0, op->len);
		wr->opcode = IBV_WR_RDMA_READ;
		wr->wr.rdma.remote_addr = q->peer.raddr + op->off;
		wr->wr.rdma.rkey = q->peer.rkey;
		return 1;
	}
	w->seq = q->tposted++;
	make_msg(q, op->kind, w->seq, buf, op->len);
	wr->imm_data = htobe32(w->seq);
	wr->wr.rdma.remote_addr =
		q->peer.waddr + (uint64_t)(w->seq % GEN_CREDITS) * g->o.max_msg;
	wr->wr.rdma.rkey = q->peer.rkey;
	if (op->inl)
		wr->send_flags |= IBV_SEND_INLINE;
	wr->opcode = opcode[op->kind];
	if (op->kind != GEN_K_WRITE)
		return 1;
	add_notify(g, q, buf, wr + 1, sge + 1);
	return 2;
}

/* Credits, send-queue room and --window allow this operation now. */
static int can_post(const struct gen *g, const struct gen_qp *q,
		    const struct gen_op *op)
{
	uint32_t need = op->kind == GEN_K_WRITE ? 2 : 1;

	if (gen_sq_room(&q->sq) < need ||
	    q->sq.posted - q->sq.retired + need > (uint64_t)g->o.window)
		return 0;
	return op->kind == GEN_K_READ ||
	       (q->tposted - q->tacked < GEN_CREDITS &&
		q->tposted - q->tacked < (uint32_t)g->o.window);
}

/* As many operations as allowed, in one ibv_post_send(). */
static int post_batch(struct gen *g, struct gen_qp *q)
{
	struct ibv_send_wr wr[GEN_BATCH];
	struct ibv_sge sge[GEN_BATCH];
	struct gen_op op;
	int i, n = 0, ret;

	while (n + 2 <= GEN_BATCH && !g->stop) {
		gen_pick(q->seed, q->wire, q->nop, &g->lim, &op);
		if (!can_post(g, q, &op))
			break;
		n += build_op(g, q, &op, wr + n, sge + n);
		q->nop++;
		if (g->o.ops && ++g->picked >= g->o.ops)
			g->stop = 1;
	}
	if (!n)
		return 0;
	for (i = 0; i < n - 1; i++)
		wr[i].next = &wr[i + 1];
	wr[n - 1].next = NULL;
	/* the last WR of a batch is signaled, so every WR retires */
	wr[n - 1].send_flags |= IBV_SEND_SIGNALED;
	q->sig[GEN_WRID_IDX(wr[n - 1].wr_id) % GEN_SQ_DEPTH] = 1;
	ret = gen_post_send(g, q, wr);
	if (ret) {
		gen_fail(g, &g->st.errors, "qp %u: ibv_post_send: %s", q->idx,
			 strerror(ret));
		g->done = 1;
		return -ret;
	}
	return 0;
}

/* Some QP still has WRs or unverified messages outstanding. */
int gen_client_busy(const struct gen *g, char *what, size_t n)
{
	const struct gen_qp *q;
	int i;

	for (i = 0; i < g->nqps; i++) {
		q = &g->qp[i];
		if (q->sq.posted == q->sq.retired && q->tposted == q->tacked)
			continue;
		snprintf(what, n,
			 "qp %d: %" PRIu64
			 " WRs uncompleted, %u messages unverified",
			 i, q->sq.posted - q->sq.retired,
			 q->tposted - q->tacked);
		return 1;
	}
	return 0;
}

int gen_client_step(struct gen *g)
{
	char what[96];
	int i, ret;

	if ((g->o.secs > 0 && gen_now() - g->t0 >= g->o.secs) ||
	    gen_stop_asked())
		g->stop = 1;
	for (i = 0; i < g->nqps && !g->stop && !gen_paused(g); i++) {
		ret = post_batch(g, &g->qp[i]);
		if (ret)
			return ret;
	}
	if (g->stop && !gen_client_busy(g, what, sizeof(what)))
		g->done = 1;
	return 0;
}

/* A READ retired: its buffer must hold the window of the server's pattern. */
static void check_read(struct gen *g, struct gen_qp *q, const struct gen_wr *w,
		       const uint8_t *buf)
{
	size_t bad = gen_diff(q->seed, q->wire, GEN_READ_STREAM, w->off, buf,
			      w->len);

	if (w->seq != q->rdone)
		gen_fail(g, &g->st.order_errors,
			 "qp %u: READ seq %u retired, expected %u", q->idx,
			 w->seq, q->rdone);
	q->rdone = w->seq + 1;
	if (bad < w->len) {
		gen_fail(
			g, &g->st.mismatches,
			"qp %u: READ seq %u (%u bytes at %u): byte %zu differs",
			q->idx, w->seq, w->len, w->off, bad);
		return;
	}
	g->st.ops++;
	g->st.bytes_verified += w->len;
}

/* A signaled send completion retires it and the unsignaled WRs before. */
static void send_done(struct gen *g, struct gen_qp *q, const struct ibv_wc *wc)
{
	uint64_t idx = GEN_WRID_IDX(wc->wr_id), from, i;
	const struct gen_wr *w = &q->wr[idx % GEN_SQ_DEPTH];
	enum gen_sq_verdict v = gen_sq_complete(&q->sq, idx, &from);

	if (v == GEN_SQ_STALE) {
		gen_fail(g, &g->st.order_errors,
			 "qp %u: completion for wr #%" PRIu64
			 ", next unretired is #%" PRIu64,
			 q->idx, idx, from);
		return;
	}
	if (v == GEN_SQ_SKIPPED)
		gen_fail(g, &g->st.order_errors,
			 "qp %u: wr #%" PRIu64
			 " completed before an earlier signaled WR",
			 q->idx, idx);
	if (wc->opcode != wc_opcode[w->kind])
		gen_fail(g, &g->st.order_errors,
			 "qp %u: wr #%" PRIu64 " (%s) completed as opcode %d",
			 q->idx, idx, gen_kind_name(w->kind), wc->opcode);
	for (i = from; i <= idx; i++) {
		w = &q->wr[i % GEN_SQ_DEPTH];
		if (w->kind == GEN_K_READ)
			check_read(g, q, w,
				   q->sbuf + (i % GEN_SQ_DEPTH) * g->sslot);
	}
}

/* The credit's ack must lie between what we knew and what we posted. */
static void take_credit(struct gen *g, struct gen_qp *q,
			const struct gen_hdr *h)
{
	uint32_t missing;

	switch (gen_seq_check(&q->in, h->seq, &missing)) {
	case GEN_SEQ_GAP:
		gen_fail(g, &g->st.losses,
			 "qp %u: credit seq %u arrived, %u before it lost",
			 q->idx, h->seq, missing);
		break;
	case GEN_SEQ_DUP:
		gen_fail(g, &g->st.duplicates, "qp %u: credit seq %u again",
			 q->idx, h->seq);
		return;
	default:
		break;
	}
	if ((int32_t)(h->ack - q->tacked) < 0 ||
	    (int32_t)(h->ack - q->tposted) > 0) {
		gen_fail(g, &g->st.order_errors,
			 "qp %u: credit acks %u messages, %u known, %u posted",
			 q->idx, h->ack, q->tacked, q->tposted);
		return;
	}
	g->st.ops += h->ack - q->tacked;
	q->tacked = h->ack;
}

static void credit_done(struct gen *g, struct gen_qp *q,
			const struct ibv_wc *wc)
{
	uint64_t idx = GEN_WRID_IDX(wc->wr_id);
	const uint8_t *buf = gen_recv_buf(g, q, wc->wr_id);
	struct gen_hdr h;

	if (wc->opcode != IBV_WC_RECV || wc->byte_len != GEN_HDR_LEN ||
	    gen_hdr_decode(buf, wc->byte_len, &h) || h.kind != GEN_K_CREDIT ||
	    h.qp != q->wire || h.len || h.sum != gen_sum(h.qp, h.seq, NULL, 0))
		gen_fail(g, &g->st.mismatches,
			 "qp %u: receive #%" PRIu64 ": not a credit (%u bytes)",
			 q->idx, idx, wc->byte_len);
	else
		take_credit(g, q, &h);
	if (gen_recv_again(g, q, wc->wr_id)) {
		gen_fail(g, &g->st.errors, "qp %u: ibv_post_recv failed",
			 q->idx);
		g->done = 1;
	}
}

void gen_client_wc(struct gen *g, struct gen_qp *q, const struct ibv_wc *wc)
{
	if (GEN_WRID_RECV(wc->wr_id))
		credit_done(g, q, wc);
	else
		send_done(g, q, wc);
}
