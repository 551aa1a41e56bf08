/* SPDX-License-Identifier: MIT */
/*
 * probe.c - round-trip estimate and the tail-loss probe of an RC requester.
 *
 * A lost packet with later packets behind it shows at the responder as a
 * gap: a sequence NAK comes back and the requester goes back to it. A
 * loss with nothing behind it does not show: the last packets before a
 * stop (a full window, an empty send queue), the ACK that answered them,
 * or the first packet resent after a NAK (the responder NAKs a gap once).
 * Only the retransmit timer, 4.096 us << timeout (67 ms at 14), would find
 * it, and that timer is charged to retry_cnt.
 *
 * The probe finds it in a few round trips. The requester times one
 * packet per round trip (never one it has sent twice: Karn's rule, except
 * that a probe does not stop the timing, see send_probe in req.c) and
 * keeps a smoothed RTT and its variation as TCP does (RFC 6298). When
 * packets are in flight and nothing was sent or acknowledged for
 *
 *	PTO = 2 x srtt + 4 x rttvar, at least SW_PROBE_MIN_NS,
 *
 * it sends the oldest unacknowledged packet once more, with AckReq. The
 * responder either has it (a duplicate, which it answers with an ACK of
 * everything it has, IBTA C9-105) or takes it (it was the gap). Either
 * way the answer moves una_psn. If the probe filled the gap, what was
 * sent after it was dropped (a responder keeps nothing out of order)
 * and the requester goes back to una_psn as after a NAK. If it was a
 * duplicate, the packets still in flight may merely be unacknowledged
 * yet: another probe follows a PTO later if nothing else moves. The
 * retransmit timer keeps running and still ends a dead path with
 * RETRY_EXC. A probe that nothing answers (it or its
 * answer was lost) is followed by another after twice the wait, and so on
 * while that wait stays below half the retransmit timeout.
 *
 * A READ at the head is probed by asking again: its request goes once
 * more from the first response missing (the responder runs a duplicate
 * READ again), which answers a lost request and a lost last response
 * alike; a gap in the responses is asked for by the completer at once
 * (comp.c).
 *
 * To a peer on the same-host link (looked up when a probe first comes
 * due, or a NAK arrives) the PTO is SW_PROBE_LINK_NS while a loss showed
 * in the last SW_LINK_LOSSY_NS (sw_probe_loss), SW_PROBE_MIN_NS
 * otherwise, and the probe goes only once the link shows that the peer
 * handled what the QP sent (link_handled). A ring loses nothing (only fault injection
 * does, or a peer that died), so without losses the short wait only woke
 * the progress thread every 50 us to find the peer behind (in a WRITE 1
 * MiB stream, about half of its 6,800 wake-ups a second). The first
 * probe waits for the link too: a peer that has not handled what was
 * sent is slow, not lossy, and asking again only doubles its work (when
 * the link was known only once a probe had gone, a responder stopped
 * for 100 ms drew a first probe that asked all 23 READs and WRITEs in
 * flight again: api_single_copy case q).
 *
 * No probe: before the first RTT sample, when the PTO is not below half
 * the retransmit timeout, while other QPs wait in the device budget's line
 * (a queueing delay, not a loss: the ACKs are behind other QPs' packets),
 * during an RNR back-off, or for an atomic at the head (the retransmit
 * timer covers it).
 */
#include "sw/transport/transport_priv.h"

/* Contract: see transport_priv.h (qp->lock held). */
uint64_t sw_probe_pto_ns(const struct sw_qp *qp)
{
	const struct sw_req *req = qp->req;
	uint64_t pto, rto;

	if (req->on_link) {
		/* and the link says when (link_handled); short only where losses show */
		pto = req->lossy_until_ns > req->last_act_ns ? SW_PROBE_LINK_NS : SW_PROBE_MIN_NS;
	} else {
		if (!req->srtt_ns)
			return 0;
		pto = 2 * (uint64_t)req->srtt_ns + 4 * (uint64_t)req->rttvar_ns;
		if (pto < SW_PROBE_MIN_NS)
			pto = SW_PROBE_MIN_NS;
	}
	rto = sw_req_timeout_ns(qp);
	if (rto && pto >= rto / 2)
		return 0;
	return pto;
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_probe_sent(struct sw_qp *qp, uint32_t psn, bool fresh)
{
	struct sw_req *req = qp->req;
	uint64_t now = sw_now_ns(), pto;

	req->last_act_ns = now;
	if (fresh && !req->rtt_on) {
		req->rtt_on = true;
		req->rtt_psn = psn;
		req->rtt_t0 = now;
	}
	pto = sw_probe_pto_ns(qp);
	if (pto)
		sw_engine_wake_for(sw_engine_of(qp), now + pto);
}

/* One RTT sample into srtt and rttvar (RFC 6298's gains, 1/8 and 1/4). */
static void rtt_sample(struct sw_req *req, uint64_t rtt)
{
	uint64_t err;

	if (rtt > UINT32_MAX)
		rtt = UINT32_MAX;
	if (!req->srtt_ns) {
		req->srtt_ns = (uint32_t)rtt;
		req->rttvar_ns = (uint32_t)(rtt / 2);
		return;
	}
	err = rtt > req->srtt_ns ? rtt - req->srtt_ns : req->srtt_ns - rtt;
	req->rttvar_ns = (uint32_t)((3 * (uint64_t)req->rttvar_ns + err) / 4);
	req->srtt_ns = (uint32_t)((7 * (uint64_t)req->srtt_ns + rtt) / 8);
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_probe_acked(struct sw_qp *qp)
{
	struct sw_req *req = qp->req;
	uint64_t now = sw_now_ns();

	req->last_act_ns = now;
	if (req->rtt_on && sw_psn_diff(req->una_psn, req->rtt_psn) > 0) {
		req->rtt_on = false;
		rtt_sample(req, now - req->rtt_t0);
	}
	if (req->probes_out) {
		/*
		 * The progress thread sleeps until the backed-off probe's time;
		 * the next one is due a PTO from now, which may be sooner.
		 */
		uint64_t pto = sw_probe_pto_ns(qp);

		if (pto && sw_req_in_flight(req))
			sw_engine_wake_for(sw_engine_of(qp), now + pto);
	}
	req->probes_out = 0;
	if (req->probed) {
		/*
		 * Answered. The responder took the probe as new (it was the
		 * gap): everything sent after it was dropped, so progress_done()
		 * goes back. It had it (a duplicate, or the ACK was merely late):
		 * nothing is known lost, and another probe may follow a PTO on.
		 */
		req->probed = false;
		req->probe_back = req->una_psn == sw_psn_add(req->probe_psn, 1);
	}
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_probe_loss(struct sw_qp *qp, uint64_t now)
{
	qp->req->lossy_until_ns = now + SW_LINK_LOSSY_NS;
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_probe_rewound(struct sw_qp *qp)
{
	qp->req->rtt_on = false;
	qp->req->probed = false;
	qp->req->probe_back = false;
	qp->req->probes_out = 0;
}

/* Contract: see transport_priv.h (qp->lock held). */
uint64_t sw_probe_due_ns(const struct sw_qp *qp)
{
	const struct sw_req *req = qp->req;
	uint64_t pto, rto;

	if (req->rnr_until_ns || !sw_req_in_flight(req) ||
	    (qp->ibv.qp_base.qp_type != IBV_QPT_RC && qp->ibv.qp_base.qp_type != IBV_QPT_XRC_SEND))
		return 0;
	pto = sw_probe_pto_ns(qp);
	if (!pto)
		return 0;
	/* an unanswered probe (lost, or its answer was): again at twice the wait */
	rto = sw_req_timeout_ns(qp);
	if (req->probes_out && (rto ? (pto << req->probes_out) >= rto / 2 : req->probes_out > 6))
		return 0; /* the retransmit timer is as near (an infinite one: 6 probes) */
	pto <<= req->probes_out;
	return req->last_act_ns + pto > req->probe_hold_ns ? req->last_act_ns + pto :
							     req->probe_hold_ns;
}

/*
 * A peer on the same-host link has handled every packet this QP sent (and
 * its answers are on their way back) once the consumer's `done` passes
 * the ring's head as it was when the probe first came due: nothing sent
 * since then is this QP's. Until then nothing is lost, only queued (a
 * deep ring, a slow or descheduled consumer): the probe waits another
 * SW_PROBE_LINK_NS. False while it waits; true when the link has handled
 * everything, or is gone (then the probe goes as over the network).
 */
static bool link_handled(struct sw_qp *qp, uint64_t now)
{
	struct sw_req *req = qp->req;
	uint64_t done, head;

	if (!sw_shm_progress(sw_engine_of(qp), &qp->attr.av.dst, &done, &head)) {
		req->on_link = false;
		return true;
	}
	if (!req->link_marked || req->mark_act != req->last_act_ns) {
		req->link_marked = true;
		req->mark_act = req->last_act_ns;
		req->link_mark = head;
	}
	if ((int64_t)(done - req->link_mark) >= 0)
		return true;
	req->probe_hold_ns = now + SW_PROBE_LINK_NS;
	return false;
}

/* Contract: see transport_priv.h (qp->lock held). */
bool sw_probe_should_fire(struct sw_qp *qp, uint64_t now)
{
	uint64_t due = sw_probe_due_ns(qp);
	enum ibv_qp_state st = qp->ibv.qp_base.state;

	if (!due || now < due || (st != IBV_QPS_RTS && st != IBV_QPS_SQD))
		return false;
	/* waiting in line itself, with its own packets in flight, is no reason */
	if (atomic_load_explicit(&sw_engine_of(qp)->budget.nwait, memory_order_relaxed) >
	    (qp->req->queued ? 1u : 0u))
		return false;
	/* the first probe too waits for a link peer that is behind (link_handled) */
	if (!qp->req->on_link)
		qp->req->on_link = sw_shm_linked(sw_engine_of(qp), &qp->attr.av.dst);
	return !qp->req->on_link || link_handled(qp, now);
}
