/* SPDX-License-Identifier: MIT */
/*
 * test_bell.c - a program CQ's doorbell (migrate/bell.c) over a scripted
 * verbs table: made at the first ring on the program's CQ and context, in
 * ERR, each ring one signaled send that flushes there; its flush is told
 * from the program's completions; freed before the program's CQ. A
 * standby CQ's event while its QP is busy rings it, without waiting.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "bell.h"
#include "mig_int.h"
#include "protect.h"
#include "wake.h"

static struct ibv_context ctx;
static struct ibv_cq pcq = { .context = &ctx, .cqe = 16 };
static struct ibv_pd pd = { .context = &ctx };
static struct ibv_qp bqp = { .context = &ctx, .qp_num = 0x77 };
static struct ibv_qp_init_attr made; /* the bell's attributes */
static enum ibv_qp_state bell_state = IBV_QPS_RESET;
static int nsent, npd, nqp;
static uint64_t sent_id;
static bool fail_create;

static struct ibv_pd *f_alloc_pd(struct ibv_context *c)
{
	cr_assert_eq(c, &ctx, "on the program's context");
	npd++;
	return &pd;
}

static int f_dealloc_pd(struct ibv_pd *p)
{
	cr_assert_eq(p, &pd);
	npd--;
	return 0;
}

static struct ibv_qp *f_create_qp(struct ibv_pd *p, struct ibv_qp_init_attr *ia)
{
	cr_assert_eq(p, &pd, "on r2cc's own PD");
	if (fail_create)
		return NULL;
	made = *ia;
	nqp++;
	bell_state = IBV_QPS_RESET;
	return &bqp;
}

static int f_destroy_qp(struct ibv_qp *qp)
{
	cr_assert_eq(qp, &bqp);
	nqp--;
	return 0;
}

/* As Linux checks it: RESET -> INIT (with its attributes) -> ERR */
static int f_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	cr_assert_eq(qp, &bqp);
	cr_assert(mask & IBV_QP_STATE);
	if (a->qp_state == IBV_QPS_INIT) {
		cr_assert_eq(bell_state, IBV_QPS_RESET);
		cr_assert_eq(mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
		cr_assert_geq(a->port_num, 1);
	} else {
		cr_assert_eq(a->qp_state, IBV_QPS_ERR);
		cr_assert_neq(bell_state, IBV_QPS_RESET,
			      "RESET -> ERR: EINVAL");
	}
	bell_state = a->qp_state;
	return 0;
}

static int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad)
{
	(void)bad;
	cr_assert_eq(qp, &bqp);
	cr_assert_eq(bell_state, IBV_QPS_ERR, "posted in ERR: it flushes");
	cr_assert(wr->send_flags & IBV_SEND_SIGNALED);
	cr_assert_eq(wr->num_sge, 0);
	sent_id = wr->wr_id;
	nsent++;
	return 0;
}

static void setup(void)
{
	memset(&ps.v, 0, sizeof(ps.v));
	ps.v.alloc_pd = f_alloc_pd;
	ps.v.dealloc_pd = f_dealloc_pd;
	ps.v.create_qp = f_create_qp;
	ps.v.destroy_qp = f_destroy_qp;
	ps.v.modify_qp = f_modify_qp;
	ctx.ops.post_send = f_post_send;
	nsent = npd = nqp = 0;
	fail_create = false;
}

Test(bell, made_at_the_first_ring_in_err_on_the_programs_cq, .init = setup)
{
	struct r2cc_mig_cq *mc = r2cc_mig_cq_new(&pcq, pcq.cqe);
	struct ibv_wc wc = { .wr_id = R2CC_RING_WRID, .qp_num = 0x77 };

	cr_assert_not_null(mc);
	cr_assert_eq(nqp, 0, "nothing made before a ring needs it");
	cr_assert_not(r2cc_mig_bell_wc(mc, &wc), "no bell yet");
	cr_assert_eq(r2cc_mig_bell_ring(mc), 0);
	cr_assert_eq(nqp, 1);
	cr_assert_eq(made.send_cq, &pcq);
	cr_assert_eq(made.recv_cq, &pcq);
	cr_assert_eq(made.qp_type, IBV_QPT_RC);
	cr_assert_eq(nsent, 1);
	cr_assert_eq(sent_id, R2CC_RING_WRID);
	/* Its flush is r2cc's; the program's completions are not */
	cr_assert(r2cc_mig_bell_wc(mc, &wc));
	wc.qp_num = 0x78;
	cr_assert_not(r2cc_mig_bell_wc(mc, &wc), "another QP's");
	wc.qp_num = 0x77;
	wc.wr_id = 5;
	cr_assert_not(r2cc_mig_bell_wc(mc, &wc), "not a ring's wr_id");
	/* The next ring reuses it */
	cr_assert_eq(r2cc_mig_bell_ring(mc), 0);
	cr_assert_eq(nqp, 1);
	cr_assert_eq(nsent, 2);
	/* Gone before the program's CQ, and with the CQ's state */
	r2cc_mig_bell_free(mc);
	cr_assert_eq(nqp, 0);
	cr_assert_eq(npd, 0);
	wc.wr_id = R2CC_RING_WRID;
	cr_assert_not(r2cc_mig_bell_wc(mc, &wc));
	r2cc_mig_cq_free(mc);
}

Test(bell, one_that_cannot_be_made_is_not_tried_at_every_ring, .init = setup)
{
	struct r2cc_mig_cq *mc = r2cc_mig_cq_new(&pcq, pcq.cqe);

	fail_create = true;
	cr_assert_lt(r2cc_mig_bell_ring(mc), 0);
	cr_assert_eq(npd, 0, "its PD given back");
	fail_create = false;
	cr_assert_lt(r2cc_mig_bell_ring(mc), 0, "said once, not retried");
	cr_assert_eq(nqp, 0);
	r2cc_mig_cq_free(mc);
}

Test(bell, none_without_the_programs_cq, .init = setup)
{
	struct r2cc_mig_cq *mc = r2cc_mig_cq_new(NULL, 16);

	cr_assert_lt(r2cc_mig_bell_ring(mc), 0);
	cr_assert_eq(npd + nqp + nsent, 0);
	r2cc_mig_cq_free(mc);
}

/* A standby CQ's event: the program CQ's doorbell rings (once per
 * arming), whatever the locks of its QPs (a move may hold one: the
 * channel thread does not wait for it). */
static struct ibv_cq bcq_ev = { .context = &ctx };
static void *ev_ctx;
static int nev, nacked;

static int f_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq,
			  void **cqc)
{
	(void)ch;
	if (!nev)
		return -1;
	nev--;
	*cq = &bcq_ev;
	*cqc = ev_ctx;
	return 0;
}

static void f_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
	cr_assert_eq(cq, &bcq_ev);
	nacked += (int)n;
}

Test(bell, a_standby_cqs_event_rings_once_an_arming, .init = setup,
     .timeout = 10)
{
	struct r2cc_mig_cq *mc = r2cc_mig_cq_new(&pcq, pcq.cqe);
	static struct r2cc_mig_qp mq;
	static struct r2cc_mig_bcq b;
	struct ibv_comp_channel ch = { .fd = -1 };

	ps.v.get_cq_event = f_get_cq_event;
	ps.v.ack_cq_events = f_ack_cq_events;
	r2cc_qlock_init(&mq.lock);
	mq.qpn = 0x21;
	mq.scq = mq.rcq = mc;
	pthread_mutex_init(&b.lock, NULL);
	b.mc = mc;
	b.cq = &bcq_ev;
	mq.bs[0].b = &b;
	mq.bs[0].mq = &mq;
	mq.bs[0].joined = true;
	b.slots = &mq.bs[0];
	ev_ctx = &b;
	atomic_store(&mc->armed, 1); /* the program sleeps on its CQ */
	r2cc_qlock_lock(&mq.lock); /* a move holds the QP */
	nev = 2;
	r2cc_mig_ring_ready(-1, &ch);
	cr_assert_eq(nacked, 2, "events not acknowledged");
	cr_assert_eq(nsent, 1, "the doorbell did not ring (once an arming)");
	cr_assert_eq(atomic_load(&mc->armed), 0);
	r2cc_qlock_unlock(&mq.lock);
	r2cc_mig_bell_free(mc);
	r2cc_mig_cq_free(mc);
}
