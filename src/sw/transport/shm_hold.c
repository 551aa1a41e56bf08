/* SPDX-License-Identifier: MIT */
/*
 * shm_hold.c - memory regions an outgoing same-host link must keep until
 * its consumer has read them (single copy, docs/single-copy.md).
 *
 * A SEND or WRITE packet by reference names bytes of the requester's
 * MRs that the responder's progress thread pulls later. ibv_dereg_mr()
 * of such an MR must not return while that can still happen, so the link
 * keeps a reference on it until the consumer's `done` index (which it
 * advances after each receive batch, once the batch's pulls landed)
 * passes the record. The references also go when the link closes, and
 * after SHM_HOLD_NS at the latest, so that a consumer that stops reading
 * (stopped, or hostile: it runs as our user) cannot hold a
 * deregistration forever; it then reads freed memory of its own user at
 * worst.
 *
 * A READ request by reference names memory the consumer *writes* (it
 * answers the READ by storing the bytes itself): there, reading freed
 * memory at worst would be writing it. So a sink's hold that times out
 * first tells the consumer (hdr->expired), and goes only if the consumer
 * is not writing for a record at or before it (hdr->pushing); a
 * consumer that sees the mark answers with bytes instead (shm.c,
 * sw_shm_push_begin).
 *
 * Under the link's lock (shm.c).
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "sw/transport/shm_format.h"
#include "sw/transport/shm_hold.h"
#include "sw/transport/transport_priv.h"

/* Contract: see shm_hold.h. */
int shm_hold_add(struct shm_holds *h, uint64_t pos, struct sw_mr *mr, bool sink, uint64_t now)
{
	if (h->n && h->a[h->n - 1].mr == mr) { /* the same MR again: keep it longer */
		h->a[h->n - 1].pos = pos;
		h->a[h->n - 1].at = now;
		h->a[h->n - 1].sink |= sink;
		return 0;
	}
	if (h->n == h->cap) {
		uint32_t cap = h->cap ? 2 * h->cap : 64;
		struct shm_hold *a = realloc(h->a, cap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		h->a = a;
		h->cap = cap;
	}
	sw_mr_get(mr);
	h->a[h->n++] = (struct shm_hold){.pos = pos, .mr = mr, .at = now, .sink = sink};
	return 0;
}

/*
 * May sink hold `a`, too old, go? Tell the consumer; yes unless it is
 * writing for it, and then only after another SHM_HOLD_NS: a write is one
 * system call, and a consumer still at it a second later is stopped
 * (SIGSTOP, a debugger). Most likely it stopped right after the call
 * returned, before it could clear `pushing` (a stop takes effect on the
 * way out of a system call, never inside the copy); waiting for it would
 * hang deregistration as long as it stays stopped.
 */
static bool sink_expires(struct shm_hdr *hdr, const struct shm_hold *a, uint64_t now)
{
	uint64_t p;

	if (atomic_load(&hdr->expired) < a->pos)
		atomic_store(&hdr->expired, a->pos); /* only the producer stores it */
	p = atomic_load(&hdr->pushing);
	return !p || p > a->pos || now - a->at >= 2 * SHM_HOLD_NS;
}

/* Contract: see shm_hold.h. */
void shm_hold_release(struct shm_holds *h, struct shm_hdr *hdr, uint64_t now)
{
	uint64_t done = atomic_load_explicit(&hdr->done, memory_order_acquire);
	uint32_t i = 0, k;

	/*
	 * In order of position: the ones read, and the ones too old (`now`
	 * may be older than a hold another thread took meanwhile: not old).
	 */
	while (i < h->n &&
	       (done >= h->a[i].pos || (now > h->a[i].at && now - h->a[i].at >= SHM_HOLD_NS &&
					(!h->a[i].sink || sink_expires(hdr, &h->a[i], now)))))
		sw_mr_put(h->a[i++].mr);
	if (!i)
		return;
	for (k = 0; i < h->n; k++, i++)
		h->a[k] = h->a[i];
	h->n = k;
}

/* Contract: see shm_hold.h. */
void shm_hold_clear(struct shm_holds *h)
{
	for (uint32_t i = 0; i < h->n; i++)
		sw_mr_put(h->a[i].mr);
	free(h->a);
	*h = (struct shm_holds){0};
}
