/* SPDX-License-Identifier: MIT */
/*
 * move.h - a move's progress (move.c).
 */
#ifndef R2CC_MIG_MOVE_H
#define R2CC_MIG_MOVE_H

#include "mig_int.h"

/* A FAILOVER or FAILOVER_ACK from @peer (ps.lock held): a fence, the
 * replay once both rq_psns are known, the receives re-posted. */
void r2cc_mig_got_failover(uint64_t peer, const struct r2cc_ctrl_msg *m);
/* Replay @mq's sends once both rq_psns are known (mq lock held); moving
 * back, once the peer's receives are re-posted too (fb.peer_posted). */
void r2cc_mig_replay(struct r2cc_mig_qp *mq);
/* @mq's receives were moved by its SRQ (mq lock held): that direction
 * is done. */
void r2cc_mig_recv_moved(struct r2cc_mig_qp *mq);

#endif /* R2CC_MIG_MOVE_H */
