/* SPDX-License-Identifier: MIT */
/*
 * fork.c - fork protection: refcounted MADV_DONTFORK ranges.
 *
 * The software device never pins pages, so a child's copy-on-write
 * cannot steal memory from under it: without ibv_fork_init() fork needs
 * no protection and ibv_is_fork_initialized() says IBV_FORK_UNNEEDED.
 * An application that asks for rdma-core's protection anyway gets it:
 * after ibv_fork_init() (or with RDMAV_FORK_SAFE / IBV_FORK_SAFE set),
 * registered ranges are kept out of children with MADV_DONTFORK,
 * refcounted per page so overlapping registrations nest.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"

struct range {
	uintptr_t start, end; /* page aligned, end exclusive */
	unsigned long ref;
};

static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static bool fork_enabled;
static struct range *ranges; /* sorted, non-overlapping */
static size_t nranges, cap;

static bool fork_env_requested(void)
{
	return getenv("RDMAV_FORK_SAFE") || getenv("IBV_FORK_SAFE");
}

SV_EXPORT int ibv_fork_init(void)
{
	pthread_mutex_lock(&fork_lock);
	fork_enabled = true;
	pthread_mutex_unlock(&fork_lock);
	return 0;
}

SV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	bool on;

	pthread_mutex_lock(&fork_lock);
	on = fork_enabled || fork_env_requested();
	pthread_mutex_unlock(&fork_lock);
	return on ? IBV_FORK_ENABLED : IBV_FORK_UNNEEDED;
}

/* Make room for `more` entries. */
static int reserve(size_t more)
{
	struct range *n;
	size_t want = cap ? cap : 16;

	if (nranges + more <= cap)
		return 0;
	while (want < nranges + more)
		want *= 2;
	n = realloc(ranges, want * sizeof(*n));
	if (!n)
		return -ENOMEM;
	ranges = n;
	cap = want;
	return 0;
}

static void insert_at(size_t i, struct range r)
{
	memmove(&ranges[i + 1], &ranges[i], (nranges - i) * sizeof(*ranges));
	ranges[i] = r;
	nranges++;
}

/* Split so that no range straddles `at`. Needs one free slot. */
static void split_at(uintptr_t at)
{
	size_t i;

	for (i = 0; i < nranges; i++) {
		struct range *r = &ranges[i];

		if (r->start < at && at < r->end) {
			struct range tail = {at, r->end, r->ref};

			r->end = at;
			insert_at(i + 1, tail);
			return;
		}
	}
}

/* Drop zero-ref ranges and merge neighbours with equal counts. */
static void compact(void)
{
	size_t i, j = 0;

	for (i = 0; i < nranges; i++) {
		if (!ranges[i].ref)
			continue;
		if (j && ranges[j - 1].end == ranges[i].start && ranges[j - 1].ref == ranges[i].ref)
			ranges[j - 1].end = ranges[i].end;
		else
			ranges[j++] = ranges[i];
	}
	nranges = j;
}

/*
 * Add `delta` (+1 or -1) to every page of [start, end). Pages whose count
 * leaves or reaches zero get `advice`. On an madvise failure the counts
 * and advice applied so far are rolled back. Caller holds fork_lock.
 */
static int adjust(uintptr_t start, uintptr_t end, int delta)
{
	int advice = delta > 0 ? MADV_DONTFORK : MADV_DOFORK;
	int undo = delta > 0 ? MADV_DOFORK : MADV_DONTFORK;
	uintptr_t pos = start;
	size_t i;
	int ret;

	/* worst case: two splits and one gap per existing range, plus one */
	ret = reserve(nranges + 3);
	if (ret)
		return ret;
	split_at(start);
	split_at(end);

	if (delta > 0) {
		/* give every uncovered page of [start, end) a zero-ref range */
		for (i = 0; i < nranges && pos < end; i++) {
			if (ranges[i].start > pos) {
				struct range gap = {
					pos, ranges[i].start < end ? ranges[i].start : end, 0};

				insert_at(i, gap);
				pos = gap.end;
			} else if (ranges[i].start >= start && ranges[i].end <= end) {
				pos = ranges[i].end;
			}
		}
		if (pos < end) {
			struct range gap = {pos, end, 0};

			insert_at(nranges, gap);
		}
	}
	for (i = 0; i < nranges; i++) {
		struct range *r = &ranges[i];

		if (r->start < start || r->end > end)
			continue;
		if (delta < 0 && !r->ref)
			continue;
		if ((delta > 0 && r->ref == 0) || (delta < 0 && r->ref == 1)) {
			if (madvise((void *)r->start, r->end - r->start, advice)) {
				ret = -errno;
				while (i--) {
					r = &ranges[i];
					if (r->start < start || r->end > end)
						continue;
					if ((delta > 0 && r->ref == 1) ||
					    (delta < 0 && r->ref == 0))
						madvise((void *)r->start, r->end - r->start, undo);
					r->ref -= (unsigned long)delta;
				}
				compact();
				return ret;
			}
		}
		r->ref += (unsigned long)delta;
	}
	compact();
	return 0;
}

static int fork_range(void *base, size_t size, int delta)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t start, end;
	int ret = 0;

	if (!size)
		return 0;
	pthread_mutex_lock(&fork_lock);
	/* like rdma-core, without protection any range is accepted as is */
	if (fork_enabled || fork_env_requested()) {
		end = (uintptr_t)base + size;
		if (end < (uintptr_t)base || end + page - 1 < end) {
			ret = -EINVAL;
		} else {
			start = (uintptr_t)base & ~(page - 1);
			end = (end + page - 1) & ~(page - 1);
			ret = adjust(start, end, delta);
		}
	}
	pthread_mutex_unlock(&fork_lock);
	return ret;
}

/* Contract: protect the pages of [base, base+size); 0 or -errno. */
int sv_dontfork_range(void *base, size_t size)
{
	return fork_range(base, size, +1);
}

/* Contract: undo one sv_dontfork_range() of the same range; 0 or -errno. */
int sv_dofork_range(void *base, size_t size)
{
	return fork_range(base, size, -1);
}

SV_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	return sv_ret_errno(sv_dontfork_range(base, size));
}

SV_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	return sv_ret_errno(sv_dofork_range(base, size));
}
