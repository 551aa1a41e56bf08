/* SPDX-License-Identifier: MIT */
/*
 * unit_regress_link_pto: on the same-host link the tail-loss probe's
 * short wait applies only while losses show, white-box.
 *
 * Regression: a QP whose peer is on the link had its probe come due 50
 * us (SW_PROBE_LINK_NS) after its last send or acknowledgement, always.
 * A ring loses nothing, so on a link without fault injection every such
 * probe was held (the peer was merely behind) and woke the progress
 * thread again 50 us later: a READ 64 KiB stream woke it about 8,000
 * times a second (6,500 with the rule below), and ran at 8.7-12.3 GB/s
 * against 10.3-14.7 with the rule below, in the same minutes.
 * Now the short wait applies for SW_LINK_LOSSY_NS after a loss showed (a
 * sequence NAK, a READ response gap, a probe that filled a gap or that
 * the link let go, a timeout); otherwise the probe comes due after
 * SW_PROBE_MIN_NS, the network's floor.
 *
 * As unit_regress_late_ack, the QP sends to a QP in INIT, which drops
 * everything, and the test hands the completer the answers itself. The
 * QP is marked as on the link by hand, within each locked section (the
 * progress thread's timers would find no link and clear the mark).
 */
#include "harness.h"

#include "comp_util.h"

enum {
	MTU = 1024,
	NPKT = 4
};

static struct q_env env;
static struct cu_pair cp;
static uint8_t buf[NPKT * MTU];

int main(void)
{
	struct ibv_qp *a;
	struct sw_qp *q;
	struct sw_req *req;
	uint32_t first;

	t_start("unit_regress_link_pto");
	if (cu_setup(&env, &cp, buf, sizeof(buf)))
		return t_finish();
	a = cp.a;
	q = cp.q;
	req = q->req;
	CHECK_RET(cu_post_write(a, cp.mr, buf, 1, sizeof(buf)), 0);

	t_case("a WRITE in flight to a link peer, no loss seen: the probe waits 1 ms");
	pthread_mutex_lock(&q->lock);
	first = ((struct sw_send_wqe *)sw_ring_slot(&q->sq, 0))->first_psn;
	CHECK(sw_req_in_flight(req));
	req->on_link = true;
	CHECK_EQ_INT(sw_probe_pto_ns(q), SW_PROBE_MIN_NS);
	CHECK(sw_probe_due_ns(q) >= req->last_act_ns + SW_PROBE_MIN_NS);
	req->on_link = false;
	pthread_mutex_unlock(&q->lock);

	t_case("after a sequence NAK: 50 us, the link's own wait");
	pthread_mutex_lock(&q->lock);
	req->on_link = true;
	cu_aeth(q, first, SW_AETH_NAK_PSN_SEQ);
	CHECK(sw_req_in_flight(req)); /* nothing acknowledged: resent */
	req->on_link = true; /* the NAK looked the link up: none with SOFTVERBS_SHM=0 */
	CHECK_EQ_INT(sw_probe_pto_ns(q), SW_PROBE_LINK_NS);
	req->on_link = false;
	pthread_mutex_unlock(&q->lock);

	t_case("SW_LINK_LOSSY_NS later with no further loss: 1 ms again");
	pthread_mutex_lock(&q->lock);
	req->on_link = true;
	req->last_act_ns = req->lossy_until_ns; /* as if that much time had passed */
	CHECK_EQ_INT(sw_probe_pto_ns(q), SW_PROBE_MIN_NS);
	req->on_link = false;
	pthread_mutex_unlock(&q->lock);

	t_case("the ACK: the WRITE completes");
	pthread_mutex_lock(&q->lock);
	cu_aeth(q, sw_psn_add(first, NPKT - 1), SW_AETH_ACK_NO_CREDIT);
	CHECK(!sw_req_in_flight(req));
	pthread_mutex_unlock(&q->lock);
	{
		struct ibv_wc wc[2];

		if (CHECK_EQ_INT(q_poll(env.scq, wc, 2, 1), 1))
			CHECK(wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS);
	}

	cu_teardown(&env, &cp);
	return t_finish();
}
