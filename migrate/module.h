/* SPDX-License-Identifier: MIT */
/*
 * module.h - migrate/'s one state and its dispatch (module.c).
 */
#ifndef R2CC_MIG_MODULE_H
#define R2CC_MIG_MODULE_H

#include "mig_int.h"

/* @mq's protection state (enum r2cc_prot_state) is @st, in its status
 * record too (r2cc-ctl). */
void r2cc_mig_set_state(struct r2cc_mig_qp *mq, uint32_t st);
/* @mq unprotected (R2CC_PROT_NONE) for @why, shown by r2cc-ctl. */
void r2cc_mig_set_none(struct r2cc_mig_qp *mq, enum r2cc_unprot why);

#endif /* R2CC_MIG_MODULE_H */
