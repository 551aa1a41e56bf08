/* SPDX-License-Identifier: MIT */
/*
 * unit_place_pull.c - pulled placements (mem/place_pull.c), read from
 * this very process with process_vm_readv(2):
 *   a. copies that continue each other merge into one call, and land
 *      exact at the fence, each owner told once with 0;
 *   b. a later copy over bytes a queued one covers wins, also at the
 *      earlier one's last byte (stored aside until the call returned,
 *      and then not stored: api_load_qps_1024_link_deep found one byte
 *      of an earlier WRITE over a later one's when it was), in the same
 *      call; also a stream of copies into one buffer, and a later copy
 *      whose last byte an earlier one covers;
 *   c. any other placement lands the queue first (sw_place);
 *   d. a copy from an address that is not mapped fails: its owner gets
 *      -EFAULT, the copies before it in the call still land;
 *   e. a copy into an MR with a hint is read and placed at once.
 */
#include "harness.h"

#include <stdint.h>
#include <sys/mman.h>

#include "sw/mem/place.h"

static uint8_t src[1 << 16], src2[1 << 16], dst[1 << 16];

struct seen {
	int calls, err;
};

static void done(void *a, void *b, int err)
{
	struct seen *s = a;

	(void)b;
	s->calls++;
	if (err)
		s->err = err;
}

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131 + seed * 7 + (i >> 8));
}

static void pull(void *to, const void *from, size_t len, struct seen *s)
{
	struct sw_pull_owner own = {.done = done, .a = s};

	CHECK(sw_place_pull(NULL, to, getpid(), (uintptr_t)from, len, &own) == 0);
}

static void case_merge(void)
{
	struct seen s = {0};
	size_t calls = atomic_load(&sw_place_stats.pull_calls);

	t_case("a. continuing copies merge into one call and land exact at the fence");
	fill(src, sizeof(src), 1);
	memset(dst, 0, sizeof(dst));
	for (size_t off = 0; off < sizeof(src); off += 4096)
		pull(dst + off, src + off, 4096, &s);
	CHECK(sw_place_pull_pending());
	sw_place_fence();
	CHECK(!sw_place_pull_pending());
	CHECK(!memcmp(dst, src, sizeof(src)));
	CHECK_EQ_INT((int)(atomic_load(&sw_place_stats.pull_calls) - calls), 1);
	CHECK_EQ_INT(s.calls, 16);
	CHECK_EQ_INT(s.err, 0);
}

static void case_overlap(void)
{
	struct seen s = {0};

	t_case("b. a later copy over a queued one wins, at its last byte too");
	fill(src, sizeof(src), 2);
	fill(src2, sizeof(src2), 3);
	memset(dst, 0, sizeof(dst));
	size_t calls = atomic_load(&sw_place_stats.pull_calls);

	pull(dst, src, 8192, &s); /* [0, 8192): last byte 8191 */
	pull(dst + 4096, src2, 8192, &s); /* [4096, 12288) covers 8191 */
	sw_place_fence();
	CHECK(!memcmp(dst, src, 4096));
	CHECK_MSG(!memcmp(dst + 4096, src2, 8192), "byte 8191: %u, want %u", dst[8191],
		  src2[8191 - 4096]);
	CHECK_EQ_INT(s.calls, 2);
	CHECK_EQ_INT((int)(atomic_load(&sw_place_stats.pull_calls) - calls), 1);
}

static void case_overlap_stream(void)
{
	struct seen s = {0};
	size_t calls = atomic_load(&sw_place_stats.pull_calls);

	t_case("b2. WRITEs into one buffer share a call; the last one's bytes stay, each last byte too");
	fill(src, sizeof(src), 5);
	fill(src2, sizeof(src2), 6);
	memset(dst, 0, sizeof(dst));
	for (int i = 0; i < 8; i++) /* the same 16 KiB, from alternating sources */
		pull(dst, i % 2 ? src2 : src, 16384, &s);
	sw_place_fence();
	CHECK_MSG(!memcmp(dst, src2, 16384), "byte 16383: %u, want %u", dst[16383], src2[16383]);
	CHECK_EQ_INT(s.calls, 8);
	CHECK_EQ_INT((int)(atomic_load(&sw_place_stats.pull_calls) - calls), 1);

	t_case("b3. a later copy whose last byte an earlier one covers: each wins where it is last");
	memset(dst, 0, sizeof(dst));
	pull(dst + 4096, src, 8192, &s); /* [4096, 12288): last byte 12287 */
	pull(dst, src2, 8192, &s); /* [0, 8192): its last byte 8191 inside the first */
	sw_place_fence();
	CHECK(!memcmp(dst, src2, 8192));
	CHECK_MSG(!memcmp(dst + 8192, src + 4096, 4096), "byte 12287: %u, want %u", dst[12287],
		  src[8191]);
}

static void case_order(void)
{
	struct seen s = {0};
	uint8_t b = 0x5a;

	t_case("c. another placement lands the queue first");
	fill(src, sizeof(src), 4);
	memset(dst, 0, sizeof(dst));
	pull(dst, src, 4096, &s);
	CHECK(sw_place(NULL, dst + 100, &b, 1) == 0); /* a later WRITE of one byte */
	sw_place_fence();
	CHECK(!memcmp(dst, src, 100));
	CHECK_EQ_INT(dst[100], 0x5a);
	CHECK(!memcmp(dst + 101, src + 101, 4096 - 101));
}

static void case_fault(void)
{
	struct seen ok = {0}, bad = {0};
	uint8_t *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	t_case("d. an unmapped source fails its owner with EFAULT, the copies before it land");
	if (!CHECK(hole != MAP_FAILED))
		return;
	fill(src, sizeof(src), 5);
	memset(dst, 0, sizeof(dst));
	pull(dst, src, 4096, &ok);
	pull(dst + 8192, hole, 4096, &bad);
	sw_place_fence();
	CHECK(!memcmp(dst, src, 4096));
	CHECK_EQ_INT(ok.err, 0);
	CHECK_EQ_INT(bad.calls, 1);
	CHECK_EQ_INT(bad.err, -EFAULT);
	munmap(hole, 4096);
}

static void case_hint(void)
{
	struct sw_place_hint h = {.ph = 1}; /* non-temporal stores */
	struct sw_pull_owner own = {.done = done};
	struct seen s = {0};

	t_case("e. a copy into an MR with a hint is read and placed at once");
	own.a = &s;
	fill(src, sizeof(src), 6);
	memset(dst, 0, sizeof(dst));
	CHECK(sw_place_pull(&h, dst, getpid(), (uintptr_t)src, 10000, &own) == 0);
	CHECK(!sw_place_pull_pending());
	CHECK_EQ_INT(s.calls, 1);
	CHECK(!memcmp(dst, src, 10000));
}

int main(void)
{
	t_start("unit_place_pull");
	case_merge();
	case_overlap();
	case_overlap_stream();
	case_order();
	case_fault();
	case_hint();
	return t_finish();
}
