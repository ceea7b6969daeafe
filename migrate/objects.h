/* SPDX-License-Identifier: MIT */
/*
 * objects.h - the protection's objects (objects.c).
 */
#ifndef R2CC_MIG_OBJECTS_H
#define R2CC_MIG_OBJECTS_H

#include "mig_int.h"

/* Freed QPs are freed for good this many frees and a second later. */
#define MIG_RETIRED 1024
/* The QP whose resolve cookie is @cookie, or NULL (ps.lock held). */
struct r2cc_mig_qp *r2cc_mig_by_cookie(uint64_t cookie);
/* The first of the QPs whose own QPN is @qpn (any device), the rest
 * chained by qpn_next; NULL: none (ps.lock held). */
struct r2cc_mig_qp *r2cc_mig_by_qpn(uint32_t qpn);
/* The QP connected to @peer's QP @dest_qpn, or NULL (ps.lock held). */
struct r2cc_mig_qp *r2cc_mig_by_dest(uint64_t peer, uint32_t dest_qpn);
/* @peer's @what about its QP @dest_qpn found none of ours: said, with any
 * QP connected to that QPN (ps.lock held). */
void r2cc_mig_unknown(const char *what, uint64_t peer, uint32_t dest_qpn);
/* @mq is connected to QP @dest_qpn (its peer's), indexed as such (ps.lock
 * and mq lock held): 0, or -ENOMEM (not indexed: no message finds it). */
int r2cc_mig_set_dest(struct r2cc_mig_qp *mq, uint32_t dest_qpn);

#endif /* R2CC_MIG_OBJECTS_H */
