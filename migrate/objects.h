/* SPDX-License-Identifier: MIT */
/*
 * objects.h - the protection's objects (objects.c).
 */
#ifndef R2CC_MIG_OBJECTS_H
#define R2CC_MIG_OBJECTS_H

#include "mig_int.h"

/* The QP whose resolve cookie is @cookie, or NULL (ps.lock held). */
struct r2cc_mig_qp *r2cc_mig_by_cookie(uint64_t cookie);

#endif /* R2CC_MIG_OBJECTS_H */
