/* SPDX-License-Identifier: MIT */
/*
 * print.c - one printer for text and JSON (the iproute2 PRINT_ANY idea):
 * each field is given once with its JSON key and its text format.
 */
#include <stdio.h>

#include "ctl.h"

/* The text formats come from the callers' tables of string literals. */
#pragma GCC diagnostic ignored "-Wformat-nonliteral"

static int depth;
static bool first[8] = { true };

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void sep(void)
{
	if (!first[depth])
		fputs(ctl.pretty ? ",\n" : ",", stdout);
	first[depth] = false;
	if (ctl.pretty)
		printf("%*s", depth * 2, "");
}

/* @key: NULL inside a list, else the member's name inside an object */
static void open_(const char *key, char c)
{
	if (!ctl.json)
		return;
	sep();
	if (key) {
		json_str(key);
		fputs(ctl.pretty ? ": " : ":", stdout);
	}
	putchar(c);
	if (ctl.pretty)
		putchar('\n');
	if (depth < 7)
		depth++;
	first[depth] = true;
}

static void close_(char c)
{
	if (!ctl.json)
		return;
	if (ctl.pretty)
		printf("\n%*s", (depth - 1) * 2, "");
	putchar(c);
	if (depth > 0)
		depth--;
	if (!depth) {
		putchar('\n');
		first[0] = true; /* the next value stands alone (JSON Lines) */
	}
}

void pr_begin_list(void)
{
	open_(NULL, '[');
}
void pr_begin_list_key(const char *key)
{
	open_(key, '[');
}
void pr_end_list(void)
{
	close_(']');
}
void pr_begin_obj(void)
{
	open_(NULL, '{');
}
void pr_end_obj(void)
{
	close_('}');
}

/* @val NULL: "-" in text, null in JSON. */
void pr_str(const char *key, const char *fmt_text, const char *val)
{
	if (!ctl.json) {
		printf(fmt_text, val ? val : "-");
		return;
	}
	sep();
	json_str(key);
	fputs(ctl.pretty ? ": " : ":", stdout);
	if (val)
		json_str(val);
	else
		fputs("null", stdout);
}

void pr_int(const char *key, const char *fmt_text, long long val)
{
	if (!ctl.json) {
		printf(fmt_text, val);
		return;
	}
	sep();
	json_str(key);
	printf(ctl.pretty ? ": %lld" : ":%lld", val);
}

void pr_float(const char *key, const char *fmt_text, double val)
{
	if (!ctl.json) {
		printf(fmt_text, val);
		return;
	}
	sep();
	json_str(key);
	printf(ctl.pretty ? ": %.6g" : ":%.6g", val);
}

/* Seconds to the millisecond, whatever their size (%.6g would round). */
void pr_secs(const char *key, const char *fmt_text, double val)
{
	if (!ctl.json) {
		printf(fmt_text, val);
		return;
	}
	sep();
	json_str(key);
	printf(ctl.pretty ? ": %.3f" : ":%.3f", val);
}

void pr_newline(void)
{
	if (!ctl.json)
		putchar('\n');
}
