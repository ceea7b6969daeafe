/* SPDX-License-Identifier: MIT */
/*
 * mig_test.h - seams for the unit tests that drive the move over
 * tests/unit/migrate/fo_fixture.c (mig_test.c is built into those tests
 * only, never into the library): what the bind with a peer would have set
 * up, and the peer's messages as the control thread delivers them.
 */
#ifndef R2CC_MIG_TEST_H
#define R2CC_MIG_TEST_H

#include "chan.h"
#include "migrate.h"
#include "protect.h"

/* @mq bound: backup @bqp completing on @bcq (both directions), the peer's
 * id @peer and its QP @dest_qpn, the backup's first PSN @bpsn (MTU 1024);
 * state READY. */
void r2cc_mig_test_bound(struct r2cc_mig_qp *mq, struct ibv_qp *bqp,
			 struct ibv_cq *bcq, uint64_t peer, uint32_t dest_qpn,
			 uint32_t bpsn);
/* @mq lazy (R2CC_BACKUP=lazy both ends): no backup yet, one is made on
 * @bctx/@bpd at a failover (the peer's backup MTU 1024). After
 * r2cc_mig_test_bound() with no @bqp. */
void r2cc_mig_test_lazy(struct r2cc_mig_qp *mq, struct ibv_context *bctx,
			struct ibv_pd *bpd);
/* A QP_BIND from @peer, under the module lock. */
void r2cc_mig_test_peer_binds(uint64_t peer, const struct r2cc_ctrl_msg *m);
/* A FAILOVER, FAILOVER_ACK or FAILBACK from @peer, under the module lock. */
void r2cc_mig_test_peer_says(uint64_t peer, const struct r2cc_ctrl_msg *m);
/* @peer's MR @rkey is @backup_rkey on @rail (its MR_KEYS). */
void r2cc_mig_test_peer_mr(uint64_t peer, int rail, uint32_t rkey,
			   uint32_t backup_rkey);
/* Both ends agreed to move @mq back (READY both ways; @psn its recycled
 * primary's first PSN, @peer_psn the peer's): its backup is fenced, as
 * failback.c does. */
void r2cc_mig_test_move_back(struct r2cc_mig_qp *mq, uint32_t psn,
			     uint32_t peer_psn);
/* @s's backup SRQ is @bsrq on @rail (what the first QP's pin made). */
void r2cc_mig_test_srq_bound(struct r2cc_mig_srq *s, struct ibv_srq *bsrq,
			     int rail);
/* @mq cannot be protected any more (as when its peer has no r2cc). */
void r2cc_mig_test_unprotect(struct r2cc_mig_qp *mq);
/* @mq binding to a peer on the node of @gid, its bind sent, the peer not
 * known yet (what r2cc_mig_protect() leaves while its resolve runs). */
void r2cc_mig_test_binding(struct r2cc_mig_qp *mq, const uint8_t gid[16]);
/* @mq's QP_BIND to @peer went out @binds times, the last @ago_ms ago */
void r2cc_mig_test_bind_out(struct r2cc_mig_qp *mq, uint64_t peer,
			    unsigned int binds, unsigned int ago_ms);
/* @mq's move began (its fault) @ago_ms ago */
void r2cc_mig_test_fault_ago(struct r2cc_mig_qp *mq, unsigned int ago_ms);
/* @gid's node learned to run r2cc or not (@word: enum r2cc_node_word,
 * 0 no, 1 yes, 2 silent), or only asked (-1): what is remembered of it,
 * -1 nothing */
int r2cc_mig_test_node(const uint8_t gid[16], int word);
/* The channel thread's ticks skipped (@on; it returns once a tick under
 * way has ended), or run again: for a test that drives r2cc_mig_tick()
 * itself and checks what happens between two (tick.c) */
void r2cc_mig_test_quiet(bool on);
/* Moves back wait @ms of a rail's health (R2CC_FAILBACK_HOLD_MS) */
void r2cc_mig_test_fb_hold(unsigned int ms);
/* @mq's round of a move back began @ago_ms ago */
void r2cc_mig_test_fb_ago(struct r2cc_mig_qp *mq, unsigned int ago_ms);
/* @mq's resolve ended @how: @peer owns its peer QP (R2CC_RES_FOUND). */
void r2cc_mig_test_resolved(struct r2cc_mig_qp *mq, uint64_t peer,
			    enum r2cc_chan_res_end how);
/* @mq's peer was first asked for @ago_ms ago */
void r2cc_mig_test_resolve_ago(struct r2cc_mig_qp *mq, unsigned int ago_ms);
/* @mq's protection state is @st (enum r2cc_prot_state). */
void r2cc_mig_test_state(struct r2cc_mig_qp *mq, uint32_t st);
/* The control thread's SRQ sweep, under the module lock. */
void r2cc_mig_test_sweep(void);
/* Life events refused so far (illegal in the QP's state: a bug). */
unsigned long r2cc_mig_test_refused(void);
/* Free @mq after r2cc_mig_release() (no poller can hold it in a test). */
void r2cc_mig_test_free(struct r2cc_mig_qp *mq);

#endif /* R2CC_MIG_TEST_H */
