/* SPDX-License-Identifier: MIT */
/*
 * fork_probe.h - does a forked child see a page? child_reads() forks a
 * child that reads one byte and reports through a pipe whether it read
 * the expected value, read something else, or faulted (the page was kept
 * out of the child, e.g. by MADV_DONTFORK). The child dies by SIGKILL, so
 * neither exit handlers nor valgrind's leak pass run in it.
 */
#ifndef SV_TESTS_FORK_PROBE_H
#define SV_TESTS_FORK_PROBE_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
	CHILD_OK = 0,
	CHILD_FAULT = 42,
	CHILD_WRONG = 43
};

static int fork_probe_fd = -1; /* child: write end of the result pipe */

/* Child: report `r` and die at once. */
static inline void child_report(uint8_t r)
{
	if (write(fork_probe_fd, &r, 1) != 1)
		r = 0;
	kill(getpid(), SIGKILL);
	_exit(r);
}

static inline void fork_probe_on_fault(int sig)
{
	(void)sig;
	child_report(CHILD_FAULT);
}

/* CHILD_OK, CHILD_FAULT (the page is not in the child), CHILD_WRONG, or -1. */
static inline int child_reads(const volatile uint8_t *p, uint8_t want)
{
	uint8_t r;
	int fds[2], status;
	pid_t pid;

	if (pipe(fds))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		struct sigaction sa;

		close(fds[0]);
		fork_probe_fd = fds[1];
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = fork_probe_on_fault;
		sigaction(SIGSEGV, &sa, NULL);
		sigaction(SIGBUS, &sa, NULL);
		child_report(*p == want ? CHILD_OK : CHILD_WRONG);
	}
	close(fds[1]);
	if (read(fds[0], &r, 1) != 1)
		r = 0xff;
	close(fds[0]);
	waitpid(pid, &status, 0);
	if (r == 0xff) {
		printf("# child reported nothing (status 0x%x)\n", status);
		return -1;
	}
	return r;
}

#endif
