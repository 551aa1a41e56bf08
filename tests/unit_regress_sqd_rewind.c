/* SPDX-License-Identifier: MIT */
/*
 * unit_regress_sqd_rewind: a QP draining its send queue (SQD) goes back
 * to resend what it had sent, white-box.
 *
 * Regression: in SQD nothing new starts, and the requester told "new"
 * by the WQE's state; but going back (a sequence NAK, a retransmit
 * timeout) marks every WQE after the rewind point new again. A QP that
 * entered SQD with WRITEs in flight and then lost a packet never resent
 * it, armed no timer and never drained: api_qp_sqd hung (no
 * IBV_EVENT_SQ_DRAINED within 10 s) when the same-host link's start
 * reordered packets, about one run in ten under valgrind and load.
 *
 * As in unit_regress_late_ack, a QP sends to a QP in INIT (which drops
 * everything) and the test hands the completer the NAKs and ACKs itself.
 */
#include "harness.h"

#include <poll.h>

#include "comp_util.h"

static struct q_env env;
static struct cu_pair cp;
static uint8_t buf[4096];

static int move(struct ibv_qp *qp, enum ibv_qp_state st)
{
	struct ibv_qp_attr a = {.qp_state = st, .en_sqd_async_notify = 1};

	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | (st == IBV_QPS_SQD ? IBV_QP_EN_SQD_ASYNC_NOTIFY : 0));
}

/* The next async event is SQ_DRAINED for qp (0 ms: it is already there). */
static void expect_drained(struct ibv_qp *qp)
{
	struct pollfd p = {.fd = env.ctx->async_fd, .events = POLLIN};
	struct ibv_async_event ev;

	if (!CHECK_MSG(poll(&p, 1, 0) == 1 && ibv_get_async_event(env.ctx, &ev) == 0,
		       "no SQ_DRAINED event"))
		return;
	CHECK(ev.event_type == IBV_EVENT_SQ_DRAINED && ev.element.qp == qp);
	ibv_ack_async_event(&ev);
}

/*
 * Three WRITEs in flight, SQD, then `lose` makes the requester go back
 * to the second: it must resend the second and third (not start the
 * late fourth), and drain once they are acknowledged.
 */
static void drain_after(struct ibv_qp *a, const char *name, bool by_nak)
{
	struct sw_qp *q = sw_qp(a);
	struct ibv_wc wc[4];
	uint32_t first, base = q->sq.prod;

	t_case(name);
	for (uint64_t i = 0; i < 3; i++)
		CHECK(cu_post_write(a, cp.mr, buf, i, 1024) == 0);
	pthread_mutex_lock(&q->lock);
	first = ((struct sw_send_wqe *)sw_ring_slot(&q->sq, base))->first_psn;
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, 3)); /* all sent */
	pthread_mutex_unlock(&q->lock);
	CHECK_RET(move(a, IBV_QPS_SQD), 0);
	CHECK(cu_post_write(a, cp.mr, buf, 3, 1024) == 0); /* late: waits for RTS */
	pthread_mutex_lock(&q->lock);
	if (by_nak) {
		cu_aeth(q, sw_psn_add(first, 1), SW_AETH_NAK_PSN_SEQ); /* the first arrived */
	} else {
		cu_aeth(q, first, SW_AETH_ACK_NO_CREDIT);
		sw_req_rewind(q, q->req->una_psn); /* what the retransmit timer does */
		sw_req_run(q);
	}
	CHECK_MSG(q->req->psn == sw_psn_add(first, 3),
		  "after going back in SQD: next PSN %#x, want %#x (the two resent)", q->req->psn,
		  sw_psn_add(first, 3));
	cu_aeth(q, sw_psn_add(first, 2), SW_AETH_ACK_NO_CREDIT);
	CHECK_EQ_INT(q->sq.cons, base + 3);
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, 3)); /* the late one did not start */
	pthread_mutex_unlock(&q->lock);
	if (CHECK_EQ_INT(q_poll(env.scq, wc, 4, 3), 3))
		for (int i = 0; i < 3; i++)
			CHECK(wc[i].wr_id == (uint64_t)i && wc[i].status == IBV_WC_SUCCESS);
	expect_drained(a);
	CHECK_RET(move(a, IBV_QPS_RTS), 0);
	pthread_mutex_lock(&q->lock);
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, 4)); /* RTS: the late one went out */
	cu_aeth(q, sw_psn_add(first, 3), SW_AETH_ACK_NO_CREDIT);
	pthread_mutex_unlock(&q->lock);
	CHECK(q_poll(env.scq, wc, 1, 1) == 1 && wc[0].wr_id == 3 && wc[0].status == IBV_WC_SUCCESS);
}

int main(void)
{
	t_start("unit_regress_sqd_rewind");
	if (cu_setup(&env, &cp, buf, sizeof(buf)))
		return t_finish();
	drain_after(cp.a, "SQD, then a sequence NAK: the rest is resent, then drained", true);
	drain_after(cp.a, "SQD, then a retransmit timeout: resent, then drained", false);
	cu_teardown(&env, &cp);
	return t_finish();
}
