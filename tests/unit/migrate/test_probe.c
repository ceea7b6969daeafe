/* SPDX-License-Identifier: MIT */
/*
 * test_probe.c - path probes over loopback: a listener's handshake and a
 * closed port's reset both say the path works; a path that never answers
 * is never seen working, however often it is probed; a success before the
 * time asked about does not count; GIDs that are not IPv4 ones are
 * refused. Times are partly the test's own (the API takes them).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
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
		*fd = s;
	} else {
		close(s); /* nothing listens there now */
		*fd = -1;
	}
	return ntohs(sin.sin_port);
}

/* Ask until the path is seen working, for up to 2 s: the last answer. */
static int ask(const uint8_t *s, const uint8_t *d, uint16_t port,
	       uint64_t since)
{
	uint64_t t0 = mono();
	int r;

	while ((r = r2cc_probe_path(s, d, port, since, mono(), 1000)) == 0 &&
	       mono() - t0 < 2000 * MS) {
		usleep(1000);
		r2cc_probe_poll(mono());
	}
	return r;
}

Test(probe, a_handshake_or_a_reset_means_the_path_works,
     .fini = r2cc_probe_reset)
{
	uint8_t lo[16];
	int lfd, none;
	uint16_t up = port_on(&lfd, true), closed = port_on(&none, false);

	gid_of("127.0.0.1", lo);
	cr_assert_eq(ask(lo, lo, up, 0), 1, "a listener answers");
	cr_assert_eq(ask(lo, lo, closed, 0), 1, "so does a reset");
	close(lfd);
}

Test(probe, a_success_before_the_time_asked_about_does_not_count,
     .fini = r2cc_probe_reset)
{
	uint8_t lo[16];
	int lfd;
	uint16_t up = port_on(&lfd, true);
	uint64_t later;

	gid_of("127.0.0.1", lo);
	cr_assert_eq(ask(lo, lo, up, 0), 1);
	later = mono() + 5 * MS;
	usleep(10000);
	/* A new probe is made for the later time, and it gets through. */
	cr_assert_eq(ask(lo, lo, up, later), 1);
	close(lfd);
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
		t += (R2CC_PROBE_WAIT_MS + 1) * MS;
		r2cc_probe_poll(t);
		t += (uint64_t)R2CC_PROBE_MAX_GAP_MS * MS;
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
