/* SPDX-License-Identifier: MIT */
/*
 * api_regress_reset_cq.c - a QP moved to RESET, or destroyed, takes its
 * unread completions out of its CQ; other QPs' completions on that CQ
 * stay, in order.
 *
 * Regression (rdma-core's test_mr rereg_pd / rereg_addr): a QP in ERR
 * flushed its receives, the application moved it RESET -> RTS again and
 * resumed traffic, and its next poll returned a stale WR_FLUSH_ERR of the
 * old incarnation instead of the new completion. mlx5 cleans the CQ on
 * the move to RESET, and applications (pyverbs' suite among them) count
 * on it.
 *
 * Regression (libfabric's 'verbs;ofi_rxm', fi_pingpong's server): the
 * msg endpoint's QP was destroyed with flushed receives still in the
 * shared CQ; rxm polled them afterwards and reposted each buffer to the
 * freed endpoint (SIGSEGV). mlx5 cleans both CQs when a QP is destroyed.
 */
#include "harness.h"
#include "traffic.h"

static struct ibv_qp *extra_qp(struct t_ep *a)
{
	struct ibv_qp_init_attr ia = {0};

	ia.send_cq = a->cq;
	ia.recv_cq = a->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 4;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	return ibv_create_qp(a->pd, &ia);
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr at = {.qp_state = s};

	return ibv_modify_qp(qp, &at, IBV_QP_STATE);
}

static int post_recv_on(struct ibv_qp *qp, struct t_ep *owner, uint64_t wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)owner->buf, .length = 64, .lkey = owner->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad = NULL;

	return ibv_post_recv(qp, &wr, &bad);
}

int main(void)
{
	struct t_ep a, b;
	struct ibv_qp *c;
	struct ibv_wc wc[8];
	struct t_addr ba;
	int n;

	t_start("api_regress_reset_cq");
	if (t_ep_init(&a, NULL, IBV_QPT_RC, 4096, IBV_ACCESS_LOCAL_WRITE, 8) ||
	    t_ep_init(&b, a.ctx, IBV_QPT_RC, 4096, IBV_ACCESS_LOCAL_WRITE, 8) ||
	    t_connect(&a, &b, IBV_MTU_1024))
		return t_finish();
	c = extra_qp(&a);
	if (!CHECK(c) || !CHECK(t_qp_init(c, 0) == 0))
		return t_finish();

	t_case("RESET drops the QP's flushes, keeps another QP's in order");
	CHECK(post_recv_on(c, &a, 100) == 0);
	CHECK(to_state(c, IBV_QPS_ERR) == 0);
	CHECK(t_post_recv(&a, 1, 0, 64) == 0);
	CHECK(t_post_recv(&a, 2, 0, 64) == 0);
	CHECK(to_state(a.qp, IBV_QPS_ERR) == 0);
	CHECK(post_recv_on(c, &a, 101) == 0); /* in ERR: flushed at once */
	CHECK(to_state(a.qp, IBV_QPS_RESET) == 0);
	n = t_poll(a.cq, wc, 8, 200);
	CHECK_EQ_INT(n, 2);
	if (n == 2) {
		CHECK_EQ_INT(wc[0].wr_id, 100);
		CHECK_EQ_INT(wc[1].wr_id, 101);
		CHECK_EQ_INT(wc[0].status, IBV_WC_WR_FLUSH_ERR);
		CHECK_EQ_INT(wc[0].qp_num, c->qp_num);
	}

	t_case("after RESET -> RTS the next completion is the new one");
	ba = t_addr_of(&b, 0xfffff0);
	if (CHECK(t_qp_init(a.qp, IBV_ACCESS_REMOTE_WRITE) == 0) &&
	    CHECK(t_connect_to(&a, &ba, 100, IBV_MTU_1024) == 0)) {
		CHECK(t_post_recv(&a, 7, 0, 64) == 0);
		CHECK(t_post(&b, IBV_WR_SEND, 8, 0, 16, 0, 0, IBV_SEND_SIGNALED) == 0);
		n = t_poll(a.cq, wc, 1, 10000);
		CHECK_EQ_INT(n, 1);
		if (n == 1) {
			CHECK_EQ_INT(wc[0].wr_id, 7);
			CHECK_EQ_INT(wc[0].status, IBV_WC_SUCCESS);
			CHECK_EQ_INT(wc[0].byte_len, 16);
		}
		CHECK_EQ_INT(t_poll(b.cq, wc, 1, 10000), 1);
		CHECK_EQ_INT(wc[0].status, IBV_WC_SUCCESS);
	}

	t_case("destroying a QP drops its unread completions, keeps others");
	CHECK(post_recv_on(c, &a, 200) == 0);
	CHECK(post_recv_on(c, &a, 201) == 0);
	CHECK(t_post_recv(&a, 9, 0, 64) == 0);
	CHECK(t_post(&b, IBV_WR_SEND, 10, 0, 16, 0, 0, IBV_SEND_SIGNALED) == 0);
	CHECK_EQ_INT(t_poll(b.cq, wc, 1, 10000), 1);
	CHECK(to_state(c, IBV_QPS_ERR) == 0);
	CHECK(ibv_destroy_qp(c) == 0);
	n = t_poll(a.cq, wc, 8, 200);
	CHECK_EQ_INT(n, 1);
	if (n >= 1) {
		CHECK_EQ_INT(wc[0].wr_id, 9);
		CHECK_EQ_INT(wc[0].status, IBV_WC_SUCCESS);
	}

	t_ep_destroy(&b, false);
	t_ep_destroy(&a, true);
	return t_finish();
}
