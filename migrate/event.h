/* SPDX-License-Identifier: MIT */
/*
 * event.h - r2cc-ctl's events of a QP (event.c).
 */
#ifndef R2CC_MIG_EVENT_H
#define R2CC_MIG_EVENT_H

#include "mig_int.h"

/* @mq's R2CC_EV_* @kind recorded for r2cc-ctl events, with @wrs and
 * @bytes replayed (mq->lock held). */
void r2cc_mig_event(const struct r2cc_mig_qp *mq, uint32_t kind, uint64_t wrs,
		    uint64_t bytes);
/* @mq's standby moved from rail @from (down) to @to (mq->lock held). */
void r2cc_mig_event_standby(const struct r2cc_mig_qp *mq, int from, int to);

#endif /* R2CC_MIG_EVENT_H */
