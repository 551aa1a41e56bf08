/* SPDX-License-Identifier: MIT */
/*
 * api_regress_reg_mr_prot: registration refuses memory that pinning
 * would refuse (found by fuzz/fuzz_verbs).
 *
 * Regression: the address path only checked that every page was mapped
 * (mincore), so an MR could cover a PROT_NONE guard page, or read-only
 * memory with LOCAL_WRITE / REMOTE_WRITE / REMOTE_ATOMIC. The kernel's
 * pin (get_user_pages) fails with EFAULT there; softverbs registered it,
 * and a peer's RDMA WRITE or atomic, or a local READ landing in it, then
 * faulted in the progress thread and killed the process. Now EFAULT, for
 * ibv_reg_mr, ibv_reg_mr_ex and ibv_rereg_mr (new translation or new,
 * writable access); read-only memory still registers for reading.
 */
#include "harness.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ
#define RA IBV_ACCESS_REMOTE_ATOMIC

int main(void)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *m;

	t_start("api_regress_reg_mr_prot");
	t_open_first(&ctx);
	pd = ibv_alloc_pd(ctx);
	/* four pages: read-write, PROT_NONE, read-only, read-write */
	m = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!CHECK(pd && m != MAP_FAILED) || !CHECK(mprotect(m + page, page, PROT_NONE) == 0) ||
	    !CHECK(mprotect(m + 2 * page, page, PROT_READ) == 0))
		return t_finish();

	t_case("a PROT_NONE page: EFAULT, whatever the access");
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, m + page, page, 0), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, m + page, page, RR), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, m, 2 * page, LW), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, m + page - 1, 2, RR), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, m, 4 * page, LW | RW), EFAULT);
	{
		struct ibv_mr_init_attr a = {.length = 2 * page,
					     .access = LW,
					     .comp_mask = IBV_REG_MR_MASK_ADDR,
					     .addr = m};

		CHECK_ERRNO_PTR(ibv_reg_mr_ex(pd, &a), EFAULT);
	}

	t_case("read-only memory: readable MRs register, writable ones get EFAULT");
	mr = ibv_reg_mr(pd, m + 2 * page, page, 0);
	if (CHECK(mr))
		CHECK_RET(ibv_dereg_mr(mr), 0);
	mr = ibv_reg_mr(pd, m + 2 * page, page, RR);
	if (CHECK(mr))
		CHECK_RET(ibv_dereg_mr(mr), 0);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, m + 2 * page, page, LW), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, m + 2 * page, page, LW | RW), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, m + 2 * page, page, LW | RA), EFAULT);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, m + 2 * page + 100, 8, LW | RR), EFAULT);
	/* read-write then read-only: the read-only part decides */
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, m + 3 * page - 8, 16, LW), EFAULT);
	mr = ibv_reg_mr(pd, m + 3 * page, page, LW | RW | RR | RA);
	if (CHECK(mr))
		CHECK_RET(ibv_dereg_mr(mr), 0);

	t_case("ibv_rereg_mr: to read-only memory or to writable access: EFAULT, MR unchanged");
	mr = ibv_reg_mr(pd, m + 2 * page, page, RR);
	if (CHECK(mr)) {
		errno = 0;
		CHECK_EQ_INT(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, pd, NULL, 0, LW | RR),
			     IBV_REREG_MR_ERR_CMD);
		CHECK_EQ_INT(errno, EFAULT);
		CHECK_EQ_INT(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, pd, NULL, 0, 0), 0);
		CHECK_RET(ibv_dereg_mr(mr), 0);
	}
	mr = ibv_reg_mr(pd, m, page, LW);
	if (CHECK(mr)) {
		errno = 0;
		CHECK_EQ_INT(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, pd, m + 2 * page,
					  page, 0),
			     IBV_REREG_MR_ERR_CMD);
		CHECK_EQ_INT(errno, EFAULT);
		errno = 0;
		CHECK_EQ_INT(
			ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, pd, m + page, page, 0),
			IBV_REREG_MR_ERR_CMD);
		CHECK_EQ_INT(errno, EFAULT);
		CHECK(mr->addr == m && mr->length == page);
		CHECK_EQ_INT(
			ibv_rereg_mr(mr,
				     IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS,
				     pd, m + 2 * page, page, RR),
			0);
		CHECK_RET(ibv_dereg_mr(mr), 0);
	}

	munmap(m, 4 * page);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	return t_finish();
}
