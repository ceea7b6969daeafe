/* SPDX-License-Identifier: MIT */
/*
 * wake.h - waking a program asleep on its completion channel (wake.c).
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
/* The control thread's handler of a standby CQ channel (@arg). */
void r2cc_mig_ring_ready(int fd, void *arg);

#endif /* R2CC_MIG_WAKE_H */
