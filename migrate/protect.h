/* SPDX-License-Identifier: MIT */
/*
 * protect.h - protecting the program's RC QPs (DESIGN §4-5): a backup QP
 * per connected QP on a backup rail, bound over the control channel to the
 * peer's backup. migrate/ reaches libibverbs only through the table the
 * shim hands it (r2cc_mig_verbs), and the shim's objects only through the
 * hooks of r2cc_mig_env. Locks: one protection lock (r2cc_mig_qp list and
 * states); the channel lock is never taken under it.
 */
#ifndef R2CC_MIGRATE_PROTECT_H
#define R2CC_MIGRATE_PROTECT_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "ctrl_msg.h"
#include "policy.h"

/* The real libibverbs entry points migrate calls. */
struct r2cc_mig_verbs {
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe,
				    void *cq_context,
				    struct ibv_comp_channel *ch, int vec);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index,
			 union ibv_gid *gid);
};

/* What migrate asks the shim. */
struct r2cc_mig_env {
	/* The name of the local device one of whose GIDs is @gid. */
	int (*dev_of_gid)(const uint8_t gid[16], char *dev, size_t len);
	/* The MRs of the program's PD @pd with a shadow on @rail: their
	 * rkeys and the shadows' (at most @max). */
	int (*mr_keys)(const void *pd, int rail, struct r2cc_ctrl_mr *out,
		       int max);
};

/* What the shim knows of a QP that just reached RTS. */
struct r2cc_mig_desc {
	struct ibv_qp *qp; /* the program's (borrowed) */
	const void *pd; /* the program's PD, for env->mr_keys */
	const struct ibv_qp_attr *attr; /* what the program set, merged */
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge,
		max_inline;
	int rail; /* the primary's rail */
	int backup_rail; /* chosen by policy/ */
	struct ibv_context *backup_ctx; /* r2cc's private context there */
	struct ibv_pd *backup_pd; /* the shadow PD there */
	struct r2cc_status_qp *slot; /* for r2cc-ctl, or NULL */
};

struct r2cc_mig_qp;

/**
 * r2cc_mig_start() - start the control channel (R2CC_SECRET_FILE set)
 * @cfg: the configuration
 * @v: real verbs (kept)
 * @env: the shim's hooks (kept)
 * @rail_if: netdev of each rail ("" if none), @nrail of them
 * Return: 0, or -errno: every QP then runs unprotected (logged once).
 */
int r2cc_mig_start(const struct r2cc_config *cfg,
		   const struct r2cc_mig_verbs *v,
		   const struct r2cc_mig_env *env, const char *const *rail_if,
		   int nrail);
void r2cc_mig_stop(void);
/**
 * r2cc_mig_protect() - the program's RC QP reached RTS: make its backup
 * and bind it to the peer's (asynchronously, bounded)
 * Return: the protection state (free with r2cc_mig_release()), or NULL:
 * the QP is unprotected (why is logged once).
 */
struct r2cc_mig_qp *r2cc_mig_protect(const struct r2cc_mig_desc *d);
/* The program destroys its QP: drop the backup. */
void r2cc_mig_release(struct r2cc_mig_qp *mq);
/* enum r2cc_prot_state of @mq */
uint32_t r2cc_mig_state(const struct r2cc_mig_qp *mq);

#endif /* R2CC_MIGRATE_PROTECT_H */
