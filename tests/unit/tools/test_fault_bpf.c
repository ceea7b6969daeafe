/* SPDX-License-Identifier: MIT */
/*
 * test_fault_bpf.c - the fault injector's tc program (tools/ctl/
 * fault.bpf.c) run on hand-made packets with BPF_PROG_TEST_RUN: what it
 * matches (RoCEv2 over IPv4, IPv6, one VLAN tag; BTH DestQP) and what it
 * drops (--after, --percent, --for). Needs CAP_BPF: skipped without it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/pkt_cls.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <criterion/criterion.h>

#include "fault.h"
#include "fault.skel.h"

static struct fault_bpf *skel;

enum pkt_kind { V4, V6, V4_VLAN, V4_FRAG, ARP, V4_SHORT };

/* Ethernet (+ VLAN) + IPv4/IPv6 + UDP to @dport + BTH with DestQP @qpn. */
static size_t build(uint8_t *p, enum pkt_kind k, uint16_t dport, uint32_t qpn)
{
	size_t off = 12;
	uint16_t et = k == V6 ? 0x86dd : k == ARP ? 0x0806 : 0x0800;

	memset(p, 0, 128);
	if (k == V4_VLAN) {
		p[off++] = 0x81, p[off++] = 0x00, p[off++] = 0, p[off++] = 5;
	}
	p[off++] = et >> 8, p[off++] = et & 0xff;
	if (k == V6) {
		p[off] = 0x60, p[off + 6] = 17 /* UDP */, p[off + 7] = 64;
		off += 40;
	} else {
		p[off] = 0x45, p[off + 8] = 64, p[off + 9] = 17;
		if (k == V4_FRAG)
			p[off + 7] = 0x10; /* offset 16 * 8 bytes */
		off += 20;
	}
	if (k == V4_SHORT)
		return off; /* no UDP header */
	p[off + 2] = dport >> 8, p[off + 3] = dport & 0xff;
	off += 8;
	p[off] = 0x04; /* RC SEND only */
	p[off + 5] = qpn >> 16, p[off + 6] = qpn >> 8, p[off + 7] = qpn;
	return off + 12 + 32;
}

static int run_kind(enum pkt_kind k, uint16_t dport, uint32_t qpn)
{
	uint8_t pkt[128];
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .repeat = 1);

	o.data_size_in = (uint32_t)build(pkt, k, dport, qpn);
	cr_assert_eq(bpf_prog_test_run_opts(
			     bpf_program__fd(skel->progs.r2cc_fault), &o),
		     0, "test run: %s", strerror(errno));
	return (int)o.retval;
}

static int run(enum pkt_kind k)
{
	return run_kind(k, R2CC_FAULT_ROCE_PORT, 0x11);
}

static void set_cfg(uint64_t after, uint32_t ppm, uint32_t qpn,
		    uint64_t deadline)
{
	struct r2cc_fault_cfg c = {
		.after = after, .ppm = ppm, .qpn = qpn, .deadline_ns = deadline
	};
	uint32_t key = 0;

	cr_assert_eq(bpf_map_update_elem(bpf_map__fd(skel->maps.cfg), &key, &c,
					 0),
		     0);
}

static struct r2cc_fault_stats stats(void)
{
	struct r2cc_fault_stats st;
	uint32_t key = 0;

	cr_assert_eq(bpf_map_lookup_elem(bpf_map__fd(skel->maps.stats), &key,
					 &st),
		     0);
	cr_assert_eq(st.seen, st.passed + st.dropped);
	return st;
}

static void setup(void)
{
	skel = fault_bpf__open_and_load();
	if (!skel && (errno == EPERM || errno == EACCES))
		cr_skip_test("loading BPF needs CAP_BPF (run as root)");
	if (!skel && errno == ENOSYS)
		cr_skip_test("this kernel has no BPF system call");
	cr_assert_not_null(skel, "load: %s", strerror(errno));
	set_cfg(0, R2CC_FAULT_PPM_ALL, R2CC_FAULT_QPN_ANY, 0);
}

static void teardown(void)
{
	fault_bpf__destroy(skel);
}

TestSuite(fault_bpf, .init = setup, .fini = teardown, .timeout = 30.);

Test(fault_bpf, drops_roce_v4_v6_and_vlan)
{
	cr_expect_eq(run(V4), TC_ACT_SHOT);
	cr_expect_eq(run(V6), TC_ACT_SHOT);
	cr_expect_eq(run(V4_VLAN), TC_ACT_SHOT);
	cr_expect_eq(stats().dropped, 3);
}

Test(fault_bpf, ignores_what_is_not_roce)
{
	cr_expect_eq(run_kind(V4, 4792, 0x11), TC_ACT_UNSPEC);
	cr_expect_eq(run_kind(V6, 53, 0x11), TC_ACT_UNSPEC);
	cr_expect_eq(run(V4_FRAG), TC_ACT_UNSPEC);
	cr_expect_eq(run(ARP), TC_ACT_UNSPEC);
	cr_expect_eq(run(V4_SHORT), TC_ACT_UNSPEC);
	cr_expect_eq(stats().seen, 0);
}

Test(fault_bpf, qpn_matches_the_24_bit_dest_qp_only)
{
	set_cfg(0, R2CC_FAULT_PPM_ALL, 0xabcdef, 0);
	cr_expect_eq(run_kind(V4, R2CC_FAULT_ROCE_PORT, 0xabcdee),
		     TC_ACT_UNSPEC);
	cr_expect_eq(run_kind(V6, R2CC_FAULT_ROCE_PORT, 0x11), TC_ACT_UNSPEC);
	cr_expect_eq(stats().seen, 0);
	cr_expect_eq(run_kind(V4, R2CC_FAULT_ROCE_PORT, 0xabcdef), TC_ACT_SHOT);
	cr_expect_eq(run_kind(V6, R2CC_FAULT_ROCE_PORT, 0xabcdef), TC_ACT_SHOT);
	cr_expect_eq(stats().dropped, 2);
}

Test(fault_bpf, after_lets_exactly_n_through)
{
	int i;

	set_cfg(5, R2CC_FAULT_PPM_ALL, R2CC_FAULT_QPN_ANY, 0);
	for (i = 0; i < 5; i++)
		cr_expect_eq(run(i % 2 ? V6 : V4), TC_ACT_UNSPEC, "packet %d",
			     i);
	for (i = 0; i < 3; i++)
		cr_expect_eq(run(V4), TC_ACT_SHOT);
	cr_expect_eq(stats().passed, 5);
	cr_expect_eq(stats().dropped, 3);
}

Test(fault_bpf, nothing_dropped_past_the_deadline)
{
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	set_cfg(0, R2CC_FAULT_PPM_ALL, R2CC_FAULT_QPN_ANY, now + 60000000000);
	cr_expect_eq(run(V4), TC_ACT_SHOT);
	set_cfg(0, R2CC_FAULT_PPM_ALL, R2CC_FAULT_QPN_ANY, now - 1);
	cr_expect_eq(run(V4), TC_ACT_UNSPEC);
	cr_expect_eq(stats().seen, 2);
	cr_expect_eq(stats().passed, 1);
}

Test(fault_bpf, percent_drops_about_that_share)
{
	int i, shot = 0;

	set_cfg(0, 250000 /* 25% */, R2CC_FAULT_QPN_ANY, 0);
	for (i = 0; i < 4000; i++)
		shot += run(V4) == TC_ACT_SHOT;
	/* Binomial(4000, 0.25): sd 27; 10 sd either side. */
	cr_expect(shot > 730 && shot < 1270, "dropped %d of 4000", shot);
	cr_expect_eq(stats().dropped, (uint64_t)shot);
}
