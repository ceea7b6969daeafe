/* SPDX-License-Identifier: MIT */
/*
 * run.hpp - play a schedule on the SimGrid platform: one actor per
 * program, one flow per (connection, rail) part, semaphores for the data
 * dependencies.
 */
#ifndef R2CC_SIM_RUN_HPP
#define R2CC_SIM_RUN_HPP

#include "place.hpp"
#include "platform.hpp"
#include "sched.hpp"

struct sim_run_stats {
	double seconds; /* simulated time of the collective */
	long flows; /* network flows started */
};

/*
 * A failure during the run: at @at seconds the NICs in @dead go down
 * (Link::turn_off(): their flows fail, get_remaining() says what was
 * left); each actor that sees a flow fail waits until @at + @recover_s
 * (detection and failover), then resends what was left, and sends from
 * then on, as @after places the connections.
 */
struct sim_fault_event {
	double at;
	sim_nicset dead;
	const sim_placement *after; /* borrowed */
	double recover_s;
};

/*
 * sim_run() - run @s with every connection placed as @p says, from now
 * until the last actor ends (the engine is run; it may be called again).
 * @ev: a failure during the run, or NULL; its links are back up after.
 */
sim_run_stats sim_run(const sim_platform &pf, const sim_sched &s,
		      const sim_placement &p,
		      const sim_fault_event *ev = nullptr);

#endif
