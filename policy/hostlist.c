/* SPDX-License-Identifier: MIT */
/*
 * hostlist.c - a job's node list, as an operator or a launcher writes it:
 * names or IPv4 addresses separated by commas or white space, with
 * Slurm's bracket ranges ("gpu[001-004,9]", "r[1-2]n[1-4]": each group
 * expanded, groups of one name multiplied out, a range's numbers as wide
 * as its first one). Outside input (R2CC_PEERS, SLURM_JOB_NODELIST, a
 * file): every bound is checked before anything is allocated.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostlist.h"

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

bool r2cc_host_namechar(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') ||
	       (c >= 'A' && c <= 'Z') || c == '.' || c == '-' || c == '_';
}

bool r2cc_host_sep(char c)
{
	return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A decimal of @len digits (1..9: below 10^9, so sums stay in 64 bits) */
static int number(const char *s, size_t len, uint32_t *v)
{
	size_t i;

	if (!len || len > 9)
		return -EINVAL;
	*v = 0;
	for (i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return -EINVAL;
		*v = *v * 10 + (uint32_t)(s[i] - '0');
	}
	return 0;
}

/* One range of a group, "N" or "N-M" (@len bytes): its bounds and the
 * width its numbers are printed with (N's digits: "001-100" pads). */
static int range(const char *s, size_t len, uint32_t *lo, uint32_t *hi,
		 int *width)
{
	const char *dash = memchr(s, '-', len);
	size_t nlen = dash ? (size_t)(dash - s) : len;

	if (number(s, nlen, lo))
		return -EINVAL;
	*hi = *lo;
	if (dash && number(dash + 1, len - nlen - 1, hi))
		return -EINVAL;
	if (*hi < *lo)
		return -EINVAL;
	*width = (int)nlen;
	return 0;
}

static int digits(uint32_t v)
{
	int d = 1;

	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

/* How many names the group "[...]" (@s its inside, @len bytes) gives:
 * at most R2CC_HOSTS_MAX + 1, or -EINVAL; *@wide: its longest number. */
static int64_t group_count(const char *s, size_t len, size_t *wide)
{
	uint64_t n = 0;
	size_t at = 0;

	if (!len)
		return -EINVAL;
	while (at <= len) {
		size_t l = strcspn(s + at, ",]");
		uint32_t lo, hi;
		int w;

		if (at + l > len)
			l = len - at;
		if (range(s + at, l, &lo, &hi, &w))
			return -EINVAL;
		if ((size_t)w > *wide)
			*wide = (size_t)w;
		if ((size_t)digits(hi) > *wide)
			*wide = (size_t)digits(hi);
		n += (uint64_t)hi - lo + 1;
		if (n > R2CC_HOSTS_MAX)
			return R2CC_HOSTS_MAX + 1;
		at += l + 1;
	}
	return (int64_t)n;
}

/* The end of the group that starts at @s ('['), or NULL if unclosed or
 * nested. */
static const char *group_end(const char *s, const char *end)
{
	const char *p;

	for (p = s + 1; p < end; p++) {
		if (*p == ']')
			return p;
		if (*p == '[')
			return NULL;
	}
	return NULL;
}

/* How many names a token (no separator in it) gives, or -errno. */
static int64_t token_count(const char *s, const char *end)
{
	uint64_t n = 1;
	size_t longest = 0;
	const char *p;

	for (p = s; p < end; p++) {
		size_t wide = 0;
		const char *e;
		int64_t g;

		if (*p == ']')
			return -EINVAL;
		if (*p != '[') {
			if (!r2cc_host_namechar(*p))
				return -EINVAL;
			longest++;
			continue;
		}
		e = group_end(p, end);
		if (!e)
			return -EINVAL;
		g = group_count(p + 1, (size_t)(e - p - 1), &wide);
		if (g < 0)
			return g;
		longest += wide;
		n *= (uint64_t)g;
		if (n > R2CC_HOSTS_MAX)
			return R2CC_HOSTS_MAX + 1;
		p = e;
	}
	return longest > R2CC_HOST_LEN ? -ENAMETOOLONG : (int64_t)n;
}

/* The next token of [*@s, @end): its bounds, *@s past it; false at the
 * end. Separators inside a group belong to it. */
static bool next_token(const char **s, const char *end, const char **ts,
		       const char **te)
{
	const char *p = *s;
	bool in = false;

	while (p < end && r2cc_host_sep(*p))
		p++;
	if (p == end)
		return false;
	*ts = p;
	for (; p < end && (in || !r2cc_host_sep(*p)); p++)
		if (*p == '[')
			in = true;
		else if (*p == ']')
			in = false;
	*te = p;
	*s = p;
	return true;
}

struct expand {
	struct r2cc_hostlist *out;
	char name[R2CC_HOST_LEN + 1];
};

static int emit(struct expand *x, size_t len)
{
	char *c;

	if (!len)
		return -EINVAL;
	c = malloc(len + 1);
	if (!c)
		return -ENOMEM;
	memcpy(c, x->name, len);
	c[len] = '\0';
	x->out->v[x->out->n++] = c;
	return 0;
}

/* The names of [@s, @end) after the @len bytes of x->name already set. */
static int expand(struct expand *x, size_t len, const char *s, const char *end)
{
	const char *open = memchr(s, '[', (size_t)(end - s)), *close, *p;
	size_t lit = open ? (size_t)(open - s) : (size_t)(end - s);
	int ret = 0;

	if (len + lit > R2CC_HOST_LEN)
		return -ENAMETOOLONG;
	memcpy(x->name + len, s, lit);
	len += lit;
	if (!open)
		return emit(x, len);
	close = group_end(open, end);
	for (p = open + 1; !ret && p < close;) {
		size_t l = strcspn(p, ",]");
		uint32_t lo, hi, v;
		int w, k;

		if (p + l > close)
			l = (size_t)(close - p);
		range(p, l, &lo, &hi, &w); /* checked by token_count() */
		for (v = lo; !ret && v <= hi; v++) {
			char num[16];

			k = snprintf(num, sizeof(num), "%0*u", w, v);
			if (len + (size_t)k > R2CC_HOST_LEN)
				return -ENAMETOOLONG;
			memcpy(x->name + len, num, (size_t)k);
			ret = expand(x, len + (size_t)k, close + 1, end);
		}
		p += l + 1;
	}
	return ret;
}

void r2cc_hostlist_free(struct r2cc_hostlist *h)
{
	unsigned int i;

	for (i = 0; h->v && i < h->n; i++)
		free(h->v[i]);
	free(h->v);
	h->v = NULL;
	h->n = 0;
}

int r2cc_hostlist_parse(const char *s, size_t len, struct r2cc_hostlist *out)
{
	const char *end = s + len, *p = s, *ts, *te;
	struct expand *x;
	uint64_t n = 0;
	int ret = 0;

	while (next_token(&p, end, &ts, &te)) {
		int64_t c = token_count(ts, te);

		if (c < 0)
			return (int)c;
		n += (uint64_t)c;
		if (n > R2CC_HOSTS_MAX)
			return -E2BIG;
	}
	if (!n)
		return -ENOENT;
	if (!out)
		return (int)n;
	x = calloc(1, sizeof(*x));
	out->n = 0;
	out->v = calloc(n, sizeof(*out->v));
	if (!x || !out->v) {
		free(x);
		free(out->v);
		out->v = NULL;
		return -ENOMEM;
	}
	x->out = out;
	for (p = s; !ret && next_token(&p, end, &ts, &te);)
		ret = expand(x, 0, ts, te);
	free(x);
	if (ret) {
		r2cc_hostlist_free(out);
		return ret;
	}
	return (int)out->n;
}

char *r2cc_listfile_read(const char *path, size_t *len, int *err)
{
	char *buf = malloc(R2CC_HOSTFILE_MAX + 1), *c;
	ssize_t r = 0;
	int fd;

	*len = 0;
	*err = buf ? 0 : -ENOMEM;
	fd = buf ? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : -1;
	if (buf && fd < 0)
		*err = -errno;
	while (fd >= 0 && *len <= R2CC_HOSTFILE_MAX &&
	       (r = read(fd, buf + *len, R2CC_HOSTFILE_MAX + 1 - *len)) > 0)
		*len += (size_t)r;
	if (fd >= 0 && r < 0)
		*err = -errno;
	if (fd >= 0)
		close(fd);
	if (!*err && *len > R2CC_HOSTFILE_MAX)
		*err = -EFBIG;
	if (*err) {
		free(buf);
		return NULL;
	}
	/* '#' to the end of its line is a comment */
	for (c = buf; (c = memchr(c, '#', *len - (size_t)(c - buf)));)
		while (c < buf + *len && *c != '\n')
			*c++ = ' ';
	return buf;
}

int r2cc_hostlist_read(const char *path, struct r2cc_hostlist *out)
{
	size_t len;
	int ret;
	char *buf = r2cc_listfile_read(path, &len, &ret);

	if (!buf)
		return ret;
	ret = r2cc_hostlist_parse(buf, len, out);
	free(buf);
	return ret;
}
