/* SPDX-License-Identifier: MIT */
/*
 * wake.h - waking a program asleep on its completion channel (wake.c),
 * and the standbys' CQs listed on the program's.
 */
#ifndef R2CC_MIG_WAKE_H
#define R2CC_MIG_WAKE_H

#include "mig_int.h"

/* If the program armed @mc since the last ring, raise its completion
 * event (mq lock held): a flush of @mq's primary in ERR, else of @mc's
 * doorbell. At most one ring per arming. */
void r2cc_mig_ring(struct r2cc_mig_qp *mq, struct r2cc_mig_cq *mc);
/* Both of @mq's program CQs rung (mq lock held; after the last push). */
void r2cc_mig_wake(struct r2cc_mig_qp *mq);
/* Room on the lists of @scq and @rcq (a new QP's program CQs) for the
 * standby CQs of one QP (-ENOMEM: none, the QP cannot be protected); given
 * back when the QP is released. */
int r2cc_mig_cq_reserve(struct r2cc_mig_cq *scq, struct r2cc_mig_cq *rcq);
void r2cc_mig_cq_unreserve(struct r2cc_mig_cq *scq, struct r2cc_mig_cq *rcq);
/* @mc's lists, the outgrown ones too (the CQ is being freed). */
void r2cc_mig_cq_list_free(struct r2cc_mig_cq *mc);
/* @mq's standby CQs join its program CQs' lists (polled and armed with
 * them), and are armed now (mq lock held). */
void r2cc_mig_cq_join(struct r2cc_mig_qp *mq);
/* ... and leave them (takes each CQ's list lock). */
void r2cc_mig_cq_detach(struct r2cc_mig_qp *mq);
/* The control thread's handler of a standby CQ channel (@arg). */
void r2cc_mig_ring_ready(int fd, void *arg);

#endif /* R2CC_MIG_WAKE_H */
