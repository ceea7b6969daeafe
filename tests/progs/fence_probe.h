/* SPDX-License-Identifier: MIT */
/*
 * fence_probe.h - fence_probe's options, device, out-of-band exchange and
 * QP helpers, shared by its tests: fence_probe.c (PSN accounting),
 * fence_probe_flush.c (flushes, QP reuse, RQ reset) and
 * fence_probe_timing.c (RNR behind a READ, retries, device removal, SQD).
 */
#ifndef R2CC_FENCE_PROBE_H
#define R2CC_FENCE_PROBE_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#define MTU_BYTES 1024
#define BUF_SIZE (512 * 1024)
#define RBUF 8192 /* one receive buffer */
#define REMOTE_OFF (256 * 1024) /* WRITE/READ target area */
#define PSN_MASK 0xffffffU
#define MAXQ 8

struct ep { /* what one QP tells its peer */
	uint32_t qpn, psn, rkey, pad;
	uint64_t addr;
	uint8_t gid[16];
};

struct opts {
	const char *dev, *server, *test, *name, *ops, *hole, *unhole, *retries;
	int gidx, ibport, tcpport, k, m, n;
	uint32_t psn;
	double wait;
};

extern struct opts o;

extern struct ibv_context *ctx;
extern struct ibv_pd *pd;
extern struct ibv_cq *cq;
extern struct ibv_mr *mr;
extern char *buf;
extern union ibv_gid gid;
extern int sock, client;

double now(void);
void die(const char *what, int err);
void fact(const char *name, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void xchg(const void *out, void *in, size_t len);
uint64_t sync64(uint64_t v);
void oob_open(void);
void dev_open(void);
struct ibv_qp *qp_new(struct ibv_srq *srq);
int to_init(struct ibv_qp *qp);
int to_rtr(struct ibv_qp *qp, const struct ep *r);
int to_rts(struct ibv_qp *qp, uint32_t psn, int retry, int tmo);
int to_state(struct ibv_qp *qp, enum ibv_qp_state s, double *us);
struct ep connect_qp(struct ibv_qp *qp, uint32_t psn, int retry, int tmo);
void query(struct ibv_qp *qp, uint32_t *sq, uint32_t *rq, int *st);
void post_recv(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t id, int slot);
int post_send(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t id,
	      uint32_t len, const struct ep *r, int signaled);
int poll_n(struct ibv_wc *wc, int n, double ms, double *last_ms);
uint32_t pkts(uint32_t len);
void async_events(double ms, char *out, size_t len);
const char *wcs(enum ibv_wc_status s);
uint32_t psn_diff(uint32_t a, uint32_t b);
void run_cmd(const char *what, const char *cmd);

/* the tests: each prints its facts */
void test_rflush(int use_srq);
void test_sflush(void);
void test_reuse(void);
void test_rqreset(void);
void test_readrnr(void);
void test_retry(void);
void test_devdel(void);
void test_sqd(void);

#endif /* R2CC_FENCE_PROBE_H */
