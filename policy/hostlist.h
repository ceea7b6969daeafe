/* SPDX-License-Identifier: MIT */
/*
 * hostlist.h - a job's node list (R2CC_PEERS, SLURM_JOB_NODELIST, a
 * file) expanded into its names (hostlist.c).
 */
#ifndef R2CC_HOSTLIST_H
#define R2CC_HOSTLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define R2CC_HOSTS_MAX 65536 /* names in one list */
#define R2CC_HOST_LEN 255 /* bytes of one name */
#define R2CC_HOSTFILE_MAX (1U << 20) /* bytes of a host file */

struct r2cc_hostlist {
	unsigned int n;
	char **v; /* owned: n names */
};

/**
 * r2cc_hostlist_parse() - expand a host list
 * @s: names and IPv4 addresses ([A-Za-z0-9._-]) separated by commas or
 *     white space, with Slurm's groups: "n[01-04,9]" is n01..n04 and n9,
 *     several groups in one name multiply out; not NUL-terminated
 * @len: its bytes
 * @out: filled (r2cc_hostlist_free() it), or NULL to count only
 * Return: the number of names, or -EINVAL (syntax), -E2BIG (more than
 * R2CC_HOSTS_MAX), -ENAMETOOLONG, -ENOENT (no name), -ENOMEM.
 */
int r2cc_hostlist_parse(const char *s, size_t len, struct r2cc_hostlist *out);

/* The same from the file @path (at most R2CC_HOSTFILE_MAX bytes, '#'
 * starts a comment to the end of its line); also -errno of the read,
 * -EFBIG. */
int r2cc_hostlist_read(const char *path, struct r2cc_hostlist *out);

void r2cc_hostlist_free(struct r2cc_hostlist *h);

/* A byte of a host name ([A-Za-z0-9._-]); one that separates entries
 * (',' or white space): the node list's and R2CC_NODE_MAP's */
bool r2cc_host_namechar(char c);
bool r2cc_host_sep(char c);

/* The text of the list file @path (at most R2CC_HOSTFILE_MAX bytes), its
 * comments blanked, in a buffer to free(), *@len its bytes; NULL with
 * *@err: -errno of the read, -EFBIG, -ENOMEM. */
char *r2cc_listfile_read(const char *path, size_t *len, int *err);

#endif /* R2CC_HOSTLIST_H */
