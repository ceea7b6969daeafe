/* SPDX-License-Identifier: MIT */
/*
 * test_gidmap.c - R2CC_NODE_MAP read (r2cc_gidmap_parse(), _read(),
 * _find()): GIDs in any IPv6 form, LIDs, names and addresses, the last
 * entry of a port saying; every malformed entry and bound refused whole.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gidmap.h"

static const uint8_t gid_a[16] = { 0xfe, 0x80, 0,    0,	   0,	 0,
				   0,	 0,    0x0c, 0x42, 0xa1, 0x03,
				   0x00, 0x6e, 0x2a, 0x10 };
static const uint8_t gid_b[16] = { 0xfe, 0x80, 0,    0,	   0,	 0,
				   0,	 0,    0xb8, 0xce, 0xf6, 0x03,
				   0x00, 0x9a, 0x51, 0xc4 };

Test(gidmap, entries_in_any_ipv6_form)
{
	const char s[] = "fe80::c42:a103:6e:2a10=gpu017,\n"
			 " fe80:0000:0000:0000:b8ce:f603:009a:51c4=10.12.0.8";
	struct r2cc_gidmap m;
	uint8_t other[16] = { 0 };

	cr_assert_eq(r2cc_gidmap_parse(s, strlen(s), NULL), 2);
	cr_assert_eq(r2cc_gidmap_parse(s, strlen(s), &m), 2);
	cr_assert_str_eq(r2cc_gidmap_find(&m, gid_a, 0), "gpu017");
	cr_assert_str_eq(r2cc_gidmap_find(&m, gid_b, 0), "10.12.0.8");
	cr_assert_null(r2cc_gidmap_find(&m, other, 0));
	r2cc_gidmap_free(&m);
	cr_assert_null(m.v);
}

/* A LID-routed peer's port, by its LID in any subnet */
Test(gidmap, entries_by_lid)
{
	const char s[] = "lid:0x1b=gpu017 LID:49151=gpu018, lid:27=gpu019";
	struct r2cc_gidmap m;

	cr_assert_eq(r2cc_gidmap_parse(s, strlen(s), &m), 3);
	cr_assert_str_eq(r2cc_gidmap_find(&m, gid_a, 0x1b), "gpu019",
			 "27 is 0x1b: the last says");
	cr_assert_str_eq(r2cc_gidmap_find(&m, gid_b, 0xbfff), "gpu018");
	cr_assert_null(r2cc_gidmap_find(&m, gid_a, 0),
		       "a GID-routed port is not LID 0's");
	cr_assert_null(r2cc_gidmap_find(&m, gid_a, 0x1c));
	r2cc_gidmap_free(&m);
}

Test(gidmap, the_last_entry_of_a_gid_says)
{
	const char s[] =
		"fe80::c42:a103:6e:2a10=old fe80::c42:a103:6e:2a10=new";
	struct r2cc_gidmap m;

	cr_assert_eq(r2cc_gidmap_parse(s, strlen(s), &m), 2);
	cr_assert_str_eq(r2cc_gidmap_find(&m, gid_a, 0), "new");
	r2cc_gidmap_free(&m);
}

Test(gidmap, malformed_entries)
{
	static const char *const bad[] = {
		"fe80::1",	  "=gpu1",
		"fe80::1=",	  "fe80::1=a;b",
		"fe80::zz=gpu1",  "10.0.0.1=gpu1",
		"fe80::1=gpu1,x", "fe80::1==gpu1",
		"lid:0=gpu1",	  "lid:0xc000=gpu1",
		"lid:65535=gpu1", "lid:=gpu1",
		"lid:-1=gpu1",	  "lid:0x1bz=gpu1",
		"lid: 27=gpu1",	  "lid:99999999999999999999=gpu1",
	};
	struct r2cc_gidmap m = { 0 };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(r2cc_gidmap_parse(bad[i], strlen(bad[i]), NULL),
			     -EINVAL, "%s", bad[i]);
		cr_assert_eq(r2cc_gidmap_parse(bad[i], strlen(bad[i]), &m),
			     -EINVAL, "%s", bad[i]);
		cr_assert_null(m.v, "%s: something kept", bad[i]);
	}
	cr_assert_eq(r2cc_gidmap_parse(" ,\n", 3, NULL), -ENOENT);
}

Test(gidmap, bounds)
{
	char *s = malloc(300), *big;
	size_t i, len = 0, per = sizeof("fe80::ffff=n") - 1;

	/* a name of 255 bytes is taken, 256 are not */
	len = (size_t)sprintf(s, "fe80::1=");
	memset(s + len, 'n', 256);
	cr_assert_eq(r2cc_gidmap_parse(s, len + 255, NULL), 1);
	cr_assert_eq(r2cc_gidmap_parse(s, len + 256, NULL), -ENAMETOOLONG);
	free(s);
	/* 65537 entries are refused */
	big = malloc((R2CC_GIDMAP_MAX + 1) * (per + 1) + 16);
	for (i = 0, len = 0; i <= R2CC_GIDMAP_MAX; i++)
		len += (size_t)sprintf(big + len, "fe80::%zx=n,", i & 0xffff);
	cr_assert_eq(r2cc_gidmap_parse(big, len, NULL), -E2BIG);
	free(big);
}

Test(gidmap, a_file_with_comments)
{
	char path[] = "/tmp/r2cc-gidmap-XXXXXX";
	const char text[] = "# rack 1\nfe80::c42:a103:6e:2a10=gpu017 # ib0\n";
	struct r2cc_gidmap m;
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, sizeof(text) - 1),
		     (ssize_t)sizeof(text) - 1);
	close(fd);
	cr_assert_eq(r2cc_gidmap_read(path, &m), 1);
	cr_assert_str_eq(r2cc_gidmap_find(&m, gid_a, 0), "gpu017");
	r2cc_gidmap_free(&m);
	unlink(path);
	cr_assert_eq(r2cc_gidmap_read(path, &m), -ENOENT);
}
