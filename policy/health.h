/* SPDX-License-Identifier: MIT */
/*
 * health.h - rail health, part of policy.h: a monitor thread watches each
 * rail's netdev carrier (rtnetlink) and the event fds the shim hands it
 * (port events of r2cc's private contexts); every source reports through
 * r2cc_health_report(), which keeps the state and calls back on changes.
 */
#ifndef R2CC_POLICY_HEALTH_H
#define R2CC_POLICY_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define R2CC_HEALTH_RAILS 16

enum r2cc_rail_state { R2CC_RAIL_UNKNOWN, R2CC_RAIL_UP, R2CC_RAIL_DOWN };
enum r2cc_health_cause {
	R2CC_CAUSE_NONE,
	R2CC_CAUSE_CARRIER, /* netdev carrier (rtnetlink) */
	R2CC_CAUSE_PORT_EVENT, /* IBV_EVENT_PORT_ERR / _ACTIVE */
	R2CC_CAUSE_CQ_ERROR, /* a path fault seen in a completion */
	R2CC_CAUSE_PEER, /* the peer's r2cc said so */
	R2CC_CAUSE_PROBE, /* keepalive */
	R2CC_CAUSE_ADMIN, /* r2cc-ctl or a fault injection */
	R2CC_CAUSE_SRQ, /* a QP sharing the SRQ moved: the group moves */
};

/* Called, from the reporting thread, on every change of a rail's state. */
typedef void (*r2cc_health_fn)(int rail, enum r2cc_rail_state state,
			       enum r2cc_health_cause cause, void *arg);

struct r2cc_health_info {
	enum r2cc_rail_state state;
	enum r2cc_health_cause cause; /* of the last change */
	uint64_t since_ns; /* CLOCK_MONOTONIC of the last change */
	uint64_t downs, ups; /* changes so far */
};

/**
 * r2cc_health_add_rail() - watch rail @rail (before r2cc_health_start())
 * @rail: 0..R2CC_HEALTH_RAILS-1
 * @dev: its RDMA device name, for messages
 * @netdev: its netdev for carrier watching, or "" (InfiniBand)
 * Its first state is its netdev's carrier as sysfs shows it now, or
 * unknown. Return: 0, -EINVAL, -EEXIST.
 */
int r2cc_health_add_rail(int rail, const char *dev, const char *netdev);
/**
 * r2cc_health_add_fd() - have the monitor call @ready when @fd is readable
 * @fd: non-blocking; stays the caller's
 * @ready: drains @fd and reports what it found; runs on the monitor thread
 * @arg: passed to @ready
 * Return: 0, -ENOSPC (16 at most), -EBUSY once started.
 */
int r2cc_health_add_fd(int fd, void (*ready)(int fd, void *arg), void *arg);
/**
 * r2cc_health_start() - open the rtnetlink socket and start the monitor
 * @fn: change callback (may be NULL)
 * @arg: passed to @fn
 * The thread blocks every signal and sleeps in poll() until an event or
 * r2cc_health_stop() (eventfd) wakes it. Without rtnetlink it still
 * serves the fds (one warning). Return: 0 or -errno.
 */
int r2cc_health_start(r2cc_health_fn fn, void *arg);
/* Stop the monitor: waits for it at most 2 s. Safe if never started. */
void r2cc_health_stop(void);
/* A source's verdict on @rail; the state changes (and @fn runs) only if
 * it differs from the current one. Any thread. */
void r2cc_health_report(int rail, enum r2cc_rail_state state,
			enum r2cc_health_cause cause);
/* A snapshot of @rail (zeroed for unknown rails). */
struct r2cc_health_info r2cc_health_get(int rail);
const char *r2cc_rail_state_name(enum r2cc_rail_state s);
/**
 * r2cc_rc_timeout_for() - the RC local ACK timeout exponent that finds a
 * black hole within @detect_ms
 * @detect_ms: the bound (R2CC_DETECT_MS)
 * @tries: the transmissions before RETRY_EXC (retry_cnt + 1; 0 counts 1)
 * Return: the largest t in 1..31 with 4.096 us * 2^t * @tries <= @detect_ms
 * (1 when even that is longer).
 */
int r2cc_rc_timeout_for(uint32_t detect_ms, unsigned int tries);
const char *r2cc_health_cause_name(enum r2cc_health_cause c);
/**
 * r2cc_nl_parse_links() - walk rtnetlink messages for link changes
 * @buf: what recv() returned from a NETLINK_ROUTE socket
 * @len: its length
 * @fn: called per RTM_NEWLINK/RTM_DELLINK with the interface index and
 *      whether it can carry traffic (IFF_UP and IFF_LOWER_UP; a deleted
 *      link is down)
 * @arg: passed to @fn
 * Return: the number of link messages, or -EBADMSG for a malformed one
 * (the ones before it were delivered).
 */
int r2cc_nl_parse_links(const void *buf, size_t len,
			void (*fn)(int ifindex, bool up, void *arg), void *arg);

#endif /* R2CC_POLICY_HEALTH_H */
