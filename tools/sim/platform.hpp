/* SPDX-License-Identifier: MIT */
/*
 * platform.hpp - the simulated cluster: N nodes x G GPUs x R rails on a
 * rail-optimised two-level fat tree, one SimGrid host per NIC and per GPU.
 */
#ifndef R2CC_SIM_PLATFORM_HPP
#define R2CC_SIM_PLATFORM_HPP

#include <simgrid/forward.h>
#include <string>
#include <vector>

struct sim_platform_spec {
	int nodes = 128;
	int gpus = 8; /* per node */
	int rails = 8; /* NICs per node, one per rail */
	int nodes_per_leaf = 16; /* a leaf switch serves one rail of a group */
	double nic_gbps = 400; /* per NIC, each direction */
	double latency_us = 1; /* per link: NIC-leaf and leaf-spine */
	double nvlink_gbps = 3600; /* per GPU, each direction (450 GB/s) */
	double nvlink_latency_us = 0.5;
	double oversub = 1; /* leaf uplink = nodes_per_leaf x NIC / oversub */
};

/* Sizes derived from a spec, without SimGrid: what the generator builds */
struct sim_platform_shape {
	int groups; /* node groups, one leaf per rail each */
	int leaves; /* groups x rails */
	int nic_hosts; /* nodes x rails */
	int gpu_hosts; /* nodes x gpus */
	int links; /* split-duplex: NIC, NVLink and leaf uplinks */
};

/* "" if @s can be built, else why not */
std::string sim_platform_check(const sim_platform_spec &s);
sim_platform_shape sim_platform_shape_of(const sim_platform_spec &s);
/* The leaf switch (group x rails + rail) that node @node's NIC @rail uses */
int sim_platform_leaf_of(const sim_platform_spec &s, int node, int rail);

struct sim_platform {
	sim_platform_spec spec;
	std::vector<simgrid::s4u::Host *> nic; /* [node * rails + rail] */
	std::vector<simgrid::s4u::Host *> gpu; /* [node * gpus + gpu] */
	std::vector<simgrid::s4u::SplitDuplexLink *> nic_link; /* as nic[] */
	std::vector<simgrid::s4u::Link *> uplink; /* [leaf] */

	simgrid::s4u::Host *nic_host(int node, int rail) const
	{
		return nic[node * spec.rails + rail];
	}
	simgrid::s4u::Host *gpu_host(int node, int g) const
	{
		return gpu[node * spec.gpus + g];
	}
};

/*
 * sim_network_config() - set SimGrid's network model up for RDMA: no TCP
 * calibration (latency and bandwidth factors 1), no cross-traffic, no
 * RTT-weighted sharing. Call once, before sim_platform_build().
 */
void sim_network_config(void);
/*
 * sim_platform_build() - create the zones, hosts and links in the
 * process's one SimGrid engine (call once, after sim_network_config()).
 */
void sim_platform_build(const sim_platform_spec &s, sim_platform &out);

#endif
