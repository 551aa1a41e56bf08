/* SPDX-License-Identifier: MIT */
/*
 * place_pull.c - placement of bytes that stay in the sending process
 * until they land: the same-host link's single copy (docs/single-copy.md).
 *
 * A peer on the same-host link may send a SEND or WRITE packet "by
 * reference": the packet names the addresses of its payload in the
 * sender's memory instead of carrying it. The receiving thread queues
 * the copy here (sw_place_pull) and goes on; the queued copies land with
 * one process_vm_readv(2) per run of the same sender, the kernel copying
 * straight from the sender's pages into the MR, when:
 *
 *   - the queue is full, or the next copy comes from another process;
 *   - any other placement is made (sw_place, sw_place_defer, atomics,
 *     FLUSH): a thread's placements land in the order it made them;
 *   - sw_place_fence(), which the transport calls before anything that
 *     shows or reads placed bytes (an ACK, a completion, a READ
 *     response): so nothing is acknowledged or completed before its
 *     bytes are in place, and the sender's buffer is not released (its
 *     WQE completes on that ACK) while the copy may still read it.
 *
 * Copies that continue each other in both processes merge, so a whole
 * WRITE that came in one receive batch is one segment of one call. The
 * last byte of each segment is read into a side buffer and stored after
 * the call returned, with release order: a reader polling the last byte
 * of a WRITE sees the rest first, as sw_place() promises.
 *
 * Each queued copy has an owner callback, run once when it has landed or
 * failed (-errno: the sender's memory could not be read, e.g. it was
 * unmapped, or the kernel refused; whatever part landed stays). A copy
 * that merges into the one before it is released at once (err 0): the
 * one before carries the same owner.
 *
 * Copies into an MR with a placement hint are read into a bounce buffer
 * and placed through sw_place() at once: the hints are about how the
 * stores are made.
 *
 * Per thread; no locks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>

#include "sw/mem/place.h"

enum {
	PULL_MAX = 64, /* queued segments: remote iovecs of one call */
	BOUNCE_BYTES = 4096, /* on the stack: a packet's payload at most */
};

struct pull_seg {
	uint8_t *dst;
	uint64_t src;
	size_t len;
	struct sw_pull_owner own;
};

static _Thread_local struct {
	pid_t pid;
	unsigned int n;
	struct pull_seg seg[PULL_MAX];
	uint8_t tail[PULL_MAX];
} pq;

/* Contract: see place.h. */
bool sw_place_pull_pending(void)
{
	return pq.n != 0;
}

static void owner_done(const struct sw_pull_owner *o, int err)
{
	if (o->done)
		o->done(o->a, o->b, err);
}

/* Contract: see place.h. */
void sw_place_pull_flush(void)
{
	struct iovec loc[2 * PULL_MAX], rem[PULL_MAX];
	unsigned int n = pq.n, i, nl = 0;
	size_t total = 0, left;
	ssize_t got;
	int err = 0;

	if (!n)
		return;
	pq.n = 0;
	for (i = 0; i < n; i++) {
		struct pull_seg *s = &pq.seg[i];

		rem[i] = (struct iovec){.iov_base = (void *)(uintptr_t)s->src, .iov_len = s->len};
		if (s->len > 1)
			loc[nl++] = (struct iovec){.iov_base = s->dst, .iov_len = s->len - 1};
		loc[nl++] = (struct iovec){.iov_base = &pq.tail[i], .iov_len = 1};
		total += s->len;
	}
	got = process_vm_readv(pq.pid, loc, nl, rem, n, 0);
	if (got < 0) {
		err = -errno;
		got = 0;
	}
	atomic_fetch_add_explicit(&sw_place_stats.pull_calls, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sw_place_stats.pull_bytes, (size_t)got, memory_order_relaxed);
	left = (size_t)got;
	for (i = 0; i < n; i++) {
		struct pull_seg *s = &pq.seg[i];

		if (left >= s->len) {
			left -= s->len;
			/* the last byte after the rest: see the header */
			SW_DMA_BEGIN();
			__atomic_store_n(s->dst + s->len - 1, pq.tail[i], __ATOMIC_RELEASE);
			SW_DMA_END();
			owner_done(&s->own, 0);
		} else {
			left = 0;
			owner_done(&s->own, err ? err : -EFAULT);
		}
	}
	if (got != (ssize_t)total)
		atomic_fetch_add_explicit(&sw_place_stats.pull_errors, 1, memory_order_relaxed);
}

/* Read through the bounce buffer and place with `hint`, now. */
static int pull_bounced(const struct sw_place_hint *hint, uint8_t *dst, pid_t pid, uint64_t src,
			size_t len)
{
	uint8_t bounce[BOUNCE_BYTES];

	while (len) {
		size_t take = len < BOUNCE_BYTES ? len : BOUNCE_BYTES;
		struct iovec l = {.iov_base = bounce, .iov_len = take};
		struct iovec r = {.iov_base = (void *)(uintptr_t)src, .iov_len = take};
		ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);
		int ret;

		atomic_fetch_add_explicit(&sw_place_stats.pull_calls, 1, memory_order_relaxed);
		if (got != (ssize_t)take) {
			atomic_fetch_add_explicit(&sw_place_stats.pull_errors, 1,
						  memory_order_relaxed);
			return got < 0 ? -errno : -EFAULT;
		}
		atomic_fetch_add_explicit(&sw_place_stats.pull_bytes, take, memory_order_relaxed);
		ret = sw_place(hint, dst, bounce, take);
		if (ret)
			return ret;
		dst += take;
		src += take;
		len -= take;
	}
	return 0;
}

/* Contract: see place.h. */
int sw_place_pull(const struct sw_place_hint *hint, void *dst, pid_t pid, uint64_t src, size_t len,
		  const struct sw_pull_owner *own)
{
	struct pull_seg *last = pq.n ? &pq.seg[pq.n - 1] : NULL;
	int ret;

	if (!len) {
		owner_done(own, 0);
		return 0;
	}
	if (hint) {
		sw_place_pull_flush();
		ret = pull_bounced(hint, dst, pid, src, len);
		owner_done(own, ret);
		return 0;
	}
	if (last && pq.pid == pid && last->dst + last->len == (uint8_t *)dst &&
	    last->src + last->len == src && last->own.done == own->done && last->own.a == own->a &&
	    last->own.b == own->b) {
		last->len += len;
		owner_done(own, 0); /* the segment before holds the same owner */
		return 0;
	}
	if (pq.n == PULL_MAX || (pq.n && pq.pid != pid))
		sw_place_pull_flush();
	pq.pid = pid;
	pq.seg[pq.n++] = (struct pull_seg){.dst = dst, .src = src, .len = len, .own = *own};
	return 0;
}
