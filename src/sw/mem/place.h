/* SPDX-License-Identifier: MIT */
/*
 * place.h - placement of incoming bytes into memory regions, honouring
 * the TPH hints of the MR's DMA handle (mem/place.c).
 */
#ifndef SV_SW_MEM_PLACE_H
#define SV_SW_MEM_PLACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <infiniband/verbs.h>

/*
 * Writes into application memory race with the application's reads by
 * design, as DMA does (tests/tsan.supp says why). Under ThreadSanitizer
 * placements are hidden from the race detector (SW_DMA_BEGIN/END around
 * them), since the writer's stack of a long-ago placement often cannot
 * be restored for a suppression to match.
 */
#if defined(__SANITIZE_THREAD__)
#define SV_TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SV_TSAN_BUILD 1
#endif
#endif
#ifdef SV_TSAN_BUILD
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
#define SW_DMA_BEGIN() __tsan_ignore_thread_begin()
#define SW_DMA_END() __tsan_ignore_thread_end()
#else
#define SW_DMA_BEGIN() ((void)0)
#define SW_DMA_END() ((void)0)
#endif

/*
 * Memory another process writes for us (a READ's responder, single copy:
 * place_push.c) is written by the kernel on its behalf, where valgrind
 * does not see it, as it does not see a NIC's DMA. SW_DMA_WRITTEN(p, len)
 * tells memcheck those bytes will be defined (no code without valgrind's
 * header; nothing at run time outside valgrind).
 */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define SW_DMA_WRITTEN(p, len) ((void)VALGRIND_MAKE_MEM_DEFINED((p), (len)))
#endif
#endif
#ifndef SW_DMA_WRITTEN
#define SW_DMA_WRITTEN(p, len) ((void)(p), (void)(len))
#endif

/* The hints placement needs, copied from a DMA handle. */
struct sw_place_hint {
	bool has_cpu;
	uint32_t cpu_id;
	uint8_t ph;
	uint8_t mem_type;
};

/* Process-wide counters, for diagnostics and tests. */
struct sw_place_stats {
	atomic_size_t nt_bytes; /* bytes stored with non-temporal stores */
	atomic_size_t flushed_lines; /* cache lines written back for PM */
	atomic_size_t pinned_jobs; /* placements run on a pinned worker */
	atomic_size_t pinned_bytes; /* the bytes they placed */
	atomic_size_t pinned_off_cpu; /* of those, run on another CPU than asked */
	atomic_int last_cpu; /* CPU the last pinned placement ran on */
	atomic_size_t pull_bytes; /* bytes read from other processes (place_pull.c) */
	atomic_size_t pull_calls; /* process_vm_readv(2) calls made for them */
	atomic_size_t pull_errors; /* calls that did not read all they asked */
	atomic_size_t push_bytes; /* bytes written into other processes (place_push.c) */
	atomic_size_t push_calls; /* process_vm_writev(2) calls made for them */
	atomic_size_t push_errors; /* calls that did not write all they asked */
	atomic_size_t map_bytes; /* bytes copied from a peer's mapped buffer (shm_map.c) */
};

extern struct sw_place_stats sw_place_stats;

/*
 * Copy `len` bytes from `src` to `dst` as `hint` asks (NULL: no hint).
 * The last byte becomes visible after all the others. Returns when the
 * bytes are placed (and, for PM, written back): 0 or -errno. Placements
 * this thread deferred (sw_place_defer) land first.
 */
int sw_place(const struct sw_place_hint *hint, void *dst, const void *src, size_t len);

/*
 * As sw_place, but a hint with a CPU id only queues the copy on that
 * CPU's worker and returns: the bytes land later, after every placement
 * this thread queued before (one worker per CPU, first in first out), and
 * `done(arg)` runs once they have (on the worker; NULL: nothing to run).
 * `src` must stay as it is until then; the caller's sw_place_fence()
 * waits for it. Any other hint places at once, as sw_place, then runs
 * `done`. On an error nothing is queued and `done` does not run.
 */
int sw_place_defer(const struct sw_place_hint *hint, void *dst, const void *src, size_t len,
		   void (*done)(void *), void *arg);

/*
 * Wait until every placement this thread deferred has landed (and, for
 * PM, been written back); at once when there is none. The transport calls
 * it before anything that exposes or reads placed bytes: an ACK or NAK, a
 * completion, a READ response or an atomic, and before it reuses the
 * receive buffers the deferred copies read from.
 */
void sw_place_fence(void);

/*
 * Who waits for a pulled copy: done(a, b, err) runs once, on the pulling
 * thread, when the copy has landed (err 0) or failed (-errno; whatever
 * part landed stays). NULL done: nobody.
 */
struct sw_pull_owner {
	void (*done)(void *a, void *b, int err);
	void *a, *b;
};

/*
 * Place `len` bytes that are at address `src` in process `pid` (the
 * sender on the same-host link) at `dst`, as sw_place would
 * (place_pull.c): without a hint the copy is queued and lands, in this
 * thread's order, at the latest at the next sw_place_fence() or other
 * placement; with a hint it is read and placed now. `own` is told when
 * it landed. Returns 0 (the outcome goes to `own`).
 */
int sw_place_pull(const struct sw_place_hint *hint, void *dst, pid_t pid, uint64_t src, size_t len,
		  const struct sw_pull_owner *own);

/* Land every copy this thread queued with sw_place_pull; their owners are told. */
void sw_place_pull_flush(void);

/* True while this thread has queued pulled copies that have not landed. */
bool sw_place_pull_pending(void);

/*
 * Write `len` bytes at `src` (registered memory of this process) into
 * process `pid` at the `n` pieces (1 to SW_REF_PIECES struct
 * sw_ref_piece, unaligned, whose lengths add up to `len`) at `pieces`,
 * now, with one system call (place_push.c). 0, or -errno when not all of
 * it was written (whatever was, stays). Counted in sw_place_stats.
 */
int sw_place_push(pid_t pid, const void *src, size_t len, const uint8_t *pieces, uint32_t n);

/*
 * The same for several writes at once: the `nloc` local ranges, in
 * order, into the `nrem` ranges of process `pid` (as process_vm_writev(2)
 * fills them: in order, stopping at the first that fails). Returns the
 * bytes written, or -errno when none were. Counted in sw_place_stats.
 */
ssize_t sw_place_pushv(pid_t pid, const struct iovec *loc, uint32_t nloc, const struct iovec *rem,
		       uint32_t nrem);

/*
 * Start the worker on the placements this thread deferred since the last
 * kick (sw_place_defer queues without waking it): once per receive batch.
 * sw_place_fence kicks first.
 */
void sw_place_kick(void);

/* True while placements this thread deferred have not all landed. */
bool sw_place_pending(void);

/* The copy itself on the calling thread, for the workers (place_worker.c). */
void sw_place_here(const struct sw_place_hint *hint, uint8_t *dst, const uint8_t *src, size_t len);

/*
 * Copy `len` bytes of registered memory at `src` out to `dst` (the device
 * reading application memory: requester gather, READ responses). Like a
 * placement it races with the application by design, as DMA does, and is
 * hidden from ThreadSanitizer the same way (tests/tsan.supp).
 */
void sw_fetch(void *dst, const void *src, size_t len);

/*
 * An 8-byte atomic on registered memory at `target` (8-byte aligned):
 * compare-and-swap (`cas`: if *target == compare, store swap_add) or
 * fetch-and-add of swap_add, sequentially consistent, then persisted as
 * `hint` asks, after this thread's deferred placements have landed.
 * Returns the value *target held before.
 */
uint64_t sw_place_atomic(const struct sw_place_hint *hint, uint64_t *target, bool cas,
			 uint64_t compare, uint64_t swap_add);

/*
 * An 8-byte atomic store of `value` (its bytes as they came, in memory
 * order) at `target` (8-byte aligned): one aligned 64-bit store, so a
 * reader sees all of the old or all of the new value, made after this
 * thread's deferred placements have landed (the RDMA WRITEs before it),
 * then persisted as `hint` asks. For RDMA ATOMIC WRITE.
 */
void sw_place_store64(const struct sw_place_hint *hint, uint64_t *target, uint64_t value);

/*
 * The responder's part of an RDMA FLUSH of [dst, dst + len): wait until
 * every placement this thread deferred has landed (the WRITEs before the
 * FLUSH, also those a pinned worker is still copying), then a full
 * memory fence (global visibility); with `persistent`, also write back
 * the range's cache lines and fence when `hint` is of type PM (the
 * persistence domain of an MR whose DMA handle says PM). Returns when
 * all of that is done.
 */
void sw_place_flush(const struct sw_place_hint *hint, void *dst, size_t len, bool persistent);

/*
 * Take / drop a reference on the worker pinned to `cpu`, starting it on
 * the first reference and joining it on the last (by then nothing is
 * queued: an MR with a queued copy holds its handle). A DMA handle with
 * a CPU id holds one reference for its lifetime. 0 or -errno.
 */
int sw_place_worker_get(uint32_t cpu);
void sw_place_worker_put(uint32_t cpu);

/*
 * At unload or exit (ctrl/unload.c): end every worker thread of this
 * process and wait for it, once it has run what was queued. The workers
 * stay allocated (DMA handles still refer to them); a placement on one
 * runs in the calling thread, and the last reference's put frees it
 * without a second join.
 */
void sw_place_quiesce(void);

#endif
