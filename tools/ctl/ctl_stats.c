/* SPDX-License-Identifier: MIT */
/*
 * ctl_stats.c - r2cc-ctl stats [show] [pid PID]: one line (or JSON object)
 * per process running r2cc, its QP slots' counters summed: work requests,
 * completions, errors, bytes, QPs by protection state, the unprotected
 * ones by the reason r2cc gave up on each, failovers, replay;
 * what it refused past a budget, by reason; its control channel's frames
 * and messages each way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "policy.h"

struct totals {
	uint64_t posted, posted_recv, polled, polled_err;
	uint64_t bytes_posted, bytes_polled;
	uint64_t failovers, replayed_wrs, replayed_bytes;
	uint64_t prot[R2CC_PROT_NSTATES + 1]; /* last: an unknown state */
	uint64_t unprot[R2CC_UNPROT_N]; /* the NONE ones by reason */
};

static void add_qp(struct totals *t, const struct r2cc_status_qp *q)
{
	const struct r2cc_qp_stats *st = &q->st;
	uint32_t prot = q->prot;
	int i;

	for (i = 0; i < R2CC_ST_NR; i++)
		t->posted += st->posted[i];
	t->posted_recv += st->posted_recv;
	t->polled += st->polled;
	t->polled_err += st->polled_err;
	t->bytes_posted += st->bytes_posted;
	t->bytes_polled += st->bytes_polled;
	t->failovers += q->failovers;
	t->replayed_wrs += q->replayed_wrs;
	t->replayed_bytes += q->replayed_bytes;
	t->prot[prot < R2CC_PROT_NSTATES ? prot : R2CC_PROT_NSTATES]++;
	if (prot == R2CC_PROT_NONE)
		t->unprot[q->unprot < R2CC_UNPROT_N ? q->unprot :
						      R2CC_UNPROT_PENDING]++;
}

/* QPs protected (a connected standby, or moved), and the unprotected by
 * reason: in JSON every reason, as text each one that counted. */
static void print_coverage(const struct totals *t)
{
	char key[48], fmt[48];
	unsigned int i;

	pr_int("protected", " protected %lld",
	       (long long)(t->prot[R2CC_PROT_READY] +
			   t->prot[R2CC_PROT_MIGRATED]));
	for (i = 0; i < R2CC_UNPROT_N; i++) {
		if (!ctl.json && !t->unprot[i])
			continue;
		snprintf(key, sizeof(key), "unprotected_%s",
			 r2cc_unprot_name(i));
		snprintf(fmt, sizeof(fmt), " (unprotected_%s %%lld)",
			 r2cc_unprot_name(i));
		pr_int(key, fmt, (long long)t->unprot[i]);
	}
}

/* JSON keys and text labels of the QP counts by protection state. */
static const char *const prot_key[R2CC_PROT_NSTATES] = {
	"qps_none", "qps_binding", "qps_ready", "qps_migrated", "qps_failed",
};
static const char *const prot_fmt[R2CC_PROT_NSTATES] = {
	" (none %lld",	  " binding %lld", " ready %lld",
	" migrated %lld", " failed %lld)",
};

/* What was refused past a budget: in JSON every reason, as text the
 * total and then each reason that counted. */
static void print_refused(const struct r2cc_status_snap *s)
{
	char key[48], fmt[48];
	long long all = 0;
	unsigned int i;

	for (i = 0; i < R2CC_REFUSE_N; i++)
		all += (long long)s->hdr.refused[i];
	if (!ctl.json)
		pr_int(NULL, " refused %lld", all);
	for (i = 0; i < R2CC_REFUSE_N; i++) {
		if (!ctl.json && !s->hdr.refused[i])
			continue;
		snprintf(key, sizeof(key), "refused_%s", r2cc_refusal_name(i));
		snprintf(fmt, sizeof(fmt), " (%s %%lld)", r2cc_refusal_name(i));
		pr_int(key, fmt, (long long)s->hdr.refused[i]);
	}
}

/* The control channel's frames and messages each way (JSON: ctrl_*). */
static void print_ctrl(const struct r2cc_status_snap *s)
{
	char key[48], fmt[48];
	unsigned int i;

	for (i = 0; i < R2CC_CTRL_CNT_N; i++) {
		snprintf(key, sizeof(key), "ctrl_%s", r2cc_ctrl_count_name(i));
		snprintf(fmt, sizeof(fmt), " ctrl_%s %%lld",
			 r2cc_ctrl_count_name(i));
		pr_int(key, fmt, (long long)s->hdr.ctrl[i]);
	}
}

static void print_proc(const struct r2cc_status_snap *s)
{
	struct totals t = { 0 };
	uint32_t i;

	for (i = 0; i < s->nqps; i++)
		add_qp(&t, &s->qps[i]);
	pr_begin_obj();
	pr_int("pid", "pid %-7lld", s->hdr.pid);
	pr_str("comm", " %-15s", s->hdr.comm);
	pr_int("qps", " qps %lld", s->nqps);
	for (i = 0; i < R2CC_PROT_NSTATES; i++)
		pr_int(prot_key[i], prot_fmt[i], (long long)t.prot[i]);
	print_coverage(&t);
	pr_int("qp_overflow", " overflow %lld", (long long)s->hdr.qp_overflow);
	print_refused(s);
	pr_int("posted", " posted %lld", (long long)t.posted);
	pr_int("posted_recv", " recv %lld", (long long)t.posted_recv);
	pr_int("polled", " completions %lld", (long long)t.polled);
	pr_int("polled_err", " errors %lld", (long long)t.polled_err);
	pr_int("bytes_posted", " bytes %lld", (long long)t.bytes_posted);
	pr_int("bytes_polled", " bytes_recv %lld", (long long)t.bytes_polled);
	pr_int("failovers", " failovers %lld", (long long)t.failovers);
	pr_int("replayed_wrs", " replayed %lld", (long long)t.replayed_wrs);
	pr_int("replayed_bytes", " replayed_bytes %lld",
	       (long long)t.replayed_bytes);
	print_ctrl(s);
	pr_end_obj();
	pr_newline();
}

static int show(int argc, char **argv)
{
	long pid = ctl_parse_pid(argc, argv);
	struct r2cc_status_snap *v;
	int n, i;

	if (pid < 0) {
		fprintf(stderr, "usage: r2cc-ctl stats [show] [pid PID]\n");
		return CTL_ERR;
	}
	n = ctl_collect(pid, &v);
	if (n <= 0) {
		free(v);
		return ctl_none(n, pid);
	}
	pr_begin_list();
	for (i = 0; i < n; i++)
		print_proc(&v[i]);
	pr_end_list();
	ctl_release(v, n);
	return CTL_OK;
}

static const struct ctl_cmd cmds[] = {
	{ NULL, show, "" },
	{ "show", show, "[pid PID]  per-process totals over its QPs" },
	{ 0 },
};

int stats_main(int argc, char **argv)
{
	/* "stats pid 42" works too: no command word before the filter. */
	if (argc >= 1 && !strcmp(argv[0], "pid"))
		return show(argc, argv);
	return ctl_exec("stats", cmds, argc, argv);
}
