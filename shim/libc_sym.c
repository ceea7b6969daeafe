/* SPDX-License-Identifier: MIT */
/*
 * libc_sym.c - finds a symbol in the loaded libc by reading its dynamic
 * symbol table (GNU hash) directly. The shim exports dlsym and dlvsym, so
 * it cannot ask them. A sanitizer runtime loaded before the shim asks the
 * shim's dlsym for libc's functions while it sets itself up, when the
 * functions it intercepts (the string functions, dl_iterate_phdr) do not
 * work yet: so the objects are found on the dynamic linker's own list
 * (_r_debug), no function is called, and no sanitizer instruments it.
 */
#include <elf.h>
#include <link.h>

#include "shim_int.h"

/* strcmp(@a, @b) == 0, and for @n bytes at most (n < 0: all) */
R2CC_NO_SANITIZE static bool same(const char *a, const char *b, long n)
{
	for (; n && *a == *b; a++, b++, n--)
		if (!*a)
			return true;
	return !n;
}

R2CC_NO_SANITIZE static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

/* A dynamic-section pointer: ld.so has relocated it, unless it has not. */
R2CC_NO_SANITIZE static uintptr_t dyn_ptr(ElfW(Addr) base, ElfW(Addr) p)
{
	return p < base ? base + p : p;
}

/* Look @name up in the GNU hash table of the object at @base. */
R2CC_NO_SANITIZE static void *lookup(ElfW(Addr) base, const ElfW(Dyn) * dyn,
				     const char *name)
{
	const ElfW(Sym) *symtab = NULL;
	const uint32_t *gh = NULL, *buckets, *chain;
	const char *strtab = NULL;
	uint32_t h, nb, off, words, i;

	for (; dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_SYMTAB)
			symtab = (const void *)dyn_ptr(base, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_STRTAB)
			strtab = (const void *)dyn_ptr(base, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_GNU_HASH)
			gh = (const void *)dyn_ptr(base, dyn->d_un.d_ptr);
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
			return (void *)(base + s->st_value);
		if (ch & 1)
			return NULL;
	}
}

/* @l is libc (its file named libc.so.N) */
R2CC_NO_SANITIZE static bool is_libc(const struct link_map *l)
{
	const char *p, *base = l->l_name ? l->l_name : "";

	for (p = base; *p; p++)
		if (*p == '/')
			base = p + 1;
	return same(base, "libc.so.", 8);
}

/**
 * r2cc_libc_sym() - the address of @name as the loaded libc defines it
 * @name: e.g. "dlsym"
 * Return: the address, or NULL if libc or the symbol was not found.
 */
R2CC_NO_SANITIZE void *r2cc_libc_sym(const char *name)
{
	const struct link_map *l;

	for (l = _r_debug.r_map; l; l = l->l_next)
		if (is_libc(l) && l->l_ld)
			return lookup(l->l_addr, l->l_ld, name);
	return NULL;
}
