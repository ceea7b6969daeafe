/* SPDX-License-Identifier: MIT */
/*
 * ctl_secret.c - r2cc-ctl secret new FILE: a fresh job secret, 32 random
 * bytes from getrandom(2) written as 64 hex characters, in a new file of
 * mode 0600 (never over an existing one, nor through a symbolic link).
 * Every node of a job reads the same file through R2CC_SECRET_FILE.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"

#define SECRET_BYTES 32

/* @n random bytes into @buf: 0, or -errno */
static int random_fill(unsigned char *buf, size_t n)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		r = getrandom(buf + got, n - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		got += (size_t)r;
	}
	return 0;
}

/* All of @len bytes of @buf to @fd: 0, or -errno */
static int write_all(int fd, const char *buf, size_t len)
{
	ssize_t w;

	while (len) {
		w = write(fd, buf, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

static int secret_new(int argc, char **argv)
{
	unsigned char raw[SECRET_BYTES];
	char hex[2 * SECRET_BYTES + 1];
	int fd, ret;
	size_t i;

	if (argc != 1) {
		fprintf(stderr, "usage: r2cc-ctl secret new FILE\n");
		return CTL_ERR;
	}
	ret = random_fill(raw, sizeof(raw));
	if (ret) {
		fprintf(stderr, "r2cc-ctl: getrandom: %s\n", strerror(-ret));
		return CTL_ERR;
	}
	for (i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	memset(raw, 0, sizeof(raw));
	fd = open(argv[0], O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0) {
		fprintf(stderr, "r2cc-ctl: %s: %s%s\n", argv[0],
			strerror(errno),
			errno == EEXIST ? " (not overwritten)" : "");
		memset(hex, 0, sizeof(hex));
		return CTL_ERR;
	}
	/* 0600 whatever the umask left, before a byte is written */
	ret = fchmod(fd, 0600) ? -errno : 0;
	if (!ret)
		ret = write_all(fd, hex, 2 * SECRET_BYTES);
	if (!ret && fsync(fd))
		ret = -errno;
	memset(hex, 0, sizeof(hex));
	if (close(fd) && !ret)
		ret = -errno;
	if (ret) {
		fprintf(stderr, "r2cc-ctl: %s: %s (removed)\n", argv[0],
			strerror(-ret));
		unlink(argv[0]);
		return CTL_ERR;
	}
	printf("r2cc-ctl: wrote a job secret to %s (mode 0600): copy it to "
	       "every node of the job, readable by the job's user only, and "
	       "set R2CC_SECRET_FILE to it\n",
	       argv[0]);
	return CTL_OK;
}

static const struct ctl_cmd cmds[] = {
	{ "new", secret_new, "FILE  write a fresh random job secret (0600)" },
	{ 0 },
};

int secret_main(int argc, char **argv)
{
	return ctl_exec("secret", cmds, argc, argv);
}
