/* SPDX-License-Identifier: MIT */
/*
 * standby.h - the standby (backup) QPs' verbs calls (standby.c). Every
 * function: mq lock held; 0 or a positive errno unless it says otherwise.
 */
#ifndef R2CC_MIG_STANDBY_H
#define R2CC_MIG_STANDBY_H

#include "mig_int.h"

/* The standby: its CQ(s) and an RC QP on @d's shadow PD, RESET -> INIT
 * (@locked: ps.lock held, its rail's ring channel may be made). */
int r2cc_mig_backup_new(struct r2cc_mig_qp *mq, const struct r2cc_mig_desc *d,
			bool locked);
/* @mq's standby moves to @d's rail (d->backup_rail, _ctx, _pd; ps.lock
 * held): the old one dropped (a parked one too), a new one made there
 * unless the QP is lazy or had none, the QP's rail fields and status
 * slot set to it. 0, or an errno (no standby left). */
int r2cc_mig_backup_move(struct r2cc_mig_qp *mq, struct r2cc_mig_desc *d);
/* The standby and its CQs destroyed (nothing if there is none). */
void r2cc_mig_backup_destroy(struct r2cc_mig_qp *mq);
/* The standby RTR towards the peer's (peer_bind), and RTS when the
 * program's QP is there. */
int r2cc_mig_backup_to_peer(struct r2cc_mig_qp *mq);
/* The standby RTR -> RTS, with the program's timeout and retries. */
int r2cc_mig_backup_rts(struct r2cc_mig_qp *mq);
/* The standby to RESET and back to RTS towards the peer's re-armed one
 * (@psn: its first PSN), its CQs emptied first. */
int r2cc_mig_backup_rearm(struct r2cc_mig_qp *mq, uint32_t psn);
/* A lazy QP's standby made now, or a parked one taken out of RESET
 * (-> INIT, a new first PSN) / connected to the peer's, named by its
 * FAILOVER (RTR, and RTS if the program's QP is) / parked after a move
 * back (RESET, its CQs emptied: kept for the next failover, not destroyed
 * while the program runs) / dropped. */
int r2cc_mig_backup_make(struct r2cc_mig_qp *mq);
int r2cc_mig_backup_connect(struct r2cc_mig_qp *mq, uint32_t qpn, uint32_t psn);
int r2cc_mig_backup_park(struct r2cc_mig_qp *mq);
void r2cc_mig_backup_drop(struct r2cc_mig_qp *mq);
/* The RNR NAK timer (IB encoding) of a QP r2cc connects, the program's
 * @prog capped at 0.64 ms (12): the peer's replay races the re-post of
 * our receives at every move, and rdma_cm leaves 0, the longest (655 ms
 * a NAK). Any mq lock. */
uint8_t r2cc_mig_rnr_timer(uint8_t prog);
/* What both ends name @mq's by, into its gid and dest_gid (read once, at
 * its protection): their GIDs, or their LID keys (lid.h) when @d's path
 * is by LID. 0, or -errno. */
int r2cc_mig_read_ends(struct r2cc_mig_qp *mq, const struct r2cc_mig_desc *d);
/* The standby's address on @d's rail, into bgid and blid (0 on RoCE): its
 * GID at the program's index, or by LID its port's GID 0 and LID. 0, or
 * -EIO (by LID: no LID). */
int r2cc_mig_read_standby(struct r2cc_mig_qp *mq,
			  const struct r2cc_mig_desc *d);
/* The completion channel of the standbys' CQs on @d's rail, made with the
 * first when @make (ps.lock held; no mq lock needed). NULL: none. */
struct ibv_comp_channel *r2cc_mig_ring_channel(const struct r2cc_mig_desc *d,
					       bool make);

#endif /* R2CC_MIG_STANDBY_H */
