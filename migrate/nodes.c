/* SPDX-License-Identifier: MIT */
/*
 * nodes.c - what this process knows of its peers' nodes: whether each
 * runs r2cc (learned from resolves and binds, the latest word winning),
 * what a resolve that found no owner means for its QP, and the wait of a
 * QP's RTS on that knowledge.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mig_int.h"
#include "nodes.h"
#include "protect.h"
#include "tick.h"

struct node_seen *r2cc_mig_node_find(const uint8_t gid[16])
{
	unsigned int i;

	for (i = 0; i < ps.nnodes; i++)
		if (!memcmp(ps.nodes[i].gid, gid, 16))
			return &ps.nodes[i];
	return NULL;
}

/* (and r2cc_mig_peer_runs() woken) */
void r2cc_mig_node_seen(const uint8_t gid[16], enum r2cc_node_word word)
{
	struct node_seen *n = r2cc_mig_node_find(gid), *v;
	unsigned int cap;

	if (!n && ps.nnodes == ps.nodes_cap) {
		cap = ps.nodes_cap ? 2 * ps.nodes_cap : 64;
		v = reallocarray(ps.nodes, cap, sizeof(*v));
		if (v) {
			ps.nodes = v;
			ps.nodes_cap = cap;
		} else if (!ps.nodes_said) {
			/* (its QPs wait for the word again, bounded) */
			ps.nodes_said = true;
			r2cc_warn("no memory to remember more than %u peer "
				  "nodes' r2cc",
				  ps.nnodes);
		}
	}
	if (!n && ps.nnodes < ps.nodes_cap) {
		n = &ps.nodes[ps.nnodes++];
		memcpy(n->gid, gid, 16);
	}
	if (n)
		n->word = word;
	pthread_cond_broadcast(&ps.peer_cv);
}

enum r2cc_unprot r2cc_mig_resolve_again(struct r2cc_mig_qp *mq,
					enum r2cc_chan_res_end how,
					const char **why)
{
	const struct node_seen *n = r2cc_mig_node_find(mq->dest_gid);
	uint64_t now = r2cc_mig_now_ns();

	if (!mq->resolve_ns)
		mq->resolve_ns = now;
	*why = "the peer's node runs no r2cc";
	if (n && n->word == R2CC_NODE_NO_R2CC)
		return R2CC_UNPROT_NO_PEER;
	switch (how) {
	case R2CC_RES_NO_R2CC:
		/* Its r2cc may be starting: not at the first refusal; nor
		 * a node whose r2cc answered another QP */
		if (++mq->resolves < MIG_RESOLVES)
			break;
		if (!n || n->word != R2CC_NODE_R2CC)
			r2cc_mig_node_seen(mq->dest_gid, R2CC_NODE_NO_R2CC);
		return R2CC_UNPROT_NO_PEER;
	case R2CC_RES_NO_OWNER:
		/* (its process may not have published the QP yet) */
		r2cc_mig_node_seen(mq->dest_gid, R2CC_NODE_R2CC);
		*why = "the peer's node knows no r2cc owner of its QP";
		if (++mq->resolves >= MIG_RESOLVES)
			return R2CC_UNPROT_NO_PEER;
		break;
	default:
		/* Nothing learned: a slow node is not one without r2cc,
		 * but the next QP's RTS need not wait on it */
		if (!n)
			r2cc_mig_node_seen(mq->dest_gid, R2CC_NODE_SILENT);
		*why = "the peer's r2cc did not answer in time";
		if (r2cc_mig_past(mq->resolve_ns, now, MIG_RESOLVE_MS))
			return R2CC_UNPROT_UNREACHABLE;
		break;
	}
	/* Not at once: a dial may fail at once, every time */
	mq->resolve_due_ns = now + MIG_RESOLVE_GAP_MS * 1000000ULL;
	atomic_store(&ps.bind_watch, true);
	r2cc_dbg("QP %#x: its peer not found (%d): asked again in a while",
		 mq->qpn, (int)how);
	return R2CC_UNPROT_PENDING;
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

		r2cc_qlock_lock(&mq->lock);
		st = atomic_load(&mq->state);
		if (!r2cc_mig_logs(mq) || st == R2CC_PROT_NONE ||
		    st == R2CC_PROT_FAILED) {
			known = true;
		} else if (mq->peer || st != R2CC_PROT_BINDING) {
			known = yes = true;
		} else if ((n = r2cc_mig_node_find(mq->dest_gid))) {
			known = true;
			yes = n->word == R2CC_NODE_R2CC;
		}
		r2cc_qlock_unlock(&mq->lock);
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
