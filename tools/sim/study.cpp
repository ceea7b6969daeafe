/* SPDX-License-Identifier: MIT */
/*
 * study.cpp - scenarios x policies x workloads: iteration times, the
 * closed-form validation and the sweeps behind the plots.
 */
#include "study.hpp"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <sys/stat.h>
#include <tuple>
#include <vector>

#include "place.hpp"
#include "run.hpp"
#include "sched.hpp"
#include "svg.hpp"

enum wl { WL_RING, WL_TREE, WL_A2A, WL_NR };
static const char *const wl_name[WL_NR] = { "dp-ring", "dp-tree", "moe-a2a" };

struct scenario {
	std::string name, what;
	sim_nicset dead;
};

struct study {
	const sim_opts &o;
	const sim_platform &pf;
	sim_sched sched[WL_NR];
	bool built[WL_NR];
	double t0[WL_NR]; /* fault-free collective, s */
	FILE *txt, *tsv;
	bool valid;
	/* collective times already simulated: (workload, dead, policy, qps) */
	std::map<std::tuple<int, sim_nicset, int, int>, double> memo;
};

double sim_dp_grad_bytes(const sim_opts &o)
{
	return o.params / ((double)o.pf.gpus * o.pp) * o.grad_bytes;
}

double sim_a2a_bytes(const sim_opts &o)
{
	/* dispatched token copies x hidden size, bf16 */
	return o.moe_tokens * o.topk * o.hidden * 2.0;
}

/* 6 FLOPs per parameter per token (forward and backward) */
static double compute_s(const sim_opts &o, int w)
{
	if (w == WL_A2A)
		return 6 * o.moe_active * o.moe_tokens / (o.tflops * 1e12);
	return 6 * o.params * o.tokens /
	       ((double)o.pf.nodes * o.pf.gpus * o.tflops * 1e12);
}

/* Collectives per iteration: one gradient allreduce; dispatch and
 * combine, forward and backward, per MoE layer */
static int per_iter(const sim_opts &o, int w)
{
	return w == WL_A2A ? 4 * o.moe_layers : 1;
}

static void say(study &st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void say(study &st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	va_start(ap, fmt);
	vfprintf(st.txt, fmt, ap);
	va_end(ap);
}

static const sim_sched &get_sched(study &st, int w)
{
	const sim_opts &o = st.o;
	sim_sched &s = st.sched[w];

	if (st.built[w])
		return s;
	st.built[w] = true;
	if (w == WL_A2A) {
		for (int n = 0; n + o.ep_nodes <= o.pf.nodes; n += o.ep_nodes) {
			std::vector<int> m;

			for (int i = 0; i < o.ep_nodes; i++)
				m.push_back(n + i);
			sim_sched_alltoall(s, m, o.pf.gpus, o.pf.rails,
					   sim_a2a_bytes(o));
		}
		return s;
	}
	for (const std::vector<int> &m : sim_dp_groups(o.pf.nodes, o.pp))
		for (int g = 0; g < o.pf.gpus; g++) {
			if (w == WL_RING)
				sim_sched_ring(s, m, g, g % o.pf.rails,
					       o.channels,
					       sim_dp_grad_bytes(o));
			else
				sim_sched_tree(s, m, g, g % o.pf.rails,
					       o.channels, o.tree_chunks,
					       sim_dp_grad_bytes(o));
		}
	return s;
}

/* One collective's time under @dead and @pol; -1: the job dies */
static double coll(study &st, int w, const sim_nicset &dead, int pol,
		   int split_qps)
{
	const sim_sched &s = get_sched(st, w);
	sim_place_opts po = { st.o.pf.rails, st.o.pf.nic_gbps, st.o.qps,
			      split_qps };
	sim_placement p;

	/* the same run under another name: simulate it once */
	if (dead.empty())
		pol = SIM_POL_R2CC;
	if (pol == SIM_POL_SPLIT && split_qps == st.o.qps)
		pol = SIM_POL_R2CC;
	auto key = std::make_tuple(w, dead, pol,
				   pol == SIM_POL_SPLIT ? split_qps : 0);
	auto it = st.memo.find(key);

	if (it != st.memo.end())
		return it->second;
	double t = -1;

	if (sim_place(s, dead, (sim_policy)pol, po, p))
		t = sim_run(st.pf, s, p).seconds;
	st.memo[key] = t;
	if (dead.empty())
		st.t0[w] = t;
	return t;
}

static double iter_s(const sim_opts &o, int w, double coll_s)
{
	return compute_s(o, w) + per_iter(o, w) * coll_s;
}

/* What the job loses at a failure, once */
static double one_time_s(const sim_opts &o, int pol)
{
	if (pol == SIM_POL_NONE)
		return o.restart_min * 60 + o.ckpt_min * 60 / 2;
	return o.failover_s;
}

static void table_head(study &st, const scenario &sc)
{
	say(st, "\n== %s: %s\n", sc.name.c_str(), sc.what.c_str());
	say(st, "%-8s %-10s %9s %9s %9s %9s %9s %8s %9s\n", "workload",
	    "policy", "coll0/ms", "coll/ms", "iter0/s", "iter/s", "overhd%",
	    "vs-ideal", "window%");
}

static void row(study &st, const scenario &sc, int w, int pol, double c0,
		double c, double ideal_iter)
{
	const sim_opts &o = st.o;
	double i0 = iter_s(o, w, c0), win = o.window_h * 3600;

	if (c < 0) {
		double cost = 100 * one_time_s(o, pol) / win;

		say(st, "%-8s %-10s %9.2f %9s %9.3f %9s %9s %8s %9.2f\n",
		    wl_name[w], sim_policy_name[pol], c0 * 1e3, "dies", i0, "-",
		    "-", "-", cost);
		fprintf(st.tsv, "%s\t%s\t%s\t%.6f\t\t%.6f\t\t\t\t%.4f\n",
			sc.name.c_str(), wl_name[w], sim_policy_name[pol], c0,
			i0, cost);
		return;
	}
	double i1 = iter_s(o, w, c), over = 100 * (i1 / i0 - 1);
	double cost = 100 * (one_time_s(o, pol) + (i1 / i0 - 1) * win) / win;
	double vs = ideal_iter > 0 ? i1 / ideal_iter : NAN;

	say(st, "%-8s %-10s %9.2f %9.2f %9.3f %9.3f %9.3f %8.4f %9.2f\n",
	    wl_name[w], sim_policy_name[pol], c0 * 1e3, c * 1e3, i0, i1, over,
	    vs, cost);
	fprintf(st.tsv,
		"%s\t%s\t%s\t%.6f\t%.6f\t%.6f\t%.6f\t%.4f\t%.4f\t%.4f\n",
		sc.name.c_str(), wl_name[w], sim_policy_name[pol], c0, c, i0,
		i1, over, vs, cost);
}

/* Every policy on one scenario; returns the iteration times for flaps */
static std::vector<double> scenario_rows(study &st, const scenario &sc, int w)
{
	std::vector<double> c(SIM_POL_NR);
	double c0 = coll(st, w, {}, SIM_POL_R2CC, st.o.split_qps);

	for (int pol = 0; pol < SIM_POL_NR; pol++)
		c[pol] = coll(st, w, sc.dead, pol, st.o.split_qps);
	double ideal =
		c[SIM_POL_IDEAL] < 0 ? -1 : iter_s(st.o, w, c[SIM_POL_IDEAL]);

	for (int pol = 0; pol < SIM_POL_NR; pol++)
		row(st, sc, w, pol, c0, c[pol], ideal);
	return c;
}

/*
 * A link that goes down for flap_down_s every flap_period_s, derived
 * from the one-NIC results: the time-weighted iteration, plus two
 * failovers (down, back up) per period; without failover every flap
 * kills the job.
 */
static void flap_rows(study &st, int w, const std::vector<double> &c)
{
	const sim_opts &o = st.o;
	double P = o.flap_period_s, d = o.flap_down_s / P;
	double i0 = iter_s(o, w, st.t0[w]);

	for (int pol = 0; pol < (int)c.size(); pol++) {
		double lost = pol == SIM_POL_NONE ? one_time_s(o, pol) :
						    2 * one_time_s(o, pol);
		double avg;

		if (c[pol] < 0 && pol != SIM_POL_NONE)
			continue;
		if (lost >= P) {
			say(st,
			    "%-8s %-10s %9s  no progress: %.0f s lost per "
			    "%.0f s flap period\n",
			    wl_name[w], sim_policy_name[pol], "flap", lost, P);
			continue;
		}
		if (pol == SIM_POL_NONE)
			avg = i0;
		else
			avg = (1 - d) * i0 + d * iter_s(o, w, c[pol]);
		avg = avg * P / (P - lost);
		say(st, "%-8s %-10s %9s %9s %9.3f %9.3f %9.3f\n", wl_name[w],
		    sim_policy_name[pol], "flap", "", i0, avg,
		    100 * (avg / i0 - 1));
	}
}

static std::vector<scenario> scenarios(const sim_opts &o)
{
	std::vector<scenario> v;
	const sim_platform_spec &p = o.pf;
	int k = std::min(o.k, p.rails - 1);
	scenario s;

	v.push_back({ "nic", "node 0 loses NIC 0", { { 0, 0 } } });
	s = { "k-nics", "node 0 loses NICs 0.." + std::to_string(k - 1), {} };
	for (int r = 0; r < k; r++)
		s.dead.insert({ 0, r });
	v.push_back(s);
	s = { "k-nodes",
	      "one NIC (rail 0) on each of " + std::to_string(o.k) + " nodes",
	      {} };
	for (int i = 0; i < o.k && i < p.nodes; i++)
		s.dead.insert({ i * (p.nodes / o.k), 0 });
	v.push_back(s);
	s = { "leaf",
	      "leaf switch of rail 0, nodes 0.." +
		      std::to_string(std::min(p.nodes, p.nodes_per_leaf) - 1),
	      {} };
	for (int n = 0; n < p.nodes_per_leaf && n < p.nodes; n++)
		s.dead.insert({ n, 0 });
	v.push_back(s);
	return v;
}

/*
 * The collective during which NIC 0 of node 0 dies, halfway through:
 * its flows fail (Link::turn_off), and after failover_s (detection and
 * re-connection) what was left is resent on the policy's rails.
 */
static void failover_rows(study &st, const std::vector<int> &wls)
{
	const sim_opts &o = st.o;
	sim_nicset dead = { { 0, 0 } };
	sim_place_opts po = { o.pf.rails, o.pf.nic_gbps, o.qps, o.split_qps };

	say(st,
	    "\n== failover: node 0's NIC 0 dies halfway through a "
	    "collective; %.2f s to detect and fail over\n",
	    o.failover_s);
	say(st, "%-8s %-10s %9s %9s %9s %9s\n", "workload", "policy",
	    "coll0/ms", "coll/ms", "fo-coll/s", "extra/s");
	for (int w : wls) {
		const sim_sched &s = get_sched(st, w);
		double c0 = coll(st, w, {}, SIM_POL_R2CC, o.split_qps);

		for (int pol = SIM_POL_FIXED; pol < SIM_POL_NR; pol++) {
			sim_placement before = sim_place_healthy(s), after;

			if (!sim_place(s, dead, (sim_policy)pol, po, after))
				continue;
			double c1 = coll(st, w, dead, pol, o.split_qps);
			sim_fault_event ev = { c0 / 2, dead, &after,
					       o.failover_s };
			double fo = sim_run(st.pf, s, before, &ev).seconds;

			say(st, "%-8s %-10s %9.2f %9.2f %9.4f %9.4f\n",
			    wl_name[w], sim_policy_name[pol], c0 * 1e3,
			    c1 * 1e3, fo, fo - c0);
		}
	}
}

static void tables(study &st, const std::vector<int> &wls)
{
	std::vector<scenario> sc = scenarios(st.o);
	std::vector<std::vector<double>> nic(WL_NR);

	for (const scenario &s : sc) {
		table_head(st, s);
		for (int w : wls) {
			std::vector<double> c = scenario_rows(st, s, w);

			if (s.name == "nic")
				nic[w] = c;
		}
	}
	say(st,
	    "\n== flap: NIC 0 of node 0 down %.0f s of every %.0f s "
	    "(derived from 'nic')\n",
	    st.o.flap_down_s, st.o.flap_period_s);
	for (int w : wls)
		flap_rows(st, w, nic[w]);
	failover_rows(st, wls);
}

/*
 * Ring allreduce, node 0 losing k of its R NICs (X = k/R): the ideal
 * policy must give 1/(1-X) within 2 %. R2CCL's own AllReduce bound,
 * 1 + nX/(2(n-1)(1-X)), is printed beside it for reference.
 */
static void validate(study &st)
{
	const sim_opts &o = st.o;
	int n = o.pf.nodes / o.pp, R = o.pf.rails;
	const int pols[] = { SIM_POL_FIXED, SIM_POL_R2CC, SIM_POL_SPLIT,
			     SIM_POL_IDEAL };
	sim_plot plot = { "Ring allreduce, one node loses X of its NICs",
			  "X (fraction of the node's NIC bandwidth lost)",
			  "allreduce time / fault-free",
			  {} };
	sim_series closed = { "1/(1-X)", {}, {}, true };
	double c0 = coll(st, WL_RING, {}, 0, o.split_qps);

	for (int pol : pols)
		plot.series.push_back({ sim_policy_name[pol], {}, {}, false });
	say(st,
	    "\n== validation: ring allreduce (n = %d), node 0 loses k "
	    "of %d NICs\n",
	    n, R);
	say(st, "%5s %7s %8s %8s %7s %8s %8s %8s %9s\n", "X", "1/(1-X)",
	    "ideal", "err%", "check", "fixed", "r2cc", "r2cc-spl", "R2CCL-AR");
	for (int k = 1; k <= R / 2; k++) {
		sim_nicset dead;
		double X = (double)k / R, want = 1 / (1 - X), t[4];

		for (int r = 0; r < k; r++)
			dead.insert({ 0, r });
		for (int i = 0; i < 4; i++) {
			double c =
				coll(st, WL_RING, dead, pols[i], o.split_qps);

			t[i] = c < 0 ? NAN : c / c0;
			plot.series[i].x.push_back(X);
			plot.series[i].y.push_back(t[i]);
		}
		closed.x.push_back(X);
		closed.y.push_back(want);
		double err = 100 * (t[3] / want - 1);
		bool ok = std::fabs(err) <= 2;

		st.valid &= ok;
		say(st, "%5.3f %7.4f %8.4f %8.3f %7s %8.4f %8.4f %8.4f %9.4f\n",
		    X, want, t[3], err, ok ? "PASS" : "FAIL", t[0], t[1], t[2],
		    1 + n * X / (2 * (n - 1) * (1 - X)));
	}
	plot.series.push_back(closed);
	if (sim_svg_write(o.out + "/overhead-vs-lost.svg", plot))
		fprintf(stderr,
			"r2cc-sim: cannot write %s/overhead-vs-lost.svg\n",
			o.out.c_str());
}

/* One NIC lost: r2cc-split's slowdown as QPs per connection grow */
static void qps_sweep(study &st)
{
	const sim_opts &o = st.o;
	const int ws[] = { WL_RING, WL_A2A };
	sim_plot plot = { "One NIC lost: QPs per connection, placed by r2cc",
			  "QPs per connection",
			  "collective time / fault-free",
			  {} };
	sim_nicset dead = { { 0, 0 } };

	say(st,
	    "\n== QPs per connection (r2cc places each QP), node 0 "
	    "loses NIC 0\n%-8s %4s %9s %9s\n",
	    "workload", "qps", "r2cc", "ideal");
	for (int w : ws) {
		double c0 = coll(st, w, {}, 0, 1);
		double id = coll(st, w, dead, SIM_POL_IDEAL, 1) / c0;
		sim_series s = { std::string(wl_name[w]) + " r2cc", {}, {}, 0 };
		sim_series is = {
			std::string(wl_name[w]) + " ideal", {}, {}, 1
		};

		for (int q = 1; q <= o.pf.rails; q *= 2) {
			double r = coll(st, w, dead, SIM_POL_SPLIT, q) / c0;

			say(st, "%-8s %4d %9.4f %9.4f\n", wl_name[w], q, r, id);
			s.x.push_back(q);
			s.y.push_back(r);
			is.x.push_back(q);
			is.y.push_back(id);
		}
		plot.series.push_back(s);
		plot.series.push_back(is);
	}
	if (sim_svg_write(o.out + "/overhead-vs-qps.svg", plot))
		fprintf(stderr,
			"r2cc-sim: cannot write %s/overhead-vs-qps.svg\n",
			o.out.c_str());
}

/*
 * The lab's case (tests/lab/scenarios/placement.sh, placement.bw): node 0
 * streams to node 1 over every rail, --channels connections a rail, and
 * loses rail 0. A stream's bandwidth after the loss over before is
 * fault-free time over time (every stream moves the same bytes; the
 * lab's figure is the slowest rail's). The lab prints its measured
 * ratio beside the r2cc-rtr row.
 */
static void lab(study &st)
{
	const sim_opts &o = st.o;
	sim_sched s;
	sim_place_opts po = { o.pf.rails, o.pf.nic_gbps, o.qps, o.split_qps };
	sim_nicset dead = { { 0, 0 } };
	double bytes = 1e9 * o.pf.nic_gbps / 8; /* 1 s of a NIC */
	const int pols[] = { SIM_POL_FIXED, SIM_POL_R2CC, SIM_POL_RTR,
			     SIM_POL_SPLIT, SIM_POL_IDEAL };

	sim_sched_streams(s, 0, 1, o.pf.rails, o.channels, bytes);
	double t0 = sim_run(st.pf, s, sim_place_healthy(s)).seconds;

	say(st,
	    "\n== lab: node 0 streams to node 1, %d connections a rail on "
	    "%d rails; node 0 loses rail 0\n%-10s %9s %9s %9s %9s\n",
	    o.channels, o.pf.rails, "policy", "stream0/s", "stream/s",
	    "bw-ratio", "max-share");
	for (int pol : pols) {
		sim_placement p;

		if (!sim_place(s, dead, (sim_policy)pol, po, p))
			continue;
		double t = sim_run(st.pf, s, p).seconds;

		say(st, "%-10s %9.4f %9.4f %9.4f %9.2f\n", sim_policy_name[pol],
		    t0, t, t0 / t, sim_place_max_rail_share(s, p, o.pf.rails));
		fprintf(st.tsv, "lab\tstreams\t%s\t%.6f\t%.6f\t\t\t\t\t\n",
			sim_policy_name[pol], t0, t);
	}
}

/* mkdir -p */
static int make_dir(const std::string &path)
{
	for (size_t i = 1; i <= path.size(); i++) {
		if (i < path.size() && path[i] != '/')
			continue;
		if (mkdir(path.substr(0, i).c_str(), 0777) && errno != EEXIST)
			return -errno;
	}
	return 0;
}

static void header(study &st)
{
	const sim_opts &o = st.o;
	const sim_platform_spec &p = o.pf;

	say(st,
	    "r2cc-sim: %d nodes x %d GPUs x %d rails, %g Gb/s NICs, "
	    "%g us links, %d nodes per leaf, NVLink %g Gb/s\n",
	    p.nodes, p.gpus, p.rails, p.nic_gbps, p.latency_us,
	    p.nodes_per_leaf, p.nvlink_gbps);
	say(st, "network model: SimGrid LV08 with latency and bandwidth "
		"factors 1, no cross-traffic, no RTT weighting (RDMA, not "
		"TCP)\n");
	if (o.study == "lab")
		return;
	say(st,
	    "dense: %.0fB params, PP %d, DP rings of %d nodes, %.2f GB "
	    "gradients per GPU, %d channels, compute %.3f s\n",
	    o.params / 1e9, o.pp, p.nodes / o.pp, sim_dp_grad_bytes(o) / 1e9,
	    o.channels, compute_s(o, WL_RING));
	say(st,
	    "moe: EP %d nodes, %.0f MB per GPU per all-to-all, %d per "
	    "iteration, compute %.3f s; QPs/connection %d, r2cc-split "
	    "%d\n",
	    o.ep_nodes, sim_a2a_bytes(o) / 1e6, per_iter(o, WL_A2A),
	    compute_s(o, WL_A2A), o.qps, o.split_qps);
	say(st,
	    "none: restart %.0f min + half a %.0f min checkpoint "
	    "interval; window%%: cost over %.1f h incl. a %.2f s failover\n",
	    o.restart_min, o.ckpt_min, o.window_h, o.failover_s);
}

int sim_study_run(const sim_opts &o, const sim_platform &pf)
{
	study st = { o, pf, {}, {}, {}, nullptr, nullptr, true, {} };
	std::vector<int> wls;
	bool checks = o.study == "default" || o.study == "validate" ||
		      o.study == "ring";
	auto t_start = std::chrono::steady_clock::now();
	int err = make_dir(o.out);

	if (err)
		return err;
	st.txt = fopen((o.out + "/" + o.study + ".txt").c_str(), "w");
	st.tsv = fopen((o.out + "/results.tsv").c_str(), "w");
	if (!st.txt || !st.tsv) {
		err = -errno;
		goto out;
	}
	fprintf(st.tsv, "scenario\tworkload\tpolicy\tcoll0_s\tcoll_s\t"
			"iter0_s\titer_s\toverhead_pct\tvs_ideal\t"
			"window_pct\n");
	header(st);
	if (o.study == "default")
		wls = { WL_RING, WL_TREE, WL_A2A };
	else if (o.study == "ring")
		wls = { WL_RING };
	else if (o.study == "tree")
		wls = { WL_TREE };
	else if (o.study == "moe")
		wls = { WL_A2A };
	if (!wls.empty())
		tables(st, wls);
	if (checks)
		validate(st);
	if (o.study == "default")
		qps_sweep(st);
	if (o.study == "lab")
		lab(st);
	say(st, "\n%s%swall time %.1f s\n", checks ? "validation " : "",
	    checks ? (st.valid ? "passed; " : "FAILED; ") : "",
	    std::chrono::duration<double>(std::chrono::steady_clock::now() -
					  t_start)
		    .count());
	err = st.valid ? 0 : 1;
out:
	if (st.txt)
		fclose(st.txt);
	if (st.tsv)
		fclose(st.tsv);
	return err;
}
