/* SPDX-License-Identifier: MIT */
/*
 * fence_probe_timing.c - fence_probe's timing facts: an RNR NAK behind a
 * READ reply, the retry budget's time, a device removed under its QPs,
 * and the round trip through SQD.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fence_probe.h"

/* The device's hw counter @name (rxe: ports/1/hw_counters), -1 if none */
static long hw_counter(const char *name)
{
	char path[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/%d/hw_counters/%s", o.dev,
		 o.ibport, name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* ---- fact 6c: a SEND behind a multi-packet READ, no receive posted
 *
 * What each of r2cc's moves makes: the peer replays a READ (128 KiB
 * here, 128 response packets) and a SEND behind it into a QP whose
 * receives are not re-posted yet (they come --wait seconds later; with
 * --wait 0 before the client posts). Facts: each WR's status in order
 * and the client QP's state after, and the RNR NAKs the client's device
 * counted meanwhile: whether rxe's requester takes the RNR NAK that
 * meets its READ reply in its stride. */
void test_readrnr(void)
{
	struct ibv_qp *qp = qp_new(NULL);
	struct ibv_wc wc[2];
	uint32_t sq, rq;
	struct ep r;
	int st, got;

	if (!client && o.wait <= 0)
		post_recv(qp, NULL, 1, 0);
	r = connect_qp(qp, o.psn, 7, 14);
	sync64(0);
	if (!client) {
		if (o.wait > 0) {
			usleep(o.wait * 1e6);
			post_recv(qp, NULL, 1, 0);
		}
		got = poll_n(wc, 1, 10000, NULL);
		fact("recv", "%s", got ? wcs(wc[0].status) : "none");
	} else {
		long rnr = hw_counter("rcvd_rnr_err");

		if (post_send(qp, IBV_WR_RDMA_READ, 1, 128 * 1024, &r, 1) ||
		    post_send(qp, IBV_WR_SEND, 2, 64, &r, 1))
			die("post_send", EIO);
		got = poll_n(wc, 2, 10000, NULL);
		fact("read", "%s", got > 0 ? wcs(wc[0].status) : "none");
		fact("send", "%s", got > 1 ? wcs(wc[1].status) : "none");
		fact("rnr_naks", "%ld",
		     rnr < 0 ? -1 : hw_counter("rcvd_rnr_err") - rnr);
		query(qp, &sq, &rq, &st);
		fact("qp_state", "%s",
		     st == IBV_QPS_RTS ? "RTS" :
		     st == IBV_QPS_ERR ? "ERR" :
					 "other");
	}
	sync64(0);
}

/* ---- fact 7: time to RETRY_EXC under a black hole */

void test_retry(void)
{
	int rt[MAXQ], tm[MAXQ], nq = 0, i, got, k;
	struct ibv_qp *qp[MAXQ];
	struct ep r[MAXQ];
	char *s = strdup(o.retries), *t, *save;
	double t0, when[MAXQ];
	struct ibv_wc wc;
	int status[MAXQ];
	char key[32];

	for (t = strtok_r(s, ",", &save); t && nq < MAXQ;
	     t = strtok_r(NULL, ",", &save)) {
		if (sscanf(t, "%d:%d", &rt[nq], &tm[nq]) != 2)
			die(t, EINVAL);
		nq++;
	}
	free(s);
	for (i = 0; i < nq; i++) {
		qp[i] = qp_new(NULL);
		r[i] = connect_qp(qp[i], o.psn + i * 0x10000, rt[i], tm[i]);
	}
	if (client) {
		for (i = 0; i < nq; i++)
			if (post_send(qp[i], IBV_WR_RDMA_WRITE, 600 + i, 64,
				      &r[i], 1))
				die("post_send", EIO);
		for (i = 0; i < nq; i++)
			if (poll_n(&wc, 1, 5000, NULL) != 1 || wc.status)
				die("retry: warm-up write failed", EIO);
	}
	sync64(0);
	run_cmd("hole", o.hole); /* both directions: a full black hole */
	sync64(0);
	if (client) {
		for (i = 0; i < nq; i++) {
			status[i] = -1;
			if (post_send(qp[i], IBV_WR_RDMA_WRITE, i, 64, &r[i],
				      1))
				die("post_send", EIO);
		}
		t0 = now();
		for (got = 0; got < nq && now() - t0 < o.wait;) {
			k = ibv_poll_cq(cq, 1, &wc);
			if (k <= 0) {
				usleep(1000);
				continue;
			}
			if (wc.wr_id < (uint64_t)nq && status[wc.wr_id] < 0) {
				status[wc.wr_id] = wc.status;
				when[wc.wr_id] = now() - t0;
				got++;
			}
		}
		fact("window_s", "%.0f", o.wait);
		for (i = 0; i < nq; i++) {
			snprintf(key, sizeof(key), "r%dt%d", rt[i], tm[i]);
			if (status[i] < 0)
				fact(key, "none");
			else
				fact(key, "%s@%.2fs", wcs(status[i]), when[i]);
		}
	}
	sync64(0);
	run_cmd("unhole", o.unhole);
	sync64(0);
}

/* ---- fact 8: the device removed under a connected QP */

/* Poll up to n completions within ms: how many, or -1 once a poll fails
 * (no exit: what fails is the fact). */
static int poll_try(struct ibv_wc *wc, int n, double ms)
{
	double end = now() + ms / 1000;
	int got = 0, k;

	while (got < n && now() < end) {
		k = ibv_poll_cq(cq, n - got, wc + got);
		if (k < 0)
			return -1;
		got += k;
		if (!k)
			usleep(200);
	}
	return got;
}

/* A NIC that dies whole, as rxe can show it: the client's device is
 * removed (--hole: a command that starts the removal in the background
 * and returns) while its QP is connected. Which async events come within
 * --wait s, and what a post, a poll, a query and a move to ERR return
 * then. Whether the removal waits for the program is the scenario's to
 * time (it ends with the program). */
void test_devdel(void)
{
	struct ibv_qp *qp = qp_new(NULL);
	struct ibv_qp_attr a;
	struct ibv_wc wc[8];
	struct timespec ts;
	char evs[256];
	int ret, got, st;
	uint32_t sq, rq;
	struct ep r;

	r = connect_qp(qp, o.psn, 7, 14);
	sync64(0);
	if (client) {
		ret = post_send(qp, IBV_WR_RDMA_WRITE, 1, 4096, &r, 1);
		got = ret ? 0 : poll_n(wc, 1, 5000, NULL);
		fact("write_before", "%s",
		     got ? wcs(wc[0].status) :
		     ret ? strerror(ret) :
			   "none");
		run_cmd("remove", o.hole);
		async_events(o.wait * 1000, evs, sizeof(evs));
		fact("async_events", "%s", evs);
		ret = post_send(qp, IBV_WR_RDMA_WRITE, 2, 4096, &r, 1);
		fact("post_send_after", "%d%s%s", ret, ret ? " " : "",
		     ret ? strerror(ret) : "");
		got = ret ? 0 : poll_try(wc, 1, 3000);
		fact("write_after", "%s",
		     got ? wcs(wc[0].status) :
		     ret ? "not posted" :
			   "none");
		query(qp, &sq, &rq, &st);
		fact("query_after_state", "%d", st);
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_ERR;
		ret = ibv_modify_qp(qp, &a, IBV_QP_STATE);
		fact("modify_err_after", "%d%s%s", ret, ret ? " " : "",
		     ret ? strerror(ret) : "");
		got = poll_try(wc, 8, 1000);
		fact("flushes_after", "%d", got);
		ret = ibv_destroy_qp(qp);
		fact("destroy_qp_after", "%d", ret);
		clock_gettime(CLOCK_REALTIME, &ts);
		fact("done_at", "%lld.%09ld", (long long)ts.tv_sec, ts.tv_nsec);
	}
	sync64(0);
}

/* ---- fact 9: a connected QP's ACK timeout and retry count changed
 * through SQD (RTS -> SQD, SQD -> SQD with them, SQD -> RTS): r2cc gives a
 * QP it cannot protect the program's own back so. A send posted while the
 * send queue drains: does it go once the QP is at RTS again, after an
 * empty post, or only with the next real one? Then whether the new pair
 * is what a black hole meets. */

void test_sqd(void)
{
	struct ibv_qp *qp = qp_new(NULL);
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	struct ibv_send_wr *bad;
	struct ibv_wc wc[8];
	double t0, drained = -1, rexc = -1;
	int i, ret, got, n;
	struct ep r;

	/* r2cc's pair for a failover within a few ms */
	r = connect_qp(qp, o.psn, 1, 8);
	sync64(0);
	if (client) {
		for (i = 0; i < 4; i++)
			if (post_send(qp, IBV_WR_RDMA_WRITE, i, 65536, &r, 1))
				die("post_send", EIO);
		ret = to_state(qp, IBV_QPS_SQD, NULL);
		fact("to_sqd", "%s", ret ? strerror(ret) : "0");
		memset(&a, 0, sizeof(a));
		ret = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
		fact("state", "%d", ret ? -1 : (int)a.qp_state);
		fact("draining_at_once", "%d", ret ? -1 : (int)a.sq_draining);
		memset(&a, 0, sizeof(a));
		a.timeout = 16;
		a.retry_cnt = 3;
		ret = ibv_modify_qp(qp, &a, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT);
		fact("modify_while_draining", "%s", ret ? strerror(ret) : "0");
		ret = post_send(qp, IBV_WR_RDMA_WRITE, 4, 64, &r, 1);
		fact("post_in_sqd", "%s", ret ? strerror(ret) : "0");
		for (t0 = now(); now() - t0 < 5;) {
			if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
				break;
			if (!a.sq_draining) {
				drained = (now() - t0) * 1000;
				break;
			}
			usleep(100);
		}
		fact("drained_ms", "%.1f", drained);
		memset(&a, 0, sizeof(a));
		a.timeout = 16;
		a.retry_cnt = 3;
		ret = ibv_modify_qp(qp, &a, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT);
		fact("modify_drained", "%s", ret ? strerror(ret) : "0");
		ret = to_state(qp, IBV_QPS_RTS, NULL);
		fact("to_rts", "%s", ret ? strerror(ret) : "0");
		memset(&a, 0, sizeof(a));
		ret = ibv_query_qp(
			qp, &a,
			IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &ia);
		fact("pair_after", "%d:%d", ret ? -1 : (int)a.retry_cnt,
		     ret ? -1 : (int)a.timeout);
		got = poll_n(wc, 5, 2000, NULL);
		for (i = 0; i < got; i++)
			if (wc[i].status)
				die("sqd: a write failed", EIO);
		fact("completed", "%d", got);
		/* An empty post is no doorbell on rxe: EINVAL */
		ret = ibv_post_send(qp, NULL, &bad);
		fact("empty_post", "%s", ret ? strerror(ret) : "0");
		n = got + poll_n(wc + got, 5 - got, 500, NULL);
		fact("completed_after_empty_post", "%d", n);
		if (post_send(qp, IBV_WR_RDMA_WRITE, 5, 64, &r, 1))
			die("post_send", EIO);
		n += poll_n(wc, 6 - n, 2000, NULL);
		fact("completed_after_next_post", "%d", n);
	}
	sync64(0);
	run_cmd("hole", o.hole);
	sync64(0);
	if (client) {
		if (post_send(qp, IBV_WR_RDMA_WRITE, 9, 64, &r, 1))
			die("post_send", EIO);
		t0 = now();
		got = poll_n(wc, 1, o.wait * 1000, NULL);
		if (got)
			rexc = now() - t0;
		fact("black_hole", "%s@%.2fs", got ? wcs(wc[0].status) : "none",
		     rexc);
	}
	sync64(0);
	run_cmd("unhole", o.unhole);
	sync64(0);
}
