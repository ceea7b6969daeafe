/* SPDX-License-Identifier: MIT */
/*
 * test_wcstash.c - the per-CQ completion stash: order, all-or-nothing
 * push, the lock-free emptiness check, and a pusher and a popper thread.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "migrate.h"

static struct ibv_wc wc_of(uint64_t wr_id)
{
	return (struct ibv_wc){
		.wr_id = wr_id,
		.status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV,
		.byte_len = (uint32_t)wr_id * 3,
		.qp_num = 0x123,
		.imm_data = (uint32_t)~wr_id,
	};
}

static void fill(struct ibv_wc *wc, uint64_t from, int n)
{
	for (int i = 0; i < n; i++)
		wc[i] = wc_of(from + (uint64_t)i);
}

static void check(const struct ibv_wc *wc, uint64_t from, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_wc want = wc_of(from + (uint64_t)i);

		cr_assert_eq(wc[i].wr_id, want.wr_id, "[%d]: %lu, want %lu", i,
			     (unsigned long)wc[i].wr_id,
			     (unsigned long)want.wr_id);
		cr_assert_eq(wc[i].byte_len, want.byte_len);
		cr_assert_eq(wc[i].imm_data, want.imm_data);
		cr_assert_eq(wc[i].qp_num, 0x123);
	}
}

Test(wcstash, new_rejects_bad_args_free_null_is_noop, .timeout = 5)
{
	errno = 0;
	cr_assert_null(r2cc_wcstash_new(0));
	cr_assert_eq(errno, EINVAL);
	errno = 0;
	cr_assert_null(r2cc_wcstash_new(1U << 25));
	cr_assert_eq(errno, EINVAL);
	r2cc_wcstash_free(NULL);
}

Test(wcstash, pop_returns_oldest_first, .timeout = 5)
{
	struct r2cc_wcstash *st = r2cc_wcstash_new(8);
	struct ibv_wc in[5], out[8];

	memset(out, 0, sizeof(out));
	cr_assert(r2cc_wcstash_empty(st));
	cr_assert_eq(r2cc_wcstash_pop(st, out, 8), 0);
	fill(in, 10, 5);
	cr_assert_eq(r2cc_wcstash_push(st, in, 3), 0);
	cr_assert_eq(r2cc_wcstash_push(st, in + 3, 2), 0);
	memset(in, 0, sizeof(in)); /* the stash holds copies */
	cr_assert_not(r2cc_wcstash_empty(st));
	cr_assert_eq(r2cc_wcstash_pushed(st), 5);
	cr_assert_eq(r2cc_wcstash_pop(st, out, 2), 2);
	check(out, 10, 2);
	cr_assert_eq(r2cc_wcstash_pop(st, out, 8), 3);
	check(out, 12, 3);
	cr_assert(r2cc_wcstash_empty(st));
	cr_assert_eq(r2cc_wcstash_pop(st, out, 8), 0);
	cr_assert_eq(r2cc_wcstash_pushed(st), 5, "pops do not move it");
	r2cc_wcstash_free(st);
}

Test(wcstash, push_is_all_or_nothing, .timeout = 5)
{
	struct r2cc_wcstash *st = r2cc_wcstash_new(4);
	struct ibv_wc in[5], out[4];

	fill(in, 0, 5);
	cr_assert_eq(r2cc_wcstash_push(st, in, 5), -ENOSPC);
	cr_assert(r2cc_wcstash_empty(st), "nothing of a refused push");
	cr_assert_eq(r2cc_wcstash_push(st, in, 3), 0);
	cr_assert_eq(r2cc_wcstash_push(st, in + 3, 2), -ENOSPC);
	cr_assert_eq(r2cc_wcstash_pushed(st), 3);
	cr_assert_eq(r2cc_wcstash_push(st, in + 3, 1), 0);
	cr_assert_eq(r2cc_wcstash_push(st, in + 4, 1), -ENOSPC);
	cr_assert_eq(r2cc_wcstash_push(st, in, -1), -EINVAL);
	cr_assert_eq(r2cc_wcstash_push(st, in, 0), 0, "0 fits even when full");
	cr_assert_eq(r2cc_wcstash_pop(st, out, 0), 0);
	cr_assert_eq(r2cc_wcstash_pop(st, out, -3), 0);
	cr_assert_eq(r2cc_wcstash_pop(st, out, 4), 4);
	check(out, 0, 4);
	r2cc_wcstash_free(st);
}

/* Pushes and pops that straddle the end of the ring keep their order */
Test(wcstash, ring_wraps_in_order, .timeout = 5)
{
	struct r2cc_wcstash *st = r2cc_wcstash_new(5);
	struct ibv_wc in[5], out[5];
	uint64_t pushed = 0, popped = 0;

	for (int round = 0; round < 40; round++) {
		int n = 1 + round % 5, m = 1 + (round * 3) % 5, got;

		fill(in, pushed, n);
		if (r2cc_wcstash_push(st, in, n) == 0)
			pushed += (uint64_t)n;
		got = r2cc_wcstash_pop(st, out, m);
		cr_assert_leq(got, m);
		check(out, popped, got);
		popped += (uint64_t)got;
	}
	while ((size_t)r2cc_wcstash_pop(st, out, 1) == 1)
		check(out, popped++, 1);
	cr_assert_eq(popped, pushed);
	cr_assert_gt(pushed, 40, "the rounds must push a lot");
	r2cc_wcstash_free(st);
}

#define NTHREAD_WC 100000

static void *pusher(void *arg)
{
	struct r2cc_wcstash *st = arg;
	struct ibv_wc in[7];
	unsigned int spins = 0;
	uint64_t next = 0;

	while (next < NTHREAD_WC) {
		int n = 1 + (int)(next % 7);

		if (next + (uint64_t)n > NTHREAD_WC)
			n = (int)(NTHREAD_WC - next);
		fill(in, next, n);
		if (r2cc_wcstash_push(st, in, n) == 0)
			next += (uint64_t)n;
		else if (++spins % 256 == 0)
			sched_yield();
	}
	return NULL;
}

/* The control thread pushes, the program's thread polls: once, in order */
Test(wcstash, two_threads_deliver_each_once_in_order, .timeout = 30)
{
	struct r2cc_wcstash *st = r2cc_wcstash_new(16);
	struct ibv_wc out[5];
	uint64_t popped = 0;
	unsigned int spins = 0;
	pthread_t t;

	cr_assert_eq(pthread_create(&t, NULL, pusher, st), 0);
	while (popped < NTHREAD_WC) {
		int got;

		/* Spin a little first: the threads should overlap */
		if (r2cc_wcstash_empty(st)) {
			if (++spins % 256 == 0)
				sched_yield();
			continue;
		}
		got = r2cc_wcstash_pop(st, out, 1 + (int)(popped % 5));
		cr_assert_gt(got, 0, "not empty, yet nothing popped");
		for (int i = 0; i < got; i++)
			if (out[i].wr_id != popped + (uint64_t)i ||
			    out[i].imm_data != (uint32_t)~out[i].wr_id)
				cr_assert_fail(
					"got %lu, want %lu",
					(unsigned long)out[i].wr_id,
					(unsigned long)(popped + (uint64_t)i));
		popped += (uint64_t)got;
	}
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert(r2cc_wcstash_empty(st));
	cr_assert_eq(r2cc_wcstash_pop(st, out, 5), 0, "nothing extra");
	cr_assert_eq(r2cc_wcstash_pushed(st), NTHREAD_WC);
	r2cc_wcstash_free(st);
}

struct locked_call {
	struct r2cc_wcstash *st;
	bool push; /* else pop */
	int ret;
};

static void *call(void *arg)
{
	struct locked_call *c = arg;
	struct ibv_wc wc[2];

	fill(wc, 40, 2);
	if (c->push)
		c->ret = r2cc_wcstash_push(c->st, wc, 2);
	else
		c->ret = r2cc_wcstash_pop(c->st, wc, 2);
	return NULL;
}

/* White box: push and pop wait for the lock (the struct is in the header) */
Test(wcstash, push_and_pop_take_the_lock, .timeout = 5)
{
	struct r2cc_wcstash *st = r2cc_wcstash_new(4);
	struct locked_call c = { .st = st };
	struct timespec ms50 = { 0, 50 * 1000 * 1000 };
	struct ibv_wc wc[2];
	pthread_t t;

	for (int i = 0; i < 2; i++) {
		c.push = !i;
		c.ret = -1;
		pthread_mutex_lock(&st->lock);
		cr_assert_eq(pthread_create(&t, NULL, call, &c), 0);
		nanosleep(&ms50, NULL);
		cr_assert_eq(c.ret, -1, "%s ran under the lock",
			     c.push ? "push" : "pop");
		cr_assert_eq(r2cc_wcstash_empty(st), c.push);
		pthread_mutex_unlock(&st->lock);
		cr_assert_eq(pthread_join(t, NULL), 0);
		cr_assert_eq(c.ret, c.push ? 0 : 2);
	}
	cr_assert(r2cc_wcstash_empty(st));
	cr_assert_eq(r2cc_wcstash_pop(st, wc, 2), 0);
	r2cc_wcstash_free(st);
}
