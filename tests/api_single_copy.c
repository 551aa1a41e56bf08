/* SPDX-License-Identifier: MIT */
/*
 * api_single_copy: the same-host link's single copy (docs/single-copy.md)
 * between two processes, A (initiator) and B (target), each with
 * SOFTVERBS_STATS=1 read back from its stderr.
 *
 *   a. default: WRITE 1 MiB, WRITE 200 KiB from three SGEs, SEND 200 KiB
 *      into a receive WQE of three SGEs, WRITE with immediate 64 KiB:
 *      every byte lands where it should and nothing around it moves; A
 *      sent packets by reference and B pulled bytes;
 *   b. SOFTVERBS_SINGLE_COPY=0 in B: the same bytes, A sent nothing by
 *      reference (B never accepted pulls), B pulled nothing;
 *   c. B cannot read A's memory (a seccomp filter makes
 *      process_vm_readv(2) fail with EPERM, as a container's may): the
 *      same bytes, over copies;
 *   d. bounds: a WRITE that runs past B's MR ends in REM_ACCESS_ERR
 *      and none of its bytes land (the checks come before any pull);
 *   e. B deregisters its MR while A streams 1 MiB WRITEs into it: A's
 *      completions are successes, then REM_ACCESS_ERR (and flushes);
 *      once ibv_dereg_mr returned, B's buffer (still mapped) never
 *      changes again;
 *   f. fork: A's child rewrites its copy of A's source (copy on write)
 *      while A WRITEs it: B gets A's bytes, not the child's;
 *   g. root only: B runs as another user (uid 65534): no link, so no
 *      packet by reference; the bytes arrive over UDP;
 *   h. B deregisters its MR while A streams 1 MiB READs from it:
 *      ibv_dereg_mr returns within 1.5 s, A's READs then fail with
 *      REM_ACCESS_ERR, nothing else, and the ones that succeeded hold
 *      B's bytes, not what B wrote over them after the dereg.
 *   i. A exits with 8 MiB of WRITEs in flight (B may find A gone
 *      half-way through pulling them): B's QP stays in RTS, as a NIC's
 *      whose peer died; nothing crashes.
 *   j. A deregisters the MR its 1 MiB READs land in while B, stopped
 *      (SIGSTOP), has 4 of them by reference in its ring: ibv_dereg_mr
 *      waits until A's hold on them expires (about 1 s); A overwrites
 *      the buffer (still mapped) and resumes B, which must then answer
 *      with bytes, not write them into A: the buffer never changes, and
 *      the READs end in LOC_PROT_ERR and flushes.
 *   k. B may read A's memory but not write it (a seccomp filter on
 *      process_vm_writev): A still asks its READs by reference, B's
 *      writes fail and it answers with the bytes; every byte checked.
 *   l-o. A's memory comes from ibv_alloc_buf (mem/buf_share.c): B maps
 *      A's buffer and copies with memcpy (it reports bytes copied from
 *      mapped buffers); l as a, m as d, n as e, o as f but A's child
 *      checks that the buffer is not mapped in it (always MADV_DONTFORK);
 *   p. as l, but B may not take A's memfd (seccomp on pidfd_getfd(2)):
 *      B pulls with process_vm_readv instead, nothing mapped; same bytes.
 *   q. B, stopped, gets a burst in its ring: a READ of 64 KiB by
 *      reference, a WRITE over what it reads, the same READ again, 7
 *      more, a small READ (with bytes). B writes the READs by reference
 *      with fewer system calls than READs (transport/resp_hold.c); the
 *      first READ still has B's bytes from before the WRITE, the second
 *      the WRITE's, every READ succeeds in order, and A asked nothing
 *      again while B was stopped (its tail-loss probe waits for a link
 *      peer that is behind, from the first probe on).
 * Cases a, b, c, f, l, o and p also READ 1 MiB and 200 KiB into three SGEs from B
 * and check every byte at A. Where single copy is used, A asks its READs
 * by reference and B writes the bytes into A itself (B pushed bytes, its
 * placed responses count as sent by reference); A never pulls: a READ's
 * bytes are the MR's when B answered, which a later atomic or WRITE may
 * change.
 */
#include "harness.h"
#include "stats.h"
#include "traffic.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

/* test: timeout=240 */

#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

enum {
	BUF = 8 << 20,
	W1_OFF = 0, /* WRITE 1 MiB */
	W1_LEN = 1 << 20,
	W2_OFF = 2 << 20, /* WRITE 200 KiB from three SGEs */
	W2_LEN = 200 << 10, /* the three pieces of s_piece */
	S_OFF = 3 << 20, /* SEND 200 KiB: three receive SGEs from here */
	S_LEN = 200 << 10,
	I_OFF = 4 << 20, /* WRITE with immediate 64 KiB */
	I_LEN = 64 << 10,
	SRC_OFF = 5 << 20, /* A's sources */
	R_OFF = 6 << 20, /* B: what A READs (1 MiB); A: where the READ lands */
	R3_OFF = 7 << 20, /* A: a READ of 200 KiB lands in three pieces from here */
	OV_OFF = W1_LEN - 8191, /* a WRITE of OV_LEN over the end of WRITE 1 MiB */
	OV_LEN = 16 << 10,
	OV_SRC = 1536 << 10, /* its source: A's SRC_OFF + this */
};

enum mode {
	M_DATA,
	M_BOUNDS,
	M_DEREG,
	M_FORK,
	M_DEREG_READ,
	M_EXIT,
	M_DEREG_SINK,
	M_READ_BURST
};

struct pcfg {
	enum mode mode;
	bool b_no_pull, b_seccomp, b_seccomp_w, b_other_uid;
	bool a_buf; /* A's memory from ibv_alloc_buf */
	bool b_seccomp_fd; /* pidfd_getfd fails in B */
	int sock; /* this side's end */
};

/* The receive WQE's three pieces (B) and the WRITE's three sources (A): gaps between. */
static const struct {
	uint32_t off, len;
} s_piece[3] = {{0, 50 << 10}, {64 << 10, 100 << 10}, {192 << 10, 50 << 10}};

static void write_env(const struct pcfg *c, bool b)
{
	setenv("SOFTVERBS_STATS", "1", 1);
	setenv("SOFTVERBS_SHM", "1", 1);
	if (b && c->b_no_pull)
		setenv("SOFTVERBS_SINGLE_COPY", "0", 1);
	else
		unsetenv("SOFTVERBS_SINGLE_COPY");
}

/* Make process_vm_readv(2) (or process_vm_writev) fail with EPERM in this process. */
static bool no_vm_call(long nr)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = SV_ARRAY_N(f), .filter = f};

	return !prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) &&
	       !prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static int post_recv3(struct t_ep *e)
{
	struct ibv_sge sge[3];
	struct ibv_recv_wr wr = {.wr_id = 7, .sg_list = sge, .num_sge = 3}, *bad;

	for (int i = 0; i < 3; i++)
		sge[i] = (struct ibv_sge){.addr = (uintptr_t)e->buf + S_OFF + s_piece[i].off,
					  .length = s_piece[i].len,
					  .lkey = e->mr->lkey};
	return ibv_post_recv(e->qp, &wr, &bad);
}

/*
 * Post a WRITE or SEND of the three source pieces at SRC_OFF + 1 MiB, or
 * a READ into the three pieces at R3_OFF.
 */
static int post3(struct t_ep *e, enum ibv_wr_opcode op, uint64_t id, uint64_t raddr, uint32_t rkey)
{
	size_t base = op == IBV_WR_RDMA_READ ? R3_OFF : SRC_OFF + (1 << 20);
	struct ibv_sge sge[3];
	struct ibv_send_wr wr = {0}, *bad;

	for (int i = 0; i < 3; i++)
		sge[i] = (struct ibv_sge){.addr = (uintptr_t)e->buf + base + s_piece[i].off,
					  .length = s_piece[i].len,
					  .lkey = e->mr->lkey};
	wr.wr_id = id;
	wr.sg_list = sge;
	wr.num_sge = 3;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

/* The bytes of the three pieces, one after the other (what B gets). */
static void gather3(const uint8_t *base, uint8_t *out)
{
	for (int i = 0; i < 3; i++) {
		memcpy(out, base + s_piece[i].off, s_piece[i].len);
		out += s_piece[i].len;
	}
}

static bool same(const uint8_t *a, const uint8_t *b, size_t n, const char *what)
{
	return CHECK_MSG(!memcmp(a, b, n), "%s: bytes differ", what);
}

static bool all_zero(const uint8_t *p, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return CHECK_MSG(false, "%s: byte %zu changed", what, i);
	return true;
}

/* ---- B ---- */

static void b_check_data(struct t_ep *e)
{
	uint8_t *want = malloc(W2_LEN), *src = malloc(2 << 20);
	struct ibv_wc wc;

	if (!CHECK(want && src))
		goto out;
	t_fill(src, 2 << 20, 11); /* A's source area, as A filled it */
	/* WRITE 1 MiB, then OV_LEN bytes from OV_SRC over its end, at OV_OFF */
	same(e->buf + W1_OFF, src, OV_OFF, "WRITE 1 MiB");
	same(e->buf + W1_OFF + OV_OFF, src + OV_SRC, OV_LEN,
	     "a WRITE over its end, posted after it");
	all_zero(e->buf + W1_OFF + OV_OFF + OV_LEN, 4096, "after those WRITEs");
	gather3(src + (1 << 20), want);
	same(e->buf + W2_OFF, want, W2_LEN, "WRITE from three SGEs");
	all_zero(e->buf + W2_OFF + W2_LEN, 4096, "after that WRITE");
	/* the SEND: want = its 200 KiB, scattered over the three receive pieces */
	{
		size_t at = 0;

		for (int i = 0; i < 3; i++) {
			same(e->buf + S_OFF + s_piece[i].off, want + at, s_piece[i].len, "SEND");
			at += s_piece[i].len;
		}
		all_zero(e->buf + S_OFF + (50 << 10), (64 - 50) << 10, "SEND gap");
	}
	same(e->buf + I_OFF, src, I_LEN, "WRITE with immediate");
	for (int n = 0; n < 2; n++) {
		if (!CHECK_EQ_INT(t_poll(e->cq, &wc, 1, 5000), 1))
			break;
		CHECK_MSG(wc.status == IBV_WC_SUCCESS, "B's completion: %s",
			  ibv_wc_status_str(wc.status));
		if (wc.opcode == IBV_WC_RECV)
			CHECK_EQ_INT((int)wc.byte_len, S_LEN);
		else
			CHECK(wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len == I_LEN);
	}
out:
	free(want);
	free(src);
}

/*
 * Deregister while A writes (or reads: then within the bound on how long
 * the link keeps an MR for READ responses); then the buffer must stay
 * as it is.
 */
static void b_dereg(struct t_ep *e, int sock)
{
	uint64_t t0;
	char c;

	if (!CHECK(t_xfer(sock, &c, 1, false) == 0)) /* A is streaming */
		return;
	t0 = t_ms();
	CHECK_EQ_INT(ibv_dereg_mr(e->mr), 0);
	CHECK_MSG(t_ms() - t0 < 1500, "ibv_dereg_mr took %llu ms",
		  (unsigned long long)(t_ms() - t0));
	e->mr = NULL;
	memset(e->buf, 0xee, 2 << 20);
	usleep(200 * 1000); /* A's WRITEs keep coming meanwhile */
	for (size_t i = 0; i < (2u << 20); i++)
		if (e->buf[i] != 0xee) {
			CHECK_MSG(false, "byte %zu changed after ibv_dereg_mr returned", i);
			break;
		}
	t_xfer(sock, &c, 1, true);
}

/*
 * A exits with WRITEs in flight, which may be half pulled: B's QP must
 * not go to the error state for it, and nothing may crash.
 */
static void b_after_exit(struct t_ep *e, int sock)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	char c;

	(void)t_xfer(sock, &c, 1, false); /* EOF: A is gone */
	usleep(300 * 1000);
	if (CHECK(!ibv_query_qp(e->qp, &a, IBV_QP_STATE, &ia)))
		CHECK_MSG(a.qp_state == IBV_QPS_RTS, "B's QP is in state %d", a.qp_state);
}

static int side_b(void *arg, int out)
{
	const struct pcfg *c = arg;
	struct t_addr mine, peer;
	struct t_ep e;
	char cmd = 0;

	signal(SIGPIPE, SIG_IGN); /* A may be gone before B's last word: not a death */
	write_env(c, true);
	if (c->b_other_uid && (setgid(65534) || setuid(65534)))
		return 2;
	if ((c->b_seccomp && !CHECK(no_vm_call(SYS_process_vm_readv))) ||
	    (c->b_seccomp_w && !CHECK(no_vm_call(SYS_process_vm_writev))) ||
	    (c->b_seccomp_fd && !CHECK(no_vm_call(SYS_pidfd_getfd))))
		return 1;
	if (t_ep_init(&e, NULL, IBV_QPT_RC, BUF, ACC, 256))
		return 1;
	t_fill(e.buf + R_OFF, 1 << 20, 23); /* what A READs */
	mine = t_addr_of(&e, 100);
	if (t_xfer(c->sock, &mine, sizeof(mine), true) ||
	    t_xfer(c->sock, &peer, sizeof(peer), false))
		return 1;
	if (!CHECK(t_connect_to(&e, &peer, 100, IBV_MTU_4096) == 0) || !CHECK(!post_recv3(&e)) ||
	    !CHECK(!t_post_recv(&e, 8, BUF - 64, 64)))
		return 1;
	t_xfer(c->sock, &cmd, 1, true); /* ready */
	if (c->mode == M_DEREG_SINK || c->mode == M_READ_BURST) { /* A stops us for a while */
		pid_t me = getpid();

		t_xfer(c->sock, &me, sizeof(me), true);
	}
	if (c->mode == M_EXIT) {
		b_after_exit(&e, c->sock);
		t_ep_destroy(&e, true);
		return t_st()->failed ? 1 : 0;
	}
	if (c->mode == M_DEREG || c->mode == M_DEREG_READ)
		b_dereg(&e, c->sock); /* it answers A itself */
	else if (!t_xfer(c->sock, &cmd, 1, false) && cmd == 'V' && c->mode != M_BOUNDS &&
		 c->mode != M_DEREG_SINK && c->mode != M_READ_BURST)
		b_check_data(&e);
	else if (cmd == 'V')
		all_zero(e.buf + BUF - (32 << 10), (32 << 10) - 64, "the end of the MR");
	if (c->mode != M_DEREG && c->mode != M_DEREG_READ)
		t_xfer(c->sock, &cmd, 1, true);
	t_ep_destroy(&e, true);
	(void)out;
	return t_st()->failed ? 1 : 0;
}

/* ---- A ---- */

static bool a_wait(struct t_ep *e, uint64_t id, enum ibv_wc_status want)
{
	struct ibv_wc wc;

	if (!CHECK_EQ_INT(t_poll(e->cq, &wc, 1, 10000), 1))
		return false;
	return CHECK_MSG(wc.wr_id == id && wc.status == want, "wr %llu: %s, want %s",
			 (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
			 ibv_wc_status_str(want));
}

/* Warm up: the link comes up asynchronously; the first packets may go by UDP. */
static void a_warm(struct t_ep *e, const struct t_addr *peer)
{
	for (int i = 0; i < 4; i++) {
		if (!CHECK(!t_post(e, IBV_WR_RDMA_WRITE, 90, SRC_OFF, 64 << 10, peer->addr + W1_OFF,
				   peer->rkey, IBV_SEND_SIGNALED)))
			return;
		a_wait(e, 90, IBV_WC_SUCCESS);
		usleep(100 * 1000);
	}
}

/* The READs landed: 1 MiB at R_OFF, its first 200 KiB in three pieces at R3_OFF. */
static void a_check_reads(struct t_ep *e)
{
	uint8_t *want = malloc(1 << 20);
	size_t at = 0;

	if (!CHECK(want))
		return;
	t_fill(want, 1 << 20, 23);
	same(e->buf + R_OFF, want, 1 << 20, "READ 1 MiB");
	for (int i = 0; i < 3; i++) {
		same(e->buf + R3_OFF + s_piece[i].off, want + at, s_piece[i].len,
		     "READ into three SGEs");
		at += s_piece[i].len;
	}
	all_zero(e->buf + R3_OFF + (50 << 10), (64 - 50) << 10, "READ gap");
	free(want);
}

static void a_data(struct t_ep *e, const struct t_addr *peer, bool fork_child)
{
	struct ibv_send_wr wr = {0}, *bad;
	struct ibv_sge sge;
	pid_t child = -1;
	int pfd[2];

	if (fork_child && CHECK(!pipe(pfd))) {
		child = fork();
		if (child == 0) { /* rewrite our copy of the sources, then wait to be told */
			char c;

			if (!e->ibuf) /* a shared ibv_alloc_buf buffer is not in the child */
				memset(e->buf + SRC_OFF, 0x5a, 2 << 20);
			else if (!CHECK_MSG(!t_mapped(e->buf), "the buffer is in the child"))
				_exit(1);
			close(pfd[1]);
			(void)!read(pfd[0], &c, 1);
			_exit(0);
		}
		close(pfd[0]);
	}
	CHECK(!t_post(e, IBV_WR_RDMA_WRITE, 1, SRC_OFF, W1_LEN, peer->addr + W1_OFF, peer->rkey,
		      IBV_SEND_SIGNALED));
	/* overlapping WRITEs land in posting order (place_pull.c: a later one waits) */
	CHECK(!t_post(e, IBV_WR_RDMA_WRITE, 7, SRC_OFF + OV_SRC, OV_LEN,
		      peer->addr + W1_OFF + OV_OFF, peer->rkey, IBV_SEND_SIGNALED));
	CHECK(!post3(e, IBV_WR_RDMA_WRITE, 2, peer->addr + W2_OFF, peer->rkey));
	CHECK(!post3(e, IBV_WR_SEND, 3, 0, 0));
	sge = (struct ibv_sge){
		.addr = (uintptr_t)e->buf + SRC_OFF, .length = I_LEN, .lkey = e->mr->lkey};
	wr.wr_id = 4;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htobe32(0x1234);
	wr.wr.rdma.remote_addr = peer->addr + I_OFF;
	wr.wr.rdma.rkey = peer->rkey;
	CHECK(!ibv_post_send(e->qp, &wr, &bad));
	CHECK(!t_post(e, IBV_WR_RDMA_READ, 5, R_OFF, 1 << 20, peer->addr + R_OFF, peer->rkey,
		      IBV_SEND_SIGNALED));
	CHECK(!post3(e, IBV_WR_RDMA_READ, 6, peer->addr + R_OFF, peer->rkey));
	for (int i = 0; i < 7; i++) /* in posting order */
		a_wait(e, (uint64_t[]){1, 7, 2, 3, 4, 5, 6}[i], IBV_WC_SUCCESS);
	a_check_reads(e);
	if (child > 0) {
		close(pfd[1]);
		int st;

		CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st));
	}
}

static void a_bounds(struct t_ep *e, const struct t_addr *peer)
{
	/* 64 KiB from 32 KiB before the end of B's MR */
	CHECK(!t_post(e, IBV_WR_RDMA_WRITE, 5, SRC_OFF, 64 << 10, peer->addr + BUF - (32 << 10),
		      peer->rkey, IBV_SEND_SIGNALED));
	a_wait(e, 5, IBV_WC_REM_ACCESS_ERR);
}

/* Stream 1 MiB WRITEs (or READs) until the dereg shows; count what came back. */
static void a_dereg(struct t_ep *e, const struct t_addr *peer, int sock, bool read)
{
	int posted = 0, done = 0, ok = 0, access = 0, flushed = 0, other = 0;
	bool told = false;
	uint64_t end = t_ms() + 15000;
	char c = 'D';

	while (t_ms() < end && !access) {
		struct ibv_wc wc[8];
		int n;

		while (posted - done < 8 && !access)
			if (t_post(e, read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
				   100 + (uint64_t)posted, read ? R_OFF : SRC_OFF, 1 << 20,
				   peer->addr + (read ? R_OFF : 0), peer->rkey, IBV_SEND_SIGNALED))
				break;
			else
				posted++;
		n = ibv_poll_cq(e->cq, 8, wc);
		for (int i = 0; i < n; i++) {
			done++;
			ok += wc[i].status == IBV_WC_SUCCESS;
			access += wc[i].status == IBV_WC_REM_ACCESS_ERR;
			flushed += wc[i].status == IBV_WC_WR_FLUSH_ERR;
			other += wc[i].status != IBV_WC_SUCCESS &&
				 wc[i].status != IBV_WC_REM_ACCESS_ERR &&
				 wc[i].status != IBV_WC_WR_FLUSH_ERR;
		}
		if (!told && ok >= 8) {
			told = true;
			t_xfer(sock, &c, 1, true);
		}
	}
	CHECK_MSG(told && access == 1 && !other, "ok %d, access errors %d, flushed %d, other %d",
		  ok, access, flushed, other);
	t_xfer(sock, &c, 1, false); /* B looked at its buffer */
	if (read) { /* the READs that succeeded read B's bytes before its dereg returned */
		uint8_t *want = malloc(1 << 20);

		if (CHECK(want)) {
			t_fill(want, 1 << 20, 23);
			same(e->buf + R_OFF, want, 1 << 20, "READ before the dereg");
		}
		free(want);
	}
}

/*
 * READs by reference that B has not answered when A deregisters their
 * MR: B is stopped (SIGSTOP) with 4 of them in its ring. ibv_dereg_mr
 * must wait for A's hold on them to run out (about 1 s), and B, resumed,
 * must not write into the MR any more: it finds the hold expired and
 * answers with bytes, which A refuses (LOC_PROT_ERR, then flushes).
 */
static void a_dereg_sink(struct t_ep *e, const struct t_addr *peer, int sock)
{
	int ok = 0, prot = 0, flushed = 0, other = 0;
	uint64_t posted_at, t0, waited, held;
	pid_t b = 0;

	if (t_xfer(sock, &b, sizeof(b), false) || !CHECK(b > 0))
		return;
	for (int i = 0; i < 8; i++) {
		if (!CHECK(!t_post(e, IBV_WR_RDMA_READ, 100 + (uint64_t)i, R_OFF, 1 << 20,
				   peer->addr + R_OFF, peer->rkey, IBV_SEND_SIGNALED)))
			return;
		a_wait(e, 100 + (uint64_t)i, IBV_WC_SUCCESS);
	}
	if (!CHECK(!kill(b, SIGSTOP)))
		return;
	usleep(50 * 1000);
	posted_at = t_ms();
	for (int i = 0; i < 4; i++)
		CHECK(!t_post(e, IBV_WR_RDMA_READ, 200 + (uint64_t)i, R_OFF, 1 << 20,
			      peer->addr + R_OFF, peer->rkey, IBV_SEND_SIGNALED));
	usleep(50 * 1000); /* the requests are in B's ring */
	t0 = t_ms();
	CHECK(ibv_dereg_mr(e->mr) == 0);
	waited = t_ms() - t0;
	held = t_ms() - posted_at;
	e->mr = NULL;
	memset(e->buf + R_OFF, 0xee, 1 << 20); /* from here on nothing may change */
	CHECK(!kill(b, SIGCONT));
	for (int i = 0; i < 4; i++) {
		struct ibv_wc wc;

		if (!CHECK_EQ_INT(t_poll(e->cq, &wc, 1, 10000), 1))
			break;
		ok += wc.status == IBV_WC_SUCCESS;
		prot += wc.status == IBV_WC_LOC_PROT_ERR;
		flushed += wc.status == IBV_WC_WR_FLUSH_ERR;
		other += wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_LOC_PROT_ERR &&
			 wc.status != IBV_WC_WR_FLUSH_ERR;
	}
	usleep(100 * 1000);
	printf("# ibv_dereg_mr waited %llu ms (%llu ms after the READs were posted); the 4 READs: "
	       "ok %d, LOC_PROT_ERR %d, flushed %d, other %d\n",
	       (unsigned long long)waited, (unsigned long long)held, ok, prot, flushed, other);
	/* the hold is taken after posted_at and lasts SHM_HOLD_NS (1 s) */
	CHECK_MSG(held >= 990, "ibv_dereg_mr returned %llu ms after the READs, unanswered",
		  (unsigned long long)held);
	CHECK_MSG(!ok && prot == 1 && flushed == 3 && !other,
		  "the READs did not fail as they should");
	for (size_t i = 0; i < 1 << 20; i++)
		if (!CHECK_MSG(e->buf[R_OFF + i] == 0xee,
			       "byte %zu of the READ sink changed after its dereg", i))
			break;
}

/*
 * Case q: B stopped while a burst of READs by reference, a WRITE and
 * two more READs reach its ring; resumed, it handles them in one batch.
 */
static void a_read_burst(struct t_ep *e, const struct t_addr *peer, int sock)
{
	uint8_t *want = malloc(1 << 20), *src = malloc(64 << 10);
	pid_t b = 0;
	int n = 0;

	if (!CHECK(want && src) || t_xfer(sock, &b, sizeof(b), false) || !CHECK(b > 0))
		goto out;
	t_fill(want, 1 << 20, 23); /* B's bytes at R_OFF */
	t_fill(src, 64 << 10, 11); /* A's at SRC_OFF */
	if (!CHECK(!kill(b, SIGSTOP)))
		goto out;
	usleep(50 * 1000);
	/* READ 64 KiB, a WRITE over what it reads, the same READ again */
	CHECK(!t_post(e, IBV_WR_RDMA_READ, 400 + (uint64_t)n++, R_OFF, 64 << 10, peer->addr + R_OFF,
		      peer->rkey, IBV_SEND_SIGNALED));
	CHECK(!t_post(e, IBV_WR_RDMA_WRITE, 400 + (uint64_t)n++, SRC_OFF, 64 << 10,
		      peer->addr + R_OFF, peer->rkey, IBV_SEND_SIGNALED));
	CHECK(!t_post(e, IBV_WR_RDMA_READ, 400 + (uint64_t)n++, R3_OFF, 64 << 10,
		      peer->addr + R_OFF, peer->rkey, IBV_SEND_SIGNALED));
	for (int i = 1; i < 8; i++) /* 7 more of 64 KiB, then a small one */
		CHECK(!t_post(e, IBV_WR_RDMA_READ, 400 + (uint64_t)n++, R_OFF + ((size_t)i << 16),
			      64 << 10, peer->addr + R_OFF + ((uint64_t)i << 16), peer->rkey,
			      IBV_SEND_SIGNALED));
	CHECK(!t_post(e, IBV_WR_RDMA_READ, 400 + (uint64_t)n++, R3_OFF + (64 << 10), 1024,
		      peer->addr + R_OFF + (64 << 10), peer->rkey, IBV_SEND_SIGNALED));
	usleep(50 * 1000); /* the requests are in B's ring */
	CHECK(!kill(b, SIGCONT));
	for (int i = 0; i < n; i++)
		if (!a_wait(e, 400 + (uint64_t)i, IBV_WC_SUCCESS))
			goto out;
	same(e->buf + R_OFF, want, 64 << 10, "a READ before a WRITE of what it reads");
	same(e->buf + R3_OFF, src, 64 << 10, "the same READ after the WRITE");
	same(e->buf + R_OFF + (64 << 10), want + (64 << 10), 448 << 10, "7 READs of 64 KiB");
	same(e->buf + R3_OFF + (64 << 10), want + (64 << 10), 1024, "a small READ after them");
out:
	free(want);
	free(src);
}

static int side_a(void *arg, int out)
{
	const struct pcfg *c = arg;
	struct t_addr mine, peer;
	struct t_ep e;
	char cmd;

	write_env(c, false);
	if (c->mode == M_READ_BURST)
		t_timeout = 18; /* 1 s: no retransmit timeout while B is stopped */
	if (t_ep_init(&e, NULL, IBV_QPT_RC, BUF, ACC, 256) || (c->a_buf && t_ep_use_buf(&e, ACC)))
		return 1;
	t_fill(e.buf + SRC_OFF, 2 << 20, 11);
	mine = t_addr_of(&e, 200);
	if (t_xfer(c->sock, &mine, sizeof(mine), true) ||
	    t_xfer(c->sock, &peer, sizeof(peer), false))
		return 1;
	if (!CHECK(t_connect_to(&e, &peer, 200, IBV_MTU_4096) == 0) ||
	    t_xfer(c->sock, &cmd, 1, false))
		return 1;
	a_warm(&e, &peer);
	if (c->mode == M_EXIT) { /* 8 x 1 MiB posted, and gone before they complete */
		for (int i = 0; i < 8; i++)
			CHECK(!t_post(&e, IBV_WR_RDMA_WRITE, 300 + (uint64_t)i, SRC_OFF, 1 << 20,
				      peer.addr, peer.rkey, 0));
		_exit(t_st()->failed ? 1 : 0);
	}
	if (c->mode == M_DEREG || c->mode == M_DEREG_READ) {
		a_dereg(&e, &peer, c->sock, c->mode == M_DEREG_READ);
	} else {
		if (c->mode == M_BOUNDS)
			a_bounds(&e, &peer);
		else if (c->mode == M_DEREG_SINK)
			a_dereg_sink(&e, &peer, c->sock);
		else if (c->mode == M_READ_BURST)
			a_read_burst(&e, &peer, c->sock);
		else
			a_data(&e, &peer, c->mode == M_FORK);
		cmd = 'V';
		t_xfer(c->sock, &cmd, 1, true);
		t_xfer(c->sock, &cmd, 1, false);
	}
	t_ep_destroy(&e, true);
	(void)out;
	return t_st()->failed ? 1 : 0;
}

/* ---- the runs ---- */

/*
 * "single copy: sent N received M packets by reference; ... pulled B
 * bytes ...; pushed P bytes ...; copied C bytes from mapped buffers"
 */
struct single {
	unsigned long long sent, pulled, pushed, push_calls, push_failed, mapped;
};

static void single_line(const char *text, struct single *r)
{
	const char *p = text ? strstr(text, "single copy: sent ") : NULL;
	unsigned long long rx = 0, calls = 0, failed = 0;

	*r = (struct single){0};
	if (CHECK_MSG(p, "no single copy line in the report"))
		CHECK(sscanf(p,
			     "single copy: sent %llu received %llu packets by reference; "
			     "this process pulled %llu bytes in %llu calls, %llu failed; "
			     "pushed %llu bytes in %llu calls, %llu failed; "
			     "copied %llu bytes from mapped buffers",
			     &r->sent, &rx, &r->pulled, &calls, &failed, &r->pushed, &r->push_calls,
			     &r->push_failed, &r->mapped) == 9);
}

static void run(const char *name, struct pcfg c, bool want)
{
	struct t_proc p[2];
	struct single a, b;
	bool reads = c.mode == M_DATA || c.mode == M_FORK || c.mode == M_DEREG_READ ||
		     c.mode == M_DEREG_SINK || c.mode == M_READ_BURST;

	t_case(name);
	t_pair_run(p, side_a, side_b, &c, &c.sock, 60000);
	if (c.mode == M_EXIT) { /* A printed no report: it never closed its device */
		const char *f = p[1].err ? strstr(p[1].err, " calls, ") : NULL;

		CHECK(!p[0].err || !strstr(p[0].err, "single copy: sent"));
		printf("# B's pulls that failed (A gone): %ld\n", f ? strtol(f + 8, NULL, 10) : -1);
		t_proc_free(&p[0]);
		t_proc_free(&p[1]);
		return;
	}
	single_line(p[0].err, &a);
	single_line(p[1].err, &b);
	printf("# A sent %llu packets by reference, B pulled %llu bytes, copied %llu from A's "
	       "mapped buffer, pushed %llu bytes (%llu calls failed; B sent %llu placed READ "
	       "responses); A pulled %llu, pushed %llu\n",
	       a.sent, b.pulled, b.mapped, b.pushed, b.push_failed, b.sent, a.pulled, a.pushed);
	if (want && c.b_seccomp_w) /* READs asked by reference, answered with their bytes */
		CHECK_MSG(a.sent > 0 && b.pulled > 0 && !b.pushed && b.push_failed > 0 && !b.sent,
			  "B's writes were not refused, or not answered with copies");
	else if (want)
		CHECK_MSG(a.sent > 0 && b.pulled + b.mapped > 0 &&
				  (!reads || (b.pushed > 0 && b.sent > 0)),
			  "the single copy was not used");
	else
		CHECK_MSG(a.sent + b.pulled + b.mapped + b.pushed + b.sent == 0,
			  "packets went by reference");
	/* B maps A's buffer exactly when it is one and B may take its memfd (B is as we are) */
	if (c.a_buf && !t_have_pidfd_getfd())
		printf("# pidfd_getfd(2) is missing here (ENOSYS; valgrind before 3.20): B pulls "
		       "what it would map\n");
	if (want && c.a_buf && !c.b_seccomp_fd && t_have_pidfd_getfd())
		CHECK_MSG(b.mapped > 0, "B copied nothing from A's mapped buffer");
	else
		CHECK_MSG(!b.mapped, "B copied from a mapped buffer");
	if (c.b_seccomp_fd)
		CHECK_MSG(b.pulled > 0, "B did not pull what it could not map");
	if (c.mode == M_READ_BURST) { /* held and written together (resp_hold.c) */
		const char *d = p[1].err ? strstr(p[1].err, " duplicates ") : NULL;
		unsigned long long dups = d ? strtoull(d + 12, NULL, 10) : 0;

		printf("# B: %llu push calls, %llu requests asked again\n", b.push_calls, dups);
		CHECK_MSG(b.push_calls < 9 && b.pushed == 9u << 16,
			  "B wrote %llu bytes of 9 READs of 64 KiB in %llu calls", b.pushed,
			  b.push_calls);
		/* A's tail-loss probe waits while the link shows B behind (probe.c) */
		CHECK_MSG(d && !dups, "B, stopped, was asked %llu requests again", dups);
	}
	/* A never pulls: B writes the bytes of A's READs when it answers them */
	CHECK_MSG(a.pulled + a.pushed + a.mapped == 0, "A pulled, pushed or copied bytes");
	t_proc_free(&p[0]);
	t_proc_free(&p[1]);
}

int main(void)
{
	t_start("api_single_copy");
	run("a. default: WRITE, WRITE from SGEs, SEND, WRITE with immediate, READ",
	    (struct pcfg){0}, true);
	run("b. SOFTVERBS_SINGLE_COPY=0 in B: copies", (struct pcfg){.b_no_pull = true}, false);
	run("c. B may not read A's memory (seccomp): copies", (struct pcfg){.b_seccomp = true},
	    false);
	run("d. a WRITE past the end of B's MR", (struct pcfg){.mode = M_BOUNDS}, true);
	run("e. B deregisters its MR during WRITEs", (struct pcfg){.mode = M_DEREG}, true);
	run("f. A forks while its WRITEs are pulled", (struct pcfg){.mode = M_FORK}, true);
	run("h. B deregisters its MR during READs", (struct pcfg){.mode = M_DEREG_READ}, true);
	run("j. A deregisters the MR its READs land in", (struct pcfg){.mode = M_DEREG_SINK}, true);
	run("k. B may not write into A (seccomp): READs answered with their bytes",
	    (struct pcfg){.b_seccomp_w = true}, true);
	run("l. A's memory from ibv_alloc_buf: B maps it", (struct pcfg){.a_buf = true}, true);
	run("m. ibv_alloc_buf: a WRITE past the end of B's MR",
	    (struct pcfg){.mode = M_BOUNDS, .a_buf = true}, true);
	run("n. ibv_alloc_buf: B deregisters its MR during WRITEs",
	    (struct pcfg){.mode = M_DEREG, .a_buf = true}, true);
	run("o. ibv_alloc_buf: A forks while its WRITEs are copied",
	    (struct pcfg){.mode = M_FORK, .a_buf = true}, true);
	run("p. ibv_alloc_buf, B may not take A's memfd (seccomp): pulls",
	    (struct pcfg){.a_buf = true, .b_seccomp_fd = true}, true);
	run("q. a burst of READs by reference: one write for several",
	    (struct pcfg){.mode = M_READ_BURST}, true);
	run("i. A exits with WRITEs in flight: B's QP stays in RTS", (struct pcfg){.mode = M_EXIT},
	    true);
	if (geteuid() == 0)
		run("g. B is another user: no link", (struct pcfg){.b_other_uid = true}, false);
	else
		printf("# g. not run: running B as uid 65534 needs root\n");
	return t_finish();
}
