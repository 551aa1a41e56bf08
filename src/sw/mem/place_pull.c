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
 * of a WRITE sees the rest first, as sw_place() promises. A copy into
 * bytes a queued one also covers joins the same call: the kernel fills
 * the local iovecs in array order, so the later copy's bytes land after
 * the earlier one's and win, as later WRITEs to the same place must; and
 * a side-stored last byte that a later segment of the call covers is
 * not stored, since it would land over that segment's byte. (A stream
 * of WRITEs into one buffer, the usual benchmark and a common pattern,
 * was one system call per message while such a copy flushed the queue
 * first.)
 *
 * Each queued copy has an owner callback, run once when it has landed or
 * failed (-errno: the sender's memory could not be read, e.g. it was
 * unmapped, or the kernel refused; whatever part landed stays). A copy
 * that merges into the one before it is released at once (err 0): the
 * one before carries the same owner.
 *
 * Copies into an MR with a placement hint are read into a bounce buffer
 * and placed through sw_place() at once (the hints are about how the
 * stores are made), but for a CPU id: those are read into a buffer of
 * their own and queued on the pinned worker, which tells the owner.
 *
 * Per thread; no locks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
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
	bool overlap; /* some queued segments overlap: check the side-stored bytes */
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

/* Does a segment after `i` that landed (the first `landed` did) cover i's last byte? */
static bool tail_covered_later(unsigned int i, unsigned int landed)
{
	const uint8_t *p = pq.seg[i].dst + pq.seg[i].len - 1;

	for (unsigned int j = i + 1; j < landed; j++)
		if (pq.seg[j].dst <= p && p < pq.seg[j].dst + pq.seg[j].len)
			return true;
	return false;
}

/* Contract: see place.h. */
void sw_place_pull_flush(void)
{
	struct iovec loc[2 * PULL_MAX], rem[PULL_MAX];
	unsigned int n = pq.n, i, nl = 0, landed;
	size_t total = 0, left;
	ssize_t got;
	int err = 0;
	bool overlap = pq.overlap;

	if (!n)
		return;
	pq.n = 0;
	pq.overlap = false;
	for (i = 0; i < n; i++) {
		struct pull_seg *s = &pq.seg[i];

		rem[i] = (struct iovec){.iov_base = (void *)(uintptr_t)s->src, .iov_len = s->len};
		if (s->len > 1)
			loc[nl++] = (struct iovec){.iov_base = s->dst, .iov_len = s->len - 1};
		loc[nl++] = (struct iovec){.iov_base = &pq.tail[i], .iov_len = 1};
		total += s->len;
	}
	SW_DMA_BEGIN(); /* writes into application memory, as a placement's */
	got = process_vm_readv(pq.pid, loc, nl, rem, n, 0);
	SW_DMA_END();
	if (got < 0) {
		err = -errno;
		got = 0;
	}
	atomic_fetch_add_explicit(&sw_place_stats.pull_calls, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sw_place_stats.pull_bytes, (size_t)got, memory_order_relaxed);
	/* the call fills the segments in order: the first `landed` of them landed whole */
	left = (size_t)got;
	for (landed = 0; landed < n && left >= pq.seg[landed].len; landed++)
		left -= pq.seg[landed].len;
	for (i = 0; i < n; i++) {
		struct pull_seg *s = &pq.seg[i];

		if (i >= landed) {
			owner_done(&s->own, err ? err : -EFAULT);
			continue;
		}
		/* the last byte after the rest: see the header */
		if (!overlap || !tail_covered_later(i, landed)) {
			SW_DMA_BEGIN();
			__atomic_store_n(s->dst + s->len - 1, pq.tail[i], __ATOMIC_RELEASE);
			SW_DMA_END();
		}
		owner_done(&s->own, 0);
	}
	if (got != (ssize_t)total)
		atomic_fetch_add_explicit(&sw_place_stats.pull_errors, 1, memory_order_relaxed);
}

/* Read `len` bytes at `src` in `pid` into `to`: 0 or -errno, counted. */
static int pull_now(uint8_t *to, pid_t pid, uint64_t src, size_t len)
{
	struct iovec l = {.iov_base = to, .iov_len = len};
	struct iovec r = {.iov_base = (void *)(uintptr_t)src, .iov_len = len};
	ssize_t got;

	SW_DMA_BEGIN();
	got = process_vm_readv(pid, &l, 1, &r, 1, 0);
	SW_DMA_END();
	atomic_fetch_add_explicit(&sw_place_stats.pull_calls, 1, memory_order_relaxed);
	if (got != (ssize_t)len) {
		atomic_fetch_add_explicit(&sw_place_stats.pull_errors, 1, memory_order_relaxed);
		return got < 0 ? -errno : -EFAULT;
	}
	atomic_fetch_add_explicit(&sw_place_stats.pull_bytes, len, memory_order_relaxed);
	return 0;
}

/* A CPU_ID placement of pulled bytes: they wait in `data` for the pinned worker. */
struct pull_job {
	struct sw_pull_owner own;
	uint8_t data[];
};

static void pull_job_done(void *arg) /* on the worker, once the bytes landed */
{
	struct pull_job *j = arg;

	owner_done(&j->own, 0);
	free(j);
}

/*
 * With a CPU id: read into a buffer of the job's own and queue its
 * placement on the pinned worker without waiting (sw_place_defer), as
 * sw_place_mr does for bytes that came in a packet; the owner is told
 * on the worker, once they landed, so it holds the MR until then. A
 * fence per packet would cost a round trip to the worker each.
 * -ENOMEM: not queued, nothing told.
 */
static int pull_to_worker(const struct sw_place_hint *hint, uint8_t *dst, pid_t pid, uint64_t src,
			  size_t len, const struct sw_pull_owner *own)
{
	struct pull_job *j = malloc(sizeof(*j) + len);
	int ret;

	if (!j)
		return -ENOMEM;
	j->own = *own;
	ret = pull_now(j->data, pid, src, len);
	if (!ret)
		ret = sw_place_defer(hint, dst, j->data, len, pull_job_done, j);
	if (ret) {
		owner_done(own, ret);
		free(j);
	}
	return 0;
}

/* Read through the bounce buffer and place with `hint`, now. */
static int pull_bounced(const struct sw_place_hint *hint, uint8_t *dst, pid_t pid, uint64_t src,
			size_t len)
{
	uint8_t bounce[BOUNCE_BYTES];

	while (len) {
		size_t take = len < BOUNCE_BYTES ? len : BOUNCE_BYTES;
		int ret = pull_now(bounce, pid, src, take);

		if (!ret)
			ret = sw_place(hint, dst, bounce, take);
		if (ret)
			return ret;
		dst += take;
		src += take;
		len -= take;
	}
	return 0;
}

/* Does [dst, dst + len) overlap a queued segment? (See the header.) */
static bool overlaps_queued(const uint8_t *dst, size_t len)
{
	for (unsigned int i = 0; i < pq.n; i++)
		if (dst < pq.seg[i].dst + pq.seg[i].len && pq.seg[i].dst < dst + len)
			return true;
	return false;
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
		if (hint->has_cpu && !pull_to_worker(hint, dst, pid, src, len, own))
			return 0;
		ret = pull_bounced(hint, dst, pid, src, len);
		owner_done(own, ret);
		return 0;
	}
	if (overlaps_queued(dst, len)) {
		pq.overlap = true; /* the same call; the flush sorts out the side-stored bytes */
		last = NULL;
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
