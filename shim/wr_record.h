/* SPDX-License-Identifier: MIT */
/*
 * wr_record.h - records what a program builds with the ibv_wr_* API on an
 * extended QP (wr_start ... wr_complete) as ordinary ibv_send_wr entries, so
 * that a batch can be counted and replayed with ibv_post_send elsewhere.
 */
#ifndef R2CC_SHIM_WR_RECORD_H
#define R2CC_SHIM_WR_RECORD_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>

struct r2cc_wr_recorder {
	/* The provider's builders, saved when r2cc patched the QP. */
	struct ibv_qp_ex orig;
	unsigned int cap; /* entries per batch (max_send_wr) */
	unsigned int max_sge; /* SGEs per entry */
	size_t inline_cap; /* bytes of inline data per batch */
	/* The batch being built; all storage preallocated. */
	unsigned int n; /* entries so far */
	size_t inline_used;
	bool overflow; /* more than cap entries, SGEs or inline bytes */
	bool unsupported; /* an operation r2cc cannot replay (bind_mw...) */
	struct ibv_send_wr *wr; /* owned: cap entries */
	struct ibv_sge *sge; /* owned: cap * max_sge */
	char *inline_buf; /* owned: inline_cap bytes */
	/* Filled by the last successful wr_complete: the committed batch. */
	unsigned int committed;
	/* Divert: the builders only record, and wr_complete hands the batch
	 * to @post (a chain, in order) instead of the provider's. Returns
	 * ibv_post_send's contract (0 or a positive errno). */
	bool divert;
	int (*post)(struct r2cc_wr_recorder *rec, struct ibv_send_wr *chain,
		    void *arg);
	/* Called after a successful wr_complete (stats); may be NULL. */
	void (*on_commit)(struct r2cc_wr_recorder *rec, void *arg);
	void *arg;
};

/**
 * r2cc_wr_rec_new() - a recorder for batches of up to @cap WRs
 * @cap: the QP's max_send_wr (at least 1)
 * @max_sge: its max_send_sge (at least 1)
 * @max_inline: its max_inline_data
 * Return: the recorder, or NULL with errno set.
 */
struct r2cc_wr_recorder *r2cc_wr_rec_new(unsigned int cap, unsigned int max_sge,
					 size_t max_inline);
void r2cc_wr_rec_free(struct r2cc_wr_recorder *rec);
/**
 * r2cc_wr_rec_patch() - save @qpx's builders in @rec and install r2cc's
 * @rec: the recorder
 * @qpx: the provider's extended QP; later calls find @rec through
 *       r2cc_wr_rec_of(), which the user of this file defines
 */
void r2cc_wr_rec_patch(struct r2cc_wr_recorder *rec, struct ibv_qp_ex *qpx);
struct r2cc_wr_recorder *r2cc_wr_rec_of(struct ibv_qp_ex *qpx);
/**
 * r2cc_wr_rec_chain() - the committed batch as a linked ibv_send_wr list
 * @rec: the recorder
 * Return: the first WR, or NULL if the batch was empty, overflowed or
 * held an operation that cannot be replayed. Valid until the next
 * wr_start on the QP.
 */
struct ibv_send_wr *r2cc_wr_rec_chain(struct r2cc_wr_recorder *rec);

#endif /* R2CC_SHIM_WR_RECORD_H */
