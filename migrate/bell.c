/* SPDX-License-Identifier: MIT */
/*
 * bell.c - a program CQ's doorbell: r2cc's own QP on the program's CQ, in
 * ERR, on a PD of r2cc's on the CQ's context. A send posted on it flushes
 * at once into that CQ, which raises the program's completion event; the
 * flush itself is never delivered (R2CC_RING_WRID, and the bell's QPN).
 * ring() uses a fenced primary while it is in ERR (nothing to make); once
 * a move back has recycled the primary, it carries the program's traffic
 * and cannot ring, but what r2cc stashes for the program then (receives
 * the backup consumed before its fence) must still wake a program asleep
 * on its channel: this rings instead. Made at its first ring, destroyed
 * before the program's CQ is.
 */
#include <errno.h>
#include <string.h>

#include "bell.h"
#include "mig_int.h"

/* @mc's bell destroyed (mc->lock held). */
static void bell_drop(struct r2cc_mig_cq *mc)
{
	atomic_store(&mc->bell_qpn, 0);
	if (mc->bell_qp && ps.v.destroy_qp(mc->bell_qp))
		r2cc_warn("a CQ's doorbell QP not destroyed: %m");
	if (mc->bell_pd && ps.v.dealloc_pd(mc->bell_pd))
		r2cc_warn("a CQ's doorbell PD not freed: %m");
	mc->bell_qp = NULL;
	mc->bell_pd = NULL;
}

/* The bell of @mc, made now if it has none (mc->lock held). */
static int bell_make(struct r2cc_mig_cq *mc)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	if (mc->bell_qp)
		return 0;
	if (mc->bell_failed || !mc->cq || !ps.v.alloc_pd || !ps.v.dealloc_pd)
		return -ENOSYS;
	mc->bell_pd = ps.v.alloc_pd(mc->cq->context);
	if (!mc->bell_pd)
		goto fail;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = mc->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = 1;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	mc->bell_qp = ps.v.create_qp(mc->bell_pd, &ia);
	if (!mc->bell_qp)
		goto fail;
	/* RESET -> ERR is not a transition Linux allows: through INIT */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (ps.v.modify_qp(mc->bell_qp, &a,
			   IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS))
		goto fail;
	a.qp_state = IBV_QPS_ERR;
	if (ps.v.modify_qp(mc->bell_qp, &a, IBV_QP_STATE))
		goto fail;
	atomic_store(&mc->bell_qpn, mc->bell_qp->qp_num);
	return 0;
fail:
	r2cc_warn("no doorbell on a program's CQ (%m): a program asleep on "
		  "its channel after a move back wakes at its next completion");
	bell_drop(mc);
	mc->bell_failed = true; /* said once; tried again after a free */
	return -ENOMEM;
}

int r2cc_mig_bell_ring(struct r2cc_mig_cq *mc)
{
	struct ibv_send_wr w = { .wr_id = R2CC_RING_WRID,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	int ret;

	pthread_mutex_lock(&mc->lock);
	ret = bell_make(mc);
	if (!ret)
		ret = -mc->bell_qp->context->ops.post_send(mc->bell_qp, &w,
							   &bad);
	pthread_mutex_unlock(&mc->lock);
	return ret;
}

bool r2cc_mig_bell_wc(struct r2cc_mig_cq *mc, const struct ibv_wc *wc)
{
	uint32_t qpn =
		atomic_load_explicit(&mc->bell_qpn, memory_order_relaxed);

	return qpn && wc->qp_num == qpn && wc->wr_id == R2CC_RING_WRID;
}

void r2cc_mig_bell_free(struct r2cc_mig_cq *mc)
{
	if (!mc)
		return;
	pthread_mutex_lock(&mc->lock);
	bell_drop(mc);
	mc->bell_failed = false;
	pthread_mutex_unlock(&mc->lock);
}
