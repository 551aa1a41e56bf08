/* SPDX-License-Identifier: MIT */
/*
 * fabric.c - libfabric's fi_pingpong (Debian's libfabric-bin) as a
 * peer: reliable datagram endpoints (-e rdm) of the shm provider (same
 * host, shared memory) and the tcp provider (on lo), messages of 8 B,
 * 64 KiB and 1 MiB bounced between server and client on 127.0.0.1
 * (run_peer_pair, peer.c).
 *
 * fi_pingpong runs a count of iterations (-I), the same on both sides:
 * a probe of 20 gives the time of one round trip and the measured run
 * is sized for opt.secs from it. The figures are fi_pingpong's own, as
 * it prints them: "usec/xfer" (the elapsed time over twice the
 * iterations: one-way, half a round trip, averaged) and "MB/sec" (1e6
 * B/s, both directions' bytes over the elapsed time). Records of family
 * "fabric": op "pingpong", variant the provider, values one_way_us and
 * mbps. Left out, with a note, when fi_pingpong is not installed or a
 * run fails.
 */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const provs[] = {"shm", "tcp"};
static const uint32_t sizes[] = {8, 65536, 1048576};

enum {
	FI_PROBE = 20,
	FI_MAX_ITERS = 100000
};

/*
 * fi_pingpong's result line in `out`: eight columns (bytes, #sent, #ack,
 * total, time, MB/sec, usec/xfer, Mxfers/sec), the first a number.
 */
static bool parse_line(const char *out, double *mbps, double *us)
{
	bool found = false;

	for (const char *p = out; *p;) {
		const char *nl = strchr(p, '\n');
		char line[256], *tok[9], *save = NULL;
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		int k = 0;

		snprintf(line, sizeof(line), "%.*s", (int)(len < 255 ? len : 255), p);
		for (char *t = strtok_r(line, " \t", &save); t && k < 9;
		     t = strtok_r(NULL, " \t", &save))
			tok[k++] = t;
		if (k == 8 && tok[0][0] >= '0' && tok[0][0] <= '9') {
			*mbps = strtod(tok[5], NULL);
			*us = strtod(tok[6], NULL);
			found = true;
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	return found;
}

/* One fi_pingpong run; false on failure (a note then). */
static bool fi_run(const char *exe, const char *prov, uint32_t size, uint64_t iters, int port,
		   double bound_s, double *mbps, double *us)
{
	static char out[16384];
	char sz[16], it[24], port_s[16];
	char *argv_s[] = {(char *)exe,	(char *)"-p", (char *)prov, (char *)"-e", (char *)"rdm",
			  (char *)"-B", port_s,	      (char *)"-S", sz,		  (char *)"-I",
			  it,		NULL};
	char *argv_c[] = {(char *)exe,
			  (char *)"-p",
			  (char *)prov,
			  (char *)"-e",
			  (char *)"rdm",
			  (char *)"-P",
			  port_s,
			  (char *)"-S",
			  sz,
			  (char *)"-I",
			  it,
			  (char *)"127.0.0.1",
			  NULL};
	char *env[] = {NULL};

	snprintf(sz, sizeof(sz), "%u", size);
	snprintf(it, sizeof(it), "%llu", (unsigned long long)iters);
	snprintf(port_s, sizeof(port_s), "%d", port);
	if (run_peer_pair(argv_s, argv_c, env, bound_s, out, sizeof(out)) == 0 &&
	    parse_line(out, mbps, us))
		return true;
	out[strcspn(out, "\n")] = 0;
	peer_note("fi_pingpong -p %s, %u B: failed (%.80s)", prov, size,
		  out[0] ? out : "no output or killed at the deadline");
	return false;
}

/* One point: probe, then the run sized for opt.secs; a "fabric" record. */
static void fi_point(const char *exe, const char *prov, uint32_t size, int port)
{
	struct rec *r = rec_add("fabric", "pingpong", prov, size);
	double mbps = nan_d(), us = nan_d();

	rec_set(r, "one_way_us", nan_d());
	rec_set(r, "mbps", nan_d());
	if (!fi_run(exe, prov, size, FI_PROBE, port, 20, &mbps, &us))
		return;
	if (us * 2 * FI_PROBE < opt.secs * 0.5e6) {
		uint64_t n = (uint64_t)(opt.secs * 1e6 / (2 * (us > 0.01 ? us : 0.01)));

		n = n < FI_PROBE ? FI_PROBE : n > FI_MAX_ITERS ? FI_MAX_ITERS : n;
		if (!fi_run(exe, prov, size, n, port + 1, opt.secs * 5 + 20, &mbps, &us))
			return;
	}
	rec_set(r, "one_way_us", us);
	rec_set(r, "mbps", mbps);
}

/* The time of one point: probe and run, with the servers' start. */
static double fi_weight(void)
{
	return opt.secs + 1.0;
}

/* Contract: see bench.h. Nothing when fi_pingpong is missing. */
double plan_fabric(void)
{
	char exe[512];

	return find_exe("fi_pingpong", exe, sizeof(exe)) ? N_OF(provs) * N_OF(sizes) * fi_weight() :
							   0;
}

/* Contract: see bench.h. Both providers, every size; "fabric" records. */
void run_fabric(void)
{
	int port = 30000 + (int)(getpid() % 400) * 16;
	char exe[512], s[32];

	if (!find_exe("fi_pingpong", exe, sizeof(exe))) {
		peer_note("libfabric: fi_pingpong not found (apt-get install libfabric-bin)");
		return;
	}
	for (size_t p = 0; p < N_OF(provs); p++)
		for (size_t i = 0; i < N_OF(sizes); i++, port += 2) {
			size_str(sizes[i], s, sizeof(s));
			progress_step(fi_weight(), "libfabric fi_pingpong, %s, %s provider, rdm", s,
				      provs[p]);
			fi_point(exe, provs[p], sizes[i], port);
		}
}
