/* SPDX-License-Identifier: MIT */
/*
 * ctrl_liar - a process that holds the job key and misbehaves on r2cc's
 * control channel (issue 18's lying peer, in the lab). It finds the r2cc
 * owner of a QP the way a peer does (a LOOKUP at the node's rendezvous),
 * then plays each case against that owner and judges what it can see
 * from outside: an answer, or the connection closed within its bound.
 * What the owner did inside (its QPs untouched, its memory bounded, the
 * refusals counted and logged, a later failover still exact) is judged
 * by the scenario that runs it (tests/lab/scenarios/liar.sh).
 *
 * ctrl_liar -k SECRET_FILE -r IP -q QPN -g GID_IPV4 [-p PORT]
 *           [-c QPN -G GID_IPV4] [-t SECONDS] CASE...
 *   -r  the owner's node (its rendezvous on PORT, default 18650)
 *   -q, -g  the owner's QP and its GID's IPv4 address (RoCE v2)
 *   -c, -G  the QP it is connected to (its real peer's): the QP the lies
 *           name as the liar's own
 *   -t  how long the flood lasts (default 3 s)
 * Cases:
 *   lookup   LOOKUPs for QPs nobody owns: each answered "not found"
 *   silent   16 connections that never say HELLO: each closed in bound
 *   badmac   a HELLO whose MAC is wrong: the connection closed
 *   garbage  bytes that are no frame: the connection closed
 *   replay   one frame sent twice: taken once, the connection kept
 *   qp       every message about the owner's QP, as a process that is not
 *            its peer (FAILOVER, FAILOVER_ACK, FAILBACK's phases, QP_BIND
 *            plain and with AGAIN, MR_KEYS, MR_INVALIDATE, PEER_DOWN):
 *            the connection kept
 *   flood    BATCHes of FAILBACKs for QPs nobody has, as fast as the
 *            socket takes them, for -t seconds
 *   peers    500 HELLOs, each from another sender id
 * One line per case: "ctrl_liar: CASE PASS|FAIL detail". Exit 0 when
 * every case passed, 1 when one failed, 2 on a usage or setup error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ctrl_msg.h"

#define IO_MS 5000 /* any one answer */
#define CLOSE_MS 10000 /* a connection the owner must close */

static struct r2cc_ctrl_key key;
static uint64_t me, seq, owner;
static struct in_addr rdv, owner_ip, gid_ip, claim_ip;
static uint16_t rdv_port = 18650, owner_port;
static uint32_t qpn, claim_qpn;
static int flood_s = 3, failed;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void result(const char *name, bool ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void result(const char *name, bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("ctrl_liar: %s %s ", name, ok ? "PASS" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	failed += !ok;
}

/* RoCE v2's GID of an IPv4 address (::ffff:a.b.c.d) */
static void gid_of(struct in_addr a, uint8_t gid[16])
{
	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, &a, 4);
}

static int dial(struct in_addr a, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port),
				   .sin_addr = a };
	struct timeval tv = { .tv_sec = IO_MS / 1000 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, uint8_t *p, size_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n);

		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* @m framed (from @from, to @to, the next seq) into @buf: its length */
static int frame(struct r2cc_ctrl_msg *m, uint64_t from, uint64_t to,
		 uint8_t *buf, size_t size)
{
	m->hdr.sender = from;
	m->hdr.receiver = to;
	m->hdr.seq = ++seq;
	return r2cc_ctrl_encode(&key, m, buf, size);
}

static int send_msg(int fd, struct r2cc_ctrl_msg *m, uint64_t from, uint64_t to)
{
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	int n = frame(m, from, to, buf, sizeof(buf));

	return n < 0 ? n : write_all(fd, buf, (size_t)n);
}

/* One frame, decoded into @m: 0, or -1 (closed, timed out, refused) */
static int recv_msg(int fd, struct r2cc_ctrl_msg *m)
{
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	int n;

	if (read_all(fd, buf, R2CC_CTRL_HDR_LEN))
		return -1;
	n = r2cc_ctrl_frame_len(buf, R2CC_CTRL_HDR_LEN);
	if (n < R2CC_CTRL_HDR_LEN || read_all(fd, buf + R2CC_CTRL_HDR_LEN,
					      (size_t)n - R2CC_CTRL_HDR_LEN))
		return -1;
	return r2cc_ctrl_decode(&key, buf, (size_t)n, m) ? -1 : 0;
}

/* How long until the owner closed @fd (ms), or -1: not within @ms. */
static long closed_within(int fd, int ms)
{
	uint64_t t0 = now_ms();
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint8_t junk[256];

	for (;;) {
		long left = ms - (long)(now_ms() - t0);

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return -1;
		if (read(fd, junk, sizeof(junk)) <= 0)
			return (long)(now_ms() - t0);
	}
}

static void hello_msg(struct r2cc_ctrl_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->hdr.type = R2CC_CTRL_HELLO;
	m->hello.ver_min = m->hello.ver_max = R2CC_CTRL_VERSION;
	m->hello.pid = (uint32_t)getpid();
}

/* A connection to the owner open as sender @from: fd, or -1. */
static int open_as(uint64_t from)
{
	struct r2cc_ctrl_msg m;
	int fd = dial(owner_ip, owner_port);

	if (fd < 0)
		return -1;
	hello_msg(&m);
	if (send_msg(fd, &m, from, owner) || recv_msg(fd, &m) ||
	    m.hdr.type != R2CC_CTRL_HELLO || m.hdr.sender != owner) {
		close(fd);
		return -1;
	}
	return fd;
}

/* LOOKUP (@q, @gip) at the rendezvous: 1 found (@r filled), 0 not, -1. */
static int lookup(uint32_t q, struct in_addr gip,
		  struct r2cc_ctrl_lookup_reply *r)
{
	struct r2cc_ctrl_msg m = { .hdr.type = R2CC_CTRL_LOOKUP };
	uint64_t asked;
	int fd = dial(rdv, rdv_port), ret = -1;

	if (fd < 0)
		return -1;
	m.lookup.qpn = q;
	gid_of(gip, m.lookup.gid);
	if (send_msg(fd, &m, me, R2CC_CTRL_ANY))
		goto out;
	asked = seq;
	if (recv_msg(fd, &m) || m.hdr.type != R2CC_CTRL_LOOKUP_REPLY ||
	    m.hdr.seq != asked)
		goto out;
	*r = m.lookup_reply;
	ret = r->found ? 1 : 0;
out:
	close(fd);
	return ret;
}

/* The owner of (qpn, gid_ip): its id and an IPv4 address to call. */
static int find_owner(void)
{
	struct r2cc_ctrl_lookup_reply r;
	int i, got = -1;

	if (lookup(qpn, gid_ip, &r) != 1)
		return -1;
	owner = r.owner;
	for (i = 0; i < r.naddr; i++) {
		if (r.addr[i].family != 4)
			continue;
		/* the management address if there is one, else any */
		if (got < 0 || r.addr[i].rail == R2CC_CTRL_RAIL_MGMT)
			got = i;
	}
	if (got < 0)
		return -1;
	memcpy(&owner_ip, r.addr[got].addr, 4);
	owner_port = r.addr[got].port;
	return 0;
}

static void case_lookup(void)
{
	struct r2cc_ctrl_lookup_reply r;
	int i, none = 0, other = 0;

	for (i = 0; i < 50; i++) {
		/* QPNs nobody has: past the owner's by a stride */
		int got = lookup((qpn + 0x1000u * (unsigned)(i + 1)) & 0xffffff,
				 gid_ip, &r);

		none += got == 0;
		other += got != 0;
	}
	result("lookup", !other, "not_found=%d other=%d", none, other);
}

static void case_silent(void)
{
	int fd[16], i, n = 0, closed = 0;
	long worst = 0;

	for (i = 0; i < 16; i++)
		if ((fd[n] = dial(owner_ip, owner_port)) >= 0)
			n++;
	for (i = 0; i < n; i++) {
		long t = closed_within(fd[i], CLOSE_MS);

		closed += t >= 0;
		if (t > worst)
			worst = t;
		close(fd[i]);
	}
	result("silent", n == 16 && closed == n,
	       "conns=%d closed=%d slowest_ms=%ld bound_ms=%d", n, closed,
	       worst, CLOSE_MS);
}

/* A HELLO sent with byte @flip of its frame changed (from the end if
 * negative); the owner must close the connection. */
static void bad_frame(const char *name, int flip)
{
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	struct r2cc_ctrl_msg m;
	int fd = dial(owner_ip, owner_port), n;
	long t;

	if (fd < 0) {
		result(name, false, "no connection");
		return;
	}
	hello_msg(&m);
	n = frame(&m, me, owner, buf, sizeof(buf));
	if (n > 0)
		buf[flip < 0 ? n + flip : flip] ^= 0x5a;
	t = n > 0 && !write_all(fd, buf, (size_t)n) ?
		    closed_within(fd, CLOSE_MS) :
		    -1;
	close(fd);
	result(name, t >= 0, "closed_ms=%ld", t);
}

static void case_replay(void)
{
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	struct r2cc_ctrl_msg m = { .hdr.type = R2CC_CTRL_KEEPALIVE };
	int fd = open_as(me), n;
	long t = 0;

	if (fd < 0) {
		result("replay", false, "no session");
		return;
	}
	n = frame(&m, me, owner, buf, sizeof(buf));
	if (n < 0 || write_all(fd, buf, (size_t)n) ||
	    write_all(fd, buf, (size_t)n))
		t = -2;
	else
		t = closed_within(fd, 2000);
	close(fd);
	result("replay", t == -1, "%s",
	       t == -1 ? "kept open" : "the connection closed");
}

static void put_failback(struct r2cc_ctrl_msg *m, uint32_t q, uint8_t phase,
			 uint8_t flags, uint32_t psn)
{
	memset(m, 0, sizeof(*m));
	m->hdr.type = R2CC_CTRL_FAILBACK;
	m->failback.qpn = q;
	m->failback.phase = phase;
	m->failback.flags = flags;
	m->failback.psn = psn;
}

static void case_qp(void)
{
	struct r2cc_ctrl_msg m;
	int fd = open_as(me), sent = 0, i, bad = 0;
	uint8_t ph;

	if (fd < 0) {
		result("qp", false, "no session");
		return;
	}
	for (i = 0; i < 2; i++) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = i ? R2CC_CTRL_FAILOVER_ACK : R2CC_CTRL_FAILOVER;
		m.failover.qpn = claim_qpn;
		m.failover.reason = R2CC_CTRL_WHY_PEER;
		m.failover.flags = R2CC_CTRL_FO_PSN_VALID;
		m.failover.rq_psn = 0x7fffff;
		m.failover.recvs = UINT64_MAX / 2;
		bad |= send_msg(fd, &m, me, owner);
		sent++;
	}
	for (ph = 0; ph < R2CC_CTRL_FB_NPHASES; ph++) {
		put_failback(&m, claim_qpn, ph,
			     R2CC_CTRL_FB_RECOVERED | R2CC_CTRL_FB_URGENT, 7);
		bad |= send_msg(fd, &m, me, owner);
		sent++;
	}
	for (i = 0; i < 2; i++) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = R2CC_CTRL_QP_BIND;
		m.qp_bind.local.qpn = claim_qpn;
		gid_of(claim_ip, m.qp_bind.local.gid);
		m.qp_bind.peer.qpn = qpn;
		gid_of(gid_ip, m.qp_bind.peer.gid);
		m.qp_bind.backup.qpn = 0xabcde;
		gid_of(claim_ip, m.qp_bind.backup.gid);
		m.qp_bind.psn = 0x123;
		m.qp_bind.rail = 1;
		/* a bind, then a standby moved */
		m.qp_bind.mtu = i ? 3 : 5;
		m.qp_bind.flags = i ? R2CC_CTRL_BIND_AGAIN : 0;
		bad |= send_msg(fd, &m, me, owner);
		sent++;
	}
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_MR_KEYS;
	m.mr_keys.n = R2CC_CTRL_MAX_MRS;
	m.mr_keys.rail = 1;
	for (i = 0; i < R2CC_CTRL_MAX_MRS; i++)
		m.mr_keys.mr[i] =
			(struct r2cc_ctrl_mr){ .rkey = (uint32_t)i,
					       .backup_rkey =
						       0x1000u + (uint32_t)i,
					       .addr = 0x1000,
					       .len = 1ull << 40 };
	bad |= send_msg(fd, &m, me, owner);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_MR_INVALIDATE;
	m.mr_inval.n = R2CC_CTRL_MAX_MRS;
	for (i = 0; i < R2CC_CTRL_MAX_MRS; i++)
		m.mr_inval.rkey[i] = (uint32_t)i;
	bad |= send_msg(fd, &m, me, owner);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_PEER_DOWN;
	m.peer_down.rail = 1;
	m.peer_down.reason = R2CC_CTRL_WHY_CARRIER;
	bad |= send_msg(fd, &m, me, owner);
	sent += 3;
	result("qp", !bad && closed_within(fd, 2000) == -1,
	       "messages=%d about QP %#x (claimed %#x) kept open=%s", sent, qpn,
	       claim_qpn, bad ? "send failed" : "checked");
	close(fd);
}

static void case_flood(void)
{
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	struct r2cc_ctrl_batch b = { 0 };
	struct r2cc_ctrl_msg m;
	uint64_t t0, frames = 0, msgs = 0, bytes = 0;
	uint32_t q = 0;
	int fd = open_as(me), n = 0;
	bool closed = false;

	if (fd < 0) {
		result("flood", false, "no session");
		return;
	}
	for (;;) {
		q++;
		put_failback(&m, (claim_qpn + 0x100000u + q) & 0xffffff,
			     R2CC_CTRL_FB_PROPOSE, 0, q);
		if (r2cc_ctrl_batch_add(&b, &m))
			break;
	}
	t0 = now_ms();
	while (now_ms() - t0 < (uint64_t)flood_s * 1000) {
		r2cc_ctrl_batch_msg(&b, &m);
		n = frame(&m, me, owner, buf, sizeof(buf));
		if (n < 0)
			break;
		if (write_all(fd, buf, (size_t)n)) {
			closed = true;
			break;
		}
		frames++;
		msgs += b.n;
		bytes += (uint64_t)n;
	}
	r2cc_ctrl_batch_free(&b);
	result("flood", n > 0 && !closed && frames > 0,
	       "frames=%llu messages=%llu bytes=%llu seconds=%d%s",
	       (unsigned long long)frames, (unsigned long long)msgs,
	       (unsigned long long)bytes, flood_s,
	       closed ? " (the owner closed it)" : "");
	close(fd);
}

/* 500 peers, each its own id, each answered: the owner's peer table
 * grows. Right after the flood the owner may still be working through
 * it under emulation: a HELLO not answered within IO_MS is asked once
 * more, on a fresh connection, as the same peer (counted apart). */
static void case_peers(void)
{
	int i, ok = 0, again = 0;

	for (i = 0; i < 500; i++) {
		uint64_t id = r2cc_ctrl_new_id();
		int fd = open_as(id);

		if (fd < 0) {
			fd = open_as(id);
			again += fd >= 0;
		}
		ok += fd >= 0;
		if (fd >= 0)
			close(fd);
	}
	result("peers", ok == 500,
	       "hellos_answered=%d of 500 (%d at a second HELLO)", ok, again);
}

static int usage(void)
{
	fprintf(stderr, "usage: ctrl_liar -k SECRET_FILE -r IP -q QPN -g "
			"GID_IPV4 [-p PORT] [-c QPN -G GID_IPV4] [-t SECONDS] "
			"lookup|silent|badmac|garbage|replay|qp|flood|peers"
			"...\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *secret = NULL;
	int c, i;

	while ((c = getopt(argc, argv, "k:r:p:q:g:c:G:t:")) != -1) {
		switch (c) {
		case 'k':
			secret = optarg;
			break;
		case 'r':
			if (!inet_aton(optarg, &rdv))
				return usage();
			break;
		case 'p':
			rdv_port = (uint16_t)atoi(optarg);
			break;
		case 'q':
			qpn = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'g':
			if (!inet_aton(optarg, &gid_ip))
				return usage();
			break;
		case 'c':
			claim_qpn = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'G':
			if (!inet_aton(optarg, &claim_ip))
				return usage();
			break;
		case 't':
			flood_s = atoi(optarg);
			break;
		default:
			return usage();
		}
	}
	if (!secret || !qpn || !rdv.s_addr || !gid_ip.s_addr || optind >= argc)
		return usage();
	if (r2cc_ctrl_key_load(&key, secret, 0)) {
		fprintf(stderr, "ctrl_liar: %s: no job key\n", secret);
		return 2;
	}
	me = r2cc_ctrl_new_id();
	if (!me || find_owner()) {
		fprintf(stderr, "ctrl_liar: no r2cc owner of QP %#x found\n",
			qpn);
		return 2;
	}
	printf("ctrl_liar: owner %016llx of QP %#x at %s:%u\n",
	       (unsigned long long)owner, qpn, inet_ntoa(owner_ip), owner_port);
	for (i = optind; i < argc; i++) {
		if (!strcmp(argv[i], "lookup"))
			case_lookup();
		else if (!strcmp(argv[i], "silent"))
			case_silent();
		else if (!strcmp(argv[i], "badmac"))
			bad_frame("badmac", -1);
		else if (!strcmp(argv[i], "garbage"))
			bad_frame("garbage", 0);
		else if (!strcmp(argv[i], "replay"))
			case_replay();
		else if (!strcmp(argv[i], "qp"))
			case_qp();
		else if (!strcmp(argv[i], "flood"))
			case_flood();
		else if (!strcmp(argv[i], "peers"))
			case_peers();
		else
			return usage();
	}
	r2cc_ctrl_key_wipe(&key);
	return failed ? 1 : 0;
}
