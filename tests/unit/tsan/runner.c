/* SPDX-License-Identifier: MIT */
/*
 * runner.c (tests/unit/tsan) - runs the tests criterion.h here registers,
 * for the ThreadSanitizer build: with no argument, each test (each
 * parameter of a parameterized one) in a fresh exec of this program, one
 * after the other, killed past ten times its timeout (TSan is slow); the
 * exec runs one ("--one INDEX"): its suite's or its own init, the test,
 * fini. A failed check, a TSan report (TSAN_OPTIONS exitcode, 66 by
 * default) or a crash fails it. Exit 0 when every test passed.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "criterion/criterion.h"
#include "criterion/redirect.h"

static struct r2cc_ut *tests;
static struct r2cc_ut_suite *suites;
static _Atomic int failures; /* (checks may run on a test's threads) */

void r2cc_ut_add(struct r2cc_ut *t)
{
	t->next = tests;
	tests = t;
}

void r2cc_ut_add_suite(struct r2cc_ut_suite *s)
{
	s->next = suites;
	suites = s;
}

void r2cc_ut_fail(const char *file, int line, bool fatal, const char *expr,
		  const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: check failed: %s:", file, line, expr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	failures++;
	if (fatal)
		_exit(1);
}

void r2cc_ut_skip(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "skipped:");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	_exit(0);
}

void r2cc_ut_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static FILE *redirected[2];

static void redirect(int fd)
{
	FILE *f = tmpfile();

	if (!f || dup2(fileno(f), fd) < 0) {
		perror("redirect");
		_exit(2);
	}
	redirected[fd - 1] = f;
}

void cr_redirect_stdout(void)
{
	fflush(stdout);
	redirect(STDOUT_FILENO);
}

void cr_redirect_stderr(void)
{
	fflush(stderr);
	redirect(STDERR_FILENO);
}

static FILE *got(int fd)
{
	fflush(fd == STDOUT_FILENO ? stdout : stderr);
	if (redirected[fd - 1])
		rewind(redirected[fd - 1]);
	return redirected[fd - 1];
}

FILE *cr_get_redirected_stdout(void)
{
	return got(STDOUT_FILENO);
}

FILE *cr_get_redirected_stderr(void)
{
	return got(STDERR_FILENO);
}

bool r2cc_ut_output_is(FILE *f, const char *s)
{
	size_t n = strlen(s);
	char buf[4096];

	if (!f || n >= sizeof(buf))
		return false;
	return fread(buf, 1, sizeof(buf), f) == n && !memcmp(buf, s, n);
}

static const struct r2cc_ut_suite *suite_of(const struct r2cc_ut *t)
{
	const struct r2cc_ut_suite *s;

	for (s = suites; s; s = s->next)
		if (!strcmp(s->name, t->suite))
			return s;
	return NULL;
}

/* The @i-th run: its test and parameter (-1: none); NULL past the last */
static struct r2cc_ut *nth(long i, long *param)
{
	struct r2cc_ut *t;

	for (t = tests; t; t = t->next) {
		long n = t->params ? (long)t->params().n : 1;

		if (i < n) {
			*param = t->params ? i : -1;
			return t;
		}
		i -= n;
	}
	return NULL;
}

static int run_one(long i)
{
	long param;
	struct r2cc_ut *t = nth(i, &param);
	const struct r2cc_ut_suite *s;
	void (*init)(void), (*fini)(void);

	if (!t)
		return 2;
	s = suite_of(t);
	init = t->init ? t->init : s ? s->init : NULL;
	fini = t->fini ? t->fini : s ? s->fini : NULL;
	if (init)
		init();
	if (param >= 0) {
		struct r2cc_ut_params p = t->params();

		t->pfn((char *)p.arr + (size_t)param * p.size);
	} else {
		t->fn();
	}
	if (fini)
		fini();
	return failures ? 1 : 0;
}

static double timeout_of(const struct r2cc_ut *t)
{
	const struct r2cc_ut_suite *s = suite_of(t);
	double to = t->timeout > 0	? t->timeout :
		    s && s->timeout > 0 ? s->timeout :
					  60;

	return 10 * to;
}

static int run_all(const char *self)
{
	int passed = 0, failed = 0, skipped = 0;
	long i, param;
	struct r2cc_ut *t;

	for (i = 0; (t = nth(i, &param)); i++) {
		const struct r2cc_ut_suite *s = suite_of(t);
		char arg[32];
		struct timespec t0, now;
		int st = 0;
		pid_t pid;

		if (t->disabled || (s && s->disabled)) {
			skipped++;
			continue;
		}
		fflush(NULL);
		snprintf(arg, sizeof(arg), "%ld", i);
		pid = fork();
		if (pid == 0) {
			execl(self, self, "--one", arg, (char *)NULL);
			_exit(127);
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			if (waitpid(pid, &st, WNOHANG) == pid)
				break;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - t0.tv_sec > timeout_of(t)) {
				kill(pid, SIGKILL);
				waitpid(pid, &st, 0);
				fprintf(stderr, "%s::%s: timed out\n", t->suite,
					t->name);
				break;
			}
			usleep(10000);
		}
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			passed++;
			continue;
		}
		failed++;
		printf("[FAIL] %s::%s", t->suite, t->name);
		if (param >= 0)
			printf(" (parameter %ld)", param);
		if (WIFEXITED(st))
			printf(": exit %d\n", WEXITSTATUS(st));
		else
			printf(": signal %d\n",
			       WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	}
	printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | "
	       "Skipped: %d\n",
	       passed + failed, passed, failed, skipped);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--one"))
		return run_one(strtol(argv[2], NULL, 10));
	if (argc != 1) {
		fprintf(stderr, "usage: %s [--one INDEX]\n", argv[0]);
		return 2;
	}
	return run_all("/proc/self/exe");
}
