/* SPDX-License-Identifier: MIT */
/*
 * ucx.c - UCX's ucx_perftest (Debian's ucx-utils) as the peer: UCT
 * one-sided puts, put_bw and put_lat at 8 B, 64 KiB and 1 MiB, over
 * three transports, each with the put layouts it offers (ucx_info -d):
 *
 *   posix   shared memory (device "memory"): short puts at 8 B, bcopy
 *           above (posix has no zero-copy put)
 *   cma     cross-memory attach, process_vm_writev (device "memory"):
 *           zero-copy puts, its only layout
 *   tcp     TCP on lo (device "lo"): zero-copy puts, its only layout
 *
 * Server then client on 127.0.0.1 (run_peer_pair, peer.c). ucx_perftest
 * runs a count of iterations, not a time: a probe of a few hundred
 * iterations gives the time of one, and the measured run is sized for
 * opt.secs from it (the probe is the figure when it already took half
 * that). Records of family "ucx": op put_bw/put_lat, variant the
 * transport ("posix", "cma", "tcp_lo"), the median one-way latency
 * (us), MB/s (1e6 B/s) and messages/s of ucx_perftest's final line.
 * Left out, with a note, when ucx_perftest is not installed or a run
 * fails.
 */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct ucx_tl {
	const char *tl, *dev, *variant;
} tls[] = {
	{"posix", "memory", "posix"},
	{"cma", "memory", "cma"},
	{"tcp", "lo", "tcp_lo"},
};

static const char *const tests[] = {"put_bw", "put_lat"};
static const uint32_t sizes[] = {8, 65536, 1048576};

/* ucx_perftest's final figures. */
struct ucx_fig {
	double iters, med_us, avg_us, mbps, msgs;
};

/* The put layout of transport `t` for `size` bytes (see the file comment). */
static const char *layout(const struct ucx_tl *t, uint32_t size)
{
	if (strcmp(t->tl, "posix"))
		return "zcopy";
	return size <= 8 ? "short" : "bcopy";
}

/*
 * The final line of `out`: with -f, the iterations then seven figures
 * (median, average and overall latency, average and overall MB/s and
 * msg/s); true when found.
 */
static bool parse_final(const char *out, struct ucx_fig *f)
{
	for (const char *p = out; *p;) {
		const char *nl = strchr(p, '\n');
		double v[8];
		char *e = (char *)p;
		int k;

		for (k = 0; k < 8; k++) {
			char *ne;

			v[k] = strtod(e, &ne);
			if (ne == e)
				break;
			e = ne;
		}
		if (k == 8 && v[0] >= 1) {
			*f = (struct ucx_fig){.iters = v[0],
					      .med_us = v[1],
					      .avg_us = v[2],
					      .mbps = v[5],
					      .msgs = v[7]};
			return true;
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	return false;
}

/* One ucx_perftest run of `iters` (+`warm`) iterations on `port`; false on failure. */
static bool ucx_run(const char *exe, const struct ucx_tl *t, const char *test, uint32_t size,
		    uint64_t iters, uint64_t warm, int port, double bound_s, struct ucx_fig *f,
		    char *out, size_t cap)
{
	char sz[16], it[24], wm[24], port_s[16], tls_env[32], dev_env[40];
	char *env[] = {tls_env, dev_env, NULL};
	char *argv_s[] = {(char *)exe, (char *)"-p", port_s, NULL};
	char *argv_c[] = {(char *)exe,	(char *)"127.0.0.1",
			  (char *)"-p", port_s,
			  (char *)"-t", (char *)test,
			  (char *)"-x", (char *)t->tl,
			  (char *)"-d", (char *)t->dev,
			  (char *)"-D", (char *)layout(t, size),
			  (char *)"-s", sz,
			  (char *)"-n", it,
			  (char *)"-w", wm,
			  (char *)"-f", NULL};

	snprintf(sz, sizeof(sz), "%u", size);
	snprintf(it, sizeof(it), "%llu", (unsigned long long)iters);
	snprintf(wm, sizeof(wm), "%llu", (unsigned long long)warm);
	snprintf(port_s, sizeof(port_s), "%d", port);
	snprintf(tls_env, sizeof(tls_env), "UCX_TLS=%s", t->tl);
	snprintf(dev_env, sizeof(dev_env), "UCX_NET_DEVICES=%s",
		 strcmp(t->tl, "tcp") ? "all" : "lo");
	return run_peer_pair(argv_s, argv_c, env, bound_s, out, cap) == 0 && parse_final(out, f);
}

/* The first line of `out` that is not a table border, for a note. */
static const char *first_words(char *out)
{
	char *p = out;

	while (*p == '+' || *p == '|' || *p == ' ' || *p == '\n') {
		char *nl = strchr(p, '\n');

		if (!nl || *p == ' ')
			break;
		p = nl + 1;
	}
	p[strcspn(p, "\n")] = 0;
	if (strlen(p) > 80)
		p[80] = 0;
	return *p ? p : "no output";
}

/* One point: probe, then the run sized for opt.secs; a "ucx" record. */
static void ucx_point(const char *exe, const struct ucx_tl *t, const char *test, uint32_t size,
		      int port)
{
	struct rec *r = rec_add("ucx", test, t->variant, size);
	static char out[16384];
	uint64_t probe = strcmp(test, "put_lat") ? 200 : 100, n;
	struct ucx_fig f;

	rec_set(r, "median_us", nan_d());
	rec_set(r, "mbps", nan_d());
	rec_set(r, "msgs", nan_d());
	if (!ucx_run(exe, t, test, size, probe, 10, port, 20, &f, out, sizeof(out))) {
		peer_note("ucx_perftest %s over %s, %u B: failed (%s)", test, t->tl, size,
			  first_words(out));
		return;
	}
	if (f.avg_us * (double)probe < opt.secs * 0.5e6) {
		n = (uint64_t)(opt.secs * 1e6 / (f.avg_us > 0.01 ? f.avg_us : 0.01));
		n = n < 100 ? 100 : n > 20000000 ? 20000000 : n;
		if (!ucx_run(exe, t, test, size, n, n / 10 < 10000 ? n / 10 : 10000, port + 1,
			     opt.secs * 5 + 20, &f, out, sizeof(out))) {
			peer_note("ucx_perftest %s over %s, %u B: failed (%s)", test, t->tl, size,
				  first_words(out));
			return;
		}
	}
	rec_set(r, "median_us", f.med_us);
	rec_set(r, "mbps", f.mbps);
	rec_set(r, "msgs", f.msgs);
}

/* The time of one point: probe and run, with the servers' start. */
static double ucx_weight(void)
{
	return opt.secs + 1.0;
}

/* Contract: see bench.h. Nothing when ucx_perftest is missing. */
double plan_ucx(void)
{
	char exe[512];

	return find_exe("ucx_perftest", exe, sizeof(exe)) ?
		       N_OF(tls) * N_OF(tests) * N_OF(sizes) * ucx_weight() :
		       0;
}

/* Contract: see bench.h. Every transport, test and size; "ucx" records. */
void run_ucx(void)
{
	int port = 13500 + (int)(getpid() % 400) * 40;
	char exe[512], s[32];

	ucx_present = find_exe("ucx_perftest", exe, sizeof(exe));
	if (!ucx_present) {
		snprintf(ucx_note, sizeof(ucx_note),
			 "ucx_perftest not found (apt-get install ucx-utils)");
		peer_note("UCX: %s", ucx_note);
		return;
	}
	for (size_t t = 0; t < N_OF(tls); t++)
		for (size_t k = 0; k < N_OF(tests); k++)
			for (size_t i = 0; i < N_OF(sizes); i++, port += 2) {
				size_str(sizes[i], s, sizeof(s));
				progress_step(ucx_weight(), "UCX ucx_perftest %s, %s, %s %s",
					      tests[k], s, tls[t].tl, layout(&tls[t], sizes[i]));
				ucx_point(exe, &tls[t], tests[k], sizes[i], port);
			}
}

/*
 * Contract: see bench.h. Ports of their own, above run_ucx()'s and below
 * the ephemeral range (29600-32599: 100 per pid slot, two per point,
 * reused after 50 points).
 */
void ucx_one(const char *test, const char *variant, uint32_t size)
{
	static unsigned int k;
	int port = 29600 + (int)(getpid() % 30) * 100 + (int)(k++ % 50) * 2;
	char exe[512];
	size_t t = 0;

	while (t < N_OF(tls) && strcmp(tls[t].variant, variant))
		t++;
	if (t == N_OF(tls))
		die("no UCX transport for variant %s", variant);
	if (!find_exe("ucx_perftest", exe, sizeof(exe)))
		return;
	ucx_point(exe, &tls[t], test, size, port);
}
