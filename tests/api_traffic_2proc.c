/* SPDX-License-Identifier: MIT */
/*
 * api_traffic_2proc.c - the data path across two processes (fork): WRITE,
 * READ and atomics at sizes around the MTU for each MTU while the target
 * makes no verbs call, SENDs into receives posted beforehand; the target
 * checks every byte afterwards.
 *
 * Every received byte is compared, and the bytes after each target range
 * must be untouched. The endpoints and helpers are in traffic_ep.h; the
 * other api_traffic_* programs cover the same operations in one
 * process (api_traffic_sizes, api_traffic_sge, api_traffic_events).
 */
#include "harness.h"
#include "traffic.h"
#include "traffic_ep.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

/* ---- two processes ---- */

/*
 * The target (child) has one QP per MTU and one buffer:
 *   [k * REG, +REG)      WRITE landing zone for MTU k
 *   [5 * REG, +REG)      READ source (pattern 777)
 *   [6 * REG, +REG)      SEND landing slots (RECV_SLOT each)
 *   [7 * REG, +64)       atomic words, one per MTU
 * The plan is the same function in both processes.
 */
#define REG (3u * MiB)
#define T_BUF (7u * REG + 4096)
#define RECV_SLOT (64u * 1024)
#define T_SENDS 6

struct t2_addr {
	uint32_t qpn[5];
	uint32_t rkey;
	uint64_t addr;
	union ibv_gid gid;
};

/* Sizes around MTU m for the two-process case; offset of write j. */
static uint32_t t2_sizes(uint32_t m, uint32_t *s, size_t *off)
{
	uint32_t n = 0;
	size_t o = 0;

	s[n++] = 0;
	s[n++] = 1;
	s[n++] = m - 1;
	s[n++] = m;
	s[n++] = m + 1;
	s[n++] = 3 * m + 5;
	s[n++] = 65536 + 7;
	s[n++] = MiB + 3;
	for (uint32_t i = 0; i < n; i++) {
		off[i] = o;
		o += s[i] + 61;
	}
	return n;
}

static uint32_t t2_send_len(int k, int j)
{
	return (uint32_t)(j * 9001 + k * 17) % RECV_SLOT;
}

/* A setup step of the target failed: say which (its stdout is the test's). */
static int target_fail(int line)
{
	printf("# target: setup failed at line %d: %s\n", line, strerror(errno));
	fflush(stdout);
	return 1;
}

static int target(int sock)
{
	struct ibv_context *tctx = t_open_dev();
	struct ibv_pd *pd = tctx ? ibv_alloc_pd(tctx) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(tctx, 64, NULL, NULL, 0) : NULL;
	uint8_t *buf = aligned_alloc(4096, T_BUF);
	struct ibv_mr *mr = NULL;
	struct ibv_qp *qp[5] = {0};
	struct t2_addr mine, peer;
	struct ibv_wc wc[64];
	int bad = 0, got;
	char cmd;

	if (!cq || !buf)
		return target_fail(__LINE__);
	memset(buf, 0, T_BUF);
	t_fill(buf + 5 * REG, REG, 777);
	mr = ibv_reg_mr(pd, buf, T_BUF, ACC_ALL);
	if (!mr)
		return target_fail(__LINE__);
	memset(&mine, 0, sizeof(mine));
	for (int k = 0; k < 5; k++) {
		struct ibv_qp_init_attr ia = {.send_cq = cq,
					      .recv_cq = cq,
					      .qp_type = IBV_QPT_RC,
					      .cap = {.max_send_wr = 4,
						      .max_recv_wr = 16,
						      .max_send_sge = 1,
						      .max_recv_sge = 1}};

		qp[k] = ibv_create_qp(pd, &ia);
		if (!qp[k] || t_qp_init(qp[k], ACC_ALL))
			return target_fail(__LINE__);
		mine.qpn[k] = qp[k]->qp_num;
	}
	mine.rkey = mr->rkey;
	mine.addr = (uintptr_t)buf;
	if (ibv_query_gid(tctx, 1, 0, &mine.gid))
		return target_fail(__LINE__);
	if (t_xfer(sock, &mine, sizeof(mine), true) || t_xfer(sock, &peer, sizeof(peer), false))
		return target_fail(__LINE__);
	for (int k = 0; k < 5; k++) {
		if (t_qp_rts(qp[k], peer.qpn[k], &peer.gid, 1000u * (uint32_t)k, 0xffff00, mtus[k]))
			return target_fail(__LINE__);
		for (int j = 0; j < T_SENDS; j++) {
			struct ibv_sge sge = {(uintptr_t)buf + 6 * REG +
						      (size_t)(k * T_SENDS + j) * RECV_SLOT,
					      RECV_SLOT, mr->lkey};
			struct ibv_recv_wr wr = {.wr_id = (uint64_t)(k * T_SENDS + j),
						 .sg_list = &sge,
						 .num_sge = 1},
					   *rb;

			if (ibv_post_recv(qp[k], &wr, &rb))
				return target_fail(__LINE__);
		}
	}
	cmd = 'r';
	if (t_xfer(sock, &cmd, 1, true))
		return target_fail(__LINE__);
	/* no verbs calls while the initiator works: asleep in read(2) */
	if (t_xfer(sock, &cmd, 1, false))
		return target_fail(__LINE__);
	for (int k = 0; k < 5; k++) {
		uint32_t s[16], m = mtu_bytes(mtus[k]);
		size_t off[16];
		uint32_t n = t2_sizes(m, s, off);
		uint64_t w;

		for (uint32_t j = 0; j < n; j++)
			if (pattern_diff(buf + (size_t)k * REG + off[j], s[j],
					 (unsigned int)(k * 50 + j)) >= 0 ||
			    buf[(size_t)k * REG + off[j] + s[j]] != 0) {
				printf("# target: MTU %u WRITE %u (%u bytes) differs\n", m, j,
				       s[j]);
				bad++;
			}
		memcpy(&w, buf + 7 * REG + (size_t)k * 8, 8);
		if (w != 10000u * (uint32_t)k + 3 * 7) {
			printf("# target: MTU %u atomic word %llu\n", m, (unsigned long long)w);
			bad++;
		}
	}
	got = t_poll(cq, wc, 5 * T_SENDS, 5000);
	if (got != 5 * T_SENDS) {
		printf("# target: %d receive completions\n", got);
		bad++;
	}
	for (int i = 0; i < got; i++) {
		int k = (int)wc[i].wr_id / T_SENDS, j = (int)wc[i].wr_id % T_SENDS;
		uint32_t len = t2_send_len(k, j);

		if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len != len ||
		    wc[i].qp_num != qp[k]->qp_num ||
		    pattern_diff(buf + 6 * REG + wc[i].wr_id * RECV_SLOT, len,
				 (unsigned int)(900 + k * 10 + j)) >= 0) {
			printf("# target: SEND %d/%d: %s, %u bytes\n", k, j,
			       ibv_wc_status_str(wc[i].status), wc[i].byte_len);
			bad++;
		}
	}
	t_xfer(sock, &bad, sizeof(bad), true);
	t_xfer(sock, &cmd, 1, false);
	for (int k = 0; k < 5; k++)
		ibv_destroy_qp(qp[k]);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(tctx);
	free(buf);
	return bad != 0;
}

/*
 * The target is forked before the parent makes any verbs call, so that it
 * is a clean process (api_regress_fork_device covers a fork after open).
 * It waits for a byte on the socket before it starts.
 */
static int sv[2] = {-1, -1};
static pid_t pid = -1;

static void fork_target(void)
{
	char go;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		if (t_xfer(sv[1], &go, 1, false) || go != 'g')
			_exit(0); /* not needed after all */
		_exit(target(sv[1]));
	}
	close(sv[1]);
}

static void case_two_processes(void)
{
	struct ep_opts o = {.len = 4 * MiB, .depth = 16};
	struct t2_addr mine, peer;
	struct ep e[5];
	struct ibv_wc wc;
	int bad = -1, status;
	char cmd = 'g';

	t_case("two processes: every opcode across the MTU for each MTU, target asleep");
	memset(e, 0, sizeof(e));
	if (!CHECK(pid > 0) || !CHECK(t_xfer(sv[0], &cmd, 1, true) == 0))
		return;
	memset(&mine, 0, sizeof(mine));
	for (int k = 0; k < 5; k++) {
		if (ep_init(&e[k], &o))
			goto out;
		mine.qpn[k] = e[k].qp->qp_num;
	}
	mine.gid = gid;
	if (!CHECK(t_xfer(sv[0], &peer, sizeof(peer), false) == 0) ||
	    !CHECK(t_xfer(sv[0], &mine, sizeof(mine), true) == 0))
		goto out;
	CHECK_MSG(memcmp(&peer.gid, &gid, sizeof(gid)), "the two processes share a GID");
	for (int k = 0; k < 5; k++)
		if (t_qp_rts(e[k].qp, peer.qpn[k], &peer.gid, 0xffff00, 1000u * (uint32_t)k,
			     mtus[k]))
			goto out;
	if (!CHECK(t_xfer(sv[0], &cmd, 1, false) == 0))
		goto out;
	for (int k = 0; k < 5; k++) {
		uint32_t s[16], m = mtu_bytes(mtus[k]);
		size_t off[16];
		uint32_t n = t2_sizes(m, s, off);
		uint64_t tbase = peer.addr + (uint64_t)k * REG;

		/* WRITEs */
		for (uint32_t j = 0; j < n; j++) {
			t_fill(e[k].buf, s[j], (unsigned int)(k * 50 + j));
			if (post1(&e[k], IBV_WR_RDMA_WRITE, j, e[k].buf, s[j], tbase + off[j],
				  peer.rkey, IBV_SEND_SIGNALED, 0) ||
			    wait1(e[k].cq, &wc, "2proc write"))
				goto out;
		}
		/* READs of the target's pattern at sizes and odd offsets */
		for (uint32_t j = 0; j < n; j++) {
			size_t ro = 13 * j;
			long d;

			memset(e[k].buf + MiB, 0, s[j] + 8);
			if (post1(&e[k], IBV_WR_RDMA_READ, j, e[k].buf + MiB, s[j],
				  peer.addr + 5 * REG + ro, peer.rkey, IBV_SEND_SIGNALED, 0) ||
			    wait1(e[k].cq, &wc, "2proc read"))
				goto out;
			{
				uint8_t *want = malloc(ro + s[j] + 1);

				if (!CHECK(want))
					goto out;
				t_fill(want, ro + s[j], 777);
				d = memcmp(e[k].buf + MiB, want + ro, s[j]);
				CHECK_MSG(!d, "MTU %u: READ of %u bytes differs", m, s[j]);
				free(want);
			}
		}
		/* atomics: CAS 0 -> 10000k, then FAA 7 three times */
		{
			struct ibv_sge sge = {(uintptr_t)e[k].buf + 2 * MiB, 8, e[k].mr->lkey};
			struct ibv_send_wr wr, *bw;
			uint64_t got;

			memset(&wr, 0, sizeof(wr));
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
			wr.wr.atomic.remote_addr = peer.addr + 7 * REG + (uint64_t)k * 8;
			wr.wr.atomic.rkey = peer.rkey;
			wr.wr.atomic.compare_add = 0;
			wr.wr.atomic.swap = 10000u * (uint32_t)k;
			if (!CHECK_RET(ibv_post_send(e[k].qp, &wr, &bw), 0) ||
			    wait1(e[k].cq, &wc, "2proc cas"))
				goto out;
			memcpy(&got, e[k].buf + 2 * MiB, 8);
			CHECK_EQ_INT(got, 0);
			for (int i = 0; i < 3; i++) {
				wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
				wr.wr.atomic.compare_add = 7;
				if (!CHECK_RET(ibv_post_send(e[k].qp, &wr, &bw), 0) ||
				    wait1(e[k].cq, &wc, "2proc faa"))
					goto out;
				memcpy(&got, e[k].buf + 2 * MiB, 8);
				CHECK_EQ_INT(got, 10000u * (uint32_t)k + 7u * (uint32_t)i);
			}
		}
		/* SENDs into the receives posted beforehand */
		for (int j = 0; j < T_SENDS; j++) {
			uint32_t len = t2_send_len(k, j);

			t_fill(e[k].buf, len, (unsigned int)(900 + k * 10 + j));
			if (post1(&e[k], IBV_WR_SEND, (uint64_t)j, e[k].buf, len, 0, 0,
				  IBV_SEND_SIGNALED, 0) ||
			    wait1(e[k].cq, &wc, "2proc send"))
				goto out;
		}
	}
	cmd = 'c';
	CHECK(t_xfer(sv[0], &cmd, 1, true) == 0);
	CHECK(t_xfer(sv[0], &bad, sizeof(bad), false) == 0);
	CHECK_MSG(bad == 0, "the target found %d problems", bad);
out:
	cmd = 'q';
	t_xfer(sv[0], &cmd, 1, true);
	t_xfer(sv[0], &cmd, 1, true);
	close(sv[0]);
	sv[0] = -1;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int k = 0; k < 5; k++)
		ep_fini(&e[k]);
}

int main(void)
{
	t_start("api_traffic_2proc");
	signal(SIGPIPE, SIG_IGN); /* a target that died: t_xfer fails, a CHECK says so */
	fork_target();
	if (!tr_open())
		return t_finish();

	case_two_processes();

	return tr_finish();
}
