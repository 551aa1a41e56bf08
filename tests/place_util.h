/* SPDX-License-Identifier: MIT */
/*
 * place_util.h - header-only helpers of the placement tests (unit_place,
 * unit_dmah_place, unit_dmah_stream, api_dmah): registration with a DMA
 * handle, and a reader thread that checks the last-byte rule. Include
 * harness.h first.
 */
#ifndef SV_TESTS_PLACE_UTIL_H
#define SV_TESTS_PLACE_UTIL_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <infiniband/verbs.h>

/* ibv_reg_mr_ex of [addr, +len) with `access` and handle `d` (NULL: none); errno cleared first. */
static inline struct ibv_mr *pu_reg(struct ibv_pd *pd, void *addr, size_t len, int access,
				    struct ibv_dmah *d)
{
	struct ibv_mr_init_attr a;

	memset(&a, 0, sizeof(a));
	a.length = len;
	a.access = access;
	a.comp_mask = IBV_REG_MR_MASK_ADDR | (d ? IBV_REG_MR_MASK_DMAH : 0);
	a.addr = addr;
	a.dmah = d;
	errno = 0;
	return ibv_reg_mr_ex(pd, &a);
}

/*
 * A thread spinning on the last byte of buf[0, len): the writer fills the
 * whole buffer with the round number (1, 2, ...) after storing it in
 * `round`; once the last byte shows a new round, every byte before it
 * must show that round or a later one, else the round counts as torn.
 */
struct pu_reader {
	volatile uint8_t *buf;
	size_t len;
	atomic_int round, stop;
	size_t torn;
	pthread_t thread;
};

static inline void *pu_reader_main(void *arg)
{
	struct pu_reader *rd = arg;
	int seen = 0;

	while (!atomic_load(&rd->stop)) {
		int r = atomic_load(&rd->round);

		if (r == seen || rd->buf[rd->len - 1] != (uint8_t)r) {
			/*
			 * Yield between looks: under valgrind, which runs one
			 * thread at a time, a pure spin held the CPU for a whole
			 * time slice at every yield of the threads that place
			 * the bytes (unit_dmah_stream's memcheck run then took
			 * 200-360 s instead of 5-20 s, some runs and not others).
			 */
			sched_yield();
			continue;
		}
		atomic_thread_fence(memory_order_acquire);
		/* the writer may already be on a later round: only older is torn */
		for (size_t i = 0; i < rd->len - 1; i++)
			if (rd->buf[i] < (uint8_t)r) {
				rd->torn++;
				break;
			}
		seen = r;
	}
	return NULL;
}

/* Start the reader on buf[0, len); 0 or pthread_create's error. */
static inline int pu_reader_start(struct pu_reader *rd, uint8_t *buf, size_t len)
{
	memset(rd, 0, sizeof(*rd));
	rd->buf = buf;
	rd->len = len;
	return pthread_create(&rd->thread, NULL, pu_reader_main, rd);
}

/* Stop and join the reader; the number of torn rounds it saw. */
static inline size_t pu_reader_stop(struct pu_reader *rd)
{
	atomic_store(&rd->stop, 1);
	pthread_join(rd->thread, NULL);
	return rd->torn;
}

#endif
