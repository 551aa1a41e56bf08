/* SPDX-License-Identifier: MIT */
/*
 * mr.c - registration, re-registration and deregistration of MRs.
 *
 * Validation follows rdma-core's ibv_cmd_reg_mr_ex and the kernel's
 * UVERBS_METHOD_REG_MR, in their order (docs/seed-apis.md 1.5.4, 1.6, 3.3):
 *   1. mask: FD needs FD_OFFSET and no ADDR; otherwise ADDR and no
 *      FD_OFFSET; the fd path needs IOVA                   -> EINVAL
 *   2. page offsets of (addr, iova) or (fd_offset, iova)    -> EINVAL
 *   3. access bits (access.c)                               -> EINVAL
 *      ON_DEMAND: implicit ODP (addr NULL, length SIZE_MAX), or
 *      together with a DMA handle (as mlx5)                 -> EOPNOTSUPP
 *   4. DMA handle: not one of this context's                -> EINVAL
 *   5. CC DMA bounce device: the address path     -> EOPNOTSUPP
 *   6. the memory: length, overflow                         -> EINVAL
 *      address path: every page mapped, readable, and
 *      writable for a writable MR (as pinning)             -> EFAULT
 *      fd path: fd valid, range inside the file, mappable   -> EBADF,
 *                                                  EINVAL, mmap's errno
 *   7. the MR limit                                         -> ENOMEM
 *
 * The device never pins: an address MR points at the caller's memory,
 * an fd MR at our own MAP_SHARED mapping of the caller's fd (duplicated,
 * so the caller may close theirs). Keys are random, lkey == rkey, and
 * the handle is the key. Re-registration keeps the keys.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sw/ctrl.h"
#include "sw/mem.h"
#include "sw/transport.h"

#define MASK_IOVA IBV_REG_MR_MASK_IOVA
#define MASK_ADDR IBV_REG_MR_MASK_ADDR
#define MASK_FD IBV_REG_MR_MASK_FD
#define MASK_FD_OFFSET IBV_REG_MR_MASK_FD_OFFSET
#define MASK_DMAH IBV_REG_MR_MASK_DMAH

static uint64_t page_size(void)
{
	return (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t page_offset(uint64_t v)
{
	return v & (page_size() - 1);
}

/* Contract: see sw/mem.h. */
void sw_mr_get(struct sw_mr *mr)
{
	atomic_fetch_add(&mr->refcnt, 1);
}

/* Contract: see sw/mem.h. */
void sw_mr_put(struct sw_mr *mr)
{
	if (atomic_fetch_sub(&mr->refcnt, 1) != 1)
		return;
	if (mr->parent)
		sw_mr_put(mr->parent); /* a bound window's entry */
	if (mr->map)
		munmap(mr->map, mr->map_len);
	if (mr->fd >= 0)
		close(mr->fd);
	free(mr);
}

/* Contract: see sw/mem.h. */
int sw_mem_dev_init(struct sw_dev *dev)
{
	int ret = sw_mr_table_init(&dev->mrs, SW_MAX_MR);

	if (ret)
		return ret;
	pthread_mutex_init(&dev->mw_lock, NULL);
	atomic_init(&dev->nmw, 0);
	return 0;
}

/* Contract: see sw/mem.h. */
void sw_mem_dev_fini(struct sw_dev *dev)
{
	sw_mr_table_destroy(&dev->mrs);
	pthread_mutex_destroy(&dev->mw_lock);
}

/*
 * Attach the DMA handle named by the request: it must be a handle of
 * the same context (the kernel looks handles up per file: anything else
 * is not found, EINVAL). The MR keeps a copy of its hints for placement
 * and holds a use count, so ibv_dealloc_dmah() gives EBUSY meanwhile.
 * ON_DEMAND with a handle was refused earlier (EOPNOTSUPP), as mlx5
 * refuses it.
 */
static int mr_attach_dmah(struct sw_mr *mr, struct ibv_pd *pd, const struct ibv_mr_init_attr *attr)
{
	struct sw_dmah *d;

	if (!attr->dmah || attr->dmah->context != pd->context)
		return -EINVAL;
	d = sw_dmah(attr->dmah);
	atomic_fetch_add(&d->usecnt, 1);
	mr->dmah = d;
	mr->hint = d->hint;
	mr->has_hint = true;
	return 0;
}

/* Undo mr_attach_dmah() on a registration that failed later. */
static void mr_detach_dmah(struct sw_mr *mr)
{
	if (mr->dmah)
		atomic_fetch_sub(&mr->dmah->usecnt, 1);
	mr->dmah = NULL;
}

/* Access bits for which the kernel pins pages writable (ib_access_writable). */
#define SW_ACCESS_WRITABLE                                                                         \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC |             \
	 IBV_ACCESS_MW_BIND)

/*
 * Validate an address-path span: nonzero, [addr, +len) and its page
 * rounding do not wrap, and the last byte of [iova, +len) is addressable
 * (an iova range may end exactly at 2^64). 0 or -EINVAL.
 */
static int check_va_span(uint64_t addr, uint64_t len, uint64_t iova)
{
	uint64_t page = page_size();

	if (!len || addr + len < addr || iova + (len - 1) < iova)
		return -EINVAL;
	if (addr + len + page - 1 < addr + len)
		return -EINVAL;
	return 0;
}

/* Address path: the MR is the caller's memory itself. */
static int setup_va(struct sw_mr *mr, void *addr, uint64_t len, uint64_t iova, int access)
{
	int ret = check_va_span((uintptr_t)addr, len, iova);

	if (ret)
		return ret;
	ret = sw_mem_check_mapped((uintptr_t)addr, len, access & SW_ACCESS_WRITABLE);
	if (ret)
		return ret;
	mr->host = addr;
	mr->buf_tag = sw_buf_share_tag(addr, len);
	return 0;
}

/*
 * fd path: map [off, +len) of `fd` shared, read-write (read-only when
 * the fd is read-only and nothing may write), and keep a duplicate of
 * the fd. 0, -EINVAL (span), -EBADF, or the errno of fstat/mmap/fcntl.
 */
static int setup_fd(struct sw_mr *mr, int fd, uint64_t off, uint64_t len, uint64_t iova, int access)
{
	uint64_t page = page_size();
	uint64_t start = off & ~(page - 1);
	uint64_t span;
	struct stat st;
	void *map;

	if (!len || off + len < off || iova + (len - 1) < iova)
		return -EINVAL;
	span = off - start + len;
	if (span + page - 1 < span || start > (uint64_t)INT64_MAX)
		return -EINVAL;
	span = (span + page - 1) & ~(page - 1);
	if (fd < 0)
		return -EBADF;
	if (fstat(fd, &st))
		return -errno;
	/* a DMA-buf reports its size; so does a regular file or memfd */
	if ((S_ISREG(st.st_mode) || st.st_size > 0) && off + len > (uint64_t)st.st_size)
		return -EINVAL;
	map = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
	if (map == MAP_FAILED && errno == EACCES &&
	    !(access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)))
		map = mmap(NULL, span, PROT_READ, MAP_SHARED, fd, (off_t)start);
	if (map == MAP_FAILED)
		return -errno;
	mr->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (mr->fd < 0) {
		int ret = -errno;

		munmap(map, span);
		return ret;
	}
	mr->map = map;
	mr->map_len = span;
	mr->host = (uint8_t *)map + (off - start);
	return 0;
}

/* Steps 1 and 2: mask combination and page offsets. 0 or -EINVAL. */
static int check_mask(const struct ibv_mr_init_attr *attr, uint64_t *iova)
{
	uint64_t mask = attr->comp_mask;

	if (mask & MASK_FD) {
		if (!(mask & MASK_FD_OFFSET) || (mask & MASK_ADDR))
			return -EINVAL;
		if (!(mask & MASK_IOVA))
			return -EINVAL;
		*iova = attr->iova;
		return page_offset(attr->fd_offset) == page_offset(*iova) ? 0 : -EINVAL;
	}
	if ((mask & MASK_FD_OFFSET) || !(mask & MASK_ADDR))
		return -EINVAL;
	/* implicit ODP names the whole address space, with addr 0 only */
	if ((attr->access & IBV_ACCESS_ON_DEMAND) && attr->length == SIZE_MAX && attr->addr)
		return -EINVAL;
	*iova = (mask & MASK_IOVA) ? attr->iova : (uintptr_t)attr->addr;
	return page_offset((uintptr_t)attr->addr) == page_offset(*iova) ? 0 : -EINVAL;
}

/* Contract: the sv_ops reg_mr slot (core.h); steps as in the file comment. */
int sw_reg_mr(struct ibv_pd *pd, const struct ibv_mr_init_attr *attr, bool legacy_dmabuf,
	      struct ibv_mr **out)
{
	struct sw_dev *dev = sw_dev_of(pd->context);
	bool fd_path = attr->comp_mask & MASK_FD;
	struct sw_mr *mr;
	uint64_t iova;
	int ret;

	ret = check_mask(attr, &iova);
	if (ret)
		return ret;
	ret = sw_access_check(attr->access, fd_path);
	if (ret)
		return ret;
	if ((attr->access & IBV_ACCESS_ON_DEMAND) &&
	    (attr->length == SIZE_MAX || (attr->comp_mask & MASK_DMAH)))
		return -EOPNOTSUPP; /* no implicit ODP; no ODP with TPH (mlx5) */
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->fd = -1;
	atomic_init(&mr->refcnt, 1);
	if ((attr->comp_mask & MASK_DMAH) && !legacy_dmabuf) {
		ret = mr_attach_dmah(mr, pd, attr);
		if (ret)
			goto err;
	}
	ret = sw_access_check_persistent(attr->access, mr);
	if (ret)
		goto err;
	if (!fd_path && dev->cfg.cc_dma_bounce) {
		ret = -EOPNOTSUPP; /* bounce device: private memory cannot be DMA'd (3.3) */
		goto err;
	}
	if (fd_path)
		ret = setup_fd(mr, attr->fd, attr->fd_offset, attr->length, iova, attr->access);
	else
		ret = setup_va(mr, attr->addr, attr->length, iova, attr->access);
	if (ret)
		goto err;
	mr->pd = sw_pd_base(pd);
	mr->iova = iova;
	mr->length = attr->length;
	mr->access = (int)((unsigned int)attr->access & ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE);
	ret = sw_mr_table_insert(&dev->mrs, mr);
	if (ret)
		goto err;
	mr->ibv.handle = mr->key;
	atomic_fetch_add(&mr->pd->usecnt, 1);
	sw_transport_mr_dir(dev, mr, true); /* peers on this host may write into it */
	*out = &mr->ibv;
	return 0;
err:
	mr_detach_dmah(mr);
	sw_mr_put(mr);
	return ret;
}

/*
 * Contract: the sv_ops rereg_mr slot. Kernel order: flags, translation
 * arguments, access (EOPNOTSUPP to add or drop ON_DEMAND), new PD, then
 * the device: fd or DM MR (EOPNOTSUPP), DMA handle, bounce, the new
 * memory. On failure the MR is unchanged. On success the keys stay; a
 * new translation maps iova == addr. The MR is quiesced while its fields
 * change, so the transport never sees half an update.
 */
int sw_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		int access)
{
	struct sw_mr *mr = sw_mr(ibmr);
	struct sw_dev *dev = sw_dev_of(mr->pd->ibv.context);
	bool trans = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
	struct sw_pd *new_pd = mr->pd;
	int new_access, ret;

	if (!flags || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED))
		return -EINVAL;
	if (trans && (!addr || !length))
		return -EINVAL;
	if (mr->fd >= 0 || mr->dm)
		return -EOPNOTSUPP; /* an fd or DM MR has no address translation to change */
	if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
		ret = sw_access_check(access, false);
		if (ret)
			return ret;
		/* ODP-ness is fixed at registration (the core's fork protection follows it) */
		if ((access ^ mr->access) & IBV_ACCESS_ON_DEMAND)
			return -EOPNOTSUPP;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		if (!pd || pd->context != mr->pd->ibv.context)
			return -EINVAL; /* a PD of this context only, as the kernel looks it up */
		new_pd = sw_pd_base(pd);
	}
	if (mr->dmah)
		return -EOPNOTSUPP; /* hook: an MR with steering tags keeps them */
	new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? access : mr->access;
	ret = sw_access_check_persistent(new_access, NULL); /* no handle: not PM */
	if (ret)
		return ret;
	if (trans) {
		if (dev->cfg.cc_dma_bounce)
			return -EOPNOTSUPP;
		ret = check_va_span((uintptr_t)addr, length, (uintptr_t)addr);
		if (!ret)
			ret = sw_mem_check_mapped((uintptr_t)addr, length,
						  new_access & SW_ACCESS_WRITABLE);
		if (ret)
			return ret;
	} else if ((new_access & SW_ACCESS_WRITABLE) && !(mr->access & SW_ACCESS_WRITABLE)) {
		/* now writable: the memory must be */
		ret = sw_mem_check_mapped((uintptr_t)mr->host, mr->length, true);
		if (ret)
			return ret;
	}

	pthread_mutex_lock(&dev->mw_lock); /* no bind takes the MR meanwhile */
	if (atomic_load(&mr->nmw) > 0) {
		pthread_mutex_unlock(&dev->mw_lock);
		return -EINVAL; /* windows bound to it keep its translation */
	}
	sw_mr_table_block(&dev->mrs, mr);
	sw_transport_mr_dir(dev, mr, false); /* no peer writes through the old fields */
	if (new_pd != mr->pd) {
		atomic_fetch_add(&new_pd->usecnt, 1);
		atomic_fetch_sub(&mr->pd->usecnt, 1);
		mr->pd = new_pd;
	}
	if (trans) {
		mr->host = addr;
		mr->buf_tag = sw_buf_share_tag(addr, length);
		mr->iova = (uintptr_t)addr;
		mr->length = length;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		mr->access = (int)((unsigned int)access & ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE);
	sw_mr_table_unblock(&dev->mrs, mr);
	sw_transport_mr_dir(dev, mr, true);
	pthread_mutex_unlock(&dev->mw_lock);
	return 0;
}

/*
 * Release what a registration holds besides memory (PD, DMA handle and
 * device memory counts) and drop the registration reference. The MR is
 * out of the table; transfers still using it finish first, so that the
 * application may free the memory as soon as deregistration returns.
 */
static void mr_release(struct sw_mr *mr)
{
	sw_transport_mr_dir(sw_dev_of(mr->pd->ibv.context), mr, false);
	sw_mr_wait_idle(mr);
	atomic_fetch_sub(&mr->pd->usecnt, 1);
	if (mr->dmah)
		atomic_fetch_sub(&mr->dmah->usecnt, 1);
	if (mr->dm)
		atomic_fetch_sub(&mr->dm->usecnt, 1);
	sw_mr_put(mr);
}

/*
 * Contract: the sv_ops dereg_mr slot. An MR with memory windows bound to
 * it stays registered: -EINVAL, as rxe refuses (IBTA 10.6.7.2.6; mlx5's
 * kernel gives EBUSY). Otherwise the key stops resolving at once, the
 * call returns once no transfer touches the memory any more, and the PD
 * is released with the MR. The check and the removal hold mw_lock, so
 * no bind can take the MR in between.
 */
int sw_dereg_mr(struct ibv_mr *ibmr)
{
	struct sw_mr *mr = sw_mr(ibmr);
	struct sw_dev *dev = sw_dev_of(mr->pd->ibv.context);

	pthread_mutex_lock(&dev->mw_lock);
	if (atomic_load(&mr->nmw) > 0) {
		pthread_mutex_unlock(&dev->mw_lock);
		return -EINVAL;
	}
	sw_mr_table_remove(&dev->mrs, mr);
	pthread_mutex_unlock(&dev->mw_lock);
	mr_release(mr);
	return 0;
}

/* An MR of `ctx` (windows' entries go with their windows, mem/mw.c). */
static bool mr_of_ctx(const struct sw_mr *mr, const void *ctx)
{
	return !mr->mw && mr->pd->ibv.context == ctx;
}

/* Contract: see sw/mem.h. */
void sw_mem_ctx_close(struct ibv_context *ctx)
{
	struct sw_dev *dev = sw_dev_of(ctx);
	struct sw_mr *batch[64];
	uint32_t cursor = 0;
	size_t n, i;

	sw_mw_ctx_close(ctx); /* windows hold their MRs */
	do {
		n = sw_mr_table_remove_matching(&dev->mrs, mr_of_ctx, ctx, &cursor, batch,
						SV_ARRAY_SIZE(batch));
		for (i = 0; i < n; i++)
			mr_release(batch[i]);
	} while (n == SV_ARRAY_SIZE(batch));
}
