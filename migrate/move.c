/* SPDX-License-Identifier: MIT */
/*
 * move.c - a move's progress (DESIGN §6): the peer's FAILOVER and
 * FAILOVER_ACK, the exactly-once replay from its rq_psn, the receives
 * re-posted from its consumed count, and the end of the move.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bcq.h"
#include "chan.h"
#include "complete.h"
#include "event.h"
#include "failback.h"
#include "fence.h"
#include "mig_int.h"
#include "module.h"
#include "move.h"
#include "objects.h"
#include "post.h"
#include "srq.h"
#include "tick.h"
#include "wake.h"

/* One direction of the move is on the new path (@ev, lock held); once
 * both are, the new incarnation carries the QP, the fenced one is
 * retired. */
static void moved(struct r2cc_mig_qp *mq, enum r2cc_mig_ev ev)
{
	if (!r2cc_mig_step(mq, ev) || mq->life != R2CC_LIFE_RUN)
		return;
	if (mq->slot)
		atomic_fetch_add(&mq->slot->moves, 1);
	r2cc_mig_unhold(mq);
	memset(&mq->lz, 0, sizeof(mq->lz));
	if (mq->on_backup)
		return;
	/* The backup's consumed receives were moved to the stash: its CQs
	 * hold only flushes now, emptied when it is re-armed. */
	r2cc_mig_bcq_detach(mq);
	mq->recycled = true;
	r2cc_mig_fb_moved(mq);
}

/*
 * Was the first WR to replay a SEND the peer had partly received (the
 * replay just decided, the log still in the old path's PSNs)? Its first
 * packet took a receive WR; an SRQ's move needs to know (lock held).
 */
static bool partly_sent(struct r2cc_mig_qp *mq)
{
	const struct r2cc_sendlog_ent *e;
	uint32_t i;

	for (i = 0; (e = r2cc_sendlog_peek(mq->slog, i)); i++) {
		if (e->disp != R2CC_SL_REPLAY)
			continue;
		return (e->wr.opcode == IBV_WR_SEND ||
			e->wr.opcode == IBV_WR_SEND_WITH_IMM ||
			e->wr.opcode == IBV_WR_SEND_WITH_INV) &&
		       r2cc_psn_before(e->first_psn, mq->peer_rq_psn);
	}
	return false;
}

/*
 * The QP a move puts to work (the recycled primary if @back, else the
 * backup) was left while a READ's response may have been arriving: rxe
 * (Linux 6.1) keeps that response's place in a QP across RESET, and the
 * first acknowledgement the new incarnation gets breaks the sequence: the
 * QP goes to ERR, completing the WR as a success. A zero-length READ,
 * first on it (its one response packet is accepted there), ends it.
 * Unsignaled, and hidden if it completes (R2CC_HEAL_WRID); not where the
 * replay fills the send queue (a backup has a slot to spare for it, the
 * program's QP has none). Return: PSNs it took (0 or 1). Lock held.
 */
static uint32_t heal(struct r2cc_mig_qp *mq, bool back, uint32_t nreplay)
{
	struct ibv_send_wr w = { .wr_id = R2CC_HEAL_WRID,
				 .opcode = IBV_WR_RDMA_READ };
	bool *stale = back ? &mq->pstale : &mq->bstale;
	int ret;

	if (!*stale)
		return 0;
	*stale = false;
	if (nreplay >= mq->cap.max_send_wr + (!back && mq->bspare)) {
		r2cc_warn("QP %#x: the replay fills the %s's send queue: its "
			  "completer is not cleared",
			  mq->qpn, back ? "primary" : "backup");
		return 0;
	}
	ret = back ? r2cc_mig_primary_send(mq, &w) :
		     r2cc_mig_backup_send(mq, &w);
	if (ret) {
		r2cc_warn("QP %#x: its %s's completer not cleared (%s)",
			  mq->qpn, back ? "primary" : "backup", strerror(-ret));
		return 0;
	}
	r2cc_dbg("QP %#x: a zero-length READ clears its %s's completer",
		 mq->qpn, back ? "primary" : "backup");
	return 1;
}

static void bad_rq_psn(struct r2cc_mig_qp *mq, int ret)
{
	r2cc_err("QP %#x: peer rq_psn %#x outside our send log (%s)", mq->qpn,
		 mq->peer_rq_psn, strerror(-ret));
	r2cc_mig_abandon(mq, "the peer's rq_psn is not ours");
}

/* The peer's receives our SENDs consumed at its rq_psn: those retired and
 * those it executed (DONE at the replay; counted as they complete,
 * later). A QP that never reached RTS sent nothing. Not 0: abandoned
 * (lock held). */
static int peer_consumed(struct r2cc_mig_qp *mq, uint64_t *consumed)
{
	uint32_t n = 0;
	int ret = mq->rts ?
			  r2cc_sendlog_consumed(mq->slog, mq->peer_rq_psn, &n) :
			  0;

	if (ret)
		bad_rq_psn(mq, ret);
	*consumed = mq->consumers_done + n;
	return ret;
}

/*
 * Moving back, the peer's FAILOVER in: our FAILOVER_ACK goes now, the
 * replay once the peer says its receives are re-posted on its primary
 * (FB_POSTED, sent when it has this ACK). A SEND replayed before would
 * meet no receive there, and rxe's requester counts its ACK timer through
 * RNR waits: under a backlog of moves at the peer, retry exceeded on the
 * recycled primary, whose timer is R2CC_DETECT_MS's. What the ACK says is
 * what the replay finds: the entries retired meanwhile were executed, the
 * ones appended since were not (lock held).
 */
static void ack_first(struct r2cc_mig_qp *mq)
{
	if (mq->fb.acked || peer_consumed(mq, &mq->fb.acked_recvs))
		return;
	mq->fb.acked = true;
	r2cc_mig_send_fo_taken(mq, R2CC_CTRL_FAILOVER_ACK, mq->why,
			       mq->fb.acked_recvs, false, false);
}

void r2cc_mig_replay(struct r2cc_mig_qp *mq)
{
	const struct r2cc_sendlog_ent *e;
	bool back = r2cc_mig_back(mq), taken;
	struct r2cc_replay res;
	struct ibv_send_wr *w;
	uint64_t bytes = 0, consumed;
	uint32_t i, lead;
	int ret, mtu;

	if ((mq->life != R2CC_LIFE_FENCED && mq->life != R2CC_LIFE_RECVS) ||
	    mq->peer_rq_psn == R2CC_PSN_NONE)
		return;
	/* A lazy QP's new backups: into the peer's once it is connected to
	 * ours (not dropped at a QP still in INIT). */
	if (mq->lz.made && !(mq->lz.conn && mq->lz.peer_conn))
		return;
	if (back && !mq->fb.peer_posted) {
		ack_first(mq);
		return;
	}
	memset(&res, 0, sizeof(res));
	/* The incarnation left behind may be mid-way through a READ's
	 * response: its next use heals it. */
	if (r2cc_sendlog_reading(mq->slog)) {
		if (back)
			mq->bstale = true;
		else
			mq->pstale = true;
	}
	if (peer_consumed(mq, &consumed))
		return;
	/* A QP that never reached RTS sent nothing: nothing to replay. */
	ret = mq->rts ? r2cc_sendlog_replay(mq->slog, mq->peer_rq_psn, &res) :
			0;
	if (ret) {
		bad_rq_psn(mq, ret);
		return;
	}
	taken = partly_sent(mq);
	for (i = 0; R2CC_DATAPATH_DEBUG && i < 64 &&
		    (e = r2cc_sendlog_peek(mq->slog, i));
	     i++)
		r2cc_dbg_dp("QP %#x: log[%u] wr_id %#llx op %d signaled %d "
			    "disp %d",
			    mq->qpn, i, (unsigned long long)e->wr.wr_id,
			    e->wr.opcode, e->signaled, e->disp);
	r2cc_mig_drain_done(mq); /* the head the peer executed completes now */
	if (!mq->fb.acked) {
		r2cc_mig_send_fo_taken(mq, R2CC_CTRL_FAILOVER_ACK, mq->why,
				       consumed, false, taken);
	} else if (consumed != mq->fb.acked_recvs) {
		/* (cannot happen: the peer re-posted after the wrong count) */
		r2cc_err("QP %#x: %llu of the peer's receives consumed, %llu "
			 "told",
			 mq->qpn, (unsigned long long)consumed,
			 (unsigned long long)mq->fb.acked_recvs);
		r2cc_mig_abandon(mq,
				 "its count of the peer's receives changed");
		return;
	}
	/* From now on the log counts PSNs of the new QP's path. */
	mtu = r2cc_mtu_bytes(back ? mq->attr.path_mtu : mq->bmtu);
	lead = mtu < 0 ? 0 : heal(mq, back, res.nreplay);
	ret = mtu < 0 ?
		      mtu :
		      r2cc_sendlog_start(mq->slog, back ? mq->fb.psn : mq->bpsn,
					 lead, (uint32_t)mtu);
	for (w = res.first; !ret && w; w = w->next) {
		ret = back ? r2cc_mig_primary_send(mq, w) :
			     r2cc_mig_backup_send(mq, w);
		bytes += r2cc_wr_len(w);
	}
	if (ret) {
		r2cc_err("QP %#x: replay on the %s failed (%s)", mq->qpn,
			 back ? "primary" : "backup", strerror(-ret));
		r2cc_mig_abandon(mq, "the replay failed");
		return;
	}
	if (!back)
		r2cc_mig_bcq_join(mq);
	r2cc_mig_ring(mq, mq->scq); /* what the replay stashed */
	if (mq->slot && !back) {
		atomic_fetch_add(&mq->slot->failovers, 1);
		atomic_fetch_add(&mq->slot->replayed_wrs, res.nreplay);
		atomic_fetch_add(&mq->slot->replayed_bytes, bytes);
	}
	if (!back)
		r2cc_mig_set_state(mq, R2CC_PROT_MIGRATED);
	r2cc_mig_event(mq, back ? R2CC_EV_FAILBACK : R2CC_EV_FAILOVER,
		       res.nreplay, bytes);
	if (back)
		r2cc_info(
			"QP %#x moved back to rail %d: %u WRs replayed "
			"(%llu bytes), %u executed by the peer, %llu us "
			"after the fence",
			mq->qpn, mq->rail, res.nreplay,
			(unsigned long long)bytes, res.nskipped,
			(unsigned long long)(r2cc_mig_now_ns() - mq->fault_ns) /
				1000);
	else
		r2cc_info("QP %#x moved to backup QP %#x (rail %d): %u WRs "
			  "replayed (%llu bytes), %u executed by the peer, "
			  "peer rq_psn %#x",
			  mq->qpn, mq->bqp->qp_num, mq->backup_rail,
			  res.nreplay, (unsigned long long)bytes, res.nskipped,
			  mq->peer_rq_psn);
	moved(mq, R2CC_MEV_REPLAYED);
}

/*
 * Moving back: the fenced backup's consumed receives still in its CQ
 * must come before anything the primary completes, and the program polls
 * its own CQ first: they go to the stash now, the rest of that CQ is
 * hidden (held). Their successes were made before the peer counted them,
 * so this is short; bounded at 200 ms all the same.
 */
static void backup_drain(struct r2cc_mig_qp *mq)
{
	struct r2cc_recvlog_stats rs;
	struct ibv_wc wc;
	int spins = 0;

	for (;;) {
		if (r2cc_mig_bcq_take(mq, &wc)) {
			struct r2cc_mig_cq *mc = r2cc_mig_prog_cq(mq, &wc);

			wc.qp_num = mq->qpn;
			if (r2cc_mig_old_wc(mq, mc, &wc) &&
			    r2cc_wcstash_push(mc->stash, &wc, 1))
				r2cc_err("QP %#x: completion stash full: "
					 "wr_id %#llx lost",
					 mq->qpn, (unsigned long long)wc.wr_id);
			continue;
		}
		r2cc_recvlog_get_stats(mq->rlog, &rs);
		if (!rs.pending || ++spins > 200)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
	if (rs.pending)
		r2cc_err("QP %#x: %u consumed receives not completed by the "
			 "backup",
			 mq->qpn, rs.pending);
}

/* The peer told us how many of our receives its SENDs consumed. */
static void repost(struct r2cc_mig_qp *mq, uint64_t consumed, bool taken)
{
	bool back = r2cc_mig_back(mq);
	struct r2cc_recv_replay res;
	struct ibv_recv_wr *w;
	int ret;

	if (mq->life != R2CC_LIFE_FENCED && mq->life != R2CC_LIFE_SENDS)
		return;
	if (mq->srq) {
		/* The SRQ moves them, all its QPs' at once (srq.c) */
		if (r2cc_mig_srq_ack(mq, consumed, taken))
			r2cc_mig_fail(mq, "its SRQ cannot move");
		return;
	}
	ret = r2cc_recvlog_fence(mq->rlog, consumed, &res);
	if (!ret && back)
		backup_drain(mq);
	for (w = res.first; !ret && w; w = w->next)
		ret = back ? r2cc_mig_primary_recv(mq, w) :
			     r2cc_mig_backup_recv(mq, w);
	if (ret) {
		/* (a count past what was posted: a peer out of step, or one
		 * that lies) the move ends now, not at the tick's bound */
		r2cc_err("QP %#x: receives not re-posted on the %s (%s)",
			 mq->qpn, back ? "primary" : "backup", strerror(-ret));
		r2cc_mig_fail(mq, "its receives cannot move");
		return;
	}
	r2cc_mig_ring(mq, mq->rcq);
	r2cc_info("QP %#x: %u receives re-posted on the %s, %u consumed "
		  "before the fence",
		  mq->qpn, res.nrepost, back ? "primary" : "backup",
		  res.npending);
	if (back)
		r2cc_mig_fb_posted(mq);
	moved(mq, R2CC_MEV_REPOSTED);
}

void r2cc_mig_recv_moved(struct r2cc_mig_qp *mq)
{
	if (mq->life != R2CC_LIFE_FENCED && mq->life != R2CC_LIFE_SENDS)
		return;
	r2cc_mig_ring(mq, mq->rcq);
	moved(mq, R2CC_MEV_REPOSTED);
}

/* Is @m (the peer's FAILOVER*) about @mq? */
void r2cc_mig_got_failover(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	bool back = m->failover.reason == R2CC_CTRL_WHY_FAILBACK;
	struct r2cc_mig_qp *mq;

	mq = r2cc_mig_by_dest(peer, m->failover.qpn);
	if (!mq) {
		r2cc_mig_unknown("failover", peer, m->failover.qpn);
		return;
	}
	r2cc_chan_answered(peer); /* moves go on with it (tick.c) */
	r2cc_qlock_lock(&mq->lock);
	if (m->hdr.type == R2CC_CTRL_FAILOVER &&
	    !(m->failover.flags & R2CC_CTRL_FO_PSN_VALID)) {
		/* The peer cannot move: its side is in ERR or soon will be. */
		r2cc_mig_abandon(mq, "the peer cannot move this connection");
		goto out;
	}
	if (back && !r2cc_mig_back(mq) && !r2cc_mig_fb_join(mq)) {
		/* The peer moves back and this side cannot (its recycle
		 * failed, or it is not on its backup): say so. */
		r2cc_warn("QP %#x: the peer moves back, this side cannot",
			  mq->qpn);
		if (m->hdr.type == R2CC_CTRL_FAILOVER)
			r2cc_mig_send_fo(mq, R2CC_CTRL_FAILOVER,
					 R2CC_CTRL_WHY_FAILBACK, 0, true);
		goto out;
	}
	if (!back && mq->on_backup) {
		r2cc_warn("QP %#x: the peer's failover while moving back or "
			  "moved: dropped",
			  mq->qpn);
		goto out;
	}
	if (m->hdr.type == R2CC_CTRL_FAILOVER &&
	    m->failover.flags & R2CC_CTRL_FO_BACKUP && mq->lazy && !back) {
		/* The peer's backup, made now; ours connects to it */
		mq->lz.pknown = true;
		mq->lz.pqpn = m->failover.bqpn;
		mq->lz.ppsn = m->failover.bpsn;
		mq->lz.peer_conn |=
			!!(m->failover.flags & R2CC_CTRL_FO_CONNECTED);
	}
	if (mq->life == R2CC_LIFE_RUN)
		r2cc_mig_fence(mq, R2CC_CTRL_WHY_PEER);
	if (!r2cc_mig_moving(mq)) {
		/* Not protected (any more): say so, the peer gives up now
		 * instead of at its bound. */
		if (m->hdr.type == R2CC_CTRL_FAILOVER)
			r2cc_mig_send_fo(mq, R2CC_CTRL_FAILOVER,
					 m->failover.reason, 0, true);
		goto out;
	}
	if (m->hdr.type == R2CC_CTRL_FAILOVER && mq->lz.made) {
		if (r2cc_mig_lazy_connect(mq)) {
			r2cc_mig_abandon(mq,
					 "its backup could not be connected");
			goto out;
		}
		/* Ours connected after our FAILOVER went out: say so */
		if (mq->lz.conn && !mq->lz.said)
			r2cc_mig_send_fo(mq, R2CC_CTRL_FAILOVER, mq->why, 0,
					 false);
	}
	if (m->hdr.type == R2CC_CTRL_FAILOVER) {
		if (mq->peer_rq_psn == R2CC_PSN_NONE)
			mq->peer_rq_psn = m->failover.rq_psn;
		r2cc_mig_replay(mq);
	} else if (m->hdr.type == R2CC_CTRL_FAILOVER_ACK) {
		repost(mq, m->failover.recvs,
		       m->failover.flags & R2CC_CTRL_FO_RECV_TAKEN);
	}
out:
	r2cc_qlock_unlock(&mq->lock);
	if (mq->srq && atomic_load(&ps.srq_sweep))
		r2cc_mig_srq_sweep();
}
