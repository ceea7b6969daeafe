/* SPDX-License-Identifier: MIT */
/*
 * test_chan.c - the control channel over loopback TCP: a process resolves
 * a (GID, QPN) through its node's rendezvous port, opens a direct channel
 * after HELLO, and exchanges authenticated frames; a wrong key or a GID
 * nobody owns ends the resolve with no peer, in bounded time. A peer with
 * two connections open (both processes dialled) stays reachable when one
 * of them closes. A LOOKUP the rendezvous took and never answered is
 * asked again on a fresh connection. Hundreds of peers are each
 * reachable; connections past the budget are refused and counted. An
 * owner at work on a backlog tells its peers it lives. Resolves of many
 * QPs of one owner make one call to it; when that call fails, they all
 * end. A call the owner took is waited for past the step bound.
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
#include "policy.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int resolved, msgs, lookups;
static uint64_t got_peer, got_cookie;
static struct r2cc_ctrl_msg got_msg;

static void on_msg(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	pthread_mutex_lock(&lock);
	got_peer = peer;
	got_msg = *m;
	msgs++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void on_resolved(uint64_t cookie, uint64_t peer)
{
	pthread_mutex_lock(&lock);
	got_cookie = cookie;
	got_peer = peer;
	resolved++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

/* A QPN another process owns (OWNER_ID, its direct port owner_port) */
#define OWNER_QPN 9
#define OWNER_ID 0x0a11ce0000000009ULL
static uint16_t owner_port;

/* This process owns QPN 7 (and nothing else); it answers for itself, and
 * for OWNER_QPN with its owner. */
static void lookup(const struct r2cc_ctrl_qp_ref *q,
		   struct r2cc_ctrl_lookup_reply *r)
{
	__atomic_add_fetch(&lookups, 1, __ATOMIC_SEQ_CST);
	if (q->qpn != 7 && q->qpn != OWNER_QPN)
		return;
	r->found = 1;
	r->owner = q->qpn == 7 ? r2cc_chan_self() : OWNER_ID;
	r->pid = (uint32_t)getpid();
	r->naddr = 1;
	r->addr[0].family = 4;
	r->addr[0].rail = R2CC_CTRL_RAIL_MGMT;
	r->addr[0].port = q->qpn == 7 ? r2cc_chan_port() : owner_port;
	memcpy(r->addr[0].addr, "\x7f\0\0\x01", 4);
}

static const struct r2cc_chan_hooks hooks = { on_msg, on_resolved, lookup };

/* Wait until *@v reaches @n, at most 10 s. */
static bool wait_for(int *v, int n)
{
	struct timespec ts;
	int ok;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&lock);
	while (*v < n && pthread_cond_timedwait(&cond, &lock, &ts) != ETIMEDOUT)
		;
	ok = *v >= n;
	pthread_mutex_unlock(&lock);
	return ok;
}

static uint16_t port(void)
{
	/* A port per test process, away from the lab's and the default,
	 * below the kernel's ephemeral ports (32768 on): a test binds its
	 * direct port there, and a parallel one's may hold it. */
	return (uint16_t)(20000 + getpid() % 12000);
}

/* The job key every test process shares (self 0: frames to anyone). */
static struct r2cc_ctrl_key job_key(void)
{
	struct r2cc_ctrl_key key;
	uint8_t secret[32];

	memset(secret, 0x5a, sizeof(secret));
	cr_assert_eq(r2cc_ctrl_key_derive(&key, secret, sizeof(secret), 9), 0);
	return key;
}

static void start_with(const struct r2cc_chan_hooks *h)
{
	struct r2cc_chan_cfg cfg = { .port = port(), .pref_if = "" };
	struct r2cc_ctrl_key key = job_key();

	r2cc_log_set_level(R2CC_LOG_DEBUG);
	cr_assert_eq(r2cc_chan_start(&cfg, &key, h), 0);
	cr_assert(r2cc_chan_running());
	cr_assert_neq(r2cc_chan_self(), 0);
}

static void start(void)
{
	start_with(&hooks);
}

static struct r2cc_ctrl_qp_ref loopback_ref(uint32_t qpn)
{
	struct r2cc_ctrl_qp_ref q = { .qpn = qpn };

	q.gid[10] = q.gid[11] = 0xff;
	memcpy(q.gid + 12, "\x7f\0\0\x01", 4);
	return q;
}

Test(chan, resolve_self_then_send)
{
	struct r2cc_ctrl_qp_ref q = loopback_ref(7);
	struct r2cc_ctrl_msg m;
	struct r2cc_chan_stats st;

	start();
	cr_assert_eq(r2cc_chan_resolve(&q, 42), 0);
	cr_assert(wait_for(&resolved, 1), "no resolve within 10 s");
	cr_assert_eq(got_cookie, 42);
	cr_assert_eq(got_peer, r2cc_chan_self());
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_KEEPALIVE;
	m.keepalive_ns = 12345;
	cr_assert_eq(r2cc_chan_send(got_peer, &m), 0);
	cr_assert(wait_for(&msgs, 1), "frame not delivered");
	cr_assert_eq(got_msg.hdr.type, R2CC_CTRL_KEEPALIVE);
	cr_assert_eq(got_msg.keepalive_ns, 12345);
	r2cc_chan_get_stats(&st);
	cr_assert_eq(st.rx.unauthentic + st.rx.malformed + st.rx.replayed, 0);
	cr_assert_geq(lookups, 1);
	r2cc_chan_stop();
	cr_assert(!r2cc_chan_running());
	cr_assert_eq(r2cc_chan_send(got_peer, &m), -ENOTCONN);
}

Test(chan, unknown_qp_resolves_to_nobody)
{
	struct r2cc_ctrl_qp_ref q = loopback_ref(8);

	start();
	cr_assert_eq(r2cc_chan_resolve(&q, 5), 0);
	cr_assert(wait_for(&resolved, 1), "no answer within 10 s");
	cr_assert_eq(got_cookie, 5);
	cr_assert_eq(got_peer, 0);
	r2cc_chan_stop();
}

Test(chan, unreachable_rendezvous_is_bounded)
{
	struct r2cc_ctrl_qp_ref q = loopback_ref(7);

	start();
	/* 192.0.2.1 (TEST-NET-1): no rendezvous there; unreachable at
	 * once, or the connect step's bound ends it. */
	memcpy(q.gid + 12, "\xc0\x00\x02\x01", 4);
	cr_assert_eq(r2cc_chan_resolve(&q, 6), 0);
	cr_assert(wait_for(&resolved, 1), "unbounded resolve");
	cr_assert_eq(got_peer, 0);
	r2cc_chan_stop();
}

/* A listener that takes one connection and never answers it, then goes
 * away: a process stuck exiting, still in the rendezvous port's group. */
/* A listener on 127.0.0.2's rendezvous port: bound to that address, it
 * takes its connections before the channel's own (wildcard) rendezvous
 * listener. */
static int other_rendezvous(int backlog)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port()) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	memcpy(&sin.sin_addr, "\x7f\0\0\x02", 4);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	cr_assert_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(listen(fd, backlog), 0);
	return fd;
}

struct mute {
	int lfd, cfd;
};

static void *mute_rendezvous(void *arg)
{
	struct mute *m = arg;
	struct pollfd p = { .fd = m->lfd, .events = POLLIN };

	if (poll(&p, 1, 10000) == 1)
		m->cfd = accept(m->lfd, NULL, NULL);
	close(m->lfd);
	return NULL;
}

Test(chan, unanswered_lookup_is_asked_again_on_a_fresh_connection,
     .timeout = 30)
{
	struct r2cc_ctrl_qp_ref q = loopback_ref(7);
	struct mute m = { .cfd = -1 };
	pthread_t t;

	start();
	m.lfd = other_rendezvous(4);
	cr_assert_eq(pthread_create(&t, NULL, mute_rendezvous, &m), 0);
	memcpy(q.gid + 12, "\x7f\0\0\x02", 4);
	cr_assert_eq(r2cc_chan_resolve(&q, 43), 0);
	cr_assert(wait_for(&resolved, 1), "no resolve within 10 s");
	pthread_join(t, NULL);
	cr_assert_geq(m.cfd, 0, "the first LOOKUP went to the mute listener");
	cr_assert_eq(got_cookie, 43);
	cr_assert_eq(got_peer, r2cc_chan_self(),
		     "asked again, the node's own rendezvous answered");
	cr_assert_geq(lookups, 1);
	close(m.cfd);
	r2cc_chan_stop();
}

/* A rendezvous on 127.0.0.2 that answers the first LOOKUP it takes with a
 * reply of its own sender id naming itself the owner, its seq @skew off
 * the LOOKUP's. */
struct liar {
	int lfd, cfd, skew;
	uint64_t asked;
};

static int get_frame(int fd, const struct r2cc_ctrl_key *key,
		     struct r2cc_ctrl_msg *m);

static void *lying_rendezvous(void *arg)
{
	struct liar *l = arg;
	struct pollfd p = { .fd = l->lfd, .events = POLLIN };
	struct r2cc_ctrl_key key = job_key();
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	struct r2cc_ctrl_msg m, rep;
	int len;

	if (poll(&p, 1, 10000) == 1)
		l->cfd = accept(l->lfd, NULL, NULL);
	close(l->lfd);
	if (l->cfd < 0 || get_frame(l->cfd, &key, &m) ||
	    m.hdr.type != R2CC_CTRL_LOOKUP)
		return NULL;
	l->asked = m.hdr.seq;
	memset(&rep, 0, sizeof(rep));
	rep.hdr.type = R2CC_CTRL_LOOKUP_REPLY;
	rep.hdr.sender = 0x11a7000000000001ULL;
	rep.hdr.receiver = m.hdr.sender;
	rep.hdr.seq = m.hdr.seq + (uint64_t)l->skew;
	rep.lookup_reply.what = m.lookup;
	rep.lookup_reply.found = 1;
	rep.lookup_reply.owner = rep.hdr.sender;
	len = r2cc_ctrl_encode(&key, &rep, buf, sizeof(buf));
	if (len > 0 && write(l->cfd, buf, (size_t)len) != len)
		return NULL;
	return NULL;
}

/* A lookup's answer must carry the LOOKUP's own seq (new for each): one
 * with any other, however new for its sender, is dropped and the lookup
 * asked again (the node's own rendezvous answers then). */
Test(chan, lookup_answer_with_another_seq_is_dropped, .timeout = 30)
{
	struct r2cc_ctrl_qp_ref q = loopback_ref(7);
	struct liar l = { .cfd = -1, .skew = 1 };
	pthread_t t;

	start();
	l.lfd = other_rendezvous(4);
	cr_assert_eq(pthread_create(&t, NULL, lying_rendezvous, &l), 0);
	memcpy(q.gid + 12, "\x7f\0\0\x02", 4);
	cr_assert_eq(r2cc_chan_resolve(&q, 44), 0);
	cr_assert(wait_for(&resolved, 1), "no resolve within 10 s");
	pthread_join(t, NULL);
	cr_assert_neq(l.asked, 0, "the first LOOKUP went to the liar");
	cr_assert_eq(got_cookie, 44);
	cr_assert_eq(got_peer, r2cc_chan_self(),
		     "the liar's answer (seq %+d) was taken", l.skew);
	close(l.cfd);
	r2cc_chan_stop();
}

static int watched;
static void *watched_arg;

static void on_watched(int fd, void *arg)
{
	char c;

	/* (the channel's thread: no assertion here, the test checks) */
	while (read(fd, &c, 1) == 1)
		;
	pthread_mutex_lock(&lock);
	watched_arg = arg;
	watched++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

Test(chan, watched_fd_is_served_until_stop)
{
	int p[2];

	cr_assert_eq(r2cc_chan_watch(0, on_watched, &watched), -ENOTCONN);
	cr_assert_eq(pipe2(p, O_NONBLOCK), 0);
	start();
	cr_assert_eq(r2cc_chan_watch(p[0], on_watched, &watched), 0);
	cr_assert_eq(watched, 0);
	cr_assert_eq(write(p[1], "x", 1), 1);
	cr_assert(wait_for(&watched, 1), "not called within 10 s");
	cr_assert_eq(watched_arg, &watched);
	cr_assert_eq(write(p[1], "y", 1), 1);
	cr_assert(wait_for(&watched, 2), "not called again");
	r2cc_chan_stop();
	/* The fd stays the caller's: still open. */
	cr_assert_eq(write(p[1], "z", 1), 1);
	close(p[0]);
	close(p[1]);
}

/* One whole frame from @fd within 10 s, decoded into @m: 0 or -1 (no
 * assertion: test threads use it too). A BATCH's entries stay in this
 * thread's buffer until its next frame. */
static int get_frame(int fd, const struct r2cc_ctrl_key *key,
		     struct r2cc_ctrl_msg *m)
{
	static __thread uint8_t buf[R2CC_CTRL_FRAME_MAX];
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t have = 0;
	int flen = -EAGAIN;

	while ((flen = r2cc_ctrl_frame_len(buf, have)) == -EAGAIN ||
	       (flen > 0 && have < (size_t)flen)) {
		/* byte by byte: the next frame stays in the socket */
		if (poll(&p, 1, 10000) != 1 || read(fd, buf + have, 1) != 1)
			return -1;
		have++;
	}
	return flen > 0 && !r2cc_ctrl_decode(key, buf, have, m) ? 0 : -1;
}

static void read_frame(int fd, const struct r2cc_ctrl_key *key,
		       struct r2cc_ctrl_msg *m)
{
	cr_assert_eq(get_frame(fd, key, m), 0, "no whole frame within 10 s");
}

/* A peer (@id) dialling our direct port: its HELLO, then our answer;
 * @rcvbuf: its receive buffer (0: the default). */
static int fake_peer_buf(const struct r2cc_ctrl_key *key, uint64_t id,
			 uint64_t seq, int rcvbuf)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(r2cc_chan_port()),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	struct r2cc_ctrl_msg m;
	int fd = socket(AF_INET, SOCK_STREAM, 0), len;

	cr_assert_geq(fd, 0);
	if (rcvbuf)
		cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
					sizeof(rcvbuf)),
			     0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_HELLO;
	m.hdr.sender = id;
	m.hdr.receiver = r2cc_chan_self();
	m.hdr.seq = seq;
	m.hello.ver_min = m.hello.ver_max = R2CC_CTRL_VERSION;
	m.hello.pid = (uint32_t)getpid();
	len = r2cc_ctrl_encode(key, &m, buf, sizeof(buf));
	cr_assert_gt(len, 0);
	cr_assert_eq(write(fd, buf, (size_t)len), len);
	read_frame(fd, key, &m);
	cr_assert_eq(m.hdr.type, R2CC_CTRL_HELLO);
	return fd;
}

static int fake_peer(const struct r2cc_ctrl_key *key, uint64_t id, uint64_t seq)
{
	return fake_peer_buf(key, id, seq, 0);
}

Test(chan, peer_stays_reachable_while_one_connection_is_open)
{
	struct r2cc_ctrl_key key = job_key();
	const uint64_t id = 0x5eed0000f00dULL;
	struct r2cc_ctrl_msg m;
	int fd1, fd2, i;

	start();
	/* Two connections from the peer (it dialled twice, or each side
	 * dialled the other), the newer one closed by the peer. */
	fd1 = fake_peer(&key, id, 1);
	fd2 = fake_peer(&key, id, 2);
	close(fd2);
	usleep(200 * 1000);
	for (i = 0; i < 4; i++) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = R2CC_CTRL_KEEPALIVE;
		m.keepalive_ns = 100 + (uint64_t)i;
		cr_assert_eq(r2cc_chan_send(id, &m), 0, "send %d: peer lost",
			     i);
		usleep(50 * 1000);
	}
	for (i = 0; i < 4; i++) {
		read_frame(fd1, &key, &m);
		cr_assert_eq(m.hdr.type, R2CC_CTRL_KEEPALIVE);
		cr_assert_eq(m.keepalive_ns, 100 + (uint64_t)i);
	}
	close(fd1);
	r2cc_chan_stop();
}

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
static void nofile(rlim_t soft)
{
	struct rlimit rl;

	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < soft)
		cr_skip_test("RLIMIT_NOFILE's hard limit is below %lu",
			     (unsigned long)soft);
	rl.rlim_cur = soft;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
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

/* The fake owner's listener (OWNER_QPN's lookups give its port), non-
 * blocking if @nb. */
static int owner_listen(bool nb)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM | (nb ? SOCK_NONBLOCK : 0), 0);

	cr_assert_geq(lfd, 0);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(lfd, 128), 0);
	cr_assert_eq(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
	owner_port = ntohs(a.sin_port);
	return lfd;
}

/* On a call the fake owner took: the caller's HELLO read, the owner's
 * sent. */
static void owner_hello(int fd)
{
	struct r2cc_ctrl_key key = job_key();
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	struct r2cc_ctrl_msg m;
	int len;

	cr_assert_eq(get_frame(fd, &key, &m), 0);
	cr_assert_eq(m.hdr.type, R2CC_CTRL_HELLO);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_HELLO;
	m.hdr.sender = OWNER_ID;
	m.hdr.receiver = r2cc_chan_self();
	m.hdr.seq = 1;
	m.hello.ver_min = m.hello.ver_max = R2CC_CTRL_VERSION;
	m.hello.pid = (uint32_t)getpid();
	len = r2cc_ctrl_encode(&key, &m, buf, sizeof(buf));
	cr_assert_gt(len, 0);
	cr_assert_eq(write(fd, buf, (size_t)len), len);
}

/* @n resolves of OWNER_QPN asked, their lookups answered, the calls
 * they make made. */
static void resolve_owner(int n)
{
	struct r2cc_ctrl_qp_ref q = loopback_ref(OWNER_QPN);
	int i;

	for (i = 1; i <= n; i++)
		cr_assert_eq(r2cc_chan_resolve(&q, (uint64_t)i), 0);
	for (i = 0; i < 100 && __atomic_load_n(&lookups, __ATOMIC_SEQ_CST) < n;
	     i++)
		usleep(20 * 1000);
	cr_assert_geq(lookups, n, "%d of %d lookups", lookups, n);
	usleep(300 * 1000);
}

/* Many QPs of one owner resolved at once (a rank binding hundreds), the
 * owner slow to answer its calls: one call to it, not one each (every
 * call that succeeds stays open as a channel). The owner here is a fake
 * (OWNER_QPN's lookups name it) that answers its one call's HELLO once
 * every lookup is in: every resolve ends with it. */
Test(chan, many_resolves_of_one_owner_make_one_call, .timeout = 30)
{
	int lfd, fd, first = -1, calls = 0;

	lfd = owner_listen(true);
	start();
	resolve_owner(40);
	while ((fd = accept(lfd, NULL, NULL)) >= 0) {
		calls++;
		if (first < 0)
			first = fd;
		else
			close(fd);
	}
	cr_assert_eq(calls, 1, "%d calls to one owner", calls);
	owner_hello(first);
	cr_assert(wait_for(&resolved, 40), "%d of 40 resolved", resolved);
	cr_assert_eq(got_peer, OWNER_ID);
	close(first);
	close(lfd);
	r2cc_chan_stop();
}

/* The one call to an owner fails (the owner takes none): the resolves
 * that waited on it end with no owner too, none calls again (the same
 * addresses; their QPs ask again with a fresh lookup). */
Test(chan, a_failed_call_ends_the_resolves_waiting_on_it, .timeout = 30)
{
	int lfd, fd, calls = 0;

	lfd = owner_listen(true);
	start();
	resolve_owner(20);
	fd = accept(lfd, NULL, NULL);
	cr_assert_geq(fd, 0, "no call to the owner");
	close(fd); /* no HELLO: the call failed */
	cr_assert(wait_for(&resolved, 20), "%d of 20 ended", resolved);
	cr_assert_eq(got_peer, 0, "an owner from a failed call");
	while ((fd = accept(lfd, NULL, NULL)) >= 0) {
		calls++;
		close(fd);
	}
	cr_assert_eq(calls, 0, "%d more calls after the first failed", calls);
	close(lfd);
	r2cc_chan_stop();
}

/* An owner that took the call but answers its HELLO past the step bound
 * (its channel thread slow under load) is waited for: the call is not
 * dropped for the owner's next address. */
Test(chan, a_slow_hello_is_waited_for_past_the_step, .timeout = 30)
{
	struct r2cc_ctrl_qp_ref q = loopback_ref(OWNER_QPN);
	struct pollfd p;
	int lfd, fd;

	lfd = owner_listen(false);
	start();
	cr_assert_eq(r2cc_chan_resolve(&q, 1), 0);
	p = (struct pollfd){ .fd = lfd, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 10000), 1, "no call");
	fd = accept(lfd, NULL, NULL);
	cr_assert_geq(fd, 0);
	usleep((MIG_CHAN_STEP_MS + 1000) * 1000);
	owner_hello(fd);
	cr_assert(wait_for(&resolved, 1), "never resolved");
	cr_assert_eq(got_peer, OWNER_ID, "the slow call dropped");
	close(fd);
	close(lfd);
	r2cc_chan_stop();
}
