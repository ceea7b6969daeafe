/* SPDX-License-Identifier: MIT */
/*
 * bind.c - binding a QP's standby to the peer's (DESIGN §4-5): made when
 * the program's QP reaches RTR, the peer found over the control channel,
 * QP_BIND both ways, the rail both ends agree on, and the standby
 * following the program's QP to RTS. RTR, not RTS: a responder may never
 * be moved to RTS (perftest's write_bw server is not).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bind.h"
#include "chan.h"
#include "complete.h"
#include "early.h"
#include "failback.h"
#include "keys.h"
#include "mig_int.h"
#include "module.h"
#include "nodes.h"
#include "objects.h"
#include "rebind.h"
#include "srq.h"
#include "standby.h"
#include "tick.h"

/* The sender's QP_BIND names its primary and ours (its peer). */
static struct r2cc_mig_qp *by_bind(const struct r2cc_ctrl_qp_bind *b)
{
	struct r2cc_mig_qp *mq;

	for (mq = r2cc_mig_by_qpn(b->peer.qpn);
	     mq && !r2cc_mig_bind_is_for(mq, b); mq = mq->qpn_next)
		;
	return mq;
}

static int send_bind(struct r2cc_mig_qp *mq, uint8_t flags)
{
	struct r2cc_ctrl_msg *m = calloc(1, sizeof(*m));
	int ret = -ENOMEM;

	if (!m)
		return ret;
	ret = r2cc_mig_keys_announce(mq->peer, mq->pd, mq->backup_rail);
	if (!ret) {
		m->hdr.type = R2CC_CTRL_QP_BIND;
		m->qp_bind.local.qpn = mq->qpn;
		memcpy(m->qp_bind.local.gid, mq->gid, 16);
		m->qp_bind.peer.qpn = mq->dest_qpn;
		memcpy(m->qp_bind.peer.gid, mq->dest_gid, 16);
		/* (lazy: no backup QP yet, its GID and rail only) */
		m->qp_bind.backup.qpn = mq->bqp ? mq->bqp->qp_num : 0;
		memcpy(m->qp_bind.backup.gid, mq->bgid, 16);
		m->qp_bind.psn = mq->bqp ? mq->bpsn : 0;
		m->qp_bind.lid = mq->blid;
		m->qp_bind.rail = (uint8_t)mq->backup_rail;
		m->qp_bind.mtu = (uint8_t)mq->attr.path_mtu;
		m->qp_bind.flags =
			(mq->srq || mq->keep_rail ? R2CC_CTRL_BIND_PINNED : 0) |
			(mq->bqp ? 0 : R2CC_CTRL_BIND_LAZY) | flags;
		ret = r2cc_chan_send(mq->peer, m);
	}
	free(m);
	if (!ret) {
		mq->bind_sent = true;
		mq->bind_ns = r2cc_mig_now_ns();
		if (mq->state == R2CC_PROT_BINDING && mq->binds < UINT8_MAX)
			mq->binds++;
		atomic_store(&ps.bind_watch, true);
	}
	return ret;
}

int r2cc_mig_send_bind(struct r2cc_mig_qp *mq, bool again)
{
	return send_bind(mq, again ? R2CC_CTRL_BIND_AGAIN : 0);
}

/* Has this process said @why before? Remembers it if not (the first
 * MIG_UNPROT_SAID reasons). Its own lock, the innermost: callers hold
 * ps.lock or not. */
static bool said_before(const char *why)
{
	static pthread_mutex_t said_lock = PTHREAD_MUTEX_INITIALIZER;
	unsigned int i, n;
	bool said = true;

	pthread_mutex_lock(&said_lock);
	n = ps.unprot_said_n;
	for (i = 0; i < n && strcmp(ps.unprot_said[i], why); i++)
		;
	if (i == n && n < MIG_UNPROT_SAID) {
		snprintf(ps.unprot_said[n], sizeof(ps.unprot_said[n]), "%s",
			 why);
		ps.unprot_said_n = n + 1;
		said = false;
	}
	pthread_mutex_unlock(&said_lock);
	return said;
}

void r2cc_mig_unprotected(struct r2cc_mig_qp *mq, enum r2cc_unprot kind,
			  const char *why)
{
	r2cc_mig_set_none(mq, kind);
	r2cc_mig_stop_logging(mq);
	/* One line per process and reason, then at debug level: a job may
	 * have thousands of QPs to a peer without r2cc. */
	if (said_before(why))
		r2cc_dbg("QP %#x unprotected: %s", mq->qpn, why);
	else
		r2cc_info("QP %#x unprotected: %s (further ones for it at "
			  "debug level)",
			  mq->qpn, why);
}

/* Both halves known: connect the backup (mq lock held). Lazy ends (no
 * backup QP) are ready as they are; a lazy end bound to an eager one makes
 * its backup now and binds again with it, and the eager end waits for
 * that second bind. */
static void try_ready(struct r2cc_mig_qp *mq)
{
	bool peer_lazy = mq->peer_bind.flags & R2CC_CTRL_BIND_LAZY;
	int ret;

	if (mq->state != R2CC_PROT_BINDING || !mq->bind_got || !mq->bind_sent)
		return;
	if (!mq->bqp && !peer_lazy) {
		ret = r2cc_mig_backup_make(mq);
		if (!ret) {
			mq->bind_sent = false;
			ret = r2cc_mig_send_bind(mq, false);
		}
		if (ret) {
			r2cc_mig_unprotected(mq, R2CC_UNPROT_BUDGET,
					     "no backup QP for an eager peer");
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
		mq->binds = 0;
		r2cc_mig_set_state(mq, R2CC_PROT_READY);
		r2cc_mig_rebind_check(mq);
		r2cc_info("QP %#x protected (lazy): its backup and the "
			  "peer's are made on rail %d at a failover",
			  mq->qpn, mq->backup_rail);
		return;
	}
	ret = r2cc_mig_backup_to_peer(mq);
	if (ret) {
		r2cc_warn("QP %#x: backup QP %#x on rail %d not connected: "
			  "%s; unprotected",
			  mq->qpn, mq->bqp->qp_num, mq->backup_rail,
			  strerror(ret));
		r2cc_mig_set_none(mq, R2CC_UNPROT_BIND);
		r2cc_mig_stop_logging(mq);
		return;
	}
	mq->binds = 0;
	r2cc_mig_set_state(mq, R2CC_PROT_READY);
	r2cc_mig_rebind_check(mq);
	r2cc_info("QP %#x protected: backup QP %#x on rail %d, peer's %#x "
		  "(for its QP %#x; sq_psn %#x, rq_psn %#x)",
		  mq->qpn, mq->bqp->qp_num, mq->backup_rail,
		  mq->peer_bind.backup.qpn, mq->dest_qpn, mq->bpsn,
		  mq->peer_bind.psn);
}

/* Send our bind; a QP whose bind cannot go out stays unprotected. */
static void bind_or_give_up(struct r2cc_mig_qp *mq)
{
	char why[96];
	int ret = r2cc_mig_send_bind(mq, false);

	if (!ret)
		return;
	snprintf(why, sizeof(why),
		 "its bind could not be sent to the peer (%s)",
		 ret == -ENOTCONN ? "no open control connection" :
				    strerror(-ret));
	r2cc_mig_unprotected(mq,
			     ret == -ENOTCONN ? R2CC_UNPROT_UNREACHABLE :
						R2CC_UNPROT_BIND,
			     why);
}

/* Ask the control plane who owns @mq's peer QP (mq lock held): 0, or
 * the channel's error. */
static int resolve(struct r2cc_mig_qp *mq)
{
	struct r2cc_ctrl_qp_ref ref = { .qpn = mq->dest_qpn };

	memcpy(ref.gid, mq->dest_gid, 16);
	if (!mq->resolve_ns)
		mq->resolve_ns = r2cc_mig_now_ns();
	return r2cc_chan_resolve(&ref, mq->cookie);
}

/* resolve(), or @mq unprotected for why it could not ask (both locks
 * held) */
static void resolve_or_give_up(struct r2cc_mig_qp *mq)
{
	int ret = resolve(mq);

	if (ret == -ENOMEM)
		r2cc_mig_unprotected(mq, R2CC_UNPROT_BUDGET,
				     "past the resolves' budget");
	else if (ret)
		r2cc_mig_unprotected(mq, R2CC_UNPROT_OFF,
				     "the control channel is down");
}

void r2cc_mig_on_resolved(uint64_t cookie, uint64_t peer,
			  enum r2cc_chan_res_end how)
{
	enum r2cc_unprot kind;
	struct r2cc_mig_qp *mq;
	const char *why;

	pthread_mutex_lock(&ps.lock);
	mq = r2cc_mig_by_cookie(cookie);
	if (!mq) {
		pthread_mutex_unlock(&ps.lock);
		return;
	}
	r2cc_qlock_lock(&mq->lock);
	if (mq->state != R2CC_PROT_BINDING)
		goto out;
	if (mq->peer) {
		/* The peer's bind named its process first (authenticated,
		 * and about this very QP): that one stays. */
		if (peer && peer != mq->peer)
			r2cc_warn("QP %#x: its peer resolved to %016llx, but "
				  "%016llx bound it: kept",
				  mq->qpn, (unsigned long long)peer,
				  (unsigned long long)mq->peer);
		peer = mq->peer;
	}
	if (!peer) {
		kind = r2cc_mig_resolve_again(mq, how, &why);
		if (kind != R2CC_UNPROT_PENDING)
			r2cc_mig_unprotected(mq, kind, why);
		goto out;
	}
	r2cc_mig_node_seen(mq->dest_gid, R2CC_NODE_R2CC);
	mq->peer = peer;
	if (!mq->bind_sent)
		bind_or_give_up(mq);
	try_ready(mq);
out:
	r2cc_qlock_unlock(&mq->lock);
	pthread_mutex_unlock(&ps.lock);
}

/*
 * Do both ends' backups sit on the same rail (each end's placement chose
 * alone)? If not, the end with the lower (GID, QPN) keeps its choice and
 * the other remakes its backup there: a rail-optimised fabric joins rail
 * i of one node to rail i of the others only. An end whose QP is on an
 * SRQ cannot move (its SRQ's backups share a rail): it keeps its rail;
 * so does an end that would take a rail down here (its own up): both say
 * so as pinned. If both are pinned to different rails, or the pinned
 * peer's rail is down here, neither is protected. True: @b may be used
 * now.
 */
static bool rail_down(int rail)
{
	return r2cc_health_get(rail).state == R2CC_RAIL_DOWN;
}

static bool agree_rail(struct r2cc_mig_qp *mq,
		       const struct r2cc_ctrl_qp_bind *b, bool adopt)
{
	int rail = b->rail, c = memcmp(mq->gid, mq->dest_gid, 16);
	bool peer_pinned = b->flags & R2CC_CTRL_BIND_PINNED;
	struct r2cc_mig_desc d;
	int ret, old;

	if (rail == mq->backup_rail && !adopt)
		return true;
	if (mq->srq && peer_pinned) {
		r2cc_mig_unprotected(mq, R2CC_UNPROT_BIND,
				     "both ends' SRQs keep their backups on "
				     "other rails");
		return false;
	}
	if (mq->srq || (!adopt && !peer_pinned &&
			(c < 0 || (!c && mq->qpn < mq->dest_qpn)))) {
		r2cc_dbg("QP %#x: backup on rail %d, the peer's on %d: the "
			 "peer's moves",
			 mq->qpn, mq->backup_rail, rail);
		return false;
	}
	if (!adopt && rail_down(rail)) {
		if (peer_pinned || mq->backup_rail < 0 ||
		    rail_down(mq->backup_rail)) {
			r2cc_mig_unprotected(mq, R2CC_UNPROT_NO_RAIL,
					     "the peer keeps its backup on a "
					     "rail down here");
			return false;
		}
		if (!mq->keep_rail)
			r2cc_info("QP %#x: the peer's backup rail %d is down "
				  "here: this side keeps rail %d",
				  mq->qpn, rail, mq->backup_rail);
		mq->keep_rail = true;
		mq->bind_sent = false; /* ours again, pinned */
		return false;
	}
	memset(&d, 0, sizeof(d));
	d.backup_rail = rail;
	ret = ps.env.rail_res ? ps.env.rail_res(mq->pd, rail, &d.backup_ctx,
						&d.backup_pd) :
				-ENOSYS;
	if (ret) {
		r2cc_mig_unprotected(mq, R2CC_UNPROT_BIND,
				     "the peer's backup rail is not usable "
				     "here");
		return false;
	}
	old = mq->backup_rail;
	if (r2cc_mig_backup_move(mq, &d)) {
		r2cc_mig_unprotected(mq, R2CC_UNPROT_BUDGET,
				     "no backup on the peer's backup rail");
		return false;
	}
	r2cc_info("QP %#x: backup rail %d, not %d: the peer's", mq->qpn, old,
		  rail);
	mq->bind_sent = false;
	return true;
}

/*
 * A QP_BIND of the peer's after @mq was bound (mq lock held): its standby
 * moved (its rail went down there) while both ends run on their own QPs.
 * Ours follows it (adopting its rail, remade even on the same one: it is
 * connected to the old); until both are connected again the QP is
 * binding, unprotected. True: bind again.
 */
static bool bound_again(struct r2cc_mig_qp *mq, uint64_t peer,
			const struct r2cc_ctrl_qp_bind *b)
{
	uint32_t st = r2cc_mig_state(mq);

	if (!(b->flags & R2CC_CTRL_BIND_AGAIN) || peer != mq->peer ||
	    mq->life != R2CC_LIFE_RUN || mq->on_backup || mq->srq ||
	    (st != R2CC_PROT_READY && st != R2CC_PROT_NONE))
		return false;
	r2cc_info("QP %#x: the peer's standby moved to rail %d: this side's "
		  "follows",
		  mq->qpn, b->rail);
	r2cc_mig_fb_rearm_drop(mq);
	mq->bind_sent = mq->bind_got = false;
	r2cc_mig_set_state(mq, R2CC_PROT_BINDING);
	return true;
}

/* A bound QP hears again the peer's bind it was bound with: the peer
 * never got ours (lost with a connection) and sent its own again. Ours
 * goes again as an echo, nothing else changes. An echo is not answered:
 * a peer that sent its bind twice gets two echoes, and the second, to a
 * peer bound by the first, would start two bound ends answering each
 * other for ever. */
static void answer_again(struct r2cc_mig_qp *mq, uint64_t peer,
			 const struct r2cc_ctrl_qp_bind *b)
{
	if (mq->state != R2CC_PROT_READY || peer != mq->peer || !mq->bind_got ||
	    (b->flags & (R2CC_CTRL_BIND_AGAIN | R2CC_CTRL_BIND_ECHO)) ||
	    b->backup.qpn != mq->peer_bind.backup.qpn ||
	    b->rail != mq->peer_bind.rail)
		return;
	r2cc_dbg("QP %#x: the peer sent its bind again: ours goes again",
		 mq->qpn);
	send_bind(mq, R2CC_CTRL_BIND_ECHO);
}

/* The peer's QP_BIND for @mq (ps.lock and mq lock held). */
static void bind_qp(struct r2cc_mig_qp *mq, uint64_t peer,
		    const struct r2cc_ctrl_qp_bind *b)
{
	bool ok, adopt = false;

	if (mq->peer && mq->peer != peer) {
		/* another process: this QP is bound to its peer alone */
		r2cc_mig_unknown("bind", peer, b->local.qpn);
		return;
	}
	if (mq->state != R2CC_PROT_BINDING &&
	    !(adopt = bound_again(mq, peer, b))) {
		answer_again(mq, peer, b);
		return;
	}
	if (b->mtu < IBV_MTU_256 || b->mtu > IBV_MTU_4096) {
		r2cc_mig_unprotected(mq, R2CC_UNPROT_BIND,
				     "the peer's backup MTU is invalid");
		return;
	}
	if (!mq->attr.ah_attr.is_global && !b->lid) {
		r2cc_mig_unprotected(mq, R2CC_UNPROT_BIND,
				     "routed by LID, the peer's backup has "
				     "none");
		return;
	}
	if (!mq->peer)
		mq->peer = peer;
	r2cc_mig_node_seen(mq->dest_gid, R2CC_NODE_R2CC);
	ok = agree_rail(mq, b, adopt);
	if (ok) {
		mq->peer_bind = *b;
		mq->bind_got = true;
	}
	/* Ours goes out either way: the peer learns our rail from it. */
	if (mq->state == R2CC_PROT_BINDING && !mq->bind_sent)
		bind_or_give_up(mq);
	if (ok)
		try_ready(mq);
}

/* ps.lock held */
void r2cc_mig_got_bind(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	struct r2cc_mig_qp *mq = by_bind(&m->qp_bind);

	if (!mq) {
		/* Our QP is not at RTR yet: kept for r2cc_mig_protect(). */
		r2cc_mig_early_keep(peer, &m->qp_bind);
		return;
	}
	r2cc_qlock_lock(&mq->lock);
	bind_qp(mq, peer, &m->qp_bind);
	r2cc_qlock_unlock(&mq->lock);
}

/* The peer's QP_BIND came first: answer it, no lookup needed. */
static bool take_early(struct r2cc_mig_qp *mq)
{
	struct r2cc_ctrl_qp_bind b;
	uint64_t peer;

	if (!r2cc_mig_early_take(mq, &peer, &b))
		return false;
	bind_qp(mq, peer, &b);
	return mq->peer != 0;
}

void r2cc_mig_protect(struct r2cc_mig_qp *mq, const struct r2cc_mig_desc *in)
{
	struct r2cc_mig_desc pinned, *d = NULL;
	int ret;

	if (!mq)
		return;
	pthread_mutex_lock(&ps.lock);
	r2cc_qlock_lock(&mq->lock);
	if (!r2cc_mig_logs(mq) || mq->bqp)
		goto out;
	if (in) {
		pinned = *in;
		d = &pinned;
	}
	if (d && mq->srq && (ret = r2cc_mig_srq_pin(mq, d))) {
		r2cc_warn("QP %#x: no backup for its SRQ (%s): unprotected",
			  mq->qpn, strerror(-ret));
		r2cc_status_qp_unprot(mq->slot, ret == -ENOMEM ?
							R2CC_UNPROT_BUDGET :
							R2CC_UNPROT_NO_RAIL);
		r2cc_mig_stop_logging(mq);
		goto out;
	}
	if (!d) {
		r2cc_dbg("QP %#x: no backup rail or no path: unprotected",
			 mq->qpn);
		r2cc_status_qp_unprot(mq->slot, R2CC_UNPROT_NO_RAIL);
		r2cc_mig_stop_logging(mq);
		goto out;
	}
	mq->attr = *d->attr;
	if (r2cc_mig_set_dest(mq, d->attr->dest_qp_num)) {
		r2cc_warn("QP %#x: no memory to index it: unprotected",
			  mq->qpn);
		r2cc_status_qp_unprot(mq->slot, R2CC_UNPROT_BUDGET);
		r2cc_mig_stop_logging(mq);
		goto out;
	}
	mq->rail = d->rail;
	mq->backup_rail = d->backup_rail;
	ret = r2cc_mtu_bytes(d->attr->path_mtu);
	if (ret > 0)
		ret = r2cc_mig_read_ends(mq, d);
	if (!ret)
		ret = r2cc_mig_read_standby(mq, d);
	if (ret) {
		r2cc_warn("QP %#x: no MTU, GID or LID to protect it by: "
			  "unprotected",
			  mq->qpn);
		r2cc_status_qp_unprot(mq->slot, R2CC_UNPROT_BIND);
		r2cc_mig_stop_logging(mq);
		goto out;
	}
	mq->bctx = d->backup_ctx;
	mq->bpd = d->backup_pd;
	/* Lazy: the backup is made at a failover (an SRQ's QPs share a
	 * backup SRQ made now: theirs are eager). */
	if (ps.lazy && !mq->srq) {
		r2cc_mig_ring_channel(
			d, true); /* for the backup a failover makes */
		ret = 0;
	} else {
		ret = r2cc_mig_backup_new(mq, d, true);
	}
	if (ret) {
		r2cc_warn("QP %#x: no backup QP on rail %d (%s): unprotected",
			  mq->qpn, d->backup_rail, strerror(ret));
		r2cc_mig_backup_destroy(mq);
		r2cc_status_qp_unprot(mq->slot, R2CC_UNPROT_BUDGET);
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
	resolve_or_give_up(mq);
out:
	r2cc_qlock_unlock(&mq->lock);
	pthread_mutex_unlock(&ps.lock);
}

int r2cc_mig_rts(struct r2cc_mig_qp *mq, const struct ibv_qp_attr *attr)
{
	uint32_t st;
	int ret = 0, mtu;

	if (!mq)
		return 0;
	r2cc_qlock_lock(&mq->lock);
	st = atomic_load(&mq->state);
	if (!r2cc_mig_logs(mq) || mq->rts)
		goto out;
	mq->attr = *attr;
	mq->rts = true;
	if (st == R2CC_PROT_MIGRATED) {
		/* Failed over while a responder: the backup moves for it,
		 * its send log already started at the backup's PSN. */
		ret = r2cc_mig_backup_rts(mq);
		if (ret)
			r2cc_err("QP %#x: backup QP %#x not moved to RTS (%s)",
				 mq->qpn, mq->bqp->qp_num, strerror(ret));
		goto out;
	}
	/* Sends are logged from the program's first PSN on. */
	mtu = r2cc_mtu_bytes(attr->path_mtu);
	ret = mtu < 0 ? mtu :
			r2cc_sendlog_start(mq->slog, attr->sq_psn, 0,
					   (uint32_t)mtu);
	if (!ret && st == R2CC_PROT_READY && mq->bqp)
		ret = r2cc_mig_backup_rts(mq);
	if (ret) {
		r2cc_warn("QP %#x: no send log or backup RTS (%s): "
			  "unprotected",
			  mq->qpn, strerror(ret < 0 ? -ret : ret));
		r2cc_mig_set_none(mq, R2CC_UNPROT_BUDGET);
		r2cc_mig_stop_logging(mq);
		ret = 0; /* the program's QP is fine */
	}
out:
	r2cc_qlock_unlock(&mq->lock);
	return ret;
}

/* How long a bind sent @n times waits for its answer */
static uint64_t bind_wait_ms(unsigned int n)
{
	uint64_t ms = MIG_BIND_AGAIN_MS;

	while (n-- > 1 && ms < MIG_BIND_AGAIN_MAX_MS)
		ms *= 2;
	return ms < MIG_BIND_AGAIN_MAX_MS ? ms : MIG_BIND_AGAIN_MAX_MS;
}

void r2cc_mig_bind_tick(void)
{
	uint64_t now = r2cc_mig_now_ns();
	struct r2cc_mig_qp *mq;
	bool out = false;

	if (!atomic_load(&ps.bind_watch) ||
	    !r2cc_mig_past(ps.bind_walk_ns, now, 1000))
		return;
	ps.bind_walk_ns = now;
	pthread_mutex_lock(&ps.lock);
	for (mq = ps.qps; mq; mq = mq->next) {
		r2cc_qlock_lock(&mq->lock);
		if (mq->peer || mq->state != R2CC_PROT_BINDING)
			mq->resolve_due_ns = 0; /* its bind named the peer */
		if (mq->resolve_due_ns) {
			out = true;
			if (now >= mq->resolve_due_ns) {
				mq->resolve_due_ns = 0;
				resolve_or_give_up(mq);
			}
		}
		if (mq->state == R2CC_PROT_BINDING && mq->bind_sent &&
		    mq->peer) {
			out = true;
			if (r2cc_mig_past(mq->bind_ns, now,
					  bind_wait_ms(mq->binds))) {
				r2cc_dbg("QP %#x: its bind unanswered: sent "
					 "again (%u)",
					 mq->qpn, mq->binds + 1U);
				mq->bind_sent = false;
				bind_or_give_up(mq);
			}
		}
		r2cc_qlock_unlock(&mq->lock);
	}
	if (!out)
		atomic_store(&ps.bind_watch, false);
	pthread_mutex_unlock(&ps.lock);
}
