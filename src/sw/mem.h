/* SPDX-License-Identifier: MIT */
/*
 * mem.h - the software device's memory layer (src/sw/mem): the MR table
 * and MRs, their access rules and look-up for every use, registration,
 * device memory, DMA handles, provider buffers and CC shared memory.
 * Placement into MRs is in mem/place.h.
 *
 * Objects embed their public struct first, so a cast from the public
 * pointer is a container_of at offset 0. Every function follows the core
 * convention: 0 or -errno.
 */
#ifndef SV_SW_MEM_H
#define SV_SW_MEM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "sw/mem/place.h"

struct sw_dev;
struct sw_dm;
struct sw_dmah;
struct sw_mr;
struct sw_pd;

/*
 * mem/mr_table.c: key -> MR, an open-addressed hash table. Keys are
 * 32-bit random values, nonzero and unique among live MRs, so a peer
 * cannot guess one. Lookups take a reference so that the transport can
 * use an MR while the application deregisters it; the last put frees it.
 * Safe from any thread.
 */
struct sw_mr_table {
	pthread_rwlock_t lock;
	struct sw_mr **slots; /* power-of-two sized; NULL or a tombstone */
	uint32_t nslots;
	uint32_t used; /* live entries */
	uint32_t windows; /* live entries that are memory windows' (not against max) */
	uint32_t tombs; /* deleted entries */
	uint32_t max; /* MRs */
};

int sw_mr_table_init(struct sw_mr_table *t, uint32_t max);
/* Frees the slots; MRs still in the table lose their registration reference. */
void sw_mr_table_destroy(struct sw_mr_table *t);
/*
 * Insert and assign mr->key == mr->ibv.lkey == mr->ibv.rkey (a fresh
 * random key with bit 31 clear: keys with it set are memory windows').
 * -ENOMEM at the limit or when the table cannot grow.
 */
int sw_mr_table_insert(struct sw_mr_table *t, struct sw_mr *mr);
/*
 * Memory windows (mem/mw.c): put entry `e` in under the key it carries
 * (e->key), taking the place of `old` (NULL: none) in one step, so that
 * no lookup sees neither. -EEXIST if another entry has the key, -ENOMEM
 * if the table cannot grow; then nothing changed.
 */
int sw_mr_table_swap(struct sw_mr_table *t, struct sw_mr *old, struct sw_mr *e);
/* Remove a registered MR; its key no longer resolves. No reference is dropped. */
void sw_mr_table_remove(struct sw_mr_table *t, struct sw_mr *mr);
/* Returns a referenced MR or NULL; release with sw_mr_put(). */
struct sw_mr *sw_mr_table_lookup(struct sw_mr_table *t, uint32_t key);
/*
 * Quiesce a registered MR so that its fields may be rewritten (rereg):
 * lookups of its key fail from now on, and the call returns once every
 * reference taken by an earlier lookup has been put. The caller must not
 * hold such a reference. sw_mr_table_unblock() makes the key resolve again.
 */
void sw_mr_table_block(struct sw_mr_table *t, struct sw_mr *mr);
/*
 * Wait until the caller's reference is the only one left on an MR whose
 * key no longer resolves (removed or blocked): every transfer that
 * looked it up earlier is done with its memory.
 */
void sw_mr_wait_idle(struct sw_mr *mr);
void sw_mr_table_unblock(struct sw_mr_table *t, struct sw_mr *mr);
/*
 * Remove up to `max` MRs for which match(mr, arg) holds, scanning from
 * slot *cursor on (start with 0; it advances), into out[]. Returns how
 * many; their registration references pass to the caller.
 */
size_t sw_mr_table_remove_matching(struct sw_mr_table *t,
				   bool (*match)(const struct sw_mr *mr, const void *arg),
				   const void *arg, uint32_t *cursor, struct sw_mr **out,
				   size_t max);

/*
 * A registered MR. `ibv` and `core.ibv` are the same object: the core's
 * struct sv_mr starts with the public struct ibv_mr. While a reference is
 * held, the fields below `key` stay constant (rereg quiesces the MR first).
 */
struct sw_mr {
	union {
		struct ibv_mr ibv;
		struct sv_mr core;
	};
	atomic_int refcnt; /* table lookups in flight + 1 while registered */
	uint32_t key; /* lkey == rkey; our copy, the app may scribble on ibv */
	bool blocked; /* rereg in progress: lookups fail (table lock) */
	struct sw_pd *pd; /* the protection domain proper (never a parent) */
	uint64_t iova; /* first byte's address as peers name it */
	uint64_t length;
	uint8_t *host; /* where iova maps in this process */
	uint32_t buf_tag; /* a shared buffer holds [host, +length): its tag, else 0 */
	int access;
	int fd; /* fd path: our dup of the caller's fd, else -1 */
	void *map; /* fd path: our mapping */
	size_t map_len;
	struct sw_dmah *dmah;
	struct sw_place_hint hint; /* copy of the DMA handle's hints */
	bool has_hint;
	struct sw_dm *dm; /* device-memory MR: its DM (holds a use), else NULL */
	atomic_int nmw; /* an MR: memory windows bound to it (dereg refuses then) */
	/*
	 * A memory window's entry (mem/mw.c) has `mw` set and is never
	 * changed once in the table: a bind or an invalidation puts a new
	 * entry in its place. Bound, it holds a reference on `parent`, the
	 * MR beneath, and `host`, `iova`, `length` and `access` describe the
	 * window; unbound, `parent` is NULL and nothing resolves through it.
	 */
	struct sw_mw *mw;
	struct sw_mr *parent;
	uint64_t qp_uid; /* type 2: the QP it is bound to (sw_qp.uid), else 0 */
};

static inline struct sw_mr *sw_mr(struct ibv_mr *mr)
{
	return (struct sw_mr *)mr;
}

/* Take another reference on an MR the caller already holds one on. */
void sw_mr_get(struct sw_mr *mr);
/* Drop a reference; the last one unmaps, closes and frees the MR. */
void sw_mr_put(struct sw_mr *mr);

/*
 * mem/mr.c: the device's memory state. The device code calls
 * sw_mem_dev_init() once when it creates a struct sw_dev (before any
 * context opens) and sw_mem_dev_fini() when it frees it.
 */
int sw_mem_dev_init(struct sw_dev *dev);
void sw_mem_dev_fini(struct sw_dev *dev);

/*
 * Deregister every MR still registered through `ctx` (closed without
 * ibv_dereg_mr), so that their keys stop resolving. close_context calls
 * it before it frees the context's PDs.
 */
void sw_mem_ctx_close(struct ibv_context *ctx);

/*
 * mem/prot.c: check that the pages of [addr, +len) are mapped, readable
 * and, if `write`, writable, as pinning them would require (the span
 * does not wrap). 0, -EFAULT (a hole, or a page without the protection),
 * or another -errno.
 */
int sw_mem_check_mapped(uintptr_t addr, uint64_t len, bool write);

/* mem/access.c */
/* Validate access bits for a registration; `fd_path` narrows the set. */
int sw_access_check(int access, bool fd_path);
/*
 * FLUSH_PERSISTENT in `access` needs persistent memory: `mr` (NULL: none
 * attached) with a DMA handle of type PM. 0 or -EINVAL (rxe's answer for
 * pages that are not persistent memory).
 */
int sw_access_check_persistent(int access, const struct sw_mr *mr);

/*
 * Check that [iova, iova + len) lies inside the MR and that `need`
 * (IBV_ACCESS_* bits) is granted. Returns 0, -EINVAL (range) or -EACCES.
 */
int sw_mr_check_range(const struct sw_mr *mr, uint64_t iova, uint64_t len, int need);

/*
 * The MR that `key` names, for [va, va + len) with `need` access, as one
 * use of it (an SGE, an rkey of a request, advice) sees it. Checked in
 * this order: a live MR has the key and belongs to protection domain
 * `pd` (a parent domain's base), else -ENOENT; it grants every bit of
 * `need`, else -EACCES; the range lies inside it, else -EINVAL. 0 with a
 * referenced MR in *out (release with sw_mr_put()). Any thread.
 */
int sw_mr_resolve(struct sw_dev *dev, uint32_t key, const struct sw_pd *pd, uint64_t va,
		  uint64_t len, int need, struct sw_mr **out);

/*
 * The target of a remote request: `key` for [va, va + len) with `need`,
 * through an MR or a bound memory window (mem/mw.c), by QP `qp_uid` of
 * protection domain `pd`. An MR's key: as sw_mr_resolve(). A window's:
 * it is bound, of `pd`, a type 2 window bound to QP `qp_uid`, grants
 * `need`, and the range lies inside the window. 0 with a referenced
 * entry in *out whose host/iova map the range (release with
 * sw_mr_put()), else -ENOENT, -EACCES or -EINVAL. Any thread.
 */
int sw_rkey_resolve(struct sw_dev *dev, uint32_t key, const struct sw_pd *pd, uint64_t qp_uid,
		    uint64_t va, uint64_t len, int need, struct sw_mr **out);

/* Where address `va` of a resolved range of `mr` lies in this process. */
static inline uint8_t *sw_mr_host(const struct sw_mr *mr, uint64_t va)
{
	return mr->host + (va - mr->iova);
}

/*
 * Spread a key (or QPN) over the bits of a table index (murmur3's
 * finaliser): the MR table's slots, the push directory's entries.
 */
static inline uint32_t sw_key_hash(uint32_t k)
{
	k ^= k >> 16;
	k *= 0x85ebca6bU;
	k ^= k >> 13;
	k *= 0xc2b2ae35U;
	k ^= k >> 16;
	return k;
}

/* mem/keys.c: unpredictable nonzero 32-bit key candidates */
uint32_t sw_key_random(void);

/* Bit 31 of a key: set for memory windows' keys, clear for MRs'. */
#define SW_KEY_MW 0x80000000u

/*
 * mem/mw.c: memory windows. A window's key is SW_KEY_MW, a 23-bit index
 * unique among the device's windows, and an 8-bit key part a bind may
 * change. Binds, invalidations and deallocation serialise on the
 * device's mw_lock (so does the check of ibv_dereg_mr).
 */
struct sw_mw {
	struct ibv_mw ibv;
	struct sw_pd *pd; /* its protection domain (holds a use) */
	struct sw_mr *entry; /* its entry in the key table (mw_lock) */
};

static inline struct sw_mw *sw_mw(struct ibv_mw *mw)
{
	return (struct sw_mw *)mw;
}

/* What a BIND_MW work request asks (the queue layer copies it at post). */
struct sw_mw_bind {
	uint32_t mw_rkey; /* the window's key when the request was posted */
	uint32_t new_rkey; /* its low 8 bits become the key part */
	uint32_t mr_lkey; /* the MR beneath (when length is nonzero) */
	uint32_t access; /* the window's access flags */
	uint64_t addr, length;
};

int sw_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type, struct ibv_mw **mw);
int sw_dealloc_mw(struct ibv_mw *mw);
/*
 * Execute a bind for QP `qp_uid` of protection domain `qp_pd`, as rxe
 * does (IBTA 10.6.7): -EINVAL (the requester completes the WQE with
 * IBV_WC_MW_BIND_ERR) if the window or MR is not found, or a rule is
 * broken; see mw.c for the list.
 */
int sw_mw_bind(struct sw_dev *dev, const struct sw_pd *qp_pd, uint64_t qp_uid,
	       const struct sw_mw_bind *b);
/*
 * Invalidate `rkey` for QP `qp_uid` of `qp_pd`: a bound type 2 window of
 * that PD (`remote`: SEND with Invalidate, also bound to that QP). MRs
 * registered by the application cannot be invalidated. 0 or -EINVAL.
 */
int sw_mw_invalidate(struct sw_dev *dev, uint32_t rkey, const struct sw_pd *qp_pd, uint64_t qp_uid,
		     bool remote);
/* Free the windows a closing context still has (before its MRs go: sw_mem_ctx_close). */
void sw_mw_ctx_close(struct ibv_context *ctx);

/* mem/mr.c */
int sw_reg_mr(struct ibv_pd *pd, const struct ibv_mr_init_attr *attr, bool legacy_dmabuf,
	      struct ibv_mr **mr);
int sw_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		int access);
int sw_dereg_mr(struct ibv_mr *mr);

/* mem/dm.c: device memory, emulated in host memory */
struct sw_dm {
	struct ibv_dm ibv;
	uint8_t *buf; /* page-aligned, zeroed */
	uint64_t length; /* as asked */
	size_t alloc_len; /* page-rounded, counted in dev->dm_bytes */
	atomic_int usecnt; /* MRs registered on it */
	struct sw_dm *prev, *next; /* in its context's list */
};

int sw_alloc_dm(struct ibv_context *ctx, struct ibv_alloc_dm_attr *attr, struct ibv_dm **dm);
int sw_free_dm(struct ibv_dm *dm);
int sw_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t offset, size_t length,
		 unsigned int access, struct ibv_mr **mr);
/* Free the DMs a closing context still has (its MRs were deregistered first). */
void sw_dm_ctx_close(struct ibv_context *ctx);

/* mem/advise.c: the sv_ops advise_mr slot (ODP prefetch) */
int sw_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		 struct ibv_sge *sg, uint32_t num_sge);

/* mem/dmah.c: DMA handles (TPH hints) */
struct sw_dmah {
	struct ibv_dmah ibv;
	atomic_int usecnt; /* MRs registered with this handle */
	struct sw_place_hint hint; /* what placement into its MRs honours */
};

static inline struct sw_dmah *sw_dmah(struct ibv_dmah *d)
{
	return (struct sw_dmah *)d;
}

int sw_alloc_dmah(struct ibv_context *ctx, struct ibv_dmah_init_attr *attr, struct ibv_dmah **dmah);
int sw_dealloc_dmah(struct ibv_dmah *dmah);

/* mem/buf.c: provider-aware buffers; mem/shmem.c: CC shared memory */
int sw_alloc_buf(struct ibv_pd *pd, size_t size, struct ibv_buf **buf, void **addr);
void sw_free_buf(struct ibv_buf *buf);
int sw_shmem_alloc(int heap_fd, size_t len, void **addr, int *fd);
void sw_shmem_free(void *addr, size_t len, int fd);
int sw_shmem_memfd(const char *name, size_t len);

/*
 * mem/buf_share.c: buffers that peers on the same host may map (single
 * copy without a system call, docs/single-copy.md). Each lives in a
 * sealed memfd and has a slot in this process's table of them, which a
 * peer reads with process_vm_readv(2) (the same-host link's header
 * gives its address): tag and tag2 hold the buffer's tag, fd its memfd
 * here, addr and len its mapping here, ino the memfd's inode number. A
 * slot is written tag2 first and tag last, and cleared tag first; a
 * reader that finds both equal to the tag it looks for has read the
 * fields of that buffer. A tag is (generation << 8) | slot index, never
 * 0, and names one buffer for as long as it lives.
 */
struct sw_buf_slot {
	_Atomic uint32_t tag;
	int32_t fd;
	uint64_t addr, len, ino;
	_Atomic uint32_t tag2;
	uint32_t pad;
};

enum {
	SW_BUF_SLOTS = 256, /* shared buffers at once; later ones are plain memory */
	SW_BUF_SHARE_MIN = 16 << 10, /* smaller ones are plain: their messages are copied anyway */
};

/*
 * A shared buffer of `len` bytes (whole pages): *addr its read/write
 * mapping, *fd its memfd, *tag its tag. 0, -ENOSPC (no free slot), or
 * -errno of the memfd's creation; nothing is left behind on an error.
 */
int sw_buf_share_alloc(size_t len, void **addr, int *fd, uint32_t *tag);
/* Release what sw_buf_share_alloc() gave; its tag names nothing from then on. */
void sw_buf_share_free(void *addr, size_t len, int fd, uint32_t tag);
/* The tag of the shared buffer that holds all of [addr, +len), else 0. */
uint32_t sw_buf_share_tag(const void *addr, uint64_t len);
/* The table's address in this process, and its slot count. */
const struct sw_buf_slot *sw_buf_share_table(uint32_t *n);

#endif
