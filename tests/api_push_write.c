/* SPDX-License-Identifier: MIT */
/*
 * api_push_write: small RDMA WRITEs that the requester writes into the
 * target itself, through the target's push directory (the same-host
 * link, docs/single-copy.md), between two processes, A (initiator) and B
 * (target), with SOFTVERBS_STATS=1 read back from A's stderr.
 *
 *   a. WRITEs of 8 B (inline), 100 B from two SGEs and 4095 B, each
 *      posted alone: every byte lands where it should and nothing
 *      around it moves; A wrote them into B itself;
 *   b. a WRITE of 64 B over the end of B's MR: REM_ACCESS_ERR, and none
 *      of its bytes land (A's directory check refuses it, B's
 *      responder then too);
 *   c. a WRITE into an MR of B without REMOTE_WRITE: the same;
 *   d. B's QP loses REMOTE_WRITE (ibv_modify_qp in RTS): the same;
 *   e. B deregisters its MR while A writes 8 B into it as fast as it
 *      can, one WRITE at a time (a stream's are not pushed):
 *      once ibv_dereg_mr returned, B's buffer (still mapped) never
 *      changes again; A's WRITEs succeed, then end in REM_ACCESS_ERR;
 *   f. B's QP loses REMOTE_WRITE meanwhile instead (ibv_modify_qp in
 *      RTS): the same for the buffer, and for A's WRITEs;
 *   f2. B moves its QP to ERR meanwhile: the same for the buffer;
 *   g. fork: A's child rewrites its copy of A's source (copy on write)
 *      while A writes it: B gets A's bytes, not the child's;
 *   h. A may not write into B (a seccomp filter on process_vm_writev):
 *      the same bytes land, carried by the packets;
 *   i. SOFTVERBS_SINGLE_COPY=0 in B: the same, nothing written by A;
 *   j. root only: B runs as another user: no link, nothing written by A.
 */
#include "harness.h"
#include "stats.h"
#include "traffic.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* test: timeout=180 */

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

enum {
	BUF = 1 << 20,
	MR_LEN = BUF - (64 << 10), /* B's MR: the last 64 KiB of its buffer stay outside */
	RO_OFF = MR_LEN, /* B: a second MR of 16 KiB without REMOTE_WRITE */
	RO_LEN = 16 << 10,
	SRC = 512 << 10, /* A: its sources */
	STEP = 8 << 10, /* round k writes at k * STEP */
	ROUNDS = 48,
	HOT = 32 << 10, /* e, f: the 8 bytes go here */
	WARM = 48 << 10, /* b-d: three WRITEs that may be written, before the refused one */
};

enum mode {
	M_DATA,
	M_BOUNDS,
	M_NO_ACCESS,
	M_QP_ACCESS,
	M_DEREG,
	M_QP_REVOKE,
	M_QP_ERR,
	M_FORK
};

struct pcfg {
	enum mode mode;
	bool a_seccomp, b_no_copy, b_other_uid;
	int sock;
};

static const uint32_t sizes[3] = {8, 100, 4095};

static void set_env(const struct pcfg *c, bool b)
{
	setenv("SOFTVERBS_STATS", "1", 1);
	setenv("SOFTVERBS_SHM", "1", 1);
	if (b && c->b_no_copy)
		setenv("SOFTVERBS_SINGLE_COPY", "0", 1);
	else
		unsetenv("SOFTVERBS_SINGLE_COPY");
}

/* Make process_vm_writev(2) fail with EPERM in this process. */
static bool no_vm_writev(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = SV_ARRAY_N(f), .filter = f};

	return !prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) &&
	       !prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static bool zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* ---- B ---- */

/* Round k's bytes at k * STEP, A's source pattern; everything else 0. */
static void b_check_data(const uint8_t *buf)
{
	uint8_t want[4096];

	t_fill(want, sizeof(want), 5);
	for (uint32_t k = 0; k < ROUNDS; k++) {
		const uint8_t *p = buf + k * STEP;
		uint32_t n = sizes[k % 3];

		CHECK_MSG(!memcmp(p, want, n), "round %u: the bytes differ", k);
		CHECK_MSG(zero(p + n, STEP - n), "round %u: bytes after it moved", k);
	}
	CHECK_MSG(zero(buf + ROUNDS * STEP, BUF - ROUNDS * STEP), "bytes past the rounds moved");
}

/* b-d: A's three warm-up WRITEs of 8 B at WARM, nothing else. */
static void b_check_refused(const uint8_t *buf)
{
	uint8_t want[8];

	t_fill(want, sizeof(want), 5);
	CHECK_MSG(!memcmp(buf + WARM, want, 8), "the warm-up WRITEs did not land");
	CHECK_MSG(zero(buf, WARM) && zero(buf + WARM + 8, BUF - WARM - 8),
		  "a refused WRITE left bytes in B's memory");
}

/*
 * e, f, f2: take the MR away (dereg), REMOTE_WRITE from the QP, or stop
 * the QP (ERR) while A writes, then watch for 300 ms that the buffer
 * never changes again.
 */
static void b_revoke(struct t_ep *e, enum mode m, int sock)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR, .qp_access_flags = IBV_ACCESS_REMOTE_READ};
	uint64_t end;
	char c = 0;

	t_xfer(sock, &c, 1, false); /* A is writing: 20 WRITEs done */
	usleep(10 * 1000);
	if (m == M_DEREG) {
		CHECK(ibv_dereg_mr(e->mr) == 0);
		e->mr = NULL;
	} else {
		CHECK(ibv_modify_qp(e->qp, &a,
				    m == M_QP_ERR ? IBV_QP_STATE : IBV_QP_ACCESS_FLAGS) == 0);
	}
	memset(e->buf + HOT - 64, 0xa5, 128);
	end = t_ms() + 300;
	while (t_ms() < end) {
		uint8_t v[128];

		memcpy(v, e->buf + HOT - 64, sizeof(v));
		for (size_t i = 0; i < sizeof(v); i++)
			if (v[i] != 0xa5) {
				CHECK_MSG(false, "byte %zu changed after the %s returned", i,
					  m == M_DEREG ? "deregistration" : "QP's change");
				end = 0;
				break;
			}
	}
	c = 's';
	t_xfer(sock, &c, 1, true); /* stop */
}

static int side_b(void *arg, int out)
{
	const struct pcfg *c = arg;
	struct t_addr mine, rdonly, peer;
	struct ibv_mr *ro = NULL;
	struct t_ep e;
	char cmd = 0;

	signal(SIGPIPE, SIG_IGN);
	set_env(c, true);
	if (c->b_other_uid && (setgid(65534) || setuid(65534)))
		return 2;
	if (t_ep_init(&e, NULL, IBV_QPT_RC, BUF, ACC, 64))
		return 1;
	/* the MR covers MR_LEN bytes of the buffer only; a second one without REMOTE_WRITE */
	CHECK(ibv_dereg_mr(e.mr) == 0);
	e.mr = ibv_reg_mr(e.pd, e.buf, MR_LEN, ACC);
	ro = ibv_reg_mr(e.pd, e.buf + RO_OFF, RO_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!CHECK(e.mr && ro))
		return 1;
	mine = t_addr_of(&e, 100);
	rdonly = mine; /* the second MR */
	rdonly.rkey = ro->rkey;
	rdonly.addr = (uintptr_t)e.buf + RO_OFF;
	if (t_xfer(c->sock, &mine, sizeof(mine), true) ||
	    t_xfer(c->sock, &rdonly, sizeof(rdonly), true) ||
	    t_xfer(c->sock, &peer, sizeof(peer), false))
		return 1;
	if (!CHECK(t_connect_to(&e, &peer, 100, IBV_MTU_4096) == 0))
		return 1;
	t_xfer(c->sock, &cmd, 1, true); /* ready */
	if (c->mode == M_QP_ACCESS && !t_xfer(c->sock, &cmd, 1, false)) {
		struct ibv_qp_attr a = {.qp_access_flags = IBV_ACCESS_REMOTE_READ};

		/* after A's first WRITEs: its directory entry was in use */
		CHECK(ibv_modify_qp(e.qp, &a, IBV_QP_ACCESS_FLAGS) == 0);
		t_xfer(c->sock, &cmd, 1, true);
	}
	if (c->mode == M_DEREG || c->mode == M_QP_REVOKE || c->mode == M_QP_ERR) {
		b_revoke(&e, c->mode, c->sock);
	} else if (!t_xfer(c->sock, &cmd, 1, false) && cmd == 'V') {
		if (c->mode == M_DATA || c->mode == M_FORK)
			b_check_data(e.buf);
		else
			b_check_refused(e.buf);
	}
	t_xfer(c->sock, &cmd, 1, true);
	CHECK(ibv_dereg_mr(ro) == 0);
	t_ep_destroy(&e, true);
	(void)out;
	return t_st()->failed ? 1 : 0;
}

/* ---- A ---- */

static bool a_write(struct t_ep *e, uint64_t id, uint32_t len, uint64_t raddr, uint32_t rkey,
		    enum ibv_wc_status want)
{
	struct ibv_sge sge[2] = {
		{.addr = (uintptr_t)e->buf + SRC, .length = len, .lkey = e->mr->lkey}};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (len == 8)
		wr.send_flags |= IBV_SEND_INLINE;
	if (len == 100) { /* two pieces */
		sge[0].length = 40;
		sge[1] = (struct ibv_sge){
			.addr = (uintptr_t)e->buf + SRC + 40, .length = 60, .lkey = e->mr->lkey};
		wr.num_sge = 2;
	}
	if (!CHECK(ibv_post_send(e->qp, &wr, &bad) == 0) ||
	    !CHECK_EQ_INT(t_poll(e->cq, &wc, 1, 10000), 1))
		return false;
	return CHECK_MSG(wc.status == want, "WRITE %llu of %u B: %s, want %s",
			 (unsigned long long)id, len, ibv_wc_status_str(wc.status),
			 ibv_wc_status_str(want));
}

/*
 * b-d: three WRITEs of 8 B that B allows (the link is up, its entries in
 * use), then, for d, B takes REMOTE_WRITE from its QP; then the WRITE
 * that B refuses.
 */
static void a_refused(struct t_ep *e, const struct t_addr *peer, const struct t_addr *rdonly,
		      enum mode m, int sock)
{
	char c = 'M';

	for (uint64_t i = 0; i < 3; i++) { /* the first may go before the link is up */
		a_write(e, 10 + i, 8, peer->addr + WARM, peer->rkey, IBV_WC_SUCCESS);
		usleep(50 * 1000);
	}
	if (m == M_QP_ACCESS) {
		t_xfer(sock, &c, 1, true);
		t_xfer(sock, &c, 1, false);
	}
	if (m == M_BOUNDS)
		a_write(e, 1, 64, peer->addr + MR_LEN - 32, peer->rkey, IBV_WC_REM_ACCESS_ERR);
	else
		a_write(e, 1, 64, m == M_NO_ACCESS ? rdonly->addr : peer->addr,
			m == M_NO_ACCESS ? rdonly->rkey : peer->rkey, IBV_WC_REM_ACCESS_ERR);
}

/* e, f: 8-byte WRITEs one after the other until B says stop. */
static void a_stream(struct t_ep *e, const struct t_addr *peer, int sock)
{
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf + SRC, .length = 8, .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE},
			   *bad;
	unsigned long ok = 0, failed = 0;
	uint32_t busy = 0; /* outstanding: one at a time, so that each is pushed */
	bool bad_status = false;
	char c = 'w';

	wr.wr.rdma.remote_addr = peer->addr + HOT;
	wr.wr.rdma.rkey = peer->rkey;
	for (uint64_t i = 0; i < 3; i++) { /* the link up first: else these go over UDP */
		a_write(e, 20 + i, 8, peer->addr + HOT, peer->rkey, IBV_WC_SUCCESS);
		usleep(50 * 1000);
	}
	for (bool told = false;;) {
		struct pollfd pf = {.fd = sock, .events = POLLIN};
		struct ibv_wc wc;

		if (!busy && !failed) {
			busy += ibv_post_send(e->qp, &wr, &bad) == 0;
			e->buf[SRC] ^= 1; /* each WRITE differs from the one before */
		}
		if (busy && ibv_poll_cq(e->cq, 1, &wc) == 1) {
			busy--;
			if (wc.status == IBV_WC_SUCCESS) {
				if (++ok == 20) /* under way: B may act */
					told = !t_xfer(sock, &c, 1, true);
			} else if (failed++ == 0) {
				bad_status = wc.status != IBV_WC_REM_ACCESS_ERR &&
					     wc.status != IBV_WC_RETRY_EXC_ERR;
			}
		}
		if (told && poll(&pf, 1, 0) == 1)
			break;
	}
	t_xfer(sock, &c, 1, false);
	printf("# A: %lu WRITEs succeeded, %lu failed\n", ok, failed);
	CHECK_MSG(ok >= 20, "only %lu WRITEs succeeded before B stopped them", ok);
	CHECK_MSG(!bad_status, "the first failed WRITE ended in an unexpected status");
}

static int side_a(void *arg, int out)
{
	const struct pcfg *c = arg;
	struct t_addr mine, peer, rdonly;
	pid_t child = -1;
	struct t_ep e;
	char cmd;

	set_env(c, false);
	if (c->a_seccomp && !CHECK(no_vm_writev()))
		return 1;
	if (t_ep_init(&e, NULL, IBV_QPT_RC, BUF, ACC, 64))
		return 1;
	t_fill(e.buf + SRC, 4096, 5);
	mine = t_addr_of(&e, 200);
	if (t_xfer(c->sock, &mine, sizeof(mine), true) ||
	    t_xfer(c->sock, &peer, sizeof(peer), false) ||
	    t_xfer(c->sock, &rdonly, sizeof(rdonly), false))
		return 1;
	if (!CHECK(t_connect_to(&e, &peer, 200, IBV_MTU_4096) == 0) ||
	    t_xfer(c->sock, &cmd, 1, false))
		return 1;
	usleep(200 * 1000); /* the link comes up asynchronously */
	if (c->mode == M_FORK) {
		child = fork();
		if (child == 0) { /* its copy of the source only */
			memset(e.buf + SRC, 0x77, 4096);
			pause();
			_exit(0);
		}
		usleep(50 * 1000);
	}
	switch (c->mode) {
	case M_DEREG:
	case M_QP_REVOKE:
	case M_QP_ERR:
		a_stream(&e, &peer, c->sock);
		break;
	case M_BOUNDS:
	case M_NO_ACCESS:
	case M_QP_ACCESS:
		a_refused(&e, &peer, &rdonly, c->mode, c->sock);
		break;
	default:
		for (uint32_t k = 0; k < ROUNDS; k++)
			if (!a_write(&e, k, sizes[k % 3], peer.addr + k * STEP, peer.rkey,
				     IBV_WC_SUCCESS))
				break;
	}
	if (c->mode != M_DEREG && c->mode != M_QP_REVOKE && c->mode != M_QP_ERR) {
		cmd = 'V';
		t_xfer(c->sock, &cmd, 1, true);
		t_xfer(c->sock, &cmd, 1, false);
	}
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	t_ep_destroy(&e, true);
	(void)out;
	return t_st()->failed ? 1 : 0;
}

/* ---- the runs ---- */

/* "push directory: wrote N WRITEs into peers, R refused" of A's report. */
static void push_line(const char *text, unsigned long long *wrote, unsigned long long *refused)
{
	const char *p = text ? strstr(text, "push directory: wrote ") : NULL;

	*wrote = *refused = 0;
	if (CHECK_MSG(p, "no push directory line in A's report"))
		CHECK(sscanf(p, "push directory: wrote %llu WRITEs into peers, %llu refused", wrote,
			     refused) == 2);
}

static void run(const char *name, struct pcfg c, bool want)
{
	unsigned long long wrote, refused;
	struct t_proc p[2];

	t_case(name);
	t_pair_run(p, side_a, side_b, &c, &c.sock, 60000);
	push_line(p[0].err, &wrote, &refused);
	printf("# A wrote %llu WRITEs into B itself, %llu refused by the kernel\n", wrote, refused);
	if (want && !t_have_pidfd_getfd()) /* A cannot map B's directory */
		printf("# pidfd_getfd(2) is missing here (ENOSYS; valgrind before 3.20): A "
		       "cannot map B's directory, and writes nothing itself\n");
	if (want && !t_have_pidfd_getfd())
		CHECK_MSG(!wrote, "A wrote into B without its directory");
	else if (c.mode == M_BOUNDS || c.mode == M_NO_ACCESS || c.mode == M_QP_ACCESS)
		/* the warm-ups only (the first may go before the link is up) */
		CHECK_MSG(wrote >= 1 && wrote <= 3, "A wrote %llu WRITEs into B, want 1-3", wrote);
	else if (want)
		/* the first WRITEs may go before the link is up (UDP) */
		CHECK_MSG(wrote >= (c.mode == M_DATA || c.mode == M_FORK ? ROUNDS - 8 : 10),
			  "A wrote only %llu WRITEs into B", wrote);
	else
		CHECK_MSG(!wrote, "A wrote into B");
	if (c.a_seccomp && t_have_pidfd_getfd()) /* (else it never tried) */
		CHECK_MSG(refused > 0, "A's refused writes were not counted");
	t_proc_free(&p[0]);
	t_proc_free(&p[1]);
}

int main(void)
{
	t_start("api_push_write");
	run("a. small WRITEs, each alone: written by A", (struct pcfg){0}, true);
	run("b. a WRITE over the end of B's MR", (struct pcfg){.mode = M_BOUNDS}, true);
	run("c. a WRITE into an MR without REMOTE_WRITE", (struct pcfg){.mode = M_NO_ACCESS}, true);
	run("d. B's QP without REMOTE_WRITE", (struct pcfg){.mode = M_QP_ACCESS}, true);
	run("e. B deregisters its MR during WRITEs", (struct pcfg){.mode = M_DEREG}, true);
	run("f. B's QP loses REMOTE_WRITE during WRITEs", (struct pcfg){.mode = M_QP_REVOKE}, true);
	run("f2. B moves its QP to ERR during WRITEs", (struct pcfg){.mode = M_QP_ERR}, true);
	run("g. A forks: B gets A's bytes", (struct pcfg){.mode = M_FORK}, true);
	run("h. A may not write into B (seccomp): the packets carry the bytes",
	    (struct pcfg){.a_seccomp = true}, false);
	run("i. SOFTVERBS_SINGLE_COPY=0 in B: the packets carry the bytes",
	    (struct pcfg){.b_no_copy = true}, false);
	if (geteuid() == 0)
		run("j. B is another user: no link", (struct pcfg){.b_other_uid = true}, false);
	else
		printf("# j. not run: running B as uid 65534 needs root\n");
	return t_finish();
}
