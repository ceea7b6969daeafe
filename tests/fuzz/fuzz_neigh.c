/* SPDX-License-Identifier: MIT */
/*
 * fuzz_neigh.c - libFuzzer target for the IPoIB neighbour table's reader
 * (r2cc_neigh_find(): /proc/net/arp's text). The first 16 bytes are the
 * GID looked for, the rest the table. Whatever it says: no fault, and an
 * address is written only when an entry was found.
 */
#include <errno.h>
#include <string.h>

#include "neigh.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t gid[16] = { 0 }, ip[4] = { 1, 2, 3, 4 };
	int r;

	if (size < sizeof(gid))
		return 0;
	memcpy(gid, data, sizeof(gid));
	r = r2cc_neigh_find((const char *)data + sizeof(gid),
			    size - sizeof(gid), gid, ip);
	if (r && (r != -ENOENT || memcmp(ip, "\x01\x02\x03\x04", 4)))
		__builtin_trap();
	return 0;
}
