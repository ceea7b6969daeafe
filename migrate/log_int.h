/* SPDX-License-Identifier: MIT */
/*
 * log_int.h - what the logs (sendlog.c, recvlog.c, srqlog.c) share: ring
 * slots, and a receive WR's copy into a slot of the log's own SGEs.
 */
#ifndef R2CC_MIG_LOG_INT_H
#define R2CC_MIG_LOG_INT_H

#include <infiniband/verbs.h>
#include <stdint.h>
#include <string.h>

/* Slot of the @i-th oldest entry of a ring of @cap whose oldest is @head */
static inline uint32_t r2cc_ring_slot(uint32_t head, uint32_t i, uint32_t cap)
{
	uint32_t s = head + i;

	return s >= cap ? s - cap : s;
}

/* @wr copied into @dst, its SGEs into @sge (room for them): the program
 * may reuse its SGE array once its post returns. */
static inline void r2cc_recv_copy(struct ibv_recv_wr *dst, struct ibv_sge *sge,
				  const struct ibv_recv_wr *wr)
{
	if (wr->num_sge > 0)
		memcpy(sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*sge));
	*dst = (struct ibv_recv_wr){
		.wr_id = wr->wr_id,
		.sg_list = sge,
		.num_sge = wr->num_sge,
	};
}

#endif /* R2CC_MIG_LOG_INT_H */
