/* SPDX-License-Identifier: MIT */
/*
 * req_uc.c - the UC requester: send WQEs become UC request packets.
 *
 * UC has no acknowledgements, so none of RC's machinery applies: no
 * window, no device budget, no retransmit timer, no probe, no AckReq.
 * WQEs leave the SQ in order, each as max(1, ceil(n / MTU)) packets with
 * consecutive PSNs, and a WQE completes successfully (if signalled) as
 * soon as its last packet is on the wire, whatever becomes of it. A full
 * socket or same-host ring stops the QP at the packet that did not go:
 * the progress thread resumes it there (wait_writable, sw_req_timer).
 * A bad local SGE fails the WQE with a local length or protection error
 * and the QP goes to the error state, as on RC. In SQD a message that
 * started is finished, and nothing new starts.
 *
 * una_psn follows psn, so nothing is ever "in flight" for the timers,
 * the settle pass before a modify to ERR, or SQD's drain.
 */
#include "sw/transport/transport_priv.h"

/* Contract: see transport_priv.h (qp->lock held). */
void sw_req_uc_run(struct sw_qp *qp)
{
	struct sw_req *req = qp->req;
	enum ibv_qp_state st = qp->ibv.qp_base.state;
	struct sw_engine *eng = sw_engine_of(qp);
	uint8_t buf[SW_PKT_MAX];

	if (!req || (st != IBV_QPS_RTS && st != IBV_QPS_SQD))
		return;
	req->wait_writable = false;
	while (req->send_idx != qp->sq.prod) {
		struct sw_send_wqe *w = sw_ring_slot(&qp->sq, req->send_idx);
		int len, ret;

		if (req->send_off == 0) {
			if (st == IBV_QPS_SQD)
				break; /* draining: nothing new starts */
			w->first_psn = req->psn;
			w->npkts = sw_wqe_npkts(qp, w);
			w->state = SW_WQE_STARTED;
		}
		len = sw_req_build(qp, w, req->send_off, 1, buf, false, NULL);
		if (len < 0) {
			sw_comp_retire(qp,
				       len == -EINVAL ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR);
			return;
		}
		ret = sw_net_send(eng, buf, (size_t)len, &qp->attr.av);
		if (ret == -EAGAIN) {
			req->wait_writable = true;
			sw_engine_wake(eng);
			return;
		}
		if (!ret) {
			SW_QP_COUNT(qp, tx_pkts, 1);
			SW_QP_COUNT(qp, tx_bytes, (unsigned long long)len);
		}
		req->psn = sw_psn_add(req->psn, 1);
		req->una_psn = req->psn;
		req->high_psn = req->psn;
		if (++req->send_off < w->npkts)
			continue;
		req->send_idx++;
		req->send_off = 0;
		sw_comp_retire(qp, IBV_WC_SUCCESS);
	}
}
