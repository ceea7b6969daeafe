/* SPDX-License-Identifier: MIT */
/*
 * complete.c - a protected QP's completions: its logs retired as the
 * program polls, a fenced incarnation's completions hidden (held while
 * the move may yet be abandoned), the standby's merged into the program's
 * CQ, and work the peer executed completed in its place, in order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bcq.h"
#include "complete.h"
#include "failback.h"
#include "fence.h"
#include "mig_int.h"
#include "module.h"
#include "post.h"
#include "sendlog_int.h"
#include "srq.h"
#include "tick.h"
#include "wake.h"

/* The program's CQ a completion of @mq belongs to. */
struct r2cc_mig_cq *r2cc_mig_prog_cq(const struct r2cc_mig_qp *mq,
				     const struct ibv_wc *wc)
{
	return wc->opcode & IBV_WC_RECV ? mq->rcq : mq->scq;
}

/* -Ddatapath_debug: what became of one completion of @mq, for a while
 * after each fence (lock held). */
static void trace_wc(struct r2cc_mig_qp *mq, const char *what,
		     const struct ibv_wc *wc)
{
	if (!R2CC_DATAPATH_DEBUG || !mq->dbg_left)
		return;
	mq->dbg_left--;
	r2cc_dbg_dp("QP %#x: %s wr_id %#llx op %d status %d (%s, backup "
		    "%d) at %llu",
		    mq->qpn, what, (unsigned long long)wc->wr_id, wc->opcode,
		    wc->status, r2cc_mig_life_name(mq->life), mq->on_backup,
		    (unsigned long long)r2cc_mig_now_ns());
}

/* Is the incarnation on @backup (0 the primary, 1 the backup) a fenced or
 * retired one, whose completions the move covers? */
static bool is_old(const struct r2cc_mig_qp *mq, int backup)
{
	return r2cc_mig_moving(mq) ? backup == mq->on_backup :
				     backup != mq->on_backup;
}

void r2cc_mig_synth(struct r2cc_mig_qp *mq, const struct r2cc_sendlog_ent *e,
		    enum ibv_wc_status status)
{
	struct ibv_wc wc;
	int op = r2cc_wc_opcode(e->wr.opcode);

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = e->wr.wr_id;
	wc.status = status;
	wc.opcode = op < 0 ? IBV_WC_SEND : (enum ibv_wc_opcode)op;
	wc.qp_num = mq->qpn;
	if (e->wr.opcode == IBV_WR_RDMA_READ)
		wc.byte_len = (uint32_t)e->len;
	trace_wc(mq, "synthesised", &wc);
	if (r2cc_wcstash_push(mq->scq->stash, &wc, 1))
		r2cc_err("QP %#x: completion stash full: wr_id %#llx lost",
			 mq->qpn, (unsigned long long)e->wr.wr_id);
}

/* An entry the move already decided (executed by the peer, or lost or
 * flushed behind a lost atomic): it completes without the QP. */
static bool owed(const struct r2cc_sendlog_ent *e)
{
	return e->disp == R2CC_SL_DONE || e->disp == R2CC_SL_LOST ||
	       e->disp == R2CC_SL_FLUSH;
}

/* Synthesise @e's completion (an owed entry): its own outcome, or a flush
 * when @failed (an error came first; only signaled ones then). Whether
 * one was. */
static bool complete_owed(struct r2cc_mig_qp *mq,
			  const struct r2cc_sendlog_ent *e, bool failed)
{
	if (!failed && e->disp != R2CC_SL_DONE) {
		r2cc_mig_synth(mq, e,
			       e->disp == R2CC_SL_LOST ? IBV_WC_RETRY_EXC_ERR :
							 IBV_WC_WR_FLUSH_ERR);
		return true;
	}
	if (!e->signaled)
		return false;
	r2cc_mig_synth(mq, e, failed ? IBV_WC_WR_FLUSH_ERR : IBV_WC_SUCCESS);
	return true;
}

/* Oldest entries the peer executed (DONE) complete here, in order. */
void r2cc_mig_drain_done(struct r2cc_mig_qp *mq)
{
	const struct r2cc_sendlog_ent *e;

	while ((e = r2cc_sendlog_peek(mq->slog, 0)) && owed(e)) {
		if (e->disp == R2CC_SL_DONE &&
		    r2cc_wr_consumes_recv(e->wr.opcode))
			mq->consumers_done++;
		complete_owed(mq, e, false);
		r2cc_sendlog_retire(mq->slog, 1);
	}
}

/* Synthesise the signaled DONE entries among the @idx oldest: count. */
static int done_before(struct r2cc_mig_qp *mq, uint32_t idx)
{
	const struct r2cc_sendlog_ent *e;
	uint32_t i;
	int n = 0;

	for (i = 0; i < idx && (e = r2cc_sendlog_peek(mq->slog, i)); i++)
		if (e->disp == R2CC_SL_DONE && e->signaled) {
			r2cc_mig_synth(mq, e, IBV_WC_SUCCESS);
			n++;
		}
	return n;
}

/* @wc goes to the stash of @mc, behind what is there: 2; 1 when it
 * cannot (it is delivered now, out of order rather than lost). */
static int stash_behind(struct r2cc_mig_qp *mq, struct r2cc_mig_cq *mc,
			const struct ibv_wc *wc)
{
	if (mc && !r2cc_wcstash_push(mc->stash, wc, 1))
		return 2;
	r2cc_err("QP %#x: completion stash full: wr_id %#llx delivered out "
		 "of order",
		 mq->qpn, (unsigned long long)wc->wr_id);
	return 1;
}

/*
 * A successful send completion of the current incarnation: its entry
 * retires, with the unsignaled ones before it, counting what consumed a
 * receive at the peer. Signaled WRs the peer executed that sit before it
 * (a re-read READ came first) complete before it, and @behind says the
 * poll already queues in the stash: then it goes to the stash, and before
 * the DONE entries after it, which complete now. 1: deliver it; 2:
 * stashed.
 */
static __attribute__((noinline)) int
send_ok_walk(struct r2cc_mig_qp *mq, const struct ibv_wc *wc, bool behind)
{
	const struct r2cc_sendlog_ent *me;
	bool marked;
	int keep = 1, idx;

	idx = r2cc_sendlog_match(mq->slog, wc->wr_id, wc->opcode);
	marked = r2cc_sendlog_marked(mq->slog);

	if (idx < 0) {
		r2cc_mig_give_up(mq, "a send completion the log does not know",
				 idx);
		return behind ? stash_behind(mq, mq->scq, wc) : 1;
	}
	me = r2cc_sendlog_peek(mq->slog, (uint32_t)idx);
	if (((marked && idx > 0 && done_before(mq, (uint32_t)idx)) || behind) &&
	    me->signaled)
		keep = stash_behind(mq, mq->scq, wc);
	if (!me->signaled)
		keep = 0; /* a forced one's: the program did not ask */
	mq->consumers_done +=
		r2cc_sendlog_consumers(mq->slog, (uint32_t)idx + 1);
	r2cc_sendlog_retire(mq->slog, (uint32_t)idx + 1);
	if (marked)
		r2cc_mig_drain_done(mq);
	return keep;
}

/* send_ok_walk()'s common case, inline: no move's marks, nothing queued
 * before it */
static inline int send_ok(struct r2cc_mig_qp *mq, const struct ibv_wc *wc,
			  bool behind)
{
	uint32_t consumers;

	if (!behind && r2cc_sendlog_next_done(mq->slog, wc->wr_id, wc->opcode,
					      &consumers) > 0) {
		mq->consumers_done += consumers;
		return 1;
	}
	return send_ok_walk(mq, wc, behind);
}

/* Does the send log hold work the peer executed, not completed yet? */
static bool owes(const struct r2cc_mig_qp *mq)
{
	const struct r2cc_sendlog_ent *e;
	uint32_t i;

	for (i = 0; (e = r2cc_sendlog_peek(mq->slog, i)); i++)
		if (owed(e))
			return true;
	return false;
}

void r2cc_mig_stop_logging(struct r2cc_mig_qp *mq)
{
	if (!r2cc_mig_logs(mq))
		return;
	if (r2cc_mig_step(mq, R2CC_MEV_STOP) && !(mq->slog && owes(mq)))
		r2cc_mig_step(mq, R2CC_MEV_DRAINED);
}

/* The log is done with (lock held): everything it still owes completes
 * now, in order (flushed when @failed). Whether any was synthesised. */
static bool settle(struct r2cc_mig_qp *mq, bool failed)
{
	struct r2cc_sendlog_stats ss;
	const struct r2cc_sendlog_ent *e;
	bool any = false;
	uint32_t i;

	r2cc_sendlog_get_stats(mq->slog, &ss);
	for (i = 0; (e = r2cc_sendlog_peek(mq->slog, i)); i++)
		if (owed(e))
			any |= complete_owed(mq, e, failed);
	r2cc_sendlog_retire(mq->slog, ss.outstanding);
	return any;
}

/*
 * A send completion of a QP no longer logging whose log still owes
 * (lock held). A success the log knows retires as when logging; one it
 * does not (posted since) comes after everything the log holds: the
 * successes owed complete first. An error is the oldest WR's not
 * completed (what the peer executed before it completed already): it
 * comes first, the work owed after it flushes, as it would natively.
 * Then the log is done with. 1: deliver it; 2: stashed.
 */
static int drain_wc(struct r2cc_mig_qp *mq, const struct ibv_wc *wc,
		    bool behind)
{
	int keep;

	if (wc->status == IBV_WC_SUCCESS &&
	    r2cc_sendlog_match(mq->slog, wc->wr_id, wc->opcode) >= 0) {
		keep = send_ok(mq, wc, behind);
		if (!owes(mq))
			r2cc_mig_step(mq, R2CC_MEV_DRAINED);
		return keep;
	}
	r2cc_mig_step(mq, R2CC_MEV_DRAINED);
	if (wc->status != IBV_WC_SUCCESS) {
		keep = behind ? stash_behind(mq, mq->scq, wc) : 1;
		settle(mq, true);
		return keep;
	}
	if (settle(mq, false))
		behind = true;
	return behind ? stash_behind(mq, mq->scq, wc) : 1;
}

static bool path_fault(enum ibv_wc_status s)
{
	/* What a dead path or NIC gives; access and protection errors are
	 * the program's own and pass through. */
	/* rxe completes sends with LOC_QP_OP_ERR once its netdev is down
	 * (lab): a path fault that may beat the carrier event. */
	return s == IBV_WC_RETRY_EXC_ERR || s == IBV_WC_WR_FLUSH_ERR ||
	       s == IBV_WC_LOC_QP_OP_ERR || s == IBV_WC_RNR_RETRY_EXC_ERR ||
	       s == IBV_WC_FATAL_ERR || s == IBV_WC_RESP_TIMEOUT_ERR ||
	       s == IBV_WC_GENERAL_ERR;
}

/*
 * Is the program's QP in ERR (lock held)? A recycled one that is has
 * died itself, and an error completion need not come first: the lab saw
 * a moved-back rxe QP in ERR with flushes only. Hidden as the first
 * incarnation's, they left its work uncompleted for good. When the query
 * fails, the QP is taken to run.
 */
static bool primary_err(struct r2cc_mig_qp *mq)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	return !ps.v.query_qp(mq->qp, &a, IBV_QP_STATE, &init) &&
	       a.qp_state == IBV_QPS_ERR;
}

/* A completion of the fenced primary hidden from the program: kept until
 * the move succeeds (dropped) or is abandoned (delivered). */
static void hold(struct r2cc_mig_qp *mq, struct r2cc_mig_cq *mc,
		 const struct ibv_wc *wc)
{
	if (!mq->held)
		return;
	if (!mc || mq->nheld == mq->held_cap) {
		mq->held_lost++;
		return;
	}
	mq->held[mq->nheld].mc = mc;
	mq->held[mq->nheld++].wc = *wc;
}

/* The move is done (both directions): nothing hidden is needed any more. */
void r2cc_mig_unhold(struct r2cc_mig_qp *mq)
{
	free(mq->held);
	mq->held = NULL;
	mq->nheld = mq->held_cap = 0;
}

void r2cc_mig_hold_start(struct r2cc_mig_qp *mq)
{
	/* Room for one completion per WR the fenced QP may still make; on
	 * no memory, hidden ones cannot be given back (counted). */
	mq->nheld = 0;
	mq->held_lost = 0;
	mq->held_cap = 2 * (mq->cap.max_send_wr + mq->cap.max_recv_wr) + 2;
	mq->held = calloc(mq->held_cap, sizeof(*mq->held));
	if (!mq->held)
		mq->held_cap = 0;
}

void r2cc_mig_give_back(struct r2cc_mig_qp *mq)
{
	uint32_t i;

	for (i = 0; i < mq->nheld; i++)
		if (r2cc_wcstash_push(mq->held[i].mc->stash, &mq->held[i].wc,
				      1))
			mq->held_lost++;
	if (mq->held_lost)
		r2cc_err("QP %#x: %llu hidden completions could not be kept",
			 mq->qpn, (unsigned long long)mq->held_lost);
	r2cc_mig_unhold(mq);
}

/* A successful receive of @mq polled: its log entry retires (lock held). */
static int recv_ok(struct r2cc_mig_qp *mq, const struct ibv_wc *wc)
{
	if (mq->srq) {
		r2cc_mig_srq_retire(mq, wc->wr_id, true);
		return 0;
	}
	return r2cc_recvlog_complete(mq->rlog, wc->wr_id);
}

/* A completion of a fenced or retired incarnation: the receives the
 * peer's executed SENDs consumed are delivered (in log order); the rest is
 * covered by the move: hidden, and held while the move may yet be
 * abandoned. 1: deliver. */
int r2cc_mig_old_wc(struct r2cc_mig_qp *mq, struct r2cc_mig_cq *mc,
		    const struct ibv_wc *wc)
{
	if (wc->status == IBV_WC_SUCCESS && (wc->opcode & IBV_WC_RECV)) {
		recv_ok(mq, wc);
		return 1;
	}
	hold(mq, mc, wc);
	return 0;
}

int r2cc_mig_wc(struct r2cc_mig_qp *mq, struct r2cc_mig_cq *mc,
		struct ibv_wc *wc, bool behind)
{
	bool recv = wc->opcode & IBV_WC_RECV;
	int keep = 1, err;

	/* r2cc's own (r2cc_mig_ring(), move.c's heal()): a heal that
	 * failed left the QP in ERR, which the program's WRs then show */
	if (wc->wr_id == R2CC_RING_WRID || wc->wr_id == R2CC_HEAL_WRID)
		return 0;
	r2cc_qlock_lock(&mq->lock);
	if (!r2cc_mig_logs(mq)) {
		if (mq->life == R2CC_LIFE_DRAIN && !recv) {
			keep = drain_wc(mq, wc, behind);
			goto traced;
		}
		goto out;
	}
	if (is_old(mq, 0)) {
		keep = r2cc_mig_old_wc(mq, mc, wc);
		goto out;
	}
	if (wc->status == IBV_WC_SUCCESS) {
		if (!recv) {
			keep = send_ok(mq, wc, behind);
			goto traced;
		}
		if ((err = recv_ok(mq, wc)))
			r2cc_mig_give_up(
				mq,
				"a receive completion the log does not "
				"know",
				err);
		goto out;
	}
	if (mq->recycled) {
		/* Moved back: the first incarnation's flushes may still sit
		 * in the CQ (covered by the failover) while this one runs. */
		if (wc->status == IBV_WC_WR_FLUSH_ERR && !primary_err(mq)) {
			keep = 0;
			goto out;
		}
		mq->recycled = false;
	}
	if (r2cc_mig_state(mq) == R2CC_PROT_READY && path_fault(wc->status)) {
		r2cc_info("QP %#x: %s: failing over", mq->qpn,
			  ibv_wc_status_str(wc->status));
		r2cc_mig_fence(mq, R2CC_CTRL_WHY_CQ_ERROR);
		if (r2cc_mig_moving(mq)) {
			hold(mq, mc, wc);
			keep = 0;
		}
	}
	/* A receive error the program sees (not a path's, or not moved):
	 * the SRQ's WR it consumed retires. */
	if (keep && recv && mq->srq)
		r2cc_mig_srq_retire(mq, wc->wr_id, false);
out:
	if (keep == 1 && behind)
		keep = stash_behind(mq, mc, wc);
traced:
	trace_wc(mq,
		 keep == 1 ? "primary: delivered" :
		 keep == 2 ? "primary: stashed behind" :
			     "primary: hidden",
		 wc);
	r2cc_qlock_unlock(&mq->lock);
	return keep;
}

int r2cc_mig_backup_wc(struct r2cc_mig_qp *mq, bool rcq, struct ibv_wc *wc)
{
	int got = 1;

	if (!mq->bqp)
		return 0; /* released */
	wc->qp_num = mq->qpn;
	if (wc->wr_id == R2CC_HEAL_WRID) {
		got = -1; /* r2cc's own: see r2cc_mig_wc() */
	} else if (!r2cc_mig_logs(mq)) {
		/* Abandoned, or logging stopped: as the provider said it,
		 * after what the log still owes. */
		if (mq->life == R2CC_LIFE_DRAIN && !(wc->opcode & IBV_WC_RECV))
			got = drain_wc(mq, wc, false) == 1 ? 1 : -1;
	} else if (is_old(mq, 1)) {
		got = r2cc_mig_old_wc(mq, r2cc_mig_prog_cq(mq, wc), wc) ? 1 :
									  -1;
	} else if (wc->status != IBV_WC_SUCCESS &&
		   (mq->fb.urgent ||
		    (path_fault(wc->status) && r2cc_mig_fb_urgent(mq)))) {
		/* The backup failed and the primary's rail is up: the QP
		 * moves back at once; this is covered by the move. */
		hold(mq, r2cc_mig_prog_cq(mq, wc), wc);
		got = -1;
	} else if (wc->status != IBV_WC_SUCCESS) {
		/* The backup failed too: the native error, as without r2cc. */
		if (r2cc_mig_state(mq) != R2CC_PROT_FAILED)
			r2cc_err("QP %#x: its backup QP %#x failed too (%s, on "
				 "its %s CQ, wr_id %#llx, vendor_err %#x, %s): "
				 "the program sees the error",
				 mq->qpn, mq->bqp->qp_num,
				 ibv_wc_status_str(wc->status),
				 !mq->bs[1].b ? "one" :
				 rcq	      ? "receive" :
						"send",
				 (unsigned long long)wc->wr_id, wc->vendor_err,
				 r2cc_mig_life_name(mq->life));
		r2cc_mig_set_state(mq, R2CC_PROT_FAILED);
	} else if (wc->opcode & IBV_WC_RECV) {
		recv_ok(mq, wc);
	} else {
		got = send_ok(mq, wc, false) == 1 ? 1 : -1;
	}
	if (!mq->first_replay_ns && !is_old(mq, 1)) {
		struct timespec ts;

		/* Wall-clock time too, to line it up with the fault's. */
		clock_gettime(CLOCK_REALTIME, &ts);
		mq->first_replay_ns = r2cc_mig_now_ns();
		r2cc_info("QP %#x: first completion on the backup %llu us "
			  "after the fence, at %lld.%06ld",
			  mq->qpn,
			  (unsigned long long)(mq->first_replay_ns -
					       mq->fault_ns) /
				  1000,
			  (long long)ts.tv_sec, ts.tv_nsec / 1000);
	}
	trace_wc(mq, got > 0 ? "backup: delivered" : "backup: hidden", wc);
	return got;
}

int r2cc_mig_poll_stash(struct r2cc_mig_cq *mc, int n, struct ibv_wc *wc)
{
	return r2cc_wcstash_empty(mc->stash) ?
		       0 :
		       r2cc_wcstash_pop(mc->stash, wc, n);
}

uint64_t r2cc_mig_pushed(struct r2cc_mig_cq *mc)
{
	return r2cc_wcstash_pushed(mc->stash);
}

int r2cc_mig_poll_more(struct r2cc_mig_cq *mc, int n, struct ibv_wc *wc)
{
	int got = 0;

	if (!r2cc_wcstash_empty(mc->stash))
		got = r2cc_wcstash_pop(mc->stash, wc, n);
	if (got < n && r2cc_wcstash_empty(mc->stash))
		got += r2cc_mig_bcq_poll(mc, n - got, wc + got);
	return got;
}

int r2cc_mig_stash(struct r2cc_mig_cq *mc, const struct ibv_wc *wc)
{
	return r2cc_wcstash_push(mc->stash, wc, 1);
}
