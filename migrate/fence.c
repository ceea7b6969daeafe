/* SPDX-License-Identifier: MIT */
/*
 * fence.c - a move's start and its failures: the carrying QP fenced (to
 * ERR, its rq_psn read and sent to the peer; a lazy standby made first),
 * a move that cannot happen abandoned, one that cannot finish failed, and
 * the program's own end of a connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chan.h"
#include "complete.h"
#include "event.h"
#include "fence.h"
#include "mig_int.h"
#include "module.h"
#include "post.h"
#include "srq.h"
#include "standby.h"
#include "tick.h"
#include "wake.h"

/* @qp to ERR: 0 or the provider's errno. */
static int to_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	return ps.v.modify_qp(qp, &a, IBV_QP_STATE);
}

/* FAILOVER (our rq_psn), FAILOVER_ACK (@recvs; @taken: see
 * R2CC_CTRL_FO_RECV_TAKEN), or with @type FAILOVER and @refuse: this side
 * cannot move (the peer gives up at once). */
void r2cc_mig_send_fo_taken(struct r2cc_mig_qp *mq, uint8_t type, uint32_t why,
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

void r2cc_mig_send_fo(struct r2cc_mig_qp *mq, uint8_t type, uint32_t why,
		      uint64_t recvs, bool refuse)
{
	r2cc_mig_send_fo_taken(mq, type, why, recvs, refuse, false);
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
void r2cc_mig_abandon(struct r2cc_mig_qp *mq, const char *why)
{
	struct r2cc_sendlog_stats ss;
	struct r2cc_recvlog_stats rs;
	const struct r2cc_sendlog_ent *e;
	const struct r2cc_recvlog_ent *r;
	bool back = r2cc_mig_back(mq);
	uint32_t i;

	if (mq->life != R2CC_LIFE_FENCED && mq->life != R2CC_LIFE_RECVS)
		return;
	r2cc_err("QP %#x: %s abandoned (%s): the program sees the native "
		 "errors",
		 mq->qpn, back ? "failback" : "failover", why);
	if (new_qp(mq) && to_err(new_qp(mq)))
		r2cc_warn("QP %#x: %s not moved to ERR", mq->qpn,
			  back ? "primary" : "backup");
	else if (back)
		mq->perr = true;
	r2cc_mig_give_back(mq);
	r2cc_sendlog_get_stats(mq->slog, &ss);
	for (i = ss.outstanding - mq->unposted_sends; i < ss.outstanding; i++)
		if ((e = r2cc_sendlog_peek(mq->slog, i)))
			r2cc_mig_synth(mq, e, IBV_WC_WR_FLUSH_ERR);
	r2cc_recvlog_get_stats(mq->rlog, &rs);
	for (i = rs.outstanding - mq->unposted_recvs; i < rs.outstanding; i++)
		if ((r = r2cc_recvlog_peek(mq->rlog, i)))
			synth_recv(mq, &r->wr);
	r2cc_mig_wake(mq); /* after the last push: a sleeper sees all */
	r2cc_mig_step(mq, R2CC_MEV_ABANDON);
	r2cc_mig_set_state(mq, R2CC_PROT_FAILED);
	r2cc_mig_event(mq, R2CC_EV_FAILOVER_FAILED, 0, 0);
	if (mq->peer)
		r2cc_mig_send_fo(mq, R2CC_CTRL_FAILOVER, mq->why, 0, true);
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
int r2cc_mig_lazy_connect(struct r2cc_mig_qp *mq)
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
	int to = mq->on_backup ? mq->rail : mq->backup_rail;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;
	int ret;

	if (to >= 0 && r2cc_health_get(to).state == R2CC_RAIL_DOWN) {
		/* (both rails at once: the one it would move to died
		 * first, or its rebind has not come yet) */
		r2cc_err("QP %#x: the rail it would move to (%d) is down "
			 "too: no move",
			 mq->qpn, to);
		no_move(mq);
		return;
	}
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
	mq->fb.acked = mq->fb.peer_posted = false;
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
	if (r2cc_mig_lazy_connect(mq)) {
		r2cc_mig_abandon(mq, "its backup could not be connected");
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
	r2cc_mig_send_fo(mq, R2CC_CTRL_FAILOVER, why, 0, false);
}

void r2cc_mig_fence(struct r2cc_mig_qp *mq, uint32_t why)
{
	if (mq->life == R2CC_LIFE_RUN && !mq->on_backup &&
	    r2cc_mig_state(mq) == R2CC_PROT_READY)
		fence_cur(mq, why);
}

void r2cc_mig_stranded(struct r2cc_mig_qp *mq)
{
	if (mq->life != R2CC_LIFE_RUN || !mq->on_backup)
		return;
	if (mq->srq)
		r2cc_err("QP %#x: its backup's rail %d is down, and a QP on "
			 "an SRQ does not move back to its own (%d): the "
			 "program sees the native errors",
			 mq->qpn, mq->backup_rail, mq->rail);
	else
		r2cc_err("QP %#x: its backup's rail %d is down and its own "
			 "(%d) too: no rail left, the program sees the native "
			 "errors",
			 mq->qpn, mq->backup_rail, mq->rail);
	r2cc_mig_stop_logging(mq);
	if (mq->bqp && to_err(mq->bqp))
		r2cc_warn("QP %#x: backup not moved to ERR", mq->qpn);
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

void r2cc_mig_closed(struct r2cc_mig_qp *mq)
{
	r2cc_qlock_lock(&mq->lock);
	if (r2cc_mig_moving(mq)) {
		r2cc_mig_fail(mq, "the program ended the connection mid-move");
	} else if (mq->life == R2CC_LIFE_RUN) {
		r2cc_mig_stop_logging(mq);
		if (r2cc_mig_state(mq) != R2CC_PROT_MIGRATED)
			r2cc_mig_set_none(mq, R2CC_UNPROT_ENDED);
		r2cc_info("QP %#x: the program ends its connection: "
			  "unprotected, its errors and flushes are its own",
			  mq->qpn);
	}
	/* On the backup, the work still outstanding flushes there, as the
	 * program's own QP would have flushed it. */
	if (mq->on_backup && !r2cc_mig_moving(mq) && mq->bqp && to_err(mq->bqp))
		r2cc_warn("QP %#x: backup not moved to ERR: %m", mq->qpn);
	r2cc_qlock_unlock(&mq->lock);
}

void r2cc_mig_fail(struct r2cc_mig_qp *mq, const char *why)
{
	if (mq->life != R2CC_LIFE_SENDS) {
		r2cc_mig_give_up(mq, why, EPIPE); /* abandons a move */
		return;
	}
	/* Its sends went to the new QP, its receives cannot: both ends'
	 * new QPs to ERR, the errors to the program (bounded). */
	r2cc_err("QP %#x: %s: the program sees the native errors", mq->qpn,
		 why);
	if (to_err(new_qp(mq)))
		r2cc_warn("QP %#x: backup not moved to ERR", mq->qpn);
	r2cc_mig_unhold(mq);
	r2cc_mig_stop_logging(mq);
	r2cc_mig_wake(mq);
	r2cc_mig_set_state(mq, R2CC_PROT_FAILED);
	r2cc_mig_event(mq, R2CC_EV_FAILOVER_FAILED, 0, 0);
}
