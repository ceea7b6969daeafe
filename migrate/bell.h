/* SPDX-License-Identifier: MIT */
/*
 * bell.h - a program CQ's doorbell (bell.c).
 */
#ifndef R2CC_MIG_BELL_H
#define R2CC_MIG_BELL_H

#include "mig_int.h"

/* Raise @mc's completion event by a flush of its doorbell, made at the
 * first ring (takes mc->lock, after a QP's): 0 or -errno. */
int r2cc_mig_bell_ring(struct r2cc_mig_cq *mc);

#endif /* R2CC_MIG_BELL_H */
