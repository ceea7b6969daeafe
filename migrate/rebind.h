/* SPDX-License-Identifier: MIT */
/*
 * rebind.h - a new standby for a QP whose standby's rail went down
 * (rebind.c).
 */
#ifndef R2CC_MIG_REBIND_H
#define R2CC_MIG_REBIND_H

/* The channel's tick (no lock held): if a rail changed since the last
 * sweep (ps.rebind), QPs running on their own QP whose standby's rail is
 * down get a new standby, bound to the peer again. */
void r2cc_mig_rebind_sweep(void);
/* @mq was just made ready (mq lock held): if its standby's rail went
 * down meanwhile (no rail event will come), the next tick rebinds it. */
void r2cc_mig_rebind_check(const struct r2cc_mig_qp *mq);

#endif /* R2CC_MIG_REBIND_H */
