/* SPDX-License-Identifier: MIT */
/* redirect.h (tests/unit/tsan) - Criterion's output capture, as
 * criterion.h here: stdout or stderr into a temporary file. */
#ifndef R2CC_TSAN_REDIRECT_H
#define R2CC_TSAN_REDIRECT_H

#include "criterion.h"

void cr_redirect_stdout(void);
void cr_redirect_stderr(void);
/* What went to the redirected stream so far, from its start */
FILE *cr_get_redirected_stdout(void);
FILE *cr_get_redirected_stderr(void);
/* The whole of it equals @s */
bool r2cc_ut_output_is(FILE *f, const char *s);

#define cr_assert_stdout_eq_str(s, ...)                                       \
	R2CC_UT_CHECK(true, r2cc_ut_output_is(cr_get_redirected_stdout(), s), \
		      "stdout eq " #s, __VA_ARGS__)
#define cr_assert_stderr_neq_str(s, ...)                                       \
	R2CC_UT_CHECK(true, !r2cc_ut_output_is(cr_get_redirected_stderr(), s), \
		      "stderr neq " #s, __VA_ARGS__)

#endif /* R2CC_TSAN_REDIRECT_H */
