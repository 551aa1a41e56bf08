/* SPDX-License-Identifier: MIT */
/*
 * shm_dir.h - the push directory of the same-host link (shm_dir.c,
 * docs/single-copy.md): a device publishes its QPs and MRs that a peer
 * may write into directly; a peer on the same host writes a small RDMA
 * WRITE into them itself with process_vm_writev(2).
 */
#ifndef SV_SW_TRANSPORT_SHM_DIR_H
#define SV_SW_TRANSPORT_SHM_DIR_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sw/transport/shm_format.h"

/* A device's own directory (the owner's side). */
struct shm_dir_own {
	int fd; /* the memfd, kept open for peers' pidfd_getfd(2); -1: none */
	struct shm_dir *d; /* mapped shared, NULL: none (pushes never happen) */
	pthread_mutex_t lock; /* entry writers */
	_Atomic int pid[SHM_MAX_IN]; /* each pusher slot's producer, 0: free */
};

/* Create the directory (none on failure: peers then never push). */
void shm_dir_create(struct shm_dir_own *o);
/* Unmap and close it. No other thread uses it any more. */
void shm_dir_destroy(struct shm_dir_own *o);

/*
 * A free pusher slot for a link from process `pid` (progress thread):
 * its index, or -1 when there is none or no directory.
 */
int shm_dir_slot_take(struct shm_dir_own *o, pid_t pid);
/*
 * Tag slot `i` for the link of generation `gen`: its busy word becomes
 * the tag (nonzero, in the high half), which the producer must show on
 * every write. Returns the tag.
 */
uint64_t shm_dir_slot_tag(struct shm_dir_own *o, int i, uint32_t gen);
/*
 * Let slot `i` go once no write of its producer that could still see an
 * entry is going on (the caller cleared the link's dir_ok first).
 */
void shm_dir_slot_drop(struct shm_dir_own *o, int i);

/*
 * Publish QP `qpn` of protection domain `pd` with access flags `access`
 * (0: not writable, as outside RTR..SQE). Any earlier entry of it is
 * taken away first (shm_dir_qp_clear). Any thread.
 */
void shm_dir_qp_set(struct shm_dir_own *o, uint32_t qpn, uint64_t pd, uint32_t access);
/* Take QP `qpn`'s entry away; returns once no peer's write can still use it. */
void shm_dir_qp_clear(struct shm_dir_own *o, uint32_t qpn);
/* Publish MR `key` (as shm_dir_qp_set; at most one entry per key). */
void shm_dir_mr_set(struct shm_dir_own *o, uint32_t key, uint64_t pd, uint32_t access,
		    uint64_t iova, uint64_t len, uint64_t host);
/* Take MR `key`'s entry away; returns once no peer's write can still use it. */
void shm_dir_mr_clear(struct shm_dir_own *o, uint32_t key);

/*
 * The producer's side: map the directory that process `pid` holds as
 * descriptor `fd` (pidfd_getfd(2)); NULL if that cannot be done or it is
 * not a directory of ours.
 */
struct shm_dir *shm_dir_map(pid_t pid, int fd);
void shm_dir_unmap(struct shm_dir *d);

/*
 * Write `len` bytes from `src` at `va` under `rkey` through QP `qpn` of
 * the directory's owner `pid`, as its responder would place them: the
 * QP's entry grants REMOTE_WRITE, the MR's entry is of the same PD,
 * grants REMOTE_WRITE and holds the whole range. Pusher slot `slot`
 * with tag `tag`; `ok` the link's dir_ok. 0 when every byte landed, -EAGAIN when the
 * entries do not allow it (or are being changed: the caller sends the
 * bytes as usual and the responder decides), -errno of the kernel.
 */
int shm_dir_push(struct shm_dir *d, uint32_t slot, uint64_t tag, atomic_uint *ok, pid_t pid,
		 uint32_t qpn, uint32_t rkey, uint64_t va, const void *src, uint32_t len);

#endif
