/* SPDX-License-Identifier: MIT */
/*
 * mpi_check [ITERS]: a small MPI program for tests/clients/mpi.sh, built
 * there with mpicc. Every byte that moves is checked:
 *
 *  - ping-pong: ranks 2k and 2k+1 (and the ring neighbours, so that
 *    every rank talks to two others) exchange messages of 1 B to 1 MiB,
 *    eager and rendezvous sizes; each message is a pattern of its sender,
 *    size and iteration, checked byte by byte on arrival, and the answer
 *    is another pattern, checked by the first sender;
 *  - allreduce: MPI_SUM over int64 vectors of 1 to 100000 elements and
 *    MPI_MAX over doubles, against the sums computed locally;
 *  - one-sided: MPI_Put of a pattern into the right neighbour's window
 *    and MPI_Get back from it (fence epochs), 8 B to 256 KiB, then
 *    MPI_Fetch_and_op and MPI_Accumulate on rank 0 (lock epochs),
 *    against the totals all ranks must reach.
 *
 * Rank 0 prints one line per part and "mpi_check: ok" at the end; any
 * difference prints where it is and aborts with exit status 1.
 */
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MSG (1 << 20)

static int rank, nranks;

static void fail(const char *what, long a, long b)
{
	fprintf(stderr, "mpi_check: rank %d: %s (%ld, %ld)\n", rank, what, a, b);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

/* A byte pattern of `seed`: xorshift32, one byte per step. */
static void fill(uint8_t *b, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	size_t i;

	for (i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		b[i] = (uint8_t)x;
	}
}

/* The first byte of b that differs from the pattern of `seed`, or n. */
static size_t first_bad(const uint8_t *b, size_t n, uint32_t seed, uint8_t *scratch)
{
	size_t i;

	fill(scratch, n, seed);
	for (i = 0; i < n; i++)
		if (b[i] != scratch[i])
			return i;
	return n;
}

static uint32_t seed_of(int from, size_t size, int iter, int leg)
{
	return (uint32_t)from * 7919u + (uint32_t)size * 31u + (uint32_t)iter * 104729u +
	       (uint32_t)leg;
}

/* One ping-pong partner: `first` sends, the other answers. */
static double pingpong(int peer, int first, size_t size, int iters, uint8_t *buf, uint8_t *tmp)
{
	double t0 = MPI_Wtime();
	int i;

	for (i = 0; i < iters; i++) {
		int sender = first ? rank : peer;
		size_t bad;

		if (first) {
			fill(buf, size, seed_of(rank, size, i, 0));
			MPI_Send(buf, (int)size, MPI_BYTE, peer, i, MPI_COMM_WORLD);
			MPI_Recv(buf, (int)size, MPI_BYTE, peer, i, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			bad = first_bad(buf, size, seed_of(peer, size, i, 1), tmp);
		} else {
			MPI_Recv(buf, (int)size, MPI_BYTE, peer, i, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			bad = first_bad(buf, size, seed_of(sender, size, i, 0), tmp);
			if (bad == size) {
				fill(buf, size, seed_of(rank, size, i, 1));
				MPI_Send(buf, (int)size, MPI_BYTE, peer, i, MPI_COMM_WORLD);
			}
		}
		if (bad != size)
			fail("ping-pong: wrong byte (size, offset)", (long)size, (long)bad);
	}
	return (MPI_Wtime() - t0) / iters / 2 * 1e6;
}

static void part_pingpong(int iters, uint8_t *buf, uint8_t *tmp)
{
	static const size_t sizes[] = {1, 8, 64, 1024, 8192, 65536, 262144, MAX_MSG};
	int peer = rank ^ 1, s, ring;
	double lat8 = 0;

	for (s = 0; s < (int)(sizeof(sizes) / sizeof(sizes[0])); s++) {
		int n = sizes[s] >= 65536 ? iters / 10 + 1 : iters;

		if (peer < nranks) {
			double us = pingpong(peer, !(rank & 1), sizes[s], n, buf, tmp);

			if (sizes[s] == 8)
				lat8 = us;
		}
		MPI_Barrier(MPI_COMM_WORLD);
	}
	/* the ring: every rank sends to the right and receives from the left */
	for (ring = 0; ring < iters / 10 + 1 && nranks > 2; ring++) {
		int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
		size_t size = 4096 + (size_t)ring * 997, bad;

		fill(tmp, size, seed_of(rank, size, ring, 2));
		MPI_Sendrecv(tmp, (int)size, MPI_BYTE, right, 99, buf, (int)size, MPI_BYTE, left,
			     99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		bad = first_bad(buf, size, seed_of(left, size, ring, 2), tmp);
		if (bad != size)
			fail("ring: wrong byte (size, offset)", (long)size, (long)bad);
	}
	if (rank == 0)
		printf("mpi_check: ping-pong 1 B to 1 MiB, %d iterations each: ok, 8 B half round "
		       "trip %.1f us\n",
		       iters, lat8);
}

static void part_allreduce(void)
{
	static const int lens[] = {1, 1000, 100000};
	int64_t *in = malloc(100000 * sizeof(*in)), *out = malloc(100000 * sizeof(*out));
	double din[64], dout[64];
	int l, i, it;

	if (!in || !out)
		fail("out of memory", 0, 0);
	for (l = 0; l < 3; l++) {
		for (it = 0; it < 3; it++) {
			int64_t ranks = 0;

			for (i = 0; i < nranks; i++)
				ranks += (int64_t)i * 1000003;
			for (i = 0; i < lens[l]; i++)
				in[i] = (int64_t)rank * 1000003 + (int64_t)i * 7 + it;
			MPI_Allreduce(in, out, lens[l], MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
			for (i = 0; i < lens[l]; i++)
				if (out[i] != ranks + (int64_t)nranks * ((int64_t)i * 7 + it))
					fail("allreduce sum: wrong element (length, index)",
					     lens[l], i);
		}
	}
	for (i = 0; i < 64; i++)
		din[i] = rank * 0.5 + i;
	MPI_Allreduce(din, dout, 64, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	for (i = 0; i < 64; i++)
		if (dout[i] != (nranks - 1) * 0.5 + i)
			fail("allreduce max: wrong element", i, 0);
	free(in);
	free(out);
	if (rank == 0)
		printf("mpi_check: allreduce sum (int64, 1 to 100000 elements) and max (double): "
		       "ok\n");
}

static void part_onesided(int iters, uint8_t *tmp)
{
	static const size_t sizes[] = {8, 4096, 65536, 262144};
	int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks, s, i;
	uint8_t *base, *got = malloc(262144);
	int64_t one = 1, old, *counter;
	MPI_Win win;

	if (!got)
		fail("out of memory", 0, 0);
	MPI_Win_allocate(262144 + 64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	counter = (int64_t *)(base + 262144);
	for (s = 0; s < 4; s++) {
		size_t size = sizes[s], bad;

		fill(tmp, size, seed_of(rank, size, s, 3));
		MPI_Win_fence(0, win);
		MPI_Put(tmp, (int)size, MPI_BYTE, right, 0, (int)size, MPI_BYTE, win);
		MPI_Win_fence(0, win);
		bad = first_bad(base, size, seed_of(left, size, s, 3), got);
		if (bad != size)
			fail("put: wrong byte in the window (size, offset)", (long)size, (long)bad);
		memset(got, 0, size);
		MPI_Get(got, (int)size, MPI_BYTE, right, 0, (int)size, MPI_BYTE, win);
		MPI_Win_fence(0, win);
		bad = first_bad(got, size, seed_of(rank, size, s, 3), tmp);
		if (bad != size)
			fail("get: wrong byte read back (size, offset)", (long)size, (long)bad);
	}
	MPI_Win_fence(0, win);
	*counter = 0;
	counter[1] = 0;
	MPI_Win_fence(0, win);
	for (i = 0; i < iters; i++) {
		int64_t add = rank + 1;

		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 262144, MPI_SUM, win);
		MPI_Accumulate(&add, 1, MPI_INT64_T, 0, 262144 + 8, 1, MPI_INT64_T, MPI_SUM, win);
		MPI_Win_unlock(0, win);
		if (old < 0 || old >= (int64_t)iters * nranks)
			fail("fetch_and_op: impossible old value", (long)old, i);
	}
	MPI_Win_fence(0, win);
	if (rank == 0 && (counter[0] != (int64_t)iters * nranks ||
			  counter[1] != (int64_t)iters * nranks * (nranks + 1) / 2))
		fail("atomics: wrong totals", (long)counter[0], (long)counter[1]);
	MPI_Win_free(&win);
	free(got);
	if (rank == 0)
		printf("mpi_check: one-sided put/get 8 B to 256 KiB, fetch_and_op and accumulate "
		       "x%d per rank: ok\n",
		       iters);
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 200;
	uint8_t *buf, *tmp;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	buf = malloc(MAX_MSG);
	tmp = malloc(MAX_MSG);
	if (!buf || !tmp || iters < 1)
		fail("out of memory or bad ITERS", iters, 0);
	part_pingpong(iters, buf, tmp);
	part_allreduce();
	part_onesided(iters, tmp);
	free(buf);
	free(tmp);
	if (rank == 0)
		printf("mpi_check: ok, %d ranks\n", nranks);
	MPI_Finalize();
	/* mpi.sh tells Open MPI's launcher race (see there) from a rank that never got here */
	printf("mpi_check: rank %d finalized\n", rank);
	fflush(stdout);
	return 0;
}
