/* SPDX-License-Identifier: MIT */
/*
 * test_chan_stall.c - a control connection TCP cannot get through is
 * replaced (chan_stall.c): its frames move to the peer's other channel,
 * those it may not have delivered first, none missing; a peer with no
 * other is called at another address; a frame that comes twice is taken
 * once and the stream goes on. A channel from a rail that went down is
 * replaced at once, the call to an address not on that rail, and a peer
 * whose call says it replaces its channel is followed. Loopback TCP never
 * backs off and has no rails: probes stand in for TCP's judgement
 * (r2cc_chan_test_stall_probe()) and the netdevs
 * (r2cc_chan_test_rail_probe()).
 */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "chan.h"
#include "chan_fixture.h"
#include "policy.h"

/* The test's local port whose channel end counts as stalled */
static uint16_t stalled_port;

static bool probe(int fd)
{
	struct sockaddr_in a = { 0 };
	socklen_t len = sizeof(a);

	return !getpeername(fd, (struct sockaddr *)&a, &len) &&
	       ntohs(a.sin_port) == stalled_port;
}

/* The rail of the channel's end whose peer is the test's stalled_port */
static int rail_probe(int fd)
{
	return probe(fd) ? 0 : -1;
}

/* A socket connected to the channel's direct port */
static int dial_us(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(r2cc_chan_port()),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* The peer listening on 127.0.0.2 too (its port in @sa): the fd */
static int peer_listens(struct sockaddr_in *sa)
{
	socklen_t len = sizeof(*sa);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);

	*sa = (struct sockaddr_in){ .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(0x7f000002) };
	cr_assert_eq(bind(lfd, (struct sockaddr *)sa, sizeof(*sa)), 0);
	cr_assert_eq(listen(lfd, 4), 0);
	cr_assert_eq(getsockname(lfd, (struct sockaddr *)sa, &len), 0);
	return lfd;
}

/* One of the peer's addresses for its HELLO: 127.0.0.@host on @rail */
static void addr_at(struct r2cc_ctrl_addr *a, uint8_t rail, uint8_t host,
		    const struct sockaddr_in *sa)
{
	memset(a, 0, sizeof(*a));
	a->family = 4;
	a->rail = rail;
	a->port = ntohs(sa->sin_port);
	a->addr[0] = 127;
	a->addr[3] = host;
}

static uint16_t local_port(int fd)
{
	struct sockaddr_in a = { 0 };
	socklen_t len = sizeof(a);

	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	return ntohs(a.sin_port);
}

static void keepalive(uint64_t id, uint64_t v)
{
	struct r2cc_ctrl_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_KEEPALIVE;
	m.keepalive_ns = v;
	cr_assert_eq(r2cc_chan_send(id, &m), 0);
}

/* One KEEPALIVE's value taken by drain() */
static void saw(const struct r2cc_ctrl_msg *m, bool *seen, int n, int *lo,
		int *hi)
{
	cr_assert_eq(m->hdr.type, R2CC_CTRL_KEEPALIVE);
	cr_assert_lt(m->keepalive_ns, (uint64_t)n);
	cr_assert_gt((int)m->keepalive_ns, *hi, "out of order: %d after %d",
		     (int)m->keepalive_ns, *hi);
	seen[m->keepalive_ns] = true;
	if (*lo < 0)
		*lo = (int)m->keepalive_ns;
	*hi = (int)m->keepalive_ns;
}

/* KEEPALIVE values on @fd (alone or in BATCHes), in order, until it has
 * nothing for 1 s or ends: into @seen (values below @n), the first and
 * last in *@lo, *@hi (-1: none). */
static void drain(int fd, const struct r2cc_ctrl_key *key, bool *seen, int n,
		  int *lo, int *hi)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct r2cc_ctrl_msg m, one;
	uint32_t off;

	*lo = *hi = -1;
	while (poll(&p, 1, 1000) == 1 && !get_frame(fd, key, &m)) {
		if (m.hdr.type != R2CC_CTRL_BATCH) {
			saw(&m, seen, n, lo, hi);
			continue;
		}
		for (off = 0; r2cc_ctrl_batch_next(&m, &off, &one);)
			saw(&one, seen, n, lo, hi);
	}
}

/* Waits (5 s at most) for the HELLO on the new channel to be taken and
 * the frames moved there */
static void moved_on(void)
{
	struct r2cc_chan_stats st;
	int n;

	for (n = 0; n < 100; n++) {
		r2cc_chan_get_stats(&st);
		if (st.stalled)
			return;
		usleep(50 * 1000);
	}
	cr_assert_fail("no move to the new channel");
}

/* The peer (@id) calls our direct port, naming @addr: the fd */
static int peer_calls(const struct r2cc_ctrl_key *key, uint64_t id,
		      const struct r2cc_ctrl_addr *addr, int naddr)
{
	struct r2cc_ctrl_msg m;
	int fd = dial_us();

	say_hello(fd, key, id, 1, addr, naddr);
	read_frame(fd, key, &m);
	cr_assert_eq(m.hdr.type, R2CC_CTRL_HELLO);
	return fd;
}

/* The channel's call to the peer, on @lfd: its HELLO read (into @m) and
 * answered, the frames moved there. The call's fd. */
static int take_call(int lfd, const struct r2cc_ctrl_key *key, uint64_t id,
		     struct r2cc_ctrl_msg *m)
{
	int fd = accept(lfd, NULL, NULL);

	cr_assert_geq(fd, 0);
	read_frame(fd, key, m);
	cr_assert_eq(m->hdr.type, R2CC_CTRL_HELLO);
	cr_assert_eq(m->hdr.receiver, id);
	say_hello(fd, key, id, 2, NULL, 0);
	moved_on();
	return fd;
}

/* A peer reading too slowly on its first channel leaves frames in TCP's
 * hands there; that channel stalls: the frames go on the second, those
 * the first may not have delivered first, and the union is every frame,
 * each channel's in order. */
Test(chan_stall, frames_move_to_the_peers_other_channel)
{
	struct r2cc_ctrl_key key = job_key();
	const uint64_t id = 0x5eed0000cafeULL;
	enum { N = 2000 };
	bool seen[N] = { false };
	struct r2cc_chan_stats st;
	int fd1, fd2, i, lo1, hi1, lo2, hi2;

	start();
	fd1 = fake_peer_buf(&key, id, 1, 4096);
	fd2 = fake_peer(&key, id, 2);
	for (i = 0; i < N; i++)
		keepalive(id, (uint64_t)i);
	usleep(300 * 1000); /* on fd1, what its window takes */
	stalled_port = local_port(fd1);
	r2cc_chan_test_stall_probe(probe);
	drain(fd2, &key, seen, N, &lo2, &hi2);
	drain(fd1, &key, seen, N, &lo1, &hi1);
	cr_assert_eq(hi2, N - 1, "the second channel ends at %d", hi2);
	cr_assert_geq(lo1, 0, "nothing on the first channel");
	cr_assert_leq(lo2, hi1 + 1,
		      "a gap: the first ends at %d, the second "
		      "starts at %d",
		      hi1, lo2);
	for (i = 0; i < N; i++)
		cr_assert(seen[i], "frame %d never came", i);
	r2cc_chan_get_stats(&st);
	cr_assert_eq(st.stalled, 1);
	cr_assert_gt(st.resent, 0);
	/* from now on the second channel carries them */
	keepalive(id, 7);
	drain(fd2, &key, seen, N, &lo2, &hi2);
	cr_assert_eq(lo2, 7);
	r2cc_chan_test_stall_probe(NULL);
	close(fd1);
	close(fd2);
	r2cc_chan_stop();
}

/* A peer with one channel, stalled: the channel calls it at another of
 * its addresses (the HELLO's), says HELLO there and moves the frames. */
Test(chan_stall, a_peer_with_no_other_channel_is_called_again)
{
	struct r2cc_ctrl_key key = job_key();
	const uint64_t id = 0x5eed0000f00dULL;
	struct r2cc_ctrl_addr addr[2];
	struct sockaddr_in sa;
	struct r2cc_ctrl_msg m;
	bool seen[4] = { false };
	int lfd, fd1, fd2, lo, hi;

	start();
	/* the peer listens on 127.0.0.2 too; its HELLO names both */
	lfd = peer_listens(&sa);
	addr_at(&addr[0], R2CC_CTRL_RAIL_MGMT, 1, &sa);
	addr_at(&addr[1], 1, 2, &sa);
	fd1 = peer_calls(&key, id, addr, 2);
	keepalive(id, 0);
	keepalive(id, 1);
	stalled_port = local_port(fd1);
	r2cc_chan_test_stall_probe(probe);
	/* the call comes to 127.0.0.2 (127.0.0.1 is the stalled one's) */
	fd2 = take_call(lfd, &key, id, &m);
	keepalive(id, 3);
	drain(fd2, &key, seen, 4, &lo, &hi);
	cr_assert_eq(hi, 3, "frames after the call go on it (last %d)", hi);
	r2cc_chan_test_stall_probe(NULL);
	close(fd1);
	close(fd2);
	close(lfd);
	r2cc_chan_stop();
}

/* A peer whose one channel is from rail 0 here; rail 0 goes down: the
 * channel calls the peer at once, not at its rail 0 address nor at the
 * old one, says the call replaces the old channel, and moves the frames.
 * (No stall probe: TCP on loopback never backs off.) */
Test(chan_stall, a_channel_from_a_rail_that_went_down_is_replaced_at_once)
{
	struct r2cc_ctrl_key key = job_key();
	const uint64_t id = 0x5eed0000beefULL;
	struct r2cc_ctrl_addr addr[3];
	struct sockaddr_in sa;
	struct pollfd pl;
	struct r2cc_ctrl_msg m;
	bool seen[4] = { false };
	int lfd, fd1, fd2, lo, hi;

	start();
	lfd = peer_listens(&sa);
	/* its addresses: the old channel's, one on rail 0 (nobody listens
	 * there), one on rail 1 */
	addr_at(&addr[0], R2CC_CTRL_RAIL_MGMT, 1, &sa);
	addr_at(&addr[1], 0, 3, &sa);
	addr_at(&addr[2], 1, 2, &sa);
	fd1 = peer_calls(&key, id, addr, 3);
	keepalive(id, 0);
	stalled_port = local_port(fd1);
	r2cc_chan_test_rail_probe(rail_probe);
	r2cc_chan_rail_down(1); /* not its rail: nothing */
	pl = (struct pollfd){ .fd = lfd, .events = POLLIN };
	cr_assert_eq(poll(&pl, 1, 600), 0, "a call for rail 1's fall");
	r2cc_chan_rail_down(0);
	cr_assert_eq(poll(&pl, 1, 3000), 1, "no call at rail 1's address");
	fd2 = take_call(lfd, &key, id, &m);
	cr_assert(m.hello.flags & R2CC_CTRL_HELLO_REPLACES,
		  "the call says it replaces the channel");
	keepalive(id, 3);
	drain(fd1, &key, seen, 4, &lo, &hi);
	cr_assert_eq(hi, 0, "the old one had delivered frame 0 (last %d)", hi);
	drain(fd2, &key, seen, 4, &lo, &hi);
	cr_assert_eq(hi, 3, "frames after the call go on it (last %d)", hi);
	r2cc_chan_test_rail_probe(NULL);
	close(fd1);
	close(fd2);
	close(lfd);
	r2cc_chan_stop();
}

/* A peer calls again, its call saying it replaces its channel (its rail
 * went down there): our frames follow it; a second channel that does not
 * say so leaves them where they are. */
Test(chan_stall, a_peer_that_replaces_its_channel_is_followed)
{
	struct r2cc_ctrl_key key = job_key();
	const uint64_t id = 0x5eed0000d00dULL;
	struct r2cc_ctrl_msg m;
	bool seen[8] = { false };
	int fd1, fd2, fd3, lo, hi;

	start();
	fd1 = fake_peer(&key, id, 1);
	fd2 = dial_us();
	say_hello(fd2, &key, id, 2, NULL, 0);
	read_frame(fd2, &key, &m);
	cr_assert_eq(m.hdr.type, R2CC_CTRL_HELLO);
	keepalive(id, 1);
	drain(fd1, &key, seen, 8, &lo, &hi);
	cr_assert_eq(hi, 1, "frames stay on the first channel");
	fd3 = dial_us();
	say_hello_flags(fd3, &key, id, 3, NULL, 0, R2CC_CTRL_HELLO_REPLACES);
	read_frame(fd3, &key, &m);
	cr_assert_eq(m.hdr.type, R2CC_CTRL_HELLO);
	keepalive(id, 5);
	drain(fd3, &key, seen, 8, &lo, &hi);
	cr_assert_eq(hi, 5, "frames follow the replacing call (last %d)", hi);
	close(fd1);
	close(fd2);
	close(fd3);
	r2cc_chan_stop();
}

/* A frame that comes twice (sent again after a stall) is taken once; the
 * connection stays open and the next frame is taken. */
Test(chan_stall, a_frame_sent_twice_is_taken_once)
{
	struct r2cc_ctrl_key key = job_key();
	const uint64_t id = 0x5eed0000d00dULL;
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	struct r2cc_chan_stats st;
	struct r2cc_ctrl_msg m;
	int fd, n, before;

	start();
	fd = fake_peer(&key, id, 1);
	pthread_mutex_lock(&lock);
	before = msgs;
	pthread_mutex_unlock(&lock);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_KEEPALIVE;
	m.hdr.sender = id;
	m.hdr.receiver = r2cc_chan_self();
	m.hdr.seq = 2;
	m.keepalive_ns = 21;
	n = r2cc_ctrl_encode(&key, &m, buf, sizeof(buf));
	cr_assert_gt(n, 0);
	cr_assert_eq(write(fd, buf, (size_t)n), n);
	cr_assert_eq(write(fd, buf, (size_t)n), n);
	m.hdr.seq = 3;
	m.keepalive_ns = 22;
	n = r2cc_ctrl_encode(&key, &m, buf, sizeof(buf));
	cr_assert_eq(write(fd, buf, (size_t)n), n);
	cr_assert(wait_for(&msgs, before + 2), "frames not delivered");
	usleep(200 * 1000);
	pthread_mutex_lock(&lock);
	cr_assert_eq(msgs, before + 2, "%d messages", msgs - before);
	cr_assert_eq(got_msg.keepalive_ns, 22);
	pthread_mutex_unlock(&lock);
	r2cc_chan_get_stats(&st);
	cr_assert_eq(st.duplicates, 1);
	keepalive(id, 5); /* still open: it goes */
	read_frame(fd, &key, &m);
	cr_assert_eq(m.keepalive_ns, 5);
	close(fd);
	r2cc_chan_stop();
}
