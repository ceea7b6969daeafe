/* SPDX-License-Identifier: MIT */
/*
 * cq_ex.c - extended CQs (ibv_create_cq_ex): ibv_start_poll, ibv_next_poll
 * and ibv_end_poll walk the CQ one completion at a time, read through the
 * CQ's ibv_wc_read_* functions. With protected QPs the walk goes through
 * migrate/ as ibv_poll_cq does (logs retired, a fenced QP's completions
 * hidden, stashed and backup completions merged in), and the program reads
 * r2cc's copy of the completion it is shown, taken from the provider by a
 * walk of its own.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "shim_int.h"

#define unlikely(x) __builtin_expect(!!(x), 0)

/* What r2cc must read of each completion to protect the CQ's QPs. */
#define R2CC_WC_EX_NEEDED \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM)

struct r2cc_cq_ex {
	/* The provider's functions, as it set them in the program's CQ */
	struct ibv_cq_ex prov;
	bool merge; /* protected QPs may complete here: the walk is r2cc's */
	/*
	 * Held from the program's successful start_poll to its end_poll:
	 * the provider's own lock (rxe's, mlx5's) spans its walk only while
	 * r2cc takes one completion, and threads polling one CQ rely on it.
	 * It protects what follows.
	 */
	pthread_spinlock_t lock;
	struct ibv_poll_cq_attr attr;
	struct ibv_wc cur; /* what the program reads */
	/* What an ibv_wc does not carry, read while the provider showed
	 * cur (zero for a completion migrate/ made or took elsewhere) */
	uint64_t ts, wallclock_ns;
	uint32_t flow_tag;
	uint16_t cvlan;
	struct ibv_wc_tm_info tm;
};

static inline struct r2cc_cq *cq_of(struct ibv_cq_ex *cqx)
{
	return r2cc_lookup(ibv_cq_ex_to_cq(cqx), R2CC_OBJ_CQ);
}

static inline struct r2cc_cq_ex *ex_of(struct ibv_cq_ex *cqx)
{
	struct r2cc_cq *q = cq_of(cqx);

	return q ? q->ex : NULL;
}

/* The provider's current completion into @ex: its ibv_wc, then the rest. */
static void read_cur(struct r2cc_cq_ex *ex, struct ibv_cq_ex *cqx)
{
	const struct ibv_cq_ex *p = &ex->prov;
	struct ibv_wc *wc = &ex->cur;

	memset(wc, 0, sizeof(*wc));
	wc->wr_id = cqx->wr_id;
	wc->status = cqx->status;
	wc->opcode = p->read_opcode(cqx);
	wc->qp_num = p->read_qp_num(cqx);
	wc->byte_len = p->read_byte_len(cqx);
	wc->wc_flags = p->read_wc_flags(cqx);
	if (wc->wc_flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV))
		wc->imm_data = p->read_imm_data(cqx);
	if (p->read_vendor_err)
		wc->vendor_err = p->read_vendor_err(cqx);
	if (p->read_src_qp)
		wc->src_qp = p->read_src_qp(cqx);
	if (p->read_slid)
		wc->slid = (uint16_t)p->read_slid(cqx);
	if (p->read_sl)
		wc->sl = p->read_sl(cqx);
	if (p->read_dlid_path_bits)
		wc->dlid_path_bits = p->read_dlid_path_bits(cqx);
	ex->ts = p->read_completion_ts ? p->read_completion_ts(cqx) : 0;
	ex->wallclock_ns = p->read_completion_wallclock_ns ?
				   p->read_completion_wallclock_ns(cqx) :
				   0;
	ex->flow_tag = p->read_flow_tag ? p->read_flow_tag(cqx) : 0;
	ex->cvlan = p->read_cvlan ? p->read_cvlan(cqx) : 0;
	if (p->read_tm_info)
		p->read_tm_info(cqx, &ex->tm);
	else
		memset(&ex->tm, 0, sizeof(ex->tm));
}

/* What an ibv_wc does not carry: none, for r2cc's own completion. */
static void no_extras(struct r2cc_cq_ex *ex)
{
	ex->ts = ex->wallclock_ns = 0;
	ex->flow_tag = 0;
	ex->cvlan = 0;
	memset(&ex->tm, 0, sizeof(ex->tm));
}

/*
 * The provider's oldest completion, taken (0), or ENOENT or its error.
 * One walk of the provider's per completion, never its next_poll: rxe
 * before rdma-core 55 (b78b414e0) moves its consumer index past the
 * producer's when end_poll follows a next_poll that found nothing, and
 * r2cc copies what the program reads anyway.
 */
static int prov_take(struct r2cc_cq_ex *ex, struct ibv_cq_ex *cqx)
{
	int ret = ex->prov.start_poll(cqx, &ex->attr);

	if (ret)
		return ret;
	read_cur(ex, cqx);
	ex->prov.end_poll(cqx);
	return 0;
}

/*
 * The next completion the program is owed, into ex->cur, in the order
 * ibv_poll_cq gives them (datapath.c): what migrate/ stashed for the CQ,
 * then the CQ's own through migrate/, then, once it is empty, the
 * backups'. Return: 0, ENOENT or the provider's error.
 */
static int merge_next(struct r2cc_cq *q, struct r2cc_cq_ex *ex,
		      struct ibv_cq_ex *cqx)
{
	struct r2cc_mig_cq *mc = q->mc;
	int ret, r;

	for (;;) {
		uint64_t pushed = mc ? r2cc_mig_pushed(mc) : 0;
		bool behind;

		if (mc && r2cc_mig_poll_stash(mc, 1, &ex->cur) == 1)
			goto own;
		ret = prov_take(ex, cqx);
		if (ret == ENOENT)
			break;
		if (ret)
			return ret;
		/* Pushed since this step began: it goes behind that. */
		behind = mc && r2cc_mig_pushed(mc) != pushed;
		r = r2cc_wc_judge(q->ctx, mc, &ex->cur, behind);
		if (r == 1)
			return 0;
		/* hidden, or stashed behind what came first: the next */
	}
	if (!mc || !r2cc_mig_cq_busy(mc) ||
	    r2cc_mig_poll_more(mc, 1, &ex->cur) != 1)
		return ENOENT;
own:
	no_extras(ex);
	return 0;
}

/* Show ex->cur to the program (the fields it reads directly) and count
 * it. */
static int show(struct r2cc_cq *q, struct ibv_cq_ex *cqx, int ret)
{
	const struct ibv_wc *wc = &q->ex->cur;

	if (ret)
		return ret;
	cqx->wr_id = wc->wr_id;
	cqx->status = wc->status;
	r2cc_count_wc(q->ctx, wc->qp_num, wc->status == IBV_WC_SUCCESS,
		      wc->opcode & IBV_WC_RECV, wc->byte_len);
	return 0;
}

/* Passthrough: the provider's completion, counted. */
static int pass(struct r2cc_cq *q, struct ibv_cq_ex *cqx, int ret)
{
	const struct ibv_cq_ex *p = &q->ex->prov;

	if (ret)
		return ret;
	r2cc_count_wc(
		q->ctx, p->read_qp_num(cqx), cqx->status == IBV_WC_SUCCESS,
		p->read_opcode(cqx) & IBV_WC_RECV,
		cqx->status == IBV_WC_SUCCESS ? p->read_byte_len(cqx) : 0);
	return 0;
}

static int dp_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct r2cc_cq *q = cq_of(cqx);
	struct r2cc_cq_ex *ex = q ? q->ex : NULL;
	int ret;

	if (unlikely(!ex))
		return ENOENT; /* cannot happen: patched CQs are registered */
	if (!ex->merge)
		return pass(q, cqx, ex->prov.start_poll(cqx, attr));
	pthread_spin_lock(&ex->lock);
	ex->attr = attr ? *attr : (struct ibv_poll_cq_attr){ 0 };
	ret = merge_next(q, ex, cqx);
	if (ret)
		pthread_spin_unlock(&ex->lock); /* no end_poll follows */
	return show(q, cqx, ret);
}

static int dp_next_poll(struct ibv_cq_ex *cqx)
{
	struct r2cc_cq *q = cq_of(cqx);
	struct r2cc_cq_ex *ex = q ? q->ex : NULL;

	if (unlikely(!ex))
		return ENOENT;
	if (!ex->merge)
		return pass(q, cqx, ex->prov.next_poll(cqx));
	return show(q, cqx, merge_next(q, ex, cqx));
}

static void dp_end_poll(struct ibv_cq_ex *cqx)
{
	struct r2cc_cq_ex *ex = ex_of(cqx);

	if (unlikely(!ex))
		return;
	/* Merged: each completion was the provider's walk of its own */
	if (ex->merge)
		pthread_spin_unlock(&ex->lock);
	else
		ex->prov.end_poll(cqx);
}

/* The readers of a merged CQ: r2cc's copy of the completion shown. */
#define READER(type, name, field)                         \
	static type dp_read_##name(struct ibv_cq_ex *cqx) \
	{                                                 \
		struct r2cc_cq_ex *ex = ex_of(cqx);       \
                                                          \
		return ex ? (type)(field) : (type)0;      \
	}
READER(enum ibv_wc_opcode, opcode, ex->cur.opcode)
READER(uint32_t, vendor_err, ex->cur.vendor_err)
READER(uint32_t, byte_len, ex->cur.byte_len)
READER(__be32, imm_data, ex->cur.imm_data)
READER(uint32_t, qp_num, ex->cur.qp_num)
READER(uint32_t, src_qp, ex->cur.src_qp)
READER(unsigned int, wc_flags, ex->cur.wc_flags)
READER(uint32_t, slid, ex->cur.slid)
READER(uint8_t, sl, ex->cur.sl)
READER(uint8_t, dlid_path_bits, ex->cur.dlid_path_bits)
READER(uint64_t, completion_ts, ex->ts)
READER(uint16_t, cvlan, ex->cvlan)
READER(uint32_t, flow_tag, ex->flow_tag)
READER(uint64_t, completion_wallclock_ns, ex->wallclock_ns)
#undef READER

static void dp_read_tm_info(struct ibv_cq_ex *cqx, struct ibv_wc_tm_info *tm)
{
	struct r2cc_cq_ex *ex = ex_of(cqx);

	if (ex)
		*tm = ex->tm;
	else
		memset(tm, 0, sizeof(*tm));
}

uint64_t r2cc_cq_ex_flags(uint64_t wc_flags)
{
	return r2cc_shim.protecting ? wc_flags | R2CC_WC_EX_NEEDED : wc_flags;
}

/* Take over one reader: ours where the provider has one. */
#define TAKE(name)                                         \
	do {                                               \
		if (cqx->read_##name)                      \
			cqx->read_##name = dp_read_##name; \
	} while (0)

void r2cc_cq_ex_patch(struct r2cc_cq *q, struct ibv_cq_ex *cqx)
{
	struct r2cc_cq_ex *ex;

	if (!cqx->start_poll || !cqx->next_poll || !cqx->end_poll ||
	    !cqx->read_qp_num || !cqx->read_opcode || !cqx->read_byte_len)
		return; /* nothing to count with: leave the CQ alone */
	ex = calloc(1, sizeof(*ex));
	if (!ex)
		return;
	if (pthread_spin_init(&ex->lock, PTHREAD_PROCESS_PRIVATE)) {
		free(ex);
		return;
	}
	memcpy(&ex->prov, cqx, sizeof(*cqx));
	/* Everything protection reads of a completion can be read */
	ex->merge = r2cc_shim.protecting && cqx->read_wc_flags &&
		    cqx->read_imm_data;
	q->ex = ex;
	cqx->start_poll = dp_start_poll;
	cqx->next_poll = dp_next_poll;
	cqx->end_poll = dp_end_poll;
	if (!ex->merge)
		return;
	TAKE(opcode);
	TAKE(vendor_err);
	TAKE(byte_len);
	TAKE(imm_data);
	TAKE(qp_num);
	TAKE(src_qp);
	TAKE(wc_flags);
	TAKE(slid);
	TAKE(sl);
	TAKE(dlid_path_bits);
	TAKE(completion_ts);
	TAKE(cvlan);
	TAKE(flow_tag);
	TAKE(tm_info);
	TAKE(completion_wallclock_ns);
}
#undef TAKE

bool r2cc_cq_mergeable(const struct r2cc_cq *q)
{
	return !q->extended || (q->ex && q->ex->merge);
}

void r2cc_cq_ex_free(struct r2cc_cq *q)
{
	if (q->ex)
		pthread_spin_destroy(&q->ex->lock);
	free(q->ex);
	q->ex = NULL;
}
