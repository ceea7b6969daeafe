/* SPDX-License-Identifier: MIT */
/*
 * fo_fixture.c - the scripted verbs table and the protected QP the tests
 * of the move drive (fo_fixture.h).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fo_fixture.h"
#include "tick.h"
struct ibv_context ctx;
struct fake_qp prim, back;
uint32_t fence_rq_psn = 0x900;

int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		struct ibv_send_wr **bad)
{
	struct fake_qp *f = (struct fake_qp *)qp;

	(void)bad;
	for (; wr; wr = wr->next) {
		const struct ibv_sge *sg = wr->sg_list;

		if (f->nsent < MAXW) {
			if ((wr->send_flags & IBV_SEND_INLINE) && wr->num_sge)
				f->inl[f->nsent] =
					*(const uint8_t *)(uintptr_t)sg->addr;
			f->flags[f->nsent] = wr->send_flags;
			f->sent[f->nsent++] = wr->wr_id;
		}
		f->last_rkey = wr->wr.rdma.rkey;
	}
	return 0;
}

int f_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		struct ibv_recv_wr **bad)
{
	struct fake_qp *f = (struct fake_qp *)qp;

	(void)bad;
	for (; wr; wr = wr->next)
		if (f->nrecv < MAXW)
			f->recvd[f->nrecv++] = wr->wr_id;
	return 0;
}

int f_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct fake_cq *f = (struct fake_cq *)cq;
	int got = 0;

	while (got < n && f->head < f->n)
		wc[got++] = f->wc[f->head++];
	return got;
}

int f_req_notify(struct ibv_cq *cq, int solicited)
{
	(void)cq;
	(void)solicited;
	return 0;
}

/* As rxe: SQD -> RTS only once the send queue drained */
int f_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct fake_qp *f = (struct fake_qp *)qp;

	if ((mask & IBV_QP_STATE) &&
	    ((a->qp_state == IBV_QPS_SQD && f->no_sqd) ||
	     (a->qp_state == IBV_QPS_RTS && f->state == IBV_QPS_SQD &&
	      f->draining)))
		return EINVAL;
	if (mask & IBV_QP_STATE)
		f->state = a->qp_state;
	if (mask & IBV_QP_SQ_PSN)
		f->sq_psn = a->sq_psn;
	if (mask & IBV_QP_RQ_PSN)
		f->rq_psn = a->rq_psn;
	if (mask & IBV_QP_TIMEOUT)
		f->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		f->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		f->rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		f->min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_AV)
		f->ah = a->ah_attr;
	if (mask & IBV_QP_DEST_QPN)
		f->dest_qpn = a->dest_qp_num;
	f->nmodify++;
	return 0;
}

int f_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
	       struct ibv_qp_init_attr *init)
{
	struct fake_qp *f = (struct fake_qp *)qp;

	(void)mask;
	(void)init;
	a->qp_state = f->state;
	a->sq_draining = f->state == IBV_QPS_SQD && f->draining;
	a->rq_psn = fence_rq_psn;
	return 0;
}

int f_destroy(void *obj)
{
	(void)obj;
	return 0;
}

struct fake_cq bcq;
int nmade; /* backup QPs made (a lazy QP's, at its failover) */

struct ibv_cq *f_create_cq(struct ibv_context *c, int cqe, void *cqc,
			   struct ibv_comp_channel *ch, int vec)
{
	(void)c;
	(void)cqe;
	(void)ch;
	(void)vec;
	bcq.cq.cq_context = cqc; /* as ibv_create_cq() */
	return &bcq.cq;
}

struct ibv_qp_cap made_cap;

struct ibv_qp *f_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	(void)pd;
	made_cap = ia->cap;
	nmade++;
	return &back.qp;
}

int f_lkey_xlate(const void *pd, int rail, uint32_t lkey, uint32_t *out)
{
	(void)pd;
	(void)rail;
	*out = lkey | 0x10000;
	return 0;
}

void add_wc(struct fake_cq *f, uint64_t wr_id, enum ibv_wc_status st,
	    enum ibv_wc_opcode op, uint32_t qpn)
{
	struct ibv_wc *w = &f->wc[f->n++];

	memset(w, 0, sizeof(*w));
	w->wr_id = wr_id;
	w->status = st;
	w->opcode = op;
	w->qp_num = qpn;
}

struct fake_srq psrq, bsrq;

int f_post_srq(struct ibv_srq *srq, struct ibv_recv_wr *wr,
	       struct ibv_recv_wr **bad)
{
	struct fake_srq *f = (struct fake_srq *)srq;

	(void)bad;
	for (; wr; wr = wr->next)
		if (f->n < MAXW)
			f->ids[f->n++] = wr->wr_id;
	return 0;
}

struct ibv_srq *f_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	(void)pd;
	(void)a;
	return NULL;
}

struct r2cc_mig_cq *mc;
struct r2cc_mig_qp *mq;

struct fo_port fo_ports[FO_PORTS];

static struct fo_port *port_of(struct ibv_context *c, uint8_t port)
{
	int i;

	for (i = 0; i < FO_PORTS; i++)
		if (fo_ports[i].ctx == c && port == 1)
			return &fo_ports[i];
	return NULL;
}

/* A context of fo_ports: its GID 0 as recorded; any other: index i's
 * GID is ::i */
static int f_query_gid(struct ibv_context *c, uint8_t port, int index,
		       union ibv_gid *gid)
{
	const struct fo_port *p = port_of(c, port);

	memset(gid, 0, sizeof(*gid));
	if (p && !index)
		memcpy(gid->raw, p->gid0, 16);
	else
		gid->raw[15] = (uint8_t)index;
	return 0;
}

/* A context of fo_ports: as recorded; any other: no answer */
static int f_query_port(struct ibv_context *c, uint8_t port,
			struct ibv_port_attr *attr)
{
	const struct fo_port *p = port_of(c, port);

	if (!p)
		return ENODEV;
	*attr = p->attr;
	return 0;
}

int fo_standby = 2;
void (*fo_standby_hook)(struct ibv_qp *qp);
static struct ibv_pd spd;

static int f_standby_rail(struct ibv_qp *qp, struct r2cc_mig_desc *d)
{
	if (fo_standby_hook)
		fo_standby_hook(qp);
	if (fo_standby < 0)
		return -ENODEV;
	d->backup_rail = fo_standby;
	d->backup_ctx = &ctx;
	d->backup_pd = &spd;
	return 0;
}

static int f_rail_res(const void *pd, int rail, struct ibv_context **c,
		      struct ibv_pd **shadow)
{
	(void)pd;
	(void)rail;
	*c = &ctx;
	*shadow = &spd;
	return 0;
}

int fo_nmrs;

/* No GID is one of ours: a lookup this process serves finds nothing */
static int f_dev_of_gid(const uint8_t gid[16], char *dev, size_t len)
{
	(void)gid;
	(void)dev;
	(void)len;
	return -ENODEV;
}

static int f_mr_keys(const void *pd, int rail, struct r2cc_ctrl_mr **out)
{
	int i;

	(void)pd;
	*out = NULL;
	if (!fo_nmrs)
		return 0;
	*out = calloc((size_t)fo_nmrs, sizeof(**out));
	cr_assert(*out);
	for (i = 0; i < fo_nmrs; i++) {
		(*out)[i].rkey = FO_RKEY(i);
		(*out)[i].backup_rkey = FO_BACKUP_RKEY(rail, i);
	}
	return fo_nmrs;
}

/* @mr (an int: its index among fo_nmrs) on @rail */
static int f_mr_key(const void *mr, int rail, struct r2cc_ctrl_mr *out)
{
	int i = *(const int *)mr;

	out->rkey = FO_RKEY(i);
	out->backup_rkey = FO_BACKUP_RKEY(rail, i);
	return 0;
}

bool fo_capture;
struct r2cc_ctrl_msg fo_sent[FO_SENT];
_Atomic int fo_nsent;
/* fo_sent's writers: the test and the inbox thread's ticks */
static pthread_mutex_t fo_sent_lock = PTHREAD_MUTEX_INITIALIZER;

int __real_r2cc_chan_send(uint64_t peer, const struct r2cc_ctrl_msg *m);
int __wrap_r2cc_chan_send(uint64_t peer, const struct r2cc_ctrl_msg *m);

/* Linked with --wrap=r2cc_chan_send: with fo_capture, what migrate/ sends
 * is kept (the last FO_SENT) and said sent. */
int __wrap_r2cc_chan_send(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	if (!fo_capture)
		return __real_r2cc_chan_send(peer, m);
	cr_expect_eq(peer, PEER);
	pthread_mutex_lock(&fo_sent_lock);
	fo_sent[fo_nsent % FO_SENT] = *m;
	fo_nsent++;
	pthread_mutex_unlock(&fo_sent_lock);
	return 0;
}

_Atomic uint64_t fo_heard_ns;
uint64_t __real_r2cc_chan_heard_ns(uint64_t peer);
uint64_t __wrap_r2cc_chan_heard_ns(uint64_t peer);

/* Linked with --wrap=r2cc_chan_heard_ns */
uint64_t __wrap_r2cc_chan_heard_ns(uint64_t peer)
{
	return fo_heard_ns ? fo_heard_ns : __real_r2cc_chan_heard_ns(peer);
}

_Atomic uint64_t fo_answered_ns;
uint64_t __wrap_r2cc_chan_answered_ns(uint64_t peer);

/* Linked with --wrap=r2cc_chan_answered_ns: the peer's last answer to a
 * move of ours, as the test says */
uint64_t __wrap_r2cc_chan_answered_ns(uint64_t peer)
{
	(void)peer;
	return fo_answered_ns;
}

/* The module on (a loopback control channel nobody else talks to). */
struct ibv_qp_cap fo_cap;

void start(void)
{
	static const struct r2cc_mig_verbs v = {
		.modify_qp = f_modify_qp,
		.query_qp = f_query_qp,
		.destroy_qp = (int (*)(struct ibv_qp *))f_destroy,
		.destroy_cq = (int (*)(struct ibv_cq *))f_destroy,
		.create_cq = f_create_cq,
		.create_qp = f_create_qp,
		.create_srq = f_create_srq,
		.destroy_srq = (int (*)(struct ibv_srq *))f_destroy,
		.query_gid = f_query_gid,
		.query_port = f_query_port,
	};
	static const struct r2cc_mig_env env = { .dev_of_gid = f_dev_of_gid,
						 .lkey_xlate = f_lkey_xlate,
						 .standby_rail = f_standby_rail,
						 .rail_res = f_rail_res,
						 .mr_keys = f_mr_keys,
						 .mr_key = f_mr_key };
	char secret[64], port[32], *envp[4];
	struct r2cc_config cfg;
	FILE *f;

	fo_standby_hook = NULL;
	memset(fo_ports, 0, sizeof(fo_ports));
	fo_cap = (struct ibv_qp_cap){ .max_send_wr = 8,
				      .max_recv_wr = 8,
				      .max_send_sge = 1,
				      .max_recv_sge = 1,
				      .max_inline_data = 64 };
	snprintf(secret, sizeof(secret), "/tmp/r2cc-test-fo.%d", getpid());
	f = fopen(secret, "w");
	cr_assert(f);
	fprintf(f, "%064d", 7);
	fclose(f);
	cr_assert_eq(chmod(secret, 0600), 0);
	/* below the ephemeral ports (32768 on), apart from test_chan's */
	snprintf(port, sizeof(port), "R2CC_CTRL_PORT=%d",
		 10000 + getpid() % 10000);
	envp[0] = port;
	envp[1] = malloc(sizeof(secret) + 32);
	sprintf(envp[1], "R2CC_SECRET_FILE=%s", secret);
	envp[2] = "R2CC_LOG=err";
	envp[3] = NULL;
	cr_assert_eq(r2cc_config_load(&cfg, envp), 0);
	free(envp[1]);
	cr_assert_eq(r2cc_mig_start(&cfg, &v, &env, NULL, 0), 0);
	unlink(secret);
}

/* Fresh fakes and one protected QP on them (on @srq's, if not NULL),
 * bound to backup @bqp (NULL: lazy, none yet); at RTS with its send log
 * at PSN 0x500. */
void qp_on(struct r2cc_mig_srq *srq, struct ibv_qp *bqp)
{
	static struct ibv_pd bpd;
	struct ibv_qp_attr a;

	ctx.ops.post_send = f_post_send;
	ctx.ops.post_recv = f_post_recv;
	ctx.ops.poll_cq = f_poll_cq;
	ctx.ops.req_notify_cq = f_req_notify;
	memset(&prim, 0, sizeof(prim));
	memset(&back, 0, sizeof(back));
	memset(&bcq, 0, sizeof(bcq));
	prim.qp.context = back.qp.context = bcq.cq.context = &ctx;
	prim.qp.qp_num = 0x11;
	back.qp.qp_num = 0x51;
	nmade = 0;
	mc = r2cc_mig_cq_new(NULL, 16);
	cr_assert(mc);
	mq = r2cc_mig_qp_new(&prim.qp, &fo_cap, false, mc, mc, srq, NULL);
	cr_assert(mq);
	/* What bind.c's bind would have left. */
	r2cc_mig_test_bound(mq, bqp, bqp ? &bcq.cq : NULL, PEER, PEER_QPN,
			    0x100);
	if (!bqp)
		r2cc_mig_test_lazy(mq, &ctx, &bpd);
	memset(&a, 0, sizeof(a));
	a.path_mtu = IBV_MTU_1024;
	a.sq_psn = 0x500;
	a.timeout = FO_TIMEOUT;
	a.retry_cnt = a.rnr_retry = 7;
	a.ah_attr.is_global = 1; /* RoCE's: a GRH (test_lid.c: none) */
	cr_assert_eq(r2cc_mig_rts(mq, &a), 0);
}

/* The module on, and one protected QP, READY, at RTS (on @srq's, if not
 * NULL). */
void setup_on(struct r2cc_mig_srq *srq)
{
	qp_on(srq, &back.qp);
	cr_assert_eq(back.state, IBV_QPS_RTS, "the backup follows to RTS");
}

void setup(void)
{
	start();
	setup_on(NULL);
}

void teardown(void)
{
	cr_expect_eq(r2cc_mig_test_refused(), 0,
		     "no life event illegal in its QP's state");
	r2cc_mig_release(mq);
	r2cc_mig_test_free(mq);
	r2cc_mig_cq_free(mc);
	r2cc_mig_stop();
	r2cc_mig_test_quiet(false);
}

/* A signaled WR of @op, 100 bytes (one packet). */
void post_op(uint64_t wr_id, enum ibv_wr_opcode op)
{
	post_flags(wr_id, op, IBV_SEND_SIGNALED);
}

void post_flags(uint64_t wr_id, enum ibv_wr_opcode op, unsigned int flags)
{
	post_sized(wr_id, op, 100, flags);
}

void post_sized(uint64_t wr_id, enum ibv_wr_opcode op, uint32_t len,
		unsigned int flags)
{
	struct ibv_sge sge = { .addr = 0x1000, .length = len, .lkey = 7 };
	struct ibv_send_wr wr = { .wr_id = wr_id,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = op,
				  .send_flags = flags },
			   *bad;

	wr.wr.rdma.remote_addr = 0x2000;
	wr.wr.rdma.rkey = 9;
	cr_assert_eq(r2cc_mig_post_send(mq, &wr, &bad, f_post_send, NULL), 0);
}

void post(uint64_t wr_id)
{
	post_op(wr_id, IBV_WR_SEND);
}

/* The peer's FAILOVER or FAILOVER_ACK, for a move of reason @why. */
void peer_says_why(uint8_t type, uint8_t why, bool valid, uint32_t rq_psn,
		   uint64_t recvs)
{
	struct r2cc_ctrl_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = type;
	m.failover.qpn = PEER_QPN;
	m.failover.reason = why;
	m.failover.flags = valid ? R2CC_CTRL_FO_PSN_VALID : 0;
	m.failover.rq_psn = rq_psn;
	m.failover.recvs = recvs;
	r2cc_mig_test_peer_says(PEER, &m);
}

void peer_says(uint8_t type, bool valid, uint32_t rq_psn, uint64_t recvs)
{
	peer_says_why(type, R2CC_CTRL_WHY_PEER, valid, rq_psn, recvs);
}

/* A send completion of @op on the primary; @behind as the poll says. */
int primary_wc_of(uint64_t wr_id, enum ibv_wc_status st, enum ibv_wc_opcode op,
		  bool behind)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = wr_id;
	wc.status = st;
	wc.opcode = op;
	wc.qp_num = prim.qp.qp_num;
	return r2cc_mig_wc(mq, mc, &wc, behind);
}

int primary_wc(uint64_t wr_id, enum ibv_wc_status st)
{
	return primary_wc_of(wr_id, st, IBV_WC_SEND, false);
}

void peer_moves(uint32_t qpn, uint32_t psn, uint64_t recvs, bool taken)
{
	struct r2cc_ctrl_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_FAILOVER;
	m.failover.qpn = qpn;
	m.failover.reason = R2CC_CTRL_WHY_PEER;
	m.failover.flags = R2CC_CTRL_FO_PSN_VALID;
	m.failover.rq_psn = psn;
	r2cc_mig_test_peer_says(PEER, &m);
	m.hdr.type = R2CC_CTRL_FAILOVER_ACK;
	m.failover.recvs = recvs;
	if (taken)
		m.failover.flags |= R2CC_CTRL_FO_RECV_TAKEN;
	r2cc_mig_test_peer_says(PEER, &m);
}

void fo_rails(void)
{
	cr_assert_eq(r2cc_health_add_rail(1, "rxe1", "r2cc-none1"), 0);
	cr_assert_eq(r2cc_health_add_rail(2, "rxe2", "r2cc-none2"), 0);
	cr_assert_eq(r2cc_health_add_rail(3, "rxe3", "r2cc-none3"), 0);
	for (int r = 1; r <= 3; r++)
		r2cc_health_report(r, R2CC_RAIL_UP, R2CC_CAUSE_CARRIER);
	fo_capture = true;
}

const struct r2cc_ctrl_msg *fo_last(uint8_t type)
{
	/* a copy (the inbox thread's ticks may send meanwhile), a few
	 * kept so that a test may hold more than one */
	static struct r2cc_ctrl_msg copy[4];
	static unsigned int next;
	struct r2cc_ctrl_msg *m = NULL;
	int i, n;

	pthread_mutex_lock(&fo_sent_lock);
	n = fo_nsent;
	for (i = n - 1; i >= 0 && i >= n - FO_SENT; i--) {
		if (fo_sent[i % FO_SENT].hdr.type != type)
			continue;
		m = &copy[next++ % 4];
		*m = fo_sent[i % FO_SENT];
		break;
	}
	pthread_mutex_unlock(&fo_sent_lock);
	return m;
}

void fo_peer_fb(uint8_t phase, uint8_t flags, uint32_t psn)
{
	struct r2cc_ctrl_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_FAILBACK;
	m.failback.qpn = PEER_QPN;
	m.failback.phase = phase;
	m.failback.flags = flags;
	m.failback.psn = psn;
	r2cc_mig_test_peer_says(PEER, &m);
}

void fo_on_the_standby(void)
{
	fo_to_the_standby();
	r2cc_health_report(0, R2CC_RAIL_UP, R2CC_CAUSE_CARRIER);
}

void fo_to_the_standby(void)
{
	post_op(1, IBV_WR_SEND);
	fo_rail_down(0);
	peer_moves(PEER_QPN, 0x500, 0, false);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	add_wc(&bcq, 1, IBV_WC_SUCCESS, IBV_WC_SEND, back.qp.qp_num);
	cr_assert_eq(r2cc_mig_poll_more(mc, 8, (struct ibv_wc[8]){ 0 }), 1);
}

void fo_rail_down(int rail)
{
	r2cc_health_report(rail, R2CC_RAIL_DOWN, R2CC_CAUSE_CARRIER);
	r2cc_mig_rail_down(rail, R2CC_CAUSE_CARRIER);
	r2cc_mig_tick();
}

struct fake_cq extra_bcq;

void fo_extra_on(struct fo_extra *o, int i)
{
	struct ibv_qp_attr a;

	o->prim.qp.context = o->back.qp.context = &ctx;
	extra_bcq.cq.context = &ctx;
	o->prim.qp.qp_num = 0x1000 + (uint32_t)i;
	o->back.qp.qp_num = 0x2000 + (uint32_t)i;
	o->mq = r2cc_mig_qp_new(&o->prim.qp, &fo_cap, false, mc, mc, NULL,
				NULL);
	cr_assert(o->mq, "QP %d protected", i);
	r2cc_mig_test_bound(o->mq, &o->back.qp, &extra_bcq.cq, PEER,
			    PEER_QPN + 1 + (uint32_t)i, 0x100);
	memset(&a, 0, sizeof(a));
	a.path_mtu = IBV_MTU_1024;
	a.sq_psn = 0x500;
	cr_assert_eq(r2cc_mig_rts(o->mq, &a), 0);
}

/* The peer's @type for the @i-th extra QP: WR 1 not executed */
static void extra_peer_says(int i, uint8_t type)
{
	struct r2cc_ctrl_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = type;
	m.failover.qpn = PEER_QPN + 1 + (uint32_t)i;
	m.failover.reason = R2CC_CTRL_WHY_CQ_ERROR;
	m.failover.flags = R2CC_CTRL_FO_PSN_VALID;
	m.failover.rq_psn = 0x500;
	r2cc_mig_test_peer_says(PEER, &m);
}

void fo_extra_moves(struct fo_extra *o, int i, int nwr, uint64_t id)
{
	struct ibv_sge sge = { .addr = 0x1000, .length = 100, .lkey = 7 };
	struct ibv_send_wr wr = { .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	struct ibv_wc wc;
	int k;

	for (k = 0; k < nwr; k++) {
		wr.wr_id = id + (uint64_t)k;
		cr_assert_eq(r2cc_mig_post_send(o->mq, &wr, &bad, f_post_send,
						NULL),
			     0);
	}
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = id;
	wc.status = IBV_WC_RETRY_EXC_ERR;
	wc.opcode = IBV_WC_SEND;
	wc.qp_num = o->prim.qp.qp_num;
	cr_assert_eq(r2cc_mig_wc(o->mq, mc, &wc, false), 0, "hidden");
	extra_peer_says(i, R2CC_CTRL_FAILOVER);
	extra_peer_says(i, R2CC_CTRL_FAILOVER_ACK);
	cr_assert_eq(r2cc_mig_state(o->mq), R2CC_PROT_MIGRATED, "QP %d", i);
	cr_assert_eq(o->back.nsent, nwr, "QP %d: its WRs replayed", i);
	for (k = 0; k < nwr; k++)
		add_wc(&extra_bcq, id + (uint64_t)k, IBV_WC_SUCCESS,
		       IBV_WC_SEND, o->back.qp.qp_num);
}
