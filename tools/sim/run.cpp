/* SPDX-License-Identifier: MIT */
/*
 * run.cpp - the actors: take a step's tokens, start its flows with
 * Comm::sendto_async() between the NIC hosts of the rails chosen (or the
 * GPU hosts, over NVLink), and pass a token on as each send completes.
 */
#include "run.hpp"

#include <cmath>
#include <cstdio>
#include <simgrid/s4u.hpp>

namespace sg4 = simgrid::s4u;

struct run_ctx {
	const sim_platform &pf;
	const sim_sched &s;
	const sim_placement &p;
	const sim_fault_event *ev;
	double t0;
	std::vector<sg4::SemaphorePtr> sem;
	long flows;
	bool down; /* the fault happened: new sends follow ev->after */
	size_t done; /* actors that ran to their end */
};

/* The comms of one step: comm k belongs to send owner[k] */
struct step_comms {
	std::vector<sg4::CommPtr> comms;
	std::vector<int> owner;
	std::vector<double> bytes; /* [comm] */
	std::vector<int> left; /* [send]: its flows still running */
};

/* A comm's size: never 0 (a zero-sized comm never completes a wait_any()
 * in SimGrid 3.32 once a link failed: the run deadlocks) */
static uint64_t size_of(double bytes)
{
	return bytes < 1 ? 1 : (uint64_t)bytes;
}

/* Start @bytes of connection @conn as placed by @p */
static void start_net(run_ctx &x, step_comms &sc, int ix, int conn,
		      const sim_placement &p, double bytes)
{
	const sim_conn &c = x.s.conns[conn];

	for (const sim_part &part : p[conn]) {
		sc.comms.push_back(
			sg4::Comm::sendto_async(x.pf.nic_host(c.src, part.rail),
						x.pf.nic_host(c.dst, part.rail),
						size_of(bytes * part.w)));
		sc.owner.push_back(ix);
		sc.bytes.push_back(bytes * part.w);
		sc.left[ix]++;
		x.flows++;
	}
}

/* Does connection @conn use a NIC of ev->dead? */
static bool hit(const run_ctx &x, int conn)
{
	const sim_conn &c = x.s.conns[conn];

	for (const sim_part &part : x.p[conn])
		if (x.ev->dead.count({ c.src, part.rail }) ||
		    x.ev->dead.count({ c.dst, part.rail }))
			return true;
	return false;
}

/* A flow cannot start on a link that is off: after the fault, a send on
 * a dead NIC waits out the failover, then goes as ev->after says */
static void start_xfer(run_ctx &x, const sim_actor &a, const sim_xfer &t,
		       int ix, step_comms &sc)
{
	const sim_actor &peer = x.s.actors[t.to];

	if (t.conn >= 0) {
		if (!x.down) {
			start_net(x, sc, ix, t.conn, x.p, t.bytes);
			return;
		}
		double until = x.t0 + x.ev->at + x.ev->recover_s;

		if (hit(x, t.conn) && sg4::Engine::get_clock() < until)
			sg4::this_actor::sleep_until(until);
		start_net(x, sc, ix, t.conn, *x.ev->after, t.bytes);
		return;
	}
	sc.comms.push_back(sg4::Comm::sendto_async(
		x.pf.gpu_host(a.node, t.src_gpu),
		x.pf.gpu_host(peer.node, t.dst_gpu), size_of(t.bytes)));
	sc.owner.push_back(ix);
	sc.bytes.push_back(t.bytes);
	sc.left[ix]++;
}

/* Drop comm @k of @sc */
static void forget(step_comms &sc, size_t k)
{
	sc.comms.erase(sc.comms.begin() + k);
	sc.owner.erase(sc.owner.begin() + k);
	sc.bytes.erase(sc.bytes.begin() + k);
}

/*
 * Comm @k failed with its NIC: wait out the failover, then resend the
 * whole message on the new rails, as RDMA replays a work request that
 * did not complete. (A failed comm's get_remaining() reads 0 in SimGrid
 * 3.32, so what it had sent is not known anyway.)
 */
static void fail_over(run_ctx &x, const sim_step &st, step_comms &sc, size_t k)
{
	int ix = sc.owner[k];
	double bytes = sc.bytes[k];
	double until = x.t0 + x.ev->at + x.ev->recover_s;

	forget(sc, k);
	sc.left[ix]--;
	if (sg4::Engine::get_clock() < until)
		sg4::this_actor::sleep_until(until);
	start_net(x, sc, ix, st.sends[ix].conn, *x.ev->after, bytes);
}

static void actor_main(run_ctx &x, int me)
{
	const sim_actor &a = x.s.actors[me];
	step_comms sc;

	for (const sim_step &st : a.steps) {
		for (int k = 0; k < st.wait; k++)
			x.sem[me]->acquire();
		sc.comms.clear();
		sc.owner.clear();
		sc.bytes.clear();
		sc.left.assign(st.sends.size(), 0);
		for (size_t i = 0; i < st.sends.size(); i++)
			start_xfer(x, a, st.sends[i], (int)i, sc);
		/* each send's receiver may go on once all its parts land */
		while (!sc.comms.empty()) {
			ssize_t k;

			try {
				/* one flow, the common case: cheaper */
				k = sc.comms.size() == 1 ?
					    (sc.comms[0]->wait(), 0) :
					    sg4::Comm::wait_any(sc.comms);
			} catch (const simgrid::NetworkFailureException &) {
				for (size_t j = 0; j < sc.comms.size(); j++)
					if (sc.comms[j]->get_state() ==
					    sg4::Activity::State::FAILED) {
						fail_over(x, st, sc, j);
						break;
					}
				continue;
			}
			int ix = sc.owner[k];

			forget(sc, k);
			if (!--sc.left[ix])
				x.sem[st.sends[ix].to]->release();
		}
	}
	x.done++;
}

static void nic_links(const sim_platform &pf, const sim_nicset &dead, bool on)
{
	for (const auto &nr : dead) {
		sg4::SplitDuplexLink *l =
			pf.nic_link[nr.first * pf.spec.rails + nr.second];

		for (sg4::Link *d : { l->get_link_up(), l->get_link_down() }) {
			if (on)
				d->turn_on();
			else
				d->turn_off();
		}
	}
}

sim_run_stats sim_run(const sim_platform &pf, const sim_sched &s,
		      const sim_placement &p, const sim_fault_event *ev)
{
	run_ctx x{ pf, s, p, ev, sg4::Engine::get_clock(), {}, 0, false, 0 };

	x.sem.reserve(s.actors.size());
	for (size_t i = 0; i < s.actors.size(); i++)
		x.sem.push_back(sg4::Semaphore::create(0));
	for (size_t i = 0; i < s.actors.size(); i++) {
		const sim_actor &a = s.actors[i];
		int me = (int)i;

		sg4::Actor::create("a" + std::to_string(i),
				   pf.gpu_host(a.node, a.gpu),
				   [&x, me] { actor_main(x, me); });
	}
	if (ev)
		sg4::Actor::create("fault", pf.gpu_host(0, 0), [&x] {
			sg4::this_actor::sleep_for(x.ev->at);
			nic_links(x.pf, x.ev->dead, false);
			x.down = true;
		})->daemonize(); /* not waited for: ends with the others */
	sg4::Engine::get_instance()->run();
	if (ev)
		nic_links(pf, ev->dead, true);
	if (x.done != s.actors.size()) {
		/* SimGrid reported the deadlock; a time would be wrong */
		fprintf(stderr, "r2cc-sim: %zu of %zu actors never finished\n",
			s.actors.size() - x.done, s.actors.size());
		return { NAN, x.flows };
	}
	return { sg4::Engine::get_clock() - x.t0, x.flows };
}
