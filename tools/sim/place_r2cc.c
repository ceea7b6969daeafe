/* SPDX-License-Identifier: MIT */
/*
 * place_r2cc.c - call the shim's placement (policy/placement.h) with the
 * simulated rails' loads and capacities: the same code the shim runs.
 */
#include <errno.h>
#include <string.h>

#include "policy.h"
#include "place_r2cc.h"

int sim_r2cc_choose(const struct sim_rail *rails, int n, int primary,
		    uint64_t salt)
{
	struct r2cc_place_rail pr[R2CC_PLACE_RAILS_MAX];
	int i;

	if (!rails || n < 1 || n > R2CC_PLACE_RAILS_MAX)
		return -EINVAL;
	memset(pr, 0, sizeof(pr));
	for (i = 0; i < n; i++) {
		pr[i].index = i;
		pr[i].up = rails[i].up && i != primary;
		pr[i].link_layer = R2CC_LL_IB;
		pr[i].cap_mbps = rails[i].cap_mbps;
		pr[i].numa_node = -1;
		pr[i].backups = rails[i].load;
	}
	/* No memory locality: every NIC is equally near in the model */
	return r2cc_place_choose(pr, n, primary, NULL, salt);
}

/* A link-local GID, fe80::<node>:<rail>, unique per simulated NIC */
static void sim_gid(int node, int rail, uint8_t gid[16])
{
	memset(gid, 0, 16);
	gid[0] = 0xfe;
	gid[1] = 0x80;
	gid[10] = (uint8_t)(node >> 24);
	gid[11] = (uint8_t)(node >> 16);
	gid[12] = (uint8_t)(node >> 8);
	gid[13] = (uint8_t)node;
	gid[14] = (uint8_t)(rail >> 8);
	gid[15] = (uint8_t)rail;
}

uint64_t sim_r2cc_salt(int node_a, uint32_t qpn_a, int node_b, uint32_t qpn_b,
		       int rail)
{
	uint8_t a[16], b[16];

	sim_gid(node_a, rail, a);
	sim_gid(node_b, rail, b);
	return r2cc_place_salt(a, qpn_a, b, qpn_b);
}
