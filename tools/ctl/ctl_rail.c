/* SPDX-License-Identifier: MIT */
/*
 * ctl_rail.c - r2cc-ctl rail show [DEV[/PORT]]: the rails of this machine
 * as sysfs shows them (R2CC_SYSFS_ROOT replaces /sys, for tests). Exit 3
 * when a rail shown is not ACTIVE, 2 when there is no RDMA device at all.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "policy.h"

#define MAX_RAILS 256

static const char *state_name(unsigned int s)
{
	static const char *const n[] = { "NOP",	  "DOWN",   "INIT",
					 "ARMED", "ACTIVE", "ACTIVE_DEFER" };

	return s < 6 ? n[s] : "unknown";
}

static bool wanted(const struct r2cc_rail_info *r, const char *filter)
{
	char name[R2CC_DEVNAME_MAX + 8];

	if (!filter)
		return true;
	snprintf(name, sizeof(name), "%s/%u", r->dev, r->port);
	return !strcmp(filter, r->dev) || !strcmp(filter, name);
}

static void print_rail(const struct r2cc_rail_info *r)
{
	char name[R2CC_DEVNAME_MAX + 8];

	snprintf(name, sizeof(name), "%s/%u", r->dev, r->port);
	pr_begin_obj();
	pr_str("rail", "%-12s", name);
	pr_str("state", " state %-6s", state_name(r->state));
	pr_str("link_layer", " %-10s", r2cc_link_layer_name(r->link_layer));
	pr_int("rate_mbps", " %6lld Mb/s", r->rate_mbps);
	pr_int("width", " x%lld", r->width);
	pr_int("numa_node", " numa %lld", r->numa_node);
	pr_str("pci", " pci %s", r->pci[0] ? r->pci : NULL);
	pr_str("netdev", " netdev %s", r->netdev[0] ? r->netdev : NULL);
	if (r->link_layer == R2CC_LL_IB) { /* (decimal, as ibstat says) */
		pr_int("lid", " lid %lld", r->lid);
		pr_int("sm_lid", " sm_lid %lld", r->sm_lid);
	}
	pr_end_obj();
	pr_newline();
}

static int show(int argc, char **argv)
{
	static struct r2cc_rail_info rails[MAX_RAILS];
	const char *root = getenv("R2CC_SYSFS_ROOT");
	const char *filter = argc > 0 ? argv[0] : NULL;
	int n, i, shown = 0, down = 0;

	if (argc > 1) {
		fprintf(stderr, "usage: r2cc-ctl rail show [DEV[/PORT]]\n");
		return CTL_ERR;
	}
	if (!root || !*root)
		root = "/sys";
	n = r2cc_rail_scan(root, NULL, rails, MAX_RAILS);
	if (n == 0 || n == -ENOENT) {
		fprintf(stderr,
			"r2cc-ctl: no RDMA devices on this machine "
			"(nothing in %s/class/infiniband)\n",
			root);
		return CTL_NODEV;
	}
	if (n < 0) {
		fprintf(stderr, "r2cc-ctl: cannot list the rails: %s\n",
			strerror(-n));
		return CTL_ERR;
	}
	for (i = 0; i < n && i < MAX_RAILS; i++)
		shown += wanted(&rails[i], filter);
	if (!shown) {
		fprintf(stderr, "r2cc-ctl: rail %s: No such device\n", filter);
		return CTL_ERR;
	}
	pr_begin_list();
	for (i = 0; i < n && i < MAX_RAILS; i++) {
		if (!wanted(&rails[i], filter))
			continue;
		print_rail(&rails[i]);
		down += rails[i].state != 4; /* IBV_PORT_ACTIVE */
	}
	pr_end_list();
	return down ? CTL_DOWN : CTL_OK;
}

static const struct ctl_cmd cmds[] = {
	{ NULL, show, "" },
	{ "show", show, "[DEV[/PORT]]  the rails and their state" },
	{ 0 },
};

int rail_main(int argc, char **argv)
{
	return ctl_exec("rail", cmds, argc, argv);
}
