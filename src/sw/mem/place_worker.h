/* SPDX-License-Identifier: MIT */
/*
 * place_worker.h - what the two halves of CPU_ID placement share: the
 * job ring of a pinned worker (place_worker.c runs the workers,
 * place_queue.c queues jobs and waits for them). See place_worker.c for
 * the design.
 */
#ifndef SV_SW_MEM_PLACE_WORKER_H
#define SV_SW_MEM_PLACE_WORKER_H

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sw/mem/place.h"

enum {
	SW_PLACE_RING = 512, /* jobs queued per worker at most: two fences' worth */
	SW_PLACE_SPINS = 256, /* pause loops before yielding or sleeping */
};

/* One queued copy. */
struct sw_place_job {
	atomic_size_t seq; /* == pos: free for position pos; pos + 1: its job published */
	struct sw_place_hint hint; /* a copy: the MR may go once `done` ran */
	uint8_t *dst;
	const uint8_t *src;
	size_t len;
	void (*done)(void *);
	void *arg;
	atomic_uint *pending; /* the producer's count (place_queue.c), down once placed */
	bool local; /* queued from the worker's own CPU */
};

/*
 * A worker: one per CPU named by a DMA handle, never freed once made,
 * so that a producer's pointer to it stays valid (its thread is joined
 * with the last reference and started again with the next).
 */
struct sw_place_worker {
	_Alignas(64) atomic_size_t tail; /* next position a producer takes */
	atomic_uint entering; /* producers between their stop check and publishing */
	_Alignas(64) atomic_uint kick; /* futex word: bumped to wake the worker */
	atomic_bool sleeping;
	atomic_bool stop; /* the thread ends (or ended): placements run in the caller */
	bool last_local; /* the job it ran last was queued from its CPU (worker only) */
	bool running; /* its thread exists and is not joined; workers_lock */
	unsigned int refs; /* workers_lock */
	uint32_t cpu;
	pthread_t thread;
	struct sw_place_job ring[SW_PLACE_RING];
};

static inline void sw_futex_wait(atomic_uint *word, unsigned int val)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static inline void sw_futex_wake(atomic_uint *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void sw_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* The worker of `cpu` while a DMA handle holds it, else NULL (place_worker.c). */
struct sw_place_worker *sw_place_worker_of(uint32_t cpu);

/* Wake `w` from its futex sleep, or from the next one it starts (place_queue.c). */
void sw_place_worker_wake(struct sw_place_worker *w);

/* The worker finished job `j`: count it down for its producer (place_queue.c). */
void sw_place_job_done(struct sw_place_job *j);

#endif
