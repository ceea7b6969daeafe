/* SPDX-License-Identifier: MIT */
/*
 * fault.bpf.c - tc (clsact, direct-action) program of `r2cc-ctl fault
 * drop`: drops RoCEv2 packets (UDP dport 4791, IPv4 or IPv6, untagged or
 * one VLAN tag) as the settings in the cfg map say, and counts them.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "fault.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct r2cc_fault_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct r2cc_fault_stats);
} stats SEC(".maps");

#define IP_FRAG_BITS 0x3fff /* MF flag and fragment offset */
#define VLAN_HLEN 4

/*
 * The destination QP of a RoCEv2 packet in *@qpn; 0 if @skb is not one.
 * bpf_skb_load_bytes() rather than direct access: on ingress the headers
 * need not all be in the linear part of the skb.
 */
static __always_inline int roce_dqpn(struct __sk_buff *skb, __u32 *qpn)
{
	__u32 off = ETH_HLEN;
	struct ipv6hdr ip6;
	struct udphdr udp;
	struct iphdr ip;
	__u8 bth[8];
	__be16 proto;

	if (bpf_skb_load_bytes(skb, 12, &proto, sizeof(proto)))
		return 0;
	if (proto == bpf_htons(ETH_P_8021Q) ||
	    proto == bpf_htons(ETH_P_8021AD)) {
		if (bpf_skb_load_bytes(skb, 16, &proto, sizeof(proto)))
			return 0;
		off += VLAN_HLEN;
	}
	if (proto == bpf_htons(ETH_P_IP)) {
		if (bpf_skb_load_bytes(skb, off, &ip, sizeof(ip)))
			return 0;
		/* A later fragment has no UDP header; RoCE sets DF anyway. */
		if (ip.protocol != IPPROTO_UDP ||
		    (ip.frag_off & bpf_htons(IP_FRAG_BITS)) || ip.ihl < 5)
			return 0;
		off += ip.ihl * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		/* RoCEv2 sends no extension headers. */
		if (bpf_skb_load_bytes(skb, off, &ip6, sizeof(ip6)) ||
		    ip6.nexthdr != IPPROTO_UDP)
			return 0;
		off += sizeof(ip6);
	} else {
		return 0;
	}
	if (bpf_skb_load_bytes(skb, off, &udp, sizeof(udp)) ||
	    udp.dest != bpf_htons(R2CC_FAULT_ROCE_PORT))
		return 0;
	/* IBA 9.2: BTH opcode, flags, P_Key, reserved, DestQP (24 bits). */
	if (bpf_skb_load_bytes(skb, off + sizeof(udp), bth, sizeof(bth)))
		return 0;
	*qpn = (__u32)bth[5] << 16 | (__u32)bth[6] << 8 | bth[7];
	return 1;
}

SEC("tc")
int r2cc_fault(struct __sk_buff *skb)
{
	struct r2cc_fault_stats *st;
	struct r2cc_fault_cfg *c;
	__u32 key = 0, qpn;
	__u64 n;

	c = bpf_map_lookup_elem(&cfg, &key);
	st = bpf_map_lookup_elem(&stats, &key);
	if (!c || !st || !roce_dqpn(skb, &qpn))
		return TC_ACT_UNSPEC;
	if (c->qpn != R2CC_FAULT_QPN_ANY && c->qpn != qpn)
		return TC_ACT_UNSPEC;
	/* One atomic counter orders the packets of every CPU: exactly
	 * `after` of them pass before the first drop. */
	n = __sync_fetch_and_add(&st->seen, 1);
	if (n < c->after ||
	    (c->deadline_ns && bpf_ktime_get_ns() >= c->deadline_ns) ||
	    (c->ppm < R2CC_FAULT_PPM_ALL &&
	     bpf_get_prandom_u32() % R2CC_FAULT_PPM_ALL >= c->ppm)) {
		__sync_fetch_and_add(&st->passed, 1);
		return TC_ACT_UNSPEC;
	}
	__sync_fetch_and_add(&st->dropped, 1);
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
