/* SPDX-License-Identifier: MIT */
/*
 * test_recvlog.c - the per-QP receive log: copies, retirement in posting
 * order, and the pending / re-post split at the peer's consumed count
 * across one and two fences.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <string.h>

#include "migrate.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static char mem[1 << 12]; /* the program's registered receive buffers */

/* One receive of 2 SGEs: 64 bytes at wr_id * 64, 16 bytes after them */
static int post(struct r2cc_recvlog *log, uint64_t wr_id)
{
	struct ibv_sge sge[2] = {
		{ (uintptr_t)mem + (wr_id % 32) * 64, 48,
		  0x10 + (uint32_t)wr_id },
		{ (uintptr_t)mem + (wr_id % 32) * 64 + 48, 16, 0x20 },
	};
	struct ibv_recv_wr wr = { .wr_id = wr_id,
				  .sg_list = sge,
				  .num_sge = 2 };

	return r2cc_recvlog_append(log, &wr);
}

static const struct r2cc_recvlog_ent *ent(struct r2cc_recvlog *log, uint32_t i)
{
	const struct r2cc_recvlog_ent *e = r2cc_recvlog_peek(log, i);

	cr_assert_not_null(e, "entry %u", i);
	return e;
}

static struct r2cc_recvlog_stats stats(struct r2cc_recvlog *log)
{
	struct r2cc_recvlog_stats st;

	r2cc_recvlog_get_stats(log, &st);
	return st;
}

/* The re-post list is exactly wr_ids @from.. @from + @n - 1, in order */
static void check_list(const struct r2cc_recv_replay *res, uint64_t from,
		       uint32_t n)
{
	const struct ibv_recv_wr *w = res->first;
	uint32_t i;

	cr_assert_eq(res->nrepost, n);
	for (i = 0; i < n; i++, w = w->next) {
		cr_assert_not_null(w, "list ends after %u of %u", i, n);
		cr_assert_eq(w->wr_id, from + i);
		cr_assert_eq(w->num_sge, 2);
		cr_assert_eq(w->sg_list[0].addr,
			     (uintptr_t)mem + ((from + i) % 32) * 64);
		cr_assert_eq(w->sg_list[0].lkey, 0x10 + (uint32_t)(from + i));
		cr_assert_eq(w->sg_list[1].length, 16);
	}
	cr_assert_null(w, "list longer than %u", n);
}

Test(recvlog, new_rejects_bad_args_free_null_is_noop, .timeout = 5)
{
	errno = 0;
	cr_assert_null(r2cc_recvlog_new(0, 1));
	cr_assert_eq(errno, EINVAL);
	errno = 0;
	cr_assert_null(r2cc_recvlog_new(1U << 25, 1));
	cr_assert_eq(errno, EINVAL);
	r2cc_recvlog_free(NULL);
}

Test(recvlog, append_copies_sges_not_the_callers_array, .timeout = 5)
{
	struct r2cc_recvlog *log = r2cc_recvlog_new(4, 3);
	struct ibv_sge sge[3] = { { 0x1000, 10, 1 }, { 0x2000, 20, 2 } };
	struct ibv_recv_wr other = { .wr_id = 99 };
	struct ibv_recv_wr wr = {
		.wr_id = 7, .next = &other, .sg_list = sge, .num_sge = 2
	};
	const struct r2cc_recvlog_ent *e;

	cr_assert_eq(r2cc_recvlog_append(log, &wr), 0);
	/* The program reuses its WR and SGE array as soon as post returns */
	memset(sge, 0xee, sizeof(sge));
	wr.wr_id = 8;
	e = ent(log, 0);
	cr_assert_eq(e->wr.wr_id, 7);
	cr_assert_null(e->wr.next, "next is never copied");
	cr_assert_eq(e->wr.num_sge, 2);
	cr_assert_neq(e->wr.sg_list, sge);
	cr_assert_eq(e->wr.sg_list[0].addr, 0x1000);
	cr_assert_eq(e->wr.sg_list[0].length, 10);
	cr_assert_eq(e->wr.sg_list[0].lkey, 1);
	cr_assert_eq(e->wr.sg_list[1].addr, 0x2000);
	cr_assert_eq(e->wr.sg_list[1].lkey, 2);
	cr_assert_eq(e->epoch, 0);
	cr_assert_null(r2cc_recvlog_peek(log, 1));
	/* A second entry has its own SGE storage */
	cr_assert_eq(post(log, 1), 0);
	cr_assert_eq(ent(log, 0)->wr.sg_list[0].addr, 0x1000);
	cr_assert_neq(ent(log, 1)->wr.sg_list, ent(log, 0)->wr.sg_list);
	r2cc_recvlog_free(log);
}

Test(recvlog, append_checks_num_sge, .timeout = 5)
{
	struct r2cc_recvlog *log = r2cc_recvlog_new(4, 1);
	struct r2cc_recvlog *nosge = r2cc_recvlog_new(4, 0);
	struct ibv_sge sge[2] = { { 0x1000, 10, 1 }, { 0x2000, 20, 2 } };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = sge, .num_sge = 2 };

	cr_assert_eq(r2cc_recvlog_append(log, &wr), -EINVAL);
	wr.num_sge = -1;
	cr_assert_eq(r2cc_recvlog_append(log, &wr), -EINVAL);
	cr_assert_eq(stats(log).posted, 0, "rejected WRs are not counted");
	wr.num_sge = 1;
	cr_assert_eq(r2cc_recvlog_append(log, &wr), 0);
	cr_assert_eq(r2cc_recvlog_append(nosge, &wr), -EINVAL);
	wr.num_sge = 0;
	wr.sg_list = NULL;
	cr_assert_eq(r2cc_recvlog_append(nosge, &wr), 0, "0 SGEs: fine");
	cr_assert_eq(ent(nosge, 0)->wr.num_sge, 0);
	r2cc_recvlog_free(nosge);
	r2cc_recvlog_free(log);
}

Test(recvlog, a_full_ring_grows_in_order_and_slots_wrap, .timeout = 5)
{
	struct r2cc_recvlog *log = r2cc_recvlog_new(4, 2);
	struct r2cc_recvlog_stats st;

	for (uint64_t i = 0; i < 4; i++)
		cr_assert_eq(post(log, i), 0);
	cr_assert_eq(r2cc_recvlog_complete(log, 0), 0);
	cr_assert_eq(r2cc_recvlog_complete(log, 1), 0);
	cr_assert_eq(post(log, 4), 0);
	cr_assert_eq(post(log, 5), 0); /* wrapped: slots 0 and 1 again */
	/* More outstanding than the queue's depth (libfabric's rxm): the
	 * log grows, the wrapped ring copied in order, each copy with SGEs
	 * of its own */
	cr_assert_eq(post(log, 6), 1, "grown to 8");
	cr_assert_eq(post(log, 7), 0);
	cr_assert_eq(post(log, 8), 0);
	cr_assert_eq(post(log, 9), 0);
	cr_assert_eq(post(log, 10), 1, "grown to 16");
	for (uint64_t i = 11; i < 13; i++)
		cr_assert_eq(post(log, i), 0, "wr %lu", (unsigned long)i);
	for (uint32_t i = 0; i < 11; i++) {
		const struct r2cc_recvlog_ent *e = ent(log, i);

		cr_assert_eq(e->wr.wr_id, i + 2);
		cr_assert_eq(e->wr.num_sge, 2);
		cr_assert_eq(e->wr.sg_list[0].lkey, 0x12 + i);
		cr_assert_eq(e->wr.sg_list[1].length, 16);
		if (i)
			cr_assert_neq(e->wr.sg_list,
				      ent(log, i - 1)->wr.sg_list);
	}
	cr_assert_null(r2cc_recvlog_peek(log, 11));
	for (uint64_t i = 2; i < 13; i++)
		cr_assert_eq(r2cc_recvlog_complete(log, i), 0);
	st = stats(log);
	cr_assert_eq(st.posted, 13);
	cr_assert_eq(st.completed, 13);
	cr_assert_eq(st.outstanding, 0);
	r2cc_recvlog_free(log);
}

Test(recvlog, complete_retires_oldest_only, .timeout = 5)
{
	struct r2cc_recvlog *log = r2cc_recvlog_new(8, 2);

	cr_assert_eq(r2cc_recvlog_complete(log, 0), -ENOENT);
	post(log, 5);
	post(log, 6);
	post(log, 5);
	cr_assert_eq(r2cc_recvlog_complete(log, 6), -EPROTO,
		     "RC receives complete in order: 6 cannot come first");
	cr_assert_eq(stats(log).outstanding, 3, "-EPROTO changes nothing");
	cr_assert_eq(stats(log).completed, 0);
	cr_assert_eq(r2cc_recvlog_complete(log, 5), 0);
	cr_assert_eq(r2cc_recvlog_complete(log, 5), -EPROTO);
	cr_assert_eq(r2cc_recvlog_complete(log, 6), 0);
	cr_assert_eq(r2cc_recvlog_complete(log, 5), 0);
	cr_assert_eq(r2cc_recvlog_complete(log, 5), -ENOENT);
	cr_assert_eq(stats(log).completed, 3);
	r2cc_recvlog_free(log);
}

/*
 * A log of 6 receives (wr_ids 0..5), @done of them completed, fenced at
 * @consumed: the oldest consumed - done stay pending, the rest re-post.
 */
struct split_case {
	uint32_t done;
	uint64_t consumed;
	int ret;
	uint32_t npending;
	uint32_t nrepost;
};

/* done, consumed, return, pending, re-posted */
static const struct split_case split_cases[] = {
	{ 0, 0, 0, 0, 6 }, /* nothing consumed: all re-post */
	{ 0, 1, 0, 1, 5 },
	{ 0, 2, 0, 2, 4 },
	{ 0, 3, 0, 3, 3 },
	{ 0, 4, 0, 4, 2 },
	{ 0, 5, 0, 5, 1 },
	{ 0, 6, 0, 6, 0 }, /* all consumed: nothing to re-post */
	{ 0, 7, -ERANGE }, /* more than was ever posted */
	{ 2, 1, -ERANGE }, /* fewer than already completed */
	{ 2, 2, 0, 0, 4 }, /* exactly the completed ones */
	{ 2, 3, 0, 1, 3 },
	{ 2, 4, 0, 2, 2 },
	{ 2, 5, 0, 3, 1 },
	{ 2, 6, 0, 4, 0 },
	{ 2, 7, -ERANGE },
	{ 6, 5, -ERANGE },
	{ 6, 6, 0, 0, 0 }, /* an empty log */
	{ 6, 7, -ERANGE },
	{ 2, UINT64_MAX, -ERANGE },
};

ParameterizedTestParameters(recvlog, split_table)
{
	return cr_make_param_array(struct split_case,
				   (struct split_case *)split_cases,
				   ARRAY_SIZE(split_cases));
}

ParameterizedTest(struct split_case *c, recvlog, split_table, .timeout = 5)
{
	struct r2cc_recvlog *log = r2cc_recvlog_new(8, 2);
	struct r2cc_recv_replay res = { .nrepost = 77 };
	struct r2cc_recvlog_stats st;
	uint32_t i;

	for (i = 0; i < 6; i++)
		cr_assert_eq(post(log, i), 0);
	for (i = 0; i < c->done; i++)
		cr_assert_eq(r2cc_recvlog_complete(log, i), 0);
	cr_assert_eq(r2cc_recvlog_fence(log, c->consumed, &res), c->ret,
		     "done %u consumed %lu", c->done,
		     (unsigned long)c->consumed);
	st = stats(log);
	if (c->ret) {
		cr_assert_eq(res.nrepost, 77, "res untouched on error");
		cr_assert_eq(st.fences, 0);
		cr_assert_eq(st.pending, 0);
		if (st.outstanding)
			cr_assert_eq(ent(log, 0)->epoch, 0);
		r2cc_recvlog_free(log);
		return;
	}
	cr_assert_eq(res.npending, c->npending);
	check_list(&res, c->done + c->npending, c->nrepost);
	cr_assert_eq(st.pending, c->npending);
	cr_assert_eq(st.reposted, c->nrepost);
	cr_assert_eq(st.fences, 1);
	cr_assert_eq(st.outstanding, 6 - c->done);
	for (i = 0; i < st.outstanding; i++) {
		const struct r2cc_recvlog_ent *e = ent(log, i);

		cr_assert_eq(e->epoch, i < c->npending ? 0 : 1,
			     "entry %u owed by the right incarnation", i);
		if (i < c->npending)
			cr_assert_null(e->wr.next);
	}
	/* Every entry still retires in posting order */
	for (i = c->done; i < 6; i++)
		cr_assert_eq(r2cc_recvlog_complete(log, i), 0);
	st = stats(log);
	cr_assert_eq(st.pending, 0);
	cr_assert_eq(st.outstanding, 0);
	r2cc_recvlog_free(log);
}

/*
 * The order argument of mig_logs.h on one fence: the old QP's successes
 * for consumed receives (already in its CQ) retire first, its flushes for
 * the others are dropped, then the backup completes the re-posted ones
 * and the program's newer receives.
 */
Test(recvlog, one_fence_old_successes_then_backup, .timeout = 5)
{
	struct r2cc_recvlog *log = r2cc_recvlog_new(7, 2);
	struct r2cc_recv_replay res;
	struct r2cc_recvlog_stats st;

	for (uint64_t i = 0; i < 6; i++)
		post(log, i);
	cr_assert_eq(r2cc_recvlog_complete(log, 0), 0);
	/* The peer executed 3 SENDs: 1 and 2 are in the old CQ, unpolled */
	cr_assert_eq(r2cc_recvlog_fence(log, 3, &res), 0);
	cr_assert_eq(res.npending, 2);
	check_list(&res, 3, 3);
	/* The list borrows the log's copies */
	cr_assert_eq(res.first, &ent(log, 2)->wr);
	cr_assert_eq(res.first->sg_list, ent(log, 2)->wr.sg_list);
	/* The program posts two more; they go to the backup after the list */
	cr_assert_eq(post(log, 6), 0);
	cr_assert_eq(post(log, 7), 0);
	cr_assert_eq(ent(log, 5)->epoch, 1);
	cr_assert_eq(ent(log, 6)->epoch, 1);
	cr_assert_null(ent(log, 4)->wr.next, "appends are not on the list");
	/* Pending entries hold slots: one more grows the log, and the
	 * pending count and each entry's epoch survive the copy */
	cr_assert_eq(post(log, 8), 1);
	cr_assert_eq(stats(log).pending, 2);
	cr_assert_eq(ent(log, 0)->epoch, 0);
	cr_assert_eq(ent(log, 2)->epoch, 1);
	cr_assert_eq(ent(log, 7)->wr.wr_id, 8);
	cr_assert_eq(ent(log, 7)->epoch, 1);
	/* Polled from the old CQ: successes 1, 2 (then flushes 3..5: dropped) */
	cr_assert_eq(ent(log, 0)->epoch, 0, "1 is owed by the old QP");
	cr_assert_eq(r2cc_recvlog_complete(log, 1), 0);
	cr_assert_eq(r2cc_recvlog_complete(log, 2), 0);
	cr_assert_eq(stats(log).pending, 0);
	cr_assert_eq(ent(log, 0)->epoch, 1, "3 is owed by the backup");
	cr_assert_eq(r2cc_recvlog_complete(log, 4), -EPROTO);
	for (uint64_t i = 3; i < 9; i++)
		cr_assert_eq(r2cc_recvlog_complete(log, i), 0, "wr %lu",
			     (unsigned long)i);
	st = stats(log);
	cr_assert_eq(st.posted, 9);
	cr_assert_eq(st.completed, 9);
	cr_assert_eq(st.reposted, 3);
	cr_assert_eq(st.fences, 1);
	cr_assert_eq(st.outstanding, 0);
	r2cc_recvlog_free(log);
}

/*
 * Failing over again from the backup while the first fence's pending
 * successes are still unpolled: one sequence, consumed a running total.
 */
Test(recvlog, two_fences_are_one_sequence, .timeout = 5)
{
	struct r2cc_recvlog *log = r2cc_recvlog_new(8, 2);
	struct r2cc_recv_replay res;
	struct r2cc_recvlog_stats st;

	for (uint64_t i = 0; i < 5; i++)
		post(log, i); /* on QP 0 */
	cr_assert_eq(r2cc_recvlog_fence(log, 2, &res), 0);
	check_list(&res, 2, 3); /* 2..4 re-posted on backup 1 */
	post(log, 5); /* on backup 1 */
	post(log, 6);
	cr_assert_eq(r2cc_recvlog_complete(log, 0), 0, "from QP 0's CQ");
	/* Backup 1 dies; its peer had executed 4 SENDs in all (2 on it) */
	cr_assert_eq(r2cc_recvlog_fence(log, 1, &res), -ERANGE,
		     "below completed + pending: 1 is known consumed");
	cr_assert_eq(r2cc_recvlog_fence(log, 8, &res), -ERANGE);
	cr_assert_eq(r2cc_recvlog_fence(log, 4, &res), 0);
	cr_assert_eq(res.npending, 3, "1 on QP 0, 2 and 3 on backup 1");
	check_list(&res, 4, 3); /* 4..6 re-posted on backup 2 */
	post(log, 7); /* on backup 2 */
	cr_assert_eq(ent(log, 0)->epoch, 0);
	cr_assert_eq(ent(log, 1)->epoch, 1);
	cr_assert_eq(ent(log, 2)->epoch, 1);
	cr_assert_null(ent(log, 1)->wr.next, "2 left backup 1's list");
	for (uint32_t i = 3; i < 7; i++)
		cr_assert_eq(ent(log, i)->epoch, 2, "entry %u", i);
	for (uint64_t i = 1; i < 8; i++)
		cr_assert_eq(r2cc_recvlog_complete(log, i), 0, "wr %lu",
			     (unsigned long)i);
	st = stats(log);
	cr_assert_eq(st.posted, 8);
	cr_assert_eq(st.completed, 8);
	cr_assert_eq(st.reposted, 6, "4 went over twice");
	cr_assert_eq(st.fences, 2);
	cr_assert_eq(st.pending, 0);
	r2cc_recvlog_free(log);
}

/* Programs often post every receive with one wr_id: epochs tell them apart */
Test(recvlog, repeated_wr_ids_keep_their_owner, .timeout = 5)
{
	struct r2cc_recvlog *log = r2cc_recvlog_new(4, 2);
	struct r2cc_recv_replay res;

	for (int i = 0; i < 4; i++)
		post(log, 0);
	cr_assert_eq(r2cc_recvlog_fence(log, 1, &res), 0);
	cr_assert_eq(res.nrepost, 3);
	cr_assert_eq(ent(log, 0)->epoch, 0);
	cr_assert_eq(r2cc_recvlog_complete(log, 0), 0);
	cr_assert_eq(ent(log, 0)->epoch, 1);
	cr_assert_eq(stats(log).pending, 0);
	r2cc_recvlog_free(log);
}

Test(recvlog, fence_of_an_empty_log, .timeout = 5)
{
	struct r2cc_recvlog *log = r2cc_recvlog_new(2, 1);
	struct r2cc_recv_replay res = { .first = (void *)1 };

	cr_assert_eq(r2cc_recvlog_fence(log, 1, &res), -ERANGE);
	cr_assert_eq(r2cc_recvlog_fence(log, 0, &res), 0);
	cr_assert_null(res.first);
	cr_assert_eq(res.nrepost, 0);
	cr_assert_eq(res.npending, 0);
	cr_assert_eq(r2cc_recvlog_fence(log, 0, &res), 0, "and again");
	cr_assert_eq(stats(log).fences, 2);
	r2cc_recvlog_free(log);
}

/*
 * Many fences over a wrapping ring: a model of the peer consuming some
 * receives on each incarnation. Completions always retire in order.
 */
Test(recvlog, fences_over_a_wrapping_ring, .timeout = 5)
{
	struct r2cc_recvlog *log = r2cc_recvlog_new(5, 2);
	struct r2cc_recv_replay res;
	uint64_t next = 0, done = 0, consumed = 0, reposted = 0;
	struct r2cc_recvlog_stats st;

	for (int round = 0; round < 50; round++) {
		/* full, not past it: the ring wraps instead of growing */
		while (stats(log).outstanding < 5)
			cr_assert_eq(post(log, next++), 0);
		/* the peer consumes up to 3 more; the program polls 0..2 */
		consumed += (uint64_t)(round % 4) > next - consumed ?
				    next - consumed :
				    (uint64_t)(round % 4);
		cr_assert_eq(r2cc_recvlog_fence(log, consumed, &res), 0);
		cr_assert_eq(res.npending, consumed - done);
		check_list(&res, consumed, (uint32_t)(next - consumed));
		reposted += next - consumed;
		for (int k = 0; k < round % 3 && done < consumed; k++)
			cr_assert_eq(r2cc_recvlog_complete(log, done++), 0);
	}
	st = stats(log);
	cr_assert_eq(st.posted, next);
	cr_assert_eq(st.completed, done);
	cr_assert_eq(st.reposted, reposted);
	cr_assert_eq(st.fences, 50);
	r2cc_recvlog_free(log);
}
