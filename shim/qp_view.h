/* SPDX-License-Identifier: MIT */
/*
 * qp_view.h - r2cc's calls on a program's QP that leave what the program
 * reads of its struct ibv_qp (qp->state) as the program last set it.
 */
#ifndef R2CC_SHIM_QP_VIEW_H
#define R2CC_SHIM_QP_VIEW_H

#include <infiniband/verbs.h>

typedef int (*r2cc_modify_qp_fn)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
				 int mask);
typedef int (*r2cc_query_qp_fn)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
				int mask, struct ibv_qp_init_attr *init);

/**
 * r2cc_qp_modify_unseen() - ibv_modify_qp() that leaves qp->state alone
 * @qp: the program's QP
 * @attr: as ibv_modify_qp()
 * @mask: as ibv_modify_qp()
 * @lib: libibverbs' ibv_modify_qp, for a context without the provider's
 *	entry point (qp->state is then put back right after the call)
 * Return: as ibv_modify_qp() (0 or a positive errno).
 */
int r2cc_qp_modify_unseen(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			  r2cc_modify_qp_fn lib);
/**
 * r2cc_qp_query_unseen() - ibv_query_qp() that leaves qp->state alone
 * @qp: the program's QP
 * @attr: as ibv_query_qp(), the provider's answer
 * @mask: as ibv_query_qp()
 * @init: as ibv_query_qp()
 * @lib: libibverbs' ibv_query_qp (as for r2cc_qp_modify_unseen())
 * Return: as ibv_query_qp() (0 or a positive errno).
 */
int r2cc_qp_query_unseen(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			 struct ibv_qp_init_attr *init, r2cc_query_qp_fn lib);
#endif /* R2CC_SHIM_QP_VIEW_H */
