/* SPDX-License-Identifier: MIT */
/*
 * rdmacm.c - librdmacm's connection events, without the ones about a
 * fault r2cc covers. The kernel's rdma_cm watches the neighbour table of
 * the netdev a connection was resolved on, and reports a next hop that
 * stopped answering as RDMA_CM_EVENT_UNREACHABLE (-ETIMEDOUT) on the
 * established connection itself (Linux 6.x, cma_netevent_callback); for
 * a program that is a dead connection, though r2cc has moved its QP to
 * another rail. The event changes nothing in the kernel's state of the
 * connection, so r2cc takes it (acknowledged, logged) and the program
 * waits for the next one. librdmacm calls rdma_get_cm_event through its
 * PLT (rsockets, and rdma_cm's own synchronous mode), so those come here
 * too.
 */
#include <errno.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>

#include "shim_int.h"

typedef int (*get_event_fn)(struct rdma_event_channel *,
			    struct rdma_cm_event **);
typedef int (*ack_event_fn)(struct rdma_cm_event *);

static get_event_fn real_get;
static ack_event_fn real_ack;
static pthread_once_t cm_once = PTHREAD_ONCE_INIT;

static void cm_init(void)
{
	real_get = (get_event_fn)r2cc_real_sym(
		"librdmacm.so.1", "rdma_get_cm_event", "RDMACM_1.0");
	real_ack = (ack_event_fn)r2cc_real_sym(
		"librdmacm.so.1", "rdma_ack_cm_event", "RDMACM_1.0");
	if (!real_get || !real_ack)
		r2cc_err("cannot find librdmacm's rdma_get_cm_event: it fails");
}

/* Is @ev about a rail fault under a connection whose QP r2cc protects? */
static bool cm_hidden(const struct rdma_cm_event *ev)
{
	struct r2cc_qp *q;
	uint32_t st;

	/* A connection still being made (REQ or REP unanswered) is not
	 * protected: its QP has not reached RTS. */
	if (!r2cc_shim.protecting || ev->event != RDMA_CM_EVENT_UNREACHABLE ||
	    !ev->id || !ev->id->qp)
		return false;
	q = r2cc_lookup(ev->id->qp, R2CC_OBJ_QP);
	if (!q || !q->mig || !(q->attr_mask & IBV_QP_STATE) ||
	    q->attr.qp_state != IBV_QPS_RTS)
		return false;
	st = r2cc_mig_state(q->mig);
	if (st != R2CC_PROT_READY && st != R2CC_PROT_MIGRATED)
		return false;
	r2cc_info(
		"rdma_cm: QP 0x%x's connection UNREACHABLE (%d) not shown: r2cc moves the QP off the rail",
		ev->id->qp->qp_num, ev->status);
	return true;
}

R2CC_EXPORT int rdma_get_cm_event(struct rdma_event_channel *ch,
				  struct rdma_cm_event **event)
{
	int ret;

	r2cc_shim_init();
	pthread_once(&cm_once, cm_init);
	if (!real_get || !real_ack) {
		errno = ENOSYS;
		return -1;
	}
	/* A hidden event on a blocking channel waits for the next one, as
	 * the program asked; on a nonblocking one it is EAGAIN. A failed
	 * call leaves *event as it was: never the freed event (librdmacm's
	 * synchronous ids keep it in id->event and acknowledge it later). */
	while (!(ret = real_get(ch, event)) && cm_hidden(*event)) {
		real_ack(*event);
		*event = NULL;
	}
	return ret;
}
