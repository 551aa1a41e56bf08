/* SPDX-License-Identifier: MIT */
/*
 * verbs_bw.c - bandwidth and message rate of RDMA WRITE, READ, SEND and
 * the two atomics between two processes. The client keeps a fixed queue
 * of signalled requests in flight, warms up for a fifth of the time (at
 * most 0.5 s), then counts the completions of the measured interval.
 * The interval ends at the first completion after `secs` (at least one
 * is counted). WRITE, READ and the atomics leave the server idle; for
 * SEND it keeps 512 receives posted.
 */
#include "ep.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Requests in flight for a bandwidth test of `size` bytes. */
static uint32_t bw_depth(enum test t, uint64_t size, const struct ep *e)
{
	if (t == T_READ_BW || t == T_FADD_BW || t == T_CSWAP_BW)
		return e->max_rd ? e->max_rd : 1;
	if (size >= MIB)
		return 16;
	return size >= 64 * KIB ? 64 : 128;
}

/* The work request opcode of a bandwidth test. */
static enum ibv_wr_opcode bw_opcode(enum test t)
{
	switch (t) {
	case T_READ_BW:
		return IBV_WR_RDMA_READ;
	case T_SEND_BW:
		return IBV_WR_SEND;
	case T_FADD_BW:
		return IBV_WR_ATOMIC_FETCH_AND_ADD;
	case T_CSWAP_BW:
		return IBV_WR_ATOMIC_CMP_AND_SWP;
	default:
		return IBV_WR_RDMA_WRITE;
	}
}

/* The bandwidth client: the requests in flight, counted over the interval. */
void verbs_bw_client(const struct role_args *ra)
{
	struct ep e;
	struct ep_addr peer;
	enum ibv_wr_opcode op = bw_opcode(ra->test);
	uint64_t warm = (uint64_t)(ra->secs * 2e8), t_start = 0, t_end = 0, t;
	uint64_t done = 0, done_start = 0;
	uint32_t depth, inflight = 0, len = (uint32_t)ra->size;
	unsigned int flags = IBV_SEND_SIGNALED;
	bool measuring = false;
	char go;

	if (warm > 500000000ull)
		warm = 500000000ull;
	ep_setup(&e, ra->sock, ra->size, 1024, ra->mr == MR_ALLOC_BUF ? MR_ALLOC_BUF : MR_PLAIN,
		 &peer);
	depth = bw_depth(ra->test, ra->size, &e);
	if (len <= e.max_inline && (op == IBV_WR_RDMA_WRITE || op == IBV_WR_SEND))
		flags |= IBV_SEND_INLINE;
	if (xfer(ra->sock, &go, 1, false)) /* the server is ready (receives posted) */
		die("server went away");
	t = now_ns();
	t_start = t + warm;
	for (;;) {
		int n;

		while (inflight < depth) {
			if (post_one(&e, op, e.buf, len, peer.addr, peer.rkey, flags))
				die("ibv_post_send: failed");
			inflight++;
		}
		n = reap(&e, (int)inflight);
		inflight -= (uint32_t)n;
		done += (uint64_t)n;
		t = now_ns();
		if (!measuring && t >= t_start) {
			measuring = true;
			t_start = t;
			done_start = done;
			t_end = t + (uint64_t)(ra->secs * 1e9);
		} else if (measuring && t >= t_end && done > done_start) {
			break; /* at least one completion: a stalled interval is not "0 GB/s" */
		}
	}
	report(ra->out, "bw msgs=%" PRIu64 " ns=%" PRIu64 " total=%" PRIu64 "\n", done - done_start,
	       t - t_start, done + inflight);
	/* drain what is still in flight, then let the server go */
	t_end = now_ns() + 10ull * 1000000000ull;
	while (inflight && now_ns() < t_end)
		inflight -= (uint32_t)reap(&e, (int)inflight);
	go = 'd';
	xfer(ra->sock, &go, 1, true);
	xfer(ra->sock, &go, 1, false); /* the server has stopped using the QP */
	ep_destroy(&e);
}

/* Passive for WRITE, READ and atomics; keeps receives posted for SEND. */
void verbs_bw_server(const struct role_args *ra)
{
	struct ep e;
	struct ep_addr peer;
	uint32_t depth = 512;
	char c = 'r';

	ep_setup(&e, ra->sock, ra->size, depth, ra->mr, &peer);
	if (ra->test == T_SEND_BW) {
		for (uint32_t i = 0; i < depth; i++)
			if (post_recv_one(&e, (uint32_t)ra->size))
				die("ibv_post_recv failed");
	}
	xfer(ra->sock, &c, 1, true);
	if (ra->test == T_SEND_BW) {
		uint32_t spins = 0;

		for (;;) {
			int n = reap(&e, 32);

			for (int i = 0; i < n; i++)
				if (post_recv_one(&e, (uint32_t)ra->size))
					die("ibv_post_recv failed");
			if (n)
				continue;
			if (++spins % 64 == 0 && ctl_ready(ra->sock)) /* an empty poll yields */
				break;
		}
	}
	xfer(ra->sock, &c, 1, false);
	c = 'x';
	xfer(ra->sock, &c, 1, true);
	ep_destroy(&e);
}

/* ---- orchestrator side ---- */

static const struct {
	enum test t;
	const char *op;
} bw_ops[] = {
	{T_WRITE_BW, "WRITE"},
	{T_READ_BW, "READ"},
	{T_SEND_BW, "SEND"},
};

static const struct {
	enum test t;
	const char *op;
} atomic_ops[] = {
	{T_FADD_BW, "FETCH_ADD"},
	{T_CSWAP_BW, "CMP_SWAP"},
};

/* Contract: see bench.h. */
enum test bw_op_test(const char *op)
{
	for (size_t o = 0; o < N_OF(bw_ops); o++)
		if (!strcmp(bw_ops[o].op, op))
			return bw_ops[o].t;
	die("no bandwidth test for %s", op);
}

/*
 * Contract: one bandwidth point, the server's MR registered as `mr`; a
 * record of family `fam` with GB/s, Mmsg/s and
 * CPU seconds (both processes, all threads) per GB, or NaNs on failure.
 */
void bw_point(const char *fam, const char *op, const char *variant, enum test t, uint64_t size,
	      enum mr_kind mr)
{
	struct rec *r = rec_add(fam, op, variant, size);
	double msgs, ns, cpu;
	char res[256];

	measure("verbs", t, size, false, mr, res, sizeof(res), &cpu);
	msgs = field(res, "msgs");
	ns = field(res, "ns");
	rec_set(r, "gbps", msgs * (double)size / ns);
	rec_set(r, "mmsgs", msgs / ns * 1e3);
	rec_set(r, "cpu_s_per_gb", cpu / (field(res, "total") * (double)size / 1e9));
}

/* Contract: see bench.h. */
double bench_point_weight(void)
{
	return opt.secs * 1.2 + 0.4; /* warm-up, setup and teardown of two processes */
}

/* Contract: see bench.h. */
double plan_bw(void)
{
	return (N_OF(bw_ops) * (double)opt.nsizes + N_OF(atomic_ops) + 3) * bench_point_weight();
}

/*
 * Contract: see bench.h. WRITE, READ, SEND over the sweep, then the
 * atomics, then WRITE 1 MiB between two ibv_alloc_buf buffers (variant
 * "alloc_buf"), then WRITE 64 KiB and 1 MiB over UDP (variant "udp":
 * SOFTVERBS_SHM=0).
 */
void run_bw(void)
{
	char s[32];

	for (size_t o = 0; o < N_OF(bw_ops); o++)
		for (int i = 0; i < opt.nsizes; i++) {
			size_str(opt.sizes[i], s, sizeof(s));
			progress_step(bench_point_weight(), "%s bandwidth, %s", bw_ops[o].op, s);
			bw_point("bw", bw_ops[o].op, "", bw_ops[o].t, opt.sizes[i], MR_PLAIN);
		}
	for (size_t o = 0; o < N_OF(atomic_ops); o++) {
		progress_step(bench_point_weight(), "%s message rate, 8 B", atomic_ops[o].op);
		bw_point("bw", atomic_ops[o].op, "", atomic_ops[o].t, 8, MR_PLAIN);
	}
	progress_step(bench_point_weight(), "WRITE bandwidth, 1 MiB, ibv_alloc_buf on both sides");
	bw_point("bw", "WRITE", "alloc_buf", T_WRITE_BW, MIB, MR_ALLOC_BUF);
	for (uint64_t sz = 64 * KIB; sz <= MIB; sz *= 16) {
		size_str(sz, s, sizeof(s));
		progress_step(bench_point_weight(),
			      "WRITE bandwidth, %s, over UDP (SOFTVERBS_SHM=0)", s);
		mmode.no_shm = true;
		bw_point("bw", "WRITE", "udp", T_WRITE_BW, sz, MR_PLAIN);
	}
}
