/* SPDX-License-Identifier: MIT */
/*
 * ctl_fault.c - r2cc-ctl fault { drop | clear | show }: the grammar of the
 * fault injector, RAIL to netdev, and its output. The kernel side (tc
 * program, pinned maps) is fault_tc.c, or fault_none.c without libbpf.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "fault.h"
#include "policy.h"

#define MAX_RAILS 256
#define MAX_FAULTS 64
#define NSEC 1000000000ULL
#define FOR_MAX_S 864000.0 /* ten days */

static const char drop_usage[] =
	"usage: r2cc-ctl fault drop RAIL [--percent P] [--after N] [--qpn Q]\n"
	"                          [--for SECONDS] [--dir ingress|egress|both]\n"
	"  RAIL           RDMA device (rxe0, mlx5_1/1) of a RoCE rail, or netdev\n"
	"  --percent P    drop P% of the matching packets (0 < P <= 100;\n"
	"                 default 100)\n"
	"  --after N      let the first N matching packets through (default 0)\n"
	"  --qpn Q        match only BTH destination QP Q (0..0xffffff)\n"
	"  --for SECONDS  stop dropping SECONDS after now (default: never)\n"
	"  --dir D        hooks: ingress, egress or both (default both)\n"
	"Matches RoCEv2 (UDP port 4791, IPv4/IPv6). One fault per netdev: a\n"
	"second drop is refused until `r2cc-ctl fault clear RAIL'.\n";

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* bpf_ktime_get_ns()'s clock */
	return (uint64_t)ts.tv_sec * NSEC + (uint64_t)ts.tv_nsec;
}

static const char *sysfs_root(void)
{
	const char *root = getenv("R2CC_SYSFS_ROOT");

	return root && *root ? root : "/sys";
}

static int bad(const char *opt, const char *val, const char *why)
{
	fprintf(stderr, "r2cc-ctl: fault: bad %s `%s': %s\n", opt, val, why);
	return CTL_ERR;
}

/* A whole decimal number, no sign; false on garbage or overflow. */
static bool parse_u64(const char *s, int base, uint64_t *v)
{
	char *end;

	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return false;
	errno = 0;
	*v = strtoull(s, &end, base);
	return !errno && !*end;
}

static bool parse_real(const char *s, double lo, double hi, double *v)
{
	char *end;

	if (!*s || *s == ' ')
		return false;
	errno = 0;
	*v = strtod(s, &end);
	return !errno && !*end && isfinite(*v) && *v > lo && *v <= hi;
}

/* --opt VALUE or --opt=VALUE: the value, or NULL (and *i moves on). */
static const char *opt_val(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);

	if (!strncmp(argv[*i], name, n) && argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (strcmp(argv[*i], name))
		return NULL;
	if (*i + 1 >= argc) {
		fprintf(stderr, "r2cc-ctl: fault: %s needs a value\n", name);
		return "";
	}
	return argv[++*i];
}

static int parse_opt(int argc, char **argv, int *i, struct r2cc_fault_cfg *c)
{
	const char *v;
	uint64_t u;
	double d;

	if ((v = opt_val(argc, argv, i, "--percent"))) {
		if (!parse_real(v, 0, 100, &d) || lround(d * 10000) < 1)
			return bad("--percent", v, "want 0 < P <= 100");
		c->ppm = (uint32_t)lround(d * 10000);
	} else if ((v = opt_val(argc, argv, i, "--after"))) {
		if (!parse_u64(v, 10, &u) || u > (1ULL << 62))
			return bad("--after", v, "want a packet count");
		c->after = u;
	} else if ((v = opt_val(argc, argv, i, "--qpn"))) {
		if (!parse_u64(v, 0, &u) || u > R2CC_FAULT_QPN_MAX)
			return bad("--qpn", v, "want 0..0xffffff (24 bits)");
		c->qpn = (uint32_t)u;
	} else if ((v = opt_val(argc, argv, i, "--for"))) {
		if (!parse_real(v, 0, FOR_MAX_S, &d))
			return bad("--for", v, "want 0 < SECONDS <= 864000");
		c->deadline_ns = now_ns() + (uint64_t)(d * NSEC);
	} else if ((v = opt_val(argc, argv, i, "--dir"))) {
		c->flags &= ~(R2CC_FAULT_F_INGRESS | R2CC_FAULT_F_EGRESS);
		if (!strcmp(v, "ingress") || !strcmp(v, "both"))
			c->flags |= R2CC_FAULT_F_INGRESS;
		if (!strcmp(v, "egress") || !strcmp(v, "both"))
			c->flags |= R2CC_FAULT_F_EGRESS;
		if (!c->flags)
			return bad("--dir", v, "want ingress, egress or both");
	} else {
		fprintf(stderr, "r2cc-ctl: fault: unknown option `%s'\n%s",
			argv[*i], drop_usage);
		return CTL_ERR;
	}
	return v && !*v ? CTL_ERR : CTL_OK;
}

static bool rail_is(const struct r2cc_rail_info *r, const char *name)
{
	char full[R2CC_DEVNAME_MAX + 8];

	snprintf(full, sizeof(full), "%.63s/%u", r->dev, r->port);
	return !strcmp(name, r->dev) || !strcmp(name, full);
}

static bool ifname_ok(const char *s)
{
	return *s && strlen(s) < IFNAMSIZ && !strchr(s, '/') &&
	       strcmp(s, ".") && strcmp(s, "..");
}

/*
 * RAIL -> netdev: an RDMA device of the inventory (it must be RoCE), else
 * a netdev name, which must exist (@must_exist, for drop) in sysfs.
 * Prints the error; returns an exit code.
 */
static int resolve(const char *rail, bool must_exist, char *netdev)
{
	static struct r2cc_rail_info rails[MAX_RAILS];
	char path[PATH_MAX];
	int n, i;

	n = r2cc_rail_scan(sysfs_root(), NULL, rails, MAX_RAILS);
	for (i = 0; i < n && i < MAX_RAILS; i++) {
		if (!rail_is(&rails[i], rail))
			continue;
		if (rails[i].link_layer == R2CC_LL_IB) {
			fprintf(stderr,
				"r2cc-ctl: fault: rail %s: not RoCE (link "
				"layer InfiniBand): the injector works on a "
				"RoCE netdev's packets only; on InfiniBand "
				"take the link down at its switch port "
				"(ibportstate SWITCH_LID PORT disable, then "
				"enable) or pull the cable\n",
				rail);
			return CTL_ERR;
		}
		if (rails[i].link_layer != R2CC_LL_ETH || !rails[i].netdev[0]) {
			fprintf(stderr,
				"r2cc-ctl: fault: rail %s: not RoCE (link "
				"layer %s, no netdev): nothing to attach to\n",
				rail,
				r2cc_link_layer_name(rails[i].link_layer));
			return CTL_ERR;
		}
		snprintf(netdev, IFNAMSIZ, "%s", rails[i].netdev);
		return CTL_OK;
	}
	snprintf(path, sizeof(path), "%s/class/net/%s", sysfs_root(), rail);
	if (ifname_ok(rail) && (!must_exist || !access(path, F_OK))) {
		snprintf(netdev, IFNAMSIZ, "%s", rail);
		return CTL_OK;
	}
	fprintf(stderr,
		"r2cc-ctl: fault: rail %s: No such device (neither an RDMA "
		"device nor a netdev)\n",
		rail);
	return CTL_ERR;
}

/* The rail whose netdev is @netdev, for show; NULL if none. */
static const char *rail_of(const char *netdev, char *buf, size_t size)
{
	static struct r2cc_rail_info rails[MAX_RAILS];
	int n, i;

	n = r2cc_rail_scan(sysfs_root(), NULL, rails, MAX_RAILS);
	for (i = 0; i < n && i < MAX_RAILS; i++) {
		if (strcmp(rails[i].netdev, netdev))
			continue;
		snprintf(buf, size, "%s/%u", rails[i].dev, rails[i].port);
		return buf;
	}
	return NULL;
}

/* One line: what failed, why, and an exit code that says which kind. */
static int fail(const char *netdev, const char *step, int err)
{
	const char *hint = "";

	if (err == -EPERM || err == -EACCES)
		hint = " (needs root: CAP_BPF and CAP_NET_ADMIN)";
	else if (err == -EEXIST)
		hint = " (one per netdev: r2cc-ctl fault clear it first)";
	else if (err == -ENOENT && !strncmp(step, "read ", 5))
		hint = " (no fault installed there)";
	fprintf(stderr, "r2cc-ctl: fault: %s: %s: %s%s\n", netdev, step,
		strerror(-err), hint);
	return err == -ENOTSUP || err == -ENOSYS ? CTL_UNSUPP : CTL_ERR;
}

static const char *dir_name(uint32_t flags)
{
	flags &= R2CC_FAULT_F_INGRESS | R2CC_FAULT_F_EGRESS;
	return flags == R2CC_FAULT_F_INGRESS ? "ingress" :
	       flags == R2CC_FAULT_F_EGRESS  ? "egress" :
					       "both";
}

static void print_fault(const char *netdev, const struct r2cc_fault_cfg *c,
			const struct r2cc_fault_stats *st)
{
	uint64_t now = now_ns();
	const char *state = "dropping";
	char rbuf[R2CC_DEVNAME_MAX + 8];

	if (st->seen < c->after)
		state = "waiting";
	else if (c->deadline_ns && now >= c->deadline_ns)
		state = "expired";
	pr_begin_obj();
	pr_str("netdev", "%-10s", netdev);
	pr_str("rail", " rail %-8s", rail_of(netdev, rbuf, sizeof(rbuf)));
	pr_str("state", " %-8s", state);
	pr_str("dir", " dir %s", dir_name(c->flags));
	pr_float("percent", " percent %g", c->ppm / 10000.0);
	pr_int("after", " after %lld", (long long)c->after);
	if (c->qpn == R2CC_FAULT_QPN_ANY)
		pr_str("qpn", " qpn %s", NULL);
	else
		pr_int("qpn", " qpn 0x%06llx", c->qpn);
	if (c->deadline_ns)
		pr_float("remaining_s", " remaining %.1fs",
			 now >= c->deadline_ns ?
				 0.0 :
				 (double)(c->deadline_ns - now) / NSEC);
	else
		pr_str("remaining_s", " remaining %s", NULL);
	pr_int("seen", " seen %lld", (long long)st->seen);
	pr_int("passed", " passed %lld", (long long)st->passed);
	pr_int("dropped", " dropped %lld", (long long)st->dropped);
	pr_end_obj();
	pr_newline();
}

static bool wants_help(int argc, char **argv)
{
	int i;

	for (i = 0; i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help") ||
		    !strcmp(argv[i], "help"))
			return true;
	return false;
}

static int drop(int argc, char **argv)
{
	struct r2cc_fault_cfg c = {
		.ppm = R2CC_FAULT_PPM_ALL,
		.qpn = R2CC_FAULT_QPN_ANY,
		.flags = R2CC_FAULT_F_INGRESS | R2CC_FAULT_F_EGRESS,
	};
	struct r2cc_fault_stats st = { 0 };
	char netdev[IFNAMSIZ];
	const char *step;
	int i, rc;

	if (wants_help(argc, argv)) {
		fputs(drop_usage, stdout);
		return CTL_OK;
	}
	if (argc < 1 || argv[0][0] == '-') {
		fputs(drop_usage, stderr);
		return CTL_ERR;
	}
	for (i = 1; i < argc; i++)
		if ((rc = parse_opt(argc, argv, &i, &c)))
			return rc;
	if ((rc = resolve(argv[0], true, netdev)))
		return rc;
	c.ifindex = if_nametoindex(netdev);
	if (!c.ifindex)
		return fail(netdev, "netdev", -errno);
	c.created_ns = now_ns();
	rc = ctl_fault_install(netdev, &c, &step);
	if (rc)
		return fail(netdev, step, rc);
	pr_begin_list();
	print_fault(netdev, &c, &st);
	pr_end_list();
	return CTL_OK;
}

static int clear(int argc, char **argv)
{
	char netdev[IFNAMSIZ];
	const char *step;
	int rc;

	if (argc != 1 || argv[0][0] == '-') {
		fprintf(stderr, "usage: r2cc-ctl fault clear RAIL\n");
		return argc == 1 && wants_help(argc, argv) ? CTL_OK : CTL_ERR;
	}
	if ((rc = resolve(argv[0], false, netdev)))
		return rc;
	rc = ctl_fault_remove(netdev, &step);
	return rc ? fail(netdev, step, rc) : CTL_OK;
}

static int show(int argc, char **argv)
{
	static char names[MAX_FAULTS][IFNAMSIZ];
	struct r2cc_fault_stats st;
	struct r2cc_fault_cfg c;
	const char *step;
	int n, i, rc;

	if (argc > 1 || (argc == 1 && argv[0][0] == '-')) {
		fprintf(stderr, "usage: r2cc-ctl fault show [RAIL]\n");
		return argc == 1 && wants_help(argc, argv) ? CTL_OK : CTL_ERR;
	}
	if (argc == 1) {
		if ((rc = resolve(argv[0], false, names[0])))
			return rc;
		n = 1;
	} else if ((n = ctl_fault_list(names, MAX_FAULTS, &step)) < 0) {
		return fail("show", step, n);
	}
	pr_begin_list();
	for (i = 0; i < n && i < MAX_FAULTS; i++) {
		rc = ctl_fault_read(names[i], &c, &st, &step);
		if (rc && (argc == 1 || rc != -ENOENT)) {
			pr_end_list();
			return fail(names[i], step, rc);
		}
		if (!rc)
			print_fault(names[i], &c, &st);
	}
	pr_end_list();
	return CTL_OK;
}

static const struct ctl_cmd cmds[] = {
	{ NULL, show, "" },
	{ "drop", drop,
	  "RAIL [--percent P] [--after N] [--qpn Q] [--for S] [--dir D]\n"
	  "           drop RoCEv2 packets on the rail's netdev (tc eBPF)" },
	{ "clear", clear, "RAIL  remove the fault from the rail" },
	{ "show", show, "[RAIL]  faults installed, with their counters" },
	{ 0 },
};

int fault_main(int argc, char **argv)
{
	return ctl_exec("fault", cmds, argc, argv);
}
