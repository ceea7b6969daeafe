/* SPDX-License-Identifier: MIT */
/*
 * mig_int.h - what migrate/'s files share: the protection state of
 * each QP and the module's one state. Lock order: ps.lock, then a QP's
 * lock; the channel's lock is taken under either, never the reverse.
 */
#ifndef R2CC_MIG_INT_H
#define R2CC_MIG_INT_H

#include <pthread.h>

#include "life.h"
#include "map.h"
#include "migrate.h"
#include "protect.h"
#include "qlock.h"

/* How long a fenced QP waits for its peer's FAILOVER before it gives up
 * and shows the program the native errors (DESIGN §6: bounded): once
 * MIG_FENCE_BOUND_MS have passed with nothing heard from the peer
 * process in the last MIG_FENCE_BOUND_MS (a peer at work on a backlog
 * says it lives: MIG_CHAN_BUSY_MS), and after MIG_FENCE_MAX_MS unless
 * the peer answered a move of ours in the last MIG_FENCE_BOUND_MS (a
 * peer that moves thousands of QPs at once answers the last ones late),
 * and in any case after MIG_FENCE_CEIL_MS. */
#define MIG_FENCE_BOUND_MS 5000
#define MIG_FENCE_MAX_MS 30000
#define MIG_FENCE_CEIL_MS 120000
/* A flapping rail: at most MIG_FB_MOVES failbacks of a QP per
 * MIG_FB_WINDOW_MS; past that it stays on its backup until the window
 * slides (bounded migrations, no storm). */
#define MIG_FB_MOVES 3
#define MIG_FB_WINDOW_MS 60000
/* Rounds of moves back one tick starts at most (each recycles a primary:
 * four modify_qp calls, tens of ms under load): the peers' messages of the
 * moves under way are handled between ticks, not behind hundreds of
 * recycles, while a moved-back end waits on them for its peer's receives */
#define MIG_FB_STARTS 16
/* The longest RNR NAK timer (IB encoding: 12 is 0.64 ms) a QP r2cc
 * connects answers with (r2cc_mig_rnr_timer()) */
#define MIG_RNR_TIMER 12
/* A moved-back QP's standby not re-armed: tried again at most this often */
#define MIG_REARM_RETRY_NS 1000000000ULL
/* R2CC_KEEPALIVE: a quiet path's QPs fail over after this many of its
 * probes in a row went unanswered (each waits MIG_PROBE_WAIT_MS, one SYN
 * retransmission: a 30% lossy path loses one about half the time, three
 * in a row about one time in eight... and nothing of the QPs completes
 * meanwhile) */
#define MIG_KA_MISSES 3
/* A PSN not known (PSNs are 24-bit): fb.peer_psn when no round of the
 * peer's is known, peer_rq_psn before its FAILOVER */
#define R2CC_PSN_NONE UINT32_MAX
#define R2CC_MIG_MAX_SGE 32 /* SGEs a translated WR may carry */
/* A resolve of a QP's peer the node's r2cc knows no owner for (its
 * process may not have published the QP yet), or whose node refused the
 * call (its r2cc may be starting), is asked again, up to this many times
 * in all; then the QP runs unprotected, and a node that refused every
 * call is known to run no r2cc: none of its QPs is asked any more */
#define MIG_RESOLVES 3
/* One that got no answer (under load a step can miss its bound,
 * MIG_CHAN_STEP_MS) is asked again until this long after the first ask */
#define MIG_RESOLVE_MS 60000
#define MIG_RESOLVE_GAP_MS 1000 /* at least, between two asks of a QP */
/* Reasons a QP runs unprotected said at info level, each once */
#define MIG_UNPROT_SAID 16

struct r2cc_mig_bcq;

/* A standby's place on a shared standby CQ (bcq.c): its completions
 * polled from that CQ, in order, not yet taken by its QP. Under the
 * CQ's lock. */
struct r2cc_mig_bslot {
	struct r2cc_mig_bcq *b; /* NULL: none */
	struct r2cc_mig_qp *mq; /* whose (set once) */
	struct r2cc_mig_bslot *next; /* b's slots */
	uint32_t bqpn; /* its standby QP's number, 0 until made */
	int need; /* entries of the CQ it may fill */
	struct ibv_wc *wc; /* a ring: cap entries, n from head */
	uint32_t head, n, cap;
	bool ready; /* on b's ready list: the program's polls take them */
	bool joined; /* its QP moved onto its standby: taken at polls */
};

/* A standby CQ: shared by the standbys of the QPs on one program CQ on
 * one rail (one, or a few when they outgrow one CQ). Kept until the
 * program's CQ is freed (an event of it may still be in hand). */
struct r2cc_mig_bcq {
	struct r2cc_mig_bcq *next; /* mc->bcqs, under mc->lock */
	struct r2cc_mig_cq *mc; /* the program CQ it feeds */
	struct ibv_context *ctx; /* its rail's (r2cc's own context) */
	struct ibv_cq *cq; /* owned */
	struct ibv_comp_channel *ch; /* its events' (NULL: none) */
	int cqe, used; /* its size, and what its standbys may fill (mc->lock) */
	_Atomic bool armed; /* armed, its event not come yet */
	pthread_mutex_t lock; /* below, and every poll of cq */
	struct r2cc_map by_qpn; /* standby QP number + 2 -> its slot */
	struct r2cc_mig_bslot *slots;
	uint32_t nslots;
	int njoined; /* slots joined: listed on mc while not 0 */
	struct r2cc_mig_bslot **ready; /* slots with completions to take */
	uint32_t nready, ready_cap;
};

/* The standby CQs a program CQ's poll polls: those with a moved QP
 * (bcq.c). An outgrown list stays allocated until the CQ is freed: a
 * poller may still be reading it. */
struct r2cc_mig_cqlist {
	struct r2cc_mig_cqlist *old;
	int cap;
	struct r2cc_mig_bcq *e[];
};

/* A program CQ that protected QPs complete on. */
struct r2cc_mig_cq {
	struct r2cc_wcstash *stash; /* owned: synthesised completions */
	/* The program armed it and no ring was sent since (see ring()). */
	_Atomic int armed;
	pthread_mutex_t lock; /* the lists below */
	/* Its standby CQs (owned), and the first nlive of list, those
	 * with a moved QP; list->cap >= every standby CQ it has. */
	struct r2cc_mig_bcq *bcqs;
	int nbcq;
	struct r2cc_mig_cqlist *list;
	int nlive;
	_Atomic unsigned int poll_from; /* where the next poll starts */
	/* Its doorbell (bell.c), under lock; the program's CQ (borrowed) */
	struct ibv_cq *cq;
	struct ibv_pd *bell_pd;
	struct ibv_qp *bell_qp;
	_Atomic uint32_t bell_qpn; /* 0: none */
	bool bell_failed; /* could not be made: not tried again */
};

/* Whose ACK timeout and retry counts the program's QP runs with
 * (untune.c) */
enum r2cc_mig_tune {
	R2CC_TUNE_OWN, /* the program's (or nothing r2cc set is live) */
	R2CC_TUNE_LOWERED, /* r2cc's, for a failover in R2CC_DETECT_MS */
	R2CC_TUNE_DUE, /* r2cc's, the QP unprotected: its next post restores */
	R2CC_TUNE_SQD, /* taken to SQD for it: its send queue drains */
	R2CC_TUNE_KEPT, /* r2cc's: the provider refused the way back */
	R2CC_TUNE_N
};

/* A moved-back QP's standby (failback.c). */
enum r2cc_mig_rearm {
	R2CC_REARM_NONE, /* not being re-armed: a REARM is stale */
	R2CC_REARM_WAIT, /* moving back, or moved: REARMs being exchanged */
	R2CC_REARM_STALE, /* not armed at one end: unprotected, retried */
};

enum r2cc_srq_where {
	R2CC_SRQ_HOME, /* its QPs on their primaries, its WRs on the SRQ */
	R2CC_SRQ_MOVING, /* a QP on it was fenced: all are being moved */
	R2CC_SRQ_AWAY, /* moved: its WRs go to the backup SRQ */
	R2CC_SRQ_BROKEN, /* unprotected for good, its QPs too */
};

/* A program SRQ the QPs of which are protected (srq.c). */
struct r2cc_mig_srq {
	struct r2cc_mig_srq *next; /* ps.srqs */
	/* Everything below, and the srq_* fields of its QPs. Lock order:
	 * a QP's lock, then this. */
	pthread_mutex_t lock;
	struct ibv_srq *srq; /* the program's */
	const void *pd;
	uint32_t max_wr, max_sge;
	/* The provider's post, as the program's last post went. */
	int (*ppost)(struct ibv_srq *, struct ibv_recv_wr *,
		     struct ibv_recv_wr **);
	struct r2cc_srqlog *log; /* owned */
	enum r2cc_srq_where where;
	int backup_rail; /* pinned by its first backup; -1: none yet */
	struct ibv_srq *bsrq; /* owned: on backup_rail's shadow PD */
	uint64_t move_ns; /* when the move began */
	/* A peer's ACK: a partly received message took a WR, so the
	 * consumed ones are not the oldest until polled. */
	bool taken;
	bool done; /* moved or broken, its QPs told: nothing to sweep */
	int nqps; /* QPs on it with protection state */
};

struct r2cc_mig_qp {
	struct r2cc_mig_qp *next; /* ps.qps */
	uint64_t freed_ns; /* r2cc_mig_free()'s time (objects.c, ps.lock) */
	/* The rebind sweep asks placement about its QP with no lock held
	 * (rebind.c): r2cc_mig_release() waits (ps.lock, ps.placed_cv) */
	bool placing;
	/* Chains of ps.by_qpn and ps.by_dest (objects.c, ps.lock) */
	struct r2cc_mig_qp *qpn_next, *dest_next;
	bool dest_indexed;
	uint64_t cookie; /* resolve cookie: never a pointer */
	_Atomic uint32_t state; /* enum r2cc_prot_state */
	/* Serialises the program's posts and polls of this QP with a
	 * failover (verbs lets them come from different threads). */
	struct r2cc_qlock lock;
	struct ibv_qp *qp; /* the program's */
	const void *pd;
	struct ibv_qp_attr attr; /* the program's, merged */
	uint32_t qpn, dest_qpn;
	uint8_t gid[16], dest_gid[16];
	int rail, backup_rail;
	/* The backup's places on its standby CQs (bcq.c): sending, and
	 * receiving when the program's QP has two CQs */
	struct r2cc_mig_bslot bs[2];
	struct ibv_qp *bqp; /* owned: the backup QP */
	bool bspare; /* it holds one send WR more than the program's QP */
	/* R2CC_BACKUP=lazy, both ends: the backup is made at a failover
	 * (on bctx/bpd, r2cc's context and shadow PD of the backup rail) and
	 * dropped when the QP is moved back. */
	bool lazy;
	bool bparked; /* lazy: the backup kept in RESET since a move back */
	struct ibv_context *bctx;
	struct ibv_pd *bpd;
	/* A lazy QP's failover (under lock; cleared when the move is
	 * done): our backup made at the fence and connected to the peer's
	 * (named by its FAILOVER: pqpn, ppsn), the peer's connected to ours
	 * (its FAILOVER said so), and ours said to be. Replay needs both. */
	struct r2cc_lz {
		bool made, conn, said, peer_conn, pknown;
		uint32_t pqpn, ppsn;
	} lz;
	uint8_t bgid[16];
	uint16_t blid; /* the backup's port's LID (0: RoCE) */
	uint32_t bpsn; /* the backup's first send PSN */
	enum ibv_mtu bmtu; /* the backup's path MTU (the lower of both) */
	bool rts; /* the program's QP reached RTS (attr has its fields) */
	_Atomic uint32_t tune; /* enum r2cc_mig_tune */
	/* Sends posted while the QP is in SQD for it (under lock) */
	struct r2cc_mig_held_wr *tune_held, **tune_tail;
	/* SQ_DRAINED events of r2cc's own trips through SQD, not yet seen */
	_Atomic unsigned int sqd_owed;
	bool brts; /* the backup is at RTS */
	uint64_t peer; /* the peer's control id, 0 until known */
	/* That peer's memory keys, once found (keys.c; under lock) */
	struct r2cc_mig_pkeys *pkeys;
	uint8_t resolves; /* asks refused, or with no owner known */
	uint64_t resolve_ns; /* when its peer's owner was first asked for */
	uint64_t resolve_due_ns; /* asked again from then on (0: not due) */
	uint8_t binds; /* our QP_BIND sent while binding, so far */
	uint64_t bind_ns; /* when it last went (unanswered: it goes again) */
	bool bind_sent, bind_got;
	/* It keeps its standby's rail, said as R2CC_CTRL_BIND_PINNED: the
	 * peer's choice was down here (bind.c; a new placement clears it) */
	bool keep_rail;
	struct r2cc_ctrl_qp_bind peer_bind; /* the peer's QP_BIND */
	struct r2cc_status_qp *slot;
	struct r2cc_mig_cq *scq, *rcq; /* the program's CQs' */
	struct ibv_qp_cap cap; /* as the provider returned it */
	bool sig_all;
	/* Under lock, changed by r2cc_mig_step() alone (life.c) */
	enum r2cc_mig_life life;
	/* Its SRQ, or NULL (own receive queue; its receives in rlog). The
	 * srq_* fields are under the SRQ's lock. */
	struct r2cc_mig_srq *srq;
	bool srq_acked; /* the peer said what it consumed (srq_consumed) */
	uint64_t srq_consumed; /* receives the peer's messages consumed */
	uint64_t srq_polled; /* successful receives the program polled */
	/* Logs: under lock. */
	struct r2cc_sendlog *slog;
	struct r2cc_recvlog *rlog;
	uint64_t consumers_done; /* our SEND/WRITE_IMM the peer executed */
	/* A move: under lock. */
	uint32_t rq_psn; /* ours, read after the fence */
	uint32_t peer_rq_psn; /* R2CC_PSN_NONE until the peer's FAILOVER */
	uint64_t fault_ns; /* when the failover began (CLOCK_MONOTONIC) */
	uint64_t first_replay_ns;
	/* -Ddatapath_debug: completions left to trace after a fence */
	uint32_t dbg_left;
	uint32_t why; /* enum r2cc_ctrl_reason */
	/* What the fenced primary completed and r2cc hid, in poll order:
	 * the program's after all if the failover is abandoned. */
	struct r2cc_held {
		struct r2cc_mig_cq *mc; /* the program CQ it came from */
		struct ibv_wc wc;
	} * held; /* owned while fenced and not yet moved: held_cap */
	uint32_t nheld, held_cap;
	uint64_t held_lost; /* hidden with no room to hold them */
	/* Logged while fenced, before the move: posted nowhere yet. */
	uint32_t unposted_sends, unposted_recvs;
	/*
	 * Which QP carries the connection (under lock): the backup after a
	 * failover, the primary again after a failback. During a move, the
	 * one it names is the old incarnation and the other the new; the
	 * move's end flips it (r2cc_mig_step()).
	 */
	bool on_backup;
	bool recycled; /* the primary was recycled: its old flushes linger */
	bool perr; /* r2cc moved the primary to ERR (and not back since) */
	/* The primary (backup) was left while a READ's response may have
	 * been arriving: its next incarnation begins with a heal (move.c) */
	bool pstale, bstale;
	/* The provider's posts for the program's QP (the shim's hooks sit in
	 * its context's ops): a replay back on the primary goes there. */
	int (*psend)(struct ibv_qp *, struct ibv_send_wr *,
		     struct ibv_send_wr **);
	int (*precv)(struct ibv_qp *, struct ibv_recv_wr *,
		     struct ibv_recv_wr **);
	/* Failback (failback.c, under lock) */
	struct r2cc_fb {
		bool proposed, peer_proposed;
		bool peer_recovered; /* its PROPOSE said its rail came back */
		bool ready, peer_ready; /* primaries recycled (READY) */
		bool recycled; /* ours, for this round, not fenced back yet */
		bool urgent; /* the backup failed: no hold, no evidence */
		uint64_t urgent_ns; /* when that was seen */
		uint32_t psn, peer_psn; /* the recycled primaries' sq_psn */
		/* Moving back: our FAILOVER_ACK went out before the replay,
		 * saying @acked_recvs; the peer's receives are re-posted
		 * (its POSTED): the replay may go (move.c) */
		bool acked, peer_posted;
		uint64_t acked_recvs;
		/* The last round we said READY in, until it moves (the
		 * peer's PSN R2CC_PSN_NONE: none): a peer that moves on it
		 * after we gave it up is joined (r2cc_mig_fb_join()) */
		uint32_t round_psn, round_peer_psn;
		/* The standby's re-arm after a move back (failback.c) */
		enum r2cc_mig_rearm rearm;
		bool rearm_sent, rearm_got;
		bool said_noarm; /* our last REARM had R2CC_CTRL_FB_NOARM */
		bool peer_noarm; /* the peer's REARM (rearm_got) had it */
		uint32_t rearm_psn; /* the peer's re-armed backup's sq_psn */
		uint64_t rearm_not_before_ns; /* STALE: no REARM before */
		uint64_t not_before_ns; /* no proposal before (after ABORT) */
		/* Completions of READY QPs on the same path, when first
		 * looked at after the failover; flow_only: they went on
		 * while this one was cut off (its own flow's black hole:
		 * a probe of the path proves nothing) */
		bool ok_set, flow_only;
		uint64_t ok_base;
		uint64_t moves_ns[MIG_FB_MOVES]; /* the last moves back */
	} fb;
};

struct r2cc_mig_state {
	pthread_mutex_t lock; /* everything below but the QPs' own state */
	bool on;
	struct r2cc_mig_verbs v;
	struct r2cc_mig_env env;
	struct r2cc_mig_qp *qps;
	/* The QPs by resolve cookie, own QPN and peer's QPN (objects.c) */
	struct r2cc_map by_cookie, by_qpn, by_dest;
	uint64_t next_cookie;
	/* Each peer process's memory keys (keys.c): by its id, read by the
	 * data path without a lock; and all of them, listed */
	struct r2cc_map pkeys;
	struct r2cc_mig_pkeys *pkeys_list;
	_Atomic unsigned long keys_dropped; /* past MIG_PEER_KEYS_MAX */
	_Atomic bool keys_stale; /* a peer's to be told again (keys.c) */
	/* The reasons said at info level, each once (r2cc_mig_unprotected) */
	char unprot_said[MIG_UNPROT_SAID][96];
	unsigned int unprot_said_n;
	/* QP_BINDs that came before our QP reached RTR (early.c) */
	struct r2cc_mig_early **early; /* owned: early_nb buckets */
	unsigned int nearly, early_nb;
	uint64_t early_swept_ns, early_dropped;
	struct r2cc_mig_srq *srqs; /* the program's SRQs (srq.c) */
	_Atomic bool srq_sweep; /* an SRQ's state changed: sweep soon */
	/* A QP is in SQD for its ACK timeout's way back: the tick ends it */
	_Atomic bool untune;
	/* A rail changed: QPs whose standby's rail is down want a new one */
	_Atomic bool rebind;
	/* Each rail's port's LID as its last event said (0: none said) */
	_Atomic uint16_t rail_lid[R2CC_HEALTH_RAILS];
	/* QPs fenced, their move neither done nor given up */
	_Atomic unsigned int waiting;
	/* A QP_BIND went out: the tick looks for unanswered ones (at most
	 * once a second) until no QP is binding with its bind out */
	_Atomic bool bind_watch;
	uint64_t bind_walk_ns;
	_Atomic unsigned long refused; /* illegal life events (life.c) */
	_Atomic unsigned int away; /* QPs on their backup (failback's tick) */
	bool failback;
	uint32_t failback_hold_ms;
	/* Unit tests that must not race the channel thread's ticks
	 * (r2cc_mig_test_quiet()): the inbox's ticks are skipped */
	_Atomic bool quiet;
	uint32_t keepalive_ms; /* R2CC_KEEPALIVE_MS, 0: no keepalive */
	bool lazy; /* R2CC_BACKUP=lazy */
	uint32_t detect_ms; /* R2CC_DETECT_MS: a recycled primary's timeout */
	/* Per backup rail: the channel of its backups' CQs, served by the
	 * control thread (r2cc_mig_ring_ready()). */
	struct ibv_comp_channel *ring_ch[R2CC_HEALTH_RAILS];
	/* What the control plane last learned of each peer node (by GID):
	 * does r2cc run there? Grown as nodes are seen (a GID each: a
	 * rail-optimised job of 128 nodes x 8 rails has a thousand);
	 * r2cc_mig_peer_runs() reads it. */
	struct node_seen {
		uint8_t gid[16];
		enum r2cc_node_word {
			R2CC_NODE_NO_R2CC, /* it refused every ask */
			R2CC_NODE_R2CC, /* its r2cc answered */
			/* Asked, no answer in time: nothing learned. A QP's
			 * RTS does not wait on it, and lowers nothing */
			R2CC_NODE_SILENT,
		} word;
	} * nodes;
	unsigned int nnodes, nodes_cap;
	bool nodes_said; /* no memory for one more: said once */
	pthread_cond_t peer_cv; /* with lock: a QP's peer became known */
	pthread_cond_t placed_cv; /* with lock: a QP's placing ended */
};
extern struct r2cc_mig_state ps;

/* @mq logs its work: protected, or moving */
static inline bool r2cc_mig_logs(const struct r2cc_mig_qp *mq)
{
	return r2cc_mig_life_logs(mq->life);
}

/* A move of @mq is under way: fenced, not done or given up */
static inline bool r2cc_mig_moving(const struct r2cc_mig_qp *mq)
{
	return r2cc_mig_life_moving(mq->life);
}

/* The move under way goes back to the program's own QP */
static inline bool r2cc_mig_back(const struct r2cc_mig_qp *mq)
{
	return r2cc_mig_moving(mq) && mq->on_backup;
}

#endif /* R2CC_MIG_INT_H */
