/* SPDX-License-Identifier: MIT */
/*
 * bcq.h - the standby CQs, shared per program CQ and rail (bcq.c).
 */
#ifndef R2CC_MIG_BCQ_H
#define R2CC_MIG_BCQ_H

#include "mig_int.h"

/* Places for @mq's backup on standby CQs of @ctx feeding its program CQs
 * (@scqe sends and @rcqe receives it may complete; one CQ when the
 * program's QP has one), made on @ch when none has room (mq lock held).
 * 0 or an errno. */
int r2cc_mig_bcq_attach(struct r2cc_mig_qp *mq, struct ibv_context *ctx,
			struct ibv_comp_channel *ch, int scqe, int rcqe);
/* @mq's place for its backup's sends, or (@recv) receives: the same one
 * when the program's QP has one CQ. */
static inline struct r2cc_mig_bslot *r2cc_mig_bslot_of(struct r2cc_mig_qp *mq,
						       bool recv)
{
	return recv && mq->bs[1].b ? &mq->bs[1] : &mq->bs[0];
}
/* Its backup QP was made: completions with its number are its own. */
int r2cc_mig_bcq_bind(struct r2cc_mig_qp *mq, uint32_t bqpn);
/* Its places given up, the backup QP destroyed (mq lock held): what
 * its CQs still hold of it is dropped when polled. */
void r2cc_mig_bcq_leave(struct r2cc_mig_qp *mq);
/* Everything its standby CQs hold of its backup dropped (mq lock held,
 * the backup in RESET: nothing more comes). */
void r2cc_mig_bcq_empty(struct r2cc_mig_qp *mq);
/* Its backup's next receive-side completion (the send side's too when
 * it has one CQ) in @wc (mq lock held): true, or false when none. */
bool r2cc_mig_bcq_take(struct r2cc_mig_qp *mq, struct ibv_wc *wc);
/* Up to @n completions of @mc's standby CQs for the program, each handed
 * to its QP under its lock (r2cc_mig_backup_wc()): how many. Stops when
 * something is stashed for @mc (it comes first). */
int r2cc_mig_bcq_poll(struct r2cc_mig_cq *mc, int n, struct ibv_wc *wc);
/* Arm @mc's standby CQs with a moved QP (the program armed @mc). */
void r2cc_mig_bcq_arm(struct r2cc_mig_cq *mc);
/* An event of standby CQ @b (acknowledged): @mc's program woken. */
void r2cc_mig_bcq_event(struct r2cc_mig_bcq *b);
/* @mq's places polled and armed with its program CQs (it moved onto its
 * backup), or no longer (mq lock held). */
void r2cc_mig_bcq_join(struct r2cc_mig_qp *mq);
void r2cc_mig_bcq_detach(struct r2cc_mig_qp *mq);
/* @mc's standby CQs and lists freed (the program's CQ is). */
void r2cc_mig_bcq_free_all(struct r2cc_mig_cq *mc);

#endif /* R2CC_MIG_BCQ_H */
