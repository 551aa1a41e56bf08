/* SPDX-License-Identifier: MIT */
/*
 * qp_flush.c - a QP's error state and its receive side: moving to ERR,
 * flushing the rings, handing receive WQEs to the responder.
 *
 * Entering ERR here is the queue layer's half only (state and rings);
 * whoever moves a QP to ERR lets the transport drop its own state first
 * (sw_transport_qp_error, or sw_transport_fail for errors the transport
 * finds). Nothing in this file calls into the transport.
 *
 * Flushing follows IBTA: every outstanding WQE completes with
 * IBV_WC_WR_FLUSH_ERR, signalled or not (the signalling choice covers
 * successful completions only), oldest first; send WQEs go to the send
 * CQ and receive WQEs to the receive CQ. WQEs of an SRQ belong to the SRQ
 * and are never flushed by a QP.
 */
#include <string.h>

#include "sw/queue/qp_priv.h"

/* Contract: see queue.h. */
enum ibv_wc_opcode sw_send_wc_opcode(uint32_t op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	case IBV_WR_ATOMIC_WRITE:
		return IBV_WC_ATOMIC_WRITE;
	case IBV_WR_FLUSH:
		return IBV_WC_FLUSH;
	default:
		return IBV_WC_SEND;
	}
}

/* Contract: push one FLUSH_ERR completion for `wr_id` to `cq`. */
static void push_flush(struct sw_qp *qp, struct sw_cq *cq, uint64_t wr_id,
		       enum ibv_wc_opcode opcode)
{
	struct ibv_wc wc;

	sw_wc_init(&wc, qp, wr_id, IBV_WC_WR_FLUSH_ERR, opcode);
	sw_qp_cq_push(qp, cq, &wc, false);
}

/* Contract: see qp_priv.h. */
void sw_qp_flush_sq_locked(struct sw_qp *qp)
{
	while (qp->sq.cons != qp->sq.prod) {
		const struct sw_send_wqe *w = sw_sq_wqe(qp, qp->sq.cons);

		push_flush(qp, qp->scq, w->wr_id, sw_send_wc_opcode(w->opcode));
		qp->sq.cons++;
	}
}

/* Contract: see qp_priv.h. A QP with an SRQ has nothing of its own to flush. */
void sw_qp_flush_rq_locked(struct sw_qp *qp)
{
	if (qp->srq)
		return;
	while (qp->rq.cons != qp->rq.prod) {
		const struct sw_recv_wqe *w = sw_ring_slot(&qp->rq, qp->rq.cons);

		push_flush(qp, qp->rcq, w->wr_id, IBV_WC_RECV);
		qp->rq.cons++;
	}
}

/* Contract: see queue.h. Calls nothing of the transport. */
void sw_qp_error_locked(struct sw_qp *qp)
{
	qp->ibv.qp_base.state = IBV_QPS_ERR;
	qp->attr.sq_draining = 0;
	sw_qp_flush_sq_locked(qp);
	sw_qp_flush_rq_locked(qp);
}

/* Contract: see queue.h. */
int sw_qp_take_recv(struct sw_qp *qp, struct sw_recv_wqe *out)
{
	const struct sw_recv_wqe *w;

	if (qp->srq)
		return sw_srq_take(qp->srq, out);
	if (qp->rq.cons == qp->rq.prod)
		return -EAGAIN;
	w = sw_ring_slot(&qp->rq, qp->rq.cons);
	memcpy(out, w, sw_recv_wqe_size(w->num_sge));
	qp->rq.cons++;
	return 0;
}
