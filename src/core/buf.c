/* SPDX-License-Identifier: MIT */
/*
 * buf.c - provider-aware buffers and DMA handles: the exported verbs.
 *
 * The core checks nothing here, as rdma-core's does not: the device
 * decides backing, rounding and errors.
 */
#include <fcntl.h>

#include "core/buf.h"
#include "core/core.h"

SV_EXPORT void *ibv_alloc_buf(struct ibv_pd *pd, size_t size, struct ibv_buf **buf)
{
	void *addr = NULL;

	return SV_RET_PTR(sv_ops_of(pd->context)->alloc_buf(pd, size, buf, &addr), addr);
}

SV_EXPORT void ibv_free_buf(struct ibv_buf *buf)
{
	sv_ops_of(buf->pd->context)->free_buf(buf);
}

SV_EXPORT int ibv_export_buf_dmabuf_fd(struct ibv_buf *buf)
{
	if (buf->dmabuf_fd < 0) {
		errno = ENODATA;
		return -1;
	}
	return fcntl(buf->dmabuf_fd, F_DUPFD_CLOEXEC, 0);
}

SV_EXPORT struct ibv_dmah *ibv_alloc_dmah(struct ibv_context *ctx, struct ibv_dmah_init_attr *attr)
{
	struct ibv_dmah *dmah = NULL;

	return SV_RET_PTR(sv_ops_of(ctx)->alloc_dmah(ctx, attr, &dmah), dmah);
}

SV_EXPORT int ibv_dealloc_dmah(struct ibv_dmah *dmah)
{
	return sv_ret_int(sv_ops_of(dmah->context)->dealloc_dmah(dmah));
}
