/* SPDX-License-Identifier: MIT */
/*
 * r2cc-gen's main loop, the same for both roles: post, poll, wait on the
 * completion channel with a deadline, watch async events and the TCP channel,
 * and end the run on an error completion or a stall beyond --stall-limit.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "gen.h"

#define GEN_POLL_BATCH 32
#define GEN_WAIT_MS 100

/* Name what a failed WR was, for the failure message. */
static void describe(const struct gen *g, const struct gen_qp *q,
		     const struct ibv_wc *wc, char *buf, size_t n)
{
	uint64_t idx = GEN_WRID_IDX(wc->wr_id);
	const struct gen_wr *w = &q->wr[idx % GEN_SQ_DEPTH];

	if (GEN_WRID_RECV(wc->wr_id))
		snprintf(buf, n, "receive #%" PRIu64, idx);
	else if (g->client)
		snprintf(buf, n, "%s seq %u len %u (wr #%" PRIu64 ")",
			 gen_kind_name(w->kind), w->seq, w->len, idx);
	else
		snprintf(buf, n, "CREDIT (wr #%" PRIu64 ")", idx);
}

static void handle_wc(struct gen *g, const struct ibv_wc *wc)
{
	struct gen_qp *q = gen_qp_of(g, wc);
	char what[96];

	if (!q) {
		gen_fail(g, &g->st.order_errors,
			 "completion for unknown wr_id 0x%" PRIx64
			 " on QP 0x%x",
			 (uint64_t)wc->wr_id, wc->qp_num);
		return;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		describe(g, q, wc, what, sizeof(what));
		gen_fail(g, &g->st.errors,
			 "qp %u: %s failed: %s (status %d, vendor_err 0x%x)",
			 q->idx, what, ibv_wc_status_str(wc->status),
			 wc->status, wc->vendor_err);
		g->done = 1;
		return;
	}
	g->last_progress = gen_now();
	if (g->client)
		gen_client_wc(g, q, wc);
	else
		gen_server_wc(g, q, wc);
}

/* Up to @n completions through the extended CQ API, as ibv_poll_cq's. */
static int poll_ex(struct ibv_cq_ex *cq, int n, struct ibv_wc *wc)
{
	int got = 0, ret;

	ret = ibv_start_poll(cq, &(struct ibv_poll_cq_attr){ 0 });
	while (!ret) {
		wc[got] = (struct ibv_wc){
			.wr_id = cq->wr_id,
			.status = cq->status,
			.opcode = ibv_wc_read_opcode(cq),
			.byte_len = ibv_wc_read_byte_len(cq),
			.qp_num = ibv_wc_read_qp_num(cq),
			.wc_flags = ibv_wc_read_wc_flags(cq),
		};
		if (wc[got].wc_flags & IBV_WC_WITH_IMM)
			wc[got].imm_data = ibv_wc_read_imm_data(cq);
		if (++got == n)
			break;
		ret = ibv_next_poll(cq);
	}
	if (got || !ret)
		ibv_end_poll(cq);
	return ret && ret != ENOENT && !got ? -ret : got;
}

/* Every completion there is now; returns how many, or -errno. */
int gen_verbs_drain(struct gen *g)
{
	struct ibv_wc wc[GEN_POLL_BATCH];
	int i, n, total = 0;

	do {
		n = g->cqx ? poll_ex(g->cqx, GEN_POLL_BATCH, wc) :
			     ibv_poll_cq(g->cq, GEN_POLL_BATCH, wc);
		if (n < 0) {
			gen_fail(g, &g->st.errors, "ibv_poll_cq: %d", n);
			g->done = 1;
			return -EIO;
		}
		for (i = 0; i < n; i++)
			handle_wc(g, &wc[i]);
		total += n;
	} while (n == GEN_POLL_BATCH);
	return total;
}

/* Log async events; one that kills a QP or the device is an error. */
static void async_events(struct gen *g)
{
	struct ibv_async_event ev;

	while (!ibv_get_async_event(g->ctx, &ev)) {
		fprintf(stderr, "r2cc-gen: async event: %s\n",
			ibv_event_type_str(ev.event_type));
		switch (ev.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_DEVICE_FATAL:
			gen_fail(g, &g->st.errors, "async event: %s",
				 ibv_event_type_str(ev.event_type));
			g->done = 1;
			break;
		default:
			break;
		}
		ibv_ack_async_event(&ev);
	}
}

/*
 * Sleep until a completion, an async event or TCP data, at most ms. Sets
 * *tcp when a peer's TCP connection has data or was closed (that peer's
 * talked).
 */
int gen_verbs_wait(struct gen *g, int ms, int *tcp)
{
	struct pollfd p[2 + GEN_MAX_PEERS] = {
		{ .fd = g->ch->fd, .events = POLLIN },
		{ .fd = g->ctx->async_fd, .events = POLLIN },
	};
	struct ibv_cq *cq;
	void *ctx;
	int i;

	*tcp = 0;
	/* not a client that ended: its EOF would wake us at once */
	for (i = 0; i < g->o.peers; i++)
		p[2 + i] =
			(struct pollfd){ .fd = g->peer[i].ended ? -1 :
								  g->peer[i].fd,
					 .events = POLLIN };
	if (poll(p, 2 + g->o.peers, ms) < 0)
		return errno == EINTR ? 0 : -errno;
	while (!ibv_get_cq_event(g->ch, &cq, &ctx))
		g->cq_events++;
	if (g->cq_events >= 64) {
		ibv_ack_cq_events(g->cq, g->cq_events);
		g->cq_events = 0;
	}
	if (p[1].revents)
		async_events(g);
	for (i = 0; i < g->o.peers; i++)
		if (p[2 + i].revents) {
			g->peer[i].talked = 1;
			*tcp = 1;
		}
	return 0;
}

int gen_paused(struct gen *g)
{
	double t = gen_now() - g->t0;

	if (g->o.hold && g->hold_said < 2) {
		if (!gen_go_given()) {
			if (!g->hold_said) {
				printf("r2cc-gen: holding until SIGUSR1\n");
				fflush(stdout);
			}
			g->hold_said = 1;
			return 1;
		}
		printf("r2cc-gen: released at %.1f s\n", t);
		fflush(stdout);
		g->hold_said = 2;
	}
	if (g->o.pause_for <= 0 || t < g->o.pause_at)
		return 0;
	if (t < g->o.pause_at + g->o.pause_for) {
		if (!g->pause_said) {
			printf("r2cc-gen: paused at %.1f s for %g s\n", t,
			       g->o.pause_for);
			fflush(stdout);
			g->pause_said = 1;
		}
		return 1;
	}
	if (g->pause_said == 1) {
		printf("r2cc-gen: resumed at %.1f s\n", t);
		fflush(stdout);
		g->pause_said = 2;
	}
	return 0;
}

/* Stall accounting: time without a completion while work is outstanding
 * (not in a pause: the QPs are idle on purpose). */
static void check_stall(struct gen *g)
{
	double now = gen_now(), s;
	char what[128] = "waiting for the client";

	if (gen_paused(g)) {
		g->last_progress = now;
		return;
	}
	if (g->client && !gen_client_busy(g, what, sizeof(what))) {
		g->last_progress = now;
		return;
	}
	s = now - g->last_progress;
	if (s * 1000 > g->st.longest_stall_ms)
		g->st.longest_stall_ms = s * 1000;
	if (s > g->o.stall_limit) {
		gen_fail(g, &g->st.errors,
			 "no progress for %.1f s (--stall-limit %g): %s", s,
			 g->o.stall_limit, what);
		g->done = 1;
	}
}

/* A peer's TCP connection spoke during the run: a client's end record
 * (the server is done once every client's came), or the peer left. */
static void on_tcp(struct gen *g)
{
	struct gen_peer *p;
	int i, ret;

	for (i = 0; i < g->o.peers; i++) {
		p = &g->peer[i];
		if (!p->talked || p->ended)
			continue;
		p->talked = 0;
		if (g->client) {
			gen_fail(g, &g->st.errors,
				 "server %d closed the connection during "
				 "the run",
				 i);
			g->done = 1;
			return;
		}
		ret = gen_oob_end(g, p);
		if (ret) {
			gen_fail(g, &g->st.errors, "client %d went away: %s", i,
				 strerror(-ret));
			g->done = 1;
			return;
		}
		p->ended = 1;
		if (++g->ended == g->o.peers)
			g->done = 1;
	}
}

/* Poll; when the CQ is dry, arm it and sleep on the channel (bounded). */
static int poll_or_wait(struct gen *g, int *tcp)
{
	int n;

	*tcp = 0;
	n = gen_verbs_drain(g);
	if (n || g->done)
		return n < 0 ? n : 0;
	g->idle = 1;
	if (ibv_req_notify_cq(g->cq, 0)) {
		gen_fail(g, &g->st.errors, "ibv_req_notify_cq failed");
		g->done = 1;
		return -EIO;
	}
	n = gen_verbs_drain(g);
	if (n || g->done)
		return n < 0 ? n : 0;
	return gen_verbs_wait(g, GEN_WAIT_MS, tcp);
}

/* The run: until the client is done, the server got the end, or a failure. */
int gen_run(struct gen *g)
{
	int ret = 0, tcp;

	g->t0 = g->last_progress = gen_now();
	g->next_print = g->t0 + g->o.interval;
	while (!g->done) {
		ret = g->client ? gen_client_step(g) : gen_server_step(g);
		g->idle = 0;
		if (!ret && !g->done)
			ret = poll_or_wait(g, &tcp);
		if (ret)
			break;
		if (tcp)
			on_tcp(g);
		if (!g->done)
			check_stall(g);
		if (g->o.interval > 0 && gen_now() >= g->next_print) {
			gen_report(g, 1);
			g->next_print += g->o.interval;
		}
	}
	return ret;
}
