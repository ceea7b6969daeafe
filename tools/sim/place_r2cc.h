/* SPDX-License-Identifier: MIT */
/*
 * place_r2cc.h - the simulator's door to r2cc's own placement code
 * (policy/placement.c). A C header: policy.h itself cannot be read by a
 * C++ compiler (status.h's _Atomic fields), so place_r2cc.c, compiled as
 * C, fills struct r2cc_place_rail and calls r2cc_place_choose().
 */
#ifndef R2CC_SIM_PLACE_R2CC_H
#define R2CC_SIM_PLACE_R2CC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One rail of one simulated node */
struct sim_rail {
	int up; /* usable: its NIC and the peer's NIC on this rail are up */
	uint32_t cap_mbps; /* r2cc_place_rail.cap_mbps */
	uint32_t load; /* QPs it carries now: r2cc_place_rail.backups */
};

/*
 * sim_r2cc_choose() - r2cc_place_choose() over rails 0..@n-1
 * @primary: the failed rail (its entry is passed as down)
 * Return: the rail r2cc picks, -ENODEV (none usable) or -EINVAL.
 */
int sim_r2cc_choose(const struct sim_rail *rails, int n, int primary,
		    uint64_t salt);
/*
 * sim_r2cc_salt() - r2cc_place_salt() of a simulated QP: the GIDs are
 * made from (node, rail), the QPNs from the caller's numbering.
 */
uint64_t sim_r2cc_salt(int node_a, uint32_t qpn_a, int node_b, uint32_t qpn_b,
		       int rail);

#ifdef __cplusplus
}
#endif

#endif
