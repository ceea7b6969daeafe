/* SPDX-License-Identifier: MIT */
/*
 * r2cc-gen's verbs resources: device, one MR over all buffers, one CQ with a
 * completion channel, Q RC QPs per peer and their connection; polling and
 * bounded waits for completions and async events.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"

#define GEN_SMALL_SLOT 64 /* credits: one header, rounded up */
#define GEN_POLL_BATCH 32

static int nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) ? -errno : 0;
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
		errno = ENODEV;
	ibv_free_device_list(list);
	return ctx;
}

/* Device, port, GID, PD and completion channel; then the memory in use
 * (what the QPs add is measured from here). */
int gen_verbs_open(struct gen *g)
{
	struct ibv_device_attr da;

	g->ctx = open_dev(g->o.dev);
	if (!g->ctx)
		return -errno;
	if (ibv_query_port(g->ctx, GEN_IB_PORT, &g->port) ||
	    ibv_query_gid(g->ctx, GEN_IB_PORT, g->o.gidx, &g->gid) ||
	    ibv_query_device(g->ctx, &da))
		return errno ? -errno : -EIO;
	g->max_rd = da.max_qp_rd_atom < 16 ? da.max_qp_rd_atom : 16;
	if (g->max_rd > (uint32_t)da.max_qp_init_rd_atom)
		g->max_rd = da.max_qp_init_rd_atom;
	g->pd = ibv_alloc_pd(g->ctx);
	g->ch = g->pd ? ibv_create_comp_channel(g->ctx) : NULL;
	if (!g->ch)
		return errno ? -errno : -ENOMEM;
	if (nonblock(g->ch->fd) || nonblock(g->ctx->async_fd))
		return -errno;
	gen_mem_now(&g->mem0);
	return 0;
}

/* One CQ for every QP, sized for all their WRs (known after the hello:
 * a server takes the client's -q). */
static int create_cq(struct gen *g)
{
	int cqe = g->nqps * (GEN_SQ_DEPTH + GEN_CREDITS) + 16;

	if (g->o.cq_ex) {
		struct ibv_cq_init_attr_ex ca = {
			.cqe = (uint32_t)cqe,
			.channel = g->ch,
			.wc_flags = IBV_WC_EX_WITH_BYTE_LEN |
				    IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM,
		};

		g->cqx = ibv_create_cq_ex(g->ctx, &ca);
		g->cq = g->cqx ? ibv_cq_ex_to_cq(g->cqx) : NULL;
	} else {
		g->cq = ibv_create_cq(g->ctx, cqe, NULL, g->ch, 0);
	}
	return g->cq ? 0 : errno ? -errno : -ENOMEM;
}

/* Lay out every QP's buffers in one allocation (see struct gen_qp). */
static int alloc_mem(struct gen *g)
{
	size_t per, m = g->o.max_msg;
	uint8_t *p;
	int i;

	g->sslot = g->client ? m : GEN_SMALL_SLOT;
	g->rslot = g->client ? GEN_SMALL_SLOT : m;
	per = GEN_SQ_DEPTH * g->sslot + GEN_CREDITS * g->rslot;
	if (!g->client)
		per += GEN_CREDITS * m + m;
	g->memlen = per * g->nqps;
	g->mem = aligned_alloc(4096, (g->memlen + 4095) & ~(size_t)4095);
	if (!g->mem)
		return -ENOMEM;
	memset(g->mem, 0, g->memlen);
	for (i = 0, p = g->mem; i < g->nqps; i++) {
		g->qp[i].sbuf = p;
		p += GEN_SQ_DEPTH * g->sslot;
		g->qp[i].rbuf = p;
		p += GEN_CREDITS * g->rslot;
		if (g->client)
			continue;
		g->qp[i].wreg = p;
		p += GEN_CREDITS * m;
		g->qp[i].rreg = p;
		/* what READs fetch: a fixed pattern per QP */
		gen_fill(g->qp[i].seed, g->qp[i].wire, GEN_READ_STREAM, 0, p,
			 m);
		p += m;
	}
	return 0;
}

/* The largest inline size the device grants, up to what was asked. */
static struct ibv_qp *create_qp(struct gen *g)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	uint32_t inl = g->o.max_inline;

	for (;;) {
		memset(&ia, 0, sizeof(ia));
		ia.qp_type = IBV_QPT_RC;
		ia.send_cq = g->cq;
		ia.recv_cq = g->cq;
		ia.cap.max_send_wr = (uint32_t)g->o.sq_size;
		ia.cap.max_recv_wr = g->srq ? 0 : (uint32_t)g->o.rq_size;
		ia.cap.max_send_sge = 1;
		ia.cap.max_recv_sge = g->srq ? 0 : 1;
		ia.srq = g->srq;
		ia.cap.max_inline_data = inl;
		qp = ibv_create_qp(g->pd, &ia);
		if (qp || !inl)
			break;
		inl /= 2;
	}
	if (qp && ia.cap.max_inline_data < inl)
		inl = ia.cap.max_inline_data;
	if (qp)
		g->lim.max_inline = inl;
	return qp;
}

/* Each QP's place: its peer, and the index and payload seed its messages
 * carry (a client's own; a server's from that client's hello). */
static void place_qps(struct gen *g)
{
	struct gen_qp *q;
	int i;

	for (i = 0; i < g->nqps; i++) {
		q = &g->qp[i];
		q->idx = i;
		q->peer_idx = i / g->o.qps;
		q->wire = g->client ? (uint32_t)i :
				      g->peer[q->peer_idx].base + i % g->o.qps;
		q->seed = g->client ? g->o.seed : g->peer[q->peer_idx].seed;
		q->sq.depth = GEN_SQ_DEPTH;
		q->sq.signaled = q->sig;
	}
}

/* The CQ, buffers, the MR over them, and the QPs (RESET). */
int gen_verbs_alloc(struct gen *g)
{
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		  IBV_ACCESS_REMOTE_READ;
	int i, ret;

	ret = create_cq(g);
	if (ret)
		return ret;
	g->qp = calloc(g->nqps, sizeof(*g->qp));
	if (!g->qp)
		return -ENOMEM;
	place_qps(g);
	ret = alloc_mem(g);
	if (ret)
		return ret;
	g->mr = ibv_reg_mr(g->pd, g->mem, g->memlen, acc);
	if (!g->mr)
		return -errno;
	if (g->o.srq) {
		/* One slot per credit of every QP: never short of one */
		struct ibv_srq_init_attr sa = {
			.attr = { .max_wr = g->nqps * GEN_CREDITS,
				  .max_sge = 1 },
		};

		g->srq_gen = calloc((size_t)g->nqps * GEN_CREDITS,
				    sizeof(*g->srq_gen));
		if (!g->srq_gen)
			return -ENOMEM;
		g->srq = ibv_create_srq(g->pd, &sa);
		if (!g->srq)
			return -errno;
	}
	for (i = 0; i < g->nqps; i++) {
		struct gen_qp *q = &g->qp[i];

		q->qp = create_qp(g);
		if (!q->qp)
			return -errno;
		q->psn = (q->qp->qp_num * 2654435761U ^ g->o.seed) & 0xffffff;
	}
	return 0;
}

static int to_init(struct gen_qp *q)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = GEN_IB_PORT,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};

	return ibv_modify_qp(q->qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS);
}

/* RoCE addressing through the GRH; the peer's PSN and QP number. */
static int to_rtr(struct gen *g, struct gen_qp *q)
{
	const struct gen_peer *p = &g->peer[q->peer_idx];
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = p->path_mtu,
		.dest_qp_num = q->peer.qpn,
		.rq_psn = q->peer.psn,
		.max_dest_rd_atomic = g->max_rd,
		.min_rnr_timer = 12,
	};

	a.ah_attr.dlid = p->lid;
	a.ah_attr.port_num = GEN_IB_PORT;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.grh.sgid_index = g->o.gidx;
	a.ah_attr.grh.dgid = p->gid;
	return ibv_modify_qp(q->qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER);
}

/* --retry-cnt and --timeout apply here (on rxe, retry_cnt 7 never ends). */
static int to_rts(struct gen *g, struct gen_qp *q)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = q->psn,
		.timeout = g->o.timeout,
		.retry_cnt = g->o.retry_cnt,
		.rnr_retry = 7,
		.max_rd_atomic = g->max_rd,
	};

	return ibv_modify_qp(q->qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

/* --ud: a UD QP in RTS on the RC QPs' context and CQ; it posts nothing. */
static int ud_qp(struct gen *g)
{
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_UD,
				       .send_cq = g->cq,
				       .recv_cq = g->cq,
				       .cap = { .max_send_wr = 1,
						.max_recv_wr = 1,
						.max_send_sge = 1,
						.max_recv_sge = 1 } };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = GEN_IB_PORT,
				 .qkey = 0x72326363 };
	int ret;

	g->ud = ibv_create_qp(g->pd, &ia);
	if (!g->ud)
		return errno ? errno : ENOMEM;
	ret = ibv_modify_qp(g->ud, &a,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_QKEY);
	a.qp_state = IBV_QPS_RTR;
	if (!ret)
		ret = ibv_modify_qp(g->ud, &a, IBV_QP_STATE);
	a.qp_state = IBV_QPS_RTS;
	if (!ret)
		ret = ibv_modify_qp(g->ud, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	return ret;
}

/* Every QP to RTS once the peer's half is known (gen_oob_exchange). */
int gen_verbs_connect(struct gen *g)
{
	enum ibv_mtu mtu = g->peer[0].path_mtu;
	int i, ret;

	for (i = 1; i < g->o.peers; i++)
		if (g->peer[i].path_mtu < mtu)
			mtu = g->peer[i].path_mtu;
	g->lim.mtu = 128U << mtu;
	g->lim.max_msg = g->o.max_msg;
	g->lim.read_len = g->o.max_msg;
	for (i = 0; i < g->nqps; i++) {
		ret = to_init(&g->qp[i]);
		if (!ret)
			ret = to_rtr(g, &g->qp[i]);
		if (!ret)
			ret = to_rts(g, &g->qp[i]);
		if (ret)
			return -ret;
	}
	return g->o.ud ? -ud_qp(g) : 0;
}

/* An SRQ receive into slot @s (QP s / GEN_CREDITS's buffer slots), its
 * next generation: a completion of an older one is a WR posted twice. */
static int post_srq(struct gen *g, uint64_t s)
{
	uint64_t id =
		GEN_WRID(1, GEN_WRID_SRQ, s | (uint64_t)++g->srq_gen[s] << 16);
	struct ibv_sge sge = {
		.addr = (uintptr_t)gen_recv_buf(g, NULL, id),
		.length = g->rslot,
		.lkey = g->mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = id,
		.sg_list = &sge,
		.num_sge = 1,
	};
	struct ibv_recv_wr *bad;

	return -ibv_post_srq_recv(g->srq, &wr, &bad);
}

uint8_t *gen_recv_buf(struct gen *g, struct gen_qp *q, uint64_t wr_id)
{
	uint64_t idx = GEN_WRID_IDX(wr_id);

	if (GEN_WRID_QP(wr_id) == GEN_WRID_SRQ) {
		idx = GEN_SRQ_SLOT(idx);
		return g->qp[idx / GEN_CREDITS].rbuf +
		       (idx % GEN_CREDITS) * g->rslot;
	}
	return q->rbuf + (idx % GEN_CREDITS) * g->rslot;
}

/* A receive into the next slot; slots are reused in posting order. */
static int post_rq(struct gen *g, struct gen_qp *q)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)q->rbuf +
			(q->rposted % GEN_CREDITS) * g->rslot,
		.length = g->rslot,
		.lkey = g->mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = GEN_WRID(1, q->idx, q->rposted),
		.sg_list = &sge,
		.num_sge = 1,
	};
	struct ibv_recv_wr *bad;
	int ret = ibv_post_recv(q->qp, &wr, &bad);

	if (ret)
		return -ret;
	q->rposted++;
	return 0;
}

/*
 * Post @wr (a list) on @q, counting the WRs the provider took. A program
 * may read its QP's state without a call (UCX's rc_verbs asserts RTS
 * before each post): it must say RTS whatever moved underneath. Returns
 * ibv_post_send()'s value.
 */
int gen_post_send(struct gen *g, struct gen_qp *q, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL, *w;
	int ret, i;

	if (q->qp->state != IBV_QPS_RTS)
		gen_fail(g, &g->st.errors,
			 "qp %u: qp->state is %d before a post, not RTS (%d)",
			 q->idx, (int)q->qp->state, (int)IBV_QPS_RTS);
	ret = ibv_post_send(q->qp, wr, &bad);

	for (w = wr; w && !(ret && w == bad); w = w->next) {
		switch (w->opcode) {
		case IBV_WR_SEND:
			q->wrs[GEN_WS_SEND]++;
			break;
		case IBV_WR_SEND_WITH_IMM:
			q->wrs[GEN_WS_SEND_IMM]++;
			break;
		case IBV_WR_RDMA_WRITE:
			q->wrs[GEN_WS_WRITE]++;
			break;
		case IBV_WR_RDMA_WRITE_WITH_IMM:
			q->wrs[GEN_WS_WRITE_IMM]++;
			break;
		default:
			q->wrs[GEN_WS_READ]++;
			break;
		}
		for (i = 0; i < w->num_sge; i++)
			q->wr_bytes += w->sg_list[i].length;
	}
	return ret;
}

/*
 * Receive @wr_id of @q was consumed and checked: post it again. Its own
 * RQ completes in posting order (checked); an SRQ's slots complete in any
 * order across QPs (the sequence numbers check each QP's messages).
 */
int gen_recv_again(struct gen *g, struct gen_qp *q, uint64_t wr_id)
{
	uint64_t idx = GEN_WRID_IDX(wr_id);

	if (GEN_WRID_QP(wr_id) == GEN_WRID_SRQ) {
		uint64_t s = GEN_SRQ_SLOT(idx);

		if (GEN_SRQ_GEN(idx) != g->srq_gen[s])
			gen_fail(g, &g->st.duplicates,
				 "qp %u: SRQ slot %" PRIu64
				 " completed post %u, posted %u: a receive "
				 "WR posted twice",
				 q->idx, s, GEN_SRQ_GEN(idx), g->srq_gen[s]);
		q->rposted++; /* on the SRQ, for this QP's count */
		return post_srq(g, s);
	}
	if (idx != q->rnext)
		gen_fail(g, &g->st.order_errors,
			 "qp %u: receive #%" PRIu64
			 " completed, expected #%" PRIu64,
			 q->idx, idx, q->rnext);
	q->rnext = idx + 1;
	return post_rq(g, q);
}

/* The QP a completion is for: by its wr_id, an SRQ receive's by qp_num.
 * NULL: none of ours. */
struct gen_qp *gen_qp_of(struct gen *g, const struct ibv_wc *wc)
{
	uint32_t qi = GEN_WRID_QP(wc->wr_id);
	int i;

	if (qi == GEN_WRID_SRQ && g->srq) {
		for (i = 0; i < g->nqps; i++)
			if (g->qp[i].qp->qp_num == wc->qp_num)
				return &g->qp[i];
		return NULL;
	}
	if (qi >= (uint32_t)g->nqps || wc->qp_num != g->qp[qi].qp->qp_num)
		return NULL;
	return &g->qp[qi];
}

/* Every QP's receive queue full: credits (client) or messages (server). */
int gen_post_recvs(struct gen *g)
{
	uint64_t s;
	int i, j, ret;

	for (s = 0; g->srq && s < (uint64_t)g->nqps * GEN_CREDITS; s++) {
		ret = post_srq(g, s);
		if (ret)
			return ret;
		g->qp[s / GEN_CREDITS].rposted++;
	}
	for (i = 0; !g->srq && i < g->nqps; i++)
		for (j = 0; j < GEN_CREDITS; j++) {
			ret = post_rq(g, &g->qp[i]);
			if (ret)
				return ret;
		}
	return 0;
}

void gen_verbs_close(struct gen *g)
{
	int i;

	for (i = 0; g->qp && i < g->nqps; i++)
		if (g->qp[i].qp)
			ibv_destroy_qp(g->qp[i].qp);
	if (g->ud)
		ibv_destroy_qp(g->ud);
	if (g->srq)
		ibv_destroy_srq(g->srq);
	if (g->cq && g->cq_events)
		ibv_ack_cq_events(g->cq, g->cq_events);
	if (g->cq)
		ibv_destroy_cq(g->cq);
	if (g->ch)
		ibv_destroy_comp_channel(g->ch);
	if (g->mr)
		ibv_dereg_mr(g->mr);
	if (g->pd)
		ibv_dealloc_pd(g->pd);
	if (g->ctx)
		ibv_close_device(g->ctx);
	free(g->mem);
	free(g->qp);
	free(g->srq_gen);
}
