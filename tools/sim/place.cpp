/* SPDX-License-Identifier: MIT */
/*
 * place.cpp - the failover policies. r2cc's goes through place_r2cc.c to
 * the shim's own policy/placement.c.
 */
#include "place.hpp"

#include <algorithm>
#include <map>

#include "place_r2cc.h"

const char *const sim_policy_name[SIM_POL_NR] = {
	"none", "fixed", "r2cc", "ideal", "r2cc-split", "r2cc-rtr",
};

sim_placement sim_place_healthy(const sim_sched &s)
{
	sim_placement p(s.conns.size());

	for (size_t i = 0; i < s.conns.size(); i++)
		p[i] = { { s.conns[i].rail, 1.0 } };
	return p;
}

static bool dead_at(const sim_nicset &dead, int node, int rail)
{
	return dead.count({ node, rail }) != 0;
}

static bool usable(const sim_nicset &dead, const sim_conn &c, int rail)
{
	return !dead_at(dead, c.src, rail) && !dead_at(dead, c.dst, rail);
}

/* R2CCL's fixed pairs; if the partner is down too, the next rail up */
static int fixed_rail(const sim_nicset &dead, const sim_conn &c, int rails)
{
	int pair = c.rail ^ 1;

	if (pair < rails && usable(dead, c, pair))
		return pair;
	for (int k = 1; k < rails; k++) {
		int r = (c.rail + k) % rails;

		if (usable(dead, c, r))
			return r;
	}
	return -1;
}

static void add_part(std::vector<sim_part> &parts, int rail, double w)
{
	for (sim_part &p : parts)
		if (p.rail == rail) {
			p.w += w;
			return;
		}
	parts.push_back({ rail, w });
}

/* load[node][rail]: QPs on that NIC, both directions */
using loadmap = std::map<int, std::vector<uint32_t>>;

static loadmap healthy_load(const sim_sched &s, int rails, int qps)
{
	loadmap load;

	for (const sim_conn &c : s.conns)
		for (int end : { c.src, c.dst }) {
			std::vector<uint32_t> &l = load[end];

			l.resize(rails);
			l[c.rail] += qps;
		}
	return load;
}

/*
 * r2cc: each of the connection's @qps QPs is placed by
 * r2cc_place_choose() as seen from the end whose NIC died, with the
 * rails' current loads; the chosen rail's load then grows at both ends.
 */
static bool r2cc_parts(const sim_sched &s, int ci, const sim_nicset &dead,
		       const sim_place_opts &o, int qps, loadmap &load,
		       std::vector<sim_part> &parts)
{
	const sim_conn &c = s.conns[ci];
	int me = dead_at(dead, c.src, c.rail) ? c.src : c.dst;
	int peer = me == c.src ? c.dst : c.src;
	std::vector<sim_rail> rails(o.rails);

	for (int q = 0; q < qps; q++) {
		uint32_t qpn = (uint32_t)(ci * qps + q) & 0x7fffff;

		for (int r = 0; r < o.rails; r++) {
			rails[r].up = usable(dead, c, r);
			rails[r].cap_mbps = (uint32_t)(o.nic_gbps * 1000);
			rails[r].load = load[me][r];
		}
		int r = sim_r2cc_choose(rails.data(), o.rails, c.rail,
					sim_r2cc_salt(me, qpn * 2, peer,
						      qpn * 2 + 1, c.rail));
		if (r < 0)
			return false;
		load[me][r]++;
		load[peer][r]++;
		load[me][c.rail]--;
		load[peer][c.rail]--;
		add_part(parts, r, 1.0 / qps);
	}
	return true;
}

static std::vector<uint32_t> &load_of(loadmap &m, int node, int rails)
{
	std::vector<uint32_t> &l = m[node];

	l.resize(rails);
	return l;
}

/*
 * r2cc as the shim runs it (shim/protect.c, backup_rail()): each QP's
 * backup is placed when it connects (RTR), all rails up, the load being
 * the backups already placed on the node's rails; both ends decide
 * alone and the lower GID's choice stands (migrate/). Return: [conn][qp].
 */
static std::vector<std::vector<int>>
rtr_backups(const sim_sched &s, const sim_place_opts &o, loadmap &bk)
{
	std::vector<std::vector<int>> b(s.conns.size());
	std::vector<sim_rail> rails(o.rails);

	for (size_t ci = 0; ci < s.conns.size(); ci++) {
		const sim_conn &c = s.conns[ci];
		int win = std::min(c.src, c.dst), peer = std::max(c.src, c.dst);

		for (int q = 0; q < o.qps; q++) {
			uint32_t qpn = (uint32_t)(ci * o.qps + q) & 0x7fffff;
			std::vector<uint32_t> &l = load_of(bk, win, o.rails);

			for (int r = 0; r < o.rails; r++)
				rails[r] = { 1, (uint32_t)(o.nic_gbps * 1000),
					     l[r] };
			int r = sim_r2cc_choose(rails.data(), o.rails, c.rail,
						sim_r2cc_salt(win, qpn * 2,
							      peer, qpn * 2 + 1,
							      c.rail));
			b[ci].push_back(r);
			if (r >= 0) {
				l[r]++;
				load_of(bk, peer, o.rails)[r]++;
			}
		}
	}
	return b;
}

/* At the failure: each QP to its backup; if that is down too, placed
 * again among the rails up now (protect.c, "a new standby rail") */
static bool rtr_parts(const sim_sched &s, int ci, const sim_nicset &dead,
		      const sim_place_opts &o,
		      const std::vector<std::vector<int>> &backup, loadmap &bk,
		      std::vector<sim_part> &parts)
{
	const sim_conn &c = s.conns[ci];
	int me = dead_at(dead, c.src, c.rail) ? c.src : c.dst;
	int peer = me == c.src ? c.dst : c.src;
	std::vector<sim_rail> rails(o.rails);

	for (int q = 0; q < o.qps; q++) {
		int r = backup[ci][q];

		if (r < 0 || !usable(dead, c, r)) {
			std::vector<uint32_t> &l = load_of(bk, me, o.rails);

			for (int k = 0; k < o.rails; k++)
				rails[k] = { usable(dead, c, k),
					     (uint32_t)(o.nic_gbps * 1000),
					     l[k] };
			uint32_t qpn = (uint32_t)(ci * o.qps + q) & 0x7fffff;

			r = sim_r2cc_choose(rails.data(), o.rails, c.rail,
					    sim_r2cc_salt(me, qpn * 2, peer,
							  qpn * 2 + 1, c.rail));
			if (r < 0)
				return false;
			l[r]++;
			load_of(bk, peer, o.rails)[r]++;
		}
		add_part(parts, r, 1.0 / o.qps);
	}
	return true;
}

bool sim_place(const sim_sched &s, const sim_nicset &dead, sim_policy pol,
	       const sim_place_opts &o, sim_placement &out)
{
	int qps = pol == SIM_POL_SPLIT ? o.split_qps : o.qps;
	loadmap load = healthy_load(s, o.rails, qps), bk;
	std::vector<std::vector<int>> backup;

	if (pol == SIM_POL_RTR && !dead.empty())
		backup = rtr_backups(s, o, bk);

	out = sim_place_healthy(s);
	for (size_t ci = 0; ci < s.conns.size(); ci++) {
		const sim_conn &c = s.conns[ci];
		std::vector<sim_part> parts;
		int r;

		if (usable(dead, c, c.rail))
			continue;
		switch (pol) {
		case SIM_POL_NONE:
			return false;
		case SIM_POL_FIXED:
			r = fixed_rail(dead, c, o.rails);
			if (r < 0)
				return false;
			parts.push_back({ r, 1.0 });
			break;
		case SIM_POL_IDEAL:
			/* equal NICs: equal shares over the survivors */
			for (r = 0; r < o.rails; r++)
				if (usable(dead, c, r))
					parts.push_back({ r, 1.0 });
			if (parts.empty())
				return false;
			for (sim_part &p : parts)
				p.w = 1.0 / parts.size();
			break;
		case SIM_POL_RTR:
			if (!rtr_parts(s, (int)ci, dead, o, backup, bk, parts))
				return false;
			break;
		default:
			if (!r2cc_parts(s, (int)ci, dead, o, qps, load, parts))
				return false;
		}
		out[ci] = parts;
	}
	return true;
}

double sim_place_max_rail_share(const sim_sched &s, const sim_placement &p,
				int rails)
{
	std::map<int, std::vector<double>> n;
	double worst = 0;

	for (size_t ci = 0; ci < s.conns.size(); ci++)
		for (const sim_part &part : p[ci])
			for (int end : { s.conns[ci].src, s.conns[ci].dst }) {
				std::vector<double> &l = n[end];

				l.resize(rails);
				l[part.rail] += part.w;
				worst = std::max(worst, l[part.rail]);
			}
	return worst;
}
