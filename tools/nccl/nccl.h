/* SPDX-License-Identifier: MIT */
/*
 * r2cc-nccl: the state its files share (nccl.c: verbs by dlvsym, setup,
 * the async thread; run.c: the requests and their checks; oob.c: the TCP
 * exchange with the peer).
 */
#ifndef R2CC_NCCL_H
#define R2CC_NCCL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#define NC_MAX_CONNS 4
#define NC_MAX_QPS 4
#define NC_MAX_REQS 8 /* requests in flight per comm (NCCL: 32) */
#define NC_SLOT (128 * 1024) /* bytes a request may carry */
#define NC_CHUNK_ALIGN 128 /* NCCL's IB_WRITE_CHUNK_ALIGNMENT */

/* libibverbs' functions, found by dlvsym (NCCL's ibvwrap) */
struct verbs {
	struct ibv_device **(*get_device_list)(int *n);
	void (*free_device_list)(struct ibv_device **l);
	const char *(*get_device_name)(struct ibv_device *d);
	struct ibv_context *(*open_device)(struct ibv_device *d);
	int (*get_async_event)(struct ibv_context *c,
			       struct ibv_async_event *ev);
	void (*ack_async_event)(struct ibv_async_event *ev);
	const char *(*event_type_str)(enum ibv_event_type t);
	const char *(*wc_status_str)(enum ibv_wc_status s);
	int (*query_port)(struct ibv_context *c, uint8_t port,
			  struct ibv_port_attr *a);
	int (*query_gid)(struct ibv_context *c, uint8_t port, int index,
			 union ibv_gid *gid);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *c);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len,
				 int access);
	struct ibv_cq *(*create_cq)(struct ibv_context *c, int cqe,
				    void *cq_ctx, struct ibv_comp_channel *ch,
				    int vec);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *a);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask);
};
extern struct verbs v;

/* A CTS entry: the receiver grants a buffer (NCCL's ncclIbSendFifo). */
struct nc_cts {
	uint64_t addr;
	uint64_t size;
	uint32_t rkey;
	uint32_t tag;
	uint64_t idx; /* request index + 1: 0 is an empty slot */
};

struct nc_qpinfo {
	uint32_t qpn, psn;
	uint8_t gid[16];
};

/* What the peers exchange at setup. */
struct nc_wire {
	struct nc_qpinfo send[NC_MAX_CONNS][NC_MAX_QPS];
	struct nc_qpinfo recv[NC_MAX_CONNS][NC_MAX_QPS];
	uint64_t fifo_addr[NC_MAX_CONNS];
	uint32_t fifo_rkey[NC_MAX_CONNS];
	double secs; /* the client's run time: the server adopts it */
};

/* One direction of a connection: a send comm or a receive comm. */
struct nc_comm {
	struct ibv_qp *qp[NC_MAX_QPS];
	struct ibv_mr *mr, *fifo_mr, *cts_mr;
	/* send: the FIFO the peer's receiver RDMA-writes its CTS into */
	volatile struct nc_cts fifo[NC_MAX_REQS];
	/* recv: the CTS entries written from, and the peer's FIFO */
	struct nc_cts cts[NC_MAX_REQS];
	uint64_t fifo_addr;
	uint32_t fifo_rkey;
	uint64_t next; /* send: next request to send; recv: to grant */
	uint64_t done; /* send: completed; recv: checked */
	uint64_t idx_of[NC_MAX_REQS]; /* the request a busy slot holds */
	uint32_t left[NC_MAX_REQS]; /* its QP completions still due */
	uint32_t size[NC_MAX_REQS];
	uint8_t busy[NC_MAX_REQS];
	uint64_t bytes_verified;
	uint8_t buf[NC_MAX_REQS][NC_SLOT] __attribute__((aligned(4096)));
};

struct nc {
	const char *dev, *peer_host;
	int gidx, tcp_port, conns, qps, flush, server, sock;
	int timeout; /* the QPs' ACK timeout (NCCL_IB_TIMEOUT) */
	double secs, stall, t0, last_progress;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_port_attr port;
	union ibv_gid gid;
	struct ibv_qp *flush_qp; /* connected to itself (NCCL's GDR flush) */
	struct ibv_mr *flush_mr;
	uint8_t flush_byte;
	struct nc_comm send[NC_MAX_CONNS], recv[NC_MAX_CONNS];
	_Atomic unsigned errors, fatal;
	int reported;
};

double nc_now(void);
void nc_fail(struct nc *n, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* run.c: requests both ways until the run's time, then drained */
void nc_run(struct nc *n);
/* oob.c: the TCP connection (server: listen, client: connect), and one
 * exchange of @len bytes each way (exits on failure) */
void nc_oob_open(struct nc *n);
void nc_oob_swap(struct nc *n, const void *mine, void *theirs, size_t len);
#endif /* R2CC_NCCL_H */
