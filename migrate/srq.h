/* SPDX-License-Identifier: MIT */
/*
 * srq.h - an SRQ and its QPs moved as one group (srq.c).
 */
#ifndef R2CC_MIG_SRQ_H
#define R2CC_MIG_SRQ_H

#include "mig_int.h"

/* @mq joins its program SRQ @s (a new QP, no lock held; one joining a
 * moved SRQ is unprotected) / leaves it (mq lock held). */
void r2cc_mig_srq_joined(struct r2cc_mig_qp *mq, struct r2cc_mig_srq *s);
void r2cc_mig_srq_left(struct r2cc_mig_qp *mq);
/* The standby rail of @mq is its SRQ's (pinned by the first QP, whose
 * backup SRQ is made now); @d is changed to it (mq lock held): 0 or
 * -errno. */
int r2cc_mig_srq_pin(struct r2cc_mig_qp *mq, struct r2cc_mig_desc *d);
/* A receive of @mq polled, @ok: successful (mq lock held). */
void r2cc_mig_srq_retire(struct r2cc_mig_qp *mq, uint64_t wr_id, bool ok);
/* @mq was fenced: its SRQ moves, all its QPs (mq lock held). */
void r2cc_mig_srq_fenced(struct r2cc_mig_qp *mq);
/* The peer's FAILOVER_ACK for @mq (mq lock held): -EPIPE when the SRQ
 * is not moving (it cannot move). */
int r2cc_mig_srq_ack(struct r2cc_mig_qp *mq, uint64_t consumed, bool taken);
/* Fence the rest of a moving SRQ's QPs, move its receives when all are
 * in, or give up; an SRQ at home only after a change of one of its QPs
 * (ps.srq_sweep) (ps.lock held, no QP's). */
void r2cc_mig_srq_sweep(void);

#endif /* R2CC_MIG_SRQ_H */
