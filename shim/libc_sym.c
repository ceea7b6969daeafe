/* SPDX-License-Identifier: MIT */
/*
 * libc_sym.c - finds a symbol in the loaded libc by reading its dynamic
 * symbol table (GNU hash) directly. The shim exports dlsym and dlvsym, so
 * it cannot ask them; this needs nothing but dl_iterate_phdr. A sanitizer
 * runtime preloaded before the shim asks the shim's dlsym for libc's
 * functions while it sets itself up, when its own string functions do not
 * work yet: so no libc string function here, and no ASan instrumentation.
 */
#include <elf.h>
#include <link.h>

#include "shim_int.h"

struct want {
	const char *name;
	void *addr;
};

/* strcmp(@a, @b) == 0, and for @n bytes at most (n < 0: all) */
R2CC_NO_ASAN static bool same(const char *a, const char *b, long n)
{
	for (; n && *a == *b; a++, b++, n--)
		if (!*a)
			return true;
	return !n;
}

R2CC_NO_ASAN static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

/* A dynamic-section pointer: ld.so has relocated it, unless it has not. */
R2CC_NO_ASAN static uintptr_t dyn_ptr(const struct dl_phdr_info *info,
				      ElfW(Addr) p)
{
	return p < info->dlpi_addr ? info->dlpi_addr + p : p;
}

/* Look @w->name up in one object's GNU hash table. */
R2CC_NO_ASAN static void *lookup(const struct dl_phdr_info *info,
				 const ElfW(Dyn) * dyn, const char *name)
{
	const ElfW(Sym) *symtab = NULL;
	const uint32_t *gh = NULL, *buckets, *chain;
	const char *strtab = NULL;
	uint32_t h, nb, off, words, i;

	for (; dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_SYMTAB)
			symtab = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_STRTAB)
			strtab = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_GNU_HASH)
			gh = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
	}
	if (!symtab || !strtab || !gh || !gh[0])
		return NULL;
	nb = gh[0];
	off = gh[1];
	words = gh[2]; /* bloom filter words, each an ElfW(Addr) */
	buckets = (const uint32_t *)((const ElfW(Addr) *)&gh[4] + words);
	chain = buckets + nb;
	h = gnu_hash(name);
	i = buckets[h % nb];
	if (i < off)
		return NULL;
	for (;; i++) {
		uint32_t ch = chain[i - off];
		const ElfW(Sym) *s = &symtab[i];

		if ((ch | 1) == (h | 1) && s->st_shndx != SHN_UNDEF &&
		    same(strtab + s->st_name, name, -1))
			return (void *)(info->dlpi_addr + s->st_value);
		if (ch & 1)
			return NULL;
	}
}

R2CC_NO_ASAN static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct want *w = arg;
	const char *p, *base = info->dlpi_name;
	int i;

	(void)size;
	for (p = base; *p; p++)
		if (*p == '/')
			base = p + 1;
	if (!same(base, "libc.so.", 8))
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
			continue;
		w->addr = lookup(info,
				 (const void *)(info->dlpi_addr +
						info->dlpi_phdr[i].p_vaddr),
				 w->name);
		return 1;
	}
	return 0;
}

/**
 * r2cc_libc_sym() - the address of @name as the loaded libc defines it
 * @name: e.g. "dlsym"
 * Return: the address, or NULL if libc or the symbol was not found.
 */
R2CC_NO_ASAN void *r2cc_libc_sym(const char *name)
{
	struct want w = { name, NULL };

	dl_iterate_phdr(visit, &w);
	return w.addr;
}
