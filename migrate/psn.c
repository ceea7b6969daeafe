/* SPDX-License-Identifier: MIT */
/*
 * psn.c - how many PSNs each send WR spends on the requester's side, so the
 * send log can tell from the responder's rq_psn which WRs were executed;
 * and the first PSNs of the QPs r2cc connects.
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "migrate.h"

/* IB spec: a message carries at most 2^31 bytes */
#define MAX_MSG_LEN (1ULL << 31)

uint32_t r2cc_psn_random(void)
{
	static _Atomic uint64_t state;
	uint64_t x, seen;
	struct timespec ts;
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == sizeof(v))
		return v & 0xffffff;
	/* No entropy yet (early boot) or no syscall: xorshift64 over the
	 * time, the pid and a counter, one step per call. */
	seen = atomic_load(&state);
	do {
		x = seen;
		if (!x) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
			    ((uint64_t)getpid() << 16) ^ 0x9e3779b97f4a7c15ULL;
		}
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	} while (!atomic_compare_exchange_weak(&state, &seen, x));
	return (uint32_t)(x >> 20) & 0xffffff;
}

int r2cc_mtu_bytes(enum ibv_mtu mtu)
{
	if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096)
		return -EINVAL;
	return 128 << mtu;
}

static uint32_t data_pkts(uint64_t len, uint32_t mtu_bytes)
{
	/* A zero-length message is still one packet */
	if (!len)
		return 1;
	/* (a path MTU is a power of two: a shift, not a division) */
	if (!(mtu_bytes & (mtu_bytes - 1)))
		return (uint32_t)((len - 1) >> __builtin_ctz(mtu_bytes)) + 1;
	return (uint32_t)((len + mtu_bytes - 1) / mtu_bytes);
}

int r2cc_psn_npkts(enum ibv_wr_opcode op, uint64_t len, uint32_t mtu_bytes)
{
	if (!mtu_bytes)
		return -EINVAL;
	if (len > MAX_MSG_LEN)
		return -EMSGSIZE;
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	/*
	 * IB spec: a READ request advances the requester's PSN by the
	 * number of response packets, and the responder's ePSN likewise
	 * when it accepts the request.
	 */
	case IBV_WR_RDMA_READ:
		return (int)data_pkts(len, mtu_bytes);
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return 1;
	case IBV_WR_LOCAL_INV:
	case IBV_WR_BIND_MW:
		return 0; /* executed by the local HCA, no packets */
	default:
		return -EOPNOTSUPP;
	}
}

uint64_t r2cc_wr_len(const struct ibv_send_wr *wr)
{
	uint64_t len = 0;
	int i;

	for (i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	return len;
}

int r2cc_wr_npkts(const struct ibv_send_wr *wr, uint32_t mtu_bytes)
{
	if (wr->num_sge < 0)
		return -EINVAL;
	return r2cc_psn_npkts(wr->opcode, r2cc_wr_len(wr), mtu_bytes);
}
