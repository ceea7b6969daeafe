/* SPDX-License-Identifier: MIT */
/*
 * r2cc-gen: a verifying RC traffic generator (servers on one node, clients
 * on the other). Command line, setup sequence, failure reporting and the
 * machine-readable summary lines.
 */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gen.h"

#define GEN_MAX_REPORTED 20 /* failure messages printed, then only counted */

static const char usage_text[] =
	"usage: r2cc-gen -d DEV [OPTIONS]           (server)\n"
	"       r2cc-gen -d DEV [OPTIONS] SERVER    (client)\n"
	"Drives RC QPs with SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM and\n"
	"READ of mixed sizes (inline, one packet, many packets), 3 of 4\n"
	"unsignaled, and verifies every byte, sequence number and completion\n"
	"end to end.\n"
	"  -d, --device DEV       RDMA device (e.g. rxe0)\n"
	"  -g, --gid-index N      GID index (default 0; RoCE v2 on rxe: 1)\n"
	"  -p, --port PORT        TCP port of the server (default 18600)\n"
	"  -q, --qps N            QPs per peer, 1..1024 (default 4)\n"
	"      --peers N          client: that many servers, at ports PORT,\n"
	"                         PORT+1, ... of SERVER; server: that many\n"
	"                         clients on PORT (default 1). All QPs share\n"
	"                         one CQ; at most 32766 QPs in all\n"
	"      --window N         client: send WRs (and messages) in flight\n"
	"                         per QP, 2..32 (default 32; messages: 16)\n"
	"      --sq-size N        send WRs each QP is made for, 32..8192\n"
	"      --rq-size N        and receives, 16..8192 (default 32 and 16:\n"
	"                         what is in flight; more only sizes the\n"
	"                         queues, e.g. NCCL's 512 and 256)\n"
	"  -t, --time SECONDS     run time (default 10 unless -n is given)\n"
	"  -n, --ops N            stop after N operations (all QPs)\n"
	"  -i, --interval SECONDS progress line every SECONDS (default: none)\n"
	"  -s, --max-size BYTES   largest message or region, 1024..1048576\n"
	"                         (default 65536)\n"
	"  -I, --max-inline BYTES inline data asked for (default 128)\n"
	"      --stall-limit S    fail after S seconds without progress\n"
	"                         (default 10)\n"
	"      --retry-cnt N      RC retry count, 0..7 (default 7; on rxe 7\n"
	"                         retries forever)\n"
	"      --timeout N        RC local ACK timeout exponent, 0..31\n"
	"                         (default 14)\n"
	"      --seed N           payload seed (default 1)\n"
	"      --linger S         keep the QPs S seconds after the summary\n"
	"                         (for r2cc-ctl to read final counters)\n"
	"      --pause-at S       no new work from S seconds into the run\n"
	"      --pause-for S      for S seconds (default 0: no pause); the\n"
	"                         QPs go idle, no stall is counted (give\n"
	"                         both sides the same)\n"
	"      --srq              this side's QPs share one SRQ (each side\n"
	"                         chooses for itself)\n"
	"      --ud               also bring a UD QP to RTS on the same device\n"
	"                         context (it carries nothing): a QP r2cc\n"
	"                         cannot move, so the port's async events\n"
	"                         stay the program's\n"
	"      --hold             connect, then no work until SIGUSR1 (as a\n"
	"                         pause: no stall counted; give both sides\n"
	"                         it, and signal both)\n"
	"      --cq-ex            make the CQ with ibv_create_cq_ex and poll it\n"
	"                         with ibv_start_poll/ibv_next_poll/ibv_end_poll\n"
	"                         and the ibv_wc_read_* functions (as their man\n"
	"                         page says: rxe before rdma-core 55 overruns\n"
	"                         its CQ then, without r2cc)\n"
	"  -h, --help             this text\n"
	"The client's -q, -t, -n, -s and --seed rule: the server adopts them\n"
	"(its clients must agree on -q and -s; give each its own --seed).\n"
	"A client stops posting at SIGINT or SIGTERM and ends as at -t.\n"
	"Each side prints at the end: r2cc-gen: role=ROLE qps=Q ops=N\n"
	"bytes_verified=B mismatches=M duplicates=D losses=L order_errors=O\n"
	"longest_stall_ms=S errors=E (the client's line includes the\n"
	"server's figures), then one line per QP of what this side posted:\n"
	"r2cc-gen: qp=I qpn=N send=. send_imm=. write=. write_imm=. read=.\n"
	"recv=. bytes=B (send WRs by opcode, receives, SGE bytes of the\n"
	"send WRs), then the memory its QPs took: r2cc-gen: memory qps=Q\n"
	"heap_bytes=H pinned_bytes=P (malloc's bytes in use and the\n"
	"process's pinned memory, VmPin, grown since the device was opened,\n"
	"less the generator's own buffers), and exits 0 only if all are\n"
	"zero and something was verified.\n";

double gen_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Count a failure, keep the first message, print the first few loudly. */
void gen_fail(struct gen *g, uint64_t *counter, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	(*counter)++;
	if (!g->failed)
		snprintf(g->first, sizeof(g->first), "%s", msg);
	g->failed = 1;
	if (g->reported++ < GEN_MAX_REPORTED)
		fprintf(stderr, "r2cc-gen: %s: FAIL at %.1f s: %s\n",
			g->client ? "client" : "server",
			g->t0 ? gen_now() - g->t0 : 0.0, msg);
}

/* The summary line (final), or a progress line with the time elapsed. */
void gen_report(const struct gen *g, int progress)
{
	char pre[64] = "";

	if (progress)
		snprintf(pre, sizeof(pre), "progress elapsed_s=%.1f ",
			 gen_now() - g->t0);
	printf("r2cc-gen: %srole=%s qps=%d ops=%" PRIu64
	       " bytes_verified=%" PRIu64 " mismatches=%" PRIu64
	       " duplicates=%" PRIu64 " losses=%" PRIu64
	       " order_errors=%" PRIu64 " longest_stall_ms=%" PRIu64
	       " errors=%" PRIu64 "\n",
	       pre, g->client ? "client" : "server", g->nqps, g->st.ops,
	       g->st.bytes_verified, g->st.mismatches, g->st.duplicates,
	       g->st.losses, g->st.order_errors, g->st.longest_stall_ms,
	       g->st.errors);
	fflush(stdout);
}

/* One line per QP after the summary: what this side posted on it, the
 * way r2cc-ctl metrics counts it (r2cc_wr_posted_total and the rest). */
void gen_report_qps(const struct gen *g)
{
	const struct gen_qp *q;
	int i;

	for (i = 0; g->qp && i < g->nqps; i++) {
		q = &g->qp[i];
		if (!q->qp)
			continue;
		printf("r2cc-gen: qp=%d qpn=%u send=%" PRIu64
		       " send_imm=%" PRIu64 " write=%" PRIu64
		       " write_imm=%" PRIu64 " read=%" PRIu64 " recv=%" PRIu64
		       " bytes=%" PRIu64 " unretired=%" PRIu64
		       " unverified=%u\n",
		       i, q->qp->qp_num, q->wrs[GEN_WS_SEND],
		       q->wrs[GEN_WS_SEND_IMM], q->wrs[GEN_WS_WRITE],
		       q->wrs[GEN_WS_WRITE_IMM], q->wrs[GEN_WS_READ],
		       q->rposted, q->wr_bytes, q->sq.posted - q->sq.retired,
		       q->tposted - q->tacked);
	}
	fflush(stdout);
}

/* Heap in use (every arena, and the chunks malloc mapped) and VmPin. */
void gen_mem_now(struct gen_mem *m)
{
	struct mallinfo2 mi = mallinfo2();
	char line[128];
	FILE *f = fopen("/proc/self/status", "r");
	unsigned long long kb;

	m->heap = mi.uordblks + mi.hblkhd;
	m->pinned = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %llu kB", &kb) == 1)
			m->pinned = kb * 1024;
	if (f)
		fclose(f);
}

/* What the QPs took since the device was opened, less our buffers (in
 * the heap, and pinned by the MR over them). */
static void report_mem(const struct gen *g)
{
	struct gen_mem now;
	int64_t heap, pinned, mine = (int64_t)((g->memlen + 4095) & ~4095UL);

	if (!g->nqps || !g->mem)
		return;
	gen_mem_now(&now);
	heap = (int64_t)(now.heap - g->mem0.heap) - mine;
	pinned = (int64_t)(now.pinned - g->mem0.pinned) - (g->mr ? mine : 0);
	printf("r2cc-gen: memory qps=%d heap_bytes=%" PRId64
	       " pinned_bytes=%" PRId64 "\n",
	       g->nqps, heap, pinned);
	fflush(stdout);
}

enum {
	OPT_STALL = 256,
	OPT_RETRY,
	OPT_TIMEOUT,
	OPT_SEED,
	OPT_LINGER,
	OPT_PAUSE_AT,
	OPT_PAUSE_FOR,
	OPT_PEERS,
	OPT_WINDOW,
	OPT_SQ_SIZE,
	OPT_RQ_SIZE,
	OPT_SRQ,
	OPT_UD,
	OPT_CQ_EX,
	OPT_HOLD
};

/* Numeric options: range and where the value goes (type i, u, U or d). */
static const struct numopt {
	int ch;
	double lo, hi;
	char type;
	size_t off;
} numopts[] = {
	{ 'g', 0, 255, 'i', offsetof(struct gen_opts, gidx) },
	{ 'p', 1, 65535, 'i', offsetof(struct gen_opts, port) },
	{ 'q', 1, GEN_MAX_QPS, 'i', offsetof(struct gen_opts, qps) },
	{ 't', 0.1, 1e6, 'd', offsetof(struct gen_opts, secs) },
	{ 'n', 1, 1e15, 'U', offsetof(struct gen_opts, ops) },
	{ 'i', 0.1, 1e6, 'd', offsetof(struct gen_opts, interval) },
	{ 's', 1024, 1 << 20, 'u', offsetof(struct gen_opts, max_msg) },
	{ 'I', 0, 4096, 'u', offsetof(struct gen_opts, max_inline) },
	{ OPT_STALL, 0.1, 1e6, 'd', offsetof(struct gen_opts, stall_limit) },
	{ OPT_RETRY, 0, 7, 'i', offsetof(struct gen_opts, retry_cnt) },
	{ OPT_TIMEOUT, 0, 31, 'i', offsetof(struct gen_opts, timeout) },
	{ OPT_SEED, 0, 1e15, 'U', offsetof(struct gen_opts, seed) },
	{ OPT_LINGER, 0, 3600, 'd', offsetof(struct gen_opts, linger) },
	{ OPT_PAUSE_AT, 0, 1e6, 'd', offsetof(struct gen_opts, pause_at) },
	{ OPT_PAUSE_FOR, 0, 1e6, 'd', offsetof(struct gen_opts, pause_for) },
	{ OPT_PEERS, 1, GEN_MAX_PEERS, 'i', offsetof(struct gen_opts, peers) },
	{ OPT_WINDOW, 2, GEN_SQ_DEPTH, 'i', offsetof(struct gen_opts, window) },
	{ OPT_SQ_SIZE, GEN_SQ_DEPTH, 8192, 'i',
	  offsetof(struct gen_opts, sq_size) },
	{ OPT_RQ_SIZE, GEN_CREDITS, 8192, 'i',
	  offsetof(struct gen_opts, rq_size) },
};

/* In numopts order after "device", so that an index names the option. */
static const struct option longopts[] = {
	{ "device", required_argument, NULL, 'd' },
	{ "gid-index", required_argument, NULL, 'g' },
	{ "port", required_argument, NULL, 'p' },
	{ "qps", required_argument, NULL, 'q' },
	{ "time", required_argument, NULL, 't' },
	{ "ops", required_argument, NULL, 'n' },
	{ "interval", required_argument, NULL, 'i' },
	{ "max-size", required_argument, NULL, 's' },
	{ "max-inline", required_argument, NULL, 'I' },
	{ "stall-limit", required_argument, NULL, OPT_STALL },
	{ "retry-cnt", required_argument, NULL, OPT_RETRY },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "linger", required_argument, NULL, OPT_LINGER },
	{ "pause-at", required_argument, NULL, OPT_PAUSE_AT },
	{ "pause-for", required_argument, NULL, OPT_PAUSE_FOR },
	{ "peers", required_argument, NULL, OPT_PEERS },
	{ "window", required_argument, NULL, OPT_WINDOW },
	{ "sq-size", required_argument, NULL, OPT_SQ_SIZE },
	{ "rq-size", required_argument, NULL, OPT_RQ_SIZE },
	{ "srq", no_argument, NULL, OPT_SRQ },
	{ "ud", no_argument, NULL, OPT_UD },
	{ "cq-ex", no_argument, NULL, OPT_CQ_EX },
	{ "hold", no_argument, NULL, OPT_HOLD },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void usage(int rc)
{
	if (rc)
		fputs("usage: r2cc-gen -d DEV [OPTIONS] [SERVER] (--help)\n",
		      stderr);
	else
		fputs(usage_text, stdout);
	exit(rc);
}

/* A number in range (integral for integer types) stored into o. */
static int set_num(struct gen_opts *o, const struct numopt *n, const char *s)
{
	char *end, *p = (char *)o + n->off;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || v < n->lo || v > n->hi ||
	    (n->type != 'd' && v != (double)(uint64_t)v))
		return -EINVAL;
	if (n->type == 'i')
		*(int *)p = v;
	else if (n->type == 'u')
		*(uint32_t *)p = v;
	else if (n->type == 'U')
		*(uint64_t *)p = v;
	else
		*(double *)p = v;
	return 0;
}

static void parse(int argc, char **argv, struct gen_opts *o)
{
	const char *name;
	size_t i;
	int ch;

	while ((ch = getopt_long(argc, argv, "d:g:p:q:t:n:i:s:I:h", longopts,
				 NULL)) != -1) {
		if (ch == 'h')
			usage(0);
		if (ch == 'd') {
			o->dev = optarg;
			continue;
		}
		if (ch == OPT_SRQ) {
			o->srq = 1;
			continue;
		}
		if (ch == OPT_UD) {
			o->ud = 1;
			continue;
		}
		if (ch == OPT_CQ_EX) {
			o->cq_ex = 1;
			continue;
		}
		if (ch == OPT_HOLD) {
			o->hold = 1;
			continue;
		}
		for (i = 0; i < sizeof(numopts) / sizeof(numopts[0]); i++)
			if (numopts[i].ch == ch)
				break;
		if (i == sizeof(numopts) / sizeof(numopts[0]))
			usage(2);
		if (set_num(o, &numopts[i], optarg)) {
			name = longopts[i + 1].name;
			fprintf(stderr, "r2cc-gen: bad value for --%s: %s\n",
				name, optarg);
			usage(2);
		}
	}
	if (optind < argc)
		o->server = argv[optind++];
	if (!o->dev || optind != argc)
		usage(2);
	if (!o->secs && !o->ops)
		o->secs = 10;
	if (o->qps * o->peers > GEN_MAX_ALL_QPS ||
	    o->port + o->peers - 1 > 65535) {
		fprintf(stderr,
			"r2cc-gen: -q %d with --peers %d: too many "
			"QPs or ports\n",
			o->qps, o->peers);
		usage(2);
	}
}

static volatile sig_atomic_t stop_asked;

static void on_stop(int sig)
{
	(void)sig;
	stop_asked = 1;
}

/* SIGINT or SIGTERM: the client posts no more and ends as at -t. */
int gen_stop_asked(void)
{
	return stop_asked;
}

static volatile sig_atomic_t go_given;

static void on_go(int sig)
{
	(void)sig;
	go_given = 1;
}

/* --hold: SIGUSR1 came (the work may start) */
int gen_go_given(void)
{
	return go_given;
}

static int start_sync(struct gen *g)
{
	return gen_oob_sync(g, 'R');
}

/* Both sides, in this order; the TCP steps pair up across the nodes. */
static const struct step {
	const char *what;
	int (*fn)(struct gen *g);
} steps[] = {
	{ "open the device", gen_verbs_open },
	{ "reach the peer over TCP", gen_oob_open },
	{ "agree on the parameters", gen_oob_hello },
	{ "allocate buffers and QPs", gen_verbs_alloc },
	{ "exchange QP numbers and keys", gen_oob_exchange },
	{ "connect the QPs", gen_verbs_connect },
	{ "post receives", gen_post_recvs },
	{ "start together", start_sync },
};

static int setup(struct gen *g)
{
	size_t i;
	int ret;

	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		ret = steps[i].fn(g);
		if (ret) {
			gen_fail(g, &g->st.errors, "cannot %s: %s",
				 steps[i].what, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/* After the run: the end record and the server's counters. */
static void finish(struct gen *g)
{
	struct gen_stats before = g->st;
	int ret = 0;

	if (g->client && !g->failed) {
		ret = gen_oob_end(g, NULL);
		if (!ret)
			ret = gen_oob_summary(g);
	}
	if (ret)
		gen_fail(g, &g->st.errors, "end-of-run exchange: %s",
			 strerror(-ret));
	if (g->st.mismatches + g->st.duplicates + g->st.losses +
		    g->st.order_errors + g->st.errors >
	    before.mismatches + before.duplicates + before.losses +
		    before.order_errors + before.errors)
		gen_fail(g, &g->st.errors, "the server counted failures");
	if (g->client && !g->failed && !g->st.bytes_verified)
		gen_fail(g, &g->st.errors, "nothing was verified");
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_stop, .sa_flags = SA_RESTART },
			 go = { .sa_handler = on_go, .sa_flags = SA_RESTART };
	struct gen g = { 0 };

	g.o = (struct gen_opts){ .port = 18600,
				 .qps = 4,
				 .peers = 1,
				 .window = GEN_SQ_DEPTH,
				 .sq_size = GEN_SQ_DEPTH,
				 .rq_size = GEN_CREDITS,
				 .retry_cnt = 7,
				 .timeout = 14,
				 .max_inline = 128,
				 .max_msg = 65536,
				 .seed = 1,
				 .stall_limit = 10 };
	parse(argc, argv, &g.o);
	g.client = g.o.server != NULL;
	g.nqps = g.o.qps * g.o.peers;
	if (g.client) {
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	if (g.o.hold)
		sigaction(SIGUSR1, &go, NULL);
	if (!setup(&g)) {
		gen_run(&g);
		finish(&g);
	}
	gen_report(&g, 0);
	gen_report_qps(&g);
	report_mem(&g);
	if (g.failed)
		fprintf(stderr, "r2cc-gen: %s: FAILED: %s\n",
			g.client ? "client" : "server", g.first);
	if (g.o.linger > 0)
		usleep((useconds_t)(g.o.linger * 1e6));
	gen_oob_close(&g);
	gen_verbs_close(&g);
	return g.failed ? 1 : 0;
}
