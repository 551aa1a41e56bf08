/* SPDX-License-Identifier: MIT */
/*
 * mr.c - memory registration verbs: rdma-core's core rules.
 *
 * Before a device sees a registration the core
 *   - passes the optional access bits (IBV_ACCESS_OPTIONAL_RANGE) on, as
 *     rdma-core does on a kernel with optional-access support: the device
 *     ignores them, or refuses all but relaxed ordering on the fd path;
 *   - translates an ibv_buf (IBV_REG_MR_MASK_BUF) into an address or
 *     DMA-buf registration;
 *   - applies fork protection to address-based, non-ODP ranges, undoing
 *     it when the device refuses.
 * The device validates the final request (mask combinations, access
 * bits, the memory itself) and fills lkey, rkey and handle; the core then
 * fills context, pd, addr and length and records in struct sv_mr what
 * dereg and rereg must undo.
 */
#include <stdint.h>

#include "core/buf.h"
#include "core/core.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define MASK_IOVA IBV_REG_MR_MASK_IOVA
#define MASK_ADDR IBV_REG_MR_MASK_ADDR
#define MASK_FD IBV_REG_MR_MASK_FD
#define MASK_FD_OFFSET IBV_REG_MR_MASK_FD_OFFSET
#define MASK_DMAH IBV_REG_MR_MASK_DMAH
#define MASK_BUF IBV_REG_MR_MASK_BUF

/*
 * Register the final request `attr` on `pd`. With `dontfork`, the range
 * [attr->addr, +attr->length) is protected first and released again if
 * the registration fails. Returns the MR, or NULL with errno set.
 */
static struct ibv_mr *reg_final(struct ibv_pd *pd, const struct ibv_mr_init_attr *attr,
				bool legacy_dmabuf, bool dontfork)
{
	struct ibv_mr *mr = NULL;
	struct sv_mr *smr;
	int ret;

	if (dontfork) {
		ret = sv_dontfork_range(attr->addr, attr->length);
		if (ret) {
			errno = -ret;
			return NULL;
		}
	}
	ret = sv_ops_of(pd->context)->reg_mr(pd, attr, legacy_dmabuf, &mr);
	if (ret) {
		if (dontfork)
			sv_dofork_range(attr->addr, attr->length);
		errno = -ret;
		return NULL;
	}
	mr->context = pd->context;
	mr->pd = pd;
	mr->length = attr->length;
	if (attr->comp_mask & MASK_ADDR)
		mr->addr = attr->addr;
	else
		mr->addr = (void *)(uintptr_t)attr->fd_offset;
	smr = sv_mr_of(mr);
	smr->type = (attr->comp_mask & MASK_FD) ? SV_MR_TYPE_DMABUF : SV_MR_TYPE_VA;
	smr->dontfork = dontfork;
	return mr;
}

/*
 * Contract: the address-based calls as ibv_reg_mr_ex: register [addr,
 * +length) with ADDR | `mask`, where `mask` is IOVA (the classic verbs:
 * at `iova`) or BUF (ibv_reg_buf_mr: inside `buf`). Returns the MR, or
 * NULL with errno set.
 */
static struct ibv_mr *reg_addr(struct ibv_pd *pd, uint64_t mask, void *addr, size_t length,
			       int access, uint64_t iova, struct ibv_buf *buf)
{
	struct ibv_mr_init_attr attr = {
		.length = length,
		.access = access,
		.comp_mask = MASK_ADDR | mask,
		.iova = iova,
		.addr = addr,
		.buf = buf,
	};

	return ibv_reg_mr_ex(pd, &attr);
}

/* Contract: man ibv_reg_mr; iova = addr. */
SV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return reg_addr(pd, MASK_IOVA, addr, length, access, (uintptr_t)addr, NULL);
}

/* Contract: man ibv_reg_mr_iova. */
SV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					 uint64_t iova, int access)
{
	return reg_addr(pd, MASK_IOVA, addr, length, access, iova, NULL);
}

/* Contract: ibv_reg_mr_iova with unsigned access (what the inline macros call). */
SV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, unsigned int access)
{
	return reg_addr(pd, MASK_IOVA, addr, length, (int)access, iova, NULL);
}

/*
 * Contract: docs/seed-apis.md 1.6. DMA-buf registration; no fork protection
 * and no access filtering here; mr->addr is `offset`.
 */
SV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					   uint64_t iova, int fd, int access)
{
	struct ibv_mr_init_attr attr = {
		.length = length,
		.access = access,
		.comp_mask = MASK_FD | MASK_FD_OFFSET | MASK_IOVA,
		.iova = iova,
		.fd = fd,
		.fd_offset = offset,
	};

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	return reg_final(pd, &attr, true, false);
}

/*
 * Translate IBV_REG_MR_MASK_BUF (docs/seed-apis.md 1.5.2): check that
 * [addr, +length) lies in the buffer allocated on this very `pd`, then
 * turn a DMA-buf-backed buffer into an fd request whose iova is the
 * virtual address. Every failure is -EINVAL, in rdma-core's order.
 */
static int attr_from_buf(struct ibv_pd *pd, struct ibv_mr_init_attr *attr)
{
	const struct ibv_buf *buf = attr->buf;
	uintptr_t addr, off;

	if (!buf) /* rdma-core dereferences it anyway */
		return -EINVAL;
	if (pd != buf->pd)
		return -EINVAL;
	if (!(attr->comp_mask & MASK_ADDR))
		return -EINVAL;
	addr = (uintptr_t)attr->addr;
	if (addr < (uintptr_t)buf->addr)
		return -EINVAL;
	off = addr - (uintptr_t)buf->addr;
	if (off > buf->size || attr->length > buf->size - off)
		return -EINVAL;
	if (attr->comp_mask & (MASK_FD | MASK_FD_OFFSET))
		return -EINVAL;
	attr->comp_mask &= ~(uint64_t)MASK_BUF;
	attr->buf = NULL;
	if (buf->dmabuf_fd == -1)
		return 0;
	if (attr->comp_mask & MASK_IOVA)
		return -EINVAL;
	attr->comp_mask &= ~(uint64_t)MASK_ADDR;
	attr->comp_mask |= MASK_FD | MASK_FD_OFFSET | MASK_IOVA;
	attr->fd = buf->dmabuf_fd;
	attr->fd_offset = off;
	attr->iova = addr;
	attr->addr = NULL;
	return 0;
}

/*
 * Contract: docs/seed-apis.md 1.5.1-1.5.3, 1.5.5. `in` is only read. A
 * NULL pd or `in` is EINVAL (rdma-core would crash).
 */
SV_EXPORT struct ibv_mr *ibv_reg_mr_ex(struct ibv_pd *pd, struct ibv_mr_init_attr *in)
{
	struct ibv_mr_init_attr attr = {0};
	bool dontfork;
	int ret;

	if (!pd || !in) {
		errno = EINVAL;
		return NULL;
	}
	attr.length = in->length;
	attr.access = in->access;
	attr.comp_mask = in->comp_mask;
	if (attr.comp_mask & MASK_IOVA)
		attr.iova = in->iova;
	if (attr.comp_mask & MASK_ADDR)
		attr.addr = in->addr;
	if (attr.comp_mask & MASK_FD)
		attr.fd = in->fd;
	if (attr.comp_mask & MASK_FD_OFFSET)
		attr.fd_offset = in->fd_offset;
	if (attr.comp_mask & MASK_DMAH)
		attr.dmah = in->dmah;
	if (attr.comp_mask & MASK_BUF) {
		attr.buf = in->buf;
		ret = attr_from_buf(pd, &attr);
		if (ret) {
			errno = -ret;
			return NULL;
		}
	}
	dontfork = !(attr.access & IBV_ACCESS_ON_DEMAND) && !(attr.comp_mask & MASK_FD);
	return reg_final(pd, &attr, false, dontfork);
}

/* Contract: docs/seed-apis.md 1.4: ibv_reg_mr_ex with BUF|ADDR. */
SV_EXPORT struct ibv_mr *ibv_reg_buf_mr(struct ibv_pd *pd, struct ibv_buf *buf, void *addr,
					size_t length, int access)
{
	return reg_addr(pd, MASK_BUF, addr, length, access, 0, buf);
}

/*
 * Contract: man ibv_rereg_mr. Returns 0 or an enum ibv_rereg_mr_err_code
 * with errno set. rdma-core's input rules come first, each
 * IBV_REREG_MR_ERR_INPUT with EINVAL before the device is called (the MR
 * stays as it was): an MR that is not address-based, flags outside
 * IBV_REREG_MR_FLAGS_SUPPORTED, a new translation without address or
 * length, access bits without IBV_REREG_MR_CHANGE_ACCESS. A new
 * translation is fork-protected before the device call; after success
 * the old range is released.
 */
SV_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
			   size_t length, int access)
{
	bool trans = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
	struct sv_mr *smr;
	void *old_addr;
	size_t old_len;
	bool old_dontfork;
	int ret;

	if (!mr || sv_mr_of(mr)->type != SV_MR_TYPE_VA || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    (trans && (!length || !addr)) || (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	smr = sv_mr_of(mr);
	if (trans) {
		ret = sv_dontfork_range(addr, length);
		if (ret) {
			errno = -ret;
			return IBV_REREG_MR_ERR_DONT_FORK_NEW;
		}
	}
	old_addr = mr->addr;
	old_len = mr->length;
	old_dontfork = smr->dontfork;
	ret = sv_ops_of(mr->context)->rereg_mr(mr, flags, pd, addr, length, access);
	if (ret) {
		if (trans && sv_dofork_range(addr, length)) {
			errno = -ret;
			return IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW;
		}
		errno = -ret;
		return IBV_REREG_MR_ERR_CMD;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		mr->pd = pd;
	if (trans) {
		mr->addr = addr;
		mr->length = length;
		smr->dontfork = true;
		if (old_dontfork) {
			ret = sv_dofork_range(old_addr, old_len);
			if (ret) {
				errno = -ret;
				return IBV_REREG_MR_ERR_DO_FORK_OLD;
			}
		}
	}
	return 0;
}

/*
 * Contract: man ibv_dereg_mr. 0 or a positive errno (the MR stays valid
 * then). Releases the fork protection taken at registration.
 */
SV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	void *addr;
	size_t length;
	bool dontfork;
	int ret;

	if (!mr)
		return EINVAL;
	addr = mr->addr;
	length = mr->length;
	dontfork = sv_mr_of(mr)->dontfork;
	ret = sv_ops_of(mr->context)->dereg_mr(mr);
	if (ret)
		return sv_ret_errno(ret);
	if (dontfork)
		sv_dofork_range(addr, length);
	return 0;
}
