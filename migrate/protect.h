/* SPDX-License-Identifier: MIT */
/*
 * protect.h - protecting the program's RC QPs (DESIGN §4-5): a backup QP
 * per connected QP on a backup rail, bound over the control channel to the
 * peer's backup. migrate/ reaches libibverbs only through the table the
 * shim hands it (r2cc_mig_verbs), and the shim's objects only through the
 * hooks of r2cc_mig_env. Locks: one protection lock (r2cc_mig_qp list and
 * states); the channel lock is never taken under it.
 */
#ifndef R2CC_MIGRATE_PROTECT_H
#define R2CC_MIGRATE_PROTECT_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "ctrl_msg.h"
#include "policy.h"

/* The wr_id of the zero-length WR r2cc posts on a program's QP in ERR to
 * make its CQ raise a completion event (its flush is never delivered). */
#define R2CC_RING_WRID 0x7232636372696e67ULL /* "r2ccring" */
/* The wr_id of the zero-length READ that clears a reused QP's completer
 * (move.c: heal()); its completion is never delivered either. */
#define R2CC_HEAL_WRID 0x723263636865616cULL /* "r2ccheal" */

struct r2cc_mig_desc;

/* The real libibverbs entry points migrate calls. */
struct r2cc_mig_verbs {
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe,
				    void *cq_context,
				    struct ibv_comp_channel *ch, int vec);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index,
			 union ibv_gid *gid);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			struct ibv_qp_init_attr *init);
	/* Ports' LIDs (NULL: QPs routed by LID run unprotected) */
	int (*query_port)(struct ibv_context *ctx, uint8_t port,
			  struct ibv_port_attr *attr);
	/* Completion channels of the backups' CQs (NULL: none; a program
	 * sleeping on its channel then wakes only at its own timeout). */
	struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *);
	int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
	int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq,
			    void **cq_context);
	void (*ack_cq_events)(struct ibv_cq *cq, unsigned int nevents);
	/* Backup SRQs (NULL: QPs on an SRQ run unprotected) */
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd,
				      struct ibv_srq_init_attr *attr);
	int (*destroy_srq)(struct ibv_srq *srq);
	/* The doorbells' PDs, on the programs' contexts (NULL: no bell) */
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
};

/* What migrate asks the shim. */
struct r2cc_mig_env {
	/* The name of the local device one of whose GIDs is @gid. */
	int (*dev_of_gid)(const uint8_t gid[16], char *dev, size_t len);
	/* The MRs of the program's PD @pd with a shadow on @rail: their
	 * rkeys and the shadows', in *@out (malloc'd, the caller frees it;
	 * NULL when there are none). How many, or -errno. */
	int (*mr_keys)(const void *pd, int rail, struct r2cc_ctrl_mr **out);
	/* The lkey of the shadow on @rail of the program's MR @lkey. */
	int (*lkey_xlate)(const void *pd, int rail, uint32_t lkey,
			  uint32_t *out);
	/* The program's MR @mr (its handle) and its shadow on @rail. */
	int (*mr_key)(const void *mr, int rail, struct r2cc_ctrl_mr *out);
	/* r2cc's private context on @rail and the shadow of @pd there. */
	int (*rail_res)(const void *pd, int rail, struct ibv_context **ctx,
			struct ibv_pd **shadow);
	/* A standby rail for the program's @qp now, chosen as at its RTR
	 * among the rails up: d->backup_rail, backup_ctx and backup_pd set,
	 * 0; or -ENODEV (none). Called with no lock of migrate/'s held. */
	int (*standby_rail)(struct ibv_qp *qp, struct r2cc_mig_desc *d);
};

/* What the shim knows of a QP that just reached RTR. */
struct r2cc_mig_desc {
	const struct ibv_qp_attr *attr; /* what the program set, merged */
	int rail; /* the primary's rail */
	int backup_rail; /* chosen by policy/ */
	struct ibv_context *backup_ctx; /* r2cc's private context there */
	struct ibv_pd *backup_pd; /* the shadow PD there */
	struct r2cc_status_qp *slot; /* for r2cc-ctl, or NULL */
};

struct r2cc_mig_qp;
struct r2cc_mig_cq;
struct r2cc_mig_srq;

/**
 * r2cc_mig_start() - start the control channel (R2CC_SECRET_FILE set)
 * @cfg: the configuration
 * @v: real verbs (kept)
 * @env: the shim's hooks (kept)
 * @rail_if: netdev of each rail ("" if none), @nrail of them
 * Return: 0, or -errno: every QP then runs unprotected (logged once).
 */
int r2cc_mig_start(const struct r2cc_config *cfg,
		   const struct r2cc_mig_verbs *v,
		   const struct r2cc_mig_env *env, const char *const *rail_if,
		   int nrail);
void r2cc_mig_stop(void);
bool r2cc_mig_on(void);
/* A program CQ protected QPs may complete on (@cq: the program's, NULL
 * in tests: no doorbell; NULL: out of memory). */
struct r2cc_mig_cq *r2cc_mig_cq_new(struct ibv_cq *cq, int cqe);
void r2cc_mig_cq_free(struct r2cc_mig_cq *mc);
/* Before the program destroys its CQ: @mc's doorbell (bell.c), if it has
 * one, goes (a QP on the CQ would keep it from being destroyed). */
void r2cc_mig_bell_free(struct r2cc_mig_cq *mc);
/* ... and first its standby CQs no standby uses any more (bcq.c), once
 * no event of theirs is being handled: none can ring @mc after. */
void r2cc_mig_cq_close(struct r2cc_mig_cq *mc);
/* Is @wc the flush of @mc's doorbell (never the program's)? */
bool r2cc_mig_bell_wc(struct r2cc_mig_cq *mc, const struct ibv_wc *wc);
/*
 * The program created an SRQ (@attr as the provider returned it): its
 * receives are logged from now on, and the QPs made on it move with it.
 * NULL: unprotected (no memory, or no control plane), as are its QPs.
 */
struct r2cc_mig_srq *r2cc_mig_srq_new(struct ibv_srq *srq,
				      const struct ibv_srq_attr *attr);
/* After the program destroyed it (no QP is on it any more). */
void r2cc_mig_srq_release(struct r2cc_mig_srq *s);
/* ibv_post_srq_recv's contract; @post is the provider's. */
int r2cc_mig_srq_post(struct r2cc_mig_srq *s, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad,
		      int (*post)(struct ibv_srq *, struct ibv_recv_wr *,
				  struct ibv_recv_wr **));
/* May a new QP be put on @s? Not while it moves or once moved: what is
 * left on the program's SRQ was re-posted on the backup's (buffers the
 * new QP would share). */
bool r2cc_mig_srq_joinable(struct r2cc_mig_srq *s);
/* A QP on @s that r2cc cannot protect (no protection state): @s cannot
 * move exactly any more; it and its QPs run unprotected (logged). */
void r2cc_mig_srq_break(struct r2cc_mig_srq *s, const char *why);
/**
 * r2cc_mig_qp_new() - the program created an RC QP: its receives are
 * logged from now on (its own receive queue's, or its SRQ's)
 * @qp: the program's QP; @cap: its capabilities as the provider returned
 * @sig_all: sq_sig_all; @scq, @rcq: its CQs' r2cc_mig_cq
 * @srq: its SRQ's protection (r2cc_mig_srq_new()), or NULL: its own RQ
 * Return: the protection state, or NULL (unprotected; logged).
 */
struct r2cc_mig_qp *
r2cc_mig_qp_new(struct ibv_qp *qp, const struct ibv_qp_cap *cap, bool sig_all,
		struct r2cc_mig_cq *scq, struct r2cc_mig_cq *rcq,
		struct r2cc_mig_srq *srq, struct r2cc_status_qp *slot);
/* The QP reached RTR: make its backup and bind it to the peer's
 * (asynchronously, bounded). Failures leave it unprotected (logged). */
void r2cc_mig_protect(struct r2cc_mig_qp *mq, const struct r2cc_mig_desc *d);
/* How long r2cc_mig_peer_runs() waits at most: 3 steps of
 * MIG_CHAN_STEP_MS (a LOOKUP and a HELLO, with one to spare); a control
 * plane slower than that leaves the QP's timeout as the program set it. */
#define MIG_PEER_WAIT_MS 6000
/**
 * r2cc_mig_peer_runs() - may @mq's ACK timeout be lowered? (the program's
 * thread, moving its QP to RTS)
 * @ms: how long to wait for the control plane's answer at most
 * True when @mq is being protected and its peer runs r2cc, or, while its
 * bind is under way, its peer's node ran r2cc the last time the control
 * plane learned of it. Only for a node not heard of yet does it wait (its
 * first QP's resolve, started at RTR: a round trip or two). False for a
 * QP that is not protected: without a failover, a shorter timeout only
 * makes it more fragile than the program asked.
 */
bool r2cc_mig_peer_runs(struct r2cc_mig_qp *mq, unsigned int ms);
/**
 * r2cc_mig_rts() - the program's QP reached RTS
 * @attr: its attributes, merged (sq_psn, timeout, retry_cnt, ...)
 * Its send log starts at sq_psn and the backup follows it to RTS. For a
 * QP already moved to its backup (a responder that failed over at RTR),
 * the program's primary is in ERR: only the backup moves.
 * Return: 0, or the backup's modify error (migrated QPs only).
 */
int r2cc_mig_rts(struct r2cc_mig_qp *mq, const struct ibv_qp_attr *attr);
/*
 * The program registered @mr (a handle) on @pd, or deregistered the MR
 * whose rkey was @rkey: every peer bound to a QP on @pd learns it (MR_KEYS,
 * MR_INVALIDATE), so a replay or a post after a move can translate it.
 * Peers bound later get it with their bind.
 */
void r2cc_mig_mr_new(const void *pd, const void *mr);
void r2cc_mig_mr_gone(const void *pd, uint32_t rkey);
/*
 * The program moves its QP to ERR or RESET (before the provider does): it
 * ends the connection (rdma_disconnect does so), so its flushes are its
 * own, not a fault to move away from. @mq runs unprotected from then on;
 * a QP on its backup has its backup moved to ERR, so what is outstanding
 * there flushes to the program.
 */
void r2cc_mig_closed(struct r2cc_mig_qp *mq);
/* r2cc cannot protect @mq from now on (@why: it or its PD uses memory
 * windows): passthrough, said once (logged with @why); a move in flight
 * is given up (the program sees the native errors). */
void r2cc_mig_refuse(struct r2cc_mig_qp *mq, const char *why);
/* The program destroys its QP: drop the backup (before the real destroy,
 * so no thread fences a QP the provider has freed). */
void r2cc_mig_release(struct r2cc_mig_qp *mq);
/* The program's QP is gone (its destroy succeeded): @mq, released, is
 * freed MIG_RETIRED frees and a second later (a poller may still hold
 * it). Once per QP; a destroy that failed leaves it released, not freed
 * (the QP runs on, unprotected). */
void r2cc_mig_free(struct r2cc_mig_qp *mq);
/* Is @mq on its backup or being moved (its own QP's async events are
 * r2cc's, and the program's QP shows the state the program set)? */
bool r2cc_mig_covers(const struct r2cc_mig_qp *mq);
/* The program's modify_qp to RTS went with r2cc's lower ACK timeout or
 * retry counts (r2cc_mig_peer_runs()): should @mq end unprotected, its
 * own are put back (untune.c). */
void r2cc_mig_lowered(struct r2cc_mig_qp *mq);
/* Is @mq's QP in SQD for that (the program is shown the state it set)? */
bool r2cc_mig_untuning(const struct r2cc_mig_qp *mq);
/* An SQ_DRAINED event of @mq's QP: r2cc's (hidden; counted as seen)? */
bool r2cc_mig_sqd_event(struct r2cc_mig_qp *mq);
/* Add to @n[r], for each rail r < @nrail, this process's protected QPs
 * whose backup is on r: placement's load. */
void r2cc_mig_rail_loads(uint32_t *n, int nrail);
/* enum r2cc_prot_state of @mq */
uint32_t r2cc_mig_state(const struct r2cc_mig_qp *mq);

/* The data path of a QP with protection state (post.c, complete.c). Posts:
 * ibv_post_send/recv's contract; @post is the provider's. A send's WRs
 * that the post took are counted in @st (unless NULL), in the same pass
 * that logs them. */
int r2cc_mig_post_send(struct r2cc_mig_qp *mq, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad,
		       int (*post)(struct ibv_qp *, struct ibv_send_wr *,
				   struct ibv_send_wr **),
		       struct r2cc_qp_stats *st);
int r2cc_mig_post_recv(struct r2cc_mig_qp *mq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad,
		       int (*post)(struct ibv_qp *, struct ibv_recv_wr *,
				   struct ibv_recv_wr **));
/* A completion of @mq polled from the program's CQ @mc (NULL if it has
 * none): 1 deliver, 0 hide, 2 stashed after completions that precede it
 * (what the poll returns after it must go to the stash too). @behind:
 * the poll queues in the stash already (something was pushed since it
 * began): a completion to deliver is stashed (2), before any completion
 * its own handling synthesises (DONE work after it). */
int r2cc_mig_wc(struct r2cc_mig_qp *mq, struct r2cc_mig_cq *mc,
		struct ibv_wc *wc, bool behind);
/* Before the program's CQ: what r2cc stashed for it, up to @n (a
 * lock-free check when there is nothing). */
int r2cc_mig_poll_stash(struct r2cc_mig_cq *mc, int n, struct ibv_wc *wc);
/* Completions ever stashed for @mc (lock-free): read before the stash is
 * popped and again before each completion polled from the program's CQ,
 * a change says something was pushed since (a racing move back's
 * synthesised completions, then the primary's own; or what handling an
 * earlier completion of the batch completed after it): the rest of the
 * batch goes behind it. */
uint64_t r2cc_mig_pushed(struct r2cc_mig_cq *mc);
/* The program armed its CQ @mc (ibv_req_notify_cq): the backups feeding
 * it are armed too, and a completion on one rings @mc's channel. */
void r2cc_mig_cq_arm(struct r2cc_mig_cq *mc);
/* Queue @wc behind what is stashed for @mc: 0, or -ENOSPC. */
int r2cc_mig_stash(struct r2cc_mig_cq *mc, const struct ibv_wc *wc);
/* After the program's CQ: stashed and backup completions, up to @n. */
int r2cc_mig_poll_more(struct r2cc_mig_cq *mc, int n, struct ibv_wc *wc);
/* Anything for r2cc_mig_poll_more() (lock-free)? */
bool r2cc_mig_cq_busy(struct r2cc_mig_cq *mc);
/* A rail went down (@cause: carrier or port event, the failover's reason):
 * every ready QP on it fails over; one whose standby is on it gets a new
 * standby on another rail (the channel's next tick). */
void r2cc_mig_rail_down(int rail, enum r2cc_health_cause cause);
/* @rail came up (the health thread): QPs waiting for a standby rail may
 * get one now. */
void r2cc_mig_rail_up(int rail);
/* @rail's port has LID @lid now (InfiniBand: the subnet manager swept
 * again; the shim's port events): QPs whose standby sits there with
 * another get a new standby there, bound to the peer again with it (the
 * channel's next tick). */
void r2cc_mig_rail_lid(int rail, uint16_t lid);

#endif /* R2CC_MIGRATE_PROTECT_H */
