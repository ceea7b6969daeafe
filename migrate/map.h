/* SPDX-License-Identifier: MIT */
/*
 * map.h - a hash map from non-zero keys (the program's verbs handles in
 * the shim's registry, a peer's memory keys in keys.c) to pointers:
 * lock-free O(1) lookup for the data path, inserts and removals
 * serialised by the map's own mutex. And the table of a plain index (a
 * table's entries by a hash of their key, under the owner's lock:
 * paths.c, probe.c).
 */
#ifndef R2CC_MIG_MAP_H
#define R2CC_MIG_MAP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Slot keys: EMPTY, TOMB, or a key (>= R2CC_MAP_KEY_MIN). */
#define R2CC_MAP_EMPTY ((uintptr_t)0)
#define R2CC_MAP_TOMB ((uintptr_t)1)

struct r2cc_map_slot {
	_Atomic uintptr_t key;
	_Atomic(void *) val;
};

struct r2cc_map_table {
	size_t mask; /* slots - 1; slots is a power of two */
	struct r2cc_map_table *next_retired;
	struct r2cc_map_slot slot[];
};

struct r2cc_map {
	/* The current table; readers load it with acquire, never lock. */
	_Atomic(struct r2cc_map_table *) table;
	/*
	 * lock protects: every store into the tables, count, tombs and the
	 * retired list. Lookups take it only when a purge (below) keeps
	 * them retrying.
	 */
	pthread_mutex_t lock;
	/*
	 * Odd while the table is rehashed in place to drop its tombstones
	 * (a lookup then may miss a key that is there: it tries again), so
	 * that insert/remove churn reuses one table instead of retiring
	 * one after another.
	 */
	_Atomic unsigned long seq;
	size_t count; /* live entries */
	size_t tombs; /* removed entries still occupying a slot */
	/*
	 * Tables replaced by a bigger one: a lookup may still be reading
	 * them, so they are kept until r2cc_map_destroy() (their sizes add
	 * up to less than the current table's: a table is only replaced
	 * to grow).
	 */
	struct r2cc_map_table *retired;
};

/* Keys 0 and 1 are reserved (empty and removed slots). */
#define R2CC_MAP_KEY_MIN 2

/**
 * r2cc_map_init() - an empty map
 * @m: the map
 * Return: 0 or -ENOMEM.
 */
int r2cc_map_init(struct r2cc_map *m);
/**
 * r2cc_map_insert() - add or replace @key
 * @m: the map
 * @key: >= R2CC_MAP_KEY_MIN
 * @val: non-NULL
 * Return: 0, -EINVAL for a reserved key or NULL value, -ENOMEM.
 */
int r2cc_map_insert(struct r2cc_map *m, uintptr_t key, void *val);
/**
 * r2cc_map_remove() - remove @key
 * @m: the map
 * @key: the key
 * Return: the value it had, or NULL if it was not there.
 */
void *r2cc_map_remove(struct r2cc_map *m, uintptr_t key);
static inline size_t r2cc_map_slot_of(uintptr_t key, size_t mask)
{
	/* Fibonacci hashing: handles are 16-byte aligned heap pointers. */
	uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & mask;
}

/* One probe of @t for @key (a purge may make it miss). */
static inline void *r2cc_map_probe(struct r2cc_map_table *t, uintptr_t key)
{
	size_t i = r2cc_map_slot_of(key, t->mask), n;

	for (n = 0; n <= t->mask; n++, i = (i + 1) & t->mask) {
		uintptr_t k = atomic_load_explicit(&t->slot[i].key,
						   memory_order_acquire);
		if (k == key)
			return atomic_load_explicit(&t->slot[i].val,
						    memory_order_acquire);
		if (k == R2CC_MAP_EMPTY)
			return NULL;
	}
	return NULL;
}

/* A lookup that met a purge: tried again, yielding the CPU after a few
 * tries (the writer may be preempted); it takes no lock. Out of line:
 * the inline lookup is on the data path. */
void *r2cc_map_lookup_retry(struct r2cc_map *m, uintptr_t key);

/**
 * r2cc_map_lookup() - the value of @key, or NULL; lock-free, any thread
 * @m: the map
 * @key: the key
 * Inline: it is on the data path of every post and poll.
 */
static inline void *r2cc_map_lookup(struct r2cc_map *m, uintptr_t key)
{
	unsigned long s = atomic_load_explicit(&m->seq, memory_order_acquire);
	struct r2cc_map_table *t =
		atomic_load_explicit(&m->table, memory_order_acquire);
	void *val;

	if (__builtin_expect(!t, 0))
		return NULL;
	if (__builtin_expect(!(s & 1), 1)) {
		val = r2cc_map_probe(t, key);
		atomic_thread_fence(memory_order_acquire);
		if (__builtin_expect(
			    atomic_load_explicit(&m->seq,
						 memory_order_relaxed) == s,
			    1))
			return val;
	}
	return r2cc_map_lookup_retry(m, key);
}
/**
 * r2cc_map_for_each() - call @fn on every live entry, under the map lock
 * @m: the map
 * @fn: must not insert into or remove from @m
 * @arg: passed to @fn
 */
void r2cc_map_for_each(struct r2cc_map *m, void (*fn)(void *val, void *arg),
		       void *arg);
/* Frees every table; only when no thread can be looking up any more. */
void r2cc_map_destroy(struct r2cc_map *m);

/**
 * r2cc_idx_empty() - an empty open-addressing index for @want entries,
 * at most half full (at least 64 slots): a new one of that size, or, when
 * none can be had, *@idx cleared if it is big enough
 * @idx: the slots (entry number + 1, 0 empty); freed when replaced
 * @mask: their number - 1
 * Return: 0, or -ENOMEM (*@idx unchanged).
 */
int r2cc_idx_empty(uint32_t **idx, uint32_t *mask, unsigned int want);

#endif /* R2CC_MIG_MAP_H */
