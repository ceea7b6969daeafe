/* SPDX-License-Identifier: MIT */
/*
 * complete.h - a protected QP's completions (complete.c): what the move
 * uses of them. Every function: mq lock held.
 */
#ifndef R2CC_MIG_COMPLETE_H
#define R2CC_MIG_COMPLETE_H

#include "mig_int.h"

/* The program CQ that @wc of @mq belongs to (its send or receive CQ). */
struct r2cc_mig_cq *r2cc_mig_prog_cq(const struct r2cc_mig_qp *mq,
				     const struct ibv_wc *wc);
/* A completion of send log entry @e with @status, pushed to the stash of
 * @mq's send CQ (logged if it is full). */
void r2cc_mig_synth(struct r2cc_mig_qp *mq, const struct r2cc_sendlog_ent *e,
		    enum ibv_wc_status status);
/* The oldest entries of the send log the move has decided (executed by
 * the peer, lost, flushed) complete now, in order. */
void r2cc_mig_drain_done(struct r2cc_mig_qp *mq);
/* A completion of a fenced or retired incarnation: 1 deliver it (a
 * receive the peer's executed SEND consumed), 0 hidden (and held). */
int r2cc_mig_old_wc(struct r2cc_mig_qp *mq, struct r2cc_mig_cq *mc,
		    const struct ibv_wc *wc);
/* A completion @wc of @mq's backup (polled from its standby CQ: the
 * receive one if @rcq), in the program's terms: 1 delivered in @wc, 0
 * none, -1 taken (hidden, or stashed). */
int r2cc_mig_backup_wc(struct r2cc_mig_qp *mq, bool rcq, struct ibv_wc *wc);
/* Hidden completions are held from now on, room for every WR. */
void r2cc_mig_hold_start(struct r2cc_mig_qp *mq);
/* What was held goes to the program's stashes, in order; then freed. */
void r2cc_mig_give_back(struct r2cc_mig_qp *mq);
/* What was held is not needed any more (the move is done): freed. */
void r2cc_mig_unhold(struct r2cc_mig_qp *mq);
/* @mq is passthrough from now on; what its send log owes the program
 * (successes of work the peer executed, behind a READ read again) still
 * completes, in order, as the QP completes what precedes it. */
void r2cc_mig_stop_logging(struct r2cc_mig_qp *mq);

#endif /* R2CC_MIG_COMPLETE_H */
