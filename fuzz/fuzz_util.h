/* SPDX-License-Identifier: MIT */
/*
 * fuzz_util.h - header-only helpers of the fuzz targets: assertions that
 * libFuzzer records as crashes, a byte reader over the input, the
 * device context (opened once per process, responses never leave it),
 * and buffers between guard pages with canary bytes around.
 */
#ifndef SV_FUZZ_UTIL_H
#define SV_FUZZ_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "sw/queue.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Abort with a message: libFuzzer keeps the input as a crash. */
#define FUZZ_ASSERT(c)                                                                             \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #c);   \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* Setup that cannot fail in a working environment: stop the whole run. */
#define FUZZ_REQUIRE(c)                                                                            \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "%s:%d: setup failed: %s (errno %d)\n", __FILE__,           \
				__LINE__, #c, errno);                                              \
			exit(2);                                                                   \
		}                                                                                  \
	} while (0)

/* Consume the input front to back; past its end every read gives zeros. */
struct fz_in {
	const uint8_t *p;
	size_t n;
};

static inline uint8_t fz_u8(struct fz_in *in)
{
	uint8_t v = 0;

	if (in->n) {
		v = *in->p++;
		in->n--;
	}
	return v;
}

static inline uint16_t fz_u16(struct fz_in *in)
{
	return (uint16_t)(fz_u8(in) << 8 | fz_u8(in));
}

static inline uint32_t fz_u32(struct fz_in *in)
{
	return (uint32_t)fz_u16(in) << 16 | fz_u16(in);
}

static inline uint64_t fz_u64(struct fz_in *in)
{
	return (uint64_t)fz_u32(in) << 32 | fz_u32(in);
}

/*
 * The first device, opened once. Everything the device sends is dropped
 * by its own fault injection (SOFTVERBS_FAULT=drop=1), so a run neither
 * disturbs other processes nor depends on what comes back; the async
 * event fd is made non-blocking for fz_drain_async().
 */
static inline struct ibv_context *fz_open_device(void)
{
	static struct ibv_context *ctx;
	struct ibv_device **list;
	int n, fl;

	if (ctx)
		return ctx;
	setenv("SOFTVERBS_FAULT", "drop=1,side=tx", 1);
	list = ibv_get_device_list(&n);
	FUZZ_REQUIRE(list && n > 0);
	ctx = ibv_open_device(list[0]);
	FUZZ_REQUIRE(ctx);
	ibv_free_device_list(list);
	fl = fcntl(ctx->async_fd, F_GETFL);
	FUZZ_REQUIRE(fl >= 0 && fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	return ctx;
}

/* Acknowledge every pending async event. */
static inline void fz_drain_async(struct ibv_context *ctx)
{
	struct ibv_async_event ev;

	while (ibv_get_async_event(ctx, &ev) == 0)
		ibv_ack_async_event(&ev);
}

/*
 * Take every completion off `cq`; returns how many. Polls only while the
 * ring holds some: an empty poll yields the CPU (queue/cq.c), which costs
 * a whole time slice on a busy machine.
 */
static inline int fz_drain_cq(struct ibv_cq *cq)
{
	struct sw_cq *c = sw_cq(cq);
	struct ibv_wc wc[16];
	int n, total = 0;

	while (__atomic_load_n(&c->ring.prod, __ATOMIC_ACQUIRE) != c->ring.cons) {
		n = ibv_poll_cq(cq, 16, wc);
		FUZZ_ASSERT(n >= 0);
		total += n;
	}
	return total;
}

enum { FZ_PAGE = 4096, FZ_CANARY = 64, FZ_CANARY_BYTE = 0xa5 };

/*
 * A buffer of `len` bytes for an MR. guard: the buffer is whole pages
 * (len a multiple of FZ_PAGE) with an inaccessible page on each side, so
 * any access beyond it faults. Otherwise FZ_CANARY canary bytes sit on
 * each side inside the mapping, checked by fz_buf_intact().
 */
struct fz_buf {
	uint8_t *map;
	size_t map_len;
	uint8_t *p;
	size_t len;
	bool guard;
};

static inline void fz_buf_alloc(struct fz_buf *b, size_t len, bool guard, uint8_t fill)
{
	size_t inner = guard ? len : (len + 2 * FZ_CANARY + FZ_PAGE - 1) / FZ_PAGE * FZ_PAGE;

	b->map_len = inner + 2 * FZ_PAGE;
	b->map = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	FUZZ_REQUIRE(b->map != MAP_FAILED);
	FUZZ_REQUIRE(mprotect(b->map, FZ_PAGE, PROT_NONE) == 0);
	FUZZ_REQUIRE(mprotect(b->map + FZ_PAGE + inner, FZ_PAGE, PROT_NONE) == 0);
	memset(b->map + FZ_PAGE, FZ_CANARY_BYTE, inner);
	b->p = b->map + FZ_PAGE + (guard ? 0 : FZ_CANARY);
	b->len = len;
	b->guard = guard;
	memset(b->p, fill, len);
}

/* True if nothing was written next to the buffer (canaries intact). */
static inline bool fz_buf_intact(const struct fz_buf *b)
{
	const uint8_t *lo = b->map + FZ_PAGE, *hi = b->p + b->len;
	const uint8_t *end = b->map + b->map_len - FZ_PAGE;

	if (b->guard)
		return true;
	for (; lo < b->p; lo++)
		if (*lo != FZ_CANARY_BYTE)
			return false;
	for (; hi < end; hi++)
		if (*hi != FZ_CANARY_BYTE)
			return false;
	return true;
}

/* True if every byte of the buffer is still `fill`. */
static inline bool fz_buf_is(const struct fz_buf *b, uint8_t fill)
{
	for (size_t i = 0; i < b->len; i++)
		if (b->p[i] != fill)
			return false;
	return true;
}

#endif
