/* SPDX-License-Identifier: MIT */
/*
 * verbs_lat.c - RDMA WRITE ping-pong latency, as ib_write_lat measures
 * it. The buffer holds the area the peer writes into ([0, size)) and the
 * area our WRITEs are sent from ([size, 2 size)). Round k carries the
 * byte (k + 1) mod 256 in its last position, which always differs from
 * the round before; the client starts each round, the server answers
 * once the byte arrived. Both sides watch their buffer calling
 * sched_yield between looks (with two processes on two cores there are
 * more pollers than cores, and the progress threads must run). One-way
 * latency is half a round trip; median and p99 of every round trip of
 * the measured interval, after 1000 warm-up rounds.
 */
#include "ep.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	LAT_WARMUP = 1000,
	LAT_MAX_ITERS = 100000
};

struct lat_state {
	struct ep e;
	struct ep_addr peer;
	uint32_t outstanding;
};

/* WRITE `size` bytes ending in `v` into the peer; reap in batches. */
static void lat_send(struct lat_state *s, uint32_t size, uint8_t v)
{
	uint8_t *src = s->e.buf + size;
	unsigned int flags = IBV_SEND_SIGNALED;

	memset(src + (size > 8 ? size - 8 : 0), v, size < 8 ? size : 8);
	if (size <= s->e.max_inline)
		flags |= IBV_SEND_INLINE;
	if (post_one(&s->e, IBV_WR_RDMA_WRITE, src, size, s->peer.addr, s->peer.rkey, flags))
		die("ibv_post_send: failed");
	/*
	 * Completions are reaped in batches: an empty poll yields the CPU,
	 * which must not happen between a WRITE and watching for the answer.
	 */
	if (++s->outstanding < 16)
		return;
	while (s->outstanding > 8) /* the send queue must not fill */
		s->outstanding -= (uint32_t)reap(&s->e, (int)s->outstanding);
}

/* Spin until the last byte of the receive area is `v`; false if told to stop. */
static bool lat_wait(struct lat_state *s, uint32_t size, uint8_t v, int ctl)
{
	const uint8_t *last = s->e.buf + size - 1;
	uint32_t spins = 0;

	/* acquire: the rest of the WRITE is seen once its last byte is (no fence: TSan) */
	while (__atomic_load_n(last, __ATOMIC_ACQUIRE) != v) {
		sched_yield();
		if (ctl >= 0 && ++spins % 8192 == 0 && ctl_ready(ctl))
			return false;
	}
	return true;
}

/* The warm-up rounds: fewer for big messages, so a short point stays short. */
static uint32_t warmup_rounds(uint64_t size)
{
	return size >= 256 * KIB ? 50 : size >= 16 * KIB ? 200 : LAT_WARMUP;
}

/* Start every round, time it; report the median and p99 one-way. */
void verbs_lat_client(const struct role_args *ra)
{
	struct lat_state s;
	uint64_t *rtt = malloc(LAT_MAX_ITERS * sizeof(*rtt));
	uint32_t size = (uint32_t)ra->size, warm = warmup_rounds(ra->size);
	uint64_t end = 0, t0, t_start;
	size_t n = 0;
	double med, p99;
	char go;

	memset(&s, 0, sizeof(s));
	ep_setup(&s.e, ra->sock, 2 * (size_t)size, 64, MR_PLAIN, &s.peer);
	if (!rtt || xfer(ra->sock, &go, 1, false))
		die("setup failed");
	t_start = now_ns();
	for (uint32_t k = 0;; k++) {
		uint8_t v = (uint8_t)(k + 1);

		t0 = now_ns();
		lat_send(&s, size, v);
		lat_wait(&s, size, v, -1);
		if (!end) {
			if (!warm_up_done(k, warm, t_start, ra->secs))
				continue;
			end = now_ns() + (uint64_t)(ra->secs * 1e9);
			continue;
		}
		rtt[n++] = now_ns() - t0;
		if (n == LAT_MAX_ITERS || now_ns() >= end)
			break;
	}
	rtt_stats(rtt, n, &med, &p99);
	report(ra->out, "lat n=%zu med_us=%.3f p99_us=%.3f\n", n, med, p99);
	go = 'd';
	xfer(ra->sock, &go, 1, true);
	while (s.outstanding)
		s.outstanding -= (uint32_t)reap(&s.e, (int)s.outstanding);
	xfer(ra->sock, &go, 1, false);
	free(rtt);
	ep_destroy(&s.e);
}

/* Answer every round until the client says stop. */
void verbs_lat_server(const struct role_args *ra)
{
	struct lat_state s;
	uint32_t size = (uint32_t)ra->size;
	char c = 'r';

	memset(&s, 0, sizeof(s));
	ep_setup(&s.e, ra->sock, 2 * (size_t)size, 64, MR_PLAIN, &s.peer);
	xfer(ra->sock, &c, 1, true);
	for (uint32_t k = 0;; k++) {
		uint8_t v = (uint8_t)(k + 1);

		if (!lat_wait(&s, size, v, ra->sock))
			break;
		lat_send(&s, size, v);
	}
	xfer(ra->sock, &c, 1, false);
	while (s.outstanding)
		s.outstanding -= (uint32_t)reap(&s.e, (int)s.outstanding);
	c = 'x';
	xfer(ra->sock, &c, 1, true);
	ep_destroy(&s.e);
}

/* ---- orchestrator side ---- */

/* Contract: see bench.h. */
void lat_point(uint64_t size, bool busy, bool pin, bool udp)
{
	struct rec *r = rec_add("lat", "WRITE",
				udp  ? "busy_poll_udp" :
				pin  ? "busy_poll_pinned" :
				busy ? "busy_poll" :
				       "sleeping",
				size);
	char res[256];
	double cpu;

	mmode.pin = pin;
	mmode.no_shm = udp;
	measure("verbs", T_WRITE_LAT, size, busy, MR_PLAIN, res, sizeof(res), &cpu);
	rec_set(r, "median_us", field(res, "med_us"));
	rec_set(r, "p99_us", field(res, "p99_us"));
	rec_set(r, "rounds", field(res, "n"));
}

/* Contract: see bench.h. */
double plan_lat(void)
{
	return (opt.nsizes + 3) * (opt.secs + 0.5);
}

/*
 * Contract: see bench.h. 8 B sleeping, 8 B busy-poll pinned, 8 B
 * busy-poll over UDP (SOFTVERBS_SHM=0), then the busy-poll sweep.
 */
void run_lat(void)
{
	char s[32];

	progress_step(opt.secs + 0.5, "WRITE latency, 8 B, sleeping progress thread");
	lat_point(8, false, false, false);
	progress_step(opt.secs + 0.5, "WRITE latency, 8 B, busy-poll, pinned");
	lat_point(8, true, true, false);
	progress_step(opt.secs + 0.5, "WRITE latency, 8 B, busy-poll, over UDP (SOFTVERBS_SHM=0)");
	lat_point(8, true, false, true);
	for (int i = 0; i < opt.nsizes; i++) {
		size_str(opt.sizes[i], s, sizeof(s));
		progress_step(opt.secs + 0.5, "WRITE latency, %s, busy-poll", s);
		lat_point(opt.sizes[i], true, false, false);
	}
}
