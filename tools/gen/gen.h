/* SPDX-License-Identifier: MIT */
/*
 * r2cc-gen: a verifying RC traffic generator. The state shared by its files:
 * options, counters, per-QP bookkeeping, and the functions of each file.
 */
#ifndef R2CC_GEN_H
#define R2CC_GEN_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "verify.h"

#define GEN_MAX_QPS 1024 /* per peer */
#define GEN_MAX_PEERS 64
#define GEN_MAX_ALL_QPS 32766 /* all peers together: 15 bits of a wr_id */
#define GEN_SQ_DEPTH 32 /* send WRs in flight per QP */
#define GEN_CREDITS 16 /* receives per QP = WRITE slots = messages in flight */
#define GEN_BATCH 16 /* WRs per ibv_post_send call at most */
#define GEN_IB_PORT 1

/* Send WRs posted, by opcode, as r2cc-ctl metrics counts them (op label) */
enum gen_wr_stat {
	GEN_WS_SEND,
	GEN_WS_SEND_IMM,
	GEN_WS_WRITE,
	GEN_WS_WRITE_IMM,
	GEN_WS_READ,
	GEN_WS_NR
};

/* wr_id: what kind of queue, the QP index, then the WR's index. */
#define GEN_WRID(recv, qp, idx) \
	((uint64_t)(recv) << 63 | (uint64_t)(qp) << 48 | (idx))
#define GEN_WRID_RECV(id) ((id) >> 63)
#define GEN_WRID_QP(id) (((id) >> 48) & 0x7fff)
#define GEN_WRID_IDX(id) ((id)&0xffffffffffffULL)
/* An SRQ receive's "QP": its index is the slot and the slot's post
 * generation (GEN_SRQ_*; the QP is the wc's) */
#define GEN_WRID_SRQ 0x7fff
#define GEN_SRQ_SLOT(idx) ((idx)&0xffff)
#define GEN_SRQ_GEN(idx) ((uint32_t)((idx) >> 16))

struct gen_opts {
	const char *dev;
	const char *server; /* NULL: we are the server */
	int gidx;
	int port;
	int qps; /* per peer */
	int peers; /* client: servers at ports port..; server: clients */
	int window; /* client: send WRs and messages in flight per QP */
	int sq_size, rq_size; /* each QP's send and receive queues asked */
	int retry_cnt;
	int timeout; /* RC local ACK timeout exponent */
	uint32_t max_inline;
	uint32_t max_msg;
	uint64_t ops; /* client: stop after this many (0: by time) */
	uint64_t seed;
	double secs; /* client: run time */
	double interval; /* progress lines (0: none) */
	double stall_limit;
	double linger; /* seconds to keep the QPs after the summary line */
	double pause_at, pause_for; /* no new work in [t0 + at, + for) */
	int srq; /* the QPs share one SRQ */
	int ud; /* a UD QP in RTS beside them (--ud) */
	int cq_ex; /* the extended CQ API (--cq-ex) */
	int hold; /* no work until SIGUSR1 (--hold) */
};

struct gen_stats {
	uint64_t ops;
	uint64_t bytes_verified;
	uint64_t mismatches;
	uint64_t duplicates;
	uint64_t losses;
	uint64_t order_errors;
	uint64_t errors;
	uint64_t longest_stall_ms;
};

/* What a client send WR carried, checked when it retires. */
struct gen_wr {
	uint8_t kind;
	uint32_t seq;
	uint32_t len;
	uint32_t off;
};

/* The peer's half of one QP's connection. */
struct gen_remote {
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint64_t waddr; /* server: WRITE slots */
	uint64_t raddr; /* server: READ region */
};

struct gen_qp {
	struct ibv_qp *qp; /* owned */
	uint32_t idx; /* in gen.qp, and in this side's wr_ids */
	uint32_t wire; /* in message headers: the same on both sides */
	uint32_t peer_idx; /* in gen.peer */
	uint64_t seed; /* its payloads' (the client's --seed) */
	uint32_t psn;
	uint8_t *sbuf; /* borrowed: gen.mem, GEN_SQ_DEPTH slots */
	uint8_t *rbuf; /* borrowed: gen.mem, GEN_CREDITS slots */
	uint8_t *wreg; /* borrowed: gen.mem, server: GEN_CREDITS slots */
	uint8_t *rreg; /* borrowed: gen.mem, server: one slot */
	struct gen_sq sq;
	uint8_t sig[GEN_SQ_DEPTH];
	struct gen_wr wr[GEN_SQ_DEPTH];
	uint64_t rposted; /* receives posted */
	uint64_t rnext; /* index of the receive expected to complete next */
	struct gen_seq in; /* server: messages; client: credits */
	uint32_t tposted; /* client: messages posted */
	uint32_t tacked; /* client: messages the server verified */
	uint32_t rseq; /* client: READs posted */
	uint32_t rdone; /* client: READs verified */
	uint64_t nop; /* client: operations picked */
	uint32_t cseq; /* server: credits sent */
	uint32_t cacked; /* server: ack value of the last credit */
	uint64_t ops; /* server: messages verified */
	uint64_t bytes; /* server: their bytes */
	uint64_t wrs[GEN_WS_NR]; /* send WRs posted, by opcode */
	uint64_t wr_bytes; /* their SGE lengths, summed */
	struct gen_remote peer;
};

/* One process at the other end, and its TCP connection. */
struct gen_peer {
	int fd;
	union ibv_gid gid;
	uint32_t lid;
	enum ibv_mtu path_mtu;
	uint64_t seed; /* server: the client's --seed */
	uint32_t base; /* server: the client's wire index of our first QP */
	int talked; /* its TCP connection has data or was closed */
	int ended; /* server: its end record arrived */
};

/* Heap in use and pinned memory, at one moment. */
struct gen_mem {
	uint64_t heap;
	uint64_t pinned;
};

struct gen {
	struct gen_opts o;
	int client;
	int nqps; /* o.qps * o.peers */
	struct ibv_context *ctx; /* owned */
	struct ibv_pd *pd; /* owned */
	struct ibv_comp_channel *ch; /* owned */
	struct ibv_cq *cq; /* owned */
	struct ibv_cq_ex *cqx; /* the same CQ, with --cq-ex */
	struct ibv_srq *srq; /* owned, with --srq */
	struct ibv_qp *ud; /* owned, with --ud */
	uint32_t *srq_gen; /* owned: each SRQ slot's current post */
	struct ibv_mr *mr; /* owned */
	uint8_t *mem; /* owned */
	size_t memlen;
	size_t sslot; /* bytes per send buffer slot */
	size_t rslot; /* bytes per receive buffer slot */
	uint32_t max_rd; /* READs in flight per QP (device limit) */
	struct gen_qp *qp; /* owned: nqps entries, peer by peer */
	struct gen_peer *peer; /* owned: o.peers entries */
	struct ibv_port_attr port;
	union ibv_gid gid;
	struct gen_limits lim;
	struct gen_mem mem0; /* once the CQ existed */
	unsigned int cq_events; /* not yet acknowledged */
	struct gen_stats st;
	double t0;
	double last_progress;
	double next_print;
	uint64_t picked; /* client: operations posted, for -n */
	int stop; /* client: post no new operation */
	int idle; /* the last poll found nothing */
	int pause_said; /* 1: the pause's start printed, 2: its end too */
	int hold_said; /* --hold: 1 holding said, 2 released said */
	int ended; /* server: peers whose end record arrived */
	int done; /* the run is over (see failed) */
	int failed;
	unsigned int reported; /* failure messages printed */
	char first[256]; /* the first failure */
};

/* main.c */
double gen_now(void);
void gen_fail(struct gen *g, uint64_t *counter, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void gen_report(const struct gen *g, int progress);
void gen_report_qps(const struct gen *g);
void gen_mem_now(struct gen_mem *m);
int gen_stop_asked(void);
int gen_go_given(void);

/* oob.c: the TCP exchange, every call bounded */
int gen_oob_open(struct gen *g);
int gen_oob_hello(struct gen *g);
int gen_oob_exchange(struct gen *g);
int gen_oob_sync(struct gen *g, char tag);
int gen_oob_end(struct gen *g, struct gen_peer *p);
int gen_oob_summary(struct gen *g);
void gen_oob_close(struct gen *g);

/* verbs.c */
int gen_verbs_open(struct gen *g);
int gen_verbs_alloc(struct gen *g);
int gen_verbs_connect(struct gen *g);
void gen_verbs_close(struct gen *g);
int gen_verbs_drain(struct gen *g);
int gen_verbs_wait(struct gen *g, int ms, int *tcp);
int gen_post_recvs(struct gen *g);
uint8_t *gen_recv_buf(struct gen *g, struct gen_qp *q, uint64_t wr_id);
int gen_recv_again(struct gen *g, struct gen_qp *q, uint64_t wr_id);
struct gen_qp *gen_qp_of(struct gen *g, const struct ibv_wc *wc);
int gen_post_send(struct gen *g, struct gen_qp *q, struct ibv_send_wr *wr);

/* client.c, server.c */
int gen_client_busy(const struct gen *g, char *what, size_t n);
/* Within --pause-at/--pause-for (start and end printed, once each) */
int gen_paused(struct gen *g);
int gen_client_step(struct gen *g);
void gen_client_wc(struct gen *g, struct gen_qp *q, const struct ibv_wc *wc);
int gen_server_step(struct gen *g);
void gen_server_wc(struct gen *g, struct gen_qp *q, const struct ibv_wc *wc);

/* run.c */
int gen_run(struct gen *g);

#endif
