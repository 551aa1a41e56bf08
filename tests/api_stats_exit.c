/* SPDX-License-Identifier: MIT */
/*
 * api_stats_exit: SOFTVERBS_STATS=1 prints each device's totals exactly
 * once, whether the program closes it or exits with it open (api_unload
 * covers dlclose() and the threads).
 *
 * Each case is a child process whose stderr is a pipe read here; it sets
 * SOFTVERBS_STATS=1 before it lists the devices, then:
 *   1. never closes: opens the device, allocates a PD, calls exit(0):
 *      one device report;
 *   2. closes: the same with ibv_close_device() first: one report (at
 *      the close; none more at exit);
 *   3. two contexts of the device, one closed: one report;
 *   4. busy: two connected RC QPs, a thread posting 4 KiB WRITEs without
 *      pause, exit(0) from main while they and the progress thread run
 *      (ten times): exit status 0 each time, one report with packets sent;
 *   5. fork: a child of the child exits with exit(0) (it inherited the
 *      list of open devices): it prints nothing; its parent then exits
 *      without closing: one report;
 *   6. stats off: no report at all.
 */
#include "harness.h"
#include "traffic.h"

#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/wait.h>

/* test: no-valgrind */
/* (each child exits holding its device on purpose: memcheck would count that as leaks) */

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
#define LEN 65536u

/* everything a child holds stays reachable from here (LeakSanitizer) */
static struct ibv_context *ctx1, *ctx2;
static struct ibv_pd *pd;
static struct t_ep ea, eb;

enum kind {
	NEVER_CLOSES,
	CLOSES,
	TWO_CONTEXTS,
	BUSY,
	FORKS,
	STATS_OFF
};

static atomic_uint completed; /* WRITEs the writer saw complete */

static void *writer(void *arg)
{
	struct ibv_wc wc[16];
	unsigned int out = 0;

	(void)arg;
	for (uint64_t i = 0;; i++) {
		while (out < 32 &&
		       !t_post(&ea, IBV_WR_RDMA_WRITE, i, (i % 16) * 4096, 4096,
			       (uintptr_t)eb.buf + (i % 16) * 4096, eb.mr->rkey, IBV_SEND_SIGNALED))
			out++;
		int n = ibv_poll_cq(ea.cq, 16, wc);

		if (n > 0) {
			out -= (unsigned int)n;
			atomic_fetch_add(&completed, (unsigned int)n);
		}
	}
	return NULL;
}

/* The child's body: never returns. */
static void child(enum kind k)
{
	pthread_t th;
	pid_t g;

	if (k != STATS_OFF)
		setenv("SOFTVERBS_STATS", "1", 1);
	switch (k) {
	case NEVER_CLOSES:
	case CLOSES:
	case STATS_OFF:
	case FORKS:
		ctx1 = t_open_dev();
		pd = ctx1 ? ibv_alloc_pd(ctx1) : NULL;
		if (!pd)
			_exit(3);
		if (k == CLOSES) {
			ibv_dealloc_pd(pd);
			ibv_close_device(ctx1);
		}
		if (k == FORKS) {
			int gs;

			g = fork();
			if (g == 0) {
				alarm(10); /* a hang in exit fails the case (status 64 + SIGALRM) */
				exit(0); /* inherited the open device: prints nothing */
			}
			if (g < 0 || waitpid(g, &gs, 0) != g)
				_exit(4);
			/* (its exit status is not judged: LeakSanitizer reports the
			 * progress thread's buffers, which a fork child has no thread for) */
			if (!WIFEXITED(gs)) /* 64 + the signal that ended it */
				_exit(WIFSIGNALED(gs) ? 64 + WTERMSIG(gs) : 6);
		}
		exit(0);
	case TWO_CONTEXTS:
		ctx1 = t_open_dev();
		ctx2 = t_open_dev();
		if (!ctx1 || !ctx2)
			_exit(3);
		ibv_close_device(ctx2);
		exit(0);
	case BUSY:
		if (t_ep_init(&ea, NULL, IBV_QPT_RC, LEN, ACC, 64) ||
		    t_ep_init(&eb, ea.ctx, IBV_QPT_RC, LEN, ACC, 64) ||
		    t_connect(&ea, &eb, IBV_MTU_1024) || pthread_create(&th, NULL, writer, NULL))
			_exit(3);
		/* exit with traffic running: after the first completions (a loaded machine may not
		 * schedule the writer for a while) */
		for (int i = 0; i < 5000 && atomic_load(&completed) < 64; i++)
			usleep(1000);
		usleep(5 * 1000);
		exit(0);
	}
	_exit(5);
}

struct outcome {
	int status;
	unsigned int reports, lines;
	unsigned long long tx;
	char text[16384];
};

/* Run child(k) with its stderr into o->text. */
static void run(enum kind k, struct outcome *o)
{
	int fds[2];
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	memset(o, 0, sizeof(*o));
	if (pipe(fds)) {
		printf("Bail out! pipe: %s\n", t_errname(errno));
		exit(1);
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 2);
		close(fds[1]);
		alarm(20);
		child(k);
	}
	close(fds[1]);
	while ((n = read(fds[0], o->text + got, sizeof(o->text) - 1 - got)) > 0)
		got += (size_t)n;
	close(fds[0]);
	o->text[got] = 0;
	if (pid < 0 || waitpid(pid, &o->status, 0) != pid)
		o->status = -1;
	for (char *p = o->text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		unsigned long long tx;

		o->lines += !strncmp(p, "softverbs:", 10);
		if (sscanf(p, "softverbs: %*s %*[0-9.]: tx %llu pkts", &tx) == 1) {
			o->reports++;
			o->tx += tx;
		}
	}
}

static bool exited_0(const struct outcome *o)
{
	return o->status >= 0 && WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0;
}

static void expect(const char *name, enum kind k, unsigned int reports)
{
	struct outcome o;

	t_case(name);
	run(k, &o);
	CHECK_MSG(exited_0(&o), "status %#x", o.status);
	CHECK_EQ_INT(o.reports, reports);
	if (t_st()->case_failed)
		printf("# stderr:\n%s", o.text);
}

int main(void)
{
	struct outcome o;
	unsigned int bad = 0;

	t_start("api_stats_exit");
	expect("never closes: one report", NEVER_CLOSES, 1);
	expect("closes: one report", CLOSES, 1);
	expect("two contexts, one closed: one report", TWO_CONTEXTS, 1);
	expect("fork: the child's child prints nothing", FORKS, 1);

	t_case("stats off: nothing");
	run(STATS_OFF, &o);
	CHECK_MSG(exited_0(&o), "status %#x", o.status);
	CHECK_EQ_INT(o.lines, 0);

	t_case("busy: exit while WRITEs and the progress thread run");
	for (int i = 0; i < 10; i++) {
		run(BUSY, &o);
		if (!exited_0(&o) || o.reports != 1 || !o.tx) {
			bad++;
			printf("# run %d: status %#x, %u reports, tx %llu\n%s", i, o.status,
			       o.reports, o.tx, o.text);
		}
	}
	CHECK_EQ_INT(bad, 0);
	return t_finish();
}
