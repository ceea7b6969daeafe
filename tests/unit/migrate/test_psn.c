/* SPDX-License-Identifier: MIT */
/*
 * test_psn.c - 24-bit PSN arithmetic around the wrap, the PSNs each send
 * opcode spends at every MTU, and r2cc's first PSNs.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdlib.h>

#include "migrate.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

Test(psn, add_wraps_at_2_24, .timeout = 5)
{
	cr_assert_eq(r2cc_psn_add(0xffffff, 1), 0);
	cr_assert_eq(r2cc_psn_add(0xfffe00, 0x200), 0);
	cr_assert_eq(r2cc_psn_add(0xfffe00, 0x210), 0x10);
	cr_assert_eq(r2cc_psn_add(0x123456, 0), 0x123456);
	cr_assert_eq(r2cc_psn_add(0, 0xffffff), 0xffffff);
	cr_assert_eq(r2cc_psn_add(5, R2CC_PSN_MASK + 1), 5, "2^24 is a no-op");
}

struct diff_case {
	uint32_t a, b;
	int32_t want;
};

ParameterizedTestParameters(psn, diff)
{
	static struct diff_case cases[] = {
		{ 0, 0, 0 },
		{ 0x123456, 0x123456, 0 },
		{ 1, 0, 1 },
		{ 0, 1, -1 },
		{ 0, 0xffffff, 1 },
		{ 0xffffff, 0, -1 },
		{ 0x10, 0xfffe00, 0x210 },
		{ 0xfffe00, 0x10, -0x210 },
		/* exactly half way is positive: the range is (-2^23, 2^23] */
		{ 0x800000, 0, 0x800000 },
		{ 0, 0x800000, 0x800000 },
		{ 0x800001, 0, -0x7fffff },
		{ 0, 0x800001, 0x7fffff },
		{ 0x7fffff, 0, 0x7fffff },
		{ 0, 0x7fffff, -0x7fffff },
	};

	return cr_make_param_array(struct diff_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct diff_case *c, psn, diff, .timeout = 5)
{
	cr_assert_eq(r2cc_psn_diff(c->a, c->b), c->want,
		     "diff(%#x, %#x) = %d, want %d", c->a, c->b,
		     r2cc_psn_diff(c->a, c->b), c->want);
	cr_assert_eq(r2cc_psn_before(c->a, c->b), c->want < 0);
}

Test(psn, before_across_the_wrap, .timeout = 5)
{
	cr_assert(r2cc_psn_before(0xffffff, 0));
	cr_assert(r2cc_psn_before(0xfffe00, 0x1ff));
	cr_assert_not(r2cc_psn_before(0, 0xffffff));
	cr_assert_not(r2cc_psn_before(7, 7));
	/* add and diff agree everywhere near the wrap */
	for (uint32_t p = 0xfffff0; p != 0x10; p = r2cc_psn_add(p, 1))
		for (uint32_t n = 0; n < 64; n++)
			cr_assert_eq(r2cc_psn_diff(r2cc_psn_add(p, n), p),
				     (int32_t)n);
}

Test(psn, mtu_bytes, .timeout = 5)
{
	cr_assert_eq(r2cc_mtu_bytes(IBV_MTU_256), 256);
	cr_assert_eq(r2cc_mtu_bytes(IBV_MTU_512), 512);
	cr_assert_eq(r2cc_mtu_bytes(IBV_MTU_1024), 1024);
	cr_assert_eq(r2cc_mtu_bytes(IBV_MTU_2048), 2048);
	cr_assert_eq(r2cc_mtu_bytes(IBV_MTU_4096), 4096);
	cr_assert_eq(r2cc_mtu_bytes((enum ibv_mtu)0), -EINVAL);
	cr_assert_eq(r2cc_mtu_bytes((enum ibv_mtu)6), -EINVAL);
}

struct npk_case {
	enum ibv_wr_opcode op;
	uint64_t len;
	uint32_t mtu;
	int want;
};

ParameterizedTestParameters(psn, npkts)
{
	static struct npk_case cases[] = {
		{ IBV_WR_SEND, 0, 1024, 1 },
		{ IBV_WR_SEND, 1, 256, 1 },
		{ IBV_WR_SEND, 256, 256, 1 },
		{ IBV_WR_SEND, 257, 256, 2 },
		{ IBV_WR_SEND_WITH_IMM, 0, 4096, 1 },
		{ IBV_WR_SEND_WITH_INV, 8192, 4096, 2 },
		{ IBV_WR_RDMA_WRITE, 16384, 1024, 16 },
		{ IBV_WR_RDMA_WRITE, 16385, 1024, 17 },
		{ IBV_WR_RDMA_WRITE, 0, 256, 1 },
		{ IBV_WR_RDMA_WRITE_WITH_IMM, 4095, 2048, 2 },
		{ IBV_WR_RDMA_WRITE_WITH_IMM, 0, 2048, 1 },
		{ IBV_WR_RDMA_READ, 0, 512, 1 },
		{ IBV_WR_RDMA_READ, 3000, 1024, 3 },
		{ IBV_WR_RDMA_READ, 1U << 20, 4096, 256 },
		{ IBV_WR_RDMA_READ, 1ULL << 31, 256, 1 << 23 },
		{ IBV_WR_ATOMIC_CMP_AND_SWP, 8, 256, 1 },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, 8, 4096, 1 },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 4096, 1 },
		{ IBV_WR_LOCAL_INV, 0, 1024, 0 },
		{ IBV_WR_BIND_MW, 0, 1024, 0 },
		{ IBV_WR_SEND, (1ULL << 31) + 1, 4096, -EMSGSIZE },
		{ IBV_WR_SEND, 100, 0, -EINVAL },
		{ IBV_WR_TSO, 100, 1024, -EOPNOTSUPP },
		{ IBV_WR_ATOMIC_WRITE, 8, 1024, -EOPNOTSUPP },
		{ IBV_WR_DRIVER1, 0, 1024, -EOPNOTSUPP },
	};

	return cr_make_param_array(struct npk_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct npk_case *c, psn, npkts, .timeout = 5)
{
	int got = r2cc_psn_npkts(c->op, c->len, c->mtu);

	cr_assert_eq(got, c->want, "op %d len %llu mtu %u: %d, want %d", c->op,
		     (unsigned long long)c->len, c->mtu, got, c->want);
}

/* The rule at every MTU, around every multiple, for every data opcode */
Test(psn, npkts_every_mtu_and_boundary, .timeout = 5)
{
	static const enum ibv_wr_opcode data_ops[] = {
		IBV_WR_SEND,
		IBV_WR_SEND_WITH_IMM,
		IBV_WR_SEND_WITH_INV,
		IBV_WR_RDMA_WRITE,
		IBV_WR_RDMA_WRITE_WITH_IMM,
		IBV_WR_RDMA_READ,
	};
	enum ibv_mtu m;
	size_t o;

	for (m = IBV_MTU_256; m <= IBV_MTU_4096; m++) {
		uint32_t mtu = (uint32_t)r2cc_mtu_bytes(m);

		for (o = 0; o < ARRAY_SIZE(data_ops); o++) {
			cr_assert_eq(r2cc_psn_npkts(data_ops[o], 0, mtu), 1);
			for (int k = 1; k <= 64; k++) {
				uint64_t len = (uint64_t)k * mtu;

				cr_assert_eq(r2cc_psn_npkts(data_ops[o],
							    len - 1, mtu),
					     k);
				cr_assert_eq(r2cc_psn_npkts(data_ops[o], len,
							    mtu),
					     k);
				cr_assert_eq(r2cc_psn_npkts(data_ops[o],
							    len + 1, mtu),
					     k + 1);
			}
		}
		cr_assert_eq(r2cc_psn_npkts(IBV_WR_ATOMIC_CMP_AND_SWP, 8, mtu),
			     1);
		cr_assert_eq(r2cc_psn_npkts(IBV_WR_LOCAL_INV, 0, mtu), 0);
	}
}

Test(psn, wr_npkts_sums_sges_inline_included, .timeout = 5)
{
	char buf[600];
	struct ibv_sge sge[3] = {
		{ (uintptr_t)buf, 200, 1 },
		{ (uintptr_t)buf, 300, 1 },
		{ (uintptr_t)buf, 100, 1 },
	};
	struct ibv_send_wr wr = {
		.sg_list = sge,
		.num_sge = 3,
		.opcode = IBV_WR_RDMA_WRITE,
	};

	cr_assert_eq(r2cc_wr_len(&wr), 600);
	cr_assert_eq(r2cc_wr_npkts(&wr, 256), 3);
	cr_assert_eq(r2cc_wr_npkts(&wr, 512), 2);
	cr_assert_eq(r2cc_wr_npkts(&wr, 1024), 1);
	wr.send_flags = IBV_SEND_INLINE;
	wr.opcode = IBV_WR_SEND;
	cr_assert_eq(r2cc_wr_npkts(&wr, 256), 3, "inline bytes count too");
	wr.num_sge = 0;
	wr.sg_list = NULL;
	cr_assert_eq(r2cc_wr_len(&wr), 0);
	cr_assert_eq(r2cc_wr_npkts(&wr, 256), 1);
	wr.num_sge = -1;
	cr_assert_eq(r2cc_wr_npkts(&wr, 256), -EINVAL);
}

Test(psn, wc_opcode_of_each_wr_opcode, .timeout = 5)
{
	cr_assert_eq(r2cc_wc_opcode(IBV_WR_SEND), IBV_WC_SEND);
	cr_assert_eq(r2cc_wc_opcode(IBV_WR_SEND_WITH_IMM), IBV_WC_SEND);
	cr_assert_eq(r2cc_wc_opcode(IBV_WR_SEND_WITH_INV), IBV_WC_SEND);
	cr_assert_eq(r2cc_wc_opcode(IBV_WR_RDMA_WRITE), IBV_WC_RDMA_WRITE);
	cr_assert_eq(r2cc_wc_opcode(IBV_WR_RDMA_WRITE_WITH_IMM),
		     IBV_WC_RDMA_WRITE);
	cr_assert_eq(r2cc_wc_opcode(IBV_WR_RDMA_READ), IBV_WC_RDMA_READ);
	cr_assert_eq(r2cc_wc_opcode(IBV_WR_ATOMIC_CMP_AND_SWP),
		     IBV_WC_COMP_SWAP);
	cr_assert_eq(r2cc_wc_opcode(IBV_WR_ATOMIC_FETCH_AND_ADD),
		     IBV_WC_FETCH_ADD);
	cr_assert_eq(r2cc_wc_opcode(IBV_WR_LOCAL_INV), IBV_WC_LOCAL_INV);
	cr_assert_eq(r2cc_wc_opcode(IBV_WR_BIND_MW), IBV_WC_BIND_MW);
	cr_assert_eq(r2cc_wc_opcode(IBV_WR_TSO), -EOPNOTSUPP);
}

/* 24 bits, not one value, and the program's random() stream untouched. */
Test(psn, random_first_psns_leave_the_programs_stream_alone, .timeout = 5)
{
	uint32_t first, v;
	long want;
	int i, differ = 0;

	srandom(42);
	want = random();
	srandom(42);
	first = r2cc_psn_random();
	for (i = 0; i < 64; i++) {
		v = r2cc_psn_random();
		cr_assert_leq(v, 0xffffff);
		differ += v != first;
	}
	cr_assert_eq(random(), want, "random() shifted by r2cc");
	cr_assert_gt(differ, 0, "64 equal PSNs in a row");
}
