/* SPDX-License-Identifier: MIT */
/*
 * test_sendlog.c - the per-QP send log: copies, PSNs, retirement in RC
 * order, and the replay split at the responder's rq_psn (LAB.md's case).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <string.h>

#include "migrate.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define SIG IBV_SEND_SIGNALED

static char mem[1 << 16]; /* the program's registered buffer */

static int post(struct r2cc_sendlog *log, enum ibv_wr_opcode op, uint64_t wr_id,
		uint32_t len, unsigned int flags)
{
	struct ibv_sge sge = { (uintptr_t)mem, len, 0x77 };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = flags,
	};

	if (op == IBV_WR_LOCAL_INV || op == IBV_WR_BIND_MW) {
		wr.num_sge = 0;
		wr.sg_list = NULL;
	}
	wr.wr.rdma.remote_addr = 0xabc000 + wr_id;
	wr.wr.rdma.rkey = 0x99;
	return r2cc_sendlog_append(log, &wr, NULL);
}

static const struct r2cc_sendlog_ent *ent(struct r2cc_sendlog *log, uint32_t i)
{
	const struct r2cc_sendlog_ent *e = r2cc_sendlog_peek(log, i);

	cr_assert_not_null(e, "entry %u", i);
	return e;
}

static uint32_t outstanding(struct r2cc_sendlog *log)
{
	struct r2cc_sendlog_stats st;

	r2cc_sendlog_get_stats(log, &st);
	return st.outstanding;
}

Test(sendlog, new_rejects_bad_args_free_null_is_noop, .timeout = 5)
{
	errno = 0;
	cr_assert_null(r2cc_sendlog_new(0, 1, 0, false));
	cr_assert_eq(errno, EINVAL);
	cr_assert_null(r2cc_sendlog_new(1U << 25, 1, 0, false));
	r2cc_sendlog_free(NULL);
}

Test(sendlog, start_validates_and_append_needs_it, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(8, 1, 0, false);

	cr_assert_eq(post(log, IBV_WR_SEND, 1, 8, SIG), -EINVAL);
	cr_assert_eq(r2cc_sendlog_start(log, 0, 0, 1000), -EINVAL);
	cr_assert_eq(r2cc_sendlog_start(log, 0, 0, 128), -EINVAL);
	cr_assert_eq(r2cc_sendlog_start(log, 0, 0, 8192), -EINVAL);
	cr_assert_eq(r2cc_sendlog_start(log, 1U << 24, 0, 1024), -EINVAL);
	cr_assert_eq(r2cc_sendlog_start(log, 0x42, 0, 1024), 0);
	cr_assert_eq(r2cc_sendlog_next_psn(log), 0x42);
	cr_assert_eq(r2cc_sendlog_start(log, 0x43, 0, 4096), 0, "empty: again");
	cr_assert_eq(post(log, IBV_WR_SEND, 1, 8, SIG), 0);
	cr_assert_eq(r2cc_sendlog_start(log, 0x50, 0, 4096), -EBUSY);
	r2cc_sendlog_free(log);
}

Test(sendlog, append_assigns_psns_across_the_wrap, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(8, 1, 0, false);

	cr_assert_eq(r2cc_sendlog_start(log, 0xfffffe, 0, 1024), 0);
	cr_assert_eq(post(log, IBV_WR_RDMA_WRITE, 1, 2048, 0), 0);
	cr_assert_eq(post(log, IBV_WR_SEND, 2, 0, 0), 0);
	cr_assert_eq(post(log, IBV_WR_LOCAL_INV, 3, 0, 0), 0);
	cr_assert_eq(post(log, IBV_WR_RDMA_READ, 4, 3000, SIG), 0);
	cr_assert_eq(ent(log, 0)->first_psn, 0xfffffe);
	cr_assert_eq(ent(log, 0)->npkts, 2);
	cr_assert_eq(ent(log, 1)->first_psn, 0);
	cr_assert_eq(ent(log, 1)->npkts, 1);
	cr_assert_eq(ent(log, 2)->first_psn, 1);
	cr_assert_eq(ent(log, 2)->npkts, 0);
	cr_assert_eq(ent(log, 3)->first_psn, 1);
	cr_assert_eq(ent(log, 3)->npkts, 3);
	cr_assert_eq(ent(log, 3)->len, 3000);
	cr_assert_eq(r2cc_sendlog_next_psn(log), 4);
	cr_assert_eq(ent(log, 0)->wr.wr.rdma.remote_addr, 0xabc001);
	cr_assert_eq(ent(log, 0)->wr.wr.rdma.rkey, 0x99);
	cr_assert_null(ent(log, 0)->wr.next);
	r2cc_sendlog_free(log);
}

Test(sendlog, signaled_completion_retires_unsignaled_run, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(8, 1, 0, false);

	r2cc_sendlog_start(log, 100, 0, 4096);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(post(log, IBV_WR_RDMA_WRITE, i, 64, 0), 0);
	cr_assert_eq(post(log, IBV_WR_SEND, 3, 64, SIG), 0);
	cr_assert_eq(post(log, IBV_WR_RDMA_WRITE, 4, 64, 0), 0);
	cr_assert_eq(r2cc_sendlog_match(log, 3, IBV_WC_SEND), 3);
	cr_assert_eq(r2cc_sendlog_complete(log, 3, IBV_WC_SEND), 4);
	cr_assert_eq(outstanding(log), 1);
	cr_assert_eq(ent(log, 0)->wr.wr_id, 4);
	cr_assert_eq(r2cc_sendlog_complete(log, 4, IBV_WC_RDMA_WRITE), -ENOENT,
		     "an unsignaled WR never completes by itself");
	r2cc_sendlog_free(log);
}

Test(sendlog, wr_id_reuse_matches_oldest_signaled, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(8, 1, 0, false);

	r2cc_sendlog_start(log, 0, 0, 1024);
	post(log, IBV_WR_RDMA_WRITE, 7, 10, SIG);
	post(log, IBV_WR_RDMA_WRITE, 7, 10, SIG);
	post(log, IBV_WR_SEND, 8, 10, SIG);
	cr_assert_eq(r2cc_sendlog_complete(log, 8, IBV_WC_SEND), -EPROTO,
		     "RC completes in order: 8 cannot come before both 7s");
	cr_assert_eq(r2cc_sendlog_complete(log, 7, IBV_WC_SEND), -EPROTO,
		     "opcode must agree");
	cr_assert_eq(outstanding(log), 3);
	cr_assert_eq(r2cc_sendlog_complete(log, 7, IBV_WC_RDMA_WRITE), 1);
	cr_assert_eq(ent(log, 0)->first_psn, 1, "the second 7 is left");
	cr_assert_eq(r2cc_sendlog_complete(log, 7, IBV_WC_RDMA_WRITE), 1);
	cr_assert_eq(r2cc_sendlog_complete(log, 8, IBV_WC_SEND), 1);
	cr_assert_eq(outstanding(log), 0);
	r2cc_sendlog_free(log);
}

Test(sendlog, sq_sig_all_signals_every_wr, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(8, 1, 0, true);

	r2cc_sendlog_start(log, 0, 0, 1024);
	post(log, IBV_WR_RDMA_WRITE, 1, 10, 0);
	post(log, IBV_WR_RDMA_WRITE, 2, 10, 0);
	cr_assert(ent(log, 0)->signaled);
	cr_assert_eq(r2cc_sendlog_complete(log, 1, IBV_WC_RDMA_WRITE), 1);
	cr_assert_eq(r2cc_sendlog_complete(log, 2, IBV_WC_RDMA_WRITE), 1);
	r2cc_sendlog_free(log);
}

Test(sendlog, full_ring_is_enospc_and_slots_wrap, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(4, 1, 0, false);
	struct r2cc_sendlog_stats st;

	r2cc_sendlog_start(log, 0, 0, 1024);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(post(log, IBV_WR_SEND, i, 8, SIG), 0);
	cr_assert_eq(post(log, IBV_WR_SEND, 4, 8, SIG), -ENOSPC);
	cr_assert_eq(r2cc_sendlog_complete(log, 0, IBV_WC_SEND), 1);
	cr_assert_eq(r2cc_sendlog_complete(log, 1, IBV_WC_SEND), 1);
	cr_assert_eq(post(log, IBV_WR_SEND, 4, 8, SIG), 0);
	cr_assert_eq(post(log, IBV_WR_SEND, 5, 8, SIG), 0);
	cr_assert_eq(post(log, IBV_WR_SEND, 6, 8, SIG), -ENOSPC);
	for (uint32_t i = 0; i < 4; i++) {
		cr_assert_eq(ent(log, i)->wr.wr_id, i + 2);
		cr_assert_eq(ent(log, i)->first_psn, i + 2);
	}
	cr_assert_null(r2cc_sendlog_peek(log, 4));
	r2cc_sendlog_get_stats(log, &st);
	cr_assert_eq(st.appended, 6);
	cr_assert_eq(st.retired, 2);
	cr_assert_eq(st.outstanding, 4);
	cr_assert_eq(r2cc_sendlog_retire(log, 5), -EINVAL);
	cr_assert_eq(r2cc_sendlog_retire(log, 4), 4);
	r2cc_sendlog_free(log);
}

Test(sendlog, psn_window_bounds_outstanding_packets, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(8, 1, 0, false);
	struct ibv_sge sge = { 0, 1U << 31, 1 };
	struct ibv_send_wr wr = { .wr_id = 1,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ,
				  .send_flags = SIG };

	r2cc_sendlog_start(log, 0, 0, 256);
	cr_assert_eq(r2cc_sendlog_append(log, &wr, NULL), 0, "2^23 PSNs fit");
	cr_assert_eq(post(log, IBV_WR_SEND, 2, 0, SIG), -ENOSPC);
	cr_assert_eq(r2cc_sendlog_complete(log, 1, IBV_WC_RDMA_READ), 1);
	cr_assert_eq(post(log, IBV_WR_SEND, 2, 0, SIG), 0);
	r2cc_sendlog_free(log);
}

Test(sendlog, rejects_what_it_cannot_copy_or_count, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(8, 2, 16, false);
	struct ibv_sge sge[3] = { { (uintptr_t)mem, 8, 1 },
				  { (uintptr_t)mem, 8, 1 },
				  { (uintptr_t)mem, 8, 1 } };
	struct ibv_send_wr wr = { .sg_list = sge,
				  .num_sge = 3,
				  .opcode = IBV_WR_SEND };

	r2cc_sendlog_start(log, 0, 0, 1024);
	cr_assert_eq(r2cc_sendlog_append(log, &wr, NULL), -EINVAL,
		     "3 SGEs > 2");
	wr.num_sge = -1;
	cr_assert_eq(r2cc_sendlog_append(log, &wr, NULL), -EINVAL);
	wr.num_sge = 2;
	wr.send_flags = IBV_SEND_INLINE;
	cr_assert_eq(r2cc_sendlog_append(log, &wr, NULL), 0,
		     "16 inline bytes fit");
	sge[1].length = 9;
	cr_assert_eq(r2cc_sendlog_append(log, &wr, NULL), -EINVAL, "17 do not");
	wr.send_flags = 0;
	wr.opcode = IBV_WR_TSO;
	cr_assert_eq(r2cc_sendlog_append(log, &wr, NULL), -EOPNOTSUPP);
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	cr_assert_eq(r2cc_sendlog_append(log, &wr, NULL), -EOPNOTSUPP);
	cr_assert_eq(outstanding(log), 1);
	cr_assert_eq(r2cc_sendlog_next_psn(log), 1);
	r2cc_sendlog_free(log);
}

Test(sendlog, inline_data_and_sges_are_copied, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(4, 2, 32, false);
	char a[] = "hello ", b[] = "world";
	struct ibv_sge sge[2] = { { (uintptr_t)a, 6, 0 },
				  { (uintptr_t)b, 5, 0 } };
	struct ibv_send_wr wr = { .wr_id = 9,
				  .sg_list = sge,
				  .num_sge = 2,
				  .opcode = IBV_WR_SEND_WITH_IMM,
				  .send_flags = IBV_SEND_INLINE | SIG,
				  .imm_data = htobe32(77) };
	const struct r2cc_sendlog_ent *e;
	struct r2cc_replay res;
	char got[12] = { 0 };

	r2cc_sendlog_start(log, 0, 0, 1024);
	cr_assert_eq(r2cc_sendlog_append(log, &wr, NULL), 0);
	/* The program reuses both its inline buffers and its SGE array. */
	memset(a, 'x', 6);
	memset(b, 'y', 5);
	sge[0] = (struct ibv_sge){ 0, 0, 0 };
	sge[1] = (struct ibv_sge){ 0, 0, 0 };
	sge[0].addr = (uintptr_t)mem;
	sge[0].length = 4000;
	sge[0].lkey = 0x55;
	wr.num_sge = 1;
	wr.send_flags = SIG;
	wr.opcode = IBV_WR_RDMA_WRITE;
	cr_assert_eq(r2cc_sendlog_append(log, &wr, NULL), 0);
	sge[0].length = 1;
	sge[0].lkey = 1;

	cr_assert_eq(r2cc_sendlog_replay(log, 0, &res), 0);
	cr_assert_eq(res.nreplay, 2);
	e = ent(log, 0);
	cr_assert_eq(res.first, &e->wr);
	cr_assert_eq(be32toh(e->wr.imm_data), 77);
	cr_assert(e->wr.send_flags & IBV_SEND_INLINE);
	cr_assert_eq(e->wr.num_sge, 2);
	cr_assert_neq(e->wr.sg_list, sge);
	cr_assert_neq(e->wr.sg_list[0].addr, (uintptr_t)a);
	memcpy(got, (void *)(uintptr_t)e->wr.sg_list[0].addr,
	       e->wr.sg_list[0].length);
	memcpy(got + 6, (void *)(uintptr_t)e->wr.sg_list[1].addr,
	       e->wr.sg_list[1].length);
	cr_assert_str_eq(got, "hello world");
	e = ent(log, 1);
	cr_assert_eq(res.first->next, &e->wr);
	cr_assert_eq(e->wr.sg_list[0].length, 4000);
	cr_assert_eq(e->wr.sg_list[0].lkey, 0x55);
	cr_assert_eq(e->npkts, 4);
	r2cc_sendlog_free(log);
}

Test(sendlog, inline_flag_on_a_read_is_not_inline_data, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(4, 1, 0, false);

	r2cc_sendlog_start(log, 0, 0, 1024);
	cr_assert_eq(post(log, IBV_WR_RDMA_READ, 1, 64, IBV_SEND_INLINE), 0);
	cr_assert_eq(ent(log, 0)->wr.sg_list[0].addr, (uintptr_t)mem,
		     "a READ's SGE is its destination, kept as is");
	cr_assert_eq(ent(log, 0)->wr.sg_list[0].lkey, 0x77);
	r2cc_sendlog_free(log);
}

/*
 * Replay table. Log A, at MTU 1024 (PSN offsets in brackets):
 * 0 WRITE 4096 [0,4)  1 SEND 100 [4]  2 READ 3000 [5,8)  3 WRITE 0 [8]
 * 4 FETCH_ADD [9]  5 WRITE_IMM 2048 [10,12)  6 LOCAL_INV []  7 SEND 5000
 * [12,17). Log B: 0 WRITE 2048 [0,2)  1 LOCAL_INV []  2 SEND 1 [2]
 * 3 WRITE_IMM 1024 [3]. Dispositions: R replay, D done, L lost, F flush.
 */
static void fill_a(struct r2cc_sendlog *log)
{
	static const struct {
		enum ibv_wr_opcode op;
		uint32_t len;
	} a[] = {
		{ IBV_WR_RDMA_WRITE, 4096 },
		{ IBV_WR_SEND, 100 },
		{ IBV_WR_RDMA_READ, 3000 },
		{ IBV_WR_RDMA_WRITE, 0 },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, 8 },
		{ IBV_WR_RDMA_WRITE_WITH_IMM, 2048 },
		{ IBV_WR_LOCAL_INV, 0 },
		{ IBV_WR_SEND, 5000 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(a); i++)
		cr_assert_eq(post(log, a[i].op, i, a[i].len, SIG), 0);
}

static void fill_b(struct r2cc_sendlog *log)
{
	post(log, IBV_WR_RDMA_WRITE, 0, 2048, SIG);
	post(log, IBV_WR_LOCAL_INV, 1, 0, SIG);
	post(log, IBV_WR_SEND, 2, 1, SIG);
	post(log, IBV_WR_RDMA_WRITE_WITH_IMM, 3, 1024, SIG);
}

struct replay_case {
	char log; /* 'A' or 'B' */
	uint32_t start; /* sq_psn */
	uint32_t off; /* peer rq_psn - sq_psn */
	char disp[12]; /* inline: criterion copies params to the test process */
	int reread; /* index of the re-read READ, or -1 */
};

static const struct replay_case replay_cases[] = {
	{ 'A', 0, 0, "RRRRRRRR", -1 }, /* nothing executed */
	{ 'A', 0, 2, "RRRRRRRR", -1 }, /* inside a 4-packet WRITE */
	{ 'A', 0, 3, "RRRRRRRR", -1 }, /* at its last packet */
	{ 'A', 0, 4, "DRRRRRRR", -1 }, /* exactly at WR 1's first PSN */
	{ 'A', 0, 5, "DDRRRRRR", -1 },
	{ 'A', 0, 6, "DDRRRRRR", -1 }, /* inside the READ */
	{ 'A', 0, 8, "DDRRRRRR", 2 }, /* READ executed, data maybe not */
	{ 'A', 0, 9, "DDRDRRRR", 2 }, /* at the atomic: not executed */
	{ 'A', 0, 10, "DDRDLFFF", 2 }, /* past it: executed, result lost */
	{ 'A', 0, 17, "DDRDLFFF", 2 },
	{ 'B', 0, 0, "RRRR", -1 },
	{ 'B', 0, 2, "DRRR", -1 }, /* LOCAL_INV: next WR not started */
	{ 'B', 0, 3, "DDDR", -1 }, /* next WR executed: it ran */
	{ 'B', 0, 4, "DDDD", -1 }, /* all executed */
	/* the same across the 2^24 wrap */
	{ 'A', 0xfffffc, 4, "DRRRRRRR", -1 },
	{ 'A', 0xfffffa, 9, "DDRDRRRR", 2 },
	{ 'A', 0xfffff8, 10, "DDRDLFFF", 2 },
	{ 'B', 0xffffff, 3, "DDDR", -1 },
};

ParameterizedTestParameters(sendlog, replay_table)
{
	return cr_make_param_array(struct replay_case,
				   (struct replay_case *)replay_cases,
				   ARRAY_SIZE(replay_cases));
}

ParameterizedTest(struct replay_case *c, sendlog, replay_table, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(16, 1, 0, false);
	uint32_t n = (uint32_t)strlen(c->disp), i, nr = 0, nd = 0, nf = 0;
	uint32_t used, nused = 0;
	static const char code[] = "NRDLF";
	const struct ibv_send_wr *w;
	struct r2cc_replay res;

	cr_assert_eq(r2cc_sendlog_start(log, c->start, 0, 1024), 0);
	if (c->log == 'A')
		fill_a(log);
	else
		fill_b(log);
	/* What the replay will find the peer's SENDs consumed, told first */
	cr_assert_eq(r2cc_sendlog_consumed(log, r2cc_psn_add(c->start, c->off),
					   &used),
		     0);
	cr_assert_eq(r2cc_sendlog_replay(log, r2cc_psn_add(c->start, c->off),
					 &res),
		     0);
	cr_assert_eq(r2cc_sendlog_consumed(log, c->start, &used), -EBUSY,
		     "frozen");
	/* The list is exactly the R entries, in posting order. */
	w = res.first;
	for (i = 0; i < n; i++) {
		const struct r2cc_sendlog_ent *e = ent(log, i);

		cr_assert_eq(code[e->disp], c->disp[i], "%c%u@%u: %c, want %c",
			     c->log, i, c->off, code[e->disp], c->disp[i]);
		cr_assert_eq(e->reread, (int)i == c->reread);
		nr += c->disp[i] == 'R';
		nd += c->disp[i] == 'D';
		nf += c->disp[i] == 'L' || c->disp[i] == 'F';
		nused += c->disp[i] == 'D' &&
			 r2cc_wr_consumes_recv(e->wr.opcode);
		if (c->disp[i] == 'L')
			cr_assert_eq(res.lost, e);
		if (c->disp[i] != 'R')
			continue;
		cr_assert_eq(w, &e->wr, "list entry for WR %u", i);
		cr_assert_eq(w->wr_id, i);
		w = w->next;
	}
	cr_assert_null(w);
	cr_assert_eq(used, nused, "%c@%u: %u consumed, the replay says %u",
		     c->log, c->off, used, nused);
	cr_assert_eq(res.nreplay, nr);
	cr_assert_eq(res.nskipped, nd);
	cr_assert_eq(res.nfailed, nf);
	cr_assert_eq(res.nreread, c->reread >= 0);
	if (!strchr(c->disp, 'L'))
		cr_assert_null(res.lost);
	r2cc_sendlog_free(log);
}

Test(sendlog, rq_psn_outside_the_outstanding_psns_is_erange, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(16, 1, 0, false);
	struct r2cc_replay res;
	uint32_t used;

	r2cc_sendlog_start(log, 0xfffff0, 0, 1024);
	fill_a(log); /* PSNs 0xfffff0 .. 0x000000 */
	cr_assert_eq(r2cc_sendlog_consumed(log, 0xffffef, &used), -ERANGE);
	cr_assert_eq(r2cc_sendlog_replay(log, 0xffffef, &res), -ERANGE);
	cr_assert_eq(r2cc_sendlog_replay(log, r2cc_psn_add(0xfffff0, 18), &res),
		     -ERANGE);
	/* WR 0 (4 PSNs) completed: the peer cannot be behind it */
	cr_assert_eq(r2cc_sendlog_complete(log, 0, IBV_WC_RDMA_WRITE), 1);
	cr_assert_eq(r2cc_sendlog_replay(log, 0xfffff3, &res), -ERANGE);
	cr_assert_eq(r2cc_sendlog_replay(log, 0xfffff4, &res), 0);
	cr_assert_eq(res.nreplay, 7);
	r2cc_sendlog_free(log);
}

/* r2cc's own WR first (a heal, move.c): a peer not past it yet executed
 * none of the program's; once one retired, the peer is past it. */
Test(sendlog, a_peer_still_at_the_lead_executed_nothing, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(8, 1, 0, false);
	struct r2cc_replay res;

	cr_assert_eq(r2cc_sendlog_start(log, 0xffffff, 1, 1024), 0);
	post(log, IBV_WR_SEND, 0, 100, SIG);
	post(log, IBV_WR_SEND, 1, 100, SIG);
	cr_assert_eq(ent(log, 0)->first_psn, 0, "after the lead, wrapped");
	cr_assert_eq(r2cc_sendlog_replay(log, 0xfffffe, &res), -ERANGE,
		     "before the lead");
	cr_assert_eq(r2cc_sendlog_replay(log, 0xffffff, &res), 0);
	cr_assert_eq(res.nreplay, 2, "at the lead: none executed");
	cr_assert_eq(r2cc_sendlog_start(log, 0x10, 0, 1024), 0);
	cr_assert_eq(ent(log, 0)->first_psn, 0x10, "no lead now");
	cr_assert_eq(r2cc_sendlog_start(log, 0x10, R2CC_PSN_WINDOW + 1, 1024),
		     -EINVAL);
	r2cc_sendlog_free(log);

	log = r2cc_sendlog_new(8, 1, 0, false);
	r2cc_sendlog_start(log, 0x20, 1, 1024);
	post(log, IBV_WR_SEND, 0, 100, SIG);
	post(log, IBV_WR_SEND, 1, 100, SIG);
	cr_assert_eq(r2cc_sendlog_complete(log, 0, IBV_WC_SEND), 1);
	cr_assert_eq(r2cc_sendlog_replay(log, 0x21, &res), -ERANGE,
		     "WR 0 completed: the peer is past the lead");
	cr_assert_eq(r2cc_sendlog_replay(log, 0x22, &res), 0);
	cr_assert_eq(res.nreplay, 1);
	r2cc_sendlog_free(log);
}

/* Only a READ of more than one packet leaves a response half-received */
Test(sendlog, reading_is_a_multi_packet_read_outstanding, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(8, 1, 0, false);

	r2cc_sendlog_start(log, 0x30, 0, 1024);
	post(log, IBV_WR_RDMA_READ, 0, 1024, 0);
	post(log, IBV_WR_RDMA_WRITE, 1, 8192, 0);
	cr_assert_not(r2cc_sendlog_reading(log), "one packet's READ");
	post(log, IBV_WR_RDMA_READ, 2, 1025, SIG);
	cr_assert(r2cc_sendlog_reading(log));
	cr_assert_eq(r2cc_sendlog_complete(log, 2, IBV_WC_RDMA_READ), 3);
	cr_assert_not(r2cc_sendlog_reading(log), "completed");
	r2cc_sendlog_free(log);
}

Test(sendlog, trailing_local_wr_is_replayed, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(4, 1, 0, false);
	struct r2cc_replay res;

	r2cc_sendlog_start(log, 10, 0, 1024);
	post(log, IBV_WR_RDMA_WRITE, 0, 100, 0);
	post(log, IBV_WR_BIND_MW, 1, 0, SIG);
	cr_assert_eq(r2cc_sendlog_replay(log, 11, &res), 0);
	cr_assert_eq(ent(log, 0)->disp, R2CC_SL_DONE);
	cr_assert_eq(ent(log, 1)->disp, R2CC_SL_REPLAY,
		     "nothing shows whether the HCA ran it");
	cr_assert_eq(res.first->wr_id, 1);
	r2cc_sendlog_free(log);
}

Test(sendlog, empty_log_replays_nothing, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(4, 1, 0, false);
	struct r2cc_replay res;

	r2cc_sendlog_start(log, 0x777, 0, 1024);
	cr_assert_eq(r2cc_sendlog_replay(log, 0x778, &res), -ERANGE);
	cr_assert_eq(r2cc_sendlog_replay(log, 0x777, &res), 0);
	cr_assert_null(res.first);
	cr_assert_eq(res.nreplay + res.nskipped + res.nfailed, 0);
	r2cc_sendlog_free(log);
}

/* Failover, then the backup QP: PSNs move, DONE entries stay DONE. */
Test(sendlog, replay_freezes_then_start_moves_to_backup, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(16, 1, 0, false);
	struct r2cc_sendlog_stats st;
	struct r2cc_replay res;

	r2cc_sendlog_start(log, 0, 0, 1024);
	fill_a(log);
	cr_assert_eq(r2cc_sendlog_replay(log, 9, &res), 0); /* DDRDRRRR */
	cr_assert_eq(post(log, IBV_WR_SEND, 99, 1, SIG), -EBUSY);
	cr_assert_eq(r2cc_sendlog_replay(log, 9, &res), -EBUSY);

	/* Backup QP at PSN 0x500, MTU 2048: READ 3000 is now 2 packets. */
	cr_assert_eq(r2cc_sendlog_start(log, 0x500, 0, 2048), 0);
	cr_assert_eq(ent(log, 0)->disp, R2CC_SL_DONE);
	cr_assert_eq(ent(log, 0)->npkts, 0);
	cr_assert_eq(ent(log, 2)->disp, R2CC_SL_NEW);
	cr_assert_eq(ent(log, 2)->first_psn, 0x500);
	cr_assert_eq(ent(log, 2)->npkts, 2);
	cr_assert_eq(ent(log, 4)->first_psn, 0x502);
	cr_assert_eq(ent(log, 5)->first_psn, 0x503);
	cr_assert_eq(ent(log, 7)->first_psn, 0x504);
	cr_assert_eq(ent(log, 7)->npkts, 3);
	cr_assert_eq(r2cc_sendlog_next_psn(log), 0x507);
	cr_assert_eq(post(log, IBV_WR_SEND, 8, 1, SIG), 0);
	cr_assert_eq(ent(log, 8)->first_psn, 0x507);

	/* A second failover, from the backup: its rq_psn is 0x502. */
	cr_assert_eq(r2cc_sendlog_replay(log, 0x502, &res), 0);
	cr_assert_eq(res.nskipped, 3, "0, 1 and 3 were done on rail 0");
	cr_assert_eq(res.nreplay, 6);
	cr_assert_eq(res.nreread, 1);
	cr_assert_eq(res.first->wr_id, 2);
	cr_assert_eq(r2cc_sendlog_start(log, 0x10, 0, 1024), 0);

	/* Completions from the new QP, with DONE ones to synthesise first. */
	cr_assert_eq(r2cc_sendlog_complete(log, 2, IBV_WC_RDMA_READ), -EBUSY);
	cr_assert_eq(r2cc_sendlog_match(log, 2, IBV_WC_RDMA_READ), 2);
	cr_assert_eq(r2cc_sendlog_retire(log, 2), 2); /* after 0, 1 */
	cr_assert_eq(r2cc_sendlog_complete(log, 2, IBV_WC_RDMA_READ), 1);
	cr_assert_eq(r2cc_sendlog_complete(log, 4, IBV_WC_FETCH_ADD), -EBUSY);
	cr_assert_eq(r2cc_sendlog_retire(log, 1), 1); /* 3 */
	cr_assert_eq(r2cc_sendlog_complete(log, 4, IBV_WC_FETCH_ADD), 1);
	r2cc_sendlog_get_stats(log, &st);
	cr_assert_eq(st.appended, 9);
	cr_assert_eq(st.retired, 5);
	cr_assert_eq(st.outstanding, 4);
	cr_assert_eq(st.skipped, 3, "counted once each");
	cr_assert_eq(st.replayed, 5 + 6);
	cr_assert_eq(st.reread, 2);
	cr_assert_eq(st.failed, 0);
	r2cc_sendlog_free(log);
}

/*
 * An unsignaled READ the peer executed, then a signaled SEND it executed:
 * the READ is re-read, the SEND done. Nothing the program asked for would
 * say the READ is done, and the SEND completes after it: the READ is
 * replayed signaled (forced), and its completion matches. Without a
 * signaled DONE after it, it stays as the program posted it.
 */
Test(sendlog, an_unsignaled_reread_before_a_signaled_done_is_forced,
     .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(8, 1, 0, false);
	struct r2cc_replay res;

	r2cc_sendlog_start(log, 0x100, 0, 1024);
	cr_assert_eq(post(log, IBV_WR_RDMA_READ, 1, 64, 0), 0);
	cr_assert_eq(post(log, IBV_WR_SEND, 2, 64, SIG), 0);
	cr_assert_eq(r2cc_sendlog_replay(log, 0x102, &res), 0);
	cr_assert_eq(res.nreplay, 1);
	cr_assert_eq(res.nreread, 1);
	cr_assert_eq(res.nskipped, 1);
	cr_assert(ent(log, 0)->forced);
	cr_assert_not(ent(log, 0)->signaled, "the program's view kept");
	cr_assert(res.first->send_flags & IBV_SEND_SIGNALED, "posted signaled");
	cr_assert_eq(r2cc_sendlog_start(log, 0x500, 0, 1024), 0);
	cr_assert_eq(r2cc_sendlog_match(log, 1, IBV_WC_RDMA_READ), 0);
	r2cc_sendlog_free(log);

	log = r2cc_sendlog_new(8, 1, 0, false);
	r2cc_sendlog_start(log, 0x100, 0, 1024);
	cr_assert_eq(post(log, IBV_WR_RDMA_READ, 1, 64, 0), 0);
	cr_assert_eq(post(log, IBV_WR_SEND, 2, 64, 0), 0);
	cr_assert_eq(r2cc_sendlog_replay(log, 0x102, &res), 0);
	cr_assert_not(ent(log, 0)->forced, "no signaled DONE after it");
	cr_assert_not(res.first->send_flags & IBV_SEND_SIGNALED);
	r2cc_sendlog_free(log);

	/* Two such pairs: each READ before its SEND */
	log = r2cc_sendlog_new(8, 1, 0, false);
	r2cc_sendlog_start(log, 0x100, 0, 1024);
	cr_assert_eq(post(log, IBV_WR_RDMA_READ, 1, 64, 0), 0);
	cr_assert_eq(post(log, IBV_WR_SEND, 2, 64, SIG), 0);
	cr_assert_eq(post(log, IBV_WR_RDMA_READ, 3, 64, 0), 0);
	cr_assert_eq(post(log, IBV_WR_SEND, 4, 64, SIG), 0);
	cr_assert_eq(r2cc_sendlog_replay(log, 0x104, &res), 0);
	cr_assert_eq(res.nreplay, 2);
	cr_assert(ent(log, 0)->forced);
	cr_assert(ent(log, 2)->forced);
	r2cc_sendlog_free(log);
}

Test(sendlog, lost_atomic_must_be_retired_before_start, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(16, 1, 0, false);
	struct r2cc_sendlog_stats st;
	struct r2cc_replay res;

	r2cc_sendlog_start(log, 0, 0, 1024);
	fill_a(log);
	cr_assert_eq(r2cc_sendlog_replay(log, 10, &res), 0);
	cr_assert_not_null(res.lost);
	cr_assert_eq(res.lost->wr.wr_id, 4);
	cr_assert_eq(res.lost->wr.opcode, IBV_WR_ATOMIC_FETCH_AND_ADD);
	cr_assert_eq(res.nfailed, 4);
	cr_assert_eq(r2cc_sendlog_start(log, 0, 0, 1024), -EBUSY);
	cr_assert_eq(r2cc_sendlog_retire(log, 8), 8);
	cr_assert_eq(r2cc_sendlog_start(log, 0, 0, 1024), 0);
	r2cc_sendlog_get_stats(log, &st);
	cr_assert_eq(st.failed, 4);
	r2cc_sendlog_free(log);
}

/* LAB.md: 16 KiB WRITEs at MTU 1024 from PSN 0xfffe00, the responder's
 * rq_psn 8017 packets on: 501 WRs executed, the 502nd partly. */
static struct r2cc_sendlog *lab_log(void)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(1024, 1, 0, false);

	cr_assert_eq(r2cc_sendlog_start(log, 0xfffe00, 0, 1024), 0);
	for (uint64_t id = 1; id <= 600; id++)
		cr_assert_eq(post(log, IBV_WR_RDMA_WRITE, id, 16384, SIG), 0);
	cr_assert_eq(ent(log, 32)->first_psn, 0, "WR 33 starts at the wrap");
	return log;
}

static void check_lab(struct r2cc_sendlog *log, uint32_t skipped)
{
	const struct ibv_send_wr *w;
	struct r2cc_replay res;
	uint64_t id = 502;

	cr_assert_eq(r2cc_sendlog_replay(log, r2cc_psn_add(0xfffe00, 8017),
					 &res),
		     0);
	cr_assert_eq(res.nskipped, skipped);
	cr_assert_eq(res.nreplay, 99);
	cr_assert_eq(res.nfailed, 0);
	cr_assert_null(res.lost);
	for (w = res.first; w; w = w->next)
		cr_assert_eq(w->wr_id, id++);
	cr_assert_eq(id, 601);
	cr_assert_eq(ent(log, skipped - 1)->wr.wr_id, 501);
	cr_assert_eq(ent(log, skipped - 1)->disp, R2CC_SL_DONE);
	cr_assert_eq(ent(log, skipped)->disp, R2CC_SL_REPLAY);
}

Test(sendlog, lab_case_nothing_completed, .timeout = 5)
{
	struct r2cc_sendlog *log = lab_log();

	check_lab(log, 501);
	r2cc_sendlog_free(log);
}

Test(sendlog, lab_case_after_493_completions, .timeout = 5)
{
	struct r2cc_sendlog *log = lab_log();

	for (uint64_t id = 1; id <= 493; id++)
		cr_assert_eq(r2cc_sendlog_complete(log, id, IBV_WC_RDMA_WRITE),
			     1);
	check_lab(log, 8); /* 494..501: executed, ACKs lost */
	r2cc_sendlog_free(log);
}

Test(sendlog, wrap_in_the_middle_of_the_log, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(64, 1, 0, false);
	struct r2cc_replay res;

	r2cc_sendlog_start(log, 0xfffe00, 0, 1024);
	for (int i = 0; i < 64; i++)
		post(log, IBV_WR_RDMA_WRITE, i, 16384, i % 4 == 3 ? SIG : 0);
	cr_assert_eq(ent(log, 31)->first_psn, 0xfffff0);
	cr_assert_eq(ent(log, 32)->first_psn, 0);
	cr_assert_eq(r2cc_sendlog_next_psn(log), 0x200);
	/* rq_psn exactly at the wrap: WRs 0..31 executed */
	cr_assert_eq(r2cc_sendlog_replay(log, 0, &res), 0);
	cr_assert_eq(res.nskipped, 32);
	cr_assert_eq(res.first->wr_id, 32);
	r2cc_sendlog_free(log);

	log = r2cc_sendlog_new(64, 1, 0, false);
	r2cc_sendlog_start(log, 0xfffe00, 0, 1024);
	for (int i = 0; i < 64; i++)
		post(log, IBV_WR_RDMA_WRITE, i, 16384, i % 4 == 3 ? SIG : 0);
	cr_assert_eq(r2cc_sendlog_complete(log, 3, IBV_WC_RDMA_WRITE), 4);
	cr_assert_eq(r2cc_sendlog_replay(log, 16 * 8 + 3, &res), 0);
	cr_assert_eq(res.nskipped, 40 - 4);
	cr_assert_eq(res.nreplay, 24);
	cr_assert_eq(res.first->wr_id, 40);
	r2cc_sendlog_free(log);
}

/* A log starts at half its limit (plus one) and doubles when a program
 * posts past that: the outstanding entries keep their order, PSNs, SGEs
 * and inline bytes across the move, also when the ring had wrapped. */
Test(sendlog, grows_to_its_limit_keeping_entries_and_inline_bytes, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(9, 2, 8, false);
	char data[12][8];
	struct ibv_sge sge[2];
	struct ibv_send_wr wr = { .num_sge = 2, .sg_list = sge };
	const struct r2cc_sendlog_ent *e;
	struct r2cc_replay res;
	struct ibv_send_wr *w;
	uint32_t i, n;

	r2cc_sendlog_start(log, 100, 0, 1024);
	for (i = 0; i < 12; i++) {
		memset(data[i], 'a' + (int)i, sizeof(data[i]));
		/* every other WR inline (its bytes copied), the rest by SGE */
		sge[0] = (struct ibv_sge){ (uintptr_t)data[i], 3, 0x10 + i };
		sge[1] = (struct ibv_sge){ (uintptr_t)data[i] + 3, 5, 0x20 };
		wr.wr_id = i;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = SIG | (i % 2 ? IBV_SEND_INLINE : 0);
		if (i == 3) /* the ring wraps before it grows */
			cr_assert_eq(r2cc_sendlog_complete(log, 0, IBV_WC_SEND),
				     1);
		if (i == 4)
			cr_assert_eq(r2cc_sendlog_complete(log, 1, IBV_WC_SEND),
				     1);
		if (i < 11)
			cr_assert_eq(r2cc_sendlog_append(log, &wr, NULL), 0,
				     "WR %u", i);
		else
			cr_assert_eq(r2cc_sendlog_append(log, &wr, NULL),
				     -ENOSPC, "9 outstanding: the limit");
		memset(data[i], '-', sizeof(data[i])); /* the program reuses */
	}
	cr_assert_eq(outstanding(log), 9);
	for (i = 0; i < 9; i++) {
		e = ent(log, i);
		cr_assert_eq(e->wr.wr_id, i + 2);
		cr_assert_eq(e->first_psn, 100 + i + 2);
	}
	/* nothing executed: all nine replay, each with its own bytes */
	cr_assert_eq(r2cc_sendlog_replay(log, 102, &res), 0);
	cr_assert_eq(res.nreplay, 9);
	for (w = res.first, n = 0; w; w = w->next, n++) {
		char c = (char)('a' + (int)w->wr_id);

		cr_assert_eq(w->wr_id, n + 2);
		cr_assert_eq(w->num_sge, 2);
		if (w->wr_id % 2) {
			cr_assert_eq(w->sg_list[0].length, 3);
			cr_assert_eq(w->sg_list[1].length, 5);
			for (i = 0; i < 3; i++)
				cr_assert_eq(((char *)(uintptr_t)w->sg_list[0]
						      .addr)[i],
					     c, "WR %llu",
					     (unsigned long long)w->wr_id);
			for (i = 0; i < 5; i++)
				cr_assert_eq(((char *)(uintptr_t)w->sg_list[1]
						      .addr)[i],
					     c);
		} else {
			cr_assert_eq(w->sg_list[0].lkey, 0x10 + w->wr_id);
			cr_assert_eq(w->sg_list[1].lkey, 0x20);
		}
	}
	cr_assert_eq(n, 9);
	r2cc_sendlog_free(log);
}

/* An NCCL-sized QP's log (limit 2 * 512 + 1) holds R2CC_LOG_FIRST at
 * first and grows as the program keeps more outstanding: 600 of them,
 * each with its PSN, then replayed in order. */
Test(sendlog, a_deep_queues_log_starts_small_and_grows, .timeout = 5)
{
	struct r2cc_sendlog *log = r2cc_sendlog_new(1025, 1, 0, false);
	struct ibv_sge sge = { 0x1000, 64, 0x10 };
	struct ibv_send_wr wr = { .num_sge = 1,
				  .sg_list = &sge,
				  .opcode = IBV_WR_RDMA_WRITE };
	struct r2cc_replay res;
	struct ibv_send_wr *w;
	uint32_t i;

	cr_assert_not_null(log);
	r2cc_sendlog_start(log, 100, 0, 1024);
	for (i = 0; i < 600; i++) {
		wr.wr_id = i;
		wr.send_flags = i % 16 == 15 ? SIG : 0;
		cr_assert_eq(r2cc_sendlog_append(log, &wr, NULL), 0, "WR %u",
			     i);
	}
	cr_assert_eq(outstanding(log), 600);
	cr_assert_eq(ent(log, 599)->first_psn, 100 + 599);
	cr_assert_eq(r2cc_sendlog_replay(log, 100, &res), 0);
	cr_assert_eq(res.nreplay, 600);
	for (w = res.first, i = 0; w; w = w->next, i++)
		cr_assert_eq(w->wr_id, i);
	cr_assert_eq(i, 600);
	r2cc_sendlog_free(log);
}
