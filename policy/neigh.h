/* SPDX-License-Identifier: MIT */
/*
 * neigh.h - a peer's node from the kernel's IPoIB neighbours (neigh.c).
 */
#ifndef R2CC_NEIGH_H
#define R2CC_NEIGH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define R2CC_NEIGH_MAX (4U << 20) /* bytes of /proc/net/arp read */

/* In @text (@len bytes, /proc/net/arp's format), the IPv4 address of a
 * complete InfiniBand entry whose hardware address carries @gid: 0 and
 * @ip, or -ENOENT. */
int r2cc_neigh_find(const char *text, size_t len, const uint8_t gid[16],
		    uint8_t ip[4]);
/* The same from /proc/net/arp; also -errno of its read */
int r2cc_neigh_lookup(const uint8_t gid[16], uint8_t ip[4]);

#endif /* R2CC_NEIGH_H */
