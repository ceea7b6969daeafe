/* SPDX-License-Identifier: MIT */
/*
 * failover.c - a protected QP's data path and its move to the backup
 * (DESIGN §6): the send and receive logs kept at each post and poll, the
 * fence (primary to ERR, our rq_psn read and sent), the exactly-once
 * replay from the peer's rq_psn, the receives re-posted from the count the
 * peer reports, and the completions merged into the program's CQs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chan.h"
#include "mig_int.h"

uint64_t r2cc_mig_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint32_t st_of(const struct r2cc_mig_qp *mq)
{
	return atomic_load_explicit(&mq->state, memory_order_acquire);
}

static bool consumes_recv(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ||
	       op == IBV_WR_SEND_WITH_INV || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static void abandon(struct r2cc_mig_qp *mq, const char *why);

/* Logging stops for good: the QP runs as if r2cc were not there (a move
 * that has replayed nothing yet is abandoned). */
static void give_up(struct r2cc_mig_qp *mq, const char *why, int err)
{
	if (mq->life == R2CC_LIFE_FENCED || mq->life == R2CC_LIFE_RECVS) {
		abandon(mq, why);
		return;
	}
	if (!r2cc_mig_logs(mq))
		return;
	r2cc_mig_stop_logging(mq);
	r2cc_warn("QP %#x: %s (%s): unprotected from now on", mq->qpn, why,
		  strerror(err < 0 ? -err : err));
	if (st_of(mq) != R2CC_PROT_MIGRATED)
		r2cc_mig_set_state(mq, R2CC_PROT_NONE);
}

/* ---- key translation ---- */

static int rkey_xlate(const struct r2cc_mig_qp *mq, uint32_t rkey,
		      uint32_t *out)
{
	int i, ret = -ENOENT;

	pthread_rwlock_rdlock(&ps.mr_lock);
	for (i = 0; i < ps.nmrs; i++)
		if (ps.mrs[i].peer == mq->peer && ps.mrs[i].mr.rkey == rkey &&
		    ps.mrs[i].rail == mq->backup_rail) {
			*out = ps.mrs[i].mr.backup_rkey;
			ret = 0;
			break;
		}
	pthread_rwlock_unlock(&ps.mr_lock);
	return ret;
}

int r2cc_mig_sge_xlate(const void *pd, int rail, const struct ibv_sge *in,
		       int n, struct ibv_sge *out)
{
	int i;

	if (n > R2CC_MIG_MAX_SGE)
		return -E2BIG;
	for (i = 0; i < n; i++) {
		out[i] = in[i];
		if (!in[i].length && !in[i].lkey)
			continue;
		if (ps.env.lkey_xlate(pd, rail, in[i].lkey, &out[i].lkey))
			return -ENOENT;
	}
	return 0;
}

static int sge_xlate(const struct r2cc_mig_qp *mq, const struct ibv_sge *in,
		     int n, struct ibv_sge *out)
{
	return r2cc_mig_sge_xlate(mq->pd, mq->backup_rail, in, n, out);
}

/* Post one send WR on the backup, keys translated. */
static int backup_send(struct r2cc_mig_qp *mq, const struct ibv_send_wr *wr)
{
	struct ibv_sge sge[R2CC_MIG_MAX_SGE];
	struct ibv_send_wr w = *wr, *bad;
	int ret;

	w.next = NULL;
	if (!(wr->send_flags & IBV_SEND_INLINE)) {
		ret = sge_xlate(mq, wr->sg_list, wr->num_sge, sge);
		if (ret)
			return ret;
		w.sg_list = sge;
	}
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		/* A zero-length one names no memory, and its R_Key need not
		 * be valid (IB spec C9-88): UCX flushes with a 0-byte WRITE
		 * to rkey 0, which no registration translates. */
		ret = r2cc_wr_len(wr) ? rkey_xlate(mq, wr->wr.rdma.rkey,
						   &w.wr.rdma.rkey) :
					0;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		ret = rkey_xlate(mq, wr->wr.atomic.rkey, &w.wr.atomic.rkey);
		break;
	default:
		ret = 0;
	}
	if (ret)
		return ret;
	if (mq->sig_all)
		w.send_flags |= IBV_SEND_SIGNALED;
	ret = mq->bqp->context->ops.post_send(mq->bqp, &w, &bad);
	return ret > 0 ? -ret : ret;
}

static int backup_recv(struct r2cc_mig_qp *mq, const struct ibv_recv_wr *wr)
{
	struct ibv_sge sge[R2CC_MIG_MAX_SGE];
	struct ibv_recv_wr w = *wr, *bad;
	int ret;

	w.next = NULL;
	ret = sge_xlate(mq, wr->sg_list, wr->num_sge, sge);
	if (ret)
		return ret;
	w.sg_list = sge;
	ret = mq->bqp->context->ops.post_recv(mq->bqp, &w, &bad);
	return ret > 0 ? -ret : ret;
}

/* A WR on the program's QP from r2cc (a replay back, or a re-post):
 * through the provider's own post the program last used. */
static int primary_send(struct r2cc_mig_qp *mq, const struct ibv_send_wr *wr)
{
	struct ibv_send_wr w = *wr, *bad;
	int ret;

	if (!mq->psend)
		return -ENOSYS;
	w.next = NULL;
	ret = mq->psend(mq->qp, &w, &bad);
	return ret > 0 ? -ret : ret;
}

static int primary_recv(struct r2cc_mig_qp *mq, const struct ibv_recv_wr *wr)
{
	struct ibv_recv_wr w = *wr, *bad;
	int ret;

	if (!mq->precv)
		return -ENOSYS;
	w.next = NULL;
	ret = mq->precv(mq->qp, &w, &bad);
	return ret > 0 ? -ret : ret;
}

/*
 * Where the program's sends (receives) go now: 0 the primary, 1 the
 * backup, -1 nowhere yet (moving, and that direction not moved yet:
 * @moved says it is; logged, and posted by the move). A QP no longer
 * logging stays where it was.
 */
static int side_of(const struct r2cc_mig_qp *mq, bool moved)
{
	if (!r2cc_mig_moving(mq))
		return mq->on_backup;
	return moved ? !mq->on_backup : -1;
}

/* The program's CQ a completion of @mq belongs to. */
static struct r2cc_mig_cq *prog_cq(const struct r2cc_mig_qp *mq,
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

/* ---- the program's posts ---- */

/* r2cc_mig_refuse(), mq lock held */
static void refuse(struct r2cc_mig_qp *mq, const char *why)
{
	if (mq->life == R2CC_LIFE_RUN)
		give_up(mq, why, EOPNOTSUPP);
	else
		r2cc_mig_fail(mq, why);
}

/* Does @wr's chain bind or invalidate a memory window? */
static bool mw_op(const struct ibv_send_wr *wr)
{
	for (; wr; wr = wr->next)
		if (wr->opcode == IBV_WR_BIND_MW ||
		    wr->opcode == IBV_WR_LOCAL_INV ||
		    wr->opcode == IBV_WR_SEND_WITH_INV)
			return true;
	return false;
}

int r2cc_mig_post_send(struct r2cc_mig_qp *mq, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad,
		       int (*post)(struct ibv_qp *, struct ibv_send_wr *,
				   struct ibv_send_wr **))
{
	struct ibv_send_wr *w, *stop = NULL;
	int ret = 0, err, side;

	pthread_mutex_lock(&mq->lock);
	mq->psend = post;
	/* A window bound or invalidated cannot be replayed on another rail
	 * (nor its rkey translated there): refused before it is posted. */
	if (r2cc_mig_logs(mq) && mw_op(wr))
		refuse(mq, "it posts memory-window operations");
	side = side_of(mq, mq->life == R2CC_LIFE_SENDS);
	if (side == 0) {
		ret = post(mq->qp, wr, bad);
		if (ret)
			stop = *bad;
		if (!r2cc_mig_logs(mq))
			goto out;
	}
	for (w = wr; w && w != stop; w = w->next) {
		if (side == 1 && (err = backup_send(mq, w))) {
			*bad = w;
			ret = -err;
			break;
		}
		if (!r2cc_mig_logs(mq))
			continue;
		err = r2cc_sendlog_append(mq->slog, w);
		if (err) {
			give_up(mq, "send log", err);
			if (side < 0) {
				*bad = w; /* posted nowhere */
				ret = ENOMEM;
				break;
			}
			continue; /* posted: the rest of the chain too */
		}
		if (side < 0)
			mq->unposted_sends++;
	}
out:
	pthread_mutex_unlock(&mq->lock);
	return ret;
}

int r2cc_mig_post_recv(struct r2cc_mig_qp *mq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad,
		       int (*post)(struct ibv_qp *, struct ibv_recv_wr *,
				   struct ibv_recv_wr **))
{
	struct ibv_recv_wr *w, *stop = NULL;
	int ret = 0, err, side;

	pthread_mutex_lock(&mq->lock);
	mq->precv = post;
	side = side_of(mq, mq->life == R2CC_LIFE_RECVS);
	if (side == 0) {
		ret = post(mq->qp, wr, bad);
		if (ret)
			stop = *bad;
		if (!r2cc_mig_logs(mq))
			goto out;
	}
	for (w = wr; w && w != stop; w = w->next) {
		if (side == 1 && (err = backup_recv(mq, w))) {
			*bad = w;
			ret = -err;
			break;
		}
		if (!r2cc_mig_logs(mq))
			continue;
		err = r2cc_recvlog_append(mq->rlog, w);
		if (err == 1) {
			struct r2cc_recvlog_stats st;

			r2cc_recvlog_get_stats(mq->rlog, &st);
			r2cc_info("QP %#x: receive log grown: %u receives "
				  "posted and not yet polled (max_recv_wr %u)",
				  mq->qpn, st.outstanding, mq->cap.max_recv_wr);
			err = 0;
		}
		if (err) {
			give_up(mq, "receive log", err);
			if (side < 0) {
				*bad = w;
				ret = ENOMEM;
				break;
			}
			continue;
		}
		if (side < 0)
			mq->unposted_recvs++;
	}
out:
	pthread_mutex_unlock(&mq->lock);
	return ret;
}

/* ---- completions ---- */

static void synth(struct r2cc_mig_qp *mq, const struct r2cc_sendlog_ent *e,
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
		synth(mq, e,
		      e->disp == R2CC_SL_LOST ? IBV_WC_RETRY_EXC_ERR :
						IBV_WC_WR_FLUSH_ERR);
		return true;
	}
	if (!e->signaled)
		return false;
	synth(mq, e, failed ? IBV_WC_WR_FLUSH_ERR : IBV_WC_SUCCESS);
	return true;
}

/* Oldest entries the peer executed (DONE) complete here, in order. */
static void drain_done(struct r2cc_mig_qp *mq)
{
	const struct r2cc_sendlog_ent *e;

	while ((e = r2cc_sendlog_peek(mq->slog, 0)) && owed(e)) {
		if (e->disp == R2CC_SL_DONE && consumes_recv(e->wr.opcode))
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
			synth(mq, e, IBV_WC_SUCCESS);
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
static int send_ok(struct r2cc_mig_qp *mq, const struct ibv_wc *wc, bool behind)
{
	int idx = r2cc_sendlog_match(mq->slog, wc->wr_id, wc->opcode), i;
	int keep = 1;

	if (idx < 0) {
		give_up(mq, "a send completion the log does not know", idx);
		return behind ? stash_behind(mq, mq->scq, wc) : 1;
	}
	if ((idx > 0 && done_before(mq, (uint32_t)idx)) || behind)
		keep = stash_behind(mq, mq->scq, wc);
	for (i = 0; i <= idx; i++) {
		const struct r2cc_sendlog_ent *e =
			r2cc_sendlog_peek(mq->slog, (uint32_t)i);

		if (e && consumes_recv(e->wr.opcode))
			mq->consumers_done++;
	}
	r2cc_sendlog_retire(mq->slog, (uint32_t)idx + 1);
	drain_done(mq);
	return keep;
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

static void fence(struct r2cc_mig_qp *mq, uint32_t why);

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
static void unhold(struct r2cc_mig_qp *mq)
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

static void ring(struct r2cc_mig_qp *mq, struct r2cc_mig_cq *mc);

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
	unhold(mq);
}

void r2cc_mig_wake(struct r2cc_mig_qp *mq)
{
	ring(mq, mq->scq);
	if (mq->rcq != mq->scq)
		ring(mq, mq->rcq);
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
static int old_wc(struct r2cc_mig_qp *mq, struct r2cc_mig_cq *mc,
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

	if (wc->wr_id == R2CC_RING_WRID)
		return 0; /* r2cc's own: see ring() */
	pthread_mutex_lock(&mq->lock);
	if (!r2cc_mig_logs(mq)) {
		if (mq->life == R2CC_LIFE_DRAIN && !recv) {
			keep = drain_wc(mq, wc, behind);
			goto traced;
		}
		goto out;
	}
	if (is_old(mq, 0)) {
		keep = old_wc(mq, mc, wc);
		goto out;
	}
	if (wc->status == IBV_WC_SUCCESS) {
		if (!recv) {
			keep = send_ok(mq, wc, behind);
			goto traced;
		}
		if ((err = recv_ok(mq, wc)))
			give_up(mq,
				"a receive completion the log does not "
				"know",
				err);
		goto out;
	}
	if (mq->recycled) {
		/* Moved back: the first incarnation's flushes may still sit
		 * in the CQ (covered by the failover); a flush of this one
		 * follows an error of its own. */
		if (wc->status == IBV_WC_WR_FLUSH_ERR) {
			keep = 0;
			goto out;
		}
		mq->recycled = false;
	}
	if (st_of(mq) == R2CC_PROT_READY && path_fault(wc->status)) {
		r2cc_info("QP %#x: %s: failing over", mq->qpn,
			  ibv_wc_status_str(wc->status));
		fence(mq, R2CC_CTRL_WHY_CQ_ERROR);
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
	pthread_mutex_unlock(&mq->lock);
	return keep;
}

/* One completion of a backup CQ, in the program's terms: 1 delivered in
 * @wc, 0 none, -1 taken (hidden, or stashed). */
static int backup_poll1(struct r2cc_mig_qp *mq, struct ibv_cq *bcq,
			struct ibv_wc *wc)
{
	int got;

	pthread_mutex_lock(&mq->lock);
	if (!mq->bqp || (bcq != mq->bscq && bcq != mq->brcq)) {
		pthread_mutex_unlock(&mq->lock); /* released, or a torn read */
		return 0;
	}
	got = bcq->context->ops.poll_cq(bcq, 1, wc);
	if (got <= 0) {
		pthread_mutex_unlock(&mq->lock);
		return 0;
	}
	wc->qp_num = mq->qpn;
	if (!r2cc_mig_logs(mq)) {
		/* Abandoned, or logging stopped: as the provider said it,
		 * after what the log still owes. */
		if (mq->life == R2CC_LIFE_DRAIN && !(wc->opcode & IBV_WC_RECV))
			got = drain_wc(mq, wc, false) == 1 ? 1 : -1;
	} else if (is_old(mq, 1)) {
		got = old_wc(mq, prog_cq(mq, wc), wc) ? 1 : -1;
	} else if (wc->status != IBV_WC_SUCCESS &&
		   (mq->fb.urgent ||
		    (path_fault(wc->status) && r2cc_mig_fb_urgent(mq)))) {
		/* The backup failed and the primary's rail is up: the QP
		 * moves back at once; this is covered by the move. */
		hold(mq, prog_cq(mq, wc), wc);
		got = -1;
	} else if (wc->status != IBV_WC_SUCCESS) {
		/* The backup failed too: the native error, as without r2cc. */
		if (st_of(mq) != R2CC_PROT_FAILED)
			r2cc_err("QP %#x: its backup failed too (%s): the "
				 "program sees the error",
				 mq->qpn, ibv_wc_status_str(wc->status));
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
	pthread_mutex_unlock(&mq->lock);
	return got;
}

/*
 * The list is read without mc->lock (a failover attaches under the QP's
 * lock, so the lock order QP -> CQ forbids holding mc->lock here while
 * taking a QP's). An entry may be stale or torn while a QP is detached:
 * backup_poll1() checks it under the QP's lock, and a released QP's
 * memory is never freed (r2cc_mig_release()).
 */
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
	int got = 0, i, nq;

	if (!r2cc_wcstash_empty(mc->stash))
		got = r2cc_wcstash_pop(mc->stash, wc, n);
	nq = __atomic_load_n(&mc->nqps, __ATOMIC_ACQUIRE);
	for (i = 0; i < nq && got < n; i++) {
		struct r2cc_mig_qp *mq =
			__atomic_load_n(&mc->qps[i], __ATOMIC_ACQUIRE);
		struct ibv_cq *bcq =
			__atomic_load_n(&mc->bcq[i], __ATOMIC_ACQUIRE);

		int r;

		/* One at a time: a completion may let DONE entries after it
		 * complete (stashed), which must come before later ones. */
		while (mq && got < n && r2cc_wcstash_empty(mc->stash) &&
		       (r = backup_poll1(mq, bcq, &wc[got])))
			if (r > 0)
				got++;
	}
	return got;
}

/* ---- completion events ---- */

/*
 * Wake a program sleeping on @mc's completion channel (lock held): its CQ
 * has news it cannot see raise an event (a backup's completion, or one
 * r2cc stashed). If the program armed @mc since the last ring, a
 * zero-length WR posted on @mq's primary, which is in ERR, flushes at once
 * into @mc and raises the event; the flush itself is dropped when polled
 * (R2CC_RING_WRID). A primary a move back recycled rings @mc's doorbell
 * instead (bell.c). One ring per arming: the CQ never fills with them.
 */
static void ring(struct r2cc_mig_qp *mq, struct r2cc_mig_cq *mc)
{
	int ret;

	if (!mc || !atomic_exchange(&mc->armed, 0))
		return;
	/* Only into ERR: a recycled primary would send it. */
	if (!mq->perr) {
		ret = r2cc_mig_bell_ring(mc);
		if (ret)
			atomic_store(&mc->armed, 1);
		return;
	}
	/* A send when it lands on @mc: rxe flushes a send posted in ERR at
	 * once (its post rings the kernel), a receive only when something
	 * else runs the QP. */
	if (mc == mq->scq && mq->psend) {
		struct ibv_send_wr w = { .wr_id = R2CC_RING_WRID,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		ret = mq->psend(mq->qp, &w, &bad);
	} else if (mc == mq->rcq && mq->precv) {
		struct ibv_recv_wr w = { .wr_id = R2CC_RING_WRID }, *bad;

		ret = mq->precv(mq->qp, &w, &bad);
	} else {
		ret = ENOSYS;
	}
	if (ret) {
		atomic_store(&mc->armed, 1);
		r2cc_dbg("QP %#x: no completion event raised (%s)", mq->qpn,
			 strerror(ret));
	}
}

static void arm_backups(struct r2cc_mig_qp *mq)
{
	if (mq->bscq)
		mq->bscq->context->ops.req_notify_cq(mq->bscq, 0);
	if (mq->brcq && mq->brcq != mq->bscq)
		mq->brcq->context->ops.req_notify_cq(mq->brcq, 0);
}

void r2cc_mig_cq_arm(struct r2cc_mig_cq *mc)
{
	int i;

	atomic_store(&mc->armed, 1);
	if (!__atomic_load_n(&mc->nqps, __ATOMIC_ACQUIRE))
		return;
	/* Under the list's lock: a QP being destroyed detaches its backup
	 * CQs (under it) before it destroys them. */
	pthread_mutex_lock(&mc->lock);
	for (i = 0; i < mc->nqps; i++)
		mc->bcq[i]->context->ops.req_notify_cq(mc->bcq[i], 0);
	pthread_mutex_unlock(&mc->lock);
}

void r2cc_mig_ring_ready(int fd, void *arg)
{
	struct ibv_comp_channel *ch = arg;
	struct ibv_cq *cq;
	void *ctx;

	(void)fd;
	/* The fd is non-blocking: every event pending, then EAGAIN. */
	while (!ps.v.get_cq_event(ch, &cq, &ctx)) {
		struct r2cc_mig_qp *mq = ctx; /* never freed */

		/* Acked first: a destroy of this CQ waits for it. */
		ps.v.ack_cq_events(cq, 1);
		pthread_mutex_lock(&mq->lock);
		if (cq == mq->bscq || cq == mq->brcq) {
			cq->context->ops.req_notify_cq(cq, 0);
			ring(mq, cq == mq->bscq ? mq->scq : mq->rcq);
		}
		pthread_mutex_unlock(&mq->lock);
	}
}

static void cq_attach(struct r2cc_mig_cq *mc, struct r2cc_mig_qp *mq,
		      struct ibv_cq *bcq)
{
	pthread_mutex_lock(&mc->lock);
	if (mc->nqps < R2CC_MIG_CQ_QPS) {
		__atomic_store_n(&mc->qps[mc->nqps], mq, __ATOMIC_RELEASE);
		__atomic_store_n(&mc->bcq[mc->nqps], bcq, __ATOMIC_RELEASE);
		__atomic_store_n(&mc->nqps, mc->nqps + 1, __ATOMIC_RELEASE);
	} else {
		r2cc_err("QP %#x: too many migrated QPs on one CQ", mq->qpn);
	}
	pthread_mutex_unlock(&mc->lock);
}

void r2cc_mig_cq_detach(struct r2cc_mig_qp *mq)
{
	struct r2cc_mig_cq *cqs[2] = { mq->scq, mq->rcq };
	int c, i;

	for (c = 0; c < 2; c++) {
		if (!cqs[c])
			continue;
		pthread_mutex_lock(&cqs[c]->lock);
		for (i = 0; i < cqs[c]->nqps; i++) {
			int last = cqs[c]->nqps - 1;

			if (cqs[c]->qps[i] != mq)
				continue;
			__atomic_store_n(&cqs[c]->qps[i], cqs[c]->qps[last],
					 __ATOMIC_RELEASE);
			__atomic_store_n(&cqs[c]->bcq[i], cqs[c]->bcq[last],
					 __ATOMIC_RELEASE);
			__atomic_store_n(&cqs[c]->nqps, last, __ATOMIC_RELEASE);
			i--;
		}
		pthread_mutex_unlock(&cqs[c]->lock);
	}
}

int r2cc_mig_stash(struct r2cc_mig_cq *mc, const struct ibv_wc *wc)
{
	return r2cc_wcstash_push(mc->stash, wc, 1);
}

/* ---- fence, replay, re-post ---- */

/* FAILOVER (our rq_psn), FAILOVER_ACK (@recvs; @taken: see
 * R2CC_CTRL_FO_RECV_TAKEN), or with @type FAILOVER and @refuse: this side
 * cannot move (the peer gives up at once). */
static void send_fo_taken(struct r2cc_mig_qp *mq, uint8_t type, uint32_t why,
			  uint64_t recvs, bool refuse, bool taken)
{
	struct r2cc_ctrl_msg m;
	int ret;

	memset(&m, 0, sizeof(m));
	m.hdr.type = type;
	m.failover.qpn = mq->qpn;
	m.failover.reason = (uint8_t)why;
	m.failover.flags = refuse ? 0 : R2CC_CTRL_FO_PSN_VALID;
	if (taken)
		m.failover.flags |= R2CC_CTRL_FO_RECV_TAKEN;
	m.failover.rq_psn = refuse ? 0 : mq->rq_psn; /* codec: 0 unless valid */
	m.failover.recvs = recvs;
	if (type == R2CC_CTRL_FAILOVER && !refuse && mq->lz.made && mq->bqp) {
		/* A lazy QP's backup, made at this fence */
		m.failover.flags |= R2CC_CTRL_FO_BACKUP;
		if (mq->lz.conn)
			m.failover.flags |= R2CC_CTRL_FO_CONNECTED;
		m.failover.bqpn = mq->bqp->qp_num;
		m.failover.bpsn = mq->bpsn;
		mq->lz.said = mq->lz.conn;
	}
	ret = r2cc_chan_send(mq->peer, &m);
	if (ret)
		r2cc_err("QP %#x: cannot tell the peer (%s): the failover "
			 "waits for its own detection",
			 mq->qpn, strerror(-ret));
}

static void send_fo(struct r2cc_mig_qp *mq, uint8_t type, uint32_t why,
		    uint64_t recvs, bool refuse)
{
	send_fo_taken(mq, type, why, recvs, refuse, false);
}

/* A flush, as the primary in ERR would have made, for an entry logged
 * while fenced and never posted. */
static void synth_recv(struct r2cc_mig_qp *mq, const struct ibv_recv_wr *wr)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = wr->wr_id;
	wc.status = IBV_WC_WR_FLUSH_ERR;
	wc.opcode = IBV_WC_RECV;
	wc.qp_num = mq->qpn;
	if (r2cc_wcstash_push(mq->rcq->stash, &wc, 1))
		r2cc_err("QP %#x: completion stash full: wr_id %#llx lost",
			 mq->qpn, (unsigned long long)wr->wr_id);
}

/* The QP a move goes to: the backup, or the primary when moving back. */
static struct ibv_qp *new_qp(const struct r2cc_mig_qp *mq)
{
	return mq->on_backup ? mq->qp : mq->bqp;
}

/*
 * The move cannot happen (the peer refused or never answered, or the
 * replay failed): the program sees what it would have seen without r2cc
 * (mq lock held). The fenced QP is in ERR already: what it completed while
 * hidden is delivered in the order it came, then a flush for each WR
 * logged while fenced; from now on the QP is passthrough (on the fenced
 * QP: its posts flush). The QP it was to move to goes to ERR too, so the
 * peer's does not wait on it.
 */
static void abandon(struct r2cc_mig_qp *mq, const char *why)
{
	struct r2cc_sendlog_stats ss;
	struct r2cc_recvlog_stats rs;
	const struct r2cc_sendlog_ent *e;
	const struct r2cc_recvlog_ent *r;
	bool back = r2cc_mig_back(mq);
	struct ibv_qp_attr a;
	uint32_t i;

	if (mq->life != R2CC_LIFE_FENCED && mq->life != R2CC_LIFE_RECVS)
		return;
	r2cc_err("QP %#x: %s abandoned (%s): the program sees the native "
		 "errors",
		 mq->qpn, back ? "failback" : "failover", why);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	if (new_qp(mq) && ps.v.modify_qp(new_qp(mq), &a, IBV_QP_STATE))
		r2cc_warn("QP %#x: %s not moved to ERR", mq->qpn,
			  back ? "primary" : "backup");
	else if (back)
		mq->perr = true;
	r2cc_mig_give_back(mq);
	r2cc_sendlog_get_stats(mq->slog, &ss);
	for (i = ss.outstanding - mq->unposted_sends; i < ss.outstanding; i++)
		if ((e = r2cc_sendlog_peek(mq->slog, i)))
			synth(mq, e, IBV_WC_WR_FLUSH_ERR);
	r2cc_recvlog_get_stats(mq->rlog, &rs);
	for (i = rs.outstanding - mq->unposted_recvs; i < rs.outstanding; i++)
		if ((r = r2cc_recvlog_peek(mq->rlog, i)))
			synth_recv(mq, &r->wr);
	r2cc_mig_wake(mq); /* after the last push: a sleeper sees all */
	r2cc_mig_step(mq, R2CC_MEV_ABANDON);
	r2cc_mig_set_state(mq, R2CC_PROT_FAILED);
	r2cc_mig_event(mq, R2CC_EV_FAILOVER_FAILED, 0, 0);
	if (mq->peer)
		send_fo(mq, R2CC_CTRL_FAILOVER, mq->why, 0, true);
}

/* One direction of the move is on the new path (@ev, lock held); once
 * both are, the new incarnation carries the QP, the fenced one is
 * retired. */
static void moved(struct r2cc_mig_qp *mq, enum r2cc_mig_ev ev)
{
	if (!r2cc_mig_step(mq, ev) || mq->life != R2CC_LIFE_RUN)
		return;
	unhold(mq);
	memset(&mq->lz, 0, sizeof(mq->lz));
	if (mq->on_backup)
		return;
	/* The backup's consumed receives were moved to the stash: its CQs
	 * hold only flushes now, emptied when it is re-armed. */
	r2cc_mig_cq_detach(mq);
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

/* Replay once both rq_psns are known (lock held). */
static void replay(struct r2cc_mig_qp *mq)
{
	const struct r2cc_sendlog_ent *e;
	bool back = r2cc_mig_back(mq), taken;
	struct r2cc_replay res;
	struct ibv_send_wr *w;
	uint64_t bytes = 0, consumed;
	uint32_t i;
	int ret, mtu;

	if ((mq->life != R2CC_LIFE_FENCED && mq->life != R2CC_LIFE_RECVS) ||
	    mq->peer_rq_psn == R2CC_PSN_NONE)
		return;
	/* A lazy QP's new backups: into the peer's once it is connected to
	 * ours (not dropped at a QP still in INIT). */
	if (mq->lz.made && !(mq->lz.conn && mq->lz.peer_conn))
		return;
	memset(&res, 0, sizeof(res));
	/* A QP that never reached RTS sent nothing: nothing to replay. */
	ret = mq->rts ? r2cc_sendlog_replay(mq->slog, mq->peer_rq_psn, &res) :
			0;
	if (ret) {
		r2cc_err("QP %#x: peer rq_psn %#x outside our send log (%s)",
			 mq->qpn, mq->peer_rq_psn, strerror(-ret));
		abandon(mq, "the peer's rq_psn is not ours");
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
	drain_done(mq); /* the head the peer executed completes now */
	/* The peer's receives our SENDs consumed: those retired and those
	 * it executed (DONE; counted as they complete, later). */
	consumed = mq->consumers_done;
	for (i = 0; (e = r2cc_sendlog_peek(mq->slog, i)); i++)
		if (e->disp == R2CC_SL_DONE && consumes_recv(e->wr.opcode))
			consumed++;
	send_fo_taken(mq, R2CC_CTRL_FAILOVER_ACK, mq->why, consumed, false,
		      taken);
	/* From now on the log counts PSNs of the new QP's path. */
	mtu = r2cc_mtu_bytes(back ? mq->attr.path_mtu : mq->bmtu);
	ret = mtu < 0 ?
		      mtu :
		      r2cc_sendlog_start(mq->slog, back ? mq->fb.psn : mq->bpsn,
					 (uint32_t)mtu);
	for (w = res.first; !ret && w; w = w->next) {
		ret = back ? primary_send(mq, w) : backup_send(mq, w);
		bytes += r2cc_wr_len(w);
	}
	if (ret) {
		r2cc_err("QP %#x: replay on the %s failed (%s)", mq->qpn,
			 back ? "primary" : "backup", strerror(-ret));
		abandon(mq, "the replay failed");
		return;
	}
	if (!back) {
		cq_attach(mq->scq, mq, mq->bscq);
		if (mq->rcq != mq->scq || mq->brcq != mq->bscq)
			cq_attach(mq->rcq, mq, mq->brcq);
		arm_backups(mq);
	}
	ring(mq, mq->scq); /* what the replay stashed */
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
		if (mq->brcq->context->ops.poll_cq(mq->brcq, 1, &wc) > 0) {
			struct r2cc_mig_cq *mc = prog_cq(mq, &wc);

			wc.qp_num = mq->qpn;
			if (old_wc(mq, mc, &wc) &&
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
		ret = back ? primary_recv(mq, w) : backup_recv(mq, w);
	if (ret) {
		r2cc_err("QP %#x: receives not re-posted on the %s (%s)",
			 mq->qpn, back ? "primary" : "backup", strerror(-ret));
		r2cc_mig_set_state(mq, R2CC_PROT_FAILED);
		r2cc_mig_event(mq, R2CC_EV_FAILOVER_FAILED, 0, 0);
		return;
	}
	ring(mq, mq->rcq);
	r2cc_info("QP %#x: %u receives re-posted on the %s, %u consumed "
		  "before the fence",
		  mq->qpn, res.nrepost, back ? "primary" : "backup",
		  res.npending);
	moved(mq, R2CC_MEV_REPOSTED);
}

/* A failover that cannot start (nothing fenced, nothing hidden yet): the
 * QP runs passthrough, what it sees is native (lock held). */
static void no_move(struct r2cc_mig_qp *mq)
{
	r2cc_mig_stop_logging(mq);
	r2cc_mig_set_state(mq, R2CC_PROT_FAILED);
	r2cc_mig_event(mq, R2CC_EV_FAILOVER_FAILED, 0, 0);
}

/*
 * A lazy QP's backup, made at its failover (lock held), and connected
 * when the peer's FAILOVER named its own. False: none could be made (the
 * QP is left alone, unprotected: what it sees is native).
 */
static bool lazy_backup(struct r2cc_mig_qp *mq)
{
	bool parked = mq->bparked;
	int ret;

	if (mq->on_backup || (mq->bqp && !parked))
		return true;
	ret = mq->lazy ? r2cc_mig_backup_make(mq) : ENODEV;
	if (ret) {
		r2cc_err("QP %#x: no backup QP on rail %d (%s): no move",
			 mq->qpn, mq->backup_rail, strerror(ret));
		no_move(mq);
		return false;
	}
	mq->lz.made = true;
	r2cc_info("QP %#x: backup QP %#x %s on rail %d (lazy)", mq->qpn,
		  mq->bqp->qp_num, parked ? "out of RESET" : "made",
		  mq->backup_rail);
	return true;
}

/* The peer's backup (its FAILOVER named it): ours connects to it. */
static int lazy_connect(struct r2cc_mig_qp *mq)
{
	int ret;

	if (!mq->lz.made || mq->lz.conn || !mq->lz.pknown)
		return 0;
	ret = r2cc_mig_backup_connect(mq, mq->lz.pqpn, mq->lz.ppsn);
	if (ret)
		r2cc_err("QP %#x: backup QP %#x not connected to the peer's "
			 "%#x (%s)",
			 mq->qpn, mq->bqp->qp_num, mq->lz.pqpn, strerror(ret));
	mq->lz.conn = !ret;
	return ret;
}

/* The current incarnation to ERR, our rq_psn read and sent (lock held). */
static void fence_cur(struct r2cc_mig_qp *mq, uint32_t why)
{
	struct ibv_qp *qp = mq->on_backup ? mq->bqp : mq->qp;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;
	int ret;

	if (!lazy_backup(mq))
		return;

	mq->fault_ns = r2cc_mig_now_ns();
	mq->why = why;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	ret = ps.v.modify_qp(qp, &a, IBV_QP_STATE);
	if (!ret)
		ret = ps.v.query_qp(qp, &a, IBV_QP_RQ_PSN, &init);
	if (ret) {
		/* DESIGN §6's fallback (completion counts) is not built:
		 * the program sees the native error. */
		r2cc_err("QP %#x: fence failed (%s): no move", mq->qpn,
			 strerror(ret));
		no_move(mq);
		return;
	}
	r2cc_mig_step(mq, R2CC_MEV_FENCE);
	mq->perr |= qp == mq->qp;
	mq->peer_rq_psn = R2CC_PSN_NONE;
	mq->unposted_sends = mq->unposted_recvs = 0;
	mq->first_replay_ns = 0;
	mq->dbg_left = R2CC_DATAPATH_DEBUG ? 400 : 0;
	if (!mq->on_backup) /* a failover: failback.c looks at it afresh */
		mq->fb.ok_set = mq->fb.flow_only = false;
	if (!mq->held) /* an urgent move back holds from its detection on */
		r2cc_mig_hold_start(mq);
	mq->rq_psn = a.rq_psn;
	if (mq->srq)
		r2cc_mig_srq_fenced(mq);
	if (lazy_connect(mq)) {
		abandon(mq, "its backup could not be connected");
		return;
	}
	r2cc_info("QP %#x: %s fenced (%s), rq_psn %#x", mq->qpn,
		  mq->on_backup ? "backup" : "primary",
		  why == R2CC_CTRL_WHY_PEER	 ? "told by the peer" :
		  why == R2CC_CTRL_WHY_FAILBACK	 ? "moving back" :
		  why == R2CC_CTRL_WHY_SRQ	 ? "its SRQ moves" :
		  why == R2CC_CTRL_WHY_KEEPALIVE ? "keepalive" :
						   "local fault",
		  mq->rq_psn);
	send_fo(mq, R2CC_CTRL_FAILOVER, why, 0, false);
	replay(mq);
}

/* A fault on the primary of a ready QP: fence it (lock held). */
static void fence(struct r2cc_mig_qp *mq, uint32_t why)
{
	if (mq->life == R2CC_LIFE_RUN && !mq->on_backup &&
	    st_of(mq) == R2CC_PROT_READY)
		fence_cur(mq, why);
}

void r2cc_mig_fence(struct r2cc_mig_qp *mq, uint32_t why)
{
	fence(mq, why);
}

void r2cc_mig_recv_moved(struct r2cc_mig_qp *mq)
{
	if (mq->life != R2CC_LIFE_FENCED && mq->life != R2CC_LIFE_SENDS)
		return;
	ring(mq, mq->rcq);
	moved(mq, R2CC_MEV_REPOSTED);
}

void r2cc_mig_closed(struct r2cc_mig_qp *mq)
{
	struct ibv_qp_attr a;

	pthread_mutex_lock(&mq->lock);
	if (r2cc_mig_moving(mq)) {
		r2cc_mig_fail(mq, "the program ended the connection mid-move");
	} else if (mq->life == R2CC_LIFE_RUN) {
		r2cc_mig_stop_logging(mq);
		if (st_of(mq) != R2CC_PROT_MIGRATED)
			r2cc_mig_set_state(mq, R2CC_PROT_NONE);
		r2cc_info("QP %#x: the program ends its connection: "
			  "unprotected, its errors and flushes are its own",
			  mq->qpn);
	}
	/* On the backup, the work still outstanding flushes there, as the
	 * program's own QP would have flushed it. */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	if (mq->on_backup && !r2cc_mig_moving(mq) && mq->bqp &&
	    ps.v.modify_qp(mq->bqp, &a, IBV_QP_STATE))
		r2cc_warn("QP %#x: backup not moved to ERR: %m", mq->qpn);
	pthread_mutex_unlock(&mq->lock);
}

void r2cc_mig_refuse(struct r2cc_mig_qp *mq, const char *why)
{
	pthread_mutex_lock(&mq->lock);
	refuse(mq, why);
	pthread_mutex_unlock(&mq->lock);
}

void r2cc_mig_fail(struct r2cc_mig_qp *mq, const char *why)
{
	struct ibv_qp_attr a;

	if (mq->life != R2CC_LIFE_SENDS) {
		give_up(mq, why, EPIPE); /* abandons a move */
		return;
	}
	/* Its sends went to the new QP, its receives cannot: both ends'
	 * new QPs to ERR, the errors to the program (bounded). */
	r2cc_err("QP %#x: %s: the program sees the native errors", mq->qpn,
		 why);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	if (ps.v.modify_qp(new_qp(mq), &a, IBV_QP_STATE))
		r2cc_warn("QP %#x: backup not moved to ERR", mq->qpn);
	unhold(mq);
	r2cc_mig_stop_logging(mq);
	r2cc_mig_wake(mq);
	r2cc_mig_set_state(mq, R2CC_PROT_FAILED);
	r2cc_mig_event(mq, R2CC_EV_FAILOVER_FAILED, 0, 0);
}

void r2cc_mig_fence_back(struct r2cc_mig_qp *mq)
{
	if (mq->life != R2CC_LIFE_RUN || !mq->on_backup)
		return;
	fence_cur(mq, R2CC_CTRL_WHY_FAILBACK);
}

/* Is @m (the peer's FAILOVER*) about @mq? */
static bool fo_is_for(const struct r2cc_mig_qp *mq, uint64_t peer,
		      const struct r2cc_ctrl_msg *m)
{
	return mq->peer == peer && mq->dest_qpn == m->failover.qpn;
}

void r2cc_mig_got_failover(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	bool back = m->failover.reason == R2CC_CTRL_WHY_FAILBACK;
	struct r2cc_mig_qp *mq;

	for (mq = ps.qps; mq && !fo_is_for(mq, peer, m); mq = mq->next)
		;
	if (!mq) {
		r2cc_warn("failover for an unknown QP %#x: dropped",
			  m->failover.qpn);
		return;
	}
	pthread_mutex_lock(&mq->lock);
	if (m->hdr.type == R2CC_CTRL_FAILOVER &&
	    !(m->failover.flags & R2CC_CTRL_FO_PSN_VALID)) {
		/* The peer cannot move: its side is in ERR or soon will be. */
		abandon(mq, "the peer cannot move this connection");
		goto out;
	}
	if (back && !r2cc_mig_back(mq)) {
		/* The peer moves back and this side cannot (its recycle
		 * failed, or it is not on its backup): say so. */
		r2cc_warn("QP %#x: the peer moves back, this side cannot",
			  mq->qpn);
		if (m->hdr.type == R2CC_CTRL_FAILOVER)
			send_fo(mq, R2CC_CTRL_FAILOVER, R2CC_CTRL_WHY_FAILBACK,
				0, true);
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
		fence(mq, R2CC_CTRL_WHY_PEER);
	if (!r2cc_mig_moving(mq)) {
		/* Not protected (any more): say so, the peer gives up now
		 * instead of at its bound. */
		if (m->hdr.type == R2CC_CTRL_FAILOVER)
			send_fo(mq, R2CC_CTRL_FAILOVER, m->failover.reason, 0,
				true);
		goto out;
	}
	if (m->hdr.type == R2CC_CTRL_FAILOVER && mq->lz.made) {
		if (lazy_connect(mq)) {
			abandon(mq, "its backup could not be connected");
			goto out;
		}
		/* Ours connected after our FAILOVER went out: say so */
		if (mq->lz.conn && !mq->lz.said)
			send_fo(mq, R2CC_CTRL_FAILOVER, mq->why, 0, false);
	}
	if (m->hdr.type == R2CC_CTRL_FAILOVER) {
		if (mq->peer_rq_psn == R2CC_PSN_NONE)
			mq->peer_rq_psn = m->failover.rq_psn;
		replay(mq);
	} else if (m->hdr.type == R2CC_CTRL_FAILOVER_ACK) {
		repost(mq, m->failover.recvs,
		       m->failover.flags & R2CC_CTRL_FO_RECV_TAKEN);
	}
out:
	pthread_mutex_unlock(&mq->lock);
	if (mq->srq && atomic_load(&ps.srq_sweep))
		r2cc_mig_srq_sweep();
}

bool r2cc_mig_past(uint64_t t, uint64_t now, uint64_t ms)
{
	return t <= now && now - t >= ms * 1000000ULL;
}

void r2cc_mig_tick(void)
{
	struct r2cc_mig_qp *mq;
	uint64_t now;

	if (ps.keepalive_ms)
		r2cc_mig_ka_tick();
	/* (urgent moves back are bounded there even without failback) */
	if (atomic_load_explicit(&ps.away, memory_order_relaxed))
		r2cc_mig_fb_tick();
	/* SRQs are swept every tick: a QP on one may have lost its
	 * protection (its SRQ's then), or fenced from a poll. */
	if (!atomic_load_explicit(&ps.waiting, memory_order_relaxed) &&
	    !__atomic_load_n(&ps.srqs, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&ps.lock);
	/* Read under the lock: a fence made while the tick waited for it
	 * is younger than a time read before (and unsigned). */
	now = r2cc_mig_now_ns();
	for (mq = ps.qps; mq; mq = mq->next) {
		pthread_mutex_lock(&mq->lock);
		if ((mq->life == R2CC_LIFE_FENCED ||
		     mq->life == R2CC_LIFE_RECVS) &&
		    r2cc_mig_past(mq->fault_ns, now, R2CC_FENCE_BOUND_MS))
			abandon(mq, "no answer from the peer in time");
		/* Replayed, but the peer's count of our consumed receives
		 * never came (its channel died between the two): the
		 * receives cannot move. (An SRQ's QPs: bounded by the
		 * SRQ's sweep.) */
		else if (mq->life == R2CC_LIFE_SENDS && !mq->srq &&
			 r2cc_mig_past(mq->fault_ns, now,
				       2 * R2CC_FENCE_BOUND_MS))
			r2cc_mig_fail(mq, "the peer never said which receives "
					  "its messages consumed");
		pthread_mutex_unlock(&mq->lock);
	}
	if (ps.srqs)
		r2cc_mig_srq_sweep();
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_rail_down(int rail, enum r2cc_health_cause cause)
{
	struct r2cc_mig_qp *mq;

	pthread_mutex_lock(&ps.lock);
	for (mq = ps.qps; mq; mq = mq->next) {
		if (mq->rail != rail && mq->backup_rail != rail)
			continue;
		pthread_mutex_lock(&mq->lock);
		if (mq->backup_rail == rail) {
			/* Running on it: back to the primary, if it is up. */
			if (mq->on_backup && !r2cc_mig_moving(mq))
				r2cc_mig_fb_urgent(mq);
			pthread_mutex_unlock(&mq->lock);
			continue;
		}
		fence(mq, cause == R2CC_CAUSE_PORT_EVENT ?
				  R2CC_CTRL_WHY_PORT_EVENT :
				  R2CC_CTRL_WHY_CARRIER);
		r2cc_mig_fb_rail_down(mq);
		pthread_mutex_unlock(&mq->lock);
	}
	if (atomic_load(&ps.srq_sweep))
		r2cc_mig_srq_sweep();
	pthread_mutex_unlock(&ps.lock);
}
