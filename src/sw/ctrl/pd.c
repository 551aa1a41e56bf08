/* SPDX-License-Identifier: MIT */
/*
 * pd.c - protection domains, parent domains and thread domains.
 *
 * A parent domain is a PD object that wraps a protection domain proper
 * (its base): it shares the base's handle and protection, and adds the
 * optional thread domain, custom allocators and the confidential-computing
 * opt-in. The rules and their order follow mlx5 with the kernel's PD
 * reference counting:
 *   - the base PD counts its dependants in usecnt (MRs on it or on its
 *     parent domains, parent domains, later QPs/CQs/SRQs/AHs) and cannot
 *     be deallocated while any exists (EBUSY);
 *   - a parent domain counts the CQs and QPs created on it;
 *   - a thread domain counts the parent domains using it.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "sw/ctrl.h"

#define SW_CC_HEAP_PATH "/dev/dma_heap/system_cc_shared"

#define SW_PD_KNOWN_MASK                                                                           \
	(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT |         \
	 IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC)

/* PD handles: never reused within the process, so unique per device. */
static atomic_uint next_pd_handle = 1;

/* Contract: sv_ops.alloc_pd. -ENOMEM past max_pd or out of memory. */
int sw_alloc_pd(struct ibv_context *ctx, struct ibv_pd **out)
{
	struct sw_dev *dev = sw_dev_of(ctx);
	struct sw_pd *pd;

	pd = sw_limit_calloc(&dev->npd, SW_MAX_PD, sizeof(*pd));
	if (!pd)
		return -ENOMEM;
	pd->ibv.context = ctx;
	pd->ibv.handle = atomic_fetch_add(&next_pd_handle, 1);
	atomic_init(&pd->usecnt, 0);
	pd->heap_fd = -1;
	*out = &pd->ibv;
	return 0;
}

/*
 * Contract: open the confidential-computing heap for a parent domain on a
 * bounce device, per SOFTVERBS_CC_HEAP: kernel requires the heap (open's
 * errno otherwise), auto uses it when present (a missing heap means the
 * built-in pool, *fd = -1), builtin never opens it. 0 or -errno.
 */
static int cc_heap_open(enum sw_cc_heap mode, int *fd)
{
	*fd = -1;
	if (mode == SW_CC_HEAP_BUILTIN)
		return 0;
	*fd = open(SW_CC_HEAP_PATH, O_RDWR | O_CLOEXEC);
	if (*fd >= 0)
		return 0;
	if (mode == SW_CC_HEAP_AUTO && errno == ENOENT)
		return 0;
	return -errno;
}

/*
 * Contract: sv_ops.alloc_parent_domain, checked in mlx5's order: missing
 * attr or pd -> EINVAL (also a pd that is itself a parent domain or
 * belongs to another context, and a td of another context); unknown
 * comp_mask bits -> EINVAL; ENOMEM; on a bounce device the CC opt-in may
 * fail with the heap's open errno. Then td and base PD gain a reference.
 */
int sw_alloc_parent_domain(struct ibv_context *ctx, struct ibv_parent_domain_init_attr *attr,
			   struct ibv_pd **out)
{
	const struct sw_dev *dev = sw_dev_of(ctx);
	struct sw_pd *pd, *base;
	int ret;

	if (!attr || !attr->pd)
		return -EINVAL;
	base = sw_pd(attr->pd);
	if (base->is_parent || base->ibv.context != ctx)
		return -EINVAL;
	if (attr->td && attr->td->context != ctx)
		return -EINVAL;
	if (attr->comp_mask & ~(uint32_t)SW_PD_KNOWN_MASK)
		return -EINVAL;
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return -ENOMEM;
	pd->heap_fd = -1;
	if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC) &&
	    dev->cfg.cc_dma_bounce) {
		ret = cc_heap_open(dev->cfg.cc_heap, &pd->heap_fd);
		if (ret) {
			free(pd);
			return ret;
		}
		pd->cc_alloc = true;
	}
	if (attr->td) {
		pd->td = sv_container_of(attr->td, struct sw_td, ibv);
		atomic_fetch_add(&pd->td->refcnt, 1);
	}
	pd->is_parent = true;
	pd->base = base;
	atomic_init(&pd->usecnt, 0);
	atomic_fetch_add(&base->usecnt, 1);
	pd->ibv.context = base->ibv.context;
	pd->ibv.handle = base->ibv.handle;
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pd->alloc = attr->alloc;
		pd->free = attr->free;
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = attr->pd_context;
	*out = &pd->ibv;
	return 0;
}

/*
 * Contract: sv_ops.dealloc_pd. -EBUSY while anything depends on the PD;
 * a parent domain then releases its base, its td and its heap fd.
 */
int sw_dealloc_pd(struct ibv_pd *ibv)
{
	struct sw_pd *pd = sw_pd(ibv);

	if (atomic_load(&pd->usecnt) > 0)
		return -EBUSY;
	if (pd->is_parent) {
		atomic_fetch_sub(&pd->base->usecnt, 1);
		if (pd->td)
			atomic_fetch_sub(&pd->td->refcnt, 1);
		if (pd->heap_fd >= 0)
			close(pd->heap_fd);
	} else {
		atomic_fetch_sub(&sw_dev_of(ibv->context)->npd, 1);
	}
	free(pd);
	return 0;
}

/* Contract: sv_ops.alloc_td. -EINVAL for a missing attr or comp_mask != 0, -ENOMEM. */
int sw_alloc_td(struct ibv_context *ctx, struct ibv_td_init_attr *attr, struct ibv_td **out)
{
	struct sw_dev *dev = sw_dev_of(ctx);
	struct sw_td *td;

	if (!attr || attr->comp_mask)
		return -EINVAL;
	td = sw_limit_calloc(&dev->ntd, SW_MAX_TD, sizeof(*td));
	if (!td)
		return -ENOMEM;
	td->ibv.context = ctx;
	atomic_init(&td->refcnt, 1);
	*out = &td->ibv;
	return 0;
}

/* Contract: sv_ops.dealloc_td. -EBUSY while a parent domain uses it. */
int sw_dealloc_td(struct ibv_td *ibv)
{
	struct sw_td *td = sv_container_of(ibv, struct sw_td, ibv);

	if (atomic_load(&td->refcnt) > 1)
		return -EBUSY;
	atomic_fetch_sub(&sw_dev_of(ibv->context)->ntd, 1);
	free(td);
	return 0;
}
