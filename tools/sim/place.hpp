/* SPDX-License-Identifier: MIT */
/*
 * place.hpp - the failover policies under test: where each connection of
 * a dead NIC goes (none, fixed pair, r2cc, ideal fluid balance, r2cc with
 * each connection's QPs placed one by one).
 */
#ifndef R2CC_SIM_PLACE_HPP
#define R2CC_SIM_PLACE_HPP

#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "sched.hpp"

enum sim_policy {
	SIM_POL_NONE, /* the job dies and restarts from its checkpoint */
	SIM_POL_FIXED, /* R2CCL: NIC i -> NIC i^1 */
	SIM_POL_R2CC, /* r2cc_place_choose() per QP, NCCL's QPs/connection */
	SIM_POL_IDEAL, /* fluid: split evenly over every surviving rail */
	SIM_POL_SPLIT, /* r2cc, each connection split into more QPs */
	SIM_POL_RTR, /* r2cc as the shim times it: backups placed at RTR */
	SIM_POL_NR,
};
extern const char *const sim_policy_name[SIM_POL_NR];

/* A share @w of a connection's bytes on rail @rail */
struct sim_part {
	int rail;
	double w;
};
using sim_placement = std::vector<std::vector<sim_part>>; /* [conn] */
using sim_nicset = std::set<std::pair<int, int>>; /* dead (node, rail) */

struct sim_place_opts {
	int rails;
	double nic_gbps;
	int qps; /* QPs per connection (NCCL_IB_QPS_PER_CONNECTION) */
	int split_qps; /* QPs per connection for SIM_POL_SPLIT */
};

/* Every connection on its primary rail */
sim_placement sim_place_healthy(const sim_sched &s);
/*
 * sim_place() - re-place the connections that touch a dead NIC
 * Return: false when the job cannot go on: SIM_POL_NONE with any dead
 * NIC, or a connection left with no rail up at both ends.
 */
bool sim_place(const sim_sched &s, const sim_nicset &dead, sim_policy pol,
	       const sim_place_opts &o, sim_placement &out);
/* Largest share of connections (sum of part weights) on any node's rail */
double sim_place_max_rail_share(const sim_sched &s, const sim_placement &p,
				int rails);

#endif
