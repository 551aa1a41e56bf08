/* SPDX-License-Identifier: MIT */
/*
 * api_rc_2proc.c - two processes, two devices (each its own 127.0.0.N):
 * RDMA WRITE, READ and atomics complete while the target process makes
 * no verbs call at all (it sleeps in read(2) on a socket), and the
 * target then finds every byte where the initiator put it. A SEND in
 * each direction proves both endpoints work.
 */
#include "harness.h"
#include "traffic.h"

#include <sys/socket.h>
#include <sys/wait.h>

/* test: timeout=240 */

#define BUF (8u << 20)
#define ACC                                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

static int xfer(int fd, void *p, size_t n, bool out)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = out ? write(fd, (char *)p + done, n - done) :
				  read(fd, (char *)p + done, n - done);

		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/* The target: set up, publish its address, then sleep until told to check. */
static int target(int sock)
{
	struct t_ep e;
	struct t_addr mine, peer;
	struct ibv_wc wc;
	char cmd;
	int bad = 0;

	if (t_ep_init(&e, NULL, IBV_QPT_RC, BUF, ACC, 16))
		return 1;
	t_fill(e.buf, BUF, 77); /* what READs will fetch */
	mine = t_addr_of(&e, 500);
	if (xfer(sock, &mine, sizeof(mine), true) || xfer(sock, &peer, sizeof(peer), false))
		return 1;
	if (t_connect_to(&e, &peer, 500, IBV_MTU_4096) || t_post_recv(&e, 1, 256, 64))
		return 1;
	cmd = 'r';
	xfer(sock, &cmd, 1, true);
	/* no verbs calls while the initiator works */
	if (xfer(sock, &cmd, 1, false))
		return 1;
	/* the initiator wrote its pattern into the second half, atomics at 0 */
	{
		uint8_t *expect = malloc(BUF / 2);

		t_fill(expect, BUF / 2, 5);
		bad += memcmp(e.buf + BUF / 2, expect, BUF / 2) != 0;
		free(expect);
	}
	bad += *(uint64_t *)(void *)e.buf != 1000 + 10;
	/* then one SEND each way */
	bad += t_poll(e.cq, &wc, 1, 30000) != 1 || wc.status != IBV_WC_SUCCESS ||
	       memcmp(e.buf + 256, "hello target", 13) != 0;
	memcpy(e.buf + 64, "hello initiator", 16);
	bad += t_post(&e, IBV_WR_SEND, 2, 64, 16, 0, 0, IBV_SEND_SIGNALED) != 0;
	bad += t_poll(e.cq, &wc, 1, 30000) != 1 || wc.status != IBV_WC_SUCCESS;
	xfer(sock, &bad, sizeof(bad), true);
	xfer(sock, &cmd, 1, false); /* wait before tearing down */
	t_ep_destroy(&e, true);
	return bad != 0;
}

int main(void)
{
	struct t_ep e;
	struct t_addr mine, peer;
	struct ibv_wc wc;
	int sv[2], bad = -1, status;
	pid_t pid;
	char cmd;

	t_start("api_rc_2proc");
	if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0))
		return t_finish();
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		_exit(target(sv[1]));
	}
	close(sv[1]);
	if (t_ep_init(&e, NULL, IBV_QPT_RC, BUF, ACC, 64))
		return t_finish();
	CHECK(xfer(sv[0], &peer, sizeof(peer), false) == 0);
	CHECK_MSG(memcmp(&peer.gid, &e.gid, sizeof(e.gid)) != 0, "two processes share a GID");
	mine = t_addr_of(&e, 900);
	CHECK(xfer(sv[0], &mine, sizeof(mine), true) == 0);
	CHECK(t_connect_to(&e, &peer, 900, IBV_MTU_4096) == 0);
	CHECK(t_post_recv(&e, 9, 128, 64) == 0);
	CHECK(xfer(sv[0], &cmd, 1, false) == 0);

	t_case("WRITE, READ and atomics complete with the target asleep");
	t_fill(e.buf, BUF / 2, 5);
	CHECK(t_post(&e, IBV_WR_RDMA_WRITE, 1, 0, BUF / 2, peer.addr + BUF / 2, peer.rkey,
		     IBV_SEND_SIGNALED) == 0);
	CHECK(t_poll(e.cq, &wc, 1, 20000) == 1 && wc.status == IBV_WC_SUCCESS);
	CHECK(t_post(&e, IBV_WR_RDMA_READ, 2, BUF / 2, BUF / 2, peer.addr, peer.rkey,
		     IBV_SEND_SIGNALED) == 0);
	CHECK(t_poll(e.cq, &wc, 1, 20000) == 1 && wc.status == IBV_WC_SUCCESS);
	{
		uint8_t *expect = malloc(BUF / 2);

		t_fill(expect, BUF / 2, 77);
		CHECK_MSG(memcmp(e.buf + BUF / 2, expect, BUF / 2) == 0, "READ data differs");
		free(expect);
	}
	{
		struct ibv_sge sge = {(uintptr_t)e.buf + 8, 8, e.mr->lkey};
		struct ibv_send_wr wr = {.sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad_wr;

		/* the target's first 8 bytes hold part of its fill pattern: swap in 1000 */
		wr.wr.atomic.remote_addr = peer.addr;
		wr.wr.atomic.rkey = peer.rkey;
		memcpy(&wr.wr.atomic.compare_add, e.buf + BUF / 2, 8); /* read above */
		wr.wr.atomic.swap = 1000;
		CHECK(ibv_post_send(e.qp, &wr, &bad_wr) == 0);
		CHECK(t_poll(e.cq, &wc, 1, 30000) == 1 && wc.status == IBV_WC_SUCCESS);
		for (int i = 0; i < 10; i++) {
			wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr.wr.atomic.compare_add = 1;
			CHECK(ibv_post_send(e.qp, &wr, &bad_wr) == 0);
			CHECK(t_poll(e.cq, &wc, 1, 30000) == 1 && wc.status == IBV_WC_SUCCESS);
		}
		CHECK_EQ_INT(*(uint64_t *)(void *)(e.buf + 8), 1009);
	}
	cmd = 'c';
	CHECK(xfer(sv[0], &cmd, 1, true) == 0);

	t_case("a SEND each way");
	memcpy(e.buf, "hello target", 13);
	CHECK(t_post(&e, IBV_WR_SEND, 3, 0, 13, 0, 0, IBV_SEND_SIGNALED) == 0);
	/* own send completion and the target's SEND to us, in either order */
	{
		struct ibv_wc w2[2];

		CHECK_EQ_INT(t_poll(e.cq, w2, 2, 30000), 2);
		CHECK(w2[0].status == IBV_WC_SUCCESS && w2[1].status == IBV_WC_SUCCESS);
	}
	CHECK(memcmp(e.buf + 128, "hello initiator", 16) == 0);
	CHECK(xfer(sv[0], &bad, sizeof(bad), false) == 0);
	CHECK_MSG(bad == 0, "the target found %d problems", bad);
	cmd = 'q';
	xfer(sv[0], &cmd, 1, true);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(sv[0]);
	t_ep_destroy(&e, true);
	return t_finish();
}
