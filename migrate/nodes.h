/* SPDX-License-Identifier: MIT */
/*
 * nodes.h - what is known of the peers' nodes (nodes.c). Every function:
 * ps.lock held.
 */
#ifndef R2CC_MIG_NODES_H
#define R2CC_MIG_NODES_H

#include "chan.h"
#include "mig_int.h"

/* What is known of @gid's node: does it run r2cc? NULL: nothing yet
 * (the entry moves when one more is remembered). */
struct node_seen *r2cc_mig_node_find(const uint8_t gid[16]);
/* Whether @gid's node runs r2cc, learned: remembered for any number of
 * nodes, the latest word wins. */
void r2cc_mig_node_seen(const uint8_t gid[16], enum r2cc_node_word word);
/* A resolve of @mq's peer ended @how without an owner (mq lock held
 * too): asked again, MIG_RESOLVE_GAP_MS on (r2cc_mig_bind_tick()), while
 * that may still find one (R2CC_UNPROT_PENDING), else the reason @mq
 * runs unprotected, said in @why. What it says of the peer's node is
 * remembered. */
enum r2cc_unprot r2cc_mig_resolve_again(struct r2cc_mig_qp *mq,
					enum r2cc_chan_res_end how,
					const char **why);

#endif /* R2CC_MIG_NODES_H */
