/* SPDX-License-Identifier: MIT */
/*
 * advise.c - ibv_advise_mr(): prefetch advice for ODP MRs.
 *
 * The device reads and writes the process's pages with the CPU, so a
 * prefetch only has to fault them in ahead of the traffic: PREFETCH and
 * PREFETCH_WRITE populate the range (MADV_POPULATE_READ / _WRITE, where
 * the kernel has them; a kernel without them leaves the faults to the
 * first access), PREFETCH_NO_FAULT does nothing. The checks follow
 * mlx5: every SGE must name an ODP MR of this PD (writable for
 * PREFETCH_WRITE) and lie inside it.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "sw/ctrl.h"
#include "sw/mem.h"

/* Contract: fault in the pages of [p, p + len) for reading or writing. */
static void populate(uint8_t *p, uint64_t len, bool write)
{
#if defined(MADV_POPULATE_READ) && defined(MADV_POPULATE_WRITE)
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)p & ~(page - 1);
	uintptr_t end = ((uintptr_t)p + len + page - 1) & ~(page - 1);

	if (len)
		(void)madvise((void *)start, end - start,
			      write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
#else
	(void)p;
	(void)len;
	(void)write;
#endif
}

/*
 * Contract: check one SGE against the advice; on success with `act`,
 * populate its pages. 0, -ENOENT (no such ODP MR of the PD, or not
 * writable for PREFETCH_WRITE) or -EFAULT (range outside the MR).
 */
static int advise_sge(struct sw_dev *dev, struct sw_pd *pd, enum ibv_advise_mr_advice advice,
		      const struct ibv_sge *sge, bool act)
{
	bool write = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
	int need = IBV_ACCESS_ON_DEMAND | (write ? IBV_ACCESS_LOCAL_WRITE : 0);
	struct sw_mr *mr;
	int ret;

	ret = sw_mr_resolve(dev, sge->lkey, pd, sge->addr, sge->length, need, &mr);
	if (ret)
		return ret == -EINVAL ? -EFAULT : -ENOENT;
	if (act)
		populate(sw_mr_host(mr, sge->addr), sge->length, write);
	sw_mr_put(mr);
	return 0;
}

/*
 * Contract: the sv_ops advise_mr slot. -EOPNOTSUPP for an unknown
 * advice, -EINVAL for flags beyond IBV_ADVISE_MR_FLAG_FLUSH or no SGE;
 * then, SGE by SGE, advise_sge's errors. All SGEs are checked before any
 * is populated. Synchronous whether or not FLUSH is asked.
 */
int sw_advise_mr(struct ibv_pd *ibpd, enum ibv_advise_mr_advice advice, uint32_t flags,
		 struct ibv_sge *sg, uint32_t num_sge)
{
	struct sw_dev *dev = sw_dev_of(ibpd->context);
	struct sw_pd *pd = sw_pd_base(ibpd);
	uint32_t i;
	int ret;

	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return -EOPNOTSUPP;
	if ((flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH) || !sg || !num_sge)
		return -EINVAL;
	for (i = 0; i < num_sge; i++) {
		ret = advise_sge(dev, pd, advice, &sg[i], false);
		if (ret)
			return ret;
	}
	if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return 0;
	for (i = 0; i < num_sge; i++)
		(void)advise_sge(dev, pd, advice, &sg[i], true);
	return 0;
}
