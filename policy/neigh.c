/* SPDX-License-Identifier: MIT */
/*
 * neigh.c - the kernel's IPoIB neighbours (/proc/net/arp): an IPoIB
 * hardware address is 20 bytes, flags and QPN then the port's GID, so
 * a complete entry on an InfiniBand interface maps a peer's GID to an
 * IPv4 address of its node. Outside input: every field checked.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "neigh.h"

#define ARP_HW_INFINIBAND 0x20 /* ARPHRD_INFINIBAND */
#define ARP_COMPLETE 0x2 /* ATF_COM */
#define IPOIB_HWADDR 20

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' :
	       c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 :
				      -1;
}

/* The next white-space separated field of [*@s, @end): its bounds */
static bool field(const char **s, const char *end, const char **fs, size_t *len)
{
	const char *p = *s;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	*fs = p;
	while (p < end && *p != ' ' && *p != '\t')
		p++;
	*len = (size_t)(p - *fs);
	*s = p;
	return *len > 0;
}

/* "0x20"-style hex of @len bytes */
static int hexnum(const char *s, size_t len, unsigned int *v)
{
	size_t i;

	if (len < 3 || len > 10 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
		return -EINVAL;
	*v = 0;
	for (i = 2; i < len; i++) {
		int h = hexval(s[i]);

		if (h < 0)
			return -EINVAL;
		*v = *v * 16 + (unsigned int)h;
	}
	return 0;
}

/* "a.b.c.d" of @len bytes */
static int ipv4(const char *s, size_t len, uint8_t ip[4])
{
	unsigned int part = 0, v = 0, digits = 0;
	size_t i;

	for (i = 0; i <= len; i++) {
		if (i == len || s[i] == '.') {
			if (!digits || v > 255 || part > 3)
				return -EINVAL;
			ip[part++] = (uint8_t)v;
			v = digits = 0;
		} else if (s[i] >= '0' && s[i] <= '9' && digits < 3) {
			v = v * 10 + (unsigned int)(s[i] - '0');
			digits++;
		} else {
			return -EINVAL;
		}
	}
	return part == 4 ? 0 : -EINVAL;
}

/* An IPoIB hardware address (20 colon-separated hex bytes): its GID */
static int hwaddr_gid(const char *s, size_t len, uint8_t gid[16])
{
	uint8_t b[IPOIB_HWADDR];
	size_t i;

	if (len != IPOIB_HWADDR * 3 - 1)
		return -EINVAL;
	for (i = 0; i < IPOIB_HWADDR; i++) {
		int hi = hexval(s[3 * i]), lo = hexval(s[3 * i + 1]);

		if (hi < 0 || lo < 0 ||
		    (i + 1 < IPOIB_HWADDR && s[3 * i + 2] != ':'))
			return -EINVAL;
		b[i] = (uint8_t)(hi * 16 + lo);
	}
	memcpy(gid, b + 4, 16);
	return 0;
}

int r2cc_neigh_find(const char *text, size_t len, const uint8_t gid[16],
		    uint8_t ip[4])
{
	const char *end = text + len, *line = text;
	bool first = true;

	while (line < end) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *le = nl ? nl : end, *p = line, *f[4];
		size_t fl[4];
		unsigned int type, flags;
		uint8_t g[16], a[4];
		int i;

		if (first) { /* the header */
			first = false;
			line = le + 1;
			continue;
		}
		for (i = 0; i < 4 && field(&p, le, &f[i], &fl[i]); i++)
			;
		if (i == 4 && !ipv4(f[0], fl[0], a) &&
		    !hexnum(f[1], fl[1], &type) &&
		    !hexnum(f[2], fl[2], &flags) && type == ARP_HW_INFINIBAND &&
		    (flags & ARP_COMPLETE) && !hwaddr_gid(f[3], fl[3], g) &&
		    !memcmp(g, gid, 16)) {
			memcpy(ip, a, 4);
			return 0;
		}
		line = le + 1;
	}
	return -ENOENT;
}

int r2cc_neigh_lookup(const uint8_t gid[16], uint8_t ip[4])
{
	char *buf = malloc(R2CC_NEIGH_MAX);
	size_t len = 0;
	ssize_t r = 0;
	int fd, ret;

	if (!buf)
		return -ENOMEM;
	fd = open("/proc/net/arp", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		free(buf);
		return ret;
	}
	/* (a table past the bound is read that far: what is there counts) */
	while (len < R2CC_NEIGH_MAX &&
	       (r = read(fd, buf + len, R2CC_NEIGH_MAX - len)) > 0)
		len += (size_t)r;
	close(fd);
	ret = r < 0 ? -EIO : r2cc_neigh_find(buf, len, gid, ip);
	free(buf);
	return ret;
}
