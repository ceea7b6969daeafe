/* SPDX-License-Identifier: MIT */
/*
 * fuzz_gidmap.c - libFuzzer target for R2CC_NODE_MAP's reader
 * (r2cc_gidmap_parse()). Whatever it says: counting and reading agree,
 * and every node name that comes out is 1..R2CC_HOST_LEN bytes of
 * [A-Za-z0-9._-], found again by its GID.
 */
#include <errno.h>
#include <string.h>

#include "gidmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct r2cc_gidmap m;
	int n = r2cc_gidmap_parse((const char *)data, size, NULL), k;
	unsigned int i;

	k = r2cc_gidmap_parse((const char *)data, size, &m);
	if (k != n && k != -ENOMEM)
		__builtin_trap();
	for (i = 0; k > 0 && i < m.n; i++) {
		size_t len = strlen(m.v[i].host);

		if (!len || len > R2CC_HOST_LEN ||
		    strspn(m.v[i].host,
			   "abcdefghijklmnopqrstuvwxyz"
			   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != len ||
		    !r2cc_gidmap_find(&m, m.v[i].port.gid, m.v[i].port.lid) ||
		    m.v[i].port.lid > R2CC_GIDMAP_LID_MAX)
			__builtin_trap();
	}
	if (k > 0)
		r2cc_gidmap_free(&m);
	return 0;
}
