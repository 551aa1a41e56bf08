/* SPDX-License-Identifier: MIT */
/*
 * mr_table.c - key -> MR, open addressing with linear probing.
 *
 * Deleted entries become tombstones so that probe chains stay intact;
 * an insert reuses the first tombstone on its chain, and the table is
 * rebuilt (doubled, or at the same size to sweep tombstones) before live
 * plus dead entries pass 3/4 of the slots. There is always at least one
 * empty slot, so every probe terminates.
 *
 * Readers (the transport, any thread) take the lock shared; inserts,
 * removals and rebuilds take it exclusive, with writers preferred so a
 * busy progress thread cannot starve registration.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sw/mem.h"

enum {
	TABLE_MIN_SLOTS = 64
};

/* The tombstone: a unique address that is never a live MR. */
static struct sw_mr tombstone;
#define TOMB (&tombstone)

/* Slot index holding `key`, or -1. Caller holds the lock. */
static long find_key(const struct sw_mr_table *t, uint32_t key)
{
	uint32_t mask = t->nslots - 1;
	uint32_t i = sw_key_hash(key) & mask;

	for (;;) {
		const struct sw_mr *s = t->slots[i];

		if (!s)
			return -1;
		if (s != TOMB && s->key == key)
			return (long)i;
		i = (i + 1) & mask;
	}
}

/* Put `mr` on its chain in `slots` (first free or dead slot); returns that slot's old value. */
static struct sw_mr *place(struct sw_mr **slots, uint32_t nslots, struct sw_mr *mr)
{
	uint32_t mask = nslots - 1;
	uint32_t i = sw_key_hash(mr->key) & mask;
	struct sw_mr *old;

	while (slots[i] && slots[i] != TOMB)
		i = (i + 1) & mask;
	old = slots[i];
	slots[i] = mr;
	return old;
}

/* Rebuild into `nslots` slots, dropping tombstones. 0 or -ENOMEM. */
static int rebuild(struct sw_mr_table *t, uint32_t nslots)
{
	struct sw_mr **n = calloc(nslots, sizeof(*n));
	uint32_t i;

	if (!n)
		return -ENOMEM;
	for (i = 0; i < t->nslots; i++)
		if (t->slots[i] && t->slots[i] != TOMB)
			place(n, nslots, t->slots[i]);
	free(t->slots);
	t->slots = n;
	t->nslots = nslots;
	t->tombs = 0;
	return 0;
}

/* Make room for one more live entry. Caller holds the lock exclusive. */
static int reserve_one(struct sw_mr_table *t)
{
	uint64_t fill = (uint64_t)t->used + t->tombs + 1;
	uint32_t n = t->nslots;

	if (fill * 4 <= (uint64_t)n * 3)
		return 0;
	/* grow while live entries alone would fill half the slots */
	while (((uint64_t)t->used + 1) * 2 > n) {
		if (n >= (1U << 31))
			return -ENOMEM;
		n *= 2;
	}
	return rebuild(t, n);
}

/* Contract: empty table admitting up to `max` (>= 1) MRs; 0 or -errno. */
int sw_mr_table_init(struct sw_mr_table *t, uint32_t max)
{
	pthread_rwlockattr_t attr;
	int ret;

	memset(t, 0, sizeof(*t));
	if (!max)
		return -EINVAL;
	t->slots = calloc(TABLE_MIN_SLOTS, sizeof(*t->slots));
	if (!t->slots)
		return -ENOMEM;
	t->nslots = TABLE_MIN_SLOTS;
	t->max = max;
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	ret = pthread_rwlock_init(&t->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (ret) {
		free(t->slots);
		t->slots = NULL;
		return -ret;
	}
	return 0;
}

/* Contract: see sw/mem.h. Not concurrent with any other use of the table. */
void sw_mr_table_destroy(struct sw_mr_table *t)
{
	uint32_t i;

	if (!t->slots)
		return;
	for (i = 0; i < t->nslots; i++)
		if (t->slots[i] && t->slots[i] != TOMB)
			sw_mr_put(t->slots[i]);
	free(t->slots);
	t->slots = NULL;
	pthread_rwlock_destroy(&t->lock);
}

/* Contract: see sw/mem.h. The caller's registration reference moves into the table. */
int sw_mr_table_insert(struct sw_mr_table *t, struct sw_mr *mr)
{
	uint32_t key;
	int ret;

	pthread_rwlock_wrlock(&t->lock);
	if (t->used - t->windows >= t->max) {
		ret = -ENOMEM;
		goto out;
	}
	ret = reserve_one(t);
	if (ret)
		goto out;
	do
		key = sw_key_random() & ~SW_KEY_MW;
	while (!key || find_key(t, key) >= 0);
	mr->key = key;
	mr->ibv.lkey = key;
	mr->ibv.rkey = key;
	mr->blocked = false;
	if (place(t->slots, t->nslots, mr) == TOMB)
		t->tombs--;
	t->used++;
out:
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

/* Put a tombstone in slot `i` (a live entry) and uncount it. Caller holds the lock. */
static void tomb_at(struct sw_mr_table *t, uint32_t i)
{
	if (t->slots[i]->mw)
		t->windows--;
	t->slots[i] = TOMB;
	t->tombs++;
	t->used--;
}

/* Take `mr` out if it is in the table. Caller holds the lock. */
static void take_out(struct sw_mr_table *t, struct sw_mr *mr)
{
	long i = find_key(t, mr->key);

	if (i >= 0 && t->slots[i] == mr)
		tomb_at(t, (uint32_t)i);
}

/* Contract: see sw/mem.h. Removing an MR that is not in the table does nothing. */
void sw_mr_table_remove(struct sw_mr_table *t, struct sw_mr *mr)
{
	pthread_rwlock_wrlock(&t->lock);
	take_out(t, mr);
	if (!t->used) {
		/* nothing live: every chain can go */
		memset(t->slots, 0, t->nslots * sizeof(*t->slots));
		t->tombs = 0;
	}
	pthread_rwlock_unlock(&t->lock);
}

/* Put `e` on its chain and count it. Caller holds the lock; there is room. */
static void put_in(struct sw_mr_table *t, struct sw_mr *e)
{
	if (place(t->slots, t->nslots, e) == TOMB)
		t->tombs--;
	t->used++;
	if (e->mw)
		t->windows++;
}

/* Contract: see sw/mem.h. */
int sw_mr_table_swap(struct sw_mr_table *t, struct sw_mr *old, struct sw_mr *e)
{
	long i;
	int ret;

	if (!e->key)
		return -EINVAL;
	pthread_rwlock_wrlock(&t->lock);
	i = find_key(t, e->key);
	if (i >= 0 && t->slots[i] != old) {
		pthread_rwlock_unlock(&t->lock);
		return -EEXIST;
	}
	if (old)
		take_out(t, old);
	ret = reserve_one(t);
	if (ret) {
		if (old)
			put_in(t, old); /* as it was */
	} else {
		e->blocked = false;
		put_in(t, e);
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

/* Contract: see sw/mem.h. Key 0 never resolves. */
struct sw_mr *sw_mr_table_lookup(struct sw_mr_table *t, uint32_t key)
{
	struct sw_mr *mr = NULL;
	long i;

	if (!key)
		return NULL;
	pthread_rwlock_rdlock(&t->lock);
	i = find_key(t, key);
	if (i >= 0 && !t->slots[i]->blocked) {
		mr = t->slots[i];
		atomic_fetch_add(&mr->refcnt, 1);
	}
	pthread_rwlock_unlock(&t->lock);
	return mr;
}

/* Contract: see sw/mem.h. */
void sw_mr_wait_idle(struct sw_mr *mr)
{
	unsigned int spins = 0;

	while (atomic_load(&mr->refcnt) > 1) {
		if (++spins < 100) {
			sched_yield();
		} else {
			struct timespec ts = {0, 100000}; /* 100 us */

			nanosleep(&ts, NULL);
		}
	}
}

/* Contract: see sw/mem.h. */
void sw_mr_table_block(struct sw_mr_table *t, struct sw_mr *mr)
{
	pthread_rwlock_wrlock(&t->lock);
	mr->blocked = true;
	pthread_rwlock_unlock(&t->lock);
	/* references only shrink now: no lookup can hand out a new one */
	sw_mr_wait_idle(mr);
}

/* Contract: see sw/mem.h. */
void sw_mr_table_unblock(struct sw_mr_table *t, struct sw_mr *mr)
{
	pthread_rwlock_wrlock(&t->lock);
	mr->blocked = false;
	pthread_rwlock_unlock(&t->lock);
}

/* Contract: see sw/mem.h. */
size_t sw_mr_table_remove_matching(struct sw_mr_table *t,
				   bool (*match)(const struct sw_mr *mr, const void *arg),
				   const void *arg, uint32_t *cursor, struct sw_mr **out,
				   size_t max)
{
	size_t n = 0;
	uint32_t i;

	pthread_rwlock_wrlock(&t->lock);
	for (i = *cursor; i < t->nslots && n < max; i++) {
		struct sw_mr *mr = t->slots[i];

		if (!mr || mr == TOMB || !match(mr, arg))
			continue;
		tomb_at(t, i);
		out[n++] = mr;
	}
	*cursor = i;
	if (!t->used && t->tombs) {
		memset(t->slots, 0, t->nslots * sizeof(*t->slots));
		t->tombs = 0;
	}
	pthread_rwlock_unlock(&t->lock);
	return n;
}
