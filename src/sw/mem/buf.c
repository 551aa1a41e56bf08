/* SPDX-License-Identifier: MIT */
/*
 * buf.c - ibv_alloc_buf / ibv_free_buf for the software device.
 *
 * The backing follows the PD, first match wins (as mlx5 chooses):
 *   1. a parent domain with ALLOW_CC_UNPROTECTED_ALLOC on a bounce
 *      device: shared memory (kernel DMA-buf heap or built-in pool);
 *      the buffer is fd-backed and exportable;
 *   2. a parent domain with both custom allocators: the application's
 *      alloc(), unless it answers IBV_ALLOCATOR_USE_DEFAULT;
 *   3. otherwise, from SW_BUF_SHARE_MIN bytes on and while the device
 *      may use the same-host link's single copy, memory its peers there
 *      can map (mem/buf_share.c): a private memfd, not exportable;
 *   4. otherwise page-aligned ordinary memory.
 * Sizes are rounded up to whole pages, except for custom allocations,
 * which keep the exact size the application asked for.
 */
#include <stdlib.h>
#include <unistd.h>

#include "core/buf.h"
#include "sw/ctrl.h"
#include "sw/mem.h"

enum sw_buf_kind {
	SW_BUF_PLAIN,
	SW_BUF_CUSTOM,
	SW_BUF_SHARED,
	SW_BUF_PEER,
};

struct sw_buf {
	struct ibv_buf ibv;
	enum sw_buf_kind kind;
	int peer_fd; /* SW_BUF_PEER: its memfd, ours alone */
	uint32_t peer_tag; /* and its tag */
};

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/* Round up to whole pages; 0 on overflow. */
static size_t page_round(size_t size)
{
	size_t page = page_size();

	if (size > SIZE_MAX - (page - 1))
		return 0;
	return (size + page - 1) & ~(page - 1);
}

static int alloc_plain(size_t size, void **addr, size_t *len)
{
	size_t rounded = page_round(size);
	void *p;
	int ret;

	if (!rounded)
		return -ENOMEM;
	ret = posix_memalign(&p, page_size(), rounded);
	if (ret)
		return -ret;
	ret = sv_dontfork_range(p, rounded);
	if (ret) {
		free(p);
		return ret;
	}
	*addr = p;
	*len = rounded;
	return 0;
}

/* Memory a same-host peer may map (case 3 of the header): 0 or -errno. */
static int alloc_peer(struct sw_pd *pd, size_t size, struct sw_buf *b, void **addr, size_t *len)
{
	const struct sw_config *cfg = &sw_dev_of(pd->ibv.context)->cfg;
	size_t rounded = page_round(size);
	int ret;

	if (!cfg->shm || !cfg->single_copy || cfg->cc_dma_bounce || rounded < SW_BUF_SHARE_MIN)
		return -EOPNOTSUPP;
	ret = sw_buf_share_alloc(rounded, addr, &b->peer_fd, &b->peer_tag);
	if (ret)
		return ret;
	ret = sv_dontfork_range(*addr, rounded);
	if (ret) {
		sw_buf_share_free(*addr, rounded, b->peer_fd, b->peer_tag);
		return ret;
	}
	*len = rounded;
	b->kind = SW_BUF_PEER;
	return 0;
}

/* Contract: see sw/mem.h. */
int sw_alloc_buf(struct ibv_pd *ibpd, size_t size, struct ibv_buf **out, void **addr)
{
	struct sw_pd *pd = sw_pd(ibpd);
	struct sw_buf *b;
	size_t len = size;
	void *p = NULL;
	int fd = -1, ret;

	if (!size)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;

	if (pd->cc_alloc) {
		len = page_round(size);
		ret = len ? sw_shmem_alloc(pd->heap_fd, len, &p, &fd) : -ENOMEM;
		if (!ret) {
			ret = sv_dontfork_range(p, len);
			if (ret)
				sw_shmem_free(p, len, fd);
		}
		b->kind = SW_BUF_SHARED;
	} else if (pd->is_parent && pd->alloc && pd->free) {
		p = pd->alloc(ibpd, pd->pd_context, size, page_size(), 0);
		if (p == IBV_ALLOCATOR_USE_DEFAULT) {
			ret = alloc_plain(size, &p, &len);
			b->kind = SW_BUF_PLAIN;
		} else {
			ret = p ? 0 : -ENOMEM;
			b->kind = SW_BUF_CUSTOM;
		}
	} else if (alloc_peer(pd, size, b, &p, &len)) {
		ret = alloc_plain(size, &p, &len); /* the peers copy from it as from any memory */
		b->kind = SW_BUF_PLAIN;
	} else {
		ret = 0;
	}
	if (ret) {
		free(b);
		return ret;
	}
	if (fd >= 0)
		sv_buf_init_dmabuf(&b->ibv, ibpd, p, len, fd);
	else
		sv_buf_init(&b->ibv, ibpd, p, len);
	*out = &b->ibv;
	*addr = p;
	return 0;
}

/* Contract: see sw/mem.h. The PD must still exist (as rdma-core requires). */
void sw_free_buf(struct ibv_buf *ibuf)
{
	struct sw_buf *b = sv_container_of(ibuf, struct sw_buf, ibv);
	struct sw_pd *pd = sw_pd(ibuf->pd);

	switch (b->kind) {
	case SW_BUF_SHARED:
		sv_dofork_range(ibuf->addr, ibuf->size);
		sw_shmem_free(ibuf->addr, ibuf->size, ibuf->dmabuf_fd);
		break;
	case SW_BUF_CUSTOM:
		pd->free(ibuf->pd, pd->pd_context, ibuf->addr, 0);
		break;
	case SW_BUF_PLAIN:
		sv_dofork_range(ibuf->addr, ibuf->size);
		free(ibuf->addr);
		break;
	case SW_BUF_PEER:
		sv_dofork_range(ibuf->addr, ibuf->size);
		sw_buf_share_free(ibuf->addr, ibuf->size, b->peer_fd, b->peer_tag);
		break;
	}
	free(b);
}
