/* SPDX-License-Identifier: MIT */
/*
 * conf_parse.c - layering of the settings: built-in defaults, then the
 * streaming r2cc.conf parser (init/line/finish), then the environment.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config_int.h"

#define CONF_FILE_MAX (1 << 20) /* bytes of r2cc.conf read at most */
#define MSG_MAX 1024
#define QUOTE_SIZE (4 * 128 + 8) /* r2cc_conf_quote() output */

/* Variables that start with R2CC_ but are read by r2cc-ctl, not here */
static const char *const foreign_env[] = { "R2CC_COLOR", NULL };

/*
 * Each problem is one r2cc_log() warning, and one call of the hook. The
 * log prefix names the function that found the problem.
 */
#define problem(p, fmt, ...) report(p, __func__, __LINE__, fmt, ##__VA_ARGS__)

static int __attribute__((format(printf, 4, 5)))
report(struct r2cc_conf_parser *p, const char *func, int line, const char *fmt,
       ...)
{
	char msg[MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r2cc_log(R2CC_LOG_WARN, R2CC_LOG_MOD, func, line, "%s", msg);
	if (p->report)
		p->report(p->report_arg, msg);
	p->problems++;
	return -EINVAL;
}

/*
 * "R2CC_LOG=`loud' is invalid (accepted: ...); using `err'". The setting
 * keeps its current value, i.e. that of the layer below.
 */
static int bad_value(struct r2cc_conf_parser *p, int k, const char *v, bool env)
{
	char acc[256], qv[QUOTE_SIZE], cur[PATH_MAX], qcur[QUOTE_SIZE];
	char key[32];

	r2cc_conf_accepted(k, acc, sizeof(acc));
	r2cc_conf_quote(qv, sizeof(qv), v, strlen(v));
	if (r2cc_config_format(p->cfg, k, cur, sizeof(cur)))
		cur[0] = '\0';
	r2cc_conf_quote(qcur, sizeof(qcur), cur, strlen(cur));
	if (env)
		return problem(p, "%s=`%s' is invalid (accepted: %s); %s%s%s",
			       r2cc_settings[k].name, qv, acc,
			       cur[0] ? "using `" : "leaving it unset", qcur,
			       cur[0] ? "'" : "");
	r2cc_conf_file_key(k, key, sizeof(key));
	return problem(p, "%s:%u: %s=`%s' is invalid (accepted: %s); %s%s%s",
		       p->origin, p->line, key, qv, acc,
		       cur[0] ? "using `" : "leaving it unset", qcur,
		       cur[0] ? "'" : "");
}

static int apply(struct r2cc_conf_parser *p, int k, const char *v,
		 enum r2cc_conf_src src)
{
	if (r2cc_conf_set(p->cfg, k, v))
		return bad_value(p, k, v, src == R2CC_SRC_ENV);
	p->cfg->src[k] = (uint8_t)src;
	p->cfg->src_line[k] = src == R2CC_SRC_FILE ? p->line : 0;
	return 0;
}

void r2cc_conf_parse_init(struct r2cc_conf_parser *p, struct r2cc_config *cfg,
			  const char *origin)
{
	memset(p, 0, sizeof(*p));
	p->cfg = cfg;
	p->origin = origin ? origin : "r2cc.conf";
}

int r2cc_conf_parse_finish(struct r2cc_conf_parser *p)
{
	return (int)p->problems;
}

static char *skip_space(char *s)
{
	while (r2cc_conf_isspace(*s))
		s++;
	return s;
}

static char *rtrim(char *s)
{
	size_t len = strlen(s);

	while (len && r2cc_conf_isspace(s[len - 1]))
		s[--len] = '\0';
	return s;
}

/*
 * The text after '=': optional double quotes (no escapes inside), then an
 * optional comment, which starts at a '#' that follows white space. On a
 * syntax error *out is the raw text, for the message.
 */
static int split_value(char *raw, char **out)
{
	char *s = skip_space(raw), *end, *rest = NULL;

	if (*s == '"') {
		end = strchr(s + 1, '"');
		if (end)
			rest = skip_space(end + 1);
		if (!end || (*rest && *rest != '#')) {
			*out = rtrim(s);
			return -EINVAL;
		}
		*end = '\0';
		*out = s + 1;
		return 0;
	}
	for (end = raw; *end; end++) {
		if (*end == '#' && end > raw && r2cc_conf_isspace(end[-1])) {
			*end = '\0';
			break;
		}
	}
	*out = rtrim(s);
	return 0;
}

static int unknown_key(struct r2cc_conf_parser *p, const char *key)
{
	int hint = r2cc_conf_suggest(key, strlen(key), false);
	char qk[QUOTE_SIZE], name[32] = "";

	r2cc_conf_quote(qk, sizeof(qk), key, strlen(key));
	if (hint >= 0)
		r2cc_conf_file_key(hint, name, sizeof(name));
	return problem(p, "%s:%u: unknown key `%s' ignored%s%s%s", p->origin,
		       p->line, qk, hint >= 0 ? " (did you mean `" : "", name,
		       hint >= 0 ? "'?)" : "");
}

/* A key = value line, in @buf, which it modifies */
static int parse_setting(struct r2cc_conf_parser *p, char *key, char *eq)
{
	char name[32], *val;
	int k, ret;

	*eq = '\0';
	rtrim(key);
	k = r2cc_conf_match(key, strlen(key), false);
	if (k < 0)
		return unknown_key(p, key);
	r2cc_conf_file_key(k, name, sizeof(name));
	if (r2cc_settings[k].env_only)
		return problem(p,
			       "%s:%u: `%s' can only be set in the environment "
			       "(%s); ignored",
			       p->origin, p->line, name, r2cc_settings[k].name);
	if (split_value(eq + 1, &val))
		return bad_value(p, k, val, false);
	ret = apply(p, k, val, R2CC_SRC_FILE);
	if (ret)
		return ret;
	if (p->seen[k])
		problem(p,
			"%s:%u: `%s' was already set on line %u; this line wins",
			p->origin, p->line, name, p->seen[k]);
	p->seen[k] = p->line;
	return 0;
}

int r2cc_conf_parse_line(struct r2cc_conf_parser *p, const char *line,
			 size_t len)
{
	char buf[R2CC_CONF_LINE_MAX + 1], ql[QUOTE_SIZE];
	char *key, *eq;

	p->line++;
	if (len && line[len - 1] == '\n')
		len--;
	if (len > R2CC_CONF_LINE_MAX)
		return problem(p, "%s:%u: line longer than %d bytes; skipped",
			       p->origin, p->line, R2CC_CONF_LINE_MAX);
	if (memchr(line, '\0', len))
		return problem(p, "%s:%u: line contains a NUL byte; skipped",
			       p->origin, p->line);
	memcpy(buf, line, len);
	buf[len] = '\0';
	key = skip_space(buf);
	if (!*key || *key == '#')
		return 0;
	eq = strchr(key, '=');
	if (!eq || eq == key) {
		r2cc_conf_quote(ql, sizeof(ql), key, strlen(rtrim(key)));
		return problem(
			p, "%s:%u: expected `key = value', not `%s'; skipped",
			p->origin, p->line, ql);
	}
	return parse_setting(p, key, eq);
}

/* Streams the file through the parser with a fixed buffer. */
static void read_file(struct r2cc_conf_parser *p, const char *path)
{
	char buf[R2CC_CONF_LINE_MAX + 1], err[128], qp[QUOTE_SIZE];
	size_t n = 0, total = 0;
	FILE *f;
	int c;

	r2cc_conf_quote(qp, sizeof(qp), path, strlen(path));
	f = fopen(path, "re");
	if (!f) {
		problem(p,
			"cannot read config file `%s' (R2CC_CONFIG): %s; "
			"ignoring it",
			qp, strerror_r(errno, err, sizeof(err)));
		return;
	}
	while ((c = getc(f)) != EOF) {
		if (++total > CONF_FILE_MAX) {
			problem(p,
				"%s: longer than %d bytes; the rest is ignored",
				qp, CONF_FILE_MAX);
			n = 0;
			break;
		}
		if (c == '\n') {
			r2cc_conf_parse_line(p, buf, n);
			n = 0;
		} else if (n < sizeof(buf)) {
			/* n stops at LINE_MAX + 1: too long, and reported so */
			buf[n++] = (char)c;
		}
	}
	if (ferror(f))
		problem(p, "%s: read error: %s; the rest is ignored", qp,
			strerror_r(errno, err, sizeof(err)));
	else if (n)
		r2cc_conf_parse_line(p, buf, n);
	fclose(f);
}

static void unknown_env(struct r2cc_conf_parser *p, const char *name,
			size_t len)
{
	int hint = r2cc_conf_suggest(name, len, true);
	char qn[QUOTE_SIZE];
	int i;

	for (i = 0; foreign_env[i]; i++)
		if (strlen(foreign_env[i]) == len &&
		    !memcmp(name, foreign_env[i], len))
			return;
	r2cc_conf_quote(qn, sizeof(qn), name, len);
	problem(p, "unknown variable %s ignored%s%s%s", qn,
		hint >= 0 ? " (did you mean " : "",
		hint >= 0 ? r2cc_settings[hint].name : "",
		hint >= 0 ? "?)" : "");
}

/* getenv() semantics: the first of duplicate entries counts. */
static void load_env(struct r2cc_conf_parser *p, char **envp)
{
	uint32_t seen = 0;
	const char *e, *eq;
	int k;

	_Static_assert(R2CC_CONF_NR <= 32, "seen bitmap");
	for (; envp && *envp; envp++) {
		e = *envp;
		eq = strchr(e, '=');
		if (strncmp(e, R2CC_ENV_PREFIX, R2CC_ENV_PREFIX_LEN) || !eq)
			continue;
		k = r2cc_conf_match(e, (size_t)(eq - e), true);
		if (k < 0) {
			unknown_env(p, e, (size_t)(eq - e));
			continue;
		}
		if (seen & (1U << k)) {
			problem(p, "%s is set more than once; using the first",
				r2cc_settings[k].name);
			continue;
		}
		seen |= 1U << k;
		/* R2CC_CONFIG was applied before the file was read */
		if (k != R2CC_CONF_CONFIG)
			apply(p, k, eq + 1, R2CC_SRC_ENV);
	}
}

static const char *find_env(char **envp, const char *name)
{
	size_t len = strlen(name);

	for (; envp && *envp; envp++)
		if (!strncmp(*envp, name, len) && (*envp)[len] == '=')
			return *envp + len + 1;
	return NULL;
}

int r2cc_config_load_report(struct r2cc_config *cfg, char **envp,
			    r2cc_conf_report_fn fn, void *arg)
{
	struct r2cc_conf_parser p;
	const char *path;

	r2cc_config_init(cfg);
	r2cc_conf_parse_init(&p, cfg, NULL);
	p.report = fn;
	p.report_arg = arg;
	path = find_env(envp, r2cc_settings[R2CC_CONF_CONFIG].name);
	if (path && !apply(&p, R2CC_CONF_CONFIG, path, R2CC_SRC_ENV)) {
		p.origin = cfg->config_file;
		read_file(&p, cfg->config_file);
	}
	load_env(&p, envp);
	return r2cc_conf_parse_finish(&p);
}

int r2cc_config_load(struct r2cc_config *cfg, char **envp)
{
	return r2cc_config_load_report(cfg, envp, NULL, NULL);
}
