/* SPDX-License-Identifier: MIT */
/*
 * test_ctrl_key.c - the control channel's key: derived from the job's
 * secret and id, and the secret file's checks (size, mode, owner, kind).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctrl_msg.h"
#include "log_capture.h"
#include "policy.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define JOB 0x1122334455667788ULL

static void setup(void)
{
	r2cc_log_set_fn(capture);
}

Test(ctrl_msg, key_derive, .init = setup, .timeout = 5)
{
	static const uint8_t label[] = "r2cc-ctrl-v1";
	crypto_auth_hmacsha256_state st;
	struct r2cc_ctrl_key a, b;
	uint8_t secret[R2CC_SECRET_MAX + 1] = { 1, 2, 3 };
	uint8_t job_le[8] = { 7 }, want[32];

	cr_assert_eq(r2cc_ctrl_key_derive(&a, secret, 31, 1), -EINVAL);
	cr_assert_eq(r2cc_ctrl_key_derive(&a, secret, 1025, 1), -EINVAL);
	cr_assert_eq(r2cc_ctrl_key_derive(&a, secret, 1024, 1), 0);
	cr_assert_eq(r2cc_ctrl_key_derive(&a, secret, 32, 7), 0);
	cr_assert_eq(r2cc_ctrl_key_derive(&b, secret, 32, 7), 0);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0, "deterministic");
	cr_assert_eq(a.job, 7);
	/* HMAC-SHA-256(secret, "r2cc-ctrl-v1" | le64(job)) */
	crypto_auth_hmacsha256_init(&st, secret, 32);
	crypto_auth_hmacsha256_update(&st, label, sizeof(label) - 1);
	crypto_auth_hmacsha256_update(&st, job_le, 8);
	crypto_auth_hmacsha256_final(&st, want);
	cr_assert_eq(memcmp(a.k, want, 32), 0);
	cr_assert_eq(r2cc_ctrl_key_derive(&b, secret, 32, 8), 0);
	cr_assert_neq(memcmp(a.k, b.k, 32), 0, "one key per job");
	r2cc_ctrl_key_wipe(&a);
	cr_assert_eq(a.job, 0);
	cr_assert_eq(sodium_is_zero(a.k, 32), 1);
}

/* Key files live in a fresh directory per test */
static char dir[64];

static void key_setup(void)
{
	setup();
	strcpy(dir, "/tmp/r2cc-ctrl-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void key_teardown(void)
{
	static const char *const names[] = { "secret", "link", "fifo" };
	char path[96];

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

static const char *secret_file(size_t len, mode_t mode)
{
	static char path[96];
	uint8_t b[2048];
	int fd;

	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)(i * 7 + 1);
	snprintf(path, sizeof(path), "%s/secret", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, b, len), (ssize_t)len);
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
	return path;
}

struct file_case {
	size_t len;
	mode_t mode;
	int want;
	char says[40]; /* in the log line */
};

ParameterizedTestParameters(ctrl_key, file)
{
	static struct file_case cases[] = {
		{ 32, 0600, 0, "" },
		{ 1024, 0600, 0, "" },
		{ 64, 0400, 0, "" },
		{ 64, 0644, -EPERM, "must be 0600 or stricter" },
		{ 64, 0640, -EPERM, "mode 0640" },
		{ 64, 0604, -EPERM, "mode 0604" },
		{ 64, 0700, -EPERM, "mode 0700" },
		{ 64, 04600, -EPERM, "mode 4600" },
		{ 31, 0600, -EINVAL, "31 bytes" },
		{ 0, 0600, -EINVAL, "0 bytes" },
		{ 1025, 0600, -EINVAL, "1025 bytes; must hold 32..1024" },
	};

	return cr_make_param_array(struct file_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct file_case *c, ctrl_key, file, .init = key_setup,
		  .fini = key_teardown, .timeout = 5)
{
	const char *path = secret_file(c->len, c->mode);
	struct r2cc_ctrl_key k, want;
	uint8_t b[1024];

	logged[0] = 0;
	cr_assert_eq(r2cc_ctrl_key_load(&k, path, JOB), c->want,
		     "%zu bytes, mode %04o", c->len, (unsigned int)c->mode);
	if (c->want) {
		cr_assert_not_null(strstr(logged, c->says), "logged: %s",
				   logged);
		cr_assert_not_null(strstr(logged, path));
		return;
	}
	for (size_t i = 0; i < c->len; i++)
		b[i] = (uint8_t)(i * 7 + 1);
	cr_assert_eq(r2cc_ctrl_key_derive(&want, b, c->len, JOB), 0);
	cr_assert_eq(memcmp(&k, &want, sizeof(k)), 0);
}

Test(ctrl_key, symlink_refused, .init = key_setup, .fini = key_teardown,
     .timeout = 5)
{
	char link[96];
	struct r2cc_ctrl_key k;
	const char *path = secret_file(64, 0600);

	snprintf(link, sizeof(link), "%s/link", dir);
	cr_assert_eq(symlink(path, link), 0);
	cr_assert_eq(r2cc_ctrl_key_load(&k, link, JOB), -EPERM);
	cr_assert_not_null(strstr(logged, "symbolic link"), "%s", logged);
	cr_assert_eq(r2cc_ctrl_key_load(&k, path, JOB), 0);
}

Test(ctrl_key, not_regular, .init = key_setup, .fini = key_teardown,
     .timeout = 5)
{
	char fifo[96];
	struct r2cc_ctrl_key k;

	cr_assert_eq(r2cc_ctrl_key_load(&k, dir, JOB), -EPERM, "a directory");
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(r2cc_ctrl_key_load(&k, fifo, JOB), -EPERM, "a FIFO");
	cr_assert_not_null(strstr(logged, "not a regular file"));
	cr_assert_eq(r2cc_ctrl_key_load(&k, "/dev/null", JOB), -EPERM);
}

Test(ctrl_key, missing, .init = key_setup, .fini = key_teardown, .timeout = 5)
{
	char path[96];
	struct r2cc_ctrl_key k;

	snprintf(path, sizeof(path), "%s/none", dir);
	cr_assert_eq(r2cc_ctrl_key_load(&k, path, JOB), -ENOENT);
	cr_assert_not_null(strstr(logged, "No such file"), "%s", logged);
}

/* Only root can give a file away; as anyone else there is nothing to test */
Test(ctrl_key, other_owner, .init = key_setup, .fini = key_teardown,
     .timeout = 5)
{
	struct r2cc_ctrl_key k;
	const char *path;

	if (geteuid() != 0)
		cr_skip_test("needs root to chown a file to another user");
	path = secret_file(64, 0600);
	cr_assert_eq(chown(path, 65534, 65534), 0);
	cr_assert_eq(r2cc_ctrl_key_load(&k, path, JOB), -EPERM);
	cr_assert_not_null(strstr(logged, "owned by uid 65534"), "%s", logged);
}
