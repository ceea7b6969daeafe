/* SPDX-License-Identifier: MIT */
/*
 * keys.h - the peer's memory keys (keys.c).
 */
#ifndef R2CC_MIG_KEYS_H
#define R2CC_MIG_KEYS_H

#include "mig_int.h"

/* The peer's MR_KEYS / MR_INVAL (ps.lock held): its MRs' R_Keys on the
 * rail of its standbys, remembered / forgotten. */
void r2cc_mig_got_mr_keys(uint64_t peer, const struct r2cc_ctrl_msg *m);
void r2cc_mig_got_mr_inval(uint64_t peer, const struct r2cc_ctrl_msg *m);
/* @rkey of @mq's peer as its MR's key on @mq's standby rail, in @out:
 * 0, or -ENOENT when the peer never announced it there. */
int r2cc_mig_rkey_xlate(const struct r2cc_mig_qp *mq, uint32_t rkey,
			uint32_t *out);

#endif /* R2CC_MIG_KEYS_H */
