/* SPDX-License-Identifier: MIT */
/*
 * r2cc-gen's server: the target. It verifies each message (SEND, SEND with
 * immediate, WRITE with immediate, and the NOTIFY that follows a plain WRITE)
 * in receive order, and returns credits so that the client never overwrites
 * a buffer or region before it was checked.
 */
#include <endian.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "gen.h"

/* What arrived: the message header, and where its payload lies. */
struct arrival {
	struct gen_hdr h;
	uint8_t *data; /* header, then h.len payload bytes */
	uint32_t imm; /* host order; valid when has_imm */
	int has_imm;
	int hdr_ok; /* the header decoded: its seq counts */
};

static uint8_t *region(struct gen *g, struct gen_qp *q, uint32_t slot)
{
	return q->wreg + (size_t)(slot % GEN_CREDITS) * g->o.max_msg;
}

/* The region a WRITE filled must be the one the NOTIFY names. */
static const char *notified(struct gen *g, struct gen_qp *q, struct arrival *a)
{
	struct gen_hdr w;
	uint8_t *r = region(g, q, a->h.slot);

	if (gen_hdr_decode(r, g->o.max_msg, &w) || w.kind != GEN_K_WRITE ||
	    w.seq != a->h.seq || w.len != a->h.len || w.sum != a->h.sum ||
	    w.qp != a->h.qp)
		return "its region does not hold the WRITE it names";
	a->data = r;
	return NULL;
}

/*
 * Header and framing of one receive: kind against opcode and immediate,
 * byte_len against the header's length. NULL when the payload may be
 * checked, else what is wrong (a->hdr_ok says whether seq can be trusted).
 */
static const char *frame(struct gen *g, struct gen_qp *q,
			 const struct ibv_wc *wc, struct arrival *a)
{
	unsigned int k;
	int rdma;

	a->has_imm = !!(wc->wc_flags & IBV_WC_WITH_IMM);
	a->imm = be32toh(wc->imm_data);
	rdma = wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM;
	if (rdma)
		a->data = region(g, q, a->imm);
	if (gen_hdr_decode(a->data, rdma ? g->o.max_msg : wc->byte_len, &a->h))
		return "no valid header";
	a->hdr_ok = 1;
	k = a->h.kind;
	if (a->h.qp != q->wire || a->h.len > g->o.max_msg - GEN_HDR_LEN)
		return "header names another QP or a length beyond --max-size";
	if (k != GEN_K_SEND && k != GEN_K_SEND_IMM && k != GEN_K_WRITE_IMM &&
	    k != GEN_K_NOTIFY)
		return "not a kind of message the client sends";
	if (rdma != (k == GEN_K_WRITE_IMM))
		return "completion opcode does not match the header";
	if (a->has_imm != (k != GEN_K_SEND) ||
	    (a->has_imm && a->imm != a->h.seq))
		return "immediate data does not match seq";
	if (wc->byte_len != GEN_HDR_LEN + (k == GEN_K_NOTIFY ? 0 : a->h.len))
		return "byte_len does not match the header";
	if ((k == GEN_K_WRITE_IMM || k == GEN_K_NOTIFY) &&
	    a->h.slot != a->h.seq % GEN_CREDITS)
		return "region slot does not match seq";
	return k == GEN_K_NOTIFY ? notified(g, q, a) : NULL;
}

/* The stream's next seq? Returns 0 for a duplicate (nothing to verify). */
static int track(struct gen *g, struct gen_qp *q, const struct gen_hdr *h)
{
	uint32_t missing, seq = h->seq;

	switch (gen_seq_check(&q->in, seq, &missing)) {
	case GEN_SEQ_GAP:
		gen_fail(g, &g->st.losses,
			 "qp %u: seq %u arrived, expected %u: %u lost", q->idx,
			 seq, seq - missing, missing);
		return 1;
	case GEN_SEQ_DUP:
		gen_fail(g, &g->st.duplicates,
			 "qp %u: seq %u (%s) again, expected %u", q->idx, seq,
			 gen_kind_name(h->kind), q->in.next);
		return 0;
	default:
		return 1;
	}
}

/* Every payload byte and the checksum. */
static void verify(struct gen *g, struct gen_qp *q, const struct arrival *a)
{
	const uint8_t *p = a->data + GEN_HDR_LEN;
	uint32_t len = a->h.len, seq = a->h.seq;
	size_t bad = gen_diff(q->seed, q->wire, seq, 0, p, len);

	if (bad < len || gen_sum(q->wire, seq, p, len) != a->h.sum) {
		gen_fail(g, &g->st.mismatches,
			 "qp %u: %s seq %u: %u payload bytes, bad at %zu",
			 q->idx, gen_kind_name(a->h.kind), seq, len, bad);
		return;
	}
	g->st.ops++;
	g->st.bytes_verified += GEN_HDR_LEN + len;
	q->ops++;
	q->bytes += GEN_HDR_LEN + len;
}

static void recv_done(struct gen *g, struct gen_qp *q, const struct ibv_wc *wc)
{
	uint64_t idx = GEN_WRID_IDX(wc->wr_id);
	uint8_t *buf = gen_recv_buf(g, q, wc->wr_id);
	struct arrival a = { .data = buf };
	const char *why;
	int fresh;

	why = frame(g, q, wc, &a);
	fresh = a.hdr_ok ? track(g, q, &a.h) : 1;
	if (fresh && why)
		gen_fail(g, &g->st.mismatches,
			 "qp %u: receive #%" PRIu64
			 " (%s seq %u): %s (opcode %d, %u bytes)",
			 q->idx, idx, gen_kind_name(a.h.kind), a.h.seq, why,
			 wc->opcode, wc->byte_len);
	else if (fresh)
		verify(g, q, &a);
	/* a region is rewritten only after its credit: mark it checked */
	if (a.data != buf)
		memset(a.data, 0, GEN_HDR_LEN);
	if (gen_recv_again(g, q, wc->wr_id)) {
		gen_fail(g, &g->st.errors, "qp %u: ibv_post_recv failed",
			 q->idx);
		g->done = 1;
	}
}

/* Credits: how many messages are verified, so the client may reuse slots. */
static int send_credit(struct gen *g, struct gen_qp *q)
{
	uint64_t idx = q->sq.posted;
	uint8_t *buf = q->sbuf + (idx % GEN_SQ_DEPTH) * g->sslot;
	struct gen_hdr h = { .magic = GEN_MAGIC,
			     .qp = q->wire,
			     .kind = GEN_K_CREDIT,
			     .seq = q->cseq,
			     .ack = q->in.next };
	struct ibv_sge sge = { .addr = (uintptr_t)buf,
			       .length = GEN_HDR_LEN,
			       .lkey = g->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	int ret;

	h.sum = gen_sum(q->wire, h.seq, NULL, 0);
	gen_hdr_encode(&h, buf);
	if (GEN_HDR_LEN <= g->lim.max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	wr.wr_id = GEN_WRID(0, q->idx, idx);
	ret = gen_post_send(g, q, &wr);
	if (ret) {
		gen_fail(g, &g->st.errors, "qp %u: ibv_post_send: %s", q->idx,
			 strerror(ret));
		g->done = 1;
		return -ret;
	}
	gen_sq_post(&q->sq, 1);
	q->cseq++;
	q->cacked = h.ack;
	return 0;
}

/*
 * A credit once a quarter of the window is verified, or whenever the CQ ran
 * dry (the client may be waiting for the last few).
 */
int gen_server_step(struct gen *g)
{
	struct gen_qp *q;
	uint32_t due;
	int i, ret;

	for (i = 0; i < g->nqps; i++) {
		q = &g->qp[i];
		due = q->in.next - q->cacked;
		if (!due || !gen_sq_room(&q->sq) ||
		    (due < GEN_CREDITS / 4 && !g->idle))
			continue;
		ret = send_credit(g, q);
		if (ret)
			return ret;
	}
	return 0;
}

void gen_server_wc(struct gen *g, struct gen_qp *q, const struct ibv_wc *wc)
{
	uint64_t idx = GEN_WRID_IDX(wc->wr_id), from;

	if (GEN_WRID_RECV(wc->wr_id)) {
		recv_done(g, q, wc);
		return;
	}
	if (gen_sq_complete(&q->sq, idx, &from) != GEN_SQ_OK ||
	    wc->opcode != IBV_WC_SEND)
		gen_fail(g, &g->st.order_errors,
			 "qp %u: credit wr #%" PRIu64
			 " completed, expected #%" PRIu64,
			 q->idx, idx, from);
}
