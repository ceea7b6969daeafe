/* SPDX-License-Identifier: MIT */
/*
 * srqlog.c - the receive log of a shared receive queue: copies of the
 * posted receive WRs in posting order, retired in any order (the QPs on
 * the SRQ complete them on their own CQs), split after a move into the
 * consumed entries (owed by fenced QPs) and the rest, to be re-posted.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log_int.h"
#include "migrate.h"

#define MAX_CAP (1U << 24)

struct r2cc_srqlog {
	uint32_t cap; /* slots */
	uint32_t max_sge;
	uint32_t head; /* slot of the oldest */
	uint32_t used; /* slots from head on: live and retired */
	uint32_t live; /* of them not retired */
	uint32_t unposted; /* the newest live ones: on no queue yet */
	struct r2cc_srqlog_ent *ent; /* owned: cap */
	struct ibv_sge *sge; /* owned: cap * max_sge */
	struct r2cc_srqlog_stats st;
};

static int alloc_ring(struct r2cc_srqlog_ent **ent, struct ibv_sge **sge,
		      uint32_t cap, uint32_t max_sge)
{
	*ent = calloc(cap, sizeof(**ent));
	*sge = calloc((size_t)cap * (max_sge ? max_sge : 1), sizeof(**sge));
	if (*ent && *sge)
		return 0;
	free(*ent);
	free(*sge);
	return -ENOMEM;
}

struct r2cc_srqlog *r2cc_srqlog_new(uint32_t cap, uint32_t max_sge)
{
	struct r2cc_srqlog *log;

	if (!cap || cap > MAX_CAP || max_sge > MAX_CAP) {
		errno = EINVAL;
		return NULL;
	}
	log = calloc(1, sizeof(*log));
	if (!log)
		return NULL;
	log->cap = cap;
	log->max_sge = max_sge;
	if (alloc_ring(&log->ent, &log->sge, cap, max_sge)) {
		free(log);
		errno = ENOMEM;
		return NULL;
	}
	return log;
}

void r2cc_srqlog_free(struct r2cc_srqlog *log)
{
	if (!log)
		return;
	free(log->sge);
	free(log->ent);
	free(log);
}

static uint32_t slot(const struct r2cc_srqlog *log, uint32_t i)
{
	return r2cc_ring_slot(log->head, i, log->cap);
}

static struct r2cc_srqlog_ent *at(const struct r2cc_srqlog *log, uint32_t i)
{
	return &log->ent[slot(log, i)];
}

/* Twice the slots, the entries copied to the front in order. */
static int grow(struct r2cc_srqlog *log)
{
	struct r2cc_srqlog_ent *ent =
		r2cc_recv_ring_grow(log->ent, &log->sge, &log->cap, &log->head,
				    log->used, sizeof(*ent),
				    offsetof(struct r2cc_srqlog_ent, wr),
				    log->max_sge, MAX_CAP);

	if (!ent)
		return -ENOSPC;
	log->ent = ent;
	return 0;
}

int r2cc_srqlog_append(struct r2cc_srqlog *log, const struct ibv_recv_wr *wr,
		       bool posted)
{
	struct r2cc_srqlog_ent *e;
	struct ibv_sge *sge;
	uint32_t s;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > log->max_sge)
		return -EINVAL;
	if (log->used == log->cap && grow(log))
		return -ENOSPC;
	s = slot(log, log->used);
	e = &log->ent[s];
	sge = &log->sge[(size_t)s * log->max_sge];
	r2cc_recv_copy(&e->wr, sge, wr);
	e->live = true;
	log->used++;
	log->live++;
	if (!posted)
		log->unposted++;
	log->st.posted++;
	return 0;
}

int r2cc_srqlog_retire(struct r2cc_srqlog *log, uint64_t wr_id)
{
	uint32_t i, n = log->used - log->unposted;
	struct r2cc_srqlog_ent *e;

	/*
	 * The oldest posted one with this wr_id: an SRQ hands its WRs out
	 * in posting order, so the one a completion names is the oldest
	 * unless wr_ids repeat and QPs complete out of order; then which
	 * copy retires does not matter unless their buffers differ.
	 */
	for (i = 0; i < n; i++) {
		e = at(log, i);
		if (e->live && e->wr.wr_id == wr_id)
			break;
	}
	if (i == n)
		return -ENOENT;
	e->live = false;
	log->live--;
	log->st.completed++;
	while (log->used && !at(log, 0)->live) {
		log->head = slot(log, 1);
		log->used--;
	}
	return 0;
}

int r2cc_srqlog_split(struct r2cc_srqlog *log, uint32_t consumed,
		      struct r2cc_recv_replay *res)
{
	struct ibv_recv_wr **tail = &res->first;
	struct r2cc_srqlog_ent *e;
	uint32_t i, seen = 0;

	if (consumed > log->live - log->unposted)
		return -ERANGE;
	memset(res, 0, sizeof(*res));
	for (i = 0; i < log->used; i++) {
		e = at(log, i);
		e->wr.next = NULL;
		if (!e->live || seen++ < consumed)
			continue;
		*tail = &e->wr;
		tail = &e->wr.next;
		res->nrepost++;
	}
	res->npending = consumed;
	log->st.reposted += res->nrepost;
	return 0;
}

void r2cc_srqlog_posted(struct r2cc_srqlog *log)
{
	log->unposted = 0;
}

void r2cc_srqlog_unposted(struct r2cc_srqlog *log, struct r2cc_recv_replay *res)
{
	struct ibv_recv_wr **tail = &res->first;
	struct r2cc_srqlog_ent *e;
	uint32_t i, seen = 0;

	memset(res, 0, sizeof(*res));
	for (i = 0; i < log->used; i++) {
		e = at(log, i);
		e->wr.next = NULL;
		if (!e->live || seen++ < log->live - log->unposted)
			continue;
		*tail = &e->wr;
		tail = &e->wr.next;
		res->nrepost++;
	}
	log->unposted = 0;
}

void r2cc_srqlog_get_stats(const struct r2cc_srqlog *log,
			   struct r2cc_srqlog_stats *st)
{
	*st = log->st;
	st->live = log->live;
	st->unposted = log->unposted;
}
