/* SPDX-License-Identifier: MIT */
/*
 * chan_send.h - the control channel's sends (chan_send.c). All with
 * cs.lock held.
 */
#ifndef R2CC_MIG_CHAN_SEND_H
#define R2CC_MIG_CHAN_SEND_H

#include <stdint.h>

#include "ctrl_msg.h"

/* @m to @peer on one of its open connections, now: 0, or -ENOTCONN
 * (none open, or each failed the write and was closed). */
int chan_send_raw(uint64_t peer, struct r2cc_ctrl_msg *m);
/* What other threads sent, gathered in cs.outbox (for @peer, or for
 * every peer with @peer 0), sent now. */
void chan_outbox_flush(uint64_t peer);

#endif /* R2CC_MIG_CHAN_SEND_H */
