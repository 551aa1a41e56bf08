/* SPDX-License-Identifier: MIT */
/*
 * util.c - sv_bench's helpers: time, errors, the control socket,
 * statistics, and running the child processes a measurement needs.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Contract: see bench.h. */
uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Contract: see bench.h. */
bool warm_up_done(uint32_t k, uint32_t rounds, uint64_t start, double secs)
{
	return k + 1 >= rounds || now_ns() - start >= (uint64_t)(secs * 1e9);
}

int bench_failures;

/* Contract: see bench.h. */
double nan_d(void)
{
	return __builtin_nan("");
}

/* Contract: see bench.h. */
void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sv_bench[%d]: ", (int)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* Contract: see bench.h. Waits in poll(2) only when there is a deadline. */
int xfer_by(int fd, void *p, size_t n, bool out, uint64_t deadline)
{
	size_t done = 0;

	while (done < n) {
		struct pollfd pf = {.fd = fd, .events = out ? POLLOUT : POLLIN};
		ssize_t r;

		if (deadline != UINT64_MAX) {
			uint64_t t = now_ns();

			if (t >= deadline)
				return -1;
			if (poll(&pf, 1, (int)((deadline - t) / 1000000) + 1) <= 0)
				continue;
		}
		r = out ? write(fd, (char *)p + done, n - done) :
			  read(fd, (char *)p + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/* Contract: see bench.h. */
int xfer(int fd, void *p, size_t n, bool out)
{
	return xfer_by(fd, p, n, out, UINT64_MAX);
}

/* Contract: see bench.h. */
bool ctl_ready(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) > 0;
}

/* qsort order of uint64_t. */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Contract: see bench.h. */
void rtt_stats(uint64_t *rtt, size_t n, double *med_us, double *p99_us)
{
	if (!n) {
		*med_us = *p99_us = nan_d();
		return;
	}
	qsort(rtt, n, sizeof(*rtt), cmp_u64);
	*med_us = (double)rtt[n / 2] / 2.0 / 1000.0;
	*p99_us = (double)rtt[(n * 99) / 100] / 2.0 / 1000.0;
}

/* Contract: see bench.h. */
void report(int fd, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < sizeof(line))
		xfer(fd, line, (size_t)n, true);
}

/* Contract: see bench.h. */
double field(const char *line, const char *key)
{
	const char *nl = strchr(line, '\n');
	size_t kl = strlen(key);

	for (const char *p = line; (p = strstr(p, key)) && (!nl || p < nl); p += kl)
		if ((p == line || p[-1] == ' ') && p[kl] == '=')
			return strtod(p + kl + 1, NULL);
	return nan_d();
}

/* Contract: see bench.h. */
bool has_token(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
			return true;
	return false;
}

/* Contract: see bench.h. */
void size_str(uint64_t s, char *buf, size_t cap)
{
	if (s >= GIB && s % GIB == 0)
		snprintf(buf, cap, "%llu GiB", (unsigned long long)(s / GIB));
	else if (s >= MIB && s % MIB == 0)
		snprintf(buf, cap, "%llu MiB", (unsigned long long)(s / MIB));
	else if (s >= KIB && s % KIB == 0)
		snprintf(buf, cap, "%llu KiB", (unsigned long long)(s / KIB));
	else
		snprintf(buf, cap, "%llu B", (unsigned long long)s);
}

/* Contract: see bench.h. */
uint64_t ladder_next(uint64_t size, uint64_t max)
{
	if (size >= max)
		return 0;
	return size * 16 <= max ? size * 16 : max;
}

/* Contract: see bench.h. */
uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (end == s)
		return 0;
	switch (*end) {
	case 'k':
	case 'K':
		v *= KIB;
		end++;
		break;
	case 'm':
	case 'M':
		v *= MIB;
		end++;
		break;
	case 'g':
	case 'G':
		v *= GIB;
		end++;
		break;
	default:
		break;
	}
	return *end ? 0 : v;
}

struct measure_mode mmode;

/* Contract: see bench.h. */
pid_t spawn(char *const argv[], char *const env[], int fd3, int fd4, int out_fd)
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid)
		return pid;
	for (int i = 0; env && env[i]; i++)
		putenv(env[i]);
	/* move the fds out of the way first, then into place */
	if (fd3 >= 0)
		fd3 = fcntl(fd3, F_DUPFD, 10);
	if (fd4 >= 0)
		fd4 = fcntl(fd4, F_DUPFD, 10);
	if (out_fd >= 0) {
		dup2(out_fd, STDOUT_FILENO);
		dup2(out_fd, STDERR_FILENO);
	}
	if (fd3 >= 0)
		dup2(fd3, 3);
	if (fd4 >= 0)
		dup2(fd4, 4);
	execv(argv[0], argv);
	_exit(127);
}

/* Contract: see bench.h. */
int reap_child(pid_t pid, uint64_t deadline, double *cpu_s)
{
	struct rusage ru;
	int st;

	for (;;) {
		pid_t r = wait4(pid, &st, WNOHANG, &ru);

		if (r == pid) {
			if (cpu_s)
				*cpu_s += (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
					  (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		if (r < 0)
			return -1;
		if (now_ns() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		usleep(5000);
	}
}

/* Contract: see bench.h. */
void read_all(int fd, char *buf, size_t cap, uint64_t deadline)
{
	size_t n = 0;

	while (n + 1 < cap) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t t = now_ns();
		ssize_t r;

		if (t >= deadline)
			break;
		if (poll(&p, 1, (int)((deadline - t) / 1000000) + 1) <= 0)
			continue;
		r = read(fd, buf + n, cap - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	buf[n] = 0;
}

/* argv of a role: self --role ROLE --test T --size N --secs S --mr M */
struct role_argv {
	char secs[32], sz[32], mr[8], role[48];
	char *argv[12];
};

static void role_argv(struct role_argv *a, const char *role, const char *test, uint64_t size,
		      enum mr_kind mr)
{
	snprintf(a->secs, sizeof(a->secs), "%.3f", opt.secs);
	snprintf(a->sz, sizeof(a->sz), "%llu", (unsigned long long)size);
	snprintf(a->mr, sizeof(a->mr), "%d", (int)mr);
	snprintf(a->role, sizeof(a->role), "%s", role);
	a->argv[0] = (char *)opt.self;
	a->argv[1] = (char *)"--role";
	a->argv[2] = a->role;
	a->argv[3] = (char *)"--test";
	a->argv[4] = (char *)test;
	a->argv[5] = (char *)"--size";
	a->argv[6] = a->sz;
	a->argv[7] = (char *)"--secs";
	a->argv[8] = a->secs;
	a->argv[9] = (char *)"--mr";
	a->argv[10] = a->mr;
	a->argv[11] = NULL;
}

void measure(const char *kind, enum test test, uint64_t size, bool busy, enum mr_kind mr, char *res,
	     size_t cap, double *cpu_s)
{
	char busy_env[] = "SOFTVERBS_BUSY_POLL=1", nobusy_env[] = "SOFTVERBS_BUSY_POLL=0";
	char cpu0[] = "SV_BENCH_CPU=0", cpu1[] = "SV_BENCH_CPU=1";
	char prog0[] = "SOFTVERBS_PROGRESS_CPU=0", prog1[] = "SOFTVERBS_PROGRESS_CPU=1";
	char yield[] = "SV_BENCH_UDP_YIELD=1", handoff[] = "SV_BENCH_UDP_HANDOFF=1";
	char noshm[] = "SOFTVERBS_SHM=0";
	char *env_c[8] = {busy ? busy_env : nobusy_env}, *env_s[8] = {env_c[0]};
	int nc = 1, ns = 1;
	struct role_argv ac, as;
	char role_c[48], role_s[48];
	int sp[2], pp[2], rs, rc;
	uint64_t deadline;
	pid_t srv, cli;

	snprintf(role_c, sizeof(role_c), "%s-client", kind);
	snprintf(role_s, sizeof(role_s), "%s-server", kind);
	role_argv(&ac, role_c, test_names[test], size, mr);
	role_argv(&as, role_s, test_names[test], size, mr);
	res[0] = 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) || pipe2(pp, O_CLOEXEC))
		die("socketpair/pipe: %s", strerror(errno));
	if (mmode.pin && sysconf(_SC_NPROCESSORS_ONLN) >= 2) {
		env_c[nc++] = cpu0;
		env_s[ns++] = cpu1;
		if (!strcmp(kind, "verbs")) {
			env_c[nc++] = prog1;
			env_s[ns++] = prog0;
		}
	}
	if (mmode.udp_yield) {
		env_c[nc++] = yield;
		env_s[ns++] = yield;
	}
	if (mmode.udp_handoff) {
		env_c[nc++] = handoff;
		env_s[ns++] = handoff;
	}
	if (mmode.no_shm) {
		env_c[nc++] = noshm;
		env_s[ns++] = noshm;
	}
	mmode = (struct measure_mode){0};
	srv = spawn(as.argv, env_s, sp[1], pp[1], -1); /* either side may report */
	cli = spawn(ac.argv, env_c, sp[0], pp[1], -1);
	close(sp[0]);
	close(sp[1]);
	close(pp[1]);
	deadline = now_ns() + (uint64_t)((opt.secs * 3 + 30) * 1e9);
	read_all(pp[0], res, cap, deadline);
	close(pp[0]);
	*cpu_s = 0;
	rc = reap_child(cli, deadline, cpu_s);
	rs = reap_child(srv, deadline + 5000000000ull, cpu_s);
	if (rc || rs) {
		fprintf(stderr, "sv_bench: %s %s %llu%s failed (client %d, server %d)\n", kind,
			test_names[test], (unsigned long long)size, busy ? " busy-poll" : "", rc,
			rs);
		res[0] = 0;
		bench_failures++;
	}
}

/* Contract: see bench.h. */
int run_one(const char *role, uint64_t size, char *const env[], char *res, size_t cap)
{
	struct role_argv a;
	int pp[2], rc;
	uint64_t deadline;
	pid_t pid;

	role_argv(&a, role, "none", size, MR_PLAIN);
	res[0] = 0;
	if (pipe2(pp, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	pid = spawn(a.argv, env, -1, pp[1], -1);
	close(pp[1]);
	deadline = now_ns() + (uint64_t)((opt.secs * 20 + 120) * 1e9);
	read_all(pp[0], res, cap, deadline);
	close(pp[0]);
	rc = reap_child(pid, deadline, NULL);
	if (rc) {
		fprintf(stderr, "sv_bench: %s failed (exit %d)\n", role, rc);
		bench_failures++;
	}
	return rc;
}
