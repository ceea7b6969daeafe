/* SPDX-License-Identifier: MIT */
/*
 * failback.c - a QP running on its backup moves back to its primary once
 * the primary's rail has been healthy for R2CC_FAILBACK_HOLD_MS (DESIGN
 * §6, failback). Both ends propose (FAILBACK PROPOSE with the first PSN of
 * their recycled primary); with both proposals each recycles its primary
 * (ERR -> RESET -> INIT -> RTR -> RTS towards the peer's; in the tick,
 * MIG_FB_STARTS a tick, an urgent one at once) and says READY;
 * with both READYs each fences its backup: the same exactly-once move as a
 * failover, the other way (fence.c, move.c). A side that gave up waiting
 * for the peer's READY joins the move if the peer made it after all: its
 * READY went out, so the peer's primary is connected to the one it
 * recycled (r2cc_mig_fb_join()). Moved back, the backup is re-armed
 * (REARM) and the QP is protected again. A flapping rail moves a QP back
 * at most MIG_FB_MOVES times per MIG_FB_WINDOW_MS.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chan.h"
#include "complete.h"
#include "event.h"
#include "failback.h"
#include "fence.h"
#include "mig_int.h"
#include "module.h"
#include "move.h"
#include "objects.h"
#include "paths.h"
#include "probe.h"
#include "rebind.h"
#include "standby.h"
#include "tick.h"
#include "wake.h"

static int send_fb(struct r2cc_mig_qp *mq, uint8_t phase, uint8_t flags,
		   uint32_t psn)
{
	struct r2cc_ctrl_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_FAILBACK;
	m.failback.qpn = mq->qpn;
	m.failback.phase = phase;
	m.failback.flags = flags;
	m.failback.psn = psn & 0xffffff;
	return r2cc_chan_send(mq->peer, &m);
}

/* Moves back within the window, fewer than allowed? */
static bool budget_left(const struct r2cc_mig_qp *mq, uint64_t now)
{
	uint32_t i, n = 0;

	for (i = 0; i < MIG_FB_MOVES; i++)
		if (mq->fb.moves_ns[i] &&
		    !r2cc_mig_past(mq->fb.moves_ns[i], now, MIG_FB_WINDOW_MS))
			n++;
	return n < MIG_FB_MOVES;
}

/* The re-arm sub-state to @st, no REARM of either end pending. */
static void rearm_set(struct r2cc_mig_qp *mq, enum r2cc_mig_rearm st)
{
	mq->fb.rearm = st;
	mq->fb.rearm_sent = mq->fb.rearm_got = mq->fb.peer_noarm = false;
}

/* Not now: proposals dropped, the next one after another hold. A primary
 * recycled for this round goes back to ERR: completion events of the
 * backup ring the program's CQ through it (wake.c). */
static void fb_reset(struct r2cc_mig_qp *mq, uint64_t now)
{
	if (mq->fb.recycled) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

		if (!ps.v.modify_qp(mq->qp, &a, IBV_QP_STATE))
			mq->perr = true;
		mq->fb.recycled = false;
	}
	mq->fb.proposed = mq->fb.peer_proposed = false;
	mq->fb.peer_recovered = false;
	mq->fb.ready = mq->fb.peer_ready = false;
	mq->fb.peer_psn = R2CC_PSN_NONE; /* a late READY of it is stale */
	mq->fb.rearm = R2CC_REARM_NONE;
	mq->fb.not_before_ns = now + ps.failback_hold_ms * 1000000ULL;
}

/* The primary from ERR to RTS again, towards the peer's recycled one. */
static int recycle(struct r2cc_mig_qp *mq)
{
	struct ibv_qp_attr a;
	int ret, t;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	ret = ps.v.modify_qp(mq->qp, &a, IBV_QP_STATE);
	if (ret)
		return ret;
	mq->perr = false; /* no more ringing through it (wake.c) */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = mq->attr.pkey_index;
	a.port_num = mq->attr.port_num ? mq->attr.port_num : 1;
	a.qp_access_flags = mq->attr.qp_access_flags;
	ret = ps.v.modify_qp(mq->qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mq->attr.path_mtu;
	a.dest_qp_num = mq->dest_qpn;
	a.rq_psn = mq->fb.peer_psn;
	a.max_dest_rd_atomic = mq->attr.max_dest_rd_atomic;
	a.min_rnr_timer = r2cc_mig_rnr_timer(mq->attr.min_rnr_timer);
	a.ah_attr = mq->attr.ah_attr;
	ret = ps.v.modify_qp(mq->qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER);
	if (ret || !mq->rts)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	/* Capped as the shim caps the program's (a black hole must end,
	 * within R2CC_DETECT_MS). */
	a.retry_cnt = mq->attr.retry_cnt > 6 ? 6 : mq->attr.retry_cnt;
	t = r2cc_rc_timeout_for(ps.detect_ms, a.retry_cnt + 1U);
	a.timeout = !mq->attr.timeout || mq->attr.timeout > t ?
			    (uint8_t)t :
			    mq->attr.timeout;
	/* The peer's replay may beat our re-posted receives (as on the
	 * backup): RNR waits, it must not fail. */
	a.rnr_retry = 7;
	a.sq_psn = mq->fb.psn;
	a.max_rd_atomic = mq->attr.max_rd_atomic;
	ret = ps.v.modify_qp(mq->qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC);
	if (!ret && (a.timeout != mq->attr.timeout ||
		     a.retry_cnt != mq->attr.retry_cnt ||
		     a.rnr_retry != mq->attr.rnr_retry))
		r2cc_mig_lowered(mq);
	return ret;
}

/* Both primaries connected: the move (mq lock held). */
static void go(struct r2cc_mig_qp *mq)
{
	mq->fb.ready = mq->fb.peer_ready = false;
	mq->fb.recycled = false; /* the move's from now on */
	mq->fb.round_peer_psn = R2CC_PSN_NONE; /* it moves: none to join */
	r2cc_mig_fence_back(mq);
}

static void urgent_failed(struct r2cc_mig_qp *mq, const char *why);

/* Both proposals known: recycle, then READY (mq lock held). */
static void start(struct r2cc_mig_qp *mq, uint64_t now)
{
	int ret = recycle(mq);

	if (ret) {
		mq->fb.recycled = true; /* partly: fb_reset puts it in ERR */
		r2cc_err("QP %#x: primary not recycled (%s): stays on its "
			 "backup",
			 mq->qpn, strerror(ret));
		send_fb(mq, R2CC_CTRL_FB_ABORT, 0, mq->fb.psn);
		fb_reset(mq, now);
		mq->fb.not_before_ns = UINT64_MAX; /* for good */
		if (mq->fb.urgent)
			urgent_failed(mq, "the primary cannot be recycled");
		return;
	}
	memmove(&mq->fb.moves_ns[1], &mq->fb.moves_ns[0],
		sizeof(mq->fb.moves_ns) - sizeof(mq->fb.moves_ns[0]));
	mq->fb.moves_ns[0] = now;
	/* One round's evidence is not the next's. */
	mq->fb.proposed = mq->fb.peer_proposed = false;
	mq->fb.peer_recovered = false;
	mq->fb.recycled = true;
	/* The peer's REARM may come before our move's end */
	rearm_set(mq, R2CC_REARM_WAIT);
	r2cc_info("QP %#x: rail %d %s: moving back from rail %d (primary "
		  "recycled: sq_psn %#x, rq_psn %#x)",
		  mq->qpn, mq->rail,
		  mq->fb.urgent ? "up, its backup failed" : "healthy",
		  mq->backup_rail, mq->fb.psn, mq->fb.peer_psn);
	/* The backup carries on until both primaries are connected (a
	 * recycle may take a second: RTR resolves the peer's address
	 * afresh): only then the fences, so the move stalls for one
	 * exchange. */
	if (send_fb(mq, R2CC_CTRL_FB_READY, 0, mq->fb.psn)) {
		fb_reset(mq, now);
		if (mq->fb.urgent)
			urgent_failed(mq, "the control channel failed");
		return;
	}
	mq->fb.ready = true;
	mq->fb.round_psn = mq->fb.psn;
	mq->fb.round_peer_psn = mq->fb.peer_psn;
	if (mq->fb.peer_ready)
		go(mq);
}

/* Can @mq move back now, as far as this side knows? Not a QP on an SRQ:
 * its SRQ would have to move back whole (not built; it stays). */
static bool settled(const struct r2cc_mig_qp *mq)
{
	return mq->life == R2CC_LIFE_RUN && mq->on_backup && mq->peer &&
	       !mq->srq && r2cc_mig_state(mq) == R2CC_PROT_MIGRATED;
}

/* Send our PROPOSE (a fresh PSN for the recycled primary) (mq lock
 * held); with the peer's in, the round starts (r2cc_mig_fb_tick()). */
static void propose(struct r2cc_mig_qp *mq, uint8_t flags)
{
	mq->fb.psn = r2cc_psn_random();
	if (!send_fb(mq, R2CC_CTRL_FB_PROPOSE, flags, mq->fb.psn))
		mq->fb.proposed = true;
}

/* Both proposals in, the round not started yet? */
static bool start_due(const struct r2cc_mig_qp *mq)
{
	return mq->fb.proposed && mq->fb.peer_proposed && !mq->fb.ready;
}

/* The urgent move could not be made: the program sees what the backup
 * made, as it would without r2cc (mq lock held). */
static void urgent_failed(struct r2cc_mig_qp *mq, const char *why)
{
	r2cc_err("QP %#x: its backup failed and the move back did not happen "
		 "(%s): the program sees the errors",
		 mq->qpn, why);
	mq->fb.urgent = false;
	r2cc_mig_give_back(mq);
	r2cc_mig_wake(mq);
	r2cc_mig_stop_logging(mq);
	r2cc_mig_set_state(mq, R2CC_PROT_FAILED);
	r2cc_mig_event(mq, R2CC_EV_FAILOVER_FAILED, 0, 0);
}

bool r2cc_mig_fb_urgent(struct r2cc_mig_qp *mq)
{
	struct r2cc_health_info h = r2cc_health_get(mq->rail);
	uint64_t now = r2cc_mig_now_ns();

	if (mq->fb.urgent)
		return true;
	if (!settled(mq) || h.state != R2CC_RAIL_UP)
		return false;
	r2cc_warn("QP %#x: its backup on rail %d failed: moving back to rail "
		  "%d now",
		  mq->qpn, mq->backup_rail, mq->rail);
	mq->fb.urgent = true;
	mq->fb.urgent_ns = now;
	mq->fb.not_before_ns = 0;
	if (!mq->held)
		r2cc_mig_hold_start(mq);
	/* Proposed by the next tick, on the control thread: the recycle
	 * that follows may take a second (RTR), not the program's poll's
	 * or the health thread's. */
	return true;
}

/* Successful completions so far of the READY QPs of this process on
 * @mq's path (same rail and ends), counted at most once a tick (*@counted):
 * a hint, their state read without their locks (ps.lock held). */
static uint64_t path_ok(const struct r2cc_mig_qp *mq, bool *counted)
{
	struct r2cc_mig_path *p;

	if (!*counted)
		r2cc_mig_paths_count();
	*counted = true;
	p = r2cc_mig_path_of(mq);
	return p ? p->ok : 0;
}

/*
 * Was @mq's black hole its own flow's (an ECMP hash or an ACL that drops
 * one QP's packets)? Then other QPs on the same path complete on it while
 * @mq is on its backup, and a probe of the path (TCP) cannot tell when it
 * ends: no move back on a probe's word (a rail event still counts). The
 * first look only notes their count (mq lock held).
 */
static bool flow_only(struct r2cc_mig_qp *mq, bool *counted)
{
	uint64_t n;

	if (mq->fb.flow_only)
		return true;
	n = path_ok(mq, counted);
	if (!mq->fb.ok_set || n <= mq->fb.ok_base) {
		/* (fewer: one of them left the READY ones) */
		bool first = !mq->fb.ok_set;

		mq->fb.ok_set = true;
		mq->fb.ok_base = n;
		return first;
	}
	mq->fb.flow_only = true;
	r2cc_info("QP %#x: other QPs complete on rail %d to the same peer: "
		  "its fault is its own flow's, a probe cannot end it (it "
		  "stays on rail %d)",
		  mq->qpn, mq->rail, mq->backup_rail);
	return true;
}

/*
 * Evidence that the fault is over: a rail that went down and came back
 * since the failover, up for the hold since. Either side's will do (the
 * other proposes when its own rail is up); neither's (a black hole, no
 * event anywhere) keeps the QP on its backup: no move back into it.
 */
void r2cc_mig_fb_tick(void)
{
	struct r2cc_mig_qp *mq;
	bool counted = false;
	unsigned int starts = 0;
	uint64_t now;

	pthread_mutex_lock(&ps.lock);
	now = r2cc_mig_now_ns();
	r2cc_probe_poll(now);
	for (mq = ps.qps; mq; mq = mq->next) {
		uint64_t hold_ns = ps.failback_hold_ms * 1000000ULL, hold_end;
		struct r2cc_health_info h;
		bool back;

		r2cc_qlock_lock(&mq->lock);
		if (settled(mq) && mq->fb.urgent &&
		    r2cc_mig_waited(mq, mq->fb.urgent_ns, now,
				    MIG_FENCE_BOUND_MS)) {
			urgent_failed(mq, "no answer from the peer in time");
			goto next;
		}
		if (settled(mq) && mq->fb.urgent) {
			if (!mq->fb.proposed && !mq->fb.ready)
				propose(mq, R2CC_CTRL_FB_URGENT |
						    R2CC_CTRL_FB_RECOVERED);
			if (start_due(mq))
				start(mq, now);
			goto next;
		}
		if (settled(mq) && start_due(mq)) {
			if (starts < MIG_FB_STARTS) {
				starts++;
				start(mq, now);
			}
			goto next;
		}
		if (settled(mq) && mq->fb.ready &&
		    r2cc_mig_waited(mq, mq->fb.moves_ns[0], now,
				    MIG_FENCE_BOUND_MS)) {
			r2cc_warn("QP %#x: the peer's primary never got ready: "
				  "stays on its backup",
				  mq->qpn);
			fb_reset(mq, now);
		}
		if (!settled(mq) || mq->fb.proposed || mq->fb.ready ||
		    now < mq->fb.not_before_ns || !budget_left(mq, now))
			goto next;
		h = r2cc_health_get(mq->rail);
		if (h.state != R2CC_RAIL_UP ||
		    !r2cc_mig_past(h.since_ns, now, ps.failback_hold_ms))
			goto next;
		back = h.since_ns > mq->fault_ns;
		if (!back && !mq->fb.peer_recovered) {
			/* No event says it is over (a black hole): a probe
			 * of the path, from a hold after the failover on,
			 * must get through after that. */
			hold_end = mq->fault_ns + hold_ns;
			if (now < hold_end || flow_only(mq, &counted) ||
			    r2cc_probe_path(mq->gid, mq->dest_gid,
					    r2cc_chan_port(), hold_end, now,
					    ps.failback_hold_ms) != 1)
				goto next;
			back = true;
			r2cc_info("QP %#x: the path on rail %d gets through "
				  "again (probe)",
				  mq->qpn, mq->rail);
		}
		propose(mq, back ? R2CC_CTRL_FB_RECOVERED : 0);
	next:
		r2cc_qlock_unlock(&mq->lock);
	}
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_fb_rail_down(struct r2cc_mig_qp *mq)
{
	if (!(mq->fb.proposed || mq->fb.ready || mq->fb.urgent) || !settled(mq))
		return;
	send_fb(mq, R2CC_CTRL_FB_ABORT, 0, mq->fb.psn);
	fb_reset(mq, r2cc_mig_now_ns());
	if (mq->fb.urgent)
		urgent_failed(mq, "the primary's rail is down too");
}

static void unarmed(struct r2cc_mig_qp *mq)
{
	r2cc_warn("QP %#x: back on rail %d, its backup not re-armed: "
		  "unprotected",
		  mq->qpn, mq->rail);
	mq->fb.rearm = R2CC_REARM_NONE;
	r2cc_mig_set_none(mq, R2CC_UNPROT_BIND);
	r2cc_mig_stop_logging(mq);
}

/* The standby is not armed at one end: unprotected, still logged, until
 * its rail is up at both (r2cc_mig_fb_rearm_retry() from the rebind
 * sweep) or it gets a standby on another rail (rebind.c). */
static void stale(struct r2cc_mig_qp *mq, enum r2cc_unprot kind,
		  const char *why)
{
	if (mq->fb.rearm != R2CC_REARM_STALE)
		r2cc_warn("QP %#x: back on rail %d, its standby on rail %d not "
			  "re-armed (%s): unprotected until it is",
			  mq->qpn, mq->rail, mq->backup_rail, why);
	rearm_set(mq, R2CC_REARM_STALE);
	mq->fb.rearm_not_before_ns = r2cc_mig_now_ns() + MIG_REARM_RETRY_NS;
	r2cc_mig_set_none(mq, kind);
	atomic_store(&ps.rebind, true); /* the sweep tries again */
}

static bool standby_rail_up(const struct r2cc_mig_qp *mq)
{
	return r2cc_health_get(mq->backup_rail).state == R2CC_RAIL_UP;
}

/* Our REARM, NOARM when the standby's rail is not up here. */
static int send_rearm(struct r2cc_mig_qp *mq)
{
	bool no = !standby_rail_up(mq);
	int ret = send_fb(mq, R2CC_CTRL_FB_REARM, no ? R2CC_CTRL_FB_NOARM : 0,
			  mq->bpsn);

	if (!ret) {
		mq->fb.rearm_sent = true;
		mq->fb.said_noarm = no;
	}
	return ret;
}

/* Both REARMs known: the backup is connected again (mq lock held). */
static void rearm(struct r2cc_mig_qp *mq)
{
	bool peer_no = mq->fb.peer_noarm, said_no = mq->fb.said_noarm;

	mq->fb.rearm_sent = mq->fb.rearm_got = mq->fb.peer_noarm = false;
	if (peer_no) {
		stale(mq, R2CC_UNPROT_BIND, "not at the peer");
		return;
	}
	if (said_no || !standby_rail_up(mq) ||
	    r2cc_mig_backup_rearm(mq, mq->fb.rearm_psn)) {
		/* The peer arms towards ours on our REARM: it stands down */
		if (!said_no)
			send_fb(mq, R2CC_CTRL_FB_REARM, R2CC_CTRL_FB_NOARM,
				mq->bpsn);
		stale(mq, said_no ? R2CC_UNPROT_NO_RAIL : R2CC_UNPROT_BIND,
		      said_no ? "its rail is down here" :
				"it cannot be connected here");
		return;
	}
	mq->fb.rearm = R2CC_REARM_NONE;
	r2cc_mig_set_state(mq, R2CC_PROT_READY);
	r2cc_mig_rebind_check(mq);
	r2cc_info("QP %#x protected again: backup QP %#x on rail %d (sq_psn "
		  "%#x, rq_psn %#x)",
		  mq->qpn, mq->bqp->qp_num, mq->backup_rail, mq->bpsn,
		  mq->fb.rearm_psn);
}

bool r2cc_mig_fb_rearm_retry(struct r2cc_mig_qp *mq, uint64_t now)
{
	if (mq->fb.rearm != R2CC_REARM_STALE || mq->fb.rearm_sent ||
	    mq->life != R2CC_LIFE_RUN || mq->on_backup || !standby_rail_up(mq))
		return false;
	if (now < mq->fb.rearm_not_before_ns)
		return true;
	if (send_rearm(mq)) {
		mq->fb.rearm_not_before_ns = now + MIG_REARM_RETRY_NS;
		return true;
	}
	if (mq->fb.rearm_got)
		rearm(mq);
	return false;
}

void r2cc_mig_fb_rearm_drop(struct r2cc_mig_qp *mq)
{
	rearm_set(mq, R2CC_REARM_NONE);
}

void r2cc_mig_fb_posted(struct r2cc_mig_qp *mq)
{
	if (send_fb(mq, R2CC_CTRL_FB_POSTED, 0, mq->fb.psn))
		r2cc_warn("QP %#x: the peer not told our receives are "
			  "re-posted: its move back ends at its bound",
			  mq->qpn);
}

/* Moved back (mq lock held): re-arm the backup with the peer. */
void r2cc_mig_fb_moved(struct r2cc_mig_qp *mq)
{
	mq->fb.urgent = false;
	if (mq->lazy) {
		/* Lazy: no backup armed; the next failover takes this one
		 * out of RESET (destroyed only with the QP: on rxe a destroy
		 * can wait seconds for the kernel's references) */
		mq->fb.rearm = R2CC_REARM_NONE;
		if (r2cc_mig_backup_park(mq))
			r2cc_mig_backup_drop(mq);
		r2cc_mig_set_state(mq, R2CC_PROT_READY);
		r2cc_mig_rebind_check(mq);
		r2cc_info("QP %#x protected again (lazy): its backup %s",
			  mq->qpn, mq->bqp ? "parked" : "dropped");
		return;
	}
	mq->bpsn = r2cc_psn_random();
	mq->fb.rearm = R2CC_REARM_WAIT;
	r2cc_mig_set_state(mq, R2CC_PROT_BINDING);
	if (send_rearm(mq)) {
		unarmed(mq);
		return;
	}
	if (mq->fb.rearm_got)
		rearm(mq);
}

bool r2cc_mig_fb_join(struct r2cc_mig_qp *mq)
{
	int ret;

	if (!settled(mq) || mq->fb.round_peer_psn == R2CC_PSN_NONE ||
	    r2cc_health_get(mq->rail).state != R2CC_RAIL_UP)
		return false;
	if (!mq->fb.recycled) {
		/* Given up (the primary back in ERR): connected again as it
		 * was for that round, which the peer's primary expects */
		mq->fb.psn = mq->fb.round_psn;
		mq->fb.peer_psn = mq->fb.round_peer_psn;
		ret = recycle(mq);
		if (ret) {
			r2cc_err("QP %#x: primary not recycled (%s): the "
				 "peer's move back cannot be joined",
				 mq->qpn, strerror(ret));
			mq->fb.recycled = true; /* fb_reset puts it in ERR */
			fb_reset(mq, r2cc_mig_now_ns());
			return false;
		}
		mq->fb.recycled = true;
		rearm_set(mq, R2CC_REARM_WAIT);
	}
	r2cc_info("QP %#x: the peer moved back on a round this side gave "
		  "up: joined (primary sq_psn %#x, rq_psn %#x)",
		  mq->qpn, mq->fb.psn, mq->fb.peer_psn);
	mq->fb.proposed = mq->fb.peer_proposed = false;
	mq->fb.peer_recovered = false;
	go(mq);
	return r2cc_mig_back(mq);
}

/* The peer's REARM (mq lock held). */
static void got_rearm(struct r2cc_mig_qp *mq, const struct r2cc_ctrl_msg *m)
{
	bool no = m->failback.flags & R2CC_CTRL_FB_NOARM;

	if (mq->fb.rearm == R2CC_REARM_NONE) {
		/* Re-armed both ends, and the peer's standby went down
		 * after all: ours stands down with it */
		if (no && mq->life == R2CC_LIFE_RUN && !mq->on_backup &&
		    r2cc_mig_state(mq) == R2CC_PROT_READY)
			stale(mq, R2CC_UNPROT_BIND, "not at the peer");
		else
			r2cc_dbg("QP %#x: a stale REARM: dropped", mq->qpn);
		return;
	}
	mq->fb.rearm_got = true;
	mq->fb.peer_noarm = no;
	mq->fb.rearm_psn = m->failback.psn;
	if (mq->fb.rearm_sent)
		rearm(mq);
}

void r2cc_mig_got_failback(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	uint64_t now = r2cc_mig_now_ns();
	struct r2cc_mig_qp *mq;
	bool urgent;

	mq = r2cc_mig_by_dest(peer, m->failback.qpn);
	if (!mq) {
		r2cc_mig_unknown("failback", peer, m->failback.qpn);
		return;
	}
	r2cc_chan_answered(peer); /* moves go on with it (tick.c) */
	r2cc_qlock_lock(&mq->lock);
	switch (m->failback.phase) {
	case R2CC_CTRL_FB_PROPOSE:
		/* A new round of the peer's: it moves on no older one */
		mq->fb.round_peer_psn = R2CC_PSN_NONE;
		urgent = m->failback.flags & R2CC_CTRL_FB_URGENT;
		if (settled(mq) && (mq->fb.ready || mq->fb.recycled) &&
		    m->failback.psn != mq->fb.peer_psn) {
			/* Our round begun (the primary connected to the
			 * peer's old PSN) is over at the peer: over here
			 * too, and the new one is taken at once. */
			r2cc_dbg("QP %#x: the peer proposes again: the round "
				 "begun here ends",
				 mq->qpn);
			fb_reset(mq, now);
			mq->fb.not_before_ns = 0;
		}
		if (!settled(mq) || (!urgent && (now < mq->fb.not_before_ns ||
						 !budget_left(mq, now)))) {
			/* the refused round is named by its PSN */
			send_fb(mq, R2CC_CTRL_FB_ABORT, 0, m->failback.psn);
			break;
		}
		mq->fb.peer_proposed = true;
		mq->fb.peer_recovered =
			m->failback.flags & R2CC_CTRL_FB_RECOVERED;
		mq->fb.peer_psn = m->failback.psn;
		if (urgent && !mq->fb.proposed && !mq->fb.ready &&
		    r2cc_health_get(mq->rail).state == R2CC_RAIL_UP)
			/* the peer's backup died: no hold here either */
			propose(mq, 0);
		/* An urgent round now; others in the tick, a few at a time */
		if (urgent && start_due(mq))
			start(mq, now);
		break;
	case R2CC_CTRL_FB_READY:
		/* Of this round (its PROPOSE came first on the channel), not
		 * of one given up meanwhile: that one would move the QP while
		 * the peer's primary is not connected. */
		if (!settled(mq) || m->failback.psn != mq->fb.peer_psn) {
			r2cc_dbg("QP %#x: a stale READY: dropped", mq->qpn);
			break;
		}
		mq->fb.peer_ready = true;
		if (mq->fb.ready)
			go(mq);
		break;
	case R2CC_CTRL_FB_REARM:
		got_rearm(mq, m);
		break;
	case R2CC_CTRL_FB_POSTED:
		/* Of this move back (its round's PSN), once */
		if (!r2cc_mig_back(mq) || mq->fb.peer_posted ||
		    m->failback.psn != mq->fb.peer_psn) {
			r2cc_dbg("QP %#x: a stale POSTED: dropped", mq->qpn);
			break;
		}
		mq->fb.peer_posted = true;
		r2cc_mig_replay(mq);
		break;
	case R2CC_CTRL_FB_ABORT:
		/* Of the peer's round, or of ours it refuses; not a stale one */
		if (m->failback.psn != mq->fb.peer_psn &&
		    (!mq->fb.proposed || m->failback.psn != mq->fb.psn))
			break;
		if (settled(mq) && mq->fb.urgent)
			urgent_failed(mq, "the peer cannot move back");
		else if (settled(mq))
			fb_reset(mq, now);
		break;
	}
	r2cc_qlock_unlock(&mq->lock);
}
