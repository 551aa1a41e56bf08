/* SPDX-License-Identifier: MIT */
/*
 * unit_dmah_place: what a DMA handle gives the placement layer
 * (mem/dmah.c, mem/mr.c, mem/place.c; docs/cc-and-tph.md).
 *
 * An MR registered with a handle carries a copy of its hints; an MR
 * without one has none. A handle with a CPU id holds a placement worker
 * pinned to that CPU for its lifetime: placements with its hint run
 * there (the pinned-job counter grows, the last CPU is that one). Two
 * handles of the same CPU share the worker; after the last one is
 * deallocated the worker is joined and such a placement is -ENODEV. A
 * refused allocation starts no worker.
 */
#include "harness.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "place_util.h"
#include "sw/ctrl.h"

#define LW IBV_ACCESS_LOCAL_WRITE
#define M_ALL                                                                                      \
	(IBV_DMAH_INIT_ATTR_MASK_CPU_ID | IBV_DMAH_INIT_ATTR_MASK_PH |                             \
	 IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE)

static size_t page;
static uint8_t src[8192], dst[8192];

static struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t len, struct ibv_dmah *d)
{
	return pu_reg(pd, addr, len, LW, d);
}

/* Threads of this process, or -1. */
static int count_threads(void)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!dir)
		return -1;
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

/*
 * The thread count once it is `want`, waiting up to a second: a joined
 * thread leaves /proc/self/task a moment after pthread_join returns (its
 * tid is cleared before the kernel reaps it).
 */
static int threads_become(int want)
{
	int n = count_threads();

	for (int i = 0; i < 1000 && n != want; i++) {
		usleep(1000);
		n = count_threads();
	}
	return n;
}

static void *noop(void *arg)
{
	*(pid_t *)arg = (pid_t)syscall(SYS_gettid);
	return NULL;
}

/*
 * Threads of this process once every helper thread exists: a thread is
 * created and joined first, so that a tool's helper started lazily by
 * the first pthread_create (ThreadSanitizer's) is already counted. The
 * count waits for that thread to leave /proc/self/task (as in
 * threads_become); counted, it made every later count one short (seen
 * once on a loaded clean-clone make check).
 */
static int count_threads_settled(void)
{
	pid_t tid = 0;
	pthread_t t;
	char path[64];

	if (pthread_create(&t, NULL, noop, &tid) == 0) {
		pthread_join(t, NULL);
		snprintf(path, sizeof(path), "/proc/self/task/%d", (int)tid);
		for (int i = 0; i < 1000 && tid && access(path, F_OK) == 0; i++)
			usleep(1000);
	}
	return count_threads();
}

/* One placement with `h`: 0 and on the pinned worker of `cpu`, or the error. */
static int place_on(const struct sw_place_hint *h, int cpu)
{
	size_t jobs = atomic_load(&sw_place_stats.pinned_jobs);
	int ret;

	memset(dst, 0, sizeof(dst));
	atomic_store(&sw_place_stats.last_cpu, -1);
	ret = sw_place(h, dst, src, sizeof(src));
	if (ret)
		return ret;
	CHECK(!memcmp(dst, src, sizeof(src)));
	CHECK_EQ_INT(atomic_load(&sw_place_stats.pinned_jobs) - jobs, 1);
	CHECK_EQ_INT(atomic_load(&sw_place_stats.last_cpu), cpu);
	return 0;
}

int main(void)
{
	struct ibv_dmah_init_attr da;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_dmah *d, *d2, *dph;
	struct ibv_mr *mr, *mr2, *plain;
	struct sw_place_hint hint;
	cpu_set_t set;
	uint8_t *mem;
	size_t jobs;
	int cpu = -1, c, threads;

	t_start("unit_dmah_place");
	page = (size_t)sysconf(_SC_PAGESIZE);
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 13 + 1);
	if (sched_getaffinity(0, sizeof(set), &set)) {
		printf("Bail out! sched_getaffinity: %s\n", t_errname(errno));
		return 1;
	}
	for (c = CPU_SETSIZE - 1; c >= 0; c--)
		if (CPU_ISSET(c, &set))
			cpu = c; /* the lowest allowed CPU */
	t_open_first(&ctx);
	pd = ibv_alloc_pd(ctx);
	mem = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pd || mem == MAP_FAILED || cpu < 0) {
		printf("Bail out! setup: %s\n", t_errname(errno));
		return 1;
	}

	t_case("no worker before any handle; a refused handle starts none");
	threads = count_threads_settled();
	hint = (struct sw_place_hint){.has_cpu = true, .cpu_id = (uint32_t)cpu};
	CHECK_EQ_INT(sw_place(&hint, dst, src, sizeof(src)), -ENODEV);
	memset(&da, 0, sizeof(da));
	da.comp_mask = M_ALL;
	da.cpu_id = (uint32_t)cpu;
	da.ph = 4; /* row 8: after the CPU checks */
	CHECK_ERRNO_PTR(ibv_alloc_dmah(ctx, &da), EINVAL);
	CHECK_EQ_INT(sw_place(&hint, dst, src, sizeof(src)), -ENODEV);
	CHECK_EQ_INT(threads_become(threads), threads);

	t_case("an MR with a CPU_ID handle has its hint; placement runs pinned");
	da.ph = 3;
	da.tph_mem_type = IBV_TPH_MEM_TYPE_PM;
	d = ibv_alloc_dmah(ctx, &da);
	if (!CHECK_MSG(d != NULL, "alloc: %s", t_errname(errno)))
		return t_finish();
	CHECK_EQ_INT(count_threads(), threads + 1); /* the worker */
	mr = reg(pd, mem, page, d);
	if (CHECK_MSG(mr != NULL, "reg: %s", t_errname(errno))) {
		struct sw_mr *smr = sw_mr(mr);

		CHECK(smr->has_hint);
		CHECK(smr->dmah == sw_dmah(d));
		CHECK(smr->hint.has_cpu);
		CHECK_EQ_INT(smr->hint.cpu_id, cpu);
		CHECK_EQ_INT(smr->hint.ph, 3);
		CHECK_EQ_INT(smr->hint.mem_type, IBV_TPH_MEM_TYPE_PM);
		CHECK_EQ_INT(place_on(&smr->hint, cpu), 0);
		CHECK_EQ_INT(place_on(&smr->hint, cpu), 0);
		hint = smr->hint;
	}

	t_case("an MR without a handle, and one with a PH-only handle");
	plain = reg(pd, mem + page, page, NULL);
	if (CHECK(plain)) {
		CHECK(!sw_mr(plain)->has_hint);
		CHECK(sw_mr(plain)->dmah == NULL);
		CHECK_RET(ibv_dereg_mr(plain), 0);
	}
	dph = ibv_alloc_dmah(ctx, &(struct ibv_dmah_init_attr){
					  .comp_mask = IBV_DMAH_INIT_ATTR_MASK_PH, .ph = 1});
	if (CHECK(dph)) {
		mr2 = reg(pd, mem + page, page, dph);
		if (CHECK(mr2)) {
			CHECK(sw_mr(mr2)->has_hint);
			CHECK(!sw_mr(mr2)->hint.has_cpu);
			CHECK_EQ_INT(sw_mr(mr2)->hint.ph, 1);
			CHECK_EQ_INT(sw_mr(mr2)->hint.mem_type, IBV_TPH_MEM_TYPE_VM);
			/* no CPU: the placement runs here, not on a worker */
			jobs = atomic_load(&sw_place_stats.pinned_jobs);
			CHECK_EQ_INT(sw_place(&sw_mr(mr2)->hint, dst, src, sizeof(src)), 0);
			CHECK_EQ_INT(atomic_load(&sw_place_stats.pinned_jobs), jobs);
			CHECK_RET(ibv_dereg_mr(mr2), 0);
		}
		CHECK_RET(ibv_dealloc_dmah(dph), 0);
	}

	t_case("two handles of one CPU share the worker; the last one joins it");
	d2 = ibv_alloc_dmah(ctx, &da);
	if (CHECK(d2)) {
		if (mr)
			CHECK_RET(ibv_dereg_mr(mr), 0);
		mr = NULL;
		CHECK_RET(ibv_dealloc_dmah(d), 0);
		d = NULL;
		/* d2 still holds the worker, and no second one was started */
		CHECK_EQ_INT(count_threads(), threads + 1);
		CHECK_EQ_INT(place_on(&hint, cpu), 0);
		CHECK_RET(ibv_dealloc_dmah(d2), 0);
	}
	if (mr)
		CHECK_RET(ibv_dereg_mr(mr), 0);
	if (d)
		CHECK_RET(ibv_dealloc_dmah(d), 0);
	CHECK_EQ_INT(sw_place(&hint, dst, src, sizeof(src)), -ENODEV);
	CHECK_EQ_INT(threads_become(threads), threads); /* joined */

	t_case("a new handle starts a new worker");
	d = ibv_alloc_dmah(ctx, &da);
	if (CHECK(d)) {
		CHECK_EQ_INT(count_threads(), threads + 1);
		CHECK_EQ_INT(place_on(&hint, cpu), 0);
		CHECK_RET(ibv_dealloc_dmah(d), 0);
	}
	CHECK_EQ_INT(sw_place(&hint, dst, src, sizeof(src)), -ENODEV);
	CHECK_EQ_INT(threads_become(threads), threads);

	t_case("teardown");
	munmap(mem, 2 * page);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	return t_finish();
}
