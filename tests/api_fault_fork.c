/* SPDX-License-Identifier: MIT */
/*
 * api_fault_fork.c - fork() while memory is registered and traffic runs
 * (api_fork covers the protection calls themselves).
 *
 * Without fork protection a child shares the registered pages copy-on-
 * write. Here a child keeps scribbling over its copies of both buffers
 * while the parent moves data between them with RDMA WRITE and READ: the
 * parent's data is exactly what it sent (on a pinning device the first
 * write after fork would have moved the parent to new pages, away from
 * the device). With RDMAV_FORK_SAFE set and no ibv_fork_init() call,
 * protection is on: a page registered afterwards is absent from a
 * child (touching it faults) and the parent's traffic through it is
 * unaffected.
 */
#include "harness.h"
#include "fork_probe.h"
#include "traffic.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define BUF (1u << 20)
#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static struct t_ep a, b;

/* WRITE a's first half to b, READ it back into a's second half; 0 if all arrived. */
static int traffic(unsigned int seed, uint8_t *dst, uint32_t rkey)
{
	struct ibv_wc wc;
	int bad = 0;

	t_fill(a.buf, BUF / 2, seed);
	bad += t_post(&a, IBV_WR_RDMA_WRITE, 1, 0, BUF / 2, (uintptr_t)dst, rkey,
		      IBV_SEND_SIGNALED) != 0;
	bad += t_poll(a.cq, &wc, 1, 10000) != 1 || wc.status != IBV_WC_SUCCESS;
	bad += t_post(&a, IBV_WR_RDMA_READ, 2, BUF / 2, BUF / 2, (uintptr_t)dst, rkey,
		      IBV_SEND_SIGNALED) != 0;
	bad += t_poll(a.cq, &wc, 1, 10000) != 1 || wc.status != IBV_WC_SUCCESS;
	bad += memcmp(a.buf, dst, BUF / 2) != 0;
	bad += memcmp(a.buf, a.buf + BUF / 2, BUF / 2) != 0;
	return bad;
}

static void case_unprotected(void)
{
	int fds[2], status, i, bad = 0;
	char c;
	pid_t pid;

	t_case("no protection: a child scribbling on its copies leaves the parent's traffic intact");
	if (ibv_is_fork_initialized() != IBV_FORK_UNNEEDED) {
		printf("# fork protection is on in this environment: case not applicable\n");
		return;
	}
	if (!CHECK(pipe(fds) == 0))
		return;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		c = 'r';
		for (unsigned int n = 0;; n++) {
			memset(a.buf, 0xee, BUF);
			memset(b.buf, 0xdd, BUF);
			if (!n && write(fds[1], &c, 1) != 1)
				break;
		}
		kill(getpid(), SIGKILL);
	}
	close(fds[1]);
	CHECK(pid > 0 && read(fds[0], &c, 1) == 1);
	for (i = 0; i < 8; i++)
		bad += traffic((unsigned int)i + 1, b.buf, b.mr->rkey);
	CHECK_MSG(bad == 0, "%d transfers went wrong while the child ran", bad);
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	close(fds[0]);
	/* the child's scribbles stayed in the child */
	CHECK(b.buf[0] != 0xdd && a.buf[0] != 0xee);
}

static void case_env(void)
{
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *p;
	struct ibv_mr *mr;

	t_case("RDMAV_FORK_SAFE: registered pages stay out of children, traffic unaffected");
	setenv("RDMAV_FORK_SAFE", "1", 1);
	CHECK_EQ_INT(ibv_is_fork_initialized(), IBV_FORK_ENABLED);
	p = mmap(NULL, BUF + (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		 0);
	if (!CHECK(p != MAP_FAILED))
		return;
	memset(p, 0x5a, BUF + (size_t)page);
	mr = ibv_reg_mr(b.pd, p, BUF, ACC);
	if (CHECK(mr)) {
		/* one probe (a fork costs a second or more under valgrind); api_fork has the rest
		 */
		CHECK_EQ_INT(child_reads(p + BUF - 1, 0x5a), CHILD_FAULT);
		CHECK_EQ_INT(traffic(99, p, mr->rkey), 0);
		CHECK_EQ_INT(ibv_dereg_mr(mr), 0);
	}
	munmap(p, BUF + (size_t)page);
	unsetenv("RDMAV_FORK_SAFE");
}

int main(void)
{
	struct ibv_context *ctx;

	t_start("api_fault_fork");
	t_open_first(&ctx);
	if (t_ep_init(&a, ctx, IBV_QPT_RC, BUF, ACC, 8) ||
	    t_ep_init(&b, ctx, IBV_QPT_RC, BUF, ACC, 8) || t_connect(&a, &b, IBV_MTU_4096))
		return t_finish();
	case_unprotected();
	case_env();
	t_ep_destroy(&a, false);
	t_ep_destroy(&b, false);
	CHECK_EQ_INT(ibv_close_device(ctx), 0);
	return t_finish();
}
