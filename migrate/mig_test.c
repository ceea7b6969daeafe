/* SPDX-License-Identifier: MIT */
/*
 * mig_test.c - the test seams of mig_test.h (built into the unit test only).
 */
#include <stdlib.h>
#include <string.h>

#include "bcq.h"
#include "bind.h"
#include "failback.h"
#include "fence.h"
#include "keys.h"
#include "mig_int.h"
#include "mig_test.h"
#include "tick.h"
#include "module.h"
#include "move.h"
#include "nodes.h"
#include "objects.h"
#include "srq.h"

static struct ibv_cq *test_cq;

static struct ibv_cq *give_test_cq(struct ibv_context *c, int cqe, void *cqc,
				   struct ibv_comp_channel *ch, int vec)
{
	(void)c;
	(void)cqe;
	(void)ch;
	(void)vec;
	test_cq->cq_context = cqc; /* as ibv_create_cq() */
	return test_cq;
}

void r2cc_mig_test_bound(struct r2cc_mig_qp *mq, struct ibv_qp *bqp,
			 struct ibv_cq *bcq, uint64_t peer, uint32_t dest_qpn,
			 uint32_t bpsn)
{
	struct ibv_cq *(*v)(struct ibv_context *, int, void *,
			    struct ibv_comp_channel *, int);

	pthread_mutex_lock(&ps.lock);
	r2cc_qlock_lock(&mq->lock);
	mq->bqp = bqp;
	/* One standby CQ for each CQ a test hands in (keyed by it), shared
	 * by the QPs it is handed in for. */
	test_cq = bcq;
	v = ps.v.create_cq;
	ps.v.create_cq = give_test_cq;
	if (bcq &&
	    (r2cc_mig_bcq_attach(mq, (struct ibv_context *)bcq, NULL, 0, 0) ||
	     (bqp && r2cc_mig_bcq_bind(mq, bqp->qp_num))))
		r2cc_err("test: QP %#x: no standby CQ", mq->qpn);
	ps.v.create_cq = v;
	mq->peer = peer;
	r2cc_mig_set_dest(mq, dest_qpn);
	mq->rail = 0;
	mq->backup_rail = 1;
	mq->bpsn = bpsn;
	mq->bmtu = IBV_MTU_1024;
	mq->peer_bind.mtu = IBV_MTU_1024; /* its QP_BIND's: a re-arm's */
	r2cc_mig_set_state(mq, R2CC_PROT_READY);
	r2cc_qlock_unlock(&mq->lock);
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_test_lazy(struct r2cc_mig_qp *mq, struct ibv_context *bctx,
			struct ibv_pd *bpd)
{
	r2cc_qlock_lock(&mq->lock);
	mq->lazy = true;
	mq->bctx = bctx;
	mq->bpd = bpd;
	mq->peer_bind.mtu = IBV_MTU_1024; /* its QP_BIND's */
	r2cc_qlock_unlock(&mq->lock);
}

void r2cc_mig_test_peer_says(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	pthread_mutex_lock(&ps.lock);
	if (m->hdr.type == R2CC_CTRL_FAILBACK)
		r2cc_mig_got_failback(peer, m);
	else
		r2cc_mig_got_failover(peer, m);
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_test_peer_binds(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	pthread_mutex_lock(&ps.lock);
	r2cc_mig_got_bind(peer, m);
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_test_peer_mr(uint64_t peer, int rail, uint32_t rkey,
			   uint32_t backup_rkey)
{
	pthread_mutex_lock(&ps.lock);
	r2cc_mig_keys_put(peer, rail, rkey, backup_rkey);
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_test_move_back(struct r2cc_mig_qp *mq, uint32_t psn,
			     uint32_t peer_psn)
{
	pthread_mutex_lock(&ps.lock);
	r2cc_qlock_lock(&mq->lock);
	mq->fb.psn = psn;
	mq->fb.peer_psn = peer_psn;
	r2cc_mig_fence_back(mq);
	r2cc_qlock_unlock(&mq->lock);
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_test_free(struct r2cc_mig_qp *mq)
{
	free(mq);
}

void r2cc_mig_test_srq_bound(struct r2cc_mig_srq *s, struct ibv_srq *bsrq,
			     int rail)
{
	pthread_mutex_lock(&s->lock);
	s->bsrq = bsrq;
	s->backup_rail = rail;
	pthread_mutex_unlock(&s->lock);
}

void r2cc_mig_test_sweep(void)
{
	pthread_mutex_lock(&ps.lock);
	r2cc_mig_srq_sweep();
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_test_unprotect(struct r2cc_mig_qp *mq)
{
	r2cc_qlock_lock(&mq->lock);
	r2cc_mig_fail(mq, "test");
	r2cc_qlock_unlock(&mq->lock);
}

void r2cc_mig_test_state(struct r2cc_mig_qp *mq, uint32_t st)
{
	r2cc_qlock_lock(&mq->lock);
	r2cc_mig_set_state(mq, st);
	r2cc_qlock_unlock(&mq->lock);
}

void r2cc_mig_test_binding(struct r2cc_mig_qp *mq, const uint8_t gid[16])
{
	r2cc_qlock_lock(&mq->lock);
	memcpy(mq->dest_gid, gid, 16);
	mq->peer = 0;
	mq->bind_sent = true;
	r2cc_mig_set_state(mq, R2CC_PROT_BINDING);
	r2cc_qlock_unlock(&mq->lock);
}

void r2cc_mig_test_bind_out(struct r2cc_mig_qp *mq, uint64_t peer,
			    unsigned int binds, unsigned int ago_ms)
{
	r2cc_qlock_lock(&mq->lock);
	mq->peer = peer;
	mq->bind_sent = true;
	mq->binds = (uint8_t)binds;
	mq->bind_ns = r2cc_mig_now_ns() - (uint64_t)ago_ms * 1000000ULL;
	atomic_store(&ps.bind_watch, true);
	ps.bind_walk_ns = 0;
	r2cc_qlock_unlock(&mq->lock);
}

void r2cc_mig_test_fault_ago(struct r2cc_mig_qp *mq, unsigned int ago_ms)
{
	r2cc_qlock_lock(&mq->lock);
	mq->fault_ns = r2cc_mig_now_ns() - (uint64_t)ago_ms * 1000000ULL;
	r2cc_qlock_unlock(&mq->lock);
}

void r2cc_mig_test_resolve_ago(struct r2cc_mig_qp *mq, unsigned int ago_ms)
{
	r2cc_qlock_lock(&mq->lock);
	mq->resolve_ns = r2cc_mig_now_ns() - (uint64_t)ago_ms * 1000000ULL;
	r2cc_qlock_unlock(&mq->lock);
}

int r2cc_mig_test_node(const uint8_t gid[16], int word)
{
	const struct node_seen *n;
	int ret;

	pthread_mutex_lock(&ps.lock);
	if (word >= 0)
		r2cc_mig_node_seen(gid, (enum r2cc_node_word)word);
	n = r2cc_mig_node_find(gid);
	ret = n ? (int)n->word : -1;
	pthread_mutex_unlock(&ps.lock);
	return ret;
}

void r2cc_mig_test_fb_hold(unsigned int ms)
{
	pthread_mutex_lock(&ps.lock);
	ps.failback_hold_ms = ms;
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_test_fb_ago(struct r2cc_mig_qp *mq, unsigned int ago_ms)
{
	r2cc_qlock_lock(&mq->lock);
	mq->fb.moves_ns[0] = r2cc_mig_now_ns() - (uint64_t)ago_ms * 1000000ULL;
	r2cc_qlock_unlock(&mq->lock);
}

void r2cc_mig_test_resolved(struct r2cc_mig_qp *mq, uint64_t peer,
			    enum r2cc_chan_res_end how)
{
	r2cc_mig_on_resolved(mq->cookie, peer, how);
}

unsigned long r2cc_mig_test_refused(void)
{
	return atomic_load(&ps.refused);
}
