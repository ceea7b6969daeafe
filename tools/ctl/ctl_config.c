/* SPDX-License-Identifier: MIT */
/*
 * ctl_config.c - r2cc-ctl config check [FILE]: validate a configuration
 * file (or the one R2CC_CONFIG names) together with the R2CC_* environment
 * and the job secret it names, print each problem and the effective
 * settings. Exit 3 on any problem. r2cc-ctl config list: every setting,
 * its values, default and meaning, from the settings table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "policy.h"

extern char **environ;

static void report(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "r2cc-ctl: %s\n", msg);
}

/* report(), counting into *arg */
static void report_count(void *arg, const char *msg)
{
	(*(int *)arg)++;
	report(NULL, msg);
}

/*
 * The job secret, by the rules the shim loads it with (r2cc_secret_open()):
 * the number of problems. Its contents are never read here. @ok is set to
 * "# secret: FILE ok (N bytes, mode MODE)" for a good one, "" otherwise.
 */
static int check_secret(const struct r2cc_config *cfg, char *ok, size_t size)
{
	struct stat st;
	int problems = 0, fd;

	ok[0] = 0;
	if (!cfg->secret_file[0]) {
		report(NULL,
		       "no job secret (R2CC_SECRET_FILE): every connection "
		       "runs unprotected; make one with r2cc-ctl secret "
		       "new FILE");
		return 1;
	}
	fd = r2cc_secret_open(cfg->secret_file, &st, report_count, &problems);
	if (fd < 0)
		return problems ? problems : 1;
	close(fd);
	snprintf(ok, size, "# secret: %s ok (%lld bytes, mode %04o)",
		 cfg->secret_file, (long long)st.st_size,
		 (unsigned int)(st.st_mode & 07777));
	return 0;
}

/* environ, with R2CC_CONFIG=@file in front when a file is given. */
static char **env_with(const char *file)
{
	size_t n = 0, i;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		return NULL;
	i = 0;
	if (file) {
		env[i] = malloc(strlen(file) + sizeof("R2CC_CONFIG="));
		if (!env[i]) {
			free(env);
			return NULL;
		}
		sprintf(env[i++], "R2CC_CONFIG=%s", file);
	}
	for (n = 0; environ[n]; n++)
		if (!file || strncmp(environ[n], "R2CC_CONFIG=", 12))
			env[i++] = environ[n];
	return env;
}

static int check(int argc, char **argv)
{
	char ok[PATH_MAX + 64];
	struct r2cc_config *cfg;
	char **env;
	int problems;

	if (argc > 1) {
		fprintf(stderr, "usage: r2cc-ctl config check [FILE]\n");
		return CTL_ERR;
	}
	cfg = malloc(sizeof(*cfg));
	env = env_with(argc ? argv[0] : NULL);
	if (!cfg || !env) {
		fprintf(stderr, "r2cc-ctl: out of memory\n");
		free(cfg);
		return CTL_ERR;
	}
	/* Problems go to stderr here, not through r2cc_log() as well. */
	r2cc_log_set_level(R2CC_LOG_OFF);
	problems = r2cc_config_load_report(cfg, env, report, NULL);
	problems += check_secret(cfg, ok, sizeof(ok));
	r2cc_config_dump(cfg, stdout);
	if (ok[0])
		printf("%s\n", ok);
	if (problems)
		fprintf(stderr, "r2cc-ctl: %d problem%s\n", problems,
			problems == 1 ? "" : "s");
	if (argc)
		free(env[0]);
	free(env);
	free(cfg);
	return problems ? CTL_DOWN : CTL_OK;
}

/* Every setting from the settings table: for operators, or the docs. */
static int list(int argc, char **argv)
{
	static const struct {
		const char *opt;
		enum r2cc_list_fmt fmt;
	} fmts[] = {
		{ "--man", R2CC_LIST_MAN },
		{ "--markdown", R2CC_LIST_MARKDOWN },
		{ "--names", R2CC_LIST_NAMES },
	};
	enum r2cc_list_fmt fmt = R2CC_LIST_TEXT;
	size_t i;

	if (argc > 1)
		goto usage;
	if (argc) {
		for (i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++)
			if (!strcmp(argv[0], fmts[i].opt))
				break;
		if (i == sizeof(fmts) / sizeof(fmts[0]))
			goto usage;
		fmt = fmts[i].fmt;
	}
	return r2cc_config_list(stdout, fmt) ? CTL_ERR : CTL_OK;
usage:
	fprintf(stderr,
		"usage: r2cc-ctl config list [--man|--markdown|--names]\n");
	return CTL_ERR;
}

static const struct ctl_cmd cmds[] = {
	{ NULL, check, "" },
	{ "check", check, "[FILE]  validate, print the effective settings" },
	{ "list", list, "[--man|--markdown|--names]  every setting" },
	{ 0 },
};

int config_main(int argc, char **argv)
{
	return ctl_exec("config", cmds, argc, argv);
}
