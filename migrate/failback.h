/* SPDX-License-Identifier: MIT */
/*
 * failback.h - the move back (failback.c). Every function: mq lock held
 * unless it says otherwise.
 */
#ifndef R2CC_MIG_FAILBACK_H
#define R2CC_MIG_FAILBACK_H

#include "mig_int.h"

/* The standby failed while the QP runs on it: move back now if the
 * primary's rail is up (the next tick proposes). True: the move back is
 * under way. */
bool r2cc_mig_fb_urgent(struct r2cc_mig_qp *mq);
/* The channel's tick (no lock held): proposals, hold times, bounds. */
void r2cc_mig_fb_tick(void);
/* The peer's FAILBACK message (ps.lock held, no QP's). */
void r2cc_mig_got_failback(uint64_t peer, const struct r2cc_ctrl_msg *m);
/* Moving back, our receives are re-posted on the primary: the peer's
 * replay may go (POSTED). */
void r2cc_mig_fb_posted(struct r2cc_mig_qp *mq);
/* The move back is done: the standby re-armed with the peer (or, its
 * rail down at either end, unprotected until it is up at both). */
void r2cc_mig_fb_moved(struct r2cc_mig_qp *mq);
/* A standby a move back left unarmed, its rail up here (ps.lock held):
 * our REARM goes out; with the peer's, the round completes. True: look
 * again on the next tick (too soon after the last try). */
bool r2cc_mig_fb_rearm_retry(struct r2cc_mig_qp *mq, uint64_t now);
/* A new standby is bound instead (rebind.c, bind.c): no re-arm pending. */
void r2cc_mig_fb_rearm_drop(struct r2cc_mig_qp *mq);
/* The peer moves back (its FAILOVER) while this side is not moving: it
 * gave up waiting for the peer's READY of a round whose READY of its own
 * went out. Joined: the primary connected again as it was for that round
 * and the backup fenced. True: the move back is under way; false: this
 * side cannot (no such round, its rail down, no recycle). */
bool r2cc_mig_fb_join(struct r2cc_mig_qp *mq);
/* @mq's primary rail went down: a proposal of it is withdrawn. */
void r2cc_mig_fb_rail_down(struct r2cc_mig_qp *mq);

#endif /* R2CC_MIG_FAILBACK_H */
