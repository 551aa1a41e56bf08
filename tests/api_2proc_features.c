/* SPDX-License-Identifier: MIT */
/*
 * api_2proc_features: SGE lists, the fence and an SRQ between two
 * processes, each with its own device (127.0.0.N), at path MTU 1024.
 *
 * The target has two RC QPs that share one SRQ and one CQ, and a
 * registered area. While the initiator works the target makes no verbs
 * call (it sleeps in read(2)); then it checks everything:
 *   - SENDs gathered from 3 SGEs land in SRQ receives of 2 SGEs each,
 *     through both QPs, with the right qp_num, length and bytes;
 *   - a WRITE gathered from 4 SGEs over several packets lands whole;
 *   - a READ scattered into 3 SGEs brings back the target's pattern;
 *   - READs followed by a fenced WRITE whose source is what they fetched
 *     put the fetched bytes, not the stale ones, at the target.
 */
#include "harness.h"
#include "traffic.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

/* test: timeout=240 */

#define KiB 1024u
#define AREA (256 * KiB)
#define ACC                                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)
#define NQP 2
#define NSEND 8
#define RSLOT (8 * KiB) /* a receive: two SGEs of 4 KiB, apart */
#define SEND_LEN 5000u /* 5 packets at MTU 1024 */
#define WR_OFF (64 * KiB) /* target: gathered WRITE lands here */
#define WR_LEN 9000u
#define RD_OFF (96 * KiB) /* target: pattern the READs fetch */
#define RD_LEN 7000u
#define FENCE_SRC (128 * KiB) /* target: what the fenced READs fetch */
#define FENCE_DST (160 * KiB) /* target: where the fenced WRITE puts it */
#define FENCE_LEN 3000u
#define RECV_OFF (192 * KiB) /* NSEND receives of RSLOT */

struct addr2 {
	uint32_t qpn[NQP];
	uint64_t addr;
	uint32_t rkey;
	union ibv_gid gid;
};

static int sv[2] = {-1, -1};
static pid_t pid = -1;

/* Expected payload of SEND `i`. */
static void send_pattern(uint8_t *p, uint32_t i)
{
	t_fill(p, SEND_LEN, 500 + i);
}

/* The target's checks after the initiator is done; the number of problems. */
static int target_check(uint8_t *area, struct ibv_cq *cq, struct ibv_qp **qp)
{
	uint8_t *want = malloc(AREA);
	struct ibv_wc wc[NSEND];
	int bad = 0, got;

	if (!want)
		return 1;
	t_fill(want, WR_LEN, 41);
	if (memcmp(area + WR_OFF, want, WR_LEN) || area[WR_OFF + WR_LEN] != 0) {
		printf("# target: the gathered WRITE differs\n");
		bad++;
	}
	t_fill(want, FENCE_LEN, 43);
	if (memcmp(area + FENCE_DST, want, FENCE_LEN)) {
		printf("# target: the fenced WRITE did not carry what the READs fetched\n");
		bad++;
	}
	got = t_poll(cq, wc, NSEND, 5000);
	if (got != NSEND) {
		printf("# target: %d receive completions, want %d\n", got, NSEND);
		bad++;
	}
	for (int k = 0; k < got; k++) {
		uint32_t i = (uint32_t)wc[k].wr_id;
		uint8_t *slot = area + RECV_OFF + (size_t)i * RSLOT;

		send_pattern(want, i);
		/* SGE 0: the first 4 KiB of the slot; SGE 1: the second half's start */
		if (wc[k].status != IBV_WC_SUCCESS || wc[k].byte_len != SEND_LEN ||
		    wc[k].qp_num != qp[i % NQP]->qp_num || memcmp(slot, want, 4 * KiB) ||
		    memcmp(slot + 4 * KiB + 512, want + 4 * KiB, SEND_LEN - 4 * KiB)) {
			printf("# target: receive %u: %s, %u bytes, qp %u\n", i,
			       ibv_wc_status_str(wc[k].status), wc[k].byte_len, wc[k].qp_num);
			bad++;
		}
	}
	free(want);
	return bad;
}

/* The target process: SRQ, two QPs, an area; asleep while the initiator works. */
static int target(int sock)
{
	struct ibv_context *ctx = t_open_dev();
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 64, .max_sge = 2}};
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
	uint8_t *area = aligned_alloc(4096, AREA);
	struct ibv_srq *srq = pd ? ibv_create_srq(pd, &sa) : NULL;
	struct ibv_mr *mr = area && pd ? ibv_reg_mr(pd, area, AREA, ACC) : NULL;
	struct ibv_qp *qp[NQP] = {NULL};
	struct addr2 mine = {0}, peer;
	int bad = 1;
	char cmd;

	if (!ctx || !cq || !srq || !mr) {
		printf("# target: setup failed: %s\n", strerror(errno));
		goto out;
	}
	memset(area, 0, AREA);
	t_fill(area + RD_OFF, RD_LEN, 42);
	t_fill(area + FENCE_SRC, FENCE_LEN, 43);
	for (int k = 0; k < NQP; k++) {
		struct ibv_qp_init_attr ia = {.send_cq = cq,
					      .recv_cq = cq,
					      .srq = srq,
					      .qp_type = IBV_QPT_RC,
					      .cap = {.max_send_wr = 8, .max_send_sge = 1}};

		qp[k] = ibv_create_qp(pd, &ia);
		if (!qp[k] || t_qp_init(qp[k], ACC))
			goto out;
		mine.qpn[k] = qp[k]->qp_num;
	}
	for (uint32_t i = 0; i < NSEND; i++) {
		uint8_t *slot = area + RECV_OFF + (size_t)i * RSLOT;
		struct ibv_sge sge[2] = {{(uintptr_t)slot, 4 * KiB, mr->lkey},
					 {(uintptr_t)slot + 4 * KiB + 512, 3 * KiB, mr->lkey}};
		struct ibv_recv_wr wr = {.wr_id = i, .sg_list = sge, .num_sge = 2}, *bw;

		if (ibv_post_srq_recv(srq, &wr, &bw))
			goto out;
	}
	mine.addr = (uintptr_t)area;
	mine.rkey = mr->rkey;
	if (ibv_query_gid(ctx, 1, 0, &mine.gid) || t_xfer(sock, &mine, sizeof(mine), true) ||
	    t_xfer(sock, &peer, sizeof(peer), false))
		goto out;
	for (int k = 0; k < NQP; k++)
		if (t_qp_rts(qp[k], peer.qpn[k], &peer.gid, 0x100, 0x200, IBV_MTU_1024))
			goto out;
	cmd = 'r';
	if (t_xfer(sock, &cmd, 1, true) || t_xfer(sock, &cmd, 1, false)) /* asleep */
		goto out;
	bad = target_check(area, cq, qp);
out:
	t_xfer(sock, &bad, sizeof(bad), true);
	for (int k = 0; k < NQP; k++)
		if (qp[k])
			ibv_destroy_qp(qp[k]);
	if (srq)
		ibv_destroy_srq(srq);
	if (mr)
		ibv_dereg_mr(mr);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	free(area);
	return bad != 0;
}

struct init {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[NQP];
	struct ibv_mr *mr;
	uint8_t *buf;
	struct addr2 peer;
};

/* Post `wr` on QP `k` and wait for its completion; true on success. */
static bool run1(struct init *in, int k, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bw;
	struct ibv_wc wc;

	wr->send_flags |= IBV_SEND_SIGNALED;
	if (!CHECK_RET(ibv_post_send(in->qp[k], wr, &bw), 0))
		return false;
	if (!CHECK_EQ_INT(t_poll(in->cq, &wc, 1, 10000), 1))
		return false;
	return CHECK_MSG(wc.status == IBV_WC_SUCCESS && wc.wr_id == wr->wr_id, "wr %llu: %s",
			 (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
}

/* SENDs of SEND_LEN gathered from 3 SGEs, alternating QPs. */
static void sends(struct init *in)
{
	uint8_t *src = in->buf, *pat = malloc(SEND_LEN);

	if (!CHECK(pat))
		return;
	for (uint32_t i = 0; i < NSEND; i++) {
		/* the message is pat[0..1000) pat[1000..3000) pat[3000..5000), apart */
		struct ibv_sge sge[3] = {{(uintptr_t)src, 1000, in->mr->lkey},
					 {(uintptr_t)src + 2 * KiB, 2000, in->mr->lkey},
					 {(uintptr_t)src + 8 * KiB + 7, 2000, in->mr->lkey}};
		struct ibv_send_wr wr = {
			.wr_id = i, .sg_list = sge, .num_sge = 3, .opcode = IBV_WR_SEND};

		send_pattern(pat, i);
		memcpy(src, pat, 1000);
		memcpy(src + 2 * KiB, pat + 1000, 2000);
		memcpy(src + 8 * KiB + 7, pat + 3000, 2000);
		if (!run1(in, (int)(i % NQP), &wr))
			break;
	}
	free(pat);
}

/* A WRITE gathered from 4 SGEs, and a READ scattered into 3. */
static void write_read(struct init *in)
{
	uint8_t *pat = malloc(WR_LEN), *b = in->buf + 16 * KiB;
	uint32_t cut[4] = {100, 4000, 2900, 2000}, pos = 0;
	struct ibv_sge sge[4];
	struct ibv_send_wr wr = {
		.wr_id = 100, .sg_list = sge, .num_sge = 4, .opcode = IBV_WR_RDMA_WRITE};

	if (!CHECK(pat))
		return;
	t_fill(pat, WR_LEN, 41);
	for (int s = 0; s < 4; s++) {
		uint8_t *p = b + (size_t)s * 5 * KiB + 3;

		memcpy(p, pat + pos, cut[s]);
		sge[s] = (struct ibv_sge){(uintptr_t)p, cut[s], in->mr->lkey};
		pos += cut[s];
	}
	wr.wr.rdma.remote_addr = in->peer.addr + WR_OFF;
	wr.wr.rdma.rkey = in->peer.rkey;
	run1(in, 0, &wr);

	/* READ RD_LEN into pieces of 3000, 1, 3999 */
	{
		uint8_t *d = in->buf + 48 * KiB;
		struct ibv_sge rs[3] = {{(uintptr_t)d, 3000, in->mr->lkey},
					{(uintptr_t)d + 4 * KiB, 1, in->mr->lkey},
					{(uintptr_t)d + 6 * KiB, 3999, in->mr->lkey}};
		struct ibv_send_wr rd = {
			.wr_id = 101, .sg_list = rs, .num_sge = 3, .opcode = IBV_WR_RDMA_READ};

		memset(d, 0, 12 * KiB);
		rd.wr.rdma.remote_addr = in->peer.addr + RD_OFF;
		rd.wr.rdma.rkey = in->peer.rkey;
		if (run1(in, 1, &rd)) {
			t_fill(pat, RD_LEN, 42);
			CHECK(memcmp(d, pat, 3000) == 0);
			CHECK(d[4 * KiB] == pat[3000]);
			CHECK(memcmp(d + 6 * KiB, pat + 3001, 3999) == 0);
		}
	}
	free(pat);
}

/*
 * Three READs fetch the target's FENCE_SRC into local memory that still
 * holds stale bytes; a fenced WRITE sends that local memory to FENCE_DST.
 * All are posted at once: only the fence keeps the WRITE from gathering
 * the stale bytes before the READ responses are placed.
 */
static void fence(struct init *in)
{
	uint8_t *l = in->buf + 80 * KiB;
	uint32_t part = FENCE_LEN / 3;
	struct ibv_sge rs[3], ws = {(uintptr_t)l, FENCE_LEN, in->mr->lkey};
	struct ibv_send_wr wr[4], *bw;
	struct ibv_wc wc[4];

	memset(l, 0xee, FENCE_LEN);
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < 3; i++) {
		rs[i] = (struct ibv_sge){(uintptr_t)l + i * part, part, in->mr->lkey};
		wr[i].wr_id = 200 + (uint64_t)i;
		wr[i].sg_list = &rs[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_READ;
		wr[i].wr.rdma.remote_addr = in->peer.addr + FENCE_SRC + (uint64_t)i * part;
		wr[i].wr.rdma.rkey = in->peer.rkey;
		wr[i].next = &wr[i + 1];
	}
	wr[3].wr_id = 203;
	wr[3].sg_list = &ws;
	wr[3].num_sge = 1;
	wr[3].opcode = IBV_WR_RDMA_WRITE;
	wr[3].send_flags = IBV_SEND_FENCE | IBV_SEND_SIGNALED;
	wr[3].wr.rdma.remote_addr = in->peer.addr + FENCE_DST;
	wr[3].wr.rdma.rkey = in->peer.rkey;
	if (!CHECK_RET(ibv_post_send(in->qp[0], wr, &bw), 0))
		return;
	if (CHECK_EQ_INT(t_poll(in->cq, wc, 1, 10000), 1))
		CHECK(wc[0].wr_id == 203 && wc[0].status == IBV_WC_SUCCESS);
}

static void case_two_processes(void)
{
	struct init in = {0};
	struct addr2 mine = {0};
	int bad = -1, status;
	char cmd = 'g';

	t_case("two processes: SGE lists, fence and a shared SRQ, target asleep");
	if (!CHECK(pid > 0) || !CHECK(t_xfer(sv[0], &cmd, 1, true) == 0))
		return;
	in.ctx = t_open_dev();
	in.pd = in.ctx ? ibv_alloc_pd(in.ctx) : NULL;
	in.cq = in.pd ? ibv_create_cq(in.ctx, 64, NULL, NULL, 0) : NULL;
	in.buf = aligned_alloc(4096, AREA);
	in.mr = in.pd && in.buf ? ibv_reg_mr(in.pd, in.buf, AREA, ACC) : NULL;
	if (!CHECK(in.cq && in.mr))
		goto out;
	for (int k = 0; k < NQP; k++) {
		struct ibv_qp_init_attr ia = {.send_cq = in.cq,
					      .recv_cq = in.cq,
					      .qp_type = IBV_QPT_RC,
					      .cap = {.max_send_wr = 16,
						      .max_recv_wr = 1,
						      .max_send_sge = 4,
						      .max_recv_sge = 1}};

		in.qp[k] = ibv_create_qp(in.pd, &ia);
		if (!CHECK(in.qp[k]) || t_qp_init(in.qp[k], ACC))
			goto out;
		mine.qpn[k] = in.qp[k]->qp_num;
	}
	if (!CHECK_RET(ibv_query_gid(in.ctx, 1, 0, &mine.gid), 0) ||
	    !CHECK(t_xfer(sv[0], &in.peer, sizeof(in.peer), false) == 0) ||
	    !CHECK(t_xfer(sv[0], &mine, sizeof(mine), true) == 0))
		goto out;
	for (int k = 0; k < NQP; k++)
		if (t_qp_rts(in.qp[k], in.peer.qpn[k], &in.peer.gid, 0x200, 0x100, IBV_MTU_1024))
			goto out;
	if (!CHECK(t_xfer(sv[0], &cmd, 1, false) == 0))
		goto out;
	sends(&in);
	write_read(&in);
	fence(&in);
	cmd = 'c';
	CHECK(t_xfer(sv[0], &cmd, 1, true) == 0);
	CHECK(t_xfer(sv[0], &bad, sizeof(bad), false) == 0);
	CHECK_MSG(bad == 0, "the target found %d problems", bad);
out:
	close(sv[0]);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int k = 0; k < NQP; k++)
		if (in.qp[k])
			ibv_destroy_qp(in.qp[k]);
	if (in.mr)
		ibv_dereg_mr(in.mr);
	if (in.cq)
		ibv_destroy_cq(in.cq);
	if (in.pd)
		ibv_dealloc_pd(in.pd);
	if (in.ctx)
		ibv_close_device(in.ctx);
	free(in.buf);
}

int main(void)
{
	char go;

	t_start("api_2proc_features");
	signal(SIGPIPE, SIG_IGN); /* a target that died: t_xfer fails, a CHECK says so */
	/* the target is forked before any verbs call, so it is a clean process */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		t_skip_all("socketpair failed");
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		if (t_xfer(sv[1], &go, 1, false) || go != 'g')
			_exit(0);
		_exit(target(sv[1]));
	}
	close(sv[1]);
	case_two_processes();
	return t_finish();
}
