/* SPDX-License-Identifier: MIT */
/*
 * shim_int.h - what the shim's files share: the table of real libibverbs
 * functions, r2cc's object for each of the program's verbs handles, the
 * registry and the per-QP statistics. Lock order: reg.lock -> obj locks.
 */
#ifndef R2CC_SHIM_INT_H
#define R2CC_SHIM_INT_H

#include <infiniband/verbs.h>
#include <stdatomic.h>
/* verbs.h wraps these in macros; the shim defines the functions. */
#undef ibv_get_device_list
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#include <errno.h>
#include <stdbool.h>

#include "policy.h"
#include "protect.h"
#include "qp_view.h"
#include "map.h"
#include "stats_int.h"
#include "wr_record.h"

#define R2CC_EXPORT __attribute__((visibility("default")))
/* Code a sanitizer runtime may reach before it has set itself up (its
 * own dlsym(RTLD_NEXT) calls land in the shim's): not instrumented, and
 * on that path it calls no function a runtime intercepts. (GCC's
 * attribute drops every TSan hook, function entry and exit included;
 * clang's keeps some: the shim is not made for clang's TSan.) */
#define R2CC_NO_SANITIZE \
	__attribute__((no_sanitize("address", "thread", "undefined")))
#define R2CC_MAX_RAILS 16

/* The real libibverbs entry points, resolved once by name and version. */
struct r2cc_real {
#define R2CC_HOOK(ret, name, ver, contract, params, args) ret(*name) params;
#include "hooks.def"
#undef R2CC_HOOK
};
extern struct r2cc_real r2cc_real;

enum r2cc_obj_type {
	R2CC_OBJ_CTX = 1,
	R2CC_OBJ_PD,
	R2CC_OBJ_MR,
	R2CC_OBJ_CQ,
	R2CC_OBJ_QP,
	R2CC_OBJ_SRQ,
};

/* A rail r2cc may mirror onto: one device, opened privately by r2cc. */
struct r2cc_dev {
	struct ibv_device *dev; /* borrowed: r2cc's own device list */
	struct ibv_context *ctx; /* owned: private context, or NULL */
	enum r2cc_link_layer ll; /* of port 1 */
	char netdev[R2CC_IFNAMSIZ]; /* RoCE: its netdev; "" otherwise */
	bool usable; /* selected by R2CC_RAILS and opened */
	struct r2cc_place_rail place; /* what placement weighs (policy/) */
};

struct r2cc_ctx {
	enum r2cc_obj_type type;
	struct ibv_context *ctx; /* borrowed: the program's */
	int rail; /* index into the shim's r2cc_dev array, -1 unknown */
	uint32_t id; /* small number, unique while open: qpn keys */
	/* The provider's entry points, before r2cc patched them in. */
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad);
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad);
	int (*poll_cq)(struct ibv_cq *cq, int n, struct ibv_wc *wc);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *ctx,
				       struct ibv_qp_init_attr_ex *attr);
	struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *ctx,
					  struct ibv_cq_init_attr_ex *attr);
	struct ibv_mw *(*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type);
	int (*bind_mw)(struct ibv_qp *qp, struct ibv_mw *mw,
		       struct ibv_mw_bind *bind);
};

struct r2cc_pd {
	enum r2cc_obj_type type;
	struct ibv_pd *pd; /* borrowed: the program's */
	struct r2cc_ctx *ctx; /* borrowed */
	struct ibv_pd *shadow[R2CC_MAX_RAILS]; /* owned; NULL: none */
	/* The program allocated a memory window on it: its QPs are not
	 * protected (their peers could not translate the window's rkey
	 * after a move, nor r2cc replay a bind). */
	_Atomic bool has_mw;
};

struct r2cc_mr {
	enum r2cc_obj_type type;
	struct ibv_mr *mr; /* borrowed: the program's */
	struct r2cc_pd *pd; /* borrowed */
	uint64_t iova; /* as registered (addr for plain ibv_reg_mr) */
	uint64_t offset; /* dma-buf offset */
	int access;
	int dmabuf_fd; /* owned dup() of a dma-buf fd, or -1 */
	struct ibv_mr *shadow[R2CC_MAX_RAILS]; /* owned; NULL: none */
};

struct r2cc_qp {
	enum r2cc_obj_type type;
	struct ibv_qp *qp; /* borrowed: the program's */
	struct r2cc_ctx *ctx; /* borrowed */
	uint32_t qpn;
	int rail; /* the rail it was created on */
	char dev[R2CC_DEVNAME_MAX]; /* that rail's device name */
	enum ibv_qp_type qp_type;
	bool has_srq;
	/* The attributes the program set with ibv_modify_qp, merged. */
	struct ibv_qp_attr attr;
	int attr_mask;
	struct r2cc_wr_recorder *rec; /* owned; extended QPs only */
	/* Its counters: in its slot of the status record r2cc-ctl reads,
	 * or in st_own (no slot, or destroyed: the slot is given back). */
	struct r2cc_qp_stats *st;
	struct r2cc_status_qp *slot; /* owned slot, or NULL */
	struct r2cc_qp_stats st_own;
	struct r2cc_mig_qp *mig; /* its protection (migrate/), or NULL */
};

struct r2cc_cq {
	enum r2cc_obj_type type;
	struct ibv_cq *cq; /* borrowed: the program's */
	struct r2cc_ctx *ctx; /* borrowed */
	/* Protected QPs complete here (migrate/): made with the first one,
	 * under r2cc_shim.lock. */
	struct r2cc_mig_cq *_Atomic mc;
	bool extended; /* made by ibv_create_cq_ex */
	bool said; /* that its QPs cannot be protected (r2cc_shim.lock) */
	struct r2cc_cq_ex *ex; /* owned: its polls (cq_ex.c), or NULL */
};

struct r2cc_srq {
	enum r2cc_obj_type type;
	struct ibv_srq *srq; /* borrowed */
	struct r2cc_ctx *ctx; /* borrowed */
	struct r2cc_mig_srq *mig; /* its protection (migrate/), or NULL */
};

/* The shim's one state: lock order reg's lock, then nothing else. */
struct r2cc_shim_state {
	bool active; /* false: pure passthrough */
	struct r2cc_config cfg;
	struct r2cc_map reg; /* handle -> object */
	struct r2cc_map qpn; /* (ctx id, qpn) -> struct r2cc_qp */
	struct r2cc_map lkey; /* (ctx id, lkey) -> struct r2cc_mr */
	bool protecting; /* migrate/ runs: protected QPs exist or may */
	struct ibv_device **devs; /* owned: r2cc's own device list */
	int ndev;
	struct r2cc_dev dev[R2CC_MAX_RAILS]; /* the rails, nrail of them */
	int nrail;
	/* Mirroring so far (shadow PDs and MRs made, and failures). */
	_Atomic uint64_t shadow_pds, shadow_mrs, shadow_failed;
	pthread_mutex_t lock; /* protects dev[].ctx opening, next_ctx_id */
	uint32_t next_ctx_id;
};
extern struct r2cc_shim_state r2cc_shim;

/* real.c, libc_sym.c */
int r2cc_real_resolve(void);
void *r2cc_libc_sym(const char *name);
/* NULL: @soname not loaded, or without @name@@@ver */
void *r2cc_real_sym(const char *soname, const char *name, const char *ver);
/* init.c */
void r2cc_shim_init(void);

/*
 * Hook nesting: libibverbs' own entry points call each other through their
 * exported names (ibv_reg_mr calls ibv_reg_mr_iova2), which lands in our
 * hooks again. Only the outermost hook acts; nested ones pass through.
 */
extern __thread int r2cc_nest;
static inline int r2cc_enter(void)
{
	r2cc_shim_init();
	return r2cc_nest++;
}
static inline void r2cc_leave(int *depth)
{
	(void)depth;
	r2cc_nest--;
}

/*
 * Start of every exported hook, after its declarations: make sure r2cc is
 * initialised; fail the way the verb's contract says (@fail, errno
 * ENOSYS) if libibverbs lacks it; in passthrough, or nested in another
 * hook, call the real one.
 */
#define R2CC_ENTER(name, fail, ...)                                          \
	int r2cc_depth_ __attribute__((cleanup(r2cc_leave))) = r2cc_enter(); \
	if (!r2cc_real.name) {                                               \
		errno = ENOSYS;                                              \
		return fail;                                                 \
	}                                                                    \
	if (!r2cc_shim.active || r2cc_depth_)                                \
	return r2cc_real.name(__VA_ARGS__)
#define R2CC_ENTER_VOID(name, ...)                                           \
	int r2cc_depth_ __attribute__((cleanup(r2cc_leave))) = r2cc_enter(); \
	if (!r2cc_real.name)                                                 \
		return;                                                      \
	if (!r2cc_shim.active || r2cc_depth_) {                              \
		r2cc_real.name(__VA_ARGS__);                                 \
		return;                                                      \
	}                                                                    \
	do {                                                                 \
	} while (0)

/* Registry helpers: typed lookups, NULL for unknown or other types. */
static inline void *r2cc_lookup(const void *handle, enum r2cc_obj_type t)
{
	enum r2cc_obj_type *o =
		r2cc_map_lookup(&r2cc_shim.reg, (uintptr_t)handle);

	return (o && *o == t) ? o : NULL;
}
static inline uintptr_t r2cc_qpn_key(const struct r2cc_ctx *c, uint32_t qpn)
{
	return ((uintptr_t)(c->id + 1) << 32) | qpn;
}

/* object.c */
/**
 * r2cc_obj_add() - register @obj, complete, for the program's @handle
 * @handle: the program's verbs object
 * @obj: r2cc's object for it; NULL (allocation failed) is reported
 * @type: what it is, for the message
 * @fin: frees @obj if it cannot be registered
 * Return: @obj, or NULL: the handle then passes through untracked.
 */
void *r2cc_obj_add(const void *handle, void *obj, enum r2cc_obj_type type,
		   void (*fin)(void *));
/* After the real destroy succeeded: forget @handle and free @obj. */
void r2cc_obj_del(const void *handle, void *obj, void (*fin)(void *));

/* health.c: watch every rail (port events, carrier) once started */
void r2cc_shim_health_start(void);

/* device.c */
int r2cc_rail_of(struct ibv_device *dev);
struct ibv_context *r2cc_rail_ctx(int rail);
/* datapath.c: patch a new context's ops, and extended QPs and CQs */
void r2cc_ops_patch(struct r2cc_ctx *c);
/* cq_ex.c: an extended CQ's polls and readers taken over; the wc_flags to
 * create one with; can migrate/ merge into @q (every plain CQ can)? */
void r2cc_cq_ex_patch(struct r2cc_cq *q, struct ibv_cq_ex *cqx);
uint64_t r2cc_cq_ex_flags(uint64_t wc_flags);
bool r2cc_cq_mergeable(const struct r2cc_cq *q);
void r2cc_cq_ex_free(struct r2cc_cq *q);

/*
 * One completion of a CQ protected QPs may complete on (datapath.c's
 * ibv_poll_cq, cq_ex.c's walk), through migrate/: 1 the program's now, 0
 * r2cc's own (hidden), 2 stashed behind what came before it (@behind:
 * something did, and it must follow). *@qp: its QP, or NULL.
 */
static inline int r2cc_wc_judge_qp(struct r2cc_ctx *c, struct r2cc_mig_cq *mcq,
				   struct ibv_wc *wc, bool behind,
				   struct r2cc_qp **qp)
{
	struct r2cc_qp *p =
		r2cc_map_lookup(&r2cc_shim.qpn, r2cc_qpn_key(c, wc->qp_num));

	*qp = p;
	if (p && p->mig)
		return r2cc_mig_wc(p->mig, mcq, wc, behind);
	if (wc->wr_id == R2CC_RING_WRID && mcq && r2cc_mig_bell_wc(mcq, wc))
		return 0;
	return behind && mcq && !r2cc_mig_stash(mcq, wc) ? 2 : 1;
}

/* The same, @wc's QP not wanted */
static inline int r2cc_wc_judge(struct r2cc_ctx *c, struct r2cc_mig_cq *mcq,
				struct ibv_wc *wc, bool behind)
{
	struct r2cc_qp *p;

	return r2cc_wc_judge_qp(c, mcq, wc, behind, &p);
}

/* Attribute one completion to @q's counters */
static inline void r2cc_count_wc_of(struct r2cc_qp *q, bool ok, bool recv,
				    uint32_t len)
{
	r2cc_stat_add(&q->st->polled, 1);
	if (__builtin_expect(!ok, 0))
		r2cc_stat_add(&q->st->polled_err, 1);
	else if (recv)
		r2cc_stat_add(&q->st->bytes_polled, len);
}

/* Attribute one completion to its QP's counters. */
static inline void r2cc_count_wc(struct r2cc_ctx *c, uint32_t qpn, bool ok,
				 bool recv, uint32_t len)
{
	struct r2cc_qp *q =
		r2cc_map_lookup(&r2cc_shim.qpn, r2cc_qpn_key(c, qpn));

	if (__builtin_expect(!!q, 1))
		r2cc_count_wc_of(q, ok, recv, len);
}
/* qp.c */
/* NULL: refused (the QP is destroyed, errno set) */
struct ibv_qp *r2cc_qp_created(struct r2cc_ctx *c, struct ibv_qp *qp,
			       enum ibv_qp_type type, struct ibv_srq *srq,
			       const struct ibv_qp_init_attr_ex *ax,
			       const struct ibv_qp_cap *cap, bool sig_all);
/* protect.c: start migrate/; a QP reached RTR: protect it; it reached
 * RTS: its backup follows (0, or an error for a migrated QP's modify) */
void r2cc_shim_protect_start(void);
void r2cc_qp_rtr(struct r2cc_qp *q);
/* protect.c: is @ev about what r2cc took over (not for the program)? */
bool r2cc_async_hidden(struct ibv_context *ctx,
		       const struct ibv_async_event *ev);
int r2cc_qp_rts(struct r2cc_qp *q);
void r2cc_qp_protect_new(struct r2cc_qp *q, const struct ibv_qp_cap *cap,
			 bool sig_all, struct r2cc_mig_srq *srq);
/* pd_mr.c: memory windows: ops.alloc_mw and ops.bind_mw of @c patched;
 * has @pd (the program's) had a window allocated on it? */
void r2cc_mw_patch(struct r2cc_ctx *c);
bool r2cc_pd_has_mw(const struct ibv_pd *pd);
/* cq.c */
struct r2cc_cq *r2cc_cq_created(struct r2cc_ctx *c, struct ibv_cq *cq);
#endif /* R2CC_SHIM_INT_H */
