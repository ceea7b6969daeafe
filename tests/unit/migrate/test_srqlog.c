/* SPDX-License-Identifier: MIT */
/*
 * test_srqlog.c - the SRQ receive log: copies, retirement in any order by
 * wr_id, growth past the first size, and the split of a move (consumed
 * oldest kept, the rest re-posted in posting order, unposted ones last).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "migrate.h"

static char mem[1 << 12];

static int post(struct r2cc_srqlog *log, uint64_t wr_id, bool posted)
{
	struct ibv_sge sge[2] = {
		{ (uintptr_t)mem + (wr_id % 32) * 64, 48,
		  0x10 + (uint32_t)wr_id },
		{ (uintptr_t)mem + (wr_id % 32) * 64 + 48, 16, 0x20 },
	};
	struct ibv_recv_wr wr = { .wr_id = wr_id,
				  .sg_list = sge,
				  .num_sge = 2 };
	int ret = r2cc_srqlog_append(log, &wr, posted);

	/* The caller's SGEs may change once it returns. */
	memset(sge, 0xee, sizeof(sge));
	return ret;
}

static struct r2cc_srqlog_stats stats(struct r2cc_srqlog *log)
{
	struct r2cc_srqlog_stats st;

	r2cc_srqlog_get_stats(log, &st);
	return st;
}

/* The list holds exactly @ids, in order, each with its own SGEs. */
static void check_list(const struct r2cc_recv_replay *res, const uint64_t *ids,
		       uint32_t n)
{
	const struct ibv_recv_wr *w = res->first;
	uint32_t i;

	cr_assert_eq(res->nrepost, n, "%u re-posted, want %u", res->nrepost, n);
	for (i = 0; i < n; i++, w = w->next) {
		cr_assert_not_null(w, "list ends after %u of %u", i, n);
		cr_assert_eq(w->wr_id, ids[i], "entry %u: %llu, want %llu", i,
			     (unsigned long long)w->wr_id,
			     (unsigned long long)ids[i]);
		cr_assert_eq(w->num_sge, 2);
		cr_assert_eq(w->sg_list[0].lkey, 0x10 + (uint32_t)ids[i]);
		cr_assert_eq(w->sg_list[0].addr,
			     (uintptr_t)mem + (ids[i] % 32) * 64);
		cr_assert_eq(w->sg_list[1].length, 16);
	}
	cr_assert_null(w, "list longer than %u", n);
}

Test(srqlog, retires_in_any_order_and_splits_the_rest_in_order)
{
	struct r2cc_srqlog *log = r2cc_srqlog_new(16, 2);
	struct r2cc_recv_replay res;
	uint64_t i;

	cr_assert_not_null(log);
	for (i = 0; i < 10; i++)
		cr_assert_eq(post(log, i, true), 0);
	/* QPs complete 2, 0, 5 and 4 (their own CQs, any order) */
	cr_assert_eq(r2cc_srqlog_retire(log, 2), 0);
	cr_assert_eq(r2cc_srqlog_retire(log, 0), 0);
	cr_assert_eq(r2cc_srqlog_retire(log, 5), 0);
	cr_assert_eq(r2cc_srqlog_retire(log, 4), 0);
	cr_assert_eq(r2cc_srqlog_retire(log, 4), -ENOENT);
	cr_assert_eq(stats(log).live, 6);
	/* Consumed and not polled: 1 and 3 were handed out, the oldest
	 * live ones; 1 stays pending, the rest moves. */
	cr_assert_eq(r2cc_srqlog_split(log, 1, &res), 0);
	check_list(&res, (const uint64_t[]){ 3, 6, 7, 8, 9 }, 5);
	cr_assert_eq(res.npending, 1);
	/* 1's success comes later; the re-posted ones complete after. */
	cr_assert_eq(r2cc_srqlog_retire(log, 1), 0);
	cr_assert_eq(r2cc_srqlog_retire(log, 7), 0);
	cr_assert_eq(stats(log).live, 4);
	cr_assert_eq(stats(log).completed, 6);
	r2cc_srqlog_free(log);
}

Test(srqlog, unposted_ones_go_last_and_never_retire)
{
	struct r2cc_srqlog *log = r2cc_srqlog_new(4, 2);
	struct r2cc_recv_replay res;

	cr_assert_not_null(log);
	cr_assert_eq(post(log, 1, true), 0);
	cr_assert_eq(post(log, 2, true), 0);
	cr_assert_eq(post(log, 3, false), 0); /* while the SRQ moves */
	cr_assert_eq(post(log, 4, false), 0);
	cr_assert_eq(stats(log).unposted, 2);
	/* A completion cannot name a WR no queue holds. */
	cr_assert_eq(r2cc_srqlog_retire(log, 3), -ENOENT);
	/* More consumed than posted: refused, the log unchanged. */
	cr_assert_eq(r2cc_srqlog_split(log, 3, &res), -ERANGE);
	cr_assert_eq(stats(log).unposted, 2);
	cr_assert_eq(r2cc_srqlog_split(log, 2, &res), 0);
	check_list(&res, (const uint64_t[]){ 3, 4 }, 2);
	/* Until the list is on a queue, a failed move still finds them. */
	cr_assert_eq(stats(log).unposted, 2);
	r2cc_srqlog_unposted(log, &res);
	check_list(&res, (const uint64_t[]){ 3, 4 }, 2);
	r2cc_srqlog_free(log);
}

Test(srqlog, posted_after_the_split_makes_them_ordinary)
{
	struct r2cc_srqlog *log = r2cc_srqlog_new(4, 2);
	struct r2cc_recv_replay res;

	cr_assert_not_null(log);
	cr_assert_eq(post(log, 1, true), 0);
	cr_assert_eq(post(log, 2, false), 0);
	cr_assert_eq(r2cc_srqlog_split(log, 0, &res), 0);
	check_list(&res, (const uint64_t[]){ 1, 2 }, 2);
	r2cc_srqlog_posted(log);
	cr_assert_eq(stats(log).unposted, 0);
	cr_assert_eq(r2cc_srqlog_retire(log, 2), 0);
	r2cc_srqlog_free(log);
}

Test(srqlog, abandoned_move_gives_back_the_unposted)
{
	struct r2cc_srqlog *log = r2cc_srqlog_new(4, 2);
	struct r2cc_recv_replay res;

	cr_assert_not_null(log);
	cr_assert_eq(post(log, 1, true), 0);
	cr_assert_eq(post(log, 2, false), 0);
	cr_assert_eq(post(log, 3, false), 0);
	r2cc_srqlog_unposted(log, &res);
	check_list(&res, (const uint64_t[]){ 2, 3 }, 2);
	cr_assert_eq(stats(log).unposted, 0);
	cr_assert_eq(r2cc_srqlog_retire(log, 3), 0); /* posted now */
	r2cc_srqlog_free(log);
}

Test(srqlog, grows_and_keeps_order_across_the_wrap)
{
	struct r2cc_srqlog *log = r2cc_srqlog_new(4, 2);
	struct r2cc_recv_replay res;
	uint64_t ids[40], i;
	uint32_t n = 0;

	cr_assert_not_null(log);
	/* Wrap the first ring, then overfill it: consumed ones linger. */
	for (i = 0; i < 3; i++)
		cr_assert_eq(post(log, i, true), 0);
	for (i = 0; i < 3; i++)
		cr_assert_eq(r2cc_srqlog_retire(log, i), 0);
	for (i = 3; i < 40; i++)
		cr_assert_eq(post(log, i, true), 0);
	cr_assert_eq(stats(log).live, 37);
	/* Retire every third; repeated wr_ids retire the oldest. */
	for (i = 3; i < 40; i += 3)
		cr_assert_eq(r2cc_srqlog_retire(log, i), 0);
	cr_assert_eq(r2cc_srqlog_split(log, 2, &res), 0);
	for (i = 3; i < 40; i++)
		if (i % 3)
			ids[n++] = i;
	check_list(&res, ids + 2, n - 2);
	r2cc_srqlog_free(log);
}

Test(srqlog, repeated_wr_ids_retire_the_oldest)
{
	struct r2cc_srqlog *log = r2cc_srqlog_new(8, 2);
	struct r2cc_recv_replay res;
	struct ibv_sge sge = { (uintptr_t)mem, 8, 0x77 };
	struct ibv_recv_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1 };
	int i;

	cr_assert_not_null(log);
	for (i = 0; i < 3; i++) {
		sge.addr = (uintptr_t)mem + (uint64_t)i * 8;
		cr_assert_eq(r2cc_srqlog_append(log, &wr, true), 0);
	}
	cr_assert_eq(r2cc_srqlog_retire(log, 9), 0);
	cr_assert_eq(r2cc_srqlog_split(log, 0, &res), 0);
	cr_assert_eq(res.nrepost, 2);
	cr_assert_eq(res.first->sg_list[0].addr, (uintptr_t)mem + 8);
	cr_assert_eq(res.first->next->sg_list[0].addr, (uintptr_t)mem + 16);
	wr.num_sge = 3; /* more than max_sge */
	cr_assert_eq(r2cc_srqlog_append(log, &wr, true), -EINVAL);
	r2cc_srqlog_free(log);
}
