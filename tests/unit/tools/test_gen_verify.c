/* SPDX-License-Identifier: MIT */
/*
 * r2cc-gen's pure checks (tools/gen/verify.c, sched.c): header codec,
 * payload pattern and checksum, sequence verdicts, send-queue completion
 * order and the operation mix.
 */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "verify.h"

static const struct gen_hdr sample = {
	.magic = GEN_MAGIC,
	.qp = 0x1234,
	.kind = GEN_K_WRITE,
	.seq = 0xfffffffe,
	.len = 65504,
	.slot = 14,
	.ack = 77,
	.sum = 0x0123456789abcdefULL,
};

Test(gen_hdr, round_trip, .timeout = 2.)
{
	uint8_t buf[GEN_HDR_LEN];
	struct gen_hdr h;

	gen_hdr_encode(&sample, buf);
	cr_assert_eq(gen_hdr_decode(buf, sizeof(buf), &h), 0);
	cr_assert_eq(memcmp(&h, &sample, sizeof(h)), 0);
}

Test(gen_hdr, little_endian_layout, .timeout = 2.)
{
	uint8_t buf[GEN_HDR_LEN];

	gen_hdr_encode(&sample, buf);
	cr_assert_eq(buf[0], 0x67); /* magic, low byte first */
	cr_assert_eq(buf[4], 0x34);
	cr_assert_eq(buf[5], 0x12);
	cr_assert_eq(buf[6], GEN_K_WRITE);
	cr_assert_eq(buf[8], 0xfe);
	cr_assert_eq(buf[24], 0xef);
	cr_assert_eq(buf[31], 0x01);
}

Test(gen_hdr, rejects_short_bad_magic_flags_kind, .timeout = 2.)
{
	uint8_t buf[GEN_HDR_LEN];
	struct gen_hdr h = sample;

	gen_hdr_encode(&h, buf);
	cr_assert_eq(gen_hdr_decode(buf, GEN_HDR_LEN - 1, &h), -EMSGSIZE);
	buf[0] ^= 1;
	cr_assert_eq(gen_hdr_decode(buf, sizeof(buf), &h), -EBADMSG);
	buf[0] ^= 1;
	buf[7] = 1;
	cr_assert_eq(gen_hdr_decode(buf, sizeof(buf), &h), -EBADMSG);
	buf[7] = 0;
	buf[6] = 0;
	cr_assert_eq(gen_hdr_decode(buf, sizeof(buf), &h), -EINVAL);
	buf[6] = GEN_K_MAX;
	cr_assert_eq(gen_hdr_decode(buf, sizeof(buf), &h), -EINVAL);
}

Test(gen_hdr, kind_names, .timeout = 2.)
{
	cr_assert_str_eq(gen_kind_name(GEN_K_WRITE_IMM), "WRITE_WITH_IMM");
	cr_assert_str_eq(gen_kind_name(GEN_K_CREDIT), "CREDIT");
	cr_assert_str_eq(gen_kind_name(0), "?");
	cr_assert_str_eq(gen_kind_name(200), "?");
}

Test(gen_payload, deterministic_and_distinct, .timeout = 2.)
{
	uint8_t a[1000], b[1000];

	gen_fill(1, 2, 3, 0, a, sizeof(a));
	gen_fill(1, 2, 3, 0, b, sizeof(b));
	cr_assert_eq(memcmp(a, b, sizeof(a)), 0);
	gen_fill(1, 2, 4, 0, b, sizeof(b));
	cr_assert_neq(memcmp(a, b, sizeof(a)), 0);
	gen_fill(1, 3, 3, 0, b, sizeof(b));
	cr_assert_neq(memcmp(a, b, sizeof(a)), 0);
	gen_fill(9, 2, 3, 0, b, sizeof(b));
	cr_assert_neq(memcmp(a, b, sizeof(a)), 0);
}

/* Any window, at any alignment, is the same slice of the whole stream. */
Test(gen_payload, windows_match_the_stream, .timeout = 2.)
{
	uint8_t whole[4096], part[600];
	size_t off, len;

	gen_fill(7, 1, GEN_READ_STREAM, 0, whole, sizeof(whole));
	for (off = 0; off < 40; off++)
		for (len = 0; len < 30; len += 7) {
			gen_fill(7, 1, GEN_READ_STREAM, off, part, len);
			cr_assert_eq(memcmp(part, whole + off, len), 0,
				     "off %zu len %zu", off, len);
		}
	gen_fill(7, 1, GEN_READ_STREAM, 3333, part, 600);
	cr_assert_eq(memcmp(part, whole + 3333, 600), 0);
	cr_assert_eq(gen_diff(7, 1, GEN_READ_STREAM, 3333, part, 600), 600);
}

Test(gen_payload, diff_finds_first_bad_byte, .timeout = 2.)
{
	uint8_t buf[300];

	gen_fill(1, 0, 5, 0, buf, sizeof(buf));
	cr_assert_eq(gen_diff(1, 0, 5, 0, buf, sizeof(buf)), sizeof(buf));
	buf[123] ^= 0x40;
	buf[200] ^= 0x01;
	cr_assert_eq(gen_diff(1, 0, 5, 0, buf, sizeof(buf)), 123);
	cr_assert_eq(gen_diff(1, 0, 6, 0, buf, sizeof(buf)) < 8, 1);
	cr_assert_eq(gen_diff(1, 0, 5, 0, buf, 0), 0);
}

Test(gen_sum, seeded_by_seq_and_sensitive, .timeout = 2.)
{
	uint8_t buf[512];
	uint64_t s;

	gen_fill(1, 0, 5, 0, buf, sizeof(buf));
	s = gen_sum(0, 5, buf, sizeof(buf));
	cr_assert_eq(gen_sum(0, 5, buf, sizeof(buf)), s);
	cr_assert_neq(gen_sum(0, 6, buf, sizeof(buf)), s);
	cr_assert_neq(gen_sum(1, 5, buf, sizeof(buf)), s);
	cr_assert_neq(gen_sum(0, 5, buf, sizeof(buf) - 1), s);
	buf[511] ^= 0x80;
	cr_assert_neq(gen_sum(0, 5, buf, sizeof(buf)), s);
	/* empty payloads (credits) still differ by seq */
	cr_assert_neq(gen_sum(0, 1, NULL, 0), gen_sum(0, 2, NULL, 0));
}

struct seq_case {
	uint32_t next, seq;
	enum gen_seq_verdict want;
	uint32_t missing, next_after;
};

ParameterizedTestParameters(gen_seq, verdicts)
{
	static struct seq_case cases[] = {
		{ 0, 0, GEN_SEQ_OK, 0, 1 },
		{ 5, 5, GEN_SEQ_OK, 0, 6 },
		{ 5, 8, GEN_SEQ_GAP, 3, 9 },
		{ 5, 4, GEN_SEQ_DUP, 0, 5 },
		{ 5, 0, GEN_SEQ_DUP, 0, 5 },
		/* 32-bit wrap: serial number arithmetic */
		{ 0xffffffff, 0xffffffff, GEN_SEQ_OK, 0, 0 },
		{ 0xfffffffe, 1, GEN_SEQ_GAP, 3, 2 },
		{ 1, 0xffffffff, GEN_SEQ_DUP, 0, 1 },
	};

	return cr_make_param_array(struct seq_case, cases,
				   sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct seq_case *c, gen_seq, verdicts, .timeout = 2.)
{
	struct gen_seq s = { .next = c->next };
	uint32_t missing = 99;

	cr_assert_eq(gen_seq_check(&s, c->seq, &missing), c->want,
		     "next %u seq %u", c->next, c->seq);
	cr_assert_eq(missing, c->missing);
	cr_assert_eq(s.next, c->next_after);
}

Test(gen_seq, a_stream_with_one_loss_and_one_repeat, .timeout = 2.)
{
	uint32_t in[] = { 0, 1, 2, 4, 5, 5, 6 }, missing, lost = 0, dup = 0;
	struct gen_seq s = { 0 };
	size_t i;

	for (i = 0; i < sizeof(in) / sizeof(in[0]); i++)
		switch (gen_seq_check(&s, in[i], &missing)) {
		case GEN_SEQ_GAP:
			lost += missing;
			break;
		case GEN_SEQ_DUP:
			dup++;
			break;
		default:
			break;
		}
	cr_assert_eq(lost, 1);
	cr_assert_eq(dup, 1);
	cr_assert_eq(s.next, 7);
}

static uint8_t sig[8];
static struct gen_sq sq;

static void sq_init(void)
{
	memset(sig, 0, sizeof(sig));
	sq = (struct gen_sq){ .depth = 8, .signaled = sig };
}

Test(gen_sq, signaled_retires_unsignaled_before_it, .init = sq_init,
     .timeout = 2.)
{
	uint64_t from;

	gen_sq_post(&sq, 0);
	gen_sq_post(&sq, 0);
	gen_sq_post(&sq, 1); /* #2 */
	gen_sq_post(&sq, 0);
	gen_sq_post(&sq, 1); /* #4 */
	cr_assert_eq(gen_sq_room(&sq), 3);
	cr_assert_eq(gen_sq_complete(&sq, 2, &from), GEN_SQ_OK);
	cr_assert_eq(from, 0);
	cr_assert_eq(sq.retired, 3);
	cr_assert_eq(gen_sq_complete(&sq, 4, &from), GEN_SQ_OK);
	cr_assert_eq(from, 3);
	cr_assert_eq(gen_sq_room(&sq), 8);
}

Test(gen_sq, skipped_stale_and_unposted, .init = sq_init, .timeout = 2.)
{
	uint64_t from;

	gen_sq_post(&sq, 1); /* #0 */
	gen_sq_post(&sq, 0);
	gen_sq_post(&sq, 1); /* #2 */
	gen_sq_post(&sq, 0); /* #3 unsignaled */
	cr_assert_eq(gen_sq_complete(&sq, 3, &from), GEN_SQ_STALE);
	cr_assert_eq(gen_sq_complete(&sq, 7, &from), GEN_SQ_STALE);
	cr_assert_eq(sq.retired, 0);
	/* #2 before #0: out of order, but both are retired */
	cr_assert_eq(gen_sq_complete(&sq, 2, &from), GEN_SQ_SKIPPED);
	cr_assert_eq(sq.retired, 3);
	/* #0 again: already retired */
	cr_assert_eq(gen_sq_complete(&sq, 0, &from), GEN_SQ_STALE);
	cr_assert_eq(from, 3);
}

Test(gen_sq, ring_wraps, .init = sq_init, .timeout = 2.)
{
	uint64_t i, idx, from;

	for (i = 0; i < 100; i++) {
		idx = gen_sq_post(&sq, i % 4 == 3);
		cr_assert_eq(idx, i);
		if (i % 4 == 3)
			cr_assert_eq(gen_sq_complete(&sq, idx, &from),
				     GEN_SQ_OK);
		cr_assert_geq(gen_sq_room(&sq), 4);
	}
	cr_assert_eq(sq.retired, 100);
}

static const struct gen_limits lim = {
	.max_inline = 128, .mtu = 1024, .max_msg = 65536, .read_len = 65536
};

/* Every kind and every size class appears; lengths stay in bounds. */
Test(gen_pick, mix_and_bounds, .timeout = 5.)
{
	unsigned int kinds[GEN_K_MAX] = { 0 }, inl = 0, one = 0, many = 0;
	struct gen_op op;
	uint64_t n;

	for (n = 0; n < 20000; n++) {
		gen_pick(1, n % 4, n, &lim, &op);
		cr_assert(op.kind >= GEN_K_SEND && op.kind <= GEN_K_READ);
		kinds[op.kind]++;
		cr_assert_leq(op.len, lim.max_msg);
		if (op.kind == GEN_K_READ) {
			cr_assert_geq(op.len, 1);
			cr_assert_leq(op.off + op.len, lim.read_len);
			cr_assert_eq(op.inl, 0);
			continue;
		}
		cr_assert_geq(op.len, GEN_HDR_LEN);
		cr_assert_eq(op.inl, op.len <= lim.max_inline);
		inl += op.len <= lim.max_inline;
		one += op.len > lim.max_inline && op.len <= lim.mtu;
		many += op.len > lim.mtu;
	}
	for (n = GEN_K_SEND; n <= GEN_K_READ; n++)
		cr_assert_gt(kinds[n], 3000, "kind %lu: %u", (unsigned long)n,
			     kinds[n]);
	cr_assert_gt(inl, 3000);
	cr_assert_gt(one, 4000);
	cr_assert_gt(many, 3000);
}

Test(gen_pick, deterministic_and_small_limits, .timeout = 2.)
{
	struct gen_limits small = {
		.max_inline = 0, .mtu = 256, .max_msg = 1024, .read_len = 1024
	};
	struct gen_op a, b;
	uint64_t n;

	gen_pick(5, 1, 42, &lim, &a);
	gen_pick(5, 1, 42, &lim, &b);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0);
	for (n = 0; n < 5000; n++) {
		gen_pick(5, 0, n, &small, &a);
		cr_assert_eq(a.inl, 0);
		cr_assert_leq(a.len, small.max_msg);
		cr_assert_geq(a.len, a.kind == GEN_K_READ ? 1 : GEN_HDR_LEN);
	}
}
