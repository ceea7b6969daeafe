/* SPDX-License-Identifier: MIT */
/*
 * keepalive.h - R2CC_KEEPALIVE (keepalive.c).
 */
#ifndef R2CC_MIG_KEEPALIVE_H
#define R2CC_MIG_KEEPALIVE_H

#include "mig_int.h"

/* Quiet paths probed, silent ones' QPs fenced (the tick; takes ps.lock). */
void r2cc_mig_ka_tick(void);
/* Its paths forgotten (ps.lock held). */
void r2cc_mig_ka_reset(void);
/* Path @p (paths.c) is dropped: its probe ends (ps.lock held). */
struct r2cc_mig_path;
void r2cc_mig_ka_path_gone(struct r2cc_mig_path *p);

#endif /* R2CC_MIG_KEEPALIVE_H */
