/* SPDX-License-Identifier: MIT */
/*
 * test_qlock.c - the QP lock (migrate/qlock.h): mutual exclusion when
 * threads contend for it (they spin, then sleep on its futex), and a
 * trylock that fails while it is held.
 */
#include <criterion/criterion.h>
#include <pthread.h>

#include "qlock.h"

#define ROUNDS 200000

static struct r2cc_qlock lock;
static uint64_t counter; /* under lock */

static void *bump(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		r2cc_qlock_lock(&lock);
		counter++;
		r2cc_qlock_unlock(&lock);
	}
	return NULL;
}

Test(qlock, excludes_under_contention_and_trylock_fails_when_held,
     .timeout = 60)
{
	pthread_t t[3];
	int i;

	r2cc_qlock_init(&lock);
	cr_assert(r2cc_qlock_trylock(&lock));
	cr_assert_not(r2cc_qlock_trylock(&lock), "held");
	r2cc_qlock_unlock(&lock);
	for (i = 0; i < 3; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, bump, NULL), 0);
	for (i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(counter, 3ULL * ROUNDS);
	cr_assert(r2cc_qlock_trylock(&lock), "free again");
	r2cc_qlock_unlock(&lock);
}
