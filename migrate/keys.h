/* SPDX-License-Identifier: MIT */
/*
 * keys.h - the peer's memory keys, and ours announced to it (keys.c).
 */
#ifndef R2CC_MIG_KEYS_H
#define R2CC_MIG_KEYS_H

#include "mig_int.h"

/* Keys one peer process may have kept here (all rails): past them its
 * MR_KEYS are dropped, said once and counted (ps.keys_dropped). */
#define MIG_PEER_KEYS_MAX 65536

/* The peer's MR_KEYS / MR_INVAL (ps.lock held): its MRs' R_Keys on the
 * rail of its standbys, remembered / forgotten. */
void r2cc_mig_got_mr_keys(uint64_t peer, const struct r2cc_ctrl_msg *m);
void r2cc_mig_got_mr_inval(uint64_t peer, const struct r2cc_ctrl_msg *m);
/* Our MRs of @pd with a shadow on @rail, announced to @peer unless they
 * were (ps.lock held): MR_KEYS, as many as they take. 0 or -errno (then
 * they are announced at the next call). */
int r2cc_mig_keys_announce(uint64_t peer, const void *pd, int rail);
/* Messages to @peer may have been lost (the channel's hook; takes
 * ps.lock): what it was told of our keys is told again, whole, at the
 * first chance: the tick's once its channel is open, an MR of that PD
 * registered, a bind. */
void r2cc_mig_keys_lost(uint64_t peer);
/* The tick's: keys told again where they may have been lost (takes
 * ps.lock; nothing to do, no lock). */
void r2cc_mig_keys_tick(void);
/* @rkey of @mq's peer as its MR's key on @mq's standby rail, in @out:
 * 0, or -ENOENT when the peer never announced it there. Lock-free but
 * for @mq's own lock (held: it keeps where its peer's keys are). */
int r2cc_mig_rkey_xlate(struct r2cc_mig_qp *mq, uint32_t rkey, uint32_t *out);
/* Test hook: @peer's @rkey is @backup_rkey on @rail (ps.lock held). */
void r2cc_mig_keys_put(uint64_t peer, int rail, uint32_t rkey,
		       uint32_t backup_rkey);

#endif /* R2CC_MIG_KEYS_H */
