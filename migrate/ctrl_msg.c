/* SPDX-License-Identifier: MIT */
/*
 * ctrl_msg.c - control message codec: each body's layout is written once
 * and walked in both directions, and frames are sealed with HMAC-SHA-256
 * (libsodium) under the job key (ctrl_key.c).
 */
#include <errno.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl_msg.h"
#include "lid.h"
#include "policy.h"

#define MASK24 0xffffffU

static const uint8_t magic[4] = { 'R', '2', 'C', 'C' };
_Static_assert(R2CC_CTRL_MAC_LEN == crypto_auth_hmacsha256_BYTES,
	       "MAC is an HMAC-SHA-256 tag");
_Static_assert(R2CC_CTRL_FRAME_MAX <= INT32_MAX, "lengths fit an int");

/*
 * A cursor over a body. Encoding writes the fields of a message into @out;
 * decoding reads them from @in into the message. Any overrun (or, when
 * decoding, a nonzero reserved byte or a count over its limit) sets @bad.
 */
struct cur {
	uint8_t *out;
	const uint8_t *in;
	size_t off, len;
	bool bad;
};

static void x_bytes(struct cur *c, void *v, size_t n)
{
	if (c->bad || c->len - c->off < n) {
		c->bad = true;
		return;
	}
	if (c->out)
		memcpy(c->out + c->off, v, n);
	else
		memcpy(v, c->in + c->off, n);
	c->off += n;
}

/* An @n-byte little-endian integer: @v goes out, the decoded one comes back */
static uint64_t x_le(struct cur *c, uint64_t v, size_t n)
{
	uint8_t b[8] = { 0 };
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	x_bytes(c, b, n);
	for (v = 0, i = 0; i < n; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

static void x8(struct cur *c, uint8_t *v)
{
	*v = (uint8_t)x_le(c, *v, 1);
}

static void x16(struct cur *c, uint16_t *v)
{
	*v = (uint16_t)x_le(c, *v, 2);
}

static void x32(struct cur *c, uint32_t *v)
{
	*v = (uint32_t)x_le(c, *v, 4);
}

static void x64(struct cur *c, uint64_t *v)
{
	*v = x_le(c, *v, 8);
}

/* Reserved bytes: written as zeros, and must read as zeros */
static void x_rsv(struct cur *c, size_t n)
{
	uint8_t z[4] = { 0 };

	x_bytes(c, z, n);
	if (z[0] | z[1] | z[2] | z[3])
		c->bad = true;
}

static void x_count(struct cur *c, size_t n, size_t max)
{
	if (n > max)
		c->bad = true;
}

static void x_addrs(struct cur *c, struct r2cc_ctrl_addr *a, uint8_t n)
{
	uint8_t i;

	x_count(c, n, R2CC_CTRL_MAX_ADDRS);
	for (i = 0; i < n && !c->bad; i++) {
		x8(c, &a[i].family);
		x8(c, &a[i].rail);
		x16(c, &a[i].port);
		x_bytes(c, a[i].addr, sizeof(a[i].addr));
	}
}

static void x_qp(struct cur *c, struct r2cc_ctrl_qp_ref *q)
{
	x32(c, &q->qpn);
	x_bytes(c, q->gid, sizeof(q->gid));
}

static void x_failover(struct cur *c, struct r2cc_ctrl_failover *f)
{
	x32(c, &f->qpn);
	x8(c, &f->reason);
	x8(c, &f->flags);
	x_rsv(c, 2);
	x32(c, &f->rq_psn);
	x64(c, &f->recvs);
	x32(c, &f->bqpn);
	x32(c, &f->bpsn);
}

static void x_mr_keys(struct cur *c, struct r2cc_ctrl_msg *m)
{
	uint16_t i;

	x16(c, &m->mr_keys.n);
	x8(c, &m->mr_keys.rail);
	x_rsv(c, 1);
	x_count(c, m->mr_keys.n, R2CC_CTRL_MAX_MRS);
	for (i = 0; i < m->mr_keys.n && !c->bad; i++) {
		x32(c, &m->mr_keys.mr[i].rkey);
		x32(c, &m->mr_keys.mr[i].backup_rkey);
		x64(c, &m->mr_keys.mr[i].addr);
		x64(c, &m->mr_keys.mr[i].len);
	}
}

static void x_mr_inval(struct cur *c, struct r2cc_ctrl_msg *m)
{
	uint16_t i;

	x16(c, &m->mr_inval.n);
	x_rsv(c, 2);
	x_count(c, m->mr_inval.n, R2CC_CTRL_MAX_MRS);
	for (i = 0; i < m->mr_inval.n && !c->bad; i++)
		x32(c, &m->mr_inval.rkey[i]);
}

/* The body layouts of ctrl_msg.h, in both directions; the type is known */
static void x_body(struct cur *c, struct r2cc_ctrl_msg *m)
{
	switch (m->hdr.type) {
	case R2CC_CTRL_HELLO:
		x8(c, &m->hello.ver_min);
		x8(c, &m->hello.ver_max);
		x8(c, &m->hello.naddr);
		x8(c, &m->hello.flags);
		x32(c, &m->hello.pid);
		x_addrs(c, m->hello.addr, m->hello.naddr);
		break;
	case R2CC_CTRL_LOOKUP:
		x_qp(c, &m->lookup);
		break;
	case R2CC_CTRL_LOOKUP_REPLY:
		x_qp(c, &m->lookup_reply.what);
		x8(c, &m->lookup_reply.found);
		x8(c, &m->lookup_reply.naddr);
		x_rsv(c, 2);
		x32(c, &m->lookup_reply.pid);
		x64(c, &m->lookup_reply.owner);
		x_addrs(c, m->lookup_reply.addr, m->lookup_reply.naddr);
		break;
	case R2CC_CTRL_QP_BIND:
		x_qp(c, &m->qp_bind.local);
		x_qp(c, &m->qp_bind.peer);
		x_qp(c, &m->qp_bind.backup);
		x32(c, &m->qp_bind.psn);
		x8(c, &m->qp_bind.rail);
		x8(c, &m->qp_bind.mtu);
		x8(c, &m->qp_bind.flags);
		x_rsv(c, 1);
		x16(c, &m->qp_bind.lid);
		break;
	case R2CC_CTRL_MR_KEYS:
		x_mr_keys(c, m);
		break;
	case R2CC_CTRL_MR_INVALIDATE:
		x_mr_inval(c, m);
		break;
	case R2CC_CTRL_FAILOVER:
	case R2CC_CTRL_FAILOVER_ACK:
		x_failover(c, &m->failover);
		break;
	case R2CC_CTRL_FAILBACK:
		x32(c, &m->failback.qpn);
		x8(c, &m->failback.phase);
		x8(c, &m->failback.flags);
		x_rsv(c, 2);
		x32(c, &m->failback.psn);
		break;
	case R2CC_CTRL_KEEPALIVE:
		x64(c, &m->keepalive_ns);
		break;
	case R2CC_CTRL_PEER_DOWN:
		x8(c, &m->peer_down.rail);
		x8(c, &m->peer_down.reason);
		x_rsv(c, 2);
		break;
	case R2CC_CTRL_BATCH:
		/* its entries as they are; body_ok() parses them */
		x16(c, &m->batch.n);
		x_rsv(c, 2);
		if (c->bad)
			break;
		if (!c->out) {
			m->batch.body = c->in + c->off;
			m->batch.len = (uint32_t)(c->len - c->off);
		} else if (c->len - c->off < m->batch.len) {
			c->bad = true;
			break;
		} else if (m->batch.len) {
			memcpy(c->out + c->off, m->batch.body, m->batch.len);
		}
		c->off += m->batch.len;
		break;
	default:
		c->bad = true;
	}
}

/* A BATCH entry: type u8 | rsv u8 | len u16 | body */
#define BATCH_ENT_HDR 4
/* Room for the largest body a BATCH carries (MR_KEYS') */
#define BATCH_ENT_MAX (BATCH_ENT_HDR + 4 + 24 * R2CC_CTRL_MAX_MRS)

static bool batchable(uint8_t type)
{
	return type == R2CC_CTRL_QP_BIND || type == R2CC_CTRL_MR_KEYS ||
	       type == R2CC_CTRL_MR_INVALIDATE || type == R2CC_CTRL_FAILOVER ||
	       type == R2CC_CTRL_FAILOVER_ACK || type == R2CC_CTRL_FAILBACK;
}

static bool body_ok(const struct r2cc_ctrl_msg *m);

/* The BATCH entry at @p (@left bytes) parsed into @out (its type and
 * body): the entry's size, or 0 when it is malformed. */
static uint32_t ent_parse(const uint8_t *p, uint32_t left,
			  struct r2cc_ctrl_msg *out)
{
	struct cur c = { .in = p + BATCH_ENT_HDR };
	uint32_t len;

	if (left < BATCH_ENT_HDR || !batchable(p[0]) || p[1])
		return 0;
	len = (uint32_t)p[2] | (uint32_t)p[3] << 8;
	if (len > left - BATCH_ENT_HDR)
		return 0;
	out->hdr.type = p[0];
	out->hdr.len = len;
	c.len = len;
	x_body(&c, out);
	if (c.bad || c.off != len || !body_ok(out))
		return 0;
	return BATCH_ENT_HDR + len;
}

/* n entries, each well formed, and nothing after them */
static bool batch_ok(const struct r2cc_ctrl_msg *m)
{
	struct r2cc_ctrl_msg sub;
	uint32_t off = 0, used;
	uint16_t i;

	if (!m->batch.n || (!m->batch.body && m->batch.len))
		return false;
	for (i = 0; i < m->batch.n; i++) {
		used = ent_parse(m->batch.body + off, m->batch.len - off, &sub);
		if (!used)
			return false;
		off += used;
	}
	return off == m->batch.len;
}

static bool rail_ok(uint8_t rail)
{
	return rail < R2CC_CTRL_RAIL_MAX;
}

static bool pid_ok(uint32_t pid)
{
	return pid && pid <= INT32_MAX;
}

static bool addrs_ok(const struct r2cc_ctrl_addr *a, uint8_t n)
{
	static const uint8_t zero[12];
	uint8_t i;

	if (n > R2CC_CTRL_MAX_ADDRS)
		return false;
	for (i = 0; i < n; i++) {
		if (a[i].family != 4 && a[i].family != 6)
			return false;
		if (a[i].family == 4 && memcmp(a[i].addr + 4, zero, 12))
			return false;
		if (!a[i].port ||
		    (!rail_ok(a[i].rail) && a[i].rail != R2CC_CTRL_RAIL_MGMT))
			return false;
	}
	return true;
}

static bool failover_ok(const struct r2cc_ctrl_failover *f)
{
	if (f->qpn > MASK24 || f->reason >= R2CC_CTRL_NREASONS ||
	    f->flags & ~(R2CC_CTRL_FO_PSN_VALID | R2CC_CTRL_FO_RECV_TAKEN |
			 R2CC_CTRL_FO_BACKUP | R2CC_CTRL_FO_CONNECTED) ||
	    f->rq_psn > MASK24 || f->bqpn > MASK24 || f->bpsn > MASK24)
		return false;
	if (!(f->flags & R2CC_CTRL_FO_BACKUP) &&
	    (f->bqpn || f->bpsn || f->flags & R2CC_CTRL_FO_CONNECTED))
		return false;
	return f->flags & R2CC_CTRL_FO_PSN_VALID || !f->rq_psn;
}

static bool lookup_reply_ok(const struct r2cc_ctrl_msg *m)
{
	const struct r2cc_ctrl_lookup_reply *r = &m->lookup_reply;

	if (r->what.qpn > MASK24 || r->found > 1)
		return false;
	if (!r->found)
		return !r->naddr && !r->pid && !r->owner;
	return r->naddr && pid_ok(r->pid) && r->owner &&
	       addrs_ok(r->addr, r->naddr);
}

/* Every range ctrl_msg.h states; the same check guards encode and decode */
static bool body_ok(const struct r2cc_ctrl_msg *m)
{
	uint16_t i;

	switch (m->hdr.type) {
	case R2CC_CTRL_HELLO:
		return m->hello.ver_min >= 1 &&
		       m->hello.ver_min <= R2CC_CTRL_VERSION &&
		       m->hello.ver_max >= R2CC_CTRL_VERSION &&
		       !(m->hello.flags & ~R2CC_CTRL_HELLO_REPLACES) &&
		       pid_ok(m->hello.pid) &&
		       addrs_ok(m->hello.addr, m->hello.naddr);
	case R2CC_CTRL_LOOKUP:
		return m->lookup.qpn <= MASK24;
	case R2CC_CTRL_LOOKUP_REPLY:
		return lookup_reply_ok(m);
	case R2CC_CTRL_QP_BIND:
		return m->qp_bind.local.qpn <= MASK24 &&
		       m->qp_bind.peer.qpn <= MASK24 &&
		       m->qp_bind.backup.qpn <= MASK24 &&
		       m->qp_bind.psn <= MASK24 && rail_ok(m->qp_bind.rail) &&
		       m->qp_bind.lid <= R2CC_LID_UNICAST_MAX &&
		       m->qp_bind.mtu >= 1 && m->qp_bind.mtu <= 5 &&
		       !(m->qp_bind.flags &
			 ~(R2CC_CTRL_BIND_PINNED | R2CC_CTRL_BIND_LAZY |
			   R2CC_CTRL_BIND_AGAIN | R2CC_CTRL_BIND_ECHO)) &&
		       (!(m->qp_bind.flags & R2CC_CTRL_BIND_LAZY) ||
			(!m->qp_bind.backup.qpn && !m->qp_bind.psn));
	case R2CC_CTRL_MR_KEYS:
		if (m->mr_keys.n > R2CC_CTRL_MAX_MRS ||
		    m->mr_keys.rail >= R2CC_CTRL_RAIL_MAX)
			return false;
		for (i = 0; i < m->mr_keys.n; i++)
			if (m->mr_keys.mr[i].len >
			    UINT64_MAX - m->mr_keys.mr[i].addr)
				return false;
		return true;
	case R2CC_CTRL_MR_INVALIDATE:
		return m->mr_inval.n <= R2CC_CTRL_MAX_MRS;
	case R2CC_CTRL_FAILOVER:
	case R2CC_CTRL_FAILOVER_ACK:
		return failover_ok(&m->failover);
	case R2CC_CTRL_FAILBACK:
		return m->failback.qpn <= MASK24 &&
		       m->failback.phase < R2CC_CTRL_FB_NPHASES &&
		       !(m->failback.flags &
			 ~(R2CC_CTRL_FB_RECOVERED | R2CC_CTRL_FB_URGENT |
			   R2CC_CTRL_FB_NOARM)) &&
		       m->failback.psn <= MASK24;
	case R2CC_CTRL_KEEPALIVE:
		return true;
	case R2CC_CTRL_PEER_DOWN:
		return rail_ok(m->peer_down.rail) &&
		       m->peer_down.reason < R2CC_CTRL_NREASONS;
	case R2CC_CTRL_BATCH:
		return batch_ok(m);
	default:
		return false;
	}
}

static bool type_ok(uint8_t type)
{
	return type >= R2CC_CTRL_HELLO && type < R2CC_CTRL_NTYPES;
}

static uint64_t get_le(const uint8_t *b, size_t n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | b[n];
	return v;
}

static void put_le(uint8_t *b, uint64_t v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

int r2cc_ctrl_encode(const struct r2cc_ctrl_key *key,
		     const struct r2cc_ctrl_msg *m, uint8_t *buf, size_t size)
{
	struct r2cc_ctrl_msg tmp;
	struct cur c = { .out = buf + R2CC_CTRL_HDR_LEN };
	size_t total;
	int rc;

	rc = r2cc_ctrl_crypto_ready();
	if (rc)
		return rc;
	if (!type_ok(m->hdr.type) || m->hdr.flags || !m->hdr.seq || !body_ok(m))
		return -EINVAL;
	if (size < R2CC_CTRL_HDR_LEN + R2CC_CTRL_MAC_LEN)
		return -ENOSPC;
	c.len = size - R2CC_CTRL_HDR_LEN - R2CC_CTRL_MAC_LEN;
	if (c.len > R2CC_CTRL_BODY_MAX)
		c.len = R2CC_CTRL_BODY_MAX;
	tmp = *m; /* x_body() stores back what it writes */
	x_body(&c, &tmp);
	if (c.bad)
		return -ENOSPC;

	memcpy(buf, magic, sizeof(magic));
	buf[4] = R2CC_CTRL_VERSION;
	buf[5] = m->hdr.type;
	put_le(buf + 6, 0, 2);
	put_le(buf + 8, c.off, 4);
	put_le(buf + 12, key->job, 8);
	put_le(buf + 20, m->hdr.sender, 8);
	put_le(buf + 28, m->hdr.receiver, 8);
	put_le(buf + 36, m->hdr.seq, 8);
	total = R2CC_CTRL_HDR_LEN + c.off;
	crypto_auth_hmacsha256(buf + total, buf, total, key->k);
	return (int)(total + R2CC_CTRL_MAC_LEN);
}

int r2cc_ctrl_frame_len(const uint8_t *buf, size_t len)
{
	uint32_t body;

	if (len &&
	    memcmp(buf, magic, len < sizeof(magic) ? len : sizeof(magic)))
		return -EBADMSG;
	if (len > 4 && buf[4] != R2CC_CTRL_VERSION)
		return -EPROTO;
	if (len < R2CC_CTRL_HDR_LEN)
		return -EAGAIN;
	body = (uint32_t)get_le(buf + 8, 4);
	if (body > R2CC_CTRL_BODY_MAX)
		return -EMSGSIZE;
	return (int)(R2CC_CTRL_HDR_LEN + body + R2CC_CTRL_MAC_LEN);
}

static int check_mac(const struct r2cc_ctrl_key *key, const uint8_t *buf,
		     size_t len)
{
	uint8_t mac[R2CC_CTRL_MAC_LEN];
	size_t n = len - R2CC_CTRL_MAC_LEN;
	int rc = 0;

	crypto_auth_hmacsha256(mac, buf, n, key->k);
	if (sodium_memcmp(mac, buf + n, sizeof(mac)))
		rc = -EACCES;
	sodium_memzero(mac, sizeof(mac));
	return rc;
}

/* Addressed to this process, or a first contact (HELLO, LOOKUP) to any. */
static bool for_me(const struct r2cc_ctrl_key *key,
		   const struct r2cc_ctrl_hdr *h)
{
	if (!key->self || h->receiver == key->self)
		return true;
	return h->receiver == R2CC_CTRL_ANY &&
	       (h->type == R2CC_CTRL_HELLO || h->type == R2CC_CTRL_LOOKUP);
}

int r2cc_ctrl_decode(const struct r2cc_ctrl_key *key, const uint8_t *buf,
		     size_t len, struct r2cc_ctrl_msg *out)
{
	struct cur c = { .in = buf + R2CC_CTRL_HDR_LEN };
	int rc;

	rc = r2cc_ctrl_crypto_ready();
	if (rc)
		return rc;
	rc = r2cc_ctrl_frame_len(buf, len);
	if (rc == -EAGAIN)
		return -EBADMSG; /* a truncated frame */
	if (rc < 0)
		return rc;
	if (len != (size_t)rc)
		return -EBADMSG;
	if (get_le(buf + 12, 8) != key->job)
		return -EACCES;
	rc = check_mac(key, buf, len);
	if (rc)
		return rc;

	memset(out, 0, sizeof(*out));
	out->hdr.version = buf[4];
	out->hdr.type = buf[5];
	out->hdr.flags = (uint16_t)get_le(buf + 6, 2);
	out->hdr.len = (uint32_t)get_le(buf + 8, 4);
	out->hdr.job = key->job;
	out->hdr.sender = get_le(buf + 20, 8);
	out->hdr.receiver = get_le(buf + 28, 8);
	out->hdr.seq = get_le(buf + 36, 8);
	if (!type_ok(out->hdr.type) || out->hdr.flags)
		return -EPROTO;
	if (!out->hdr.seq)
		return -EBADMSG;
	if (!for_me(key, &out->hdr))
		return -EACCES;
	c.len = out->hdr.len;
	x_body(&c, out);
	if (c.bad || c.off != c.len || !body_ok(out))
		return -EBADMSG;
	return 0;
}

int r2cc_ctrl_batch_add(struct r2cc_ctrl_batch *b,
			const struct r2cc_ctrl_msg *m)
{
	uint8_t ent[BATCH_ENT_MAX];
	struct cur c = { .out = ent + BATCH_ENT_HDR,
			 .len = sizeof(ent) - BATCH_ENT_HDR };
	struct r2cc_ctrl_msg tmp;
	uint32_t need, cap;
	uint8_t *body;

	if (!batchable(m->hdr.type) || !body_ok(m))
		return -EINVAL;
	tmp = *m; /* x_body() stores back what it writes */
	x_body(&c, &tmp);
	if (c.bad)
		return -EINVAL;
	need = BATCH_ENT_HDR + (uint32_t)c.off;
	/* the BATCH's own n and rsv come first in the frame's body */
	if (b->n == UINT16_MAX || 4 + b->len + need > R2CC_CTRL_BODY_MAX)
		return -ENOSPC;
	if (b->len + need > b->cap) {
		for (cap = b->cap ? b->cap : 1024; cap < b->len + need;)
			cap *= 2;
		body = realloc(b->body, cap);
		if (!body)
			return -ENOMEM;
		b->body = body;
		b->cap = cap;
	}
	ent[0] = m->hdr.type;
	ent[1] = 0;
	put_le(ent + 2, c.off, 2);
	memcpy(b->body + b->len, ent, need);
	b->len += need;
	b->n++;
	return 0;
}

void r2cc_ctrl_batch_msg(const struct r2cc_ctrl_batch *b,
			 struct r2cc_ctrl_msg *m)
{
	m->hdr.type = R2CC_CTRL_BATCH;
	m->batch.n = b->n;
	m->batch.len = b->len;
	m->batch.body = b->body;
}

void r2cc_ctrl_batch_free(struct r2cc_ctrl_batch *b)
{
	free(b->body);
	memset(b, 0, sizeof(*b));
}

int r2cc_ctrl_batch_next(const struct r2cc_ctrl_msg *b, uint32_t *off,
			 struct r2cc_ctrl_msg *out)
{
	uint32_t used;

	if (b->hdr.type != R2CC_CTRL_BATCH || *off >= b->batch.len)
		return 0;
	memset(out, 0, sizeof(*out));
	out->hdr = b->hdr;
	used = ent_parse(b->batch.body + *off, b->batch.len - *off, out);
	if (!used) /* (decode checked every entry) */
		return 0;
	*off += used;
	return 1;
}
