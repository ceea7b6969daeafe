/* SPDX-License-Identifier: MIT */
/*
 * bind.h - binding a QP's standby to the peer's (bind.c): the channel's
 * and the dispatcher's hooks.
 */
#ifndef R2CC_MIG_BIND_H
#define R2CC_MIG_BIND_H

#include "chan.h"
#include "mig_int.h"

/* r2cc_chan_resolve() for the QP of @cookie ended @how (@peer: the
 * owner, R2CC_RES_FOUND); the inbox thread, no lock held. */
void r2cc_mig_on_resolved(uint64_t cookie, uint64_t peer,
			  enum r2cc_chan_res_end how);
/* The peer's QP_BIND (ps.lock held): kept until our QP is at RTR, the
 * rail agreed, the standby connected. */
void r2cc_mig_got_bind(uint64_t peer, const struct r2cc_ctrl_msg *m);

/* MR_KEYS and QP_BIND to the peer, our half of the binding (mq lock
 * held); @again: our standby moved (R2CC_CTRL_BIND_AGAIN). 0 or -errno. */
int r2cc_mig_send_bind(struct r2cc_mig_qp *mq, bool again);
/* A binding QP whose QP_BIND got no answer sends it again after
 * MIG_BIND_AGAIN_MS, then after twice that, up to a minute: a frame lost
 * with a connection must not leave an end unbound (the peer answers a
 * repeated bind it is bound with by its own), and a peer that reaches RTR
 * late still finds one. A resolve that got no answer is asked again from
 * here too (MIG_RESOLVE_GAP_MS later). The tick drives it; no walk while
 * none is out. */
#define MIG_BIND_AGAIN_MS 5000
#define MIG_BIND_AGAIN_MAX_MS 60000
void r2cc_mig_bind_tick(void);
/* No standby for @mq after all, for @why, of @kind (mq lock held), said
 * once per process (then at debug level): passthrough from now on. */
void r2cc_mig_unprotected(struct r2cc_mig_qp *mq, enum r2cc_unprot kind,
			  const char *why);

#endif /* R2CC_MIG_BIND_H */
