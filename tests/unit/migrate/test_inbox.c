/* SPDX-License-Identifier: MIT */
/*
 * test_inbox.c - the protection's thread (inbox.c): the channel's calls
 * run there, not on the caller's thread, in the order they came (a tick
 * after what came before it); a key list arrives whole; without the
 * thread they run on the caller's; what waits is bounded; a call held
 * up sees the time its calls were taken up, not its own; the thread is
 * busy while it runs calls, not while it waits; a long list's answers
 * go out while it runs.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "inbox.h"

#define N 2000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static pthread_t caller;
static int nmsg, nres, nticks, order_errors, on_caller, msgs_at_tick;
static uint32_t last_rkey;
static uint16_t last_n;
static bool hold; /* the handler waits while set */
/* In the last message's handler: the time, and what the inbox had seen */
static uint64_t now_in_msg, seen_in_msg;
static int nheld; /* handlers that found hold set */
static int slow_ms; /* each handler takes this long */
static int flushes, mid_flushes; /* mid: with calls of its list left */
static int list_end; /* the messages handled when the list is done */

/* Linked with --wrap=r2cc_chan_flush: counted, then the real one */
void __real_r2cc_chan_flush(void);
void __wrap_r2cc_chan_flush(void);
void __wrap_r2cc_chan_flush(void)
{
	pthread_mutex_lock(&lock);
	flushes++;
	if (nmsg > 1 && nmsg < list_end)
		mid_flushes++;
	pthread_mutex_unlock(&lock);
	__real_r2cc_chan_flush();
}

static void note_thread(void)
{
	if (pthread_equal(pthread_self(), caller))
		on_caller++;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void on_msg(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	pthread_mutex_lock(&lock);
	if (hold) {
		nheld++;
		pthread_cond_broadcast(&cond);
	}
	while (hold)
		pthread_cond_wait(&cond, &lock);
	note_thread();
	if (slow_ms) {
		pthread_mutex_unlock(&lock);
		usleep((useconds_t)slow_ms * 1000);
		pthread_mutex_lock(&lock);
	}
	now_in_msg = mono_ns();
	seen_in_msg = r2cc_mig_inbox_seen_ns(now_in_msg);
	if (m->hdr.type == R2CC_CTRL_MR_KEYS) {
		last_n = m->mr_keys.n;
		last_rkey = m->mr_keys.mr[m->mr_keys.n - 1].rkey;
	} else if (m->failover.qpn != (uint32_t)nmsg || peer != 7) {
		order_errors++;
	}
	nmsg++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void on_resolved(uint64_t cookie, uint64_t peer,
			enum r2cc_chan_res_end how)
{
	pthread_mutex_lock(&lock);
	note_thread();
	if (cookie != 42 || peer != 0 || how != R2CC_RES_NO_OWNER || nmsg != N)
		order_errors++;
	nres++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void on_tick(void)
{
	pthread_mutex_lock(&lock);
	note_thread();
	msgs_at_tick = nmsg;
	nticks++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static const struct r2cc_mig_inbox_ops ops = { on_msg, on_resolved, on_tick };

static void reset(void)
{
	caller = pthread_self();
	nmsg = nres = nticks = order_errors = on_caller = msgs_at_tick = 0;
	nheld = slow_ms = flushes = mid_flushes = list_end = 0;
	hold = false;
}

/* The handler waits from now on (@on), or no more. */
static void set_hold(bool on)
{
	pthread_mutex_lock(&lock);
	hold = on;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

/* Until *@v >= @n, at most 10 s: true if it got there. */
static bool wait_for(int *v, int n)
{
	struct timespec ts;
	bool ok = true;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&lock);
	while (*v < n && ok)
		ok = pthread_cond_timedwait(&cond, &lock, &ts) == 0;
	ok = *v >= n;
	pthread_mutex_unlock(&lock);
	return ok;
}

static void send_failover(uint32_t qpn)
{
	struct r2cc_ctrl_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_FAILOVER;
	m.failover.qpn = qpn;
	r2cc_mig_inbox_msg(7, &m);
}

Test(inbox, calls_run_on_its_thread_in_order, .timeout = 30)
{
	int i;

	reset();
	cr_assert_eq(r2cc_mig_inbox_start(&ops), 0);
	for (i = 0; i < N; i++)
		send_failover((uint32_t)i);
	r2cc_mig_inbox_resolved(42, 0, R2CC_RES_NO_OWNER);
	r2cc_mig_inbox_tick();
	cr_assert(wait_for(&nticks, 1), "no tick");
	cr_assert(wait_for(&nres, 1), "the resolve's end not run");
	cr_assert_eq(nmsg, N);
	cr_assert_eq(order_errors, 0, "out of order");
	cr_assert_eq(msgs_at_tick, N, "the tick ran before what came first");
	cr_assert_eq(on_caller, 0, "ran on the channel's thread");
	r2cc_mig_inbox_stop();
}

Test(inbox, a_key_list_arrives_whole, .timeout = 30)
{
	static struct r2cc_ctrl_msg m;

	reset();
	cr_assert_eq(r2cc_mig_inbox_start(&ops), 0);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_MR_KEYS;
	m.mr_keys.n = R2CC_CTRL_MAX_MRS;
	m.mr_keys.mr[R2CC_CTRL_MAX_MRS - 1].rkey = 0xfeed;
	r2cc_mig_inbox_msg(7, &m);
	cr_assert(wait_for(&nmsg, 1));
	cr_assert_eq(last_n, R2CC_CTRL_MAX_MRS);
	cr_assert_eq(last_rkey, 0xfeed, "the last key lost on the way");
	r2cc_mig_inbox_stop();
}

Test(inbox, without_its_thread_calls_run_on_the_callers, .timeout = 30)
{
	reset();
	/* stopped, or never started: as before there was one */
	cr_assert_eq(r2cc_mig_inbox_start(&ops), 0);
	r2cc_mig_inbox_stop();
	send_failover(0);
	r2cc_mig_inbox_tick();
	cr_assert_eq(nmsg, 1);
	cr_assert_eq(nticks, 1);
	cr_assert_eq(on_caller, 2);
}

/* A thread held up (a handler that waits) and a flood of key lists:
 * what waits stops at MIG_INBOX_MAX, the rest dropped and counted, and
 * what was kept all runs once the thread goes on. */
Test(inbox, what_waits_is_bounded, .timeout = 60)
{
	static struct r2cc_ctrl_msg m;
	int i, sent = 0;

	reset();
	cr_assert_eq(r2cc_mig_inbox_start(&ops), 0);
	set_hold(true);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_MR_KEYS;
	m.mr_keys.n = R2CC_CTRL_MAX_MRS;
	m.mr_keys.mr[R2CC_CTRL_MAX_MRS - 1].rkey = 1;
	for (i = 0; i < 2 * MIG_INBOX_MAX / (int)sizeof(m); i++, sent++)
		r2cc_mig_inbox_msg(7, &m);
	cr_assert_gt(r2cc_mig_inbox_dropped(), 0, "nothing dropped");
	set_hold(false);
	cr_assert(wait_for(&nmsg, sent - (int)r2cc_mig_inbox_dropped()));
	usleep(100 * 1000);
	cr_assert_eq(nmsg + (int)r2cc_mig_inbox_dropped(), sent);
	r2cc_mig_inbox_stop();
}

/* A call that waited (a thousand recycles ahead of it) knows it has seen
 * only what came before it was taken up: a bound measured to that time
 * does not take the backlog for the peer's silence. */
Test(inbox, a_late_call_has_seen_only_what_came_before_it, .timeout = 30)
{
	uint64_t sent, released, now;

	reset();
	cr_assert_eq(r2cc_mig_inbox_start(&ops), 0);
	set_hold(true);
	sent = mono_ns();
	send_failover(0);
	cr_assert(wait_for(&nheld, 1), "never taken up");
	usleep(10 * 1000);
	released = mono_ns();
	set_hold(false);
	cr_assert(wait_for(&nmsg, 1));
	cr_assert_geq(now_in_msg, released);
	cr_assert_geq(seen_in_msg, sent);
	cr_assert_lt(seen_in_msg, released,
		     "seen up to when it ran, not when it was taken up");
	now = mono_ns();
	cr_assert_eq(r2cc_mig_inbox_seen_ns(now), now, "another thread: now");
	r2cc_mig_inbox_stop();
}

/* While a call runs the thread is busy since it took it up (its peers
 * are told it lives); waiting for more, it is not. */
Test(inbox, busy_while_it_runs_calls, .timeout = 30)
{
	uint64_t sent, busy;
	int i;

	reset();
	cr_assert_eq(r2cc_mig_inbox_start(&ops), 0);
	cr_assert_eq(r2cc_mig_inbox_busy_since(), 0, "busy before any call");
	set_hold(true);
	sent = mono_ns();
	send_failover(0);
	cr_assert(wait_for(&nheld, 1), "never taken up");
	busy = r2cc_mig_inbox_busy_since();
	cr_assert_geq(busy, sent, "not busy while a call runs");
	cr_assert_leq(busy, mono_ns());
	set_hold(false);
	cr_assert(wait_for(&nmsg, 1));
	/* back to waiting within its bounded wait */
	for (i = 0; i < 100 && r2cc_mig_inbox_busy_since(); i++)
		usleep(10 * 1000);
	cr_assert_eq(r2cc_mig_inbox_busy_since(), 0, "busy while it waits");
	r2cc_mig_inbox_stop();
}

/* Calls that take a second and a half all told, taken up together: what
 * they send goes out as they run (a peer that waits on our answers hears
 * them), not all at the end of the list. */
Test(inbox, a_long_lists_answers_go_out_while_it_runs, .timeout = 30)
{
	int i;

	reset();
	cr_assert_eq(r2cc_mig_inbox_start(&ops), 0);
	set_hold(true);
	send_failover(0);
	cr_assert(wait_for(&nheld, 1), "never taken up");
	for (i = 1; i <= 15; i++)
		send_failover((uint32_t)i);
	pthread_mutex_lock(&lock);
	slow_ms = 100;
	list_end = 16;
	pthread_mutex_unlock(&lock);
	set_hold(false);
	cr_assert(wait_for(&nmsg, 16));
	cr_assert(wait_for(&flushes, 2), "the list's end not flushed");
	cr_assert_eq(order_errors, 0);
	cr_assert_geq(mid_flushes, 2, "%d flushes while the list ran",
		      mid_flushes);
	r2cc_mig_inbox_stop();
}
