/* SPDX-License-Identifier: MIT */
/*
 * early.h - the peer's QP_BINDs that came before our QP reached RTR
 * (early.c), kept until it does (all under ps.lock).
 */
#ifndef R2CC_MIG_EARLY_H
#define R2CC_MIG_EARLY_H

#include <string.h>

#include "mig_int.h"

/* One kept, in its bucket's chain. */
struct r2cc_mig_early {
	struct r2cc_mig_early *next;
	uint64_t peer, at_ns;
	struct r2cc_ctrl_qp_bind b;
};

/* Does @b, the peer's QP_BIND, name @mq (its peer) as its peer? */
static inline bool r2cc_mig_bind_is_for(const struct r2cc_mig_qp *mq,
					const struct r2cc_ctrl_qp_bind *b)
{
	return mq->qpn == b->peer.qpn && mq->dest_qpn == b->local.qpn &&
	       !memcmp(mq->gid, b->peer.gid, 16) &&
	       !memcmp(mq->dest_gid, b->local.gid, 16);
}

/* Keep @peer's @b for a QP not at RTR yet (a newer bind of the same pair
 * replaces the older). Past the budget, or out of memory, it is dropped,
 * logged and counted. */
void r2cc_mig_early_keep(uint64_t peer, const struct r2cc_ctrl_qp_bind *b);
/* The bind kept for @mq (now at RTR), taken out: true, @peer and @b set. */
bool r2cc_mig_early_take(const struct r2cc_mig_qp *mq, uint64_t *peer,
			 struct r2cc_ctrl_qp_bind *b);
/* The control thread's tick: binds whose QP never came drop (every few
 * seconds at most; nothing to do when none is kept). */
void r2cc_mig_early_sweep(void);
/* Every bind kept dropped (the module stops). */
void r2cc_mig_early_clear(void);
/* Binds dropped so far: the budget reached, no memory, or expired. */
uint64_t r2cc_mig_early_dropped(void);

#endif /* R2CC_MIG_EARLY_H */
