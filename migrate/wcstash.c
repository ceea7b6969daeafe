/* SPDX-License-Identifier: MIT */
/*
 * wcstash.c - the per-CQ stash of completions r2cc synthesises or holds
 * back: a bounded ring under a mutex, with a count the poll path can read
 * without the lock to skip an empty stash.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "migrate.h"

/* More completions than any CQ holds; keeps counts within an int */
#define MAX_CAP (1U << 24)

struct r2cc_wcstash *r2cc_wcstash_new(uint32_t cap)
{
	struct r2cc_wcstash *st;
	int ret;

	if (!cap || cap > MAX_CAP) {
		errno = EINVAL;
		return NULL;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->wc = calloc(cap, sizeof(*st->wc));
	if (!st->wc)
		goto err_free;
	ret = pthread_mutex_init(&st->lock, NULL);
	if (ret) {
		free(st->wc);
		errno = ret;
		goto err_free;
	}
	st->cap = cap;
	atomic_init(&st->count, 0);
	atomic_init(&st->pushed, 0);
	return st;

err_free:
	free(st);
	return NULL;
}

void r2cc_wcstash_free(struct r2cc_wcstash *st)
{
	if (!st)
		return;
	pthread_mutex_destroy(&st->lock);
	free(st->wc);
	free(st);
}

/* Slot @s, reduced into the ring (@s < 2 * cap) */
static uint32_t wrap(const struct r2cc_wcstash *st, uint32_t s)
{
	return s >= st->cap ? s - st->cap : s;
}

int r2cc_wcstash_push(struct r2cc_wcstash *st, const struct ibv_wc *wc, int n)
{
	uint32_t count, s, first;

	if (n < 0)
		return -EINVAL;
	if (!n)
		return 0;
	pthread_mutex_lock(&st->lock);
	/* Only writers, all under the lock: relaxed reads are current */
	count = atomic_load_explicit(&st->count, memory_order_relaxed);
	if ((uint32_t)n > st->cap - count) {
		pthread_mutex_unlock(&st->lock);
		return -ENOSPC;
	}
	s = wrap(st, st->head + count);
	first = st->cap - s < (uint32_t)n ? st->cap - s : (uint32_t)n;
	memcpy(&st->wc[s], wc, first * sizeof(*wc));
	memcpy(st->wc, wc + first, ((uint32_t)n - first) * sizeof(*wc));
	/*
	 * Release: a poll path that sees the new count (r2cc_wcstash_empty())
	 * also sees what the caller wrote before pushing.
	 */
	atomic_store_explicit(&st->count, count + (uint32_t)n,
			      memory_order_release);
	atomic_fetch_add_explicit(&st->pushed, (uint64_t)n,
				  memory_order_release);
	pthread_mutex_unlock(&st->lock);
	return 0;
}

int r2cc_wcstash_pop(struct r2cc_wcstash *st, struct ibv_wc *out, int n)
{
	uint32_t count, take, first;

	if (n <= 0 || r2cc_wcstash_empty(st))
		return 0;
	pthread_mutex_lock(&st->lock);
	count = atomic_load_explicit(&st->count, memory_order_relaxed);
	take = count < (uint32_t)n ? count : (uint32_t)n;
	first = st->cap - st->head < take ? st->cap - st->head : take;
	memcpy(out, &st->wc[st->head], first * sizeof(*out));
	memcpy(out + first, st->wc, (take - first) * sizeof(*out));
	st->head = wrap(st, st->head + take);
	atomic_store_explicit(&st->count, count - take, memory_order_release);
	pthread_mutex_unlock(&st->lock);
	return (int)take;
}
