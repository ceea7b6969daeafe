/* SPDX-License-Identifier: MIT */
/*
 * study.hpp - the studies r2cc-sim runs: a model's iteration (compute +
 * collectives) fault-free and under each failure scenario and policy,
 * the closed-form validation, and the sweeps behind the plots.
 */
#ifndef R2CC_SIM_STUDY_HPP
#define R2CC_SIM_STUDY_HPP

#include <string>

#include "platform.hpp"

/* Every parameter; the defaults and their sources are in README.md */
struct sim_opts {
	sim_platform_spec pf;
	std::string study = "default";
	std::string out;
	/* dense model: GPT-3 175B on Megatron-LM's TP 8 x PP 16 layout */
	double params = 175e9;
	int pp = 16;
	double tokens = 1536.0 * 2048; /* per iteration: batch x sequence */
	double tflops = 400; /* achieved per GPU, bf16 */
	double grad_bytes = 2; /* bf16 gradients */
	int channels = 2; /* NCCL channels per DP ring or tree */
	int tree_chunks = 8; /* pipeline depth of the tree */
	int qps = 1; /* NCCL_IB_QPS_PER_CONNECTION */
	int split_qps = 4; /* QPs per connection for r2cc-split */
	/* MoE: DeepSeek-V3-like expert parallelism */
	int ep_nodes = 8;
	double moe_tokens = 4096; /* per GPU per iteration */
	int topk = 8;
	int hidden = 7168;
	int moe_layers = 58;
	double moe_active = 37e9; /* parameters active per token */
	/* failures */
	int k = 2; /* k NICs of one node; one NIC on each of k nodes */
	double ckpt_min = 30; /* checkpoint interval */
	double restart_min = 10; /* restart and reload time */
	double window_h = 1; /* what a failure costs is counted over this */
	double failover_s = 1.0; /* detection + failover: collective stalls */
	double flap_period_s = 60; /* a flapping link goes down every ... */
	double flap_down_s = 10; /* ... for this long */
};

/*
 * sim_study_run() - run @o.study ("default", "validate", "ring", "tree",
 * "moe"), print the tables to stdout and write them, results.tsv and the
 * plots (.svg) into @o.out. Call after the platform is built.
 * Return: 0, 1 if the validation failed, or -errno (the output folder).
 */
int sim_study_run(const sim_opts &o, const sim_platform &pf);

/* Per-GPU bytes of the collectives, from the model description */
double sim_dp_grad_bytes(const sim_opts &o);
double sim_a2a_bytes(const sim_opts &o);

#endif
