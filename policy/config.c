/* SPDX-License-Identifier: MIT */
/*
 * config.c - the strict codec for the values of r2cc's settings (their
 * table is settings.c): parsing, defaults, formatting, lookup by name, and
 * the dump.
 */
#include <errno.h>
#include <net/if.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config_int.h"
#include "gidmap.h"
#include "hostlist.h"

/* Enum fields are stored by memcpy() from an unsigned int. */
_Static_assert(sizeof(enum r2cc_log_level) == sizeof(unsigned int), "enum");
_Static_assert(sizeof(enum r2cc_backup) == sizeof(unsigned int), "enum");
_Static_assert(R2CC_LOG_DEBUG == 4 && R2CC_BACKUP_LAZY == 1, "word order");
_Static_assert(R2CC_IFNAMSIZ == IFNAMSIZ, "IFNAMSIZ");

union value {
	bool b;
	unsigned int e;
	uint32_t u;
	char s[PATH_MAX];
	struct r2cc_rails rails;
};

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

bool r2cc_conf_ieq(const char *s, size_t len, const char *word)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (!word[i] || lower(s[i]) != lower(word[i]))
			return false;
	return !word[len];
}

bool r2cc_conf_isspace(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Decimal only: no sign, no blanks, no junk; overflow-checked. */
static int parse_uint(const char *s, size_t len, uint32_t lo, uint32_t hi,
		      uint32_t *out)
{
	uint64_t n = 0;
	size_t i;

	if (!len)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return -EINVAL;
		n = n * 10 + (uint64_t)(s[i] - '0');
		if (n > UINT32_MAX)
			return -ERANGE;
	}
	if (n < lo || n > hi)
		return -ERANGE;
	*out = (uint32_t)n;
	return 0;
}

static int parse_word(const char *const *words, const char *s,
		      unsigned int *out)
{
	unsigned int i;

	for (i = 0; words[i]; i++) {
		if (r2cc_conf_ieq(s, strlen(s), words[i])) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

/* The kernel's dev_valid_name() */
static int parse_ifname(const char *s, char *out)
{
	size_t len = strlen(s), i;

	if (!len || len >= IFNAMSIZ)
		return -EINVAL;
	if (!strcmp(s, ".") || !strcmp(s, ".."))
		return -EINVAL;
	for (i = 0; i < len; i++)
		if (s[i] == '/' || s[i] == ':' || r2cc_conf_isspace(s[i]))
			return -EINVAL;
	memcpy(out, s, len + 1);
	return 0;
}

static bool is_devchar(char c)
{
	return is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'z') ||
	       c == '_' || c == '.' || c == '-';
}

/* One DEV[/PORT] of @len bytes */
static int parse_rail(const char *s, size_t len, struct r2cc_rail_spec *rail)
{
	const char *slash = memchr(s, '/', len);
	size_t dlen = slash ? (size_t)(slash - s) : len, i;
	uint32_t port = 0;

	if (!dlen || dlen >= sizeof(rail->dev))
		return -EINVAL;
	for (i = 0; i < dlen; i++)
		if (!is_devchar(s[i]))
			return -EINVAL;
	if ((dlen <= 2 && !memcmp(s, "..", dlen)) ||
	    r2cc_conf_ieq(s, dlen, "all"))
		return -EINVAL;
	if (slash && parse_uint(slash + 1, len - dlen - 1, 1, 255, &port))
		return -EINVAL;
	memcpy(rail->dev, s, dlen);
	rail->dev[dlen] = '\0';
	rail->port = (uint8_t)port;
	return 0;
}

/* "mlx5_0" covers every port, so it also overlaps "mlx5_0/1". */
static bool rails_overlap(const struct r2cc_rails *r,
			  const struct r2cc_rail_spec *rail)
{
	unsigned int i;

	for (i = 0; i < r->n; i++)
		if (!strcmp(r->v[i].dev, rail->dev) &&
		    (!r->v[i].port || !rail->port ||
		     r->v[i].port == rail->port))
			return true;
	return false;
}

static int parse_rails(const char *s, struct r2cc_rails *r)
{
	struct r2cc_rail_spec rail;
	size_t len;

	if (r2cc_conf_ieq(s, strlen(s), "all"))
		return 0;
	for (;;) {
		len = strcspn(s, ",");
		if (r->n == R2CC_RAILS_MAX)
			return -E2BIG;
		if (parse_rail(s, len, &rail))
			return -EINVAL;
		if (rails_overlap(r, &rail))
			return -EEXIST;
		r->v[r->n++] = rail;
		if (!s[len])
			return 0;
		s += len + 1;
	}
}

static int parse_value(const struct r2cc_setting *st, const char *s,
		       union value *v)
{
	size_t len = strlen(s);
	int ret;

	switch (st->kind) {
	case R2CC_KIND_BOOL:
		ret = parse_word(st->words, s, &v->e);
		v->b = !(v->e % 2);
		return ret;
	case R2CC_KIND_ENUM:
		return parse_word(st->words, s, &v->e);
	case R2CC_KIND_UINT:
		return parse_uint(s, len, st->lo, st->hi, &v->u);
	case R2CC_KIND_ABSPATH:
		if (s[0] != '/')
			return -EINVAL;
		/* fall through */
	case R2CC_KIND_PATH:
		if (!len || len >= st->size)
			return len ? -ENAMETOOLONG : -EINVAL;
		memcpy(v->s, s, len + 1);
		return 0;
	case R2CC_KIND_IFNAME:
		return parse_ifname(s, v->s);
	case R2CC_KIND_RAILS:
		return parse_rails(s, &v->rails);
	case R2CC_KIND_HOSTS:
	case R2CC_KIND_GIDMAP:
		if (!len || len >= st->size)
			return len ? -ENAMETOOLONG : -EINVAL;
		ret = s[0] == '/' ? 0 :
		      st->kind == R2CC_KIND_HOSTS ?
				    r2cc_hostlist_parse(s, len, NULL) :
				    r2cc_gidmap_parse(s, len, NULL);
		if (ret < 0)
			return ret;
		memcpy(v->s, s, len + 1);
		return 0;
	}
	return -EINVAL;
}

int r2cc_conf_set(struct r2cc_config *cfg, int key, const char *text)
{
	const struct r2cc_setting *st = &r2cc_settings[key];
	union value v;
	int ret;

	memset(&v, 0, sizeof(v));
	ret = parse_value(st, text, &v);
	if (ret)
		return ret;
	memcpy((char *)cfg + st->off, &v, st->size);
	return 0;
}

void r2cc_config_init(struct r2cc_config *cfg)
{
	int k;

	memset(cfg, 0, sizeof(*cfg));
	for (k = 0; k < R2CC_CONF_NR; k++)
		if (r2cc_settings[k].def)
			r2cc_conf_set(cfg, k, r2cc_settings[k].def);
}

/* snprintf() that reports truncation as -ENOSPC */
static int put(char *buf, size_t size, size_t *used, const char *s,
	       unsigned int n)
{
	int len;

	if (*used >= size)
		return -ENOSPC;
	len = n ? snprintf(buf + *used, size - *used, "%s/%u", s, n) :
		  snprintf(buf + *used, size - *used, "%s", s);
	if (len < 0 || (size_t)len >= size - *used)
		return -ENOSPC;
	*used += (size_t)len;
	return 0;
}

static int format_rails(const struct r2cc_rails *r, char *buf, size_t size)
{
	size_t used = 0;
	unsigned int i;
	int ret = 0;

	if (!r->n || r->n > R2CC_RAILS_MAX)
		return put(buf, size, &used, "all", 0);
	for (i = 0; i < r->n && !ret; i++) {
		if (i)
			ret = put(buf, size, &used, ",", 0);
		if (!ret)
			ret = put(buf, size, &used, r->v[i].dev, r->v[i].port);
	}
	return ret;
}

int r2cc_config_format(const struct r2cc_config *cfg, int key, char *buf,
		       size_t size)
{
	const struct r2cc_setting *st;
	const char *field;
	unsigned int e = 0;
	uint32_t u = 0;
	size_t used = 0;
	char num[16];

	if (key < 0 || key >= R2CC_CONF_NR || !size)
		return -EINVAL;
	st = &r2cc_settings[key];
	field = (const char *)cfg + st->off;
	buf[0] = '\0';
	switch (st->kind) {
	case R2CC_KIND_BOOL:
		return put(buf, size, &used, *(const bool *)field ? "1" : "0",
			   0);
	case R2CC_KIND_ENUM:
		memcpy(&e, field, st->size);
		for (u = 0; st->words[u] && u < e; u++)
			;
		return put(buf, size, &used, st->words[u] ? st->words[u] : "?",
			   0);
	case R2CC_KIND_UINT:
		memcpy(&u, field, sizeof(u));
		snprintf(num, sizeof(num), "%u", u);
		return put(buf, size, &used, num, 0);
	case R2CC_KIND_RAILS:
		return format_rails((const struct r2cc_rails *)field, buf,
				    size);
	default:
		return put(buf, size, &used, field, 0);
	}
}

void r2cc_conf_accepted(int key, char *buf, size_t size)
{
	const struct r2cc_setting *st = &r2cc_settings[key];
	size_t used = 0;
	unsigned int i;

	if (st->kind == R2CC_KIND_UINT) {
		snprintf(buf, size, "a decimal integer %u..%u", st->lo, st->hi);
		return;
	}
	if (!st->words) {
		snprintf(buf, size, "%s", st->accepted);
		return;
	}
	buf[0] = '\0';
	for (i = 0; st->words[i]; i++)
		if ((i && put(buf, size, &used, ", ", 0)) ||
		    put(buf, size, &used, st->words[i], 0))
			return;
}

const char *r2cc_config_key_name(int key)
{
	return key >= 0 && key < R2CC_CONF_NR ? r2cc_settings[key].name : NULL;
}

const char *r2cc_conf_src_name(enum r2cc_conf_src src)
{
	switch (src) {
	case R2CC_SRC_DEFAULT:
		return "default";
	case R2CC_SRC_FILE:
		return "file";
	case R2CC_SRC_ENV:
		return "env";
	}
	return "?";
}

void r2cc_conf_file_key(int key, char *buf, size_t size)
{
	const char *name = r2cc_settings[key].name + R2CC_ENV_PREFIX_LEN;
	size_t i;

	for (i = 0; name[i] && i + 1 < size; i++)
		buf[i] = lower(name[i]);
	buf[i] = '\0';
}

/* File keys are case-insensitive and may carry the R2CC_ prefix. */
int r2cc_conf_match(const char *name, size_t len, bool env)
{
	int k;

	if (env) {
		for (k = 0; k < R2CC_CONF_NR; k++)
			if (strlen(r2cc_settings[k].name) == len &&
			    !memcmp(name, r2cc_settings[k].name, len))
				return k;
		return -ENOENT;
	}
	if (len > R2CC_ENV_PREFIX_LEN &&
	    r2cc_conf_ieq(name, R2CC_ENV_PREFIX_LEN, R2CC_ENV_PREFIX)) {
		name += R2CC_ENV_PREFIX_LEN;
		len -= R2CC_ENV_PREFIX_LEN;
	}
	for (k = 0; k < R2CC_CONF_NR; k++)
		if (r2cc_conf_ieq(name, len,
				  r2cc_settings[k].name + R2CC_ENV_PREFIX_LEN))
			return k;
	return -ENOENT;
}

int r2cc_config_lookup(const char *name)
{
	return r2cc_conf_match(name, strlen(name), false);
}

#define TYPO_MAX 32

/* Optimal string alignment distance, case-insensitive; lengths <= TYPO_MAX */
static unsigned int distance(const char *a, size_t la, const char *b)
{
	unsigned int d[TYPO_MAX + 1][TYPO_MAX + 1], v;
	size_t lb = strlen(b), i, j;

	for (i = 0; i <= la; i++)
		d[i][0] = (unsigned int)i;
	for (j = 0; j <= lb; j++)
		d[0][j] = (unsigned int)j;
	for (i = 1; i <= la; i++) {
		for (j = 1; j <= lb; j++) {
			v = d[i - 1][j - 1] +
			    (lower(a[i - 1]) != lower(b[j - 1]));
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 &&
			    lower(a[i - 1]) == lower(b[j - 2]) &&
			    lower(a[i - 2]) == lower(b[j - 1]) &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[la][lb];
}

int r2cc_conf_suggest(const char *name, size_t len, bool env)
{
	unsigned int best = ~0U, dist;
	int k, pick = -ENOENT;

	if (len >= R2CC_ENV_PREFIX_LEN &&
	    r2cc_conf_ieq(name, R2CC_ENV_PREFIX_LEN, R2CC_ENV_PREFIX)) {
		name += R2CC_ENV_PREFIX_LEN;
		len -= R2CC_ENV_PREFIX_LEN;
	}
	if (!len || len > TYPO_MAX)
		return -ENOENT;
	for (k = 0; k < R2CC_CONF_NR; k++) {
		if (!env && r2cc_settings[k].env_only)
			continue;
		dist = distance(name, len,
				r2cc_settings[k].name + R2CC_ENV_PREFIX_LEN);
		if (dist < best) {
			best = dist;
			pick = k;
		}
	}
	/* One edit for short names, two for longer ones */
	return best <= (len > 4 ? 2U : 1U) ? pick : -ENOENT;
}

#define QUOTE_MAX 128

void r2cc_conf_quote(char *dst, size_t size, const char *src, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0;

	for (i = 0; i < len && o + 8 < size; i++) {
		unsigned char c = (unsigned char)src[i];

		if (i == QUOTE_MAX) {
			memcpy(dst + o, "...", 3);
			o += 3;
			break;
		}
		if (c < 0x20 || c >= 0x7f) {
			dst[o++] = '\\';
			dst[o++] = 'x';
			dst[o++] = hex[c >> 4];
			dst[o++] = hex[c & 15];
		} else {
			dst[o++] = (char)c;
		}
	}
	dst[o] = '\0';
}

/* Values that would not read back unquoted (blanks, '#') get quotes. */
static bool needs_quotes(const char *s)
{
	return strpbrk(s, " \t\v\f\r\n#") != NULL;
}

int r2cc_config_dump(const struct r2cc_config *cfg, FILE *f)
{
	char key[32], val[PATH_MAX], line[PATH_MAX + 64], where[32];
	const char *quote;
	bool commented;
	int k;

	fprintf(f, "# r2cc %s effective configuration; config file: %s\n",
		R2CC_VERSION, cfg->config_file[0] ? cfg->config_file : "none");
	for (k = 0; k < R2CC_CONF_NR; k++) {
		r2cc_conf_file_key(k, key, sizeof(key));
		if (r2cc_config_format(cfg, k, val, sizeof(val)))
			snprintf(val, sizeof(val), "?");
		commented = !val[0] || r2cc_settings[k].env_only;
		quote = needs_quotes(val) ? "\"" : "";
		snprintf(line, sizeof(line), "%s%s = %s%s%s",
			 commented ? "#" : "", key, quote, val, quote);
		if (cfg->src[k] == R2CC_SRC_FILE)
			snprintf(where, sizeof(where), "file:%u",
				 cfg->src_line[k]);
		else
			snprintf(where, sizeof(where), "%s%s",
				 r2cc_conf_src_name(cfg->src[k]),
				 val[0] ? "" : " (unset)");
		fprintf(f, "%-40s # %s\n", line, where);
	}
	fflush(f);
	return ferror(f) ? -EIO : 0;
}
