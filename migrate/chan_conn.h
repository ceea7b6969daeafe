/* SPDX-License-Identifier: MIT */
/*
 * chan_conn.h - the control channel's connections and frames
 * (chan_conn.c). All with cs.lock held.
 */
#ifndef R2CC_MIG_CHAN_CONN_H
#define R2CC_MIG_CHAN_CONN_H

#include "chan_int.h"

/* The peer process @id, or NULL if none was heard from. */
struct peer *chan_peer_find(uint64_t id);
/* @id's, remembered from now on; NULL: past MIG_CHAN_PEERS_MAX, or no
 * memory (said once, counted). */
struct peer *chan_peer_get(uint64_t id);
/* Connection @i closed and its slot freed; its resolve told (or asked
 * again, for a LOOKUP the rendezvous never answered). */
void chan_conn_close(int i);
/* ... saying @why, if it was an open channel */
void chan_conn_close_why(int i, const char *why);
/* A non-blocking connect to @a for @role (serving resolve @res, or -1):
 * the connection's index, or -errno (-EMFILE: past the budget). */
int chan_conn_dial(const struct r2cc_ctrl_addr *a, enum conn_role role,
		   int res);
/* @m encoded and sent on connection @i, what the socket does not take
 * now kept for it (never waited for): 0, or -EIO (the connection failed,
 * or its peer reads too little: see MIG_CHAN_OUT_MAX). */
int chan_conn_write(int i, struct r2cc_ctrl_msg *m);
/* @len bytes of encoded frame(s) sent on connection @i as
 * chan_conn_write() sends them: 0, or -EIO. */
int chan_conn_put(int i, const uint8_t *frame, size_t len);
/* Another open connection to @peer than @i, or -1. */
int chan_conn_other_open(uint64_t peer, int i);

/* chan_stall.c: a connection TCP cannot get through, replaced. */
/* Frame @frame (@len bytes) written on @c: kept while TCP may not have
 * delivered it. */
void chan_tail_add(struct conn *c, const uint8_t *frame, size_t len);
/* @c's kept frames forgotten (it closes). */
void chan_tail_drop(struct conn *c);
/* Once a tick, and at once after r2cc_chan_rail_down(): a peer's
 * connection TCP stopped getting through (its retransmission timer
 * backed off CHAN_STALL_BACKOFF times), or one from an address on a rail
 * that went down, is replaced by another open to it, or one dialled to
 * another of its addresses (not on that rail). */
void chan_stall_check(uint64_t now);
/* @p said HELLO on connection @i: the replacement of its stalled one
 * (ours, or one it dialled saying so: @replaces), frames move to it. */
void chan_stall_hello(struct peer *p, int i, bool replaces);
/* The thread's: connection @i readable (its frames handled), its connect
 * finished, a listener's calls accepted, deadlines passed. */
void chan_conn_readable(int i);
void chan_conn_connected(int i);
/* Connection @i's socket takes more: what waits for it sent (the lock
 * held); a connection that fails is closed. */
void chan_conn_writable(int i);
void chan_accept_on(int lfd);
void chan_expire(uint64_t now);
/* Connection @i in words (its addresses and ports, what TCP says of it)
 * into @buf of @len bytes: the length written. */
size_t chan_conn_describe(int i, char *buf, size_t len);
/* Every peer's r2cc_chan_peer_say() line, saying @why (the lock held) */
void chan_peers_say(const char *why);

#endif /* R2CC_MIG_CHAN_CONN_H */
