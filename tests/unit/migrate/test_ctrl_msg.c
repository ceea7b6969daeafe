/* SPDX-License-Identifier: MIT */
/*
 * test_ctrl_msg.c - the control message codec: round trips of every type,
 * every malformed, truncated and forged frame, and batches.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl_msg.h"
#include "log_capture.h"
#include "policy.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define HDR R2CC_CTRL_HDR_LEN
#define MAC R2CC_CTRL_MAC_LEN
#define JOB 0x1122334455667788ULL

static struct r2cc_ctrl_key key;
static uint8_t frame[R2CC_CTRL_FRAME_MAX + 64];
static void setup(void)
{
	uint8_t secret[40];

	memset(secret, 0x5a, sizeof(secret));
	cr_assert_eq(r2cc_ctrl_key_derive(&key, secret, sizeof(secret), JOB),
		     0);
	r2cc_log_set_fn(capture);
}

static void fill_addrs(struct r2cc_ctrl_addr *a, uint8_t n)
{
	uint8_t i;

	for (i = 0; i < n; i++) {
		a[i].family = i % 2 ? 6 : 4;
		a[i].rail = i == n - 1 ? R2CC_CTRL_RAIL_MGMT : i;
		a[i].port = (uint16_t)(7000 + i);
		a[i].addr[0] = i % 2 ? 0xfd : 10;
		a[i].addr[3] = (uint8_t)(i + 1);
		if (i % 2)
			a[i].addr[15] = 0x99;
	}
}

static void fill_gid(uint8_t *gid, uint8_t seed)
{
	for (int i = 0; i < 16; i++)
		gid[i] = (uint8_t)(seed + i);
}

/* A valid message of @type; @full fills its list to the maximum */
static void sample(uint8_t type, bool full, struct r2cc_ctrl_msg *m)
{
	uint16_t n = full ? R2CC_CTRL_MAX_MRS : 3;

	memset(m, 0, sizeof(*m));
	m->hdr.type = type;
	m->hdr.sender = 0x0102030405060708ULL;
	m->hdr.receiver = 0x1112131415161718ULL;
	m->hdr.seq = 42;
	switch (type) {
	case R2CC_CTRL_HELLO:
		m->hello.ver_min = 1;
		m->hello.ver_max = 3;
		m->hello.pid = 4242;
		m->hello.flags = full ? R2CC_CTRL_HELLO_REPLACES : 0;
		m->hello.naddr = full ? R2CC_CTRL_MAX_ADDRS : 3;
		fill_addrs(m->hello.addr, m->hello.naddr);
		break;
	case R2CC_CTRL_LOOKUP:
		fill_gid(m->lookup.gid, 0x10);
		m->lookup.qpn = 0xabcdef;
		break;
	case R2CC_CTRL_LOOKUP_REPLY:
		fill_gid(m->lookup_reply.what.gid, 0x20);
		m->lookup_reply.what.qpn = 0x11;
		m->lookup_reply.found = 1;
		m->lookup_reply.pid = 77;
		m->lookup_reply.owner = 0xfeedULL << 40;
		m->lookup_reply.naddr = full ? R2CC_CTRL_MAX_ADDRS : 2;
		fill_addrs(m->lookup_reply.addr, m->lookup_reply.naddr);
		break;
	case R2CC_CTRL_QP_BIND:
		m->qp_bind.local.qpn = 0x12;
		fill_gid(m->qp_bind.local.gid, 0x30);
		m->qp_bind.peer.qpn = 0xffffff;
		fill_gid(m->qp_bind.peer.gid, 0x40);
		m->qp_bind.backup.qpn = 0x345;
		fill_gid(m->qp_bind.backup.gid, 0x50);
		m->qp_bind.psn = 0xfffffe;
		m->qp_bind.rail = 15;
		m->qp_bind.mtu = 5;
		m->qp_bind.flags = R2CC_CTRL_BIND_PINNED;
		m->qp_bind.lid = 0xbfff;
		break;
	case R2CC_CTRL_MR_KEYS:
		m->mr_keys.n = n;
		m->mr_keys.rail = 3;
		for (uint16_t i = 0; i < n; i++) {
			m->mr_keys.mr[i].rkey = 0x1000u + i;
			m->mr_keys.mr[i].backup_rkey = 0x80000000u | i;
			m->mr_keys.mr[i].addr = 0x7f0000000000ULL + i * 4096u;
			m->mr_keys.mr[i].len =
				i ? 4096u * i :
				    UINT64_MAX - m->mr_keys.mr[0].addr;
		}
		break;
	case R2CC_CTRL_MR_INVALIDATE:
		m->mr_inval.n = n;
		for (uint16_t i = 0; i < n; i++)
			m->mr_inval.rkey[i] = 0xdead0000u | i;
		break;
	case R2CC_CTRL_FAILOVER:
	case R2CC_CTRL_FAILOVER_ACK:
		m->failover.qpn = 0x1234;
		m->failover.reason = R2CC_CTRL_WHY_SRQ;
		m->failover.flags = R2CC_CTRL_FO_PSN_VALID |
				    (type == R2CC_CTRL_FAILOVER_ACK ?
					     R2CC_CTRL_FO_RECV_TAKEN :
					     0);
		m->failover.rq_psn = 0xabcdef;
		m->failover.recvs = 1ULL << 40;
		if (type == R2CC_CTRL_FAILOVER) {
			m->failover.flags |=
				R2CC_CTRL_FO_BACKUP | R2CC_CTRL_FO_CONNECTED;
			m->failover.bqpn = 0x4321;
			m->failover.bpsn = 0xfedcba;
		}
		break;
	case R2CC_CTRL_FAILBACK:
		m->failback.qpn = 0x777;
		m->failback.phase = R2CC_CTRL_FB_PROPOSE;
		m->failback.flags = R2CC_CTRL_FB_RECOVERED;
		m->failback.psn = 0xfedcba;
		break;
	case R2CC_CTRL_KEEPALIVE:
		m->keepalive_ns = 0x0123456789abcdefULL;
		break;
	case R2CC_CTRL_PEER_DOWN:
		m->peer_down.rail = 3;
		m->peer_down.reason = R2CC_CTRL_WHY_CARRIER;
		break;
	}
}

/* Encode a sample into frame[]: its length */
static size_t enc(uint8_t type, bool full)
{
	struct r2cc_ctrl_msg m;
	int n;

	sample(type, full, &m);
	n = r2cc_ctrl_encode(&key, &m, frame, sizeof(frame));
	cr_assert_gt(n, 0, "encode type %u: %d", type, n);
	return (size_t)n;
}

/* Recompute the MAC of a frame of @len bytes, as a keyed sender would */
static void reseal(uint8_t *f, size_t len)
{
	crypto_auth_hmacsha256(f + len - MAC, f, len - MAC, key.k);
}

static void put_le(uint8_t *b, uint64_t v, size_t width)
{
	for (size_t i = 0; i < width; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

/* Decode @len bytes from an exactly sized heap copy, so ASan sees overreads */
static int dec(const uint8_t *f, size_t len, struct r2cc_ctrl_msg *m)
{
	uint8_t *copy = malloc(len ? len : 1);
	int rc;

	cr_assert_not_null(copy);
	memcpy(copy, f, len);
	rc = r2cc_ctrl_decode(&key, copy, len, m);
	free(copy);
	return rc;
}

struct rt_case {
	uint8_t type;
	bool full;
	uint32_t body; /* the body length ctrl_msg.h documents */
};

ParameterizedTestParameters(ctrl_msg, round_trip)
{
	static struct rt_case cases[] = {
		{ R2CC_CTRL_HELLO, false, 8 + 3 * 20 },
		{ R2CC_CTRL_HELLO, true, 8 + 16 * 20 },
		{ R2CC_CTRL_LOOKUP, false, 20 },
		{ R2CC_CTRL_LOOKUP_REPLY, false, 36 + 2 * 20 },
		{ R2CC_CTRL_LOOKUP_REPLY, true, 36 + 16 * 20 },
		{ R2CC_CTRL_QP_BIND, false, 70 },
		{ R2CC_CTRL_MR_KEYS, false, 4 + 3 * 24 },
		{ R2CC_CTRL_MR_KEYS, true, 4 + 256 * 24 },
		{ R2CC_CTRL_MR_INVALIDATE, false, 4 + 3 * 4 },
		{ R2CC_CTRL_MR_INVALIDATE, true, 4 + 256 * 4 },
		{ R2CC_CTRL_FAILOVER, false, 28 },
		{ R2CC_CTRL_FAILOVER_ACK, false, 28 },
		{ R2CC_CTRL_FAILBACK, false, 12 },
		{ R2CC_CTRL_KEEPALIVE, false, 8 },
		{ R2CC_CTRL_PEER_DOWN, false, 4 },
	};

	return cr_make_param_array(struct rt_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct rt_case *c, ctrl_msg, round_trip, .init = setup,
		  .timeout = 5)
{
	static uint8_t again[R2CC_CTRL_FRAME_MAX];
	struct r2cc_ctrl_msg want, got;
	size_t len = enc(c->type, c->full);

	cr_assert_eq(len, HDR + c->body + MAC, "type %u: %zu bytes", c->type,
		     len);
	cr_assert_eq(r2cc_ctrl_frame_len(frame, len), (int)len);
	cr_assert_eq(dec(frame, len, &got), 0);
	sample(c->type, c->full, &want);
	want.hdr.version = R2CC_CTRL_VERSION;
	want.hdr.len = c->body;
	want.hdr.job = JOB;
	cr_assert_eq(memcmp(&got, &want, sizeof(got)), 0, "type %u", c->type);
	/* strict decoding: the encoding of what decodes is the frame itself */
	cr_assert_eq(r2cc_ctrl_encode(&key, &got, again, sizeof(again)),
		     (int)len);
	cr_assert_eq(memcmp(again, frame, len), 0);
}

Test(ctrl_msg, header_is_little_endian, .init = setup, .timeout = 5)
{
	static const uint8_t want[HDR + 8] = {
		'R',  '2',  'C',  'C',	1,    R2CC_CTRL_KEEPALIVE,
		0,    0, /* */
		8,    0,    0,	  0, /* body length */
		0x88, 0x77, 0x66, 0x55, 0x44, 0x33,
		0x22, 0x11, /* job */
		8,    7,    6,	  5,	4,    3,
		2,    1, /* sender */
		0x18, 0x17, 0x16, 0x15, 0x14, 0x13,
		0x12, 0x11, /* receiver */
		42,   0,    0,	  0,	0,    0,
		0,    0, /* seq */
		0xef, 0xcd, 0xab, 0x89, 0x67, 0x45,
		0x23, 0x01, /* timestamp */
	};
	uint8_t mac[MAC];

	cr_assert_eq(enc(R2CC_CTRL_KEEPALIVE, false), sizeof(want) + MAC);
	cr_assert_eq(memcmp(frame, want, sizeof(want)), 0);
	crypto_auth_hmacsha256(mac, want, sizeof(want), key.k);
	cr_assert_eq(memcmp(frame + sizeof(want), mac, MAC), 0);
}

Test(ctrl_msg, lookup_reply_not_found, .init = setup, .timeout = 5)
{
	struct r2cc_ctrl_msg m, got;
	int n;

	sample(R2CC_CTRL_LOOKUP_REPLY, false, &m);
	m.lookup_reply.found = 0;
	cr_assert_eq(r2cc_ctrl_encode(&key, &m, frame, sizeof(frame)), -EINVAL,
		     "addresses of nobody");
	m.lookup_reply.naddr = 0;
	m.lookup_reply.pid = 0;
	m.lookup_reply.owner = 0;
	n = r2cc_ctrl_encode(&key, &m, frame, sizeof(frame));
	cr_assert_eq(n, HDR + 36 + MAC);
	cr_assert_eq(dec(frame, (size_t)n, &got), 0);
	cr_assert_eq(got.lookup_reply.found, 0);
	cr_assert_eq(got.lookup_reply.what.qpn, 0x11);
}

ParameterizedTestParameters(ctrl_msg, truncated_everywhere)
{
	static struct rt_case cases[] = {
		{ R2CC_CTRL_HELLO, true, 0 },
		{ R2CC_CTRL_LOOKUP_REPLY, true, 0 },
		{ R2CC_CTRL_QP_BIND, false, 0 },
		{ R2CC_CTRL_MR_KEYS, true, 0 },
		{ R2CC_CTRL_MR_INVALIDATE, false, 0 },
		{ R2CC_CTRL_FAILOVER, false, 0 },
		{ R2CC_CTRL_PEER_DOWN, false, 0 },
	};

	return cr_make_param_array(struct rt_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct rt_case *c, ctrl_msg, truncated_everywhere,
		  .init = setup, .timeout = 5)
{
	struct r2cc_ctrl_msg m;
	size_t len = enc(c->type, c->full);

	for (size_t i = 0; i < len; i++) {
		cr_assert_eq(dec(frame, i, &m), -EBADMSG, "cut at %zu", i);
		cr_assert_eq(r2cc_ctrl_frame_len(frame, i),
			     i < HDR ? -EAGAIN : (int)len, "peek %zu", i);
	}
	/* and trailing bytes after the MAC */
	cr_assert_eq(dec(frame, len + 1, &m), -EBADMSG);
}

/* Bytes patched into an encoded frame (then resealed) and the verdict */
struct patch_case {
	char what[24];
	uint8_t type;
	uint32_t off; /* from the frame's start */
	uint8_t width;
	uint64_t val;
	int want;
};

#define B(x) (HDR + (x)) /* an offset into the body */

ParameterizedTestParameters(ctrl_msg, patched)
{
	static struct patch_case cases[] = {
		{ "magic", R2CC_CTRL_PEER_DOWN, 0, 1, 'r', -EBADMSG },
		{ "magic 4", R2CC_CTRL_PEER_DOWN, 3, 1, 'X', -EBADMSG },
		{ "version 0", R2CC_CTRL_PEER_DOWN, 4, 1, 0, -EPROTO },
		{ "version 2", R2CC_CTRL_PEER_DOWN, 4, 1, 2, -EPROTO },
		{ "version 255", R2CC_CTRL_PEER_DOWN, 4, 1, 255, -EPROTO },
		{ "type 0", R2CC_CTRL_PEER_DOWN, 5, 1, 0, -EPROTO },
		{ "type 13", R2CC_CTRL_PEER_DOWN, 5, 1, 13, -EPROTO },
		{ "type 255", R2CC_CTRL_PEER_DOWN, 5, 1, 255, -EPROTO },
		{ "type, other body", R2CC_CTRL_PEER_DOWN, 5, 1,
		  R2CC_CTRL_KEEPALIVE, -EBADMSG },
		{ "flags", R2CC_CTRL_PEER_DOWN, 6, 2, 1, -EPROTO },
		{ "flags high", R2CC_CTRL_PEER_DOWN, 6, 2, 0x8000, -EPROTO },
		{ "len 64K+1", R2CC_CTRL_PEER_DOWN, 8, 4, 65537, -EMSGSIZE },
		{ "len max", R2CC_CTRL_PEER_DOWN, 8, 4, UINT32_MAX, -EMSGSIZE },
		{ "job", R2CC_CTRL_PEER_DOWN, 12, 8, JOB + 1, -EACCES },
		{ "seq 0", R2CC_CTRL_PEER_DOWN, 36, 8, 0, -EBADMSG },
		{ "hello ver_min 0", R2CC_CTRL_HELLO, B(0), 1, 0, -EBADMSG },
		{ "hello ver_min 2", R2CC_CTRL_HELLO, B(0), 1, 2, -EBADMSG },
		{ "hello ver_max 0", R2CC_CTRL_HELLO, B(1), 1, 0, -EBADMSG },
		{ "hello naddr 17", R2CC_CTRL_HELLO, B(2), 1, 17, -EBADMSG },
		{ "hello naddr 255", R2CC_CTRL_HELLO, B(2), 1, 255, -EBADMSG },
		{ "hello naddr +1", R2CC_CTRL_HELLO, B(2), 1, 4, -EBADMSG },
		{ "hello naddr -1", R2CC_CTRL_HELLO, B(2), 1, 2, -EBADMSG },
		{ "hello flags 2", R2CC_CTRL_HELLO, B(3), 1, 2, -EBADMSG },
		{ "hello flags 0x80", R2CC_CTRL_HELLO, B(3), 1, 0x80,
		  -EBADMSG },
		{ "hello pid 0", R2CC_CTRL_HELLO, B(4), 4, 0, -EBADMSG },
		{ "hello pid 2^31", R2CC_CTRL_HELLO, B(4), 4, 1U << 31,
		  -EBADMSG },
		{ "addr family 5", R2CC_CTRL_HELLO, B(8), 1, 5, -EBADMSG },
		{ "addr family 0", R2CC_CTRL_HELLO, B(8), 1, 0, -EBADMSG },
		{ "addr rail 16", R2CC_CTRL_HELLO, B(9), 1, 16, -EBADMSG },
		{ "addr rail 254", R2CC_CTRL_HELLO, B(9), 1, 254, -EBADMSG },
		{ "addr port 0", R2CC_CTRL_HELLO, B(10), 2, 0, -EBADMSG },
		{ "addr v4 tail", R2CC_CTRL_HELLO, B(12 + 4), 1, 1, -EBADMSG },
		{ "addr v4 end", R2CC_CTRL_HELLO, B(12 + 15), 1, 1, -EBADMSG },
		{ "lookup qpn", R2CC_CTRL_LOOKUP, B(0), 4, 1U << 24, -EBADMSG },
		{ "reply qpn", R2CC_CTRL_LOOKUP_REPLY, B(0), 4, 1U << 24,
		  -EBADMSG },
		{ "reply found 2", R2CC_CTRL_LOOKUP_REPLY, B(20), 1, 2,
		  -EBADMSG },
		{ "reply found 0", R2CC_CTRL_LOOKUP_REPLY, B(20), 1, 0,
		  -EBADMSG },
		{ "reply naddr 0", R2CC_CTRL_LOOKUP_REPLY, B(21), 1, 0,
		  -EBADMSG },
		{ "reply naddr 17", R2CC_CTRL_LOOKUP_REPLY, B(21), 1, 17,
		  -EBADMSG },
		{ "reply rsv", R2CC_CTRL_LOOKUP_REPLY, B(23), 1, 1, -EBADMSG },
		{ "reply pid 0", R2CC_CTRL_LOOKUP_REPLY, B(24), 4, 0,
		  -EBADMSG },
		{ "reply owner 0", R2CC_CTRL_LOOKUP_REPLY, B(28), 8, 0,
		  -EBADMSG },
		{ "bind local qpn", R2CC_CTRL_QP_BIND, B(0), 4, 1U << 24,
		  -EBADMSG },
		{ "bind peer qpn", R2CC_CTRL_QP_BIND, B(20), 4, UINT32_MAX,
		  -EBADMSG },
		{ "bind backup qpn", R2CC_CTRL_QP_BIND, B(40), 4, 1U << 24,
		  -EBADMSG },
		{ "bind psn", R2CC_CTRL_QP_BIND, B(60), 4, 1U << 24, -EBADMSG },
		{ "bind rail 16", R2CC_CTRL_QP_BIND, B(64), 1, 16, -EBADMSG },
		{ "bind rail mgmt", R2CC_CTRL_QP_BIND, B(64), 1,
		  R2CC_CTRL_RAIL_MGMT, -EBADMSG },
		{ "bind mtu 0", R2CC_CTRL_QP_BIND, B(65), 1, 0, -EBADMSG },
		{ "bind mtu 6", R2CC_CTRL_QP_BIND, B(65), 1, 6, -EBADMSG },
		{ "bind flags", R2CC_CTRL_QP_BIND, B(66), 1, 16, -EBADMSG },
		{ "bind lazy + qpn", R2CC_CTRL_QP_BIND, B(66), 1, 3, -EBADMSG },
		{ "bind rsv", R2CC_CTRL_QP_BIND, B(67), 1, 0x80, -EBADMSG },
		{ "bind lid multicast", R2CC_CTRL_QP_BIND, B(68), 2, 0xc000,
		  -EBADMSG },
		{ "bind lid permissive", R2CC_CTRL_QP_BIND, B(68), 2, 0xffff,
		  -EBADMSG },
		{ "mr n 257", R2CC_CTRL_MR_KEYS, B(0), 2, 257, -EBADMSG },
		{ "mr n 65535", R2CC_CTRL_MR_KEYS, B(0), 2, 65535, -EBADMSG },
		{ "mr n +1", R2CC_CTRL_MR_KEYS, B(0), 2, 4, -EBADMSG },
		{ "mr n -1", R2CC_CTRL_MR_KEYS, B(0), 2, 2, -EBADMSG },
		{ "mr rail", R2CC_CTRL_MR_KEYS, B(2), 1, 16, -EBADMSG },
		{ "mr rsv", R2CC_CTRL_MR_KEYS, B(3), 1, 1, -EBADMSG },
		{ "mr addr+len wraps", R2CC_CTRL_MR_KEYS, B(4 + 16), 8,
		  UINT64_MAX, -EBADMSG },
		{ "inval n 257", R2CC_CTRL_MR_INVALIDATE, B(0), 2, 257,
		  -EBADMSG },
		{ "inval n +1", R2CC_CTRL_MR_INVALIDATE, B(0), 2, 4, -EBADMSG },
		{ "inval n -1", R2CC_CTRL_MR_INVALIDATE, B(0), 2, 2, -EBADMSG },
		{ "inval rsv", R2CC_CTRL_MR_INVALIDATE, B(3), 1, 1, -EBADMSG },
		{ "fo qpn", R2CC_CTRL_FAILOVER, B(0), 4, 1U << 24, -EBADMSG },
		{ "fo reason", R2CC_CTRL_FAILOVER, B(4), 1, R2CC_CTRL_NREASONS,
		  -EBADMSG },
		{ "fo flags", R2CC_CTRL_FAILOVER, B(5), 1, 17, -EBADMSG },
		{ "ack conn, no backup", R2CC_CTRL_FAILOVER_ACK, B(5), 1, 9,
		  -EBADMSG },
		{ "fo backup qpn", R2CC_CTRL_FAILOVER, B(20), 4, 1U << 24,
		  -EBADMSG },
		{ "fo backup psn", R2CC_CTRL_FAILOVER, B(24), 4, 1U << 24,
		  -EBADMSG },
		{ "ack bqpn, no flag", R2CC_CTRL_FAILOVER_ACK, B(20), 4, 7,
		  -EBADMSG },
		{ "fo psn not valid", R2CC_CTRL_FAILOVER, B(5), 1, 0,
		  -EBADMSG },
		{ "fo rsv", R2CC_CTRL_FAILOVER, B(6), 2, 1, -EBADMSG },
		{ "fo psn", R2CC_CTRL_FAILOVER, B(8), 4, 1U << 24, -EBADMSG },
		{ "ack reason", R2CC_CTRL_FAILOVER_ACK, B(4), 1, 200,
		  -EBADMSG },
		{ "fb qpn", R2CC_CTRL_FAILBACK, B(0), 4, UINT32_MAX, -EBADMSG },
		{ "fb phase", R2CC_CTRL_FAILBACK, B(4), 1, R2CC_CTRL_FB_NPHASES,
		  -EBADMSG },
		{ "fb flags", R2CC_CTRL_FAILBACK, B(5), 1, 8, -EBADMSG },
		{ "fb rsv", R2CC_CTRL_FAILBACK, B(7), 1, 1, -EBADMSG },
		{ "fb psn", R2CC_CTRL_FAILBACK, B(8), 4, 1U << 24, -EBADMSG },
		{ "down rail", R2CC_CTRL_PEER_DOWN, B(0), 1, 16, -EBADMSG },
		{ "down reason", R2CC_CTRL_PEER_DOWN, B(1), 1,
		  R2CC_CTRL_NREASONS, -EBADMSG },
		{ "down rsv", R2CC_CTRL_PEER_DOWN, B(2), 2, 0x100, -EBADMSG },
	};

	return cr_make_param_array(struct patch_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct patch_case *c, ctrl_msg, patched, .init = setup,
		  .timeout = 5)
{
	struct r2cc_ctrl_msg m;
	size_t len = enc(c->type, false);

	put_le(frame + c->off, c->val, c->width);
	reseal(frame, len);
	cr_assert_eq(dec(frame, len, &m), c->want, "%s: %d, want %d", c->what,
		     dec(frame, len, &m), c->want);
}

/* The length field, with the frame grown or cut to match, then resealed */
struct len_case {
	int delta; /* body bytes added (zeros) or removed */
	int want;
};

ParameterizedTestParameters(ctrl_msg, body_len)
{
	static struct len_case cases[] = {
		{ -1, -EBADMSG },	 { -4, -EBADMSG },
		{ 1, -EBADMSG },	 { 8, -EBADMSG },
		{ 65536 - 4, -EBADMSG }, { 65536 - 3, -EMSGSIZE },
	};

	return cr_make_param_array(struct len_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct len_case *c, ctrl_msg, body_len, .init = setup,
		  .timeout = 5)
{
	struct r2cc_ctrl_msg m;
	size_t len = enc(R2CC_CTRL_PEER_DOWN, false);
	uint32_t body = (uint32_t)(4 + c->delta);

	memset(frame + HDR + 4, 0, sizeof(frame) - HDR - 4);
	put_le(frame + 8, body, 4);
	len = HDR + body + MAC;
	if (c->want == -EMSGSIZE) {
		cr_assert_eq(r2cc_ctrl_frame_len(frame, HDR), -EMSGSIZE);
		return;
	}
	cr_assert_eq(r2cc_ctrl_frame_len(frame, HDR), (int)len);
	reseal(frame, len);
	cr_assert_eq(dec(frame, len, &m), c->want, "delta %d", c->delta);
}

Test(ctrl_msg, flipped_bits, .init = setup, .timeout = 5)
{
	static const uint8_t types[] = { R2CC_CTRL_HELLO, R2CC_CTRL_QP_BIND,
					 R2CC_CTRL_MR_INVALIDATE,
					 R2CC_CTRL_KEEPALIVE };
	struct r2cc_ctrl_msg m;

	for (size_t t = 0; t < ARRAY_SIZE(types); t++) {
		size_t len = enc(types[t], false);

		for (size_t bit = 0; bit < len * 8; bit++) {
			size_t at = bit / 8;
			int rc;

			frame[at] ^= (uint8_t)(1U << (bit % 8));
			rc = dec(frame, len, &m);
			frame[at] ^= (uint8_t)(1U << (bit % 8));
			if (at < 4)
				cr_assert_eq(rc, -EBADMSG, "magic bit %zu",
					     bit);
			else if (at == 4)
				cr_assert_eq(rc, -EPROTO, "version bit %zu",
					     bit);
			else if (at >= 8 && at < 12)
				cr_assert(rc == -EBADMSG || rc == -EMSGSIZE,
					  "length bit %zu: %d", bit, rc);
			else
				cr_assert_eq(rc, -EACCES, "type %u bit %zu: %d",
					     types[t], bit, rc);
		}
		cr_assert_eq(dec(frame, len, &m), 0);
	}
}

Test(ctrl_msg, wrong_key, .init = setup, .timeout = 5)
{
	struct r2cc_ctrl_key other;
	struct r2cc_ctrl_msg m;
	uint8_t secret[40];
	size_t len = enc(R2CC_CTRL_MR_KEYS, true);

	memset(secret, 0x5a, sizeof(secret));
	secret[39] ^= 1;
	cr_assert_eq(r2cc_ctrl_key_derive(&other, secret, 40, JOB), 0);
	cr_assert_eq(r2cc_ctrl_decode(&other, frame, len, &m), -EACCES);
	secret[39] ^= 1;
	cr_assert_eq(r2cc_ctrl_key_derive(&other, secret, 40, JOB + 1), 0);
	cr_assert_eq(r2cc_ctrl_decode(&other, frame, len, &m), -EACCES,
		     "another job");
	other.job = JOB; /* right job id, that job's key not held */
	cr_assert_eq(r2cc_ctrl_decode(&other, frame, len, &m), -EACCES);
	cr_assert_eq(dec(frame, len, &m), 0);
}

Test(ctrl_msg, encode_checks, .init = setup, .timeout = 5)
{
	struct r2cc_ctrl_msg m;
	size_t len = enc(R2CC_CTRL_HELLO, true);

	sample(R2CC_CTRL_HELLO, true, &m);
	for (size_t size = 0; size < len; size++)
		cr_assert_eq(r2cc_ctrl_encode(&key, &m, frame, size), -ENOSPC,
			     "size %zu", size);
	cr_assert_eq(r2cc_ctrl_encode(&key, &m, frame, len), (int)len);
	m.hdr.seq = 0;
	cr_assert_eq(r2cc_ctrl_encode(&key, &m, frame, len), -EINVAL);
	m.hdr.seq = 1;
	m.hdr.flags = 1;
	cr_assert_eq(r2cc_ctrl_encode(&key, &m, frame, len), -EINVAL);
	m.hdr.flags = 0;
	m.hdr.type = R2CC_CTRL_NTYPES;
	cr_assert_eq(r2cc_ctrl_encode(&key, &m, frame, len), -EINVAL);
	m.hdr.type = 0;
	cr_assert_eq(r2cc_ctrl_encode(&key, &m, frame, len), -EINVAL);
	sample(R2CC_CTRL_HELLO, true, &m);
	m.hello.naddr = R2CC_CTRL_MAX_ADDRS + 1;
	cr_assert_eq(r2cc_ctrl_encode(&key, &m, frame, len), -EINVAL);
	sample(R2CC_CTRL_MR_KEYS, true, &m);
	m.mr_keys.n = R2CC_CTRL_MAX_MRS + 1;
	cr_assert_eq(r2cc_ctrl_encode(&key, &m, frame, sizeof(frame)), -EINVAL);
	sample(R2CC_CTRL_MR_KEYS, false, &m);
	m.mr_keys.mr[2].len = UINT64_MAX;
	cr_assert_eq(r2cc_ctrl_encode(&key, &m, frame, sizeof(frame)), -EINVAL);
	sample(R2CC_CTRL_FAILOVER, false, &m);
	m.failover.flags = 0;
	cr_assert_eq(r2cc_ctrl_encode(&key, &m, frame, sizeof(frame)), -EINVAL,
		     "an rq_psn marked invalid");
	sample(R2CC_CTRL_QP_BIND, false, &m);
	m.qp_bind.mtu = 6;
	cr_assert_eq(r2cc_ctrl_encode(&key, &m, frame, sizeof(frame)), -EINVAL);
}

Test(ctrl_msg, frame_len_partial, .init = setup, .timeout = 5)
{
	static const uint8_t bad[] = { 'R', '2', 'X' };
	static const uint8_t v2[] = { 'R', '2', 'C', 'C', 2 };
	size_t len = enc(R2CC_CTRL_LOOKUP, false);

	cr_assert_eq(r2cc_ctrl_frame_len(frame, 0), -EAGAIN);
	for (size_t i = 1; i < HDR; i++)
		cr_assert_eq(r2cc_ctrl_frame_len(frame, i), -EAGAIN);
	cr_assert_eq(r2cc_ctrl_frame_len(frame, HDR), (int)len);
	cr_assert_eq(r2cc_ctrl_frame_len(frame, len + 100), (int)len);
	cr_assert_eq(r2cc_ctrl_frame_len(bad, 2), -EAGAIN);
	cr_assert_eq(r2cc_ctrl_frame_len(bad, 3), -EBADMSG, "early");
	cr_assert_eq(r2cc_ctrl_frame_len(v2, 4), -EAGAIN);
	cr_assert_eq(r2cc_ctrl_frame_len(v2, 5), -EPROTO, "early");
	put_le(frame + 8, R2CC_CTRL_BODY_MAX, 4);
	cr_assert_eq(r2cc_ctrl_frame_len(frame, HDR), R2CC_CTRL_FRAME_MAX);
	put_le(frame + 8, R2CC_CTRL_BODY_MAX + 1, 4);
	cr_assert_eq(r2cc_ctrl_frame_len(frame, HDR), -EMSGSIZE);
	cr_assert_eq(r2cc_ctrl_frame_len(frame, 11), -EAGAIN,
		     "the whole header first");
}

/* A frame is bound to its receiver: another process of the job refuses
 * it; only a first contact (HELLO, LOOKUP) may go to anyone. */
Test(ctrl_msg, receiver_binding, .init = setup, .timeout = 5)
{
	struct r2cc_ctrl_key me = key, other = key;
	struct r2cc_ctrl_msg m, got;
	int n;

	me.self = 0x1112131415161718ULL;
	other.self = 0x2222222222222222ULL;
	sample(R2CC_CTRL_FAILOVER, false, &m);
	n = r2cc_ctrl_encode(&key, &m, frame, sizeof(frame));
	cr_assert_gt(n, 0);
	cr_assert_eq(r2cc_ctrl_decode(&me, frame, (size_t)n, &got), 0);
	cr_assert_eq(got.hdr.receiver, me.self);
	cr_assert_eq(r2cc_ctrl_decode(&other, frame, (size_t)n, &got), -EACCES);
	/* To anyone: refused for FAILOVER, accepted for HELLO and LOOKUP. */
	m.hdr.receiver = R2CC_CTRL_ANY;
	n = r2cc_ctrl_encode(&key, &m, frame, sizeof(frame));
	cr_assert_eq(r2cc_ctrl_decode(&other, frame, (size_t)n, &got), -EACCES);
	sample(R2CC_CTRL_HELLO, false, &m);
	m.hdr.receiver = R2CC_CTRL_ANY;
	n = r2cc_ctrl_encode(&key, &m, frame, sizeof(frame));
	cr_assert_eq(r2cc_ctrl_decode(&other, frame, (size_t)n, &got), 0);
	sample(R2CC_CTRL_LOOKUP, false, &m);
	m.hdr.receiver = R2CC_CTRL_ANY;
	n = r2cc_ctrl_encode(&key, &m, frame, sizeof(frame));
	cr_assert_eq(r2cc_ctrl_decode(&other, frame, (size_t)n, &got), 0);
}

Test(ctrl_msg, new_ids_are_random_and_nonzero, .timeout = 5)
{
	uint64_t a = r2cc_ctrl_new_id(), b = r2cc_ctrl_new_id();

	cr_assert_neq(a, 0);
	cr_assert_neq(b, 0);
	cr_assert_neq(a, b);
}

/* Each message @m alone, encoded with @hdr's ids: compared byte by byte */
static void same_msg(const struct r2cc_ctrl_msg *a,
		     const struct r2cc_ctrl_msg *b)
{
	static uint8_t fa[R2CC_CTRL_FRAME_MAX], fb[R2CC_CTRL_FRAME_MAX];
	struct r2cc_ctrl_msg x = *a, y = *b;
	int na, nb;

	x.hdr.seq = y.hdr.seq = 1;
	x.hdr.sender = y.hdr.sender = 5;
	x.hdr.receiver = y.hdr.receiver = 6;
	na = r2cc_ctrl_encode(&key, &x, fa, sizeof(fa));
	nb = r2cc_ctrl_encode(&key, &y, fb, sizeof(fb));
	cr_assert_gt(na, 0);
	cr_assert_eq(na, nb, "type %u", a->hdr.type);
	cr_assert_eq(memcmp(fa, fb, (size_t)na), 0, "type %u", a->hdr.type);
}

Test(ctrl_msg, a_batch_carries_its_messages_in_order, .init = setup,
     .timeout = 5)
{
	static const uint8_t types[] = {
		R2CC_CTRL_FAILOVER,	R2CC_CTRL_QP_BIND,
		R2CC_CTRL_FAILBACK,	R2CC_CTRL_MR_INVALIDATE,
		R2CC_CTRL_FAILOVER_ACK, R2CC_CTRL_MR_KEYS
	};
	struct r2cc_ctrl_batch b = { 0 };
	struct r2cc_ctrl_msg m, one, want;
	uint32_t off = 0;
	size_t i;
	int n;

	for (i = 0; i < ARRAY_SIZE(types); i++) {
		sample(types[i], i >= 3, &m);
		cr_assert_eq(r2cc_ctrl_batch_add(&b, &m), 0, "type %u",
			     types[i]);
	}
	sample(R2CC_CTRL_KEEPALIVE, false, &m); /* for the header */
	r2cc_ctrl_batch_msg(&b, &m);
	n = r2cc_ctrl_encode(&key, &m, frame, sizeof(frame));
	cr_assert_gt(n, 0);
	cr_assert_eq(dec(frame, (size_t)n, &m), 0);
	cr_assert_eq(m.hdr.type, R2CC_CTRL_BATCH);
	cr_assert_eq(m.batch.n, ARRAY_SIZE(types));
	/* (dec() freed its copy: read from the frame itself) */
	cr_assert_eq(r2cc_ctrl_decode(&key, frame, (size_t)n, &m), 0);
	for (i = 0; i < ARRAY_SIZE(types); i++) {
		cr_assert_eq(r2cc_ctrl_batch_next(&m, &off, &one), 1);
		cr_assert_eq(one.hdr.type, types[i]);
		cr_assert_eq(one.hdr.sender, m.hdr.sender);
		sample(types[i], i >= 3, &want);
		same_msg(&one, &want);
	}
	cr_assert_eq(r2cc_ctrl_batch_next(&m, &off, &one), 0);
	r2cc_ctrl_batch_free(&b);
}

Test(ctrl_msg, a_batch_takes_only_messages_about_qps, .init = setup,
     .timeout = 5)
{
	static const uint8_t types[] = { R2CC_CTRL_HELLO, R2CC_CTRL_LOOKUP,
					 R2CC_CTRL_LOOKUP_REPLY,
					 R2CC_CTRL_KEEPALIVE,
					 R2CC_CTRL_PEER_DOWN };
	struct r2cc_ctrl_batch b = { 0 };
	struct r2cc_ctrl_msg m;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(types); i++) {
		sample(types[i], false, &m);
		cr_assert_eq(r2cc_ctrl_batch_add(&b, &m), -EINVAL, "type %u",
			     types[i]);
	}
	sample(R2CC_CTRL_FAILOVER, false, &m);
	m.failover.qpn = 1U << 24; /* out of range */
	cr_assert_eq(r2cc_ctrl_batch_add(&b, &m), -EINVAL);
	cr_assert_eq(b.n, 0);
	/* an empty BATCH is no message */
	sample(R2CC_CTRL_KEEPALIVE, false, &m);
	r2cc_ctrl_batch_msg(&b, &m);
	cr_assert_eq(r2cc_ctrl_encode(&key, &m, frame, sizeof(frame)), -EINVAL);
	r2cc_ctrl_batch_free(&b);
}

Test(ctrl_msg, a_batch_fills_to_the_largest_body, .init = setup, .timeout = 10)
{
	static struct r2cc_ctrl_msg one;
	struct r2cc_ctrl_batch b = { 0 };
	struct r2cc_ctrl_msg m;
	uint32_t off = 0;
	int n, ret;

	sample(R2CC_CTRL_FAILOVER, false, &m);
	while (!(ret = r2cc_ctrl_batch_add(&b, &m)))
		;
	cr_assert_eq(ret, -ENOSPC);
	/* 4 + 32 bytes each, in a 64 KiB body */
	cr_assert_eq(b.n, (R2CC_CTRL_BODY_MAX - 4) / 32, "%u", b.n);
	sample(R2CC_CTRL_KEEPALIVE, false, &m);
	r2cc_ctrl_batch_msg(&b, &m);
	n = r2cc_ctrl_encode(&key, &m, frame, sizeof(frame));
	cr_assert_gt(n, 0);
	cr_assert_eq(r2cc_ctrl_decode(&key, frame, (size_t)n, &m), 0);
	for (n = 0; r2cc_ctrl_batch_next(&m, &off, &one); n++)
		cr_assert_eq(one.failover.qpn, 0x1234);
	cr_assert_eq(n, b.n);
	r2cc_ctrl_batch_free(&b);
}

/* The BATCH's count, an entry's type, its length, a byte after the
 * last: each patched and resealed is refused. */
Test(ctrl_msg, a_malformed_batch_is_refused, .init = setup, .timeout = 5)
{
	struct {
		size_t off;
		uint8_t val;
	} patch[] = {
		{ B(0), 3 }, /* n: 2 entries, 3 said */
		{ B(0), 1 }, /* n: 1 said, 2 there */
		{ B(2), 1 }, /* the BATCH's rsv */
		{ B(4), R2CC_CTRL_HELLO }, /* an entry's type */
		{ B(4), R2CC_CTRL_BATCH }, /* a BATCH in a BATCH */
		{ B(5), 1 }, /* an entry's rsv */
		{ B(6), 27 }, /* a FAILOVER's length, one short */
		{ B(4 + 4 + 4), 0xff }, /* its reason out of range */
	};
	struct r2cc_ctrl_batch b = { 0 };
	struct r2cc_ctrl_msg m;
	uint8_t *copy;
	size_t i;
	int n;

	sample(R2CC_CTRL_FAILOVER, false, &m);
	cr_assert_eq(r2cc_ctrl_batch_add(&b, &m), 0);
	cr_assert_eq(r2cc_ctrl_batch_add(&b, &m), 0);
	sample(R2CC_CTRL_KEEPALIVE, false, &m);
	r2cc_ctrl_batch_msg(&b, &m);
	n = r2cc_ctrl_encode(&key, &m, frame, sizeof(frame));
	cr_assert_gt(n, 0);
	copy = malloc((size_t)n);
	cr_assert_not_null(copy);
	for (i = 0; i < ARRAY_SIZE(patch); i++) {
		memcpy(copy, frame, (size_t)n);
		copy[patch[i].off] = patch[i].val;
		reseal(copy, (size_t)n);
		cr_assert_eq(dec(copy, (size_t)n, &m), -EBADMSG, "patch %zu",
			     i);
	}
	free(copy);
	r2cc_ctrl_batch_free(&b);
}
