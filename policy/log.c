/* SPDX-License-Identifier: MIT */
/*
 * log.c - r2cc_log(): one write(2) per message, to a test hook, to
 * R2CC_LOG_FILE or to stderr, never stdout. Lock-free and errno-preserving.
 *
 * A line: "r2cc[PID]: HH:MM:SS.uuuuuu MODULE: FUNCTION:LINE: message", the
 * time of day in UTC, so that the lines of processes and nodes sort into
 * the order of events.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "policy.h"

/*
 * No lock: each field is one atomic word, read once per message.
 * level: relaxed; it is only a filter, and a stale value lets one message
 *   through or holds one back.
 * fn: release on store, acquire on load, so that whatever the hook uses
 *   was written before the hook became visible.
 * fd: -1 = stderr. Installed once (compare-and-swap); later files are
 *   dup3()ed onto the same number and never closed, so a writer that
 *   loaded it never writes to a closed or recycled descriptor.
 */
static struct r2cc_log_state {
	_Atomic int level;
	_Atomic(r2cc_log_fn) fn;
	_Atomic int fd;
} log_state = {
	.level = R2CC_LOG_WARN, .fd = -1, /* .fn starts NULL */
};

static void emit(enum r2cc_log_level level, const char *buf, size_t len)
{
	r2cc_log_fn fn;
	ssize_t ret;
	int fd;

	fn = atomic_load_explicit(&log_state.fn, memory_order_acquire);
	if (fn) {
		fn(level, buf, len);
		return;
	}
	fd = atomic_load_explicit(&log_state.fd, memory_order_acquire);
	if (fd < 0)
		fd = STDERR_FILENO;
	/* One write(2) so that lines from threads/processes never interleave */
	do {
		ret = write(fd, buf, len);
	} while (ret < 0 && errno == EINTR);
}

/*
 * Ends the message in buf (of @used bytes, or more if vsnprintf() cut it)
 * with exactly one newline. Returns the final length.
 */
static size_t terminate(char *buf, size_t size, size_t used)
{
	static const char cut[] = "...\n";

	if (used >= size - 1) {
		memcpy(buf + size - sizeof(cut), cut, sizeof(cut));
		return size - 1;
	}
	if (!used || buf[used - 1] != '\n') {
		buf[used++] = '\n';
		buf[used] = '\0';
	}
	return used;
}

/* The time of day in UTC, by arithmetic: gmtime_r() may take a lock. */
static void time_of_day(unsigned int *h, unsigned int *m, unsigned int *s,
			unsigned long *us)
{
	struct timespec ts = { 0 };
	unsigned long day;

	clock_gettime(CLOCK_REALTIME, &ts);
	day = (unsigned long)ts.tv_sec % 86400;
	*h = (unsigned int)(day / 3600);
	*m = (unsigned int)(day / 60 % 60);
	*s = (unsigned int)(day % 60);
	*us = (unsigned long)ts.tv_nsec / 1000;
}

void r2cc_log(enum r2cc_log_level level, const char *mod, const char *func,
	      int line, const char *fmt, ...)
{
	char buf[R2CC_LOG_LINE_MAX];
	unsigned int h, m, s;
	int saved = errno;
	unsigned long us;
	size_t used;
	va_list ap;
	int len;

	if (level <= R2CC_LOG_OFF ||
	    (int)level > atomic_load_explicit(&log_state.level,
					      memory_order_relaxed))
		return;

	time_of_day(&h, &m, &s, &us);
	len = snprintf(buf, sizeof(buf),
		       "r2cc[%d]: %02u:%02u:%02u.%06lu %s: %s:%d: ",
		       (int)getpid(), h, m, s, us, mod, func, line);
	used = len < 0 ? 0 : (size_t)len;
	if (used < sizeof(buf) - 1) {
		va_start(ap, fmt);
		len = vsnprintf(buf + used, sizeof(buf) - used, fmt, ap);
		va_end(ap);
		if (len > 0)
			used += (size_t)len;
	}
	if (used > sizeof(buf) - 1)
		used = sizeof(buf) - 1;
	buf[used] = '\0';

	emit(level, buf, terminate(buf, sizeof(buf), used));
	errno = saved;
}

r2cc_log_fn r2cc_log_set_fn(r2cc_log_fn fn)
{
	return atomic_exchange_explicit(&log_state.fn, fn,
					memory_order_acq_rel);
}

enum r2cc_log_level r2cc_log_set_level(enum r2cc_log_level level)
{
	int lvl = (int)level;

	if (lvl < R2CC_LOG_OFF)
		lvl = R2CC_LOG_OFF;
	if (lvl > R2CC_LOG_DEBUG)
		lvl = R2CC_LOG_DEBUG;
	return (enum r2cc_log_level)atomic_exchange_explicit(
		&log_state.level, lvl, memory_order_relaxed);
}

enum r2cc_log_level r2cc_log_get_level(void)
{
	return (enum r2cc_log_level)atomic_load_explicit(&log_state.level,
							 memory_order_relaxed);
}

enum r2cc_log_say r2cc_log_limit_pass(struct r2cc_log_limit *l, uint64_t *held)
{
	struct timespec ts;
	uint32_t n;
	uint64_t w;

	*held = 0;
	if (r2cc_log_get_level() >= R2CC_LOG_DEBUG)
		return R2CC_LOG_SAY;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	w = (uint64_t)ts.tv_sec / R2CC_LOG_WINDOW_S + 1;
	if (atomic_exchange_explicit(&l->window, w, memory_order_relaxed) != w)
		atomic_store_explicit(&l->n, 0, memory_order_relaxed);
	n = atomic_fetch_add_explicit(&l->n, 1, memory_order_relaxed);
	if (n >= R2CC_LOG_BURST) {
		atomic_fetch_add_explicit(&l->held, 1, memory_order_relaxed);
		return R2CC_LOG_HOLD;
	}
	*held = atomic_exchange_explicit(&l->held, 0, memory_order_relaxed);
	return n == R2CC_LOG_BURST - 1 ? R2CC_LOG_SAY_LAST : R2CC_LOG_SAY;
}

#define LIMIT_STR(x) #x
#define LIMIT_XSTR(x) LIMIT_STR(x)
#define LIMIT_WINDOW_STR LIMIT_XSTR(R2CC_LOG_WINDOW_S)

const char *r2cc_log_limit_tail(enum r2cc_log_say say)
{
	if (say != R2CC_LOG_SAY_LAST)
		return "";
	return "; more of these held back for up to " LIMIT_WINDOW_STR
	       " s, all counted in r2cc-ctl stats";
}

/* Makes the log descriptor refer to what @newfd refers to; closes @newfd. */
static int install_fd(int newfd)
{
	int expected = -1;
	int ret = 0;

	if (atomic_compare_exchange_strong_explicit(&log_state.fd, &expected,
						    newfd, memory_order_acq_rel,
						    memory_order_acquire))
		return 0;
	/* Already installed: replace the open file behind the same number */
	if (dup3(newfd, expected, O_CLOEXEC) < 0)
		ret = -errno;
	close(newfd);
	return ret;
}

int r2cc_log_open_file(const char *path)
{
	int saved = errno;
	int fd, ret;

	if (!path || !*path) {
		/* Nothing to undo if no file was ever installed */
		fd = atomic_load_explicit(&log_state.fd, memory_order_acquire);
		if (fd < 0)
			return 0;
		fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0);
	} else {
		fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
			  S_IRUSR | S_IWUSR);
	}
	if (fd < 0) {
		ret = -errno;
		errno = saved;
		return ret;
	}
	ret = install_fd(fd);
	errno = saved;
	return ret;
}
