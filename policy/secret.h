/* SPDX-License-Identifier: MIT */
/*
 * secret.h - the job secret file (R2CC_SECRET_FILE), part of policy.h: the
 * one set of rules a secret file must meet, used by migrate/ when it loads
 * the key and by r2cc-ctl config check. Included at the end of policy.h
 * (it uses r2cc_conf_report_fn).
 */
#ifndef R2CC_POLICY_SECRET_H
#define R2CC_POLICY_SECRET_H

/* The secret's length in bytes, used verbatim as the HMAC key */
#define R2CC_SECRET_MIN 32
#define R2CC_SECRET_MAX 1024

struct stat;

/**
 * r2cc_secret_open() - open the secret file @path if it is fit to be one
 * @path: R2CC_SECRET_FILE
 * @st: filled with its fstat(2) when it is opened; may be NULL
 * @fn: gets each problem, "secret file PATH: what is wrong; must ..."
 *      (optional); each is one r2cc_log() error as well
 * @arg: its argument
 *
 * Required: a regular file, not a symbolic link, owned by the effective
 * uid, mode 0600 or stricter (no execute, set-id or sticky bit), of
 * R2CC_SECRET_MIN..R2CC_SECRET_MAX bytes. Owner, mode and size are each
 * reported. Nothing is read; the contents are never logged.
 * Return: an O_RDONLY descriptor the caller closes, or -errno: -EPERM (a
 * symbolic link, not a regular file, owner or mode), -EINVAL (size only),
 * or open(2)'s or fstat(2)'s error.
 */
int r2cc_secret_open(const char *path, struct stat *st, r2cc_conf_report_fn fn,
		     void *arg);

#endif /* R2CC_POLICY_SECRET_H */
