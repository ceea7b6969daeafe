/* SPDX-License-Identifier: MIT */
/*
 * inbox.h - the protection's own thread (inbox.c): what the control
 * channel hands over - peers' messages, ended resolves, its ticks - done
 * there, in the order it came, so that the channel thread never waits on
 * a verbs call or on ps.lock and keeps serving its sockets and lookups.
 */
#ifndef R2CC_MIG_INBOX_H
#define R2CC_MIG_INBOX_H

#include <stdint.h>

#include "chan.h"
#include "ctrl_msg.h"

/* Bytes of messages waiting for the thread, at most; past it a message
 * is dropped (said once, counted): its move ends at its bound. */
#define MIG_INBOX_MAX 67108864 /* 64 MiB */

/* The handlers of the channel's hooks, run on the inbox thread. */
struct r2cc_mig_inbox_ops {
	void (*msg)(uint64_t peer, const struct r2cc_ctrl_msg *m);
	void (*resolved)(uint64_t cookie, uint64_t peer,
			 enum r2cc_chan_res_end how);
	void (*tick)(void);
};

/* The thread started: 0, or -errno (the hooks then run their handlers
 * on the caller's thread, as if there were none). */
int r2cc_mig_inbox_start(const struct r2cc_mig_inbox_ops *ops);
/* The thread stopped (after the channel's: no hook comes any more);
 * what still waited is dropped. In a forked child: nothing. */
void r2cc_mig_inbox_stop(void);

/* The channel's hooks: each queues its call for the thread. */
void r2cc_mig_inbox_msg(uint64_t peer, const struct r2cc_ctrl_msg *m);
void r2cc_mig_inbox_resolved(uint64_t cookie, uint64_t peer,
			     enum r2cc_chan_res_end how);
void r2cc_mig_inbox_tick(void);

/* The time up to which the peers' messages have been handled, as the
 * calling thread knows: on the inbox thread, when it took up the calls
 * it runs now (a tick after them has seen what came before it, not what
 * waits behind); elsewhere @now. A wait for a peer's answer is measured
 * to it: a backlog here is not the peer's silence. */
uint64_t r2cc_mig_inbox_seen_ns(uint64_t now);

/* Since when (CLOCK_MONOTONIC ns) the inbox thread has run peers' calls
 * without waiting for more, 0 while it waits (the channel's busy_since:
 * its peers hear it lives meanwhile) */
uint64_t r2cc_mig_inbox_busy_since(void);

/* Messages dropped past MIG_INBOX_MAX since the start */
uint64_t r2cc_mig_inbox_dropped(void);

#endif /* R2CC_MIG_INBOX_H */
