/* SPDX-License-Identifier: MIT */
/*
 * untune.h - the program's ACK timeout and retry counts back on a QP r2cc
 * stopped protecting (untune.c).
 */
#ifndef R2CC_MIG_UNTUNE_H
#define R2CC_MIG_UNTUNE_H

#include "mig_int.h"

/* @mq runs unprotected from now on (any thread, any lock): if r2cc's
 * values are on its QP, its next post puts the program's back. */
void r2cc_mig_untune_due(struct r2cc_mig_qp *mq);
/* The program posts @wr on @mq (mq lock held): true if it is held here
 * (its QP in SQD; *@ret and *@bad as ibv_post_send's), false if it goes
 * to the provider as it comes. A QP due starts its trip through SQD. */
bool r2cc_mig_untune_post(struct r2cc_mig_qp *mq, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad, int *ret);
/* @mq is released: what it holds is dropped (mq lock held). */
void r2cc_mig_untune_drop(struct r2cc_mig_qp *mq);
/* The tick's part (ps.lock held): QPs in SQD whose send queue drained
 * given the program's values, taken back to RTS, their held sends posted. */
void r2cc_mig_untune_tick(void);

#endif /* R2CC_MIG_UNTUNE_H */
