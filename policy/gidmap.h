/* SPDX-License-Identifier: MIT */
/*
 * gidmap.h - R2CC_NODE_MAP, the node of each peer GID (gidmap.c).
 */
#ifndef R2CC_GIDMAP_H
#define R2CC_GIDMAP_H

#include <stdbool.h>
#include <stdint.h>

#include "hostlist.h"

#define R2CC_GIDMAP_MAX 65536 /* entries */
#define R2CC_GIDMAP_LID_MAX 0xbfff /* the last unicast LID */

/* A peer's port: by GID, or ("lid:") by LID when it is routed by LID */
struct r2cc_gidmap_port {
	uint8_t gid[16]; /* unused when lid */
	uint16_t lid;
};

struct r2cc_gidmap {
	unsigned int n;
	struct r2cc_gidmap_entry {
		struct r2cc_gidmap_port port;
		char host[R2CC_HOST_LEN + 1];
	} * v; /* owned */
};

/**
 * r2cc_gidmap_parse() - read a map of GIDs to their nodes
 * @s: entries "GID=HOST" (the GID as IPv6 text, fe80::c42:a103:6e:2a10;
 *     HOST a name or an IPv4 address) or "lid:LID=HOST" (a unicast LID,
 *     decimal or 0x hex: the port of a peer routed by LID) separated by
 *     commas or white space; not NUL-terminated
 * @len: its bytes
 * @out: filled (r2cc_gidmap_free() it), or NULL to count only
 * Return: entries, or -EINVAL, -E2BIG (past R2CC_GIDMAP_MAX),
 * -ENAMETOOLONG, -ENOENT (none), -ENOMEM.
 */
int r2cc_gidmap_parse(const char *s, size_t len, struct r2cc_gidmap *out);
/* The same from a file (r2cc_listfile_read(): '#' comments) */
int r2cc_gidmap_read(const char *path, struct r2cc_gidmap *out);
void r2cc_gidmap_free(struct r2cc_gidmap *m);
/* Is @p the port of GID @gid, or of LID @lid (0: routed by GID)? */
bool r2cc_gidmap_match(const struct r2cc_gidmap_port *p, const uint8_t gid[16],
		       uint16_t lid);
/* That port's node in @m (its last entry), or NULL */
const char *r2cc_gidmap_find(const struct r2cc_gidmap *m, const uint8_t gid[16],
			     uint16_t lid);

#endif /* R2CC_GIDMAP_H */
