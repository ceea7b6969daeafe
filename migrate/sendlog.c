/* SPDX-License-Identifier: MIT */
/*
 * sendlog.c - the per-QP send log: a ring of copies of the posted send WRs
 * with their PSNs, retired by completions in RC order and split by the
 * responder's rq_psn into what to replay after a failover. It starts at
 * half its limit and doubles when a program posts past that.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log_int.h"
#include "migrate.h"
#include "sendlog_int.h"

/* More WRs than any HCA's max_qp_wr; keeps counts within an int */
#define MAX_CAP (1U << 24)

/* The arrays for @cap entries, or -ENOMEM (none allocated). */
static int ring_alloc(const struct r2cc_sendlog *log, uint32_t cap,
		      struct r2cc_sendlog_ent **ent, struct ibv_sge **sge,
		      char **inl, uint32_t **sig)
{
	size_t nsge = (size_t)cap * log->max_sge;
	size_t ninl = (size_t)cap * log->max_inline;

	*ent = calloc(cap, sizeof(**ent));
	*sge = calloc(nsge ? nsge : 1, sizeof(**sge));
	*inl = malloc(ninl ? ninl : 1);
	*sig = calloc(cap, sizeof(**sig));
	if (*ent && *sge && *inl && *sig)
		return 0;
	free(*ent);
	free(*sge);
	free(*inl);
	free(*sig);
	return -ENOMEM;
}

struct r2cc_sendlog *r2cc_sendlog_new(uint32_t cap, uint32_t max_sge,
				      uint32_t max_inline, bool sq_sig_all)
{
	struct r2cc_sendlog *log;

	if (!cap || cap > MAX_CAP || max_sge > MAX_CAP ||
	    max_inline > MAX_CAP) {
		errno = EINVAL;
		return NULL;
	}
	log = calloc(1, sizeof(*log));
	if (!log)
		return NULL;
	log->limit = cap;
	log->cap = cap / 2 + 1 < cap ? cap / 2 + 1 : cap;
	if (log->cap > R2CC_LOG_FIRST)
		log->cap = R2CC_LOG_FIRST;
	log->max_sge = max_sge;
	log->max_inline = max_inline;
	log->sig_all = sq_sig_all;
	if (ring_alloc(log, log->cap, &log->ent, &log->sge, &log->inl,
		       &log->sig)) {
		free(log);
		errno = ENOMEM;
		return NULL;
	}
	return log;
}

void r2cc_sendlog_free(struct r2cc_sendlog *log)
{
	if (!log)
		return;
	free(log->sig);
	free(log->inl);
	free(log->sge);
	free(log->ent);
	free(log);
}

/*
 * Twice the entries, at most the limit: the outstanding ones copied to the
 * front in order, their SGEs re-pointed at the new arrays (an inline WR's
 * at its bytes' new place). A program may post past the max_send_wr it
 * was told (rxe grants a queue rounded up to 2^k - 1); one that does not
 * keeps half the memory. Return: 0, or -ENOSPC (at the limit, or no
 * memory: the ring as it was).
 */
int r2cc_sendlog_grow(struct r2cc_sendlog *log)
{
	uint32_t ncap = log->cap * 2 < log->limit ? log->cap * 2 : log->limit;
	struct r2cc_sendlog_ent *ent, *e;
	struct ibv_sge *sge, *es;
	char *inl, *from;
	uint32_t i, s, *sig;
	int k;

	if (log->cap == log->limit ||
	    ring_alloc(log, ncap, &ent, &sge, &inl, &sig))
		return -ENOSPC;
	for (i = 0; i < log->sig_n; i++)
		sig[i] = log->sig[r2cc_ring_slot(log->sig_head, i, log->cap)];
	for (i = 0; i < log->count; i++) {
		s = r2cc_sl_slot(log, i);
		e = &ent[i];
		es = &sge[(size_t)i * log->max_sge];
		from = &log->inl[(size_t)s * log->max_inline];
		*e = log->ent[s];
		memcpy(es, &log->sge[(size_t)s * log->max_sge],
		       (size_t)log->max_sge * sizeof(*es));
		memcpy(&inl[(size_t)i * log->max_inline], from,
		       log->max_inline);
		e->wr.sg_list = es;
		e->wr.next = NULL;
		for (k = 0; r2cc_wr_inline(&e->wr) && k < e->wr.num_sge; k++)
			es[k].addr =
				(uintptr_t)&inl[(size_t)i * log->max_inline +
						(es[k].addr - (uintptr_t)from)];
	}
	free(log->ent);
	free(log->sge);
	free(log->inl);
	free(log->sig);
	log->ent = ent;
	log->sge = sge;
	log->inl = inl;
	log->sig = sig;
	log->cap = ncap;
	log->head = 0;
	log->sig_head = 0;
	return 0;
}

static bool valid_mtu(uint32_t mtu)
{
	return mtu >= 256 && mtu <= 4096 && !(mtu & (mtu - 1));
}

void r2cc_wr_copy(struct ibv_send_wr *dst, const struct ibv_send_wr *wr,
		  struct ibv_sge *sge, char *inl)
{
	int i;

	*dst = *wr;
	dst->next = NULL;
	dst->sg_list = sge;
	if (!r2cc_wr_inline(wr)) {
		if (wr->num_sge)
			memcpy(sge, wr->sg_list, wr->num_sge * sizeof(*sge));
		return;
	}
	for (i = 0; i < wr->num_sge; i++) {
		uint32_t n = wr->sg_list[i].length;

		if (n)
			memcpy(inl, (void *)(uintptr_t)wr->sg_list[i].addr, n);
		sge[i] = (struct ibv_sge){ (uintptr_t)inl, n, 0 };
		inl += n;
	}
}

/* @wr's inline bytes into slot @s's own, its SGEs pointing there: its
 * length, or -EINVAL (more than the QP's max_inline_data) */
int64_t r2cc_sendlog_copy_inline(struct r2cc_sendlog *log, uint32_t s,
				 const struct ibv_send_wr *wr)
{
	uint64_t len = r2cc_wr_len(wr);

	if (len > log->max_inline)
		return -EINVAL;
	r2cc_wr_copy(&log->ent[s].wr, wr, &log->sge[(size_t)s * log->max_sge],
		     &log->inl[(size_t)s * log->max_inline]);
	return (int64_t)len;
}

int r2cc_sendlog_append(struct r2cc_sendlog *log, const struct ibv_send_wr *wr,
			uint64_t *lenp)
{
	return r2cc_sendlog_put(log, wr, lenp);
}

int r2cc_sendlog_match(const struct r2cc_sendlog *log, uint64_t wr_id,
		       enum ibv_wc_opcode opcode)
{
	const struct r2cc_sendlog_ent *e;
	uint32_t i;

	if (!log->marked) {
		/* No move's marks: the oldest signaled one */
		if (!log->sig_n)
			return -ENOENT;
		i = r2cc_sl_first_signaled(log);
		return r2cc_sl_other(r2cc_sl_at(log, i), wr_id, opcode) ?
			       -EPROTO :
			       (int)i;
	}
	for (i = 0; i < log->count; i++) {
		e = r2cc_sl_at(log, i);
		/* DONE entries were never posted where this came from */
		if ((!e->signaled && !e->forced) || e->disp == R2CC_SL_DONE)
			continue;
		return r2cc_sl_other(e, wr_id, opcode) ? -EPROTO : (int)i;
	}
	return -ENOENT;
}

/* Does @e carry a move's mark? */
static bool is_marked(const struct r2cc_sendlog_ent *e)
{
	return e->disp != R2CC_SL_NEW || e->forced;
}

/* The entries a move marked, counted again (after it marked them) */
static void count_marked(struct r2cc_sendlog *log)
{
	uint32_t i;

	log->marked = 0;
	for (i = 0; i < log->count; i++)
		log->marked += is_marked(r2cc_sl_at(log, i));
}

int r2cc_sendlog_retire(struct r2cc_sendlog *log, uint32_t n)
{
	uint32_t i;

	if (n > log->count)
		return -EINVAL;
	if (!n)
		return 0;
	for (i = 0; log->marked && i < n; i++)
		log->marked -= is_marked(r2cc_sl_at(log, i));
	r2cc_sl_drop(log, n);
	return (int)n;
}

int r2cc_sendlog_complete_next(struct r2cc_sendlog *log, uint64_t wr_id,
			       enum ibv_wc_opcode opcode, uint32_t *consumers)
{
	return r2cc_sendlog_next_done(log, wr_id, opcode, consumers);
}

uint32_t r2cc_sendlog_consumers(const struct r2cc_sendlog *log, uint32_t n)
{
	return n && n <= log->count ? r2cc_sl_consumers_of(log, n) : 0;
}

bool r2cc_sendlog_marked(const struct r2cc_sendlog *log)
{
	return log->marked;
}

int r2cc_sendlog_complete(struct r2cc_sendlog *log, uint64_t wr_id,
			  enum ibv_wc_opcode opcode)
{
	const struct r2cc_sendlog_ent *e;
	int idx = r2cc_sendlog_match(log, wr_id, opcode);
	int i;

	if (idx < 0)
		return idx;
	/* The program must see that completion first, in posting order */
	for (i = 0; i < idx; i++) {
		e = r2cc_sl_at(log, (uint32_t)i);
		if (e->signaled && e->disp == R2CC_SL_DONE)
			return -EBUSY;
	}
	return r2cc_sendlog_retire(log, (uint32_t)idx + 1);
}

const struct r2cc_sendlog_ent *r2cc_sendlog_peek(const struct r2cc_sendlog *log,
						 uint32_t i)
{
	return i < log->count ? r2cc_sl_at(log, i) : NULL;
}

/* What a fence at @off makes of @e, left unchanged (@eoff: @e's first PSN
 * and @off: rq_psn, both as offsets from the oldest) */
static enum r2cc_sendlog_disp judge(const struct r2cc_sendlog_ent *e,
				    uint32_t eoff, uint32_t off)
{
	if (e->disp == R2CC_SL_DONE)
		return R2CC_SL_DONE; /* done by an earlier rail */
	/* A local WR ran iff the SQ went on to the next WR's packets */
	if (!e->npkts)
		return eoff < off ? R2CC_SL_DONE : R2CC_SL_REPLAY;
	if (eoff + e->npkts > off)
		return R2CC_SL_REPLAY; /* not, or partly, executed */
	switch (e->wr.opcode) {
	case IBV_WR_RDMA_READ:
		/* Executed, but the response data may not have landed */
		return R2CC_SL_REPLAY;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		/* Executed, original value lost: cannot run it twice */
		return R2CC_SL_LOST;
	default:
		return R2CC_SL_DONE;
	}
}

/* judge(), and an executed READ marked for its reread */
static enum r2cc_sendlog_disp classify(struct r2cc_sendlog_ent *e,
				       uint32_t eoff, uint32_t off)
{
	enum r2cc_sendlog_disp d = judge(e, eoff, off);

	if (d == R2CC_SL_REPLAY && e->npkts && eoff + e->npkts <= off)
		e->reread = true;
	return d;
}

static void account(struct r2cc_sendlog *log, struct r2cc_sendlog_ent *e,
		    enum r2cc_sendlog_disp was, struct r2cc_replay *res)
{
	switch (e->disp) {
	case R2CC_SL_REPLAY:
		res->nreplay++;
		res->nreread += e->reread;
		log->st.replayed++;
		log->st.reread += e->reread;
		break;
	case R2CC_SL_DONE:
		res->nskipped++;
		log->st.skipped += was != R2CC_SL_DONE;
		break;
	case R2CC_SL_LOST:
		res->lost = e;
		/* fall through */
	default:
		res->nfailed++;
		log->st.failed++;
		break;
	}
}

/* A signaled DONE entry completes once the REPLAY one before it does;
 * if the program did not signal that one, nothing would say so: it is
 * replayed signaled (forced) */
static void force_signals(struct r2cc_sendlog *log)
{
	struct r2cc_sendlog_ent *e, *last = NULL;
	uint32_t i;

	for (i = 0; i < log->count; i++) {
		e = r2cc_sl_at(log, i);
		if (e->disp == R2CC_SL_REPLAY) {
			last = e;
		} else if (last && !last->signaled && e->signaled &&
			   e->disp == R2CC_SL_DONE) {
			last->forced = true;
			last->wr.send_flags |= IBV_SEND_SIGNALED;
		}
	}
}

/* @peer_rq_psn as an offset in packets from the oldest entry's first;
 * -EBUSY once replayed, -ERANGE outside the outstanding PSNs */
static int peer_off(const struct r2cc_sendlog *log, uint32_t peer_rq_psn,
		    uint32_t *off)
{
	uint32_t base =
		log->count ? r2cc_sl_at(log, 0)->first_psn : log->next_psn;
	int32_t d = r2cc_psn_diff(peer_rq_psn & R2CC_PSN_MASK, base);

	if (log->frozen)
		return -EBUSY;
	/* Still at r2cc's own WRs: none of the program's executed */
	if (d < 0 && (uint32_t)-d <= log->lead)
		d = 0;
	if (d < 0 || (uint32_t)d > log->out_pkts)
		return -ERANGE;
	*off = (uint32_t)d;
	return 0;
}

int r2cc_sendlog_consumed(const struct r2cc_sendlog *log, uint32_t peer_rq_psn,
			  uint32_t *n)
{
	const struct r2cc_sendlog_ent *e;
	enum r2cc_sendlog_disp d;
	uint32_t off, eoff = 0, i;
	int ret = peer_off(log, peer_rq_psn, &off);

	if (ret)
		return ret;
	*n = 0;
	for (i = 0; i < log->count; i++) {
		e = r2cc_sl_at(log, i);
		d = judge(e, eoff, off);
		if (d == R2CC_SL_LOST)
			break; /* what follows is flushed */
		*n += d == R2CC_SL_DONE && r2cc_wr_consumes_recv(e->wr.opcode);
		eoff += e->npkts;
	}
	return 0;
}

int r2cc_sendlog_replay(struct r2cc_sendlog *log, uint32_t peer_rq_psn,
			struct r2cc_replay *res)
{
	struct ibv_send_wr **tail = &res->first;
	struct r2cc_sendlog_ent *e;
	enum r2cc_sendlog_disp was;
	uint32_t off, eoff = 0, i;
	int ret = peer_off(log, peer_rq_psn, &off);

	if (ret)
		return ret;
	memset(res, 0, sizeof(*res));
	for (i = 0; i < log->count; i++) {
		e = r2cc_sl_at(log, i);
		was = e->disp;
		e->wr.next = NULL;
		e->reread = false;
		if (res->lost)
			e->disp = R2CC_SL_FLUSH;
		else
			e->disp = classify(e, eoff, off);
		if (e->disp == R2CC_SL_REPLAY) {
			*tail = &e->wr;
			tail = &e->wr.next;
		}
		account(log, e, was, res);
		eoff += e->npkts;
	}
	force_signals(log);
	count_marked(log);
	log->frozen = true;
	return 0;
}

/* After a replay: the REPLAY entries take PSNs on the new QP, in order */
static int rebase(struct r2cc_sendlog *log, uint32_t sq_psn, uint32_t mtu)
{
	struct r2cc_sendlog_ent *e;
	uint64_t total = 0;
	uint32_t i;

	for (i = 0; i < log->count; i++) {
		e = r2cc_sl_at(log, i);
		if (e->disp == R2CC_SL_LOST || e->disp == R2CC_SL_FLUSH)
			return -EBUSY;
		if (e->disp != R2CC_SL_DONE)
			total += (uint32_t)r2cc_psn_npkts(e->wr.opcode, e->len,
							  mtu);
	}
	if (total > R2CC_PSN_WINDOW)
		return -ENOSPC;
	for (i = 0; i < log->count; i++) {
		e = r2cc_sl_at(log, i);
		e->first_psn = sq_psn;
		e->reread = false;
		if (e->disp == R2CC_SL_DONE) {
			e->npkts = 0;
			continue;
		}
		e->npkts = (uint32_t)r2cc_psn_npkts(e->wr.opcode, e->len, mtu);
		e->disp = R2CC_SL_NEW;
		sq_psn = r2cc_psn_add(sq_psn, e->npkts);
	}
	log->out_pkts = (uint32_t)total;
	log->next_psn = sq_psn;
	count_marked(log);
	return 0;
}

int r2cc_sendlog_start(struct r2cc_sendlog *log, uint32_t sq_psn, uint32_t lead,
		       uint32_t mtu_bytes)
{
	int ret;

	if (!valid_mtu(mtu_bytes) || sq_psn > R2CC_PSN_MASK ||
	    lead > R2CC_PSN_WINDOW)
		return -EINVAL;
	if (log->count && !log->frozen)
		return -EBUSY;
	ret = rebase(log, r2cc_psn_add(sq_psn, lead), mtu_bytes);
	if (ret)
		return ret;
	log->lead = lead;
	log->mtu = mtu_bytes;
	log->started = true;
	log->frozen = false;
	return 0;
}

bool r2cc_sendlog_reading(const struct r2cc_sendlog *log)
{
	const struct r2cc_sendlog_ent *e;
	uint32_t i;

	for (i = 0; i < log->count; i++) {
		e = r2cc_sl_at(log, i);
		if (e->wr.opcode == IBV_WR_RDMA_READ && e->npkts > 1 &&
		    e->disp != R2CC_SL_DONE)
			return true;
	}
	return false;
}

uint32_t r2cc_sendlog_next_psn(const struct r2cc_sendlog *log)
{
	return log->next_psn;
}

void r2cc_sendlog_get_stats(const struct r2cc_sendlog *log,
			    struct r2cc_sendlog_stats *st)
{
	*st = log->st;
	st->outstanding = log->count;
}
