/* SPDX-License-Identifier: MIT */
/*
 * records.c - the status records of the processes running r2cc on this
 * node (policy/status.c), as conn, metrics and events read them: only the
 * caller's (root: everyone's), never a dead process's (those are removed).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "policy.h"

const char *ctl_status_dir(void)
{
	const char *d = getenv("R2CC_STATUS_DIR");

	return d && d[0] == '/' ? d : R2CC_STATUS_DIR;
}

/* The live records (of @pid only if it is > 0), in *@out; the stale ones
 * of crashed processes of ours are removed. Returns how many, or -errno. */
int ctl_collect(long pid, struct r2cc_status_snap **out)
{
	struct r2cc_status_snap *v = NULL, *nv;
	char path[512], prefix[32];
	struct dirent *de;
	int n = 0, ret;
	DIR *d;

	*out = NULL;
	d = opendir(ctl_status_dir());
	if (!d)
		return -errno;
	/* Ours only, unless root (who may read everyone's). */
	snprintf(prefix, sizeof(prefix), "r2cc.%u.", (unsigned int)getuid());
	if (!getuid())
		strcpy(prefix, "r2cc.");
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		if (pid > 0 && atol(strrchr(de->d_name, '.') + 1) != pid)
			continue;
		nv = realloc(v, (size_t)(n + 1) * sizeof(*v));
		if (!nv)
			break;
		v = nv;
		snprintf(path, sizeof(path), "%s/%s", ctl_status_dir(),
			 de->d_name);
		ret = r2cc_status_read(path, &v[n]);
		if (ret == -ESRCH) {
			unlink(path); /* a crashed process's: stale */
			continue;
		}
		if (ret) {
			fprintf(stderr, "r2cc-ctl: %s: %s\n", path,
				ret == -EBADMSG ? "not a valid r2cc record" :
						  strerror(-ret));
			continue;
		}
		n++;
	}
	closedir(d);
	*out = v;
	return n;
}

void ctl_release(struct r2cc_status_snap *v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		r2cc_status_snap_free(&v[i]);
	free(v);
}

/* Nothing to show: say so, print nothing on standard output. */
int ctl_none(int n, long pid)
{
	if (n < 0) {
		fprintf(stderr, "r2cc-ctl: %s: %s\n", ctl_status_dir(),
			strerror(-n));
		return CTL_ERR;
	}
	fprintf(stderr, "r2cc-ctl: no process %s running r2cc\n",
		pid > 0 ? "of that pid is" : "is");
	return CTL_NONE;
}

long ctl_parse_pid(int argc, char **argv)
{
	char *end;
	long pid;

	if (argc == 0)
		return 0;
	if (argc != 2 || strcmp(argv[0], "pid"))
		return -1;
	pid = strtol(argv[1], &end, 10);
	return *end || pid <= 0 ? -1 : pid;
}
