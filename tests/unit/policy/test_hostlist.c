/* SPDX-License-Identifier: MIT */
/*
 * test_hostlist.c - a job's node list expanded (r2cc_hostlist_parse(),
 * r2cc_hostlist_read()): plain names and addresses, Slurm's groups and
 * ranges with their padding, several groups in one name, and every bound
 * and syntax error refused before anything is made.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostlist.h"

/* @s expands to exactly the @n names of @want, in order */
static void expands(const char *s, unsigned int n, const char *const *want)
{
	struct r2cc_hostlist h = { 0 };
	unsigned int i;

	cr_assert_eq(r2cc_hostlist_parse(s, strlen(s), NULL), (int)n, "%s", s);
	cr_assert_eq(r2cc_hostlist_parse(s, strlen(s), &h), (int)n, "%s", s);
	cr_assert_eq(h.n, n);
	for (i = 0; i < n; i++)
		cr_assert_str_eq(h.v[i], want[i], "%s: name %u", s, i);
	r2cc_hostlist_free(&h);
	cr_assert_null(h.v);
}

static void refused(const char *s, int err)
{
	struct r2cc_hostlist h = { 0 };

	cr_assert_eq(r2cc_hostlist_parse(s, strlen(s), NULL), err, "%s", s);
	cr_assert_eq(r2cc_hostlist_parse(s, strlen(s), &h), err, "%s", s);
	cr_assert_null(h.v, "%s: something kept", s);
}

Test(hostlist, names_and_addresses)
{
	const char *const w[] = { "10.10.99.1", "node-b", "c.example.org" };

	expands("10.10.99.1,node-b c.example.org", 3, w);
	expands(" ,10.10.99.1\n\tnode-b,,c.example.org, ", 3, w);
}

Test(hostlist, slurm_ranges_padded_as_their_first_number)
{
	const char *const w[] = { "gpu001", "gpu002", "gpu003", "gpu009",
				  "gpu010", "gpu100", "x" };
	const char *const w2[] = { "n8", "n9", "n10", "n11" };

	expands("gpu[001-003,009-010,100],x", 7, w);
	expands("n[8-11]", 4, w2);
}

Test(hostlist, groups_multiply_and_keep_their_suffix)
{
	const char *const w[] = { "r1n1-ib", "r1n2-ib", "r2n1-ib", "r2n2-ib" };

	expands("r[1-2]n[1-2]-ib", 4, w);
}

Test(hostlist, syntax_errors)
{
	static const char *const bad[] = {
		"n[1-2", "n1-2]",    "n[]",	      "n[2-1]", "n[1,]",
		"n[a]",	 "n[1-2-3]", "n[[1]]",	      "n@x",	"n[1, 2]",
		"n[-1]", "n[1-]",    "n[1234567890]", "ñ",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		refused(bad[i], -EINVAL);
	refused("", -ENOENT);
	refused(" ,\n", -ENOENT);
}

Test(hostlist, bounds)
{
	char name[R2CC_HOST_LEN + 8];
	struct r2cc_hostlist h = { 0 };

	/* 65536 names are taken, one more is not, nor a product past it */
	cr_assert_eq(r2cc_hostlist_parse("n[1-65536]", 10, NULL), 65536);
	refused("n[1-65537]", -E2BIG);
	refused("n[1-65536],m", -E2BIG);
	refused("a[1-1000]b[1-1000]", -E2BIG);
	refused("a[0-999999999]b[0-999999999]c[0-999999999]", -E2BIG);
	memset(name, 'a', sizeof(name));
	name[R2CC_HOST_LEN] = '\0';
	cr_assert_eq(r2cc_hostlist_parse(name, R2CC_HOST_LEN, &h), 1);
	cr_assert_eq(strlen(h.v[0]), R2CC_HOST_LEN);
	r2cc_hostlist_free(&h);
	name[R2CC_HOST_LEN] = 'a';
	name[R2CC_HOST_LEN + 1] = '\0';
	refused(name, -ENAMETOOLONG);
	/* one name made too long by its group's number */
	name[R2CC_HOST_LEN - 2] = '\0';
	strcat(name, "[100]");
	refused(name, -ENAMETOOLONG);
}

Test(hostlist, not_nul_terminated)
{
	struct r2cc_hostlist h = { 0 };
	const char s[] = { 'n', '[', '1', '-', '2', ']', 'X' };

	cr_assert_eq(r2cc_hostlist_parse(s, 6, &h), 2);
	cr_assert_str_eq(h.v[1], "n2");
	r2cc_hostlist_free(&h);
	cr_assert_eq(r2cc_hostlist_parse(s, 5, NULL), -EINVAL);
}

Test(hostlist, file_with_comments)
{
	char path[] = "/tmp/r2cc-hosts-XXXXXX";
	const char text[] = "# the job's nodes\nnode[1-2] # rack 1\n"
			    "10.0.0.9\n#node9\n";
	struct r2cc_hostlist h = { 0 };
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, sizeof(text) - 1),
		     (ssize_t)sizeof(text) - 1);
	close(fd);
	cr_assert_eq(r2cc_hostlist_read(path, &h), 3);
	cr_assert_str_eq(h.v[0], "node1");
	cr_assert_str_eq(h.v[2], "10.0.0.9");
	r2cc_hostlist_free(&h);
	unlink(path);
	cr_assert_eq(r2cc_hostlist_read(path, &h), -ENOENT);
	cr_assert_eq(r2cc_hostlist_read("/dev/zero", &h), -EFBIG);
}
