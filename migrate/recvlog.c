/* SPDX-License-Identifier: MIT */
/*
 * recvlog.c - the per-QP receive log: a ring of copies of the posted
 * receive WRs, retired in posting order by successful completions and
 * split at the peer's consumed count into pending and re-post lists.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log_int.h"
#include "migrate.h"

/* More WRs than any HCA's max_qp_wr; keeps counts within an int */
#define MAX_CAP (1U << 24)

/*
 * One per QP. The entries are the posted - completed receives, oldest
 * first. The oldest @pending were consumed before the last fence and are
 * owed a success by the fenced incarnation their epoch names; every later
 * entry has epoch == @epoch, the incarnation posting now. Caller
 * serialises every call.
 */
struct r2cc_recvlog {
	uint32_t cap; /* entries (grows) */
	uint32_t max_sge; /* SGEs per entry */
	uint32_t head; /* slot of the oldest entry */
	uint32_t count; /* entries outstanding */
	uint32_t pending; /* oldest entries consumed before the last fence */
	uint32_t epoch; /* fences so far: the incarnation posting now */
	struct r2cc_recvlog_ent *ent; /* owned: cap entries */
	struct ibv_sge *sge; /* owned: cap * max_sge */
	struct r2cc_recvlog_stats st; /* posted, completed, reposted, fences */
};

struct r2cc_recvlog *r2cc_recvlog_new(uint32_t cap, uint32_t max_sge)
{
	size_t nsge = (size_t)cap * max_sge;
	struct r2cc_recvlog *log;

	if (!cap || cap > MAX_CAP || max_sge > MAX_CAP) {
		errno = EINVAL;
		return NULL;
	}
	log = calloc(1, sizeof(*log));
	if (!log)
		return NULL;
	log->cap = cap;
	log->max_sge = max_sge;
	log->ent = calloc(cap, sizeof(*log->ent));
	log->sge = calloc(nsge ? nsge : 1, sizeof(*log->sge));
	if (!log->ent || !log->sge) {
		r2cc_recvlog_free(log);
		errno = ENOMEM;
		return NULL;
	}
	return log;
}

void r2cc_recvlog_free(struct r2cc_recvlog *log)
{
	if (!log)
		return;
	free(log->sge);
	free(log->ent);
	free(log);
}

static uint32_t slot(const struct r2cc_recvlog *log, uint32_t i)
{
	return r2cc_ring_slot(log->head, i, log->cap);
}

static struct r2cc_recvlog_ent *at(const struct r2cc_recvlog *log, uint32_t i)
{
	return &log->ent[slot(log, i)];
}

/*
 * Twice the slots, the entries copied to the front in order. Posted minus
 * polled is not bounded by the queue's depth: a receive the HCA consumed
 * frees its slot before the program polls it, and libfabric's rxm keeps
 * its queue full (one more receive posted for each rendezvous it received
 * before its match), so the log holds the queue and the CQ's share too.
 */
static int grow(struct r2cc_recvlog *log)
{
	struct r2cc_recvlog_ent *ent =
		r2cc_recv_ring_grow(log->ent, &log->sge, &log->cap, &log->head,
				    log->count, sizeof(*ent),
				    offsetof(struct r2cc_recvlog_ent, wr),
				    log->max_sge, MAX_CAP);

	if (!ent)
		return -ENOSPC;
	log->ent = ent;
	return 0;
}

int r2cc_recvlog_append(struct r2cc_recvlog *log, const struct ibv_recv_wr *wr)
{
	struct r2cc_recvlog_ent *e;
	struct ibv_sge *sge;
	int grew = 0;
	uint32_t s;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > log->max_sge)
		return -EINVAL;
	if (log->count == log->cap) {
		if (grow(log))
			return -ENOSPC;
		grew = 1;
	}
	s = slot(log, log->count);
	e = &log->ent[s];
	sge = &log->sge[(size_t)s * log->max_sge];
	r2cc_recv_copy(&e->wr, sge, wr);
	e->epoch = log->epoch;
	log->count++;
	log->st.posted++;
	return grew;
}

int r2cc_recvlog_complete(struct r2cc_recvlog *log, uint64_t wr_id)
{
	if (!log->count)
		return -ENOENT;
	/* An RC QP's own RQ completes its WRs in the order posted */
	if (at(log, 0)->wr.wr_id != wr_id)
		return -EPROTO;
	log->head = slot(log, 1);
	log->count--;
	if (log->pending)
		log->pending--;
	log->st.completed++;
	return 0;
}

int r2cc_recvlog_fence(struct r2cc_recvlog *log, uint64_t consumed,
		       struct r2cc_recv_replay *res)
{
	struct ibv_recv_wr **tail = &res->first;
	struct r2cc_recvlog_ent *e;
	uint32_t npend, i;

	/*
	 * The pending entries were consumed already: the running total
	 * cannot go back below them, nor beyond what was ever posted.
	 */
	if (consumed < log->st.completed + log->pending ||
	    consumed > log->st.posted)
		return -ERANGE;
	npend = (uint32_t)(consumed - log->st.completed);
	log->epoch++;
	memset(res, 0, sizeof(*res));
	for (i = 0; i < log->count; i++) {
		e = at(log, i);
		e->wr.next = NULL;
		if (i < npend)
			continue; /* its success is in a fenced QP's CQ */
		e->epoch = log->epoch;
		*tail = &e->wr;
		tail = &e->wr.next;
	}
	log->pending = npend;
	res->nrepost = log->count - npend;
	res->npending = npend;
	log->st.reposted += res->nrepost;
	log->st.fences++;
	return 0;
}

const struct r2cc_recvlog_ent *r2cc_recvlog_peek(const struct r2cc_recvlog *log,
						 uint32_t i)
{
	return i < log->count ? at(log, i) : NULL;
}

void r2cc_recvlog_get_stats(const struct r2cc_recvlog *log,
			    struct r2cc_recvlog_stats *st)
{
	*st = log->st;
	st->outstanding = log->count;
	st->pending = log->pending;
}
