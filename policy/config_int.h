/* SPDX-License-Identifier: MIT */
/*
 * config_int.h - the settings table (settings.c) and the value codec shared
 * by config.c, conf_parse.c and conf_doc.c. Include only from policy/.
 */
#ifndef R2CC_CONFIG_INT_H
#define R2CC_CONFIG_INT_H

#include "policy.h"

enum r2cc_conf_kind {
	R2CC_KIND_BOOL, /* words: even index = true */
	R2CC_KIND_ENUM, /* words: index = value */
	R2CC_KIND_UINT, /* decimal in lo..hi */
	R2CC_KIND_PATH, /* any non-empty path */
	R2CC_KIND_ABSPATH, /* absolute path */
	R2CC_KIND_IFNAME, /* netdev name, kernel dev_valid_name() rules */
	R2CC_KIND_RAILS, /* all | DEV[/PORT],... */
	R2CC_KIND_HOSTS, /* a host list (hostlist.h) or an absolute path */
	R2CC_KIND_GIDMAP, /* GID=HOST,... (gidmap.h) or an absolute path */
};

/* One row per setting; rows are indexed by enum r2cc_conf_key. */
struct r2cc_setting {
	const char *name; /* environment name; the file key is name + 5 */
	enum r2cc_conf_kind kind;
	bool env_only; /* a file that sets it gets a message */
	uint32_t lo, hi; /* R2CC_KIND_UINT bounds */
	const char *const *words; /* R2CC_KIND_BOOL, R2CC_KIND_ENUM */
	const char *accepted; /* the other kinds: what the message offers */
	const char *def; /* default as text, parsed like input; NULL = unset */
	size_t off, size; /* the field in struct r2cc_config */
	bool common; /* in the README's short table */
	const char *brief; /* one line */
	const char *doc; /* r2cc.conf(5)'s paragraph; *word* is bold */
};

#define R2CC_ENV_PREFIX "R2CC_"
#define R2CC_ENV_PREFIX_LEN 5

extern const struct r2cc_setting r2cc_settings[R2CC_CONF_NR];

/* Parse @text for @key and store it in @cfg; on error @cfg is untouched. */
int r2cc_conf_set(struct r2cc_config *cfg, int key, const char *text);

/* The accepted values of @key, for messages. */
void r2cc_conf_accepted(int key, char *buf, size_t size);

/*
 * Key of a setting named @name (@len bytes): an environment name when @env,
 * else a file key; -ENOENT if none. r2cc_conf_suggest() returns the key of
 * the closest setting if @name is plausibly a typo of it, else -ENOENT.
 */
int r2cc_conf_match(const char *name, size_t len, bool env);
int r2cc_conf_suggest(const char *name, size_t len, bool env);

/* "default", "file" or "env" */
const char *r2cc_conf_src_name(enum r2cc_conf_src src);

/* The file key of @key ("log_file"), lower case, into @buf. */
void r2cc_conf_file_key(int key, char *buf, size_t size);

/* Copy @len bytes of @src to @dst for quoting: \xNN escapes, cut at 128. */
void r2cc_conf_quote(char *dst, size_t size, const char *src, size_t len);

/* ASCII-only helpers, immune to the host application's locale. */
bool r2cc_conf_ieq(const char *s, size_t len, const char *word);
bool r2cc_conf_isspace(char c);

#endif /* R2CC_CONFIG_INT_H */
