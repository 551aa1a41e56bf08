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
 *                      placement counts as done, so before any ACK or
 *                      CQE.
 *   CPU_ID             the copy runs on a worker thread pinned to that
 *                      CPU, so the lines end up in that CPU's cache. The
 *                      receive path does not wait for it per packet: it
 *                      queues the copy (sw_place_defer) and goes on, and
 *                      waits for all it queued (sw_place_fence) only
 *                      before anything that shows or reads the bytes: an
 *                      ACK, a CQE, a READ response, an atomic, and the
 *                      reuse of the receive buffers the copies read from
 *                      (place_worker.c, place_queue.c).
 *
 * In every mode the last byte is stored after all the bytes before it
 * are visible, so a reader polling the last byte of a WRITE sees the
 * whole message; a thread's deferred copies land in the order it made
 * them, so this holds across the packets of a WRITE too.
 */
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#define SW_HAVE_SSE2 1
#else
#define SW_HAVE_SSE2 0
#endif

#include "sw/mem/place.h"

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

/* Contract: see place.h. */
void sw_place_here(const struct sw_place_hint *hint, uint8_t *dst, const uint8_t *src, size_t len)
{
	if (!len)
		return;
	SW_DMA_BEGIN();
	if (hint && hint->ph == 1)
		copy_body_nt(dst, src, len - 1);
	else
		memcpy(dst, src, len - 1);
	atomic_thread_fence(memory_order_release);
	*(volatile uint8_t *)(dst + len - 1) = src[len - 1];
	SW_DMA_END();
	if (hint && hint->mem_type == IBV_TPH_MEM_TYPE_PM)
		flush_lines(dst, len);
}

/* Contract: see place.h. */
void sw_fetch(void *dst, const void *src, size_t len)
{
	SW_DMA_BEGIN();
	memcpy(dst, src, len);
	SW_DMA_END();
}

/*
 * Make bytes already stored at [dst, +len) durable as `hint` asks: for
 * TPH_MEM_TYPE_PM write their cache lines back and fence; else nothing.
 * (Atomics update memory in place and use this afterwards.)
 */
static void place_persist(const struct sw_place_hint *hint, void *dst, size_t len)
{
	if (hint && hint->mem_type == IBV_TPH_MEM_TYPE_PM && len)
		flush_lines(dst, len);
}

/* Contract: see place.h. */
uint64_t sw_place_atomic(const struct sw_place_hint *hint, uint64_t *target, bool cas,
			 uint64_t compare, uint64_t swap_add)
{
	uint64_t orig;

	sw_place_fence(); /* the word may be one a deferred WRITE is still placing */
	SW_DMA_BEGIN();
	if (cas) {
		orig = compare;
		__atomic_compare_exchange_n(target, &orig, swap_add, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		orig = __atomic_fetch_add(target, swap_add, __ATOMIC_SEQ_CST);
	}
	SW_DMA_END();
	place_persist(hint, target, sizeof(*target));
	return orig;
}

/* Contract: see place.h. */
void sw_place_store64(const struct sw_place_hint *hint, uint64_t *target, uint64_t value)
{
	sw_place_fence(); /* after the WRITEs before it, which may still be on a worker */
	SW_DMA_BEGIN();
	__atomic_store_n(target, value, __ATOMIC_SEQ_CST);
	SW_DMA_END();
	place_persist(hint, target, sizeof(*target));
}

/* Contract: see place.h. */
void sw_place_flush(const struct sw_place_hint *hint, void *dst, size_t len, bool persistent)
{
	sw_place_fence();
	atomic_thread_fence(memory_order_seq_cst);
	if (persistent)
		place_persist(hint, dst, len);
}

/* Contract: see place.h. */
int sw_place(const struct sw_place_hint *hint, void *dst, const void *src, size_t len)
{
	int ret;

	if (hint && hint->has_cpu) {
		ret = sw_place_defer(hint, dst, src, len, NULL, NULL);
		if (!ret)
			sw_place_fence();
		return ret;
	}
	sw_place_fence(); /* after what this thread queued before */
	sw_place_here(hint, dst, src, len);
	return 0;
}
