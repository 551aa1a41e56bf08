/* SPDX-License-Identifier: MIT */
/*
 * shmem.c - shared (unprotected) memory for CC DMA bounce mode.
 *
 * In a confidential guest a bouncing device reaches only memory shared
 * with the host, which userspace gets from the DMA-buf heap
 * /dev/dma_heap/system_cc_shared. The software device takes memory from
 * that heap when the parent domain opened it; otherwise from its built-in
 * pool: every allocation is its own memfd, sized to whole pages and
 * sealed against growing and shrinking, so that like a DMA-buf it is an
 * fd-backed object of fixed size that can be exported and mapped by
 * another process.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#if __has_include(<linux/dma-heap.h>)
#include <linux/dma-heap.h>
#else
struct dma_heap_allocation_data {
	uint64_t len;
	uint32_t fd;
	uint32_t fd_flags;
	uint64_t heap_flags;
};
#define DMA_HEAP_IOCTL_ALLOC _IOWR('H', 0x0, struct dma_heap_allocation_data)
#endif

#include "sw/ctrl.h"
#include "sw/mem.h"

/* One DMA-buf of `len` bytes from the kernel heap behind `heap_fd`. */
static int heap_alloc(int heap_fd, size_t len)
{
	struct dma_heap_allocation_data req = {
		.len = len,
		.fd_flags = O_RDWR | O_CLOEXEC,
	};

	if (ioctl(heap_fd, DMA_HEAP_IOCTL_ALLOC, &req) < 0)
		return -errno;
	return (int)req.fd;
}

/*
 * Contract: one sealed memfd named `name` of `len` bytes (the built-in
 * pool; also mem/buf_share.c). Like the kernel's heap, which allocates
 * every page up front, it refuses more than the machine's RAM with
 * ENOMEM (a memfd would accept any size and fail only when touched, or
 * with EINVAL past the largest off_t). The fd, or -errno.
 */
int sw_shmem_memfd(const char *name, size_t len)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	int fd, ret;

	if (pages > 0 && page > 0 && len / (size_t)page > (size_t)pages)
		return -ENOMEM;
	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * Contract: allocate `len` bytes (a whole number of pages) of shared
 * memory, from the kernel heap if `heap_fd` >= 0, else from the built-in
 * pool. On success *addr is a MAP_SHARED read/write mapping of *fd at
 * offset 0 and the caller owns both. Returns 0 or -errno (the real cause).
 */
int sw_shmem_alloc(int heap_fd, size_t len, void **addr, int *fd)
{
	void *map;
	int mfd, ret;

	mfd = heap_fd >= 0 ? heap_alloc(heap_fd, len) : sw_shmem_memfd("softverbs-cc-shared", len);
	if (mfd < 0)
		return mfd;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		close(mfd);
		return ret;
	}
	*addr = map;
	*fd = mfd;
	return 0;
}

/* Contract: release what sw_shmem_alloc() returned. */
void sw_shmem_free(void *addr, size_t len, int fd)
{
	munmap(addr, len);
	close(fd);
}
