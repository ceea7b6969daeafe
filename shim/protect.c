/* SPDX-License-Identifier: MIT */
/*
 * protect.c - what the shim hands migrate/: the real verbs, its view of
 * the rails and MRs, and each RC QP the program moves to RTR and RTS (the
 * backup itself is migrate/protect.c's).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lid.h"
#include "protect.h"
#include "shim_int.h"

/* Is @key (a GID, or a LID key: migrate/lid.h) port 1 of @ctx's? */
static bool port_is(struct ibv_context *ctx, const uint8_t key[16])
{
	struct ibv_port_attr pa;
	union ibv_gid g;
	int i;

	if (r2cc_lid_of_key(key, NULL))
		return !ibv_query_port(ctx, 1, &pa) &&
		       pa.link_layer != IBV_LINK_LAYER_ETHERNET &&
		       !ibv_query_gid(ctx, 1, 0, &g) &&
		       r2cc_lid_key_is_port(key, g.raw, pa.lid, pa.lmc);
	for (i = 0; i < 16; i++)
		if (!ibv_query_gid(ctx, 1, i, &g) && !memcmp(g.raw, key, 16))
			return true;
	return false;
}

/* The local device whose port 1 is @gid (one of its first 16 GIDs, or
 * its LID key). */
static int dev_of_gid(const uint8_t gid[16], char *dev, size_t len)
{
	int r;

	for (r = 0; r < r2cc_shim.nrail; r++) {
		struct ibv_context *ctx = r2cc_rail_ctx(r);

		if (!ctx || !port_is(ctx, gid))
			continue;
		snprintf(dev, len, "%s",
			 ibv_get_device_name(r2cc_shim.dev[r].dev));
		return 0;
	}
	return -ENOENT;
}

/* What the peer needs of @m to translate its rkey on @rail. */
static void key_of(const struct r2cc_mr *m, int rail, struct r2cc_ctrl_mr *out)
{
	out->rkey = m->mr->rkey;
	out->backup_rkey = m->shadow[rail]->rkey;
	out->addr = m->iova;
	out->len = m->mr->length;
}

struct mr_walk {
	const void *pd;
	int rail, n, cap;
	bool nomem;
	struct r2cc_ctrl_mr *out;
};

static void mr_visit(void *obj, void *arg)
{
	struct r2cc_mr *m = obj;
	struct mr_walk *w = arg;
	struct r2cc_ctrl_mr *out;

	if (m->type != R2CC_OBJ_MR || m->pd->pd != w->pd ||
	    !m->shadow[w->rail] || w->nomem)
		return;
	if (w->n == w->cap) {
		out = reallocarray(w->out, w->cap ? 2 * (size_t)w->cap : 64,
				   sizeof(*out));
		if (!out) {
			w->nomem = true;
			return;
		}
		w->out = out;
		w->cap = w->cap ? 2 * w->cap : 64;
	}
	key_of(m, w->rail, &w->out[w->n++]);
}

static int mr_keys(const void *pd, int rail, struct r2cc_ctrl_mr **out)
{
	struct mr_walk w = { .pd = pd, .rail = rail };

	*out = NULL;
	if (rail < 0 || rail >= R2CC_MAX_RAILS)
		return -EINVAL;
	r2cc_map_for_each(&r2cc_shim.reg, mr_visit, &w);
	if (w.nomem) {
		free(w.out);
		return -ENOMEM;
	}
	*out = w.out;
	return w.n;
}

static int mr_key(const void *mr, int rail, struct r2cc_ctrl_mr *out)
{
	struct r2cc_mr *m = r2cc_lookup(mr, R2CC_OBJ_MR);

	if (!m || rail < 0 || rail >= R2CC_MAX_RAILS || !m->shadow[rail])
		return -ENOENT;
	key_of(m, rail, out);
	return 0;
}

static int lkey_xlate(const void *pd, int rail, uint32_t lkey, uint32_t *out)
{
	struct r2cc_pd *p = r2cc_lookup(pd, R2CC_OBJ_PD);
	struct r2cc_mr *m;

	if (!p || rail < 0 || rail >= R2CC_MAX_RAILS)
		return -EINVAL;
	m = r2cc_map_lookup(&r2cc_shim.lkey, r2cc_qpn_key(p->ctx, lkey));
	if (!m || !m->shadow[rail])
		return -ENOENT;
	*out = m->shadow[rail]->lkey;
	return 0;
}

static int rail_res(const void *pd, int rail, struct ibv_context **ctx,
		    struct ibv_pd **shadow)
{
	struct r2cc_pd *p = r2cc_lookup(pd, R2CC_OBJ_PD);

	if (!p || rail < 0 || rail >= r2cc_shim.nrail || !p->shadow[rail] ||
	    !(*ctx = r2cc_rail_ctx(rail)))
		return -ENODEV;
	*shadow = p->shadow[rail];
	return 0;
}

/*
 * r2cc's own modifies and queries: on the program's QP (the fence, the PSN
 * queries, a move back's recycle) they leave what the program reads of it;
 * r2cc's backups get libibverbs' (their providers read qp->state).
 */
static int mig_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	if (r2cc_lookup(qp, R2CC_OBJ_QP))
		return r2cc_qp_modify_unseen(qp, attr, mask,
					     r2cc_real.ibv_modify_qp);
	return r2cc_real.ibv_modify_qp(qp, attr, mask);
}

static int mig_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			struct ibv_qp_init_attr *init)
{
	if (r2cc_lookup(qp, R2CC_OBJ_QP))
		return r2cc_qp_query_unseen(qp, attr, mask, init,
					    r2cc_real.ibv_query_qp);
	return r2cc_real.ibv_query_qp(qp, attr, mask, init);
}

static int standby_rail(struct ibv_qp *qp, struct r2cc_mig_desc *d);

static int query_port(struct ibv_context *ctx, uint8_t port,
		      struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr); /* libibverbs' inline */
}

void r2cc_shim_protect_start(void)
{
	const struct r2cc_mig_env env = { .dev_of_gid = dev_of_gid,
					  .mr_keys = mr_keys,
					  .lkey_xlate = lkey_xlate,
					  .mr_key = mr_key,
					  .rail_res = rail_res,
					  .standby_rail = standby_rail };
	struct r2cc_mig_verbs real = {
		.create_cq = r2cc_real.ibv_create_cq,
		.destroy_cq = r2cc_real.ibv_destroy_cq,
		.create_qp = r2cc_real.ibv_create_qp,
		.modify_qp = mig_modify_qp,
		.destroy_qp = r2cc_real.ibv_destroy_qp,
		.query_gid = ibv_query_gid, /* not hooked: libibverbs' own */
		.query_qp = mig_query_qp,
		.query_port = query_port,
		.create_comp_channel = r2cc_real.ibv_create_comp_channel,
		.destroy_comp_channel = r2cc_real.ibv_destroy_comp_channel,
		.get_cq_event = r2cc_real.ibv_get_cq_event,
		.ack_cq_events = r2cc_real.ibv_ack_cq_events,
		.create_srq = r2cc_real.ibv_create_srq,
		.destroy_srq = r2cc_real.ibv_destroy_srq,
		.alloc_pd = r2cc_real.ibv_alloc_pd,
		.dealloc_pd = r2cc_real.ibv_dealloc_pd,
	};
	const char *rail_if[R2CC_MAX_RAILS];
	int r;

	for (r = 0; r < r2cc_shim.nrail; r++)
		rail_if[r] = r2cc_shim.dev[r].netdev;
	if (r2cc_mig_start(&r2cc_shim.cfg, &real, &env, rail_if,
			   r2cc_shim.nrail))
		return;
	if (r2cc_map_init(&r2cc_shim.lkey)) {
		r2cc_mig_stop();
		r2cc_err("out of memory: connections run unprotected");
		return;
	}
	r2cc_shim.protecting = true;
}

struct big_walk {
	const struct r2cc_pd *p;
	void *addr; /* copied under the map's lock: the MR may go */
	size_t len;
};

static void big_visit(void *obj, void *arg)
{
	struct r2cc_mr *m = obj;
	struct big_walk *w = arg;

	if (m->type == R2CC_OBJ_MR && m->pd == w->p && m->mr->addr &&
	    m->mr->length > w->len) {
		w->addr = m->mr->addr;
		w->len = m->mr->length;
	}
}

/* Where @p's memory lives, by its largest MR (GPU and PCIe position, or
 * NUMA node): 0, or -ENOENT when it has none yet. */
static int pd_locate(const struct r2cc_pd *p, struct r2cc_mem_loc *loc)
{
	struct big_walk w = { .p = p };

	r2cc_map_for_each(&r2cc_shim.reg, big_visit, &w);
	if (!w.len)
		return -ENOENT;
	return r2cc_mem_locate("/sys", w.addr, w.len, loc);
}

/* @q's two ends as both name them: GIDs, or LID keys (routed by LID). */
static int ends_of(const struct r2cc_qp *q, uint8_t src[16], uint8_t dst[16])
{
	const struct ibv_ah_attr *ah = &q->attr.ah_attr;
	uint8_t port = ah->port_num ? ah->port_num : 1;
	struct ibv_port_attr pa;
	union ibv_gid g;

	if (ah->is_global) {
		if (ibv_query_gid(q->qp->context, port, ah->grh.sgid_index, &g))
			return -EIO;
		memcpy(src, g.raw, 16);
		memcpy(dst, ah->grh.dgid.raw, 16);
		return 0;
	}
	if (ibv_query_port(q->qp->context, port, &pa) ||
	    ibv_query_gid(q->qp->context, port, 0, &g))
		return -EIO;
	return r2cc_lid_ends(g.raw, &pa, ah->dlid, src, dst);
}

/*
 * The backup rail of @q (placement policy, policy/placement.c): among the
 * other rails of its link layer that are up and hold a shadow of its PD,
 * the least loaded per Mb/s (backups already placed there), then nearest
 * its memory, then a hash both ends compute alike. Both ends decide alone;
 * migrate/ makes them agree (the end with the lower GID and QPN wins).
 */
static int backup_rail(const struct r2cc_pd *p, const struct r2cc_qp *q)
{
	struct r2cc_place_rail rails[R2CC_MAX_RAILS];
	uint32_t load[R2CC_MAX_RAILS] = { 0 };
	struct r2cc_mem_loc loc, *lp = NULL;
	uint8_t src[16], dst[16];
	uint64_t salt = 0;
	int r, n = 0;

	/* the node's load: this process's backups and the others' */
	r2cc_mig_rail_loads(load, r2cc_shim.nrail);
	r2cc_status_rail_loads(load, r2cc_shim.nrail);
	for (r = 0; r < r2cc_shim.nrail; r++) {
		if (r != q->rail && (!p->shadow[r] || !r2cc_rail_ctx(r)))
			continue;
		rails[n] = r2cc_shim.dev[r].place;
		rails[n].index = r;
		rails[n].up = r == q->rail ||
			      r2cc_health_get(r).state != R2CC_RAIL_DOWN;
		rails[n++].backups = load[r];
	}
	if (!ends_of(q, src, dst))
		salt = r2cc_place_salt(src, q->qpn, dst, q->attr.dest_qp_num);
	if (!pd_locate(p, &loc))
		lp = &loc;
	return r2cc_place_choose(rails, n, q->rail, lp, salt);
}

/* A new standby rail for the program's @qp (its old one's rail went
 * down): chosen as at its RTR, among the rails up now. */
static int standby_rail(struct ibv_qp *qp, struct r2cc_mig_desc *d)
{
	struct r2cc_qp *q = r2cc_lookup(qp, R2CC_OBJ_QP);
	struct r2cc_pd *p = q ? r2cc_lookup(qp->pd, R2CC_OBJ_PD) : NULL;
	int r = p ? backup_rail(p, q) : -ENODEV;

	if (r < 0)
		return r;
	d->backup_rail = r;
	d->backup_ctx = r2cc_rail_ctx(r);
	d->backup_pd = p->shadow[r];
	return d->backup_ctx && d->backup_pd ? 0 : -ENODEV;
}

/* The r2cc_mig_cq of the program's @cq, made on first use. */
static struct r2cc_mig_cq *mig_cq(struct ibv_cq *cq)
{
	struct r2cc_cq *c = cq ? r2cc_lookup(cq, R2CC_OBJ_CQ) : NULL;
	struct r2cc_mig_cq *mc;

	if (!c)
		return NULL;
	pthread_mutex_lock(&r2cc_shim.lock);
	if (!r2cc_cq_mergeable(c)) {
		if (!c->said)
			r2cc_warn("an extended CQ whose completions r2cc "
				  "cannot read (no qp_num, byte_len or imm "
				  "readers): its QPs run unprotected");
		c->said = true;
		pthread_mutex_unlock(&r2cc_shim.lock);
		return NULL;
	}
	mc = c->mc;
	if (!mc) {
		mc = r2cc_mig_cq_new(cq, cq->cqe);
		c->mc = mc;
	}
	pthread_mutex_unlock(&r2cc_shim.lock);
	return mc;
}

void r2cc_qp_protect_new(struct r2cc_qp *q, const struct ibv_qp_cap *cap,
			 bool sig_all, struct r2cc_mig_srq *srq)
{
	/* No status slot (said once, counted): its peers cannot find it */
	if (q->rail < 0 || !q->slot)
		return;
	if (r2cc_pd_has_mw(q->qp->pd)) {
		r2cc_info("QP %#x unprotected: memory windows on its PD",
			  q->qp->qp_num);
		return;
	}
	q->mig = r2cc_mig_qp_new(q->qp, cap, sig_all, mig_cq(q->qp->send_cq),
				 mig_cq(q->qp->recv_cq), srq, q->slot);
}

void r2cc_qp_rtr(struct r2cc_qp *q)
{
	struct r2cc_mig_desc d;
	struct r2cc_pd *p;
	int saved = errno;

	if (!q->mig || r2cc_mig_state(q->mig) != R2CC_PROT_NONE)
		return;
	p = r2cc_lookup(q->qp->pd, R2CC_OBJ_PD);
	memset(&d, 0, sizeof(d));
	d.backup_rail =
		p && (q->attr_mask & IBV_QP_AV) ? backup_rail(p, q) : -1;
	if (d.backup_rail < 0) {
		r2cc_mig_protect(q->mig, NULL); /* unprotected */
		errno = saved;
		return;
	}
	d.attr = &q->attr;
	d.rail = q->rail;
	d.backup_ctx = r2cc_rail_ctx(d.backup_rail);
	d.backup_pd = p->shadow[d.backup_rail];
	r2cc_mig_protect(q->mig, &d);
	errno = saved;
}

int r2cc_qp_rts(struct r2cc_qp *q)
{
	int saved = errno, ret;

	ret = r2cc_mig_rts(q->mig, &q->attr);
	errno = saved;
	return ret;
}

/* The connected QPs of one context: may r2cc move each off its port? */
struct ctx_cover {
	const struct r2cc_ctx *c;
	bool movable; /* one it can (ready), or did (moved) */
	bool stuck; /* one it cannot: the port is the program's business */
};

static void cover_visit(void *val, void *arg)
{
	const struct r2cc_qp *q = val;
	struct ctx_cover *k = arg;
	uint32_t st;

	if (q->ctx != k->c || (q->attr.qp_state != IBV_QPS_RTR &&
			       q->attr.qp_state != IBV_QPS_RTS))
		return;
	st = q->mig ? r2cc_mig_state(q->mig) : R2CC_PROT_NONE;
	if (st == R2CC_PROT_READY || st == R2CC_PROT_MIGRATED)
		k->movable = true;
	else
		k->stuck = true;
}

bool r2cc_async_hidden(struct ibv_context *ctx,
		       const struct ibv_async_event *ev)
{
	struct ctx_cover k = { 0 };
	struct r2cc_ctx *c;
	struct r2cc_qp *q;

	if (!r2cc_shim.protecting)
		return false;
	switch (ev->event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_SQ_DRAINED:
		q = r2cc_lookup(ev->element.qp, R2CC_OBJ_QP);
		return q &&
		       (r2cc_mig_sqd_event(q->mig) || r2cc_mig_covers(q->mig));
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		q = r2cc_lookup(ev->element.qp, R2CC_OBJ_QP);
		return q && r2cc_mig_covers(q->mig);
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_GID_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
		/* r2cc's, while it can move every QP the program has
		 * connected on this context off the port (a QP it cannot
		 * move needs the program to hear of its port). */
		k.c = c = r2cc_lookup(ctx, R2CC_OBJ_CTX);
		if (c)
			r2cc_map_for_each(&r2cc_shim.qpn, cover_visit, &k);
		return k.movable && !k.stuck;
	default:
		return false; /* CQ, SRQ, WQ and device events: the program's */
	}
}
