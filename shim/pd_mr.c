/* SPDX-License-Identifier: MIT */
/*
 * pd_mr.c - protection domains and memory registrations. Each of the
 * program's PDs gets a shadow PD on every other rail of the same link
 * layer, and each MR is registered there too (eagerly: failover must not
 * pin memory), so that a connection can move without touching the program.
 * Memory windows are not mirrored: a PD with one keeps its QPs
 * unprotected, refused before any window is bound.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim_int.h"

/* Shadow PDs on every usable rail other than the PD's own. */
static void pd_mirror(struct r2cc_pd *p)
{
	int r, own = p->ctx->rail;

	for (r = 0; r < r2cc_shim.nrail; r++) {
		struct ibv_context *ctx;

		if (r == own || own < 0 ||
		    r2cc_shim.dev[r].ll != r2cc_shim.dev[own].ll)
			continue;
		ctx = r2cc_rail_ctx(r);
		if (!ctx)
			continue;
		p->shadow[r] = r2cc_real.ibv_alloc_pd(ctx);
		if (p->shadow[r]) {
			atomic_fetch_add(&r2cc_shim.shadow_pds, 1);
			continue;
		}
		atomic_fetch_add(&r2cc_shim.shadow_failed, 1);
		r2cc_warn("rail %s: no shadow PD (%m): not a backup",
			  ibv_get_device_name(r2cc_shim.dev[r].dev));
	}
}

static void pd_free(void *obj)
{
	struct r2cc_pd *p = obj;
	int r;

	for (r = 0; r < R2CC_MAX_RAILS; r++) {
		int ret = p->shadow[r] ?
				  r2cc_real.ibv_dealloc_pd(p->shadow[r]) :
				  0;

		if (ret)
			r2cc_warn("shadow PD on rail %d: dealloc failed: %s", r,
				  strerror(ret));
	}
	free(p);
}

R2CC_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct r2cc_ctx *c;
	struct r2cc_pd *p;
	struct ibv_pd *pd;
	int saved;

	R2CC_ENTER(ibv_alloc_pd, NULL, ctx);
	pd = r2cc_real.ibv_alloc_pd(ctx);
	c = r2cc_lookup(ctx, R2CC_OBJ_CTX);
	if (!pd || !c)
		return pd;
	saved = errno;
	p = calloc(1, sizeof(*p));
	if (p) {
		p->type = R2CC_OBJ_PD;
		p->pd = pd;
		p->ctx = c;
		pd_mirror(p);
	}
	errno = saved;
	r2cc_obj_add(pd, p, R2CC_OBJ_PD, pd_free);
	return pd;
}

R2CC_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct r2cc_pd *p;
	int ret;

	R2CC_ENTER(ibv_dealloc_pd, ENOSYS, pd);
	p = r2cc_lookup(pd, R2CC_OBJ_PD);
	ret = r2cc_real.ibv_dealloc_pd(pd);
	if (!ret && p)
		r2cc_obj_del(pd, p, pd_free);
	return ret;
}

/* Register the program's new MR on every shadow PD of its PD. */
static void mr_mirror(struct r2cc_mr *m)
{
	struct ibv_mr *mr = m->mr;
	int r;

	for (r = 0; r < R2CC_MAX_RAILS; r++) {
		struct ibv_pd *spd = m->pd->shadow[r];

		if (!spd)
			continue;
		if (m->dmabuf_fd >= 0)
			m->shadow[r] = r2cc_real.ibv_reg_dmabuf_mr(
				spd, m->offset, mr->length, m->iova,
				m->dmabuf_fd, m->access);
		else
			m->shadow[r] = r2cc_real.ibv_reg_mr_iova2(
				spd, mr->addr, mr->length, m->iova,
				(unsigned int)m->access);
		if (m->shadow[r]) {
			atomic_fetch_add(&r2cc_shim.shadow_mrs, 1);
			continue;
		}
		atomic_fetch_add(&r2cc_shim.shadow_failed, 1);
		r2cc_warn("rail %d: cannot mirror MR %p+%zu (%m): "
			  "not a backup for it",
			  r, mr->addr, mr->length);
	}
}

static void mr_unmirror(struct r2cc_mr *m)
{
	int r;

	for (r = 0; r < R2CC_MAX_RAILS; r++) {
		int ret =
			m->shadow[r] ? r2cc_real.ibv_dereg_mr(m->shadow[r]) : 0;

		if (ret)
			r2cc_warn("rail %d: shadow MR dereg failed: %s", r,
				  strerror(ret));
		m->shadow[r] = NULL;
	}
}

static void mr_free(void *obj)
{
	struct r2cc_mr *m = obj;

	mr_unmirror(m);
	if (m->dmabuf_fd >= 0)
		close(m->dmabuf_fd);
	free(m);
}

/* Common tail of every registration: track @mr and mirror it. */
static struct ibv_mr *mr_created(struct ibv_mr *mr, struct ibv_pd *pd,
				 uint64_t iova, int access, int fd,
				 uint64_t offset)
{
	struct r2cc_pd *p;
	struct r2cc_mr *m;
	int saved;

	p = mr ? r2cc_lookup(pd, R2CC_OBJ_PD) : NULL;
	if (!p)
		return mr;
	saved = errno;
	m = calloc(1, sizeof(*m));
	if (m) {
		m->type = R2CC_OBJ_MR;
		m->mr = mr;
		m->pd = p;
		m->iova = iova;
		m->access = access;
		m->offset = offset;
		/* Our own reference: the program may close its fd at once. */
		m->dmabuf_fd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
		if (fd >= 0 && m->dmabuf_fd < 0)
			r2cc_warn("dma-buf MR: cannot dup fd %d (%m)", fd);
		mr_mirror(m);
	}
	errno = saved;
	if (r2cc_obj_add(mr, m, R2CC_OBJ_MR, mr_free) && r2cc_shim.protecting) {
		r2cc_map_insert(&r2cc_shim.lkey, r2cc_qpn_key(p->ctx, mr->lkey),
				m);
		/* Peers already bound learn it now (found by its handle). */
		r2cc_mig_mr_new(pd, mr);
	}
	errno = saved;
	return mr;
}

R2CC_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
				      int access)
{
	R2CC_ENTER(ibv_reg_mr, NULL, pd, addr, len, access);
	return mr_created(r2cc_real.ibv_reg_mr(pd, addr, len, access), pd,
			  (uintptr_t)addr, access, -1, 0);
}

R2CC_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
					   size_t len, uint64_t iova,
					   int access)
{
	R2CC_ENTER(ibv_reg_mr_iova, NULL, pd, addr, len, iova, access);
	return mr_created(r2cc_real.ibv_reg_mr_iova(pd, addr, len, iova,
						    access),
			  pd, iova, access, -1, 0);
}

R2CC_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
					    size_t len, uint64_t iova,
					    unsigned int access)
{
	R2CC_ENTER(ibv_reg_mr_iova2, NULL, pd, addr, len, iova, access);
	return mr_created(r2cc_real.ibv_reg_mr_iova2(pd, addr, len, iova,
						     access),
			  pd, iova, (int)access, -1, 0);
}

R2CC_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
					     size_t len, uint64_t iova, int fd,
					     int access)
{
	R2CC_ENTER(ibv_reg_dmabuf_mr, NULL, pd, offset, len, iova, fd, access);
	return mr_created(r2cc_real.ibv_reg_dmabuf_mr(pd, offset, len, iova, fd,
						      access),
			  pd, iova, access, fd, offset);
}

R2CC_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			     void *addr, size_t len, int access)
{
	struct r2cc_mr *m;
	struct r2cc_pd *np;
	uint64_t old_lkey = 0;
	uint32_t old_rkey = 0;
	int ret, saved;

	R2CC_ENTER(ibv_rereg_mr, ENOSYS, mr, flags, pd, addr, len, access);
	m = r2cc_lookup(mr, R2CC_OBJ_MR);
	if (m && r2cc_shim.protecting) {
		/* Its keys may change: peers forget the old, learn the new. */
		old_lkey = r2cc_qpn_key(m->pd->ctx, mr->lkey);
		old_rkey = mr->rkey;
	}
	ret = r2cc_real.ibv_rereg_mr(mr, flags, pd, addr, len, access);
	if (ret || !m)
		return ret;
	/* Redo the mirror from what the MR is now. */
	saved = errno;
	if (old_lkey) {
		r2cc_map_remove(&r2cc_shim.lkey, old_lkey);
		r2cc_mig_mr_gone(m->pd->pd, old_rkey);
	}
	mr_unmirror(m);
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		np = r2cc_lookup(pd, R2CC_OBJ_PD);
		if (np)
			m->pd = np;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		m->access = access;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION)
		m->iova = (uintptr_t)addr;
	mr_mirror(m);
	if (old_lkey) {
		r2cc_map_insert(&r2cc_shim.lkey,
				r2cc_qpn_key(m->pd->ctx, mr->lkey), m);
		r2cc_mig_mr_new(m->pd->pd, mr);
	}
	errno = saved;
	return ret;
}

R2CC_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct r2cc_mr *m;
	const void *pd = NULL;
	uintptr_t lkey = 0;
	uint32_t rkey = 0;
	int ret;

	R2CC_ENTER(ibv_dereg_mr, ENOSYS, mr);
	m = r2cc_lookup(mr, R2CC_OBJ_MR);
	if (m && r2cc_shim.protecting) {
		lkey = r2cc_qpn_key(m->pd->ctx, mr->lkey);
		rkey = mr->rkey;
		pd = m->pd->pd;
	}
	ret = r2cc_real.ibv_dereg_mr(mr);
	if (!ret && m) {
		if (lkey) {
			r2cc_map_remove(&r2cc_shim.lkey, lkey);
			r2cc_mig_mr_gone(pd, rkey);
		}
		r2cc_obj_del(mr, m, mr_free);
	}
	return ret;
}

/* ---- memory windows ---- */

struct mw_refuse {
	const struct ibv_pd *pd;
	const char *why;
};

static void mw_visit(void *val, void *arg)
{
	struct r2cc_qp *q = val;
	const struct mw_refuse *k = arg;

	if (q->qp->pd == k->pd && q->mig)
		r2cc_mig_refuse(q->mig, k->why);
}

static struct ibv_mw *dp_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct r2cc_ctx *c = r2cc_lookup(pd->context, R2CC_OBJ_CTX);
	struct r2cc_pd *p = r2cc_lookup(pd, R2CC_OBJ_PD);
	struct mw_refuse k = { pd, "memory windows on its PD" };
	struct ibv_mw *mw;

	if (!c || !c->alloc_mw) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	mw = c->alloc_mw(pd, type);
	/* Before the program has it: nothing can have been bound yet. */
	if (mw && p && !atomic_exchange(&p->has_mw, true))
		r2cc_map_for_each(&r2cc_shim.qpn, mw_visit, &k);
	return mw;
}

static int dp_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		      struct ibv_mw_bind *bind)
{
	struct r2cc_ctx *c = r2cc_lookup(qp->context, R2CC_OBJ_CTX);
	struct r2cc_qp *q = r2cc_lookup(qp, R2CC_OBJ_QP);

	if (!c || !c->bind_mw)
		return EOPNOTSUPP;
	/* The provider posts the bind itself, past r2cc's logs. */
	if (q && q->mig)
		r2cc_mig_refuse(q->mig, "it binds memory windows");
	return c->bind_mw(qp, mw, bind);
}

bool r2cc_pd_has_mw(const struct ibv_pd *pd)
{
	struct r2cc_pd *p = r2cc_lookup(pd, R2CC_OBJ_PD);

	return p && atomic_load(&p->has_mw);
}

void r2cc_mw_patch(struct r2cc_ctx *c)
{
	struct ibv_context *ctx = c->ctx;

	c->alloc_mw = ctx->ops.alloc_mw;
	c->bind_mw = ctx->ops.bind_mw;
	if (c->alloc_mw)
		ctx->ops.alloc_mw = dp_alloc_mw;
	if (c->bind_mw)
		ctx->ops.bind_mw = dp_bind_mw;
}
