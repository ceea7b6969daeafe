/* SPDX-License-Identifier: MIT */
/*
 * keepalive.c - black holes under idle QPs (R2CC_KEEPALIVE). A QP finds a
 * black hole only when it sends into it (its retries run out within
 * R2CC_DETECT_MS); an idle one, or a receiver waiting for its peer, would
 * find it only then. Here the control thread's tick groups the protected
 * QPs (READY, on their primary) by path (rail, our GID, the peer's GID):
 * a path on which nothing completed for R2CC_KEEPALIVE_MS is probed (a
 * TCP handshake from our rail address to the peer's, probe.c), one every
 * period; once MIG_KA_MISSES of them in a row go unanswered, with still
 * nothing completed on it, its QPs fail over (reason KEEPALIVE, the peer
 * follows). Only a path whose probes once got through is ever judged (a
 * peer address that never answers TCP - a firewall, IPv6 - is not a black
 * hole: it is left alone, said once). What it proves is the IP path: a
 * black hole of RoCE packets alone (a QoS class, an ACL on UDP 4791) is
 * not seen here.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "chan.h"
#include "fence.h"
#include "keepalive.h"
#include "mig_int.h"
#include "paths.h"
#include "probe.h"
#include "tick.h"

/* Protected and carried by its primary: what a keepalive watches (mq
 * lock held). */
static bool watched(struct r2cc_mig_qp *mq)
{
	return r2cc_mig_path_counts(mq) && !mq->on_backup &&
	       mq->life == R2CC_LIFE_RUN;
}

static bool same(const struct r2cc_mig_path *p, const struct r2cc_mig_qp *mq)
{
	return p->rail == mq->rail && !memcmp(p->gid, mq->gid, 16) &&
	       !memcmp(p->dest_gid, mq->dest_gid, 16);
}

static void stop_probing(struct r2cc_mig_path *p)
{
	if (p->ka.probing)
		r2cc_probe_keep_end(p->gid, p->dest_gid, r2cc_chan_port());
	p->ka.probing = false;
}

void r2cc_mig_ka_path_gone(struct r2cc_mig_path *p)
{
	stop_probing(p);
}

static const char *addr_of(const uint8_t gid[16], char *buf, size_t n)
{
	/* (only IPv4-mapped GIDs are ever probed) */
	if (!inet_ntop(AF_INET, gid + 12, buf, (socklen_t)n))
		snprintf(buf, n, "?");
	return buf;
}

/* The QPs of a path whose probes went unanswered fail over. */
static void fail_path(struct r2cc_mig_path *p, uint64_t now)
{
	struct r2cc_mig_qp *mq;
	char a[INET_ADDRSTRLEN];
	struct timespec ts;
	int n = 0;

	for (mq = ps.qps; mq; mq = mq->next) {
		r2cc_qlock_lock(&mq->lock);
		if (watched(mq) && same(p, mq)) {
			r2cc_mig_fence(mq, R2CC_CTRL_WHY_KEEPALIVE);
			n++;
		}
		r2cc_qlock_unlock(&mq->lock);
	}
	/* Wall-clock time too, to line it up with a fault's. */
	clock_gettime(CLOCK_REALTIME, &ts);
	r2cc_warn("keepalive: rail %d to %s: %u probes in a row unanswered "
		  "and nothing completed for %llu ms: %d QPs fail over, at "
		  "%lld.%06ld",
		  p->rail, addr_of(p->dest_gid, a, sizeof(a)), p->ka.fail_row,
		  (unsigned long long)((now - p->ka.quiet_ns) / 1000000ULL), n,
		  (long long)ts.tv_sec, ts.tv_nsec / 1000);
	stop_probing(p);
	memset(&p->ka, 0, sizeof(p->ka)); /* its QPs have left it */
}

/* A quiet path's probe (due or in flight) and what it says so far. */
static void probe(struct r2cc_mig_path *p, uint64_t now)
{
	struct r2cc_ka_path *k = &p->ka;
	struct r2cc_probe_count c;
	char a[INET_ADDRSTRLEN];
	int ret;

	ret = r2cc_probe_keep(p->gid, p->dest_gid, r2cc_chan_port(), now,
			      ps.keepalive_ms, &c);
	if (ret == -EAFNOSUPPORT) {
		r2cc_info("keepalive: rail %d: not an IPv4 RoCE v2 path: "
			  "its QPs are not kept alive",
			  p->rail);
		k->off = true;
		return;
	}
	if (ret)
		return; /* -ENOSPC: probe.c's table is full; again later */
	k->probing = true;
	if (c.ok && !k->armed)
		r2cc_info("keepalive: rail %d to %s: probes get through",
			  p->rail, addr_of(p->dest_gid, a, sizeof(a)));
	k->armed |= c.ok > 0;
	if (c.fail_row > k->fail_row)
		r2cc_info(
			"keepalive: rail %d to %s: %u probes in a row "
			"unanswered%s",
			p->rail, addr_of(p->dest_gid, a, sizeof(a)), c.fail_row,
			k->armed ? "" : " (none ever got through: not judged)");
	k->fail_row = c.fail_row;
	if (k->armed && c.fail_row >= MIG_KA_MISSES)
		fail_path(p, now);
}

void r2cc_mig_ka_tick(void)
{
	struct r2cc_mig_path *p;
	unsigned int i;
	uint64_t now;

	pthread_mutex_lock(&ps.lock);
	now = r2cc_mig_now_ns();
	r2cc_probe_poll(now);
	r2cc_mig_paths_count();
	for (i = 0; (p = r2cc_mig_path_at(i)); i++) {
		struct r2cc_ka_path *k = &p->ka;

		if (p->ok != k->done || !k->quiet_ns) {
			/* Something completed: the path is there. */
			k->done = p->ok;
			k->quiet_ns = now;
			stop_probing(p);
			k->fail_row = 0;
		} else if (!k->off &&
			   r2cc_mig_past(k->quiet_ns, now, ps.keepalive_ms)) {
			probe(p, now);
		}
	}
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_ka_reset(void)
{
	r2cc_mig_paths_clear();
}
