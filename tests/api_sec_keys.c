/* SPDX-License-Identifier: MIT */
/* test: label=no_tsan */ /* forks with threads running: TSan cannot follow such a child */
/*
 * api_sec_keys.c - memory keys cannot be guessed from other keys.
 *
 * A peer names remote memory by rkey alone, so whoever can guess a live
 * rkey can read or write it. Checked on the public API:
 *   - N live MRs: keys nonzero, distinct, lkey == rkey (documented); no
 *     two consecutive keys within 2^16 of each other (a counter, or
 *     rxe's index << 8 | 8 random bits, fails this at once), each of the
 *     31 low bits set in 40-60% of the keys, bit 31 (a memory window's
 *     mark) in none;
 *   - N register/deregister cycles of one buffer: keys are not reused
 *     (no more repeats than chance allows: expected 0.01);
 *   - a second device of the process, and a child process forked after
 *     the parent drew keys, draw keys the parent does not have (no more
 *     in common than chance allows: expected 0.008).
 * Chance of a false failure: below 1e-7 for each check.
 */
#include "harness.h"
#include "traffic.h"

#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 4096
#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static uint8_t buf[4096] __attribute__((aligned(4096)));
static struct ibv_context *keys_ctx;

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* How many values of a[] (n) equal an earlier one. Sorts a copy. */
static int repeats(const uint32_t *a, size_t n)
{
	uint32_t *s = malloc(n * sizeof(*s));
	int r = 0;

	if (!s)
		return -1;
	memcpy(s, a, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_u32);
	for (size_t i = 1; i < n; i++)
		r += s[i] == s[i - 1];
	free(s);
	return r;
}

/* How many of a[] (na) also appear in b[] (nb). */
static int common(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
	uint32_t *s = malloc((na + nb) * sizeof(*s));
	int r;

	if (!s)
		return -1;
	memcpy(s, a, na * sizeof(*s));
	memcpy(s + na, b, nb * sizeof(*s));
	r = repeats(s, na + nb) - repeats(a, na) - repeats(b, nb);
	free(s);
	return r;
}

/*
 * Independent 32-bit keys: 4096 against 8192 share 0.008 by chance, and
 * P(>= 3) < 1e-7; a shared or copied random pool shares dozens.
 */
static void shared_few(int n, const char *who)
{
	CHECK_MSG(n >= 0 && n < 3, "the %s drew %d keys we have", who, n);
}

/* Register `n` MRs of buf at once on `pd`, keep their rkeys, deregister. 0 or -1. */
static int draw_live(struct ibv_pd *pd, uint32_t *keys, size_t n, int *mismatch)
{
	struct ibv_mr **mr = calloc(n, sizeof(*mr));
	int ret = 0;

	if (!mr)
		return -1;
	for (size_t i = 0; i < n; i++) {
		mr[i] = ibv_reg_mr(pd, buf, sizeof(buf), ACC);
		if (!mr[i]) {
			ret = -1;
			break;
		}
		keys[i] = mr[i]->rkey;
		*mismatch += mr[i]->lkey != mr[i]->rkey;
	}
	for (size_t i = 0; i < n && mr[i]; i++)
		ibv_dereg_mr(mr[i]);
	free(mr);
	return ret;
}

static void case_live(struct ibv_pd *pd, uint32_t *keys)
{
	int mismatch = 0, close = 0, zero = 0, high = 0;

	t_case("live keys: nonzero, distinct, lkey == rkey, no sequence, balanced bits");
	if (!CHECK(draw_live(pd, keys, N, &mismatch) == 0))
		return;
	CHECK_EQ_INT(mismatch, 0);
	for (size_t i = 0; i < N; i++) {
		uint32_t d = i ? keys[i] - keys[i - 1] : 0x80000000u;

		zero += !keys[i];
		/* within 2^16 either way: expected 0.12 of 4095 pairs; P(>= 8) < 1e-10 */
		close += d < 0x10000u || d > 0xffff0000u;
	}
	CHECK_EQ_INT(zero, 0);
	CHECK_EQ_INT(repeats(keys, N), 0); /* P(any) = 0.002: live keys must differ */
	CHECK_MSG(close < 8, "%d consecutive keys within 2^16 of each other", close);
	for (int bit = 0; bit < 31; bit++) {
		int ones = 0;

		for (size_t i = 0; i < N; i++)
			ones += (keys[i] >> bit) & 1;
		/* 40-60%: 12.8 standard deviations */
		CHECK_MSG(ones > N * 2 / 5 && ones < N * 3 / 5, "bit %d set in %d of %d keys", bit,
			  ones, N);
	}
	/* bit 31 marks memory windows' keys (docs/queue-pairs.md): never an MR's */
	for (size_t i = 0; i < N; i++)
		high += (keys[i] >> 31) & 1;
	CHECK_MSG(high == 0, "bit 31 set in %d MR keys", high);
}

static void case_reuse(struct ibv_pd *pd, uint32_t *keys, uint32_t *cycled)
{
	int r;

	t_case("register/deregister cycles: keys are not reused");
	for (size_t i = 0; i < N; i++) {
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), ACC);

		if (!CHECK(mr))
			return;
		cycled[i] = mr->rkey;
		CHECK_EQ_INT(ibv_dereg_mr(mr), 0);
	}
	/* expected repeats among 8192 random keys: 0.008; P(>= 3) < 1e-7 */
	r = repeats(cycled, N) + common(keys, N, cycled, N);
	CHECK_MSG(r < 3, "%d keys repeated", r);
}

/* Child: open its own device, draw N live keys, write them to `fd`. */
static void child_keys(int fd)
{
	static uint32_t k[N];
	struct ibv_context *c = t_open_dev();
	struct ibv_pd *pd = c ? ibv_alloc_pd(c) : NULL;
	int mismatch = 0;
	uint8_t ok = pd && !draw_live(pd, k, N, &mismatch);

	if (write(fd, &ok, 1) != 1 || (ok && write(fd, k, sizeof(k)) != (ssize_t)sizeof(k)))
		ok = 0;
	kill(getpid(), SIGKILL); /* no exit handlers: the parent's threads are not here */
}

static void case_others(uint32_t *keys, uint32_t *cycled)
{
	static uint32_t other[N];
	struct ibv_context *c2;
	struct ibv_pd *pd2;
	int fds[2], status, mismatch = 0;
	uint8_t ok = 0;
	pid_t pid;

	t_case("another device and a forked child draw other keys");
	setenv("SOFTVERBS_DEV_NAME", "softverbs_keys2", 1);
	c2 = t_open_dev();
	unsetenv("SOFTVERBS_DEV_NAME");
	pd2 = c2 ? ibv_alloc_pd(c2) : NULL;
	if (CHECK(pd2) && CHECK(draw_live(pd2, other, N, &mismatch) == 0))
		shared_few(common(keys, N, other, N) + common(cycled, N, other, N), "device");
	if (pd2)
		CHECK_EQ_INT(ibv_dealloc_pd(pd2), 0);
	if (c2)
		CHECK_EQ_INT(ibv_close_device(c2), 0);

	if (!CHECK(pipe(fds) == 0))
		return;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		child_keys(fds[1]);
	}
	close(fds[1]);
	if (CHECK(pid > 0) && CHECK(read(fds[0], &ok, 1) == 1 && ok) &&
	    CHECK(t_xfer(fds[0], other, sizeof(other), false) == 0)) {
		/* the parent's own keys from now on, as the child's pool started where ours was */
		static uint32_t after[N];

		if (CHECK(pd2 = ibv_alloc_pd(keys_ctx)) &&
		    CHECK(draw_live(pd2, after, N, &mismatch) == 0))
			shared_few(common(after, N, other, N) + common(keys, N, other, N), "child");
		if (pd2)
			ibv_dealloc_pd(pd2);
	}
	if (pid > 0)
		waitpid(pid, &status, 0);
	close(fds[0]);
}

int main(void)
{
	static uint32_t keys[N], cycled[N];
	struct ibv_pd *pd;

	t_start("api_sec_keys");
	t_open_first(&keys_ctx);
	pd = ibv_alloc_pd(keys_ctx);
	if (!CHECK(pd))
		return t_finish();
	case_live(pd, keys);
	case_reuse(pd, keys, cycled);
	case_others(keys, cycled);
	CHECK_EQ_INT(ibv_dealloc_pd(pd), 0);
	CHECK_EQ_INT(ibv_close_device(keys_ctx), 0);
	return t_finish();
}
