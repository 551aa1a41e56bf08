/* SPDX-License-Identifier: MIT */
/*
 * shm_map.h - a same-host link's mappings of its sender's shared
 * buffers (shm_map.c), one set per incoming link (shm.c).
 */
#ifndef SV_SW_TRANSPORT_SHM_MAP_H
#define SV_SW_TRANSPORT_SHM_MAP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* A pidfd for process `pid` (pidfd_open(2)), or -1. */
static inline int shm_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* A copy of descriptor `fd` of the process of `pidfd` (pidfd_getfd(2)), or -1. */
static inline int shm_pidfd_getfd(int pidfd, int fd)
{
	return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
}

enum {
	SHM_MAPS = 16, /* buffers mapped per link at most: the least recently used goes */
	SHM_MAP_IDLE = 10, /* agings (one per link sweep, 100 ms) unused before a map goes */
};

struct shm_map {
	uint32_t tag; /* 0: unused */
	bool bad; /* could not be mapped: pulls with the system call; tried again once aged */
	const uint8_t *map; /* read-only, the whole buffer */
	uint64_t addr, len; /* the buffer in the sender */
	uint64_t last; /* the set's clock at its last use */
	uint32_t idle; /* agings since its last use */
};

struct shm_maps {
	int pidfd; /* the sender's, -1 until the first map */
	uint64_t clock; /* look-ups so far */
	uint64_t aged; /* the clock at the last aging */
	struct shm_map m[SHM_MAPS];
};

/* An empty set. */
void shm_maps_init(struct shm_maps *ms);

/* Unmap everything and close the pidfd (the link closes). */
void shm_maps_close(struct shm_maps *ms);

/*
 * Where the `len` bytes at `addr` of buffer `tag` of process `pid`
 * (whose table of struct sw_buf_slot is at `table`, `nslots` long) are
 * in a mapping of that buffer here: mapped on the first use, NULL if
 * they are not all inside it or it cannot be mapped (the caller then
 * copies with process_vm_readv). The pointer stays valid until the next
 * call on this set.
 */
const uint8_t *shm_maps_find(struct shm_maps *ms, pid_t pid, uint64_t table, uint32_t nslots,
			     uint32_t tag, uint64_t addr, uint32_t len);

/* Unmap what has not been used for SHM_MAP_IDLE agings; once per link sweep. */
void shm_maps_age(struct shm_maps *ms);

#endif
