/* SPDX-License-Identifier: MIT */
/*
 * health.c - the shim's side of rail health: r2cc's private context on
 * every rail hands its async events (port up/down) to policy/'s monitor,
 * which also watches the rails' netdev carrier. Changes are logged; the
 * failover engine acts on them (migrate/: a rail down or up; on
 * InfiniBand also the port's LID, as the subnet manager sets it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "shim_int.h"

/* InfiniBand: the subnet manager changed @rail's port (its LID, or the
 * SM itself, or asked for registrations again): standbys there whose LID
 * is not the port's any more are bound again (migrate/rebind.c). */
static void port_changed(int rail, struct ibv_context *ctx,
			 enum ibv_event_type what)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(ctx, 1, &pa)) {
		r2cc_warn("rail %d: %s, and its port answers no query", rail,
			  ibv_event_type_str(what));
		return;
	}
	if (pa.link_layer == IBV_LINK_LAYER_ETHERNET)
		return;
	r2cc_info("rail %d: %s: LID %#x, SM LID %#x", rail,
		  ibv_event_type_str(what), pa.lid, pa.sm_lid);
	r2cc_mig_rail_lid(rail, pa.lid);
}

/* Drain a private context's async events (its fd is non-blocking). */
static void on_async(int fd, void *arg)
{
	int rail = (int)(intptr_t)arg;
	struct ibv_async_event ev;
	struct ibv_context *ctx = r2cc_shim.dev[rail].ctx;
	int n;

	(void)fd;
	for (n = 0; n < 64 && !r2cc_real.ibv_get_async_event(ctx, &ev); n++) {
		if (ev.event_type == IBV_EVENT_PORT_ERR)
			r2cc_health_report(rail, R2CC_RAIL_DOWN,
					   R2CC_CAUSE_PORT_EVENT);
		else if (ev.event_type == IBV_EVENT_PORT_ACTIVE)
			r2cc_health_report(rail, R2CC_RAIL_UP,
					   R2CC_CAUSE_PORT_EVENT);
		else if (ev.event_type == IBV_EVENT_DEVICE_FATAL)
			r2cc_health_report(rail, R2CC_RAIL_DOWN,
					   R2CC_CAUSE_PORT_EVENT);
		else if (ev.event_type == IBV_EVENT_LID_CHANGE ||
			 ev.event_type == IBV_EVENT_SM_CHANGE ||
			 ev.event_type == IBV_EVENT_CLIENT_REREGISTER)
			port_changed(rail, ctx, ev.event_type);
		else if (ev.event_type == IBV_EVENT_CQ_ERR)
			/* A backup's CQ overran: the provider dropped a
			 * completion (a program would hang on it) */
			r2cc_err("rail %d: a backup CQ overran: a completion "
				 "was lost",
				 rail);
		else if (ev.event_type == IBV_EVENT_QP_FATAL ||
			 ev.event_type == IBV_EVENT_QP_REQ_ERR ||
			 ev.event_type == IBV_EVENT_QP_ACCESS_ERR)
			r2cc_warn("rail %d: backup QP %#x: async event %d",
				  rail, ev.element.qp->qp_num, ev.event_type);
		r2cc_real.ibv_ack_async_event(&ev);
	}
}

/* Copy @rail's health into the status record r2cc-ctl reads. */
static void publish(int rail)
{
	struct r2cc_health_info h = r2cc_health_get(rail);

	r2cc_status_rail(rail, ibv_get_device_name(r2cc_shim.dev[rail].dev),
			 r2cc_shim.dev[rail].netdev, h.state, h.cause,
			 h.since_ns, h.downs, h.ups);
}

static void on_change(int rail, enum r2cc_rail_state state,
		      enum r2cc_health_cause cause, void *arg)
{
	struct timespec ts;

	(void)arg;
	/* Wall-clock time, to line detection up with a fault's own log. */
	clock_gettime(CLOCK_REALTIME, &ts);
	r2cc_info("rail %d (%s%s%s): %s (%s) at %lld.%06ld", rail,
		  ibv_get_device_name(r2cc_shim.dev[rail].dev),
		  r2cc_shim.dev[rail].netdev[0] ? ", " : "",
		  r2cc_shim.dev[rail].netdev, r2cc_rail_state_name(state),
		  r2cc_health_cause_name(cause), (long long)ts.tv_sec,
		  ts.tv_nsec / 1000);
	publish(rail);
	r2cc_status_event(rail, state, cause);
	if (state == R2CC_RAIL_DOWN)
		r2cc_mig_rail_down(rail, cause);
	else if (state == R2CC_RAIL_UP)
		r2cc_mig_rail_up(rail);
}

void r2cc_shim_health_start(void)
{
	int r, fd, ret;

	for (r = 0; r < r2cc_shim.nrail; r++) {
		struct r2cc_dev *d = &r2cc_shim.dev[r];
		struct ibv_context *ctx;

		if (r2cc_health_add_rail(r, ibv_get_device_name(d->dev),
					 d->netdev))
			continue;
		publish(r);
		ctx = r2cc_rail_ctx(r);
		if (!ctx)
			continue;
		fd = ctx->async_fd;
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) ||
		    r2cc_health_add_fd(fd, on_async, (void *)(intptr_t)r))
			r2cc_warn("rail %d: port events not watched", r);
	}
	ret = r2cc_health_start(on_change, NULL);
	if (ret)
		r2cc_warn("rail health monitor not started: %s",
			  strerror(-ret));
}
