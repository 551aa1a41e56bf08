/* SPDX-License-Identifier: MIT */
/*
 * place.c - placement: how incoming bytes land in a memory region.
 *
 * Real TPH hints steer a NIC's writes into a CPU's cache and tell the
 * root complex how the data will be used. The software device is the
 * CPU, so it turns each hint of the MR's DMA handle into the nearest
 * real effect on its own stores:
 *
 *   ph 1 (requester)   non-temporal stores: the data bypasses this CPU's
 *                      caches, as data meant for another agent should;
 *                      ph 0, 2 and 3 use normal (cached) stores.
 *   TPH_MEM_TYPE PM    every touched cache line is written back
 *                      (clflush) and a store fence follows, before the
 *                      placement returns, so before any ACK or CQE.
 *   CPU_ID             the copy runs on a worker thread pinned to that
 *                      CPU, so the lines end up in that CPU's cache.
 *
 * In every mode the last byte is stored after all the bytes before it
 * are visible, so a reader polling the last byte of a WRITE sees the
 * whole message.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#define SW_HAVE_SSE2 1
#else
#define SW_HAVE_SSE2 0
#endif

#include "sw/place.h"

struct sw_place_stats sw_place_stats;

enum {
	CACHE_LINE = 64
};

/* Copy all but the last byte; the caller stores the last one. */
static void copy_body_nt(uint8_t *dst, const uint8_t *src, size_t len)
{
#if SW_HAVE_SSE2
	size_t head = (16 - ((uintptr_t)dst & 15)) & 15;

	if (head > len)
		head = len;
	memcpy(dst, src, head);
	dst += head;
	src += head;
	len -= head;
	atomic_fetch_add_explicit(&sw_place_stats.nt_bytes, len & ~(size_t)15,
				  memory_order_relaxed);
	while (len >= 16) {
		_mm_stream_si128((__m128i *)(void *)dst, _mm_loadu_si128((const __m128i *)src));
		dst += 16;
		src += 16;
		len -= 16;
	}
	memcpy(dst, src, len);
	_mm_sfence(); /* streaming stores are weakly ordered */
#else
	memcpy(dst, src, len);
#endif
}

static void flush_lines(uint8_t *dst, size_t len)
{
	uintptr_t p = (uintptr_t)dst & ~(uintptr_t)(CACHE_LINE - 1);
	uintptr_t end = (uintptr_t)dst + len;
	size_t n = 0;

	for (; p < end; p += CACHE_LINE, n++) {
#if SW_HAVE_SSE2
		_mm_clflush((const void *)p);
#endif
	}
#if SW_HAVE_SSE2
	_mm_sfence();
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
	atomic_fetch_add_explicit(&sw_place_stats.flushed_lines, n, memory_order_relaxed);
}

/*
 * Writes into application memory race with the application's reads by
 * design, as DMA does (tests/tsan.supp says why). Under ThreadSanitizer
 * the placement is hidden from the race detector here, since the writer's
 * stack of a long-ago placement often cannot be restored for a
 * suppression to match.
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
#define DMA_BEGIN() __tsan_ignore_thread_begin()
#define DMA_END() __tsan_ignore_thread_end()
#else
#define DMA_BEGIN() ((void)0)
#define DMA_END() ((void)0)
#endif

/* The copy itself, on whichever thread runs it. */
static void place_here(const struct sw_place_hint *hint, uint8_t *dst, const uint8_t *src,
		       size_t len)
{
	if (!len)
		return;
	DMA_BEGIN();
	if (hint && hint->ph == 1)
		copy_body_nt(dst, src, len - 1);
	else
		memcpy(dst, src, len - 1);
	atomic_thread_fence(memory_order_release);
	*(volatile uint8_t *)(dst + len - 1) = src[len - 1];
	DMA_END();
	if (hint && hint->mem_type == IBV_TPH_MEM_TYPE_PM)
		flush_lines(dst, len);
}

/* Contract: see place.h. */
void sw_place_persist(const struct sw_place_hint *hint, void *dst, size_t len)
{
	if (hint && hint->mem_type == IBV_TPH_MEM_TYPE_PM && len)
		flush_lines(dst, len);
}

/* Contract: see place.h. */
uint64_t sw_place_atomic(const struct sw_place_hint *hint, uint64_t *target, bool cas,
			 uint64_t compare, uint64_t swap_add)
{
	uint64_t orig;

	DMA_BEGIN();
	if (cas) {
		orig = compare;
		__atomic_compare_exchange_n(target, &orig, swap_add, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		orig = __atomic_fetch_add(target, swap_add, __ATOMIC_SEQ_CST);
	}
	DMA_END();
	sw_place_persist(hint, target, sizeof(*target));
	return orig;
}

/* ---- pinned workers, one per CPU in use, refcounted by DMA handles ---- */

struct job {
	const struct sw_place_hint *hint;
	uint8_t *dst;
	const uint8_t *src;
	size_t len;
	bool done;
	struct job *next;
};

struct worker {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake, done;
	struct job *head, *tail;
	unsigned int refs;
	bool stop;
	int pin_err;
};

static pthread_mutex_t workers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct worker **workers;
static uint32_t nworkers;
static pid_t workers_pid; /* the process whose threads they are (a fork child has none) */

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct job *j;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->head && !w->stop)
			pthread_cond_wait(&w->wake, &w->lock);
		if (!w->head)
			break;
		j = w->head;
		w->head = j->next;
		if (!w->head)
			w->tail = NULL;
		pthread_mutex_unlock(&w->lock);
		place_here(j->hint, j->dst, j->src, j->len);
		atomic_store_explicit(&sw_place_stats.last_cpu, sched_getcpu(),
				      memory_order_relaxed);
		atomic_fetch_add_explicit(&sw_place_stats.pinned_jobs, 1, memory_order_relaxed);
		pthread_mutex_lock(&w->lock);
		j->done = true;
		pthread_cond_broadcast(&w->done);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static int worker_start(struct worker *w, uint32_t cpu)
{
	pthread_attr_t attr;
	cpu_set_t *set;
	size_t size = CPU_ALLOC_SIZE(cpu + 1);
	int ret;

	set = CPU_ALLOC(cpu + 1);
	if (!set)
		return -ENOMEM;
	CPU_ZERO_S(size, set);
	CPU_SET_S(cpu, size, set);
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->wake, NULL);
	pthread_cond_init(&w->done, NULL);
	pthread_attr_init(&attr);
	ret = pthread_attr_setaffinity_np(&attr, size, set);
	if (!ret)
		ret = pthread_create(&w->thread, &attr, worker_main, w);
	pthread_attr_destroy(&attr);
	CPU_FREE(set);
	if (ret) {
		pthread_cond_destroy(&w->done);
		pthread_cond_destroy(&w->wake);
		pthread_mutex_destroy(&w->lock);
		return -ret;
	}
	return 0;
}

/* Contract: see place.h. */
int sw_place_worker_get(uint32_t cpu)
{
	struct worker *w;
	int ret = 0;

	pthread_mutex_lock(&workers_lock);
	if (cpu >= nworkers) {
		struct worker **n = realloc(workers, (cpu + 1) * sizeof(*n));

		if (!n) {
			ret = -ENOMEM;
			goto out;
		}
		memset(n + nworkers, 0, (cpu + 1 - nworkers) * sizeof(*n));
		workers = n;
		nworkers = cpu + 1;
	}
	w = workers[cpu];
	if (!w) {
		w = calloc(1, sizeof(*w));
		if (!w) {
			ret = -ENOMEM;
			goto out;
		}
		ret = worker_start(w, cpu);
		if (ret) {
			free(w);
			goto out;
		}
		workers[cpu] = w;
		workers_pid = getpid();
	}
	w->refs++;
out:
	pthread_mutex_unlock(&workers_lock);
	return ret;
}

/* True while any worker slot is taken. Caller holds workers_lock. */
static bool nworkers_in_use(void)
{
	uint32_t i;

	for (i = 0; i < nworkers; i++)
		if (workers[i])
			return true;
	return false;
}

/* Contract: see place.h. */
void sw_place_worker_put(uint32_t cpu)
{
	struct worker *w;

	pthread_mutex_lock(&workers_lock);
	w = cpu < nworkers ? workers[cpu] : NULL;
	if (w && --w->refs == 0) {
		bool ended;

		workers[cpu] = NULL;
		pthread_mutex_lock(&w->lock);
		ended = w->stop; /* joined by sw_place_quiesce() */
		w->stop = true;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&w->lock);
		if (!ended && workers_pid == getpid())
			pthread_join(w->thread, NULL);
		pthread_cond_destroy(&w->done);
		pthread_cond_destroy(&w->wake);
		pthread_mutex_destroy(&w->lock);
		free(w);
	}
	if (w && !nworkers_in_use()) {
		free(workers);
		workers = NULL;
		nworkers = 0;
	}
	pthread_mutex_unlock(&workers_lock);
}

/* Contract: see place.h. */
void sw_place_quiesce(void)
{
	uint32_t i;

	pthread_mutex_lock(&workers_lock);
	for (i = 0; i < nworkers && workers_pid == getpid(); i++) {
		struct worker *w = workers[i];

		if (!w)
			continue;
		pthread_mutex_lock(&w->lock);
		if (w->stop) {
			pthread_mutex_unlock(&w->lock);
			continue;
		}
		w->stop = true;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
	}
	pthread_mutex_unlock(&workers_lock);
}

/* Run one placement on the worker of `cpu` and wait for it. */
static int place_pinned(const struct sw_place_hint *hint, uint8_t *dst, const uint8_t *src,
			size_t len)
{
	struct job j = {.hint = hint, .dst = dst, .src = src, .len = len};
	struct worker *w;

	pthread_mutex_lock(&workers_lock);
	w = hint->cpu_id < nworkers ? workers[hint->cpu_id] : NULL;
	pthread_mutex_unlock(&workers_lock);
	if (!w)
		return -ENODEV; /* the handle took no worker reference */
	pthread_mutex_lock(&w->lock);
	if (w->stop) {
		/* its thread ended at unload (sw_place_quiesce): place here */
		pthread_mutex_unlock(&w->lock);
		place_here(hint, dst, src, len);
		return 0;
	}
	if (w->tail)
		w->tail->next = &j;
	else
		w->head = &j;
	w->tail = &j;
	pthread_cond_signal(&w->wake);
	while (!j.done)
		pthread_cond_wait(&w->done, &w->lock);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

/* Contract: see place.h. */
int sw_place(const struct sw_place_hint *hint, void *dst, const void *src, size_t len)
{
	if (hint && hint->has_cpu)
		return place_pinned(hint, dst, src, len);
	place_here(hint, dst, src, len);
	return 0;
}
