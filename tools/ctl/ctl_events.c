/* SPDX-License-Identifier: MIT */
/*
 * ctl_events.c - r2cc-ctl events [pid PID]: what happened to the rails and
 * to the connections (failovers, failbacks, failovers that failed) as the
 * processes running r2cc saw it (their last 64 events each), oldest first,
 * with wall-clock time and cause.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "policy.h"

struct row {
	const struct r2cc_status_snap *s;
	const struct r2cc_status_event *e;
};

static int by_time(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	return x->e->realtime_ns < y->e->realtime_ns ? -1 :
	       x->e->realtime_ns > y->e->realtime_ns ? 1 :
						       0;
}

/* The device name of rail @i of @s, "" if unknown. */
static const char *rail_dev(const struct r2cc_status_snap *s, int32_t i)
{
	return i >= 0 && i < (int32_t)s->hdr.nrails ? s->rails[i].dev : "";
}

/* A QP's failover, failback or failed failover: which QP, from where to
 * where, why, and (a failover) what the replay re-sent. */
static void print_qp(const struct row *r)
{
	const struct r2cc_status_event *e = r->e;

	pr_int("qpn", " qpn %lld", e->qpn);
	pr_int("rail", " rail %lld", e->rail);
	pr_str("dev", " %s", rail_dev(r->s, e->rail));
	pr_int("to_rail", " -> rail %lld", e->to_rail);
	pr_str("to_dev", " %s", rail_dev(r->s, e->to_rail));
	pr_str("cause", " (%s)", r2cc_health_cause_name(e->cause));
	if (e->kind == R2CC_EV_FAILOVER_FAILED || e->kind == R2CC_EV_STANDBY)
		return;
	pr_int("replayed_wrs", " replayed %lld WRs", (long long)e->wrs);
	pr_int("replayed_bytes", " %lld bytes", (long long)e->bytes);
}

static void print_row(const struct row *r)
{
	time_t sec = (time_t)(r->e->realtime_ns / 1000000000ULL);
	char when[64];
	struct tm tm;

	gmtime_r(&sec, &tm);
	snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec,
		 (unsigned int)(r->e->realtime_ns / 1000000 % 1000));
	pr_begin_obj();
	pr_str("time", "%s", when);
	pr_int("pid", " pid %lld", r->s->hdr.pid);
	pr_str("comm", " %s", r->s->hdr.comm);
	pr_str("event", " %s", r2cc_status_ev_kind_name(r->e->kind));
	if (r->e->kind == R2CC_EV_RAIL) {
		pr_int("rail", " rail %lld", r->e->rail);
		pr_str("dev", " %s", rail_dev(r->s, r->e->rail));
		pr_str("state", " %s", r2cc_rail_state_name(r->e->state));
		pr_str("cause", " (%s)", r2cc_health_cause_name(r->e->cause));
	} else {
		print_qp(r);
	}
	pr_end_obj();
	pr_newline();
}

static int show(int argc, char **argv)
{
	long pid = ctl_parse_pid(argc, argv);
	struct r2cc_status_snap *v;
	struct row *rows;
	size_t nrows = 0, i;
	int n, p;

	if (pid < 0) {
		fprintf(stderr, "usage: r2cc-ctl events [show] [pid PID]\n");
		return CTL_ERR;
	}
	n = ctl_collect(pid, &v);
	if (n <= 0) {
		free(v);
		return ctl_none(n, pid);
	}
	rows = calloc((size_t)n * R2CC_STATUS_EVENTS, sizeof(*rows));
	if (!rows) {
		ctl_release(v, n);
		fprintf(stderr, "r2cc-ctl: out of memory\n");
		return CTL_ERR;
	}
	for (p = 0; p < n; p++)
		for (i = 0; i < v[p].nev; i++)
			rows[nrows++] = (struct row){ &v[p], &v[p].ev[i] };
	qsort(rows, nrows, sizeof(*rows), by_time);
	pr_begin_list();
	for (i = 0; i < nrows; i++)
		print_row(&rows[i]);
	pr_end_list();
	free(rows);
	ctl_release(v, n);
	return CTL_OK;
}

static const struct ctl_cmd cmds[] = {
	{ NULL, show, "" },
	{ "show", show,
	  "[pid PID]  rail changes and QP failovers, oldest first" },
	{ 0 },
};

int events_main(int argc, char **argv)
{
	/* "events pid 42" works too: no command word before the filter. */
	if (argc >= 1 && !strcmp(argv[0], "pid"))
		return show(argc, argv);
	return ctl_exec("events", cmds, argc, argv);
}
