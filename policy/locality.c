/* SPDX-License-Identifier: MIT */
/*
 * locality.c - where things sit for placement: the NUMA node of host
 * memory (get_mempolicy, no libnuma), and PCI paths of rails and GPUs.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "policy.h"

/* <numaif.h> is libnuma's; these are the kernel's uapi values */
#define MPOL_F_NODE (1U << 0)
#define MPOL_F_ADDR (1U << 1)

int r2cc_mem_numa_node(const void *addr, size_t len)
{
	int saved = errno, node = -1;
	long ret;

	if (!addr || !len)
		return -1;
	/* The node of the page holding @addr: one page, one syscall */
	ret = syscall(SYS_get_mempolicy, &node, NULL, 0UL, addr,
		      (unsigned long)(MPOL_F_NODE | MPOL_F_ADDR));
	errno = saved;
	return ret == 0 && node >= 0 ? node : -1;
}

int r2cc_sysfs_devpath(const char *sysfs_root, const char *rel, char *buf,
		       size_t size)
{
	char path[PATH_MAX], real[PATH_MAX], base[PATH_MAX];
	int saved = errno, n, ret = 0;
	size_t bl;

	if (!sysfs_root || !rel || !buf || !size)
		return -EINVAL;
	buf[0] = '\0';
	n = snprintf(path, sizeof(path), "%s/%s", sysfs_root, rel);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	if (!realpath(path, real))
		ret = -errno;
	n = snprintf(path, sizeof(path), "%s/devices", sysfs_root);
	if (!ret && (n < 0 || (size_t)n >= sizeof(path)))
		ret = -ENAMETOOLONG;
	if (!ret && !realpath(path, base))
		ret = -errno;
	errno = saved;
	if (ret)
		return ret;
	bl = strlen(base);
	if (strncmp(real, base, bl) || real[bl] != '/')
		return -EXDEV;
	if (strlen(real + bl + 1) >= size)
		return -ENAMETOOLONG;
	memcpy(buf, real + bl + 1, strlen(real + bl + 1) + 1);
	return 0;
}

/* The numa_node attribute of the PCI device @busid; -1 if unknown */
static int pci_numa_node(const char *sysfs_root, const char *busid)
{
	char path[PATH_MAX], buf[16], *end;
	int saved = errno, fd;
	ssize_t n;
	long v;

	if (snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/numa_node",
		     sysfs_root, busid) >= (int)sizeof(path))
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		errno = saved;
		return -1;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	errno = saved;
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	v = strtol(buf, &end, 10);
	if (end == buf || (*end && *end != '\n') || v < 0 || v > INT16_MAX)
		return -1;
	return (int)v;
}

int r2cc_mem_locate(const char *sysfs_root, const void *addr, size_t len,
		    struct r2cc_mem_loc *loc)
{
	char rel[64];

	if (!loc)
		return -EINVAL;
	memset(loc, 0, sizeof(*loc));
	loc->numa_node = -1;
	loc->gpu = -1;
	if (r2cc_gpu_locate(addr, loc) == 1) {
		if (!sysfs_root || !loc->gpu_busid[0])
			return 0;
		snprintf(rel, sizeof(rel), "bus/pci/devices/%s",
			 loc->gpu_busid);
		if (r2cc_sysfs_devpath(sysfs_root, rel, loc->gpu_path,
				       sizeof(loc->gpu_path)))
			r2cc_dbg("GPU %d at %s: no PCI path under %s", loc->gpu,
				 loc->gpu_busid, sysfs_root);
		loc->numa_node = pci_numa_node(sysfs_root, loc->gpu_busid);
		return 0;
	}
	loc->numa_node = r2cc_mem_numa_node(addr, len);
	return 0;
}

void r2cc_place_rail_init(struct r2cc_place_rail *out,
			  const struct r2cc_rail_info *info, int index,
			  const char *sysfs_root)
{
	char rel[R2CC_DEVNAME_MAX + 32];

	memset(out, 0, sizeof(*out));
	out->index = index;
	out->up = info->state == 4; /* IB_PORT_ACTIVE */
	out->link_layer = info->link_layer;
	out->cap_mbps = info->rate_mbps;
	out->numa_node = info->numa_node;
	if (!sysfs_root || !info->pci[0])
		return;
	snprintf(rel, sizeof(rel), "class/infiniband/%s/device", info->dev);
	if (r2cc_sysfs_devpath(sysfs_root, rel, out->pci_path,
			       sizeof(out->pci_path)))
		r2cc_dbg("%s: no PCI path under %s", info->dev, sysfs_root);
}
