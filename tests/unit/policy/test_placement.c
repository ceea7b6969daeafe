/* SPDX-License-Identifier: MIT */
/*
 * test_placement.c - backup placement: spreading by capacity, rails that
 * may not carry a backup, NUMA and PCIe preference, both ends agreeing;
 * the PCI paths and the NUMA node of memory that feed it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "policy.h"

#ifndef FIXTURES
#error "meson passes -DFIXTURES=<tests/unit/fixtures>"
#endif

#define ETH R2CC_LL_ETH
#define IB R2CC_LL_IB

static struct r2cc_place_rail mk(int index, bool up, enum r2cc_link_layer ll,
				 uint32_t gbps, int numa, const char *path)
{
	struct r2cc_place_rail r;

	memset(&r, 0, sizeof(r));
	r.index = index;
	r.up = up;
	r.link_layer = ll;
	r.cap_mbps = gbps * 1000;
	r.numa_node = numa;
	snprintf(r.pci_path, sizeof(r.pci_path), "%s", path ? path : "");
	return r;
}

static struct r2cc_mem_loc host_loc(int numa)
{
	struct r2cc_mem_loc loc;

	memset(&loc, 0, sizeof(loc));
	loc.numa_node = numa;
	loc.gpu = -1;
	return loc;
}

/* Place @count backups one by one, as connections come; salt per conn */
static void place_many(struct r2cc_place_rail *r, int n, int primary, int count,
		       uint64_t seed)
{
	int i, j, got;

	for (i = 0; i < count; i++) {
		got = r2cc_place_choose(r, n, primary, NULL,
					seed * 1000003u + (uint64_t)i);
		cr_assert_geq(got, 0, "placement %d: %d", i, got);
		cr_assert_neq(got, primary);
		for (j = 0; j < n; j++)
			if (r[j].index == got)
				r[j].backups++;
	}
}

Test(placement, spreads_by_capacity, .timeout = 2.)
{
	struct r2cc_place_rail r[4];
	uint64_t seed;

	/* rail 0 failed: 8 connections' backups over 100/100/200 Gb/s */
	for (seed = 0; seed < 64; seed++) {
		r[0] = mk(0, false, ETH, 100, 0, NULL);
		r[1] = mk(1, true, ETH, 100, 0, NULL);
		r[2] = mk(2, true, ETH, 100, 1, NULL);
		r[3] = mk(3, true, ETH, 200, 1, NULL);
		place_many(r, 4, 0, 8, seed);
		cr_assert_eq(r[0].backups, 0);
		cr_assert_eq(r[1].backups, 2, "seed %lu: %u",
			     (unsigned long)seed, r[1].backups);
		cr_assert_eq(r[2].backups, 2, "seed %lu: %u",
			     (unsigned long)seed, r[2].backups);
		cr_assert_eq(r[3].backups, 4, "seed %lu: %u",
			     (unsigned long)seed, r[3].backups);
	}
}

Test(placement, spreads_equal_rails_evenly, .timeout = 2.)
{
	struct r2cc_place_rail r[8];
	int i;

	/* 8 equal rails, primary 5 up: 70 backups go 10 to each other */
	for (i = 0; i < 8; i++)
		r[i] = mk(i, true, IB, 400, i / 4, NULL);
	place_many(r, 8, 5, 70, 7);
	for (i = 0; i < 8; i++)
		cr_assert_eq(r[i].backups, i == 5 ? 0u : 10u, "rail %d: %u", i,
			     r[i].backups);
}

Test(placement, load_comes_before_locality, .timeout = 2.)
{
	struct r2cc_place_rail r[3];
	struct r2cc_mem_loc loc = host_loc(1);

	r[0] = mk(0, true, ETH, 100, 0, NULL);
	r[1] = mk(1, true, ETH, 100, 0, NULL);
	r[2] = mk(2, true, ETH, 100, 1, NULL);
	r[2].backups = 1;
	cr_assert_eq(r2cc_place_choose(r, 3, 0, &loc, 1), 1);
	r[1].backups = 1;
	cr_assert_eq(r2cc_place_choose(r, 3, 0, &loc, 1), 2);
}

Test(placement, skips_down_rails, .timeout = 2.)
{
	struct r2cc_place_rail r[4];
	int out[4], salt;

	r[0] = mk(0, true, ETH, 100, 0, NULL);
	r[1] = mk(1, false, ETH, 400, 0, NULL);
	r[2] = mk(2, true, ETH, 100, 0, NULL);
	r[3] = mk(3, false, ETH, 100, 0, NULL);
	for (salt = 0; salt < 32; salt++)
		cr_assert_eq(r2cc_place_choose(r, 4, 0, NULL, (uint64_t)salt),
			     2);
	cr_assert_eq(r2cc_place_order(r, 4, 0, NULL, 0, out, 4), 1);
	cr_assert_eq(out[0], 2);
}

Test(placement, skips_other_link_layer, .timeout = 2.)
{
	struct r2cc_place_rail r[4];
	int out[4], salt;

	r[0] = mk(0, true, IB, 100, 0, NULL);
	r[1] = mk(1, true, ETH, 400, 0, NULL);
	r[2] = mk(2, true, R2CC_LL_UNKNOWN, 400, 0, NULL);
	r[3] = mk(3, true, IB, 100, 1, NULL);
	for (salt = 0; salt < 32; salt++)
		cr_assert_eq(r2cc_place_choose(r, 4, 0, NULL, (uint64_t)salt),
			     3);
	cr_assert_eq(r2cc_place_order(r, 4, 1, NULL, 0, out, 4), 0);
	cr_assert_eq(r2cc_place_choose(r, 4, 1, NULL, 0), -ENODEV);
	/* A primary of unknown link layer: nothing known to stand in */
	cr_assert_eq(r2cc_place_choose(r, 4, 2, NULL, 0), -ENODEV);
}

Test(placement, never_the_primary, .timeout = 2.)
{
	struct r2cc_place_rail r[3];
	int out[3], i, salt;

	/* The primary is up, empty and the fastest: still never a candidate */
	r[0] = mk(7, true, ETH, 100, 0, NULL);
	r[1] = mk(3, true, ETH, 400, 0, NULL);
	r[2] = mk(9, true, ETH, 100, 0, NULL);
	r[0].backups = 5;
	r[2].backups = 5;
	for (salt = 0; salt < 64; salt++) {
		cr_assert_eq(r2cc_place_order(r, 3, 3, NULL, (uint64_t)salt,
					      out, 3),
			     2);
		for (i = 0; i < 2; i++)
			cr_assert_neq(out[i], 3);
	}
}

Test(placement, enodev_when_no_other_rail, .timeout = 2.)
{
	struct r2cc_place_rail r[3];
	int out[3] = { -1, -1, -1 };

	r[0] = mk(0, true, ETH, 100, 0, NULL);
	cr_assert_eq(r2cc_place_choose(r, 1, 0, NULL, 0), -ENODEV);
	r[1] = mk(1, false, ETH, 100, 0, NULL);
	r[2] = mk(2, true, IB, 100, 0, NULL);
	cr_assert_eq(r2cc_place_choose(r, 3, 0, NULL, 0), -ENODEV);
	cr_assert_eq(r2cc_place_order(r, 3, 0, NULL, 0, out, 3), 0);
	cr_assert_eq(out[0], -1);
}

Test(placement, prefers_memory_numa_node, .timeout = 2.)
{
	struct r2cc_place_rail r[4];
	struct r2cc_mem_loc loc;
	uint64_t salt;

	r[0] = mk(0, true, ETH, 100, 0, NULL);
	r[1] = mk(1, true, ETH, 100, 0, NULL);
	r[2] = mk(2, true, ETH, 100, 1, NULL);
	r[3] = mk(3, true, ETH, 100, -1, NULL);
	for (salt = 0; salt < 64; salt++) {
		loc = host_loc(1);
		cr_assert_eq(r2cc_place_choose(r, 4, 0, &loc, salt), 2);
		loc = host_loc(0);
		cr_assert_eq(r2cc_place_choose(r, 4, 0, &loc, salt), 1);
	}
}

/* Unknown memory node: no rail is "local", not even one of node -1 */
Test(placement, unknown_numa_is_not_local, .timeout = 2.)
{
	struct r2cc_place_rail r[3];
	struct r2cc_mem_loc loc = host_loc(-1);
	bool seen[3] = { false, false, false };
	uint64_t salt;

	r[0] = mk(0, true, ETH, 100, 0, NULL);
	r[1] = mk(1, true, ETH, 100, -1, NULL);
	r[2] = mk(2, true, ETH, 100, 1, NULL);
	for (salt = 0; salt < 64; salt++)
		seen[r2cc_place_choose(r, 3, 0, &loc, salt)] = true;
	cr_assert(seen[1] && seen[2], "-1 must not match -1");
}

Test(placement, prefers_gpu_pcie_switch, .timeout = 2.)
{
	struct r2cc_place_rail r[5];
	struct r2cc_mem_loc loc = host_loc(1);
	int out[5], salt;

	/* GPU 1 at 0000:43:00.0 behind the switch at 0000:41:00.0 */
	snprintf(
		loc.gpu_path, sizeof(loc.gpu_path),
		"pci0000:40/0000:40:01.0/0000:41:00.0/0000:42:08.0/0000:43:00.0");
	snprintf(loc.gpu_busid, sizeof(loc.gpu_busid), "0000:43:00.0");
	loc.gpu = 1;
	r[0] = mk(0, true, ETH, 200, 0, "pci0000:10/0000:10:01.0/0000:11:00.0");
	/* Same root complex, another root port: shares 1 component */
	r[1] = mk(1, true, ETH, 200, 0, "pci0000:40/0000:40:03.0/0000:45:00.0");
	/* Same switch: shares 3 */
	r[2] = mk(
		2, true, ETH, 200, 0,
		"pci0000:40/0000:40:01.0/0000:41:00.0/0000:42:10.0/0000:44:00.0");
	/* The memory's NUMA node, another socket: shares 0 */
	r[3] = mk(3, true, ETH, 200, 1, "pci0000:c0/0000:c0:01.0/0000:c1:00.0");
	/* A bus number that looks close as text ("0000:4" is no component) */
	r[4] = mk(4, true, ETH, 200, 0, "pci0000:4/0000:40:01.0/0000:41:00.0");
	for (salt = 0; salt < 64; salt++) {
		cr_assert_eq(r2cc_place_order(r, 5, 0, &loc, (uint64_t)salt,
					      out, 5),
			     4);
		cr_assert_eq(out[0], 2);
		cr_assert_eq(out[1], 1);
		cr_assert_eq(out[2], 3, "then the NUMA node");
		cr_assert_eq(out[3], 4);
	}
}

Test(placement, both_ends_agree, .timeout = 2.)
{
	uint8_t gid_a[16] = { 0 }, gid_b[16] = { 0 };
	struct r2cc_place_rail here[4], there[4];
	int seen[4] = { 0, 0, 0, 0 }, i, a, b;
	uint64_t salt_a, salt_b;
	uint32_t qpn;

	gid_a[10] = gid_a[11] = gid_b[10] = gid_b[11] = 0xff;
	gid_a[15] = 1;
	gid_b[15] = 2;
	/* Two nodes alike; each lists its rails in its own order */
	for (i = 0; i < 4; i++) {
		here[i] = mk(i, true, ETH, 100, i / 2, NULL);
		there[3 - i] = mk(i, true, ETH, 100, i / 2, NULL);
	}
	for (qpn = 0x100; qpn < 0x180; qpn++) {
		/* Each end passes itself first */
		salt_a = r2cc_place_salt(gid_a, qpn, gid_b, qpn + 7);
		salt_b = r2cc_place_salt(gid_b, qpn + 7, gid_a, qpn);
		cr_assert_eq(salt_a, salt_b);
		a = r2cc_place_choose(here, 4, 0, NULL, salt_a);
		b = r2cc_place_choose(there, 4, 0, NULL, salt_b);
		cr_assert_eq(a, b, "qpn %#x: %d vs %d", qpn, a, b);
		seen[a]++;
	}
	/* And the salt does rotate them: each of 1..3 gets a fair share */
	cr_assert_eq(seen[0], 0);
	for (i = 1; i < 4; i++)
		cr_assert_gt(seen[i], 20, "rail %d: %d of 128", i, seen[i]);
	/* Another connection between the same GIDs: another salt */
	cr_assert_neq(r2cc_place_salt(gid_a, 1, gid_b, 2),
		      r2cc_place_salt(gid_a, 2, gid_b, 1));
}

Test(placement, order_is_full_and_bounded, .timeout = 2.)
{
	struct r2cc_place_rail r[5];
	int out[5] = { -1, -1, -1, -1, -1 }, i;

	for (i = 0; i < 5; i++)
		r[i] = mk(10 + i, true, ETH, 100, 0, NULL);
	r[1].backups = 3; /* 11 */
	r[2].backups = 1; /* 12 */
	r[3].backups = 2; /* 13 */
	r[4].backups = 1; /* 14 */
	cr_assert_eq(r2cc_place_order(r, 5, 10, NULL, 99, out, 5), 4);
	cr_assert(out[0] == 12 || out[0] == 14);
	cr_assert(out[1] == 12 || out[1] == 14);
	cr_assert_neq(out[0], out[1]);
	cr_assert_eq(out[2], 13);
	cr_assert_eq(out[3], 11);
	cr_assert_eq(out[4], -1);
	cr_assert_eq(r2cc_place_choose(r, 5, 10, NULL, 99), out[0]);
	/* Re-placing when the backup dies: the next in line */
	r[out[0] - 10].up = false;
	cr_assert_eq(r2cc_place_choose(r, 5, 10, NULL, 99), out[1]);
	/* Room for 2: the count is still 3, and only 2 written */
	memset(out, 0xff, sizeof(out));
	cr_assert_eq(r2cc_place_order(r, 5, 10, NULL, 99, out, 2), 3);
	cr_assert_eq(out[2], -1);
	cr_assert_eq(r2cc_place_order(r, 5, 10, NULL, 99, NULL, 0), 3);
}

Test(placement, unknown_capacity_counts_as_slowest, .timeout = 2.)
{
	struct r2cc_place_rail r[3];

	r[0] = mk(0, true, ETH, 100, 0, NULL);
	r[1] = mk(1, true, ETH, 0, 0, NULL);
	r[2] = mk(2, true, ETH, 50, 0, NULL);
	place_many(r, 3, 0, 4, 3);
	cr_assert_eq(r[1].backups, 2);
	cr_assert_eq(r[2].backups, 2);
}

Test(placement, rejects_bad_input, .timeout = 2.)
{
	struct r2cc_place_rail r[R2CC_PLACE_RAILS_MAX + 1];
	int out[2], i;

	for (i = 0; i <= R2CC_PLACE_RAILS_MAX; i++)
		r[i] = mk(i, true, ETH, 100, 0, NULL);
	cr_assert_eq(r2cc_place_choose(r, R2CC_PLACE_RAILS_MAX + 1, 0, NULL, 0),
		     -EINVAL);
	cr_assert_geq(r2cc_place_choose(r, R2CC_PLACE_RAILS_MAX, 0, NULL, 0),
		      1);
	cr_assert_eq(r2cc_place_choose(r, 3, 42, NULL, 0), -EINVAL);
	r[2].index = 1;
	cr_assert_eq(r2cc_place_choose(r, 3, 0, NULL, 0), -EINVAL);
	cr_assert_eq(r2cc_place_choose(NULL, 3, 0, NULL, 0), -EINVAL);
	cr_assert_eq(r2cc_place_order(r, 2, 0, NULL, 0, NULL, 2), -EINVAL);
	cr_assert_eq(r2cc_place_order(r, -1, 0, NULL, 0, out, 2), -EINVAL);
}

Test(placement, pci_shared_counts_components, .timeout = 2.)
{
	cr_assert_eq(r2cc_pci_shared("pci0000:40/0000:40:01.0/0000:41:00.0",
				     "pci0000:40/0000:40:01.0/0000:42:00.0"),
		     2);
	cr_assert_eq(r2cc_pci_shared("pci0000:40/0000:40:01.0",
				     "pci0000:40/0000:40:01.1"),
		     1);
	cr_assert_eq(r2cc_pci_shared("pci0000:4/x", "pci0000:40/x"), 0);
	cr_assert_eq(r2cc_pci_shared("a/b", "a/b"), 2);
	cr_assert_eq(r2cc_pci_shared("a/b", "a/b/c"), 2);
	cr_assert_eq(r2cc_pci_shared("", ""), 0);
	cr_assert_eq(r2cc_pci_shared("a//b", "a//b"), 1);
	cr_assert_eq(r2cc_pci_shared(NULL, "a"), 0);
}

Test(placement, rails_from_the_inventory, .timeout = 2.)
{
	struct r2cc_rail_info info[8];
	struct r2cc_place_rail r;
	char path[R2CC_PCI_PATH_MAX];
	int n, i;

	cr_assert_eq(r2cc_sysfs_devpath(FIXTURES "/sysfs-mlx",
					"class/infiniband/mlx5_0/device", path,
					sizeof(path)),
		     0);
	cr_assert_str_eq(path, "pci0000:3a/0000:3a:00.0/0000:3b:00.0");
	cr_assert_eq(r2cc_sysfs_devpath(FIXTURES "/sysfs-mlx",
					"class/infiniband/mlx5_9/device", path,
					sizeof(path)),
		     -ENOENT);
	cr_assert_eq(r2cc_sysfs_devpath(FIXTURES "/sysfs-mlx",
					"class/infiniband/mlx5_0/device", path,
					10),
		     -ENAMETOOLONG);
	/* A link out of the tree is no device path */
	cr_assert_eq(r2cc_sysfs_devpath(FIXTURES "/sysfs-mlx", "..", path,
					sizeof(path)),
		     -EXDEV);
	n = r2cc_rail_scan(FIXTURES "/sysfs-mlx", NULL, info, 8);
	cr_assert_gt(n, 1);
	for (i = 0; i < n && i < 8; i++) {
		r2cc_place_rail_init(&r, &info[i], i, FIXTURES "/sysfs-mlx");
		cr_assert_eq(r.index, i);
		cr_assert_eq(r.up, info[i].state == 4);
		cr_assert_eq(r.link_layer, info[i].link_layer);
		cr_assert_eq(r.cap_mbps, info[i].rate_mbps);
		cr_assert_eq(r.numa_node, info[i].numa_node);
		cr_assert_eq(r.backups, 0);
		if (info[i].pci[0])
			cr_assert(strstr(r.pci_path, info[i].pci), "%s: %s",
				  info[i].dev, r.pci_path);
	}
	r2cc_place_rail_init(&r, &info[0], 0, NULL);
	cr_assert_str_eq(r.pci_path, "");
}

Test(locality, numa_node_of_host_memory, .timeout = 2.)
{
	long page = sysconf(_SC_PAGESIZE);
	char *buf = aligned_alloc((size_t)page, (size_t)page * 4);
	int node = -1, got;
	long ret;
	void *gone;

	cr_assert_not_null(buf);
	memset(buf, 1, (size_t)page * 4);
	got = r2cc_mem_numa_node(buf + 1, (size_t)page);
	ret = syscall(SYS_get_mempolicy, &node, NULL, 0UL, buf,
		      (unsigned long)3);
	if (ret == 0)
		cr_assert_eq(got, node);
	else
		cr_assert_eq(got, -1);
	cr_assert_eq(r2cc_mem_numa_node(buf, 0), -1);
	cr_assert_eq(r2cc_mem_numa_node(NULL, 10), -1);
	free(buf);
	/* Not mapped: unknown, errno kept */
	gone = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(gone, MAP_FAILED);
	munmap(gone, (size_t)page);
	errno = 1234;
	cr_assert_eq(r2cc_mem_numa_node(gone, 1), -1);
	cr_assert_eq(errno, 1234);
}
