/* SPDX-License-Identifier: MIT */
/*
 * test_status.c - the status record r2cc-ctl reads: a round trip through
 * shared memory, its permissions, records of dead processes (also one that
 * died mid-update), a writer caught mid-update, hostile files, records of
 * another version, the event ring (rail changes and QP failovers), and
 * thousands of QP slots.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy.h"

static char dir[] = "/tmp/r2cc-status-XXXXXX";
static char path[256];

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	setenv("R2CC_STATUS_DIR", dir, 1);
	snprintf(path, sizeof(path), "%s/r2cc.%u.%d", dir,
		 (unsigned int)getuid(), (int)getpid());
}

static void teardown(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(status, .init = setup, .fini = teardown, .timeout = 10);

Test(status, round_trip)
{
	struct r2cc_status_snap s;
	struct r2cc_status_qp *a, *b;
	struct stat sb;

	cr_assert_eq(r2cc_status_open(), 0);
	cr_assert_eq(r2cc_status_open(), -EBUSY);
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq(sb.st_mode & 0777, 0600, "owner only");
	r2cc_status_rail(1, "rxe1", "eth1", R2CC_RAIL_DOWN, R2CC_CAUSE_CARRIER,
			 5, 1, 0);
	a = r2cc_status_qp_add(0x12, 2, 0, "rxe0");
	b = r2cc_status_qp_add(0x13, 2, 1, "rxe1");
	cr_assert(a && b && a != b);
	a->st.posted[R2CC_ST_WRITE] = 200;
	a->st.polled = 13;
	cr_assert_eq(r2cc_status_read(path, &s), 0);
	cr_assert_eq(s.hdr.pid, getpid());
	cr_assert_str_eq(s.rails[1].dev, "rxe1");
	cr_assert_eq(s.rails[1].state, R2CC_RAIL_DOWN);
	cr_assert_eq(s.rails[1].downs, 1);
	cr_assert_eq(s.nqps, 2);
	cr_assert_eq(s.qps[0].qpn, 0x12);
	cr_assert_eq(s.qps[0].st.posted[R2CC_ST_WRITE], 200);
	cr_assert_str_eq(s.qps[1].dev, "rxe1");
	r2cc_status_snap_free(&s);
	r2cc_status_qp_del(a);
	cr_assert_eq(r2cc_status_read(path, &s), 0);
	cr_assert_eq(s.nqps, 1);
	cr_assert_eq(s.qps[0].qpn, 0x13);
	r2cc_status_snap_free(&s);
	r2cc_status_close();
	cr_assert_eq(access(path, F_OK), -1, "removed at close");
}

Test(status, refuses_loose_modes_and_garbage)
{
	struct r2cc_status_snap s;
	char bad[300];
	int fd;

	cr_assert_eq(r2cc_status_open(), 0);
	cr_assert_eq(chmod(path, 0644), 0);
	cr_assert_eq(r2cc_status_read(path, &s), -EPERM);
	cr_assert_eq(chmod(path, 0600), 0);
	/* Not a record: wrong magic; too short; a symlink. */
	snprintf(bad, sizeof(bad), "%s/r2cc.0.1", dir);
	fd = open(bad, O_CREAT | O_WRONLY, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 1 << 20), 0);
	close(fd);
	cr_assert_eq(r2cc_status_read(bad, &s), -EBADMSG);
	cr_assert_eq(truncate(bad, 8), 0);
	cr_assert_eq(r2cc_status_read(bad, &s), -EBADMSG);
	unlink(bad);
	cr_assert_eq(symlink(path, bad), 0);
	cr_assert_eq(r2cc_status_read(bad, &s), -ELOOP);
	/* A record cut short after its header. */
	cr_assert_eq(truncate(path, 4096), 0);
	cr_assert_eq(r2cc_status_read(path, &s), -EBADMSG);
}

/* Flip the writer's seqlock of the record at @p, as a writer does while
 * it changes a rail. */
static void gen_bump(const char *p)
{
	struct r2cc_status_hdr *h;
	int fd = open(p, O_RDWR);

	cr_assert_geq(fd, 0);
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(h, MAP_FAILED);
	atomic_fetch_add(&h->gen, 1);
	munmap(h, sizeof(*h));
	close(fd);
}

Test(status, dead_process_mid_update_is_stale)
{
	struct r2cc_status_snap s;
	char child[256];
	pid_t pid;
	int st;

	pid = fork();
	if (pid == 0) {
		char mine[256];

		if (r2cc_status_open())
			_exit(1);
		r2cc_status_qp_add(7, 2, 0, "rxe0");
		snprintf(mine, sizeof(mine), "%s/r2cc.%u.%d", dir,
			 (unsigned int)getuid(), (int)getpid());
		gen_bump(mine); /* "crashes" in the middle of an update */
		_exit(0); /* no r2cc_status_close(): the record stays */
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert_eq(WEXITSTATUS(st), 0);
	snprintf(child, sizeof(child), "%s/r2cc.%u.%d", dir,
		 (unsigned int)getuid(), (int)pid);
	cr_assert_eq(access(child, F_OK), 0, "left behind");
	cr_assert_eq(r2cc_status_read(child, &s), -ESRCH, "never live");
}

Test(status, live_writer_mid_update_times_out)
{
	struct r2cc_status_snap s;

	cr_assert_eq(r2cc_status_open(), 0);
	gen_bump(path);
	cr_assert_eq(r2cc_status_read(path, &s), -EAGAIN);
	gen_bump(path);
	cr_assert_eq(r2cc_status_read(path, &s), 0);
	r2cc_status_snap_free(&s);
}

Test(status, starttime_tells_pid_reuse)
{
	cr_assert_gt(r2cc_proc_starttime(getpid()), 0);
	cr_assert_eq(r2cc_proc_starttime(0x7ffffff0), 0);
}

Test(status, event_ring_keeps_the_last_ones_in_order)
{
	struct r2cc_status_snap s;
	int i;

	cr_assert_eq(r2cc_status_open(), 0);
	for (i = 0; i < R2CC_STATUS_EVENTS + 10; i++)
		r2cc_status_event(i % 3, i % 2 ? R2CC_RAIL_UP : R2CC_RAIL_DOWN,
				  R2CC_CAUSE_CARRIER);
	cr_assert_eq(r2cc_status_read(path, &s), 0);
	cr_assert_eq(s.hdr.events, R2CC_STATUS_EVENTS + 10);
	cr_assert_eq(s.nev, R2CC_STATUS_EVENTS);
	/* The oldest kept is event 10. */
	cr_assert_eq(s.ev[0].rail, 10 % 3);
	for (i = 1; i < (int)s.nev; i++)
		cr_assert_geq(s.ev[i].realtime_ns, s.ev[i - 1].realtime_ns);
	cr_assert_eq(s.ev[s.nev - 1].rail, (R2CC_STATUS_EVENTS + 9) % 3);
	r2cc_status_snap_free(&s);
}

Test(status, qp_events_share_the_ring_with_rail_events)
{
	struct r2cc_status_event fo = { .kind = R2CC_EV_FAILOVER,
					.rail = 0,
					.state = 7, /* ignored: set to 0 */
					.cause = R2CC_CAUSE_CQ_ERROR,
					.qpn = 0x11,
					.to_rail = 1,
					.wrs = 12,
					.bytes = 40960 };
	struct r2cc_status_event bad = { .kind = R2CC_EV_FAILOVER_FAILED,
					 .rail = 0,
					 .cause = R2CC_CAUSE_PEER,
					 .qpn = 0x12,
					 .to_rail = 1 };
	struct r2cc_status_snap s;

	r2cc_status_qp_event(&fo); /* not open: nothing, no crash */
	cr_assert_eq(r2cc_status_open(), 0);
	r2cc_status_event(0, R2CC_RAIL_DOWN, R2CC_CAUSE_CARRIER);
	r2cc_status_qp_event(&fo);
	r2cc_status_qp_event(&bad);
	cr_assert_eq(r2cc_status_read(path, &s), 0);
	cr_assert_eq(s.nev, 3);
	cr_assert_eq(s.ev[0].kind, R2CC_EV_RAIL);
	cr_assert_eq(s.ev[0].state, R2CC_RAIL_DOWN);
	cr_assert_eq(s.ev[0].to_rail, -1);
	cr_assert_eq(s.ev[0].qpn, 0);
	cr_assert_eq(s.ev[1].kind, R2CC_EV_FAILOVER);
	cr_assert_eq(s.ev[1].state, 0);
	cr_assert_eq(s.ev[1].qpn, 0x11);
	cr_assert_eq(s.ev[1].rail, 0);
	cr_assert_eq(s.ev[1].to_rail, 1);
	cr_assert_eq(s.ev[1].cause, R2CC_CAUSE_CQ_ERROR);
	cr_assert_eq(s.ev[1].wrs, 12);
	cr_assert_eq(s.ev[1].bytes, 40960);
	cr_assert_geq(s.ev[1].realtime_ns, s.ev[0].realtime_ns);
	cr_assert_gt(s.ev[1].realtime_ns, 0, "stamped by the writer");
	cr_assert_eq(s.ev[2].kind, R2CC_EV_FAILOVER_FAILED);
	cr_assert_eq(s.ev[2].cause, R2CC_CAUSE_PEER);
	r2cc_status_snap_free(&s);
	cr_assert_str_eq(r2cc_status_ev_kind_name(R2CC_EV_RAIL), "rail");
	cr_assert_str_eq(r2cc_status_ev_kind_name(R2CC_EV_FAILOVER),
			 "failover");
	cr_assert_str_eq(r2cc_status_ev_kind_name(R2CC_EV_FAILBACK),
			 "failback");
	cr_assert_str_eq(r2cc_status_ev_kind_name(R2CC_EV_FAILOVER_FAILED),
			 "failover_failed");
	cr_assert_str_eq(r2cc_status_ev_kind_name(R2CC_EV_NKINDS), "?");
}

/* Set the version field of the record at @p. */
static void set_version(const char *p, uint32_t v)
{
	struct r2cc_status_hdr *h;
	int fd = open(p, O_RDWR);

	cr_assert_geq(fd, 0);
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(h, MAP_FAILED);
	h->version = v;
	munmap(h, sizeof(*h));
	close(fd);
}

/* A record of another version (an older or newer shim) is refused
 * cleanly: -EBADMSG, never a misread. */
Test(status, refuses_other_versions)
{
	struct r2cc_status_snap s;
	uint64_t id;
	uint32_t pid;
	uint16_t port;

	cr_assert_eq(R2CC_STATUS_VERSION, 7);
	cr_assert_eq(r2cc_status_open(), 0);
	r2cc_status_ctrl(42, 4242);
	cr_assert_not_null(r2cc_status_qp_add(0x21, 2, 0, "rxe0"));
	cr_assert_eq(r2cc_status_find_qp("rxe0", 0x21, &id, &port, &pid), 0);
	set_version(path, R2CC_STATUS_VERSION - 1);
	cr_assert_eq(r2cc_status_read(path, &s), -EBADMSG);
	cr_assert_eq(r2cc_status_find_qp("rxe0", 0x21, &id, &port, &pid),
		     -ENOENT);
	set_version(path, R2CC_STATUS_VERSION + 1);
	cr_assert_eq(r2cc_status_read(path, &s), -EBADMSG);
	set_version(path, R2CC_STATUS_VERSION);
	cr_assert_eq(r2cc_status_read(path, &s), 0);
	r2cc_status_snap_free(&s);
}

/* A reader that copies the ring while another thread adds failovers
 * never sees a torn event: each one is whole (seqlock). */
static void *adder(void *arg)
{
	struct r2cc_status_event e = { .kind = R2CC_EV_FAILOVER, .to_rail = 1 };
	uint32_t i;

	(void)arg;
	for (i = 1; i <= 20000; i++) {
		e.qpn = i;
		e.wrs = i;
		e.bytes = (uint64_t)i * 3;
		r2cc_status_qp_event(&e);
	}
	return NULL;
}

Test(status, qp_events_are_never_torn)
{
	struct r2cc_status_snap s;
	pthread_t t;
	uint32_t i;
	int n, ret;

	cr_assert_eq(r2cc_status_open(), 0);
	cr_assert_eq(pthread_create(&t, NULL, adder, NULL), 0);
	for (n = 0; n < 200; n++) {
		ret = r2cc_status_read(path, &s);
		if (ret == -EAGAIN)
			continue;
		cr_assert_eq(ret, 0);
		for (i = 0; i < s.nev; i++) {
			cr_assert_eq(s.ev[i].wrs, s.ev[i].qpn);
			cr_assert_eq(s.ev[i].bytes, (uint64_t)s.ev[i].qpn * 3);
			if (i)
				cr_assert_eq(s.ev[i].qpn, s.ev[i - 1].qpn + 1);
		}
		r2cc_status_snap_free(&s);
	}
	pthread_join(t, NULL);
}

/* Thousands of QPs in one process (a rank's all-to-all): each has a slot
 * its peers find it by, a freed one is taken again first, and a reader
 * sees every one. */
Test(status, slots_for_thousands_of_qps)
{
	static struct r2cc_status_qp *q[5000];
	struct r2cc_status_snap s;
	uint64_t id;
	uint32_t pid, i;
	uint16_t port;

	cr_assert_eq(r2cc_status_open(), 0);
	r2cc_status_ctrl(42, 4242);
	for (i = 0; i < 5000; i++) {
		q[i] = r2cc_status_qp_add(0x100 + i, 2, 0, "rxe0");
		cr_assert_not_null(q[i], "QP %u", i);
	}
	cr_assert_eq(
		r2cc_status_find_qp("rxe0", 0x100 + 4999, &id, &port, &pid), 0);
	cr_assert_eq(id, 42);
	r2cc_status_qp_del(q[10]);
	r2cc_status_qp_del(q[20]);
	cr_assert_eq(r2cc_status_qp_add(0x9000, 2, 0, "rxe0"), q[10]);
	cr_assert_eq(r2cc_status_qp_add(0x9001, 2, 0, "rxe0"), q[20]);
	cr_assert_eq(r2cc_status_read(path, &s), 0);
	cr_assert_eq(s.nqps, 5000);
	cr_assert_eq(s.hdr.qp_overflow, 0);
	r2cc_status_snap_free(&s);
	r2cc_status_close();
}

/* Past the record's room: NULL, counted as overflow, and the QPs before
 * keep theirs. */
Test(status, full_record_counts_the_overflow)
{
	struct r2cc_status_snap s;
	uint32_t i;

	cr_assert_eq(r2cc_status_open(), 0);
	for (i = 0; i < R2CC_STATUS_QPS; i++)
		cr_assert_not_null(r2cc_status_qp_add(i + 1, 2, 0, "rxe0"));
	cr_assert_null(r2cc_status_qp_add(0xfffff, 2, 0, "rxe0"));
	cr_assert_null(r2cc_status_qp_add(0xffffe, 2, 0, "rxe0"));
	cr_assert_eq(r2cc_status_read(path, &s), 0);
	cr_assert_eq(s.hdr.qp_overflow, 2);
	cr_assert_eq(s.nqps, R2CC_STATUS_QPS);
	r2cc_status_snap_free(&s);
	r2cc_status_close();
}
