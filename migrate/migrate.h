/* SPDX-License-Identifier: MIT */
/*
 * migrate.h - the migrate module's one public header: 24-bit PSN arithmetic,
 * packets per send WR, the per-QP send log that failover replays, and (in
 * mig_logs.h) the receive log and the completion stash.
 * Locks: none, but each wcstash's own (innermost). Each log is serialised
 * by its QP's posting (see sendlog).
 */
#ifndef R2CC_MIGRATE_H
#define R2CC_MIGRATE_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#define R2CC_PSN_MASK 0xffffffU
/* Most PSNs a log keeps outstanding: beyond, PSN order is ambiguous */
#define R2CC_PSN_WINDOW (1U << 23)

/* r2cc_psn_add() - @psn + @n in the 24-bit PSN space (wraps) */
static inline uint32_t r2cc_psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & R2CC_PSN_MASK;
}

/* r2cc_psn_diff() - signed distance @a - @b, in (-2^23, 2^23] */
static inline int32_t r2cc_psn_diff(uint32_t a, uint32_t b)
{
	uint32_t d = (a - b) & R2CC_PSN_MASK;

	return d > R2CC_PSN_WINDOW ? (int32_t)d - (int32_t)(1U << 24) :
				     (int32_t)d;
}

/* r2cc_psn_before() - whether @a comes before @b (IB spec PSN order) */
static inline bool r2cc_psn_before(uint32_t a, uint32_t b)
{
	return r2cc_psn_diff(a, b) < 0;
}

/**
 * r2cc_psn_random() - a first PSN for a QP r2cc (re)connects (24 bits)
 * From getrandom(2), else a generator of r2cc's own: never the program's
 * random() stream (a shim must not shift a seeded program's sequence), and
 * not the same in every process (a new incarnation of a QPN starts far
 * from the PSNs its old one may still have on the wire). Thread-safe.
 */
uint32_t r2cc_psn_random(void);
/**
 * r2cc_mtu_bytes() - bytes of an enum ibv_mtu
 * @mtu: IBV_MTU_256..IBV_MTU_4096
 * Return: 256..4096, or -EINVAL.
 */
int r2cc_mtu_bytes(enum ibv_mtu mtu);
/**
 * r2cc_psn_npkts() - PSNs a requester spends on one WR (IB spec)
 * @op: the WR's opcode
 * @len: its payload in bytes (for a READ, the bytes read)
 * @mtu_bytes: the path MTU in bytes
 * SEND*, WRITE* and READ take max(1, ceil(len / mtu)) (a READ request
 * spends one PSN per response packet); atomics 1; LOCAL_INV, BIND_MW 0.
 * Return: the count, -EINVAL (@mtu_bytes 0), -EMSGSIZE (@len > 2^31) or
 * -EOPNOTSUPP (an opcode r2cc cannot account: TSO, ATOMIC_WRITE...).
 */
int r2cc_psn_npkts(enum ibv_wr_opcode op, uint64_t len, uint32_t mtu_bytes);

/* Does a WR of @op consume a receive WR at the peer? */
static inline bool r2cc_wr_consumes_recv(enum ibv_wr_opcode op)
{
	const uint32_t m = 1u << IBV_WR_SEND | 1u << IBV_WR_SEND_WITH_IMM |
			   1u << IBV_WR_SEND_WITH_INV |
			   1u << IBV_WR_RDMA_WRITE_WITH_IMM;

	return (unsigned int)op < 32 && (m >> op & 1);
}

/* r2cc_wr_len() - sum of @wr's SGE lengths (inline data included) */
uint64_t r2cc_wr_len(const struct ibv_send_wr *wr);
/* r2cc_wr_npkts() - r2cc_psn_npkts() of @wr (-EINVAL if num_sge < 0) */
int r2cc_wr_npkts(const struct ibv_send_wr *wr, uint32_t mtu_bytes);
/* r2cc_wc_opcode() - the ibv_wc_opcode a WR completes with, or -EOPNOTSUPP
 * (inline: each completion checks its entry's) */
static inline int r2cc_wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
		return IBV_WC_SEND;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	default:
		return -EOPNOTSUPP;
	}
}
/* r2cc_wr_inline() - does @wr carry inline data? (IBV_SEND_INLINE on a
 * SEND or WRITE: a READ's SGEs are destinations) */
static inline bool r2cc_wr_inline(const struct ibv_send_wr *wr)
{
	/* WRITE, WRITE_WITH_IMM, SEND, SEND_WITH_IMM, SEND_WITH_INV */
	const uint32_t carry = 1u << IBV_WR_RDMA_WRITE |
			       1u << IBV_WR_RDMA_WRITE_WITH_IMM |
			       1u << IBV_WR_SEND | 1u << IBV_WR_SEND_WITH_IMM |
			       1u << IBV_WR_SEND_WITH_INV;
	unsigned int op = wr->opcode;

	return (wr->send_flags & IBV_SEND_INLINE) && op < 32 &&
	       (carry >> op & 1);
}
/*
 * r2cc_wr_copy() - @wr copied into @dst, alone (next NULL), for after the
 * program's post returned: its num_sge SGEs into @sge, and an inline WR's
 * bytes (r2cc_wr_len()) into @inl, its SGEs pointing there.
 */
void r2cc_wr_copy(struct ibv_send_wr *dst, const struct ibv_send_wr *wr,
		  struct ibv_sge *sge, char *inl);

/*
 * The send log of one QP: a copy of every posted send WR not yet retired,
 * in posting order, with its PSNs. Nothing here locks, and nothing
 * allocates after r2cc_sendlog_new() but the one append that finds the
 * log's first half full (as a receive log grows). The caller holds the
 * QP's posting serialisation (verbs requires posts on one QP to be
 * serialised; r2cc appends right after the provider's post returns) and
 * serialises polls with it.
 */
struct r2cc_sendlog;

enum r2cc_sendlog_disp {
	R2CC_SL_NEW, /* posted, not yet through a failover */
	R2CC_SL_REPLAY, /* on the replay list: post it on the backup QP */
	R2CC_SL_DONE, /* executed by the peer: complete it, do not post */
	R2CC_SL_LOST, /* atomic executed, its result lost: surface the error */
	R2CC_SL_FLUSH, /* after a LOST atomic: fail with IBV_WC_WR_FLUSH_ERR */
};

struct r2cc_sendlog_ent {
	struct ibv_send_wr wr; /* the copy; sg_list and inline data owned */
	uint64_t len; /* bytes, as r2cc_wr_len() */
	uint32_t first_psn;
	uint32_t npkts;
	bool signaled; /* IBV_SEND_SIGNALED or sq_sig_all */
	/* Replayed signaled by r2cc though the program did not ask: its
	 * completion is r2cc's alone (r2cc_sendlog_replay()) */
	bool forced;
	bool reread; /* a READ the peer executed, replayed for its data */
	enum r2cc_sendlog_disp disp;
	/* Entries that consume a receive at the peer, appended up to and
	 * with it (wraps) */
	uint32_t consumers;
};

struct r2cc_sendlog_stats {
	uint32_t outstanding;
	uint64_t appended, retired, replayed, skipped, reread, failed;
};

/* Entries a QP's send or receive log holds at first, at most: it grows
 * (doubling) as the program keeps more outstanding. An NCCL-sized QP
 * (512 send WRs, 256 receives) seldom has more than a few in flight, and
 * full-depth logs took 230 KB of heap a QP. */
#define R2CC_LOG_FIRST 64

/**
 * r2cc_sendlog_new() - a log for a QP, for its send queue
 * @cap: entries at most (at least 1); half of it, at most R2CC_LOG_FIRST,
 *       allocated at first
 * @max_sge: max_send_sge
 * @max_inline: max_inline_data, as the provider returned it
 * @sq_sig_all: the QP signals every WR
 * Return: the log, or NULL with errno set.
 */
struct r2cc_sendlog *r2cc_sendlog_new(uint32_t cap, uint32_t max_sge,
				      uint32_t max_inline, bool sq_sig_all);
void r2cc_sendlog_free(struct r2cc_sendlog *log);
/**
 * r2cc_sendlog_start() - the QP reached RTS: WRs start at @sq_psn
 * @log: the log
 * @sq_psn: sq_psn of the RTS transition
 * @lead: PSNs r2cc's own WRs, posted first, take from @sq_psn on
 * @mtu_bytes: path MTU in bytes (256..4096)
 * After r2cc_sendlog_replay() this moves the log onto the backup QP: the
 * REPLAY entries get PSNs from @sq_psn + @lead in order (post them
 * first), DONE entries stay DONE, and appending resumes. Until an entry
 * retires, a peer rq_psn among the @lead PSNs means none executed.
 * Return: 0, -EINVAL, or -EBUSY (WRs outstanding and no replay, or
 * LOST/FLUSH entries not yet retired).
 */
int r2cc_sendlog_start(struct r2cc_sendlog *log, uint32_t sq_psn, uint32_t lead,
		       uint32_t mtu_bytes);
/* r2cc_sendlog_reading() - is a READ of more than one packet outstanding
 * (its response may be under way)? */
bool r2cc_sendlog_reading(const struct r2cc_sendlog *log);
/**
 * r2cc_sendlog_append() - log one WR the provider accepted
 * @log: the log
 * @wr: the WR (@wr->next is ignored); SGEs and inline bytes are copied
 * @len: set to its length (r2cc_wr_len()) when logged, unless NULL
 * Return: 0; -ENOSPC (cap WRs or R2CC_PSN_WINDOW PSNs outstanding), -EINVAL
 * (not started, too many SGEs or inline bytes), -EOPNOTSUPP, -EMSGSIZE or
 * -EBUSY (replayed, not restarted): the caller stops protecting the QP.
 */
int r2cc_sendlog_append(struct r2cc_sendlog *log, const struct ibv_send_wr *wr,
			uint64_t *len);
/**
 * r2cc_sendlog_match() - which entry a successful send completion is for
 * @log: the log
 * @wr_id: wc->wr_id
 * @opcode: wc->opcode
 * RC completes in order, so it is the oldest signaled (or forced) entry
 * not DONE; its wr_id and opcode must agree (wr_ids may repeat).
 * Return: its index (0 = oldest), -ENOENT (none) or -EPROTO (mismatch).
 */
int r2cc_sendlog_match(const struct r2cc_sendlog *log, uint64_t wr_id,
		       enum ibv_wc_opcode opcode);
/**
 * r2cc_sendlog_complete() - retire a successful completion's entry and
 * every entry before it
 * @log: the log
 * @wr_id: wc->wr_id
 * @opcode: wc->opcode
 * Return: entries retired (>= 1); r2cc_sendlog_match()'s errors; -EBUSY if
 * a signaled DONE entry comes first (synthesise it and retire it first).
 */
int r2cc_sendlog_complete(struct r2cc_sendlog *log, uint64_t wr_id,
			  enum ibv_wc_opcode opcode);
/* r2cc_sendlog_retire() - drop the @n oldest entries: @n or -EINVAL */
int r2cc_sendlog_retire(struct r2cc_sendlog *log, uint32_t n);
/*
 * r2cc_sendlog_complete_next() - a successful send completion for the
 * oldest signaled entry, while no move's marks are in the log: it retires
 * with the entries before it, *@consumers set to how many of them consume
 * a receive at the peer. Return: entries retired, or -EAGAIN (marks in
 * the log, or not that entry: r2cc_sendlog_match() and the rest decide;
 * nothing changed).
 */
int r2cc_sendlog_complete_next(struct r2cc_sendlog *log, uint64_t wr_id,
			       enum ibv_wc_opcode opcode, uint32_t *consumers);
/* r2cc_sendlog_consumers() - how many of the @n oldest entries consume a
 * receive at the peer (r2cc_wr_consumes_recv()); @n <= entries */
uint32_t r2cc_sendlog_consumers(const struct r2cc_sendlog *log, uint32_t n);
/* r2cc_sendlog_marked() - does an entry carry a move's mark (DONE, LOST,
 * FLUSH, or forced)? Until one does, the oldest signaled entry is the
 * next to complete and nothing is owed. */
bool r2cc_sendlog_marked(const struct r2cc_sendlog *log);
/* r2cc_sendlog_peek() - the @i-th oldest entry, or NULL */
const struct r2cc_sendlog_ent *r2cc_sendlog_peek(const struct r2cc_sendlog *log,
						 uint32_t i);

struct r2cc_replay {
	struct ibv_send_wr *first; /* borrowed: the log's copies, or NULL */
	uint32_t nreplay; /* WRs on @first, in posting order */
	uint32_t nskipped; /* DONE entries */
	uint32_t nreread; /* of @nreplay: READs the peer had executed */
	uint32_t nfailed; /* the LOST atomic and the FLUSH entries after it */
	const struct r2cc_sendlog_ent *lost; /* the LOST atomic, or NULL */
};

/**
 * r2cc_sendlog_replay() - split the outstanding WRs after a fence
 * @log: the log; its QP is in ERR and its successes are retired
 * @peer_rq_psn: the responder's rq_psn, the next PSN it expects
 * @res: the outcome
 * A WR whose last PSN is below @peer_rq_psn was executed: DONE, except a
 * READ (its response may not have landed: REPLAY, reread) and an atomic
 * (LOST; the entries after it FLUSH). Every other WR is REPLAY, whole: a
 * partial WRITE rewrites identical bytes, a partial SEND lands again in
 * the receive the peer re-posts. A 0-PSN WR (LOCAL_INV, BIND_MW) is DONE
 * only if the WR after it started. Walk the entries with peek() to
 * complete DONE ones in order; the log stays frozen until start(). A
 * reread the program did not signal, with a signaled DONE after it, is
 * replayed signaled (forced): no completion would say it is done, and
 * the DONE one must complete after it.
 * Return: 0, -ERANGE (@peer_rq_psn outside the outstanding PSNs), -EBUSY
 * (already replayed).
 */
int r2cc_sendlog_replay(struct r2cc_sendlog *log, uint32_t peer_rq_psn,
			struct r2cc_replay *res);
/**
 * r2cc_sendlog_consumed() - the peer's receives a fence would find used
 * @log: as for r2cc_sendlog_replay(), not frozen
 * @peer_rq_psn: the responder's rq_psn
 * @n: how many outstanding WRs that consume a receive (SENDs, WRITEs with
 *     immediate) r2cc_sendlog_replay() at @peer_rq_psn would mark DONE
 * The log is left as it is: a move that tells the peer this count before
 * it replays (a move back, move.c) replays later, on what was appended
 * since too.
 * Return: 0, -ERANGE, -EBUSY as r2cc_sendlog_replay().
 */
int r2cc_sendlog_consumed(const struct r2cc_sendlog *log, uint32_t peer_rq_psn,
			  uint32_t *n);
/* r2cc_sendlog_next_psn() - the PSN the next appended WR will get */
uint32_t r2cc_sendlog_next_psn(const struct r2cc_sendlog *log);
void r2cc_sendlog_get_stats(const struct r2cc_sendlog *log,
			    struct r2cc_sendlog_stats *st);

#include "mig_logs.h"

#endif /* R2CC_MIGRATE_H */
