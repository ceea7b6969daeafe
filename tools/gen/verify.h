/* SPDX-License-Identifier: MIT */
/*
 * r2cc-gen's pure half: the message header, deterministic payloads and their
 * checksum, per-stream sequence tracking, send-queue completion order and the
 * choice of each operation. No verbs here, so the unit tests link it alone.
 */
#ifndef R2CC_GEN_VERIFY_H
#define R2CC_GEN_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#define GEN_MAGIC 0x72326367U /* "r2cg" */
#define GEN_HDR_LEN 32 /* encoded size of struct gen_hdr */
#define GEN_READ_STREAM 0xffffffffU /* seq of the pattern READs target */

/* What a message (or a WRITE region) is; also the op mix of the client. */
enum gen_kind {
	GEN_K_SEND = 1,
	GEN_K_SEND_IMM,
	GEN_K_WRITE,
	GEN_K_WRITE_IMM,
	GEN_K_READ,
	GEN_K_NOTIFY, /* SEND_WITH_IMM naming a plain WRITE's region */
	GEN_K_CREDIT, /* server to client: how many messages were verified */
	GEN_K_MAX
};

/* Little-endian on the wire, GEN_HDR_LEN bytes, in front of every payload. */
struct gen_hdr {
	uint32_t magic;
	uint16_t qp; /* QP index, the same on both sides */
	uint8_t kind; /* enum gen_kind */
	uint8_t flags; /* zero */
	uint32_t seq; /* per QP per stream, consecutive */
	uint32_t len; /* payload bytes after the header */
	uint32_t slot; /* WRITE, WRITE_IMM, NOTIFY: the target region slot */
	uint32_t ack; /* CREDIT: target messages verified so far */
	uint64_t sum; /* gen_sum(qp, seq, payload) */
};

void gen_hdr_encode(const struct gen_hdr *h, uint8_t *buf);
int gen_hdr_decode(const uint8_t *buf, size_t len, struct gen_hdr *h);
const char *gen_kind_name(unsigned int kind);

/*
 * Payload bytes are a function of (seed, qp, seq, offset), so any slice can
 * be generated or checked without the rest (READs check a window of the
 * target's region this way).
 */
void gen_fill(uint64_t seed, uint32_t qp, uint32_t seq, uint64_t off,
	      uint8_t *buf, size_t len);
size_t gen_diff(uint64_t seed, uint32_t qp, uint32_t seq, uint64_t off,
		const uint8_t *buf, size_t len);
uint64_t gen_sum(uint32_t qp, uint32_t seq, const uint8_t *buf, size_t len);

/* One stream's sequence numbers as a receiver sees them. */
struct gen_seq {
	uint32_t next; /* the seq expected next */
};

enum gen_seq_verdict {
	GEN_SEQ_OK, /* the expected one */
	GEN_SEQ_GAP, /* later than expected: the ones between are lost */
	GEN_SEQ_DUP, /* earlier than expected: seen before */
};

enum gen_seq_verdict gen_seq_check(struct gen_seq *s, uint32_t seq,
				   uint32_t *missing);

/*
 * A send queue's WRs in posting order. A signaled completion retires every
 * earlier unsignaled WR with it; a completion that skips a signaled WR, or
 * names one already retired or never posted, is out of order.
 */
struct gen_sq {
	uint64_t posted; /* WRs posted so far; the next one's index */
	uint64_t retired; /* WRs before this index have completed */
	uint32_t depth; /* ring size: posted - retired never exceeds it */
	uint8_t *signaled; /* borrowed: depth flags, by index % depth */
};

enum gen_sq_verdict {
	GEN_SQ_OK,
	GEN_SQ_SKIPPED, /* an earlier signaled WR has not completed */
	GEN_SQ_STALE, /* retired already, or never posted */
};

uint32_t gen_sq_room(const struct gen_sq *sq);
uint64_t gen_sq_post(struct gen_sq *sq, int signaled);
enum gen_sq_verdict gen_sq_complete(struct gen_sq *sq, uint64_t idx,
				    uint64_t *from);

/* Limits for gen_pick(): what the connection allows. */
struct gen_limits {
	uint32_t max_inline; /* 0: no inline class */
	uint32_t mtu; /* path MTU in bytes */
	uint32_t max_msg; /* largest message or region, header included */
	uint32_t read_len; /* size of the target's READ region */
};

/* The n-th operation of a QP: kind, total length and (READ) offset. */
struct gen_op {
	unsigned int kind;
	uint32_t len; /* header included, except for READ */
	uint32_t off; /* READ: offset in the target's region */
	int inl; /* small enough to post inline */
};

void gen_pick(uint64_t seed, uint32_t qp, uint64_t n,
	      const struct gen_limits *lim, struct gen_op *op);

#endif
