/* SPDX-License-Identifier: MIT */
/*
 * fault_tc.c - the fault injector's kernel side with libbpf: fault.bpf.c
 * attached as a clsact (tc) filter to a netdev, its maps pinned under
 * /sys/fs/bpf/r2cc/<netdev>/ so that a later r2cc-ctl reads and clears it.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/magic.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ctl.h"
#include "fault.h"
#include "fault.skel.h"

/* Our tc filter on each hook: fixed, so that clear finds it. */
#define TC_HANDLE 0x2cc
#define TC_PRIO 0x2cc
#define BPFFS "/sys/fs/bpf"

static const char *const pins[] = { "cfg", "stats", "prog" };

/* libbpf speaks only when asked (R2CC_LOG=debug): errors are ours. */
static int lbpf_print(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	static int verbose = -1;
	const char *env;

	if (verbose < 0) {
		env = getenv("R2CC_LOG");
		verbose = env && !strcmp(env, "debug");
	}
	if (!verbose || lvl == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static int pin_path(char *buf, const char *netdev, const char *what)
{
	int n = snprintf(buf, PATH_MAX, "%s/%s%s%s", CTL_FAULT_PIN_DIR, netdev,
			 what ? "/" : "", what ? what : "");

	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* bpffs on /sys/fs/bpf, mounted if it is not there. */
static int bpffs_ready(void)
{
	struct statfs fs;

	if (!statfs(BPFFS, &fs) && fs.f_type == BPF_FS_MAGIC)
		return 0;
	if (!mount("bpf", BPFFS, "bpf", 0, "mode=0700"))
		return 0;
	/* No mount point or no such file system type: no BPF at all. */
	return errno == ENOENT || errno == ENODEV ? -ENOTSUP : -errno;
}

static void unpin(const char *netdev)
{
	char p[PATH_MAX];
	size_t i;

	for (i = 0; i < sizeof(pins) / sizeof(pins[0]); i++)
		if (!pin_path(p, netdev, pins[i]))
			unlink(p);
	if (!pin_path(p, netdev, NULL))
		rmdir(p);
}

/* Detach our filter from the hooks @flags names; the qdisc if ours. */
static int detach(unsigned int ifindex, uint32_t flags)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = (int)ifindex);
	int err, ret = 0;

	if (flags & R2CC_FAULT_F_EGRESS) {
		LIBBPF_OPTS(bpf_tc_opts, o, .handle = TC_HANDLE,
			    .priority = TC_PRIO);
		hook.attach_point = BPF_TC_EGRESS;
		err = bpf_tc_detach(&hook, &o);
		ret = err && err != -ENOENT ? err : ret;
	}
	if (flags & R2CC_FAULT_F_INGRESS) {
		LIBBPF_OPTS(bpf_tc_opts, o, .handle = TC_HANDLE,
			    .priority = TC_PRIO);
		hook.attach_point = BPF_TC_INGRESS;
		err = bpf_tc_detach(&hook, &o);
		ret = err && err != -ENOENT ? err : ret;
	}
	if (flags & R2CC_FAULT_F_OWN_QDISC) {
		/* Both points at once: the whole clsact qdisc goes. */
		hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
		err = bpf_tc_hook_destroy(&hook);
		ret = err && err != -ENOENT && err != -EINVAL ? err : ret;
	}
	return ret;
}

static int attach(struct fault_bpf *skel, struct r2cc_fault_cfg *c,
		  const char **step)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = (int)c->ifindex,
		    .attach_point = BPF_TC_INGRESS);
	static const struct {
		uint32_t flag;
		enum bpf_tc_attach_point at;
		const char *step;
	} pts[] = {
		{ R2CC_FAULT_F_EGRESS, BPF_TC_EGRESS, "attach to tc egress" },
		{ R2CC_FAULT_F_INGRESS, BPF_TC_INGRESS,
		  "attach to tc ingress" },
	};
	uint32_t done = 0, key = 0;
	size_t i;
	int err;

	*step = "create the clsact qdisc";
	err = bpf_tc_hook_create(&hook);
	if (!err)
		c->flags |= R2CC_FAULT_F_OWN_QDISC;
	else if (err == -ENOENT || err == -EOPNOTSUPP)
		*step = "no clsact qdisc in this kernel (sch_ingress)";
	if (err && err != -EEXIST)
		return err == -ENOENT ? -ENOTSUP : err;
	/* The settings are in place before the first packet is seen. */
	*step = "write the settings";
	if (bpf_map_update_elem(bpf_map__fd(skel->maps.cfg), &key, c, 0)) {
		err = -errno;
		goto err_out;
	}
	for (i = 0; i < sizeof(pts) / sizeof(pts[0]); i++) {
		LIBBPF_OPTS(bpf_tc_opts, o, .handle = TC_HANDLE,
			    .priority = TC_PRIO,
			    .prog_fd = bpf_program__fd(skel->progs.r2cc_fault));

		if (!(c->flags & pts[i].flag))
			continue;
		hook.attach_point = pts[i].at;
		*step = pts[i].step;
		err = bpf_tc_attach(&hook, &o);
		if (err == -ENOENT || err == -EOPNOTSUPP) {
			*step = "no cls_bpf in this kernel (cls_bpf)";
			err = -ENOTSUP;
		}
		if (err)
			goto err_out;
		done |= pts[i].flag;
	}
	return 0;
err_out:
	detach(c->ifindex, done | (c->flags & R2CC_FAULT_F_OWN_QDISC));
	return err;
}

static int pin_all(struct fault_bpf *skel, const char *netdev)
{
	char p[PATH_MAX];
	int err;

	if ((err = pin_path(p, netdev, "cfg")) ||
	    (err = bpf_map__pin(skel->maps.cfg, p)))
		return err;
	if ((err = pin_path(p, netdev, "stats")) ||
	    (err = bpf_map__pin(skel->maps.stats, p)))
		return err;
	if ((err = pin_path(p, netdev, "prog")) ||
	    (err = bpf_program__pin(skel->progs.r2cc_fault, p)))
		return err;
	return 0;
}

int ctl_fault_install(const char *netdev, struct r2cc_fault_cfg *c,
		      const char **step)
{
	struct fault_bpf *skel = NULL;
	char dir[PATH_MAX];
	int err;

	libbpf_set_print(lbpf_print);
	*step = "mount bpffs on " BPFFS;
	if ((err = bpffs_ready())) {
		if (err == -ENOTSUP)
			*step = "no bpffs in this kernel (CONFIG_BPF_SYSCALL)";
		return err;
	}
	*step = "create " CTL_FAULT_PIN_DIR;
	if (mkdir(CTL_FAULT_PIN_DIR, 0700) && errno != EEXIST)
		return -errno;
	if ((err = pin_path(dir, netdev, NULL)))
		return err;
	*step = "already has a fault";
	if (mkdir(dir, 0700))
		return -errno;
	*step = "open the BPF object";
	skel = fault_bpf__open();
	if (!skel) {
		err = -errno;
		goto err_out;
	}
	*step = "load the BPF program";
	if ((err = fault_bpf__load(skel)))
		goto err_out;
	if ((err = attach(skel, c, step)))
		goto err_out;
	*step = "pin the maps";
	if ((err = pin_all(skel, netdev))) {
		detach(c->ifindex, c->flags);
		goto err_out;
	}
	fault_bpf__destroy(skel); /* the tc filter and the pins hold on */
	return 0;
err_out:
	fault_bpf__destroy(skel);
	unpin(netdev);
	return err == -ENOSYS || err == -EOPNOTSUPP ? -ENOTSUP : err;
}

static int read_map(const char *netdev, const char *name, void *val)
{
	char p[PATH_MAX];
	uint32_t key = 0;
	int fd, err;

	if ((err = pin_path(p, netdev, name)))
		return err;
	fd = bpf_obj_get(p);
	if (fd < 0)
		return -errno;
	err = bpf_map_lookup_elem(fd, &key, val) ? -errno : 0;
	close(fd);
	return err;
}

int ctl_fault_read(const char *netdev, struct r2cc_fault_cfg *c,
		   struct r2cc_fault_stats *st, const char **step)
{
	int err;

	libbpf_set_print(lbpf_print);
	*step = "read " CTL_FAULT_PIN_DIR;
	if ((err = read_map(netdev, "cfg", c)))
		return err;
	return read_map(netdev, "stats", st);
}

int ctl_fault_remove(const char *netdev, const char **step)
{
	struct r2cc_fault_stats st;
	struct r2cc_fault_cfg c;
	int err;

	if ((err = ctl_fault_read(netdev, &c, &st, step)))
		return err;
	/* The netdev may be gone (rxe link deleted): then only the pins. */
	if (if_nametoindex(netdev) == c.ifindex) {
		*step = "detach from tc";
		if ((err = detach(c.ifindex, c.flags)))
			return err;
	}
	unpin(netdev);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(a, b);
}

int ctl_fault_list(char (*names)[16], int max, const char **step)
{
	struct dirent *e;
	DIR *d;
	int n = 0;

	*step = "list " CTL_FAULT_PIN_DIR;
	d = opendir(CTL_FAULT_PIN_DIR);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d)) && n < max) {
		if (e->d_name[0] == '.' || strlen(e->d_name) >= 16)
			continue;
		snprintf(names[n++], 16, "%s", e->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), by_name);
	return n;
}
