/* SPDX-License-Identifier: MIT */
/*
 * peer.c - running the programs of other projects (ucx_perftest,
 * fi_pingpong) as they are installed, as a server and a client on
 * 127.0.0.1: found on PATH, started with extra environment, their
 * output captured, both killed at a deadline (only these two processes,
 * by pid), and a note for each peer left out or failed.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char peer_notes[PEER_MAX_NOTES][160];
int npeer_notes;

/* Contract: see bench.h. */
bool find_exe(const char *name, char *path, size_t cap)
{
	const char *env = getenv("PATH");
	char *dirs, *save = NULL;
	bool found = false;

	dirs = strdup(env ? env : "/usr/bin:/bin");
	if (!dirs)
		die("out of memory");
	for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		snprintf(path, cap, "%s/%s", d, name);
		found = access(path, X_OK) == 0;
	}
	free(dirs);
	return found;
}

/* Contract: see bench.h. Repeated notes are kept once. */
void peer_note(const char *fmt, ...)
{
	char line[sizeof(peer_notes[0])];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	for (int i = 0; i < npeer_notes; i++)
		if (!strcmp(peer_notes[i], line))
			return;
	if (npeer_notes < PEER_MAX_NOTES)
		snprintf(peer_notes[npeer_notes++], sizeof(line), "%s", line);
}

/* Contract: see bench.h. */
int run_peer_pair(char *const srv[], char *const cli[], char *const env[], double bound_s,
		  char *out, size_t cap)
{
	int pp[2], devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	uint64_t deadline;
	pid_t s, c;
	int rc;

	if (devnull < 0 || pipe2(pp, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	s = spawn(srv, env, -1, -1, devnull);
	usleep(300000); /* the server listens */
	c = spawn(cli, env, -1, -1, pp[1]);
	close(pp[1]);
	deadline = now_ns() + (uint64_t)(bound_s * 1e9);
	read_all(pp[0], out, cap, deadline);
	close(pp[0]);
	rc = reap_child(c, deadline, NULL);
	/* a server whose client is gone ends by itself, or is killed */
	reap_child(s, now_ns() + 2000000000ull, NULL);
	close(devnull);
	return rc;
}
