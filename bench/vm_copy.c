/* SPDX-License-Identifier: MIT */
/*
 * vm_copy.c - the process_vm_writev baseline: what the kernel's
 * cross-memory copy gives between two processes, the copy that UCX's
 * cma transport makes. The orchestrator forks a child that allocates and
 * touches a 1 MiB buffer, sends its address and waits; the orchestrator
 * writes into it from its own touched buffer with process_vm_writev(2)
 * again and again, 64 KiB and 1 MiB at a time, for half a point each.
 * Records of family "vm_copy": op "process_vm_writev", GB/s. The child
 * is killed (by pid) at the end; a note when the kernel refuses
 * (ptrace access mode checks: EPERM).
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static const uint64_t sizes[] = {64 * KIB, MIB};

/* Seconds per point: half a point, at least 20 ms. */
static double vm_secs(void)
{
	return opt.secs / 2 < 0.02 ? 0.02 : opt.secs / 2;
}

/* The child: a touched buffer, its address on `out`, then wait for EOF on `in`. */
static void vm_child(int in, int out)
{
	uint8_t *buf = aligned_alloc(4096, MIB);
	uintptr_t addr = (uintptr_t)buf;
	char c;

	if (buf)
		memset(buf, 0, MIB);
	else
		addr = 0;
	if (write(out, &addr, sizeof(addr)) != (ssize_t)sizeof(addr))
		_exit(1);
	while (read(in, &c, 1) > 0)
		;
	_exit(0);
}

/* Write `size` bytes at a time into the child for vm_secs(); a record. */
static void vm_point(pid_t pid, uintptr_t raddr, const uint8_t *src, uint64_t size)
{
	struct rec *r = rec_add("vm_copy", "process_vm_writev", "", size);
	struct iovec l = {.iov_base = (void *)src, .iov_len = size};
	struct iovec rm = {.iov_base = (void *)raddr, .iov_len = size};
	uint64_t t0 = now_ns(), t, bytes = 0;

	rec_set(r, "gbps", nan_d());
	do {
		ssize_t n = process_vm_writev(pid, &l, 1, &rm, 1, 0);

		if (n != (ssize_t)size) {
			peer_note("process_vm_writev %llu B: %s", (unsigned long long)size,
				  n < 0 ? strerror(errno) : "short write");
			return;
		}
		bytes += size;
		t = now_ns();
	} while (t - t0 < (uint64_t)(vm_secs() * 1e9));
	rec_set(r, "gbps", (double)bytes / (double)(t - t0));
}

/* Contract: see bench.h. */
double plan_vm_copy(void)
{
	return N_OF(sizes) * vm_secs() + 0.1;
}

/* Contract: see bench.h. 64 KiB and 1 MiB into a forked child. */
void run_vm_copy(void)
{
	uint8_t *src = aligned_alloc(4096, MIB);
	int to_child[2], from_child[2];
	uintptr_t raddr = 0;
	pid_t pid;

	progress_step(plan_vm_copy(), "process_vm_writev baseline, 64 KiB and 1 MiB");
	if (!src || pipe2(to_child, O_CLOEXEC) || pipe2(from_child, O_CLOEXEC))
		die("vm_copy baseline: out of memory or pipes");
	memset(src, 0x5a, MIB);
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid) {
		close(to_child[1]);
		close(from_child[0]);
		vm_child(to_child[0], from_child[1]);
	}
	close(to_child[0]);
	close(from_child[1]);
	if (xfer_by(from_child[0], &raddr, sizeof(raddr), false, now_ns() + 10000000000ull) ||
	    !raddr) {
		peer_note("process_vm_writev: the child process did not start");
	} else {
		for (size_t i = 0; i < N_OF(sizes); i++)
			vm_point(pid, raddr, src, sizes[i]);
	}
	close(to_child[1]); /* the child sees EOF and exits */
	close(from_child[0]);
	reap_child(pid, now_ns() + 2000000000ull, NULL); /* else killed there, by pid */
	free(src);
}
