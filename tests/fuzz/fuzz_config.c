/* SPDX-License-Identifier: MIT */
/*
 * fuzz_config.c - libFuzzer target for the settings' parsers: the input
 * up to the first "\0\0" is an r2cc.conf, line by line; the rest is an
 * environment, NUL-separated entries (R2CC_CONFIG dropped: it would read
 * a file the input names). Whatever they say, the settings that come
 * out are well formed (every string terminated in its field, every count
 * and enum in range) and every message is one printable line.
 */
#include <stdlib.h>
#include <string.h>

#include "policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void sink(void *arg, const char *msg)
{
	/* every message is one printable line */
	for (; *msg; msg++)
		if (*msg == '\n' || (unsigned char)*msg < 0x20)
			__builtin_trap();
	(void)arg;
}

static void terminated(const char *s, size_t size)
{
	if (!memchr(s, '\0', size))
		__builtin_trap();
}

static void check(const struct r2cc_config *c)
{
	unsigned int i;

	terminated(c->log_file, sizeof(c->log_file));
	terminated(c->ctrl_if, sizeof(c->ctrl_if));
	terminated(c->secret_file, sizeof(c->secret_file));
	terminated(c->stats_file, sizeof(c->stats_file));
	terminated(c->config_file, sizeof(c->config_file));
	if (c->rails.n > R2CC_RAILS_MAX || c->log_level > R2CC_LOG_DEBUG ||
	    c->backup > R2CC_BACKUP_LAZY)
		__builtin_trap();
	for (i = 0; i < c->rails.n; i++)
		terminated(c->rails.v[i].dev, sizeof(c->rails.v[i].dev));
	for (i = 0; i < R2CC_CONF_NR; i++)
		if (c->src[i] > R2CC_SRC_ENV)
			__builtin_trap();
}

static void parse_file(const char *s, size_t len)
{
	struct r2cc_conf_parser p;
	struct r2cc_config cfg;
	const char *nl;

	r2cc_config_init(&cfg);
	r2cc_conf_parse_init(&p, &cfg, "fuzz.conf");
	p.report = sink;
	while (len) {
		nl = memchr(s, '\n', len);
		size_t n = nl ? (size_t)(nl - s) + 1 : len;

		r2cc_conf_parse_line(&p, s, n);
		s += n;
		len -= n;
	}
	r2cc_conf_parse_finish(&p);
	check(&cfg);
}

static void parse_env(const char *s, size_t len)
{
	char *copy = malloc(len + 1), **envp, *e;
	struct r2cc_config cfg;
	size_t i, n = 0;

	if (!copy)
		return;
	memcpy(copy, s, len);
	copy[len] = '\0';
	for (i = 0; i <= len; i++)
		n += copy[i] == '\0';
	envp = calloc(n + 1, sizeof(*envp));
	if (!envp) {
		free(copy);
		return;
	}
	for (e = copy, n = 0; e <= copy + len; e += strlen(e) + 1)
		if (*e && strncmp(e, "R2CC_CONFIG=", 12))
			envp[n++] = e;
	r2cc_config_load_report(&cfg, envp, sink, NULL);
	check(&cfg);
	free(envp);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data, *split = NULL;
	size_t i;

	r2cc_log_set_level(R2CC_LOG_OFF); /* the messages go to sink() */
	for (i = 0; i + 1 < size && !split; i++)
		if (!s[i] && !s[i + 1])
			split = s + i;
	parse_file(s, split ? (size_t)(split - s) : size);
	if (split)
		parse_env(split + 2, size - (size_t)(split + 2 - s));
	return 0;
}
