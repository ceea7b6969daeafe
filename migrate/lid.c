/* SPDX-License-Identifier: MIT */
/*
 * lid.c - LID keys and the standby's address vector (lid.h).
 */
#include <errno.h>
#include <string.h>

#include "lid.h"

static const uint8_t lid_tag[6] = { 'r', '2', 'L', 'I', 'D', 0 };

static uint16_t lid_mask(uint8_t lmc)
{
	return (uint16_t) ~((1U << lmc) - 1U);
}

int r2cc_lid_key(const uint8_t gid0[16], uint16_t lid, uint8_t lmc,
		 uint8_t key[16])
{
	if (!lid || lid > R2CC_LID_UNICAST_MAX || lmc > 7)
		return -EINVAL;
	lid &= lid_mask(lmc);
	if (!lid)
		return -EINVAL;
	memcpy(key, gid0, 8);
	memcpy(key + 8, lid_tag, sizeof(lid_tag));
	key[14] = (uint8_t)(lid >> 8);
	key[15] = (uint8_t)lid;
	return 0;
}

bool r2cc_lid_of_key(const uint8_t key[16], uint16_t *lid)
{
	uint16_t l = (uint16_t)(key[14] << 8 | key[15]);

	if (memcmp(key + 8, lid_tag, sizeof(lid_tag)) || !l ||
	    l > R2CC_LID_UNICAST_MAX)
		return false;
	if (lid)
		*lid = l;
	return true;
}

bool r2cc_lid_key_is_port(const uint8_t key[16], const uint8_t gid0[16],
			  uint16_t lid, uint8_t lmc)
{
	uint16_t k;

	if (lmc > 7 || !r2cc_lid_of_key(key, &k) || memcmp(key, gid0, 8))
		return false;
	return (k & lid_mask(lmc)) == (lid & lid_mask(lmc));
}

int r2cc_lid_ends(const uint8_t gid0[16], const struct ibv_port_attr *pa,
		  uint16_t dlid, uint8_t src[16], uint8_t dst[16])
{
	if (pa->link_layer == IBV_LINK_LAYER_ETHERNET)
		return -EINVAL;
	if (r2cc_lid_key(gid0, pa->lid, pa->lmc, src) ||
	    r2cc_lid_key(gid0, dlid, pa->lmc, dst))
		return -EINVAL;
	return 0;
}

void r2cc_lid_standby_av(struct ibv_ah_attr *ah, const struct ibv_ah_attr *prog,
			 const uint8_t own_gid[16],
			 const struct r2cc_lid_peer *p)
{
	bool grh = !p->lid || prog->is_global || memcmp(own_gid, p->gid, 8);

	*ah = *prog;
	ah->port_num = 1;
	ah->src_path_bits = 0;
	if (p->lid)
		ah->dlid = p->lid;
	ah->is_global = grh;
	if (!grh || !prog->is_global)
		/* none, or one the program never set: r2cc's own (GID 0) */
		memset(&ah->grh, 0, sizeof(ah->grh));
	if (!grh)
		return;
	memcpy(ah->grh.dgid.raw, p->gid, 16);
	if (!ah->grh.hop_limit)
		ah->grh.hop_limit = 64;
}
