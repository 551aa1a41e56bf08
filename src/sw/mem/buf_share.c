/* SPDX-License-Identifier: MIT */
/*
 * buf_share.c - ibv_alloc_buf memory that a peer on the same host can
 * map: the single copy with no system call (docs/single-copy.md).
 *
 * A buffer is a sealed memfd (sw_shmem_memfd: it cannot shrink, so a
 * peer's mapping never faults) mapped shared here, with a slot in the
 * process's table (struct sw_buf_slot, sw/mem.h). An MR whose memory
 * lies inside such a buffer carries its tag (mr.c); a packet by
 * reference names the tag with each piece (wire.h), and the receiving
 * peer maps the memfd once (transport/shm_map.c) and copies with memcpy
 * instead of process_vm_readv(2).
 *
 * The table is written under `lock`, by ibv_alloc_buf and ibv_free_buf
 * only; the transport reads tags of MRs, never the table.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sw/mem.h"

static struct sw_buf_slot slots[SW_BUF_SLOTS];
static bool busy[SW_BUF_SLOTS]; /* reserved or live (lock) */
static uint32_t gens[SW_BUF_SLOTS]; /* each slot's last generation (lock) */
static atomic_uint live; /* slots busy: tag lookups skip the lock at 0 */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Reserve a free slot: its new tag, or 0 if there is none. */
static uint32_t slot_take(void)
{
	uint32_t tag = 0;

	pthread_mutex_lock(&lock);
	for (uint32_t i = 0; i < SW_BUF_SLOTS; i++) {
		if (busy[i])
			continue;
		gens[i] = (gens[i] + 1) & 0xffffffu;
		if (!gens[i])
			gens[i] = 1;
		busy[i] = true;
		atomic_fetch_add(&live, 1);
		tag = gens[i] << 8 | i;
		break;
	}
	pthread_mutex_unlock(&lock);
	return tag;
}

static void slot_put(uint32_t tag)
{
	pthread_mutex_lock(&lock);
	busy[tag & 0xffu] = false;
	atomic_fetch_sub(&live, 1);
	pthread_mutex_unlock(&lock);
}

/* Contract: see sw/mem.h. */
int sw_buf_share_alloc(size_t len, void **addr, int *fd, uint32_t *tag)
{
	uint32_t t = slot_take();
	struct sw_buf_slot *s;
	struct stat st;
	void *map;
	int mfd, ret;

	if (!t)
		return -ENOSPC;
	mfd = sw_shmem_memfd("softverbs-buf", len);
	if (mfd < 0) {
		ret = mfd;
		goto err_slot;
	}
	map = fstat(mfd, &st) ? MAP_FAILED :
				mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		close(mfd);
		goto err_slot;
	}
	/*
	 * Never in a child, ibv_fork_init or not: shared, a child's writes
	 * would change our bytes, where private memory would be copied on
	 * write (docs/compatibility.md).
	 */
	if (madvise(map, len, MADV_DONTFORK)) {
		ret = -errno;
		munmap(map, len);
		close(mfd);
		goto err_slot;
	}
	s = &slots[t & 0xffu];
	atomic_store_explicit(&s->tag2, t, memory_order_release);
	s->fd = mfd;
	s->addr = (uintptr_t)map;
	s->len = len;
	s->ino = st.st_ino;
	atomic_store_explicit(&s->tag, t, memory_order_release);
	*addr = map;
	*fd = mfd;
	*tag = t;
	return 0;
err_slot:
	slot_put(t);
	return ret;
}

/* Contract: see sw/mem.h. */
void sw_buf_share_free(void *addr, size_t len, int fd, uint32_t tag)
{
	struct sw_buf_slot *s = &slots[tag & 0xffu];

	atomic_store(&s->tag, 0);
	atomic_store(&s->tag2, 0);
	munmap(addr, len);
	close(fd);
	slot_put(tag);
}

/* Contract: see sw/mem.h. */
uint32_t sw_buf_share_tag(const void *addr, uint64_t len)
{
	uintptr_t a = (uintptr_t)addr;
	uint32_t tag = 0;

	if (!atomic_load_explicit(&live, memory_order_relaxed))
		return 0;
	pthread_mutex_lock(&lock);
	for (uint32_t i = 0; i < SW_BUF_SLOTS && !tag; i++) {
		struct sw_buf_slot *s = &slots[i];
		uint32_t t = atomic_load_explicit(&s->tag, memory_order_relaxed);

		if (t && a >= s->addr && a - s->addr <= s->len && len <= s->len - (a - s->addr))
			tag = t;
	}
	pthread_mutex_unlock(&lock);
	return tag;
}

/* Contract: see sw/mem.h. */
const struct sw_buf_slot *sw_buf_share_table(uint32_t *n)
{
	*n = SW_BUF_SLOTS;
	return slots;
}
