/* SPDX-License-Identifier: MIT */
/*
 * twoproc.h - one operation between two processes, each with its own
 * device, over the same-host link (SOFTVERBS_SHM=1) or over UDP
 * (SOFTVERBS_SHM=0).
 *
 * tp_run() forks a worker, which sets SOFTVERBS_SHM and forks the target
 * before any verbs call, so each side is a clean process; the worker is
 * the initiator. The two talk over a socket pair (t_xfer). Each side's
 * CHECKs print in its own process; tp_run() is true when both exited
 * without a failed check. Call it before the test process makes any
 * verbs call of its own.
 */
#ifndef SV_TESTS_TWOPROC_H
#define SV_TESTS_TWOPROC_H

#include "harness.h" /* first: it defines _GNU_SOURCE */

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "traffic.h"

/* One side: `sock` to the other, `arg` as given to tp_run(). */
typedef void (*tp_side)(int sock, void *arg);

/* Contract: true if `pid` exited with status 0. */
static inline bool tp_wait_ok(pid_t pid)
{
	int st;

	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Contract: the worker's body (see the top); never returns. */
static inline void tp_worker(bool shm, tp_side target, tp_side initiator, void *arg)
{
	int sv[2];
	pid_t self = getpid(), t;
	bool ok;

	t_st()->failed = 0;
	signal(SIGPIPE, SIG_IGN); /* a side that died: t_xfer fails, a CHECK says so */
	setenv("SOFTVERBS_SHM", shm ? "1" : "0", 1);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		_exit(1);
	fflush(stdout);
	t = fork();
	if (t == 0) {
		t_die_with(self);
		close(sv[0]);
		target(sv[1], arg);
		close(sv[1]);
		_exit(t_st()->failed ? 1 : 0);
	}
	close(sv[1]);
	if (t > 0)
		initiator(sv[0], arg);
	close(sv[0]);
	ok = t > 0 && tp_wait_ok(t);
	if (!ok)
		printf("# FAIL: the target process failed\n");
	_exit(t_st()->failed || !ok ? 1 : 0);
}

/* Contract: run `target` and `initiator` in two processes (see the top); true if both passed. */
static inline bool tp_run(bool shm, tp_side target, tp_side initiator, void *arg)
{
	pid_t parent = getpid(), w;

	fflush(stdout);
	w = fork();
	if (w == 0) {
		t_die_with(parent);
		tp_worker(shm, target, initiator, arg);
	}
	return w > 0 && tp_wait_ok(w);
}

/*
 * Contract: connect `e` (set up by t_ep_init) with its peer over `sock`:
 * send our address, read the peer's into *peer, move to RTS at MTU 1024.
 * `psn` is our first PSN. 0 or -1.
 */
static inline int tp_connect(int sock, struct t_ep *e, uint32_t psn, struct t_addr *peer)
{
	struct t_addr mine = t_addr_of(e, psn);

	if (!CHECK(t_xfer(sock, &mine, sizeof(mine), true) == 0) ||
	    !CHECK(t_xfer(sock, peer, sizeof(*peer), false) == 0))
		return -1;
	return t_connect_to(e, peer, psn, IBV_MTU_1024);
}

/* Contract: the next completion on `cq` is `wr_id` with `status` (and `op` on success). */
static inline bool tp_expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status,
				enum ibv_wc_opcode op)
{
	struct ibv_wc wc;

	if (!CHECK_EQ_INT(t_poll(cq, &wc, 1, 10000), 1))
		return false;
	return CHECK_MSG(wc.wr_id == wr_id && wc.status == status &&
				 (status != IBV_WC_SUCCESS || wc.opcode == op),
			 "wr %llu: %s, opcode %d; want %s, %d", (unsigned long long)wc.wr_id,
			 ibv_wc_status_str(wc.status), wc.opcode, ibv_wc_status_str(status), op);
}

/* Contract: destroy two endpoints of this process, each with its own device. */
static inline void tp_unpair(struct t_ep *a, struct t_ep *b)
{
	t_ep_destroy(a, true);
	t_ep_destroy(b, true);
}

/*
 * Contract: the whole test: `what` between two processes over the link
 * and over UDP (one case each), then `in_process` once with
 * SOFTVERBS_SHM=1 and once with 0. Call from main() after t_start().
 */
static inline void tp_both_modes(const char *what, tp_side target, tp_side initiator,
				 void (*in_process)(void))
{
	static char names[2][160]; /* t_case() keeps the pointer */

	for (int m = 0; m < 2; m++) {
		snprintf(names[m], sizeof(names[m]), "two processes, %s: %s",
			 m ? "UDP" : "same-host link", what);
		t_case(names[m]);
		CHECK_MSG(tp_run(!m, target, initiator, NULL), "a process failed");
	}
	for (int m = 0; m < 2; m++) {
		setenv("SOFTVERBS_SHM", m ? "0" : "1", 1);
		printf("# SOFTVERBS_SHM=%d\n", !m);
		in_process();
	}
}

#endif
