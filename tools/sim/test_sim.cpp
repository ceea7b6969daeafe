/* SPDX-License-Identifier: MIT */
/*
 * test_sim.cpp - unit tests of r2cc-sim: the platform generator, the
 * schedules (flows per round, bytes per rank), the policies and the
 * closed forms. One test per process (SimGrid has one engine per
 * process): test_sim NAME, as meson test runs it.
 */
#include <cmath>
#include <cstdio>
#include <cstring>
#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include "place.hpp"
#include "platform.hpp"
#include "run.hpp"
#include "sched.hpp"

namespace sg4 = simgrid::s4u;

static int failed;

#define EXPECT(cond)                                                      \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "%s:%d: expected %s\n", __FILE__, \
				__LINE__, #cond);                         \
			failed++;                                         \
		}                                                         \
	} while (0)
#define EXPECT_NEAR(a, b, rel)                                                 \
	do {                                                                   \
		double a_ = (a), b_ = (b);                                     \
		if (!(std::fabs(a_ - b_) <= (rel)*std::fabs(b_))) {            \
			fprintf(stderr, "%s:%d: %s = %g, want %g within %g\n", \
				__FILE__, __LINE__, #a, a_, b_,                \
				(double)(rel));                                \
			failed++;                                              \
		}                                                              \
	} while (0)

static std::vector<int> iota(int n)
{
	std::vector<int> v;

	for (int i = 0; i < n; i++)
		v.push_back(i);
	return v;
}

static void platform_shape(void)
{
	sim_platform_spec s; /* the defaults: 128 x 8 x 8, 16 per leaf */
	sim_platform_shape sh = sim_platform_shape_of(s);

	EXPECT(sim_platform_check(s).empty());
	EXPECT(sh.groups == 8);
	EXPECT(sh.leaves == 64);
	EXPECT(sh.nic_hosts == 1024);
	EXPECT(sh.gpu_hosts == 1024);
	EXPECT(sh.links == 1024 + 1024 + 128 + 64);
	EXPECT(sim_platform_leaf_of(s, 17, 3) == 1 * 8 + 3);
	s.rails = 65;
	EXPECT(!sim_platform_check(s).empty());
}

static size_t route_len(sg4::Host *a, sg4::Host *b, double *lat)
{
	std::vector<sg4::Link *> links;

	*lat = 0;
	a->route_to(b, links, lat);
	return links.size();
}

static void platform_routes(void)
{
	sim_platform_spec s;
	sim_platform pf;
	double lat;

	s.nodes = 8;
	s.nodes_per_leaf = 4;
	sim_network_config();
	sim_platform_build(s, pf);
	EXPECT(sg4::Engine::get_instance()->get_host_count() == 8 * 8 * 2);
	/* same leaf: NIC up, NIC down */
	EXPECT(route_len(pf.nic_host(0, 3), pf.nic_host(3, 3), &lat) == 2);
	EXPECT_NEAR(lat, 2e-6, 1e-9);
	/* across groups: NIC, leaf uplink, leaf downlink, NIC */
	EXPECT(route_len(pf.nic_host(0, 3), pf.nic_host(4, 3), &lat) == 4);
	EXPECT_NEAR(lat, 4e-6, 1e-9);
	/* NVLink inside a node */
	EXPECT(route_len(pf.gpu_host(5, 0), pf.gpu_host(5, 7), &lat) == 2);
	EXPECT_NEAR(lat, 1e-6, 1e-9);
	EXPECT_NEAR(pf.nic_link[0]->get_bandwidth(), 400e9 / 8, 1e-12);
	EXPECT_NEAR(pf.uplink[0]->get_bandwidth(), 4 * 400e9 / 8, 1e-12);
}

static void sched_ring(void)
{
	sim_sched s;
	int n = 8, C = 2;
	double S = 1e9;

	sim_sched_ring(s, iota(n), 3, 3, C, S);
	EXPECT((int)s.actors.size() == n * C);
	EXPECT((int)s.conns.size() == n * C);
	EXPECT((int)s.actors[0].steps.size() == 2 * (n - 1) + 1);
	for (int k = 0; k < 2 * (n - 1); k++)
		EXPECT(sim_sched_flows_in_step(s, k) == n * C);
	EXPECT(sim_sched_flows_in_step(s, 2 * (n - 1)) == 0);
	EXPECT(sim_sched_flows(s) == 2 * (n - 1) * n * C);
	/* every rank sends 2(n-1)/n of the buffer: reduce-scatter+allgather */
	for (int i = 0; i < n; i++)
		EXPECT_NEAR(sim_sched_bytes_from(s, i, 3),
			    2.0 * (n - 1) / n * S, 1e-9);
	for (const sim_conn &c : s.conns)
		EXPECT(c.rail == 3 && c.dst == (c.src + 1) % n);
}

static void sched_tree(void)
{
	sim_sched s;
	int n = 8, C = 2, K = 4;
	double S = 1e9, total = 0;
	std::vector<int> inner(n);

	sim_sched_tree(s, iota(n), 0, 0, C, K, S);
	EXPECT(sim_sched_flows(s) == 2 * (n - 1) * K * C);
	for (int i = 0; i < n; i++)
		total += sim_sched_bytes_from(s, i, 0);
	/* each channel: n-1 edges up and n-1 down, S/C each way */
	EXPECT_NEAR(total, 2.0 * (n - 1) * S, 1e-9);
	/* double binary tree: a member is inner in at most one tree. Tree 0
	 * has parents below their children, its mirror above */
	for (const sim_conn &c : s.conns) {
		int mirror = c.chan % 2;

		if (mirror ? c.src > c.dst : c.src < c.dst)
			inner[c.src] |= 1 << mirror;
	}
	EXPECT(inner[0] == 1 && inner[n - 1] == 2);
	for (int i = 0; i < n; i++)
		EXPECT(inner[i] != 3);
}

static void sched_a2a(void)
{
	sim_sched s;
	int n = 4, G = 8;
	double D = 64e6;

	sim_sched_alltoall(s, iota(n), G, G, D);
	EXPECT((int)s.actors.size() == n * G);
	EXPECT(sim_sched_flows_in_step(s, 0) == 0); /* NVLink staging */
	for (int r = 1; r < n; r++)
		EXPECT(sim_sched_flows_in_step(s, r) == n * G);
	EXPECT(sim_sched_flows(s) == (n - 1) * n * G);
	/* NVLink: (G-1)/G of D; network: (n-1)/n of D */
	for (int g = 0; g < G; g++)
		EXPECT_NEAR(sim_sched_bytes_from(s, 1, g),
			    (G - 1.0) / G * D + (n - 1.0) / n * D, 1e-9);
	/* round 1 of node 0 goes to node 1, on the GPU's own rail */
	const sim_xfer &x = s.actors[0 * G + 5].steps[1].sends[0];
	EXPECT(s.conns[x.conn].dst == 1 && s.conns[x.conn].rail == 5);
}

static void place_policies(void)
{
	sim_sched s;
	sim_placement p;
	sim_place_opts o = { 8, 400, 1, 4 };
	sim_nicset dead = { { 0, 0 } };
	std::set<int> used;

	for (int g = 0; g < 8; g++)
		sim_sched_ring(s, iota(8), g, g, 2, 1e9);
	EXPECT(!sim_place(s, dead, SIM_POL_NONE, o, p));
	EXPECT(sim_place(s, dead, SIM_POL_FIXED, o, p));
	for (size_t i = 0; i < s.conns.size(); i++)
		if (s.conns[i].rail == 0 &&
		    (s.conns[i].src == 0 || s.conns[i].dst == 0))
			EXPECT(p[i].size() == 1 && p[i][0].rail == 1);
	EXPECT(sim_place(s, dead, SIM_POL_IDEAL, o, p));
	for (size_t i = 0; i < s.conns.size(); i++)
		if (s.conns[i].rail == 0 && s.conns[i].src == 0)
			EXPECT(p[i].size() == 7 &&
			       std::fabs(p[i][0].w - 1.0 / 7) < 1e-12);
	/* r2cc: the 4 connections of NIC 0 (2 channels, both ways) go to
	 * 4 different rails, least loaded first; none to a dead one */
	dead.insert({ 0, 5 });
	EXPECT(sim_place(s, dead, SIM_POL_R2CC, o, p));
	for (size_t i = 0; i < s.conns.size(); i++)
		if (s.conns[i].rail == 0 &&
		    (s.conns[i].src == 0 || s.conns[i].dst == 0)) {
			EXPECT(p[i].size() == 1);
			EXPECT(p[i][0].rail != 0 && p[i][0].rail != 5);
			used.insert(p[i][0].rail);
		}
	EXPECT(used.size() == 4);
	/* a NIC carries 4 connections (2 channels, both ways); NIC 0's 4
	 * more: whole, one rail gets 5; as 16 QPs, 4.75; fluid, 4 + 4/7 */
	dead = { { 0, 0 } };
	EXPECT(sim_place(s, dead, SIM_POL_R2CC, o, p));
	EXPECT(std::fabs(sim_place_max_rail_share(s, p, 8) - 5) < 1e-9);
	EXPECT(sim_place(s, dead, SIM_POL_SPLIT, o, p));
	EXPECT(std::fabs(sim_place_max_rail_share(s, p, 8) - 4.75) < 1e-9);
	EXPECT(sim_place(s, dead, SIM_POL_IDEAL, o, p));
	EXPECT(std::fabs(sim_place_max_rail_share(s, p, 8) - 32.0 / 7) < 1e-9);
	/* r2cc-rtr: backups placed at connection time; with NICs 0 and 1
	 * dead, a backup on rail 1 is placed again: none on a dead rail */
	dead = { { 0, 0 }, { 0, 1 } };
	EXPECT(sim_place(s, dead, SIM_POL_RTR, o, p));
	for (size_t i = 0; i < s.conns.size(); i++)
		for (const sim_part &part : p[i])
			EXPECT(!((s.conns[i].src == 0 || s.conns[i].dst == 0) &&
				 part.rail < 2));
}

/* Ring on 8 nodes: fault-free time against the bandwidth bound, and
 * the ideal policy against 1/(1-X) within 2 % */
static void closed_form(void)
{
	sim_platform_spec spec;
	sim_platform pf;
	sim_sched s;
	sim_place_opts o = { 8, 400, 1, 4 };
	int n = 8;
	double S = 1e9;

	spec.nodes = n;
	spec.nodes_per_leaf = 4;
	sim_network_config();
	sim_platform_build(spec, pf);
	for (int g = 0; g < 8; g++)
		sim_sched_ring(s, iota(n), g, g, 2, S);
	double t0 = sim_run(pf, s, sim_place_healthy(s)).seconds;

	/* each NIC carries one GPU's ring: 2(n-1)/n x S at 50 GB/s */
	EXPECT_NEAR(t0, 2.0 * (n - 1) / n * S / 50e9, 0.02);
	for (int k : { 1, 2, 4 }) {
		sim_nicset dead;
		sim_placement p;
		double X = k / 8.0;

		for (int r = 0; r < k; r++)
			dead.insert({ 0, r });
		EXPECT(sim_place(s, dead, SIM_POL_IDEAL, o, p));
		double t = sim_run(pf, s, p).seconds;

		printf("X %.3f ideal %.4f closed form %.4f\n", X, t / t0,
		       1 / (1 - X));
		EXPECT_NEAR(t / t0, 1 / (1 - X), 0.02);
	}
}

/* Link::turn_off() mid-run: the failed flows are resent after the
 * failover delay, on the rails r2cc picked, and the run completes */
static void failover(void)
{
	sim_platform_spec spec;
	sim_platform pf;
	sim_sched s;
	sim_place_opts o = { 8, 400, 1, 4 };
	sim_nicset dead = { { 0, 0 } };

	spec.nodes = 4;
	spec.nodes_per_leaf = 4;
	sim_network_config();
	sim_platform_build(spec, pf);
	sim_sched_ring(s, iota(4), 0, 0, 2, 1e9);
	sim_placement healthy = sim_place_healthy(s);
	double t0 = sim_run(pf, s, healthy).seconds;

	for (int pol : { SIM_POL_R2CC, SIM_POL_IDEAL }) {
		sim_placement after;

		EXPECT(sim_place(s, dead, (sim_policy)pol, o, after));
		sim_fault_event ev = { t0 / 2, dead, &after, 0.5 };
		sim_run_stats r = sim_run(pf, s, healthy, &ev);

		printf("%s: fault-free %.4f s, failover %.4f s\n",
		       sim_policy_name[pol], t0, r.seconds);
		EXPECT(r.seconds > t0 / 2 + 0.5);
		EXPECT(r.seconds < 2 * t0 + 0.5);
		/* the links are back up: a fault-free run is as before */
		EXPECT_NEAR(sim_run(pf, s, healthy).seconds, t0, 1e-6);
	}
}

/*
 * The lab's case (placement.bw): 2 connections a rail on 3 rails from
 * node 0 to node 1, node 0 loses rail 0. The fixed pair puts both on
 * rail 1 (4 streams share it: each at half its speed), r2cc and the
 * ideal spread them (3 a rail: two thirds).
 */
static void lab_streams(void)
{
	sim_platform_spec spec;
	sim_platform pf;
	sim_sched s;
	sim_place_opts o = { 3, 16, 1, 4 };
	sim_nicset dead = { { 0, 0 } };
	double S = 1e6;

	spec.nodes = 2;
	spec.gpus = 3;
	spec.rails = 3;
	spec.nodes_per_leaf = 2;
	spec.nic_gbps = 16;
	sim_network_config();
	sim_platform_build(spec, pf);
	sim_sched_streams(s, 0, 1, 3, 2, S);
	EXPECT(s.conns.size() == 6);
	EXPECT(sim_sched_flows_in_step(s, 0) == 6);
	EXPECT_NEAR(sim_sched_bytes_from(s, 0, 2), 2 * S, 1e-12);
	EXPECT_NEAR(sim_sched_bytes_from(s, 1, 2), 0, 1e-12);
	double t0 = sim_run(pf, s, sim_place_healthy(s)).seconds;

	/* two streams share a 2 GB/s NIC */
	EXPECT_NEAR(t0, 2 * S / 2e9, 0.01);
	for (auto pw : { std::make_pair(SIM_POL_FIXED, 0.5),
			 std::make_pair(SIM_POL_R2CC, 2 / 3.0),
			 std::make_pair(SIM_POL_RTR, 2 / 3.0),
			 std::make_pair(SIM_POL_IDEAL, 2 / 3.0) }) {
		sim_placement p;

		EXPECT(sim_place(s, dead, pw.first, o, p));
		double r = t0 / sim_run(pf, s, p).seconds;

		printf("%s: bandwidth ratio %.4f\n", sim_policy_name[pw.first],
		       r);
		EXPECT_NEAR(r, pw.second, 0.01);
	}
}

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
	{ "platform-shape", platform_shape },
	{ "platform-routes", platform_routes },
	{ "sched-ring", sched_ring },
	{ "sched-tree", sched_tree },
	{ "sched-alltoall", sched_a2a },
	{ "place-policies", place_policies },
	{ "closed-form", closed_form },
	{ "failover", failover },
	{ "lab-streams", lab_streams },
};

int main(int argc, char **argv)
{
	sg4::Engine e(&argc, argv);

	xbt_log_control_set("xbt_cfg.thresh:warning");
	for (const auto &t : tests)
		if (argc == 2 && !strcmp(argv[1], t.name)) {
			t.fn();
			printf("%s: %s\n", t.name, failed ? "FAIL" : "ok");
			return failed ? 1 : 0;
		}
	fprintf(stderr, "usage: test_sim NAME\n");
	return 2;
}
