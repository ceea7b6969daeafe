/* SPDX-License-Identifier: MIT */
/*
 * protect.c - backups for the program's RC QPs: made on the backup rail
 * when the program's QP reaches RTR, bound to the peer's backup over the
 * control channel (MR_KEYS, then QP_BIND both ways) and connected (RTR);
 * the backup follows the program's QP to RTS. RTR, not RTS: a responder
 * may never be moved to RTS (perftest's write_bw server is not).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "chan.h"
#include "complete.h"
#include "mig_int.h"
#include "move.h"
#include "probe.h"
#include "tick.h"
#include "wake.h"

struct r2cc_mig_state ps = { .lock = PTHREAD_MUTEX_INITIALIZER,
			     .mr_lock = PTHREAD_RWLOCK_INITIALIZER,
			     .peer_cv = PTHREAD_COND_INITIALIZER };

void r2cc_mig_set_state(struct r2cc_mig_qp *mq, uint32_t st)
{
	atomic_store_explicit(&mq->state, st, memory_order_release);
	if (mq->slot)
		atomic_store_explicit(&mq->slot->prot, st,
				      memory_order_relaxed);
}

static int read_gids(struct r2cc_mig_qp *mq, const struct r2cc_mig_desc *d);
static int make_backup(struct r2cc_mig_qp *mq, const struct r2cc_mig_desc *d,
		       bool locked);
static void drop_backup(struct r2cc_mig_qp *mq);
static void unprotected(struct r2cc_mig_qp *mq, const char *why);
static struct ibv_comp_channel *ring_channel(const struct r2cc_mig_desc *d,
					     bool make);

static struct r2cc_mig_qp *by_cookie(uint64_t cookie)
{
	struct r2cc_mig_qp *mq;

	for (mq = ps.qps; mq && mq->cookie != cookie; mq = mq->next)
		;
	return mq;
}

/* Does @m, the peer's QP_BIND, name @mq (its peer) as its peer? */
static bool bind_is_for(const struct r2cc_mig_qp *mq,
			const struct r2cc_ctrl_msg *m)
{
	return mq->qpn == m->qp_bind.peer.qpn &&
	       mq->dest_qpn == m->qp_bind.local.qpn &&
	       !memcmp(mq->gid, m->qp_bind.peer.gid, 16) &&
	       !memcmp(mq->dest_gid, m->qp_bind.local.gid, 16);
}

/* The sender's QP_BIND names its primary and ours (its peer). */
static struct r2cc_mig_qp *by_bind(const struct r2cc_ctrl_msg *m)
{
	struct r2cc_mig_qp *mq;

	for (mq = ps.qps; mq && !bind_is_for(mq, m); mq = mq->next)
		;
	return mq;
}

/* MR_KEYS and QP_BIND to the peer: our half of the binding. */
static int send_bind(struct r2cc_mig_qp *mq)
{
	struct r2cc_ctrl_msg *m = calloc(1, sizeof(*m));
	int n, ret = -ENOMEM;

	if (!m)
		return ret;
	m->hdr.type = R2CC_CTRL_MR_KEYS;
	m->mr_keys.rail = (uint8_t)mq->backup_rail;
	n = ps.env.mr_keys(mq->pd, mq->backup_rail, m->mr_keys.mr,
			   R2CC_CTRL_MAX_MRS);
	m->mr_keys.n = n > 0 ? (uint16_t)n : 0;
	ret = n > 0 ? r2cc_chan_send(mq->peer, m) : 0;
	if (!ret) {
		memset(m, 0, sizeof(*m));
		m->hdr.type = R2CC_CTRL_QP_BIND;
		m->qp_bind.local.qpn = mq->qpn;
		memcpy(m->qp_bind.local.gid, mq->gid, 16);
		m->qp_bind.peer.qpn = mq->dest_qpn;
		memcpy(m->qp_bind.peer.gid, mq->dest_gid, 16);
		/* (lazy: no backup QP yet, its GID and rail only) */
		m->qp_bind.backup.qpn = mq->bqp ? mq->bqp->qp_num : 0;
		memcpy(m->qp_bind.backup.gid, mq->bgid, 16);
		m->qp_bind.psn = mq->bqp ? mq->bpsn : 0;
		m->qp_bind.rail = (uint8_t)mq->backup_rail;
		m->qp_bind.mtu = (uint8_t)mq->attr.path_mtu;
		m->qp_bind.flags = (mq->srq ? R2CC_CTRL_BIND_PINNED : 0) |
				   (mq->bqp ? 0 : R2CC_CTRL_BIND_LAZY);
		ret = r2cc_chan_send(mq->peer, m);
	}
	free(m);
	if (!ret)
		mq->bind_sent = true;
	return ret;
}

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

/* Both halves known: the backup goes RTR towards the peer's. */
static int backup_rtr(struct r2cc_mig_qp *mq)
{
	const struct r2cc_ctrl_msg *b = &mq->peer_bind;
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mq->attr.path_mtu < b->qp_bind.mtu ?
			     mq->attr.path_mtu :
			     (enum ibv_mtu)b->qp_bind.mtu;
	mq->bmtu = a.path_mtu;
	a.dest_qp_num = b->qp_bind.backup.qpn;
	a.rq_psn = b->qp_bind.psn;
	a.max_dest_rd_atomic = mq->attr.max_dest_rd_atomic;
	a.min_rnr_timer = mq->attr.min_rnr_timer;
	a.ah_attr = mq->attr.ah_attr;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	memcpy(a.ah_attr.grh.dgid.raw, b->qp_bind.backup.gid, 16);
	if (!a.ah_attr.grh.hop_limit)
		a.ah_attr.grh.hop_limit = 64;
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
static int backup_rts(struct r2cc_mig_qp *mq)
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
static int backup_connect(struct r2cc_mig_qp *mq)
{
	int ret = backup_rtr(mq);

	if (!ret && mq->rts)
		ret = backup_rts(mq);
	return ret;
}

/* Both halves known: connect the backup (mq lock held). Lazy ends (no
 * backup QP) are ready as they are; a lazy end bound to an eager one makes
 * its backup now and binds again with it, and the eager end waits for
 * that second bind. */
static void try_ready(struct r2cc_mig_qp *mq)
{
	bool peer_lazy = mq->peer_bind.qp_bind.flags & R2CC_CTRL_BIND_LAZY;
	int ret;

	if (mq->state != R2CC_PROT_BINDING || !mq->bind_got || !mq->bind_sent)
		return;
	if (!mq->bqp && !peer_lazy) {
		ret = r2cc_mig_backup_make(mq);
		if (!ret) {
			mq->bind_sent = false;
			ret = send_bind(mq);
		}
		if (ret) {
			unprotected(mq, "no backup QP for an eager peer");
			return;
		}
		r2cc_info("QP %#x: the peer makes its backups eagerly: so "
			  "does this side for it",
			  mq->qpn);
	}
	if (mq->bqp && peer_lazy)
		return; /* its backup comes with its next QP_BIND */
	if (!mq->bqp) {
		mq->lazy = true;
		r2cc_mig_set_state(mq, R2CC_PROT_READY);
		r2cc_info("QP %#x protected (lazy): its backup and the "
			  "peer's are made on rail %d at a failover",
			  mq->qpn, mq->backup_rail);
		return;
	}
	ret = backup_connect(mq);
	if (ret) {
		r2cc_warn("QP %#x: backup QP %#x on rail %d not connected: "
			  "%s; unprotected",
			  mq->qpn, mq->bqp->qp_num, mq->backup_rail,
			  strerror(ret));
		r2cc_mig_set_state(mq, R2CC_PROT_NONE);
		r2cc_mig_stop_logging(mq);
		return;
	}
	r2cc_mig_set_state(mq, R2CC_PROT_READY);
	r2cc_info("QP %#x protected: backup QP %#x on rail %d, peer's %#x",
		  mq->qpn, mq->bqp->qp_num, mq->backup_rail,
		  mq->peer_bind.qp_bind.backup.qpn);
}

bool r2cc_mig_covers(const struct r2cc_mig_qp *mq)
{
	/* A racy read is fine: an event raced with a move either way. */
	return mq && r2cc_mig_logs(mq) &&
	       (r2cc_mig_moving(mq) || mq->on_backup);
}

void r2cc_mig_rail_loads(uint32_t *n, int nrail)
{
	struct r2cc_mig_qp *mq;

	pthread_mutex_lock(&ps.lock);
	for (mq = ps.qps; mq; mq = mq->next)
		if (r2cc_mig_logs(mq) && mq->backup_rail >= 0 &&
		    mq->backup_rail < nrail)
			n[mq->backup_rail]++;
	pthread_mutex_unlock(&ps.lock);
}

/* The backup to RESET, its CQs emptied (mq lock held). What the fenced
 * incarnation left (flushes; its consumed receives went to the program
 * when it moved back) must not meet the next failover: RESET (no more
 * flushes), then the CQs emptied (bounded: at most their size). */
static int backup_reset(struct r2cc_mig_qp *mq)
{
	struct ibv_cq *cqs[2] = { mq->bscq, mq->brcq };
	struct ibv_qp_attr a;
	struct ibv_wc wc[16];
	int c, ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	ret = ps.v.modify_qp(mq->bqp, &a, IBV_QP_STATE);
	for (c = 0; c < 2; c++)
		while (cqs[c] &&
		       cqs[c]->context->ops.poll_cq(cqs[c], 16, wc) > 0)
			;
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
	mq->peer_bind.qp_bind.psn = psn;
	return backup_connect(mq);
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
	ret = make_backup(mq, &d, false);
	if (ret) {
		drop_backup(mq);
		return ret;
	}
	mq->brts = false;
	if (mq->slot)
		atomic_store(&mq->slot->backup_qpn, mq->bqp->qp_num);
	return 0;
}

int r2cc_mig_backup_connect(struct r2cc_mig_qp *mq, uint32_t qpn, uint32_t psn)
{
	mq->peer_bind.qp_bind.backup.qpn = qpn;
	mq->peer_bind.qp_bind.psn = psn;
	return backup_connect(mq);
}

void r2cc_mig_backup_drop(struct r2cc_mig_qp *mq)
{
	drop_backup(mq);
	mq->bparked = false;
	mq->brts = false;
	if (mq->slot)
		atomic_store(&mq->slot->backup_qpn, 0);
}

/* No backup for @mq after all (mq lock held): passthrough from now on. */
static void unprotected(struct r2cc_mig_qp *mq, const char *why)
{
	r2cc_mig_set_state(mq, R2CC_PROT_NONE);
	r2cc_mig_stop_logging(mq);
	/* One line per process, then at debug level: a job may have
	 * thousands of QPs to a peer without r2cc. */
	if (ps.no_peer_logged++)
		r2cc_dbg("QP %#x unprotected: %s", mq->qpn, why);
	else
		r2cc_info(
			"QP %#x unprotected: %s (further ones at debug level)",
			mq->qpn, why);
}

/* Send our bind; a QP whose bind cannot go out stays unprotected. */
static void bind_or_give_up(struct r2cc_mig_qp *mq)
{
	char why[96];
	int ret = send_bind(mq);

	if (!ret)
		return;
	snprintf(why, sizeof(why),
		 "its bind could not be sent to the peer (%s)",
		 ret == -ENOTCONN ? "no open control connection" :
				    strerror(-ret));
	unprotected(mq, why);
}

/* ---- what each peer node runs ---- */

static struct node_seen *node_find(const uint8_t gid[16])
{
	unsigned int i, n = ps.nnodes < MAX_NODES ? ps.nnodes : MAX_NODES;

	for (i = 0; i < n; i++)
		if (!memcmp(ps.nodes[i].gid, gid, 16))
			return &ps.nodes[i];
	return NULL;
}

/* The control plane learned whether @gid's node runs r2cc (ps.lock held):
 * remember it (the latest word wins) and wake r2cc_mig_peer_runs(). */
static void node_seen(const uint8_t gid[16], bool r2cc)
{
	struct node_seen *n = node_find(gid);

	if (!n) {
		n = &ps.nodes[ps.nnodes++ % MAX_NODES];
		memcpy(n->gid, gid, 16);
	}
	n->r2cc = r2cc;
	pthread_cond_broadcast(&ps.peer_cv);
}

/* ---- channel hooks (the channel thread, no channel lock held) ---- */

void r2cc_mig_on_resolved(uint64_t cookie, uint64_t peer)
{
	struct r2cc_mig_qp *mq;

	pthread_mutex_lock(&ps.lock);
	mq = by_cookie(cookie);
	if (!mq) {
		pthread_mutex_unlock(&ps.lock);
		return;
	}
	pthread_mutex_lock(&mq->lock);
	if (mq->state != R2CC_PROT_BINDING)
		goto out;
	node_seen(mq->dest_gid, peer != 0);
	if (!peer) {
		unprotected(mq, "the peer runs no r2cc, or its control "
				"channel is unreachable");
		goto out;
	}
	mq->peer = peer;
	if (!mq->bind_sent)
		bind_or_give_up(mq);
	try_ready(mq);
out:
	pthread_mutex_unlock(&mq->lock);
	pthread_mutex_unlock(&ps.lock);
}

static void got_mr_keys(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	int i, j;

	for (i = 0; i < m->mr_keys.n; i++) {
		for (j = 0; j < ps.nmrs; j++)
			if (ps.mrs[j].peer == peer &&
			    ps.mrs[j].rail == m->mr_keys.rail &&
			    ps.mrs[j].mr.rkey == m->mr_keys.mr[i].rkey)
				break;
		if (j == ps.nmrs && ps.nmrs == MAX_PEER_MRS) {
			r2cc_warn("peer MR table full: rkey %#x not kept",
				  m->mr_keys.mr[i].rkey);
			continue;
		}
		if (j == ps.nmrs)
			ps.nmrs++;
		ps.mrs[j].peer = peer;
		ps.mrs[j].rail = m->mr_keys.rail;
		ps.mrs[j].mr = m->mr_keys.mr[i];
	}
}

static void got_mr_inval(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	int i, j;

	for (i = 0; i < m->mr_inval.n; i++)
		for (j = 0; j < ps.nmrs; j++)
			if (ps.mrs[j].peer == peer &&
			    ps.mrs[j].mr.rkey == m->mr_inval.rkey[i])
				ps.mrs[j--] = ps.mrs[--ps.nmrs];
}

/*
 * Do both ends' backups sit on the same rail (each end's placement chose
 * alone)? If not, the end with the lower (GID, QPN) keeps its choice and
 * the other remakes its backup there: a rail-optimised fabric joins rail
 * i of one node to rail i of the others only. An end whose QP is on an
 * SRQ cannot move (its SRQ's backups share a rail): it keeps its rail;
 * if both are pinned to different rails, neither is protected. True: @m
 * may be used now.
 */
static bool agree_rail(struct r2cc_mig_qp *mq, const struct r2cc_ctrl_msg *m)
{
	int rail = m->qp_bind.rail, c = memcmp(mq->gid, mq->dest_gid, 16);
	bool peer_pinned = m->qp_bind.flags & R2CC_CTRL_BIND_PINNED, had;
	struct r2cc_mig_desc d;
	int ret;

	if (rail == mq->backup_rail)
		return true;
	if (mq->srq && peer_pinned) {
		unprotected(mq, "both ends' SRQs keep their backups on other "
				"rails");
		return false;
	}
	if (mq->srq ||
	    (!peer_pinned && (c < 0 || (!c && mq->qpn < mq->dest_qpn)))) {
		r2cc_dbg("QP %#x: backup on rail %d, the peer's on %d: the "
			 "peer's moves",
			 mq->qpn, mq->backup_rail, rail);
		return false;
	}
	memset(&d, 0, sizeof(d));
	d.attr = &mq->attr;
	d.rail = mq->rail;
	d.backup_rail = rail;
	ret = ps.env.rail_res ? ps.env.rail_res(mq->pd, rail, &d.backup_ctx,
						&d.backup_pd) :
				-ENOSYS;
	if (ret) {
		unprotected(mq, "the peer's backup rail is not usable here");
		return false;
	}
	had = mq->bqp != NULL; /* (lazy: none to remake) */
	drop_backup(mq);
	ret = read_gids(mq, &d);
	if (!ret && had)
		ret = make_backup(mq, &d, true);
	else if (!ret)
		ring_channel(&d, true); /* for the backup a failover makes */
	if (ret) {
		drop_backup(mq);
		unprotected(mq, "no backup on the peer's backup rail");
		return false;
	}
	r2cc_info("QP %#x: backup rail %d, not %d: the peer's", mq->qpn,
		  mq->backup_rail, rail);
	mq->backup_rail = rail;
	mq->bctx = d.backup_ctx;
	mq->bpd = d.backup_pd;
	mq->bind_sent = false;
	mq->brts = false;
	if (mq->slot) {
		atomic_store(&mq->slot->backup_rail, rail);
		atomic_store(&mq->slot->backup_qpn,
			     mq->bqp ? mq->bqp->qp_num : 0);
	}
	return true;
}

/* The peer's QP_BIND for @mq (ps.lock and mq lock held). */
static void bind_qp(struct r2cc_mig_qp *mq, uint64_t peer,
		    const struct r2cc_ctrl_msg *m)
{
	bool ok;

	if (mq->state != R2CC_PROT_BINDING)
		return;
	if (m->qp_bind.mtu < IBV_MTU_256 || m->qp_bind.mtu > IBV_MTU_4096) {
		unprotected(mq, "the peer's backup MTU is invalid");
		return;
	}
	if (!mq->peer)
		mq->peer = peer;
	if (mq->peer != peer)
		return; /* a bind from another process: not this QP's peer */
	node_seen(mq->dest_gid, true);
	ok = agree_rail(mq, m);
	if (ok) {
		mq->peer_bind = *m;
		mq->bind_got = true;
	}
	/* Ours goes out either way: the peer learns our rail from it. */
	if (mq->state == R2CC_PROT_BINDING && !mq->bind_sent)
		bind_or_give_up(mq);
	if (ok)
		try_ready(mq);
}

/* ps.lock held */
static void got_bind(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	struct r2cc_mig_qp *mq = by_bind(m);

	if (!mq) {
		/* Our QP is not at RTR yet: kept for r2cc_mig_protect(). */
		ps.early[ps.nearly % MAX_EARLY].peer = peer;
		ps.early[ps.nearly % MAX_EARLY].m = *m;
		ps.nearly++;
		return;
	}
	pthread_mutex_lock(&mq->lock);
	bind_qp(mq, peer, m);
	pthread_mutex_unlock(&mq->lock);
}

static void on_msg(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	pthread_mutex_lock(&ps.lock);
	switch (m->hdr.type) {
	case R2CC_CTRL_MR_KEYS:
		pthread_rwlock_wrlock(&ps.mr_lock);
		got_mr_keys(peer, m);
		pthread_rwlock_unlock(&ps.mr_lock);
		break;
	case R2CC_CTRL_MR_INVALIDATE:
		pthread_rwlock_wrlock(&ps.mr_lock);
		got_mr_inval(peer, m);
		pthread_rwlock_unlock(&ps.mr_lock);
		break;
	case R2CC_CTRL_FAILOVER:
	case R2CC_CTRL_FAILOVER_ACK:
		r2cc_mig_got_failover(peer, m);
		break;
	case R2CC_CTRL_QP_BIND:
		got_bind(peer, m);
		break;
	case R2CC_CTRL_FAILBACK:
		r2cc_mig_got_failback(peer, m);
		break;
	default:
		r2cc_dbg("control message %u not handled yet", m->hdr.type);
	}
	pthread_mutex_unlock(&ps.lock);
}

static void lookup(const struct r2cc_ctrl_qp_ref *q,
		   struct r2cc_ctrl_lookup_reply *r)
{
	char dev[R2CC_DEVNAME_MAX];
	uint16_t port;
	int n;

	r->found = 0;
	if (ps.env.dev_of_gid(q->gid, dev, sizeof(dev)) ||
	    r2cc_status_find_qp(dev, q->qpn, &r->owner, &port, &r->pid))
		return;
	n = r2cc_chan_addrs(r->addr, R2CC_CTRL_MAX_ADDRS, port);
	if (n <= 0)
		return;
	r->naddr = (uint8_t)n;
	r->found = 1;
}

/* ---- API ---- */

int r2cc_mig_start(const struct r2cc_config *cfg,
		   const struct r2cc_mig_verbs *v,
		   const struct r2cc_mig_env *env, const char *const *rail_if,
		   int nrail)
{
	static const struct r2cc_chan_hooks hooks = {
		.on_msg = on_msg,
		.on_resolved = r2cc_mig_on_resolved,
		.lookup = lookup,
		.on_tick = r2cc_mig_tick,
	};
	struct r2cc_chan_cfg cc = {
		.port = (uint16_t)cfg->ctrl_port,
		.pref_if = cfg->ctrl_if,
		.rail_if = rail_if,
		.nrail = nrail,
	};
	struct r2cc_ctrl_key key;
	int ret;

	if (!cfg->secret_file[0]) {
		r2cc_info("no R2CC_SECRET_FILE: no control channel, "
			  "connections run unprotected");
		return -ENOKEY;
	}
	ret = r2cc_ctrl_key_load(&key, cfg->secret_file, 0);
	if (ret) {
		r2cc_err("no usable job secret: connections run unprotected");
		return ret;
	}
	pthread_mutex_lock(&ps.lock);
	ps.v = *v;
	ps.env = *env;
	ps.failback = cfg->failback;
	ps.failback_hold_ms = cfg->failback_hold_ms;
	ps.detect_ms = cfg->detect_ms;
	ps.keepalive_ms = cfg->keepalive ? cfg->keepalive_ms : 0;
	ps.lazy = cfg->backup == R2CC_BACKUP_LAZY;
	if (!ps.mrs)
		ps.mrs = calloc(MAX_PEER_MRS, sizeof(*ps.mrs));
	if (!ps.early)
		ps.early = calloc(MAX_EARLY, sizeof(*ps.early));
	pthread_mutex_unlock(&ps.lock);
	ret = ps.mrs && ps.early ? r2cc_chan_start(&cc, &key, &hooks) : -ENOMEM;
	r2cc_ctrl_key_wipe(&key);
	if (ret) {
		r2cc_err("control channel: %s: connections run unprotected",
			 strerror(-ret));
		return ret;
	}
	r2cc_status_ctrl(r2cc_chan_self(), r2cc_chan_port());
	ps.on = true;
	r2cc_info("control channel on port %u (rendezvous %u)",
		  r2cc_chan_port(), cfg->ctrl_port);
	return 0;
}

void r2cc_mig_stop(void)
{
	ps.on = false;
	r2cc_chan_stop();
	pthread_mutex_lock(&ps.lock);
	r2cc_mig_ka_reset();
	r2cc_probe_reset();
	pthread_mutex_unlock(&ps.lock);
}

bool r2cc_mig_on(void)
{
	return ps.on && r2cc_chan_running();
}

struct r2cc_mig_cq *r2cc_mig_cq_new(struct ibv_cq *cq, int cqe)
{
	struct r2cc_mig_cq *mc = calloc(1, sizeof(*mc));

	if (!mc)
		return NULL;
	mc->cq = cq;
	/* Room for a full CQ of synthesised completions. */
	mc->stash = r2cc_wcstash_new(cqe > 0 ? (uint32_t)cqe * 2 : 64);
	if (!mc->stash) {
		free(mc);
		return NULL;
	}
	pthread_mutex_init(&mc->lock, NULL);
	return mc;
}

void r2cc_mig_cq_free(struct r2cc_mig_cq *mc)
{
	if (!mc)
		return;
	r2cc_mig_bell_free(mc);
	r2cc_wcstash_free(mc->stash);
	pthread_mutex_destroy(&mc->lock);
	free(mc);
}

bool r2cc_mig_cq_busy(struct r2cc_mig_cq *mc)
{
	return !r2cc_wcstash_empty(mc->stash) ||
	       __atomic_load_n(&mc->nqps, __ATOMIC_RELAXED);
}

struct r2cc_mig_qp *
r2cc_mig_qp_new(struct ibv_qp *qp, const struct ibv_qp_cap *cap, bool sig_all,
		struct r2cc_mig_cq *scq, struct r2cc_mig_cq *rcq,
		struct r2cc_mig_srq *srq, struct r2cc_status_qp *slot)
{
	struct r2cc_mig_qp *mq;

	if (!r2cc_mig_on() || !scq || !rcq)
		return NULL;
	mq = calloc(1, sizeof(*mq));
	if (!mq)
		return NULL;
	/* Twice what the provider reported, plus one: rxe rounds a queue up
	 * to 2^k - 1 and reports what was asked for (128 takes 255), and a
	 * program may fill what it was given (libfabric's rxm does). The
	 * receive log grows past that: posted minus polled also counts
	 * what the CQ holds. */
	mq->rlog = r2cc_recvlog_new(2 * cap->max_recv_wr + 1,
				    cap->max_recv_sge ? cap->max_recv_sge : 1);
	mq->slog = r2cc_sendlog_new(2 * cap->max_send_wr + 1,
				    cap->max_send_sge ? cap->max_send_sge : 1,
				    cap->max_inline_data, sig_all);
	if (!mq->rlog || !mq->slog) {
		r2cc_recvlog_free(mq->rlog);
		r2cc_sendlog_free(mq->slog);
		free(mq);
		r2cc_warn("QP %#x: no memory for its logs: unprotected",
			  qp->qp_num);
		return NULL;
	}
	pthread_mutex_init(&mq->lock, NULL);
	mq->qp = qp;
	mq->pd = qp->pd;
	mq->qpn = qp->qp_num;
	mq->cap = *cap;
	mq->sig_all = sig_all;
	mq->scq = scq;
	mq->rcq = rcq;
	mq->slot = slot;
	mq->rail = -1;
	mq->backup_rail = -1;
	mq->fb.peer_psn = R2CC_PSN_NONE;
	mq->life = R2CC_LIFE_RUN; /* logged from its creation on */
	if (srq)
		r2cc_mig_srq_joined(mq, srq);
	pthread_mutex_lock(&ps.lock);
	mq->cookie = ++ps.next_cookie;
	mq->next = ps.qps;
	ps.qps = mq;
	pthread_mutex_unlock(&ps.lock);
	return mq;
}

/* Our GIDs: the program's, and the backup's at the same index (RoCE v2
 * over IPv4 sits at the same index on every rail of a node). */
static int read_gids(struct r2cc_mig_qp *mq, const struct r2cc_mig_desc *d)
{
	const struct ibv_ah_attr *ah = &d->attr->ah_attr;
	union ibv_gid g, bg;

	if (ps.v.query_gid(mq->qp->context, ah->port_num ? ah->port_num : 1,
			   ah->grh.sgid_index, &g) ||
	    ps.v.query_gid(d->backup_ctx, 1, ah->grh.sgid_index, &bg))
		return -EIO;
	memcpy(mq->gid, g.raw, 16);
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
static struct ibv_comp_channel *ring_channel(const struct r2cc_mig_desc *d,
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

/* The backup: its CQ(s) and an RC QP on the shadow PD, RESET -> INIT
 * (@locked: ps.lock held, its rail's ring channel may be made). */
static int make_backup(struct r2cc_mig_qp *mq, const struct r2cc_mig_desc *d,
		       bool locked)
{
	struct ibv_qp_init_attr ia;

	/* Room for every WR the backup may hold (twice the caps: see the
	 * logs), receives too when the program's QP has one CQ. */
	int scqe = 2 * (int)mq->cap.max_send_wr + 1,
	    rcqe = 2 * (int)mq->cap.max_recv_wr + 1;

	struct ibv_comp_channel *ch = ring_channel(d, locked);

	mq->bscq = ps.v.create_cq(d->backup_ctx,
				  mq->rcq != mq->scq ? scqe : scqe + rcqe, mq,
				  ch, 0);
	if (!mq->bscq)
		return errno ? errno : ENOMEM;
	/* Receives complete on their own CQ when the program's do. */
	if (mq->rcq != mq->scq) {
		mq->brcq = ps.v.create_cq(d->backup_ctx, rcqe, mq, ch, 0);
		if (!mq->brcq)
			return errno ? errno : ENOMEM;
	} else {
		mq->brcq = mq->bscq;
	}
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = mq->bscq;
	ia.recv_cq = mq->brcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap = mq->cap;
	if (mq->srq) {
		ia.srq = mq->srq->bsrq;
		ia.cap.max_recv_wr = ia.cap.max_recv_sge = 0;
	}
	ia.sq_sig_all = mq->sig_all;
	mq->bqp = ps.v.create_qp(d->backup_pd, &ia);
	if (!mq->bqp)
		return errno ? errno : ENOMEM;
	mq->bpsn = r2cc_psn_random();
	return backup_init(mq, d->attr->qp_access_flags);
}

static void drop_backup(struct r2cc_mig_qp *mq)
{
	if (mq->bqp && ps.v.destroy_qp(mq->bqp))
		r2cc_warn("backup QP %#x: destroy failed", mq->bqp->qp_num);
	if (mq->brcq && mq->brcq != mq->bscq && ps.v.destroy_cq(mq->brcq))
		r2cc_warn("backup CQ: destroy failed");
	if (mq->bscq && ps.v.destroy_cq(mq->bscq))
		r2cc_warn("backup CQ: destroy failed");
	mq->bqp = NULL;
	mq->bscq = mq->brcq = NULL;
}

/* The peer's QP_BIND came first: answer it, no lookup needed. */
static bool take_early(struct r2cc_mig_qp *mq)
{
	unsigned int i, n = ps.nearly < MAX_EARLY ? ps.nearly : MAX_EARLY;

	for (i = 0; i < n; i++) {
		struct early *e = &ps.early[i];

		if (!e->peer || !bind_is_for(mq, &e->m))
			continue;
		e->peer = 0; /* taken */
		bind_qp(mq, e->m.hdr.sender, &e->m);
		return mq->peer != 0;
	}
	return false;
}

void r2cc_mig_protect(struct r2cc_mig_qp *mq, const struct r2cc_mig_desc *in)
{
	struct r2cc_mig_desc pinned, *d = NULL;
	struct r2cc_ctrl_qp_ref ref;
	int ret;

	if (!mq)
		return;
	pthread_mutex_lock(&ps.lock);
	pthread_mutex_lock(&mq->lock);
	if (!r2cc_mig_logs(mq) || mq->bqp)
		goto out;
	if (in) {
		pinned = *in;
		d = &pinned;
	}
	if (d && mq->srq && (ret = r2cc_mig_srq_pin(mq, d))) {
		r2cc_warn("QP %#x: no backup for its SRQ (%s): unprotected",
			  mq->qpn, strerror(-ret));
		d = NULL;
	}
	if (!d) {
		r2cc_dbg("QP %#x: no backup rail or no GRH: unprotected",
			 mq->qpn);
		r2cc_mig_stop_logging(mq);
		goto out;
	}
	mq->attr = *d->attr;
	mq->dest_qpn = d->attr->dest_qp_num;
	memcpy(mq->dest_gid, d->attr->ah_attr.grh.dgid.raw, 16);
	mq->rail = d->rail;
	mq->backup_rail = d->backup_rail;
	ret = r2cc_mtu_bytes(d->attr->path_mtu);
	if (ret > 0)
		ret = read_gids(mq, d);
	if (ret) {
		r2cc_warn("QP %#x: no MTU/GID to protect it by: "
			  "unprotected",
			  mq->qpn);
		r2cc_mig_stop_logging(mq);
		goto out;
	}
	mq->bctx = d->backup_ctx;
	mq->bpd = d->backup_pd;
	/* Lazy: the backup is made at a failover (an SRQ's QPs share a
	 * backup SRQ made now: theirs are eager). */
	if (ps.lazy && !mq->srq) {
		ring_channel(d, true); /* for the backup a failover makes */
		ret = 0;
	} else {
		ret = make_backup(mq, d, true);
	}
	if (ret) {
		r2cc_warn("QP %#x: no backup QP on rail %d (%s): unprotected",
			  mq->qpn, d->backup_rail, strerror(ret));
		drop_backup(mq);
		r2cc_mig_stop_logging(mq);
		goto out;
	}
	if (mq->slot) {
		atomic_store(&mq->slot->backup_rail, d->backup_rail);
		atomic_store(&mq->slot->backup_qpn,
			     mq->bqp ? mq->bqp->qp_num : 0);
		mq->slot->peer_qpn = mq->dest_qpn;
	}
	r2cc_mig_set_state(mq, R2CC_PROT_BINDING);
	if (take_early(mq))
		goto out;
	ref.qpn = mq->dest_qpn;
	memcpy(ref.gid, mq->dest_gid, 16);
	if (r2cc_chan_resolve(&ref, mq->cookie))
		unprotected(mq, "the control channel is down");
out:
	pthread_mutex_unlock(&mq->lock);
	pthread_mutex_unlock(&ps.lock);
}

bool r2cc_mig_peer_runs(struct r2cc_mig_qp *mq, unsigned int ms)
{
	uint64_t now = r2cc_mig_now_ns(), end = now + ms * 1000000ULL;
	bool yes = false, known = false;

	if (!mq)
		return false;
	pthread_mutex_lock(&ps.lock);
	for (;;) {
		const struct node_seen *n;
		uint32_t st;
		struct timespec ts;
		uint64_t until;

		pthread_mutex_lock(&mq->lock);
		st = atomic_load(&mq->state);
		if (!r2cc_mig_logs(mq) || st == R2CC_PROT_NONE ||
		    st == R2CC_PROT_FAILED) {
			known = true;
		} else if (mq->peer || st != R2CC_PROT_BINDING) {
			known = yes = true;
		} else if ((n = node_find(mq->dest_gid))) {
			known = true;
			yes = n->r2cc;
		}
		pthread_mutex_unlock(&mq->lock);
		now = r2cc_mig_now_ns();
		if (known || now >= end)
			break;
		/* In slices: a QP given up without the module lock (the
		 * data path's failures) wakes nobody. */
		until = now + 20000000ULL < end ? now + 20000000ULL : end;
		ts.tv_sec = (time_t)(until / 1000000000ULL);
		ts.tv_nsec = (long)(until % 1000000000ULL);
		pthread_cond_clockwait(&ps.peer_cv, &ps.lock, CLOCK_MONOTONIC,
				       &ts);
	}
	pthread_mutex_unlock(&ps.lock);
	if (!known)
		r2cc_info("QP %#x: whether its peer runs r2cc is not known "
			  "after %u ms: its ACK timeout is left as set",
			  mq->qpn, ms);
	return yes;
}

int r2cc_mig_rts(struct r2cc_mig_qp *mq, const struct ibv_qp_attr *attr)
{
	uint32_t st;
	int ret = 0, mtu;

	if (!mq)
		return 0;
	pthread_mutex_lock(&mq->lock);
	st = atomic_load(&mq->state);
	if (!r2cc_mig_logs(mq) || mq->rts)
		goto out;
	mq->attr = *attr;
	mq->rts = true;
	if (st == R2CC_PROT_MIGRATED) {
		/* Failed over while a responder: the backup moves for it,
		 * its send log already started at the backup's PSN. */
		ret = backup_rts(mq);
		if (ret)
			r2cc_err("QP %#x: backup QP %#x not moved to RTS (%s)",
				 mq->qpn, mq->bqp->qp_num, strerror(ret));
		goto out;
	}
	/* Sends are logged from the program's first PSN on. */
	mtu = r2cc_mtu_bytes(attr->path_mtu);
	ret = mtu < 0 ?
		      mtu :
		      r2cc_sendlog_start(mq->slog, attr->sq_psn, (uint32_t)mtu);
	if (!ret && st == R2CC_PROT_READY && mq->bqp)
		ret = backup_rts(mq);
	if (ret) {
		r2cc_warn("QP %#x: no send log or backup RTS (%s): "
			  "unprotected",
			  mq->qpn, strerror(ret < 0 ? -ret : ret));
		r2cc_mig_set_state(mq, R2CC_PROT_NONE);
		r2cc_mig_stop_logging(mq);
		ret = 0; /* the program's QP is fine */
	}
out:
	pthread_mutex_unlock(&mq->lock);
	return ret;
}

/* Send @m to every peer bound to a QP of @pd (on its backup rail when
 * @mr is set: MR_KEYS of that MR), each (peer, rail) once. */
static void announce(const void *pd, const void *mr, struct r2cc_ctrl_msg *m)
{
	struct {
		uint64_t peer;
		int rail;
	} done[64];
	struct r2cc_mig_qp *mq;
	int n = 0, i, ret;

	pthread_mutex_lock(&ps.lock);
	for (mq = ps.qps; mq; mq = mq->next) {
		if (mq->pd != pd || !mq->peer || !mq->bind_sent)
			continue;
		for (i = 0; i < n; i++)
			if (done[i].peer == mq->peer &&
			    done[i].rail == mq->backup_rail)
				break;
		if (i < n)
			continue;
		if (n < (int)(sizeof(done) / sizeof(done[0]))) {
			done[n].peer = mq->peer;
			done[n++].rail = mq->backup_rail;
		}
		if (mr && ps.env.mr_key(mr, mq->backup_rail, &m->mr_keys.mr[0]))
			continue; /* no shadow there: nothing to translate */
		if (mr)
			m->mr_keys.rail = (uint8_t)mq->backup_rail;
		ret = r2cc_chan_send(mq->peer, m);
		if (ret)
			r2cc_warn("QP %#x: memory key change not sent (%s)",
				  mq->qpn, strerror(-ret));
	}
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_mr_new(const void *pd, const void *mr)
{
	struct r2cc_ctrl_msg *m;

	if (!ps.on || !ps.env.mr_key || !(m = calloc(1, sizeof(*m))))
		return;
	m->hdr.type = R2CC_CTRL_MR_KEYS;
	m->mr_keys.n = 1;
	announce(pd, mr, m);
	free(m);
}

void r2cc_mig_mr_gone(const void *pd, uint32_t rkey)
{
	struct r2cc_ctrl_msg *m;

	if (!ps.on || !(m = calloc(1, sizeof(*m))))
		return;
	m->hdr.type = R2CC_CTRL_MR_INVALIDATE;
	m->mr_inval.n = 1;
	m->mr_inval.rkey[0] = rkey;
	announce(pd, NULL, m);
	free(m);
}

void r2cc_mig_release(struct r2cc_mig_qp *mq)
{
	struct r2cc_mig_qp **pp;

	if (!mq)
		return;
	pthread_mutex_lock(&ps.lock);
	for (pp = &ps.qps; *pp && *pp != mq; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = mq->next;
	pthread_mutex_unlock(&ps.lock);
	r2cc_mig_cq_detach(mq);
	pthread_mutex_lock(&mq->lock);
	r2cc_mig_srq_left(mq);
	r2cc_mig_step(mq, R2CC_MEV_RELEASE);
	drop_backup(mq);
	r2cc_sendlog_free(mq->slog);
	r2cc_recvlog_free(mq->rlog);
	free(mq->held);
	mq->slog = NULL;
	mq->rlog = NULL;
	mq->held = NULL;
	mq->nheld = mq->held_cap = 0;
	pthread_mutex_unlock(&mq->lock);
	/* Not freed: a thread polling one of its CQs may still hold a
	 * pointer read from the CQ's list (r2cc_mig_poll_more()). */
}

uint32_t r2cc_mig_state(const struct r2cc_mig_qp *mq)
{
	return mq ? atomic_load(&mq->state) : R2CC_PROT_NONE;
}
