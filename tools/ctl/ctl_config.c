/* SPDX-License-Identifier: MIT */
/*
 * ctl_config.c - r2cc-ctl config check [FILE]: validate a configuration
 * file (or the one R2CC_CONFIG names) together with the R2CC_* environment,
 * print each problem and the effective settings. Exit 3 on any problem.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "policy.h"

extern char **environ;

static void report(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "r2cc-ctl: %s\n", msg);
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
	r2cc_config_dump(cfg, stdout);
	if (problems)
		fprintf(stderr, "r2cc-ctl: %d problem%s\n", problems,
			problems == 1 ? "" : "s");
	if (argc)
		free(env[0]);
	free(env);
	free(cfg);
	return problems ? CTL_DOWN : CTL_OK;
}

static const struct ctl_cmd cmds[] = {
	{ NULL, check, "" },
	{ "check", check, "[FILE]  validate, print the effective settings" },
	{ 0 },
};

int config_main(int argc, char **argv)
{
	return ctl_exec("config", cmds, argc, argv);
}
