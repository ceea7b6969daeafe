/* SPDX-License-Identifier: MIT */
/*
 * fault_none.c - the fault injector's kernel side in a build without
 * libbpf (meson -Dbpf=disabled, or libbpf, clang or bpftool missing).
 */
#include <errno.h>

#include "ctl.h"

static const char why[] = "built without the fault injector (rebuild with "
			  "meson -Dbpf=enabled: libbpf-dev, clang, bpftool)";

int ctl_fault_install(const char *netdev, struct r2cc_fault_cfg *cfg,
		      const char **step)
{
	(void)netdev;
	(void)cfg;
	*step = why;
	return -ENOTSUP;
}

int ctl_fault_remove(const char *netdev, const char **step)
{
	(void)netdev;
	*step = why;
	return -ENOTSUP;
}

int ctl_fault_read(const char *netdev, struct r2cc_fault_cfg *cfg,
		   struct r2cc_fault_stats *st, const char **step)
{
	(void)netdev;
	(void)cfg;
	(void)st;
	*step = why;
	return -ENOTSUP;
}

int ctl_fault_list(char (*names)[16], int max, const char **step)
{
	(void)names;
	(void)max;
	*step = why;
	return -ENOTSUP;
}
