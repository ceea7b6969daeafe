/* SPDX-License-Identifier: MIT */
/* parameterized.h (tests/unit/tsan) - Criterion's parameterized tests,
 * as criterion.h here: each parameter runs as a test of its own. */
#ifndef R2CC_TSAN_PARAMETERIZED_H
#define R2CC_TSAN_PARAMETERIZED_H

#include "criterion.h"

#define ParameterizedTestParameters(s, n) \
	static struct r2cc_ut_params s##__##n##_params(void)
#define cr_make_param_array(T, a, len, ...) \
	((struct r2cc_ut_params){ (a), sizeof(T), (len) })

#define ParameterizedTest(T, s, n, ...)                                      \
	static struct r2cc_ut_params s##__##n##_params(void);                \
	static void s##__##n(T);                                             \
	static void s##__##n##_p(void *p)                                    \
	{                                                                    \
		s##__##n(p);                                                 \
	}                                                                    \
	static struct r2cc_ut s##__##n##_ut = { .suite = #s,                 \
						.name = #n,                  \
						.pfn = s##__##n##_p,         \
						.params = s##__##n##_params, \
						__VA_ARGS__ };               \
	__attribute__((constructor)) static void s##__##n##_reg(void)        \
	{                                                                    \
		r2cc_ut_add(&s##__##n##_ut);                                 \
	}                                                                    \
	static void s##__##n(T)

#endif /* R2CC_TSAN_PARAMETERIZED_H */
