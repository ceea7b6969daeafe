/* SPDX-License-Identifier: MIT */
/*
 * gidmap.h - R2CC_NODE_MAP, the node of each peer GID (gidmap.c).
 */
#ifndef R2CC_GIDMAP_H
#define R2CC_GIDMAP_H

#include <stdint.h>

#include "hostlist.h"

#define R2CC_GIDMAP_MAX 65536 /* entries */

struct r2cc_gidmap {
	unsigned int n;
	struct r2cc_gidmap_entry {
		uint8_t gid[16];
		char host[R2CC_HOST_LEN + 1];
	} * v; /* owned */
};

/**
 * r2cc_gidmap_parse() - read a map of GIDs to their nodes
 * @s: entries "GID=HOST" (the GID as IPv6 text, fe80::c42:a103:6e:2a10;
 *     HOST a name or an IPv4 address) separated by commas or white
 *     space; not NUL-terminated
 * @len: its bytes
 * @out: filled (r2cc_gidmap_free() it), or NULL to count only
 * Return: entries, or -EINVAL, -E2BIG (past R2CC_GIDMAP_MAX),
 * -ENAMETOOLONG, -ENOENT (none), -ENOMEM.
 */
int r2cc_gidmap_parse(const char *s, size_t len, struct r2cc_gidmap *out);
/* The same from a file (r2cc_listfile_read(): '#' comments) */
int r2cc_gidmap_read(const char *path, struct r2cc_gidmap *out);
void r2cc_gidmap_free(struct r2cc_gidmap *m);
/* @gid's node in @m (its last entry), or NULL */
const char *r2cc_gidmap_find(const struct r2cc_gidmap *m,
			     const uint8_t gid[16]);

#endif /* R2CC_GIDMAP_H */
