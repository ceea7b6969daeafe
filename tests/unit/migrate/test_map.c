/* SPDX-License-Identifier: MIT */
/*
 * test_map.c - the hash map under the shim's registry and the peer keys:
 * insert, lookup, remove, growth, tombstones purged in place, and lookups
 * racing with writers on other threads.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "map.h"

static int retired(const struct r2cc_map *m)
{
	const struct r2cc_map_table *t;
	int n = 0;

	for (t = m->retired; t; t = t->next_retired)
		n++;
	return n;
}

#define KEY(i) ((uintptr_t)0x10000 + (uintptr_t)(i)*16)

Test(map, insert_lookup_remove, .timeout = 5)
{
	struct r2cc_map m;
	int a, b;

	cr_assert_eq(r2cc_map_init(&m), 0);
	cr_assert_null(r2cc_map_lookup(&m, KEY(1)));
	cr_assert_eq(r2cc_map_insert(&m, KEY(1), &a), 0);
	cr_assert_eq(r2cc_map_insert(&m, KEY(2), &b), 0);
	cr_assert_eq(r2cc_map_lookup(&m, KEY(1)), &a);
	cr_assert_eq(r2cc_map_lookup(&m, KEY(2)), &b);
	cr_assert_eq(r2cc_map_insert(&m, KEY(1), &b), 0); /* replace */
	cr_assert_eq(r2cc_map_lookup(&m, KEY(1)), &b);
	cr_assert_eq(r2cc_map_remove(&m, KEY(1)), &b);
	cr_assert_null(r2cc_map_lookup(&m, KEY(1)));
	cr_assert_null(r2cc_map_remove(&m, KEY(1)));
	cr_assert_eq(r2cc_map_lookup(&m, KEY(2)), &b);
	cr_assert_eq(m.count, 1);
	r2cc_map_destroy(&m);
}

Test(map, rejects_reserved_keys_and_null, .timeout = 5)
{
	struct r2cc_map m;
	int a;

	cr_assert_eq(r2cc_map_init(&m), 0);
	cr_assert_eq(r2cc_map_insert(&m, 0, &a), -EINVAL);
	cr_assert_eq(r2cc_map_insert(&m, 1, &a), -EINVAL);
	cr_assert_eq(r2cc_map_insert(&m, KEY(3), NULL), -EINVAL);
	cr_assert_null(r2cc_map_lookup(&m, 0));
	cr_assert_null(r2cc_map_remove(&m, 1));
	r2cc_map_destroy(&m);
}

static void count_fn(void *val, void *arg)
{
	(void)val;
	(*(int *)arg)++;
}

Test(map, grows_and_reuses_tombstones, .timeout = 10)
{
	static int vals[20000];
	struct r2cc_map m;
	int i, n = 0, grown;

	cr_assert_eq(r2cc_map_init(&m), 0);
	for (i = 0; i < 20000; i++)
		cr_assert_eq(r2cc_map_insert(&m, KEY(i), &vals[i]), 0);
	for (i = 0; i < 20000; i += 2)
		cr_assert_eq(r2cc_map_remove(&m, KEY(i)), &vals[i]);
	grown = retired(&m);
	/* Churn: many removes and inserts must not fill the table, nor
	 * leave tables behind (the tombstones are purged in place). */
	for (i = 0; i < 200000; i++) {
		cr_assert_eq(r2cc_map_insert(&m, KEY(100000 + i), &vals[0]), 0);
		cr_assert_eq(r2cc_map_remove(&m, KEY(100000 + i)), &vals[0]);
	}
	cr_assert_gt(atomic_load(&m.seq), 0, "no purge in the churn");
	cr_assert_eq(atomic_load(&m.seq) % 2, 0);
	cr_assert_eq(retired(&m), grown, "%d tables retired by the churn",
		     retired(&m) - grown);
	for (i = 0; i < 20000; i++)
		cr_assert_eq(r2cc_map_lookup(&m, KEY(i)),
			     i % 2 ? &vals[i] : NULL, "key %d", i);
	r2cc_map_for_each(&m, count_fn, &n);
	cr_assert_eq(n, 10000);
	r2cc_map_destroy(&m);
}

/* Writers insert and remove their own keys while readers look up a set
 * of stable keys: every stable lookup must find its value. */
#define STABLE 512
#define WRITERS 3
#define READERS 3
static struct r2cc_map cm;
static int stable_val[STABLE];
static _Atomic int stop;

static void *writer(void *arg)
{
	uintptr_t base = 1000000 + (uintptr_t)arg * 100000;
	int v, i, r;

	for (r = 0; r < 40; r++) {
		/* fresh keys each round: tombstones pile up, purges */
		for (i = 0; i < 2000; i++)
			if (r2cc_map_insert(&cm, KEY(base + r * 2000 + i), &v))
				return (void *)1;
		for (i = 0; i < 2000; i++)
			if (r2cc_map_remove(&cm, KEY(base + r * 2000 + i)) !=
			    &v)
				return (void *)2;
	}
	return NULL;
}

static void *reader(void *arg)
{
	long misses = 0;
	int i;

	(void)arg;
	while (!atomic_load(&stop))
		for (i = 0; i < STABLE; i++)
			if (r2cc_map_lookup(&cm, KEY(i)) != &stable_val[i])
				misses++;
	return (void *)misses;
}

Test(map, concurrent_lookups_see_stable_keys, .timeout = 60)
{
	pthread_t w[WRITERS], r[READERS];
	void *ret;
	long i;

	cr_assert_eq(r2cc_map_init(&cm), 0);
	for (i = 0; i < STABLE; i++)
		cr_assert_eq(r2cc_map_insert(&cm, KEY(i), &stable_val[i]), 0);
	for (i = 0; i < READERS; i++)
		pthread_create(&r[i], NULL, reader, NULL);
	for (i = 0; i < WRITERS; i++)
		pthread_create(&w[i], NULL, writer, (void *)i);
	for (i = 0; i < WRITERS; i++) {
		pthread_join(w[i], &ret);
		cr_expect_null(ret, "writer %ld failed (%p)", i, ret);
	}
	atomic_store(&stop, 1);
	for (i = 0; i < READERS; i++) {
		pthread_join(r[i], &ret);
		cr_expect_eq((long)ret, 0, "reader %ld missed %ld lookups", i,
			     (long)ret);
	}
	cr_assert_eq(cm.count, STABLE);
	cr_assert_gt(atomic_load(&cm.seq), 0, "the readers met no purge");
	r2cc_map_destroy(&cm);
}
