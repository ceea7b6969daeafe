/* SPDX-License-Identifier: MIT */
/*
 * test_chan.c - the control channel over loopback TCP, resolving: a
 * process resolves a (GID, QPN) through its node's rendezvous port, opens a
 * direct channel after HELLO, and exchanges authenticated frames; a wrong
 * key or a GID nobody owns ends the resolve with no peer, in bounded time.
 * A LOOKUP the rendezvous took and never answered is asked again on a
 * fresh connection; an answer with another seq is not believed. A peer
 * with two connections open stays reachable when one of them closes.
 * Resolves of many QPs of one owner make one call to it; when that call
 * fails, they all end. A call the owner took is waited for past the step
 * bound. (Frames, peers and budgets: test_chan_frames.c.)
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
#include "chan_int.h"
#include "policy.h"

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

/* Frames and messages are counted per peer, a BATCH as one frame of
 * many messages */
/* The channel started and one of its own QPs resolved: itself as a
 * peer, its id */
static uint64_t start_self(void)
{
	struct r2cc_ctrl_qp_ref q = loopback_ref(7);
	uint64_t peer;

	start();
	cr_assert_eq(r2cc_chan_resolve(&q, 42), 0);
	cr_assert(wait_for(&resolved, 1), "no resolve within 10 s");
	/* (on_msg writes got_peer again as the frames arrive) */
	pthread_mutex_lock(&lock);
	peer = got_peer;
	pthread_mutex_unlock(&lock);
	return peer;
}

Test(chan, a_peers_frames_and_messages_are_counted)
{
	struct r2cc_chan_peer_stats a, b;
	struct r2cc_ctrl_msg m;
	uint64_t peer = start_self();
	int i;

	cr_assert_eq(r2cc_chan_peer_stats(peer, &a), 0);
	cr_assert(a.open);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_KEEPALIVE;
	for (i = 0; i < 3; i++)
		cr_assert_eq(r2cc_chan_send(peer, &m), 0);
	r2cc_chan_hold();
	for (i = 0; i < 2; i++)
		cr_assert_eq(r2cc_chan_send(peer, &m), 0);
	r2cc_chan_flush();
	cr_assert(wait_for(&msgs, 5), "frames not delivered");
	cr_assert_eq(r2cc_chan_peer_stats(peer, &b), 0);
	/* (itself: what went out came in; the channel thread may gather
	 * messages queued together into one frame) */
	cr_assert_eq(b.msgs_out - a.msgs_out, 5);
	cr_assert_eq(b.msgs_in - a.msgs_in, 5);
	cr_assert_geq(b.frames_out - a.frames_out, 1);
	cr_assert_leq(b.frames_out - a.frames_out, 5);
	cr_assert_eq(b.frames_in - a.frames_in, b.frames_out - a.frames_out);
	cr_assert_neq(b.sent_ns, 0);
	cr_assert_neq(b.heard_ns, 0);
	cr_assert_eq(b.queued, 0);
	cr_assert_eq(r2cc_chan_peer_stats(0x1234567890abcdefULL, &b), -ENOENT);
	r2cc_chan_peer_say(peer, "a test");
	r2cc_chan_stop();
	cr_assert_eq(r2cc_chan_peer_stats(peer, &b), -ENOENT);
}

/* A KEEPALIVE frame is a peer at work on a backlog: the moves that wait
 * on it count it as an answer (r2cc_mig_waited()); other frames do not. */
Test(chan, a_keepalive_counts_as_an_answer)
{
	struct r2cc_ctrl_msg m;
	uint64_t peer = start_self(), t0;

	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_MR_INVALIDATE;
	cr_assert_eq(r2cc_chan_send(peer, &m), 0);
	cr_assert(wait_for(&msgs, 1), "frame not delivered");
	cr_assert_eq(r2cc_chan_answered_ns(peer), 0, "any frame an answer");
	t0 = chan_now_ns();
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_KEEPALIVE;
	cr_assert_eq(r2cc_chan_send(peer, &m), 0);
	cr_assert(wait_for(&msgs, 2), "frame not delivered");
	cr_assert_geq(r2cc_chan_answered_ns(peer), t0);
	r2cc_chan_stop();
}

Test(chan, unknown_qp_resolves_to_nobody)
{
	struct r2cc_ctrl_qp_ref q = loopback_ref(8);

	start();
	cr_assert_eq(r2cc_chan_resolve(&q, 5), 0);
	cr_assert(wait_for(&resolved, 1), "no answer within 10 s");
	cr_assert_eq(got_cookie, 5);
	cr_assert_eq(got_peer, 0);
	cr_assert_eq(got_how, R2CC_RES_NO_OWNER, "%d", got_how);
	r2cc_chan_stop();
}

Test(chan, unreachable_rendezvous_is_bounded)
{
	struct r2cc_ctrl_qp_ref q = loopback_ref(7);

	start();
	/* 192.0.2.1 (TEST-NET-1): no rendezvous there; unreachable at
	 * once, or the connect step's bound ends it (a network that
	 * rejects the call with a reset refuses it). */
	memcpy(q.gid + 12, "\xc0\x00\x02\x01", 4);
	cr_assert_eq(r2cc_chan_resolve(&q, 6), 0);
	cr_assert(wait_for(&resolved, 1), "unbounded resolve");
	cr_assert_eq(got_peer, 0);
	cr_assert(got_how == R2CC_RES_UNANSWERED || got_how == R2CC_RES_NO_R2CC,
		  "an owner unknown to a node it never reached: %d", got_how);
	r2cc_chan_stop();
}

/* A listener that takes one connection and never answers it, then goes
 * away: a process stuck exiting, still in the rendezvous port's group. */
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
	struct r2cc_ctrl_msg m;

	cr_assert_eq(get_frame(fd, &key, &m), 0);
	cr_assert_eq(m.hdr.type, R2CC_CTRL_HELLO);
	say_hello(fd, &key, OWNER_ID, 1, NULL, 0);
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
	cr_assert_eq(got_how, R2CC_RES_FOUND);
	close(fd);
	close(lfd);
	r2cc_chan_stop();
}

/* The lookups let run at once: one more for each answered (its time
 * noted: a resolve waiting for its turn waits while answers come), up to
 * MIG_CHAN_LOOKUPS; halved by one unanswered, once for the lookups that
 * went unanswered together (within a step bound), never below
 * MIG_CHAN_LOOKUPS_MIN. */
Test(chan, the_lookup_window_grows_by_answers_and_halves_once_a_step)
{
	struct chan_lookup_window w = { 0 };
	uint64_t t = 5000000000ULL, step = MIG_CHAN_STEP_MS * 1000000ULL;
	int i;

	chan_lookup_window_on(&w, true, t);
	cr_assert_eq(w.n, MIG_CHAN_LOOKUPS_START + 1);
	cr_assert_eq(w.answered_ns, t);
	for (i = 0; i < 2 * MIG_CHAN_LOOKUPS; i++)
		chan_lookup_window_on(&w, true, t);
	cr_assert_eq(w.n, MIG_CHAN_LOOKUPS);
	chan_lookup_window_on(&w, false, t);
	cr_assert_eq(w.n, MIG_CHAN_LOOKUPS / 2);
	chan_lookup_window_on(&w, false, t + step - 1);
	cr_assert_eq(w.n, MIG_CHAN_LOOKUPS / 2, "halved twice in one step");
	chan_lookup_window_on(&w, false, t + step);
	cr_assert_eq(w.n, MIG_CHAN_LOOKUPS / 4);
	for (i = 2; i < 12; i++)
		chan_lookup_window_on(&w, false, t + i * step);
	cr_assert_eq(w.n, MIG_CHAN_LOOKUPS_MIN);
	chan_lookup_window_on(&w, true, t + i * step);
	cr_assert_eq(w.n, MIG_CHAN_LOOKUPS_MIN + 1);
}
