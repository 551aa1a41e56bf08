/* SPDX-License-Identifier: MIT */
/*
 * api_fork: fork protection (ibv_fork_init, ibv_is_fork_initialized,
 * ibv_dontfork_range / ibv_dofork_range) and how registration uses it.
 *
 * Protection is observed the way an application would meet it: a forked
 * child that touches a protected page faults (the page is not in the
 * child at all). Counts nest: two dontforks need two doforks. Address
 * MRs are protected from registration to deregistration (rereg moves
 * the protection with the translation); failed calls leave nothing
 * behind; DMA-buf registrations, direct or through an ibv_buf, are
 * never protected.
 */
#include "harness.h"
#include "fork_probe.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/core/buf.h"

/* Exported (IBVERBS_1.1) but declared in rdma-core's driver.h, not verbs.h. */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

#define LW IBV_ACCESS_LOCAL_WRITE

static size_t page;

#define CHECK_CHILD(p, want, result)                                                               \
	t_check(child_reads((p), (want)) == (result), __FILE__, __LINE__,                          \
		"child reading %s: want %s", #p, (result) == CHILD_OK ? "the byte" : "a fault")

static uint8_t *map_page(uint8_t fill)
{
	uint8_t *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		printf("Bail out! mmap: %s\n", t_errname(errno));
		exit(1);
	}
	memset(p, fill, page);
	return p;
}

static void test_init(uint8_t *p)
{
	bool env = getenv("RDMAV_FORK_SAFE") || getenv("IBV_FORK_SAFE");

	t_case("before ibv_fork_init: no protection");
	CHECK_EQ_INT(ibv_is_fork_initialized(), env ? IBV_FORK_ENABLED : IBV_FORK_UNNEEDED);
	if (!env) {
		CHECK_RET(ibv_dontfork_range(p, page), 0);
		CHECK_CHILD(p, 0x11, CHILD_OK);
		CHECK_RET(ibv_dofork_range(p, page), 0);
		/* any range is accepted while nothing is protected */
		CHECK_RET(ibv_dontfork_range(p, SIZE_MAX), 0);
		CHECK_RET(ibv_dofork_range(p, SIZE_MAX), 0);
	}

	t_case("ibv_fork_init");
	CHECK_RET(ibv_fork_init(), 0);
	CHECK_EQ_INT(ibv_is_fork_initialized(), IBV_FORK_ENABLED);
	CHECK_RET(ibv_fork_init(), 0); /* idempotent */
	CHECK_EQ_INT(ibv_is_fork_initialized(), IBV_FORK_ENABLED);
	CHECK_CHILD(p, 0x11, CHILD_OK);
}

static void test_ranges(uint8_t *p)
{
	t_case("dontfork/dofork nest");
	CHECK_RET(ibv_dontfork_range(p, page), 0);
	CHECK_CHILD(p, 0x11, CHILD_FAULT);
	CHECK_RET(ibv_dontfork_range(p + 10, 20), 0); /* same page, sub-range */
	CHECK_RET(ibv_dofork_range(p, page), 0);
	CHECK_CHILD(p, 0x11, CHILD_FAULT);
	CHECK_CHILD(p + page - 1, 0x11, CHILD_FAULT);
	CHECK_RET(ibv_dofork_range(p + 10, 20), 0);
	CHECK_CHILD(p, 0x11, CHILD_OK);
	CHECK_CHILD(p + page - 1, 0x11, CHILD_OK);

	t_case("protected ranges must exist and not wrap");
	CHECK_RET(ibv_dontfork_range((void *)(uintptr_t)page, page), ENOMEM);
	CHECK_RET(ibv_dontfork_range(p, SIZE_MAX), EINVAL);
	CHECK_CHILD(p, 0x11, CHILD_OK);
}

static void test_mr(struct ibv_pd *pd, uint8_t *p, uint8_t *q)
{
	struct ibv_mr *a, *b;

	t_case("an address MR is protected until dereg");
	a = ibv_reg_mr(pd, p, page, LW);
	b = ibv_reg_mr(pd, p + 100, 10, LW);
	if (!CHECK(a && b))
		return;
	CHECK_CHILD(p, 0x11, CHILD_FAULT);
	CHECK_RET(ibv_dereg_mr(a), 0);
	CHECK_CHILD(p, 0x11, CHILD_FAULT);
	CHECK_RET(ibv_dereg_mr(b), 0);
	CHECK_CHILD(p, 0x11, CHILD_OK);
	a = ibv_reg_mr_ex(pd, &(struct ibv_mr_init_attr){.length = page,
							 .access = LW,
							 .comp_mask = IBV_REG_MR_MASK_ADDR,
							 .addr = q});
	if (CHECK(a)) {
		CHECK_CHILD(q, 0x22, CHILD_FAULT);
		CHECK_RET(ibv_dereg_mr(a), 0);
		CHECK_CHILD(q, 0x22, CHILD_OK);
	}

	t_case("a failed registration leaves no protection");
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, p, page, IBV_ACCESS_REMOTE_WRITE), EINVAL);
	CHECK_CHILD(p, 0x11, CHILD_OK);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, p, 0, LW), EINVAL);
	/* an ODP registration is never protected: the child keeps the page */
	a = ibv_reg_mr(pd, p, page, LW | IBV_ACCESS_ON_DEMAND);
	if (CHECK(a)) {
		CHECK_CHILD(p, 0x11, CHILD_OK);
		CHECK_RET(ibv_dereg_mr(a), 0);
	}
	/* protection comes first: an unmapped range fails in madvise, as in rdma-core */
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, (void *)(uintptr_t)page, page, LW), ENOMEM);

	t_case("rereg moves the protection with the translation");
	a = ibv_reg_mr(pd, p, page, LW);
	if (!CHECK(a))
		return;
	CHECK_EQ_INT(ibv_rereg_mr(a, IBV_REREG_MR_CHANGE_TRANSLATION, pd, q, page, 0), 0);
	CHECK_CHILD(p, 0x11, CHILD_OK);
	CHECK_CHILD(q, 0x22, CHILD_FAULT);
	/* the new range cannot be protected: MR unchanged */
	CHECK_EQ_INT(ibv_rereg_mr(a, IBV_REREG_MR_CHANGE_TRANSLATION, pd, (void *)(uintptr_t)page,
				  page, 0),
		     IBV_REREG_MR_ERR_DONT_FORK_NEW);
	CHECK(a->addr == q);
	CHECK_CHILD(q, 0x22, CHILD_FAULT);
	/* the device refuses: the new range is released again */
	CHECK_EQ_INT(ibv_rereg_mr(a, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS,
				  pd, p, page, IBV_ACCESS_REMOTE_WRITE),
		     IBV_REREG_MR_ERR_CMD);
	CHECK_CHILD(p, 0x11, CHILD_OK);
	CHECK_CHILD(q, 0x22, CHILD_FAULT);
	/* other changes keep the protection where it is */
	CHECK_EQ_INT(ibv_rereg_mr(a, IBV_REREG_MR_CHANGE_ACCESS, pd, NULL, 0, 0), 0);
	CHECK_CHILD(q, 0x22, CHILD_FAULT);
	CHECK_RET(ibv_dereg_mr(a), 0);
	CHECK_CHILD(q, 0x22, CHILD_OK);
}

static void test_dmabuf(struct ibv_pd *pd, uint8_t *p)
{
	int fd = memfd_create("api_fork", MFD_CLOEXEC);
	uint8_t *map;
	struct ibv_buf b;
	struct ibv_mr *mr;

	t_case("DMA-buf registrations are not protected");
	if (!CHECK(fd >= 0) || !CHECK_EQ_INT(ftruncate(fd, (off_t)(2 * page)), 0))
		return;
	map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (!CHECK(map != MAP_FAILED)) {
		close(fd);
		return;
	}
	map[0] = 0x33;
	mr = ibv_reg_dmabuf_mr(pd, 0, 2 * page, (uintptr_t)map, fd, LW);
	if (CHECK(mr)) {
		CHECK_CHILD(map, 0x33, CHILD_OK);
		CHECK_RET(ibv_dereg_mr(mr), 0);
	}
	sv_buf_init_dmabuf(&b, pd, map, 2 * page, fd);
	mr = ibv_reg_buf_mr(pd, &b, map, page, LW);
	if (CHECK(mr)) {
		CHECK_CHILD(map, 0x33, CHILD_OK);
		CHECK_RET(ibv_dereg_mr(mr), 0);
	}
	/* a plain buffer goes down the address path and is protected */
	sv_buf_init(&b, pd, p, page);
	mr = ibv_reg_buf_mr(pd, &b, p, page, LW);
	if (CHECK(mr)) {
		CHECK_CHILD(p, 0x11, CHILD_FAULT);
		CHECK_RET(ibv_dereg_mr(mr), 0);
		CHECK_CHILD(p, 0x11, CHILD_OK);
	}
	munmap(map, 2 * page);
	close(fd);
}

int main(void)
{
	/* static: still reachable when a child's valgrind looks for leaks */
	static struct ibv_context *ctx;
	static struct ibv_pd *pd;
	static uint8_t *p, *q;

	t_start("api_fork");
	page = (size_t)sysconf(_SC_PAGESIZE);
	p = map_page(0x11);
	q = map_page(0x22);
	test_init(p);
	test_ranges(p);

	t_open_first(&ctx);
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		printf("Bail out! ibv_alloc_pd: %s\n", t_errname(errno));
		return 1;
	}
	test_mr(pd, p, q);
	test_dmabuf(pd, p);

	t_case("teardown");
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	munmap(p, page);
	munmap(q, page);
	return t_finish();
}
