/* SPDX-License-Identifier: MIT */
/*
 * sendlog_int.h - the send log's ring (sendlog.c) and its append, inline
 * here so that the post path (post.c) logs a WR without a call.
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
	s = r2cc_ring_slot(log->head, log->count, log->cap);
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
		for (uint32_t i = 0; i < nsge; i++) {
			sge[i] = wr->sg_list[i];
			len += sge[i].length;
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
