/* SPDX-License-Identifier: MIT */
/*
 * Header-only test helpers, TAP-like output. t_start(name) counts the open
 * fds; CHECK*() print "# FAIL file:line: ..." and go on; t_case(name) starts
 * an optional case; "return t_finish();" prints "ok N - case" / "not ok N -
 * case" (one point for the whole program without cases), an fd leak point and
 * the plan, and returns 0/1. t_skip_all(reason) exits 77 (ctest: skipped).
 * t_open_first(&ctx) opens device 0 or bails out. All static inline.
 */
#ifndef SV_TESTS_HARNESS_H
#define SV_TESTS_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strerrorname_np; include harness.h first */
#endif

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <infiniband/verbs.h>

struct t_state {
	const char *prog, *cas; /* t_start() name, current case or NULL */
	int points, checks, failed, case_failed, fd_start;
};

static inline struct t_state *t_st(void)
{
	static struct t_state st;
	return &st;
}

/*
 * In a child just forked from `parent`: die with it. A test that a time
 * limit kills must not leave its other processes behind, spinning on a
 * peer that is gone (a killed parent once left three for an hour).
 */
static inline void t_die_with(pid_t parent)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
		_exit(1);
}

/* Is the page at `p` mapped in this process? */
static inline bool t_mapped(const void *p)
{
	unsigned char v;

	return !mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, &v) || errno != ENOMEM;
}

/* Does this kernel (or valgrind) know pidfd_getfd(2)? (438 on every architecture) */
static inline bool t_have_pidfd_getfd(void)
{
	return syscall(438, -1, -1, 0) < 0 && errno != ENOSYS;
}

/* Number of open file descriptors, or -1. */
static inline int t_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own descriptor */
}

/* "EINVAL" (glibc >= 2.32) or "errno 22"; four results may be used at once. */
static inline const char *t_errname(int e)
{
	static char buf[4][24];
	static unsigned int next;
	char *b = buf[next++ % 4];

#if defined(__USE_GNU) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
	if (e && strerrorname_np(e))
		return strerrorname_np(e);
#endif
	snprintf(b, sizeof(buf[0]), e ? "errno %d" : "%d", e);
	return b;
}

/* Records one check; returns ok, so callers can skip dependent code. */
__attribute__((format(printf, 4, 5))) static inline int t_check(int ok, const char *file, int line,
								const char *fmt, ...)
{
	struct t_state *st = t_st();
	va_list ap;

	st->checks++;
	if (ok)
		return 1;
	st->failed++;
	st->case_failed++;
	printf("# FAIL %s:%d: ", file, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	return 0;
}

/* Called after expr was evaluated with errno = 0 (sequence point). */
static inline int t_check_ptr(const char *file, int line, const char *expr, const void *p, int eno)
{
	int e = errno;

	return t_check(!p && e == eno, file, line, "%s: want NULL/%s, got %s/%s", expr,
		       t_errname(eno), p ? "non-NULL" : "NULL", t_errname(e));
}

#define CHECK(cond) t_check(!!(cond), __FILE__, __LINE__, "CHECK(%s)", #cond)
#define CHECK_MSG(cond, ...) t_check(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_EQ_INT(a, b) t_check_eq(__FILE__, __LINE__, #a, #b, (long long)(a), (long long)(b))
/* expr must evaluate to NULL with errno == eno. */
#define CHECK_ERRNO_PTR(expr, eno)                                                                 \
	t_check_ptr(__FILE__, __LINE__, #expr, (errno = 0, (const void *)(expr)), (eno))
/* An int-returning verb must return eno (positive; 0 for success). */
#define CHECK_RET(expr, eno) t_check_ret(__FILE__, __LINE__, #expr, (expr), (eno))

static inline int t_check_eq(const char *file, int line, const char *sa, const char *sb,
			     long long a, long long b)
{
	return t_check(a == b, file, line, "%s == %s: %lld != %lld", sa, sb, a, b);
}

static inline int t_check_ret(const char *file, int line, const char *expr, int r, int eno)
{
	return t_check(r == eno, file, line, "%s: want %s, got %s%s", expr, t_errname(eno),
		       r < 0 ? "negative " : "", t_errname(r < 0 ? -r : r));
}

static inline void t_point(int ok, const char *name)
{
	printf("%sok %d - %s\n", ok ? "" : "not ", ++t_st()->points, name);
}

static inline void t_end_case(void)
{
	struct t_state *st = t_st();

	if (st->cas)
		t_point(!st->case_failed, st->cas);
	else if (st->case_failed)
		t_point(0, "checks outside any case");
	st->cas = NULL;
	st->case_failed = 0;
}

/* Starts a named case, ending the previous one. */
static inline void t_case(const char *name)
{
	t_end_case();
	t_st()->cas = name;
	printf("# case %s\n", name);
}

static inline void t_start(const char *name)
{
	struct t_state *st = t_st();

	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(st, 0, sizeof(*st));
	st->prog = name;
	st->fd_start = t_count_fds();
	printf("# %s\n", name);
}

/* Prints the results; use as "return t_finish();" at the end of main(). */
static inline int t_finish(void)
{
	struct t_state *st = t_st();
	int fds = t_count_fds();
	char leak[80];

	if (!st->cas && !st->points)
		st->cas = st->prog; /* t_case() not used: one point for everything */
	t_end_case();
	snprintf(leak, sizeof(leak), "no fd leak (%d open at start, %d at end)", st->fd_start, fds);
	t_point(fds == st->fd_start, leak);
	st->checks++;
	st->failed += fds != st->fd_start;
	printf("1..%d\n# %s: %d checks, %d failed\n", st->points, st->prog, st->checks, st->failed);
	fflush(stdout);
	return st->failed ? 1 : 0;
}

/* Skips the whole program: ctest counts exit code 77 as skipped. */
__attribute__((noreturn)) static inline void t_skip_all(const char *reason)
{
	printf("1..0 # SKIP %s\n", reason);
	exit(77);
}

/* stderr redirected to an unlinked temporary file, and the saved original. */
struct t_capture {
	int saved, fd;
};

/* Start capturing stderr; 0 or -1. */
static inline int t_capture_begin(struct t_capture *c)
{
	char path[] = "/tmp/sv_capture.XXXXXX";

	c->saved = -1;
	fflush(stderr);
	c->fd = mkstemp(path);
	if (c->fd < 0)
		return -1;
	unlink(path);
	c->saved = dup(STDERR_FILENO);
	dup2(c->fd, STDERR_FILENO);
	return 0;
}

/* Restore stderr; what was written meanwhile goes to `out` (NUL-terminated). */
static inline void t_capture_end(struct t_capture *c, char *out, size_t size)
{
	ssize_t n;

	fflush(stderr);
	dup2(c->saved, STDERR_FILENO);
	close(c->saved);
	n = pread(c->fd, out, size - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(c->fd);
}

/*
 * Opens the first device as the environment configures it right now
 * (each list call re-reads SOFTVERBS_*), or NULL with errno.
 */
static inline struct ibv_context *t_open_dev(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;

	ibv_free_device_list(list);
	return ctx;
}

/* Opens the first device into *ctx; bails out (exit 1) if there is none. */
static inline int t_open_first(struct ibv_context **ctx)
{
	struct ibv_device **list;
	int n = 0;

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		printf("Bail out! no RDMA device (n=%d, errno %s)\n", n, t_errname(errno));
		exit(1);
	}
	*ctx = ibv_open_device(list[0]);
	if (!*ctx) {
		printf("Bail out! ibv_open_device(%s): %s\n", ibv_get_device_name(list[0]),
		       t_errname(errno));
		exit(1);
	}
	ibv_free_device_list(list);
	return 0;
}

#endif /* SV_TESTS_HARNESS_H */
