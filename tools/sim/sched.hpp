/* SPDX-License-Identifier: MIT */
/*
 * sched.hpp - collectives decomposed into per-actor programs: rounds of
 * sends, each round waiting for the data it forwards. Pure: no SimGrid.
 */
#ifndef R2CC_SIM_SCHED_HPP
#define R2CC_SIM_SCHED_HPP

#include <cstddef>
#include <map>
#include <tuple>
#include <vector>

/* A network connection: both ends on rail @rail; placement may move it */
struct sim_conn {
	int src, dst; /* nodes */
	int rail; /* its primary rail, the rail of its GPU */
	int chan; /* channel (or collective) tag: parallel connections */
};

/* One send: to actor @to, over connection @conn, or NVLink if @conn < 0 */
struct sim_xfer {
	int to; /* actor index; its semaphore gets one token when done */
	int conn; /* index into sim_sched.conns; -1 = inside the node */
	int src_gpu, dst_gpu; /* NVLink ends (conn < 0) */
	double bytes;
};

/* Take @wait tokens (data received), then run @sends concurrently */
struct sim_step {
	int wait;
	std::vector<sim_xfer> sends;
};

struct sim_actor {
	int node, gpu;
	std::vector<sim_step> steps;
};

struct sim_sched {
	std::vector<sim_actor> actors;
	std::vector<sim_conn> conns;
	std::map<std::tuple<int, int, int, int>, int> conn_ix;

	int conn(int src, int dst, int rail, int chan);
	int actor(int node, int gpu);
};

/*
 * NCCL-like ring allreduce of @bytes among @members (nodes; GPU @gpu of
 * each, whose NIC is rail @rail), @chans channels: 2(n-1) steps per
 * channel of bytes/(chans*n), each forwarding what the step before got.
 */
void sim_sched_ring(sim_sched &s, const std::vector<int> &members, int gpu,
		    int rail, int chans, double bytes);
/*
 * Tree allreduce: binary trees (channels alternate between a tree and its
 * mirror, so a member is inner in at most one: NCCL's double binary tree),
 * reduce up and broadcast down, pipelined in @chunks chunks per channel.
 */
void sim_sched_tree(sim_sched &s, const std::vector<int> &members, int gpu,
		    int rail, int chans, int chunks, double bytes);
/*
 * All-to-all of @bytes per GPU among @members' GPUs, NCCL's p2p schedule
 * with PXN: first NVLink staging to the GPU on the destination's rail,
 * then round r = 1..n-1: each NIC sends to node i+r, receives from i-r.
 */
void sim_sched_alltoall(sim_sched &s, const std::vector<int> &members, int gpus,
			int rails, double bytes);

/*
 * The lab's shape (tests/lab/scenarios/placement.sh): on each of @rails
 * rails, @chans connections from node @src to node @dst stream @bytes
 * each, all at once (ib_write_bw, one per rail, -q @chans).
 */
void sim_sched_streams(sim_sched &s, int src, int dst, int rails, int chans,
		       double bytes);

/* Checks for tests and the study: what a schedule sends */
double sim_sched_bytes_from(const sim_sched &s, int node, int gpu);
/* network flows (conn >= 0) in step @step of every actor */
int sim_sched_flows_in_step(const sim_sched &s, int step);
int sim_sched_flows(const sim_sched &s);

/*
 * Data-parallel groups of a model sharded TP = gpus (inside a node) x PP
 * (consecutive nodes): group (stage, gpu) is GPU gpu of node d*pp + stage
 * for every replica d. Empty if @nodes is not a multiple of @pp.
 */
std::vector<std::vector<int>> sim_dp_groups(int nodes, int pp);

#endif
