/* SPDX-License-Identifier: MIT */
/*
 * fence.h - a move's start and its failures (fence.c). Every function:
 * mq lock held.
 */
#ifndef R2CC_MIG_FENCE_H
#define R2CC_MIG_FENCE_H

#include "mig_int.h"

/* A fault on the program's QP of a ready QP: fenced, the move begins
 * (nothing if it is not ready, or already moving; with no move possible
 * the QP is passthrough, its errors native). */
void r2cc_mig_fence(struct r2cc_mig_qp *mq, uint32_t why);
/* Both ends' primaries are recycled and connected: the standby fenced,
 * the move back begins (nothing unless on the standby, running). */
void r2cc_mig_fence_back(struct r2cc_mig_qp *mq);
/* The move cannot happen (nothing replayed yet): what was held goes to
 * the program, then flushes for what was logged since the fence, the new
 * QP to ERR, the peer told; passthrough from now on. */
void r2cc_mig_abandon(struct r2cc_mig_qp *mq, const char *why);
/* Protection of @mq cannot go on: given up while running, abandoned
 * before a replay, after one both new QPs to ERR (the native errors). */
void r2cc_mig_fail(struct r2cc_mig_qp *mq, const char *why);
/* @mq runs on its standby, whose rail went down, and its own rail is
 * down too: no rail is left to its peer. The standby to ERR (what is
 * outstanding there flushes to the program, as its own QP's would), the
 * program's errors native from now on. */
void r2cc_mig_stranded(struct r2cc_mig_qp *mq);
/* Tell the peer: FAILOVER (our rq_psn; @refuse: this side cannot move),
 * or FAILOVER_ACK (@recvs its SENDs consumed; @taken: one partly). */
void r2cc_mig_send_fo(struct r2cc_mig_qp *mq, uint8_t type, uint32_t why,
		      uint64_t recvs, bool refuse);
void r2cc_mig_send_fo_taken(struct r2cc_mig_qp *mq, uint8_t type, uint32_t why,
			    uint64_t recvs, bool refuse, bool taken);
/* A lazy QP's standby, made at this fence, connects to the peer's once
 * its FAILOVER named it: 0 (or nothing to do) or an errno. */
int r2cc_mig_lazy_connect(struct r2cc_mig_qp *mq);

#endif /* R2CC_MIG_FENCE_H */
