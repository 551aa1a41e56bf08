/* SPDX-License-Identifier: MIT */
/*
 * api_xrc_2proc.c - XRC between two processes, over the same-host link
 * (SOFTVERBS_SHM=1) and over UDP (SOFTVERBS_SHM=0): a sender process's
 * INI QP reaches the receiver process's TGT QP; SENDs of 1 B to 65000 B
 * land in whichever of the receiver's two XRC SRQs each names, on that
 * SRQ's CQ, with the TGT QP's number and the INI QP's as source; an
 * RDMA WRITE with immediate, a READ back and a fetch-and-add follow.
 * The receiver checks every byte and the bytes after each message.
 *
 * Both processes open their XRC domain through the same file: each gets
 * its own (the device is one per process; docs/compatibility.md, "XRC"),
 * which the traffic does not need to share.
 */
#include "harness.h"
#include "traffic.h"
#include "xrc_util.h"

#include <sys/socket.h>
#include <sys/wait.h>

/* test: timeout=120 */

#define BUF (1024u << 10)
#define SLOT (64u << 10)
#define NMSG 6
#define WOFF (8 * SLOT) /* WRITE target in the receiver's buffer */

static const uint32_t sizes[NMSG] = {1, 1000, 1024, 4097, 30000, 65000};

/* What the receiver tells the sender. */
struct rx_hello {
	struct x_addr addr;
	uint32_t srqn2;
};

/* Contract: a side whose XRC domain comes from `path` (O_CREAT); 0 or -1. */
static int side_on_file(struct x_side *s, const char *path)
{
	int fd = open(path, O_RDONLY | O_CREAT, 0600);

	if (x_side_init(s, NULL, BUF) || !CHECK(fd >= 0))
		return -1;
	/* the file's domain replaces the private one x_side_init opened */
	CHECK(ibv_destroy_qp(s->tgt) == 0 && ibv_destroy_srq(s->srq) == 0 &&
	      ibv_close_xrcd(s->xrcd) == 0);
	s->xrcd = x_open_xrcd(s->ctx, fd, O_CREAT);
	close(fd);
	if (!CHECK(s->xrcd))
		return -1;
	s->srq = x_srq(s->ctx, s->pd, s->xrcd, s->rcq, 64);
	s->tgt = x_tgt(s->ctx, s->xrcd);
	if (!CHECK(s->srq && s->tgt) || !CHECK(ibv_get_srq_num(s->srq, &s->srqn) == 0))
		return -1;
	return t_qp_init(s->tgt, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					 IBV_ACCESS_REMOTE_ATOMIC);
}

/* Contract: `n` completions on `cq` within 20 s, all successful, into wc[]; 0 or -1. */
static int wait_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, const char *what)
{
	int got = t_poll(cq, wc, n, 20000);

	if (!CHECK_MSG(got == n, "%s: %d of %d completions", what, got, n))
		return -1;
	for (int i = 0; i < n; i++)
		if (!CHECK_MSG(wc[i].status == IBV_WC_SUCCESS, "%s: %s", what,
			       ibv_wc_status_str(wc[i].status)))
			return -1;
	return 0;
}

/* The receiver: TGT QP, two XRC SRQs; checks every message. */
static void receiver(int sock, const char *path)
{
	struct x_side s;
	struct rx_hello me;
	struct x_addr peer;
	struct ibv_srq *s2;
	struct ibv_wc wc[NMSG + 1];
	char ready = 'r', done;

	if (side_on_file(&s, path))
		return;
	s2 = x_srq(s.ctx, s.pd, s.xrcd, s.scq, 64); /* completes on the other CQ */
	memset(&me, 0, sizeof(me));
	if (!CHECK(s2) || !CHECK(ibv_get_srq_num(s2, &me.srqn2) == 0))
		return;
	me.addr = x_addr_of(&s);
	memset(s.buf, 0xee, BUF);
	for (uint32_t i = 0; i < NMSG; i++)
		CHECK(x_recv(&s, i & 1 ? s2 : s.srq, i, i * SLOT, SLOT - 64) == 0);
	CHECK(x_recv(&s, s.srq, 100, 0, 0) == 0); /* for the WRITE with immediate */
	if (t_xfer(sock, &me, sizeof(me), true) || t_xfer(sock, &peer, sizeof(peer), false) ||
	    x_tgt_rts(s.tgt, peer.ini, &peer.gid, 0x333) || t_xfer(sock, &ready, 1, true))
		return;
	/* odd messages went to SRQ 2 (CQ scq), even ones to SRQ 1 (CQ rcq) */
	if (!wait_n(s.rcq, wc, NMSG / 2 + 1, "SRQ 1") &&
	    !wait_n(s.scq, wc + NMSG / 2 + 1, NMSG / 2, "SRQ 2")) {
		for (int k = 0; k < NMSG + 1; k++) {
			uint32_t i = (uint32_t)wc[k].wr_id;

			CHECK_EQ_INT(wc[k].qp_num, s.tgt->qp_num);
			CHECK_EQ_INT(wc[k].src_qp, peer.ini);
			if (i == 100) {
				CHECK(wc[k].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
				      ntohl(wc[k].imm_data) == 0x1234 && wc[k].byte_len == SLOT);
				continue;
			}
			if (!CHECK_MSG(i < NMSG && wc[k].byte_len == sizes[i], "wr_id %u len %u", i,
				       wc[k].byte_len))
				continue;
			t_fill(s.buf + WOFF + SLOT, sizes[i], i); /* the sender's pattern */
			CHECK_MSG(!memcmp(s.buf + i * SLOT, s.buf + WOFF + SLOT, sizes[i]) &&
					  s.buf[i * SLOT + sizes[i]] == 0xee,
				  "message %u (%u bytes) differs", i, sizes[i]);
		}
		t_fill(s.buf + WOFF + SLOT, SLOT, 77);
		CHECK_MSG(!memcmp(s.buf + WOFF, s.buf + WOFF + SLOT, SLOT), "WRITE data differs");
	}
	/* the sender READs back and adds; then it says it is done */
	if (!t_xfer(sock, &done, 1, false))
		CHECK(*(uint64_t *)(void *)(s.buf + BUF - 8) == 0xeeeeeeeeeeeeeeeeull + 5);
	CHECK(ibv_destroy_srq(s2) == 0);
	x_side_destroy(&s, true);
}

/* The sender: INI QP; SENDs to both SRQs, WRITE with immediate, READ, fetch-and-add. */
static void sender(int sock, const char *path)
{
	struct x_side s;
	struct rx_hello peer;
	struct x_addr me;
	struct ibv_wc wc[NMSG + 3];
	char ready, done = 'd';

	if (side_on_file(&s, path))
		return;
	me = x_addr_of(&s);
	if (t_xfer(sock, &peer, sizeof(peer), false) || t_xfer(sock, &me, sizeof(me), true) ||
	    x_ini_rts(s.ini, peer.addr.tgt, &peer.addr.gid, 0x333) ||
	    t_xfer(sock, &ready, 1, false))
		return;
	for (uint32_t i = 0; i < NMSG; i++) {
		t_fill(s.buf + i * SLOT, sizes[i], i);
		CHECK(x_post(&s, IBV_WR_SEND, i, i * SLOT, sizes[i],
			     i & 1 ? peer.srqn2 : peer.addr.srqn, 0, 0, 0) == 0);
	}
	t_fill(s.buf + WOFF, SLOT, 77);
	CHECK(x_post(&s, IBV_WR_RDMA_WRITE_WITH_IMM, 50, WOFF, SLOT, peer.addr.srqn,
		     peer.addr.addr + WOFF, peer.addr.rkey, 0x1234) == 0);
	memset(s.buf + WOFF + SLOT, 0, SLOT);
	CHECK(x_post(&s, IBV_WR_RDMA_READ, 51, WOFF + SLOT, SLOT, peer.addr.srqn,
		     peer.addr.addr + WOFF, peer.addr.rkey, 0) == 0);
	CHECK(x_post(&s, IBV_WR_ATOMIC_FETCH_AND_ADD, 52, 8, 8, peer.addr.srqn,
		     peer.addr.addr + BUF - 8, peer.addr.rkey, 0) == 0);
	if (!wait_n(s.scq, wc, NMSG + 3, "sends")) {
		CHECK_MSG(!memcmp(s.buf + WOFF, s.buf + WOFF + SLOT, SLOT), "READ data differs");
		CHECK(*(uint64_t *)(void *)(s.buf + 8) == 0xeeeeeeeeeeeeeeeeull);
	}
	CHECK(t_xfer(sock, &done, 1, true) == 0);
	x_side_destroy(&s, true);
}

/* Contract: fork `fn` with SOFTVERBS_SHM=`shm`; its pid. The child exits 1 if a check failed. */
static pid_t spawn(void (*fn)(int, const char *), int sock, const char *path, const char *shm)
{
	pid_t pid = fork();

	if (pid == 0) {
		setenv("SOFTVERBS_SHM", shm, 1);
		fn(sock, path);
		fflush(stdout);
		_exit(t_st()->failed ? 1 : 0);
	}
	return pid;
}

int main(void)
{
	static const char *const modes[] = {"1", "0"};
	char path[] = "/tmp/api_xrc_2proc_XXXXXX";
	int tmp;

	t_start("api_xrc_2proc");
	tmp = mkstemp(path);
	if (!CHECK(tmp >= 0))
		return t_finish();
	close(tmp);
	for (size_t m = 0; m < 2; m++) {
		int sv[2], st_r = -1, st_s = -1;
		pid_t r, s;

		t_case(m ? "SOFTVERBS_SHM=0: over UDP" :
			   "SOFTVERBS_SHM=1: over the same-host link");
		if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0))
			continue;
		r = spawn(receiver, sv[0], path, modes[m]);
		s = spawn(sender, sv[1], path, modes[m]);
		close(sv[0]);
		close(sv[1]);
		CHECK(r > 0 && s > 0);
		if (r > 0)
			waitpid(r, &st_r, 0);
		if (s > 0)
			waitpid(s, &st_s, 0);
		CHECK_MSG(WIFEXITED(st_r) && WEXITSTATUS(st_r) == 0, "receiver: status %#x", st_r);
		CHECK_MSG(WIFEXITED(st_s) && WEXITSTATUS(st_s) == 0, "sender: status %#x", st_s);
	}
	unlink(path);
	return t_finish();
}
