/* SPDX-License-Identifier: MIT */
/*
 * life.c - a protected QP's life cycle (life.h): the transition table,
 * and the one function that changes a QP's state, keeping the module's
 * counts of QPs moving and QPs away from their own rail with it.
 */
#include "mig_int.h"

static const char *const life_names[R2CC_LIFE_N] = {
	[R2CC_LIFE_OFF] = "off",     [R2CC_LIFE_DRAIN] = "drain",
	[R2CC_LIFE_RUN] = "run",     [R2CC_LIFE_FENCED] = "fenced",
	[R2CC_LIFE_SENDS] = "sends", [R2CC_LIFE_RECVS] = "recvs",
};

static const char *const ev_names[R2CC_MEV_N] = {
	[R2CC_MEV_FENCE] = "fence",	  [R2CC_MEV_REPLAYED] = "replayed",
	[R2CC_MEV_REPOSTED] = "reposted", [R2CC_MEV_ABANDON] = "abandon",
	[R2CC_MEV_STOP] = "stop",	  [R2CC_MEV_DRAINED] = "drained",
	[R2CC_MEV_RELEASE] = "release",
};

/* Stored +1, so that an empty cell (0) is an illegal event. */
#define TO(s) ((unsigned char)((s) + 1))
static const unsigned char table[R2CC_LIFE_N][R2CC_MEV_N] = {
	[R2CC_LIFE_OFF] = {
		[R2CC_MEV_RELEASE] = TO(R2CC_LIFE_OFF),
	},
	[R2CC_LIFE_DRAIN] = {
		[R2CC_MEV_DRAINED] = TO(R2CC_LIFE_OFF),
		[R2CC_MEV_RELEASE] = TO(R2CC_LIFE_OFF),
	},
	[R2CC_LIFE_RUN] = {
		[R2CC_MEV_FENCE] = TO(R2CC_LIFE_FENCED),
		[R2CC_MEV_STOP] = TO(R2CC_LIFE_DRAIN),
		[R2CC_MEV_RELEASE] = TO(R2CC_LIFE_OFF),
	},
	[R2CC_LIFE_FENCED] = {
		[R2CC_MEV_REPLAYED] = TO(R2CC_LIFE_SENDS),
		[R2CC_MEV_REPOSTED] = TO(R2CC_LIFE_RECVS),
		[R2CC_MEV_ABANDON] = TO(R2CC_LIFE_OFF),
		[R2CC_MEV_RELEASE] = TO(R2CC_LIFE_OFF),
	},
	[R2CC_LIFE_SENDS] = {
		[R2CC_MEV_REPOSTED] = TO(R2CC_LIFE_RUN),
		[R2CC_MEV_STOP] = TO(R2CC_LIFE_DRAIN),
		[R2CC_MEV_RELEASE] = TO(R2CC_LIFE_OFF),
	},
	[R2CC_LIFE_RECVS] = {
		[R2CC_MEV_REPLAYED] = TO(R2CC_LIFE_RUN),
		[R2CC_MEV_ABANDON] = TO(R2CC_LIFE_OFF),
		[R2CC_MEV_RELEASE] = TO(R2CC_LIFE_OFF),
	},
};

const char *r2cc_mig_life_name(enum r2cc_mig_life s)
{
	return (unsigned int)s < R2CC_LIFE_N ? life_names[s] : "?";
}

const char *r2cc_mig_ev_name(enum r2cc_mig_ev ev)
{
	return (unsigned int)ev < R2CC_MEV_N ? ev_names[ev] : "?";
}

enum r2cc_mig_life r2cc_mig_life_next(enum r2cc_mig_life s, enum r2cc_mig_ev ev)
{
	if ((unsigned int)s >= R2CC_LIFE_N || (unsigned int)ev >= R2CC_MEV_N ||
	    !table[s][ev])
		return R2CC_LIFE_N;
	return (enum r2cc_mig_life)(table[s][ev] - 1);
}

bool r2cc_mig_step(struct r2cc_mig_qp *mq, enum r2cc_mig_ev ev)
{
	enum r2cc_mig_life from = mq->life, to = r2cc_mig_life_next(from, ev);

	if (to == R2CC_LIFE_N) {
		atomic_fetch_add(&ps.refused, 1);
		r2cc_err("QP %#x: %s refused in state %s", mq->qpn,
			 r2cc_mig_ev_name(ev), r2cc_mig_life_name(from));
		return false;
	}
	/* A QP on an SRQ that starts or stops logging or moving: its SRQ's
	 * sweep looks at the group (else an SRQ at home is left alone) */
	if (mq->srq && (r2cc_mig_life_logs(from) != r2cc_mig_life_logs(to) ||
			r2cc_mig_life_moving(from) != r2cc_mig_life_moving(to)))
		atomic_store(&ps.srq_sweep, true);
	if (!r2cc_mig_life_moving(from) && r2cc_mig_life_moving(to))
		atomic_fetch_add(&ps.waiting, 1);
	else if (r2cc_mig_life_moving(from) && !r2cc_mig_life_moving(to))
		atomic_fetch_sub(&ps.waiting, 1);
	if (r2cc_mig_life_moving(from) && to == R2CC_LIFE_RUN) {
		/* The move is done: the new path carries the QP. */
		mq->on_backup = !mq->on_backup;
		if (mq->on_backup)
			atomic_fetch_add(&ps.away, 1);
		else
			atomic_fetch_sub(&ps.away, 1);
	} else if (ev == R2CC_MEV_RELEASE && mq->on_backup) {
		atomic_fetch_sub(&ps.away, 1);
		mq->on_backup = false;
	}
	mq->life = to;
	return true;
}
