/* SPDX-License-Identifier: MIT */
/*
 * dm.c - device memory (ibv_alloc_dm, ibv_memcpy_to/from_dm,
 * ibv_reg_dm_mr, ibv_free_dm), emulated in host memory.
 *
 * A DM is a zeroed, page-aligned buffer of the process that only the
 * application's copy verbs and RDMA through a DM MR reach; the device
 * counts up to SW_MAX_DM_SIZE bytes of them (page-rounded), which it
 * reports as max_dm_size. The rules follow mlx5 and the kernel:
 *   - alloc: comp_mask 0, length 1..max_dm_size, log_align_req up to a
 *     page (12) -> EINVAL; the device out of DM space -> ENOMEM;
 *   - copies: 4-byte aligned offset and length -> EINVAL; a range past
 *     the DM -> EFAULT;
 *   - DM MR: IBV_ACCESS_ZERO_BASED required and the access bits within
 *     local/remote write, remote read/atomic, zero-based -> EINVAL; a
 *     range past the DM -> EINVAL (length 0 is valid, as in the kernel).
 *     It is zero-based (iova 0 is the offset's byte) and holds a use of
 *     the DM;
 *   - free: EBUSY while MRs use it.
 * A context that closes with DMs left frees them (after its MRs).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sw/ctrl.h"
#include "sw/mem.h"

#define DM_ACCESS                                                                                  \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED)
#define DM_MAX_LOG_ALIGN 12

static atomic_uint next_dm_handle = 1;

static struct sw_context *sw_ctx_of(struct ibv_context *ctx)
{
	return sv_container_of(sv_ctx(ctx), struct sw_context, core);
}

static struct sw_dm *sw_dm(struct ibv_dm *dm)
{
	return (struct sw_dm *)dm;
}

/* Contract: 0 if [off, +len) is a legal copy range of `dm`, else a positive errno. */
static int copy_check(const struct sw_dm *dm, uint64_t off, size_t len)
{
	if ((off | len) & 3)
		return EINVAL;
	if (off > dm->length || len > dm->length - off)
		return EFAULT;
	return 0;
}

/* Contract: ibv_dm.memcpy_to_dm (positive errno). */
static int copy_to_dm(struct ibv_dm *ibdm, uint64_t off, const void *host, size_t len)
{
	struct sw_dm *dm = sw_dm(ibdm);
	int ret = copy_check(dm, off, len);

	if (!ret && len)
		memcpy(dm->buf + off, host, len);
	return ret;
}

/* Contract: ibv_dm.memcpy_from_dm (positive errno). */
static int copy_from_dm(void *host, struct ibv_dm *ibdm, uint64_t off, size_t len)
{
	struct sw_dm *dm = sw_dm(ibdm);
	int ret = copy_check(dm, off, len);

	if (!ret && len)
		memcpy(host, dm->buf + off, len);
	return ret;
}

/* Contract: take `n` bytes of the device's DM space; -ENOMEM when it has not enough. */
static int dm_space_take(struct sw_dev *dev, size_t n)
{
	unsigned long long cur = atomic_load(&dev->dm_bytes);

	do {
		if (n > SW_MAX_DM_SIZE || cur > SW_MAX_DM_SIZE - n)
			return -ENOMEM;
	} while (!atomic_compare_exchange_weak(&dev->dm_bytes, &cur, cur + n));
	return 0;
}

/* Contract: the sv_ops alloc_dm slot; see the file comment. */
int sw_alloc_dm(struct ibv_context *ctx, struct ibv_alloc_dm_attr *attr, struct ibv_dm **out)
{
	struct sw_context *c = sw_ctx_of(ctx);
	struct sw_dev *dev = sw_dev_of(ctx);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct sw_dm *dm;
	size_t len;
	int ret;

	if (!attr || attr->comp_mask || !attr->length || attr->length > SW_MAX_DM_SIZE ||
	    attr->log_align_req > DM_MAX_LOG_ALIGN)
		return -EINVAL;
	len = (attr->length + page - 1) & ~(page - 1);
	ret = dm_space_take(dev, len);
	if (ret)
		return ret;
	dm = calloc(1, sizeof(*dm));
	if (dm)
		dm->buf = aligned_alloc(page, len);
	if (!dm || !dm->buf) {
		free(dm);
		atomic_fetch_sub(&dev->dm_bytes, len);
		return -ENOMEM;
	}
	memset(dm->buf, 0, len);
	dm->length = attr->length;
	dm->alloc_len = len;
	atomic_init(&dm->usecnt, 0);
	dm->ibv.context = ctx;
	dm->ibv.memcpy_to_dm = copy_to_dm;
	dm->ibv.memcpy_from_dm = copy_from_dm;
	dm->ibv.handle = atomic_fetch_add(&next_dm_handle, 1);
	pthread_mutex_lock(&c->dm_lock);
	dm->next = c->dms;
	if (c->dms)
		c->dms->prev = dm;
	c->dms = dm;
	pthread_mutex_unlock(&c->dm_lock);
	*out = &dm->ibv;
	return 0;
}

/* Contract: unlink `dm` from its context, return its space, free it. */
static void dm_destroy(struct sw_context *c, struct sw_dm *dm)
{
	if (c->dms == dm) /* the head: the only entry without a prev */
		c->dms = dm->next;
	else
		dm->prev->next = dm->next;
	if (dm->next)
		dm->next->prev = dm->prev;
	atomic_fetch_sub(&sw_dev_of(dm->ibv.context)->dm_bytes, dm->alloc_len);
	free(dm->buf);
	free(dm);
}

/* Contract: the sv_ops free_dm slot. -EBUSY while an MR uses the DM. */
int sw_free_dm(struct ibv_dm *ibdm)
{
	struct sw_context *c = sw_ctx_of(ibdm->context);
	struct sw_dm *dm = sw_dm(ibdm);

	if (atomic_load(&dm->usecnt) > 0)
		return -EBUSY;
	pthread_mutex_lock(&c->dm_lock);
	dm_destroy(c, dm);
	pthread_mutex_unlock(&c->dm_lock);
	return 0;
}

/* Contract: see sw/mem.h. */
void sw_dm_ctx_close(struct ibv_context *ctx)
{
	struct sw_context *c = sw_ctx_of(ctx);

	pthread_mutex_lock(&c->dm_lock);
	while (c->dms)
		dm_destroy(c, c->dms);
	pthread_mutex_unlock(&c->dm_lock);
}

/* Contract: the sv_ops reg_dm_mr slot; see the file comment. */
int sw_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *ibdm, uint64_t offset, size_t length,
		 unsigned int access, struct ibv_mr **out)
{
	struct sw_dev *dev = sw_dev_of(pd->context);
	struct sw_dm *dm = sw_dm(ibdm);
	struct sw_mr *mr;
	int ret;

	if (!dm || dm->ibv.context != pd->context)
		return -EINVAL;
	if (!(access & IBV_ACCESS_ZERO_BASED) || (access & ~(unsigned int)DM_ACCESS))
		return -EINVAL;
	ret = sw_access_check((int)access, false);
	if (ret)
		return ret;
	if (offset > dm->length || length > dm->length - offset)
		return -EINVAL;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->fd = -1;
	atomic_init(&mr->refcnt, 1);
	mr->pd = sw_pd_base(pd);
	mr->iova = 0;
	mr->length = length;
	mr->host = dm->buf + offset;
	mr->access = (int)access;
	ret = sw_mr_table_insert(&dev->mrs, mr);
	if (ret) {
		sw_mr_put(mr);
		return ret;
	}
	mr->ibv.handle = mr->key;
	mr->dm = dm;
	atomic_fetch_add(&dm->usecnt, 1);
	atomic_fetch_add(&mr->pd->usecnt, 1);
	*out = &mr->ibv;
	return 0;
}
