/* SPDX-License-Identifier: MIT */
/*
 * platform.cpp - build the rail-optimised fat tree in SimGrid: a star of
 * leaf zones (one per rail per node group) under the spine, and one star
 * zone per node for its GPUs' NVLink.
 */
#include "platform.hpp"

#include <simgrid/s4u.hpp>

namespace sg4 = simgrid::s4u;
using LinkDir = sg4::LinkInRoute::Direction;
using simgrid::kernel::routing::NetPoint;

std::string sim_platform_check(const sim_platform_spec &s)
{
	if (s.nodes < 2 || s.nodes > 65536)
		return "nodes must be 2..65536";
	if (s.gpus < 1 || s.gpus > 64)
		return "gpus must be 1..64";
	/* r2cc_place_order() weighs at most R2CC_PLACE_RAILS_MAX rails */
	if (s.rails < 1 || s.rails > 64)
		return "rails must be 1..64";
	if (s.nodes_per_leaf < 1)
		return "nodes per leaf must be at least 1";
	if (!(s.nic_gbps > 0) || !(s.nvlink_gbps > 0) || !(s.oversub > 0))
		return "bandwidths and oversubscription must be positive";
	if (!(s.latency_us >= 0) || !(s.nvlink_latency_us >= 0))
		return "latencies must not be negative";
	return "";
}

sim_platform_shape sim_platform_shape_of(const sim_platform_spec &s)
{
	sim_platform_shape sh;

	sh.groups = (s.nodes + s.nodes_per_leaf - 1) / s.nodes_per_leaf;
	sh.leaves = sh.groups * s.rails;
	sh.nic_hosts = s.nodes * s.rails;
	sh.gpu_hosts = s.nodes * s.gpus;
	/* NIC links, NVLink links, one PCIe link per node, leaf uplinks */
	sh.links = sh.nic_hosts + sh.gpu_hosts + s.nodes + sh.leaves;
	return sh;
}

int sim_platform_leaf_of(const sim_platform_spec &s, int node, int rail)
{
	return (node / s.nodes_per_leaf) * s.rails + rail;
}

void sim_network_config(void)
{
	/*
	 * SimGrid's default LV08 model is calibrated for TCP (latency x
	 * 13.01, bandwidth x 0.97, RTT-weighted sharing, ACK cross-traffic).
	 * RDMA has none of that: a flow gets its max-min fair share.
	 */
	sg4::Engine::set_config("network/latency-factor:1");
	sg4::Engine::set_config("network/bandwidth-factor:1");
	sg4::Engine::set_config("network/crosstraffic:0");
	sg4::Engine::set_config("network/weight-S:0");
	/* no TCP window bound on a flow's rate */
	sg4::Engine::set_config("network/TCP-gamma:0");
	/* thousands of shallow actors: small stacks (KiB), less memory */
	sg4::Engine::set_config("contexts/stack-size:256");
}

static double bytes_per_s(double gbps)
{
	return gbps * 1e9 / 8;
}

static sg4::SplitDuplexLink *duplex(sg4::NetZone *z, const std::string &name,
				    double gbps, double lat_us)
{
	sg4::SplitDuplexLink *l =
		z->create_split_duplex_link(name, bytes_per_s(gbps));

	l->set_latency(lat_us * 1e-6)->seal();
	return l;
}

/* One star zone per node: its GPUs on NVLink (the NVSwitch is the star) */
static void build_node(const sim_platform_spec &s, sg4::NetZone *root, int node,
		       sim_platform &out)
{
	std::string nn = "n" + std::to_string(node);
	sg4::NetZone *z = sg4::create_star_zone(nn);

	z->set_parent(root);
	for (int g = 0; g < s.gpus; g++) {
		std::string hn = nn + "-gpu" + std::to_string(g);
		sg4::Host *h = z->create_host(hn, 1e9)->seal();
		sg4::Link *l = duplex(z, hn + "-nvl", s.nvlink_gbps,
				      s.nvlink_latency_us);

		z->add_route(h->get_netpoint(), nullptr, nullptr, nullptr,
			     { { l, LinkDir::UP } }, true);
		out.gpu[node * s.gpus + g] = h;
	}
	/* Never used by the workloads (GPUs reach the network through the
	 * NIC hosts); a PCIe Gen5 x16 link keeps every route defined. */
	NetPoint *gw = z->create_router(nn + "-pcie-sw");
	sg4::Link *pcie = duplex(root, nn + "-pcie", 512, 1);

	root->add_route(z->get_netpoint(), nullptr, gw, nullptr,
			{ { pcie, LinkDir::UP } }, true);
	z->seal();
}

/* One star zone per (group, rail): the leaf switch and its NICs */
static void build_leaf(const sim_platform_spec &s, sg4::NetZone *root,
		       int group, int rail, sim_platform &out)
{
	std::string ln =
		"leaf" + std::to_string(group) + "-r" + std::to_string(rail);
	sg4::NetZone *z = sg4::create_star_zone(ln);
	int first = group * s.nodes_per_leaf;
	int last = std::min(s.nodes, first + s.nodes_per_leaf);

	z->set_parent(root);
	for (int node = first; node < last; node++) {
		std::string hn = "n" + std::to_string(node) + "-nic" +
				 std::to_string(rail);
		sg4::Host *h = z->create_host(hn, 1e9)->seal();
		sg4::SplitDuplexLink *l =
			duplex(z, hn, s.nic_gbps, s.latency_us);

		z->add_route(h->get_netpoint(), nullptr, nullptr, nullptr,
			     { { l, LinkDir::UP } }, true);
		out.nic[node * s.rails + rail] = h;
		out.nic_link[node * s.rails + rail] = l;
	}
	/* Non-blocking (oversub 1): the uplinks carry every port's rate */
	NetPoint *gw = z->create_router(ln + "-sw");
	sg4::Link *up =
		duplex(root, ln + "-up",
		       s.nic_gbps * (last - first) / s.oversub, s.latency_us);

	root->add_route(z->get_netpoint(), nullptr, gw, nullptr,
			{ { up, LinkDir::UP } }, true);
	out.uplink[group * s.rails + rail] = up;
	z->seal();
}

void sim_platform_build(const sim_platform_spec &s, sim_platform &out)
{
	sim_platform_shape sh = sim_platform_shape_of(s);
	sg4::NetZone *root = sg4::create_star_zone("spine");

	out.spec = s;
	out.nic.assign(sh.nic_hosts, nullptr);
	out.nic_link.assign(sh.nic_hosts, nullptr);
	out.gpu.assign(sh.gpu_hosts, nullptr);
	out.uplink.assign(sh.leaves, nullptr);
	for (int node = 0; node < s.nodes; node++)
		build_node(s, root, node, out);
	for (int g = 0; g < sh.groups; g++)
		for (int r = 0; r < s.rails; r++)
			build_leaf(s, root, g, r, out);
	root->seal();
}
