/* SPDX-License-Identifier: MIT */
/*
 * r2cc-gen's pure checks: header codec, payload pattern and checksum,
 * sequence tracking, send-queue completion order (signaled and unsignaled
 * WRs) and the deterministic mix of operations and sizes each QP posts.
 */
#include <errno.h>

#include "verify.h"

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static uint32_t get32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

void gen_hdr_encode(const struct gen_hdr *h, uint8_t *buf)
{
	put32(buf, h->magic);
	buf[4] = h->qp;
	buf[5] = h->qp >> 8;
	buf[6] = h->kind;
	buf[7] = h->flags;
	put32(buf + 8, h->seq);
	put32(buf + 12, h->len);
	put32(buf + 16, h->slot);
	put32(buf + 20, h->ack);
	put32(buf + 24, h->sum);
	put32(buf + 28, h->sum >> 32);
}

/* 0, -EMSGSIZE (short), -EBADMSG (magic or flags) or -EINVAL (kind). */
int gen_hdr_decode(const uint8_t *buf, size_t len, struct gen_hdr *h)
{
	if (len < GEN_HDR_LEN)
		return -EMSGSIZE;
	h->magic = get32(buf);
	h->qp = buf[4] | buf[5] << 8;
	h->kind = buf[6];
	h->flags = buf[7];
	h->seq = get32(buf + 8);
	h->len = get32(buf + 12);
	h->slot = get32(buf + 16);
	h->ack = get32(buf + 20);
	h->sum = get32(buf + 24) | (uint64_t)get32(buf + 28) << 32;
	if (h->magic != GEN_MAGIC || h->flags)
		return -EBADMSG;
	if (h->kind < GEN_K_SEND || h->kind >= GEN_K_MAX)
		return -EINVAL;
	return 0;
}

const char *gen_kind_name(unsigned int kind)
{
	static const char *const names[GEN_K_MAX] = {
		[GEN_K_SEND] = "SEND",	   [GEN_K_SEND_IMM] = "SEND_WITH_IMM",
		[GEN_K_WRITE] = "WRITE",   [GEN_K_WRITE_IMM] = "WRITE_WITH_IMM",
		[GEN_K_READ] = "READ",	   [GEN_K_NOTIFY] = "NOTIFY",
		[GEN_K_CREDIT] = "CREDIT",
	};

	return kind < GEN_K_MAX && names[kind] ? names[kind] : "?";
}

/* splitmix64's finaliser: a good 64-bit mix, cheap enough per 8 bytes. */
static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t stream_key(uint64_t seed, uint32_t qp, uint32_t seq)
{
	return mix(seed ^ mix((uint64_t)qp << 32 | seq));
}

static uint8_t word_byte(uint64_t key, uint64_t pos)
{
	return mix(key + (pos >> 3) * 0x9e3779b97f4a7c15ULL) >> (8 * (pos & 7));
}

void gen_fill(uint64_t seed, uint32_t qp, uint32_t seq, uint64_t off,
	      uint8_t *buf, size_t len)
{
	uint64_t key = stream_key(seed, qp, seq), w;
	size_t i = 0, j;

	/* byte by byte up to a word boundary, then a word at a time */
	for (; i < len && ((off + i) & 7); i++)
		buf[i] = word_byte(key, off + i);
	for (; i + 8 <= len; i += 8) {
		w = mix(key + ((off + i) >> 3) * 0x9e3779b97f4a7c15ULL);
		for (j = 0; j < 8; j++)
			buf[i + j] = w >> (8 * j);
	}
	for (; i < len; i++)
		buf[i] = word_byte(key, off + i);
}

/* Offset of the first byte that differs from the pattern; len if none. */
size_t gen_diff(uint64_t seed, uint32_t qp, uint32_t seq, uint64_t off,
		const uint8_t *buf, size_t len)
{
	uint64_t key = stream_key(seed, qp, seq);
	size_t i;

	for (i = 0; i < len; i++)
		if (buf[i] != word_byte(key, off + i))
			return i;
	return len;
}

/* FNV-1a over (qp, seq) then the payload, so equal bytes under another seq
 * give another sum. */
uint64_t gen_sum(uint32_t qp, uint32_t seq, const uint8_t *buf, size_t len)
{
	uint64_t h = FNV_OFFSET, s = (uint64_t)qp << 32 | seq;
	size_t i;

	for (i = 0; i < 8; i++)
		h = (h ^ (uint8_t)(s >> (8 * i))) * FNV_PRIME;
	for (i = 0; i < len; i++)
		h = (h ^ buf[i]) * FNV_PRIME;
	return h;
}

enum gen_seq_verdict gen_seq_check(struct gen_seq *s, uint32_t seq,
				   uint32_t *missing)
{
	int32_t d = (int32_t)(seq - s->next); /* serial number arithmetic */

	*missing = 0;
	if (d < 0)
		return GEN_SEQ_DUP;
	s->next = seq + 1;
	if (d == 0)
		return GEN_SEQ_OK;
	*missing = d;
	return GEN_SEQ_GAP;
}

uint32_t gen_sq_room(const struct gen_sq *sq)
{
	return sq->depth - (uint32_t)(sq->posted - sq->retired);
}

/* Caller checked gen_sq_room(); returns the WR's index (its wr_id). */
uint64_t gen_sq_post(struct gen_sq *sq, int signaled)
{
	sq->signaled[sq->posted % sq->depth] = !!signaled;
	return sq->posted++;
}

/*
 * A completion for WR idx arrived. On OK or SKIPPED every WR from *from up to
 * idx is retired (the caller verifies what they carried); on STALE nothing is.
 */
enum gen_sq_verdict gen_sq_complete(struct gen_sq *sq, uint64_t idx,
				    uint64_t *from)
{
	enum gen_sq_verdict v = GEN_SQ_OK;
	uint64_t i;

	*from = sq->retired;
	if (idx < sq->retired || idx >= sq->posted ||
	    !sq->signaled[idx % sq->depth])
		return GEN_SQ_STALE;
	for (i = sq->retired; i < idx; i++)
		if (sq->signaled[i % sq->depth])
			v = GEN_SQ_SKIPPED;
	sq->retired = idx + 1;
	return v;
}

static uint32_t min32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

/* A length in [lo, hi] (hi clamped to at least lo). */
static uint32_t in_range(uint64_t r, uint32_t lo, uint32_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + r % (hi - lo + 1);
}

/*
 * Size classes: inline (up to max_inline), one packet (up to the MTU) and
 * many packets (up to max_msg), about 3:4:3. READs have no inline class;
 * their small class is 1..64 bytes.
 */
static uint32_t pick_len(uint64_t r, unsigned int kind,
			 const struct gen_limits *lim)
{
	uint32_t lo = kind == GEN_K_READ ? 1 : GEN_HDR_LEN;
	uint32_t max = lim->max_msg, cls = r % 10, small;

	if (kind == GEN_K_READ)
		max = min32(max, lim->read_len);
	small = kind == GEN_K_READ ? 64 : lim->max_inline;
	r >>= 8;
	if (cls < 3 && small >= lo)
		return in_range(r, lo, min32(small, max));
	if (cls < 7 || max <= lim->mtu)
		return in_range(r,
				small >= lo ? min32(small + 1, lim->mtu) : lo,
				min32(lim->mtu, max));
	return in_range(r, lim->mtu + 1, max);
}

void gen_pick(uint64_t seed, uint32_t qp, uint64_t n,
	      const struct gen_limits *lim, struct gen_op *op)
{
	uint64_t r = mix(seed ^ mix((uint64_t)qp << 48 ^ n));

	op->kind = GEN_K_SEND + r % 5; /* SEND .. READ, evenly */
	op->len = pick_len(mix(r), op->kind, lim);
	op->off = 0;
	if (op->kind == GEN_K_READ)
		op->off = (r >> 16) % (lim->read_len - op->len + 1);
	op->inl = op->kind != GEN_K_READ && op->len <= lim->max_inline;
}
