/* SPDX-License-Identifier: MIT */
/*
 * ring.c - memory for queue rings (CQ, SQ, RQ, SRQ).
 *
 * A ring is a power-of-two array of fixed-size slots. Its memory is
 * ordinary (cache-line aligned, zeroed) unless the device is in CC DMA
 * bounce mode: then only a CC parent domain may own a ring, and the ring
 * lives in shared memory from the same source as ibv_alloc_buf; any
 * other owner gets EOPNOTSUPP, as the kernel refuses VA rings there.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sw/queue.h"

#define SW_RING_ALIGN 64

/* Contract: the smallest power of two >= n (n in 1..2^31); 0 if none fits. */
static uint32_t pow2_roundup(uint32_t n)
{
	uint32_t p = 1;

	if (n > (1u << 31))
		return 0;
	while (p < n)
		p <<= 1;
	return p;
}

/* Contract: `len` rounded up to whole pages; 0 on overflow. */
static size_t page_round(size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t p = page > 0 ? (size_t)page : 4096;

	if (len > SIZE_MAX - (p - 1))
		return 0;
	return (len + p - 1) & ~(p - 1);
}

/*
 * Contract: see queue.h. -EINVAL for zero slots or stride, -ENOMEM when
 * the size overflows or memory runs out, -EOPNOTSUPP on a bounce device
 * unless `pd` is a CC parent domain, else the shared-memory errno.
 */
int sw_ring_alloc(struct sw_ring *r, struct ibv_context *ctx, struct sw_pd *pd, uint32_t nslots,
		  uint32_t stride)
{
	uint32_t n = pow2_roundup(nslots);
	size_t len;
	void *p;
	int ret, fd;

	memset(r, 0, sizeof(*r));
	r->shm_fd = -1;
	if (!nslots || !stride)
		return -EINVAL;
	if (!n || (size_t)n > SIZE_MAX / stride)
		return -ENOMEM;
	len = (size_t)n * stride;
	if (sw_dev_of(ctx)->cfg.cc_dma_bounce) {
		if (!pd || !pd->cc_alloc)
			return -EOPNOTSUPP;
		len = page_round(len);
		if (!len)
			return -ENOMEM;
		ret = sw_shmem_alloc(pd->heap_fd, len, &p, &fd);
		if (ret)
			return ret;
		r->shm_fd = fd;
	} else {
		if (len > SIZE_MAX - (SW_RING_ALIGN - 1))
			return -ENOMEM;
		len = (len + SW_RING_ALIGN - 1) & ~(size_t)(SW_RING_ALIGN - 1);
		ret = posix_memalign(&p, SW_RING_ALIGN, len);
		if (ret)
			return -ret;
	}
	memset(p, 0, len);
	r->buf = p;
	r->buf_len = len;
	r->nslots = n;
	r->stride = stride;
	return 0;
}

/* Contract: release a ring's memory (a zeroed or failed ring is a no-op). */
void sw_ring_free(struct sw_ring *r)
{
	if (r->buf) {
		if (r->shm_fd >= 0)
			sw_shmem_free(r->buf, r->buf_len, r->shm_fd);
		else
			free(r->buf);
	}
	r->buf = NULL;
	r->buf_len = 0;
	r->shm_fd = -1;
}
