/* SPDX-License-Identifier: MIT */
/* test: label=no_tsan */ /* forks with threads running: TSan cannot follow such a child */
/*
 * api_regress_fork_device: a child forked after its parent opened the
 * device gets a device of its own when it probes and opens again.
 *
 * The bug: the device cached by ibv_get_device_list() was reused in the
 * child, with the parent's UDP endpoint (the same GID) and a transport
 * engine whose progress thread does not exist in the child, so nothing
 * the child posted ever completed. Here the child must see a GID other
 * than its parent's, and move data over its own QPs; then the parent's
 * device must still work.
 *
 * The child ends with SIGKILL after reporting through a pipe: memory
 * that the parent's threads own is unreachable in a forked child, and
 * valgrind's leak pass would count it there.
 */
#include "harness.h"
#include "traffic.h"

#include <signal.h>
#include <sys/wait.h>

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

/* One SEND and one WRITE between two endpoints of `ctx`; 0 when all arrived. */
static int loop_traffic(struct ibv_context *ctx, unsigned int seed)
{
	struct t_ep a, b;
	struct ibv_wc wc;
	int bad = 0;

	if (t_ep_init(&a, ctx, IBV_QPT_RC, 65536, ACC, 8) ||
	    t_ep_init(&b, ctx, IBV_QPT_RC, 65536, ACC, 8) || t_connect(&a, &b, IBV_MTU_1024))
		return 1;
	t_fill(a.buf, 20000, seed);
	bad += t_post_recv(&b, 1, 0, 20000) != 0;
	bad += t_post(&a, IBV_WR_SEND, 2, 0, 20000, 0, 0, IBV_SEND_SIGNALED) != 0;
	bad += t_poll(a.cq, &wc, 1, 5000) != 1 || wc.status != IBV_WC_SUCCESS;
	bad += t_poll(b.cq, &wc, 1, 5000) != 1 || wc.status != IBV_WC_SUCCESS;
	bad += memcmp(a.buf, b.buf, 20000) != 0;
	bad += t_post(&a, IBV_WR_RDMA_WRITE, 3, 0, 20000, (uintptr_t)b.buf + 30000, b.mr->rkey,
		      IBV_SEND_SIGNALED) != 0;
	bad += t_poll(a.cq, &wc, 1, 5000) != 1 || wc.status != IBV_WC_SUCCESS;
	bad += memcmp(a.buf, b.buf + 30000, 20000) != 0;
	t_ep_destroy(&a, false);
	t_ep_destroy(&b, false);
	return bad;
}

int main(void)
{
	struct ibv_context *ctx;
	union ibv_gid gid;
	int pfd[2], status;
	uint8_t res[2] = {0xff, 0xff};
	pid_t pid;

	t_start("api_regress_fork_device");
	t_open_first(&ctx);
	CHECK_RET(ibv_query_gid(ctx, 1, 0, &gid), 0);
	CHECK_EQ_INT(loop_traffic(ctx, 1), 0); /* the progress thread runs */
	if (!CHECK(pipe(pfd) == 0))
		return t_finish();
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct ibv_context *c2 = t_open_dev();
		union ibv_gid g2;

		res[0] = !c2 || ibv_query_gid(c2, 1, 0, &g2) || !memcmp(&g2, &gid, sizeof(gid));
		res[1] = c2 ? (uint8_t)loop_traffic(c2, 2) : 0xff;
		if (write(pfd[1], res, sizeof(res)) != (ssize_t)sizeof(res))
			res[0] = 0xff;
		kill(getpid(), SIGKILL);
		_exit(1);
	}
	close(pfd[1]);
	CHECK(pid > 0);
	CHECK_EQ_INT(read(pfd[0], res, sizeof(res)), sizeof(res));
	CHECK_MSG(res[0] == 0, "the child's device has its parent's GID (or did not open)");
	CHECK_MSG(res[1] == 0, "the child's own traffic failed (%u problems)", res[1]);
	close(pfd[0]);
	CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
	/* the parent's device is unaffected */
	CHECK_EQ_INT(loop_traffic(ctx, 3), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	return t_finish();
}
