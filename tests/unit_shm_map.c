/* SPDX-License-Identifier: MIT */
/*
 * unit_shm_map: the receiver's mappings of a same-host sender's shared
 * buffers (src/sw/transport/shm_map.c), with this process playing the
 * sender: its own table of struct sw_buf_slot, filled by hand, some
 * slots lying.
 *
 *   - a good slot (a sealed memfd): bytes inside the buffer resolve to a
 *     mapping that holds the buffer's bytes; one that starts before it,
 *     runs past its end or wraps does not; a second look-up maps nothing
 *     new;
 *   - lying slots, each refused (NULL, nothing mapped): the second tag
 *     word differs, the slot is free, the tag names another slot, the
 *     fd is not open, a pipe, a memfd not sealed against shrinking
 *     (a mapping of it could fault), another memfd than the inode says,
 *     a length beyond the file, a table address nothing is mapped at;
 *   - a refused tag is not tried again while it is in use (no system
 *     call: the slot, mended, still resolves to NULL), and is tried again
 *     after SHM_MAP_IDLE agings without use;
 *   - at most SHM_MAPS mappings: the least recently used goes; unused
 *     ones go (unmapped here) after SHM_MAP_IDLE agings;
 *     shm_maps_close unmaps everything and closes the pidfd (no fd
 *     left).
 */
#define _GNU_SOURCE
#include "harness.h"
#include "traffic.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sw/mem.h"
#include "sw/transport/shm_map.h"

enum {
	LEN = 64 << 10,
	NB = SHM_MAPS + 2
};

static struct sw_buf_slot table[SW_BUF_SLOTS];
static struct shm_maps ms;

struct buf {
	int fd;
	uint8_t *p;
	uint32_t tag;
};

static struct buf bufs[NB];

static int memfd(bool seal, size_t len)
{
	int fd = memfd_create("unit-shm-map", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || ftruncate(fd, (off_t)len) ||
	    (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)))
		return -1;
	return fd;
}

/* Slot i describes buffer b truthfully, with tag (gen << 8) | i. */
static void slot_set(uint32_t i, const struct buf *b, uint32_t gen)
{
	struct stat st;

	CHECK(!fstat(b->fd, &st));
	table[i].fd = b->fd;
	table[i].addr = (uintptr_t)b->p;
	table[i].len = LEN;
	table[i].ino = st.st_ino;
	atomic_store(&table[i].tag, gen << 8 | i);
	atomic_store(&table[i].tag2, gen << 8 | i);
}

static const uint8_t *find(uint64_t tbl, uint32_t tag, uint64_t addr, uint32_t len)
{
	return shm_maps_find(&ms, getpid(), tbl, SW_BUF_SLOTS, tag, addr, len);
}

static uint64_t tbl(void)
{
	return (uintptr_t)table;
}

static void good(void)
{
	const struct buf *b = &bufs[0];
	const uint8_t *m, *m2;
	uint32_t tag = 1u << 8 | 0;

	t_case("a good slot");
	slot_set(0, b, 1);
	m = find(tbl(), tag, (uintptr_t)b->p + 100, 1000);
	if (CHECK(m)) {
		CHECK(m != b->p + 100); /* a mapping of its own, not our pointer */
		CHECK(!memcmp(m, b->p + 100, 1000));
		b->p[150] ^= 0xff; /* the same pages */
		CHECK(m[50] == b->p[150]);
	}
	CHECK(find(tbl(), tag, (uintptr_t)b->p, LEN));
	CHECK(!find(tbl(), tag, (uintptr_t)b->p - 1, 2));
	CHECK(!find(tbl(), tag, (uintptr_t)b->p + LEN - 10, 11));
	CHECK(!find(tbl(), tag, (uintptr_t)b->p + LEN, 1));
	CHECK(!find(tbl(), tag, ~0ull - 5, 10));
	m2 = find(tbl(), tag, (uintptr_t)b->p + 100, 1);
	CHECK(m2 == m); /* the same mapping */
	shm_maps_close(&ms);
	CHECK(m && !t_mapped(m));
	shm_maps_init(&ms);
}

/* Slot `i` after `lie` refuses tag `tag`; the real buffer bufs[1]. */
static void liar(const char *name, uint32_t tag, void (*lie)(uint32_t i))
{
	const struct buf *b = &bufs[1];
	uint32_t i = tag & 0xffu;

	t_case(name);
	slot_set(i, b, tag >> 8);
	lie(i);
	CHECK(!find(tbl(), tag, (uintptr_t)b->p, 4096));
	for (uint32_t k = 0; k < SHM_MAPS; k++)
		CHECK(!ms.m[k].map);
	shm_maps_close(&ms);
	shm_maps_init(&ms);
	memset(&table[i], 0, sizeof(table[i]));
}

static int other_fd = -1, pipe_fd[2] = {-1, -1}, loose_fd = -1;

static void l_tag2(uint32_t i)
{
	atomic_store(&table[i].tag2, atomic_load(&table[i].tag) + 256);
}
static void l_free(uint32_t i)
{
	atomic_store(&table[i].tag, 0);
	atomic_store(&table[i].tag2, 0);
}
static void l_badfd(uint32_t i)
{
	table[i].fd = 999;
}
static void l_pipe(uint32_t i)
{
	table[i].fd = pipe_fd[0];
}
static void l_unsealed(uint32_t i)
{
	struct stat st;

	CHECK(!fstat(loose_fd, &st));
	table[i].fd = loose_fd;
	table[i].ino = st.st_ino;
}
static void l_other_ino(uint32_t i)
{
	table[i].fd = other_fd; /* a sealed memfd, but not the inode the slot names */
}
static void l_too_long(uint32_t i)
{
	table[i].len = LEN + 4096;
}

static void liars(void)
{
	liar("slot: the second tag word differs", 5u << 8 | 3, l_tag2);
	liar("slot: free", 5u << 8 | 3, l_free);
	liar("slot: fd not open", 5u << 8 | 3, l_badfd);
	liar("slot: fd a pipe", 5u << 8 | 3, l_pipe);
	liar("slot: memfd not sealed against shrinking", 5u << 8 | 3, l_unsealed);
	liar("slot: another memfd than its inode", 5u << 8 | 3, l_other_ino);
	liar("slot: longer than the file", 5u << 8 | 3, l_too_long);

	t_case("slot: the tag names another slot, or none");
	slot_set(3, &bufs[1], 5);
	CHECK(!find(tbl(), 5u << 8 | 4, (uintptr_t)bufs[1].p, 4096));
	CHECK(!shm_maps_find(&ms, getpid(), tbl(), 4, 5u << 8 | 4, (uintptr_t)bufs[1].p, 1));
	t_case("table: nothing mapped at its address");
	CHECK(!find(4096, 5u << 8 | 3, (uintptr_t)bufs[1].p, 4096));
	CHECK(!find(~0ull - 100, 5u << 8 | 3, (uintptr_t)bufs[1].p, 4096));
	shm_maps_close(&ms);
	shm_maps_init(&ms);
	memset(&table[3], 0, sizeof(table[3]));
}

static void retry(void)
{
	const struct buf *b = &bufs[2];
	uint32_t tag = 7u << 8 | 9;

	t_case("a refused tag: not tried again while in use, again once aged");
	slot_set(9, b, 7);
	table[9].fd = 999;
	CHECK(!find(tbl(), tag, (uintptr_t)b->p, 64));
	table[9].fd = b->fd; /* mended */
	for (int k = 0; k <= SHM_MAP_IDLE; k++) { /* in use: stays refused */
		shm_maps_age(&ms);
		CHECK(!find(tbl(), tag, (uintptr_t)b->p, 64));
	}
	for (int k = 0; k <= SHM_MAP_IDLE; k++) /* the first sees the last use */
		shm_maps_age(&ms);
	CHECK(find(tbl(), tag, (uintptr_t)b->p, 64));
	shm_maps_close(&ms);
	shm_maps_init(&ms);
	memset(&table[9], 0, sizeof(table[9]));
}

static void lru(void)
{
	const uint8_t *m[NB];
	int fds;

	t_case("SHM_MAPS mappings at most, least recently used out; idle ones age out");
	for (uint32_t i = 0; i < NB; i++)
		slot_set(20 + i, &bufs[i], 2);
	for (uint32_t i = 0; i < SHM_MAPS; i++)
		m[i] = find(tbl(), 2u << 8 | (20 + i), (uintptr_t)bufs[i].p, 8);
	CHECK(find(tbl(), 2u << 8 | 20, (uintptr_t)bufs[0].p, 8) == m[0]); /* 0 used again */
	m[SHM_MAPS] = find(tbl(), 2u << 8 | (20 + SHM_MAPS), (uintptr_t)bufs[SHM_MAPS].p, 8);
	CHECK(m[SHM_MAPS]);
	for (uint32_t k = 0; k < SHM_MAPS; k++) /* 1 was the least recently used */
		CHECK(ms.m[k].tag != (2u << 8 | 21));
	CHECK(t_mapped(m[0]) && t_mapped(m[2]));
	for (int k = 0; k <= SHM_MAP_IDLE; k++) {
		shm_maps_age(&ms);
		CHECK(find(tbl(), 2u << 8 | 20, (uintptr_t)bufs[0].p, 8) == m[0]);
	}
	CHECK(t_mapped(m[0]) && !t_mapped(m[2]) && !t_mapped(m[SHM_MAPS]));
	fds = t_count_fds();
	shm_maps_close(&ms);
	CHECK(!t_mapped(m[0]));
	CHECK_EQ_INT(t_count_fds(), fds - 1); /* the pidfd */
	shm_maps_init(&ms);
}

int main(void)
{
	t_start("unit_shm_map");
	if (!t_have_pidfd_getfd())
		t_skip_all(
			"pidfd_getfd(2) is missing (kernel before 5.6, or valgrind before 3.20)");
	shm_maps_init(&ms);
	for (int i = 0; i < NB; i++) {
		bufs[i].fd = memfd(true, LEN);
		bufs[i].p = bufs[i].fd < 0 ? MAP_FAILED :
					     mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED,
						  bufs[i].fd, 0);
		if (!CHECK(bufs[i].p != MAP_FAILED))
			return t_finish();
		t_fill(bufs[i].p, LEN, (unsigned)i + 1);
	}
	other_fd = memfd(true, LEN);
	loose_fd = memfd(false, LEN);
	CHECK(other_fd >= 0 && loose_fd >= 0 && !pipe(pipe_fd));
	good();
	liars();
	retry();
	lru();
	for (int i = 0; i < NB; i++) {
		munmap(bufs[i].p, LEN);
		close(bufs[i].fd);
	}
	close(other_fd);
	close(loose_fd);
	close(pipe_fd[0]);
	close(pipe_fd[1]);
	return t_finish();
}
