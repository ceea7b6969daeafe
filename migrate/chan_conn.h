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
/* The thread's: connection @i readable (its frames handled), its connect
 * finished, a listener's calls accepted, deadlines passed. */
void chan_conn_readable(int i);
void chan_conn_connected(int i);
/* Connection @i's socket takes more: what waits for it sent (the lock
 * held); a connection that fails is closed. */
void chan_conn_writable(int i);
void chan_accept_on(int lfd);
void chan_expire(uint64_t now);
/* Every peer's r2cc_chan_peer_say() line, saying @why (the lock held) */
void chan_peers_say(const char *why);

#endif /* R2CC_MIG_CHAN_CONN_H */
