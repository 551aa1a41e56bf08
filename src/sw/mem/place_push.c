/* SPDX-License-Identifier: MIT */
/*
 * place_push.c - the responder's half of a READ by reference: the bytes
 * written straight into the requester's process (single copy,
 * docs/single-copy.md).
 *
 * A requester on the same-host link may send its READ request with the
 * addresses its responses would be copied to. The responder then writes
 * the bytes there itself, with one process_vm_writev(2) from its MR, and
 * answers with responses that carry no bytes. The call is made at once,
 * in the thread that handles the request, so the bytes are the MR's as
 * they were when the READ was executed, as a response's would be.
 *
 * The kernel applies to the write the same access rules as to the reads
 * of pulls (ptrace access to the requester), and the requester named
 * only memory it registered for local write and holds until the write is
 * done (transport/shm_hold.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>

#include "sw/mem/place.h"
#include "sw/wire.h"

/* Contract: see place.h. */
ssize_t sw_place_pushv(pid_t pid, const struct iovec *loc, uint32_t nloc, const struct iovec *rem,
		       uint32_t nrem)
{
	size_t len = 0;
	ssize_t put;

	for (uint32_t i = 0; i < nloc; i++)
		len += loc[i].iov_len;
	SW_DMA_BEGIN();
	put = process_vm_writev(pid, loc, nloc, rem, nrem, 0);
	SW_DMA_END();
	if (put < 0)
		put = -errno;
	atomic_fetch_add_explicit(&sw_place_stats.push_calls, 1, memory_order_relaxed);
	if (put != (ssize_t)len)
		atomic_fetch_add_explicit(&sw_place_stats.push_errors, 1, memory_order_relaxed);
	if (put > 0)
		atomic_fetch_add_explicit(&sw_place_stats.push_bytes, (size_t)put,
					  memory_order_relaxed);
	return put;
}

/* Contract: see place.h. */
int sw_place_push(pid_t pid, const void *src, size_t len, const uint8_t *pieces, uint32_t n)
{
	struct iovec l = {.iov_base = (void *)(uintptr_t)src, .iov_len = len};
	struct iovec r[SW_REF_PIECES];
	size_t total = 0;
	ssize_t put;

	if (!n || n > SW_REF_PIECES)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		struct sw_ref_piece pc;

		memcpy(&pc, pieces + i * sizeof(pc), sizeof(pc));
		r[i] = (struct iovec){.iov_base = (void *)(uintptr_t)pc.addr, .iov_len = pc.len};
		total += pc.len;
	}
	if (total != len)
		return -EINVAL;
	put = sw_place_pushv(pid, &l, 1, r, n);
	if (put != (ssize_t)len)
		return put < 0 ? (int)put : -EFAULT;
	return 0;
}
