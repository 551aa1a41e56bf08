/* SPDX-License-Identifier: MIT */
/*
 * api_rc_errors.c - RC error completions and their effect on both QPs:
 * remote access errors (bad rkey, out of range, missing access), local
 * protection errors (bad lkey), a SEND larger than the receive buffer,
 * RNR with and without retries left, and the flush of everything posted
 * behind a failed work request.
 */
#include "harness.h"
#include "traffic.h"

/* test: timeout=240 */

#define BUF (64u << 10)
#define ACC                                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

static struct ibv_context *ctx;

/* A fresh connected pair for each case: errors leave QPs in ERR. */
static int pair(struct t_ep *a, struct t_ep *b, int b_access)
{
	if (t_ep_init(a, ctx, IBV_QPT_RC, BUF, ACC, 32) ||
	    t_ep_init(b, ctx, IBV_QPT_RC, BUF, b_access, 32))
		return -1;
	return t_connect(a, b, IBV_MTU_1024);
}

static void unpair(struct t_ep *a, struct t_ep *b)
{
	t_ep_destroy(a, false);
	t_ep_destroy(b, false);
}

static enum ibv_wc_status one_status(struct ibv_cq *cq, uint64_t *wr_id)
{
	struct ibv_wc wc;

	if (t_poll(cq, &wc, 1, 30000) != 1)
		return (enum ibv_wc_status) - 1;
	if (wr_id)
		*wr_id = wc.wr_id;
	return wc.status;
}

static void case_remote_access(void)
{
	struct t_ep a, b;
	uint64_t id = 0;

	t_case("bad rkey, range and access: REM_ACCESS_ERR, then flush; the responder errs too");
	if (pair(&a, &b, ACC))
		return;
	CHECK(t_post(&a, IBV_WR_RDMA_WRITE, 1, 0, 64, (uintptr_t)b.buf, b.mr->rkey ^ 0x5a5a5a5a,
		     IBV_SEND_SIGNALED) == 0);
	CHECK(t_post(&a, IBV_WR_RDMA_WRITE, 2, 0, 64, (uintptr_t)b.buf, b.mr->rkey,
		     IBV_SEND_SIGNALED) == 0);
	CHECK_EQ_INT(one_status(a.cq, &id), IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ_INT(id, 1);
	CHECK_EQ_INT(one_status(a.cq, &id), IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ_INT(id, 2);
	{
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;

		CHECK(ibv_query_qp(a.qp, &qa, IBV_QP_STATE, &qi) == 0 &&
		      qa.qp_state == IBV_QPS_ERR);
		usleep(20000);
		CHECK(ibv_query_qp(b.qp, &qa, IBV_QP_STATE, &qi) == 0 &&
		      qa.qp_state == IBV_QPS_ERR);
	}
	unpair(&a, &b);

	if (pair(&a, &b, ACC))
		return;
	CHECK(t_post(&a, IBV_WR_RDMA_READ, 3, 0, 128, (uintptr_t)b.buf + BUF - 64, b.mr->rkey,
		     IBV_SEND_SIGNALED) == 0);
	CHECK_EQ_INT(one_status(a.cq, NULL), IBV_WC_REM_ACCESS_ERR);
	unpair(&a, &b);

	if (pair(&a, &b, IBV_ACCESS_LOCAL_WRITE)) /* no remote access on b's MR */
		return;
	CHECK(t_post(&a, IBV_WR_RDMA_WRITE, 4, 0, 8, (uintptr_t)b.buf, b.mr->rkey,
		     IBV_SEND_SIGNALED) == 0);
	CHECK_EQ_INT(one_status(a.cq, NULL), IBV_WC_REM_ACCESS_ERR);
	CHECK(b.buf[0] == 0);
	unpair(&a, &b);
}

static void case_local(void)
{
	struct t_ep a, b;
	struct ibv_sge sge;
	struct ibv_send_wr wr = {0}, *bad;

	t_case("bad lkey: LOC_PROT_ERR");
	if (pair(&a, &b, ACC))
		return;
	sge.addr = (uintptr_t)a.buf;
	sge.length = 16;
	sge.lkey = a.mr->lkey + 1;
	wr.wr_id = 9;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
	wr.wr.rdma.rkey = b.mr->rkey;
	CHECK(ibv_post_send(a.qp, &wr, &bad) == 0);
	CHECK_EQ_INT(one_status(a.cq, NULL), IBV_WC_LOC_PROT_ERR);
	unpair(&a, &b);
}

static void case_too_long(void)
{
	struct t_ep a, b;
	uint64_t id = 0;

	t_case("SEND longer than the receive buffer: REM_INV_REQ_ERR / LOC_LEN_ERR");
	if (pair(&a, &b, ACC))
		return;
	CHECK(t_post_recv(&b, 50, 0, 100) == 0);
	CHECK(t_post(&a, IBV_WR_SEND, 51, 0, 5000, 0, 0, IBV_SEND_SIGNALED) == 0);
	CHECK_EQ_INT(one_status(a.cq, &id), IBV_WC_REM_INV_REQ_ERR);
	CHECK_EQ_INT(one_status(b.cq, &id), IBV_WC_LOC_LEN_ERR);
	CHECK_EQ_INT(id, 50);
	unpair(&a, &b);
}

static void case_rnr(void)
{
	struct t_ep a, b;

	t_case("RNR: retried until a receive is posted; rnr_retry 0 fails with RNR_RETRY_EXC_ERR");
	if (pair(&a, &b, ACC))
		return;
	CHECK(t_post(&a, IBV_WR_SEND, 60, 0, 10, 0, 0, IBV_SEND_SIGNALED) == 0);
	usleep(30000);
	CHECK(t_post_recv(&b, 61, 0, 100) == 0);
	CHECK_EQ_INT(one_status(a.cq, NULL), IBV_WC_SUCCESS);
	CHECK_EQ_INT(one_status(b.cq, NULL), IBV_WC_SUCCESS);
	unpair(&a, &b);

	t_rnr_retry = 0;
	if (pair(&a, &b, ACC))
		return;
	t_rnr_retry = 7;
	CHECK(t_post(&a, IBV_WR_SEND, 62, 0, 10, 0, 0, IBV_SEND_SIGNALED) == 0);
	CHECK_EQ_INT(one_status(a.cq, NULL), IBV_WC_RNR_RETRY_EXC_ERR);
	unpair(&a, &b);
}

/*
 * Regression: rnr_retry counted RNR NAKs over the QP's life instead of
 * per message, so after rnr_retry recovered RNRs the next one failed at
 * once (rdma-core's test_rdmacm_async_traffic_external_qp: the 6th reply
 * that beat the peer's post_recv failed with RNR_RETRY_EXC_ERR).
 */
static void case_rnr_per_message(void)
{
	struct t_ep a, b;

	t_case("RNR: rnr_retry 1 recovers one RNR of every message, message after message");
	t_rnr_retry = 1;
	t_min_rnr_timer = 26; /* 81.92 ms: the receive is posted well before the retry */
	if (pair(&a, &b, ACC) == 0) {
		for (int k = 0; k < 4; k++) {
			CHECK(t_post(&a, IBV_WR_SEND, (uint64_t)(70 + k), 0, 10, 0, 0,
				     IBV_SEND_SIGNALED) == 0);
			usleep(10000); /* the SEND meets an empty receive queue: RNR NAK */
			CHECK(t_post_recv(&b, (uint64_t)(80 + k), 0, 100) == 0);
			CHECK_EQ_INT(one_status(a.cq, NULL), IBV_WC_SUCCESS);
			CHECK_EQ_INT(one_status(b.cq, NULL), IBV_WC_SUCCESS);
		}
		unpair(&a, &b);
	}
	t_rnr_retry = 7;
	t_min_rnr_timer = 1;
}

static void case_retry_exceeded(void)
{
	struct t_ep a, b;
	struct ibv_qp_attr qa = {0};
	uint64_t t0, ms;

	t_case("peer gone: RETRY_EXC_ERR after retry_cnt timeouts, each twice the last");
	t_timeout = 10; /* ~4 ms */
	t_retry_cnt = 2;
	if (pair(&a, &b, ACC))
		return;
	t_timeout = 14;
	t_retry_cnt = 7;
	qa.qp_state = IBV_QPS_RESET; /* b no longer answers */
	CHECK(ibv_modify_qp(b.qp, &qa, IBV_QP_STATE) == 0);
	t0 = t_ms();
	CHECK(t_post(&a, IBV_WR_RDMA_WRITE, 70, 0, 8, (uintptr_t)b.buf, b.mr->rkey,
		     IBV_SEND_SIGNALED) == 0);
	CHECK_EQ_INT(one_status(a.cq, NULL), IBV_WC_RETRY_EXC_ERR);
	/*
	 * 4.096 us << 10 = 4.2 ms, then 8.4 and 16.8 (back-off) before the
	 * third expiry finds no retry left: 29.4 ms at least, where a fixed
	 * timeout would give up after 12.6 ms.
	 */
	ms = t_ms() - t0;
	CHECK_MSG(ms >= 29 && ms < 5000,
		  "RETRY_EXC_ERR after %llu ms, want 29.4 ms or a little more",
		  (unsigned long long)ms);
	unpair(&a, &b);
}

int main(void)
{
	t_start("api_rc_errors");
	ctx = t_open_dev();
	if (!CHECK(ctx))
		return t_finish();
	case_remote_access();
	case_local();
	case_too_long();
	case_rnr();
	case_rnr_per_message();
	case_retry_exceeded();
	ibv_close_device(ctx);
	return t_finish();
}
