/* SPDX-License-Identifier: MIT */
/*
 * paths.h - the paths the protected QPs run on (paths.c): (rail, our GID,
 * the peer's GID), each with what its QPs completed, counted once a tick
 * in one pass over the QPs and found by hash, so that what looks at paths
 * (keepalive.c, failback.c's black-hole test) costs no walk of all QPs per
 * QP or per path.
 */
#ifndef R2CC_MIG_PATHS_H
#define R2CC_MIG_PATHS_H

#include "mig_int.h"

/* keepalive.c's view of a path, kept with it (zero when it appears). */
struct r2cc_ka_path {
	uint64_t done; /* completions at the last change */
	uint64_t quiet_ns; /* nothing completed since */
	bool probing; /* probe.c has an entry for it */
	bool armed; /* a probe once got through */
	bool off; /* cannot be probed (said once) */
	uint32_t fail_row; /* the last count seen (said once when it grows) */
};

struct r2cc_mig_path {
	int rail;
	uint8_t gid[16], dest_gid[16];
	/* At the last count: READY QPs on it (carried by their own QP), and
	 * their successful completions so far, read without their locks */
	unsigned int nready;
	uint64_t ok;
	struct r2cc_ka_path ka;
};

/* A QP a path counts: protected and carried by its own QP (no lock). */
bool r2cc_mig_path_counts(const struct r2cc_mig_qp *mq);
/* Count every path afresh (ps.lock held): one pass over the QPs; a path
 * none counts any more is dropped, keepalive told first. */
void r2cc_mig_paths_count(void);
/* The path of @mq's own QP, as last counted, or NULL (ps.lock held). */
struct r2cc_mig_path *r2cc_mig_path_of(const struct r2cc_mig_qp *mq);
/* The @i-th path (0 ..), NULL past the last (ps.lock held). */
struct r2cc_mig_path *r2cc_mig_path_at(unsigned int i);
/* Every path forgotten, keepalive told (ps.lock held). */
void r2cc_mig_paths_clear(void);

#endif /* R2CC_MIG_PATHS_H */
