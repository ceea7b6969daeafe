/* SPDX-License-Identifier: MIT */
/*
 * log_capture.h - r2cc's last log line, kept for a test to read: each
 * test executable that includes it gets its own copy (static).
 */
#ifndef R2CC_TEST_LOG_CAPTURE_H
#define R2CC_TEST_LOG_CAPTURE_H

#include <stdio.h>

#include "policy.h"

static char logged[R2CC_LOG_LINE_MAX];

static void capture(enum r2cc_log_level level, const char *line, size_t len)
{
	(void)level;
	(void)len;
	snprintf(logged, sizeof(logged), "%s", line);
}

#endif /* R2CC_TEST_LOG_CAPTURE_H */
