/* SPDX-License-Identifier: MIT */
/*
 * main.c - r2cc-ctl [OPTIONS] OBJECT { COMMAND | help }: options, the
 * object table, and the exact-or-unique-prefix command matcher.
 */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "r2cc_config.h"

struct ctl_opts ctl;

static const struct ctl_cmd objects[] = {
	{ NULL, rail_main, "rail show" },
	{ "rail", rail_main, "rail health and inventory" },
	{ "conn", conn_main, "connections of the processes running r2cc" },
	{ "stats", stats_main, "per-process totals: WRs, errors, failovers" },
	{ "metrics", metrics_main, "counters in Prometheus text format" },
	{ "events", events_main, "rail changes and failovers: when, why" },
	{ "watch", watch_main, "live per-rail traffic rates and QP counts" },
	{ "fault", fault_main, "inject RoCEv2 packet loss on a rail (eBPF)" },
	{ "config", config_main, "check a configuration" },
	{ "secret", secret_main, "make a job secret" },
	{ 0 },
};

static void usage(FILE *f)
{
	const struct ctl_cmd *o;

	fprintf(f, "usage: r2cc-ctl [OPTIONS] OBJECT { COMMAND | help }\n"
		   "OBJECT:\n");
	for (o = objects + 1; o->fn; o++)
		fprintf(f, "  %-8s %s\n", o->name, o->help);
	fprintf(f, "OPTIONS: -j[son]  -p[retty]  -V[ersion]  -h[elp]\n"
		   "With no OBJECT: rail show.\n");
}

int ctl_usage_of(const char *object, const struct ctl_cmd *cmds)
{
	const struct ctl_cmd *c;

	fprintf(stderr, "usage: r2cc-ctl%s%s { ", *object ? " " : "", object);
	for (c = cmds; c->fn; c++)
		if (c->name)
			fprintf(stderr, "%s%s", c->name,
				(c + 1)->fn ? " | " : " }\n");
	for (c = cmds; c->fn; c++)
		if (c->name)
			fprintf(stderr, "  %-8s %s\n", c->name, c->help);
	return CTL_ERR;
}

int ctl_exec(const char *object, const struct ctl_cmd *cmds, int argc,
	     char **argv)
{
	const struct ctl_cmd *c, *hit = NULL;
	size_t len;

	if (argc < 1)
		return cmds[0].fn(0, argv);
	if (!strcmp(argv[0], "help") || !strcmp(argv[0], "-h") ||
	    !strcmp(argv[0], "--help")) {
		ctl_usage_of(object, cmds);
		return CTL_OK;
	}
	len = strlen(argv[0]);
	for (c = cmds; c->fn; c++) {
		if (!c->name || strncmp(c->name, argv[0], len))
			continue;
		if (strlen(c->name) == len)
			return c->fn(argc - 1, argv + 1);
		if (hit) {
			fprintf(stderr, "r2cc-ctl: %s%s`%s' is ambiguous\n",
				object, *object ? ": " : "", argv[0]);
			return ctl_usage_of(object, cmds);
		}
		hit = c;
	}
	if (hit)
		return hit->fn(argc - 1, argv + 1);
	fprintf(stderr, "r2cc-ctl: %s%sunknown word `%s'\n", object,
		*object ? ": " : "", argv[0]);
	return ctl_usage_of(object, cmds);
}

static bool is_opt(const char *a, const char *s, const char *l)
{
	return !strcmp(a, s) || !strcmp(a, l);
}

int main(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (is_opt(argv[i], "-j", "-json")) {
			ctl.json = true;
		} else if (is_opt(argv[i], "-p", "-pretty")) {
			ctl.pretty = true;
		} else if (is_opt(argv[i], "-V", "-Version") ||
			   !strcmp(argv[i], "--version")) {
			printf("r2cc-ctl %s\n", R2CC_VERSION);
			return CTL_OK;
		} else if (is_opt(argv[i], "-h", "-help") ||
			   !strcmp(argv[i], "--help")) {
			usage(stdout);
			return CTL_OK;
		} else {
			fprintf(stderr, "r2cc-ctl: unknown option `%s'\n",
				argv[i]);
			usage(stderr);
			return CTL_ERR;
		}
	}
	if (i < argc &&
	    (!strcmp(argv[i], "help") || !strcmp(argv[i], "version"))) {
		if (argv[i][0] == 'v')
			printf("r2cc-ctl %s\n", R2CC_VERSION);
		else
			usage(stdout);
		return CTL_OK;
	}
	return ctl_exec("", objects, argc - i, argv + i);
}
