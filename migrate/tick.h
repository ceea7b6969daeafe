/* SPDX-License-Identifier: MIT */
/*
 * tick.h - time, and the control thread's tick (tick.c).
 */
#ifndef R2CC_MIG_TICK_H
#define R2CC_MIG_TICK_H

#include <stdbool.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in ns. */
uint64_t r2cc_mig_now_ns(void);
/* Is @t (CLOCK_MONOTONIC ns) at least @ms before @now? (Never for a @t
 * after @now: a time read before a lock is older than what it guards.) */
bool r2cc_mig_past(uint64_t t, uint64_t now, uint64_t ms);
/* The channel's tick (no lock held): keepalive, failback, and moves that
 * waited too long for the peer given up. */
void r2cc_mig_tick(void);

#endif /* R2CC_MIG_TICK_H */
