/* SPDX-License-Identifier: MIT */
/*
 * inbox.c - the protection's own thread. The channel thread reads every
 * socket, answers every LOOKUP and HELLO and writes every frame; what a
 * peer's message asks of the protection (bind a QP: verbs calls that
 * make, connect and remake standbys; move one) takes ps.lock and may
 * take milliseconds per QP. Done on the channel thread, a thousand QPs'
 * binds held up the lookups of other processes past their bound, and
 * their QPs ran unprotected. Here the hooks queue the call, in order,
 * and this thread runs it; a tick the channel asks for runs here too,
 * after what came before it.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "inbox.h"
#include "policy.h"

enum call_kind { CALL_MSG, CALL_RESOLVED };

struct call {
	struct call *next;
	enum call_kind kind;
	uint64_t peer, cookie;
	enum r2cc_chan_res_end how; /* CALL_RESOLVED */
	size_t bytes; /* of this call, counted in ib.bytes */
	/* CALL_MSG: the message's first msg_bytes(), all a handler reads */
	uint64_t m[];
};

static struct {
	pthread_mutex_t lock; /* all below */
	pthread_cond_t cv;
	pthread_t thread;
	pid_t pid;
	bool running, stop, tick;
	struct r2cc_mig_inbox_ops ops;
	struct call *head, *tail;
	size_t bytes;
	uint64_t dropped;
	bool dropped_said;
} ib = { .lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

/* The longest a list's answers wait for the rest of it */
#define INBOX_FLUSH_NS (250 * 1000000ULL)

#define LARGER(a, b) ((a) > (b) ? (a) : (b))

/* The bytes of @m a handler reads: a key list's as long as it is, every
 * other message's far shorter than the largest (MR_KEYS). */
static size_t msg_bytes(const struct r2cc_ctrl_msg *m)
{
	const size_t body = offsetof(struct r2cc_ctrl_msg, mr_keys);
	size_t n;

	switch (m->hdr.type) {
	case R2CC_CTRL_MR_KEYS:
		n = m->mr_keys.n < R2CC_CTRL_MAX_MRS ? m->mr_keys.n :
						       R2CC_CTRL_MAX_MRS;
		return offsetof(struct r2cc_ctrl_msg, mr_keys.mr) +
		       n * sizeof(m->mr_keys.mr[0]);
	case R2CC_CTRL_MR_INVALIDATE:
		return body + sizeof(m->mr_inval);
	default:
		return body +
		       LARGER(LARGER(sizeof(m->hello), sizeof(m->lookup_reply)),
			      LARGER(LARGER(sizeof(m->qp_bind),
					    sizeof(m->failover)),
				     LARGER(sizeof(m->failback),
					    sizeof(m->batch))));
	}
}

/* Queue @c (ib.lock held), or drop it past MIG_INBOX_MAX. */
static void put(struct call *c)
{
	if (ib.bytes + c->bytes > MIG_INBOX_MAX) {
		ib.dropped++;
		if (!ib.dropped_said)
			r2cc_warn("%zu bytes of control messages wait for the "
				  "protection's thread: further ones are "
				  "dropped (counted) until it catches up",
				  ib.bytes);
		ib.dropped_said = true;
		free(c);
		return;
	}
	ib.bytes += c->bytes;
	c->next = NULL;
	if (ib.tail)
		ib.tail->next = c;
	else
		ib.head = c;
	ib.tail = c;
	pthread_cond_signal(&ib.cv);
}

/* On the inbox thread: when it took up the calls it runs now */
static __thread uint64_t taken_ns;
/* Since when it has run calls without waiting for more (0: it waits) */
static _Atomic uint64_t busy_ns;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t r2cc_mig_inbox_busy_since(void)
{
	return atomic_load_explicit(&busy_ns, memory_order_relaxed);
}

uint64_t r2cc_mig_inbox_seen_ns(uint64_t now)
{
	return taken_ns && taken_ns < now ? taken_ns : now;
}

static void run(struct call *c)
{
	if (c->kind == CALL_MSG)
		ib.ops.msg(c->peer, (const struct r2cc_ctrl_msg *)c->m);
	else
		ib.ops.resolved(c->cookie, c->peer, c->how);
}

static void *inbox_thread(void *arg)
{
	struct call *list, *c;
	struct timespec ts;
	uint64_t flushed;
	sigset_t all;
	bool tick;

	(void)arg;
	/* as top -H and /proc/PID/task show it */
	pthread_setname_np(pthread_self(), "r2cc-inbox");
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&ib.lock);
	while (!ib.stop) {
		if (!ib.head && !ib.tick) {
			atomic_store_explicit(&busy_ns, 0,
					      memory_order_relaxed);
			/* bounded: a lost wakeup costs a tick's time */
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 200 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&ib.cv, &ib.lock, &ts);
			continue;
		}
		list = ib.head;
		ib.head = ib.tail = NULL;
		ib.bytes = 0;
		ib.dropped_said = false;
		tick = ib.tick;
		ib.tick = false;
		taken_ns = mono_ns();
		if (!atomic_load_explicit(&busy_ns, memory_order_relaxed))
			atomic_store_explicit(&busy_ns, taken_ns,
					      memory_order_relaxed);
		pthread_mutex_unlock(&ib.lock);
		/* what the calls send: one frame per peer, and no later than
		 * INBOX_FLUSH_NS after the last: a list of a thousand QPs'
		 * moves takes longer than a peer waits for a first answer
		 * (MIG_FENCE_MAX_MS, tick.c) */
		r2cc_chan_hold();
		flushed = taken_ns;
		for (; list; list = c) {
			c = list->next;
			run(list);
			free(list);
			if (c && mono_ns() - flushed >= INBOX_FLUSH_NS) {
				r2cc_chan_flush();
				r2cc_chan_hold();
				flushed = mono_ns();
			}
		}
		r2cc_chan_flush();
		if (tick && ib.ops.tick)
			ib.ops.tick();
		pthread_mutex_lock(&ib.lock);
	}
	pthread_mutex_unlock(&ib.lock);
	return NULL;
}

static void after_fork_child(void)
{
	/* The thread is not in the child (nor is the channel's) */
	pthread_mutex_init(&ib.lock, NULL);
	pthread_cond_init(&ib.cv, NULL);
	ib.running = false;
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, after_fork_child);
}

int r2cc_mig_inbox_start(const struct r2cc_mig_inbox_ops *ops)
{
	static pthread_once_t atfork = PTHREAD_ONCE_INIT;
	int ret;

	pthread_once(&atfork, register_atfork);
	pthread_mutex_lock(&ib.lock);
	ib.ops = *ops;
	if (ib.running) {
		pthread_mutex_unlock(&ib.lock);
		return 0;
	}
	ib.stop = false;
	ib.tick = false;
	ib.dropped = 0;
	ret = pthread_create(&ib.thread, NULL, inbox_thread, NULL);
	if (!ret) {
		ib.running = true;
		ib.pid = getpid();
	}
	pthread_mutex_unlock(&ib.lock);
	if (ret)
		r2cc_warn("no thread for the protection (%s): the control "
			  "channel's thread does its work",
			  strerror(ret));
	return -ret;
}

void r2cc_mig_inbox_stop(void)
{
	struct call *c;

	pthread_mutex_lock(&ib.lock);
	if (!ib.running || ib.pid != getpid()) {
		pthread_mutex_unlock(&ib.lock);
		return;
	}
	ib.stop = true;
	pthread_cond_signal(&ib.cv);
	pthread_mutex_unlock(&ib.lock);
	pthread_join(ib.thread, NULL);
	pthread_mutex_lock(&ib.lock);
	ib.running = false;
	while ((c = ib.head)) {
		ib.head = c->next;
		free(c);
	}
	ib.tail = NULL;
	ib.bytes = 0;
	pthread_mutex_unlock(&ib.lock);
}

void r2cc_mig_inbox_msg(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	size_t n = msg_bytes(m);
	struct call *c;

	/* A peer at work on a backlog says it lives: the channel noted
	 * that (r2cc_chan_heard_ns()), nothing is asked of us. */
	if (m->hdr.type == R2CC_CTRL_KEEPALIVE)
		return;
	pthread_mutex_lock(&ib.lock);
	if (!ib.running) {
		pthread_mutex_unlock(&ib.lock);
		if (ib.ops.msg)
			ib.ops.msg(peer, m);
		return;
	}
	c = malloc(sizeof(*c) + n);
	if (!c) {
		ib.dropped++;
		pthread_mutex_unlock(&ib.lock);
		return;
	}
	c->kind = CALL_MSG;
	c->peer = peer;
	c->bytes = sizeof(*c) + n;
	memcpy(c->m, m, n);
	put(c);
	pthread_mutex_unlock(&ib.lock);
}

void r2cc_mig_inbox_resolved(uint64_t cookie, uint64_t peer,
			     enum r2cc_chan_res_end how)
{
	struct call *c;

	pthread_mutex_lock(&ib.lock);
	if (!ib.running) {
		pthread_mutex_unlock(&ib.lock);
		if (ib.ops.resolved)
			ib.ops.resolved(cookie, peer, how);
		return;
	}
	c = malloc(sizeof(*c));
	if (!c) {
		/* (a resolve's end must not be lost: done here) */
		pthread_mutex_unlock(&ib.lock);
		ib.ops.resolved(cookie, peer, how);
		return;
	}
	c->kind = CALL_RESOLVED;
	c->peer = peer;
	c->how = how;
	c->cookie = cookie;
	c->bytes = sizeof(*c);
	put(c);
	pthread_mutex_unlock(&ib.lock);
}

void r2cc_mig_inbox_tick(void)
{
	pthread_mutex_lock(&ib.lock);
	if (!ib.running) {
		pthread_mutex_unlock(&ib.lock);
		if (ib.ops.tick)
			ib.ops.tick();
		return;
	}
	ib.tick = true;
	pthread_cond_signal(&ib.cv);
	pthread_mutex_unlock(&ib.lock);
}

uint64_t r2cc_mig_inbox_dropped(void)
{
	uint64_t n;

	pthread_mutex_lock(&ib.lock);
	n = ib.dropped;
	pthread_mutex_unlock(&ib.lock);
	return n;
}
