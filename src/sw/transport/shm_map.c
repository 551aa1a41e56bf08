/* SPDX-License-Identifier: MIT */
/*
 * shm_map.c - copy from a same-host sender's shared buffer with memcpy
 * (docs/single-copy.md).
 *
 * A piece of a packet by reference may name the tag of the sender's
 * shared buffer that holds it (wire.h, mem/buf_share.c). On its first
 * use the receiver reads that tag's slot in the sender's table with
 * process_vm_readv(2), takes the memfd the slot names with
 * pidfd_getfd(2) and maps it read-only, after checking that it is the
 * same file (inode), sealed against shrinking (so a read through the
 * mapping can never fault) and as long as the slot says. Every later
 * piece of that buffer is then one memcpy, no system call. The kernel
 * allows pidfd_getfd exactly where it allows process_vm_readv (ptrace
 * attach rights): where one works, so normally does the other, and
 * where it does not (an old kernel, a seccomp filter) the tag is marked
 * bad and the pieces are pulled as before.
 *
 * Nothing in the slot is trusted beyond what is checked here; the
 * mapping is read-only and the caller copies out of it only bytes inside
 * it. A sender that frees a buffer still mapped here loses nothing: its
 * tag comes back only after 2^24 more buffers in its slot, and the
 * mapping, idle, goes at the next agings (so its memory outlives the
 * free by a second at most).
 *
 * Per link, on the receive token's holder only (shm.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sw/mem.h"
#include "sw/transport/shm_map.h"

/* Contract: see shm_map.h. */
void shm_maps_init(struct shm_maps *ms)
{
	memset(ms, 0, sizeof(*ms));
	ms->pidfd = -1;
}

static void map_drop(struct shm_map *m)
{
	if (m->map)
		munmap((void *)(uintptr_t)m->map, m->len);
	*m = (struct shm_map){0};
}

/* Contract: see shm_map.h. */
void shm_maps_close(struct shm_maps *ms)
{
	for (uint32_t i = 0; i < SHM_MAPS; i++)
		map_drop(&ms->m[i]);
	if (ms->pidfd >= 0)
		close(ms->pidfd);
	ms->pidfd = -1;
}

/* Read slot `tag` of the sender's table; true if it holds that tag. */
static bool slot_read(pid_t pid, uint64_t table, uint32_t nslots, uint32_t tag,
		      struct sw_buf_slot *slot)
{
	uint32_t idx = tag & 0xffu;
	struct iovec loc = {.iov_base = slot, .iov_len = sizeof(*slot)};
	struct iovec rem = {.iov_base = (void *)(uintptr_t)(table + idx * sizeof(*slot)),
			    .iov_len = sizeof(*slot)};

	if (idx >= nslots || table + idx * sizeof(*slot) < table)
		return false;
	if (process_vm_readv(pid, &loc, 1, &rem, 1, 0) != (ssize_t)sizeof(*slot))
		return false;
	return atomic_load(&slot->tag) == tag && atomic_load(&slot->tag2) == tag && slot->len &&
	       slot->len <= SIZE_MAX && slot->fd >= 0;
}

/* Map buffer `tag` of the sender into `m` (m->bad if it cannot be). */
static void map_in(struct shm_maps *ms, struct shm_map *m, pid_t pid, uint64_t table,
		   uint32_t nslots, uint32_t tag)
{
	struct sw_buf_slot slot;
	struct stat st;
	void *map;
	int fd, seals;

	*m = (struct shm_map){.tag = tag, .bad = true};
	if (!slot_read(pid, table, nslots, tag, &slot))
		return;
	if (ms->pidfd < 0)
		ms->pidfd = shm_pidfd_open(pid);
	if (ms->pidfd < 0)
		return;
	fd = shm_pidfd_getfd(ms->pidfd, slot.fd);
	if (fd < 0)
		return;
	seals = fcntl(fd, F_GET_SEALS);
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_ino != slot.ino ||
	    st.st_size < 0 || (uint64_t)st.st_size < slot.len || seals < 0 ||
	    !(seals & F_SEAL_SHRINK)) {
		close(fd);
		return;
	}
	map = mmap(NULL, (size_t)slot.len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return;
	(void)madvise(map, (size_t)slot.len, MADV_DONTFORK); /* a child has no use for it */
	m->map = map;
	m->addr = slot.addr;
	m->len = slot.len;
	m->bad = false;
}

/* Contract: see shm_map.h. */
const uint8_t *shm_maps_find(struct shm_maps *ms, pid_t pid, uint64_t table, uint32_t nslots,
			     uint32_t tag, uint64_t addr, uint32_t len)
{
	struct shm_map *m = NULL, *victim = &ms->m[0];
	uint64_t off;

	ms->clock++;
	for (uint32_t i = 0; i < SHM_MAPS && !m; i++) {
		struct shm_map *e = &ms->m[i];

		if (e->tag == tag)
			m = e;
		else if (victim->tag && (!e->tag || e->last < victim->last))
			victim = e;
	}
	if (!m) {
		m = victim;
		map_drop(m);
		map_in(ms, m, pid, table, nslots, tag);
	}
	m->last = ms->clock;
	m->idle = 0;
	off = addr - m->addr;
	if (m->bad || addr < m->addr || off > m->len || len > m->len - off)
		return NULL;
	return m->map + off;
}

/* Contract: see shm_map.h. */
void shm_maps_age(struct shm_maps *ms)
{
	for (uint32_t i = 0; i < SHM_MAPS; i++) {
		struct shm_map *m = &ms->m[i];

		if (!m->tag)
			continue;
		if (m->last > ms->aged)
			m->idle = 0;
		else if (++m->idle >= SHM_MAP_IDLE)
			map_drop(m);
	}
	ms->aged = ms->clock;
}
