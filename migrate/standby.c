/* SPDX-License-Identifier: MIT */
/*
 * standby.c - the standby (backup) QPs' verbs calls: made on the standby
 * rail's shadow PD with their CQs, connected to the peer's (INIT, RTR,
 * RTS), re-armed (RESET and back), parked, and dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bcq.h"
#include "chan.h"
#include "lid.h"
#include "mig_int.h"
#include "standby.h"
#include "wake.h"

static int backup_init(struct r2cc_mig_qp *mq, unsigned int access)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = access;
	return ps.v.modify_qp(mq->bqp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS);
}

uint8_t r2cc_mig_rnr_timer(uint8_t prog)
{
	/* 1..31 grow with the code; 0 is 655.36 ms, past them all */
	return prog && prog < MIG_RNR_TIMER ? prog : MIG_RNR_TIMER;
}

/* Both halves known: the backup goes RTR towards the peer's. */
static int backup_rtr(struct r2cc_mig_qp *mq)
{
	const struct r2cc_ctrl_qp_bind *b = &mq->peer_bind;
	const struct r2cc_lid_peer peer = { .gid = b->backup.gid,
					    .lid = b->lid };
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mq->attr.path_mtu < b->mtu ? mq->attr.path_mtu :
						  (enum ibv_mtu)b->mtu;
	mq->bmtu = a.path_mtu;
	a.dest_qp_num = b->backup.qpn;
	a.rq_psn = b->psn;
	a.max_dest_rd_atomic = mq->attr.max_dest_rd_atomic;
	a.min_rnr_timer = r2cc_mig_rnr_timer(mq->attr.min_rnr_timer);
	r2cc_lid_standby_av(&a.ah_attr, &mq->attr.ah_attr, mq->bgid, &peer);
	return ps.v.modify_qp(mq->bqp, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				      IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER);
}

/* The program's QP is at RTS and the backup at RTR: the backup follows,
 * with the program's own timeout and retries. Not capped like the
 * primary's: the only move from the backup is back to the primary (when
 * the backup's rail goes down, or a path error shows on it), so capping
 * would mostly turn what the program would ride out (a stall; 7 is
 * endless on rxe) into an error it would not have seen. */
int r2cc_mig_backup_rts(struct r2cc_mig_qp *mq)
{
	struct ibv_qp_attr a;
	int ret;

	if (mq->brts)
		return 0;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = mq->attr.timeout;
	a.retry_cnt = mq->attr.retry_cnt;
	a.rnr_retry = 7;
	a.sq_psn = mq->bpsn;
	a.max_rd_atomic = mq->attr.max_rd_atomic;
	ret = ps.v.modify_qp(mq->bqp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC);
	if (!ret)
		mq->brts = true;
	return ret;
}

/* The backup RTR towards the peer's (peer_bind), and RTS when the
 * program's QP is there (mq lock held). */
int r2cc_mig_backup_to_peer(struct r2cc_mig_qp *mq)
{
	int ret = backup_rtr(mq);

	if (!ret && mq->rts)
		ret = r2cc_mig_backup_rts(mq);
	return ret;
}

/* The backup to RESET, its CQs emptied (mq lock held). What the fenced
 * incarnation left (flushes; its consumed receives went to the program
 * when it moved back) must not meet the next failover: RESET (no more
 * flushes), then the CQs emptied (bounded: at most their size). */
static int backup_reset(struct r2cc_mig_qp *mq)
{
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	ret = ps.v.modify_qp(mq->bqp, &a, IBV_QP_STATE);
	r2cc_mig_bcq_empty(mq);
	mq->brts = false;
	return ret;
}

int r2cc_mig_backup_rearm(struct r2cc_mig_qp *mq, uint32_t psn)
{
	int ret = backup_reset(mq);

	if (!ret)
		ret = backup_init(mq, mq->attr.qp_access_flags);
	if (ret)
		return ret;
	mq->peer_bind.psn = psn;
	return r2cc_mig_backup_to_peer(mq);
}

int r2cc_mig_backup_park(struct r2cc_mig_qp *mq)
{
	int ret = backup_reset(mq);

	mq->bparked = !ret;
	return ret;
}

int r2cc_mig_backup_make(struct r2cc_mig_qp *mq)
{
	struct r2cc_mig_desc d;
	int ret;

	if (mq->bqp && mq->bparked) {
		/* Parked since the last move back: out of RESET again */
		ret = backup_init(mq, mq->attr.qp_access_flags);
		if (ret)
			return ret;
		mq->bparked = false;
		mq->bpsn = r2cc_psn_random();
		return 0;
	}
	if (mq->bqp)
		return 0;
	memset(&d, 0, sizeof(d));
	d.attr = &mq->attr;
	d.rail = mq->rail;
	d.backup_rail = mq->backup_rail;
	d.backup_ctx = mq->bctx;
	d.backup_pd = mq->bpd;
	if (!d.backup_ctx || !d.backup_pd)
		return ENODEV;
	ret = r2cc_mig_backup_new(mq, &d, false);
	if (ret) {
		r2cc_mig_backup_destroy(mq);
		return ret;
	}
	mq->brts = false;
	if (mq->slot)
		atomic_store(&mq->slot->backup_qpn, mq->bqp->qp_num);
	return 0;
}

int r2cc_mig_backup_connect(struct r2cc_mig_qp *mq, uint32_t qpn, uint32_t psn)
{
	mq->peer_bind.backup.qpn = qpn;
	mq->peer_bind.psn = psn;
	return r2cc_mig_backup_to_peer(mq);
}

void r2cc_mig_backup_drop(struct r2cc_mig_qp *mq)
{
	r2cc_mig_backup_destroy(mq);
	mq->bparked = false;
	mq->brts = false;
	if (mq->slot)
		atomic_store(&mq->slot->backup_qpn, 0);
}

/* Port @port of @ctx: its GID 0 and attributes. */
static int port_addr(struct ibv_context *ctx, uint8_t port, union ibv_gid *g0,
		     struct ibv_port_attr *pa)
{
	memset(pa, 0, sizeof(*pa));
	if (!ps.v.query_port || ps.v.query_port(ctx, port, pa) ||
	    ps.v.query_gid(ctx, port, 0, g0))
		return -EIO;
	return 0;
}

int r2cc_mig_read_ends(struct r2cc_mig_qp *mq, const struct r2cc_mig_desc *d)
{
	const struct ibv_ah_attr *ah = &d->attr->ah_attr;
	uint8_t port = ah->port_num ? ah->port_num : 1;
	struct ibv_port_attr pa;
	union ibv_gid g;

	if (ah->is_global) {
		if (ps.v.query_gid(mq->qp->context, port, ah->grh.sgid_index,
				   &g))
			return -EIO;
		memcpy(mq->gid, g.raw, 16);
		memcpy(mq->dest_gid, ah->grh.dgid.raw, 16);
		return 0;
	}
	if (port_addr(mq->qp->context, port, &g, &pa))
		return -EIO;
	return r2cc_lid_ends(g.raw, &pa, ah->dlid, mq->gid, mq->dest_gid);
}

int r2cc_mig_read_standby(struct r2cc_mig_qp *mq, const struct r2cc_mig_desc *d)
{
	const struct ibv_ah_attr *ah = &d->attr->ah_attr;
	struct ibv_port_attr pa;
	union ibv_gid g0, bg;

	mq->blid = 0;
	if (!port_addr(d->backup_ctx, 1, &g0, &pa) &&
	    pa.link_layer != IBV_LINK_LAYER_ETHERNET)
		mq->blid = pa.lid; /* (RoCE's need none) */
	if (!ah->is_global) {
		if (!mq->blid)
			return -EIO; /* no path to it by LID */
		memcpy(mq->bgid, g0.raw, 16);
		return 0;
	}
	/* RoCE v2 over IPv4 sits at the same index on every rail */
	if (ps.v.query_gid(d->backup_ctx, 1, ah->grh.sgid_index, &bg))
		return -EIO;
	memcpy(mq->bgid, bg.raw, 16);
	return 0;
}

/*
 * The completion channel of the backups' CQs on @d's rail, made with the
 * first when @make (ps.lock held): a completion there rings the program's
 * channel (wake.c). A lazy QP's backup, made at its failover without
 * ps.lock, takes the one its protection made. NULL: none (backups without
 * events).
 */
struct ibv_comp_channel *r2cc_mig_ring_channel(const struct r2cc_mig_desc *d,
					       bool make)
{
	struct ibv_comp_channel *ch;
	int fl;

	if (d->backup_rail < 0 || d->backup_rail >= R2CC_HEALTH_RAILS ||
	    !ps.v.create_comp_channel || !ps.v.destroy_comp_channel)
		return NULL;
	ch = __atomic_load_n(&ps.ring_ch[d->backup_rail], __ATOMIC_ACQUIRE);
	if (ch || !make)
		return ch;
	ch = ps.v.create_comp_channel(d->backup_ctx);
	if (!ch)
		return NULL;
	fl = fcntl(ch->fd, F_GETFL);
	if (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) ||
	    r2cc_chan_watch(ch->fd, r2cc_mig_ring_ready, ch)) {
		r2cc_warn("rail %d: no completion events from backups",
			  d->backup_rail);
		ps.v.destroy_comp_channel(ch);
		return NULL;
	}
	__atomic_store_n(&ps.ring_ch[d->backup_rail], ch, __ATOMIC_RELEASE);
	return ch;
}

/* The backup: places on standby CQs and an RC QP on the shadow PD,
 * RESET -> INIT (@locked: ps.lock held, its rail's ring channel may be
 * made). */
int r2cc_mig_backup_new(struct r2cc_mig_qp *mq, const struct r2cc_mig_desc *d,
			bool locked)
{
	/* Room for every WR the backup may hold (twice the caps: see the
	 * logs), receives too when the program's QP has one CQ. */
	int scqe = 2 * (int)mq->cap.max_send_wr + 1,
	    rcqe = 2 * (int)mq->cap.max_recv_wr + 1, ret;
	struct ibv_comp_channel *ch = r2cc_mig_ring_channel(d, locked);
	struct ibv_qp_init_attr ia;

	ret = r2cc_mig_bcq_attach(mq, d->backup_ctx, ch, scqe, rcqe);
	if (ret)
		return ret;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = r2cc_mig_bslot_of(mq, false)->b->cq;
	ia.recv_cq = r2cc_mig_bslot_of(mq, true)->b->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap = mq->cap;
	if (mq->srq) {
		ia.srq = mq->srq->bsrq;
		ia.cap.max_recv_wr = ia.cap.max_recv_sge = 0;
	}
	ia.sq_sig_all = mq->sig_all;
	/* One more send WR than the program's: heal()'s READ goes first at
	 * a move, before a replay that may fill the program's count (move.c).
	 * Where the device takes no more, the program's count. */
	ia.cap.max_send_wr++;
	mq->bqp = ps.v.create_qp(d->backup_pd, &ia);
	mq->bspare = mq->bqp != NULL;
	if (!mq->bqp) {
		ia.cap.max_send_wr--;
		mq->bqp = ps.v.create_qp(d->backup_pd, &ia);
	}
	if (!mq->bqp)
		return errno ? errno : ENOMEM;
	ret = r2cc_mig_bcq_bind(mq, mq->bqp->qp_num);
	if (ret)
		return ret;
	mq->bpsn = r2cc_psn_random();
	return backup_init(mq, d->attr->qp_access_flags);
}

void r2cc_mig_backup_destroy(struct r2cc_mig_qp *mq)
{
	if (mq->bqp && ps.v.destroy_qp(mq->bqp))
		r2cc_warn("backup QP %#x: destroy failed", mq->bqp->qp_num);
	r2cc_mig_bcq_leave(mq);
	mq->bqp = NULL;
}

int r2cc_mig_backup_move(struct r2cc_mig_qp *mq, struct r2cc_mig_desc *d)
{
	bool had = mq->bqp && !mq->lazy; /* (lazy: none to remake) */
	int ret;

	r2cc_mig_backup_drop(mq);
	d->attr = &mq->attr;
	d->rail = mq->rail;
	ret = r2cc_mig_read_standby(mq, d);
	if (!ret && had)
		ret = r2cc_mig_backup_new(mq, d, true);
	else if (!ret)
		r2cc_mig_ring_channel(d,
				      true); /* for the one a failover makes */
	if (ret) {
		r2cc_mig_backup_destroy(mq);
		return ret;
	}
	mq->backup_rail = d->backup_rail;
	mq->bctx = d->backup_ctx;
	mq->bpd = d->backup_pd;
	mq->brts = false;
	if (mq->slot) {
		atomic_store(&mq->slot->backup_rail, d->backup_rail);
		atomic_store(&mq->slot->backup_qpn,
			     mq->bqp ? mq->bqp->qp_num : 0);
	}
	return 0;
}
