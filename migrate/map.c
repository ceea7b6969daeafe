/* SPDX-License-Identifier: MIT */
/*
 * map.c - open-addressing hash map with lock-free readers (the shim's
 * handle registry, keys.c's peer keys). Writers hold the map's mutex; a
 * table that grows is replaced by a new one, published with a release
 * store; one full of tombstones is rehashed in place under the map's
 * sequence count.
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"

#define EMPTY R2CC_MAP_EMPTY
#define TOMB R2CC_MAP_TOMB
#define MIN_SLOTS 64

static struct r2cc_map_table *table_new(size_t slots)
{
	struct r2cc_map_table *t;

	t = calloc(1, sizeof(*t) + slots * sizeof(t->slot[0]));
	if (!t)
		return NULL;
	t->mask = slots - 1;
	return t;
}

int r2cc_map_init(struct r2cc_map *m)
{
	struct r2cc_map_table *t = table_new(MIN_SLOTS);

	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->count = 0;
	m->tombs = 0;
	m->retired = NULL;
	atomic_store_explicit(&m->seq, 0, memory_order_relaxed);
	atomic_store_explicit(&m->table, t, memory_order_release);
	return 0;
}

/* Caller holds m->lock. The slot of @key, or the slot to put it in. */
static struct r2cc_map_slot *find_slot(struct r2cc_map_table *t, uintptr_t key,
				       bool *found)
{
	struct r2cc_map_slot *free_slot = NULL;
	size_t i = r2cc_map_slot_of(key, t->mask), n;

	*found = false;
	for (n = 0; n <= t->mask; n++, i = (i + 1) & t->mask) {
		uintptr_t k = atomic_load_explicit(&t->slot[i].key,
						   memory_order_relaxed);
		if (k == key) {
			*found = true;
			return &t->slot[i];
		}
		if (k == TOMB && !free_slot)
			free_slot = &t->slot[i];
		if (k == EMPTY)
			return free_slot ? free_slot : &t->slot[i];
	}
	return free_slot;
}

static void slot_set(struct r2cc_map_slot *s, uintptr_t key, void *val)
{
	/* Value first: a reader that sees the key sees its value. */
	atomic_store_explicit(&s->val, val, memory_order_release);
	atomic_store_explicit(&s->key, key, memory_order_release);
}

/* Caller holds m->lock. Every live entry of @from into @to. */
static void copy_live(struct r2cc_map_table *to, struct r2cc_map_table *from)
{
	size_t i;
	bool found;

	for (i = 0; i <= from->mask; i++) {
		uintptr_t k = atomic_load_explicit(&from->slot[i].key,
						   memory_order_relaxed);
		if (k == EMPTY || k == TOMB)
			continue;
		slot_set(find_slot(to, k, &found), k,
			 atomic_load_explicit(&from->slot[i].val,
					      memory_order_relaxed));
	}
}

/* Caller holds m->lock. @t rehashed in place without its tombstones, the
 * sequence count odd meanwhile (lookups try again). */
static int purge(struct r2cc_map *m, struct r2cc_map_table *t)
{
	size_t slots = t->mask + 1, i;
	struct r2cc_map_table *tmp = table_new(slots);

	if (!tmp)
		return -ENOMEM;
	copy_live(tmp, t);
	atomic_fetch_add_explicit(&m->seq, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	for (i = 0; i < slots; i++) {
		uintptr_t k = atomic_load_explicit(&tmp->slot[i].key,
						   memory_order_relaxed);
		void *v = atomic_load_explicit(&tmp->slot[i].val,
					       memory_order_relaxed);

		atomic_store_explicit(&t->slot[i].val, v, memory_order_relaxed);
		atomic_store_explicit(&t->slot[i].key, k, memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&m->seq, 1, memory_order_release);
	free(tmp);
	m->tombs = 0;
	return 0;
}

/* Caller holds m->lock. Room for one more entry: a table of at least 4x
 * count slots, or, when the current one is that big already, the same one
 * without its tombstones. */
static int make_room(struct r2cc_map *m)
{
	struct r2cc_map_table *old =
		atomic_load_explicit(&m->table, memory_order_relaxed);
	struct r2cc_map_table *t;
	size_t slots = MIN_SLOTS;

	while (slots < (m->count + 1) * 4)
		slots *= 2;
	if (slots <= old->mask + 1)
		return purge(m, old);
	t = table_new(slots);
	if (!t)
		return -ENOMEM;
	copy_live(t, old);
	atomic_store_explicit(&m->table, t, memory_order_release);
	old->next_retired = m->retired;
	m->retired = old;
	m->tombs = 0;
	return 0;
}

int r2cc_map_insert(struct r2cc_map *m, uintptr_t key, void *val)
{
	struct r2cc_map_table *t;
	struct r2cc_map_slot *s;
	bool found;
	int ret = 0;

	if (key < R2CC_MAP_KEY_MIN || !val)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	t = atomic_load_explicit(&m->table, memory_order_relaxed);
	/* A key there already: its value replaced, no room needed */
	s = find_slot(t, key, &found);
	if (found) {
		atomic_store_explicit(&s->val, val, memory_order_release);
		goto out;
	}
	if ((m->count + m->tombs + 1) * 4 > (t->mask + 1) * 3) {
		ret = make_room(m);
		if (ret)
			goto out;
		t = atomic_load_explicit(&m->table, memory_order_relaxed);
		s = find_slot(t, key, &found);
	}
	if (atomic_load_explicit(&s->key, memory_order_relaxed) == TOMB)
		m->tombs--;
	slot_set(s, key, val);
	m->count++;
out:
	pthread_mutex_unlock(&m->lock);
	return ret;
}

void *r2cc_map_remove(struct r2cc_map *m, uintptr_t key)
{
	struct r2cc_map_table *t;
	struct r2cc_map_slot *s;
	void *val = NULL;
	bool found;

	if (key < R2CC_MAP_KEY_MIN)
		return NULL;
	pthread_mutex_lock(&m->lock);
	t = atomic_load_explicit(&m->table, memory_order_relaxed);
	s = find_slot(t, key, &found);
	if (found) {
		val = atomic_load_explicit(&s->val, memory_order_relaxed);
		atomic_store_explicit(&s->key, TOMB, memory_order_release);
		atomic_store_explicit(&s->val, NULL, memory_order_release);
		m->count--;
		m->tombs++;
	}
	pthread_mutex_unlock(&m->lock);
	return val;
}

void *r2cc_map_lookup_retry(struct r2cc_map *m, uintptr_t key)
{
	struct r2cc_map_table *t;
	unsigned long s;
	void *val;
	int tries;

	for (tries = 0;; tries++) {
		if (tries >= 4)
			sched_yield();
		s = atomic_load_explicit(&m->seq, memory_order_acquire);
		t = atomic_load_explicit(&m->table, memory_order_acquire);
		if (!t)
			return NULL;
		if (s & 1)
			continue;
		val = r2cc_map_probe(t, key);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&m->seq, memory_order_relaxed) == s)
			return val;
	}
}

void r2cc_map_for_each(struct r2cc_map *m, void (*fn)(void *val, void *arg),
		       void *arg)
{
	struct r2cc_map_table *t;
	size_t i;

	pthread_mutex_lock(&m->lock);
	t = atomic_load_explicit(&m->table, memory_order_relaxed);
	for (i = 0; t && i <= t->mask; i++) {
		uintptr_t k = atomic_load_explicit(&t->slot[i].key,
						   memory_order_relaxed);
		if (k != EMPTY && k != TOMB)
			fn(atomic_load_explicit(&t->slot[i].val,
						memory_order_relaxed),
			   arg);
	}
	pthread_mutex_unlock(&m->lock);
}

void r2cc_map_destroy(struct r2cc_map *m)
{
	struct r2cc_map_table *t, *next;

	t = atomic_exchange_explicit(&m->table, NULL, memory_order_acq_rel);
	free(t);
	for (t = m->retired; t; t = next) {
		next = t->next_retired;
		free(t);
	}
	m->retired = NULL;
	m->count = 0;
	m->tombs = 0;
	pthread_mutex_destroy(&m->lock);
}

int r2cc_idx_empty(uint32_t **idx, uint32_t *mask, unsigned int want)
{
	uint32_t slots = 64, *n = NULL;

	while (slots < 2 * want)
		slots *= 2;
	if (!*idx || slots != *mask + 1)
		n = calloc(slots, sizeof(*n));
	if (n) {
		free(*idx);
		*idx = n;
		*mask = slots - 1;
	} else if (*idx && *mask + 1 > 2 * want) {
		memset(*idx, 0, (*mask + 1) * sizeof(**idx));
	} else {
		return -ENOMEM;
	}
	return 0;
}
