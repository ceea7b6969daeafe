/* SPDX-License-Identifier: MIT */
/*
 * ctl_conn.c - what the processes running r2cc on this node publish
 * (policy/status.c): `conn show [pid PID]` lists their QPs with counters,
 * `metrics` prints the same in Prometheus text format. Records left by
 * processes that are gone are never shown (and removed when ours).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "policy.h"

static const char *type_name(uint32_t t)
{
	return t == 2 ? "RC" : t == 3 ? "UC" : t == 4 ? "UD" : "other";
}

static uint64_t sum_posted(const struct r2cc_qp_stats *st)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < R2CC_ST_NR; i++)
		n += st->posted[i];
	return n;
}

static void show_proc(const struct r2cc_status_snap *s)
{
	uint32_t i;

	for (i = 0; i < s->nqps; i++) {
		const struct r2cc_status_qp *q = &s->qps[i];

		pr_begin_obj();
		pr_int("pid", "pid %-7lld", s->hdr.pid);
		pr_str("comm", " %-15s", s->hdr.comm);
		pr_int("qpn", " qpn %-6lld", q->qpn);
		pr_str("dev", " %s", q->dev);
		pr_str("type", " %s", type_name(q->type));
		pr_int("rail", " rail %lld", q->rail);
		pr_int("on_rail", " on rail %lld",
		       q->prot == R2CC_PROT_MIGRATED && q->backup_rail >= 0 ?
			       q->backup_rail :
			       q->rail);
		pr_str("protection", " %s", r2cc_prot_state_name(q->prot));
		if (q->prot == R2CC_PROT_NONE)
			pr_str("unprotected", " (%s)",
			       r2cc_unprot_name(q->unprot < R2CC_UNPROT_N ?
							q->unprot :
							R2CC_UNPROT_PENDING));
		pr_int("peer_qpn", " peer qpn %lld", q->peer_qpn);
		if (q->backup_rail >= 0) {
			pr_int("backup_rail", " backup rail %lld",
			       q->backup_rail);
			pr_int("backup_qpn", " qpn %lld", q->backup_qpn);
		}
		pr_int("failovers", " failovers %lld", (long long)q->failovers);
		pr_int("moves", " moves %lld", (long long)q->moves);
		pr_int("posted", " posted %lld", (long long)sum_posted(&q->st));
		pr_int("posted_recv", " recv %lld",
		       (long long)q->st.posted_recv);
		pr_int("polled", " polled %lld", (long long)q->st.polled);
		pr_int("polled_err", " errors %lld",
		       (long long)q->st.polled_err);
		pr_int("bytes_posted", " bytes %lld",
		       (long long)q->st.bytes_posted);
		pr_end_obj();
		pr_newline();
	}
}

static int show(int argc, char **argv)
{
	long pid = ctl_parse_pid(argc, argv);
	struct r2cc_status_snap *v;
	int n, i;

	if (pid < 0) {
		fprintf(stderr, "usage: r2cc-ctl conn show [pid PID]\n");
		return CTL_ERR;
	}
	n = ctl_collect(pid, &v);
	if (n <= 0) {
		free(v);
		return ctl_none(n, pid);
	}
	pr_begin_list();
	for (i = 0; i < n; i++)
		show_proc(&v[i]);
	pr_end_list();
	ctl_release(v, n);
	return CTL_OK;
}

static const struct ctl_cmd cmds[] = {
	{ NULL, show, "" },
	{ "show", show, "[pid PID]  the QPs of processes running r2cc" },
	{ 0 },
};

int conn_main(int argc, char **argv)
{
	return ctl_exec("conn", cmds, argc, argv);
}

/* A Prometheus label value: backslash, double quote and newline escaped. */
static void label(const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			printf("\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", stdout);
		else
			putchar(*s);
	}
}

static void qp_labels(const struct r2cc_status_snap *s,
		      const struct r2cc_status_qp *q)
{
	printf("{pid=\"%d\",comm=\"", s->hdr.pid);
	label(s->hdr.comm);
	printf("\",dev=\"");
	label(q->dev);
	printf("\",qpn=\"%u\"", q->qpn);
}

static const char *const ops[R2CC_ST_NR] = { "send",	  "send_imm", "write",
					     "write_imm", "read",     "atomic",
					     "other" };

/* Prometheus wants each family's samples together: one pass per family. */
static void fam_posted(const struct r2cc_status_snap *s)
{
	uint32_t i, j;

	for (i = 0; i < s->nqps; i++)
		for (j = 0; j < R2CC_ST_NR; j++) {
			printf("r2cc_wr_posted_total");
			qp_labels(s, &s->qps[i]);
			printf(",op=\"%s\"} %llu\n", ops[j],
			       (unsigned long long)s->qps[i].st.posted[j]);
		}
}

static void fam_recv(const struct r2cc_status_snap *s)
{
	uint32_t i;

	for (i = 0; i < s->nqps; i++) {
		printf("r2cc_recv_posted_total");
		qp_labels(s, &s->qps[i]);
		printf("} %llu\n",
		       (unsigned long long)s->qps[i].st.posted_recv);
	}
}

static void fam_bytes(const struct r2cc_status_snap *s)
{
	uint32_t i;

	for (i = 0; i < s->nqps; i++) {
		printf("r2cc_wr_bytes_posted_total");
		qp_labels(s, &s->qps[i]);
		printf("} %llu\n",
		       (unsigned long long)s->qps[i].st.bytes_posted);
	}
}

static void fam_completions(const struct r2cc_status_snap *s)
{
	uint32_t i;

	for (i = 0; i < s->nqps; i++) {
		const struct r2cc_qp_stats *st = &s->qps[i].st;

		printf("r2cc_completions_total");
		qp_labels(s, &s->qps[i]);
		printf(",status=\"success\"} %llu\n",
		       (unsigned long long)(st->polled - st->polled_err));
		printf("r2cc_completions_total");
		qp_labels(s, &s->qps[i]);
		printf(",status=\"error\"} %llu\n",
		       (unsigned long long)st->polled_err);
	}
}

static void rail_labels(const struct r2cc_status_snap *s,
			const struct r2cc_status_rail *r)
{
	printf("{pid=\"%d\",dev=\"", s->hdr.pid);
	label(r->dev);
	printf("\"}");
}

static void fam_rail_up(const struct r2cc_status_snap *s)
{
	uint32_t i;

	for (i = 0; i < s->hdr.nrails; i++)
		if (s->rails[i].dev[0]) {
			printf("r2cc_rail_up");
			rail_labels(s, &s->rails[i]);
			printf(" %d\n", s->rails[i].state == R2CC_RAIL_UP);
		}
}

static void fam_rail_downs(const struct r2cc_status_snap *s)
{
	uint32_t i;

	for (i = 0; i < s->hdr.nrails; i++)
		if (s->rails[i].dev[0]) {
			printf("r2cc_rail_down_events_total");
			rail_labels(s, &s->rails[i]);
			printf(" %llu\n",
			       (unsigned long long)s->rails[i].downs);
		}
}

static void fam_protected(const struct r2cc_status_snap *s)
{
	uint32_t i;

	for (i = 0; i < s->nqps; i++) {
		printf("r2cc_qp_protected");
		qp_labels(s, &s->qps[i]);
		printf("} %d\n", s->qps[i].prot == R2CC_PROT_READY ||
					 s->qps[i].prot == R2CC_PROT_MIGRATED);
	}
}

static void fam_unprotected(const struct r2cc_status_snap *s)
{
	uint64_t n[R2CC_UNPROT_N] = { 0 };
	uint32_t i, why;

	for (i = 0; i < s->nqps; i++) {
		why = s->qps[i].unprot;
		if (s->qps[i].prot == R2CC_PROT_NONE)
			n[why < R2CC_UNPROT_N ? why : R2CC_UNPROT_PENDING]++;
	}
	for (i = 0; i < R2CC_UNPROT_N; i++) {
		printf("r2cc_qps_unprotected{pid=\"%d\",comm=\"", s->hdr.pid);
		label(s->hdr.comm);
		printf("\",reason=\"%s\"} %llu\n", r2cc_unprot_name(i),
		       (unsigned long long)n[i]);
	}
}

static void fam_failovers(const struct r2cc_status_snap *s)
{
	uint32_t i;

	for (i = 0; i < s->nqps; i++) {
		printf("r2cc_failovers_total");
		qp_labels(s, &s->qps[i]);
		printf("} %llu\n", (unsigned long long)s->qps[i].failovers);
	}
}

static void fam_refused(const struct r2cc_status_snap *s)
{
	unsigned int i;

	for (i = 0; i < R2CC_REFUSE_N; i++) {
		printf("r2cc_refused_total{pid=\"%d\",comm=\"", s->hdr.pid);
		label(s->hdr.comm);
		printf("\",reason=\"%s\"} %llu\n", r2cc_refusal_name(i),
		       (unsigned long long)s->hdr.refused[i]);
	}
}

static void fam_ctrl(const struct r2cc_status_snap *s, bool msgs)
{
	static const char *const dir[] = { "out", "in" };
	static const int what[2][2] = {
		{ R2CC_CTRL_FRAMES_OUT, R2CC_CTRL_FRAMES_IN },
		{ R2CC_CTRL_MSGS_OUT, R2CC_CTRL_MSGS_IN },
	};
	int d;

	for (d = 0; d < 2; d++) {
		printf("%s{pid=\"%d\",comm=\"",
		       msgs ? "r2cc_ctrl_messages_total" :
			      "r2cc_ctrl_frames_total",
		       s->hdr.pid);
		label(s->hdr.comm);
		printf("\",dir=\"%s\"} %llu\n", dir[d],
		       (unsigned long long)s->hdr.ctrl[what[msgs][d]]);
	}
}

static void fam_ctrl_frames(const struct r2cc_status_snap *s)
{
	fam_ctrl(s, false);
}

static void fam_ctrl_msgs(const struct r2cc_status_snap *s)
{
	fam_ctrl(s, true);
}

static const struct family {
	const char *name, *type, *help;
	void (*fn)(const struct r2cc_status_snap *s);
} families[] = {
	{ "r2cc_wr_posted_total", "counter",
	  "Work requests posted through r2cc, by QP and opcode.", fam_posted },
	{ "r2cc_wr_bytes_posted_total", "counter",
	  "Bytes of the posted work requests (SGE lengths), by QP.",
	  fam_bytes },
	{ "r2cc_recv_posted_total", "counter",
	  "Receive work requests posted through r2cc, by QP.", fam_recv },
	{ "r2cc_completions_total", "counter",
	  "Completions polled through r2cc, by QP and status.",
	  fam_completions },
	{ "r2cc_qp_protected", "gauge",
	  "1 when the QP has a connected backup (or runs on it).",
	  fam_protected },
	{ "r2cc_qps_unprotected", "gauge",
	  "QPs r2cc runs unprotected, by the reason it gave up on each.",
	  fam_unprotected },
	{ "r2cc_failovers_total", "counter",
	  "Times the QP moved to its backup.", fam_failovers },
	{ "r2cc_rail_up", "gauge", "1 when the process sees the rail up.",
	  fam_rail_up },
	{ "r2cc_rail_down_events_total", "counter",
	  "Times the process saw the rail go down.", fam_rail_downs },
	{ "r2cc_refused_total", "counter",
	  "What r2cc refused past one of its budgets, by reason.",
	  fam_refused },
	{ "r2cc_ctrl_frames_total", "counter",
	  "Control channel frames (one MAC each), by direction.",
	  fam_ctrl_frames },
	{ "r2cc_ctrl_messages_total", "counter",
	  "Control messages those frames carried, by direction.",
	  fam_ctrl_msgs },
};

int metrics_main(int argc, char **argv)
{
	struct r2cc_status_snap *v;
	size_t f;
	int n, i;

	(void)argv;
	if (argc) {
		fprintf(stderr, "usage: r2cc-ctl metrics\n");
		return CTL_ERR;
	}
	n = ctl_collect(0, &v);
	if (n <= 0) {
		free(v);
		return ctl_none(n, 0);
	}
	for (f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
		printf("# HELP %s %s\n# TYPE %s %s\n", families[f].name,
		       families[f].help, families[f].name, families[f].type);
		for (i = 0; i < n; i++)
			families[f].fn(&v[i]);
	}
	ctl_release(v, n);
	return CTL_OK;
}
