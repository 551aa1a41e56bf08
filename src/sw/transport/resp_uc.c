/* SPDX-License-Identifier: MIT */
/*
 * resp_uc.c - the UC responder: SEND and RDMA WRITE packets to a UC QP.
 *
 * UC answers nothing: no ACK, NAK or RNR NAK ever goes back, and no
 * error moves the QP to the error state. A packet the responder cannot
 * take drops the message it belongs to: what was placed stays placed,
 * nothing completes, and every later packet of that message is dropped
 * too (it continues no message). Packets of a message must come in PSN
 * order; the responder resynchronises on any FIRST or ONLY packet,
 * whatever its PSN, which ends a message still in progress unfinished.
 * In this order (sw_resp_uc):
 *   - a FIRST or ONLY packet starts a message at its PSN; a MIDDLE or
 *     LAST must have the expected PSN and continue a message of its
 *     kind, else it and the rest of its message are dropped
 *     (drops_out_of_window);
 *   - SEND: FIRST/ONLY takes a receive WQE unless one is held from a
 *     message dropped half way (it is reused: IBTA does not complete
 *     it), else the message is dropped (drops_no_recv); the payload must
 *     be one MTU but on the last packet (else dropped, drops_malformed);
 *     bytes beyond the WQE, or SGEs that refuse them, complete the WQE
 *     with IBV_WC_LOC_LEN_ERR / IBV_WC_LOC_PROT_ERR and drop the rest;
 *   - RDMA WRITE: the RETH length at most 2^31, REMOTE_WRITE on the QP
 *     and the rkey over the whole range, not reaching 2^64 (FIRST/ONLY),
 *     the packet's size (sw_resp_write_size_ok), the MR of each packet's
 *     range still there: else dropped (drops_malformed); with immediate
 *     data the last packet takes a receive WQE, else the message is
 *     dropped (drops_no_recv) after the bytes before it landed.
 */
#include "sw/transport/transport_priv.h"

/*
 * Contract: end the message in progress unfinished. A receive WQE a
 * SEND took stays held (have_wqe) for the next message.
 */
static void uc_abandon(struct sw_resp *resp)
{
	resp->in_send = false;
	resp->in_write = false;
	resp->offset = 0;
}

/* Contract: one packet of a UC SEND at the expected PSN; see the top. */
static void uc_send(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_engine *eng = sw_engine_of(qp);
	struct sw_resp *resp = qp->resp;
	uint32_t flags = pkt->info->flags;
	enum ibv_wc_status st = IBV_WC_LOC_LEN_ERR;

	if (flags & SW_F_FIRST) {
		if (!resp->have_wqe && sw_qp_take_recv(qp, resp->wqe)) {
			SW_COUNT(eng, qp, drops_no_recv);
			return;
		}
		resp->have_wqe = true;
		resp->in_send = true;
		resp->offset = 0;
	}
	if (pkt->paylen > qp->attr.mtu || (!(flags & SW_F_LAST) && pkt->paylen != qp->attr.mtu)) {
		SW_COUNT(eng, qp, drops_malformed);
		uc_abandon(resp);
		return;
	}
	if ((uint64_t)resp->offset + pkt->paylen <= resp->wqe->length) {
		if (!pkt->paylen || !sw_sge_scatter_rx(qp, resp->wqe->sge, resp->wqe->num_sge,
						       resp->offset, pkt->payload, pkt->paylen))
			st = IBV_WC_SUCCESS;
		else
			st = IBV_WC_LOC_PROT_ERR;
	}
	if (st != IBV_WC_SUCCESS) {
		sw_resp_complete_recv(qp, st, IBV_WC_RECV, 0, pkt);
		uc_abandon(resp);
		return;
	}
	resp->offset += pkt->paylen;
	if (flags & SW_F_LAST) {
		sw_resp_complete_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV, resp->offset, pkt);
		resp->in_send = false;
	}
}

/*
 * Contract: the first (or only) packet of a UC WRITE: the target named by
 * its RETH, checked. 0 with the WRITE in progress and its MR in *mr (NULL
 * for zero bytes), or -EACCES / -EINVAL (dropped by the caller).
 */
static int uc_write_first(struct sw_qp *qp, const struct sw_pkt *pkt, struct sw_mr **mr)
{
	struct sw_resp *resp = qp->resp;

	*mr = NULL;
	if (pkt->dma_len > SW_MAX_MSG_SZ)
		return -EINVAL;
	if (sw_resp_rkey(qp, pkt->rkey, pkt->va, pkt->dma_len, IBV_ACCESS_REMOTE_WRITE, mr) ||
	    pkt->va + pkt->dma_len < pkt->va) {
		sw_resp_put_mr(*mr);
		*mr = NULL;
		return -EACCES;
	}
	resp->wr_va = pkt->va;
	resp->wr_rkey = pkt->rkey;
	resp->wr_left = pkt->dma_len;
	resp->wr_total = pkt->dma_len;
	resp->in_write = true;
	return 0;
}

/*
 * Contract: place one packet of the UC WRITE in progress at its next
 * address, with `mr` (the first packet's) or the MR its own range
 * resolves to. 0, or -errno (the caller drops the message).
 */
static int uc_write_place(struct sw_qp *qp, const struct sw_pkt *pkt, struct sw_mr *mr)
{
	struct sw_resp *resp = qp->resp;
	int ret;

	if (!pkt->paylen)
		return 0;
	if (!mr &&
	    sw_resp_rkey(qp, resp->wr_rkey, resp->wr_va, pkt->paylen, IBV_ACCESS_REMOTE_WRITE, &mr))
		return -EACCES;
	ret = sw_place_mr(mr, sw_mr_host(mr, resp->wr_va), pkt->payload, pkt->paylen);
	sw_resp_put_mr(mr);
	return ret;
}

/* Contract: one packet of a UC RDMA WRITE at the expected PSN; see the top. */
static void uc_write(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_engine *eng = sw_engine_of(qp);
	struct sw_resp *resp = qp->resp;
	uint32_t flags = pkt->info->flags;
	struct sw_mr *mr = NULL;

	if ((flags & SW_F_FIRST) && uc_write_first(qp, pkt, &mr))
		goto malformed;
	if (!sw_resp_write_size_ok(qp, pkt, flags)) {
		sw_resp_put_mr(mr);
		goto malformed;
	}
	if ((flags & SW_F_LAST) && (flags & SW_F_IMMDT) && !resp->have_wqe) {
		if (sw_qp_take_recv(qp, resp->wqe)) {
			sw_resp_put_mr(mr);
			SW_COUNT(eng, qp, drops_no_recv);
			uc_abandon(resp);
			return;
		}
		resp->have_wqe = true;
	}
	if (uc_write_place(qp, pkt, mr)) /* drops the reference */
		goto malformed;
	resp->wr_va += pkt->paylen;
	resp->wr_left -= pkt->paylen;
	if (flags & SW_F_LAST) {
		resp->in_write = false;
		if (flags & SW_F_IMMDT)
			sw_resp_complete_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
					      resp->wr_total, pkt);
	}
	return;
malformed:
	SW_COUNT(eng, qp, drops_malformed);
	uc_abandon(resp);
}

/* Contract: see transport_priv.h (qp->lock held; progress thread). */
void sw_resp_uc(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	uint32_t flags = pkt->info ? pkt->info->flags : 0;
	bool send = flags & SW_F_SEND;

	if (!(flags & (SW_F_SEND | SW_F_WRITE))) {
		SW_COUNT(sw_engine_of(qp), qp, drops_malformed);
		return;
	}
	if (flags & SW_F_FIRST) {
		uc_abandon(resp); /* a message still in progress lost its end */
	} else if (pkt->psn != resp->epsn || !(send ? resp->in_send : resp->in_write)) {
		SW_COUNT(sw_engine_of(qp), qp, drops_out_of_window);
		uc_abandon(resp);
		return;
	}
	resp->epsn = sw_psn_add(pkt->psn, 1);
	if (send)
		uc_send(qp, pkt);
	else
		uc_write(qp, pkt);
}
