/* SPDX-License-Identifier: MIT */
/*
 * comp.c - the completer: responses retire send WQEs, in order.
 *
 * An ACK of PSN p retires every SEND and WRITE whose last packet is at or
 * before p; READ responses and atomic ACKs also acknowledge everything
 * before them. A READ or atomic completes only with its data: an ACK that
 * passes one means its response was lost, so the requester asks again. A
 * NAK names the PSN it refuses: sequence errors rewind, RNR NAKs back
 * off, and the other NAKs fail the WQE, which moves the QP to error and
 * flushes everything behind it.
 */
#include <string.h>

#include "sw/transport/transport_priv.h"

static struct sw_send_wqe *head(struct sw_qp *qp)
{
	return sw_ring_slot(&qp->sq, qp->sq.cons);
}

static bool outstanding(const struct sw_qp *qp)
{
	return qp->sq.cons != qp->req->send_idx || qp->req->send_off;
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_comp_check_drained(struct sw_qp *qp)
{
	if (qp->ibv.qp_base.state != IBV_QPS_SQD || !qp->attr.sq_draining || outstanding(qp))
		return;
	qp->attr.sq_draining = 0;
	if (qp->attr.en_sqd_async_notify)
		(void)sw_qp_event(qp, IBV_EVENT_SQ_DRAINED);
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_comp_retire(struct sw_qp *qp, enum ibv_wc_status status)
{
	struct sw_req *req = qp->req;
	struct sw_send_wqe *w;

	if (qp->sq.cons == qp->sq.prod)
		return;
	w = head(qp);
	if (sw_wr_is_rd_atomic(w->opcode) && w->state == SW_WQE_STARTED && req->rd_atomic)
		req->rd_atomic--;
	/* SIGNALED: asked for, or set at post under sq_sig_all */
	if (status != IBV_WC_SUCCESS || (w->send_flags & IBV_SEND_SIGNALED)) {
		struct ibv_wc wc;

		sw_wc_init(&wc, qp, w->wr_id, status, sw_send_wc_opcode(w->opcode));
		if (w->opcode == IBV_WR_RDMA_READ)
			wc.byte_len = w->length;
		else if (sw_wr_is_rd_atomic(w->opcode) && w->opcode != IBV_WR_FLUSH)
			wc.byte_len = 8;
		sw_qp_cq_push(qp, qp->scq, &wc, false);
	}
	qp->sq.cons++;
	if ((int32_t)(req->send_idx - qp->sq.cons) < 0) {
		/*
		 * The requester was (re)sending this WQE when it was acknowledged
		 * (an ACK delayed past a retransmit timeout): the next WQE starts
		 * at the PSN after it, not where the retransmission had got to.
		 */
		uint32_t next = sw_psn_add(w->first_psn, w->npkts);

		req->send_idx = qp->sq.cons;
		req->send_off = 0;
		if (w->state != SW_WQE_NEW && sw_psn_diff(next, req->psn) > 0)
			req->psn = next;
	}
	req->read_rx_pkts = 0;
	req->resp_asked = false;
	if (!sw_req_in_flight(req))
		req->deadline_ns = 0;
	if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR) {
		sw_transport_fail(qp); /* timers stop, the rest is flushed */
		return;
	}
	sw_comp_check_drained(qp);
}

/* The oldest WQE failed locally and everything before it is done. */
static bool retire_failed_head(struct sw_qp *qp)
{
	if (qp->sq.cons == qp->sq.prod || head(qp)->state != SW_WQE_FAILED)
		return false;
	sw_comp_retire(qp, (enum ibv_wc_status)head(qp)->fail_status);
	return true;
}

/*
 * Retire every SEND/WRITE acknowledged by PSN `psn`. Returns true if the
 * acknowledgement skipped a READ or atomic (its response was lost: the
 * caller asks again).
 */
static bool ack_upto(struct sw_qp *qp, uint32_t psn)
{
	struct sw_req *req = qp->req;
	uint32_t una0 = req->una_psn;
	bool progress = false;

	while (outstanding(qp) && qp->ibv.qp_base.state != IBV_QPS_ERR) {
		struct sw_send_wqe *w = head(qp);
		uint32_t last = sw_psn_add(w->first_psn, w->npkts - 1);

		if (retire_failed_head(qp))
			return false;
		if (w->state != SW_WQE_STARTED || sw_psn_diff(psn, w->first_psn) < 0)
			break;
		if (sw_psn_diff(psn, last) < 0) {
			/* part of a multi-packet message */
			if (!sw_wr_is_rd_atomic(w->opcode) &&
			    sw_psn_diff(sw_psn_add(psn, 1), req->una_psn) > 0) {
				req->una_psn = sw_psn_add(psn, 1);
				progress = true;
				/* resending it from an earlier packet: skip what is acknowledged */
				if (req->send_idx == qp->sq.cons &&
				    sw_psn_diff(req->psn, req->una_psn) < 0) {
					req->send_off =
						(uint32_t)sw_psn_diff(req->una_psn, w->first_psn);
					req->psn = req->una_psn;
				}
			}
			break;
		}
		if (sw_wr_is_rd_atomic(w->opcode))
			return true;
		req->una_psn = sw_psn_add(last, 1);
		sw_comp_retire(qp, IBV_WC_SUCCESS);
		progress = true;
	}
	if (progress) {
		sw_req_acked(qp);
		sw_req_grow(qp, (uint32_t)sw_psn_diff(req->una_psn, una0));
		req->deadline_ns = 0; /* re-armed below while anything is outstanding */
	}
	return false;
}

/* After any response: re-arm the timer and send what is now allowed. */
static void progress_done(struct sw_qp *qp)
{
	struct sw_req *req = qp->req;

	if (qp->ibv.qp_base.state == IBV_QPS_ERR)
		return;
	if (req->probe_back) {
		/*
		 * The answer to a tail-loss probe: what is still in flight after
		 * it was lost, or dropped behind the gap it filled (probe.c).
		 */
		req->probe_back = false;
		if (sw_req_in_flight(req) && outstanding(qp) &&
		    !sw_wr_is_rd_atomic(head(qp)->opcode)) {
			sw_probe_loss(qp, sw_now_ns()); /* the probe filled a gap */
			sw_req_cut(qp);
			sw_req_rewind(qp, req->una_psn);
		}
	}
	if (sw_req_in_flight(req))
		sw_req_arm_timer(qp);
	sw_req_run(qp);
}

/*
 * The head READ or atomic lost a response: ask again from the first one
 * missing, once per gap. Every response (or ACK) still in flight behind
 * the gap would otherwise ask again too, and each request makes the
 * responder resend everything after the gap: a storm that grows with
 * the READ's length. Until the missing response arrives, later ones are
 * dropped; the retransmit timer covers a lost request.
 */
static void lost_response(struct sw_qp *qp)
{
	struct sw_send_wqe *w = head(qp);

	if (qp->req->resp_asked)
		return;
	qp->req->resp_asked = true;
	sw_probe_loss(qp, sw_now_ns());
	sw_req_rewind(qp, sw_psn_add(w->first_psn, qp->req->read_rx_pkts));
}

/* The RNR NAK timer code (0..31) of an AETH in ns, as IBTA defines them (code 0 is the longest). */
static uint64_t rnr_ns(uint8_t code)
{
	static const uint32_t us100[32] = {
		/* hundredths of a millisecond, i.e. units of 10 us */
		65536, 1,    2,	   3,	 4,    6,     8,     12,    16,	   24,	  32,
		48,    64,   96,   128,	 192,  256,   384,   512,   768,   1024,  1536,
		2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
	};

	return (uint64_t)us100[code & 31] * 10000;
}

static void on_nak(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_req *req = qp->req;
	struct sw_engine *eng = sw_engine_of(qp);
	uint8_t syn = pkt->syndrome;

	if (ack_upto(qp, sw_psn_add(pkt->psn, SW_PSN_MASK))) /* psn - 1 */
		lost_response(qp);
	if (!outstanding(qp) || qp->ibv.qp_base.state == IBV_QPS_ERR)
		return;
	if (sw_psn_diff(pkt->psn, req->una_psn) < 0) {
		/*
		 * Older than what is acknowledged already: a NAK that was
		 * duplicated or overtaken. Going back to its PSN would resend
		 * what the responder has, and leave the next PSN behind the
		 * acknowledged one.
		 */
		atomic_fetch_add_explicit(&eng->cnt.duplicates, 1, memory_order_relaxed);
		return;
	}
	if ((syn & SW_AETH_TYPE_MASK) == SW_AETH_RNR_NAK) {
		SW_COUNT(eng, qp, rnr_naks_rx);
		if (!req->rnr_retries) {
			sw_comp_retire(qp, IBV_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		if (qp->attr.rnr_retry != 7)
			req->rnr_retries--;
		sw_req_rewind(qp, pkt->psn);
		req->rnr_until_ns = sw_now_ns() + rnr_ns(syn & SW_AETH_VALUE_MASK);
		req->deadline_ns = 0;
		sw_engine_wake(eng);
		return;
	}
	if (syn == SW_AETH_NAK_PSN_SEQ) {
		SW_COUNT(eng, qp, seq_naks_rx);
		sw_probe_loss(qp, sw_now_ns());
		if (!sw_req_selective(qp, pkt->psn)) {
			sw_req_cut(qp);
			sw_req_rewind(qp, pkt->psn);
		} else {
			/*
			 * An answer to a probe too: the responder kept what came
			 * after the gap it names, so nothing is to go back over.
			 */
			req->probe_back = false;
			if (!req->on_link) /* the network may have dropped it for want of room */
				sw_req_cut_at(qp, pkt->psn);
		}
		req->deadline_ns = 0;
		progress_done(qp);
		return;
	}
	SW_COUNT(eng, qp, err_naks_rx);
	switch (syn) {
	case SW_AETH_NAK_INV_REQ:
		sw_comp_retire(qp, IBV_WC_REM_INV_REQ_ERR);
		break;
	case SW_AETH_NAK_REM_ACCESS:
		sw_comp_retire(qp, IBV_WC_REM_ACCESS_ERR);
		break;
	case SW_AETH_NAK_INV_RD_REQ:
		sw_comp_retire(qp, IBV_WC_REM_INV_RD_REQ_ERR);
		break;
	default:
		sw_comp_retire(qp, IBV_WC_REM_OP_ERR);
		break;
	}
}

/* Expected opcode of READ response packet k of n. */
static uint8_t read_resp_opcode(uint32_t k, uint32_t n)
{
	if (n == 1)
		return SW_OP_READ_RESP_ONLY;
	if (k == 0)
		return SW_OP_READ_RESP_FIRST;
	return k == n - 1 ? SW_OP_READ_RESP_LAST : SW_OP_READ_RESP_MIDDLE;
}

static void on_read_resp(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_req *req = qp->req;
	uint32_t mtu = qp->attr.mtu, k, want;
	struct sw_send_wqe *w;
	int32_t d;
	int ret;

	/* responses acknowledge everything before them */
	(void)ack_upto(qp, sw_psn_add(pkt->psn, SW_PSN_MASK));
	if (!outstanding(qp) || qp->ibv.qp_base.state == IBV_QPS_ERR)
		return;
	w = head(qp);
	if ((w->opcode != IBV_WR_RDMA_READ && w->opcode != IBV_WR_FLUSH) ||
	    w->state != SW_WQE_STARTED)
		return; /* stale (a FLUSH is answered by one empty READ response) */
	d = sw_psn_diff(pkt->psn, sw_psn_add(w->first_psn, req->read_rx_pkts));
	if (d < 0) {
		SW_COUNT(sw_engine_of(qp), qp, duplicates);
		return;
	}
	if (d > 0) {
		lost_response(qp); /* ask again from the first missing response */
		req->deadline_ns = 0;
		progress_done(qp);
		return;
	}
	k = req->read_rx_pkts;
	want = w->length - k * mtu < mtu ? w->length - k * mtu : mtu;
	if (pkt->placed && !w->pushed) {
		/* bytes we never asked to be written for us: as if lost, so asked again */
		SW_COUNT(sw_engine_of(qp), qp, drops_malformed);
		return;
	}
	if (pkt->opcode != read_resp_opcode(k, w->npkts) || pkt->paylen != want) {
		sw_comp_retire(qp, IBV_WC_BAD_RESP_ERR);
		return;
	}
	/* placed: the responder wrote the bytes while our hold kept the MRs (single copy) */
	ret = pkt->placed ? 0 :
			    sw_sge_scatter_rx(qp, (const struct ibv_sge *)(void *)w->data,
					      w->num_sge, k * mtu, pkt->payload, pkt->paylen);
	if (ret) {
		sw_comp_retire(qp, ret == -EINVAL ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR);
		return;
	}
	req->read_rx_pkts++;
	req->resp_asked = false;
	req->una_psn = sw_psn_add(pkt->psn, 1);
	sw_req_acked(qp);
	sw_req_grow(qp, 1); /* a response acknowledges its PSN as an ACK would */
	req->deadline_ns = 0;
	if (req->read_rx_pkts == w->npkts)
		sw_comp_retire(qp, IBV_WC_SUCCESS);
	progress_done(qp);
}

/* Contract: see transport_priv.h (qp->lock held). */
bool sw_comp_placed_middles(struct sw_qp *qp, uint32_t psn, uint32_t n)
{
	struct sw_req *req = qp->req;
	enum ibv_qp_state st = qp->ibv.qp_base.state;
	struct sw_send_wqe *w;

	if (!req || (st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_SQE) ||
	    !outstanding(qp))
		return false;
	w = head(qp);
	/* MIDDLEs only: a response taken before them, the LAST still owed after */
	if (w->opcode != IBV_WR_RDMA_READ || w->state != SW_WQE_STARTED || !w->pushed ||
	    !req->read_rx_pkts || req->read_rx_pkts + n >= w->npkts ||
	    psn != sw_psn_add(w->first_psn, req->read_rx_pkts))
		return false;
	req->read_rx_pkts += n;
	req->resp_asked = false;
	req->una_psn = sw_psn_add(psn, n);
	sw_req_acked(qp);
	sw_req_grow(qp, n);
	req->deadline_ns = 0;
	progress_done(qp);
	return true;
}

static void on_atomic_ack(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_send_wqe *w;
	uint64_t orig = pkt->orig;
	int ret;

	(void)ack_upto(qp, sw_psn_add(pkt->psn, SW_PSN_MASK));
	if (!outstanding(qp) || qp->ibv.qp_base.state == IBV_QPS_ERR)
		return;
	w = head(qp);
	if ((w->opcode != IBV_WR_ATOMIC_CMP_AND_SWP && w->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD) ||
	    w->state != SW_WQE_STARTED || w->first_psn != pkt->psn)
		return; /* stale or duplicate */
	ret = sw_sge_scatter(qp, (const struct ibv_sge *)(void *)w->data, w->num_sge, 0,
			     (const uint8_t *)&orig, sizeof(orig));
	if (ret) {
		sw_comp_retire(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	qp->req->una_psn = sw_psn_add(pkt->psn, 1);
	sw_req_acked(qp);
	sw_req_grow(qp, 1);
	qp->req->deadline_ns = 0;
	sw_comp_retire(qp, IBV_WC_SUCCESS);
	progress_done(qp);
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_comp_handle(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	enum ibv_qp_state st = qp->ibv.qp_base.state;

	if (!qp->req || (st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_SQE)) {
		SW_COUNT(sw_engine_of(qp), qp, drops_state);
		return;
	}
	switch (pkt->opcode) {
	case SW_OP_ACK:
		if ((pkt->syndrome & SW_AETH_TYPE_MASK) != SW_AETH_ACK) {
			on_nak(qp, pkt);
			return;
		}
		if (ack_upto(qp, pkt->psn))
			lost_response(qp);
		else
			sw_req_sel_acked(qp);
		progress_done(qp);
		return;
	case SW_OP_ATOMIC_ACK:
		on_atomic_ack(qp, pkt);
		return;
	default:
		on_read_resp(qp, pkt);
		return;
	}
}
