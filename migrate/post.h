/* SPDX-License-Identifier: MIT */
/*
 * post.h - the program's posts on a protected QP (post.c), and one WR
 * posted on either of its paths for the move. Every function: mq lock
 * held; 0 or -errno.
 */
#ifndef R2CC_MIG_POST_H
#define R2CC_MIG_POST_H

#include "mig_int.h"

/* Protection of @mq ends for good, logged with @why and @err (either
 * sign); a move that has replayed nothing yet is abandoned. */
void r2cc_mig_give_up(struct r2cc_mig_qp *mq, const char *why, int err);
/* One WR on the standby, its keys translated to the standby's rail. */
int r2cc_mig_backup_send(struct r2cc_mig_qp *mq, const struct ibv_send_wr *wr);
int r2cc_mig_backup_recv(struct r2cc_mig_qp *mq, const struct ibv_recv_wr *wr);
/* One WR on the program's QP, through the provider's post the program
 * last used (-ENOSYS before its first). */
int r2cc_mig_primary_send(struct r2cc_mig_qp *mq, const struct ibv_send_wr *wr);
int r2cc_mig_primary_recv(struct r2cc_mig_qp *mq, const struct ibv_recv_wr *wr);
/* @n SGEs of the program's on @pd into @out, their lkeys translated to
 * the shadow MRs' on @rail (at most R2CC_MIG_MAX_SGE: else -E2BIG;
 * -ENOENT for a key without a shadow). No lock needed. */
int r2cc_mig_sge_xlate(const void *pd, int rail, const struct ibv_sge *in,
		       int n, struct ibv_sge *out);

#endif /* R2CC_MIG_POST_H */
