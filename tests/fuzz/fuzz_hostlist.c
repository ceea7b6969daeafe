/* SPDX-License-Identifier: MIT */
/*
 * fuzz_hostlist.c - libFuzzer target for the job's node list
 * (r2cc_hostlist_parse(): R2CC_PEERS, SLURM_JOB_NODELIST, a host file's
 * text). Whatever it says: the count alone and the expansion agree, and
 * every name that comes out is 1..R2CC_HOST_LEN bytes of [A-Za-z0-9._-].
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hostlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void well_formed(const char *n)
{
	size_t len = strlen(n), i;

	if (!len || len > R2CC_HOST_LEN)
		__builtin_trap();
	for (i = 0; i < len; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "0123456789._-",
			    n[i]))
			__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct r2cc_hostlist h = { 0 };
	int n = r2cc_hostlist_parse((const char *)data, size, NULL), m;
	unsigned int i;

	/* expanding a huge list is slow, not wrong: counted only */
	if (n > 4096)
		return 0;
	m = r2cc_hostlist_parse((const char *)data, size, &h);
	if (m != n && m != -ENOMEM)
		__builtin_trap();
	for (i = 0; m > 0 && i < h.n; i++)
		well_formed(h.v[i]);
	r2cc_hostlist_free(&h);
	return 0;
}
