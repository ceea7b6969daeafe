/* SPDX-License-Identifier: MIT */
/*
 * status_writer.c - a stand-in for a process running r2cc, for ctl.sh:
 * publishes a status record with two rails, four events (rail 1 down and
 * up, QP 258's failover to rail 0, a failed failover of QP 259) and three
 * QPs (one with a quote in its device name, to test escaping; one
 * protected by a backup on rail 1, one migrated to rail 0 with a failover
 * and a replay, one UD QP unprotected), prints "ready", then waits until
 * stdin closes.
 */
#include <stdio.h>
#include <unistd.h>

#include "policy.h"

int main(void)
{
	struct r2cc_status_event fo = { .kind = R2CC_EV_FAILOVER,
					.rail = 1,
					.cause = R2CC_CAUSE_CQ_ERROR,
					.qpn = 0x102,
					.to_rail = 0,
					.wrs = 5,
					.bytes = 4096 };
	struct r2cc_status_event nofo = { .kind = R2CC_EV_FAILOVER_FAILED,
					  .rail = 0,
					  .cause = R2CC_CAUSE_PEER,
					  .qpn = 0x103,
					  .to_rail = 1 };
	struct r2cc_status_event sb = { .kind = R2CC_EV_STANDBY,
					.rail = 1,
					.cause = R2CC_CAUSE_CARRIER,
					.qpn = 0x101,
					.to_rail = 0 };
	struct r2cc_status_qp *a, *b, *ud;
	char c;

	if (r2cc_status_open())
		return 1;
	r2cc_status_rail(0, "mlx5_0", "", R2CC_RAIL_UP, R2CC_CAUSE_NONE, 1, 0,
			 0);
	r2cc_status_rail(1, "mlx5_1", "", R2CC_RAIL_DOWN, R2CC_CAUSE_CARRIER, 2,
			 3, 2);
	r2cc_status_event(1, R2CC_RAIL_DOWN, R2CC_CAUSE_CARRIER);
	r2cc_status_event(1, R2CC_RAIL_UP, R2CC_CAUSE_PORT_EVENT);
	r2cc_status_qp_event(&fo);
	r2cc_status_qp_event(&nofo);
	r2cc_status_qp_event(&sb);
	a = r2cc_status_qp_add(0x101, 2, 0, "mlx5_0");
	b = r2cc_status_qp_add(0x102, 2, 1, "we\"ird\\dev");
	ud = r2cc_status_qp_add(0x103, 4, 0, "mlx5_0");
	if (!a || !b || !ud)
		return 1;
	r2cc_status_qp_unprot(ud, R2CC_UNPROT_NOT_RC);
	a->st.posted[R2CC_ST_WRITE] = 1000;
	a->st.polled = 63;
	a->st.bytes_posted = 65536000;
	a->prot = R2CC_PROT_READY;
	a->backup_rail = 1;
	a->backup_qpn = 0x201;
	b->st.posted[R2CC_ST_SEND] = 7;
	b->st.posted_recv = 11;
	b->st.polled = 9;
	b->st.polled_err = 2;
	b->st.bytes_posted = 700;
	b->peer_qpn = 0x302;
	b->st.bytes_polled = 300;
	b->prot = R2CC_PROT_MIGRATED;
	b->backup_rail = 0;
	b->backup_qpn = 0x202;
	b->failovers = 1;
	b->moves = 1;
	b->replayed_wrs = 5;
	b->replayed_bytes = 4096;
	r2cc_status_refused(R2CC_REFUSE_PEER_KEYS);
	r2cc_status_refused(R2CC_REFUSE_PEER_KEYS);
	r2cc_status_refused(R2CC_REFUSE_RESOLVE);
	r2cc_status_ctrl_add(R2CC_CTRL_FRAMES_OUT, 2);
	r2cc_status_ctrl_add(R2CC_CTRL_MSGS_OUT, 700);
	r2cc_status_ctrl_add(R2CC_CTRL_BYTES_OUT, 22500);
	r2cc_status_ctrl_add(R2CC_CTRL_FRAMES_IN, 3);
	r2cc_status_ctrl_add(R2CC_CTRL_MSGS_IN, 701);
	r2cc_status_ctrl_add(R2CC_CTRL_BYTES_IN, 22600);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	r2cc_status_close();
	return 0;
}
