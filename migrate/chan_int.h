/* SPDX-License-Identifier: MIT */
/*
 * chan_int.h - what the control channel's files share: its one state
 * (cs, under cs.lock: every field), connections, peers and resolves.
 * chan.c: addresses, listeners, the thread and the API; chan_conn.c:
 * connections and frames; chan_res.c: resolves and LOOKUPs;
 * chan_hosts.c: the job's nodes, for GIDs that name none;
 * chan_peer.c: the peers, their times and counts; chan_stall.c: a
 * connection TCP cannot get through, replaced.
 */
#ifndef R2CC_MIG_CHAN_INT_H
#define R2CC_MIG_CHAN_INT_H

#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "map.h"
#include "policy.h"

#define TICK_MS 200
#define MAX_WATCH 16
/* LOOKUPs a resolve may send, each on a fresh connection, while the
 * rendezvous accepts them and answers none (see chan_conn_close()) */
#define LOOKUP_TRIES 3

/* The lookups a process lets run at once (chan.h, MIG_CHAN_LOOKUPS):
 * chan_lookup_window_on() moves it. */
struct chan_lookup_window {
	int n;
	uint64_t cut_ns; /* its last halving */
	uint64_t answered_ns; /* the last lookup answered */
};
void chan_lookup_window_on(struct chan_lookup_window *w, bool answered,
			   uint64_t now_ns);

enum conn_role {
	C_FREE,
	C_ACCEPTED, /* a peer called us: LOOKUP or HELLO first */
	C_LOOKUP, /* we ask a rendezvous */
	C_HELLO, /* we open a direct channel */
	C_OPEN, /* HELLO exchanged: frames go to the owner's hooks */
};

struct conn {
	enum conn_role role;
	int fd;
	uint32_t gen; /* new at each use of the slot: handlers that may
		       * close and reuse it compare */
	bool connecting; /* non-blocking connect in progress */
	uint64_t peer; /* once known */
	int res; /* the resolve this connection serves, or -1 */
	uint64_t deadline_ns; /* for connect and the reply; 0 when open */
	uint64_t asked; /* C_LOOKUP: our LOOKUP's seq, its reply's too */
	uint8_t *buf; /* cap bytes: CONN_BUF, up to R2CC_CTRL_FRAME_MAX */
	size_t have, cap;
	/* Frames the socket took no more of: bytes out_off..out_len of
	 * out (out_cap), sent as it drains (POLLOUT) */
	uint8_t *out;
	size_t out_off, out_len, out_cap;
	/* Whole frames written, oldest first, back to the oldest TCP may
	 * not have delivered (chan_stall.c); tail_cut: older ones that
	 * may not have were dropped (past MIG_CHAN_OUT_MAX) */
	uint8_t *tail;
	size_t tail_len, tail_cap;
	bool tail_cut;
	uint64_t put_ns; /* the last frame written */
	/* C_HELLO: dialled to replace a channel that stalled or whose rail
	 * went down (its HELLO says so: the peer's frames follow) */
	bool replaces;
};

struct peer {
	uint64_t id; /* 0: free */
	struct r2cc_ctrl_replay win; /* its seqs we accepted */
	uint64_t heard_ns; /* its last frame accepted (chan_now_ns()) */
	uint64_t answered_ns; /* r2cc_chan_answered() */
	/* Frames each way, the messages they carried, the last one out:
	 * r2cc_chan_peer_say() tells them */
	uint64_t frames_out, msgs_out, frames_in, msgs_in, sent_ns;
	uint64_t said_ns; /* r2cc_chan_peer_say()'s last line */
	struct peer *next; /* cs.peer_list */
	/* Open connection, or -1; written under cs.lock, read without it
	 * by a thread that hands a message to the outbox */
	_Atomic int conn;
	uint32_t pid;
	int naddr;
	struct r2cc_ctrl_addr addr[R2CC_CTRL_MAX_ADDRS];
	/* The call replacing a stalled connection (its slot and gen), or
	 * -1; the address it tries next */
	int redial;
	uint32_t redial_gen;
	int redial_next;
};

struct res {
	bool used, started;
	/* The owner known, a call to it under way for another resolve:
	 * this one ends with that call's HELLO (chan_res_opened()) */
	bool waits;
	uint64_t since_ns; /* asked for (a start may wait for a connection) */
	int tries; /* rendezvous connections dialled */
	uint64_t cookie;
	struct r2cc_ctrl_qp_ref q;
	uint64_t owner;
	int naddr, next; /* the owner's addresses, the next to try */
	struct r2cc_ctrl_addr addr[R2CC_CTRL_MAX_ADDRS];
	uint8_t at[4]; /* the node whose rendezvous it asks */
	/* Its GID names no node (chan_hosts.c): its IPoIB neighbour's
	 * node and the job's nodes asked in turn from host0, swept of them
	 * so far, since sweep_ns; next_node: at its next start (else the
	 * same again); what they said (some silent, some knew no owner) */
	bool sweep, next_node, silent, none;
	unsigned int host0, swept;
	uint64_t sweep_ns;
};

/* Messages gathered per peer, each peer's to go as one frame (chan.c) */
struct chan_gathering {
	unsigned int n, cap;
	struct chan_gathered {
		uint64_t peer;
		struct r2cc_ctrl_batch b;
	} * v;
};

struct chan_state {
	pthread_mutex_t lock; /* everything below */
	bool running;
	pid_t pid;
	pthread_t thread;
	/* wake_fd made, written by any thread (chan_wake()) and closed
	 * under wake_lock, never held while taking another lock */
	pthread_mutex_t wake_lock;
	int wake_fd, rdv_fd, direct_fd;
	uint16_t rdv_port, direct_port;
	struct r2cc_ctrl_key key;
	struct r2cc_chan_hooks hooks;
	char pref_if[IF_NAMESIZE];
	bool peer_by_gid; /* R2CC_PEER_BY_GID */
	char rail_if[R2CC_CTRL_RAIL_MAX][IF_NAMESIZE];
	int nrail;
	/* Connections and resolves: slots made as needed, kept and reused;
	 * their indices stay valid. conn_max: the connections' budget. */
	struct conn **conns;
	int nconn, conn_max, nopen; /* nopen: not C_FREE */
	int nlookup; /* of them C_LOOKUP */
	struct chan_lookup_window lookups;
	struct res **res;
	int nres;
	/* Every peer process heard from (its replay window outlives its
	 * connections), by id */
	struct r2cc_map peers;
	struct peer *peer_list;
	unsigned int npeers;
	bool conns_said, peers_said, res_said;
	/* What threads other than the channel's send: the channel thread
	 * sends it at its next round (woken), so no program thread waits
	 * on the network, on cs.lock (held across a write) or computes a
	 * MAC. Under out_lock alone; taken under cs.lock, never the
	 * reverse. */
	pthread_mutex_t out_lock;
	struct chan_gathering outbox;
	size_t out_bytes; /* in it (out_lock) */
	/* Peers whose messages may have been lost, for the hook (on_lost:
	 * the thread calls it at its next round) */
	uint64_t *lost;
	unsigned int nlost, lost_cap;
	/* Our last seq, to every peer: each sees it increase (with gaps),
	 * which is all its replay window needs. */
	uint64_t seq;
	uint64_t busy_said_ns; /* the last KEEPALIVEs of a backlog */
	uint64_t stall_check_ns; /* chan_stall_check()'s last look */
	/* Rails that went down since that look (bit per rail; any thread:
	 * r2cc_chan_rail_down()) */
	_Atomic uint32_t rails_down;
	struct r2cc_chan_stats st;
	/* Other fds the thread serves (r2cc_chan_watch()) */
	struct watch {
		int fd;
		void (*ready)(int fd, void *arg);
		void *arg;
	} watch[MAX_WATCH];
	int nwatch;
};
extern struct chan_state cs;

/* Our IPv4 addresses on the netdevs of the rails in @rails (bits), at
 * most @max into @out (chan.c): how many */
int chan_rail_addrs(uint32_t rails, struct in_addr *out, int max);

static inline uint64_t chan_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The thread out of its poll. */
static inline void chan_wake(void)
{
	uint64_t one = 1;
	ssize_t n = 0;

	pthread_mutex_lock(&cs.wake_lock);
	if (cs.wake_fd >= 0)
		n = write(cs.wake_fd, &one, sizeof(one));
	pthread_mutex_unlock(&cs.wake_lock);
	(void)n; /* a full counter wakes the thread anyway */
}

/* (chan.c) One more @why refused past a budget (the lock held): counted
 * in *@count and the status record, said once (*@said) as @fmt. */
void chan_refused(enum r2cc_refusal why, uint64_t *count, bool *said,
		  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* (chan.c) The connections r2cc may hold now: a quarter of the
 * descriptors the process may open, at least 16. */
int chan_conn_budget(void);
/* (chan.c) Messages to @peer may have been lost: the owner is told at
 * the thread's next round (cs.lock held). */
void chan_lost(uint64_t peer);

#endif /* R2CC_MIG_CHAN_INT_H */
