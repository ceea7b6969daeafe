/* SPDX-License-Identifier: MIT */
/*
 * secret.c - the rules a job secret file (R2CC_SECRET_FILE) must meet,
 * checked on the open descriptor; the key derived from it is migrate/'s.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy.h"

#define MSG_MAX 512

struct sink {
	const char *path; /* borrowed */
	r2cc_conf_report_fn fn;
	void *arg; /* borrowed */
};

/* "secret file PATH: ..." as one r2cc_log() error and one hook call */
#define problem(s, fmt, ...) report(s, __func__, __LINE__, fmt, ##__VA_ARGS__)

static void __attribute__((format(printf, 4, 5)))
report(const struct sink *s, const char *func, int line, const char *fmt, ...)
{
	char msg[MSG_MAX];
	va_list ap;
	int n;

	n = snprintf(msg, sizeof(msg), "secret file %s: ", s->path);
	if (n < 0 || (size_t)n >= sizeof(msg))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	r2cc_log(R2CC_LOG_ERR, R2CC_LOG_MOD, func, line, "%s", msg);
	if (s->fn)
		s->fn(s->arg, msg);
}

static const char *type_name(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR:
		return "a directory";
	case S_IFIFO:
		return "a FIFO";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFSOCK:
		return "a socket";
	default:
		return "not a plain file";
	}
}

/* Owner, mode and size of a regular file, each problem reported */
static int check_stat(const struct sink *s, const struct stat *st)
{
	unsigned int mode = (unsigned int)(st->st_mode & 07777);
	int ret = 0;

	if (!S_ISREG(st->st_mode)) {
		problem(s, "not a regular file (%s); must be a regular file",
			type_name(st->st_mode));
		return -EPERM;
	}
	if (st->st_uid != geteuid()) {
		problem(s, "owned by uid %u; must be owned by uid %u",
			(unsigned int)st->st_uid, (unsigned int)geteuid());
		ret = -EPERM;
	}
	/* 0600 or stricter, and no set-id or sticky bit */
	if (mode & 07177) {
		problem(s, "mode %04o (%s); must be 0600 or stricter", mode,
			mode & 077 ? "group or others have access" :
				     "execute, set-id or sticky bit");
		ret = -EPERM;
	}
	if (st->st_size < R2CC_SECRET_MIN || st->st_size > R2CC_SECRET_MAX) {
		problem(s, "%lld bytes; must hold %d..%d bytes",
			(long long)st->st_size, R2CC_SECRET_MIN,
			R2CC_SECRET_MAX);
		if (!ret)
			ret = -EINVAL;
	}
	return ret;
}

/* Why open(2) failed, and what would do */
static int open_failed(const struct sink *s, int err)
{
	const char *why;
	char buf[128];

	if (err == -ELOOP) {
		problem(s, "a symbolic link; must be the file itself");
		return -EPERM;
	}
	/* GNU strerror_r(): the message may be a static string, not buf */
	why = strerror_r(-err, buf, sizeof(buf));
	if (err == -ENOENT)
		problem(s,
			"%s; must exist (make one with r2cc-ctl secret new FILE)",
			why);
	else if (err == -EACCES)
		problem(s, "%s; must be readable by uid %u", why,
			(unsigned int)geteuid());
	else
		problem(s, "%s", why);
	return err;
}

int r2cc_secret_open(const char *path, struct stat *st, r2cc_conf_report_fn fn,
		     void *arg)
{
	const struct sink s = { .path = path, .fn = fn, .arg = arg };
	struct stat sb;
	char buf[128];
	int fd, ret;

	/* O_NOFOLLOW: a symlink is refused; O_NONBLOCK: a FIFO cannot hang */
	fd = open(path,
		  O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return open_failed(&s, -errno);
	if (fstat(fd, &sb)) {
		ret = -errno;
		problem(&s, "%s", strerror_r(-ret, buf, sizeof(buf)));
	} else {
		ret = check_stat(&s, &sb);
	}
	if (ret) {
		close(fd);
		return ret;
	}
	if (st)
		*st = sb;
	return fd;
}
