/* SPDX-License-Identifier: MIT */
/*
 * shm_hold.h - MRs an outgoing same-host link keeps until its consumer
 * has read records that name them (shm_hold.c).
 */
#ifndef SV_SW_TRANSPORT_SHM_HOLD_H
#define SV_SW_TRANSPORT_SHM_HOLD_H

#include <stdbool.h>
#include <stdint.h>

struct sw_mr;

#define SHM_HOLD_NS (1000ull * 1000 * 1000) /* a hold ends after 1 s at the latest */

struct shm_hold {
	uint64_t pos; /* the ring's head after the record */
	struct sw_mr *mr;
	uint64_t at; /* when it was taken */
	bool sink; /* a READ request's: the consumer may write into it */
};

struct shm_holds {
	struct shm_hold *a; /* by position */
	uint32_t n, cap;
};

struct shm_hdr;

/*
 * Keep a reference on `mr` until the consumer's done reaches `pos`
 * (`sink`: the consumer may write into it). 0 or -ENOMEM.
 */
int shm_hold_add(struct shm_holds *h, uint64_t pos, struct sw_mr *mr, bool sink, uint64_t now);
/*
 * Drop the holds the consumer has read past (hdr->done), and those older
 * than SHM_HOLD_NS; a sink's only once the consumer is not writing for
 * it (hdr->pushing, shm_format.h), having told it (hdr->expired).
 */
void shm_hold_release(struct shm_holds *h, struct shm_hdr *hdr, uint64_t now);
/* Drop every hold and the array (the link closes). */
void shm_hold_clear(struct shm_holds *h);

#endif
