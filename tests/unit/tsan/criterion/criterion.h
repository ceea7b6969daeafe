/* SPDX-License-Identifier: MIT */
/*
 * criterion.h (tests/unit/tsan) - the part of Criterion's API the unit
 * tests use, for the ThreadSanitizer build only: Criterion's own runner
 * cannot start under TSan (its boxfort arena cannot be mapped, Criterion
 * issue 274). runner.c runs each test alone in a fresh exec of its
 * program, as Criterion runs each in a fresh fork.
 */
#ifndef R2CC_TSAN_CRITERION_H
#define R2CC_TSAN_CRITERION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h> /* (the real one's includes bring it) */
#include <string.h>

struct r2cc_ut_params {
	void *arr;
	size_t size, n;
};

/* One test (or one parameterized test, run once per parameter) */
struct r2cc_ut {
	const char *suite, *name;
	void (*fn)(void);
	void (*pfn)(void *); /* parameterized: with each parameter */
	struct r2cc_ut_params (*params)(void);
	void (*init)(void), (*fini)(void);
	double timeout;
	bool disabled;
	struct r2cc_ut *next;
};

struct r2cc_ut_suite {
	const char *name;
	void (*init)(void), (*fini)(void);
	double timeout;
	bool disabled;
	struct r2cc_ut_suite *next;
};

void r2cc_ut_add(struct r2cc_ut *t);
void r2cc_ut_add_suite(struct r2cc_ut_suite *s);
/* A check failed: said; @fatal ends the test (the process) failed. */
void r2cc_ut_fail(const char *file, int line, bool fatal, const char *expr,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void r2cc_ut_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void r2cc_ut_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define Test(s, n, ...)                                               \
	static void s##__##n(void);                                   \
	static struct r2cc_ut s##__##n##_ut = {                       \
		.suite = #s, .name = #n, .fn = s##__##n, __VA_ARGS__  \
	};                                                            \
	__attribute__((constructor)) static void s##__##n##_reg(void) \
	{                                                             \
		r2cc_ut_add(&s##__##n##_ut);                          \
	}                                                             \
	static void s##__##n(void)

#define TestSuite(s, ...)                                                     \
	static struct r2cc_ut_suite s##__suite = { .name = #s, __VA_ARGS__ }; \
	__attribute__((constructor)) static void s##__suite_reg(void)         \
	{                                                                     \
		r2cc_ut_add_suite(&s##__suite);                               \
	}

#define R2CC_UT_CHECK(fatal, cond, expr, ...)                         \
	do {                                                          \
		if (!(cond))                                          \
			r2cc_ut_fail(__FILE__, __LINE__, fatal, expr, \
				     " " __VA_ARGS__);                \
	} while (0)
#define R2CC_UT_CMP(fatal, a, op, b, ...) \
	R2CC_UT_CHECK(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)

#define cr_assert(c, ...) R2CC_UT_CHECK(true, c, #c, __VA_ARGS__)
#define cr_assert_not(c, ...) \
	R2CC_UT_CHECK(true, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_fail(...) R2CC_UT_CHECK(true, 0, "fail", __VA_ARGS__)
#define cr_assert_eq(a, b, ...) R2CC_UT_CMP(true, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) R2CC_UT_CMP(true, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) R2CC_UT_CMP(true, a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) R2CC_UT_CMP(true, a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) R2CC_UT_CMP(true, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) R2CC_UT_CMP(true, a, >=, b, __VA_ARGS__)
#define cr_assert_null(p, ...) \
	R2CC_UT_CHECK(true, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) \
	R2CC_UT_CHECK(true, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) \
	R2CC_UT_CHECK(true, !strcmp(a, b), #a " eq " #b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) \
	R2CC_UT_CHECK(true, strcmp(a, b), #a " neq " #b, __VA_ARGS__)
#define cr_assert_arr_eq(a, b, n, ...) \
	R2CC_UT_CHECK(true, !memcmp(a, b, n), #a " eq " #b, __VA_ARGS__)
#define cr_expect(c, ...) R2CC_UT_CHECK(false, c, #c, __VA_ARGS__)
#define cr_expect_not(c, ...) \
	R2CC_UT_CHECK(false, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_expect_eq(a, b, ...) R2CC_UT_CMP(false, a, ==, b, __VA_ARGS__)
#define cr_expect_null(p, ...) \
	R2CC_UT_CHECK(false, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_skip_test(...) r2cc_ut_skip(" " __VA_ARGS__)
#define cr_log_info(...) r2cc_ut_info(__VA_ARGS__)

#endif /* R2CC_TSAN_CRITERION_H */
