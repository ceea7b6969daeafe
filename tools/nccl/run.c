/* SPDX-License-Identifier: MIT */
/*
 * run.c - r2cc-nccl's requests: the receiver's grants (receives posted,
 * an inline CTS RDMA-written into the sender's FIFO), the sender's chunks
 * (a signaled WRITE_WITH_IMM per QP), the receiver's flush READ and its
 * check of every byte; then the end of the run, drained both ways.
 */
#include <endian.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "nccl.h"

/* wr_id: kind, comm, QP, request index */
enum { K_SEND = 1, K_RECV, K_CTS, K_FLUSH };
#define WRID(k, c, q, i) \
	((uint64_t)(k) << 56 | (uint64_t)(c) << 48 | (uint64_t)(q) << 40 | (i))
#define WRID_KIND(w) ((int)((w) >> 56))
#define WRID_COMM(w) ((int)(((w) >> 48) & 0xff))
#define WRID_IDX(w) ((w)&0xffffffffffULL)

/* The size of request @idx of connection @c: 64 B to NC_SLOT, some too
 * small to reach every QP (its last chunks are 0 bytes, as in NCCL). */
static uint32_t req_size(int c, uint64_t idx)
{
	uint64_t h = (idx + 1) * 0x9e3779b97f4a7c15ULL ^ (uint64_t)c << 32;

	h ^= h >> 29;
	switch (h % 4) {
	case 0:
		return 64;
	case 1:
		return 4096 + (uint32_t)(h >> 40) % 8192;
	default:
		return NC_SLOT / 2 + (uint32_t)(h >> 40) % (NC_SLOT / 2);
	}
}

/* The word at @i of request @idx of connection @c. */
static uint64_t word(int c, uint64_t idx, size_t i)
{
	uint64_t x = ((uint64_t)c << 56) ^ (idx << 24) ^ i;

	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 31);
}

static int post(struct nc *n, struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int ret = qp->context->ops.post_send(qp, wr, &bad);

	if (ret)
		nc_fail(n, "ibv_post_send: %s", strerror(ret));
	return ret;
}

/* Receive comm @c grants its next request: a receive per QP for the
 * immediates, then the CTS into the sender's FIFO (inline, signaled once
 * per round of slots, as NCCL's slot 0). */
static void grant(struct nc *n, int c)
{
	struct nc_comm *r = &n->recv[c];
	uint64_t idx = r->next;
	int s = (int)(idx % NC_MAX_REQS), q;
	struct ibv_recv_wr rw = { 0 }, *bad;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { 0 };

	if (r->busy[s])
		return;
	for (q = 0; q < n->qps; q++) {
		rw.wr_id = WRID(K_RECV, c, q, idx);
		if (r->qp[q]->context->ops.post_recv(r->qp[q], &rw, &bad)) {
			nc_fail(n, "ibv_post_recv failed");
			return;
		}
	}
	r->busy[s] = 1;
	r->idx_of[s] = idx;
	r->left[s] = (uint32_t)n->qps;
	r->size[s] = req_size(c, idx);
	memset(r->buf[s], 0, r->size[s]);
	r->cts[s] = (struct nc_cts){ .addr = (uintptr_t)r->buf[s],
				     .size = r->size[s],
				     .rkey = r->mr->rkey,
				     .tag = (uint32_t)c,
				     .idx = idx + 1 };
	sge = (struct ibv_sge){ .addr = (uintptr_t)&r->cts[s],
				.length = sizeof(r->cts[s]),
				.lkey = r->cts_mr->lkey };
	wr.wr_id = WRID(K_CTS, c, 0, idx);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_INLINE | (s == 0 ? IBV_SEND_SIGNALED : 0);
	wr.wr.rdma.remote_addr = r->fifo_addr + (uint64_t)s * sizeof(r->cts[s]);
	wr.wr.rdma.rkey = r->fifo_rkey;
	if (!post(n, r->qp[0], &wr))
		r->next++;
}

/* Send comm @c: its next request, if its CTS is in the FIFO. */
static void send_one(struct nc *n, int c)
{
	struct nc_comm *s = &n->send[c];
	uint64_t idx = s->next;
	int sl = (int)(idx % NC_MAX_REQS), q;
	struct nc_cts cts;
	uint32_t chunk, off = 0;
	size_t i;

	if (s->busy[sl] || s->fifo[sl].idx != idx + 1)
		return;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	memcpy(&cts, (const void *)&s->fifo[sl], sizeof(cts));
	if (cts.size > NC_SLOT || cts.size != req_size(c, idx)) {
		nc_fail(n, "conn %d: CTS %" PRIu64 " grants %" PRIu64 " bytes",
			c, idx, cts.size);
		s->next++;
		return;
	}
	for (i = 0; i < cts.size / 8; i++)
		((uint64_t *)s->buf[sl])[i] = word(c, idx, i);
	s->busy[sl] = 1;
	s->idx_of[sl] = idx;
	s->left[sl] = (uint32_t)n->qps;
	s->size[sl] = (uint32_t)cts.size;
	/* NCCL's split: equal chunks, aligned; the last QPs may get 0 */
	chunk = (uint32_t)((cts.size + n->qps - 1) / n->qps);
	chunk = (chunk + NC_CHUNK_ALIGN - 1) / NC_CHUNK_ALIGN * NC_CHUNK_ALIGN;
	for (q = 0; q < n->qps; q++) {
		uint32_t len = off < cts.size ? (uint32_t)cts.size - off : 0;
		struct ibv_sge sge = { .addr = (uintptr_t)s->buf[sl] + off,
				       .length = len < chunk ? len : chunk,
				       .lkey = s->mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = WRID(K_SEND, c, q, idx),
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
			.send_flags = IBV_SEND_SIGNALED,
			.imm_data = htobe32((uint32_t)cts.size),
		};

		wr.wr.rdma.remote_addr = cts.addr + off;
		wr.wr.rdma.rkey = cts.rkey;
		if (post(n, s->qp[q], &wr))
			return;
		off += sge.length;
	}
	s->next++;
}

/* Every byte of the request in receive slot @sl of comm @c. */
static void check(struct nc *n, int c, int sl)
{
	struct nc_comm *r = &n->recv[c];
	uint64_t idx = r->idx_of[sl];
	size_t i, bad = 0;

	for (i = 0; i < r->size[sl] / 8; i++)
		bad += ((uint64_t *)r->buf[sl])[i] != word(c, idx, i);
	if (bad)
		nc_fail(n,
			"conn %d: request %" PRIu64 ": %zu of %u words wrong",
			c, idx, bad, r->size[sl] / 8);
	else
		r->bytes_verified += r->size[sl];
	r->busy[sl] = 0;
	r->done++;
}

/* NCCL's flush of a received request: a local READ of one byte of it. */
static void flush(struct nc *n, int c, int sl)
{
	struct nc_comm *r = &n->recv[c];
	struct ibv_sge sge = { .addr = (uintptr_t)&n->flush_byte,
			       .length = 1,
			       .lkey = n->flush_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = WRID(K_FLUSH, c, 0, r->idx_of[sl]),
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED };

	wr.wr.rdma.remote_addr = (uintptr_t)r->buf[sl];
	wr.wr.rdma.rkey = r->mr->rkey;
	if (post(n, n->flush_qp, &wr))
		check(n, c, sl);
}

static void on_wc(struct nc *n, const struct ibv_wc *wc)
{
	int c = WRID_COMM(wc->wr_id), sl;
	uint64_t idx = WRID_IDX(wc->wr_id);
	struct nc_comm *m;

	if (wc->status != IBV_WC_SUCCESS) {
		/* NCCL: "NET/IB: Got completion with error": fatal */
		nc_fail(n, "completion %#" PRIx64 " on QP %#x: %s", wc->wr_id,
			wc->qp_num, v.wc_status_str(wc->status));
		return;
	}
	if (c >= n->conns)
		goto unknown;
	sl = (int)(idx % NC_MAX_REQS);
	switch (WRID_KIND(wc->wr_id)) {
	case K_CTS:
		return;
	case K_SEND:
		m = &n->send[c];
		if (!m->busy[sl] || m->idx_of[sl] != idx)
			goto unknown;
		if (!--m->left[sl]) {
			m->busy[sl] = 0;
			m->done++;
		}
		return;
	case K_RECV:
		m = &n->recv[c];
		if (!m->busy[sl] || m->idx_of[sl] != idx ||
		    wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM)
			goto unknown;
		if (be32toh(wc->imm_data) != m->size[sl])
			nc_fail(n,
				"conn %d: request %" PRIu64 ": immediate %u, "
				"granted %u",
				c, idx, be32toh(wc->imm_data), m->size[sl]);
		if (--m->left[sl])
			return;
		if (n->flush)
			flush(n, c, sl);
		else
			check(n, c, sl);
		return;
	case K_FLUSH:
		m = &n->recv[c];
		if (!m->busy[sl] || m->idx_of[sl] != idx)
			goto unknown;
		check(n, c, sl);
		return;
	}
unknown:
	nc_fail(n, "completion for unknown wr_id %#" PRIx64 " on QP %#x",
		wc->wr_id, wc->qp_num);
}

/* Poll once; false when the run must end (stalled, or failed). */
static int progress(struct nc *n)
{
	struct ibv_wc wc[16];
	int got, i;

	got = n->cq->context->ops.poll_cq(n->cq, 16, wc);
	if (got < 0) {
		nc_fail(n, "ibv_poll_cq: %d", got);
		return 0;
	}
	for (i = 0; i < got; i++)
		on_wc(n, &wc[i]);
	if (got)
		n->last_progress = nc_now();
	else if (nc_now() - n->last_progress > n->stall) {
		nc_fail(n, "no progress for %.1f s", n->stall);
		return 0;
	}
	return !n->errors && !atomic_load(&n->fatal);
}

static int sends_busy(const struct nc *n)
{
	int c, s;

	for (c = 0; c < n->conns; c++)
		for (s = 0; s < NC_MAX_REQS; s++)
			if (n->send[c].busy[s])
				return 1;
	return 0;
}

void nc_run(struct nc *n)
{
	uint64_t mine[NC_MAX_CONNS] = { 0 }, theirs[NC_MAX_CONNS] = { 0 };
	double end = n->t0 + n->secs, last = n->t0;
	int c, more = 1;

	n->last_progress = nc_now();
	/* Requests both ways until the run's time */
	while (nc_now() < end && progress(n)) {
		for (c = 0; c < n->conns; c++) {
			grant(n, c);
			send_one(n, c);
		}
		if (nc_now() - last >= 5) {
			last = nc_now();
			fprintf(stderr, "r2cc-nccl: progress t=%.0f",
				last - n->t0);
			for (c = 0; c < n->conns; c++)
				fprintf(stderr, " conn%d=%" PRIu64 "/%" PRIu64,
					c, n->send[c].done, n->recv[c].done);
			fputc('\n', stderr);
		}
	}
	/* Our sends drained, the counts swapped, the peer's received */
	while (sends_busy(n) && (more = progress(n)))
		;
	for (c = 0; c < n->conns; c++)
		mine[c] = n->send[c].next;
	nc_oob_swap(n, mine, theirs, sizeof(mine));
	for (c = 0; c < n->conns && more; c++)
		while (n->recv[c].done < theirs[c] && (more = progress(n)))
			;
	for (c = 0; c < n->conns; c++)
		if (n->recv[c].done < theirs[c])
			nc_fail(n,
				"conn %d: %" PRIu64 " of %" PRIu64
				" requests received",
				c, n->recv[c].done, theirs[c]);
	nc_oob_swap(n, &more, &c, sizeof(more)); /* both done */
}
