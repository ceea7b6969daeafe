/* SPDX-License-Identifier: MIT */
/*
 * placement.h - part of policy.h: which rail carries a connection's backup
 * (placement.c), and where the connection's memory lives: the NUMA node of
 * host memory, the GPU and PCIe position of device memory (locality.c, gpu.c).
 */
#ifndef R2CC_POLICY_PLACEMENT_H
#define R2CC_POLICY_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define R2CC_PLACE_RAILS_MAX 64 /* rails one placement call may weigh */
#define R2CC_PCI_BUSID_MAX 16 /* "0000:41:00.0" and the NUL; VMD domains */
#define R2CC_PCI_PATH_MAX 256 /* below <sysfs>/devices */

/*
 * Where a buffer lives. @pci_path is the device's sysfs path below
 * /sys/devices, e.g. "pci0000:40/0000:40:01.1/0000:41:00.0": devices whose
 * paths share more leading components sit behind the same PCIe switch.
 */
struct r2cc_mem_loc {
	int numa_node; /* -1 = unknown */
	int gpu; /* CUDA device ordinal; -1 = not GPU memory, or unknown */
	char gpu_busid[R2CC_PCI_BUSID_MAX]; /* "0000:41:00.0"; "" = none */
	char gpu_path[R2CC_PCI_PATH_MAX]; /* "" = unknown */
};

/* One rail as placement sees it; the caller keeps @backups current. */
struct r2cc_place_rail {
	int index; /* the caller's rail number; the same on both ends */
	bool up; /* usable now (health and port state) */
	enum r2cc_link_layer link_layer; /* from policy.h */
	uint32_t cap_mbps; /* capacity (rate_mbps); 0 = unknown */
	int numa_node; /* -1 = unknown */
	char pci_path[R2CC_PCI_PATH_MAX]; /* as in r2cc_mem_loc; "" = none */
	uint32_t backups; /* the load: backups already placed here */
};

/**
 * r2cc_place_order() - every rail that may carry @primary's backup, best first
 * @rails: the rails, in any order; indexes must be unique
 * @n: how many (at most R2CC_PLACE_RAILS_MAX)
 * @primary: index of the connection's primary rail; never a candidate
 * @loc: the connection's memory (NULL = unknown)
 * @salt: r2cc_place_salt() of the connection, equal on both ends
 * @out: the candidates' indexes, in order of preference
 * @max: room in @out; the count may exceed it
 *
 * Candidates are up and have the primary's (known) link layer. Order:
 * fewest backups per Mb/s of capacity (spreads in proportion to capacity);
 * then most PCI path components shared with @loc's GPU; then @loc's NUMA
 * node; then more capacity; then a hash of (@salt, index), so both ends of
 * a connection, given the same rails, rotate over equal rails the same way.
 * A rail of unknown capacity counts as the slowest known one.
 * Return: the number of candidates (0: none), or -EINVAL.
 */
int r2cc_place_order(const struct r2cc_place_rail *rails, int n, int primary,
		     const struct r2cc_mem_loc *loc, uint64_t salt, int *out,
		     int max);
/* The first of r2cc_place_order(): a rail index, -ENODEV or -EINVAL. */
int r2cc_place_choose(const struct r2cc_place_rail *rails, int n, int primary,
		      const struct r2cc_mem_loc *loc, uint64_t salt);
/**
 * r2cc_place_salt() - the tie-break salt of a connection
 * @gid_a: one end's GID (16 bytes)
 * @qpn_a: its QP number
 * @gid_b: the other end's GID
 * @qpn_b: its QP number
 * The ends are ordered canonically first, so swapping a and b (what the
 * peer does) gives the same value. Return: the salt.
 */
uint64_t r2cc_place_salt(const uint8_t gid_a[16], uint32_t qpn_a,
			 const uint8_t gid_b[16], uint32_t qpn_b);
/* Leading '/'-separated components @a and @b share ("" shares none) */
int r2cc_pci_shared(const char *a, const char *b);

/**
 * r2cc_sysfs_devpath() - resolve a sysfs link to its path below devices/
 * @sysfs_root: "/sys", or a fixture tree
 * @rel: e.g. "class/infiniband/mlx5_0/device", "bus/pci/devices/0000:41:00.0"
 * @buf: the path, "pci0000:3a/0000:3a:00.0/0000:3b:00.0"
 * @size: its size
 * Return: 0, -ENOENT (or another -errno) if it does not resolve, -EXDEV if
 * it leads outside @sysfs_root/devices, -ENAMETOOLONG.
 */
int r2cc_sysfs_devpath(const char *sysfs_root, const char *rel, char *buf,
		       size_t size);
/**
 * r2cc_place_rail_init() - a placement rail from an inventory entry
 * @out: filled; up = port ACTIVE, no backups
 * @info: from r2cc_rail_scan()
 * @index: its rail number
 * @sysfs_root: where the PCI path is read ("/sys"); NULL = leave it ""
 */
void r2cc_place_rail_init(struct r2cc_place_rail *out,
			  const struct r2cc_rail_info *info, int index,
			  const char *sysfs_root);

/**
 * r2cc_mem_numa_node() - the NUMA node of host memory at @addr
 * @addr: start of the range
 * @len: its length; only the first page is sampled (one syscall, bounded
 *       cost), and a range spread over nodes reports its first page's
 * get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR) faults that page in if needed:
 * ask after registration, when the pages are pinned, for a real answer.
 * Return: the node, or -1 if unknown (no NUMA, seccomp, not mapped, @len 0).
 */
int r2cc_mem_numa_node(const void *addr, size_t len);
/**
 * r2cc_mem_locate() - where @addr lives: GPU memory first, else host NUMA
 * @sysfs_root: "/sys", or a fixture tree (GPU PCI path and NUMA node)
 * @addr: start of the buffer
 * @len: its length
 * @loc: filled; fields not found are -1 or ""
 * Never fails for lack of CUDA or NUMA: those only leave fields unknown.
 * Return: 0, or -EINVAL.
 */
int r2cc_mem_locate(const char *sysfs_root, const void *addr, size_t len,
		    struct r2cc_mem_loc *loc);

/*
 * The CUDA driver API entry points gpu.c uses, resolved with dlopen() of
 * libcuda.so.1 at run time (never linked). Results are CUresult values.
 */
struct r2cc_cuda_ops {
	int (*pointer_get_attribute)(void *data, int attribute,
				     unsigned long long ptr);
	int (*device_get_pci_bus_id)(char *busid, int len, int dev);
};
/**
 * r2cc_gpu_locate() - whether @addr is CUDA device memory, and on which GPU
 * @addr: the address
 * @loc: its gpu and gpu_busid are set (-1 and "" when not GPU memory)
 * Loads libcuda once (pthread_once); without it, in a process that has
 * not initialised CUDA, or on any driver error the answer is "not GPU
 * memory" (debug message). Never calls cuInit (see gpu.c). Thread-safe.
 * Return: 1 if GPU memory, 0 if not or unknown, -EINVAL.
 */
int r2cc_gpu_locate(const void *addr, struct r2cc_mem_loc *loc);
/**
 * r2cc_gpu_set_driver() - for tests: the driver to use instead of libcuda
 * @ops: a scripted table (borrowed; NULL = dlopen() as usual)
 * @soname: the library dlopen() tries when @ops is NULL (NULL = libcuda.so.1)
 * Call before any r2cc_gpu_locate(), from one thread.
 * Return: 0, or -EBUSY once the driver was loaded.
 */
int r2cc_gpu_set_driver(const struct r2cc_cuda_ops *ops, const char *soname);

#endif /* R2CC_POLICY_PLACEMENT_H */
