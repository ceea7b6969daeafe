/* SPDX-License-Identifier: MIT */
/*
 * sched.cpp - ring, tree and all-to-all schedules as per-actor programs.
 */
#include "sched.hpp"

int sim_sched::conn(int src, int dst, int rail, int chan)
{
	auto key = std::make_tuple(src, dst, rail, chan);
	auto it = conn_ix.find(key);

	if (it != conn_ix.end())
		return it->second;
	conns.push_back({ src, dst, rail, chan });
	conn_ix[key] = (int)conns.size() - 1;
	return (int)conns.size() - 1;
}

int sim_sched::actor(int node, int gpu)
{
	actors.push_back({ node, gpu, {} });
	return (int)actors.size() - 1;
}

static sim_xfer net_xfer(int to, int conn, double bytes)
{
	return { to, conn, -1, -1, bytes };
}

void sim_sched_ring(sim_sched &s, const std::vector<int> &members, int gpu,
		    int rail, int chans, double bytes)
{
	int n = (int)members.size();
	double chunk = bytes / chans / n;

	if (n < 2)
		return;
	for (int c = 0; c < chans; c++) {
		int chan = gpu * 1024 + c;
		int base = (int)s.actors.size();

		for (int i = 0; i < n; i++)
			s.actor(members[i], gpu);
		for (int i = 0; i < n; i++) {
			int next = (i + 1) % n;
			int cn = s.conn(members[i], members[next], rail, chan);
			sim_actor &a = s.actors[base + i];

			/* reduce-scatter then allgather: 2(n-1) sends */
			for (int k = 0; k < 2 * (n - 1); k++)
				a.steps.push_back({ k ? 1 : 0,
						    { net_xfer(base + next, cn,
							       chunk) } });
			a.steps.push_back({ 1, {} }); /* the last receive */
		}
	}
}

void sim_sched_streams(sim_sched &s, int src, int dst, int rails, int chans,
		       double bytes)
{
	for (int r = 0; r < rails; r++)
		for (int c = 0; c < chans; c++) {
			int from = s.actor(src, r), to = s.actor(dst, r);
			int cn = s.conn(src, dst, r, r * 1024 + c);

			s.actors[from].steps.push_back(
				{ 0, { net_xfer(to, cn, bytes) } });
			s.actors[to].steps.push_back({ 1, {} });
		}
}

/* Heap-shaped binary tree over positions; @mirror reverses positions */
static int tree_pos(int member, int n, bool mirror)
{
	return mirror ? n - 1 - member : member;
}

static void tree_channel(sim_sched &s, const std::vector<int> &members, int gpu,
			 int rail, int chan, bool mirror, int chunks,
			 double chunk)
{
	int n = (int)members.size();
	std::vector<int> up(n), down(n), at(n);

	/* at[pos] = member index at heap position pos */
	for (int i = 0; i < n; i++)
		at[tree_pos(i, n, mirror)] = i;
	for (int i = 0; i < n; i++)
		up[i] = s.actor(members[i], gpu);
	for (int i = 0; i < n; i++)
		down[i] = s.actor(members[i], gpu);
	for (int p = 0; p < n; p++) {
		int i = at[p], me = members[i];
		std::vector<int> kids;

		for (int q = 2 * p + 1; q <= 2 * p + 2 && q < n; q++)
			kids.push_back(at[q]);
		for (int k = 0; k < chunks; k++) {
			sim_step st = { (int)kids.size(), {} };

			if (p) { /* reduce: up to the parent */
				int par = at[(p - 1) / 2];
				int cn = s.conn(me, members[par], rail, chan);

				st.sends.push_back(
					net_xfer(up[par], cn, chunk));
			} else { /* the root turns the reduction around */
				for (int kid : kids)
					st.sends.push_back(net_xfer(
						down[kid],
						s.conn(me, members[kid], rail,
						       chan),
						chunk));
			}
			s.actors[up[i]].steps.push_back(st);
			if (!p)
				continue;
			/* broadcast: from the parent down to the children */
			sim_step bc = { 1, {} };

			for (int kid : kids)
				bc.sends.push_back(net_xfer(
					down[kid],
					s.conn(me, members[kid], rail, chan),
					chunk));
			s.actors[down[i]].steps.push_back(bc);
		}
	}
}

void sim_sched_tree(sim_sched &s, const std::vector<int> &members, int gpu,
		    int rail, int chans, int chunks, double bytes)
{
	if (members.size() < 2 || chunks < 1)
		return;
	for (int c = 0; c < chans; c++)
		tree_channel(s, members, gpu, rail, gpu * 1024 + c, c % 2,
			     chunks, bytes / chans / chunks);
}

void sim_sched_alltoall(sim_sched &s, const std::vector<int> &members, int gpus,
			int rails, double bytes)
{
	int n = (int)members.size();
	int base = (int)s.actors.size();

	if (n < 1)
		return;
	for (int i = 0; i < n; i++)
		for (int g = 0; g < gpus; g++)
			s.actor(members[i], g);
	for (int i = 0; i < n; i++) {
		for (int g = 0; g < gpus; g++) {
			sim_actor &a = s.actors[base + i * gpus + g];
			sim_step stage = { 0, {} };

			/* PXN: GPU g hands GPU h what goes to GPU h anywhere */
			for (int h = 0; h < gpus; h++)
				if (h != g)
					stage.sends.push_back(
						{ base + i * gpus + h, -1, g, h,
						  bytes / gpus });
			a.steps.push_back(stage);
			/* then NIC g carries the node's data for GPU g of
			 * node i+r: gpus x bytes/(n x gpus) */
			for (int r = 1; r < n; r++) {
				int j = (i + r) % n;
				int cn = s.conn(members[i], members[j],
						g % rails, -1 - g);

				a.steps.push_back(
					{ r == 1 ? gpus - 1 : 1,
					  { net_xfer(base + j * gpus + g, cn,
						     bytes / n) } });
			}
			a.steps.push_back({ n > 1 ? 1 : gpus - 1, {} });
		}
	}
}

double sim_sched_bytes_from(const sim_sched &s, int node, int gpu)
{
	double b = 0;

	for (const sim_actor &a : s.actors)
		if (a.node == node && a.gpu == gpu)
			for (const sim_step &st : a.steps)
				for (const sim_xfer &x : st.sends)
					b += x.bytes;
	return b;
}

int sim_sched_flows_in_step(const sim_sched &s, int step)
{
	int f = 0;

	for (const sim_actor &a : s.actors)
		if (step < (int)a.steps.size())
			for (const sim_xfer &x : a.steps[step].sends)
				f += x.conn >= 0;
	return f;
}

int sim_sched_flows(const sim_sched &s)
{
	int f = 0;

	for (const sim_actor &a : s.actors)
		for (const sim_step &st : a.steps)
			for (const sim_xfer &x : st.sends)
				f += x.conn >= 0;
	return f;
}

std::vector<std::vector<int>> sim_dp_groups(int nodes, int pp)
{
	std::vector<std::vector<int>> g;

	if (pp < 1 || nodes % pp)
		return g;
	for (int stage = 0; stage < pp; stage++) {
		std::vector<int> m;

		for (int d = 0; d < nodes / pp; d++)
			m.push_back(d * pp + stage);
		g.push_back(m);
	}
	return g;
}
