/* SPDX-License-Identifier: MIT */
/*
 * qlock.c - a QP lock's contended half (qlock.h): spin a little, since its
 * holder is mostly a post or a poll that lets go within a microsecond,
 * then mark it waited-for and sleep on its word until a release wakes one
 * sleeper.
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "qlock.h"

#define SPINS 100

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

void r2cc_qlock_wait(struct r2cc_qlock *l)
{
	int i;

	for (i = 0; i < SPINS; i++) {
		relax();
		if (atomic_load_explicit(&l->v, memory_order_relaxed) == 0 &&
		    r2cc_qlock_trylock(l))
			return;
	}
	/* Taken as 2: the one who lets go next wakes a sleeper, and one
	 * woken takes it as 2 again, as others may still sleep. */
	while (atomic_exchange_explicit(&l->v, 2, memory_order_acquire))
		syscall(SYS_futex, &l->v, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void r2cc_qlock_wake(struct r2cc_qlock *l)
{
	syscall(SYS_futex, &l->v, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
