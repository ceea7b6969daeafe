/* SPDX-License-Identifier: MIT */
/*
 * health.c - rail health: the state of each rail, the sources that report
 * it (netdev carrier through rtnetlink, fds the shim registers for port
 * events) and the monitor thread that serves them.
 */
#include <errno.h>
#include <fcntl.h>
/* net/if.h first: linux/if.h then leaves out what glibc defines. */
#include <net/if.h>
#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "policy.h"

#define MAX_FDS 16

struct rail {
	bool used;
	char dev[R2CC_DEVNAME_MAX];
	char netdev[R2CC_IFNAMSIZ];
	int ifindex; /* 0: no carrier watching */
	struct r2cc_health_info info;
};

struct watch {
	int fd;
	void (*ready)(int fd, void *arg);
	void *arg;
};

/*
 * The module's health state. lock protects rails[] (reports come from the
 * monitor thread and the shim's threads); fds[] and the rest are written
 * only before the thread starts and by start/stop.
 */
static struct {
	pthread_mutex_t lock;
	struct rail rails[R2CC_HEALTH_RAILS];
	struct watch fds[MAX_FDS];
	int nfds;
	r2cc_health_fn fn;
	void *arg;
	int nl_fd, wake_fd;
	bool running;
	pid_t pid; /* of the process that started the monitor */
	pthread_t thread;
} hs = { .lock = PTHREAD_MUTEX_INITIALIZER, .nl_fd = -1, .wake_fd = -1 };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

const char *r2cc_rail_state_name(enum r2cc_rail_state s)
{
	static const char *const n[] = { "unknown", "up", "down" };

	return (unsigned int)s < 3 ? n[s] : "?";
}

int r2cc_rc_timeout_for(uint32_t detect_ms, unsigned int tries)
{
	uint64_t bound = (uint64_t)detect_ms * 1000000ULL;
	int t;

	if (!tries)
		tries = 1;
	/* IB: the local ACK timeout is 4.096 us * 2^t (t 1..31). */
	for (t = 31; t > 1; t--)
		if ((4096ULL << t) * tries <= bound)
			break;
	return t;
}

const char *r2cc_health_cause_name(enum r2cc_health_cause c)
{
	static const char *const n[] = { "none",     "carrier", "port event",
					 "cq error", "peer",	"probe",
					 "admin",    "srq" };

	return (unsigned int)c < sizeof(n) / sizeof(n[0]) ? n[c] : "?";
}

/* Carrier as sysfs shows it now: up, down, or unknown. */
static enum r2cc_rail_state carrier_now(const char *netdev)
{
	char path[64], c = 0;
	int fd;

	snprintf(path, sizeof(path), "/sys/class/net/%s/carrier", netdev);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return R2CC_RAIL_UNKNOWN;
	/* EINVAL when the interface is administratively down: down. */
	if (read(fd, &c, 1) != 1)
		c = '0';
	close(fd);
	return c == '1' ? R2CC_RAIL_UP : R2CC_RAIL_DOWN;
}

int r2cc_health_add_rail(int rail, const char *dev, const char *netdev)
{
	struct rail *r;
	int ret = 0;

	if (rail < 0 || rail >= R2CC_HEALTH_RAILS || !dev || !netdev ||
	    strlen(dev) >= sizeof(r->dev) ||
	    strlen(netdev) >= sizeof(r->netdev))
		return -EINVAL;
	pthread_mutex_lock(&hs.lock);
	r = &hs.rails[rail];
	if (r->used) {
		ret = -EEXIST;
		goto out;
	}
	memset(r, 0, sizeof(*r));
	r->used = true;
	strcpy(r->dev, dev);
	strcpy(r->netdev, netdev);
	if (netdev[0]) {
		r->ifindex = (int)if_nametoindex(netdev);
		r->info.state = carrier_now(netdev);
	}
	r->info.since_ns = now_ns();
out:
	pthread_mutex_unlock(&hs.lock);
	return ret;
}

int r2cc_health_add_fd(int fd, void (*ready)(int fd, void *arg), void *arg)
{
	if (fd < 0 || !ready)
		return -EINVAL;
	if (hs.running)
		return -EBUSY;
	if (hs.nfds == MAX_FDS)
		return -ENOSPC;
	hs.fds[hs.nfds++] = (struct watch){ fd, ready, arg };
	return 0;
}

void r2cc_health_report(int rail, enum r2cc_rail_state state,
			enum r2cc_health_cause cause)
{
	r2cc_health_fn fn;
	struct rail *r;
	void *arg;

	if (rail < 0 || rail >= R2CC_HEALTH_RAILS)
		return;
	pthread_mutex_lock(&hs.lock);
	r = &hs.rails[rail];
	if (!r->used || r->info.state == state) {
		pthread_mutex_unlock(&hs.lock);
		return;
	}
	r->info.state = state;
	r->info.cause = cause;
	r->info.since_ns = now_ns();
	if (state == R2CC_RAIL_DOWN)
		r->info.downs++;
	else if (state == R2CC_RAIL_UP)
		r->info.ups++;
	fn = hs.fn;
	arg = hs.arg;
	pthread_mutex_unlock(&hs.lock);
	/* Outside the lock: the callback may ask for r2cc_health_get(). */
	if (fn)
		fn(rail, state, cause, arg);
}

struct r2cc_health_info r2cc_health_get(int rail)
{
	struct r2cc_health_info i = { 0 };

	if (rail < 0 || rail >= R2CC_HEALTH_RAILS)
		return i;
	pthread_mutex_lock(&hs.lock);
	if (hs.rails[rail].used)
		i = hs.rails[rail].info;
	pthread_mutex_unlock(&hs.lock);
	return i;
}

int r2cc_nl_parse_links(const void *buf, size_t len,
			void (*fn)(int ifindex, bool up, void *arg), void *arg)
{
	const struct nlmsghdr *nh = buf;
	int n = 0;

	for (; len >= sizeof(*nh); nh = NLMSG_NEXT(nh, len)) {
		const struct ifinfomsg *ifi = NLMSG_DATA(nh);
		bool up;

		if (nh->nlmsg_len < sizeof(*nh) || nh->nlmsg_len > len)
			return -EBADMSG;
		if (nh->nlmsg_type != RTM_NEWLINK &&
		    nh->nlmsg_type != RTM_DELLINK)
			continue;
		if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)))
			return -EBADMSG;
		up = nh->nlmsg_type == RTM_NEWLINK &&
		     (ifi->ifi_flags & IFF_UP) &&
		     (ifi->ifi_flags & IFF_LOWER_UP);
		fn(ifi->ifi_index, up, arg);
		n++;
	}
	return n;
}

/* A link change from rtnetlink: report it for every rail on that netdev. */
static void on_link(int ifindex, bool up, void *arg)
{
	int i, hit[R2CC_HEALTH_RAILS], n = 0;

	(void)arg;
	pthread_mutex_lock(&hs.lock);
	for (i = 0; i < R2CC_HEALTH_RAILS; i++)
		if (hs.rails[i].used && hs.rails[i].ifindex == ifindex)
			hit[n++] = i;
	pthread_mutex_unlock(&hs.lock);
	for (i = 0; i < n; i++)
		r2cc_health_report(hit[i], up ? R2CC_RAIL_UP : R2CC_RAIL_DOWN,
				   R2CC_CAUSE_CARRIER);
}

static void drain_netlink(void)
{
	/* Netlink messages are aligned; so must the buffer be. */
	static __attribute__((aligned(8))) char buf[16384];
	ssize_t n;

	while ((n = recv(hs.nl_fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		if (r2cc_nl_parse_links(buf, (size_t)n, on_link, NULL) < 0)
			r2cc_warn("malformed rtnetlink message ignored");
	if (n < 0 && errno == ENOBUFS)
		r2cc_warn("rtnetlink overrun: link changes may be missed");
}

static void *monitor(void *unused)
{
	struct pollfd p[MAX_FDS + 2];
	int i, n;

	(void)unused;
	/* as top -H and /proc/PID/task show it */
	pthread_setname_np(pthread_self(), "r2cc-health");
	for (;;) {
		n = 0;
		p[n++] = (struct pollfd){ .fd = hs.wake_fd, .events = POLLIN };
		p[n++] = (struct pollfd){ .fd = hs.nl_fd, .events = POLLIN };
		for (i = 0; i < hs.nfds; i++)
			p[n++] = (struct pollfd){ .fd = hs.fds[i].fd,
						  .events = POLLIN };
		/* No timeout: the thread sleeps until a source or
		 * r2cc_health_stop() wakes it, so it costs the program
		 * nothing while rails are quiet. */
		if (poll(p, (nfds_t)n, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break; /* r2cc_health_stop() */
		if (p[1].revents & POLLIN)
			drain_netlink();
		for (i = 0; i < hs.nfds; i++)
			if (p[2 + i].revents)
				hs.fds[i].ready(hs.fds[i].fd, hs.fds[i].arg);
	}
	return NULL;
}

static int open_netlink(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK,
				  .nl_groups = RTMGRP_LINK };
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
			NETLINK_ROUTE);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

int r2cc_health_start(r2cc_health_fn fn, void *arg)
{
	sigset_t all, old;
	int ret;

	if (hs.running)
		return -EBUSY;
	hs.fn = fn;
	hs.arg = arg;
	hs.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (hs.wake_fd < 0)
		return -errno;
	hs.nl_fd = open_netlink();
	if (hs.nl_fd < 0)
		r2cc_warn("no rtnetlink (%s): carrier changes not watched",
			  strerror(-hs.nl_fd));
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&hs.thread, NULL, monitor, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		close(hs.wake_fd);
		if (hs.nl_fd >= 0)
			close(hs.nl_fd);
		hs.wake_fd = hs.nl_fd = -1;
		return ret;
	}
	hs.running = true;
	hs.pid = getpid();
	return 0;
}

void r2cc_health_stop(void)
{
	struct timespec until;
	uint64_t one = 1;

	if (!hs.running)
		return;
	if (getpid() != hs.pid) {
		/* A forked child: the thread is the parent's, and so is the
		 * wake fd it shares with us. Leave both alone. */
		hs.running = false;
		return;
	}
	if (write(hs.wake_fd, &one, sizeof(one)) != sizeof(one))
		r2cc_warn("cannot wake the health monitor");
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	if (pthread_timedjoin_np(hs.thread, NULL, &until)) {
		/* Still busy: leave it (and its fds) to process exit. */
		r2cc_warn("health monitor did not stop within 2 s");
		return;
	}
	hs.running = false;
	close(hs.wake_fd);
	if (hs.nl_fd >= 0)
		close(hs.nl_fd);
	hs.wake_fd = hs.nl_fd = -1;
}
