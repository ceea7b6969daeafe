/* SPDX-License-Identifier: MIT */
/*
 * mig_logs.h - the receive side of failover: the per-QP receive log that is
 * re-posted on the backup QP, and the per-CQ stash of held-back completions.
 * Included by migrate.h; other modules include migrate.h only.
 */
#ifndef R2CC_MIG_LOGS_H
#define R2CC_MIG_LOGS_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * The receive log of one QP's own receive queue: a copy of every receive
 * WR posted and not yet completed, oldest first, one sequence across
 * failovers (the logical QP). Each entry records the incarnation that owes
 * its completion: 0 for the original QP, k after the k-th fence. Create it
 * with the QP (posted and the peer's consumed count both start there).
 * Nothing locks, and only an append past the log's size allocates (it
 * doubles: posted minus polled can exceed the queue's depth); the caller
 * serialises appends (post_recv) with completions and fences, and uses a
 * fence's list of re-posts before its next append.
 *
 * Why one in-order complete() serves every incarnation: an RC QP's own RQ
 * completes in posting order, and a QP moved to ERR flushes its remaining
 * WRs after the completions already made (IB spec, QP Error state; a WQ's
 * completions are returned in order).
 * So a fenced incarnation's CQ holds, for this QP, the successes of the
 * pending entries in order, then flushes for the re-posted ones. The
 * backup completes nothing before the re-posted entries reach it, and then
 * completes them, and the later appends, in order. The log orders pending
 * (older incarnations, by epoch) before re-posted before new, so the
 * successes match the log order if the poll path delivers an incarnation's
 * successes before a later one's. The CQs can hold both at once, and
 * wr_ids may repeat, so a caller that merges CQs delivers a success of
 * incarnation q only while r2cc_recvlog_peek(log, 0)->epoch == q, and
 * holds it back otherwise. The caller drops every error completion of a
 * fenced incarnation and never passes it to complete(): a flush is for an
 * entry the backup still owes. A flush of incarnation q while an entry of
 * epoch q is still pending means a consumed receive lost its success
 * (byte_len and imm unknown): that cannot be hidden; surface the error.
 * An SRQ has a log of its own (below): its receives complete out of order
 * across the QPs that share it.
 */
struct r2cc_recvlog;

struct r2cc_recvlog_ent {
	struct ibv_recv_wr wr; /* the copy; sg_list owned by the log */
	uint32_t epoch; /* incarnation owing the completion: fences before */
};

struct r2cc_recvlog_stats {
	uint32_t outstanding; /* entries in the log */
	uint32_t pending; /* of them: consumed, success owed by a fenced QP */
	uint64_t posted, completed, reposted, fences;
};

struct r2cc_recv_replay {
	struct ibv_recv_wr *first; /* borrowed: the log's copies, or NULL */
	uint32_t nrepost; /* WRs on @first, in posting order */
	uint32_t npending; /* consumed, successes still to poll (all fences) */
};

/**
 * r2cc_recvlog_new() - a log preallocated for a QP's receive queue
 * @cap: entries to start with (1..2^24; it grows to 2^24)
 * @max_sge: max_recv_sge as the provider returned it
 * Return: the log, or NULL with errno set.
 */
struct r2cc_recvlog *r2cc_recvlog_new(uint32_t cap, uint32_t max_sge);
void r2cc_recvlog_free(struct r2cc_recvlog *log);
/**
 * r2cc_recvlog_append() - log one receive WR the provider accepted
 * @log: the log
 * @wr: the WR (@wr->next is ignored); wr_id and SGEs are copied
 * Return: 0, 1 (logged; the log grew to twice its size), -ENOSPC (2^24
 * entries, or no memory to grow) or -EINVAL (num_sge < 0 or > max_sge).
 */
int r2cc_recvlog_append(struct r2cc_recvlog *log, const struct ibv_recv_wr *wr);
/**
 * r2cc_recvlog_complete() - retire the oldest entry on a polled success
 * @log: the log
 * @wr_id: wc->wr_id of a successful receive completion of this QP
 * Return: 0, -ENOENT (empty) or -EPROTO (the oldest has another wr_id).
 */
int r2cc_recvlog_complete(struct r2cc_recvlog *log, uint64_t wr_id);
/**
 * r2cc_recvlog_fence() - split the outstanding receives after a fence
 * @log: the log; the incarnation now owing its entries is in ERR
 * @consumed: receives of the logical QP the peer's executed SEND,
 *	SEND_WITH_IMM and WRITE_WITH_IMM consumed, in total since creation
 * @res: the outcome
 * The oldest @consumed - completed entries stay pending (their successes
 * are in the CQs of fenced incarnations; complete() retires them); the
 * rest, linked on @res->first in posting order, are to be re-posted on
 * the backup before anything appended later, and are owed by it. The list
 * is valid until the next call that changes the log.
 * Return: 0, or -ERANGE (@consumed below completed + pending, or above
 * posted); the log is unchanged on error.
 */
int r2cc_recvlog_fence(struct r2cc_recvlog *log, uint64_t consumed,
		       struct r2cc_recv_replay *res);
/* r2cc_recvlog_peek() - the @i-th oldest entry, or NULL */
const struct r2cc_recvlog_ent *r2cc_recvlog_peek(const struct r2cc_recvlog *log,
						 uint32_t i);
void r2cc_recvlog_get_stats(const struct r2cc_recvlog *log,
			    struct r2cc_recvlog_stats *st);

/*
 * The receive log of a shared receive queue: a copy of every receive WR
 * posted and not yet completed, in posting order. The QPs on the SRQ
 * complete its WRs on their own CQs, so completions retire entries in any
 * order (by wr_id: the oldest with it). What makes a move exact is that an
 * SRQ hands out its WRs in posting order (rxe's queue, mlx5's list): once
 * every QP on it is fenced, the consumed WRs are the oldest ones, and the
 * ones consumed but not yet polled are the oldest live entries, as many
 * as the peers say were consumed minus what was polled. r2cc_srqlog_split()
 * keeps those and lists the rest for the backup's SRQ. Entries appended
 * while no queue may take them (the move under way) are "unposted": the
 * newest, never retired. The log grows (doubling) when full: an SRQ holds
 * max_wr WRs, but consumed ones wait in the log until polled. The caller
 * serialises every call.
 */
struct r2cc_srqlog;

struct r2cc_srqlog_ent {
	struct ibv_recv_wr wr; /* the copy; sg_list owned by the log */
	bool live; /* not retired */
};

struct r2cc_srqlog_stats {
	uint32_t live; /* entries not retired */
	uint32_t unposted; /* of them: appended on no queue */
	uint64_t posted, completed, reposted;
};

/* r2cc_srqlog_new() - a log of @cap entries to start (1..2^24), SGEs of
 * up to @max_sge each. Return: the log, or NULL with errno set. */
struct r2cc_srqlog *r2cc_srqlog_new(uint32_t cap, uint32_t max_sge);
void r2cc_srqlog_free(struct r2cc_srqlog *log);
/**
 * r2cc_srqlog_append() - log one receive WR
 * @posted: false: it went to no queue (it waits for the split)
 * Return: 0, -ENOSPC (cannot grow) or -EINVAL (num_sge out of range).
 */
int r2cc_srqlog_append(struct r2cc_srqlog *log, const struct ibv_recv_wr *wr,
		       bool posted);
/* r2cc_srqlog_retire() - a successful completion of @wr_id: the oldest
 * posted live entry with it retires. Return: 0, or -ENOENT. */
int r2cc_srqlog_retire(struct r2cc_srqlog *log, uint64_t wr_id);
/**
 * r2cc_srqlog_split() - the SRQ moves: every QP on it is fenced
 * @consumed: receives consumed and not yet polled (the oldest live ones)
 * @res: the rest, in posting order (unposted ones last), on @res->first;
 *	valid until the next call that changes the log
 * Return: 0, or -ERANGE (@consumed above the posted live entries).
 */
int r2cc_srqlog_split(struct r2cc_srqlog *log, uint32_t consumed,
		      struct r2cc_recv_replay *res);
/* r2cc_srqlog_posted() - the split's list is on a queue now: the entries
 * appended unposted are posted ones (until then, r2cc_srqlog_unposted()
 * still finds them). */
void r2cc_srqlog_posted(struct r2cc_srqlog *log);
/* r2cc_srqlog_unposted() - the unposted entries, in order, on
 * @res->first: they go where the SRQ stays (the move is abandoned). */
void r2cc_srqlog_unposted(struct r2cc_srqlog *log,
			  struct r2cc_recv_replay *res);
void r2cc_srqlog_get_stats(const struct r2cc_srqlog *log,
			   struct r2cc_srqlog_stats *st);

/*
 * A per-CQ stash of completions r2cc synthesises or holds back, delivered
 * by the program's next poll before anything else. The control thread
 * pushes, the polling thread pops. Fields are private to wcstash.c; the
 * struct is here only for r2cc_wcstash_empty().
 */
struct r2cc_wcstash {
	pthread_mutex_t lock; /* protects head, the ring, writes of count */
	struct ibv_wc *wc; /* owned: cap completions */
	uint32_t cap;
	uint32_t head; /* slot of the oldest */
	/* Written under lock with release, read lock-free with acquire */
	_Atomic uint32_t count;
	_Atomic uint64_t pushed; /* completions pushed since creation */
};

/**
 * r2cc_wcstash_new() - a stash for up to @cap completions (1..2^24)
 * Return: the stash, or NULL with errno set.
 */
struct r2cc_wcstash *r2cc_wcstash_new(uint32_t cap);
void r2cc_wcstash_free(struct r2cc_wcstash *st);
/**
 * r2cc_wcstash_push() - append @n completions, all or none
 * Return: 0, -ENOSPC (fewer than @n free slots) or -EINVAL (@n < 0).
 */
int r2cc_wcstash_push(struct r2cc_wcstash *st, const struct ibv_wc *wc, int n);
/**
 * r2cc_wcstash_pop() - take up to @n of the oldest completions into @out
 * Return: how many (0 when empty or @n <= 0).
 */
int r2cc_wcstash_pop(struct r2cc_wcstash *st, struct ibv_wc *out, int n);

/*
 * r2cc_wcstash_empty() - lock-free check for the poll path. The acquire
 * load pairs with the release store in push and pop: seeing a count > 0
 * also shows what the pusher wrote before pushing (pop still reads the
 * ring under the lock). A push racing the check may be missed; the next
 * poll delivers it.
 */
static inline bool r2cc_wcstash_empty(struct r2cc_wcstash *st)
{
	return !atomic_load_explicit(&st->count, memory_order_acquire);
}

/*
 * r2cc_wcstash_pushed() - completions pushed since creation (acquire).
 * A poll path that must not deliver CQ entries ahead of a stashed one can
 * read it before its stash check and again after polling the CQ: if it
 * moved, a push raced the poll and the polled entries go behind it.
 */
static inline uint64_t r2cc_wcstash_pushed(struct r2cc_wcstash *st)
{
	return atomic_load_explicit(&st->pushed, memory_order_acquire);
}

#endif /* R2CC_MIG_LOGS_H */
