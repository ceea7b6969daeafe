/* SPDX-License-Identifier: MIT */
/*
 * chan_res.h - the control channel's resolves: which process owns a
 * (GID, QPN), asked of its node's rendezvous (chan_res.c). All with
 * cs.lock held.
 */
#ifndef R2CC_MIG_CHAN_RES_H
#define R2CC_MIG_CHAN_RES_H

#include "chan_int.h"

/* Resolve @r done @how: its owner @peer (R2CC_RES_FOUND; 0 otherwise);
 * the hook told, the lock dropped meanwhile. */
void chan_res_end(int r, uint64_t peer, enum r2cc_chan_res_end how);
/* Resolve @r given up @how, @why (a literal: each said once at info
 * level, then at debug level): chan_res_end(r, 0, how) */
void chan_res_fail(int r, enum r2cc_chan_res_end how, const char *why);
/* Resolve @r's node had no owner for it (@how, @why): the job's next
 * node is asked, if it sweeps them (chan_hosts.c), else
 * chan_res_fail() */
void chan_res_miss(int r, enum r2cc_chan_res_end how, const char *why);
/* Dial the owner's next address, or give the resolve up. */
void chan_res_next_addr(int r);
/* A channel to @peer opened: the resolves waiting on a call to it end
 * (the lock held) */
void chan_res_opened(uint64_t peer);
/* Dial the rendezvous of the GID's node: the IPv4 address in it, else
 * the job's nodes in turn (a resolve that finds no connection to spare,
 * or waits for the nodes' addresses, waits up to MIG_CHAN_RES_WAIT_MS). */
void chan_res_start(int r);
/* A LOOKUP on connection @i answered (the lock dropped for the hook). */
void chan_serve_lookup(int i, const struct r2cc_ctrl_msg *m);
/* A LOOKUP_REPLY on connection @i: the owner dialled, or the end. */
void chan_got_reply(int i, const struct r2cc_ctrl_msg *m);

#endif /* R2CC_MIG_CHAN_RES_H */
