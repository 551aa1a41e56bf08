/* SPDX-License-Identifier: MIT */
/*
 * api_uc.c - UC QPs through the verbs, two QPs in one process: SEND and
 * RDMA WRITE, with and without immediate data, 1 byte to 64 KiB across
 * MTU boundaries and a PSN wrap, data checked; RDMA READ and atomics
 * refused at post (EINVAL), through ibv_wr_* (EINVAL) and at creation
 * as send_ops_flags (EOPNOTSUPP); ibv_wr_* WRITE with immediate; and, in a worker process with
 * SOFTVERBS_STATS=1, the device sends exactly the request packets (no ACKs, no resends), and with
 * packets lost (SOFTVERBS_FAULT) messages that lost one are not delivered while the others arrive
 * intact.
 */
#include "harness.h"
#include "stats.h"
#include "traffic.h"

/* test: timeout=120 */

#define BUF (256u << 10)
#define HALF (BUF / 2)

static struct t_ep a, b;
static const uint32_t sizes[] = {1, 255, 1023, 1024, 1025, 4097, 65536};

/* Contract: the next completion on `cq` (within 10 s) succeeded; 0 or -1. */
static int wait_one(struct ibv_cq *cq, struct ibv_wc *wc, const char *what)
{
	if (!CHECK_MSG(t_poll(cq, wc, 1, 10000) == 1, "%s: no completion", what))
		return -1;
	return CHECK_MSG(wc->status == IBV_WC_SUCCESS, "%s: status %s", what,
			 ibv_wc_status_str(wc->status)) ?
		       0 :
		       -1;
}

/* Contract: post `op` of `n` bytes from a.buf with immediate `imm` to b's second half. */
static int post_op(enum ibv_wr_opcode op, uint64_t wr_id, uint32_t n, uint32_t imm)
{
	struct ibv_sge sge = {(uintptr_t)a.buf, n, a.mr->lkey};
	struct ibv_send_wr wr = {0}, *bad;

	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf + HALF;
	wr.wr.rdma.rkey = b.mr->rkey;
	return ibv_post_send(a.qp, &wr, &bad);
}

static void case_send(void)
{
	struct ibv_wc wc;

	t_case("UC SEND at every size, with and without immediate");
	for (size_t i = 0; i < SV_ARRAY_N(sizes); i++) {
		uint32_t n = sizes[i];
		bool imm = i & 1;

		t_fill(a.buf, n, (unsigned int)i);
		memset(b.buf, 0, n + 16);
		CHECK(t_post_recv(&b, 100 + i, 0, HALF) == 0);
		CHECK(post_op(imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, i, n,
			      0x5e0 + (uint32_t)i) == 0);
		if (!wait_one(a.cq, &wc, "send"))
			CHECK(wc.wr_id == i && wc.opcode == IBV_WC_SEND);
		if (!wait_one(b.cq, &wc, "recv")) {
			CHECK(wc.wr_id == 100 + i && wc.opcode == IBV_WC_RECV);
			CHECK_EQ_INT(wc.byte_len, n);
			CHECK_EQ_INT(!!(wc.wc_flags & IBV_WC_WITH_IMM), imm);
			if (imm)
				CHECK_EQ_INT(ntohl(wc.imm_data), 0x5e0 + (uint32_t)i);
			CHECK_EQ_INT(wc.src_qp, a.qp->qp_num);
		}
		CHECK_MSG(memcmp(a.buf, b.buf, n) == 0, "payload of %u bytes differs", n);
		CHECK(b.buf[n] == 0);
	}
}

static void case_write(void)
{
	struct ibv_wc wc;

	t_case("UC RDMA WRITE at every size; WRITE with immediate consumes a receive");
	for (size_t i = 0; i < SV_ARRAY_N(sizes); i++) {
		uint32_t n = sizes[i];
		bool imm = i & 1;

		t_fill(a.buf, n, (unsigned int)i + 40);
		memset(b.buf + HALF, 0, n + 16);
		if (imm)
			CHECK(t_post_recv(&b, 200 + i, 0, 16) == 0);
		CHECK(post_op(imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, i, n,
			      0xa00 + (uint32_t)i) == 0);
		if (!wait_one(a.cq, &wc, "write"))
			CHECK(wc.wr_id == i && wc.opcode == IBV_WC_RDMA_WRITE);
		if (imm && !wait_one(b.cq, &wc, "recv")) {
			CHECK(wc.wr_id == 200 + i && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
			CHECK_EQ_INT(wc.byte_len, n);
			CHECK_EQ_INT(ntohl(wc.imm_data), 0xa00 + (uint32_t)i);
		}
		if (!imm) { /* no completion at the target: wait for the last byte */
			uint64_t end = t_ms() + 10000;

			while (b.buf[HALF + n - 1] != a.buf[n - 1] && t_ms() < end)
				usleep(100);
		}
		CHECK_MSG(memcmp(a.buf, b.buf + HALF, n) == 0, "WRITE of %u bytes differs", n);
		CHECK(b.buf[HALF + n] == 0);
	}
}

static void case_refused(void)
{
	static const enum ibv_wr_opcode ops[] = {IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
						 IBV_WR_ATOMIC_FETCH_AND_ADD};
	static const uint64_t ex_ops[] = {IBV_QP_EX_WITH_RDMA_READ,
					  IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
					  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD};
	struct ibv_qp_init_attr_ex x = {0};
	struct ibv_wc wc;

	t_case("UC: RDMA READ and atomics refused at post (EINVAL) and creation (EOPNOTSUPP)");
	for (size_t i = 0; i < SV_ARRAY_N(ops); i++)
		CHECK_RET(post_op(ops[i], 50, 8, 0), EINVAL);
	CHECK_EQ_INT(ibv_poll_cq(a.cq, 1, &wc), 0);
	x.qp_type = IBV_QPT_UC;
	x.send_cq = x.recv_cq = a.cq;
	x.cap.max_send_wr = x.cap.max_recv_wr = 4;
	x.cap.max_send_sge = x.cap.max_recv_sge = 1;
	x.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	x.pd = a.pd;
	for (size_t i = 0; i < SV_ARRAY_N(ex_ops); i++) {
		x.send_ops_flags = IBV_QP_EX_WITH_SEND | ex_ops[i];
		errno = 0;
		CHECK(ibv_create_qp_ex(a.ctx, &x) == NULL);
		CHECK_EQ_INT(errno, EOPNOTSUPP);
	}
}

static void case_wr_api(void)
{
	struct ibv_qp_init_attr_ex x = {0};
	struct ibv_qp *qp, *peer;
	struct ibv_qp_init_attr pa = {0};
	struct ibv_qp_ex *qpx;
	struct ibv_wc wc;

	t_case("UC through ibv_wr_*: WRITE with immediate lands; a READ is refused (EINVAL)");
	x.qp_type = pa.qp_type = IBV_QPT_UC;
	x.send_cq = x.recv_cq = pa.send_cq = pa.recv_cq = a.cq;
	x.cap.max_send_wr = x.cap.max_recv_wr = pa.cap.max_send_wr = pa.cap.max_recv_wr = 4;
	x.cap.max_send_sge = x.cap.max_recv_sge = pa.cap.max_send_sge = pa.cap.max_recv_sge = 1;
	x.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	x.pd = a.pd;
	x.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	qp = ibv_create_qp_ex(a.ctx, &x);
	peer = ibv_create_qp(a.pd, &pa);
	if (!CHECK(qp && peer) || t_qp_init(qp, 0) || t_qp_init(peer, IBV_ACCESS_REMOTE_WRITE) ||
	    t_qp_rts(qp, peer->qp_num, &a.gid, 7, 9, IBV_MTU_1024) ||
	    t_qp_rts(peer, qp->qp_num, &a.gid, 9, 7, IBV_MTU_1024))
		goto out;
	qpx = ibv_qp_to_qp_ex(qp);
	t_fill(a.buf, 3000, 99);
	memset(a.buf + HALF, 0, 3000);
	{
		struct ibv_sge sge = {(uintptr_t)a.buf + HALF, 16, a.mr->lkey};
		struct ibv_recv_wr rw = {.wr_id = 77, .sg_list = &sge, .num_sge = 1}, *bad;

		CHECK_RET(ibv_post_recv(peer, &rw, &bad), 0);
	}
	ibv_wr_start(qpx);
	qpx->wr_id = 5;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write_imm(qpx, a.mr->rkey, (uintptr_t)a.buf + HALF, htonl(0x1234));
	ibv_wr_set_sge(qpx, a.mr->lkey, (uintptr_t)a.buf, 3000);
	CHECK_RET(ibv_wr_complete(qpx), 0);
	/* one CQ: the send's and the receive's completions, in either order */
	for (int i = 0; i < 2 && !wait_one(a.cq, &wc, "wr write"); i++) {
		if (wc.wr_id == 5)
			continue;
		CHECK(wc.wr_id == 77 && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
		CHECK_EQ_INT(wc.byte_len, 3000);
		CHECK_EQ_INT(ntohl(wc.imm_data), 0x1234);
	}
	CHECK(memcmp(a.buf, a.buf + HALF, 3000) == 0);
	ibv_wr_start(qpx);
	ibv_wr_rdma_read(qpx, a.mr->rkey, (uintptr_t)a.buf + HALF);
	ibv_wr_set_sge(qpx, a.mr->lkey, (uintptr_t)a.buf, 8);
	CHECK_RET(ibv_wr_complete(qpx), EINVAL);
	CHECK_EQ_INT(ibv_poll_cq(a.cq, 1, &wc), 0);
out:
	if (qp)
		CHECK_RET(ibv_destroy_qp(qp), 0);
	if (peer)
		CHECK_RET(ibv_destroy_qp(peer), 0);
}

enum {
	W_MSGS = 40,
	W_LEN = 4097, /* five packets at MTU 1024 */
};

/* A worker's counts: messages sent, received intact, received damaged. */
struct w_res {
	int sent, intact, damaged;
};

/*
 * Contract: in a worker process: a UC pair sends W_MSGS messages of W_LEN
 * bytes, each message's index in its immediate data and its data
 * pattern, one at a time, and counts what arrived; the device report
 * (SOFTVERBS_STATS) goes to stderr at close.
 */
static int worker(void *arg, int out)
{
	struct t_ep x, y;
	struct w_res r = {0};

	(void)arg;
	if (t_ep_init(&x, NULL, IBV_QPT_UC, 2 * W_LEN, IBV_ACCESS_LOCAL_WRITE, 64) ||
	    t_ep_init(&y, x.ctx, IBV_QPT_UC, 2 * W_LEN, IBV_ACCESS_LOCAL_WRITE, 64) ||
	    t_connect(&x, &y, IBV_MTU_1024))
		return 1;
	for (int i = 0; i < W_MSGS; i++) {
		struct ibv_sge sge = {(uintptr_t)x.buf, W_LEN, x.mr->lkey};
		struct ibv_send_wr wr = {0}, *bad;
		struct ibv_wc wc;

		t_fill(x.buf, W_LEN, (unsigned int)i);
		if (t_post_recv(&y, (uint64_t)i, 0, W_LEN))
			return 1;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.imm_data = htonl((uint32_t)i);
		wr.send_flags = IBV_SEND_SIGNALED;
		if (ibv_post_send(x.qp, &wr, &bad) || t_poll(x.cq, &wc, 1, 10000) != 1 ||
		    wc.status != IBV_WC_SUCCESS)
			return 1;
		r.sent++;
		if (t_poll(y.cq, &wc, 1, 200) != 1)
			continue; /* lost: its receive serves the next message */
		t_fill(x.buf, W_LEN, ntohl(wc.imm_data));
		if (wc.status == IBV_WC_SUCCESS && wc.byte_len == W_LEN &&
		    !memcmp(x.buf, y.buf, W_LEN))
			r.intact++;
		else
			r.damaged++;
	}
	t_ep_destroy(&y, false);
	t_ep_destroy(&x, true);
	return t_xfer(out, &r, sizeof(r), true) ? 1 : 0;
}

/* Contract: run worker() under `fault` (NULL: none); its result and device counters. */
static int run_worker(const char *fault, struct w_res *r, struct t_stats *s)
{
	struct t_proc p;
	int ok;

	setenv("SOFTVERBS_STATS", "1", 1);
	if (fault)
		setenv("SOFTVERBS_FAULT", fault, 1);
	memset(r, 0, sizeof(*r));
	memset(s, 0, sizeof(*s));
	ok = CHECK(t_proc_spawn(&p, worker, NULL, r, sizeof(*r), -1) == 0) &&
	     CHECK_EQ_INT(t_proc_reap(&p, 1, 60000), 1) && CHECK_EQ_INT(t_stats_parse(p.err, s), 1);
	t_proc_free(&p);
	unsetenv("SOFTVERBS_FAULT");
	unsetenv("SOFTVERBS_STATS");
	return ok ? 0 : -1;
}

static void case_no_acks(void)
{
	struct w_res r;
	struct t_stats s;

	t_case("UC on the wire: request packets only, no ACKs, nothing resent");
	if (run_worker(NULL, &r, &s))
		return;
	CHECK_EQ_INT(r.sent, W_MSGS);
	CHECK_EQ_INT(r.intact, W_MSGS);
	CHECK_EQ_INT(s.tx, 5 * W_MSGS);
	CHECK_EQ_INT(s.rx, 5 * W_MSGS);
	CHECK_EQ_INT(s.retransmits + s.resent + s.probes, 0);
	CHECK_EQ_INT(s.naks_tx[0] + s.naks_tx[1] + s.naks_tx[2], 0);

	t_case("UC with 5% of packets lost: messages that lost one are not delivered, "
	       "the others arrive intact");
	if (run_worker("drop=0.05,seed=7", &r, &s))
		return;
	CHECK_EQ_INT(r.sent, W_MSGS);
	CHECK_EQ_INT(r.damaged, 0);
	CHECK(s.fault_drops > 0);
	CHECK_MSG(r.intact < W_MSGS && r.intact > 0, "%d of %d intact", r.intact, W_MSGS);
	CHECK_EQ_INT(s.retransmits + s.resent + s.naks_tx[0] + s.naks_tx[1] + s.naks_tx[2], 0);
}

int main(void)
{
	t_start("api_uc");
	if (t_ep_init(&a, NULL, IBV_QPT_UC, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		      16) ||
	    t_ep_init(&b, a.ctx, IBV_QPT_UC, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		      16) ||
	    t_connect(&a, &b, IBV_MTU_1024))
		return t_finish();
	case_send();
	case_write();
	case_refused();
	case_wr_api();
	t_case("teardown");
	t_ep_destroy(&b, false);
	t_ep_destroy(&a, true);
	case_no_acks();
	return t_finish();
}
