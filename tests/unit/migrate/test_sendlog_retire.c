/* SPDX-License-Identifier: MIT */
/*
 * test_sendlog_retire.c - the send log's completions in constant time:
 * the oldest signaled entry found without a walk, retirement that keeps
 * the packets outstanding and the receives the peer's consumed exact, and
 * the walk taken again only while a move's marks are in the log; checked
 * against a model of the log over thousands of posts, through growth and
 * the ring's wrap.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "migrate.h"

#define MTU 1024
#define LIMIT 512

static char mem[8192];

static int post(struct r2cc_sendlog *log, enum ibv_wr_opcode op, uint64_t id,
		uint32_t len, bool sig)
{
	struct ibv_sge sge = { (uintptr_t)mem, len, 0x77 };
	struct ibv_send_wr wr = { .wr_id = id,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = op,
				  .send_flags = sig ? IBV_SEND_SIGNALED : 0 };

	wr.wr.rdma.rkey = 0x99;
	return r2cc_sendlog_append(log, &wr, NULL);
}

/* What the log should hold: the outstanding WRs, oldest first */
struct model {
	uint64_t id[LIMIT];
	enum ibv_wr_opcode op[LIMIT];
	uint32_t npkts[LIMIT];
	bool sig[LIMIT];
	uint32_t n;
};

/* Its packets span exactly what the model's do: a peer at the newest
 * PSN is inside them, one past it is not. */
static void span_is(struct r2cc_sendlog *log, const struct model *m)
{
	uint32_t pkts = 0, next = r2cc_sendlog_next_psn(log), got, i;

	for (i = 0; i < m->n; i++)
		pkts += m->npkts[i];
	cr_assert_eq(r2cc_sendlog_consumed(log, next, &got), 0);
	cr_assert_eq(
		r2cc_sendlog_consumed(log, (next + 1) & R2CC_PSN_MASK, &got),
		-ERANGE, "%u packets outstanding, the log says more", pkts);
	if (m->n)
		cr_assert_eq(
			r2cc_psn_diff(next,
				      r2cc_sendlog_peek(log, 0)->first_psn),
			(int32_t)pkts);
}

Test(sendlog_retire, the_oldest_signaled_completes_through_growth_and_wrap,
     .timeout = 20)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_RDMA_WRITE,	    IBV_WR_SEND,
		IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ,
		IBV_WR_SEND_WITH_IMM,
	};
	struct r2cc_sendlog *log = r2cc_sendlog_new(LIMIT, 1, 0, false);
	struct model m = { .n = 0 };
	uint64_t id = 0, rand = 0x2545f4914f6cdd1dULL;
	int step, idx;
	uint32_t i, k, want, cons, got;

	cr_assert_eq(r2cc_sendlog_start(log, 0xfffff0, 0, MTU), 0);
	for (step = 0; step < 20000; step++) {
		rand ^= rand << 13;
		rand ^= rand >> 7;
		rand ^= rand << 17;
		/* Post a burst (up to the limit), then complete one */
		for (k = rand % 9; k && m.n < LIMIT; k--, id++) {
			enum ibv_wr_opcode op = ops[(rand >> 8 ^ id) % 5];
			uint32_t len = (uint32_t)(rand >> 16 ^ id * 977) % 4000;
			bool sig = !((rand >> 24 ^ id) % 5);

			cr_assert_eq(post(log, op, id, len, sig), 0);
			m.id[m.n] = id;
			m.op[m.n] = op;
			m.sig[m.n] = sig;
			m.npkts[m.n++] = len ? (len - 1) / MTU + 1 : 1;
		}
		for (want = 0; want < m.n && !m.sig[want]; want++)
			;
		if (want == m.n) {
			cr_assert_eq(r2cc_sendlog_match(log, 1, IBV_WC_SEND),
				     -ENOENT);
			continue;
		}
		cr_assert_eq(r2cc_sendlog_match(log, m.id[want] + 1,
						r2cc_wc_opcode(m.op[want])),
			     -EPROTO, "another wr_id");
		cr_assert_eq(r2cc_sendlog_complete_next(
				     log, m.id[want] + 1,
				     r2cc_wc_opcode(m.op[want]), &got),
			     -EAGAIN, "another wr_id: nothing retires");
		for (cons = 0, i = 0; i <= want; i++)
			cons += r2cc_wr_consumes_recv(m.op[i]);
		if (rand >> 40 & 1) { /* the one-call common case */
			cr_assert_eq(r2cc_sendlog_complete_next(
					     log, m.id[want],
					     r2cc_wc_opcode(m.op[want]), &got),
				     (int)want + 1);
			cr_assert_eq(got, cons);
		} else {
			idx = r2cc_sendlog_match(log, m.id[want],
						 r2cc_wc_opcode(m.op[want]));
			cr_assert_eq(idx, (int)want);
			cr_assert_eq(r2cc_sendlog_consumers(log, want + 1),
				     cons);
			cr_assert_eq(r2cc_sendlog_retire(log, want + 1),
				     (int)want + 1);
		}
		memmove(&m.id[0], &m.id[want + 1],
			(m.n - want - 1) * sizeof(m.id[0]));
		memmove(&m.op[0], &m.op[want + 1],
			(m.n - want - 1) * sizeof(m.op[0]));
		memmove(&m.sig[0], &m.sig[want + 1],
			(m.n - want - 1) * sizeof(m.sig[0]));
		memmove(&m.npkts[0], &m.npkts[want + 1],
			(m.n - want - 1) * sizeof(m.npkts[0]));
		m.n -= want + 1;
		span_is(log, &m);
		cr_assert_not(r2cc_sendlog_marked(log));
	}
	r2cc_sendlog_free(log);
}

/*
 * A move marks entries: the peer executed the first two (DONE), the rest
 * replay. While a DONE one is in the log the next completion skips it (a
 * walk); once it retired, the oldest signaled is found directly again,
 * with the WRs posted since the move.
 */
Test(sendlog_retire, a_moves_marks_hold_the_walk_until_they_retire,
     .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(16, 1, 0, false);
	struct r2cc_replay res;
	uint32_t got;

	cr_assert_eq(r2cc_sendlog_start(log, 0x100, 0, MTU), 0);
	cr_assert_eq(post(log, IBV_WR_SEND, 1, 64, true), 0);
	cr_assert_eq(post(log, IBV_WR_RDMA_WRITE, 2, 64, false), 0);
	cr_assert_eq(post(log, IBV_WR_SEND, 3, 64, false), 0);
	cr_assert_eq(post(log, IBV_WR_SEND, 4, 64, true), 0);
	cr_assert_not(r2cc_sendlog_marked(log));
	cr_assert_eq(r2cc_sendlog_replay(log, 0x102, &res), 0);
	cr_assert_eq(res.nskipped, 2);
	cr_assert(r2cc_sendlog_marked(log));
	cr_assert_eq(r2cc_sendlog_start(log, 0x900, 0, MTU), 0);
	cr_assert(r2cc_sendlog_marked(log), "DONE entries still there");
	cr_assert_eq(post(log, IBV_WR_RDMA_WRITE, 5, 64, true), 0);
	/* 1 is DONE (synthesised by the caller, not matched): 4 is next */
	cr_assert_eq(r2cc_sendlog_complete_next(log, 4, IBV_WC_SEND, &got),
		     -EAGAIN, "not while the log holds marks");
	cr_assert_eq(r2cc_sendlog_match(log, 4, IBV_WC_SEND), 3);
	cr_assert_eq(r2cc_sendlog_consumers(log, 4), 3);
	cr_assert_eq(r2cc_sendlog_retire(log, 4), 4);
	cr_assert_not(r2cc_sendlog_marked(log), "the marked ones retired");
	cr_assert_eq(r2cc_sendlog_match(log, 5, IBV_WC_RDMA_WRITE), 0);
	cr_assert_eq(
		r2cc_sendlog_complete_next(log, 5, IBV_WC_RDMA_WRITE, &got), 1);
	cr_assert_eq(got, 0);
	cr_assert_eq(r2cc_sendlog_match(log, 5, IBV_WC_RDMA_WRITE), -ENOENT);
	r2cc_sendlog_free(log);
}
