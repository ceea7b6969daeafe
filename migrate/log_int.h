/* SPDX-License-Identifier: MIT */
/*
 * log_int.h - what the logs (sendlog.c, recvlog.c, srqlog.c) share: ring
 * slots, a receive WR's copy into a slot of the log's own SGEs, and the
 * growth of a receive log's ring.
 */
#ifndef R2CC_MIG_LOG_INT_H
#define R2CC_MIG_LOG_INT_H

#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdlib.h>
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
	int i;

	/* (a loop, not memcpy: no call into libc on the data path; most
	 * receives have one SGE: no loop) */
	if (wr->num_sge == 1)
		sge[0] = wr->sg_list[0];
	else
		for (i = 0; i < wr->num_sge; i++)
			sge[i] = wr->sg_list[i];
	*dst = (struct ibv_recv_wr){
		.wr_id = wr->wr_id,
		.sg_list = sge,
		.num_sge = wr->num_sge,
	};
}

/*
 * A receive log's ring of *@cap entries of @esz bytes (each a receive WR
 * at @wr_off, with @max_sge SGEs of its own in *@sge) grown to twice that,
 * at most @max_cap: its @used entries, the oldest at slot *@head, copied
 * to the front in order (*@head 0). Return: the new entries (the old ones
 * and the old *@sge freed), or NULL past @max_cap or out of memory (the
 * ring as it was).
 */
static inline void *r2cc_recv_ring_grow(void *ent, struct ibv_sge **sge,
					uint32_t *cap, uint32_t *head,
					uint32_t used, size_t esz,
					size_t wr_off, uint32_t max_sge,
					uint32_t max_cap)
{
	size_t ncap = (size_t)*cap * 2, i;
	char *ne, *old = ent;
	struct ibv_sge *ns;

	if (ncap > max_cap)
		return NULL;
	ne = calloc(ncap, esz);
	ns = calloc(ncap * (max_sge ? max_sge : 1), sizeof(*ns));
	if (!ne || !ns) {
		free(ne);
		free(ns);
		return NULL;
	}
	for (i = 0; i < used; i++) {
		char *from = old + (size_t)r2cc_ring_slot(*head, i, *cap) * esz;
		char *to = ne + i * esz;

		memcpy(to, from, esz);
		r2cc_recv_copy((struct ibv_recv_wr *)(to + wr_off),
			       &ns[i * max_sge],
			       (const struct ibv_recv_wr *)(from + wr_off));
	}
	free(ent);
	free(*sge);
	*sge = ns;
	*cap = (uint32_t)ncap;
	*head = 0;
	return ne;
}

#endif /* R2CC_MIG_LOG_INT_H */
