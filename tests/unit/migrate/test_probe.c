/* SPDX-License-Identifier: MIT */
/*
 * test_probe.c - path probes over loopback: a listener's handshake and a
 * closed port's reset both say the path works; a path that never answers
 * is never seen working, however often it is probed; it takes a streak
 * of clean handshakes, and one made before the time asked about does not
 * count; GIDs that are not IPv4 ones are refused. Keepalive probes count
 * what got through and the misses in a row, apart from failback's. A
 * thousand paths each get their own; one nobody asks about is forgotten.
 * Times are partly the test's own (the API takes them).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

#define MS 1000000ULL

static void gid_of(const char *ip, uint8_t gid[16])
{
	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	cr_assert_eq(inet_pton(AF_INET, ip, gid + 12), 1);
}

static uint64_t mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int listener = -1; /* accepted from while probing */

/* The handshakes that got through: accepted and closed (as the peer's
 * r2cc does), or the backlog fills and SYNs are dropped. */
static void drain(void)
{
	int c;

	while (listener >= 0 &&
	       (c = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0)
		close(c);
}

/* A listening loopback port (its fd in *fd), or a closed one (fd -1). */
static uint16_t port_on(int *fd, bool listening)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	int s = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert(s >= 0);
	cr_assert_eq(bind(s, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(getsockname(s, (struct sockaddr *)&sin, &len), 0);
	if (listening) {
		cr_assert_eq(listen(s, 4), 0);
		cr_assert_eq(fcntl(s, F_SETFL, O_NONBLOCK), 0);
		*fd = listener = s;
	} else {
		close(s); /* nothing listens there now */
		*fd = -1;
	}
	return ntohs(sin.sin_port);
}

/*
 * Ask until the path is seen working, on the test's clock @t: each probe
 * is polled at the time it started until it is through (loopback: at
 * once), then the clock moves on to the next one. The last answer.
 */
static int ask(const uint8_t *s, const uint8_t *d, uint16_t port,
	       uint64_t since, uint64_t *t)
{
	uint64_t t0 = mono();
	int r;

	while ((r = r2cc_probe_path(s, d, port, since, *t, 1000)) == 0 &&
	       mono() - t0 < 5000 * MS) {
		while (r2cc_probe_poll(*t) && mono() - t0 < 5000 * MS) {
			drain();
			usleep(1000);
		}
		drain();
		*t += MIG_PROBE_EVERY_MS * MS;
	}
	return r;
}

Test(probe, a_handshake_or_a_reset_means_the_path_works,
     .fini = r2cc_probe_reset)
{
	uint8_t lo[16];
	int lfd, none;
	uint16_t up = port_on(&lfd, true), closed = port_on(&none, false);
	uint64_t t = mono();

	gid_of("127.0.0.1", lo);
	cr_assert_eq(ask(lo, lo, up, 0, &t), 1, "a listener answers");
	cr_assert_eq(ask(lo, lo, closed, 0, &t), 1, "so does a reset");
	close(lfd);
	listener = -1;
}

Test(probe, it_takes_a_streak_and_one_before_the_time_asked_does_not_count,
     .fini = r2cc_probe_reset)
{
	uint8_t lo[16];
	int lfd, n = 0;
	uint16_t up = port_on(&lfd, true);
	uint64_t t = mono(), later;

	gid_of("127.0.0.1", lo);
	/* One clean handshake is not enough: a streak of them is. */
	while (r2cc_probe_path(lo, lo, up, 0, t, 1000) == 0 && n < 100) {
		for (int i = 0; r2cc_probe_poll(t) && i < 2000; i++) {
			drain();
			usleep(1000);
		}
		drain();
		t += MIG_PROBE_EVERY_MS * MS;
		n++;
	}
	cr_assert_eq(n, MIG_PROBE_STREAK, "%d probes", n);
	later = t + 5 * MS;
	/* Asked about a later time: a new streak is made, and it counts. */
	cr_assert_eq(ask(lo, lo, up, later, &t), 1);
	close(lfd);
	listener = -1;
}

Test(probe, a_dark_path_is_never_seen_working, .fini = r2cc_probe_reset)
{
	uint8_t lo[16], dark[16];
	uint64_t t = mono();
	int i;

	gid_of("127.0.0.1", lo);
	gid_of("192.0.2.1", dark); /* TEST-NET-1: nothing answers here */
	/* Probed, failed (no route, or no answer within the wait), probed
	 * again once its gap has passed: never seen working. */
	for (i = 0; i < 4; i++) {
		cr_assert_eq(r2cc_probe_path(lo, dark, 9, 0, t, 1000), 0);
		usleep(20000);
		r2cc_probe_poll(mono());
		t += (MIG_PROBE_WAIT_MS + 1) * MS;
		r2cc_probe_poll(t);
		t += (uint64_t)MIG_PROBE_MAX_GAP_MS * MS;
	}
}

Test(probe, gids_that_are_not_ipv4_are_refused, .fini = r2cc_probe_reset)
{
	uint8_t lo[16], v6[16];

	gid_of("127.0.0.1", lo);
	memset(v6, 0, sizeof(v6));
	v6[0] = 0xfe;
	v6[1] = 0x80;
	cr_assert_eq(r2cc_probe_path(lo, v6, 9, 0, mono(), 1000),
		     -EAFNOSUPPORT);
}

/* Keepalive probes of @d until @n more of them ended (test's clock @t:
 * each polled at its start until through, or past its wait). */
static struct r2cc_probe_count keep(const uint8_t *s, const uint8_t *d,
				    uint16_t port, int n, uint64_t *t)
{
	struct r2cc_probe_count c = { 0 }, c0;
	uint64_t t0 = mono();

	cr_assert_eq(r2cc_probe_keep(s, d, port, *t, 500, &c0), 0);
	while (c.ok + c.fail_row < c0.ok + c0.fail_row + (uint64_t)n &&
	       mono() - t0 < 5000 * MS) {
		if (r2cc_probe_poll(*t)) {
			drain();
			usleep(1000);
			r2cc_probe_poll(*t);
			drain();
		}
		if (r2cc_probe_poll(*t)) /* still in flight: let it time out */
			*t += (MIG_PROBE_WAIT_MS + 1) * MS;
		r2cc_probe_poll(*t);
		*t += 500 * MS;
		cr_assert_eq(r2cc_probe_keep(s, d, port, *t, 500, &c), 0);
	}
	return c;
}

Test(probe, a_keepalive_counts_what_gets_through_and_the_misses_in_a_row,
     .fini = r2cc_probe_reset)
{
	uint8_t lo[16], dark[16];
	struct r2cc_probe_count c;
	uint64_t ok;
	int lfd;
	uint16_t up = port_on(&lfd, true);
	uint64_t t = mono();

	gid_of("127.0.0.1", lo);
	gid_of("192.0.2.1", dark);
	/* (a probe may end within the call that starts it: at least) */
	c = keep(lo, lo, up, 3, &t);
	cr_assert_geq(c.ok, 3, "through: %llu", (unsigned long long)c.ok);
	cr_assert_eq(c.fail_row, 0);
	ok = c.ok;
	/* A path that never answers: every probe a miss, in a row. */
	c = keep(lo, dark, up, 3, &t);
	cr_assert_eq(c.ok, 0);
	cr_assert_geq(c.fail_row, 3, "in a row: %u", c.fail_row);
	/* Ended, its count is gone: a new keepalive starts from none. */
	r2cc_probe_keep_end(lo, dark, up);
	cr_assert_eq(r2cc_probe_keep(lo, dark, up, t, 500, &c), 0);
	cr_assert_eq(c.ok, 0);
	cr_assert_leq(c.fail_row, 1, "(at most the probe just started)");
	/* The same path probed for failback is another entry: its streak
	 * is not the keepalive's. */
	cr_assert_eq(r2cc_probe_path(lo, lo, up, t, t, 1000), 0);
	c = keep(lo, lo, up, 1, &t);
	cr_assert_gt(c.ok, ok);
	close(lfd);
	listener = -1;
}

Test(probe, a_keepalive_refuses_gids_that_are_not_ipv4,
     .fini = r2cc_probe_reset)
{
	uint8_t lo[16], v6[16];
	struct r2cc_probe_count c;

	gid_of("127.0.0.1", lo);
	memset(v6, 0xfe, sizeof(v6));
	cr_assert_eq(r2cc_probe_keep(lo, v6, 9, mono(), 500, &c),
		     -EAFNOSUPPORT);
}

/*
 * A job of 128 nodes on 8 rails probes a thousand paths: every one gets
 * its own entry (a table of 256 refused the rest with -ENOSPC, and their
 * keepalive never ran). Each path here is a loopback address with no
 * listener: the reset that comes back counts as through.
 */
Test(probe, a_thousand_paths_are_each_probed, .fini = r2cc_probe_reset,
     .timeout = 60)
{
	uint8_t lo[16], d[16];
	struct r2cc_probe_count c;
	int fd, i, n = 1024, got = 0;
	uint16_t closed = port_on(&fd, false);
	uint64_t t = mono(), t0 = t;

	gid_of("127.0.0.1", lo);
	gid_of("127.1.0.0", d);
	for (i = 0; i < n; i++) {
		d[14] = (uint8_t)(i >> 8);
		d[15] = (uint8_t)i;
		cr_assert_eq(r2cc_probe_keep(lo, d, closed, t, 500, &c), 0,
			     "path %d refused", i);
	}
	while (r2cc_probe_poll(t) && mono() - t0 < 5000 * MS)
		usleep(1000);
	for (i = 0; i < n; i++) {
		d[14] = (uint8_t)(i >> 8);
		d[15] = (uint8_t)i;
		cr_assert_eq(r2cc_probe_keep(lo, d, closed, t, 500, &c), 0);
		got += c.ok == 1;
	}
	cr_assert_eq(got, n, "%d of %d paths probed", got, n);
}

/* A failback path nobody asks about for MIG_PROBE_IDLE_MS is forgotten:
 * asked again, it needs a new streak. */
Test(probe, a_path_nobody_asks_about_is_forgotten, .fini = r2cc_probe_reset,
     .timeout = 30)
{
	uint8_t lo[16];
	int lfd;
	uint16_t up = port_on(&lfd, true);
	uint64_t t = mono();

	gid_of("127.0.0.1", lo);
	cr_assert_eq(ask(lo, lo, up, 0, &t), 1);
	r2cc_probe_poll(t + (MIG_PROBE_IDLE_MS - 1000) * MS);
	cr_assert_eq(r2cc_probe_path(lo, lo, up, 0, t, 1000), 1, "kept");
	t += (MIG_PROBE_IDLE_MS + 1000) * MS;
	r2cc_probe_poll(t);
	cr_assert_eq(r2cc_probe_path(lo, lo, up, 0, t, 1000), 0,
		     "forgotten: a new streak");
	close(lfd);
	listener = -1;
}
