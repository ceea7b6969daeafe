/* SPDX-License-Identifier: MIT */
/*
 * chan_fixture.c - what the control channel's tests share: see
 * chan_fixture.h.
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

pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
int resolved, msgs, lookups;
uint64_t got_peer, got_cookie;
enum r2cc_chan_res_end got_how;
struct r2cc_ctrl_msg got_msg;

void on_msg(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	pthread_mutex_lock(&lock);
	got_peer = peer;
	got_msg = *m;
	msgs++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

void on_resolved(uint64_t cookie, uint64_t peer, enum r2cc_chan_res_end how)
{
	pthread_mutex_lock(&lock);
	got_cookie = cookie;
	got_peer = peer;
	got_how = how;
	resolved++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

uint16_t owner_port;

/* This process owns QPN 7 (and nothing else); it answers for itself, and
 * for OWNER_QPN with its owner. */
void lookup(const struct r2cc_ctrl_qp_ref *q, struct r2cc_ctrl_lookup_reply *r)
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

const struct r2cc_chan_hooks hooks = { on_msg, on_resolved, lookup };

/* Wait until *@v reaches @n, at most 10 s. */
bool wait_for(int *v, int n)
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

uint16_t port(void)
{
	/* A port per test process, away from the lab's and the default,
	 * below the kernel's ephemeral ports (32768 on): a test binds its
	 * direct port there, and a parallel one's may hold it. */
	return (uint16_t)(20000 + getpid() % 12000);
}

/* The job key every test process shares (self 0: frames to anyone). */
struct r2cc_ctrl_key job_key(void)
{
	struct r2cc_ctrl_key key;
	uint8_t secret[32];

	memset(secret, 0x5a, sizeof(secret));
	cr_assert_eq(r2cc_ctrl_key_derive(&key, secret, sizeof(secret), 9), 0);
	return key;
}

void start_nodes(const struct r2cc_chan_hooks *h, const char *peers,
		 const char *map, bool by_gid)
{
	struct r2cc_chan_cfg cfg = { .port = port(),
				     .pref_if = "",
				     .peers = peers,
				     .peer_by_gid = by_gid,
				     .node_map = map };
	struct r2cc_ctrl_key key = job_key();

	r2cc_log_set_level(R2CC_LOG_DEBUG);
	cr_assert_eq(r2cc_chan_start(&cfg, &key, h), 0);
	cr_assert(r2cc_chan_running());
	cr_assert_neq(r2cc_chan_self(), 0);
}

void start_with(const struct r2cc_chan_hooks *h)
{
	start_nodes(h, NULL, NULL, true);
}

void start(void)
{
	start_with(&hooks);
}

struct r2cc_ctrl_qp_ref loopback_ref(uint32_t qpn)
{
	struct r2cc_ctrl_qp_ref q = { .qpn = qpn };

	q.gid[10] = q.gid[11] = 0xff;
	memcpy(q.gid + 12, "\x7f\0\0\x01", 4);
	return q;
}

/* A listener on 127.0.0.2's rendezvous port: bound to that address, it
 * takes its connections before the channel's own (wildcard) rendezvous
 * listener. */
int other_rendezvous(int backlog)
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

/* One whole frame from @fd within 10 s, decoded into @m: 0 or -1 (no
 * assertion: test threads use it too). A BATCH's entries stay in this
 * thread's buffer until its next frame. */
int get_frame(int fd, const struct r2cc_ctrl_key *key, struct r2cc_ctrl_msg *m)
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

void read_frame(int fd, const struct r2cc_ctrl_key *key,
		struct r2cc_ctrl_msg *m)
{
	cr_assert_eq(get_frame(fd, key, m), 0, "no whole frame within 10 s");
}

/* A peer (@id) dialling our direct port: its HELLO, then our answer;
 * @rcvbuf: its receive buffer (0: the default). */
void say_hello(int fd, const struct r2cc_ctrl_key *key, uint64_t id,
	       uint64_t seq, const struct r2cc_ctrl_addr *addr, int naddr)
{
	say_hello_flags(fd, key, id, seq, addr, naddr, 0);
}

void say_hello_flags(int fd, const struct r2cc_ctrl_key *key, uint64_t id,
		     uint64_t seq, const struct r2cc_ctrl_addr *addr, int naddr,
		     uint8_t flags)
{
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	struct r2cc_ctrl_msg m;
	int len;

	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_HELLO;
	m.hdr.sender = id;
	m.hdr.receiver = r2cc_chan_self();
	m.hdr.seq = seq;
	m.hello.ver_min = m.hello.ver_max = R2CC_CTRL_VERSION;
	m.hello.pid = (uint32_t)getpid();
	m.hello.flags = flags;
	m.hello.naddr = (uint8_t)naddr;
	if (naddr)
		memcpy(m.hello.addr, addr, (size_t)naddr * sizeof(*addr));
	len = r2cc_ctrl_encode(key, &m, buf, sizeof(buf));
	cr_assert_gt(len, 0);
	cr_assert_eq(write(fd, buf, (size_t)len), len);
}

int fake_peer_buf(const struct r2cc_ctrl_key *key, uint64_t id, uint64_t seq,
		  int rcvbuf)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(r2cc_chan_port()),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct r2cc_ctrl_msg m;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	if (rcvbuf)
		cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
					sizeof(rcvbuf)),
			     0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	say_hello(fd, key, id, seq, NULL, 0);
	read_frame(fd, key, &m);
	cr_assert_eq(m.hdr.type, R2CC_CTRL_HELLO);
	return fd;
}

int fake_peer(const struct r2cc_ctrl_key *key, uint64_t id, uint64_t seq)
{
	return fake_peer_buf(key, id, seq, 0);
}

void nofile(rlim_t soft)
{
	struct rlimit rl;

	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < soft)
		cr_skip_test("RLIMIT_NOFILE's hard limit is below %lu",
			     (unsigned long)soft);
	rl.rlim_cur = soft;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}
