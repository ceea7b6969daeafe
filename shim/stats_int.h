/* SPDX-License-Identifier: MIT */
/*
 * stats_int.h - the shim's per-QP counters: their layout, the inline
 * helpers the data path counts with, and what stats.c does with them.
 */
#ifndef R2CC_SHIM_STATS_INT_H
#define R2CC_SHIM_STATS_INT_H

#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdint.h>

#include "policy.h"

struct r2cc_qp;
/* stats.c */
void r2cc_stats_retire(struct r2cc_qp *q); /* takes @q over */
void r2cc_stats_write(void);

/* Count one posted send-queue WR. */
static inline void r2cc_stat_wr(struct r2cc_qp_stats *st,
				const struct ibv_send_wr *wr)
{
	uint64_t bytes = 0;
	int i;

	for (i = 0; i < wr->num_sge; i++)
		bytes += wr->sg_list[i].length;
	r2cc_stat_posted(st, wr->opcode, bytes);
}

#endif /* R2CC_SHIM_STATS_INT_H */
