/* SPDX-License-Identifier: MIT */
/*
 * probe.h - path probes: is the IP path between our address on a rail and
 * the peer's there working again? A TCP handshake towards the peer's r2cc
 * port from our rail address answers it (a SYN-ACK, or a reset: either
 * came back over the path), MIG_PROBE_STREAK times in a row without a
 * retransmission. Used where no event says a fault is over (a black
 * hole): a QP moved away from one moves back once its path works again
 * (failback.c), retried with backoff. And, with R2CC_KEEPALIVE, whether
 * the path of idle QPs is still there (keepalive.c), one every period.
 * One probe in flight per path and asker; never blocking (the control
 * thread's tick drives them).
 */
#ifndef R2CC_MIGRATE_PROBE_H
#define R2CC_MIGRATE_PROBE_H

#include <stdbool.h>
#include <stdint.h>

/* How long a probe waits for the handshake (one SYN retransmission) */
#define MIG_PROBE_WAIT_MS 2000
/* A path works again after MIG_PROBE_STREAK probes in a row, one every
 * MIG_PROBE_EVERY_MS, each through within MIG_PROBE_CLEAN_MS (no SYN
 * retransmitted): a lossy path (30% loss gets a handshake through half
 * the time) is not taken for a healed one, whose QPs would fail over
 * again (lab: fo.loss). */
#define MIG_PROBE_STREAK 8
#define MIG_PROBE_EVERY_MS 1000
#define MIG_PROBE_CLEAN_MS 500
/* The longest wait between probes of a path that stays dark */
#define MIG_PROBE_MAX_GAP_MS 60000
/* A path failback asked nothing about for this long is forgotten */
#define MIG_PROBE_IDLE_MS 600000

/**
 * r2cc_probe_path() - has the path from @sgid to @dgid (RoCE v2 GIDs of
 * IPv4 addresses) been seen working since @since_ns (a streak of clean
 * probes ended after it)? Starts a probe of it if none is in flight and
 * one is due (the first at once; after a clean one MIG_PROBE_EVERY_MS;
 * after a failure @gap_ms, doubling up to MIG_PROBE_MAX_GAP_MS).
 * @port: the peer's r2cc port (host order)
 * Return: 1 yes, 0 not yet, -EAFNOSUPPORT (not IPv4 GIDs), -ENOSPC (no
 * memory for one more path), -errno (no socket).
 */
int r2cc_probe_path(const uint8_t sgid[16], const uint8_t dgid[16],
		    uint16_t port, uint64_t since_ns, uint64_t now_ns,
		    uint32_t gap_ms);
/* A path's keepalive probes so far (r2cc_probe_keep) */
struct r2cc_probe_count {
	uint64_t ok; /* handshakes that got through */
	uint32_t fail_row; /* unanswered in a row since the last one that did */
};

/**
 * r2cc_probe_keep() - keepalive probes of the path from @sgid to @dgid:
 * one every @every_ms after the last one ended (the first at once), each
 * given MIG_PROBE_WAIT_MS; any handshake counts (a SYN retransmitted
 * too). Starts the one that is due; @c gets the count so far.
 * Return: 0, -EAFNOSUPPORT (not IPv4 GIDs), -ENOSPC (no memory for one
 * more path).
 */
int r2cc_probe_keep(const uint8_t sgid[16], const uint8_t dgid[16],
		    uint16_t port, uint64_t now_ns, uint32_t every_ms,
		    struct r2cc_probe_count *c);
/* No more keepalive probes of the path: its probe closed, its count
 * forgotten (a later r2cc_probe_keep() starts again from none). */
void r2cc_probe_keep_end(const uint8_t sgid[16], const uint8_t dgid[16],
			 uint16_t port);
/* Advance the probes in flight (non-blocking; the caller serialises):
 * how many are still in flight. */
int r2cc_probe_poll(uint64_t now_ns);
/* Close every probe and forget every path. */
void r2cc_probe_reset(void);

#endif /* R2CC_MIGRATE_PROBE_H */
