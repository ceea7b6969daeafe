/* SPDX-License-Identifier: MIT */
/*
 * test_chan_frames.c - the control channel's frames and peers over
 * loopback TCP: frames stay on a peer's first channel; a reader slower
 * than a step loses nothing, one that never reads is bounded; hundreds of
 * peers are each reachable; lookups leave room for peers' calls and
 * connections past the budget are refused and counted; held sends go as
 * one batch per peer, other threads' through the channel thread; an owner
 * at work on a backlog tells its peers it lives.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "chan_fixture.h"
#include "policy.h"

/* Frames to a peer stay on the first channel open to it while a second
 * one opens (each end dialled the other): frames in flight on the first
 * would otherwise arrive after newer ones on the second, past the peer's
 * replay window. Once the first closes, the second carries them. */
Test(chan, frames_stay_on_the_first_channel_while_it_is_open)
{
	struct r2cc_ctrl_key key = job_key();
	const uint64_t id = 0x5eed0000beefULL;
	struct pollfd p = { .events = POLLIN };
	struct r2cc_ctrl_msg m;
	int fd1, fd2, i;

	start();
	fd1 = fake_peer(&key, id, 1);
	fd2 = fake_peer(&key, id, 2);
	for (i = 0; i < 8; i++) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = R2CC_CTRL_KEEPALIVE;
		m.keepalive_ns = 200 + (uint64_t)i;
		cr_assert_eq(r2cc_chan_send(id, &m), 0);
	}
	for (i = 0; i < 8; i++) {
		read_frame(fd1, &key, &m);
		cr_assert_eq(m.keepalive_ns, 200 + (uint64_t)i);
	}
	p.fd = fd2;
	cr_assert_eq(poll(&p, 1, 200), 0, "a frame on the second channel");
	close(fd1);
	usleep(200 * 1000);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_KEEPALIVE;
	m.keepalive_ns = 300;
	cr_assert_eq(r2cc_chan_send(id, &m), 0, "peer lost with one open");
	read_frame(fd2, &key, &m);
	cr_assert_eq(m.keepalive_ns, 300);
	close(fd2);
	r2cc_chan_stop();
}

struct late_reader {
	int fd, want, got, late_ms;
	struct r2cc_ctrl_key key;
};

/* Starts reading late_ms late, then takes every frame it expects, in
 * order (reads in bulk: megabytes of frames). */
static void *read_late(void *arg)
{
	const size_t size = 1 << 20;
	struct late_reader *r = arg;
	uint8_t *buf = malloc(size);
	struct pollfd p = { .fd = r->fd, .events = POLLIN };
	size_t have = 0, off = 0;
	struct r2cc_ctrl_msg m;
	int flen;

	usleep((useconds_t)r->late_ms * 1000);
	while (buf && r->got < r->want) {
		ssize_t n;

		while ((flen = r2cc_ctrl_frame_len(buf + off, have - off)) >
			       0 &&
		       have - off >= (size_t)flen) {
			if (r2cc_ctrl_decode(&r->key, buf + off, (size_t)flen,
					     &m) ||
			    m.hdr.type != R2CC_CTRL_KEEPALIVE ||
			    m.keepalive_ns != (uint64_t)r->got)
				goto out;
			r->got++;
			off += (size_t)flen;
		}
		memmove(buf, buf + off, have - off);
		have -= off;
		off = 0;
		if (r->got == r->want || poll(&p, 1, 10000) != 1)
			break;
		n = read(r->fd, buf + have, size - have);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
out:
	free(buf);
	return NULL;
}

/* 100000 frames (about 7 MiB) to a peer that reads nothing for @late_ms
 * through a small window: the channel's send buffer (4 MiB at most,
 * autotuned) fills long before. Every frame arrives, in order. */
static void slow_reader(uint64_t id, int late_ms)
{
	struct late_reader r = { .want = 100000,
				 .key = job_key(),
				 .late_ms = late_ms };
	struct r2cc_chan_stats st;
	struct r2cc_ctrl_msg m;
	pthread_t t;
	int i;

	start();
	r.fd = fake_peer_buf(&r.key, id, 1, 2048);
	cr_assert_eq(pthread_create(&t, NULL, read_late, &r), 0);
	for (i = 0; i < r.want; i++) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = R2CC_CTRL_KEEPALIVE;
		m.keepalive_ns = (uint64_t)i;
		cr_assert_eq(r2cc_chan_send(id, &m), 0, "send %d failed", i);
	}
	pthread_join(t, NULL);
	cr_assert_eq(r.got, r.want, "%d of %d frames, in order", r.got, r.want);
	r2cc_chan_get_stats(&st);
	cr_assert_eq(st.send_fail, 0);
	cr_assert_eq(st.batch_lost, 0);
	close(r.fd);
	r2cc_chan_stop();
}

Test(chan, full_send_buffer_is_waited_out, .timeout = 30)
{
	slow_reader(0x5eed0000beefULL, 300);
}

/* A peer that reads nothing for longer than a connect's bound (a burst
 * of a thousand QPs' failovers to a loaded process): its frames are kept
 * for it, not dropped with its connection. */
Test(chan, reader_slower_than_a_step_loses_nothing, .timeout = 30)
{
	slow_reader(0x5eed0000bef0ULL, MIG_CHAN_STEP_MS + 500);
}

/* A peer that never reads: what is kept for it is bounded; past
 * MIG_CHAN_OUT_MAX its connection closes, and another peer is served
 * all along. */
Test(chan, peer_that_never_reads_is_bounded, .timeout = 60)
{
	struct r2cc_ctrl_key key = job_key();
	const uint64_t mute = 0x5eed0000dead, other = 0x5eed0000a11e;
	struct r2cc_chan_stats st;
	struct r2cc_ctrl_msg m;
	int fd_mute, fd_other, i, ret = 0;

	start();
	fd_mute = fake_peer_buf(&key, mute, 1, 2048);
	fd_other = fake_peer(&key, other, 1);
	/* BATCHes of 100 FAILOVERs: well past MIG_CHAN_OUT_MAX and the
	 * socket buffers in all, the outbox drained between them */
	for (i = 0; i < 2000000 && !ret; i++) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = R2CC_CTRL_FAILOVER;
		m.failover.qpn = (uint32_t)i;
		m.failover.reason = R2CC_CTRL_WHY_CQ_ERROR;
		ret = r2cc_chan_send(mute, &m);
		if (i % 10000 == 9999) {
			memset(&m, 0, sizeof(m));
			m.hdr.type = R2CC_CTRL_KEEPALIVE;
			m.keepalive_ns = (uint64_t)i;
			cr_assert_eq(r2cc_chan_send(other, &m), 0);
			read_frame(fd_other, &key, &m);
			cr_assert_eq(m.keepalive_ns, (uint64_t)i,
				     "the other peer waited on the mute one");
		}
	}
	cr_assert_eq(ret, -ENOTCONN, "the mute peer's connection kept open");
	r2cc_chan_get_stats(&st);
	cr_assert_geq(st.send_fail, 1);
	close(fd_mute);
	close(fd_other);
	r2cc_chan_stop();
}

/* Hundreds of peer processes (an all-to-all job's): each one's channel
 * opens, its frames reach the hooks, and ours reach it. */
#define NPEERS 300
Test(chan, hundreds_of_peers_each_reachable, .timeout = 60)
{
	struct r2cc_ctrl_key key = job_key();
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	static int fd[NPEERS];
	struct r2cc_ctrl_msg m;
	int i, len;

	nofile(4 * (NPEERS + 64) + NPEERS);
	msgs = 0;
	start();
	for (i = 0; i < NPEERS; i++)
		fd[i] = fake_peer(&key, 0x7e5700000000ULL + (uint64_t)i, 1);
	for (i = 0; i < NPEERS; i++) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = R2CC_CTRL_KEEPALIVE;
		m.hdr.sender = 0x7e5700000000ULL + (uint64_t)i;
		m.hdr.receiver = r2cc_chan_self();
		m.hdr.seq = 2;
		m.keepalive_ns = (uint64_t)i;
		len = r2cc_ctrl_encode(&key, &m, buf, sizeof(buf));
		cr_assert_gt(len, 0);
		cr_assert_eq(write(fd[i], buf, (size_t)len), len);
	}
	cr_assert(wait_for(&msgs, NPEERS), "%d of %d peers' frames", msgs,
		  NPEERS);
	for (i = 0; i < NPEERS; i++) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = R2CC_CTRL_KEEPALIVE;
		m.keepalive_ns = 1000 + (uint64_t)i;
		cr_assert_eq(r2cc_chan_send(0x7e5700000000ULL + (uint64_t)i,
					    &m),
			     0, "peer %d not reachable", i);
	}
	for (i = 0; i < NPEERS; i++) {
		read_frame(fd[i], &key, &m);
		cr_assert_eq(m.keepalive_ns, 1000 + (uint64_t)i);
		close(fd[i]);
	}
	r2cc_chan_stop();
}

/* Takes every connection to 127.0.0.2's rendezvous port for 1.5 s and
 * answers none: counts them. */
struct sink {
	int lfd, n, fd[64];
};

static void *sink_rendezvous(void *arg)
{
	struct sink *k = arg;
	struct pollfd p = { .fd = k->lfd, .events = POLLIN };
	double end = 0;
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	end = (double)ts.tv_sec + ts.tv_nsec / 1e9 + 1.5;
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if ((double)ts.tv_sec + ts.tv_nsec / 1e9 >= end)
			break;
		if (poll(&p, 1, 50) == 1 && k->n < 64)
			k->fd[k->n++] = accept(k->lfd, NULL, NULL);
	}
	return NULL;
}

/* Lookups take half the connections' budget at most: a process that
 * binds hundreds of QPs at once still takes its peers' calls (the rest
 * of its lookups wait their turn). */
Test(chan, lookups_leave_room_for_peers_calls, .timeout = 30)
{
	struct r2cc_ctrl_key key = job_key();
	struct sink k = { .n = 0 };
	int i, fd;
	pthread_t t;

	nofile(128); /* a budget of 32 connections, 16 lookups */
	start();
	k.lfd = other_rendezvous(64);
	cr_assert_eq(pthread_create(&t, NULL, sink_rendezvous, &k), 0);
	for (i = 0; i < 40; i++) {
		struct r2cc_ctrl_qp_ref q = loopback_ref(100 + (uint32_t)i);

		memcpy(q.gid + 12, "\x7f\0\0\x02", 4);
		cr_assert_eq(r2cc_chan_resolve(&q, 500 + (uint64_t)i), 0);
	}
	usleep(500 * 1000);
	/* a peer calls while 40 lookups wait or hang: it is answered */
	fd = fake_peer(&key, 0x5eed0000cafeULL, 1);
	pthread_join(t, NULL);
	cr_assert_gt(k.n, 0, "no lookup dialled");
	cr_assert_leq(k.n, 16, "%d lookups at once", k.n);
	close(fd);
	for (i = 0; i < k.n; i++)
		close(k.fd[i]);
	close(k.lfd);
	r2cc_chan_stop();
}

/* Connections past the budget (a quarter of RLIMIT_NOFILE) are refused
 * and counted, not taken from the program's descriptors. */
Test(chan, connections_past_the_budget_are_refused_and_counted, .timeout = 30)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct r2cc_chan_stats st;
	int fd[48], i, t;

	nofile(128); /* a budget of 32 */
	start();
	a.sin_port = htons(r2cc_chan_port());
	for (i = 0; i < 48; i++) {
		fd[i] = socket(AF_INET, SOCK_STREAM, 0);
		cr_assert_geq(fd[i], 0);
		cr_assert_eq(connect(fd[i], (struct sockaddr *)&a, sizeof(a)),
			     0);
	}
	for (t = 0; t < 100; t++) {
		r2cc_chan_get_stats(&st);
		if (st.conn_budget >= 16)
			break;
		usleep(50 * 1000);
	}
	cr_assert_eq(st.conn_budget, 16, "%llu refused",
		     (unsigned long long)st.conn_budget);
	for (i = 0; i < 48; i++)
		close(fd[i]);
	r2cc_chan_stop();
}

/* Messages from @fd until @want of them came (a BATCH's or lone ones),
 * their qpn fields in @qpn: the frames they took. */
static int read_msgs(int fd, const struct r2cc_ctrl_key *key, uint32_t *qpn,
		     int want)
{
	struct r2cc_ctrl_msg m, one;
	int got = 0, frames = 0;
	uint32_t off;

	while (got < want) {
		read_frame(fd, key, &m);
		frames++;
		if (m.hdr.type != R2CC_CTRL_BATCH) {
			qpn[got++] = m.failover.qpn;
			continue;
		}
		for (off = 0;
		     got < want && r2cc_ctrl_batch_next(&m, &off, &one);)
			qpn[got++] = one.failover.qpn;
	}
	return frames;
}

static void fo_send(uint64_t id, uint32_t qpn)
{
	struct r2cc_ctrl_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_FAILOVER;
	m.failover.qpn = qpn;
	m.failover.reason = R2CC_CTRL_WHY_CARRIER;
	cr_assert_eq(r2cc_chan_send(id, &m), 0);
}

static void *send_two(void *arg)
{
	fo_send(*(uint64_t *)arg, 2);
	return NULL;
}

/* Held sends to one peer go out together at the flush, in a frame or
 * two (one held message as itself); a send of another thread made
 * after a held one comes after it; a BATCH received reaches the hooks
 * message by message. */
Test(chan, held_sends_go_as_one_batch_per_peer, .timeout = 30)
{
	struct r2cc_ctrl_key key = job_key();
	static uint64_t id = 0x5eed0000ba7cULL;
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	static uint32_t qpn[500];
	struct r2cc_ctrl_batch b = { 0 };
	struct r2cc_ctrl_msg m, one;
	pthread_t t;
	int fd, i, len, frames;

	msgs = 0;
	start();
	fd = fake_peer(&key, id, 1);
	r2cc_chan_hold();
	for (i = 0; i < 500; i++)
		fo_send(id, (uint32_t)i);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_FAILOVER;
	cr_assert_eq(r2cc_chan_send(0x5eed0000deadULL, &m), -ENOTCONN,
		     "a peer with no connection: as a send says");
	r2cc_chan_flush();
	frames = read_msgs(fd, &key, qpn, 500);
	for (i = 0; i < 500; i++)
		cr_assert_eq(qpn[i], (uint32_t)i, "out of order");
	cr_assert_leq(frames, 3, "%d frames for 500 held messages", frames);
	r2cc_chan_hold();
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_FAILBACK;
	m.failback.qpn = 9;
	cr_assert_eq(r2cc_chan_send(id, &m), 0);
	r2cc_chan_flush();
	read_frame(fd, &key, &m);
	cr_assert_eq(m.hdr.type, R2CC_CTRL_FAILBACK, "one: not a BATCH");
	cr_assert_eq(m.failback.qpn, 9);
	/* held 1, then another thread's 2: 1 first */
	r2cc_chan_hold();
	fo_send(id, 1);
	cr_assert_eq(pthread_create(&t, NULL, send_two, &id), 0);
	pthread_join(t, NULL);
	r2cc_chan_flush();
	read_msgs(fd, &key, qpn, 2);
	cr_assert_eq(qpn[0], 1, "a held send overtaken");
	cr_assert_eq(qpn[1], 2);

	/* the peer's BATCH of three */
	for (i = 0; i < 3; i++) {
		memset(&one, 0, sizeof(one));
		one.hdr.type = R2CC_CTRL_FAILOVER_ACK;
		one.failover.qpn = 0x100u + (uint32_t)i;
		one.failover.reason = R2CC_CTRL_WHY_PEER;
		cr_assert_eq(r2cc_ctrl_batch_add(&b, &one), 0);
	}
	memset(&m, 0, sizeof(m));
	r2cc_ctrl_batch_msg(&b, &m);
	m.hdr.sender = id;
	m.hdr.receiver = r2cc_chan_self();
	m.hdr.seq = 2;
	len = r2cc_ctrl_encode(&key, &m, buf, sizeof(buf));
	cr_assert_gt(len, 0);
	cr_assert_eq(write(fd, buf, (size_t)len), len);
	cr_assert(wait_for(&msgs, 3), "%d of 3 messages", msgs);
	cr_assert_eq(got_msg.hdr.type, R2CC_CTRL_FAILOVER_ACK);
	cr_assert_eq(got_msg.failover.qpn, 0x102, "the last, in order");
	cr_assert_eq(got_peer, id);
	r2cc_ctrl_batch_free(&b);
	close(fd);
	r2cc_chan_stop();
}

/* A message about a QP sent from another thread than the channel's (the
 * program's) is handed to the channel thread: every one arrives, in
 * order, in as few frames as it gathered. */
Test(chan, other_threads_sends_go_through_the_channel_thread, .timeout = 30)
{
	struct r2cc_ctrl_key key = job_key();
	const uint64_t id = 0x5eed0000b0c5ULL;
	struct r2cc_chan_stats st;
	struct r2cc_ctrl_msg m, one;
	int fd, i, got = 0, frames = 0;
	uint32_t off;

	start();
	fd = fake_peer(&key, id, 1);
	for (i = 0; i < 100; i++) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = R2CC_CTRL_FAILOVER;
		m.failover.qpn = (uint32_t)i;
		m.failover.reason = R2CC_CTRL_WHY_CQ_ERROR;
		cr_assert_eq(r2cc_chan_send(id, &m), 0);
	}
	while (got < 100) {
		read_frame(fd, &key, &m);
		frames++;
		if (m.hdr.type != R2CC_CTRL_BATCH) {
			cr_assert_eq(m.hdr.type, R2CC_CTRL_FAILOVER);
			cr_assert_eq(m.failover.qpn, (uint32_t)got++);
			continue;
		}
		for (off = 0; r2cc_ctrl_batch_next(&m, &off, &one);)
			cr_assert_eq(one.failover.qpn, (uint32_t)got++,
				     "out of order");
	}
	cr_assert_eq(got, 100);
	r2cc_chan_get_stats(&st);
	cr_assert_eq(st.batch_lost, 0);
	cr_assert_leq(frames, 100);
	close(fd);
	r2cc_chan_stop();
}

/* The owner at work on a backlog (busy_since): each peer with an open
 * channel hears a KEEPALIVE meanwhile, and none while it waits. */
static _Atomic uint64_t busy_from;

static uint64_t busy_since(void)
{
	return busy_from;
}

Test(chan, a_busy_owner_tells_its_peers_it_lives, .timeout = 30)
{
	static const struct r2cc_chan_hooks busy_hooks = {
		on_msg, on_resolved, lookup, .busy_since = busy_since
	};
	struct r2cc_ctrl_key key = job_key();
	struct r2cc_ctrl_msg m;
	struct pollfd p;
	struct timespec ts;
	int fd;

	start_with(&busy_hooks);
	fd = fake_peer(&key, 0x5eed0000beefULL, 1);
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 1500), 0, "a frame while the owner waits");
	clock_gettime(CLOCK_MONOTONIC, &ts);
	busy_from = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec -
		    2000000000ULL;
	read_frame(fd, &key, &m);
	cr_assert_eq(m.hdr.type, R2CC_CTRL_KEEPALIVE);
	read_frame(fd, &key, &m);
	cr_assert_eq(m.hdr.type, R2CC_CTRL_KEEPALIVE, "not said again");
	busy_from = 0;
	close(fd);
	r2cc_chan_stop();
}
