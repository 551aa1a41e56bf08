/* SPDX-License-Identifier: MIT */
/*
 * shm_dir.c - the push directory (docs/single-copy.md, "Small WRITEs
 * written by the requester").
 *
 * A device keeps a memfd that describes its RC QPs and MRs a peer may
 * write into (struct shm_dir, shm_format.h). A peer on the same host,
 * linked to it, maps the memfd (pidfd_getfd(2): the ptrace rights that
 * process_vm_writev(2) needs anyway) and, for a small RDMA WRITE that
 * nothing of its QP is ahead of, checks the target's QP and MR there and
 * writes the bytes into the target's memory itself. The packet still
 * goes, marked placed, so that PSNs, ACKs and completions are the
 * usual; only the placement moved. The responder's checks are made by
 * the requester from the entries; whatever they do not allow is sent as
 * usual and the responder decides.
 *
 * Taking an entry away (deregistration, a QP leaving RTR..SQE, a change
 * of access) waits for every write that may have read it: pushers bump
 * their busy word (one per link, tagged with the link's generation)
 * around the read and the write, the owner makes the entry's seq odd and
 * then waits while any busy word it finds odd stays as it was (or its
 * producer dies). Both sides store, then load the other's word, with
 * sequentially consistent atomics.
 *
 * Owner's side: any thread (entries under `lock`), slots from the
 * progress thread. The directory is no more trusted than the ring: a
 * peer that may write it may ptrace us anyway.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "sw/mem.h"
#include "sw/transport/shm_dir.h"
#include "sw/transport/shm_map.h"

enum {
	SHM_DIR_VERSION = 1,
	ALIVE_EVERY = 256, /* a waiter looks whether the pusher lives every so many yields */
};

/* Contract: see shm_dir.h. */
void shm_dir_create(struct shm_dir_own *o)
{
	struct shm_dir *d = MAP_FAILED;
	int fd;

	memset(o, 0, sizeof(*o));
	o->fd = -1;
	pthread_mutex_init(&o->lock, NULL);
	fd = memfd_create("softverbs-dir", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return;
	/* sealed at its size: a peer's mapping can never fault */
	if (!ftruncate(fd, (off_t)sizeof(*d)) &&
	    !fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		d = mmap(NULL, sizeof(*d), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (d == MAP_FAILED) {
		close(fd);
		return;
	}
	d->magic = SHM_DIR_MAGIC;
	d->version = SHM_DIR_VERSION;
	o->fd = fd;
	o->d = d;
}

/* Contract: see shm_dir.h. */
void shm_dir_destroy(struct shm_dir_own *o)
{
	if (o->d)
		munmap(o->d, sizeof(*o->d));
	if (o->fd >= 0)
		close(o->fd);
	o->d = NULL;
	o->fd = -1;
	pthread_mutex_destroy(&o->lock);
}

/* Does process `pid` still exist? */
static bool alive(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

/*
 * Wait while pusher `i`'s busy word stays at the odd value `b`: its
 * write is going on. A producer that died mid-write ends the wait.
 */
static void wait_pusher(struct shm_dir_own *o, uint32_t i, uint64_t b)
{
	_Atomic uint64_t *busy = &o->d->pushers[i].busy;

	for (uint32_t n = 1; atomic_load(busy) == b; n++) {
		if (n % ALIVE_EVERY == 0 && !alive(atomic_load(&o->pid[i])))
			return;
		sched_yield();
	}
}

/* After an entry went odd: wait for every write that may have read it. */
static void wait_pushers(struct shm_dir_own *o)
{
	for (uint32_t i = 0; i < SHM_MAX_IN; i++) {
		uint64_t b = atomic_load(&o->d->pushers[i].busy);

		if (b & 1)
			wait_pusher(o, i, b);
	}
}

/* Contract: see shm_dir.h. */
int shm_dir_slot_take(struct shm_dir_own *o, pid_t pid)
{
	if (!o->d)
		return -1;
	for (uint32_t i = 0; i < SHM_MAX_IN; i++) {
		if (atomic_load(&o->pid[i]))
			continue;
		atomic_store(&o->pid[i], pid);
		return (int)i;
	}
	return -1;
}

/* Contract: see shm_dir.h. */
void shm_dir_slot_drop(struct shm_dir_own *o, int i)
{
	uint64_t b;

	if (!o->d || i < 0 || i >= SHM_MAX_IN)
		return;
	b = atomic_load(&o->d->pushers[i].busy);
	if (b & 1)
		wait_pusher(o, (uint32_t)i, b);
	atomic_store(&o->d->pushers[i].busy, 0); /* a late pusher's tag no longer matches */
	atomic_store(&o->pid[i], 0);
}

/* Contract: see shm_dir.h. */
uint64_t shm_dir_slot_tag(struct shm_dir_own *o, int i, uint32_t gen)
{
	uint64_t tag = (uint64_t)(gen ? gen : 1) << 32;

	if (o->d && i >= 0 && i < SHM_MAX_IN)
		atomic_store(&o->d->pushers[i].busy, tag);
	return tag;
}

/* Make entry `e` odd (sequentially consistent) and wait for its readers if it was live. */
static uint32_t ent_begin(struct shm_dir_own *o, struct shm_dir_ent *e)
{
	uint32_t s = atomic_load_explicit(&e->seq, memory_order_relaxed) | 1u;

	atomic_store(&e->seq, s);
	atomic_thread_fence(memory_order_release); /* the fields change after seq is odd */
	if (__atomic_load_n(&e->access, __ATOMIC_RELAXED))
		wait_pushers(o);
	return s;
}

static void ent_end(struct shm_dir_ent *e, uint32_t s)
{
	atomic_store_explicit(&e->seq, s + 1, memory_order_release);
}

static void ent_fill(struct shm_dir_ent *e, uint32_t key, uint32_t access, uint64_t pd,
		     uint64_t iova, uint64_t len, uint64_t host)
{
	__atomic_store_n(&e->key, key, __ATOMIC_RELAXED);
	__atomic_store_n(&e->access, access, __ATOMIC_RELAXED);
	__atomic_store_n(&e->pd, pd, __ATOMIC_RELAXED);
	__atomic_store_n(&e->iova, iova, __ATOMIC_RELAXED);
	__atomic_store_n(&e->len, len, __ATOMIC_RELAXED);
	__atomic_store_n(&e->host, host, __ATOMIC_RELAXED);
}

/*
 * Set `key`'s entry in table `t` of `n` (a power of two): taken away
 * first if live; then filled if `access` grants REMOTE_WRITE. An entry
 * that holds another live key is left alone (that key keeps the usual
 * path).
 */
static void ent_set(struct shm_dir_own *o, struct shm_dir_ent *t, uint32_t n, uint32_t key,
		    uint32_t access, uint64_t pd, uint64_t iova, uint64_t len, uint64_t host)
{
	struct shm_dir_ent *e;
	uint32_t s;

	if (!o->d)
		return;
	e = &t[sw_key_hash(key) & (n - 1)];
	pthread_mutex_lock(&o->lock);
	if (__atomic_load_n(&e->access, __ATOMIC_RELAXED) &&
	    __atomic_load_n(&e->key, __ATOMIC_RELAXED) != key) {
		pthread_mutex_unlock(&o->lock);
		return;
	}
	if (!(access & IBV_ACCESS_REMOTE_WRITE) && !__atomic_load_n(&e->access, __ATOMIC_RELAXED)) {
		pthread_mutex_unlock(&o->lock);
		return; /* nothing there, nothing to publish */
	}
	s = ent_begin(o, e);
	if (access & IBV_ACCESS_REMOTE_WRITE)
		ent_fill(e, key, access, pd, iova, len, host);
	else
		ent_fill(e, 0, 0, 0, 0, 0, 0);
	ent_end(e, s);
	pthread_mutex_unlock(&o->lock);
}

/* Contract: see shm_dir.h. */
void shm_dir_qp_set(struct shm_dir_own *o, uint32_t qpn, uint64_t pd, uint32_t access)
{
	if (o->d)
		ent_set(o, o->d->qps, SHM_DIR_QPS, qpn, access, pd, 0, 0, 0);
}

/* Contract: see shm_dir.h. */
void shm_dir_qp_clear(struct shm_dir_own *o, uint32_t qpn)
{
	shm_dir_qp_set(o, qpn, 0, 0);
}

/* Contract: see shm_dir.h. */
void shm_dir_mr_set(struct shm_dir_own *o, uint32_t key, uint64_t pd, uint32_t access,
		    uint64_t iova, uint64_t len, uint64_t host)
{
	if (o->d)
		ent_set(o, o->d->mrs, SHM_DIR_MRS, key, access, pd, iova, len, host);
}

/* Contract: see shm_dir.h. */
void shm_dir_mr_clear(struct shm_dir_own *o, uint32_t key)
{
	shm_dir_mr_set(o, key, 0, 0, 0, 0, 0);
}

/* Contract: see shm_dir.h. */
struct shm_dir *shm_dir_map(pid_t pid, int fd)
{
	struct shm_dir *d = MAP_FAILED;
	int pfd, dfd = -1, seals;
	struct stat st;

	if (pid <= 0 || fd < 0)
		return NULL;
	pfd = shm_pidfd_open(pid);
	if (pfd < 0)
		return NULL;
	dfd = shm_pidfd_getfd(pfd, fd);
	close(pfd);
	if (dfd < 0)
		return NULL;
	seals = fcntl(dfd, F_GET_SEALS);
	if (!fstat(dfd, &st) && st.st_size == (off_t)sizeof(*d) && seals >= 0 &&
	    (seals & F_SEAL_SHRINK))
		d = mmap(NULL, sizeof(*d), PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
	close(dfd);
	if (d == MAP_FAILED)
		return NULL;
	if (d->magic != SHM_DIR_MAGIC || d->version != SHM_DIR_VERSION) {
		munmap(d, sizeof(*d));
		return NULL;
	}
	return d;
}

/* Contract: see shm_dir.h. */
void shm_dir_unmap(struct shm_dir *d)
{
	if (d)
		munmap(d, sizeof(*d));
}

/* Read `key`'s entry of table `t` (n entries) into *out; false if absent or changing. */
static bool ent_read(struct shm_dir_ent *t, uint32_t n, uint32_t key, struct shm_dir_ent *out)
{
	struct shm_dir_ent *e = &t[sw_key_hash(key) & (n - 1)];
	uint32_t s = atomic_load(&e->seq); /* after our busy word: sequentially consistent */

	if (s & 1)
		return false;
	out->key = __atomic_load_n(&e->key, __ATOMIC_RELAXED);
	out->access = __atomic_load_n(&e->access, __ATOMIC_RELAXED);
	out->pd = __atomic_load_n(&e->pd, __ATOMIC_RELAXED);
	out->iova = __atomic_load_n(&e->iova, __ATOMIC_RELAXED);
	out->len = __atomic_load_n(&e->len, __ATOMIC_RELAXED);
	out->host = __atomic_load_n(&e->host, __ATOMIC_RELAXED);
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&e->seq, memory_order_relaxed) == s && out->key == key &&
	       (out->access & IBV_ACCESS_REMOTE_WRITE);
}

/* Contract: see shm_dir.h. */
int shm_dir_push(struct shm_dir *d, uint32_t slot, uint64_t tag, atomic_uint *ok, pid_t pid,
		 uint32_t qpn, uint32_t rkey, uint64_t va, const void *src, uint32_t len)
{
	_Atomic uint64_t *busy = &d->pushers[slot].busy;
	uint64_t b = atomic_load_explicit(busy, memory_order_relaxed), odd, even;
	struct shm_dir_ent q, m;
	int ret = -EAGAIN;

	/* the count wraps in the low half, never into the tag */
	odd = tag | ((b + 1) & 0xffffffffull);
	even = tag | ((b + 2) & 0xffffffffull);
	/* our slot still (tag), and not left odd by a write of ours that died */
	if ((b & ~0xffffffffull) != tag || (b & 1) ||
	    !atomic_compare_exchange_strong(busy, &b, odd))
		return -EAGAIN;
	if (atomic_load(ok) && ent_read(d->qps, SHM_DIR_QPS, qpn, &q) &&
	    ent_read(d->mrs, SHM_DIR_MRS, rkey, &m) && m.pd == q.pd && va >= m.iova &&
	    len <= m.len && va - m.iova <= m.len - len) {
		struct iovec l = {.iov_base = (void *)(uintptr_t)src, .iov_len = len};
		struct iovec r = {.iov_base = (void *)(uintptr_t)(m.host + (va - m.iova)),
				  .iov_len = len};
		ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);

		ret = n == (ssize_t)len ? 0 : n < 0 ? -errno : -EFAULT;
	}
	atomic_compare_exchange_strong(busy, &odd, even); /* fails only if the slot was retagged */
	return ret;
}
