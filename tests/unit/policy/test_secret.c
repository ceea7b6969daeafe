/* SPDX-License-Identifier: MIT */
/*
 * test_secret.c - the job secret file's rules (r2cc_secret_open()): type,
 * symbolic link, owner, mode, size limits; one message per problem, each
 * naming the file, also logged, and never the secret's bytes.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define NMSG 8
#define FILL 'k' /* every secret byte: no message may hold a run of them */

static char msgs[NMSG][600];
static int nmsg, nlog;
static char dir[64], path[96];

static void on_report(void *arg, const char *msg)
{
	cr_assert_eq(arg, &nmsg);
	if (nmsg < NMSG)
		snprintf(msgs[nmsg], sizeof(msgs[0]), "%s", msg);
	nmsg++;
}

static void on_log(enum r2cc_log_level level, const char *line, size_t len)
{
	(void)len;
	cr_assert_eq(level, R2CC_LOG_ERR, "%s", line);
	cr_assert_null(strstr(line, "kkkkkkkk"), "the secret logged: %s", line);
	nlog++;
}

static void setup(void)
{
	nmsg = nlog = 0;
	r2cc_log_set_fn(on_log);
	r2cc_log_set_level(R2CC_LOG_DEBUG);
	strcpy(dir, "/tmp/r2cc-secret-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/secret", dir);
}

static void teardown(void)
{
	static const char *const names[] = { "secret", "link", "fifo", "sub" };
	char p[128];

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		if (unlink(p))
			rmdir(p);
	}
	rmdir(dir);
	r2cc_log_set_fn(NULL);
}

/* @len bytes of FILL at path, then chmod @mode */
static void make_secret(size_t len, mode_t mode)
{
	char b[2048];
	int fd;

	memset(b, FILL, sizeof(b));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, b, len), (ssize_t)len);
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
}

/* r2cc_secret_open(@p) is refused with @want, in one message saying @says */
static void refused(const char *p, int want, const char *says)
{
	struct stat st;

	cr_assert_eq(r2cc_secret_open(p, &st, on_report, &nmsg), want, "%s", p);
	cr_assert_eq(nmsg, 1, "%d messages, first: %s", nmsg, msgs[0]);
	cr_assert_eq(nlog, 1, "each message is logged");
	cr_assert_eq(strncmp(msgs[0], "secret file ", 12), 0, "%s", msgs[0]);
	cr_assert_not_null(strstr(msgs[0], p), "names the file: %s", msgs[0]);
	cr_assert_not_null(strstr(msgs[0], says), "%s", msgs[0]);
	cr_assert_not_null(strstr(msgs[0], "must"), "what is required: %s",
			   msgs[0]);
}

struct file_case {
	size_t len;
	mode_t mode;
	int want; /* 0: accepted */
	char says[48]; /* in the message */
};

ParameterizedTestParameters(secret, file)
{
	static struct file_case cases[] = {
		{ 64, 0600, 0, "" },
		{ 32, 0600, 0, "" },
		{ 1024, 0600, 0, "" },
		{ 64, 0400, 0, "" },
		{ 64, 0644, -EPERM, "mode 0644 (group or others have access)" },
		{ 64, 0640, -EPERM, "mode 0640" },
		{ 64, 0604, -EPERM, "mode 0604" },
		{ 64, 0700, -EPERM, "mode 0700 (execute, set-id or sticky" },
		{ 64, 04600, -EPERM, "mode 4600" },
		{ 31, 0600, -EINVAL, "31 bytes; must hold 32..1024 bytes" },
		{ 0, 0600, -EINVAL, "0 bytes" },
		{ 1025, 0600, -EINVAL, "1025 bytes; must hold 32..1024 bytes" },
	};

	return cr_make_param_array(struct file_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct file_case *c, secret, file, .init = setup,
		  .fini = teardown, .timeout = 5)
{
	struct stat st;
	char b[8];
	int fd;

	make_secret(c->len, c->mode);
	if (c->want) {
		refused(path, c->want, c->says);
		if (c->mode != 0600)
			cr_assert_not_null(strstr(msgs[0], "0600 or stricter"));
		return;
	}
	fd = r2cc_secret_open(path, &st, on_report, &nmsg);
	cr_assert_geq(fd, 0, "%zu bytes, mode %04o: %s", c->len,
		      (unsigned int)c->mode, msgs[0]);
	cr_assert_eq(nmsg + nlog, 0, "nothing to say about a good file");
	cr_assert_eq(st.st_size, (off_t)c->len);
	cr_assert_eq(st.st_mode & 07777, c->mode);
	cr_assert_eq(read(fd, b, 1), 1, "open for reading, at the start");
	cr_assert_eq(b[0], FILL);
	cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
}

/* Mode and size wrong together: two messages, and -EPERM wins */
Test(secret, each_problem_reported, .init = setup, .fini = teardown,
     .timeout = 5)
{
	make_secret(31, 0644);
	cr_assert_eq(r2cc_secret_open(path, NULL, on_report, &nmsg), -EPERM);
	cr_assert_eq(nmsg, 2);
	cr_assert_eq(nlog, 2);
	cr_assert_not_null(strstr(msgs[0], "mode 0644"), "%s", msgs[0]);
	cr_assert_not_null(strstr(msgs[1], "31 bytes"), "%s", msgs[1]);
}

Test(secret, missing, .init = setup, .fini = teardown, .timeout = 5)
{
	refused(path, -ENOENT, "No such file or directory; must exist");
	cr_assert_not_null(strstr(msgs[0], "r2cc-ctl secret new"), "%s",
			   msgs[0]);
}

Test(secret, symlink, .init = setup, .fini = teardown, .timeout = 5)
{
	char link[128];

	make_secret(64, 0600);
	snprintf(link, sizeof(link), "%s/link", dir);
	cr_assert_eq(symlink(path, link), 0);
	refused(link, -EPERM, "a symbolic link; must be the file itself");
}

Test(secret, dangling_symlink, .init = setup, .fini = teardown, .timeout = 5)
{
	char link[128];

	snprintf(link, sizeof(link), "%s/link", dir);
	cr_assert_eq(symlink(path, link), 0);
	refused(link, -EPERM, "a symbolic link");
}

Test(secret, directory, .init = setup, .fini = teardown, .timeout = 5)
{
	char sub[128];

	snprintf(sub, sizeof(sub), "%s/sub", dir);
	cr_assert_eq(mkdir(sub, 0700), 0);
	refused(sub, -EPERM,
		"not a regular file (a directory); must be a regular file");
}

Test(secret, fifo, .init = setup, .fini = teardown, .timeout = 5)
{
	char fifo[128];

	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	refused(fifo, -EPERM, "not a regular file (a FIFO)");
}

Test(secret, device, .init = setup, .fini = teardown, .timeout = 5)
{
	refused("/dev/null", -EPERM, "(a character device)");
}

/* Root reads any file: EACCES is seen only as another user */
Test(secret, unreadable, .init = setup, .fini = teardown, .timeout = 5)
{
	if (geteuid() == 0)
		cr_skip_test("root reads a mode 0200 file");
	make_secret(64, 0200);
	refused(path, -EACCES, "Permission denied; must be readable by uid");
}

/* Only root can give a file away; as anyone else there is nothing to test */
Test(secret, other_owner, .init = setup, .fini = teardown, .timeout = 5)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to chown a file to another user");
	make_secret(64, 0600);
	cr_assert_eq(chown(path, 65534, 65534), 0);
	refused(path, -EPERM, "owned by uid 65534; must be owned by uid 0");
}

/* No hook: still logged, still refused */
Test(secret, no_hook, .init = setup, .fini = teardown, .timeout = 5)
{
	make_secret(64, 0644);
	cr_assert_eq(r2cc_secret_open(path, NULL, NULL, NULL), -EPERM);
	cr_assert_eq(nlog, 1);
}
