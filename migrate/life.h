/* SPDX-License-Identifier: MIT */
/*
 * life.h - a protected QP's life cycle: one state, changed only by
 * r2cc_mig_step(), which refuses (and logs) a transition its table does
 * not hold. The diagram is in README.md ("The life of a QP").
 */
#ifndef R2CC_MIG_LIFE_H
#define R2CC_MIG_LIFE_H

#include <stdbool.h>

enum r2cc_mig_life {
	R2CC_LIFE_OFF, /* passthrough: nothing logged, nothing owed */
	R2CC_LIFE_DRAIN, /* passthrough; the send log still owes completions */
	R2CC_LIFE_RUN, /* logged, carried by one path, no move under way */
	R2CC_LIFE_FENCED, /* a move: the old path fenced, nothing moved yet */
	R2CC_LIFE_SENDS, /* a move: sends replayed, receives not re-posted */
	R2CC_LIFE_RECVS, /* a move: receives re-posted, sends not replayed */
	R2CC_LIFE_N
};

enum r2cc_mig_ev {
	R2CC_MEV_FENCE, /* the carrying QP went to ERR: a move begins */
	R2CC_MEV_REPLAYED, /* the sends are on the new path */
	R2CC_MEV_REPOSTED, /* the receives are on the new path */
	R2CC_MEV_ABANDON, /* the move cannot happen: nothing was replayed */
	R2CC_MEV_STOP, /* protection ends; what the log owes still comes */
	R2CC_MEV_DRAINED, /* the log owes nothing any more */
	R2CC_MEV_RELEASE, /* the program destroyed the QP */
	R2CC_MEV_N
};

struct r2cc_mig_qp;

/* The one change of @mq's life state (mq lock held); false, and logged
 * and counted, when @ev is illegal in its state. */
bool r2cc_mig_step(struct r2cc_mig_qp *mq, enum r2cc_mig_ev ev);

const char *r2cc_mig_life_name(enum r2cc_mig_life s);
const char *r2cc_mig_ev_name(enum r2cc_mig_ev ev);

/* The table: the state @ev leads to from @s, or R2CC_LIFE_N when @ev is
 * illegal there. */
enum r2cc_mig_life r2cc_mig_life_next(enum r2cc_mig_life s,
				      enum r2cc_mig_ev ev);

static inline bool r2cc_mig_life_logs(enum r2cc_mig_life s)
{
	return s >= R2CC_LIFE_RUN;
}

static inline bool r2cc_mig_life_moving(enum r2cc_mig_life s)
{
	return s >= R2CC_LIFE_FENCED;
}

#endif /* R2CC_MIG_LIFE_H */
