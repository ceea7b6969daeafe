/* SPDX-License-Identifier: MIT */
/*
 * chan.h - the control channel between the r2cc instances of connected
 * processes (DESIGN §5): TCP, one thread per process, frames from
 * ctrl_msg.h. A node's rendezvous is the well-known port R2CC_CTRL_PORT,
 * bound by every r2cc process of the user with SO_REUSEPORT (the kernel
 * lets only the same user share it); whichever accepts a LOOKUP answers
 * it from the node-local status records. Peers then talk directly.
 * Locks: one channel lock, never held while calling the owner's hooks.
 */
#ifndef R2CC_MIGRATE_CHAN_H
#define R2CC_MIGRATE_CHAN_H

#include <stdbool.h>
#include <stdint.h>

#include "ctrl_msg.h"

#define MIG_CHAN_STEP_MS 2000 /* bound of each connect / reply wait */
/* A call's HELLO answered at most this long after its connect succeeded:
 * the owner is there, and under load its channel thread may be slow (a
 * call dropped at the step bound went to its next address, the owner
 * answered the first one late, and every address was tried in vain) */
#define MIG_CHAN_HELLO_MS 10000
/* Budgets past which the channel refuses, says so once and counts
 * (struct r2cc_chan_stats): peer processes remembered (each keeps its
 * replay window), resolves waiting or under way, connections (also at
 * most a quarter of RLIMIT_NOFILE's soft limit). A resolve that finds
 * no connection to spare waits for one, up to MIG_CHAN_RES_WAIT_MS. */
#define MIG_CHAN_PEERS_MAX 65536u
#define MIG_CHAN_RES_MAX 65536
#define MIG_CHAN_CONNS_MAX 65536
#define MIG_CHAN_RES_WAIT_MS 30000
/* A resolve whose GID names no node asks the job's nodes in turn
 * (chan_hosts.c) for at most MIG_CHAN_SWEEP_MS; a sweep that found no
 * owner answers the GID's other resolves for MIG_CHAN_SWEEP_GAP_MS */
#define MIG_CHAN_SWEEP_MS 30000
#define MIG_CHAN_SWEEP_GAP_MS 1000
/* Lookups (a connection each) under way at once, at most; the rest wait
 * their turn, so that peers' calls always find a connection to spare.
 * Within that, a window (struct chan_lookup_window): it starts at
 * MIG_CHAN_LOOKUPS_START, grows by one for each lookup answered and is
 * halved, at most once a step bound and not below MIG_CHAN_LOOKUPS_MIN,
 * by one that went unanswered: the ranks of a node binding hundreds of
 * QPs each at once would otherwise overflow the rendezvous' listen
 * queues (its processes answer more slowly than they are asked), and
 * each SYN dropped there costs a lookup a second or its step. */
#define MIG_CHAN_LOOKUPS 64
#define MIG_CHAN_LOOKUPS_START 8
#define MIG_CHAN_LOOKUPS_MIN 2
/* A connection's frames the socket has not taken yet: kept (a burst of
 * failovers, a peer slow to read) up to MIG_CHAN_OUT_MAX bytes, for as
 * long as the peer reads some every MIG_CHAN_OUT_STALL_MS; past either
 * the connection is closed, its peer's messages counted as lost. */
#define MIG_CHAN_OUT_MAX 8388608 /* 8 MiB */
#define MIG_CHAN_OUT_STALL_MS 10000
/* A backlog of peers' messages the owner works through (a thousand QPs'
 * moves take seconds under load): its peers, waiting for answers, are
 * told the process lives (r2cc_chan_heard_ns()) this often meanwhile. */
#define MIG_CHAN_BUSY_MS 1000
/* r2cc_chan_peer_say() says a peer's line at most this often */
#define MIG_CHAN_SAY_MS 10000

/* How a resolve ended (hooks->on_resolved). */
enum r2cc_chan_res_end {
	R2CC_RES_FOUND, /* the owner named, a channel to it open */
	/* The node's rendezvous refused the call, or the GID names no node
	 * it can call: no r2cc there to ask */
	R2CC_RES_NO_R2CC,
	R2CC_RES_NO_OWNER, /* the node's r2cc knows no owner of the QP */
	/* No answer in time (a step past its bound, no connection to
	 * spare, the owner's calls not taken): nothing learned */
	R2CC_RES_UNANSWERED,
};

struct r2cc_chan_hooks {
	/* A frame from an open peer (not HELLO/LOOKUP*); @peer is its id. */
	void (*on_msg)(uint64_t peer, const struct r2cc_ctrl_msg *m);
	/* r2cc_chan_resolve() ended @how: @peer is the owner's id
	 * (R2CC_RES_FOUND), 0 otherwise. */
	void (*on_resolved)(uint64_t cookie, uint64_t peer,
			    enum r2cc_chan_res_end how);
	/* The rendezvous: which local process owns @q? Fill @r (found,
	 * pid, owner, naddr, addr: the owner's direct port). */
	void (*lookup)(const struct r2cc_ctrl_qp_ref *q,
		       struct r2cc_ctrl_lookup_reply *r);
	/* Every tick of the thread (about 200 ms; may be NULL). */
	void (*on_tick)(void);
	/* Messages to @peer may have been lost: frames that did not go, or
	 * its last open connection closed (may be NULL). */
	void (*on_lost)(uint64_t peer);
	/* Since when (CLOCK_MONOTONIC ns) the owner has worked through
	 * peers' messages without a pause, 0 if it waits for more (may be
	 * NULL). Past MIG_CHAN_BUSY_MS every peer with an open channel
	 * hears a KEEPALIVE each MIG_CHAN_BUSY_MS meanwhile. */
	uint64_t (*busy_since)(void);
};

struct r2cc_chan_cfg {
	uint16_t port; /* the node rendezvous, R2CC_CTRL_PORT */
	const char *pref_if; /* R2CC_CTRL_IF: listed first to peers, or "" */
	/* The rails' netdevs: addresses on them are tagged with the rail. */
	const char *const *rail_if;
	int nrail;
	/* The job's nodes (R2CC_PEERS, else SLURM_JOB_NODELIST; may be
	 * NULL), asked in turn for a peer whose GID carries no IPv4
	 * address, or for every peer when !peer_by_gid */
	const char *peers;
	bool peer_by_gid;
	const char *node_map; /* R2CC_NODE_MAP (may be NULL), asked first */
};

/**
 * r2cc_chan_start() - open the listeners and start the channel thread
 * @cfg: settings (copied)
 * @key: the job key (copied; its self id is set here)
 * @hooks: the owner's hooks (kept)
 * Return: 0 or -errno; nothing is left running on error.
 */
int r2cc_chan_start(const struct r2cc_chan_cfg *cfg,
		    const struct r2cc_ctrl_key *key,
		    const struct r2cc_chan_hooks *hooks);
/* Stop the thread and close everything; safe if not started. */
void r2cc_chan_stop(void);
bool r2cc_chan_running(void);
/* When a frame of @peer's was last accepted (CLOCK_MONOTONIC ns), or 0:
 * never, or not running. */
uint64_t r2cc_chan_heard_ns(uint64_t peer);
/* What went each way between this process and one peer */
struct r2cc_chan_peer_stats {
	uint64_t frames_out, msgs_out, frames_in, msgs_in;
	uint64_t sent_ns, heard_ns; /* the last frame each way; 0: none */
	size_t queued; /* bytes its channel's socket has not taken */
	bool open; /* a channel to it is open */
};
/* @peer's figures; -ENOENT if it is not known (or not running) */
int r2cc_chan_peer_stats(uint64_t peer, struct r2cc_chan_peer_stats *st);
/* The same as one info line, saying @why (at most once in
 * MIG_CHAN_SAY_MS a peer) */
void r2cc_chan_peer_say(uint64_t peer, const char *why);
/* The owner noted that @peer answered something it waited for (a move:
 * r2cc_mig_waited()); when it last did, or said it works through a
 * backlog of messages (a KEEPALIVE frame) (CLOCK_MONOTONIC ns), or 0. */
void r2cc_chan_answered(uint64_t peer);
uint64_t r2cc_chan_answered_ns(uint64_t peer);
/* @rail went down (any thread): channels from its addresses are replaced
 * at the thread's next round, as stalled ones are, not once TCP's timer
 * has backed off (the moves this fault starts need them). */
void r2cc_chan_rail_down(int rail);
/* This process's id (0: not running) and its direct port. */
uint64_t r2cc_chan_self(void);
uint16_t r2cc_chan_port(void);
/* Have the thread call @ready(@fd, @arg) whenever @fd (non-blocking, the
 * caller's) is readable; no lock held then. 0, -ENOSPC (16), -ENOTCONN. */
int r2cc_chan_watch(int fd, void (*ready)(int fd, void *arg), void *arg);
/* The node's addresses peers may reach @port on (mgmt first): count. */
int r2cc_chan_addrs(struct r2cc_ctrl_addr *out, int max, uint16_t port);
/**
 * r2cc_chan_resolve() - find the process owning (@q->gid, @q->qpn) and
 * open a channel to it; hooks->on_resolved(@cookie, ...) tells the end,
 * each step bounded by MIG_CHAN_STEP_MS: the LOOKUP (asked again, up to
 * 3 times, on a fresh connection when the rendezvous takes it and never
 * answers), then a HELLO to each of the owner's addresses until one
 * opens.
 * Return: 0 (queued), -ENOTCONN (not running) or -ENOMEM.
 */
int r2cc_chan_resolve(const struct r2cc_ctrl_qp_ref *q, uint64_t cookie);
/**
 * r2cc_chan_send() - send @m to @peer (header ids and seq are set here)
 * on one of the connections open to @peer; one whose send fails is closed
 * and the next one tried. Nothing waits on the socket: what it does not
 * take now is kept for the peer (MIG_CHAN_OUT_MAX); from any
 * other thread a message about a QP is handed to the channel thread
 * (0: the peer has an open connection; a frame that then fails to go is
 * counted, batch_lost). Return: 0, -ENOTCONN (no open connection to
 * @peer, or the send failed on each) or -EINVAL (encode).
 */
int r2cc_chan_send(uint64_t peer, struct r2cc_ctrl_msg *m);
/*
 * r2cc_chan_hold() - from now until the matching r2cc_chan_flush(), this
 * thread's r2cc_chan_send()s of the messages a BATCH carries are gathered
 * per peer (0 when the peer has an open connection, as a send would say)
 * and go out at the flush, one frame per peer: a move of a thousand QPs
 * to one peer is one frame, not a thousand. Holds nest; the outermost
 * flush sends. A gathered message whose frame then fails to go is lost
 * like any sent one the peer never read (counted: batch_lost), and the
 * bounds of the moves cover it.
 */
void r2cc_chan_hold(void);
void r2cc_chan_flush(void);
/* Frames received by outcome, and connections by outcome. */
struct r2cc_chan_stats {
	struct r2cc_ctrl_stats rx;
	uint64_t sent, send_fail, conn_ok, conn_fail, lookups_served;
	/* refused past a budget (MIG_CHAN_*_MAX, the connections') */
	uint64_t conn_budget, peer_budget, res_budget;
	/* BATCH frames sent and received, the messages they carried out,
	 * and gathered messages whose frame could not go */
	uint64_t batches_out, batched_out, batches_in, batch_lost;
	/* connections TCP could not get through, replaced; the frames
	 * sent again on their replacements, and those found twice */
	uint64_t stalled, resent, duplicates;
	/* lookups unanswered (each halving the window at most once a
	 * step) */
	uint64_t lookups_lost;
};
void r2cc_chan_get_stats(struct r2cc_chan_stats *st);
/* For tests: @probe judges whether the channel's connection @fd stalled,
 * in place of TCP's retransmission backoff (NULL: TCP's again). */
void r2cc_chan_test_stall_probe(bool (*probe)(int fd));
/* For tests: @probe gives the rail of the channel's connection @fd's own
 * end, in place of its address's netdev (NULL: the netdev's again). */
void r2cc_chan_test_rail_probe(int (*probe)(int fd));

#endif /* R2CC_MIGRATE_CHAN_H */
