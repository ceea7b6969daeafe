/* SPDX-License-Identifier: MIT */
/*
 * conf_doc.c - the settings table as documentation: plain text for
 * operators, the OPTIONS of r2cc.conf(5) in roff, the README's short table
 * in Markdown, and the bare names for the docs' lint.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config_int.h"

/* The values of @st in a few words, for a table cell. */
static void values_short(const struct r2cc_setting *st, char *buf, size_t size)
{
	switch (st->kind) {
	case R2CC_KIND_BOOL:
		snprintf(buf, size, "boolean");
		return;
	case R2CC_KIND_UINT:
		snprintf(buf, size, "%u..%u", st->lo, st->hi);
		return;
	case R2CC_KIND_PATH:
		snprintf(buf, size, "path");
		return;
	case R2CC_KIND_ABSPATH:
		snprintf(buf, size, "absolute path");
		return;
	case R2CC_KIND_IFNAME:
		snprintf(buf, size, "interface name");
		return;
	case R2CC_KIND_RAILS:
		snprintf(buf, size, "`all` or `DEV[/PORT],...`");
		return;
	case R2CC_KIND_HOSTS:
		snprintf(buf, size, "host list or absolute path");
		return;
	case R2CC_KIND_GIDMAP:
		snprintf(buf, size, "`GID=HOST,...` or absolute path");
		return;
	case R2CC_KIND_ENUM:
		break;
	}
	buf[0] = '\0';
	for (unsigned int i = 0; st->words[i]; i++) {
		size_t used = strlen(buf);

		snprintf(buf + used, size - used, "%s`%s`", i ? ", " : "",
			 st->words[i]);
	}
}

/* The length of the word @s starts (up to a space or the end) */
static size_t word_len(const char *s)
{
	const char *e = strchr(s, ' ');

	return e ? (size_t)(e - s) : strlen(s);
}

/*
 * @s with *bold* as @on ... @off; with @roff escaped for roff, each
 * sentence on a line of its own and no line past 72 columns (a longer
 * word alone on its line).
 */
static void put_marked(FILE *f, const char *s, const char *on, const char *off,
		       bool roff)
{
	bool bold = false, bol = true;
	char prev = '\0';
	size_t col = 0;

	for (; *s; prev = *s++) {
		if (*s == '*') {
			fputs(bold ? off : on, f);
			col += strlen(bold ? off : on);
			bold = !bold;
			continue;
		}
		if (roff && bol && (*s == '.' || *s == '\''))
			fputs("\\&", f);
		bol = false;
		if (roff && *s == ' ' &&
		    ((prev == '.' &&
		      ((s[1] >= 'A' && s[1] <= 'Z') || s[1] == '*')) ||
		     col + 1 + word_len(s + 1) > 72)) {
			fputc('\n', f);
			bol = true;
			col = 0;
			continue;
		}
		if (roff && *s == '\\') {
			fputs("\\e", f);
			col += 2;
		} else {
			fputc(*s, f);
			col++;
		}
	}
}

static void list_man(FILE *f, int k)
{
	const struct r2cc_setting *st = &r2cc_settings[k];
	char key[32], acc[256];

	r2cc_conf_file_key(k, key, sizeof(key));
	r2cc_conf_accepted(k, acc, sizeof(acc));
	fputs(".TP\n", f);
	if (st->env_only)
		fprintf(f, ".B %s\n", st->name);
	else
		fprintf(f, ".BR %s \" (\" %s )\n", key, st->name);
	put_marked(f, st->doc, "\\fB", "\\fR", true);
	fputs("\nValues: ", f);
	put_marked(f, acc, "", "", true);
	fprintf(f, ".\nDefault: %s.\n", st->def ? st->def : "unset");
}

static void list_markdown_head(FILE *f)
{
	fputs("| setting | values | default | what it does |\n"
	      "| --- | --- | --- | --- |\n",
	      f);
}

static void list_markdown(FILE *f, int k)
{
	const struct r2cc_setting *st = &r2cc_settings[k];
	char vals[256];

	if (!st->common)
		return;
	values_short(st, vals, sizeof(vals));
	fprintf(f, "| `%s` | %s | %s%s%s | ", st->name, vals,
		st->def ? "`" : "", st->def ? st->def : "—",
		st->def ? "`" : "");
	put_marked(f, st->brief, "`", "`", false);
	fputs(" |\n", f);
}

/* @s, without its marks, wrapped at 72 columns under a 4-space indent */
static void put_wrapped(FILE *f, const char *s)
{
	size_t col = 4, w;

	fputs("    ", f);
	while (*s) {
		while (*s == ' ')
			s++;
		w = word_len(s);
		if (col > 4 && col + 1 + w > 72) {
			fputs("\n    ", f);
			col = 4;
		} else if (col > 4) {
			fputc(' ', f);
			col++;
		}
		for (size_t i = 0; i < w; i++)
			if (s[i] != '*')
				fputc(s[i], f);
		col += w;
		s += w;
	}
	fputc('\n', f);
}

static void list_text(FILE *f, int k)
{
	const struct r2cc_setting *st = &r2cc_settings[k];
	char key[32], acc[256], line[320];

	r2cc_conf_file_key(k, key, sizeof(key));
	r2cc_conf_accepted(k, acc, sizeof(acc));
	if (st->env_only)
		fprintf(f, "%s (environment only)\n", st->name);
	else
		fprintf(f, "%s (file: %s)\n", st->name, key);
	snprintf(line, sizeof(line), "default: %s; values: %s",
		 st->def ? st->def : "unset", acc);
	put_wrapped(f, line);
	put_wrapped(f, st->doc);
}

int r2cc_config_list(FILE *f, enum r2cc_list_fmt fmt)
{
	int k;

	if (fmt == R2CC_LIST_MARKDOWN)
		list_markdown_head(f);
	for (k = 0; k < R2CC_CONF_NR; k++) {
		switch (fmt) {
		case R2CC_LIST_TEXT:
			list_text(f, k);
			break;
		case R2CC_LIST_MAN:
			list_man(f, k);
			break;
		case R2CC_LIST_MARKDOWN:
			list_markdown(f, k);
			break;
		case R2CC_LIST_NAMES:
			fprintf(f, "%s\n", r2cc_settings[k].name);
			break;
		default:
			return -EINVAL;
		}
	}
	fflush(f);
	return ferror(f) ? -EIO : 0;
}
