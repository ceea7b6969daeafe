/* SPDX-License-Identifier: MIT */
/*
 * main.cpp - r2cc-sim: training under NIC failures on SimGrid, with
 * r2cc's own placement code deciding where connections go.
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>
#include <xbt/log.h>

#include "platform.hpp"
#include "study.hpp"

/* One option: where it goes ('i' int, 'd' double, 's' string) */
struct opt_row {
	const char *name;
	char kind;
	void *p;
	const char *help;
};

static std::vector<opt_row> opt_table(sim_opts &o)
{
	sim_platform_spec &p = o.pf;

	return {
		{ "nodes", 'i', &p.nodes, "nodes (128)" },
		{ "gpus", 'i', &p.gpus, "GPUs per node (8)" },
		{ "rails", 'i', &p.rails, "NICs per node, one per rail (8)" },
		{ "nic-gbps", 'd', &p.nic_gbps, "NIC speed, Gb/s (400)" },
		{ "latency-us", 'd', &p.latency_us, "per-link latency (1)" },
		{ "nodes-per-leaf", 'i', &p.nodes_per_leaf,
		  "nodes under one leaf switch per rail (16)" },
		{ "oversub", 'd', &p.oversub,
		  "leaf uplink oversubscription (1)" },
		{ "nvlink-gbps", 'd', &p.nvlink_gbps,
		  "NVLink per GPU, Gb/s each way (3600)" },
		{ "study", 's', &o.study,
		  "default | validate | ring | tree | moe | lab (default)" },
		{ "out", 's', &o.out, "folder for tables, results.tsv, plots" },
		{ "params", 'd', &o.params, "dense model parameters (175e9)" },
		{ "pp", 'i', &o.pp, "pipeline stages; DP = nodes / pp (16)" },
		{ "tokens", 'd', &o.tokens, "tokens per iteration (3145728)" },
		{ "tflops", 'd', &o.tflops, "achieved TFLOP/s per GPU (400)" },
		{ "channels", 'i', &o.channels, "NCCL channels per GPU (2)" },
		{ "tree-chunks", 'i', &o.tree_chunks,
		  "tree pipeline chunks (8)" },
		{ "qps", 'i', &o.qps, "QPs per connection (1)" },
		{ "split-qps", 'i', &o.split_qps,
		  "QPs per connection for r2cc-split (4)" },
		{ "ep-nodes", 'i', &o.ep_nodes,
		  "MoE expert-parallel nodes (8)" },
		{ "moe-tokens", 'd', &o.moe_tokens,
		  "MoE tokens per GPU per iteration (4096)" },
		{ "topk", 'i', &o.topk, "experts per token (8)" },
		{ "hidden", 'i', &o.hidden, "MoE hidden size (7168)" },
		{ "moe-layers", 'i', &o.moe_layers, "MoE layers (58)" },
		{ "moe-active", 'd', &o.moe_active,
		  "MoE parameters active per token (37e9)" },
		{ "k", 'i', &o.k,
		  "k for the k-nics and k-nodes scenarios (2)" },
		{ "ckpt-min", 'd', &o.ckpt_min,
		  "checkpoint interval, min (30)" },
		{ "restart-min", 'd', &o.restart_min,
		  "restart time, min (10)" },
		{ "window-h", 'd', &o.window_h, "cost window, hours (1)" },
		{ "failover-s", 'd', &o.failover_s,
		  "detection and failover time, s (1.0)" },
		{ "flap-period-s", 'd', &o.flap_period_s,
		  "flapping link: period, s (60)" },
		{ "flap-down-s", 'd', &o.flap_down_s,
		  "flapping link: down time per period, s (10)" },
	};
}

static void usage(FILE *f, const std::vector<opt_row> &t)
{
	fprintf(f,
		"Usage: r2cc-sim [OPTIONS] --out DIR [--cfg=SIMGRID-OPTION]\n"
		"Simulates training on N x G GPUs under NIC failures; "
		"see tools/sim/README.md.\n\n");
	for (const opt_row &r : t)
		fprintf(f, "  --%-16s %s\n", r.name, r.help);
	fprintf(f, "  --%-16s %s\n", "help", "this text");
}

static int set_opt(const opt_row &r, const char *v)
{
	char *end;

	errno = 0;
	if (r.kind == 's') {
		*(std::string *)r.p = v;
		return 0;
	}
	if (r.kind == 'i') {
		long l = strtol(v, &end, 0);

		if (errno || end == v || *end || l < 0 || l > 1 << 20)
			return -EINVAL;
		*(int *)r.p = (int)l;
		return 0;
	}
	double d = strtod(v, &end);

	if (errno || end == v || *end || !(d >= 0))
		return -EINVAL;
	*(double *)r.p = d;
	return 0;
}

static int parse(int argc, char **argv, sim_opts &o)
{
	std::vector<opt_row> t = opt_table(o);
	std::vector<option> lo;
	int c;

	for (size_t i = 0; i < t.size(); i++)
		lo.push_back({ t[i].name, required_argument, nullptr,
			       256 + (int)i });
	lo.push_back({ "help", no_argument, nullptr, 'h' });
	lo.push_back({ nullptr, 0, nullptr, 0 });
	while ((c = getopt_long(argc, argv, "h", lo.data(), nullptr)) != -1) {
		if (c == 'h') {
			usage(stdout, t);
			exit(0);
		}
		if (c < 256) {
			usage(stderr, t);
			return -EINVAL;
		}
		if (set_opt(t[c - 256], optarg)) {
			fprintf(stderr, "r2cc-sim: invalid --%s: `%s'\n",
				t[c - 256].name, optarg);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "r2cc-sim: unexpected argument `%s'\n",
			argv[optind]);
		return -EINVAL;
	}
	return 0;
}

static int check(const sim_opts &o)
{
	std::string err = sim_platform_check(o.pf);
	const char *studies[] = { "default", "validate", "ring",
				  "tree",    "moe",	 "lab" };
	bool known = false;

	for (const char *s : studies)
		known |= o.study == s;
	if (err.empty() && !known)
		err = "unknown study `" + o.study + "'";
	if (err.empty() && o.out.empty())
		err = "--out DIR is required";
	/* the lab study runs no model: pp and ep-nodes do not matter */
	bool model = o.study != "lab";

	if (err.empty() && !model && o.pf.nodes != 2)
		err = "the lab study has 2 nodes (--nodes 2)";
	if (err.empty() && model &&
	    (o.pp < 1 || o.pf.nodes % o.pp || o.pf.nodes / o.pp < 2))
		err = "pp must divide nodes, leaving at least 2 DP replicas";
	if (err.empty() && model && (o.ep_nodes < 2 || o.ep_nodes > o.pf.nodes))
		err = "ep-nodes must be 2..nodes";
	if (err.empty() && (o.channels < 1 || o.tree_chunks < 1 || o.qps < 1 ||
			    o.split_qps < 1 || o.k < 1))
		err = "channels, tree-chunks, qps, split-qps and k must be >= 1";
	if (err.empty())
		return 0;
	fprintf(stderr, "r2cc-sim: %s\n", err.c_str());
	return -EINVAL;
}

int main(int argc, char **argv)
{
	sim_opts o;
	sim_platform pf;
	int ret;

	/* before SimGrid, which answers --help with its own settings */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout, opt_table(o));
			return 0;
		}
	/* SimGrid takes its own --cfg= and --log= arguments first */
	simgrid::s4u::Engine e(&argc, argv);

	xbt_log_control_set("xbt_cfg.thresh:warning");
	if (parse(argc, argv, o) || check(o))
		return 1;
	sim_network_config();
	sim_platform_build(o.pf, pf);
	ret = sim_study_run(o, pf);
	if (ret < 0) {
		fprintf(stderr, "r2cc-sim: %s: %s\n", o.out.c_str(),
			strerror(-ret));
		return 1;
	}
	return ret;
}
