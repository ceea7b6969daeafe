/* SPDX-License-Identifier: MIT */
/*
 * qlock.h - a protected QP's lock: the program's posts and polls take it
 * on every WR, so taking it free is one atomic instruction inline, with
 * no call into libc. Contended, the taker spins briefly, then sleeps on a
 * futex until the holder lets go (qlock.c); as a mutex, it is held only
 * for bounded work (a post, a completion, one step of a move).
 */
#ifndef R2CC_MIG_QLOCK_H
#define R2CC_MIG_QLOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct r2cc_qlock {
	/* 0 free, 1 held, 2 held and someone sleeps (or may) on it */
	_Atomic uint32_t v;
};

void r2cc_qlock_wait(struct r2cc_qlock *l);
void r2cc_qlock_wake(struct r2cc_qlock *l);

static inline void r2cc_qlock_init(struct r2cc_qlock *l)
{
	atomic_init(&l->v, 0);
}

static inline bool r2cc_qlock_trylock(struct r2cc_qlock *l)
{
	uint32_t free = 0;

	return atomic_compare_exchange_strong_explicit(
		&l->v, &free, 1, memory_order_acquire, memory_order_relaxed);
}

static inline void r2cc_qlock_lock(struct r2cc_qlock *l)
{
	if (__builtin_expect(!r2cc_qlock_trylock(l), 0))
		r2cc_qlock_wait(l);
}

static inline void r2cc_qlock_unlock(struct r2cc_qlock *l)
{
	if (__builtin_expect(atomic_exchange_explicit(
				     &l->v, 0, memory_order_release) == 2,
			     0))
		r2cc_qlock_wake(l);
}

#endif /* R2CC_MIG_QLOCK_H */
