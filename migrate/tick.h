/* SPDX-License-Identifier: MIT */
/*
 * tick.h - time, and the protection's tick (tick.c).
 */
#ifndef R2CC_MIG_TICK_H
#define R2CC_MIG_TICK_H

#include <stdbool.h>
#include <stdint.h>

struct r2cc_mig_qp;

/* CLOCK_MONOTONIC in ns. */
uint64_t r2cc_mig_now_ns(void);
/* Is @t (CLOCK_MONOTONIC ns) at least @ms before @now? (Never for a @t
 * after @now: a time read before a lock is older than what it guards.) */
bool r2cc_mig_past(uint64_t t, uint64_t now, uint64_t ms);
/* Has @mq waited for its peer long enough to give up, @since (CLOCK_
 * MONOTONIC ns) a step of a move began (mq lock held)? @ms past it with
 * the peer process silent for MIG_FENCE_BOUND_MS too, or MIG_FENCE_MAX_MS
 * past it whatever the peer does: measured to the time up to which the
 * peer's messages have been handled (r2cc_mig_inbox_seen_ns()). */
bool r2cc_mig_waited(const struct r2cc_mig_qp *mq, uint64_t since, uint64_t now,
		     uint64_t ms);
/* The channel's tick (no lock held): keepalive, failback, and moves that
 * waited too long for the peer given up. */
void r2cc_mig_tick(void);
/* The channel thread's tick: r2cc_mig_tick(), unless a unit test made
 * the module quiet (r2cc_mig_test_quiet(), mig_test.h) */
void r2cc_mig_inbox_tick_quietly(void);

#endif /* R2CC_MIG_TICK_H */
