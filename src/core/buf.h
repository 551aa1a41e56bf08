/* SPDX-License-Identifier: MIT */
/*
 * buf.h - the layout behind the public, opaque struct ibv_buf.
 *
 * A device allocates its buffer object with this struct inside and hands
 * out a pointer to it; the core reads it when a registration names the
 * buffer (IBV_REG_MR_MASK_BUF) and when a buffer is exported. LP64 layout,
 * 32 bytes, as rdma-core 65's libibverbs/driver.h has it.
 */
#ifndef SV_CORE_BUF_H
#define SV_CORE_BUF_H

#include <stddef.h>

#include <infiniband/verbs.h>

struct ibv_buf {
	void *addr; /* first byte of the buffer */
	size_t size; /* usable size (a device may round the request up) */
	struct ibv_pd *pd; /* the PD (or parent domain) it was allocated on */
	int dmabuf_fd; /* backing DMA-buf fd, or -1 for plain memory */
};

/* Describe plain memory [addr, addr + size) allocated on `pd`. */
static inline void sv_buf_init(struct ibv_buf *buf, struct ibv_pd *pd, void *addr, size_t size)
{
	buf->addr = addr;
	buf->size = size;
	buf->pd = pd;
	buf->dmabuf_fd = -1;
}

/* Describe a mapping of DMA-buf `fd` (offset 0) at [addr, addr + size). */
static inline void sv_buf_init_dmabuf(struct ibv_buf *buf, struct ibv_pd *pd, void *addr,
				      size_t size, int fd)
{
	sv_buf_init(buf, pd, addr, size);
	buf->dmabuf_fd = fd;
}

#endif
