/* SPDX-License-Identifier: MIT */
/*
 * shm_hold.h - MRs an outgoing same-host link keeps until its consumer
 * has read records that name them (shm_hold.c).
 */
#ifndef SV_SW_TRANSPORT_SHM_HOLD_H
#define SV_SW_TRANSPORT_SHM_HOLD_H

#include <stdint.h>

struct sw_mr;

#define SHM_HOLD_NS (1000ull * 1000 * 1000) /* a hold ends after 1 s at the latest */

struct shm_hold {
	uint64_t pos; /* the ring's head after the record */
	struct sw_mr *mr;
	uint64_t at; /* when it was taken */
};

struct shm_holds {
	struct shm_hold *a; /* by position */
	uint32_t n, cap;
};

/* Keep a reference on `mr` until the consumer's done reaches `pos`. 0 or -ENOMEM. */
int shm_hold_add(struct shm_holds *h, uint64_t pos, struct sw_mr *mr, uint64_t now);
/* Drop the holds the consumer has read past (`done`), and those older than SHM_HOLD_NS. */
void shm_hold_release(struct shm_holds *h, uint64_t done, uint64_t now);
/* Drop every hold and the array (the link closes). */
void shm_hold_clear(struct shm_holds *h);

#endif
