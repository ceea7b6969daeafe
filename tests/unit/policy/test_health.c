/* SPDX-License-Identifier: MIT */
/*
 * test_health.c - rail health: rtnetlink link messages parsed from canned
 * buffers, state changes and their callbacks, and the monitor thread
 * serving a registered fd and stopping within its bound.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <errno.h>
#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy.h"

/* Append one link message to @buf at @off; returns the new offset. */
static size_t put_link(char *buf, size_t off, uint16_t type, int ifindex,
		       unsigned int flags)
{
	struct nlmsghdr *nh = (struct nlmsghdr *)(buf + off);
	struct ifinfomsg *ifi = NLMSG_DATA(nh);

	memset(nh, 0, NLMSG_SPACE(sizeof(*ifi)));
	nh->nlmsg_len = NLMSG_LENGTH(sizeof(*ifi));
	nh->nlmsg_type = type;
	ifi->ifi_index = ifindex;
	ifi->ifi_flags = flags;
	return off + NLMSG_SPACE(sizeof(*ifi));
}

static int seen_idx[8], seen_up[8], nseen;

static void rec(int ifindex, bool up, void *arg)
{
	(void)arg;
	if (nseen < 8) {
		seen_idx[nseen] = ifindex;
		seen_up[nseen] = up;
	}
	nseen++;
}

Test(health_nl, parses_link_messages, .timeout = 5)
{
	static __attribute__((aligned(8))) char buf[1024];
	size_t n = 0;

	nseen = 0;
	n = put_link(buf, n, RTM_NEWLINK, 3, IFF_UP | IFF_LOWER_UP);
	n = put_link(buf, n, RTM_NEWLINK, 4, IFF_UP); /* no carrier */
	n = put_link(buf, n, RTM_NEWADDR, 5, 0); /* not a link: skipped */
	n = put_link(buf, n, RTM_DELLINK, 6, IFF_UP | IFF_LOWER_UP);
	n = put_link(buf, n, RTM_NEWLINK, 7, IFF_LOWER_UP); /* admin down */
	cr_assert_eq(r2cc_nl_parse_links(buf, n, rec, NULL), 4);
	cr_assert_eq(nseen, 4);
	cr_assert_eq(seen_idx[0], 3);
	cr_assert(seen_up[0]);
	cr_assert_eq(seen_idx[1], 4);
	cr_assert(!seen_up[1]);
	cr_assert_eq(seen_idx[2], 6);
	cr_assert(!seen_up[2], "a deleted link is down");
	cr_assert(!seen_up[3]);
}

Test(health_nl, rejects_malformed_messages, .timeout = 5)
{
	static __attribute__((aligned(8))) char buf[1024];
	struct nlmsghdr *nh = (struct nlmsghdr *)buf;
	size_t n;

	nseen = 0;
	n = put_link(buf, 0, RTM_NEWLINK, 3, IFF_UP | IFF_LOWER_UP);
	/* A length beyond the buffer. */
	nh->nlmsg_len = 4096;
	cr_assert_eq(r2cc_nl_parse_links(buf, n, rec, NULL), -EBADMSG);
	/* A link message too short for its ifinfomsg. */
	nh->nlmsg_len = NLMSG_LENGTH(2);
	cr_assert_eq(r2cc_nl_parse_links(buf, n, rec, NULL), -EBADMSG);
	/* Less than a header: nothing, no error. */
	cr_assert_eq(r2cc_nl_parse_links(buf, 8, rec, NULL), 0);
	cr_assert_eq(nseen, 0);
}

static int changes, last_rail, last_state, last_cause;

static void on_change(int rail, enum r2cc_rail_state st,
		      enum r2cc_health_cause cause, void *arg)
{
	(void)arg;
	changes++;
	last_rail = rail;
	last_state = st;
	last_cause = cause;
}

Test(health, reports_change_state_once, .timeout = 10)
{
	struct r2cc_health_info i;

	cr_assert_eq(r2cc_health_add_rail(2, "mlx5_2", ""), 0);
	cr_assert_eq(r2cc_health_add_rail(2, "mlx5_2", ""), -EEXIST);
	cr_assert_eq(r2cc_health_add_rail(99, "x", ""), -EINVAL);
	cr_assert_eq(r2cc_health_get(2).state, R2CC_RAIL_UNKNOWN);
	cr_assert_eq(r2cc_health_start(on_change, NULL), 0);
	r2cc_health_report(2, R2CC_RAIL_UP, R2CC_CAUSE_PORT_EVENT);
	r2cc_health_report(2, R2CC_RAIL_DOWN, R2CC_CAUSE_CQ_ERROR);
	r2cc_health_report(2, R2CC_RAIL_DOWN, R2CC_CAUSE_CARRIER); /* same */
	r2cc_health_report(5, R2CC_RAIL_DOWN, R2CC_CAUSE_CARRIER); /* unknown */
	cr_assert_eq(changes, 2);
	cr_assert_eq(last_rail, 2);
	cr_assert_eq(last_state, R2CC_RAIL_DOWN);
	cr_assert_eq(last_cause, R2CC_CAUSE_CQ_ERROR);
	i = r2cc_health_get(2);
	cr_assert_eq(i.downs, 1);
	cr_assert_eq(i.ups, 1);
	cr_assert_eq(i.cause, R2CC_CAUSE_CQ_ERROR);
	cr_assert_str_eq(r2cc_health_cause_name(i.cause), "cq error");
	r2cc_health_stop();
}

static int pipe_fd[2];
static _Atomic int ready_calls; /* (the monitor thread's) */

static void on_ready(int fd, void *arg)
{
	char c;

	(void)arg;
	if (read(fd, &c, 1) == 1)
		ready_calls++;
	r2cc_health_report(0, c == 'd' ? R2CC_RAIL_DOWN : R2CC_RAIL_UP,
			   R2CC_CAUSE_PORT_EVENT);
}

Test(health, monitor_serves_fds_and_stops, .timeout = 10)
{
	struct timespec t0, t1;
	int i;

	cr_assert_eq(pipe(pipe_fd), 0);
	cr_assert_eq(r2cc_health_add_rail(0, "rxe0", ""), 0);
	cr_assert_eq(r2cc_health_add_fd(pipe_fd[0], on_ready, NULL), 0);
	cr_assert_eq(r2cc_health_start(NULL, NULL), 0);
	cr_assert_eq(r2cc_health_add_fd(pipe_fd[0], on_ready, NULL), -EBUSY);
	cr_assert_eq(write(pipe_fd[1], "d", 1), 1);
	for (i = 0; i < 500 && r2cc_health_get(0).state != R2CC_RAIL_DOWN; i++)
		usleep(10000);
	cr_assert_eq(r2cc_health_get(0).state, R2CC_RAIL_DOWN);
	cr_assert_eq(ready_calls, 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r2cc_health_stop();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert_lt(t1.tv_sec - t0.tv_sec, 3, "stop is bounded");
	r2cc_health_stop(); /* again: harmless */
}

Test(health, forked_child_leaves_the_parents_monitor_alone, .timeout = 10)
{
	pid_t pid;
	int st, i;

	cr_assert_eq(pipe(pipe_fd), 0);
	cr_assert_eq(r2cc_health_add_rail(1, "rxe1", ""), 0);
	cr_assert_eq(r2cc_health_add_fd(pipe_fd[0], on_ready, NULL), 0);
	cr_assert_eq(r2cc_health_start(NULL, NULL), 0);
	pid = fork();
	if (pid == 0) {
		r2cc_health_stop(); /* as the child's exit would */
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	/* The parent's monitor still serves its fd. */
	cr_assert_eq(write(pipe_fd[1], "d", 1), 1);
	for (i = 0; i < 500 && ready_calls == 0; i++)
		usleep(10000);
	cr_assert_eq(ready_calls, 1);
	r2cc_health_stop();
}

Test(health_timeout, detect_bound_gives_the_largest_exponent)
{
	/* 4.096 us * 2^14 * 7 = 470 ms <= 500; 2^15 would be 940 ms */
	cr_assert_eq(r2cc_rc_timeout_for(500, 7), 14);
	cr_assert_eq(r2cc_rc_timeout_for(469, 7), 13);
	cr_assert_eq(r2cc_rc_timeout_for(470, 7), 14);
	cr_assert_eq(r2cc_rc_timeout_for(10, 7), 8);
	cr_assert_eq(r2cc_rc_timeout_for(60000, 7), 20);
	cr_assert_eq(r2cc_rc_timeout_for(60000, 1), 23);
	cr_assert_eq(r2cc_rc_timeout_for(500, 0), r2cc_rc_timeout_for(500, 1));
	/* never below 1, never above 31 */
	cr_assert_eq(r2cc_rc_timeout_for(0, 8), 1);
	cr_assert_eq(r2cc_rc_timeout_for(UINT32_MAX, 1), 31);
}
