/* SPDX-License-Identifier: MIT */
/*
 * verbs_loader: an RC ping test that reaches libibverbs the way NCCL's default
 * build does: dlopen() + dlvsym(..., "IBVERBS_1.1"), data path through
 * ctx->ops. It has no ibv_* import and no DT_NEEDED on libibverbs.
 */
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define DATA_SZ 4096 /* written by the client's RDMA WRITE each round */
#define MSG_SZ 256 /* SEND payload: struct msg_hdr, then a pattern */
#define MSG_MAGIC 0x72326363U /* "r2cc" */
#define IB_PORT 1

/*
 * Everything this program calls in libibverbs, resolved at IBVERBS_1.1 as
 * NCCL's ibvwrap does. __typeof__ of the prototype never emits a reference.
 */
#define VL_SYMS(X)          \
	X(get_device_list)  \
	X(free_device_list) \
	X(get_device_name)  \
	X(open_device)      \
	X(close_device)     \
	X(query_port)       \
	X(query_gid)        \
	X(alloc_pd)         \
	X(dealloc_pd)       \
	X(reg_mr)           \
	X(dereg_mr)         \
	X(create_cq)        \
	X(destroy_cq)       \
	X(create_qp)        \
	X(modify_qp)        \
	X(destroy_qp)       \
	X(wc_status_str)

static struct {
#define X(n) __typeof__(ibv_##n) *n;
	VL_SYMS(X)
#undef X
	/* IBVERBS_1.8, optional (NCCL uses it when present) */
	__typeof__(ibv_reg_mr_iova2) *reg_mr_iova2;
	void *handle; /* owned */
} vb;

enum { WR_WRITE, WR_SEND, WR_RECV, WR_KINDS };

struct msg_hdr {
	uint32_t magic;
	uint32_t iter;
	uint32_t bad; /* reply: bytes the server found wrong */
	uint32_t len;
};

/* What each side tells the other over TCP, big-endian. */
struct wire {
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint32_t lid;
	uint64_t addr;
	uint8_t gid[16];
};

struct opts {
	const char *dev;
	const char *server; /* NULL: we are the server */
	int gidx;
	int port;
	long iters;
	int timeout; /* seconds, for every single wait */
};

struct stats {
	long posted_send;
	long posted_write;
	long posted_recv;
	long polled;
	long bytes; /* payload bytes of the WRs this side posted */
	long errors;
};

struct conn {
	struct ibv_context *ctx; /* owned */
	struct ibv_pd *pd; /* owned */
	struct ibv_cq *cq; /* owned */
	struct ibv_qp *qp; /* owned */
	struct ibv_mr *data_mr; /* owned */
	struct ibv_mr *msg_mr; /* owned */
	uint8_t *data; /* owned: DATA_SZ */
	uint8_t *msg; /* owned: send slot, then recv slot, MSG_SZ each */
	struct ibv_port_attr port;
	union ibv_gid gid;
	struct wire peer; /* host byte order */
	struct ibv_wc last_recv;
	long pend[WR_KINDS];
	int fd; /* TCP to the peer */
	int timeout;
	struct stats st;
};

static void usage(void)
{
	fprintf(stderr,
		"usage: verbs_loader -d DEV [-g GIDX] [-p PORT] [-n ITERS] [-t SECS] [SERVER]\n");
	exit(2);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int load_verbs(void)
{
	vb.handle = dlopen("libibverbs.so.1", RTLD_NOW);
	if (!vb.handle) {
		fprintf(stderr, "verbs_loader: dlopen: %s\n", dlerror());
		return -1;
	}
#define X(n)                                                                  \
	vb.n = dlvsym(vb.handle, "ibv_" #n, "IBVERBS_1.1");                   \
	if (!vb.n) {                                                          \
		fprintf(stderr, "verbs_loader: no ibv_%s@IBVERBS_1.1\n", #n); \
		return -1;                                                    \
	}
	VL_SYMS(X)
#undef X
	vb.reg_mr_iova2 = dlvsym(vb.handle, "ibv_reg_mr_iova2", "IBVERBS_1.8");
	return 0;
}

/* ---- out-of-band TCP exchange, every call bounded ---------------------- */

static int tcp_timeouts(int fd, int secs)
{
	struct timeval tv = { .tv_sec = secs };

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		return -1;
	return fd;
}

static int tcp_accept(int port, int secs)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	struct pollfd pfd = { .events = POLLIN };
	int one = 1, fd, lfd;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		return -1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1)) {
		close(lfd);
		return -1;
	}
	pfd.fd = lfd;
	fd = -1;
	if (poll(&pfd, 1, secs * 1000) == 1)
		fd = accept(lfd, NULL, NULL);
	else
		errno = ETIMEDOUT;
	close(lfd);
	if (fd >= 0 && tcp_timeouts(fd, secs) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int tcp_connect(const char *host, int port, int secs)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai;
	double deadline = now_s() + secs;
	char svc[16];
	int fd = -1;

	snprintf(svc, sizeof(svc), "%d", port);
	if (getaddrinfo(host, svc, &hints, &ai)) {
		errno = EHOSTUNREACH;
		return -1;
	}
	/*
	 * The server may not listen yet: retry until the deadline. On Linux
	 * SO_SNDTIMEO also bounds connect() itself (a peer that never answers).
	 */
	while (now_s() < deadline) {
		fd = socket(ai->ai_family, ai->ai_socktype, 0);
		if (fd < 0)
			break;
		if (tcp_timeouts(fd, secs) >= 0 &&
		    !connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		close(fd);
		fd = -1;
		usleep(100000);
	}
	freeaddrinfo(ai);
	if (fd < 0)
		errno = ETIMEDOUT;
	return fd;
}

/* Send then receive len bytes; SO_RCVTIMEO/SO_SNDTIMEO bound each call. */
static int tcp_swap(int fd, const void *out, void *in, size_t len)
{
	size_t done;
	ssize_t k;

	for (done = 0; done < len; done += k) {
		k = send(fd, (const char *)out + done, len - done,
			 MSG_NOSIGNAL);
		if (k <= 0)
			return -1;
	}
	for (done = 0; done < len; done += k) {
		k = recv(fd, (char *)in + done, len - done, 0);
		if (k <= 0)
			return -1;
	}
	return 0;
}

static int tcp_sync(struct conn *c, char tag)
{
	char got = 0;

	if (tcp_swap(c->fd, &tag, &got, 1) || got != tag) {
		fprintf(stderr,
			"verbs_loader: sync '%c' with the peer failed\n", tag);
		return -1;
	}
	return 0;
}

static int exchange(struct conn *c)
{
	struct wire me = { 0 }, you;

	me.qpn = htobe32(c->qp->qp_num);
	me.psn = htobe32(c->qp->qp_num & 0xffffff);
	me.rkey = htobe32(c->data_mr->rkey);
	me.lid = htobe32(c->port.lid);
	me.addr = htobe64((uintptr_t)c->data);
	memcpy(me.gid, c->gid.raw, sizeof(me.gid));
	if (tcp_swap(c->fd, &me, &you, sizeof(me))) {
		perror("verbs_loader: exchange");
		return -1;
	}
	c->peer.qpn = be32toh(you.qpn);
	c->peer.psn = be32toh(you.psn);
	c->peer.rkey = be32toh(you.rkey);
	c->peer.lid = be32toh(you.lid);
	c->peer.addr = be64toh(you.addr);
	memcpy(c->peer.gid, you.gid, sizeof(you.gid));
	return 0;
}

/* ---- resources ---------------------------------------------------------- */

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_context *ctx = NULL;
	struct ibv_device **list;
	int i, n;

	list = vb.get_device_list(&n);
	if (!list) {
		perror("verbs_loader: ibv_get_device_list");
		return NULL;
	}
	for (i = 0; i < n; i++)
		if (!strcmp(vb.get_device_name(list[i]), name))
			break;
	if (i < n)
		ctx = vb.open_device(list[i]);
	else
		fprintf(stderr, "verbs_loader: no device %s\n", name);
	vb.free_device_list(list);
	return ctx;
}

static struct ibv_mr *reg_data(struct conn *c)
{
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	if (vb.reg_mr_iova2)
		return vb.reg_mr_iova2(c->pd, c->data, DATA_SZ,
				       (uintptr_t)c->data, acc);
	return vb.reg_mr(c->pd, c->data, DATA_SZ, acc);
}

static int create_qp(struct conn *c)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8,
			 .max_recv_wr = 4,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	c->cq = vb.create_cq(c->ctx, 16, NULL, NULL, 0);
	if (!c->cq)
		return -1;
	ia.send_cq = c->cq;
	ia.recv_cq = c->cq;
	c->qp = vb.create_qp(c->pd, &ia);
	return c->qp ? 0 : -1;
}

static int setup(struct conn *c, const struct opts *o)
{
	c->ctx = open_dev(o->dev);
	if (!c->ctx)
		return -1;
	if (vb.query_port(c->ctx, IB_PORT, (void *)&c->port) ||
	    vb.query_gid(c->ctx, IB_PORT, o->gidx, &c->gid)) {
		perror("verbs_loader: query port/gid");
		return -1;
	}
	c->data = aligned_alloc(4096, DATA_SZ);
	c->msg = aligned_alloc(4096, 2 * MSG_SZ);
	if (!c->data || !c->msg)
		return -1;
	memset(c->data, 0, DATA_SZ);
	memset(c->msg, 0, 2 * MSG_SZ);
	c->pd = vb.alloc_pd(c->ctx);
	if (!c->pd)
		return -1;
	c->data_mr = reg_data(c);
	c->msg_mr =
		vb.reg_mr(c->pd, c->msg, 2 * MSG_SZ, IBV_ACCESS_LOCAL_WRITE);
	if (!c->data_mr || !c->msg_mr)
		return -1;
	return create_qp(c);
}

static void teardown(struct conn *c)
{
	if (c->qp)
		vb.destroy_qp(c->qp);
	if (c->cq)
		vb.destroy_cq(c->cq);
	if (c->msg_mr)
		vb.dereg_mr(c->msg_mr);
	if (c->data_mr)
		vb.dereg_mr(c->data_mr);
	if (c->pd)
		vb.dealloc_pd(c->pd);
	if (c->ctx)
		vb.close_device(c->ctx);
	free(c->msg);
	free(c->data);
	if (c->fd >= 0)
		close(c->fd);
}

/* RESET -> INIT -> RTR -> RTS, RoCE addressing through the GRH. */
static int connect_qp(struct conn *c, int gidx)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = IB_PORT,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};

	if (vb.modify_qp(c->qp, &a,
			 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				 IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = c->port.active_mtu;
	a.dest_qp_num = c->peer.qpn;
	a.rq_psn = c->peer.psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = c->peer.lid;
	a.ah_attr.port_num = IB_PORT;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.grh.sgid_index = gidx;
	memcpy(a.ah_attr.grh.dgid.raw, c->peer.gid, 16);
	if (vb.modify_qp(c->qp, &a,
			 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				 IBV_QP_MAX_DEST_RD_ATOMIC |
				 IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = c->qp->qp_num & 0xffffff;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return vb.modify_qp(c->qp, &a,
			    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				    IBV_QP_MAX_QP_RD_ATOMIC);
}

/* ---- data path: straight through ctx->ops, as the inline verbs do ------- */

static uint8_t pattern(uint32_t seed, size_t j)
{
	return (uint8_t)((seed * 0x9e3779b1U >> 24) + j * 7 + (j >> 8));
}

static int post_send(struct conn *c, struct ibv_send_wr *wr, int kind)
{
	struct ibv_send_wr *bad;
	int ret;

	wr->wr_id = kind;
	wr->send_flags = IBV_SEND_SIGNALED;
	ret = c->qp->context->ops.post_send(c->qp, wr, &bad);
	if (ret) {
		fprintf(stderr, "verbs_loader: post_send: %s\n", strerror(ret));
		return -1;
	}
	c->pend[kind]++;
	c->st.bytes += wr->sg_list->length;
	if (kind == WR_WRITE)
		c->st.posted_write++;
	else
		c->st.posted_send++;
	return 0;
}

static int post_write(struct conn *c)
{
	struct ibv_sge sge = { .addr = (uintptr_t)c->data,
			       .length = DATA_SZ,
			       .lkey = c->data_mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };

	wr.wr.rdma.remote_addr = c->peer.addr;
	wr.wr.rdma.rkey = c->peer.rkey;
	return post_send(c, &wr, WR_WRITE);
}

/* A message from the send slot; with_imm carries the round number. */
static int post_msg(struct conn *c, uint32_t iter, uint32_t bad, int with_imm)
{
	struct msg_hdr h = { MSG_MAGIC, iter, bad, MSG_SZ };
	struct ibv_sge sge = { .addr = (uintptr_t)c->msg,
			       .length = MSG_SZ,
			       .lkey = c->msg_mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1 };
	size_t j;

	memcpy(c->msg, &h, sizeof(h));
	for (j = sizeof(h); j < MSG_SZ; j++)
		c->msg[j] = pattern(iter ^ 0x5a5a, j);
	wr.opcode = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	wr.imm_data = htobe32(iter);
	return post_send(c, &wr, WR_SEND);
}

static int post_recv(struct conn *c)
{
	struct ibv_sge sge = { .addr = (uintptr_t)c->msg + MSG_SZ,
			       .length = MSG_SZ,
			       .lkey = c->msg_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = WR_RECV,
				  .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;
	int ret;

	ret = c->qp->context->ops.post_recv(c->qp, &wr, &bad);
	if (ret) {
		fprintf(stderr, "verbs_loader: post_recv: %s\n", strerror(ret));
		return -1;
	}
	c->pend[WR_RECV]++;
	c->st.posted_recv++;
	return 0;
}

/* Poll until no completion of this kind is pending, within c->timeout. */
static int wait_kind(struct conn *c, int kind)
{
	double deadline = now_s() + c->timeout;
	struct ibv_wc wc;
	int k;

	while (c->pend[kind] > 0) {
		k = c->cq->context->ops.poll_cq(c->cq, 1, &wc);
		if (k < 0) {
			fprintf(stderr, "verbs_loader: poll_cq: %d\n", k);
			return -1;
		}
		if (k == 0) {
			if (now_s() > deadline) {
				fprintf(stderr,
					"verbs_loader: no completion in %ds\n",
					c->timeout);
				return -1;
			}
			continue;
		}
		c->st.polled++;
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id >= WR_KINDS) {
			fprintf(stderr, "verbs_loader: wr %lu: %s\n",
				(unsigned long)wc.wr_id,
				vb.wc_status_str(wc.status));
			return -1;
		}
		c->pend[wc.wr_id]--;
		if (wc.wr_id == WR_RECV)
			c->last_recv = wc;
	}
	return 0;
}

/* Count the wrong bytes of the message in the recv slot. */
static long check_msg(struct conn *c, uint32_t iter, int want_imm)
{
	const struct ibv_wc *wc = &c->last_recv;
	const uint8_t *m = c->msg + MSG_SZ;
	struct msg_hdr h;
	long bad = 0;
	size_t j;

	if (wc->opcode != IBV_WC_RECV || wc->byte_len != MSG_SZ ||
	    !!(wc->wc_flags & IBV_WC_WITH_IMM) != want_imm ||
	    (want_imm && be32toh(wc->imm_data) != iter)) {
		fprintf(stderr, "verbs_loader: round %u: unexpected recv\n",
			iter);
		return MSG_SZ;
	}
	memcpy(&h, m, sizeof(h));
	if (h.magic != MSG_MAGIC || h.iter != iter || h.len != MSG_SZ)
		bad += sizeof(h);
	for (j = sizeof(h); j < MSG_SZ; j++)
		bad += m[j] != pattern(iter ^ 0x5a5a, j);
	return bad;
}

/* ---- the two roles ------------------------------------------------------ */

/* Client round: WRITE the pattern, SEND+IMM "verify", await the verdict. */
static int client_round(struct conn *c, uint32_t i)
{
	struct msg_hdr h;
	size_t j;

	for (j = 0; j < DATA_SZ; j++)
		c->data[j] = pattern(i, j);
	if (post_recv(c) || post_write(c) || post_msg(c, i, 0, 1))
		return -1;
	if (wait_kind(c, WR_RECV) || wait_kind(c, WR_WRITE) ||
	    wait_kind(c, WR_SEND))
		return -1;
	c->st.errors += check_msg(c, i, 0);
	memcpy(&h, c->msg + MSG_SZ, sizeof(h));
	if (h.bad)
		fprintf(stderr,
			"verbs_loader: round %u: server saw %u bad bytes\n", i,
			h.bad);
	c->st.errors += h.bad;
	return 0;
}

/* Server round: await SEND+IMM, check every byte written, reply. */
static int server_round(struct conn *c, uint32_t i, int last)
{
	long bad;
	size_t j;

	if (wait_kind(c, WR_RECV))
		return -1;
	bad = check_msg(c, i, 1);
	for (j = 0; j < DATA_SZ; j++)
		bad += c->data[j] != pattern(i, j);
	c->st.errors += bad;
	memset(c->data, 0, DATA_SZ);
	if (!last && post_recv(c))
		return -1;
	if (post_msg(c, i, bad, 0) || wait_kind(c, WR_SEND))
		return -1;
	return 0;
}

static int run(struct conn *c, const struct opts *o)
{
	int server = !o->server;
	long i;

	c->fd = server ? tcp_accept(o->port, o->timeout) :
			 tcp_connect(o->server, o->port, o->timeout);
	if (c->fd < 0) {
		perror("verbs_loader: tcp");
		return -1;
	}
	if (exchange(c) || connect_qp(c, o->gidx)) {
		perror("verbs_loader: connect");
		return -1;
	}
	if (server && post_recv(c))
		return -1;
	if (tcp_sync(c, 'R'))
		return -1;
	for (i = 0; i < o->iters; i++) {
		if (server ? server_round(c, i, i + 1 == o->iters) :
			     client_round(c, i))
			return -1;
	}
	return tcp_sync(c, 'D');
}

static void parse(int argc, char **argv, struct opts *o)
{
	int ch;

	while ((ch = getopt(argc, argv, "d:g:p:n:t:h")) != -1) {
		switch (ch) {
		case 'd':
			o->dev = optarg;
			break;
		case 'g':
			o->gidx = atoi(optarg);
			break;
		case 'p':
			o->port = atoi(optarg);
			break;
		case 'n':
			o->iters = atol(optarg);
			break;
		case 't':
			o->timeout = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind < argc)
		o->server = argv[optind++];
	if (!o->dev || optind != argc || o->iters <= 0 || o->timeout <= 0 ||
	    o->port <= 0 || o->port > 65535 || o->gidx < 0)
		usage();
}

int main(int argc, char **argv)
{
	struct opts o = {
		.gidx = 1, .port = 18520, .iters = 100, .timeout = 30
	};
	struct conn c = { .fd = -1 };
	int rc;

	parse(argc, argv, &o);
	c.timeout = o.timeout;
	rc = load_verbs();
	if (!rc) {
		fprintf(stderr, "verbs_loader: data MR through %s\n",
			vb.reg_mr_iova2 ? "ibv_reg_mr_iova2@IBVERBS_1.8" :
					  "ibv_reg_mr@IBVERBS_1.1");
		rc = setup(&c, &o);
		if (rc)
			perror("verbs_loader: setup");
		else
			rc = run(&c, &o);
	}
	if (rc)
		c.st.errors++;
	printf("verbs_loader: role=%s posted_send=%ld posted_write=%ld posted_recv=%ld polled=%ld bytes=%ld errors=%ld\n",
	       o.server ? "client" : "server", c.st.posted_send,
	       c.st.posted_write, c.st.posted_recv, c.st.polled, c.st.bytes,
	       c.st.errors);
	teardown(&c);
	if (vb.handle)
		dlclose(vb.handle);
	return c.st.errors ? 1 : 0;
}
