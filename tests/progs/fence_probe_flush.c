/* SPDX-License-Identifier: MIT */
/*
 * fence_probe_flush.c - fence_probe's flush facts: what a receive queue
 * (plain or SRQ) and a send queue give back when their QP goes to ERR,
 * a QP reused through RESET, and a receive queue across a reset.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fence_probe.h"

/* ---- fact 2: receive flush, plain RQ or SRQ */

void test_rflush(int use_srq)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 64,
						  .max_sge = 1 } };
	struct ibv_srq *srq = NULL;
	struct ibv_qp *qp, *qp2;
	struct ibv_wc wc[64];
	int i, got, order = 1, flushst = 1, left = o.k - o.m;
	double us, last = 0;
	char ev[256], ids[512];
	size_t n = 0;
	struct ep r;

	if (use_srq && !client && !(srq = ibv_create_srq(pd, &sa)))
		die("create_srq", errno);
	qp = qp_new(srq);
	if (!client)
		for (i = 0; i < o.k; i++)
			post_recv(qp, srq, 100 + i, i);
	r = connect_qp(qp, o.psn, 7, 14);
	if (client) {
		for (i = 0; i < o.m; i++)
			if (post_send(qp, IBV_WR_SEND, i, 64, &r, 1))
				die("post_send", EIO);
		if (poll_n(wc, o.m, 5000, NULL) != o.m)
			die("rflush: sends did not complete", EIO);
	} else {
		if (poll_n(wc, o.m, 5000, NULL) != o.m)
			die("rflush: receives did not complete", EIO);
		for (i = 0; i < o.m; i++)
			if (wc[i].status || wc[i].wr_id != (uint64_t)100 + i)
				die("rflush: unexpected receive", EIO);
	}
	sync64(0); /* nothing more is in flight towards the responder */
	if (!client) {
		if (to_state(qp, IBV_QPS_ERR, &us))
			die("modify to ERR", errno);
		got = poll_n(wc, left, 2000, &last);
		/* anything beyond what was posted would also be news */
		got += poll_n(wc + got, 64 - got, 100, NULL);
		for (i = 0; i < got; i++) {
			order &= wc[i].wr_id == (uint64_t)100 + o.m + i;
			flushst &= wc[i].status == IBV_WC_WR_FLUSH_ERR;
			n += snprintf(ids + n, sizeof(ids) - n, "%s%lu",
				      i ? "," : "", (unsigned long)wc[i].wr_id);
		}
		async_events(300, ev, sizeof(ev));
		fact("posted", "%d", o.k);
		fact("consumed", "%d", o.m);
		fact("modify_err_us", "%.0f", us);
		fact("flushed", "%d", got);
		fact("flushed_wr_ids", "%s", got ? ids : "none");
		fact("flush_in_order", "%s", got && order ? "yes" : "no");
		fact("flush_status_all_WR_FLUSH_ERR", "%s",
		     got && flushst ? "yes" : "no");
		fact("last_flush_ms_after_modify_returned", "%.1f", last);
		fact("last_flush_ms_after_modify_called", "%.1f",
		     last + us / 1000);
		fact("async_events", "%s", ev);
	}
	if (!use_srq) {
		sync64(0);
		return;
	}
	/* Are the SRQ's receives still there? A new QP on it consumes them. */
	qp2 = qp_new(srq);
	r = connect_qp(qp2, o.psn + 0x100, 7, 14);
	if (client) {
		for (i = 0; i < left; i++)
			if (post_send(qp2, IBV_WR_SEND, i, 64, &r, 1))
				die("post_send", EIO);
		got = poll_n(wc, left, 5000, NULL);
		for (i = 0; i < got; i++)
			if (wc[i].status)
				got = -1;
		fact("resend_ok", "%s", got == left ? "yes" : "no");
	} else {
		got = poll_n(wc, left, 5000, NULL);
		n = 0;
		order = 1;
		for (i = 0; i < got; i++) {
			order &= wc[i].wr_id == (uint64_t)100 + o.m + i &&
				 wc[i].status == IBV_WC_SUCCESS &&
				 wc[i].qp_num == qp2->qp_num;
			n += snprintf(ids + n, sizeof(ids) - n, "%s%lu",
				      i ? "," : "", (unsigned long)wc[i].wr_id);
		}
		fact("srq_reused_by_new_qp", "%d", got);
		fact("srq_reused_wr_ids", "%s", got ? ids : "none");
		fact("srq_reused_in_order", "%s", got && order ? "yes" : "no");
	}
	sync64(0);
}

/* ---- fact 3: send flush with the ACKs black-holed */

/* Outstanding WRs, ACKs black-holed. With the default retry 7 (endless on
 * rxe) nothing completes until the program moves the QP to ERR; with a
 * small --retries the QP fails by itself (RETRY_EXC) first. */
void test_sflush(void)
{
	struct ibv_qp *qp = qp_new(NULL);
	struct ibv_wc wc[64];
	int i, got = 0, pre = 0, order = 1, unsig = 0, st, rt = 7, tm = 14;
	uint32_t sq, rq, rq_hole;
	double us, last = 0;
	char ids[1024];
	size_t n = 0;
	struct ep r;

	if (sscanf(o.retries, "%d:%d", &rt, &tm) != 2)
		die(o.retries, EINVAL);
	r = connect_qp(qp, o.psn, rt, tm);
	sync64(0);
	if (!client)
		run_cmd("hole", o.hole);
	sync64(0);
	if (client) {
		for (i = 0; i < o.n; i++)
			if (post_send(qp, IBV_WR_RDMA_WRITE, 200 + i, 4096, &r,
				      (i % 2 == 0) || i == o.n - 1))
				die("post_send", EIO);
		usleep(o.wait * 1e6);
		pre = poll_n(wc, 64, 1, NULL);
		query(qp, &sq, &rq, &st);
		fact("retry_timeout", "%d:%d", rt, tm);
		fact("posted",
		     "%d (WRITE 4096, odd ones unsignaled but the last)", o.n);
		fact("completions_before_err", "%d", pre);
		fact("state_before_err", "%d", st);
	}
	sync64(0); /* the WRs have been out for o.wait seconds */
	query(qp, &sq, &rq, &st);
	rq_hole = sync64(rq);
	if (client) {
		fact("responder_rq_adv_before_err", "%u",
		     psn_diff(rq_hole, o.psn));
		fact("requester_sq_adv_before_err", "%u", psn_diff(sq, o.psn));
		if (to_state(qp, IBV_QPS_ERR, &us))
			die("modify to ERR", errno);
		got = pre + poll_n(wc + pre, o.n - pre, 2000, &last);
		got += poll_n(wc + got, 64 - got, 100, NULL);
		for (i = 0; i < got; i++) {
			order &= wc[i].wr_id == (uint64_t)200 + i;
			unsig += (wc[i].wr_id - 200) % 2 == 1 &&
				 wc[i].wr_id != (uint64_t)200 + o.n - 1;
			n += snprintf(ids + n, sizeof(ids) - n, "%s%lu:%s",
				      i ? " " : "", (unsigned long)wc[i].wr_id,
				      wcs(wc[i].status));
		}
		fact("modify_err_us", "%.0f", us);
		fact("completions_after_err", "%d", got - pre);
		fact("completions", "%s", got ? ids : "none");
		fact("in_order", "%s", got && order ? "yes" : "no");
		fact("unsignaled_completed", "%d", unsig);
		fact("first_status", "%s", got ? wcs(wc[0].status) : "none");
		fact("last_ms", "%.1f", last);
	}
	sync64(0);
	if (!client) {
		run_cmd("unhole", o.unhole);
		if (to_state(qp, IBV_QPS_ERR, &us))
			die("modify to ERR", errno);
		query(qp, &sq, &rq, &st);
		fact("responder_modify_err_us", "%.0f", us);
		fact("responder_err_state", "%d", st);
		fact("responder_err_rq_adv", "%u", psn_diff(rq, o.psn));
	}
	sync64(0);
}

/* ---- fact 6: reuse a QP object for another remote QP */

void test_reuse(void)
{
	struct ibv_qp *qp = qp_new(NULL), *qp2 = NULL;
	struct ibv_wc wc;
	double us_err, us_reset;
	int ok, ret;
	struct ep r;

	if (!client) {
		qp2 = qp_new(NULL);
		post_recv(qp, NULL, 300, 0);
		post_recv(qp2, NULL, 400, 1);
	}
	r = connect_qp(qp, o.psn, 7, 14);
	if (client) {
		ok = !post_send(qp, IBV_WR_SEND, 1, 64, &r, 1) &&
		     poll_n(&wc, 1, 5000, NULL) == 1 && !wc.status;
		fact("first_send_ok", "%s", ok ? "yes" : "no");
		if (to_state(qp, IBV_QPS_ERR, &us_err))
			die("modify to ERR", errno);
		poll_n(&wc, 1, 200, NULL);
		ret = to_init(qp);
		fact("err_to_init_ret", "%s", ret ? strerror(ret) : "0");
		ret = to_state(qp, IBV_QPS_RESET, &us_reset);
		fact("err_to_reset_ret", "%s", ret ? strerror(ret) : "0");
		fact("modify_err_us", "%.0f", us_err);
		fact("modify_reset_us", "%.0f", us_reset);
	} else {
		ok = poll_n(&wc, 1, 5000, NULL) == 1 && !wc.status &&
		     wc.qp_num == qp->qp_num;
		fact("first_recv_on_qp1", "%s", ok ? "yes" : "no");
	}
	sync64(0);
	/* The client reconnects its same QP object to the server's qp2. */
	if (client) {
		uint32_t old = qp->qp_num;

		if (to_init(qp))
			die("RESET to INIT", errno);
		r = connect_qp(qp, o.psn + 0x1000, 7, 14);
		ok = !post_send(qp, IBV_WR_SEND, 2, 64, &r, 1) &&
		     poll_n(&wc, 1, 5000, NULL) == 1 && !wc.status;
		fact("new_remote_qpn", "0x%x", r.qpn);
		fact("same_local_qpn", "%s", qp->qp_num == old ? "yes" : "no");
		fact("send_after_reconnect_ok", "%s", ok ? "yes" : "no");
	} else {
		connect_qp(qp2, o.psn + 0x2000, 7, 14);
		ok = poll_n(&wc, 1, 5000, NULL) == 1 && !wc.status &&
		     wc.qp_num == qp2->qp_num && wc.wr_id == 400;
		fact("recv_on_new_qp", "%s", ok ? "yes" : "no");
	}
	sync64(0);
}

/* ---- fact 6b: what RESET leaves of receives posted before an ERR */

/*
 * The server posts 32 receives, the QP goes to ERR and, o.wait seconds
 * later, to RESET (r2cc re-arms a fenced standby so); then the flushes
 * the CQ holds are counted, the QP is connected again (to a new QP of the
 * client) with no receive posted, and the client SENDs once. A receive
 * completing then took a WR posted before the ERR: RESET left it in the
 * queue, and a re-armed QP would hand a message to a stale buffer.
 */
void test_rqreset(void)
{
	struct ibv_qp *qp = qp_new(NULL);
	struct ibv_wc wc[64];
	int i, got, flushed = 0;
	struct ep r;

	if (!client)
		for (i = 0; i < 32; i++)
			post_recv(qp, NULL, 900 + i, i);
	r = connect_qp(qp, o.psn, 7, 14);
	sync64(0);
	if (!client) {
		if (to_state(qp, IBV_QPS_ERR, NULL))
			die("modify to ERR", errno);
		if (o.wait > 0)
			usleep(o.wait * 1e6);
		if (to_state(qp, IBV_QPS_RESET, NULL))
			die("modify to RESET", errno);
		got = poll_n(wc, 64, 200, NULL);
		for (i = 0; i < got; i++)
			flushed += wc[i].status == IBV_WC_WR_FLUSH_ERR;
		fact("flushed_by_reset", "%d", flushed);
		if (to_init(qp))
			die("RESET to INIT", errno);
		connect_qp(qp, o.psn + 0x1000, 7, 14);
		got = poll_n(wc, 1, 3000, NULL);
		fact("stale_recv_after_reset", "%s", got ? "yes" : "no");
		if (got)
			fact("stale_recv_wr_id", "%llu status %s",
			     (unsigned long long)wc[0].wr_id,
			     ibv_wc_status_str(wc[0].status));
	} else {
		struct ibv_qp *qp2 = qp_new(NULL);

		(void)r;
		r = connect_qp(qp2, o.psn + 0x2000, 7, 14);
		if (post_send(qp2, IBV_WR_SEND, 1, 64, &r, 1))
			die("post_send", EIO);
		got = poll_n(wc, 1, 3000, NULL);
		fact("send_completed", "%s",
		     got && !wc[0].status ? "yes" : "no");
	}
	sync64(0);
}
