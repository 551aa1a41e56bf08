/* SPDX-License-Identifier: MIT */
/*
 * access.c - access-flag rules for registration and for each use of an MR.
 *
 * Registration follows the kernel's REG_MR handling (ib_check_mr_access
 * and the uverbs methods), in its order:
 *   1. the fd (DMA-buf) path allows LOCAL_WRITE, REMOTE_READ,
 *      REMOTE_WRITE, REMOTE_ATOMIC and RELAXED_ORDERING only   -> EINVAL
 *   2. REMOTE_WRITE or REMOTE_ATOMIC without LOCAL_WRITE         -> EINVAL
 *   3. a bit outside the kernel's supported set: the named bits
 *      up to FLUSH_PERSISTENT and the optional range            -> EINVAL
 * FLUSH_GLOBAL and FLUSH_PERSISTENT are accepted: the device reports
 * IBV_DEVICE_FLUSH_GLOBAL and _PERSISTENT (it has RDMA FLUSH), so the
 * kernel's check lets them through, as for rxe. As rxe refuses
 * FLUSH_PERSISTENT on pages that are not persistent memory (EINVAL),
 * registration refuses it on an MR whose DMA handle is not of type PM,
 * the device's persistent memory (sw_access_check_persistent, mr.c).
 * Bits of IBV_ACCESS_OPTIONAL_RANGE (relaxed ordering and the hints after
 * it) reach the device, as with a kernel that supports optional access;
 * the address path accepts and ignores them.
 *
 * On-demand paging: the device never pins memory, it reads and writes
 * the process's pages with the CPU, which faults them in on demand; so
 * every MR behaves as an ODP MR does and IBV_ACCESS_ON_DEMAND is
 * accepted on the address path (explicit ODP; the device reports the ODP
 * capabilities, not implicit ODP: see mr.c). The fd path refuses it
 * (EINVAL, step 1), as the kernel does. MW_BIND lets memory windows be
 * bound to the MR (mem/mw.c); ZERO_BASED and HUGETLB are accepted and
 * mean nothing to an MR (every MR is addressed by its iova; huge pages
 * are the application's).
 *
 * Each use of an MR (sw_mr_resolve) checks, in this order: the key names
 * a live MR, the MR belongs to the user's protection domain, it grants
 * every access bit the use needs, and the range lies inside it. A key of
 * another PD is as unknown as a key nobody registered.
 */
#include "sw/ctrl.h"
#include "sw/mem.h"

/* The kernel's supported set: every named bit up to FLUSH_PERSISTENT, and the optional range. */
#define SUPPORTED_ACCESS                                                                           \
	((((unsigned int)IBV_ACCESS_FLUSH_PERSISTENT << 1) - 1) |                                  \
	 (unsigned int)IBV_ACCESS_OPTIONAL_RANGE)

/* What a DMA-buf (fd) registration may ask for. */
#define FD_PATH_ACCESS                                                                             \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING)

/*
 * Contract: 0 if `access` is acceptable for a registration (fd path if
 * `fd_path`), else -EINVAL or -EOPNOTSUPP (steps above).
 */
int sw_access_check(int access, bool fd_path)
{
	unsigned int a = (unsigned int)access;

	if (fd_path && (a & ~(unsigned int)FD_PATH_ACCESS))
		return -EINVAL;
	if ((a & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(a & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (a & ~SUPPORTED_ACCESS)
		return -EINVAL;
	return 0;
}

/* Contract: see sw/mem.h. */
int sw_access_check_persistent(int access, const struct sw_mr *mr)
{
	if (!((unsigned int)access & IBV_ACCESS_FLUSH_PERSISTENT))
		return 0;
	return mr && mr->has_hint && mr->hint.mem_type == IBV_TPH_MEM_TYPE_PM ? 0 : -EINVAL;
}

/* Contract: see sw/mem.h. Overflow-safe for any iova/len; len 0 is a valid range. */
int sw_mr_check_range(const struct sw_mr *mr, uint64_t iova, uint64_t len, int need)
{
	if (iova < mr->iova || len > mr->length || iova - mr->iova > mr->length - len)
		return -EINVAL;
	if ((unsigned int)need & ~(unsigned int)mr->access)
		return -EACCES;
	return 0;
}

/* The end of a resolve: `ret` 0 hands the referenced entry out, else drops it. */
static int hand_out(struct sw_mr *e, int ret, struct sw_mr **out)
{
	if (ret) {
		sw_mr_put(e);
		return ret;
	}
	*out = e;
	return 0;
}

/* Contract: see sw/mem.h. */
int sw_mr_resolve(struct sw_dev *dev, uint32_t key, const struct sw_pd *pd, uint64_t va,
		  uint64_t len, int need, struct sw_mr **out)
{
	struct sw_mr *mr = sw_mr_table_lookup(&dev->mrs, key);
	int ret;

	if (!mr)
		return -ENOENT;
	if (mr->mw || mr->pd != pd)
		ret = -ENOENT; /* a window's key is no lkey */
	else if ((unsigned int)need & ~(unsigned int)mr->access)
		ret = -EACCES;
	else
		ret = sw_mr_check_range(mr, va, len, 0);
	return hand_out(mr, ret, out);
}

/*
 * Contract: see sw/mem.h. A window is checked as rxe's lookup does
 * (bound, PD, the type 2 window's QP, access), then the range against
 * the window itself, as IBTA asks (rxe checks it against the MR beneath:
 * docs/compatibility.md).
 */
int sw_rkey_resolve(struct sw_dev *dev, uint32_t key, const struct sw_pd *pd, uint64_t qp_uid,
		    uint64_t va, uint64_t len, int need, struct sw_mr **out)
{
	struct sw_mr *e;
	int ret;

	if (!(key & SW_KEY_MW))
		return sw_mr_resolve(dev, key, pd, va, len, need, out);
	e = sw_mr_table_lookup(&dev->mrs, key);
	if (!e)
		return -ENOENT;
	if (!e->mw || !e->parent || e->pd != pd)
		ret = -ENOENT;
	else if (e->qp_uid && e->qp_uid != qp_uid)
		ret = -EACCES;
	else if ((unsigned int)need & ~(unsigned int)e->access)
		ret = -EACCES;
	else
		ret = sw_mr_check_range(e, va, len, 0);
	return hand_out(e, ret, out);
}
