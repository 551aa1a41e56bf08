/* SPDX-License-Identifier: MIT */
/*
 * api_reg_mr: ibv_reg_mr, ibv_reg_mr_iova, ibv_reg_mr_iova2, ibv_dereg_mr.
 *
 * Every success path with the MR fields the core and the device fill,
 * the access combinations (optional bits dropped, never refused), every
 * errno of the address path, PD busy while an MR exists, and the key
 * properties (nonzero, lkey == rkey, unique, fresh on re-registration).
 */
#include "harness.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ
#define RA IBV_ACCESS_REMOTE_ATOMIC

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static size_t page;

/* A value the compiler cannot see through, so ibv_reg_mr() takes its runtime path. */
static int runtime(int v)
{
	volatile int x = v;

	return x;
}

/* Pages mapped read-write; bails out on failure. */
static uint8_t *map_pages(size_t n)
{
	void *p = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		printf("Bail out! mmap: %s\n", t_errname(errno));
		exit(1);
	}
	return p;
}

/* Checks the fields of a fresh MR; returns ok. */
static int check_mr(struct ibv_mr *mr, void *addr, size_t len, const char *what)
{
	if (!CHECK_MSG(mr != NULL, "%s: NULL, errno %s", what, t_errname(errno)))
		return 0;
	CHECK_MSG(mr->context == ctx, "%s: context", what);
	CHECK_MSG(mr->pd == pd, "%s: pd", what);
	CHECK_MSG(mr->addr == addr, "%s: addr %p want %p", what, mr->addr, addr);
	CHECK_MSG(mr->length == len, "%s: length %zu want %zu", what, mr->length, len);
	CHECK_MSG(mr->lkey != 0, "%s: lkey 0", what);
	CHECK_MSG(mr->lkey == mr->rkey, "%s: lkey 0x%x != rkey 0x%x", what, mr->lkey, mr->rkey);
	return 1;
}

static void dereg(struct ibv_mr *mr)
{
	if (mr)
		CHECK_RET(ibv_dereg_mr(mr), 0);
}

static void test_success(void)
{
	uint8_t *buf = map_pages(4);
	struct ibv_mr *mr;
	static char data[100];
	char *heap;

	t_case("ibv_reg_mr: constant and runtime access");
	mr = ibv_reg_mr(pd, buf, 4 * page, LW);
	if (check_mr(mr, buf, 4 * page, "reg_mr const"))
		dereg(mr);
	mr = ibv_reg_mr(pd, buf, 4 * page, runtime(LW | RW | RR | RA));
	if (check_mr(mr, buf, 4 * page, "reg_mr runtime"))
		dereg(mr);

	t_case("ibv_reg_mr_iova / iova2");
	mr = ibv_reg_mr_iova(pd, buf, page, 0x7000000000ULL, LW);
	if (check_mr(mr, buf, page, "reg_mr_iova const"))
		dereg(mr);
	mr = ibv_reg_mr_iova(pd, buf + 5, 10, 0x5, runtime(LW));
	if (check_mr(mr, buf + 5, 10, "reg_mr_iova runtime, zero-based iova"))
		dereg(mr);
	mr = ibv_reg_mr_iova2(pd, buf, 2 * page, (uintptr_t)buf, LW | RR);
	if (check_mr(mr, buf, 2 * page, "reg_mr_iova2"))
		dereg(mr);
	mr = ibv_reg_mr_iova2(pd, buf + 100, 3 * page, 0xdead0000ULL + 100, RR);
	if (check_mr(mr, buf + 100, 3 * page, "reg_mr_iova2 other iova"))
		dereg(mr);

	t_case("unaligned, small, heap and static memory");
	mr = ibv_reg_mr(pd, buf + 13, 1, 0);
	if (check_mr(mr, buf + 13, 1, "1 byte"))
		dereg(mr);
	mr = ibv_reg_mr(pd, buf + page - 1, 2, LW); /* straddles a page boundary */
	if (check_mr(mr, buf + page - 1, 2, "2 bytes across pages"))
		dereg(mr);
	mr = ibv_reg_mr(pd, data, sizeof(data), LW);
	if (check_mr(mr, data, sizeof(data), "static"))
		dereg(mr);
	heap = malloc(12345);
	if (CHECK(heap)) {
		mr = ibv_reg_mr(pd, heap, 12345, LW | RW);
		if (check_mr(mr, heap, 12345, "heap"))
			dereg(mr);
		free(heap);
	}

	t_case("read-only memory, no write access");
	if (CHECK_EQ_INT(mprotect(buf, page, PROT_READ), 0)) {
		mr = ibv_reg_mr(pd, buf, page, RR);
		if (check_mr(mr, buf, page, "read-only"))
			dereg(mr);
		mprotect(buf, page, PROT_READ | PROT_WRITE);
	}

	t_case("dereg after the memory is gone");
	mr = ibv_reg_mr(pd, buf + 3 * page, page, LW);
	if (check_mr(mr, buf + 3 * page, page, "last page")) {
		munmap(buf + 3 * page, page);
		dereg(mr);
	} else {
		munmap(buf + 3 * page, page);
	}
	munmap(buf, 3 * page);
}

static void test_access(void)
{
	static const int ok_access[] = {
		0,
		LW,
		RR,
		LW | RW,
		LW | RA,
		LW | RW | RR | RA,
		IBV_ACCESS_MW_BIND,
		LW | IBV_ACCESS_ZERO_BASED,
		LW | IBV_ACCESS_HUGETLB,
		LW | IBV_ACCESS_RELAXED_ORDERING,
		LW | RW | IBV_ACCESS_RELAXED_ORDERING,
		IBV_ACCESS_RELAXED_ORDERING,
		(int)IBV_ACCESS_OPTIONAL_RANGE,
		LW | (1 << 29),
	};
	uint8_t *buf = map_pages(1);
	struct ibv_mr *mr;
	size_t i;

	t_case("access combinations accepted (MW_BIND, ZERO_BASED, HUGETLB and optional bits ignored)");
	for (i = 0; i < sizeof(ok_access) / sizeof(ok_access[0]); i++) {
		int a = ok_access[i];
		char what[64];

		snprintf(what, sizeof(what), "reg_mr access 0x%x", a);
		mr = ibv_reg_mr(pd, buf, page, runtime(a));
		if (check_mr(mr, buf, page, what))
			dereg(mr);
		snprintf(what, sizeof(what), "reg_mr_iova access 0x%x", a);
		mr = ibv_reg_mr_iova(pd, buf, page, 0x1000, runtime(a));
		if (check_mr(mr, buf, page, what))
			dereg(mr);
		snprintf(what, sizeof(what), "reg_mr_iova2 access 0x%x", a);
		mr = ibv_reg_mr_iova2(pd, buf, page, 0x1000, (unsigned int)a);
		if (check_mr(mr, buf, page, what))
			dereg(mr);
	}
	/* constant access with the relaxed-ordering bit: the macro's iova2 branch */
	mr = ibv_reg_mr(pd, buf, page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING);
	if (check_mr(mr, buf, page, "reg_mr const RELAXED_ORDERING"))
		dereg(mr);

	t_case("access errors");
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, page, runtime(RW)), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, page, runtime(RA)), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, page, runtime(RR | RW | RA)), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, page, runtime(RW | IBV_ACCESS_RELAXED_ORDERING)),
			EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, page, runtime(LW | (1 << 10))), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, page, runtime(1 << 19)), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr_iova2(pd, buf, page, 0, 1U << 31), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, page, runtime(RW | IBV_ACCESS_ON_DEMAND)), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, page, runtime(1 << 30)), EINVAL);
	/*
	 * the device reports IBV_DEVICE_FLUSH_*: FLUSH_GLOBAL registers; FLUSH_PERSISTENT
	 * needs persistent memory (a PM DMA handle), as rxe refuses it on other pages
	 */
	mr = ibv_reg_mr(pd, buf, page, runtime(LW | IBV_ACCESS_FLUSH_GLOBAL));
	if (CHECK(mr))
		CHECK_RET(ibv_dereg_mr(mr), 0);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, page, runtime(LW | IBV_ACCESS_FLUSH_PERSISTENT)),
			EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, page, runtime(RW | IBV_ACCESS_FLUSH_GLOBAL)), EINVAL);
	/* explicit ODP registers; implicit ODP (NULL, SIZE_MAX) is refused */
	mr = ibv_reg_mr(pd, buf, page, runtime(LW | IBV_ACCESS_ON_DEMAND));
	if (CHECK(mr))
		dereg(mr);
	mr = ibv_reg_mr_iova(pd, buf, page, 0, runtime(LW | IBV_ACCESS_ON_DEMAND));
	if (CHECK(mr))
		dereg(mr);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, NULL, SIZE_MAX, runtime(LW | IBV_ACCESS_ON_DEMAND)),
			EOPNOTSUPP);
	munmap(buf, page);
}

static void test_errors(void)
{
	uint8_t *buf = map_pages(3);
	uint64_t top = UINT64_MAX & ~(uint64_t)(page - 1);

	t_case("EINVAL: length, iova, overflow");
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, 0, LW), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr_iova(pd, buf, 0, 0x1000, LW), EINVAL);
	/* page offsets of addr and iova must match */
	CHECK_ERRNO_PTR(ibv_reg_mr_iova(pd, buf, page, (uintptr_t)buf + 1, LW), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr_iova2(pd, buf + 8, 8, 0x1000, LW), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr_iova(pd, buf, page, 0x123, LW), EINVAL);
	/* the mask check comes before the access check */
	CHECK_ERRNO_PTR(ibv_reg_mr_iova(pd, buf, page, 0x123, runtime(IBV_ACCESS_ON_DEMAND)),
			EINVAL);
	/* [addr, +length) and [iova, +length) must not wrap */
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, (void *)(uintptr_t)(top + 16), page, LW), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, SIZE_MAX, LW), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr_iova(pd, buf, 2 * page, top, LW), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr_iova2(pd, buf, page + 1, top, LW), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr(NULL, buf, page, LW), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr_iova2(NULL, buf, page, 0, LW), EINVAL);
	/* access is checked before the memory */
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, NULL, page, runtime(RW)), EINVAL);
	{
		/* the whole range fits in iova, but only just */
		struct ibv_mr *mr = ibv_reg_mr_iova(pd, buf, page, top, LW);

		if (check_mr(mr, buf, page, "iova at the top of the space"))
			dereg(mr);
	}

	t_case("EFAULT: unmapped and partly mapped ranges");
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, NULL, page, LW), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, (void *)(uintptr_t)page, 1, LW), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, SIZE_MAX / 2, LW), EFAULT);
	CHECK_EQ_INT(munmap(buf + page, page), 0); /* a hole in the middle */
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, 3 * page, LW), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, page + 1, LW), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf + page - 1, 2, LW), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf + page, page, LW), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf + 2 * page - 1, 2, LW), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr_iova(pd, buf, 3 * page, 0, LW), EFAULT);
	{
		struct ibv_mr *a = ibv_reg_mr(pd, buf, page, LW);
		struct ibv_mr *b = ibv_reg_mr(pd, buf + 2 * page, page, LW);

		if (check_mr(a, buf, page, "first page"))
			dereg(a);
		if (check_mr(b, buf + 2 * page, page, "last page"))
			dereg(b);
	}
	munmap(buf, page);
	munmap(buf + 2 * page, page);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, page, LW), EFAULT);

	t_case("ibv_dereg_mr(NULL)");
	CHECK_RET(ibv_dereg_mr(NULL), EINVAL);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

enum {
	NKEYS = 256
};

static void test_keys(void)
{
	static struct ibv_mr *mrs[NKEYS];
	static uint32_t first[NKEYS], all[2 * NKEYS];
	uint8_t *buf = map_pages(1);
	int i, n = 0, dups = 0, same_mr = 0;

	t_case("keys unique, fresh after re-registration");
	for (i = 0; i < NKEYS; i++) {
		mrs[i] = ibv_reg_mr(pd, buf, page, LW | RW); /* the same memory every time */
		if (!CHECK(mrs[i]))
			break;
		first[i] = mrs[i]->lkey;
		all[n++] = mrs[i]->lkey;
		same_mr += mrs[i]->lkey == mrs[i]->rkey;
	}
	CHECK_EQ_INT(same_mr, i);
	for (i = 0; i < NKEYS; i++)
		if (mrs[i])
			dereg(mrs[i]);
	for (i = 0; i < NKEYS; i++) {
		mrs[i] = ibv_reg_mr(pd, buf, page, LW | RW);
		if (!CHECK(mrs[i]))
			break;
		all[n++] = mrs[i]->lkey;
	}
	qsort(all, (size_t)n, sizeof(all[0]), cmp_u32);
	for (i = 1; i < n; i++)
		dups += all[i] == all[i - 1];
	CHECK_MSG(dups == 0, "%d duplicate keys among %d registrations", dups, n);
	/* not a counter: the keys of consecutive registrations are far apart */
	CHECK(n < 2 || (uint32_t)(first[1] - first[0]) != 1);
	for (i = 0; i < NKEYS; i++)
		if (mrs[i])
			dereg(mrs[i]);
	munmap(buf, page);
}

static void test_pd_busy(void)
{
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	uint8_t *buf = map_pages(1);
	struct ibv_mr *a, *b;

	t_case("dealloc_pd is EBUSY while an MR exists");
	if (!CHECK(pd2))
		return;
	a = ibv_reg_mr(pd2, buf, page, LW);
	b = ibv_reg_mr(pd2, buf, page, LW);
	CHECK(a && b);
	CHECK_RET(ibv_dealloc_pd(pd2), EBUSY);
	if (a)
		CHECK_RET(ibv_dereg_mr(a), 0);
	CHECK_RET(ibv_dealloc_pd(pd2), b ? EBUSY : 0);
	if (b)
		CHECK_RET(ibv_dereg_mr(b), 0);
	if (a && b)
		CHECK_RET(ibv_dealloc_pd(pd2), 0);
	/* a failed registration takes no reference */
	pd2 = ibv_alloc_pd(ctx);
	if (CHECK(pd2)) {
		CHECK_ERRNO_PTR(ibv_reg_mr(pd2, buf, 0, LW), EINVAL);
		CHECK_ERRNO_PTR(ibv_reg_mr(pd2, NULL, page, LW), EFAULT);
		CHECK_RET(ibv_dealloc_pd(pd2), 0);
	}
	munmap(buf, page);
}

int main(void)
{
	t_start("api_reg_mr");
	page = (size_t)sysconf(_SC_PAGESIZE);
	t_open_first(&ctx);
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		printf("Bail out! ibv_alloc_pd: %s\n", t_errname(errno));
		return 1;
	}
	test_success();
	test_access();
	test_errors();
	test_keys();
	test_pd_busy();

	t_case("teardown");
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	return t_finish();
}
