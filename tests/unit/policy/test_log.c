/* SPDX-License-Identifier: MIT */
/*
 * test_log.c - r2cc_log(): prefix and format, level filtering, errno,
 * the hook, the log file (mode 0600, append) and concurrent writers.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "policy.h"

static char got[8][R2CC_LOG_LINE_MAX];
static size_t got_len[8];
static enum r2cc_log_level got_level[8];
static int ngot;

static void capture(enum r2cc_log_level level, const char *line, size_t len)
{
	if (ngot < 8) {
		memcpy(got[ngot], line, len + 1);
		got_len[ngot] = len;
		got_level[ngot] = level;
	}
	ngot++;
	errno = EIO; /* a hook that clobbers errno must not leak it */
}

/*
 * @line without its time of day, which must be "HH:MM:SS.uuuuuu " right
 * after the "r2cc[PID]: " prefix and a time that can be.
 */
static const char *untimed(const char *line)
{
	static char out[R2CC_LOG_LINE_MAX];
	unsigned int h, m, s, us;
	const char *t = strstr(line, "]: ");
	int n = 0;

	cr_assert_not_null(t, "no prefix: %s", line);
	t += 3;
	cr_assert_eq(sscanf(t, "%2u:%2u:%2u.%6u %n", &h, &m, &s, &us, &n), 4,
		     "no time: %s", line);
	cr_assert_eq(n, 16, "time is not HH:MM:SS.uuuuuu: %s", line);
	cr_assert(h < 24 && m < 60 && s < 60 && us < 1000000, "%s", line);
	snprintf(out, sizeof(out), "%.*s%s", (int)(t - line), line, t + n);
	return out;
}

static void setup(void)
{
	ngot = 0;
	r2cc_log_set_fn(capture);
	r2cc_log_set_level(R2CC_LOG_DEBUG);
}

Test(policy_log, prefix_and_format, .init = setup, .timeout = 5)
{
	char want[256];
	int line;

	line = __LINE__ + 1;
	r2cc_info("hello %d `%s'", 42, "x");
	snprintf(want, sizeof(want), "r2cc[%d]: test: %s:%d: hello 42 `x'\n",
		 (int)getpid(), __func__, line);
	cr_assert_eq(ngot, 1);
	cr_assert_str_eq(untimed(got[0]), want);
	cr_assert_eq(got_len[0], strlen(want) + 16);
	cr_assert_eq(got_level[0], R2CC_LOG_INFO);
}

Test(policy_log, explicit_module_and_single_newline, .init = setup,
     .timeout = 5)
{
	char want[256];

	r2cc_log(R2CC_LOG_ERR, "migrate", "replay", 7, "done\n");
	snprintf(want, sizeof(want), "r2cc[%d]: migrate: replay:7: done\n",
		 (int)getpid());
	cr_assert_str_eq(untimed(got[0]), want);
}

Test(policy_log, long_message_is_cut, .init = setup, .timeout = 5)
{
	static char big[3 * R2CC_LOG_LINE_MAX];

	memset(big, 'a', sizeof(big) - 1);
	r2cc_warn("%s", big);
	cr_assert_eq(ngot, 1);
	cr_assert_eq(got_len[0], R2CC_LOG_LINE_MAX - 1);
	cr_assert_eq(strlen(got[0]), R2CC_LOG_LINE_MAX - 1);
	cr_assert_str_eq(got[0] + got_len[0] - 4, "...\n");
}

struct level_case {
	enum r2cc_log_level set, msg;
	int emitted;
};

ParameterizedTestParameters(policy_log, filtering)
{
	static struct level_case cases[] = {
		{ R2CC_LOG_OFF, R2CC_LOG_ERR, 0 },
		{ R2CC_LOG_ERR, R2CC_LOG_ERR, 1 },
		{ R2CC_LOG_ERR, R2CC_LOG_WARN, 0 },
		{ R2CC_LOG_WARN, R2CC_LOG_ERR, 1 },
		{ R2CC_LOG_WARN, R2CC_LOG_WARN, 1 },
		{ R2CC_LOG_WARN, R2CC_LOG_INFO, 0 },
		{ R2CC_LOG_INFO, R2CC_LOG_INFO, 1 },
		{ R2CC_LOG_INFO, R2CC_LOG_DEBUG, 0 },
		{ R2CC_LOG_DEBUG, R2CC_LOG_DEBUG, 1 },
		{ R2CC_LOG_DEBUG, R2CC_LOG_OFF, 0 },
	};

	return cr_make_param_array(struct level_case, cases,
				   sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct level_case *c, policy_log, filtering, .init = setup,
		  .timeout = 5)
{
	r2cc_log_set_level(c->set);
	r2cc_log_at(c->msg, "level %d at %d", c->msg, c->set);
	cr_assert_eq(ngot, c->emitted, "set %d, msg %d", c->set, c->msg);
}

Test(policy_log, default_level_is_warn, .timeout = 5)
{
	cr_assert_eq(r2cc_log_get_level(), R2CC_LOG_WARN);
}

Test(policy_log, set_level_clamps_and_returns_previous, .timeout = 5)
{
	cr_assert_eq(r2cc_log_set_level(R2CC_LOG_INFO), R2CC_LOG_WARN);
	cr_assert_eq(r2cc_log_set_level((enum r2cc_log_level)99),
		     R2CC_LOG_INFO);
	cr_assert_eq(r2cc_log_get_level(), R2CC_LOG_DEBUG);
	r2cc_log_set_level((enum r2cc_log_level) - 3);
	cr_assert_eq(r2cc_log_get_level(), R2CC_LOG_OFF);
}

Test(policy_log, set_fn_returns_previous, .timeout = 5)
{
	cr_assert_null(r2cc_log_set_fn(capture));
	cr_assert_eq(r2cc_log_set_fn(NULL), capture);
	cr_assert_null(r2cc_log_set_fn(NULL));
}

Test(policy_log, errno_preserved, .init = setup, .timeout = 5)
{
	errno = EBADMSG;
	r2cc_err("emitted: %s", strerror(ENOENT));
	cr_assert_eq(ngot, 1);
	cr_assert_eq(errno, EBADMSG);

	r2cc_log_set_level(R2CC_LOG_OFF);
	errno = ENOTCONN;
	r2cc_err("filtered");
	cr_assert_eq(errno, ENOTCONN);

	/* A failing write(2) must not leak its errno either */
	r2cc_log_set_fn(NULL);
	r2cc_log_set_level(R2CC_LOG_ERR);
	cr_assert_eq(r2cc_log_open_file("/dev/full"), 0);
	errno = EAGAIN;
	r2cc_err("write(2) fails with ENOSPC");
	cr_assert_eq(errno, EAGAIN);
}

static void redirect_all(void)
{
	cr_redirect_stdout();
	cr_redirect_stderr();
}

Test(policy_log, stderr_by_default_never_stdout, .init = redirect_all,
     .timeout = 5)
{
	char want[256], buf[512];
	int line;

	line = __LINE__ + 1;
	r2cc_err("to stderr");
	snprintf(want, sizeof(want), "r2cc[%d]: test: %s:%d: to stderr\n",
		 (int)getpid(), __func__, line);
	fflush(stdout);
	cr_assert_stdout_eq_str("");
	fflush(stderr);
	memset(buf, 0, sizeof(buf));
	cr_assert_gt(fread(buf, 1, sizeof(buf) - 1, cr_get_redirected_stderr()),
		     0);
	cr_assert_str_eq(untimed(buf), want);
}

static char tmpdir[64];

static void mk_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/r2cc_log_XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void rm_tmpdir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	cr_assert_eq(system(cmd), 0);
}

static size_t slurp(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	n = read(fd, buf, size - 1);
	cr_assert_geq(n, 0);
	buf[n] = '\0';
	close(fd);
	return (size_t)n;
}

Test(policy_log, file_mode_0600_append_cloexec, .init = mk_tmpdir,
     .fini = rm_tmpdir, .timeout = 5)
{
	char path[128], buf[1024], want[256];
	struct stat st;
	int fd, line;

	umask(0); /* so that the mode we ask for is the mode we get */
	snprintf(path, sizeof(path), "%s/r2cc.log", tmpdir);
	cr_assert_eq(r2cc_log_open_file(path), 0);
	line = __LINE__ + 1;
	r2cc_err("first");
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
	snprintf(want, sizeof(want), "r2cc[%d]: test: %s:%d: first\n",
		 (int)getpid(), __func__, line);
	slurp(path, buf, sizeof(buf));
	cr_assert_str_eq(untimed(buf), want);

	/* The descriptor is close-on-exec */
	for (fd = 3; fd < 64; fd++) {
		char link[64], target[256];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, target, sizeof(target) - 1);
		if (n < 0)
			continue;
		target[n] = '\0';
		if (!strcmp(target, path))
			cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	}
}

Test(policy_log, file_appends_and_can_be_replaced, .init = mk_tmpdir,
     .fini = rm_tmpdir, .timeout = 5)
{
	char a[128], b[128], buf[2048];

	snprintf(a, sizeof(a), "%s/a.log", tmpdir);
	snprintf(b, sizeof(b), "%s/b.log", tmpdir);
	cr_assert_eq(r2cc_log_open_file(a), 0);
	r2cc_err("one");
	cr_assert_eq(r2cc_log_open_file(a), 0);
	r2cc_err("two");
	slurp(a, buf, sizeof(buf));
	cr_assert_not_null(strstr(buf, ": one\n"));
	cr_assert_not_null(strstr(buf, ": two\n"), "O_APPEND lost: %s", buf);

	cr_assert_eq(r2cc_log_open_file(b), 0);
	r2cc_err("three");
	slurp(a, buf, sizeof(buf));
	cr_assert_null(strstr(buf, "three"));
	slurp(b, buf, sizeof(buf));
	cr_assert_not_null(strstr(buf, ": three\n"));
}

Test(policy_log, open_failure_keeps_sink, .init = mk_tmpdir, .fini = rm_tmpdir,
     .timeout = 5)
{
	char a[128], bad[160], buf[1024];

	snprintf(a, sizeof(a), "%s/a.log", tmpdir);
	snprintf(bad, sizeof(bad), "%s/missing/dir.log", tmpdir);
	cr_assert_eq(r2cc_log_open_file(a), 0);
	errno = 0;
	cr_assert_eq(r2cc_log_open_file(bad), -ENOENT);
	cr_assert_eq(errno, 0);
	r2cc_err("still here");
	slurp(a, buf, sizeof(buf));
	cr_assert_not_null(strstr(buf, "still here"));
}

Test(policy_log, back_to_stderr, .init = mk_tmpdir, .fini = rm_tmpdir,
     .timeout = 5)
{
	char a[128], buf[1024];

	cr_redirect_stderr();
	cr_assert_eq(r2cc_log_open_file(NULL), 0); /* no file yet: no-op */
	snprintf(a, sizeof(a), "%s/a.log", tmpdir);
	cr_assert_eq(r2cc_log_open_file(a), 0);
	cr_assert_eq(r2cc_log_open_file(""), 0);
	r2cc_err("on stderr again");
	cr_assert_eq(slurp(a, buf, sizeof(buf)), 0);
	cr_assert_stderr_neq_str("");
}

#define THREADS 8
#define PER_THREAD 200

static void *writer(void *arg)
{
	int i;

	for (i = 0; i < PER_THREAD; i++)
		r2cc_err("thread %ld line %d %s", (long)(intptr_t)arg, i,
			 "padding-padding-padding-padding-padding-padding");
	return NULL;
}

Test(policy_log, concurrent_lines_stay_whole, .init = mk_tmpdir,
     .fini = rm_tmpdir, .timeout = 5)
{
	char path[128], line[256];
	pthread_t t[THREADS];
	int lines = 0;
	long i;
	FILE *f;

	snprintf(path, sizeof(path), "%s/mt.log", tmpdir);
	cr_assert_eq(r2cc_log_open_file(path), 0);
	for (i = 0; i < THREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, writer,
					    (void *)(intptr_t)i),
			     0);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		cr_assert_eq(strncmp(line, "r2cc[", 5), 0, "torn: %s", line);
		cr_assert_not_null(strstr(line, "padding-padding\n"),
				   "torn: %s", line);
		lines++;
	}
	fclose(f);
	cr_assert_eq(lines, THREADS * PER_THREAD);
}

Test(policy_log, datapath_debug_compiles_out, .init = setup, .timeout = 5)
{
	int evaluated = 0;

	r2cc_dbg_dp("fast path %d", ++evaluated);
	cr_assert_eq(ngot, R2CC_DATAPATH_DEBUG ? 1 : 0);
	cr_assert_eq(evaluated, R2CC_DATAPATH_DEBUG ? 1 : 0);
}

/* The log limit's window now (its clock, its length) */
static uint64_t window(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec / R2CC_LOG_WINDOW_S;
}

/* A line a peer can make come at any rate: a burst, then held back and
 * counted until the next window, whose first line says how many; the
 * burst's last line says that the rest will be held back. */
Test(policy_log, a_limited_line_is_held_back_past_its_burst, .timeout = 30)
{
	struct r2cc_log_limit lim;
	enum r2cc_log_say say;
	uint64_t held, w0, w1;
	int i, last, passed, tries = 0;

	r2cc_log_set_level(R2CC_LOG_INFO);
	do { /* within one window (measured again if one turned) */
		memset(&lim, 0, sizeof(lim));
		passed = 0;
		w0 = window();
		last = -1;
		for (i = 0; i < 3 * R2CC_LOG_BURST; i++) {
			say = r2cc_log_limit_pass(&lim, &held);
			passed += say != R2CC_LOG_HOLD;
			if (say == R2CC_LOG_SAY_LAST)
				last = i;
		}
		w1 = window();
	} while (w0 != w1 && ++tries < 3);
	cr_assert_eq(passed, R2CC_LOG_BURST, "a burst let through");
	cr_assert_eq(last, R2CC_LOG_BURST - 1, "its last line says so");
	cr_assert_str_neq(r2cc_log_limit_tail(R2CC_LOG_SAY_LAST), "");
	cr_assert_str_eq(r2cc_log_limit_tail(R2CC_LOG_SAY), "");
	cr_assert_eq(atomic_load(&lim.held), (uint64_t)(2 * R2CC_LOG_BURST),
		     "the rest held back, counted");
	/* the next window: its first line says what was held back */
	atomic_store(&lim.window, 0);
	cr_assert(r2cc_log_limit_pass(&lim, &held));
	cr_assert_eq(held, (uint64_t)(3 * R2CC_LOG_BURST - passed));
	/* at debug level, every line goes */
	r2cc_log_set_level(R2CC_LOG_DEBUG);
	for (i = 0; i < 3 * R2CC_LOG_BURST; i++)
		cr_assert(r2cc_log_limit_pass(&lim, &held));
	r2cc_log_set_level(R2CC_LOG_WARN);
}
