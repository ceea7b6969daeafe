/* SPDX-License-Identifier: MIT */
/*
 * event.c - a QP's failover as `r2cc-ctl events` shows it: what happened,
 * from which rail to which, why (the fence's reason in policy's terms) and
 * what the replay re-sent, added to the process's status record.
 */
#include "event.h"
#include "mig_int.h"

/* enum r2cc_ctrl_reason -> enum r2cc_health_cause */
static uint32_t cause_of(uint32_t why)
{
	static const uint8_t map[R2CC_CTRL_NREASONS] = {
		[R2CC_CTRL_WHY_PORT_EVENT] = R2CC_CAUSE_PORT_EVENT,
		[R2CC_CTRL_WHY_CARRIER] = R2CC_CAUSE_CARRIER,
		[R2CC_CTRL_WHY_CQ_ERROR] = R2CC_CAUSE_CQ_ERROR,
		[R2CC_CTRL_WHY_KEEPALIVE] = R2CC_CAUSE_PROBE,
		[R2CC_CTRL_WHY_PEER] = R2CC_CAUSE_PEER,
		[R2CC_CTRL_WHY_ADMIN] = R2CC_CAUSE_ADMIN,
		[R2CC_CTRL_WHY_SRQ] = R2CC_CAUSE_SRQ,
	};

	return why < R2CC_CTRL_NREASONS ? map[why] : R2CC_CAUSE_NONE;
}

/* Caller holds mq->lock (mq->why and the rails are stable). */
void r2cc_mig_event(const struct r2cc_mig_qp *mq, uint32_t kind, uint64_t wrs,
		    uint64_t bytes)
{
	struct r2cc_status_event e = {
		.kind = kind,
		.rail = kind == R2CC_EV_FAILBACK ? mq->backup_rail : mq->rail,
		.cause = cause_of(mq->why),
		.qpn = mq->qpn,
		.to_rail =
			kind == R2CC_EV_FAILBACK ? mq->rail : mq->backup_rail,
		.wrs = wrs,
		.bytes = bytes,
	};

	r2cc_status_qp_event(&e);
}

void r2cc_mig_event_standby(const struct r2cc_mig_qp *mq, int from, int to)
{
	struct r2cc_status_event e = {
		.kind = R2CC_EV_STANDBY,
		.rail = from,
		.cause = r2cc_health_get(from).cause,
		.qpn = mq->qpn,
		.to_rail = to,
	};

	r2cc_status_qp_event(&e);
}
