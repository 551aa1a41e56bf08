/* SPDX-License-Identifier: MIT */
/*
 * unit_flush_taken_recv.c - a receive WQE the responder already took for
 * a multi-packet SEND in progress is flushed when the QP moves to ERR,
 * first, before the receives still in the ring.
 */
#include "harness.h"
#include "traffic.h"

#include "sw/transport/transport_priv.h"

int main(void)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	struct ibv_wc wc[3];
	struct sw_qp *qp;
	struct t_ep e;

	t_start("unit_flush_taken_recv");
	if (t_ep_init(&e, NULL, IBV_QPT_RC, 4096, IBV_ACCESS_LOCAL_WRITE, 8))
		return t_finish();
	CHECK(t_post_recv(&e, 1, 0, 100) == 0);
	CHECK(t_post_recv(&e, 2, 100, 100) == 0);
	qp = sw_qp(e.qp);
	/* what the responder does on a SEND_FIRST */
	pthread_mutex_lock(&qp->lock);
	CHECK(sw_qp_take_recv(qp, qp->resp->wqe) == 0);
	qp->resp->have_wqe = true;
	qp->resp->in_send = true;
	pthread_mutex_unlock(&qp->lock);
	CHECK(ibv_modify_qp(e.qp, &a, IBV_QP_STATE) == 0);
	if (CHECK_EQ_INT(t_poll(e.cq, wc, 3, 1000), 2)) {
		CHECK(wc[0].wr_id == 1 && wc[0].status == IBV_WC_WR_FLUSH_ERR);
		CHECK(wc[0].opcode == IBV_WC_RECV);
		CHECK(wc[1].wr_id == 2 && wc[1].status == IBV_WC_WR_FLUSH_ERR);
	}
	t_ep_destroy(&e, true);
	return t_finish();
}
