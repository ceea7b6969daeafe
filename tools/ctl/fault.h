/* SPDX-License-Identifier: MIT */
/*
 * fault.h - what the fault injector's tc program (fault.bpf.c) and
 * r2cc-ctl (ctl_fault.c, fault_tc.c) share: the settings and counters in
 * the two one-entry maps pinned under /sys/fs/bpf/r2cc/<netdev>/.
 */
#ifndef R2CC_FAULT_H
#define R2CC_FAULT_H

#include <linux/types.h>

#define R2CC_FAULT_ROCE_PORT 4791 /* RoCEv2 UDP destination port */
#define R2CC_FAULT_PPM_ALL 1000000U /* --percent 100 */
#define R2CC_FAULT_QPN_ANY 0xffffffffU /* no --qpn: every QP */
#define R2CC_FAULT_QPN_MAX 0xffffffU /* BTH DestQP is 24 bits */

enum {
	R2CC_FAULT_F_INGRESS = 1U
			       << 0, /* attached on the clsact ingress hook */
	R2CC_FAULT_F_EGRESS = 1U << 1, /* ... and/or the egress hook */
	R2CC_FAULT_F_OWN_QDISC = 1U
				 << 2, /* clsact made by us: clear removes it */
};

/* Written once by `fault drop` before the program is attached; read-only
 * for the program. */
struct r2cc_fault_cfg {
	__u64 after; /* matching packets let through before dropping starts */
	__u64 deadline_ns; /* bpf_ktime_get_ns() from which nothing is
			    * dropped; 0 = no deadline */
	__u64 created_ns; /* CLOCK_MONOTONIC when installed (for show) */
	__u32 ppm; /* drop probability in parts per million */
	__u32 qpn; /* BTH DestQP to match, or R2CC_FAULT_QPN_ANY */
	__u32 flags; /* R2CC_FAULT_F_* */
	__u32 ifindex; /* the netdev it was attached to */
};

/* Updated by the program with atomic adds: seen == passed + dropped. */
struct r2cc_fault_stats {
	__u64 seen; /* RoCEv2 packets that matched (--qpn) */
	__u64 passed; /* of those, let through */
	__u64 dropped; /* of those, dropped */
};

#endif /* R2CC_FAULT_H */
