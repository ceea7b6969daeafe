/* SPDX-License-Identifier: MIT */
/*
 * test_rail.c - the rail inventory over sysfs fixture trees: parsing, order,
 * R2CC_RAILS, broken and hostile files, truncation at max, the log line.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy.h"

#ifndef FIXTURES
#error "meson passes -DFIXTURES=<tests/unit/fixtures>"
#endif

#define NLOG 64
#define NRAIL 32

static char logs[NLOG][R2CC_LOG_LINE_MAX];
static enum r2cc_log_level log_levels[NLOG];
static int nlog;
static struct r2cc_rail_info rails[NRAIL];
static struct r2cc_config cfg;

static void on_log(enum r2cc_log_level level, const char *line, size_t len)
{
	(void)len;
	if (nlog < NLOG) {
		snprintf(logs[nlog], sizeof(logs[0]), "%s", line);
		log_levels[nlog] = level;
	}
	nlog++;
}

static void setup(void)
{
	nlog = 0;
	memset(rails, 0xa5, sizeof(rails));
	r2cc_log_set_fn(on_log);
	r2cc_log_set_level(R2CC_LOG_DEBUG);
}

/* Messages at @level, and whether one of them contains @needle */
static int count_logs(enum r2cc_log_level level, const char *needle,
		      bool *found)
{
	int i, n = 0;

	*found = false;
	for (i = 0; i < nlog && i < NLOG; i++) {
		if (log_levels[i] != level)
			continue;
		n++;
		if (needle && strstr(logs[i], needle))
			*found = true;
	}
	return n;
}

static int scan_fixture(const char *name, const struct r2cc_config *c, int max)
{
	char root[512];

	snprintf(root, sizeof(root), "%s/%s", FIXTURES, name);
	return r2cc_rail_scan(root, c, rails, max);
}

/* Load R2CC_RAILS=@value into cfg through the real config loader */
static void load_rails(const char *value)
{
	char var[256];
	char *env[] = { var, NULL };

	snprintf(var, sizeof(var), "R2CC_RAILS=%s", value);
	cr_assert_eq(r2cc_config_load(&cfg, env), 0, "R2CC_RAILS=%s", value);
	nlog = 0;
}

static const char *fmt(const struct r2cc_rail_info *r)
{
	static char buf[256];

	cr_assert_eq(r2cc_rail_format(r, buf, sizeof(buf)), 0);
	return buf;
}

static void assert_rail(int i, const char *dev, unsigned int port,
			const char *line)
{
	cr_assert_str_eq(rails[i].dev, dev, "rail %d", i);
	cr_assert_eq(rails[i].port, port, "rail %d: %s", i, dev);
	cr_assert_str_eq(fmt(&rails[i]), line, "rail %d", i);
}

TestSuite(rail, .init = setup, .timeout = 5);

Test(rail, rxe_as_the_lab_kernel_shows_it)
{
	bool found;

	cr_assert_eq(scan_fixture("sysfs-rxe", NULL, NRAIL), 2);
	assert_rail(0, "rxe0", 1,
		    "rxe0/1 Ethernet ACTIVE 2500 Mb/s x1 numa -1 pci - "
		    "netdev eth0");
	assert_rail(1, "rxe1", 1,
		    "rxe1/1 Ethernet ACTIVE 2500 Mb/s x1 numa -1 pci - "
		    "netdev eth1");
	cr_assert_eq(rails[0].link_layer, R2CC_LL_ETH);
	cr_assert_eq(rails[0].state, 4);
	cr_assert_eq(rails[0].rate_mbps, 2500);
	cr_assert_eq(rails[0].width, 1);
	cr_assert_eq(rails[0].numa_node, -1);
	cr_assert_str_eq(rails[0].pci, "");
	cr_assert_eq(count_logs(R2CC_LOG_WARN, NULL, &found), 0);
}

Test(rail, mlx_four_nics_sorted_with_pci_and_numa)
{
	cr_assert_eq(scan_fixture("sysfs-mlx", NULL, NRAIL), 4);
	assert_rail(0, "mlx5_0", 1,
		    "mlx5_0/1 InfiniBand ACTIVE 200000 Mb/s x4 numa 0 "
		    "pci 0000:3b:00.0 netdev -");
	assert_rail(1, "mlx5_1", 1,
		    "mlx5_1/1 InfiniBand DOWN 10000 Mb/s x4 numa 0 "
		    "pci 0000:5e:00.0 netdev -");
	assert_rail(2, "mlx5_2", 1,
		    "mlx5_2/1 InfiniBand ACTIVE 100000 Mb/s x4 numa 1 "
		    "pci 0000:af:00.0 netdev -");
	assert_rail(3, "mlx5_3", 1,
		    "mlx5_3/1 Ethernet ACTIVE 100000 Mb/s x4 numa 1 "
		    "pci 0000:d8:00.0 netdev ens8f0np0");
	cr_assert_eq(rails[1].state, 1);
	cr_assert_eq(rails[0].link_layer, R2CC_LL_IB);
	cr_assert_eq(rails[3].link_layer, R2CC_LL_ETH);
	/* InfiniBand ports' LIDs and their subnet manager's; RoCE has none */
	cr_assert_eq(rails[0].lid, 0x10);
	cr_assert_eq(rails[0].sm_lid, 0x1);
	cr_assert_eq(rails[2].lid, 0x12);
	cr_assert_eq(rails[3].lid, 0);
	cr_assert_eq(rails[3].sm_lid, 0);
}

Test(rail, rails_filter_keeps_sysfs_order)
{
	bool found;

	load_rails("mlx5_3,mlx5_0/1");
	cr_assert_eq(scan_fixture("sysfs-mlx", &cfg, NRAIL), 2);
	cr_assert_str_eq(rails[0].dev, "mlx5_0");
	cr_assert_str_eq(rails[1].dev, "mlx5_3");
	cr_assert_eq(count_logs(R2CC_LOG_WARN, NULL, &found), 0);
	cr_assert_eq(count_logs(R2CC_LOG_DEBUG, "mlx5_1/1: not in R2CC_RAILS",
				&found),
		     2);
	cr_assert(found);
}

Test(rail, rails_all_is_every_rail)
{
	load_rails("all");
	cr_assert_eq(scan_fixture("sysfs-mlx", &cfg, NRAIL), 4);
	r2cc_config_init(&cfg);
	cr_assert_eq(scan_fixture("sysfs-rxe", &cfg, NRAIL), 2);
}

Test(rail, rails_naming_nothing_warns_once_each)
{
	bool found;

	load_rails("rxe1,mlx5_0/2,rxe9,rxe0/1");
	cr_assert_eq(scan_fixture("sysfs-rxe", &cfg, NRAIL), 2);
	cr_assert_eq(count_logs(R2CC_LOG_WARN, "R2CC_RAILS: no rail mlx5_0/2",
				&found),
		     2);
	cr_assert(found);
	count_logs(R2CC_LOG_WARN, "R2CC_RAILS: no device rxe9", &found);
	cr_assert(found);

	load_rails("rxe0/2");
	cr_assert_eq(scan_fixture("sysfs-rxe", &cfg, NRAIL), 0);
	cr_assert_eq(count_logs(R2CC_LOG_WARN, "no rail rxe0/2", &found), 1);
	cr_assert(found);
}

Test(rail, max_counts_past_the_end_and_stores_none)
{
	struct r2cc_rail_info canary;

	memset(&canary, 0xa5, sizeof(canary));
	cr_assert_eq(scan_fixture("sysfs-mlx", NULL, 2), 4);
	cr_assert_str_eq(rails[0].dev, "mlx5_0");
	cr_assert_str_eq(rails[1].dev, "mlx5_1");
	cr_assert_eq(memcmp(&rails[2], &canary, sizeof(canary)), 0);

	cr_assert_eq(r2cc_rail_scan(FIXTURES "/sysfs-mlx", NULL, NULL, 0), 4);
	memset(rails, 0xa5, sizeof(rails));
	load_rails("mlx5_2,mlx5_3");
	cr_assert_eq(scan_fixture("sysfs-mlx", &cfg, 1), 2);
	cr_assert_str_eq(rails[0].dev, "mlx5_2");
	cr_assert_eq(memcmp(&rails[1], &canary, sizeof(canary)), 0);
}

Test(rail, bad_arguments_and_missing_trees)
{
	cr_assert_eq(r2cc_rail_scan(NULL, NULL, rails, NRAIL), -EINVAL);
	cr_assert_eq(scan_fixture("sysfs-mlx", NULL, -1), -EINVAL);
	cr_assert_eq(r2cc_rail_scan(FIXTURES "/sysfs-mlx", NULL, NULL, 1),
		     -EINVAL);
	cr_assert_eq(r2cc_rail_scan("/nonexistent/r2cc", NULL, rails, NRAIL),
		     -ENOENT);
	/* A root without class/infiniband: no RDMA driver loaded */
	cr_assert_eq(r2cc_rail_scan(FIXTURES, NULL, rails, NRAIL), -ENOENT);
	cr_assert_eq(scan_fixture("sysfs-mlx/class", NULL, NRAIL), -ENOENT);
}

Test(rail, broken_tree_sorted_skipped_and_unknown)
{
	char n63[64];
	bool found;

	memset(n63, 'n', 63);
	n63[63] = '\0';
	cr_assert_eq(scan_fixture("sysfs-broken", NULL, NRAIL), 10);
	/* a02 and a2 tie on the number, then go by bytes; a10 after a2 */
	assert_rail(0, "a02", 1,
		    "a02/1 unknown INIT 0 Mb/s x0 numa -1 pci - netdev -");
	assert_rail(1, "a2", 1,
		    "a2/1 unknown unknown 0 Mb/s x0 numa -1 pci - netdev -");
	/* ports/2 is a file: listed, nothing known */
	assert_rail(2, "a2", 2,
		    "a2/2 unknown unknown 0 Mb/s x0 numa -1 pci - netdev -");
	/* Infiniband (case), ACTIVE (no number), fast; parent too long */
	assert_rail(3, "a10", 1,
		    "a10/1 unknown unknown 0 Mb/s x0 numa -1 pci - netdev -");
	/* 300-byte link_layer, state 999, rate without a width */
	assert_rail(4, "a10", 3,
		    "a10/3 unknown unknown 2500 Mb/s x0 numa -1 pci - "
		    "netdev -");
	/* no newline, ACTIVE_DEFER, 12X; ndevs/0 is a directory */
	assert_rail(5, "a10", 10,
		    "a10/10 Ethernet ACTIVE_DEFER 600000 Mb/s x12 numa -1 "
		    "pci - netdev -");
	/* " 4: ACTIVE", a fraction, "eth 0", numa_node overflows */
	assert_rail(6, "d", 1,
		    "d/1 Ethernet unknown 1250 Mb/s x1 numa -1 "
		    "pci 0000:00:1f.7 netdev -");
	/* rate overflows u32 Mb/s, "4" without ':', PCI function 8, -2 */
	assert_rail(7, "e", 1,
		    "e/1 unknown unknown 0 Mb/s x0 numa -1 pci - netdev -");
	/* the largest rate that fits; a NUL inside state */
	assert_rail(8, "g", 1,
		    "g/1 InfiniBand unknown 4294967000 Mb/s x4 numa -1 "
		    "pci - netdev -");
	cr_assert_str_eq(rails[9].dev, n63);
	cr_assert_eq(rails[9].state, 4);

	cr_assert_eq(count_logs(R2CC_LOG_WARN, NULL, &found), 0);
	count_logs(R2CC_LOG_DEBUG, "name over 63 bytes", &found);
	cr_assert(found, "overlong device name not logged");
	count_logs(R2CC_LOG_DEBUG, "skipping port 256", &found);
	cr_assert(found);
	count_logs(R2CC_LOG_DEBUG, "skipping port 01", &found);
	cr_assert(found);
	count_logs(R2CC_LOG_DEBUG, "skipping device b1", &found);
	cr_assert(found);
	count_logs(R2CC_LOG_DEBUG, "skipping netdev abcdefghijklmnop", &found);
	cr_assert(found);
}

/* Files no fixture in git can hold: a FIFO, /dev/zero, a symlink loop */
Test(rail, hostile_files_neither_hang_nor_overrun)
{
	char root[] = "/tmp/r2cc_rail_XXXXXX", path[256];
	static const char *const dirs[] = { "class", "class/infiniband",
					    "class/infiniband/z",
					    "class/infiniband/z/ports",
					    "class/infiniband/z/ports/1" };
	unsigned int i;
	int n;

	cr_assert_not_null(mkdtemp(root));
	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", root, dirs[i]);
		cr_assert_eq(mkdir(path, 0700), 0, "%s", path);
	}
	snprintf(path, sizeof(path), "%s/%s/state", root, dirs[4]);
	cr_assert_eq(mkfifo(path, 0600), 0);
	snprintf(path, sizeof(path), "%s/%s/rate", root, dirs[4]);
	cr_assert_eq(symlink("/dev/zero", path), 0);
	snprintf(path, sizeof(path), "%s/%s/link_layer", root, dirs[4]);
	cr_assert_eq(symlink("link_layer", path), 0);
	snprintf(path, sizeof(path), "%s/%s/device", root, dirs[2]);
	cr_assert_eq(symlink("/dev/urandom", path), 0);

	n = r2cc_rail_scan(root, NULL, rails, NRAIL);

	snprintf(path, sizeof(path), "%s/%s/", root, dirs[4]);
	for (i = 0; i < 3; i++) {
		static const char *const files[] = { "state", "rate",
						     "link_layer" };
		char f[300];

		snprintf(f, sizeof(f), "%s%s", path, files[i]);
		unlink(f);
	}
	snprintf(path, sizeof(path), "%s/%s/device", root, dirs[2]);
	unlink(path);
	for (i = sizeof(dirs) / sizeof(dirs[0]); i-- > 0;) {
		snprintf(path, sizeof(path), "%s/%s", root, dirs[i]);
		rmdir(path);
	}
	rmdir(root);

	cr_assert_eq(n, 1);
	cr_assert_str_eq(fmt(&rails[0]), "z/1 unknown unknown 0 Mb/s x0 "
					 "numa -1 pci - netdev -");
}

Test(rail, format_edges)
{
	struct r2cc_rail_info r = { .dev = "mlx5_10",
				    .port = 255,
				    .link_layer = R2CC_LL_IB,
				    .state = 9,
				    .rate_mbps = 400000,
				    .width = 4,
				    .numa_node = 3,
				    .pci = "10000:e1:00.1",
				    .netdev = "ib0" };
	char buf[128];

	cr_assert_str_eq(fmt(&r), "mlx5_10/255 InfiniBand 9 400000 Mb/s x4 "
				  "numa 3 pci 10000:e1:00.1 netdev ib0");
	r.state = 3;
	cr_assert_eq(r2cc_rail_format(&r, buf, 12), -ENOSPC);
	cr_assert_str_eq(buf, "mlx5_10/255");
	cr_assert_eq(r2cc_rail_format(&r, buf, 0), -ENOSPC);
	cr_assert_eq(r2cc_rail_format(NULL, buf, sizeof(buf)), -EINVAL);
	cr_assert_eq(r2cc_rail_format(&r, NULL, 0), -EINVAL);
	cr_assert_eq(r2cc_rail_format(&r, buf, sizeof(buf)), 0);
	cr_assert(strstr(buf, " ARMED "));
}

Test(rail, link_layer_names)
{
	cr_assert_str_eq(r2cc_link_layer_name(R2CC_LL_IB), "InfiniBand");
	cr_assert_str_eq(r2cc_link_layer_name(R2CC_LL_ETH), "Ethernet");
	cr_assert_str_eq(r2cc_link_layer_name(R2CC_LL_UNKNOWN), "unknown");
	cr_assert_str_eq(r2cc_link_layer_name((enum r2cc_link_layer)7),
			 "unknown");
}
