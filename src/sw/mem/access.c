/* SPDX-License-Identifier: MIT */
/*
 * access.c - access-flag rules for registration and for each use of an MR.
 *
 * Registration follows the kernel's REG_MR handling: the fd path first
 * narrows the allowed set, then unknown bits are refused, then the
 * generic MR access rules apply. Bits of IBV_ACCESS_OPTIONAL_RANGE are
 * hints a device may ignore; the core strips them before most calls and
 * this layer ignores any that arrive.
 *
 * On-demand paging: the device never pins memory, it reads and writes
 * the process's pages with the CPU, which faults them in on demand; so
 * every MR behaves as an ODP MR does and IBV_ACCESS_ON_DEMAND is
 * accepted on the address path (explicit ODP; the device reports the ODP
 * capabilities, not implicit ODP: see mr.c). The fd path refuses it
 * (EINVAL), as the kernel does. The flush bits are accepted: memory the
 * device writes is ordinary process memory, visible (global) once
 * written.
 */
#include "sw/sw.h"

/* Every non-optional access bit of the rdma-core 65 API. */
#define KNOWN_ACCESS                                                                               \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |                   \
	 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_FLUSH_GLOBAL |                     \
	 IBV_ACCESS_FLUSH_PERSISTENT)

/* What a DMA-buf (fd) registration may ask for, optional bits aside. */
#define FD_PATH_ACCESS                                                                             \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

/*
 * Contract: 0 if `access` is acceptable for a registration (fd path if
 * `fd_path`), else -EINVAL (unknown bit, bit not allowed on the fd path,
 * remote write/atomic without local write).
 */
int sw_access_check(int access, bool fd_path)
{
	unsigned int a = (unsigned int)access & ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE;

	if (fd_path && (a & ~(unsigned int)FD_PATH_ACCESS))
		return -EINVAL;
	if (a & ~(unsigned int)KNOWN_ACCESS)
		return -EINVAL;
	if ((a & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(a & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	return 0;
}

/* Contract: see sw.h. Overflow-safe for any iova/len; len 0 is a valid range. */
int sw_mr_check_range(const struct sw_mr *mr, uint64_t iova, uint64_t len, int need)
{
	if (iova < mr->iova || len > mr->length || iova - mr->iova > mr->length - len)
		return -EINVAL;
	if ((unsigned int)need & ~(unsigned int)mr->access)
		return -EACCES;
	return 0;
}
