/* SPDX-License-Identifier: MIT */
/*
 * unit_place.c - the placement layer honours each TPH hint:
 * ph 1 non-temporal stores, PM write-back, CPU_ID pinned worker, and the
 * last byte of a placement never becomes visible before the others;
 * RDMA FLUSH (sw_place_flush): a persistent flush of a PM range writes
 * back each of its cache lines, nothing else does, and a flush returns
 * only after the copies deferred to a pinned worker before it landed;
 * ATOMIC WRITE's store (sw_place_store64) lands whole, after them too.
 */
#include "harness.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "place_util.h"
#include "sw/mem/place.h"

#define SV_ARRAY_SIZE_T(a) (sizeof(a) / sizeof((a)[0]))

static uint8_t src[1 << 20], dst[(1 << 20) + 64];

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed);
}

static void case_plain(void)
{
	size_t sizes[] = {0, 1, 2, 15, 16, 17, 63, 64, 65, 4095, 4096, 100000};
	size_t offs[] = {0, 1, 7, 16, 33};

	t_case("plain copies are exact at every size and alignment");
	for (size_t s = 0; s < SV_ARRAY_SIZE_T(sizes); s++)
		for (size_t o = 0; o < SV_ARRAY_SIZE_T(offs); o++) {
			fill(src, sizes[s], (unsigned)(s + o));
			memset(dst, 0xAA, sizeof(dst));
			CHECK(sw_place(NULL, dst + offs[o], src, sizes[s]) == 0);
			CHECK(memcmp(dst + offs[o], src, sizes[s]) == 0);
			CHECK(offs[o] == 0 || dst[offs[o] - 1] == 0xAA);
			CHECK(dst[offs[o] + sizes[s]] == 0xAA);
		}
}

static void case_ph(void)
{
	struct sw_place_hint h = {0};
	size_t before;

	t_case("ph 1 uses non-temporal stores, ph 0/2/3 do not");
	fill(src, 8192, 3);
	for (uint8_t ph = 0; ph <= 3; ph++) {
		h.ph = ph;
		before = atomic_load(&sw_place_stats.nt_bytes);
		memset(dst, 0, sizeof(dst));
		CHECK(sw_place(&h, dst + 5, src, 8192) == 0);
		CHECK(memcmp(dst + 5, src, 8192) == 0);
#if defined(__x86_64__)
		if (ph == 1)
			CHECK_MSG(atomic_load(&sw_place_stats.nt_bytes) - before >= 8192 - 32,
				  "ph 1 streamed %zu bytes",
				  atomic_load(&sw_place_stats.nt_bytes) - before);
		else
			CHECK_EQ_INT(atomic_load(&sw_place_stats.nt_bytes), before);
#endif
	}
}

static void case_pm(void)
{
	struct sw_place_hint h = {.mem_type = IBV_TPH_MEM_TYPE_PM};
	size_t before = atomic_load(&sw_place_stats.flushed_lines);

	t_case("PM writes back every touched cache line");
	fill(src, 1000, 9);
	/* 1000 bytes at offset 60 of a 64-aligned buffer touch 17 lines */
	CHECK(sw_place(&h, dst + 60, src, 1000) == 0);
	CHECK(memcmp(dst + 60, src, 1000) == 0);
	CHECK_EQ_INT(atomic_load(&sw_place_stats.flushed_lines) - before,
		     ((uintptr_t)dst + 60 + 1000 - 1) / 64 - ((uintptr_t)dst + 60) / 64 + 1);
	h.mem_type = IBV_TPH_MEM_TYPE_VM;
	before = atomic_load(&sw_place_stats.flushed_lines);
	CHECK(sw_place(&h, dst, src, 1000) == 0);
	CHECK_EQ_INT(atomic_load(&sw_place_stats.flushed_lines), before);
}

static void case_cpu(void)
{
	cpu_set_t set;
	int cpu = -1;

	t_case("CPU_ID placements run on a worker pinned to that CPU");
	CHECK(sched_getaffinity(0, sizeof(set), &set) == 0);
	for (int c = CPU_SETSIZE - 1; c >= 0; c--)
		if (CPU_ISSET(c, &set))
			cpu = c; /* lowest allowed CPU */
	if (!CHECK(cpu >= 0))
		return;
	for (int round = 0; round < 2; round++) {
		struct sw_place_hint h = {.has_cpu = true, .cpu_id = (uint32_t)cpu, .ph = 1};
		size_t jobs;

		CHECK(sw_place(&h, dst, src, 64) == -ENODEV); /* no worker reference */
		CHECK(sw_place_worker_get((uint32_t)cpu) == 0);
		CHECK(sw_place_worker_get((uint32_t)cpu) == 0); /* shared */
		jobs = atomic_load(&sw_place_stats.pinned_jobs);
		fill(src, 50000, 11);
		for (int i = 0; i < 20; i++)
			CHECK(sw_place(&h, dst + i, src, 50000) == 0);
		CHECK(memcmp(dst + 19, src, 50000) == 0);
		CHECK_EQ_INT(atomic_load(&sw_place_stats.pinned_jobs) - jobs, 20);
		CHECK_EQ_INT(atomic_load(&sw_place_stats.last_cpu), cpu);
		sw_place_worker_put((uint32_t)cpu);
		sw_place_worker_put((uint32_t)cpu); /* joins the worker */
	}
}

/* Contract: the number of 64-byte lines [p, p + len) touches. */
static size_t lines(const uint8_t *p, size_t len)
{
	return ((uintptr_t)p + len - 1) / 64 - (uintptr_t)p / 64 + 1;
}

static void case_flush(void)
{
	struct sw_place_hint pm = {.mem_type = IBV_TPH_MEM_TYPE_PM};
	struct sw_place_hint vm = {.mem_type = IBV_TPH_MEM_TYPE_VM};
	size_t before = atomic_load(&sw_place_stats.flushed_lines);
	uint64_t word = 0;
	cpu_set_t set;
	int cpu = -1;

	t_case("FLUSH: persistent on PM writes back every line of the range, nothing else does");
	sw_place_flush(&pm, dst + 60, 1000, true);
	CHECK_EQ_INT(atomic_load(&sw_place_stats.flushed_lines) - before, lines(dst + 60, 1000));
	before = atomic_load(&sw_place_stats.flushed_lines);
	sw_place_flush(&pm, dst, 1000, false); /* global only */
	sw_place_flush(&vm, dst, 1000, true); /* not persistent memory */
	sw_place_flush(NULL, dst, 1000, true);
	sw_place_flush(&pm, NULL, 0, true); /* an empty range */
	CHECK_EQ_INT(atomic_load(&sw_place_stats.flushed_lines), before);
	sw_place_store64(&pm, &word, 0x1122334455667788ull);
	CHECK_EQ_INT(word, 0x1122334455667788ull);
	CHECK_EQ_INT(atomic_load(&sw_place_stats.flushed_lines) - before, 1);

	t_case("FLUSH and ATOMIC WRITE come after the deferred copies on a pinned worker");
	CHECK(sched_getaffinity(0, sizeof(set), &set) == 0);
	for (int c = CPU_SETSIZE - 1; c >= 0; c--)
		if (CPU_ISSET(c, &set))
			cpu = c;
	if (!CHECK(cpu >= 0) || !CHECK(sw_place_worker_get((uint32_t)cpu) == 0))
		return;
	for (int round = 0; round < 20; round++) {
		struct sw_place_hint h = {
			.has_cpu = true, .cpu_id = (uint32_t)cpu, .mem_type = IBV_TPH_MEM_TYPE_PM};

		fill(src, sizeof(src), (unsigned)round + 20);
		before = atomic_load(&sw_place_stats.flushed_lines);
		CHECK(sw_place_defer(&h, dst, src, sizeof(src), NULL, NULL) == 0);
		sw_place_kick();
		sw_place_flush(&h, dst, sizeof(src), true);
		CHECK(!sw_place_pending());
		CHECK(memcmp(dst, src, sizeof(src)) == 0);
		/* the copy's own write-back and the flush's, each of every line */
		CHECK_EQ_INT(atomic_load(&sw_place_stats.flushed_lines) - before,
			     2 * lines(dst, sizeof(src)));
		CHECK(sw_place_defer(&h, dst, src, 64, NULL, NULL) == 0);
		sw_place_store64(&h, (uint64_t *)(void *)dst, (uint64_t)round);
		CHECK_EQ_INT(*(uint64_t *)(void *)dst, (uint64_t)round);
	}
	sw_place_worker_put((uint32_t)cpu);
}

static void case_last_byte(void)
{
	static uint8_t pattern[256 << 10];
	size_t len = sizeof(pattern);
	struct sw_place_hint nt = {.ph = 1};
	struct pu_reader rd;

	t_case("the last byte becomes visible last");
	if (!CHECK(pu_reader_start(&rd, dst, len) == 0))
		return;
	for (int r = 1; r <= 100; r++) {
		memset(pattern, r, len);
		atomic_store(&rd.round, r);
		CHECK(sw_place(r % 2 ? &nt : NULL, dst, pattern, len) == 0);
	}
	CHECK_EQ_INT(pu_reader_stop(&rd), 0);
}

int main(void)
{
	t_start("unit_place");
	case_plain();
	case_ph();
	case_pm();
	case_cpu();
	case_flush();
	case_last_byte();
	return t_finish();
}
