/* SPDX-License-Identifier: MIT */
/*
 * test_config.c - the settings table, strict values, one message per
 * problem with the lower layer's value kept, precedence, r2cc.conf syntax.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "policy.h"

#define NMSG 32
#define MSGLEN 1200

static char msgs[NMSG][MSGLEN];
static int nmsg;
static char logs[NMSG][R2CC_LOG_LINE_MAX];
static enum r2cc_log_level log_levels[NMSG];
static int nlog;
static char conf_path[64];
static struct r2cc_config cfg;

static void on_report(void *arg, const char *msg)
{
	(void)arg;
	if (nmsg < NMSG)
		snprintf(msgs[nmsg], MSGLEN, "%s", msg);
	nmsg++;
}

static void on_log(enum r2cc_log_level level, const char *line, size_t len)
{
	(void)len;
	if (nlog < NMSG) {
		snprintf(logs[nlog], sizeof(logs[0]), "%s", line);
		log_levels[nlog] = level;
	}
	nlog++;
}

static void setup(void)
{
	nmsg = nlog = 0;
	conf_path[0] = '\0';
	r2cc_log_set_fn(on_log);
	r2cc_log_set_level(R2CC_LOG_DEBUG);
}

static void teardown(void)
{
	if (conf_path[0])
		unlink(conf_path);
}

static int load(char **envp)
{
	int n = r2cc_config_load_report(&cfg, envp, on_report, NULL);

	/* Every problem is counted, reported and logged exactly once */
	cr_assert_eq(n, nmsg, "returned %d, reported %d", n, nmsg);
	cr_assert_eq(nlog, nmsg, "logged %d, reported %d", nlog, nmsg);
	return n;
}

static const char *val(int key)
{
	static char buf[PATH_MAX + 64];

	cr_assert_eq(r2cc_config_format(&cfg, key, buf, sizeof(buf)), 0);
	return buf;
}

static const char *write_conf(const char *text)
{
	size_t len = strlen(text);
	int fd;

	teardown(); /* one file at a time */
	snprintf(conf_path, sizeof(conf_path), "/tmp/r2cc_conf_XXXXXX");
	fd = mkstemp(conf_path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
	return conf_path;
}

/* Loads @text as R2CC_CONFIG plus up to one more variable @extra. */
static int load_conf(const char *text, char *extra)
{
	static char var[128];
	char *env[] = { var, extra, NULL };

	snprintf(var, sizeof(var), "R2CC_CONFIG=%s", write_conf(text));
	return load(env);
}

static const char *const defaults[R2CC_CONF_NR] = {
	[R2CC_CONF_DISABLE] = "0",	 [R2CC_CONF_LOG] = "err",
	[R2CC_CONF_LOG_FILE] = "",	 [R2CC_CONF_RAILS] = "all",
	[R2CC_CONF_BACKUP] = "eager",	 [R2CC_CONF_DETECT_MS] = "500",
	[R2CC_CONF_FAILBACK] = "1",	 [R2CC_CONF_FAILBACK_HOLD_MS] = "5000",
	[R2CC_CONF_KEEPALIVE] = "0",	 [R2CC_CONF_KEEPALIVE_MS] = "1000",
	[R2CC_CONF_CTRL_PORT] = "18650", [R2CC_CONF_CTRL_IF] = "",
	[R2CC_CONF_PEERS] = "",		 [R2CC_CONF_PEER_BY_GID] = "1",
	[R2CC_CONF_NODE_MAP] = "",	 [R2CC_CONF_SECRET_FILE] = "",
	[R2CC_CONF_STATS] = "",		 [R2CC_CONF_CONFIG] = "",
};

/* What "(accepted: ...)" must contain, per setting */
static const char *const accepted[R2CC_CONF_NR] = {
	[R2CC_CONF_DISABLE] = "1, 0, yes, no, true, false, on, off",
	[R2CC_CONF_LOG] = "off, err, warn, info, debug",
	[R2CC_CONF_LOG_FILE] = "an absolute path",
	[R2CC_CONF_RAILS] = "all, or up to 16 comma-separated DEV[/PORT]",
	[R2CC_CONF_BACKUP] = "eager, lazy",
	[R2CC_CONF_DETECT_MS] = "a decimal integer 10..60000",
	[R2CC_CONF_FAILBACK] = "1, 0, yes, no, true, false, on, off",
	[R2CC_CONF_FAILBACK_HOLD_MS] = "a decimal integer 0..3600000",
	[R2CC_CONF_KEEPALIVE] = "1, 0, yes, no, true, false, on, off",
	[R2CC_CONF_KEEPALIVE_MS] = "a decimal integer 100..60000",
	[R2CC_CONF_CTRL_PORT] = "a decimal integer 1..65535",
	[R2CC_CONF_CTRL_IF] = "a network interface name of 1-15",
	[R2CC_CONF_PEERS] = "names or IPv4 addresses separated by commas",
	[R2CC_CONF_PEER_BY_GID] = "1, 0, yes, no, true, false, on, off",
	[R2CC_CONF_NODE_MAP] = "GID=HOST or lid:LID=HOST entries",
	[R2CC_CONF_SECRET_FILE] = "an absolute path",
	[R2CC_CONF_STATS] = "an absolute path",
	[R2CC_CONF_CONFIG] = "a file path",
};

/* A valid non-default value per setting, for layering tests */
static const char *const alt[R2CC_CONF_NR] = {
	[R2CC_CONF_DISABLE] = "1",
	[R2CC_CONF_LOG] = "info",
	[R2CC_CONF_LOG_FILE] = "/tmp/alt.log",
	[R2CC_CONF_RAILS] = "mlx5_9/3",
	[R2CC_CONF_BACKUP] = "lazy",
	[R2CC_CONF_DETECT_MS] = "777",
	[R2CC_CONF_FAILBACK] = "0",
	[R2CC_CONF_FAILBACK_HOLD_MS] = "42",
	[R2CC_CONF_KEEPALIVE] = "1",
	[R2CC_CONF_KEEPALIVE_MS] = "250",
	[R2CC_CONF_CTRL_PORT] = "4242",
	[R2CC_CONF_CTRL_IF] = "alt0",
	[R2CC_CONF_PEERS] = "gpu[01-02],10.0.0.3",
	[R2CC_CONF_PEER_BY_GID] = "0",
	[R2CC_CONF_NODE_MAP] = "fe80::1=gpu1",
	[R2CC_CONF_SECRET_FILE] = "/tmp/alt.secret",
	[R2CC_CONF_STATS] = "/tmp/alt.stats",
};

static const char *file_key(int key, char *buf)
{
	const char *name = r2cc_config_key_name(key) + 5;
	size_t i;

	for (i = 0; name[i]; i++)
		buf[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ?
					name[i] - 'A' + 'a' :
					name[i]);
	buf[i] = '\0';
	return buf;
}

Test(policy_config, table_has_unique_names, .timeout = 5)
{
	const char *a, *b;
	int i, j;

	for (i = 0; i < R2CC_CONF_NR; i++) {
		a = r2cc_config_key_name(i);
		cr_assert_not_null(a, "setting %d has no row", i);
		cr_assert_eq(strncmp(a, "R2CC_", 5), 0, "%s", a);
		for (j = i + 1; j < R2CC_CONF_NR; j++) {
			b = r2cc_config_key_name(j);
			cr_assert_not_null(b);
			cr_assert_neq(strcasecmp(a, b), 0, "duplicate %s", a);
		}
		cr_assert_eq(r2cc_config_lookup(a), i, "%s", a);
		cr_assert_eq(r2cc_config_lookup(a + 5), i, "%s", a);
	}
	cr_assert_null(r2cc_config_key_name(-1));
	cr_assert_null(r2cc_config_key_name(R2CC_CONF_NR));
}

Test(policy_config, lookup_forms, .timeout = 5)
{
	cr_assert_eq(r2cc_config_lookup("log"), R2CC_CONF_LOG);
	cr_assert_eq(r2cc_config_lookup("LOG"), R2CC_CONF_LOG);
	cr_assert_eq(r2cc_config_lookup("r2cc_log"), R2CC_CONF_LOG);
	cr_assert_eq(r2cc_config_lookup("R2CC_Log_File"), R2CC_CONF_LOG_FILE);
	cr_assert_eq(r2cc_config_lookup("stats"), R2CC_CONF_STATS);
	cr_assert_eq(r2cc_config_lookup("R2CC_"), -ENOENT);
	cr_assert_eq(r2cc_config_lookup(""), -ENOENT);
	cr_assert_eq(r2cc_config_lookup("lo"), -ENOENT);
	cr_assert_eq(r2cc_config_lookup("log_"), -ENOENT);
	cr_assert_eq(r2cc_config_lookup("R2CC_R2CC_LOG"), -ENOENT);
}

Test(policy_config, defaults, .init = setup, .timeout = 5)
{
	char *empty[] = { NULL };
	int k;

	r2cc_config_init(&cfg);
	for (k = 0; k < R2CC_CONF_NR; k++) {
		cr_assert_str_eq(val(k), defaults[k], "%s",
				 r2cc_config_key_name(k));
		cr_assert_eq(cfg.src[k], R2CC_SRC_DEFAULT);
	}
	cr_assert_eq(cfg.disable, false);
	cr_assert_eq(cfg.log_level, R2CC_LOG_ERR);
	cr_assert_eq(cfg.rails.n, 0);
	cr_assert_eq(cfg.backup, R2CC_BACKUP_EAGER);
	cr_assert_eq(cfg.detect_ms, 500);
	cr_assert_eq(cfg.failback, true);
	cr_assert_eq(cfg.failback_hold_ms, 5000);
	cr_assert_eq(cfg.keepalive, false);
	cr_assert_eq(cfg.keepalive_ms, 1000);
	cr_assert_eq(cfg.ctrl_port, 18650);

	cr_assert_eq(load(NULL), 0);
	cr_assert_eq(load(empty), 0);
	for (k = 0; k < R2CC_CONF_NR; k++)
		cr_assert_str_eq(val(k), defaults[k]);
}

/* Parameters are copied into each test's process: arrays, not pointers */
struct good {
	int key;
	char in[40], out[40];
};

ParameterizedTestParameters(policy_config, good_values)
{
	static struct good cases[] = {
		{ R2CC_CONF_DISABLE, "1", "1" },
		{ R2CC_CONF_DISABLE, "0", "0" },
		{ R2CC_CONF_DISABLE, "yes", "1" },
		{ R2CC_CONF_DISABLE, "no", "0" },
		{ R2CC_CONF_DISABLE, "true", "1" },
		{ R2CC_CONF_DISABLE, "false", "0" },
		{ R2CC_CONF_DISABLE, "on", "1" },
		{ R2CC_CONF_DISABLE, "off", "0" },
		{ R2CC_CONF_DISABLE, "YES", "1" },
		{ R2CC_CONF_LOG, "off", "off" },
		{ R2CC_CONF_LOG, "err", "err" },
		{ R2CC_CONF_LOG, "warn", "warn" },
		{ R2CC_CONF_LOG, "info", "info" },
		{ R2CC_CONF_LOG, "debug", "debug" },
		{ R2CC_CONF_LOG, "DEBUG", "debug" },
		{ R2CC_CONF_LOG_FILE, "/", "/" },
		{ R2CC_CONF_LOG_FILE, "/var/log/r2cc.log",
		  "/var/log/r2cc.log" },
		{ R2CC_CONF_RAILS, "all", "all" },
		{ R2CC_CONF_RAILS, "ALL", "all" },
		{ R2CC_CONF_RAILS, "mlx5_0", "mlx5_0" },
		{ R2CC_CONF_RAILS, "mlx5_0/1", "mlx5_0/1" },
		{ R2CC_CONF_RAILS, "mlx5_0/1,mlx5_0/2", "mlx5_0/1,mlx5_0/2" },
		{ R2CC_CONF_RAILS, "rxe0,rxe1/255", "rxe0,rxe1/255" },
		{ R2CC_CONF_RAILS, "a.B-c_9/001", "a.B-c_9/1" },
		{ R2CC_CONF_RAILS, "mlx5_0,MLX5_0", "mlx5_0,MLX5_0" },
		{ R2CC_CONF_BACKUP, "eager", "eager" },
		{ R2CC_CONF_BACKUP, "lazy", "lazy" },
		{ R2CC_CONF_BACKUP, "Lazy", "lazy" },
		{ R2CC_CONF_DETECT_MS, "10", "10" },
		{ R2CC_CONF_DETECT_MS, "60000", "60000" },
		{ R2CC_CONF_DETECT_MS, "0010", "10" },
		{ R2CC_CONF_FAILBACK, "off", "0" },
		{ R2CC_CONF_FAILBACK, "1", "1" },
		{ R2CC_CONF_FAILBACK_HOLD_MS, "0", "0" },
		{ R2CC_CONF_FAILBACK_HOLD_MS, "3600000", "3600000" },
		{ R2CC_CONF_KEEPALIVE_MS, "100", "100" },
		{ R2CC_CONF_KEEPALIVE_MS, "60000", "60000" },
		{ R2CC_CONF_CTRL_PORT, "1", "1" },
		{ R2CC_CONF_CTRL_PORT, "65535", "65535" },
		{ R2CC_CONF_CTRL_IF, "eth0", "eth0" },
		{ R2CC_CONF_CTRL_IF, "a", "a" },
		{ R2CC_CONF_CTRL_IF, "abcdefghijklmno", "abcdefghijklmno" },
		{ R2CC_CONF_CTRL_IF, "bond0.100", "bond0.100" },
		{ R2CC_CONF_CTRL_IF, "...", "..." },
		{ R2CC_CONF_PEERS, "gpu[001-128]", "gpu[001-128]" },
		{ R2CC_CONF_PEERS, "10.0.0.1, b", "10.0.0.1, b" },
		{ R2CC_CONF_PEERS, "/etc/r2cc/hosts", "/etc/r2cc/hosts" },
		{ R2CC_CONF_PEER_BY_GID, "off", "0" },
		{ R2CC_CONF_NODE_MAP, "fe80::c42:a103:6e:2a10=gpu017",
		  "fe80::c42:a103:6e:2a10=gpu017" },
		{ R2CC_CONF_NODE_MAP, "/etc/r2cc/gids", "/etc/r2cc/gids" },
		{ R2CC_CONF_SECRET_FILE, "/run/r2cc/job.key",
		  "/run/r2cc/job.key" },
		{ R2CC_CONF_STATS, "/tmp/r2cc stats.json",
		  "/tmp/r2cc stats.json" },
	};

	return cr_make_param_array(struct good, cases,
				   sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct good *c, policy_config, good_values, .init = setup,
		  .fini = teardown, .timeout = 5)
{
	const char *name = r2cc_config_key_name(c->key);
	char var[256], line[256], key[32];
	char *env[] = { var, NULL };

	snprintf(var, sizeof(var), "%s=%s", name, c->in);
	cr_assert_eq(load(env), 0, "%s: %s", var, msgs[0]);
	cr_assert_str_eq(val(c->key), c->out, "%s", var);
	cr_assert_eq(cfg.src[c->key], R2CC_SRC_ENV);

	/* The same value from the file; quoted, since it may hold blanks */
	snprintf(line, sizeof(line), "# test\n%s = \"%s\"\n",
		 file_key(c->key, key), c->in);
	cr_assert_eq(load_conf(line, NULL), 0, "%s: %s", line, msgs[0]);
	cr_assert_str_eq(val(c->key), c->out, "%s", line);
	cr_assert_eq(cfg.src[c->key], R2CC_SRC_FILE);
	cr_assert_eq(cfg.src_line[c->key], 2);
}

struct bad {
	int key;
	char in[40];
	bool env_only; /* the file would trim or comment it into a good one */
};

ParameterizedTestParameters(policy_config, bad_values)
{
	static struct bad cases[] = {
		{ R2CC_CONF_DISABLE, "" },
		{ R2CC_CONF_DISABLE, "2" },
		{ R2CC_CONF_DISABLE, "-1" },
		{ R2CC_CONF_DISABLE, "yess" },
		{ R2CC_CONF_DISABLE, "tru" },
		{ R2CC_CONF_DISABLE, " 1", true },
		{ R2CC_CONF_DISABLE, "1 ", true },
		{ R2CC_CONF_LOG, "" },
		{ R2CC_CONF_LOG, "loud" },
		{ R2CC_CONF_LOG, "error" },
		{ R2CC_CONF_LOG, "3" },
		{ R2CC_CONF_LOG, "debug2" },
		{ R2CC_CONF_LOG_FILE, "" },
		{ R2CC_CONF_LOG_FILE, "r2cc.log" },
		{ R2CC_CONF_LOG_FILE, "./r2cc.log" },
		{ R2CC_CONF_LOG_FILE, "~/r2cc.log" },
		{ R2CC_CONF_RAILS, "" },
		{ R2CC_CONF_RAILS, "," },
		{ R2CC_CONF_RAILS, "mlx5_0," },
		{ R2CC_CONF_RAILS, ",mlx5_0" },
		{ R2CC_CONF_RAILS, "mlx5_0,,mlx5_1" },
		{ R2CC_CONF_RAILS, "mlx5_0,mlx5_0" },
		{ R2CC_CONF_RAILS, "mlx5_0/1,mlx5_0/1" },
		{ R2CC_CONF_RAILS, "mlx5_0,mlx5_0/1" },
		{ R2CC_CONF_RAILS, "mlx5_0/2,mlx5_0" },
		{ R2CC_CONF_RAILS, "mlx5_0/0" },
		{ R2CC_CONF_RAILS, "mlx5_0/256" },
		{ R2CC_CONF_RAILS, "mlx5_0/-1" },
		{ R2CC_CONF_RAILS, "mlx5_0/+1" },
		{ R2CC_CONF_RAILS, "mlx5_0/99999999999999999999" },
		{ R2CC_CONF_RAILS, "mlx5_0/" },
		{ R2CC_CONF_RAILS, "mlx5_0/1/2" },
		{ R2CC_CONF_RAILS, "mlx5_0/x" },
		{ R2CC_CONF_RAILS, "/1" },
		{ R2CC_CONF_RAILS, "mlx5 0" },
		{ R2CC_CONF_RAILS, "mlx5_0, mlx5_1" },
		{ R2CC_CONF_RAILS, "mlx@5" },
		{ R2CC_CONF_RAILS, "all,mlx5_0" },
		{ R2CC_CONF_RAILS, "." },
		{ R2CC_CONF_RAILS, "..,mlx5_0" },
		{ R2CC_CONF_BACKUP, "" },
		{ R2CC_CONF_BACKUP, "eagerly" },
		{ R2CC_CONF_BACKUP, "none" },
		{ R2CC_CONF_DETECT_MS, "" },
		{ R2CC_CONF_DETECT_MS, "abc" },
		{ R2CC_CONF_DETECT_MS, "-5" },
		{ R2CC_CONF_DETECT_MS, "+50" },
		{ R2CC_CONF_DETECT_MS, "9" },
		{ R2CC_CONF_DETECT_MS, "0" },
		{ R2CC_CONF_DETECT_MS, "60001" },
		{ R2CC_CONF_DETECT_MS, "4294967296" },
		{ R2CC_CONF_DETECT_MS, "99999999999999999999" },
		{ R2CC_CONF_DETECT_MS, "500ms" },
		{ R2CC_CONF_DETECT_MS, "5 00" },
		{ R2CC_CONF_DETECT_MS, "0x10" },
		{ R2CC_CONF_DETECT_MS, "1e3" },
		{ R2CC_CONF_DETECT_MS, "500.0" },
		{ R2CC_CONF_DETECT_MS, " 500", true },
		{ R2CC_CONF_FAILBACK, "" },
		{ R2CC_CONF_FAILBACK, "2" },
		{ R2CC_CONF_FAILBACK_HOLD_MS, "-1" },
		{ R2CC_CONF_FAILBACK_HOLD_MS, "3600001" },
		{ R2CC_CONF_FAILBACK_HOLD_MS, "99999999999999999999" },
		{ R2CC_CONF_FAILBACK_HOLD_MS, "1s" },
		{ R2CC_CONF_KEEPALIVE_MS, "99" },
		{ R2CC_CONF_KEEPALIVE_MS, "60001" },
		{ R2CC_CONF_KEEPALIVE, "maybe" },
		{ R2CC_CONF_CTRL_PORT, "" },
		{ R2CC_CONF_CTRL_PORT, "0" },
		{ R2CC_CONF_CTRL_PORT, "65536" },
		{ R2CC_CONF_CTRL_PORT, "-1" },
		{ R2CC_CONF_CTRL_PORT, "http" },
		{ R2CC_CONF_CTRL_PORT, "18650 ", true },
		{ R2CC_CONF_CTRL_IF, "" },
		{ R2CC_CONF_CTRL_IF, "eth/0" },
		{ R2CC_CONF_CTRL_IF, "eth:0" },
		{ R2CC_CONF_CTRL_IF, "eth 0" },
		{ R2CC_CONF_CTRL_IF, "eth\t0" },
		{ R2CC_CONF_CTRL_IF, "." },
		{ R2CC_CONF_CTRL_IF, ".." },
		{ R2CC_CONF_CTRL_IF, "abcdefghijklmnop" },
		{ R2CC_CONF_PEERS, "" },
		{ R2CC_CONF_PEERS, "gpu[1-2" },
		{ R2CC_CONF_PEERS, "gpu[2-1]" },
		{ R2CC_CONF_PEERS, "n[1-70000]" },
		{ R2CC_CONF_PEERS, "a;b" },
		{ R2CC_CONF_PEERS, " , " },
		{ R2CC_CONF_NODE_MAP, "" },
		{ R2CC_CONF_NODE_MAP, "gpu017" },
		{ R2CC_CONF_NODE_MAP, "10.0.0.1=gpu017" },
		{ R2CC_CONF_NODE_MAP, "fe80::1=" },
		{ R2CC_CONF_SECRET_FILE, "" },
		{ R2CC_CONF_SECRET_FILE, "secret" },
		{ R2CC_CONF_STATS, "" },
		{ R2CC_CONF_STATS, "stats.json" },
	};

	return cr_make_param_array(struct bad, cases,
				   sizeof(cases) / sizeof(cases[0]));
}

/* The value as the message quotes it: control bytes become \xNN */
static const char *quoted(const char *s)
{
	static char buf[512];
	size_t o = 0;

	for (; *s; s++)
		if ((unsigned char)*s < 0x20)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o,
					      "\\x%02x", (unsigned char)*s);
		else
			buf[o++] = *s;
	buf[o] = '\0';
	return buf;
}

static void check_fallback(const char *msg, int key, const char *lower)
{
	char want[256];

	snprintf(want, sizeof(want), "(accepted: %s", accepted[key]);
	cr_assert_not_null(strstr(msg, want), "%s", msg);
	if (lower[0])
		snprintf(want, sizeof(want), "); using `%s'", lower);
	else
		snprintf(want, sizeof(want), "); leaving it unset");
	cr_assert_not_null(strstr(msg, want), "want %s in %s", want, msg);
	cr_assert_str_eq(val(key), lower);
}

ParameterizedTest(struct bad *c, policy_config, bad_values, .init = setup,
		  .fini = teardown, .timeout = 5)
{
	const char *name = r2cc_config_key_name(c->key);
	char var[256], line[256], want[512], key[32];
	char *env[] = { var, NULL };

	/* Environment over defaults: the default stays */
	snprintf(var, sizeof(var), "%s=%s", name, c->in);
	cr_assert_eq(load(env), 1, "%s", var);
	snprintf(want, sizeof(want), "%s=`%s' is invalid ", name,
		 quoted(c->in));
	cr_assert_eq(strncmp(msgs[0], want, strlen(want)), 0, "%s", msgs[0]);
	check_fallback(msgs[0], c->key, defaults[c->key]);
	cr_assert_eq(cfg.src[c->key], R2CC_SRC_DEFAULT);
	cr_assert_eq(log_levels[0], R2CC_LOG_WARN);
	cr_assert_not_null(strstr(logs[0], " policy: "), "%s", logs[0]);
	cr_assert_not_null(strstr(logs[0], msgs[0]), "%s", logs[0]);

	/* Environment over the file: the file's value stays */
	nmsg = nlog = 0;
	snprintf(line, sizeof(line), "%s = %s\n", file_key(c->key, key),
		 alt[c->key]);
	cr_assert_eq(load_conf(line, var), 1, "%s", var);
	check_fallback(msgs[0], c->key, alt[c->key]);
	cr_assert_eq(cfg.src[c->key], R2CC_SRC_FILE);
	if (c->env_only)
		return;

	/* The file over defaults: "path:line: key" names it */
	nmsg = nlog = 0;
	snprintf(line, sizeof(line), "\n%s = \"%s\"\n", key, c->in);
	cr_assert_eq(load_conf(line, NULL), 1, "%s", line);
	snprintf(want, sizeof(want), "%s:2: %s=`%s' is invalid ", conf_path,
		 key, quoted(c->in));
	cr_assert_eq(strncmp(msgs[0], want, strlen(want)), 0, "%s", msgs[0]);
	check_fallback(msgs[0], c->key, defaults[c->key]);
}

Test(policy_config, exact_message, .init = setup, .timeout = 5)
{
	char *env[] = { "R2CC_LOG=loud", NULL };

	cr_assert_eq(load(env), 1);
	cr_assert_str_eq(msgs[0], "R2CC_LOG=`loud' is invalid (accepted: off, "
				  "err, warn, info, debug); using `err'");
}

static char *repeat(char c, size_t n)
{
	static char buf[3][PATH_MAX + 64];
	static int which;
	char *s = buf[which++ % 3];

	memset(s, c, n);
	s[n] = '\0';
	return s;
}

Test(policy_config, length_limits, .init = setup, .fini = teardown,
     .timeout = 5)
{
	static char var[PATH_MAX + 64];
	char *env[] = { var, NULL };
	char *p;

	/* PATH_MAX counts the NUL: 4095 bytes fit, 4096 do not */
	p = repeat('a', PATH_MAX - 1);
	p[0] = '/';
	snprintf(var, sizeof(var), "R2CC_STATS=%s", p);
	cr_assert_eq(load(env), 0);
	cr_assert_eq(strlen(cfg.stats_file), PATH_MAX - 1);
	p = repeat('a', PATH_MAX);
	p[0] = '/';
	snprintf(var, sizeof(var), "R2CC_LOG_FILE=%s", p);
	cr_assert_eq(load(env), 1);
	cr_assert_str_eq(cfg.log_file, "");
	/* A long bad value is quoted cut short, the message stays whole */
	cr_assert_not_null(strstr(msgs[0], "...' is invalid (accepted: an "
					   "absolute path"));
	cr_assert_lt(strlen(msgs[0]), 400);

	snprintf(var, sizeof(var), "R2CC_RAILS=%s/1", repeat('d', 63));
	nmsg = nlog = 0;
	cr_assert_eq(load(env), 0, "%s", msgs[0]);
	cr_assert_eq(strlen(cfg.rails.v[0].dev), 63);
	cr_assert_eq(cfg.rails.v[0].port, 1);
	snprintf(var, sizeof(var), "R2CC_RAILS=%s", repeat('d', 64));
	cr_assert_eq(load(env), 1);
	cr_assert_eq(cfg.rails.n, 0);
}

static void rails_list(char *buf, size_t size, int n)
{
	size_t o = 0;
	int i;

	for (i = 0; i < n; i++)
		o += (size_t)snprintf(buf + o, size - o, "%smlx5_%d/1",
				      i ? "," : "", i);
}

Test(policy_config, rails_count_limit, .init = setup, .timeout = 5)
{
	char var[512] = "R2CC_RAILS=";
	char *env[] = { var, NULL };
	char want[512];

	rails_list(var + 11, sizeof(var) - 11, R2CC_RAILS_MAX);
	cr_assert_eq(load(env), 0, "%s", msgs[0]);
	cr_assert_eq(cfg.rails.n, R2CC_RAILS_MAX);
	cr_assert_str_eq(cfg.rails.v[15].dev, "mlx5_15");
	rails_list(want, sizeof(want), R2CC_RAILS_MAX);
	cr_assert_str_eq(val(R2CC_CONF_RAILS), want);

	rails_list(var + 11, sizeof(var) - 11, R2CC_RAILS_MAX + 1);
	cr_assert_eq(load(env), 1);
	cr_assert_eq(cfg.rails.n, 0);
	cr_assert_str_eq(val(R2CC_CONF_RAILS), "all");
}

Test(policy_config, precedence, .init = setup, .fini = teardown, .timeout = 5)
{
	cr_assert_eq(load_conf("log = info\ndetect_ms = 100\nbackup = lazy\n",
			       "R2CC_LOG=debug"),
		     0);
	cr_assert_eq(cfg.log_level, R2CC_LOG_DEBUG);
	cr_assert_eq(cfg.src[R2CC_CONF_LOG], R2CC_SRC_ENV);
	cr_assert_eq(cfg.detect_ms, 100);
	cr_assert_eq(cfg.src[R2CC_CONF_DETECT_MS], R2CC_SRC_FILE);
	cr_assert_eq(cfg.src_line[R2CC_CONF_DETECT_MS], 2);
	cr_assert_eq(cfg.backup, R2CC_BACKUP_LAZY);
	cr_assert_eq(cfg.ctrl_port, 18650);
	cr_assert_eq(cfg.src[R2CC_CONF_CTRL_PORT], R2CC_SRC_DEFAULT);
	cr_assert_eq(cfg.src[R2CC_CONF_CONFIG], R2CC_SRC_ENV);
	cr_assert_str_eq(cfg.config_file, conf_path);
}

Test(policy_config, bad_file_line_keeps_earlier_line, .init = setup,
     .fini = teardown, .timeout = 5)
{
	cr_assert_eq(load_conf("log = info\nlog = loud\n", NULL), 1);
	cr_assert_eq(cfg.log_level, R2CC_LOG_INFO);
	cr_assert_not_null(strstr(msgs[0], ":2: log=`loud' is invalid"));
	cr_assert_not_null(strstr(msgs[0], "using `info'"));
	cr_assert_eq(cfg.src_line[R2CC_CONF_LOG], 1);
}

Test(policy_config, file_syntax, .init = setup, .fini = teardown, .timeout = 5)
{
	static const char text[] =
		"# full-line comment\n"
		"\n"
		"   \t  \n"
		"   log   =   debug    # trailing comment\n"
		"BACKUP=lazy\n"
		"R2CC_DETECT_MS = \"250\"\n"
		"r2cc_ctrl_if = \"eth0\"   # quoted, then a comment\n"
		"secret_file = \"/path with #hash/secret\"\n"
		"stats = /tmp/a#b\n"
		"\tfailback_hold_ms\t=\t0\t\n"
		"ctrl_port = 4242\r\n"
		"  # indented comment = not a setting\n"
		"rails = rxe0/1,rxe1";

	cr_assert_eq(load_conf(text, NULL), 0, "%s", msgs[0]);
	cr_assert_eq(cfg.log_level, R2CC_LOG_DEBUG);
	cr_assert_eq(cfg.src_line[R2CC_CONF_LOG], 4);
	cr_assert_eq(cfg.backup, R2CC_BACKUP_LAZY);
	cr_assert_eq(cfg.detect_ms, 250);
	cr_assert_str_eq(cfg.ctrl_if, "eth0");
	cr_assert_str_eq(cfg.secret_file, "/path with #hash/secret");
	cr_assert_str_eq(cfg.stats_file, "/tmp/a#b");
	cr_assert_eq(cfg.failback_hold_ms, 0);
	cr_assert_eq(cfg.src[R2CC_CONF_FAILBACK_HOLD_MS], R2CC_SRC_FILE);
	cr_assert_eq(cfg.ctrl_port, 4242);
	cr_assert_str_eq(val(R2CC_CONF_RAILS), "rxe0/1,rxe1");
	cr_assert_eq(cfg.src_line[R2CC_CONF_RAILS], 13);
}

struct syntax {
	char line[40], want[96];
};

ParameterizedTestParameters(policy_config, file_errors)
{
	static struct syntax cases[] = {
		{ "just words",
		  ":1: expected `key = value', not `just words'" },
		{ "= debug", ":1: expected `key = value', not `= debug'" },
		{ "log debug", ":1: expected `key = value'" },
		{ "log = \"debug", ":1: log=`\"debug' is invalid" },
		{ "log = \"debug\" junk",
		  ":1: log=`\"debug\" junk' is invalid" },
		{ "log = ", ":1: log=`' is invalid" },
		{ "log = # nothing", ":1: log=`' is invalid" },
		{ "log = \"\"", ":1: log=`' is invalid" },
		{ "lgo = debug", ":1: unknown key `lgo' ignored (did you mean "
				 "`log'?)" },
		{ "R2CC_DETECTMS = 5",
		  ":1: unknown key `R2CC_DETECTMS' ignored "
		  "(did you mean `detect_ms'?)" },
		{ "frobnicate = 1", ":1: unknown key `frobnicate' ignored" },
		{ "config = /etc/r2cc.conf", ":1: `config' can only be set in "
					     "the environment (R2CC_CONFIG)" },
		{ "R2CC_CONFIG=/x", ":1: `config' can only be set in the "
				    "environment (R2CC_CONFIG); ignored" },
	};

	return cr_make_param_array(struct syntax, cases,
				   sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct syntax *c, policy_config, file_errors, .init = setup,
		  .fini = teardown, .timeout = 5)
{
	char text[256];

	snprintf(text, sizeof(text), "%s\nbackup = lazy\n", c->line);
	cr_assert_eq(load_conf(text, NULL), 1, "%s", c->line);
	cr_assert_not_null(strstr(msgs[0], c->want), "got %s", msgs[0]);
	cr_assert_eq(strncmp(msgs[0], conf_path, strlen(conf_path)), 0);
	/* The bad line is skipped, the next one still counts */
	cr_assert_eq(cfg.backup, R2CC_BACKUP_LAZY);
	cr_assert_eq(cfg.log_level, R2CC_LOG_ERR);
	cr_assert_str_eq(cfg.config_file, conf_path);
}

Test(policy_config, line_length_limit, .init = setup, .fini = teardown,
     .timeout = 5)
{
	static char text[4 * R2CC_CONF_LINE_MAX];
	size_t pad = R2CC_CONF_LINE_MAX - strlen("stats = /");

	/* Exactly 4096 bytes is fine; 4097 is reported and skipped */
	snprintf(text, sizeof(text),
		 "stats = /%s\nlog = debug\n#%s\n"
		 "log_file = /%s\nbackup = lazy",
		 repeat('s', pad), repeat('c', R2CC_CONF_LINE_MAX),
		 repeat('l', pad));
	cr_assert_eq(load_conf(text, NULL), 2, "%s", msgs[0]);
	cr_assert_eq(strlen(cfg.stats_file), pad + 1);
	cr_assert_eq(cfg.log_level, R2CC_LOG_DEBUG);
	cr_assert_str_eq(cfg.log_file, "");
	cr_assert_eq(cfg.backup, R2CC_BACKUP_LAZY);
	cr_assert_not_null(strstr(msgs[0], ":3: line longer than 4096 bytes"));
	cr_assert_not_null(strstr(msgs[1], ":4: line longer than 4096 bytes"));
}

Test(policy_config, duplicate_key_later_wins, .init = setup, .fini = teardown,
     .timeout = 5)
{
	cr_assert_eq(load_conf("log = info\nLOG = debug\n", NULL), 1);
	cr_assert_eq(cfg.log_level, R2CC_LOG_DEBUG);
	cr_assert_not_null(strstr(msgs[0], ":2: `log' was already set on "
					   "line 1"));
}

Test(policy_config, missing_config_file, .init = setup, .timeout = 5)
{
	char *env[] = { "R2CC_CONFIG=/nonexistent/r2cc.conf",
			"R2CC_BACKUP=lazy", NULL };
	int k;

	cr_assert_eq(load(env), 1);
	cr_assert_str_eq(msgs[0], "cannot read config file "
				  "`/nonexistent/r2cc.conf' (R2CC_CONFIG): No "
				  "such file or directory; ignoring it");
	cr_assert_eq(cfg.backup, R2CC_BACKUP_LAZY);
	for (k = 0; k < R2CC_CONF_NR; k++)
		if (k != R2CC_CONF_BACKUP && k != R2CC_CONF_CONFIG)
			cr_assert_str_eq(val(k), defaults[k]);
}

Test(policy_config, unreadable_config, .init = setup, .timeout = 5)
{
	char *dir[] = { "R2CC_CONFIG=/", NULL };
	char *empty[] = { "R2CC_CONFIG=", NULL };

	cr_assert_eq(load(dir), 1);
	cr_assert_not_null(strstr(msgs[0], "Is a directory"), "%s", msgs[0]);
	nmsg = nlog = 0;
	cr_assert_eq(load(empty), 1);
	cr_assert_str_eq(msgs[0], "R2CC_CONFIG=`' is invalid (accepted: a "
				  "file path shorter than 4096 bytes); "
				  "leaving it unset");
}

Test(policy_config, unknown_env, .init = setup, .timeout = 5)
{
	char *env[] = { "R2CC_LGO=debug",   "R2CC_FROB=1",    "R2CC_log=1",
			"R2CC_COLOR=never", "r2cc_log=debug", "PATH=/bin",
			"R2CC_NOEQUALS",    "R2CC_=1",	      NULL };

	cr_assert_eq(load(env), 4);
	cr_assert_str_eq(msgs[0], "unknown variable R2CC_LGO ignored (did "
				  "you mean R2CC_LOG?)");
	cr_assert_str_eq(msgs[1], "unknown variable R2CC_FROB ignored");
	cr_assert_str_eq(msgs[2], "unknown variable R2CC_log ignored (did "
				  "you mean R2CC_LOG?)");
	cr_assert_str_eq(msgs[3], "unknown variable R2CC_ ignored");
	cr_assert_eq(cfg.log_level, R2CC_LOG_ERR);
}

Test(policy_config, duplicate_env_first_wins, .init = setup, .timeout = 5)
{
	char *env[] = { "R2CC_LOG=info", "R2CC_LOG=debug", NULL };

	cr_assert_eq(load(env), 1);
	cr_assert_eq(cfg.log_level, R2CC_LOG_INFO);
	cr_assert_str_eq(msgs[0], "R2CC_LOG is set more than once; using the "
				  "first");
}

Test(policy_config, messages_go_to_log_at_warn, .init = setup, .timeout = 5)
{
	char *env[] = { "R2CC_DETECT_MS=fast", NULL };
	char want[128];

	cr_assert_eq(load(env), 1);
	snprintf(want, sizeof(want), "r2cc[%d]: ", (int)getpid());
	cr_assert_eq(strncmp(logs[0], want, strlen(want)), 0, "%s", logs[0]);
	cr_assert_eq(strncmp(logs[0] + strlen(want) + 16, "policy: ", 8), 0,
		     "%s", logs[0]);
	cr_assert_eq(log_levels[0], R2CC_LOG_WARN);

	/* Below warn the log is quiet, the hook and the count are not */
	r2cc_log_set_level(R2CC_LOG_ERR);
	nmsg = nlog = 0;
	cr_assert_eq(r2cc_config_load_report(&cfg, env, on_report, NULL), 1);
	cr_assert_eq(nmsg, 1);
	cr_assert_eq(nlog, 0);
	cr_assert_eq(r2cc_config_load(&cfg, env), 1);
}

Test(policy_config, streaming_parser, .init = setup, .timeout = 5)
{
	static const char buf[] = "backup = lazyXXXX";
	static const char nul[] = "log = de\0bug";
	struct r2cc_conf_parser p;

	r2cc_config_init(&cfg);
	r2cc_conf_parse_init(&p, &cfg, "fuzz.conf");
	p.report = on_report;
	cr_assert_eq(r2cc_conf_parse_line(&p, buf, 13), 0);
	cr_assert_eq(r2cc_conf_parse_line(&p, "log = info\n", 11), 0);
	cr_assert_eq(r2cc_conf_parse_line(&p, nul, sizeof(nul) - 1), -EINVAL);
	cr_assert_eq(r2cc_conf_parse_line(&p, "", 0), 0);
	cr_assert_eq(r2cc_conf_parse_line(&p, "ctrl_port = 0", 13), -EINVAL);
	cr_assert_eq(r2cc_conf_parse_finish(&p), 2);
	cr_assert_eq(cfg.backup, R2CC_BACKUP_LAZY);
	cr_assert_eq(cfg.log_level, R2CC_LOG_INFO);
	cr_assert_str_eq(msgs[0], "fuzz.conf:3: line contains a NUL byte; "
				  "skipped");
	cr_assert_eq(strncmp(msgs[1], "fuzz.conf:5: ctrl_port=`0'", 26), 0);
}

Test(policy_config, format_errors, .init = setup, .timeout = 5)
{
	char small[4];

	r2cc_config_init(&cfg);
	cr_assert_eq(r2cc_config_format(&cfg, -1, small, sizeof(small)),
		     -EINVAL);
	cr_assert_eq(r2cc_config_format(&cfg, R2CC_CONF_NR, small,
					sizeof(small)),
		     -EINVAL);
	cr_assert_eq(r2cc_config_format(&cfg, R2CC_CONF_CTRL_PORT, small,
					sizeof(small)),
		     -ENOSPC);
	cr_assert_eq(r2cc_config_format(&cfg, R2CC_CONF_LOG, small,
					sizeof(small)),
		     0);
	cr_assert_str_eq(small, "err");
}

Test(policy_config, dump_reads_back, .init = setup, .fini = teardown,
     .timeout = 5)
{
	static struct r2cc_config first;
	struct r2cc_conf_parser p;
	char *out = NULL, *line, *save;
	size_t len = 0;
	FILE *f;

	cr_assert_eq(load_conf("detect_ms = 100\nsecret_file = \"/a b/#c\"\n"
			       "rails = mlx5_0/1,mlx5_1\n",
			       "R2CC_LOG=debug"),
		     0);
	f = open_memstream(&out, &len);
	cr_assert_eq(r2cc_config_dump(&cfg, f), 0);
	fclose(f);
	cr_assert_not_null(strstr(out, "# r2cc " R2CC_VERSION " effective"));
	cr_assert(strstr(out, "\nlog = debug ") && strstr(out, " # env\n"),
		  "%s", out);
	cr_assert_not_null(strstr(out, "\ndetect_ms = 100 "), "%s", out);
	cr_assert_not_null(strstr(out, " # file:1\n"), "%s", out);
	cr_assert_not_null(strstr(out, "\nsecret_file = \"/a b/#c\" "));
	cr_assert_not_null(strstr(out, "\n#log_file = "), "%s", out);
	cr_assert_not_null(strstr(out, "# default (unset)\n"), "%s", out);
	cr_assert_not_null(strstr(out, "\n#config = /tmp/r2cc_conf_"));

	/* Parsing the dump gives the same values back, without problems */
	first = cfg;
	r2cc_config_init(&cfg);
	r2cc_conf_parse_init(&p, &cfg, "dump");
	p.report = on_report;
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		r2cc_conf_parse_line(&p, line, strlen(line));
	cr_assert_eq(r2cc_conf_parse_finish(&p), 0, "%s", msgs[0]);
	for (int k = 0; k < R2CC_CONF_CONFIG; k++) {
		char a[PATH_MAX];

		cr_assert_eq(r2cc_config_format(&first, k, a, sizeof(a)), 0);
		cr_assert_str_eq(val(k), a, "%s", r2cc_config_key_name(k));
	}
	free(out);
}
