/* SPDX-License-Identifier: MIT */
/*
 * ctl_watch.c - r2cc-ctl watch [-i SECONDS] [-n COUNT] [DEV...]: every
 * interval, one line (or one JSON object per interval) per rail: its state,
 * traffic rates from the device's own counters in sysfs, and how many QPs
 * of the processes running r2cc run on it and stand by on it as backups.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "policy.h"

#define MAX_RAILS 256
#define MAX_FILTERS 32

/* The counters sampled; each may be missing (bit clear in have). */
enum {
	C_TX_BYTES,
	C_RX_BYTES,
	C_TX_PKTS,
	C_RX_PKTS,
	C_ROCE_TX,
	C_ROCE_RX,
	C_NR
};

enum src { SRC_NONE, SRC_NETDEV, SRC_PORT };

struct wrail {
	struct r2cc_rail_info info;
	bool present; /* in the last scan */
	enum src src;
	uint64_t cur[C_NR], prev[C_NR];
	unsigned int have, had; /* bit per counter: in cur, in prev */
	unsigned int qps, backups;
};

static const char *sysroot(void)
{
	const char *root = getenv("R2CC_SYSFS_ROOT");

	return root && *root ? root : "/sys";
}

/* A decimal counter file; false if missing or not a number. */
static bool read_u64(const char *path, uint64_t *val)
{
	char buf[32], *end;
	ssize_t len;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return false;
	buf[len] = '\0';
	errno = 0;
	*val = strtoull(buf, &end, 10);
	return !errno && end != buf && (*end == '\n' || !*end);
}

static void read_ctr(struct wrail *w, int c, const char *path, uint64_t scale)
{
	if (read_u64(path, &w->cur[c])) {
		w->cur[c] *= scale;
		w->have |= 1U << c;
	}
}

/* ports/N/counters counts data in 4-octet words (IB spec, PortCounters) */
static const char *const port_ctr[C_NR] = {
	"counters/port_xmit_data",    "counters/port_rcv_data",
	"counters/port_xmit_packets", "counters/port_rcv_packets",
	"hw_counters/sent_pkts",      "hw_counters/rcvd_pkts",
};
static const char *const net_ctr[C_ROCE_TX] = {
	"tx_bytes",
	"rx_bytes",
	"tx_packets",
	"rx_packets",
};

static void read_port(struct wrail *w, int c)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports/%u/%s",
		 sysroot(), w->info.dev, w->info.port, port_ctr[c]);
	read_ctr(w, c, path, c <= C_RX_BYTES ? 4 : 1);
}

static void read_net(struct wrail *w, int c)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/class/net/%s/statistics/%s", sysroot(),
		 w->info.netdev, net_ctr[c]);
	read_ctr(w, c, path, 1);
}

/*
 * Bytes and packets from the port's own counters where the device has
 * them (InfiniBand, mlx5 RoCE: RDMA traffic bypasses the netdev there),
 * else from the netdev (rxe, whose RoCE packets go through it); RoCE
 * packets from hw_counters where the driver has them (rxe).
 */
static void sample_rail(struct wrail *w)
{
	int c;

	w->have = 0;
	w->src = SRC_NONE;
	if (!w->present)
		return;
	read_port(w, C_TX_BYTES);
	if (w->have) {
		w->src = SRC_PORT;
		for (c = C_RX_BYTES; c < C_ROCE_TX; c++)
			read_port(w, c);
	} else if (w->info.netdev[0]) {
		for (c = 0; c < C_ROCE_TX; c++)
			read_net(w, c);
		if (w->have)
			w->src = SRC_NETDEV;
	}
	read_port(w, C_ROCE_TX);
	read_port(w, C_ROCE_RX);
}

static bool is_rail(const struct r2cc_rail_info *a,
		    const struct r2cc_rail_info *b)
{
	return a->port == b->port && !strcmp(a->dev, b->dev);
}

/* Rescan sysfs (the port states) and read every rail's counters. A rail
 * gone since the start stays in the list, not present. */
static void sample(struct wrail *w, int n)
{
	static struct r2cc_rail_info scan[MAX_RAILS];
	int m, i, j;

	m = r2cc_rail_scan(sysroot(), NULL, scan, MAX_RAILS);
	for (i = 0; i < n; i++) {
		w[i].present = false;
		for (j = 0; j < m && j < MAX_RAILS; j++)
			if (is_rail(&w[i].info, &scan[j])) {
				w[i].info = scan[j];
				w[i].present = true;
			}
		sample_rail(&w[i]);
	}
}

/* The rail @dev names (port 1: the one r2cc uses), or NULL. */
static struct wrail *rail_of(struct wrail *w, int n, const char *dev)
{
	int i;

	for (i = 0; i < n; i++)
		if (w[i].info.port == 1 && !strcmp(w[i].info.dev, dev))
			return &w[i];
	return NULL;
}

static const char *rail_dev(const struct r2cc_status_snap *s, int32_t rail)
{
	if (rail < 0 || (uint32_t)rail >= s->hdr.nrails ||
	    rail >= R2CC_STATUS_RAILS || !s->rails[rail].dev[0])
		return NULL;
	return s->rails[rail].dev;
}

/* Where each QP runs (a migrated one: on its backup rail) and where its
 * backup waits (binding or ready). */
static void count_qp(struct wrail *w, int n, const struct r2cc_status_snap *s,
		     const struct r2cc_status_qp *q)
{
	const char *run = q->dev, *bak = NULL;
	struct wrail *r;

	if (q->prot == R2CC_PROT_MIGRATED)
		run = rail_dev(s, q->backup_rail);
	else if (q->prot == R2CC_PROT_BINDING || q->prot == R2CC_PROT_READY)
		bak = rail_dev(s, q->backup_rail);
	if (run && (r = rail_of(w, n, run)))
		r->qps++;
	if (bak && (r = rail_of(w, n, bak)))
		r->backups++;
}

static void count_qps(struct wrail *w, int n)
{
	struct r2cc_status_snap *v;
	uint32_t j;
	int i, np;

	for (i = 0; i < n; i++)
		w[i].qps = w[i].backups = 0;
	np = ctl_collect(0, &v);
	for (i = 0; i < np; i++)
		for (j = 0; j < v[i].nqps; j++)
			count_qp(w, n, &v[i], &v[i].qps[j]);
	if (np > 0)
		ctl_release(v, np);
	else
		free(v);
}

/* The change of counter @c over the interval; false if unknown (missing
 * in one sample, or gone backwards: the device was recreated). */
static bool delta(const struct wrail *w, int c, uint64_t *d)
{
	if (!(w->have & w->had & (1U << c)) || w->cur[c] < w->prev[c])
		return false;
	*d = w->cur[c] - w->prev[c];
	return true;
}

static const struct field {
	const char *key, *rate_key, *rate_fmt;
	double unit;
} fields[C_NR] = {
	{ "tx_bytes", "tx_MB_per_s", " tx=%.2fMB/s", 1e6 },
	{ "rx_bytes", "rx_MB_per_s", " rx=%.2fMB/s", 1e6 },
	{ "tx_pkts", "tx_pkts_per_s", " txpps=%.0f", 1 },
	{ "rx_pkts", "rx_pkts_per_s", " rxpps=%.0f", 1 },
	{ "roce_tx_pkts", "roce_tx_pkts_per_s", " roce_txpps=%.0f", 1 },
	{ "roce_rx_pkts", "roce_rx_pkts_per_s", " roce_rxpps=%.0f", 1 },
};

static void print_rail(const struct wrail *w, double t, double dt)
{
	static const char *const src[] = { NULL, "netdev", "port_counters" };
	const struct r2cc_rail_info *r = &w->info;
	char name[R2CC_DEVNAME_MAX + 8], fmt[32];
	uint64_t d;
	int c;

	if (r->port == 1)
		snprintf(name, sizeof(name), "%s", r->dev);
	else
		snprintf(name, sizeof(name), "%s/%u", r->dev, r->port);
	if (!ctl.json)
		printf("t=%.1fs ", t);
	pr_begin_obj();
	pr_str("rail", "%s", name);
	pr_str("state", " %s",
	       !w->present   ? "gone" :
	       r->state == 4 ? "up" :
			       "down");
	if (ctl.json) {
		pr_str("dev", "", r->dev);
		pr_int("port", "", r->port);
		pr_str("netdev", "", r->netdev[0] ? r->netdev : NULL);
		pr_str("source", "", src[w->src]);
	}
	for (c = 0; c < C_NR; c++) {
		if (!delta(w, c, &d)) {
			snprintf(fmt, sizeof(fmt), "%.*s=%%s",
				 (int)(strchr(fields[c].rate_fmt, '=') -
				       fields[c].rate_fmt),
				 fields[c].rate_fmt);
			if (ctl.json)
				pr_str(fields[c].key, "", NULL);
			pr_str(fields[c].rate_key, fmt, NULL);
			continue;
		}
		if (ctl.json)
			pr_int(fields[c].key, "", (long long)d);
		pr_float(fields[c].rate_key, fields[c].rate_fmt,
			 (double)d / dt / fields[c].unit);
	}
	pr_int("qps", " qps=%lld", w->qps);
	pr_int("qps_backup", " backups=%lld", w->backups);
	pr_end_obj();
	pr_newline();
}

static void print_interval(const struct wrail *w, int n, double t, double dt)
{
	struct timespec now;
	int i;

	clock_gettime(CLOCK_REALTIME, &now);
	pr_begin_obj();
	if (ctl.json) {
		pr_secs("t", "", t);
		pr_secs("dt", "", dt);
		pr_int("time_ms", "",
		       (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
	}
	pr_begin_list_key("rails");
	for (i = 0; i < n; i++)
		print_rail(&w[i], t, dt);
	pr_end_list();
	pr_end_obj();
	fflush(stdout);
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleep until @deadline (CLOCK_MONOTONIC seconds); false if SIGINT or
 * SIGTERM (blocked, so none is lost between two waits) came first. */
static bool wait_until(const sigset_t *set, double deadline)
{
	struct timespec ts;
	double left;

	while ((left = deadline - mono()) > 0) {
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		if (sigtimedwait(set, NULL, &ts) > 0)
			return false;
	}
	return true;
}

static int run(struct wrail *w, int n, double interval, unsigned long count)
{
	double t0, tprev, now;
	unsigned long k;
	sigset_t set;
	int i;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	t0 = tprev = mono(); /* when the counters are read, for dt */
	sample(w, n);
	for (k = 1; !count || k <= count; k++) {
		for (i = 0; i < n; i++) {
			memcpy(w[i].prev, w[i].cur, sizeof(w[i].cur));
			w[i].had = w[i].have;
		}
		if (!wait_until(&set, t0 + (double)k * interval))
			break;
		now = mono();
		sample(w, n);
		count_qps(w, n);
		print_interval(w, n, now - t0, now - tprev);
		tprev = now;
	}
	return CTL_OK;
}

static int usage(FILE *f)
{
	fprintf(f,
		"usage: r2cc-ctl watch [-i SECONDS] [-n COUNT] [DEV[/PORT]...]\n"
		"  -i SECONDS  interval, 0.1 to 3600 (default 1)\n"
		"  -n COUNT    stop after COUNT intervals (default: "
		"until SIGINT)\n");
	return f == stdout ? CTL_OK : CTL_ERR;
}

static bool wanted(const struct r2cc_rail_info *r, char **filter, int nf)
{
	char name[R2CC_DEVNAME_MAX + 8];
	int i;

	snprintf(name, sizeof(name), "%.*s/%u", (int)sizeof(r->dev) - 1, r->dev,
		 r->port);
	for (i = 0; i < nf; i++)
		if (!strcmp(filter[i], r->dev) || !strcmp(filter[i], name))
			return true;
	return !nf;
}

/* The rails to watch, in *@w: how many, or an exit code (negated). */
static int pick(struct wrail **out, char **filter, int nf)
{
	static struct r2cc_rail_info scan[MAX_RAILS];
	struct wrail *w;
	int n, i, j, m = 0;

	n = r2cc_rail_scan(sysroot(), NULL, scan, MAX_RAILS);
	if (n == 0 || n == -ENOENT) {
		fprintf(stderr,
			"r2cc-ctl: no RDMA devices on this machine "
			"(nothing in %s/class/infiniband)\n",
			sysroot());
		return -CTL_NODEV;
	}
	if (n < 0) {
		fprintf(stderr, "r2cc-ctl: cannot list the rails: %s\n",
			strerror(-n));
		return -CTL_ERR;
	}
	n = n < MAX_RAILS ? n : MAX_RAILS;
	for (i = 0; i < nf; i++) {
		for (j = 0; j < n && !wanted(&scan[j], filter + i, 1); j++)
			;
		if (j == n) {
			fprintf(stderr, "r2cc-ctl: rail %s: No such device\n",
				filter[i]);
			return -CTL_ERR;
		}
	}
	w = calloc((size_t)n, sizeof(*w));
	if (!w) {
		fprintf(stderr, "r2cc-ctl: out of memory\n");
		return -CTL_ERR;
	}
	for (i = 0; i < n; i++)
		if (wanted(&scan[i], filter, nf))
			w[m++].info = scan[i];
	*out = w;
	return m;
}

/* -i and -n values; false (after saying why) if out of bounds. */
static bool parse_opt(const char *opt, const char *val, double *interval,
		      unsigned long *count)
{
	char *end;

	errno = 0;
	if (!strcmp(opt, "-i")) {
		*interval = strtod(val, &end);
		if (!errno && end != val && !*end && *interval >= 0.1 &&
		    *interval <= 3600)
			return true;
	} else {
		*count = strtoul(val, &end, 10);
		if (!errno && end != val && !*end && val[0] != '-' &&
		    *count > 0 && *count <= 1000000000UL)
			return true;
	}
	fprintf(stderr, "r2cc-ctl: watch: bad %s `%s'\n", opt, val);
	return false;
}

int watch_main(int argc, char **argv)
{
	char *filter[MAX_FILTERS];
	unsigned long count = 0;
	double interval = 1;
	struct wrail *w;
	int i, nf = 0, n, ret;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "help") || !strcmp(argv[i], "-h") ||
		    !strcmp(argv[i], "--help"))
			return usage(stdout);
		if (!strcmp(argv[i], "-i") || !strcmp(argv[i], "-n")) {
			if (i + 1 == argc) {
				fprintf(stderr,
					"r2cc-ctl: watch: %s needs a value\n",
					argv[i]);
				return usage(stderr);
			}
			if (!parse_opt(argv[i], argv[i + 1], &interval, &count))
				return usage(stderr);
			i++;
		} else if (argv[i][0] == '-') {
			fprintf(stderr,
				"r2cc-ctl: watch: unknown option `%s'\n",
				argv[i]);
			return usage(stderr);
		} else if (nf < MAX_FILTERS) {
			filter[nf++] = argv[i];
		} else {
			fprintf(stderr, "r2cc-ctl: watch: too many rails\n");
			return usage(stderr);
		}
	}
	n = pick(&w, filter, nf);
	if (n < 0)
		return -n;
	ret = run(w, n, interval, count);
	free(w);
	return ret;
}
