/* SPDX-License-Identifier: MIT */
/*
 * fo_fixture.h - the move with a scripted verbs table, for the tests
 * that drive it (test_failover.c, and the shim's poll over it in
 * tests/unit/shim/test_poll.c): QPs and CQs whose provider ops record what
 * is posted and hand back scripted completions; the module started on a
 * loopback control channel; one protected QP bound to a played peer.
 */
#ifndef R2CC_TEST_FO_FIXTURE_H
#define R2CC_TEST_FO_FIXTURE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ctrl_msg.h"
#include "mig_test.h"

#define PEER 0x1234
#define PEER_QPN 0x22
/* The peer's recycled primary's first PSN, in r2cc_mig_test_move_back() */
#define PEER_FB_PSN 0x901
#define MAXW 32
#define FO_TIMEOUT 20 /* the program's ACK timeout (retry counts: 7) */

struct fake_qp {
	struct ibv_qp qp; /* first: the ops get &qp */
	uint64_t sent[MAXW], recvd[MAXW];
	unsigned int flags[MAXW]; /* of each sent WR */
	uint8_t inl[MAXW]; /* an inline WR's first byte, as posted */
	int nsent, nrecv;
	enum ibv_qp_state state;
	uint32_t sq_psn; /* as the last RTS set it */
	uint32_t rq_psn; /* as the last RTR set it */
	uint32_t last_rkey; /* of the last RDMA WR posted */
	uint8_t timeout, retry_cnt, rnr_retry; /* as the last modify set */
	uint8_t min_rnr_timer; /* as the last RTR set it */
	struct ibv_ah_attr ah; /* as the last modify with an AV set it */
	uint32_t dest_qpn; /* as the last RTR set it */
	int nmodify; /* modify_qp calls that succeeded */
	_Atomic bool draining; /* in SQD: its send queue not drained yet */
	bool no_sqd; /* a provider that takes no QP to SQD */
};

struct fake_cq {
	struct ibv_cq cq;
	struct ibv_wc wc[1024]; /* (a shared standby CQ's: many QPs') */
	int head, n;
};

struct fake_srq {
	struct ibv_srq srq;
	uint64_t ids[MAXW];
	int n;
};

extern struct ibv_context ctx; /* the fakes' context (their ops) */
/* Ports the fakes' verbs answer queries of (port 1 of each ctx): none
 * unless a test sets them (start() clears them); other contexts have no
 * port attributes and GID i is ::i */
#define FO_PORTS 2
struct fo_port {
	struct ibv_context *ctx;
	struct ibv_port_attr attr;
	uint8_t gid0[16];
};
extern struct fo_port fo_ports[FO_PORTS];
extern struct fake_qp prim, back; /* the program's QP and its backup */
extern struct fake_cq bcq; /* the backup's CQ */
extern struct fake_srq psrq, bsrq;
extern uint32_t fence_rq_psn; /* what a query of a fenced QP answers */
extern int nmade; /* backup QPs made (a lazy QP's, at its failover) */
extern struct ibv_qp_cap made_cap; /* the last one's */
extern struct r2cc_mig_cq *mc; /* the program's CQ's */
extern struct r2cc_mig_qp *mq; /* the protected QP */
/* Its capabilities (start() makes them 8 WRs and 1 SGE each way, 64
 * inline bytes) */
extern struct ibv_qp_cap fo_cap;
/* The rail the shim's placement gives a new standby (-1: none up). */
extern int fo_standby;
/* Called with the QP placement is asked about, before it answers (NULL:
 * none; reset by start()) */
extern void (*fo_standby_hook)(struct ibv_qp *qp);
/* Sends to the peer kept (not sent) while true: the last FO_SENT of them,
 * fo_nsent in all. */
#define FO_SENT 16
extern bool fo_capture;
/* What the channel says of when it last heard from a peer: this, unless
 * 0 (then the channel's own answer) */
extern _Atomic uint64_t fo_heard_ns;
/* When the peer last answered a move of ours, as the channel says: this */
extern _Atomic uint64_t fo_answered_ns;
extern struct r2cc_ctrl_msg fo_sent[FO_SENT];
extern _Atomic int fo_nsent; /* (the inbox thread's ticks send too) */
/* MRs the program's PD has (the shim's mr_keys), 0 unless a test sets
 * it: MR i's R_Key and its shadow's on @rail */
extern int fo_nmrs;
#define FO_RKEY(i) (0x1000u + (uint32_t)(i))
#define FO_BACKUP_RKEY(rail, i) \
	(0x80000000u | (uint32_t)(rail) << 20 | (uint32_t)(i))

int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		struct ibv_send_wr **bad);
int f_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		struct ibv_recv_wr **bad);
int f_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int f_req_notify(struct ibv_cq *cq, int solicited);
int f_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask);
int f_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
	       struct ibv_qp_init_attr *init);
int f_destroy(void *obj);
struct ibv_cq *f_create_cq(struct ibv_context *c, int cqe, void *cqc,
			   struct ibv_comp_channel *ch, int vec);
struct ibv_qp *f_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia);
int f_lkey_xlate(const void *pd, int rail, uint32_t lkey, uint32_t *out);
int f_post_srq(struct ibv_srq *srq, struct ibv_recv_wr *wr,
	       struct ibv_recv_wr **bad);
struct ibv_srq *f_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a);
/* A completion @wr_id of @op with status @st on @qpn, into @f */
void add_wc(struct fake_cq *f, uint64_t wr_id, enum ibv_wc_status st,
	    enum ibv_wc_opcode op, uint32_t qpn);
/* The module on (a loopback control channel nobody else talks to) */
void start(void);
/* Fresh fakes and one protected QP on them (on @srq's, if not NULL), its
 * backup @bqp (NULL: lazy), READY at RTS */
void qp_on(struct r2cc_mig_srq *srq, struct ibv_qp *bqp);
void setup_on(struct r2cc_mig_srq *srq);
void setup(void); /* start(), then setup_on(NULL) */
void teardown(void);
/* The peer moves @qpn's end: its FAILOVER (@psn: its rq_psn), then its
 * FAILOVER_ACK (@recvs of ours its SENDs consumed; @taken: one partly) */
void peer_moves(uint32_t qpn, uint32_t psn, uint64_t recvs, bool taken);
/* A signaled WR of @op (or a SEND), 100 bytes, posted through r2cc */
void post_op(uint64_t wr_id, enum ibv_wr_opcode op);
/* The same with @flags (IBV_SEND_*) */
void post_flags(uint64_t wr_id, enum ibv_wr_opcode op, unsigned int flags);
/* The same, @len bytes */
void post_sized(uint64_t wr_id, enum ibv_wr_opcode op, uint32_t len,
		unsigned int flags);
void post(uint64_t wr_id);
/* The peer's FAILOVER or FAILOVER_ACK, for a move of reason @why */
void peer_says_why(uint8_t type, uint8_t why, bool valid, uint32_t rq_psn,
		   uint64_t recvs);
void peer_says(uint8_t type, bool valid, uint32_t rq_psn, uint64_t recvs);
/* A send completion of @op on the primary, through r2cc_mig_wc() */
int primary_wc_of(uint64_t wr_id, enum ibv_wc_status st, enum ibv_wc_opcode op,
		  bool behind);
int primary_wc(uint64_t wr_id, enum ibv_wc_status st);
/* Rails 1-3 known and up (rail 0 is the QP's), the sends captured */
void fo_rails(void);
/* The last message of @type captured, or NULL */
const struct r2cc_ctrl_msg *fo_last(uint8_t type);
/* The peer's FAILBACK of @phase (R2CC_CTRL_FB_*) for our QP */
void fo_peer_fb(uint8_t phase, uint8_t flags, uint32_t psn);
/* WR 1 posted, rail 0 lost, the peer's move: on the standby (rail 1),
 * WR 1 done there; rail 0 up again (known up, no event yet) */
void fo_on_the_standby(void);
/* The same, rail 0 left down */
void fo_to_the_standby(void);

/* Another protected QP on the same program CQ (mc), with its own backup
 * and backup CQ, bound to the played peer's QP PEER_QPN + 1 + i */
struct fo_extra {
	struct fake_qp prim, back;
	struct r2cc_mig_qp *mq;
};
/* The extra QPs' standby CQ: one, shared, as r2cc makes them */
extern struct fake_cq extra_bcq;
/* @o made as the @i-th extra QP (QPN 0x1000 + @i, its backup 0x2000 +
 * @i), READY at RTS, with fo_cap */
void fo_extra_on(struct fo_extra *o, int i);
/* @o (the @i-th) moves: @nwr signaled SENDs posted (wr_ids from @id on),
 * its path fails, the peer moves its end; they are replayed on its
 * backup and complete there (in extra_bcq, not yet polled) */
void fo_extra_moves(struct fo_extra *o, int i, int nwr, uint64_t id);
/* @rail's carrier lost: the event, then a tick */
void fo_rail_down(int rail);

#endif /* R2CC_TEST_FO_FIXTURE_H */
