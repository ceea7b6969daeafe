/* SPDX-License-Identifier: MIT */
/*
 * test_rebind.c - a standby whose rail goes down while its QP runs on its
 * own (rebind.c, bind.c): a new standby on the rail placement gives, bound
 * again (QP_BIND with R2CC_CTRL_BIND_AGAIN) and connected to the peer's
 * answer; the peer's side of that bind; a bind heard again echoed, an
 * echo never answered; and no rail up for one: the QP runs unprotected
 * until one comes up. A move back whose standby's rail
 * is down: both ends unprotected until it is up, then re-armed (REARM,
 * R2CC_CTRL_FB_NOARM; failback.c); a moved-back primary that dies with
 * flushes only fails over onto its re-armed standby (complete.c). The
 * peer is played through the captured sends (fo_fixture.c wraps
 * r2cc_chan_send).
 */
#include <criterion/criterion.h>
#include <infiniband/verbs.h>
#include <string.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "mig_int.h" /* (before the fixture: its mq is global) */
#include "fo_fixture.h"
#include "protect.h"
#include "tick.h"

static void rebind_setup(void)
{
	setup();
	fo_rails();
}

static const struct r2cc_ctrl_msg *last_bind(void)
{
	return fo_last(R2CC_CTRL_QP_BIND);
}

/* The peer's QP_BIND for our QP: its standby @bqpn on @rail. */
static void peer_binds(int rail, uint32_t bqpn, uint8_t flags)
{
	struct r2cc_ctrl_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_QP_BIND;
	m.qp_bind.local.qpn = PEER_QPN;
	m.qp_bind.peer.qpn = 0x11;
	m.qp_bind.backup.qpn = bqpn;
	m.qp_bind.psn = 0x300;
	m.qp_bind.rail = (uint8_t)rail;
	m.qp_bind.mtu = IBV_MTU_1024;
	m.qp_bind.flags = flags;
	/* the GIDs the fixture's query answers (index 0: all zero), ours
	 * as the test may have set it */
	memcpy(m.qp_bind.peer.gid, mq->gid, 16);
	r2cc_mig_test_peer_binds(PEER, &m);
}

Test(rebind, a_dead_standby_rail_gets_a_new_standby_bound_again,
     .init = rebind_setup, .fini = teardown, .timeout = 10)
{
	const struct r2cc_ctrl_msg *b;
	int made = nmade;

	fo_rail_down(1);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_BINDING,
		     "unprotected while the new standby binds");
	cr_assert_eq(nmade, made + 1, "a new standby QP");
	b = last_bind();
	cr_assert(b, "bound again with the peer");
	cr_assert_eq(b->qp_bind.rail, 2, "on the rail placement gave");
	cr_assert(b->qp_bind.flags & R2CC_CTRL_BIND_AGAIN);
	cr_assert_eq(b->qp_bind.peer.qpn, PEER_QPN);
	cr_assert_eq(back.state, IBV_QPS_INIT, "made, not connected yet");
	/* the peer's answer: its new standby on the same rail */
	peer_binds(2, 0x77, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	cr_assert_eq(back.state, IBV_QPS_RTS, "connected, at RTS as the QP");
	/* a fault on the QP's own rail now moves it there */
	post_op(1, IBV_WR_SEND);
	fo_rail_down(0);
	cr_assert_eq(prim.state, IBV_QPS_ERR, "fenced: a move begins");
	cr_assert_eq(fo_sent[(fo_nsent - 1) % FO_SENT].hdr.type,
		     R2CC_CTRL_FAILOVER, "the peer told");
}

Test(rebind, the_peers_new_standby_makes_ours_follow, .init = rebind_setup,
     .fini = teardown, .timeout = 10)
{
	const struct r2cc_ctrl_msg *b;
	int made = nmade;

	peer_binds(3, 0x78, R2CC_CTRL_BIND_AGAIN);
	cr_assert_eq(nmade, made + 1, "ours made again, on the peer's rail");
	b = last_bind();
	cr_assert(b, "our half sent");
	cr_assert_eq(b->qp_bind.rail, 3);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	cr_assert_eq(back.state, IBV_QPS_RTS,
		     "connected to the peer's new one");
}

/* The peer's answer names a rail down here: this end, though it would
 * take the peer's rail (its GID is the higher), keeps its own, up, and
 * binds again pinned; the peer takes ours. Taking the peer's would leave
 * the peer protected and this end not (a standby on a dead rail). */
Test(rebind, a_peers_rail_down_here_is_not_taken, .init = rebind_setup,
     .fini = teardown, .timeout = 10)
{
	const struct r2cc_ctrl_msg *b;
	int made;

	fo_rail_down(1);
	mq->gid[15] = 1; /* ours the higher: the peer's choice wins */
	made = nmade;
	b = last_bind();
	cr_assert(b && b->qp_bind.rail == 2, "our new standby on rail 2");
	cr_assert_not(b->qp_bind.flags & R2CC_CTRL_BIND_PINNED);
	r2cc_health_report(3, R2CC_RAIL_DOWN, R2CC_CAUSE_CARRIER);
	peer_binds(3, 0x78, 0);
	cr_assert_eq(nmade, made, "no standby made on the rail down");
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_BINDING);
	b = last_bind();
	cr_assert(b, "ours again");
	cr_assert_eq(b->qp_bind.rail, 2, "on its own rail");
	cr_assert(b->qp_bind.flags & R2CC_CTRL_BIND_PINNED, "kept: pinned");
	peer_binds(2, 0x79, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	cr_assert_eq(back.state, IBV_QPS_RTS);
}

/* Pinned, the peer keeps a rail down here: no rail both can take. */
Test(rebind, a_pinned_peer_on_a_rail_down_here_leaves_it_unprotected,
     .init = rebind_setup, .fini = teardown, .timeout = 10)
{
	fo_rail_down(1);
	r2cc_health_report(3, R2CC_RAIL_DOWN, R2CC_CAUSE_CARRIER);
	peer_binds(3, 0x78, R2CC_CTRL_BIND_PINNED);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_NONE);
}

/* Bound, the peer's bind heard again (it never got ours): ours goes again
 * as an echo; an echo heard (the peer sent twice, got bound by our first
 * echo) is not answered, or two bound ends would echo for ever. */
Test(rebind, a_bind_heard_again_is_echoed_once, .init = rebind_setup,
     .fini = teardown, .timeout = 10)
{
	const struct r2cc_ctrl_msg *b;
	int sent;

	peer_binds(3, 0x78, R2CC_CTRL_BIND_AGAIN);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	sent = fo_nsent;
	peer_binds(3, 0x78, 0);
	cr_assert_eq(fo_nsent, sent + 1, "ours not sent again");
	b = last_bind();
	cr_assert(b->qp_bind.flags & R2CC_CTRL_BIND_ECHO, "not an echo");
	cr_assert_eq(b->qp_bind.rail, 3);
	peer_binds(3, 0x78, R2CC_CTRL_BIND_ECHO);
	cr_assert_eq(fo_nsent, sent + 1, "an echo answered");
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
}

Test(rebind, a_bind_again_is_ignored_once_moved_or_unbound,
     .init = rebind_setup, .fini = teardown, .timeout = 10)
{
	int made = nmade;

	peer_binds(3, 0x78, 0); /* not AGAIN: a stale bind */
	cr_assert_eq(nmade, made);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	cr_assert_null(last_bind());
}

Test(rebind, no_rail_up_for_a_standby_waits_unprotected_for_one,
     .init = rebind_setup, .fini = teardown, .timeout = 10)
{
	fo_standby = -1;
	fo_rail_down(1);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_NONE,
		     "unprotected: a fault now is the program's");
	cr_assert_null(last_bind());
	fo_rail_down(0);
	cr_assert_neq(prim.state, IBV_QPS_ERR, "not fenced: nowhere to go");
	/* its old standby's rail comes back: that standby stands by again */
	r2cc_health_report(1, R2CC_RAIL_UP, R2CC_CAUSE_CARRIER);
	r2cc_mig_rail_up(1);
	r2cc_mig_tick();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
}

static void lazy_setup(void)
{
	start();
	qp_on(NULL, NULL);
	fo_rails();
}

Test(rebind, a_lazy_qp_follows_with_no_standby_made, .init = lazy_setup,
     .fini = teardown, .timeout = 10)
{
	const struct r2cc_ctrl_msg *b;
	int made = nmade;

	peer_binds(3, 0, R2CC_CTRL_BIND_AGAIN | R2CC_CTRL_BIND_LAZY);
	cr_assert_eq(nmade, made, "lazy: made at a failover, not now");
	b = last_bind();
	cr_assert(b && b->qp_bind.rail == 3 &&
		  b->qp_bind.flags & R2CC_CTRL_BIND_LAZY);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	/* and its own standby's rail dying: rebound, still none made */
	fo_rail_down(3);
	cr_assert_eq(nmade, made);
	b = last_bind();
	cr_assert(b && b->qp_bind.rail == 2 &&
		  b->qp_bind.flags & R2CC_CTRL_BIND_AGAIN);
}

Test(rebind, a_fault_with_the_standby_rail_down_too_is_the_programs,
     .init = rebind_setup, .fini = teardown, .timeout = 10)
{
	/* rail 1's event not handled yet when rail 0's comes */
	r2cc_health_report(1, R2CC_RAIL_DOWN, R2CC_CAUSE_CARRIER);
	fo_rail_down(0);
	cr_assert_neq(prim.state, IBV_QPS_ERR, "not fenced: nowhere to go");
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_FAILED);
}

Test(rebind, on_its_standby_with_no_rail_left_it_flushes_to_the_program,
     .init = rebind_setup, .fini = teardown, .timeout = 10)
{
	post_op(1, IBV_WR_SEND);
	fo_rail_down(0);
	peer_moves(PEER_QPN, 0x500, 0, false);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	cr_assert_eq(back.nsent, 1, "replayed on the standby");
	/* rail 0 is still down (never seen up): the standby's dies too */
	fo_rail_down(1);
	cr_assert_eq(back.state, IBV_QPS_ERR,
		     "its work flushes to the program");
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_FAILED);
}

Test(rebind, a_move_onto_a_rail_that_dies_is_abandoned, .init = rebind_setup,
     .fini = teardown, .timeout = 10)
{
	post_op(1, IBV_WR_SEND);
	fo_rail_down(0); /* fenced; the peer has not answered yet */
	cr_assert_eq(prim.state, IBV_QPS_ERR);
	fo_rail_down(1);
	cr_assert_eq(back.state, IBV_QPS_ERR, "the standby too: no move");
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_FAILED);
}

/* The peer's REARM for our QP: its standby's first PSN @psn. */
static void peer_rearms(uint32_t psn, uint8_t flags)
{
	fo_peer_fb(R2CC_CTRL_FB_REARM, flags, psn);
}

/*
 * Moved to the standby on rail 1 and back to rail 0 while rail 1 is down
 * here: our REARM says NOARM, so both ends stand down (unprotected, not
 * one end armed towards a standby the other does not have).
 */
static void moved_back_with_standby_rail_down(void)
{
	const struct r2cc_ctrl_msg *r;
	uint32_t psn;
	int n;

	fo_on_the_standby();
	r2cc_health_report(1, R2CC_RAIL_DOWN, R2CC_CAUSE_CARRIER);
	r2cc_mig_test_move_back(mq, 0x900, PEER_FB_PSN);
	psn = (back.sq_psn + 1) & 0xffffff; /* the peer executed WR 1 */
	peer_says_why(R2CC_CTRL_FAILOVER, R2CC_CTRL_WHY_FAILBACK, true, psn, 0);
	peer_says_why(R2CC_CTRL_FAILOVER_ACK, R2CC_CTRL_WHY_FAILBACK, true, psn,
		      0);
	fo_peer_fb(R2CC_CTRL_FB_POSTED, 0, PEER_FB_PSN);
	r = fo_last(R2CC_CTRL_FAILBACK);
	cr_assert(r && r->failback.phase == R2CC_CTRL_FB_REARM, "REARM sent");
	cr_assert(r->failback.flags & R2CC_CTRL_FB_NOARM,
		  "saying it cannot be re-armed here");
	n = fo_nsent;
	peer_rearms(0x700, 0); /* the peer's standby, ready there */
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_NONE,
		     "unprotected: no standby to move to");
	cr_assert_eq(fo_nsent, n, "the peer knows already");
	cr_assert_neq(back.state, IBV_QPS_RTS, "ours is not connected");
}

/*
 * Moved to the standby and back, re-armed, and then the recycled primary
 * dies with flushes only (rxe did, in the lab): its flushes are its own,
 * not the first incarnation's, and it fails over onto the re-armed
 * standby instead of leaving its work uncompleted.
 */
Test(rebind, a_moved_back_primary_that_only_flushes_fails_over,
     .init = rebind_setup, .fini = teardown, .timeout = 10)
{
	const struct r2cc_ctrl_msg *f;
	uint32_t psn;
	int n;

	fo_on_the_standby();
	r2cc_mig_test_move_back(mq, 0x900, PEER_FB_PSN);
	psn = (back.sq_psn + 1) & 0xffffff; /* the peer executed WR 1 */
	peer_says_why(R2CC_CTRL_FAILOVER, R2CC_CTRL_WHY_FAILBACK, true, psn, 0);
	peer_says_why(R2CC_CTRL_FAILOVER_ACK, R2CC_CTRL_WHY_FAILBACK, true, psn,
		      0);
	fo_peer_fb(R2CC_CTRL_FB_POSTED, 0, PEER_FB_PSN);
	peer_rearms(0x701, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY, "protected again");
	prim.state = IBV_QPS_RTS; /* recycled (the test moved it back) */
	post_op(2, IBV_WR_SEND);
	cr_assert_eq(prim.nsent, 2, "WR 2 on the primary");
	/* a flush of the first incarnation, the primary running: hidden */
	n = fo_nsent;
	cr_assert_eq(primary_wc(1, IBV_WC_WR_FLUSH_ERR), 0);
	cr_assert_eq(fo_nsent, n, "no move for it");
	/* the primary in ERR, no error completion first: its own */
	prim.state = IBV_QPS_ERR;
	cr_assert_eq(primary_wc(2, IBV_WC_WR_FLUSH_ERR), 0, "held");
	f = fo_last(R2CC_CTRL_FAILOVER);
	cr_assert(f && fo_nsent > n, "the peer told: a move begins");
	cr_assert_eq(f->failover.reason, R2CC_CTRL_WHY_CQ_ERROR);
	/* the peer executed nothing of the recycled primary's (0x900 on) */
	peer_says(R2CC_CTRL_FAILOVER, true, 0x900, 0);
	peer_says(R2CC_CTRL_FAILOVER_ACK, true, 0x900, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	cr_assert_eq(back.sent[back.nsent - 1], 2, "WR 2 replayed there");
}

Test(rebind, a_standby_a_move_back_could_not_rearm_is_rearmed_when_up,
     .init = rebind_setup, .fini = teardown, .timeout = 10)
{
	const struct r2cc_ctrl_msg *r;
	int n;

	moved_back_with_standby_rail_down();
	/* its rail comes back: after the retry gap, a REARM without NOARM */
	r2cc_health_report(1, R2CC_RAIL_UP, R2CC_CAUSE_CARRIER);
	r2cc_mig_rail_up(1);
	n = fo_nsent;
	r2cc_mig_tick();
	cr_assert_eq(fo_nsent, n, "not again within the retry gap");
	usleep(1100000); /* MIG_REARM_RETRY_NS, and some */
	r2cc_mig_tick();
	r = fo_last(R2CC_CTRL_FAILBACK);
	cr_assert_eq(fo_nsent, n + 1);
	cr_assert(r->failback.phase == R2CC_CTRL_FB_REARM &&
		  !(r->failback.flags & R2CC_CTRL_FB_NOARM));
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_NONE,
		     "not before the peer's");
	peer_rearms(0x701, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	cr_assert_eq(back.state, IBV_QPS_RTS, "re-armed with the peer's");
	cr_assert_eq(back.sq_psn, r->failback.psn, "from the PSN it said");
	/* a REARM nobody expects changes nothing */
	peer_rearms(0x702, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	/* the peer's standby lost after all: ours stands down with it */
	peer_rearms(0x703, R2CC_CTRL_FB_NOARM);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_NONE);
}

Test(rebind, a_standby_a_move_back_could_not_rearm_moves_to_a_rail_up,
     .init = rebind_setup, .fini = teardown, .timeout = 10)
{
	const struct r2cc_ctrl_msg *b;

	moved_back_with_standby_rail_down();
	/* rail 1's event reaches the sweep: placement gives rail 2 */
	r2cc_mig_rail_down(1, R2CC_CAUSE_CARRIER);
	r2cc_mig_tick();
	b = last_bind();
	cr_assert(b && b->qp_bind.rail == 2 &&
		  b->qp_bind.flags & R2CC_CTRL_BIND_AGAIN);
	peer_binds(2, 0x79, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	/* a REARM of the old round is stale now */
	peer_rearms(0x704, 0);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
}

/* The program destroys its QP while the rebind sweep asks placement about
 * it (rebind.c asks with no lock held): the destroy must wait until
 * placement is done with the QP, or the shim's placement reads what the
 * provider freed (protect.c: qp->pd, q->qp->context). */
static sem_t destroyed;
static pthread_t destroyer;
static _Atomic bool prim_freed, placed_freed;

static void *program_destroys(void *arg)
{
	(void)arg;
	r2cc_mig_release(mq); /* ibv_destroy_qp's first step */
	atomic_store(&prim_freed, true); /* then the provider frees it */
	sem_post(&destroyed);
	return NULL;
}

static void destroy_while_placed(struct ibv_qp *qp)
{
	struct timespec ts;

	(void)qp;
	fo_standby_hook = NULL;
	pthread_create(&destroyer, NULL, program_destroys, NULL);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 1; /* at once, unless the destroy waits for us */
	sem_timedwait(&destroyed, &ts);
	/* what placement reads of the QP from here on */
	if (atomic_load(&prim_freed))
		atomic_store(&placed_freed, true);
}

static void fini_destroyed(void)
{
	cr_expect_eq(r2cc_mig_test_refused(), 0);
	r2cc_mig_test_free(mq); /* released by the program's destroy */
	r2cc_mig_cq_free(mc);
	r2cc_mig_stop();
}

Test(rebind, a_qp_destroyed_while_placed_outlives_the_placement,
     .init = rebind_setup, .fini = fini_destroyed, .timeout = 20)
{
	sem_init(&destroyed, 0, 0);
	fo_standby_hook = destroy_while_placed;
	fo_rail_down(1);
	pthread_join(destroyer, NULL);
	cr_assert(atomic_load(&prim_freed), "the destroy went through");
	cr_assert(!atomic_load(&placed_freed),
		  "placement was asked about a QP the program had destroyed");
	cr_assert(!r2cc_mig_covers(mq));
}
