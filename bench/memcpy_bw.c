/* SPDX-License-Identifier: MIT */
/*
 * memcpy_bw.c - the memcpy baseline: how fast this CPU copies a message
 * of each size of the sweep, in the orchestrating process (no device),
 * between two page-aligned buffers touched beforehand. The same pair of
 * buffers is copied again and again, so small sizes run from the cache,
 * as the device's own copies of small messages do. Plus 1 MiB when the
 * sweep lacks it (a target's denominator, peer_targets.c) and one 64 MiB
 * point for the memory-bound rate.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

/* Seconds per memcpy point: a quarter of a point, at least 20 ms. */
static double memcpy_secs(void)
{
	return opt.secs / 4 < 0.02 ? 0.02 : opt.secs / 4;
}

/* Contract: see bench.h. */
void memcpy_point(uint64_t size)
{
	struct rec *r = rec_add("memcpy", "memcpy", "", size);
	uint8_t *src = aligned_alloc(4096, (size + 4095) & ~(uint64_t)4095);
	uint8_t *dst = aligned_alloc(4096, (size + 4095) & ~(uint64_t)4095);
	uint64_t t0, t, bytes = 0, batch = size >= MIB ? 1 : (MIB / size);
	double secs = memcpy_secs();

	if (!src || !dst)
		die("memcpy baseline: out of memory for %llu bytes", (unsigned long long)size);
	memset(src, 0x5a, size);
	memset(dst, 0, size);
	t0 = now_ns();
	do {
		for (uint64_t i = 0; i < batch; i++) {
			memcpy(dst, src, size);
			__asm__ __volatile__("" : : "r"(dst) : "memory"); /* keep every copy */
		}
		bytes += batch * size;
		t = now_ns();
	} while (t - t0 < (uint64_t)(secs * 1e9));
	rec_set(r, "gbps", (double)bytes / (double)(t - t0));
	free(src);
	free(dst);
}

/* True when the sweep has 1 MiB. */
static bool sweep_has_mib(void)
{
	for (int i = 0; i < opt.nsizes; i++)
		if (opt.sizes[i] == MIB)
			return true;
	return false;
}

/* Contract: see bench.h. */
double plan_memcpy(void)
{
	return (opt.nsizes + (sweep_has_mib() ? 1 : 2)) * memcpy_secs();
}

/* Contract: see bench.h. The sweep, 1 MiB if it is not in it, then 64 MiB. */
void run_memcpy(void)
{
	progress_step(plan_memcpy(), "memcpy baseline, %d size(s), 1 MiB and 64 MiB", opt.nsizes);
	for (int i = 0; i < opt.nsizes; i++)
		memcpy_point(opt.sizes[i]);
	if (!sweep_has_mib())
		memcpy_point(MIB);
	memcpy_point(64 * MIB);
}
