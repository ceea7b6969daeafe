/* SPDX-License-Identifier: MIT */
/*
 * device.c - devices and contexts: the program's contexts are registered and
 * their data-path ops patched after the real open; r2cc's own private
 * context per rail is opened on first use. Async events of what r2cc has
 * taken over are acked and hidden (migrate/ decides: r2cc_async_hidden()).
 */
#include <errno.h>
#include <stdlib.h>

#include "shim_int.h"

/* The rail index of @dev, or -1. */
int r2cc_rail_of(struct ibv_device *dev)
{
	int i;

	for (i = 0; i < r2cc_shim.nrail; i++)
		if (r2cc_shim.dev[i].dev == dev)
			return i;
	return -1;
}

/* r2cc's private context on @rail, opened the first time (NULL: none). */
struct ibv_context *r2cc_rail_ctx(int rail)
{
	struct r2cc_dev *d = &r2cc_shim.dev[rail];
	struct ibv_context *ctx;

	pthread_mutex_lock(&r2cc_shim.lock);
	if (!d->ctx && d->usable) {
		d->ctx = r2cc_real.ibv_open_device(d->dev);
		if (!d->ctx) {
			d->usable = false;
			r2cc_warn("cannot open rail %s: %m; not used",
				  ibv_get_device_name(d->dev));
		}
	}
	ctx = d->ctx;
	pthread_mutex_unlock(&r2cc_shim.lock);
	return ctx;
}

R2CC_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	R2CC_ENTER(ibv_get_device_list, NULL, num);
	return r2cc_real.ibv_get_device_list(num);
}

R2CC_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	R2CC_ENTER_VOID(ibv_free_device_list, list);
	r2cc_real.ibv_free_device_list(list);
}

R2CC_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	struct ibv_context *ctx;
	struct r2cc_ctx *c;

	R2CC_ENTER(ibv_open_device, NULL, dev);
	ctx = r2cc_real.ibv_open_device(dev);
	if (!ctx)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (c) {
		c->type = R2CC_OBJ_CTX;
		c->ctx = ctx;
		c->rail = r2cc_rail_of(dev);
		pthread_mutex_lock(&r2cc_shim.lock);
		c->id = r2cc_shim.next_ctx_id++;
		pthread_mutex_unlock(&r2cc_shim.lock);
	}
	/* Patch only once it can be found: the patched ops look it up. */
	if (r2cc_obj_add(ctx, c, R2CC_OBJ_CTX, free)) {
		r2cc_ops_patch(c);
		r2cc_mw_patch(c);
	}
	return ctx;
}

R2CC_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	struct r2cc_ctx *c;
	int ret;

	R2CC_ENTER(ibv_close_device, -1, ctx);
	c = r2cc_lookup(ctx, R2CC_OBJ_CTX);
	ret = r2cc_real.ibv_close_device(ctx);
	if (!ret && c)
		r2cc_obj_del(ctx, c, free);
	return ret;
}

/*
 * Events of what r2cc took over do not reach the program: a QP running on
 * its backup (or being moved), and the port of a rail whose QPs r2cc
 * protects (its PORT_ERR is r2cc's to act on). Such an event is acked and
 * the next one read: a non-blocking fd then says EAGAIN if there is none,
 * a blocking one waits, as the caller asked.
 */
R2CC_EXPORT int ibv_get_async_event(struct ibv_context *ctx,
				    struct ibv_async_event *ev)
{
	int ret;

	R2CC_ENTER(ibv_get_async_event, -1, ctx, ev);
	while (!(ret = r2cc_real.ibv_get_async_event(ctx, ev)) &&
	       r2cc_async_hidden(ctx, ev))
		r2cc_real.ibv_ack_async_event(ev);
	return ret;
}

R2CC_EXPORT void ibv_ack_async_event(struct ibv_async_event *ev)
{
	R2CC_ENTER_VOID(ibv_ack_async_event, ev);
	r2cc_real.ibv_ack_async_event(ev);
}
