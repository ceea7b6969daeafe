/* SPDX-License-Identifier: MIT */
/*
 * tick.c - what the control thread's tick and the health thread drive:
 * moves that waited too long for the peer, a rail gone down or up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bind.h"
#include "chan.h"
#include "early.h"
#include "failback.h"
#include "fence.h"
#include "inbox.h"
#include "keys.h"
#include "keepalive.h"
#include "mig_int.h"
#include "mig_test.h"
#include "rebind.h"
#include "srq.h"
#include "tick.h"
#include "untune.h"

uint64_t r2cc_mig_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

bool r2cc_mig_past(uint64_t t, uint64_t now, uint64_t ms)
{
	return t <= now && now - t >= ms * 1000000ULL;
}

bool r2cc_mig_waited(const struct r2cc_mig_qp *mq, uint64_t since, uint64_t now,
		     uint64_t ms)
{
	uint64_t heard, answered;

	now = r2cc_mig_inbox_seen_ns(now);
	if (!r2cc_mig_past(since, now, ms))
		return false;
	heard = mq->peer ? r2cc_chan_heard_ns(mq->peer) : 0;
	if (!heard || r2cc_mig_past(heard, now, MIG_FENCE_BOUND_MS))
		return true; /* silent */
	if (!r2cc_mig_past(since, now, MIG_FENCE_MAX_MS))
		return false;
	/* Past it, as long as the peer still moves our QPs or works through
	 * a backlog (ours may be in it), to a ceiling */
	answered = r2cc_chan_answered_ns(mq->peer);
	return r2cc_mig_past(since, now, MIG_FENCE_CEIL_MS) || !answered ||
	       r2cc_mig_past(answered, now, MIG_FENCE_BOUND_MS);
}

/* Moves that waited too long for the peer given up (ps.lock held). */
static void bound_moves(void)
{
	/* Read under the lock: a fence made while the tick waited for it
	 * is younger than a time read before (and unsigned). */
	uint64_t now = r2cc_mig_now_ns();
	struct r2cc_mig_qp *mq;

	for (mq = ps.qps; mq; mq = mq->next) {
		r2cc_qlock_lock(&mq->lock);
		if ((mq->life == R2CC_LIFE_FENCED ||
		     mq->life == R2CC_LIFE_RECVS) &&
		    r2cc_mig_waited(mq, mq->fault_ns, now,
				    MIG_FENCE_BOUND_MS)) {
			r2cc_mig_abandon(mq, "no answer from the peer in time");
			if (mq->peer)
				r2cc_chan_peer_say(
					mq->peer,
					"a move waited for it in vain");
		}
		/* Replayed, but the peer's count of our consumed receives
		 * never came (its channel died between the two): the
		 * receives cannot move. (An SRQ's QPs: bounded by the
		 * SRQ's sweep.) */
		else if (mq->life == R2CC_LIFE_SENDS && !mq->srq &&
			 r2cc_mig_waited(mq, mq->fault_ns, now,
					 2 * MIG_FENCE_BOUND_MS))
			r2cc_mig_fail(mq, "the peer never said which receives "
					  "its messages consumed");
		r2cc_qlock_unlock(&mq->lock);
	}
}

/* What the tick sends goes out at its end, a frame per peer. */
static void tick(void)
{
	bool waiting, untune;

	if (ps.keepalive_ms)
		r2cc_mig_ka_tick();
	r2cc_mig_rebind_sweep();
	r2cc_mig_early_sweep();
	r2cc_mig_bind_tick();
	r2cc_mig_keys_tick();
	/* (urgent moves back are bounded there even without failback) */
	if (atomic_load_explicit(&ps.away, memory_order_relaxed))
		r2cc_mig_fb_tick();
	/* Moves under way are bounded, SRQs swept (one at home only when a
	 * QP on it changed: ps.srq_sweep), QPs given up get the program's
	 * ACK timeout back; nothing to do, no walk. */
	waiting = atomic_load_explicit(&ps.waiting, memory_order_relaxed);
	untune = atomic_load_explicit(&ps.untune, memory_order_relaxed);
	if (!waiting && !untune && !__atomic_load_n(&ps.srqs, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&ps.lock);
	if (untune)
		r2cc_mig_untune_tick();
	if (waiting)
		bound_moves();
	if (ps.srqs)
		r2cc_mig_srq_sweep();
	pthread_mutex_unlock(&ps.lock);
}

/* One tick at a time: a caller's returns after any tick under way, so
 * what it triggered is done (the channel thread's own, and a unit
 * test's) */
static pthread_mutex_t one = PTHREAD_MUTEX_INITIALIZER;

void r2cc_mig_tick(void)
{
	pthread_mutex_lock(&one);
	r2cc_chan_hold();
	tick();
	r2cc_chan_flush();
	pthread_mutex_unlock(&one);
}

void r2cc_mig_inbox_tick_quietly(void)
{
	if (!atomic_load_explicit(&ps.quiet, memory_order_relaxed))
		r2cc_mig_tick();
}

void r2cc_mig_test_quiet(bool on)
{
	atomic_store(&ps.quiet, on);
	/* a tick under way ends first */
	pthread_mutex_lock(&one);
	pthread_mutex_unlock(&one);
}

void r2cc_mig_rail_down(int rail, enum r2cc_health_cause cause)
{
	struct r2cc_mig_qp *mq;

	/* a channel on that rail first: the FAILOVERs must not wait for
	 * TCP to give up on it */
	r2cc_chan_rail_down(rail);
	/* each QP's FAILOVER gathered: one frame per peer */
	r2cc_chan_hold();
	pthread_mutex_lock(&ps.lock);
	for (mq = ps.qps; mq; mq = mq->next) {
		if (mq->rail != rail && mq->backup_rail != rail)
			continue;
		r2cc_qlock_lock(&mq->lock);
		if (mq->backup_rail == rail) {
			/* Running on it: back to the primary, if it is up
			 * (else no rail is left); moving onto it: the move
			 * cannot end; standing by on it: a new standby
			 * (rebind.c). */
			if (mq->on_backup && mq->life == R2CC_LIFE_RUN &&
			    !r2cc_mig_fb_urgent(mq))
				r2cc_mig_stranded(mq);
			else if (!mq->on_backup && r2cc_mig_moving(mq))
				r2cc_mig_fail(mq, "the rail it moves to went "
						  "down");
			else if (!mq->on_backup)
				atomic_store(&ps.rebind, true);
			r2cc_qlock_unlock(&mq->lock);
			continue;
		}
		r2cc_mig_fence(mq, cause == R2CC_CAUSE_PORT_EVENT ?
					   R2CC_CTRL_WHY_PORT_EVENT :
					   R2CC_CTRL_WHY_CARRIER);
		r2cc_mig_fb_rail_down(mq);
		r2cc_qlock_unlock(&mq->lock);
	}
	if (atomic_load(&ps.srq_sweep))
		r2cc_mig_srq_sweep();
	pthread_mutex_unlock(&ps.lock);
	r2cc_chan_flush();
}

void r2cc_mig_rail_up(int rail)
{
	(void)rail;
	atomic_store(&ps.rebind, true);
}
