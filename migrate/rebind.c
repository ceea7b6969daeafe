/* SPDX-License-Identifier: MIT */
/*
 * rebind.c - a standby whose rail went down while its QP runs on its own:
 * on the channel's next tick the QP gets a new standby on another rail up
 * (placement as at its RTR), bound to the peer again (QP_BIND with
 * R2CC_CTRL_BIND_AGAIN: the peer's follows, bind.c). With no rail up for
 * one, the QP runs unprotected, still logged, until a rail comes up. A
 * standby whose port's LID changed (InfiniBand) is remade on its rail and
 * bound again the same way: the peer's path to it is by the old LID.
 */
#include <errno.h>
#include <string.h>

#include "bind.h"
#include "event.h"
#include "failback.h"
#include "mig_int.h"
#include "module.h"
#include "rebind.h"
#include "standby.h"
#include "tick.h"

#define REBIND_BATCH 64 /* QPs per tick; the rest on the next */

/* Does @mq run on its own QP with its standby's rail down (mq lock)? */
static bool lost_standby(const struct r2cc_mig_qp *mq)
{
	uint32_t st = r2cc_mig_state(mq);

	return mq->life == R2CC_LIFE_RUN && !mq->on_backup && mq->peer &&
	       mq->backup_rail >= 0 &&
	       (st == R2CC_PROT_READY || st == R2CC_PROT_NONE) &&
	       r2cc_health_get(mq->backup_rail).state == R2CC_RAIL_DOWN;
}

/* Does @mq run on its own QP with a standby whose port's LID changed
 * (mq lock)? */
static bool moved_lid(const struct r2cc_mig_qp *mq)
{
	uint32_t st = r2cc_mig_state(mq);
	uint16_t lid;

	if (mq->life != R2CC_LIFE_RUN || mq->on_backup || !mq->peer ||
	    mq->srq || !mq->blid || mq->backup_rail < 0 ||
	    mq->backup_rail >= R2CC_HEALTH_RAILS ||
	    (st != R2CC_PROT_READY && st != R2CC_PROT_BINDING))
		return false;
	lid = atomic_load(&ps.rail_lid[mq->backup_rail]);
	return lid && lid != mq->blid;
}

/* @mq's standby goes to @d's rail and is bound again (ps.lock and mq
 * lock held). */
static void rebind(struct r2cc_mig_qp *mq, struct r2cc_mig_desc *d,
		   const char *why)
{
	int old = mq->backup_rail, ret;

	if (r2cc_mig_backup_move(mq, d)) {
		r2cc_mig_unprotected(mq, R2CC_UNPROT_BUDGET,
				     "no new standby QP");
		return;
	}
	r2cc_mig_fb_rearm_drop(mq);
	mq->bind_sent = mq->bind_got = false;
	mq->keep_rail = false; /* placement chose again */
	r2cc_mig_set_state(mq, R2CC_PROT_BINDING);
	ret = r2cc_mig_send_bind(mq, true);
	if (ret) {
		r2cc_mig_unprotected(mq, R2CC_UNPROT_BIND,
				     "its new standby's bind could not be "
				     "sent");
		return;
	}
	r2cc_mig_event_standby(mq, old, d->backup_rail);
	r2cc_info("QP %#x: its standby's rail %d %s: a new standby on "
		  "rail %d, bound again",
		  mq->qpn, old, why, d->backup_rail);
}

/* Waiting for a standby rail (lost_standby() found none up), and its
 * old one is up again: that standby, still connected, stands by again.
 * (Not one a move back left unarmed: failback.c re-arms that.) */
static bool standby_back(const struct r2cc_mig_qp *mq)
{
	return mq->life == R2CC_LIFE_RUN && !mq->on_backup && mq->peer &&
	       mq->backup_rail >= 0 && !mq->srq &&
	       mq->fb.rearm == R2CC_REARM_NONE &&
	       r2cc_mig_state(mq) == R2CC_PROT_NONE &&
	       r2cc_health_get(mq->backup_rail).state == R2CC_RAIL_UP;
}

/* With no other rail up: passthrough, still logged (mq lock held). */
static void no_rail(struct r2cc_mig_qp *mq)
{
	if (r2cc_mig_state(mq) == R2CC_PROT_NONE)
		return;
	r2cc_warn("QP %#x: its standby's rail %d is down and no other rail "
		  "is up for one: unprotected until one is",
		  mq->qpn, mq->backup_rail);
	r2cc_mig_set_none(mq, R2CC_UNPROT_NO_RAIL);
}

/* @mq's standby remade on its rail, its port's new LID sent (ps.lock and
 * mq lock held). Binding already: its bind goes again with it. */
static void new_lid(struct r2cc_mig_qp *mq)
{
	struct r2cc_mig_desc d;

	memset(&d, 0, sizeof(d));
	d.backup_rail = mq->backup_rail;
	if (!ps.env.rail_res || ps.env.rail_res(mq->pd, d.backup_rail,
						&d.backup_ctx, &d.backup_pd)) {
		r2cc_mig_unprotected(mq, R2CC_UNPROT_BIND,
				     "its standby's port has a new LID and "
				     "its rail is gone");
		return;
	}
	rebind(mq, &d, "has a new LID");
}

void r2cc_mig_rebind_sweep(void)
{
	struct r2cc_mig_qp *lost[REBIND_BATCH], *mq;
	int n = 0, i, ret;
	uint64_t now;

	if (!atomic_exchange(&ps.rebind, false))
		return;
	pthread_mutex_lock(&ps.lock);
	now = r2cc_mig_now_ns();
	for (mq = ps.qps; mq; mq = mq->next) {
		r2cc_qlock_lock(&mq->lock);
		if (r2cc_mig_fb_rearm_retry(mq, now)) {
			atomic_store(&ps.rebind, true); /* the next tick */
		} else if (standby_back(mq)) {
			r2cc_mig_set_state(mq, R2CC_PROT_READY);
			r2cc_info("QP %#x: its standby's rail %d is up again: "
				  "protected",
				  mq->qpn, mq->backup_rail);
		} else if (lost_standby(mq) && mq->srq) {
			/* its SRQ's standby sits on that rail */
			r2cc_mig_unprotected(mq, R2CC_UNPROT_NO_RAIL,
					     "its SRQ's standby rail is down");
		} else if (lost_standby(mq) && n < REBIND_BATCH) {
			mq->placing = true; /* not destroyed until asked */
			lost[n++] = mq;
		} else if (lost_standby(mq)) {
			atomic_store(&ps.rebind, true); /* the next tick */
		} else if (moved_lid(mq)) {
			new_lid(mq);
		}
		r2cc_qlock_unlock(&mq->lock);
	}
	pthread_mutex_unlock(&ps.lock);
	for (i = 0; i < n; i++) {
		struct r2cc_mig_desc d;

		/* Placement weighs every QP's standby rail (ps.lock): asked
		 * with no lock held; the program's destroy waits for it
		 * (placing: r2cc_mig_release()). */
		memset(&d, 0, sizeof(d));
		ret = ps.env.standby_rail ?
			      ps.env.standby_rail(lost[i]->qp, &d) :
			      -ENOSYS;
		pthread_mutex_lock(&ps.lock);
		lost[i]->placing = false;
		pthread_cond_broadcast(&ps.placed_cv);
		r2cc_qlock_lock(&lost[i]->lock);
		if (!lost_standby(lost[i]))
			; /* moved, released, or bound again meanwhile */
		else if (ret || d.backup_rail < 0 ||
			 d.backup_rail == lost[i]->backup_rail ||
			 d.backup_rail == lost[i]->rail)
			no_rail(lost[i]);
		else
			rebind(lost[i], &d, "is down");
		r2cc_qlock_unlock(&lost[i]->lock);
		pthread_mutex_unlock(&ps.lock);
	}
}

void r2cc_mig_rebind_check(const struct r2cc_mig_qp *mq)
{
	if (mq->backup_rail >= 0 &&
	    r2cc_health_get(mq->backup_rail).state == R2CC_RAIL_DOWN)
		atomic_store(&ps.rebind, true);
}

void r2cc_mig_rail_lid(int rail, uint16_t lid)
{
	if (rail < 0 || rail >= R2CC_HEALTH_RAILS ||
	    atomic_exchange(&ps.rail_lid[rail], lid) == lid)
		return;
	atomic_store(&ps.rebind, true);
}
