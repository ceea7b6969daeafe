/* SPDX-License-Identifier: MIT */
/*
 * sendlog_int.h - the send log's ring (sendlog.c), its append and the
 * retirement of a signaled run, inline here so that the post path
 * (post.c) logs a WR and the completion path (complete.c) retires one
 * without a call.
 */
#ifndef R2CC_MIG_SENDLOG_INT_H
#define R2CC_MIG_SENDLOG_INT_H

#include <errno.h>

#include "log_int.h"
#include "migrate.h"

/*
 * One per QP. Ring invariant: entry i + 1 starts at the PSN after entry
 * i, and next_psn follows the newest, so the outstanding entries span
 * out_pkts PSNs from the oldest one's first_psn. Caller serialises.
 */
struct r2cc_sendlog {
	uint32_t cap; /* entries now */
	uint32_t limit; /* entries at most (grows up to it) */
	uint32_t max_sge; /* SGEs per entry */
	uint32_t max_inline; /* inline bytes per entry */
	bool sig_all; /* sq_sig_all: every WR is signaled */
	bool started; /* start() has given a PSN and an MTU */
	bool frozen; /* replay() ran; start() moves the log on */
	uint32_t mtu; /* path MTU, bytes */
	uint32_t next_psn;
	/* PSNs r2cc's own WRs took just before the oldest entry's, from
	 * start() until an entry retires */
	uint32_t lead;
	uint32_t head; /* slot of the oldest entry */
	uint32_t count; /* entries outstanding */
	uint32_t out_pkts; /* PSNs they span */
	uint32_t seq; /* entries appended */
	uint32_t consumers; /* of them, those that consume a peer receive */
	uint32_t consumers_gone; /* of those, the ones retired */
	/* The signaled entries' seqs, oldest first: a ring of sig_n from
	 * slot sig_head */
	uint32_t *sig; /* owned: cap */
	uint32_t sig_head, sig_n;
	/* Entries a move marked (not NEW, or forced): while none is, the
	 * next completion is for the oldest signaled entry */
	uint32_t marked;
	struct r2cc_sendlog_ent *ent; /* owned: cap entries */
	struct ibv_sge *sge; /* owned: cap * max_sge */
	char *inl; /* owned: cap * max_inline bytes */
	struct r2cc_sendlog_stats st;
};

/* sendlog.c's cold halves of the append: the ring doubled (0, or
 * -ENOSPC), an inline WR's bytes copied into slot @s (its length, or
 * -EINVAL past max_inline) */
__attribute__((cold)) int r2cc_sendlog_grow(struct r2cc_sendlog *log);
__attribute__((cold)) int64_t
r2cc_sendlog_copy_inline(struct r2cc_sendlog *log, uint32_t s,
			 const struct ibv_send_wr *wr);

/* Slot of the @i-th oldest entry, and that entry */
static inline uint32_t r2cc_sl_slot(const struct r2cc_sendlog *log, uint32_t i)
{
	return r2cc_ring_slot(log->head, i, log->cap);
}

static inline struct r2cc_sendlog_ent *
r2cc_sl_at(const struct r2cc_sendlog *log, uint32_t i)
{
	return &log->ent[r2cc_sl_slot(log, i)];
}

/* The oldest entry's sequence number: entries leave from the oldest end
 * only (r2cc_sl_drop()) */
static inline uint32_t r2cc_sl_oldest_seq(const struct r2cc_sendlog *log)
{
	return log->seq - log->count;
}

/* Index of the oldest signaled entry (sig_n > 0) */
static inline uint32_t r2cc_sl_first_signaled(const struct r2cc_sendlog *log)
{
	return log->sig[log->sig_head] - r2cc_sl_oldest_seq(log);
}

/* Is a completion of @wr_id and @opcode another WR's than @e's? */
static inline bool r2cc_sl_other(const struct r2cc_sendlog_ent *e,
				 uint64_t wr_id, enum ibv_wc_opcode opcode)
{
	return e->wr.wr_id != wr_id ||
	       r2cc_wc_opcode(e->wr.opcode) != (int)opcode;
}

/* Of the @n oldest entries (1 <= @n <= count), those that consume a
 * receive at the peer */
static inline uint32_t r2cc_sl_consumers_of(const struct r2cc_sendlog *log,
					    uint32_t n)
{
	return r2cc_sl_at(log, n - 1)->consumers - log->consumers_gone;
}

/* The @n oldest entries gone (1 <= @n <= count), the signaled ones
 * among them off the ring (marks accounted by the caller) */
static inline void r2cc_sl_drop(struct r2cc_sendlog *log, uint32_t n)
{
	uint32_t seq = r2cc_sl_oldest_seq(log) + n;

	log->consumers_gone = r2cc_sl_at(log, n - 1)->consumers;
	while (log->sig_n && (int32_t)(log->sig[log->sig_head] - seq) < 0) {
		log->sig_head = r2cc_ring_slot(log->sig_head, 1, log->cap);
		log->sig_n--;
	}
	log->head = r2cc_sl_slot(log, n);
	log->count -= n;
	/* Entry i + 1 starts where entry i ends, next_psn where the newest
	 * does */
	log->out_pkts =
		log->count ?
			(uint32_t)r2cc_psn_diff(log->next_psn,
						r2cc_sl_at(log, 0)->first_psn) :
			0;
	log->lead = 0;
	log->st.retired += n;
}

/* r2cc_sendlog_complete_next(), inline (migrate.h) */
static inline int r2cc_sendlog_next_done(struct r2cc_sendlog *log,
					 uint64_t wr_id,
					 enum ibv_wc_opcode opcode,
					 uint32_t *consumers)
{
	const struct r2cc_sendlog_ent *e;
	uint32_t n;

	if (log->marked || !log->sig_n)
		return -EAGAIN;
	n = r2cc_sl_first_signaled(log) + 1;
	e = r2cc_sl_at(log, n - 1);
	if (r2cc_sl_other(e, wr_id, opcode))
		return -EAGAIN;
	*consumers = r2cc_sl_consumers_of(log, n);
	r2cc_sl_drop(log, n);
	return (int)n;
}

/* r2cc_sendlog_append(), inline (migrate.h) */
static inline __attribute__((always_inline)) int
r2cc_sendlog_put(struct r2cc_sendlog *log, const struct ibv_send_wr *wr,
		 uint64_t *lenp)
{
	struct r2cc_sendlog_ent *e;
	struct ibv_sge *sge;
	uint32_t s, nsge = (uint32_t)wr->num_sge;
	unsigned int op = wr->opcode;
	uint64_t len = 0;
	bool sig;
	int n;

	if (__builtin_expect(log->frozen || !log->started, 0))
		return log->frozen ? -EBUSY : -EINVAL;
	if (nsge > log->max_sge) /* (a negative num_sge too) */
		return -EINVAL;
	if (log->count == log->cap && r2cc_sendlog_grow(log))
		return -ENOSPC;
	/* Copied into the next slot, not yet taken: the program may reuse
	 * its SGE array and inline buffer once post returns */
	s = r2cc_sl_slot(log, log->count);
	e = &log->ent[s];
	if (__builtin_expect(r2cc_wr_inline(wr), 0)) {
		int64_t l = r2cc_sendlog_copy_inline(log, s, wr);

		if (l < 0)
			return (int)l;
		len = (uint64_t)l;
	} else {
		sge = &log->sge[(size_t)s * log->max_sge];
		e->wr = *wr;
		e->wr.next = NULL;
		e->wr.sg_list = sge;
		if (nsge == 1) { /* (most WRs: no loop) */
			sge[0] = wr->sg_list[0];
			len = sge[0].length;
		} else {
			for (uint32_t i = 0; i < nsge; i++) {
				sge[i] = wr->sg_list[i];
				len += sge[i].length;
			}
		}
	}
	/* WRITE, WRITE_WITH_IMM, SEND, SEND_WITH_IMM within one MTU (an
	 * empty one too): one packet */
	_Static_assert(IBV_WR_RDMA_WRITE == 0 &&
			       IBV_WR_RDMA_WRITE_WITH_IMM == 1 &&
			       IBV_WR_SEND == 2 && IBV_WR_SEND_WITH_IMM == 3,
		       "verbs' send opcodes");
	if (op <= IBV_WR_SEND_WITH_IMM && len <= log->mtu)
		n = 1;
	else if ((n = r2cc_psn_npkts(wr->opcode, len, log->mtu)) < 0)
		return n;
	if ((uint32_t)n > R2CC_PSN_WINDOW - log->out_pkts)
		return -ENOSPC;
	sig = log->sig_all | !!(wr->send_flags & IBV_SEND_SIGNALED);
	e->len = len;
	e->first_psn = log->next_psn;
	e->npkts = (uint32_t)n;
	e->signaled = sig;
	e->forced = false;
	e->reread = false;
	e->disp = R2CC_SL_NEW;
	log->consumers += r2cc_wr_consumes_recv(wr->opcode);
	e->consumers = log->consumers;
	if (sig)
		log->sig[r2cc_ring_slot(log->sig_head, log->sig_n++, log->cap)] =
			log->seq;
	log->seq++;
	log->next_psn = r2cc_psn_add(log->next_psn, (uint32_t)n);
	log->out_pkts += (uint32_t)n;
	log->count++;
	log->st.appended++;
	if (lenp)
		*lenp = len;
	return 0;
}

#endif /* R2CC_MIG_SENDLOG_INT_H */
