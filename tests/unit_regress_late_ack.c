/* SPDX-License-Identifier: MIT */
/*
 * unit_regress_late_ack: an ACK or NAK that arrives after the requester
 * went back to retransmit, white-box.
 *
 * Regression: after a retransmit timeout the requester goes back to the
 * oldest unacknowledged PSN and resends, window-limited. If the ACK of
 * the original transmission then arrives (it was only late: the peer's
 * progress thread had not been scheduled for longer than the timeout,
 * as ibv_srq_pingpong -s 65536 does on two busy CPUs), the completer
 * retired the WQE and moved the send position to the next WQE but left
 * the next PSN where the retransmission had got to, behind the oldest
 * unacknowledged one. The window check then saw ~2^32 packets in flight
 * and the requester never sent again, with no timer armed: both sides
 * hung. The same ACK in the middle of a message left the requester
 * resending packets already acknowledged.
 *
 *
 * Regression: a sequence NAK that was duplicated or overtaken by a newer
 * one (its PSN older than the oldest unacknowledged one) made the
 * requester go back to that PSN, behind what was acknowledged: the same
 * window check then saw ~2^32 packets in flight and the QP hung (seen
 * under fault injection with reordering).
 *
 * The test drives the completer directly: a QP sends to a QP in INIT
 * (which drops everything, so only the test's ACKs arrive), is rewound
 * as a timeout would, and then gets the late ACK.
 */
#include "harness.h"

#include "comp_util.h"

static struct q_env env;
static struct cu_pair cp;
static uint8_t buf[16384];

static void ack(struct sw_qp *q, uint32_t psn)
{
	cu_aeth(q, psn, SW_AETH_ACK_NO_CREDIT);
}

static struct sw_send_wqe *wqe(struct sw_qp *q, uint32_t idx)
{
	return sw_ring_slot(&q->sq, idx);
}

int main(void)
{
	struct ibv_qp *a;
	struct sw_qp *q;
	struct ibv_wc wc[4];
	uint32_t first;

	t_start("unit_regress_late_ack");
	if (cu_setup(&env, &cp, buf, sizeof(buf)))
		return t_finish();
	a = cp.a;
	q = cp.q;

	t_case("a late ACK of a whole message: the next message gets the next PSN");
	CHECK(cu_post_write(a, cp.mr, buf, 1, 8192) == 0); /* 8 packets at MTU 1024 */
	CHECK(cu_post_write(a, cp.mr, buf, 2, 1024) == 0); /* 1 packet */
	pthread_mutex_lock(&q->lock);
	first = wqe(q, 0)->first_psn;
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, 9)); /* all sent */
	/* the retransmit timeout, window-limited to 2 packets */
	q->req->window = 2;
	sw_req_rewind(q, q->req->una_psn);
	sw_req_run(q);
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, 2));
	/* the original ACK of the first message arrives */
	ack(q, sw_psn_add(first, 7));
	CHECK_EQ_INT(q->sq.cons, 1);
	CHECK_EQ_INT(q->req->una_psn, sw_psn_add(first, 8));
	/* the second message went out again, at its own PSN */
	CHECK_EQ_INT(wqe(q, 1)->first_psn, sw_psn_add(first, 8));
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, 9));
	CHECK_EQ_INT(q->req->send_idx, 2);
	ack(q, sw_psn_add(first, 8));
	CHECK_EQ_INT(q->sq.cons, 2);
	pthread_mutex_unlock(&q->lock);
	if (CHECK_EQ_INT(q_poll(env.scq, wc, 4, 2), 2)) {
		CHECK(wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS);
		CHECK(wc[1].wr_id == 2 && wc[1].status == IBV_WC_SUCCESS);
	}

	t_case("a late ACK in the middle of a message: resending skips what it covers");
	CHECK(cu_post_write(a, cp.mr, buf, 3, 8192) == 0);
	pthread_mutex_lock(&q->lock);
	first = wqe(q, 2)->first_psn;
	q->req->window = 2;
	sw_req_rewind(q, q->req->una_psn);
	sw_req_run(q);
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, 2));
	ack(q, sw_psn_add(first, 4)); /* packets 0..4 arrived the first time */
	CHECK_EQ_INT(q->req->una_psn, sw_psn_add(first, 5));
	/* resumed at packet 5: the ACK grew the window to 3, so 5, 6 and 7 went out */
	CHECK_EQ_INT(q->req->send_idx, 3);
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, 8));
	ack(q, sw_psn_add(first, 7));
	CHECK_EQ_INT(q->sq.cons, 3);
	CHECK_EQ_INT(q->req->psn, q->req->una_psn);
	pthread_mutex_unlock(&q->lock);
	if (CHECK_EQ_INT(q_poll(env.scq, wc, 4, 1), 1))
		CHECK(wc[0].wr_id == 3 && wc[0].status == IBV_WC_SUCCESS);

	t_case("a stale NAK, older than what is acknowledged: ignored");
	pthread_mutex_lock(&q->lock);
	q->req->window = 64;
	pthread_mutex_unlock(&q->lock);
	CHECK(cu_post_write(a, cp.mr, buf, 4, 8192) == 0);
	pthread_mutex_lock(&q->lock);
	first = wqe(q, 3)->first_psn;
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, 8));
	cu_aeth(q, sw_psn_add(first, 3), SW_AETH_NAK_PSN_SEQ); /* 0..2 arrived, 3 lost */
	CHECK_EQ_INT(q->req->una_psn, sw_psn_add(first, 3));
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, 8)); /* 3..7 went out again */
	cu_aeth(q, sw_psn_add(first, 1), SW_AETH_NAK_PSN_SEQ); /* an older NAK, late */
	cu_aeth(q, sw_psn_add(first, 2), SW_AETH_RNR_NAK | 1);
	CHECK_EQ_INT(q->req->una_psn, sw_psn_add(first, 3));
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, 8));
	CHECK_EQ_INT(q->req->rnr_until_ns, 0);
	CHECK_EQ_INT(q->req->send_idx, 4);
	ack(q, sw_psn_add(first, 7));
	CHECK_EQ_INT(q->sq.cons, 4);
	CHECK_EQ_INT(q->req->psn, q->req->una_psn);
	pthread_mutex_unlock(&q->lock);
	if (CHECK_EQ_INT(q_poll(env.scq, wc, 4, 1), 1))
		CHECK(wc[0].wr_id == 4 && wc[0].status == IBV_WC_SUCCESS);

	cu_teardown(&env, &cp);
	return t_finish();
}
