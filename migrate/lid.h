/* SPDX-License-Identifier: MIT */
/*
 * lid.h - InfiniBand QPs routed by LID (no GRH): the 16 bytes r2cc names
 * such a port by where it names a RoCE port by its GID, and the standby's
 * path to the peer's standby.
 *
 * A LID key is the port's subnet prefix (its GID 0's first 8 bytes), the
 * six bytes "r2LID\0", then the port's base LID, big-endian. LID routing
 * stays inside one subnet, so both ends of a connection derive the same
 * key for the same port: one end from its own port, the other from the
 * DLID it was given (its path bits masked with its own port's LMC: a
 * subnet manager gives every port of a subnet one LMC).
 */
#ifndef R2CC_MIGRATE_LID_H
#define R2CC_MIGRATE_LID_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

/* Unicast LIDs: 0x0001..0xbfff (IBA 4.1.3; 0 is unassigned, 0xc000 on
 * multicast, 0xffff permissive) */
#define R2CC_LID_UNICAST_MAX 0xbfff

/* @lid of a port whose GID 0 is @gid0, @lmc path bits masked off, into
 * @key. -EINVAL (key untouched): @lid is not unicast or @lmc > 7. */
int r2cc_lid_key(const uint8_t gid0[16], uint16_t lid, uint8_t lmc,
		 uint8_t key[16]);
/* Is @key a LID key? Its LID in *@lid (when not NULL). */
bool r2cc_lid_of_key(const uint8_t key[16], uint16_t *lid);
/* Does LID key @key name the port whose GID 0 is @gid0, base LID @lid and
 * LMC @lmc (any of its 2^lmc LIDs)? */
bool r2cc_lid_key_is_port(const uint8_t key[16], const uint8_t gid0[16],
			  uint16_t lid, uint8_t lmc);

/* A QP's two ends routed by LID as both name them: @src (our port, GID
 * 0 @gid0, base LID and LMC in @pa) and @dst (@dlid, masked with our
 * LMC). 0, or -EINVAL (no LID here, or @dlid none). */
int r2cc_lid_ends(const uint8_t gid0[16], const struct ibv_port_attr *pa,
		  uint16_t dlid, uint8_t src[16], uint8_t dst[16]);

/* What the standby's path needs of the peer's standby */
struct r2cc_lid_peer {
	const uint8_t *gid; /* its port's GID (16 bytes) */
	uint16_t lid; /* its port's LID: 0 on RoCE */
};

/*
 * The standby's address vector on its port 1, from the program's @prog
 * and the peer's standby @p; @own_gid is the standby port's own GID (the
 * subnet it sits on). RoCE (@p->lid 0): a GRH to @p->gid, as always.
 * InfiniBand: DLID @p->lid, no path bits; a GRH to @p->gid only when the
 * program used one or the two standby ports sit on different subnets.
 * The service level and rate stay the program's.
 */
void r2cc_lid_standby_av(struct ibv_ah_attr *ah, const struct ibv_ah_attr *prog,
			 const uint8_t own_gid[16],
			 const struct r2cc_lid_peer *p);

#endif /* R2CC_MIGRATE_LID_H */
