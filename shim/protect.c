/* SPDX-License-Identifier: MIT */
/*
 * protect.c - what the shim hands migrate/: the real verbs, its view of
 * the rails and MRs, and each RC QP the program moves to RTS (the backup
 * itself is migrate/protect.c's).
 */
#include <errno.h>
#include <string.h>

#include "protect.h"
#include "shim_int.h"

/* The local device with GID @gid on port 1 (first 16 indices). */
static int dev_of_gid(const uint8_t gid[16], char *dev, size_t len)
{
	int r, i;

	for (r = 0; r < r2cc_shim.nrail; r++) {
		struct ibv_context *ctx = r2cc_rail_ctx(r);
		union ibv_gid g;

		for (i = 0; ctx && i < 16; i++) {
			if (ibv_query_gid(ctx, 1, i, &g) ||
			    memcmp(g.raw, gid, 16))
				continue;
			snprintf(dev, len, "%s",
				 ibv_get_device_name(r2cc_shim.dev[r].dev));
			return 0;
		}
	}
	return -ENOENT;
}

struct mr_walk {
	const void *pd;
	int rail, n, max;
	struct r2cc_ctrl_mr *out;
};

static void mr_visit(void *obj, void *arg)
{
	struct r2cc_mr *m = obj;
	struct mr_walk *w = arg;

	if (m->type != R2CC_OBJ_MR || m->pd->pd != w->pd || w->n >= w->max ||
	    !m->shadow[w->rail])
		return;
	w->out[w->n].rkey = m->mr->rkey;
	w->out[w->n].backup_rkey = m->shadow[w->rail]->rkey;
	w->out[w->n].addr = m->iova;
	w->out[w->n].len = m->mr->length;
	w->n++;
}

static int mr_keys(const void *pd, int rail, struct r2cc_ctrl_mr *out, int max)
{
	struct mr_walk w = { .pd = pd, .rail = rail, .max = max, .out = out };

	if (rail < 0 || rail >= R2CC_MAX_RAILS)
		return -EINVAL;
	r2cc_map_for_each(&r2cc_shim.reg, mr_visit, &w);
	return w.n;
}

void r2cc_shim_protect_start(void)
{
	static const struct r2cc_mig_verbs v = { 0 };
	struct r2cc_mig_verbs real = v;
	const struct r2cc_mig_env env = { .dev_of_gid = dev_of_gid,
					  .mr_keys = mr_keys };
	const char *rail_if[R2CC_MAX_RAILS];
	int r;

	real.create_cq = r2cc_real.ibv_create_cq;
	real.destroy_cq = r2cc_real.ibv_destroy_cq;
	real.create_qp = r2cc_real.ibv_create_qp;
	real.modify_qp = r2cc_real.ibv_modify_qp;
	real.destroy_qp = r2cc_real.ibv_destroy_qp;
	real.query_gid = ibv_query_gid; /* not hooked: libibverbs' own */
	for (r = 0; r < r2cc_shim.nrail; r++)
		rail_if[r] = r2cc_shim.dev[r].netdev;
	r2cc_mig_start(&r2cc_shim.cfg, &real, &env, rail_if, r2cc_shim.nrail);
}

/* The backup rail of a QP on @rail: the first other usable rail of the
 * same link layer where @p has a shadow PD (placement policy: later). */
static int backup_rail(const struct r2cc_pd *p, int rail)
{
	int r;

	for (r = 0; r < r2cc_shim.nrail; r++)
		if (r != rail && p->shadow[r] && r2cc_rail_ctx(r))
			return r;
	return -1;
}

void r2cc_qp_rts(struct r2cc_qp *q)
{
	struct ibv_qp_init_attr init;
	struct r2cc_mig_desc d;
	struct ibv_qp_attr cur;
	struct r2cc_pd *p;
	int saved = errno;

	if (q->mig || q->qp_type != IBV_QPT_RC || q->has_srq || q->rail < 0)
		return;
	p = r2cc_lookup(q->qp->pd, R2CC_OBJ_PD);
	memset(&d, 0, sizeof(d));
	d.backup_rail = p ? backup_rail(p, q->rail) : -1;
	if (d.backup_rail < 0 || !(q->attr_mask & IBV_QP_AV) ||
	    !q->attr.ah_attr.is_global ||
	    r2cc_real.ibv_query_qp(q->qp, &cur, IBV_QP_CAP, &init)) {
		errno = saved;
		return;
	}
	d.qp = q->qp;
	d.pd = q->qp->pd;
	d.attr = &q->attr;
	d.max_send_wr = init.cap.max_send_wr;
	d.max_recv_wr = init.cap.max_recv_wr;
	d.max_send_sge = init.cap.max_send_sge;
	d.max_recv_sge = init.cap.max_recv_sge;
	d.max_inline = init.cap.max_inline_data;
	d.rail = q->rail;
	d.backup_ctx = r2cc_rail_ctx(d.backup_rail);
	d.backup_pd = p->shadow[d.backup_rail];
	d.slot = q->slot;
	q->mig = r2cc_mig_protect(&d);
	errno = saved;
}
