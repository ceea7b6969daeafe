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

static inline void r2cc_stat_add(_Atomic uint64_t *c, uint64_t n)
{
	/* Load and store, no locked RMW: see struct r2cc_qp_stats. */
	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* Count one posted send-queue WR. */
static inline void r2cc_stat_wr(struct r2cc_qp_stats *st,
				const struct ibv_send_wr *wr)
{
	static const uint8_t idx[] = {
		[IBV_WR_RDMA_WRITE] = R2CC_ST_WRITE,
		[IBV_WR_RDMA_WRITE_WITH_IMM] = R2CC_ST_WRITE_IMM,
		[IBV_WR_SEND] = R2CC_ST_SEND,
		[IBV_WR_SEND_WITH_IMM] = R2CC_ST_SEND_IMM,
		[IBV_WR_RDMA_READ] = R2CC_ST_READ,
		[IBV_WR_ATOMIC_CMP_AND_SWP] = R2CC_ST_ATOMIC,
		[IBV_WR_ATOMIC_FETCH_AND_ADD] = R2CC_ST_ATOMIC,
		[IBV_WR_LOCAL_INV] = R2CC_ST_OTHER,
		[IBV_WR_BIND_MW] = R2CC_ST_OTHER,
		[IBV_WR_SEND_WITH_INV] = R2CC_ST_SEND,
		[IBV_WR_TSO] = R2CC_ST_OTHER,
		[IBV_WR_DRIVER1] = R2CC_ST_OTHER,
	};
	unsigned int op = wr->opcode;
	uint64_t bytes = 0;
	int i;

	r2cc_stat_add(&st->posted[op < sizeof(idx) ? idx[op] : R2CC_ST_OTHER],
		      1);
	for (i = 0; i < wr->num_sge; i++)
		bytes += wr->sg_list[i].length;
	r2cc_stat_add(&st->bytes_posted, bytes);
}

#endif /* R2CC_SHIM_STATS_INT_H */
