/* SPDX-License-Identifier: MIT */
/*
 * dp_stubs.c - for the programs that link shim/datapath.c alone
 * (test_poll.c, bench_path.c): the shim's state, and the callees of its
 * extended constructors in qp.c and cq.c, which they do not run.
 */
#include "shim_int.h"

struct r2cc_shim_state r2cc_shim;

struct r2cc_cq *r2cc_cq_created(struct r2cc_ctx *c, struct ibv_cq *cq)
{
	(void)c;
	(void)cq;
	return NULL;
}

struct ibv_qp *r2cc_qp_created(struct r2cc_ctx *c, struct ibv_qp *qp,
			       enum ibv_qp_type type, struct ibv_srq *srq,
			       const struct ibv_qp_init_attr_ex *ax,
			       const struct ibv_qp_cap *cap, bool sig_all)
{
	(void)c;
	(void)type;
	(void)srq;
	(void)ax;
	(void)cap;
	(void)sig_all;
	return qp;
}
