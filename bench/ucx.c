/* SPDX-License-Identifier: MIT */
/*
 * ucx.c - the closest installable peer: UCX's ucx_perftest (Debian's
 * ucx-utils) measuring one-sided puts, UCT tcp transport on lo,
 * zero-copy puts (the only put layout tcp offers), sizes 8 and 65536.
 * Server then client on 127.0.0.1; the iterations are sized for about
 * the time of the other points and both processes are killed at a
 * deadline. Left out, with a note, when ucx_perftest is not installed.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ucx_res {
	const char *test;
	uint32_t size;
	double med_us, mbps, msgs; /* ucx_perftest's final line: median, MB/s, msg/s */
};

static struct ucx_res ucx[] = {
	{.test = "put_bw", .size = 8},
	{.test = "put_bw", .size = 65536},
	{.test = "put_lat", .size = 8},
	{.test = "put_lat", .size = 65536},
};

/* Find ucx_perftest on PATH. */
static bool find_ucx(char *path, size_t cap)
{
	const char *env = getenv("PATH");
	char *dirs, *save = NULL;
	bool found = false;

	dirs = strdup(env ? env : "/usr/bin:/bin");
	for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		snprintf(path, cap, "%s/ucx_perftest", d);
		found = access(path, X_OK) == 0;
	}
	free(dirs);
	return found;
}

/*
 * ucx_perftest server then client, UCT tcp transport on lo, zero-copy
 * puts (the only put layout tcp offers). Iterations bounded so that a
 * slow run still ends; both processes are killed at the deadline.
 */
static void run_ucx_one(const char *exe, struct ucx_res *u, int port)
{
	char sz[16], iters[16], warm[16], port_s[16];
	char tls[] = "UCX_TLS=tcp", dev[] = "UCX_NET_DEVICES=lo";
	char *env[] = {tls, dev, NULL};
	bool lat_test = strcmp(u->test, "put_lat") == 0;
	char out[8192];
	int pp[2], devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	uint64_t deadline;
	pid_t srv, cli;
	const char *line;

	snprintf(sz, sizeof(sz), "%u", u->size);
	snprintf(port_s, sizeof(port_s), "%d", port);
	/* sized for about opt.secs at the rates seen on a 2-core VM */
	snprintf(iters, sizeof(iters), "%u",
		 (unsigned int)(opt.secs * (lat_test ? (u->size > 8 ? 1000 : 2500) : 1000)));
	snprintf(warm, sizeof(warm), "%u", lat_test ? 500u : 100u);
	char *argv_s[] = {(char *)exe, (char *)"-p", port_s, NULL};
	char *argv_c[] = {
		(char *)exe,	 (char *)"127.0.0.1", (char *)"-p",  port_s,	   (char *)"-t",
		(char *)u->test, (char *)"-x",	      (char *)"tcp", (char *)"-d", (char *)"lo",
		(char *)"-D",	 (char *)"zcopy",     (char *)"-s",  sz,	   (char *)"-n",
		iters,		 (char *)"-w",	      warm,	     (char *)"-f", NULL};

	u->med_us = u->mbps = u->msgs = nan_d();
	if (pipe2(pp, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	srv = spawn(argv_s, env, -1, -1, devnull);
	usleep(300000); /* the server listens */
	cli = spawn(argv_c, env, -1, -1, pp[1]);
	close(pp[1]);
	deadline = now_ns() + (uint64_t)((opt.secs * 10 + 30) * 1e9);
	read_all(pp[0], out, sizeof(out), deadline);
	close(pp[0]);
	reap_child(cli, deadline, NULL);
	reap_child(srv, now_ns() + 2000000000ull, NULL);
	close(devnull);
	/* the final line starts with "Final:" or, with -f, with spaces and the iterations */
	line = strstr(out, "Final:");
	if (!line) {
		const char *p = out, *nl;

		for (; *p; p = nl + 1) {
			unsigned long it;
			char *endp;

			nl = strchr(p, '\n');
			it = strtoul(p, &endp, 10);
			if (it && endp != p && strspn(p, " ") > 10)
				line = p;
			if (!nl)
				break;
		}
	} else {
		line += strlen("Final:");
	}
	if (line) {
		double v[8];
		char *e = (char *)line;
		int k;

		for (k = 0; k < 8; k++) {
			char *ne;

			v[k] = strtod(e, &ne);
			if (ne == e)
				break;
			e = ne;
		}
		if (k ==
		    8) { /* iterations, 50%, avg, overall, MB/s avg, overall, msg/s avg, overall */
			u->med_us = v[1];
			u->mbps = v[5];
			u->msgs = v[7];
		}
	}
}

/* Every ucx_perftest point, or a note when the program is missing. */
static void run_ucx_all(void)
{
	char exe[512];

	ucx_present = find_ucx(exe, sizeof(exe));
	if (!ucx_present) {
		snprintf(ucx_note, sizeof(ucx_note),
			 "ucx_perftest not found (apt-get install ucx-utils)");
		for (size_t i = 0; i < N_OF(ucx); i++)
			ucx[i].med_us = ucx[i].mbps = ucx[i].msgs = nan_d();
		return;
	}
	for (size_t i = 0; i < N_OF(ucx); i++) {
		progress_step(opt.secs * 1.5 + 0.5, "UCX ucx_perftest %s, %u B, tcp on lo",
			      ucx[i].test, ucx[i].size);
		run_ucx_one(exe, &ucx[i], 13500 + (int)(getpid() % 1000) * 4 + (int)i);
	}
}

/* Contract: see bench.h. Nothing when ucx_perftest is missing. */
double plan_ucx(void)
{
	char exe[512];

	return find_ucx(exe, sizeof(exe)) ? N_OF(ucx) * (opt.secs * 1.5 + 0.5) : 0;
}

/* Contract: see bench.h. Results as "ucx" records. */
void run_ucx(void)
{
	run_ucx_all();
	for (size_t i = 0; i < N_OF(ucx) && ucx_present; i++) {
		struct rec *r = rec_add("ucx", ucx[i].test, "tcp_lo", ucx[i].size);

		rec_set(r, "median_us", ucx[i].med_us);
		rec_set(r, "mbps", ucx[i].mbps);
		rec_set(r, "msgs", ucx[i].msgs);
	}
}
