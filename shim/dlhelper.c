/* SPDX-License-Identifier: MIT */
/*
 * dlhelper.c - libr2cc-dlhelper.so. The shim exports dlsym and dlvsym, so
 * it cannot call them itself; this object, opened with RTLD_DEEPBIND, binds
 * to libc's and hands them to the shim from its constructor.
 */
#include <dlfcn.h>

typedef void *(*r2cc_dlsym_fn)(void *, const char *);
typedef void *(*r2cc_dlvsym_fn)(void *, const char *, const char *);
void r2cc_dl_register(r2cc_dlsym_fn sym, r2cc_dlvsym_fn vsym);

__attribute__((constructor)) static void hand_over(void)
{
	r2cc_dl_register(dlsym, dlvsym);
}
