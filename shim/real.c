/* SPDX-License-Identifier: MIT */
/*
 * real.c - finds the real libibverbs entry points (by name and version, from
 * hooks.def) and librdmacm's (rdmacm.c), and interposes dlsym/dlvsym so
 * that a program that loads libibverbs by handle, as NCCL does, gets the
 * shim's entry points too.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "shim_int.h"

typedef void *(*r2cc_dlsym_fn)(void *, const char *);
typedef void *(*r2cc_dlvsym_fn)(void *, const char *, const char *);

struct r2cc_real r2cc_real;

/* libc's own, found at the first need (dl_find(): by any thread, the
 * same answer each time, so no lock: a sanitizer runtime asks for libc's
 * functions through our dlsym before its pthread_once works);
 * libibverbs's handle, as dlopen() names it, under ibv_once */
static _Atomic(r2cc_dlsym_fn) real_dlsym;
static _Atomic(r2cc_dlvsym_fn) real_dlvsym;
static void *ibv_handle;
static pthread_once_t ibv_once = PTHREAD_ONCE_INIT;

/* Our exported hooks, for dlsym/dlvsym on a libibverbs handle. */
static const struct hook {
	const char *name;
	const char *ver;
	void *fn;
} hooks[] = {
#define R2CC_HOOK(ret, name, ver, contract, params, args) \
	{ #name, ver, (void *)name },
#include "hooks.def"
#undef R2CC_HOOK
};

/* libc's dlsym and dlvsym found: false if either is not */
R2CC_NO_SANITIZE static bool dl_find(void)
{
	if (!atomic_load_explicit(&real_dlsym, memory_order_acquire)) {
		atomic_store_explicit(&real_dlvsym,
				      (r2cc_dlvsym_fn)r2cc_libc_sym("dlvsym"),
				      memory_order_relaxed);
		atomic_store_explicit(&real_dlsym,
				      (r2cc_dlsym_fn)r2cc_libc_sym("dlsym"),
				      memory_order_release);
	}
	return atomic_load_explicit(&real_dlsym, memory_order_acquire) &&
	       atomic_load_explicit(&real_dlvsym, memory_order_relaxed);
}

static void ibv_init(void)
{
	ibv_handle = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
}

/**
 * r2cc_real_resolve() - fill r2cc_real from libibverbs
 * Return: 0, or -ENOENT if a symbol is missing (then passthrough is all
 * r2cc can offer, and only for the symbols it found).
 */
int r2cc_real_resolve(void)
{
	int missing = 0;

	if (!dl_find()) {
		r2cc_err("cannot find libc's dlsym/dlvsym: they will fail");
		return -ENOENT;
	}
	pthread_once(&ibv_once, ibv_init);
	if (!ibv_handle)
		return -ENOENT;
#define R2CC_HOOK(ret, name, ver, contract, params, args)                    \
	r2cc_real.name = (ret(*) params)real_dlvsym(ibv_handle, #name, ver); \
	if (!r2cc_real.name) {                                               \
		r2cc_err("libibverbs has no %s@%s", #name, ver);             \
		missing++;                                                   \
	}
#include "hooks.def"
#undef R2CC_HOOK
	return missing ? -ENOENT : 0;
}

/**
 * r2cc_real_sym() - @name at version @ver in the loaded library @soname
 * Return: its address, or NULL if that library is not loaded or lacks it.
 * The library stays loaded from then on, so the address stays valid.
 */
void *r2cc_real_sym(const char *soname, const char *name, const char *ver)
{
	void *h;

	if (!dl_find())
		return NULL;
	h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
	return h ? real_dlvsym(h, name, ver) : NULL;
}

/* Our entry point for @name on the libibverbs handle @h, or NULL. */
R2CC_NO_SANITIZE static void *hooked(void *h, const char *name, const char *ver)
{
	size_t i;

	/* The pseudo-handles are never libibverbs's, and the only ones a
	 * sanitizer runtime uses while it sets itself up: past here
	 * pthread_once and strcmp are safe to call. */
	if (!name || h == RTLD_NEXT || h == RTLD_DEFAULT)
		return NULL;
	pthread_once(&ibv_once, ibv_init);
	if (!ibv_handle || h != ibv_handle)
		return NULL;
	for (i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++) {
		if (strcmp(hooks[i].name, name))
			continue;
		/* Another version of the symbol (the 1.0 ABI) is not ours. */
		if (ver && strcmp(ver, hooks[i].ver))
			return NULL;
		/* Only what the real library has at that version. */
		return real_dlvsym(h, name, hooks[i].ver) ? hooks[i].fn : NULL;
	}
	return NULL;
}

/*
 * The fall-through calls below must stay tail calls: glibc resolves
 * RTLD_NEXT relative to its caller's return address, which a tail call
 * leaves as the program's own.
 */
R2CC_NO_SANITIZE static void *hook_dlsym(void *h, const char *name)
{
	void *p;

	if (!dl_find()) {
		errno = ENOSYS;
		return NULL;
	}
	p = hooked(h, name, NULL);
	if (p)
		return p;
	return real_dlsym(h, name);
}

R2CC_NO_SANITIZE static void *hook_dlvsym(void *h, const char *name,
					  const char *ver)
{
	void *p;

	if (!dl_find()) {
		errno = ENOSYS;
		return NULL;
	}
	p = hooked(h, name, ver);
	if (p)
		return p;
	return real_dlvsym(h, name, ver);
}

/* Both glibc versions, so that old and new binaries bind to us. */
R2CC_EXPORT void *r2cc_dlsym_234(void *h, const char *name)
	__attribute__((alias("hook_dlsym")));
R2CC_EXPORT void *r2cc_dlsym_225(void *h, const char *name)
	__attribute__((alias("hook_dlsym")));
R2CC_EXPORT void *r2cc_dlvsym_234(void *h, const char *name, const char *v)
	__attribute__((alias("hook_dlvsym")));
R2CC_EXPORT void *r2cc_dlvsym_225(void *h, const char *name, const char *v)
	__attribute__((alias("hook_dlvsym")));
__asm__(".symver r2cc_dlsym_234, dlsym@@GLIBC_2.34");
__asm__(".symver r2cc_dlsym_225, dlsym@GLIBC_2.2.5");
__asm__(".symver r2cc_dlvsym_234, dlvsym@@GLIBC_2.34");
__asm__(".symver r2cc_dlvsym_225, dlvsym@GLIBC_2.2.5");
