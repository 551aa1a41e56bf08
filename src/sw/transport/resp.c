/* SPDX-License-Identifier: MIT */
/*
 * resp.c - the responder: request packets from peers.
 *
 * Runs on the progress thread with qp->lock held, so the target
 * application need not call anything. The packet was parsed and its ICRC
 * checked (pkt.c), and the QP found by QPN and source address
 * (progress.c), before it gets here. Every packet is checked before it
 * touches memory, in this order (sw_resp_handle):
 *   1. QP state: RTR or later, else dropped (drops_state);
 *   2. UD: the Q_Key, else dropped (drops_qkey); then a receive WQE,
 *      else dropped (drops_no_recv); nothing below applies (resp_ud.c);
 *      UC: its own rules, without answers (resp_uc.c);
 *   3. PSN against the expected one (epsn): an earlier one is a
 *      duplicate (re-ACKed, or a READ / atomic answered again from the
 *      responder's resources, never re-executed for atomics); a later one
 *      is dropped and draws one sequence NAK per gap;
 *   4. opcode: an RC opcode the device does not support (p->info NULL:
 *      RESYNC, the reserved ones) is an invalid request;
 *   5. per operation (SEND, WRITE, READ, atomics, ATOMIC WRITE, FLUSH),
 *      each handler's list: opcode sequence, lengths,
 *      alignment, then the rkey (sw_resp_rkey), last the receive WQE.
 * An invalid request or remote access error NAKs the requester and moves
 * this QP to the error state, as IBTA class C and J errors do
 * (fatal_nak); a missing receive WQE draws an RNR NAK (send_rnr_nak).
 * docs/reliability.md lists every hostile packet tried and its answer.
 */
#include <string.h>

#include <unistd.h>

#include "sw/transport/transport_priv.h"

/*
 * What a request handler did with a packet whose PSN was the expected
 * one; sw_resp_handle() moves the expected PSN accordingly.
 */
enum resp_outcome {
	RESP_DONE, /* handled: the next PSN is expected */
	RESP_EPSN_SET, /* handled, and the handler set the expected PSN (a READ takes several) */
	RESP_RNR, /* an RNR NAK went out: the same PSN is expected again */
	RESP_FATAL, /* a NAK went out and the QP is in the error state */
	RESP_GONE, /* single copy: the sender's process is gone; nothing answered, nothing moves */
};

/* Build a response packet from `p` with `payload` into `buf`; its length. */
static size_t build_resp(struct sw_qp *qp, struct sw_pkt *p, const uint8_t *payload, uint32_t len,
			 uint8_t *buf)
{
	size_t hl;

	if (qp->ibv.qp_base.qp_type == IBV_QPT_XRC_RECV)
		p->opcode |= SW_OP_XRC; /* RC's response in the XRC group, no XRCETH */
	p->pkey = SW_DEFAULT_PKEY;
	p->dqpn = qp->attr.dest_qp_num;
	p->padcnt = sw_pad_for(len);
	p->paylen = len;
	hl = sw_pkt_write_hdrs(buf, p);
	if (len)
		sw_fetch(buf + hl, payload, len); /* registered memory (READ) */
	return sw_pkt_finish(buf, hl + len, NULL); /* the ICRC at the socket (net.c) */
}

/* Build placed READ response `p` for `len` bytes in `npkts` into `buf` (wire.h); its length. */
static size_t build_placed(struct sw_qp *qp, struct sw_pkt *p, uint32_t len, uint32_t npkts,
			   uint8_t *buf)
{
	if (qp->ibv.qp_base.qp_type == IBV_QPT_XRC_RECV)
		p->opcode |= SW_OP_XRC;
	p->pkey = SW_DEFAULT_PKEY;
	p->dqpn = qp->attr.dest_qp_num;
	return sw_pkt_write_placed(buf, p, len, npkts);
}

/* Send a built response (waiting a little for room), counted. */
static void send_built(struct sw_qp *qp, const uint8_t *buf, size_t n)
{
	if (!sw_net_send_wait(sw_engine_of(qp), buf, n, &qp->attr.av)) {
		SW_QP_COUNT(qp, tx_pkts, 1);
		SW_QP_COUNT(qp, tx_bytes, n);
	}
}

/* Send a response packet built from `p` with `payload`, to the peer. */
static void send_resp(struct sw_qp *qp, struct sw_pkt *p, const uint8_t *payload, uint32_t len)
{
	uint8_t buf[SW_PKT_MAX];

	sw_resp_held_first(qp); /* the QP's held READs are answered first (resp_hold.c) */
	sw_place_fence(); /* nothing acknowledged or read back before it landed */
	send_built(qp, buf, build_resp(qp, p, payload, len, buf));
}

/*
 * Placed READ response `i` of `b`, which the batch could not send: on the
 * link only, marked as placed (a copy through sw_net_send() would not be),
 * waiting up to ~20 ms for ring room as send_built() does; otherwise lost,
 * and asked again.
 */
static void send_placed(struct sw_qp *qp, const struct sw_tx_batch *b, uint32_t i)
{
	const uint8_t *pkt = b->buf[i];

	for (int tries = 0; tries < 100; tries++) {
		int r = sw_shm_send(sw_engine_of(qp), &pkt, &b->len[i], &b->ref[i], 1,
				    &qp->attr.av.dst);

		if (r == 1) {
			SW_QP_COUNT(qp, tx_pkts, 1);
			SW_QP_COUNT(qp, tx_bytes, b->len[i]);
			return;
		}
		if (r < 0)
			return; /* no link any more */
		usleep(200);
	}
}

/*
 * Send the responses built into `b` with as few calls as the link or
 * socket takes (sw_net_send_batch), the rest one by one, waiting for room.
 */
static void send_resp_batch(struct sw_qp *qp, struct sw_tx_batch *b)
{
	uint32_t sent = sw_net_send_batch(sw_engine_of(qp), b, &qp->attr.av);

	for (uint32_t i = 0; i < b->n; i++) {
		if (i >= sent && b->ref[i].placed) {
			send_placed(qp, b, i);
			continue;
		}
		if (i >= sent) {
			send_built(qp, b->buf[i], b->len[i]);
			continue;
		}
		SW_QP_COUNT(qp, tx_pkts, 1);
		SW_QP_COUNT(qp, tx_bytes, b->len[i]);
	}
	b->n = 0;
}

/*
 * Send an ACK or NAK (`syndrome`) for `psn`. It covers every packet
 * before it, so the count towards the next coalesced ACK starts over;
 * a positive ACK also settles the one owed at the end of the batch.
 */
static void send_ack(struct sw_qp *qp, uint8_t syndrome, uint32_t psn)
{
	struct sw_pkt p = {.opcode = SW_OP_ACK, .psn = psn, .syndrome = syndrome};

	p.msn = qp->resp->msn;
	send_resp(qp, &p, NULL, 0);
	qp->resp->unacked = 0;
	if ((syndrome & SW_AETH_TYPE_MASK) == SW_AETH_ACK)
		qp->resp->ack_pending = false;
}

/*
 * A class C/J error (invalid request, remote access or remote operation
 * error): NAK the packet's PSN, raise the matching affiliated event, and
 * move this QP to the error state, which flushes its receive WQEs. Every
 * later packet is dropped (step 1 above).
 */
static enum resp_outcome fatal_nak(struct sw_qp *qp, uint8_t syndrome, uint32_t psn)
{
	SW_COUNT(sw_engine_of(qp), qp, err_naks_tx);
	qp->resp->ack_pending = false; /* the NAK acknowledges everything before it */
	send_ack(qp, syndrome, psn);
	(void)sw_qp_event(qp, syndrome == SW_AETH_NAK_REM_ACCESS ? IBV_EVENT_QP_ACCESS_ERR :
								   IBV_EVENT_QP_REQ_ERR);
	sw_transport_fail(qp);
	return RESP_FATAL;
}

/*
 * No receive WQE for a SEND or a WRITE with immediate: NAK `psn` with
 * the QP's minimum RNR timer. Nothing of the message was taken, so the
 * requester's retry starts it again; the QP stays as it is.
 */
static enum resp_outcome send_rnr_nak(struct sw_qp *qp, uint32_t psn)
{
	SW_COUNT(sw_engine_of(qp), qp, rnr_naks_tx);
	send_ack(qp, (uint8_t)(SW_AETH_RNR_NAK | (qp->attr.min_rnr_timer & SW_AETH_VALUE_MASK)),
		 psn);
	return RESP_RNR;
}

/* Contract: see transport_priv.h (qp->lock held). */
int sw_resp_rkey(struct sw_qp *qp, uint32_t rkey, uint64_t va, uint64_t len, int need,
		 struct sw_mr **mr)
{
	*mr = NULL;
	if (!((int)qp->attr.access & need))
		return -EACCES;
	if (!len)
		return 0;
	if (!sw_qp_mem_pd(qp) || sw_rkey_resolve(sw_dev_of(qp->ibv.qp_base.context), rkey,
						 sw_qp_mem_pd(qp), qp->uid, va, len, need, mr))
		return -EACCES;
	return 0;
}

/*
 * Does [va, va + len) reach 2^64? sw_mr_resolve() accepts a range that
 * ends exactly there (an MR may); a WRITE or READ whose va + len wraps to
 * 0 is refused all the same, with the remote access error of a bad key.
 */
static bool range_wraps(uint64_t va, uint64_t len)
{
	return va + len < va;
}

static const struct sw_place_hint *hint_of(const struct sw_mr *mr)
{
	return mr->has_hint ? &mr->hint : NULL;
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_resp_push_recv(struct sw_qp *qp, struct ibv_wc *wc, const struct sw_pkt *pkt)
{
	if (wc->status == IBV_WC_SUCCESS && pkt->info && (pkt->info->flags & SW_F_IMMDT)) {
		wc->wc_flags |= IBV_WC_WITH_IMM;
		wc->imm_data = pkt->imm_be;
	}
	if (wc->status == IBV_WC_SUCCESS && pkt->info && (pkt->info->flags & SW_F_IETH)) {
		wc->wc_flags |= IBV_WC_WITH_INV;
		wc->invalidated_rkey = be32toh(pkt->imm_be);
	}
	qp->resp->have_wqe = false;
	sw_qp_cq_push(qp, qp->resp->xsrq ? qp->resp->xsrq->cq : qp->rcq, wc, pkt->se);
}

/*
 * Take the next receive WQE into resp->wqe: from the QP's RQ or SRQ, or
 * for an XRC TGT QP from the XRC SRQ the packet names. 0 or -EAGAIN.
 */
static int take_recv(struct sw_qp *qp)
{
	struct sw_resp *resp = qp->resp;

	if (resp->xsrq)
		return sw_srq_take(resp->xsrq, resp->wqe);
	return sw_qp_take_recv(qp, resp->wqe);
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_resp_complete_recv(struct sw_qp *qp, enum ibv_wc_status status, enum ibv_wc_opcode op,
			   uint32_t byte_len, const struct sw_pkt *pkt)
{
	struct ibv_wc wc;

	sw_wc_init(&wc, qp, qp->resp->wqe->wr_id, status, op);
	wc.byte_len = byte_len;
	wc.src_qp = qp->attr.dest_qp_num;
	sw_resp_push_recv(qp, &wc, pkt);
}

/* ---- RC: SEND ---- */

/*
 * A SEND that cannot land in the receive WQE it took: complete that WQE
 * with `status` (it is the responder's to complete, the ring no longer
 * has it), end the message and NAK with `syndrome` (the QP goes to error).
 */
static enum resp_outcome fail_send(struct sw_qp *qp, const struct sw_pkt *pkt,
				   enum ibv_wc_status status, uint8_t syndrome)
{
	sw_resp_complete_recv(qp, status, IBV_WC_RECV, 0, pkt);
	qp->resp->in_send = false;
	return fatal_nak(qp, syndrome, pkt->psn);
}

/*
 * One packet of a SEND. Checked in this order:
 *   - FIRST (or ONLY): no SEND or WRITE in progress, else invalid request;
 *     then a receive WQE is taken, else an RNR NAK;
 *   - MIDDLE / LAST: a SEND is in progress, else invalid request;
 *   - the payload: at most the path MTU, and exactly the MTU but on the
 *     last packet, else invalid request;
 *   - the message so far fits the receive WQE, else the WQE completes
 *     with LOC_LEN_ERR and the peer gets an invalid request NAK;
 *   - the WQE's SGEs take the bytes (their lkeys, sge.c), else the WQE
 *     completes with LOC_PROT_ERR and the peer gets a remote operation NAK;
 *   - SEND with Invalidate (the last packet carries the IETH): the rkey
 *     is invalidated (sw_mw_invalidate: a bound type 2 window of this
 *     QP's PD, bound to this QP; for an XRC TGT QP, which nothing binds
 *     to, the named SRQ's PD: never one), else the WQE completes with
 *     REM_INV_REQ_ERR, as rxe's, and the peer gets an invalid request NAK.
 * The last packet completes the WQE (IBV_WC_WITH_INV and the invalidated
 * rkey after an invalidation) and counts the message (MSN).
 */
static enum resp_outcome handle_send(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	uint32_t flags = pkt->info->flags;
	int ret = 0;

	if (flags & SW_F_FIRST) {
		if (resp->in_send || resp->in_write)
			return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
		if (take_recv(qp))
			return send_rnr_nak(qp, pkt->psn);
		resp->have_wqe = true;
		resp->in_send = true;
		resp->offset = 0;
	} else if (!resp->in_send) {
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	}
	if (pkt->paylen > qp->attr.mtu || (!(flags & SW_F_LAST) && pkt->paylen != qp->attr.mtu))
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	if ((uint64_t)resp->offset + pkt->paylen > resp->wqe->length)
		return fail_send(qp, pkt, IBV_WC_LOC_LEN_ERR, SW_AETH_NAK_INV_REQ);
	if (pkt->paylen && pkt->ref)
		ret = sw_sge_scatter_ref(qp, resp->wqe->sge, resp->wqe->num_sge, resp->offset, pkt);
	else if (pkt->paylen)
		ret = sw_sge_scatter_rx(qp, resp->wqe->sge, resp->wqe->num_sge, resp->offset,
					pkt->payload, pkt->paylen);
	if (ret)
		return fail_send(qp, pkt, IBV_WC_LOC_PROT_ERR, SW_AETH_NAK_REM_OP);
	if ((flags & SW_F_LAST) && pkt->ref && (ret = sw_resp_pull_failed(qp, true)))
		return ret == -ESRCH ? RESP_GONE :
				       fail_send(qp, pkt, IBV_WC_REM_OP_ERR, SW_AETH_NAK_REM_OP);
	resp->offset += pkt->paylen;
	if ((flags & SW_F_IETH) &&
	    sw_mw_invalidate(sw_dev_of(qp->ibv.qp_base.context), be32toh(pkt->imm_be),
			     sw_qp_mem_pd(qp), qp->uid, true))
		return fail_send(qp, pkt, IBV_WC_REM_INV_REQ_ERR, SW_AETH_NAK_INV_REQ);
	if (flags & SW_F_LAST) {
		sw_resp_complete_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV, resp->offset, pkt);
		resp->in_send = false;
		resp->msn = sw_psn_add(resp->msn, 1);
	}
	return RESP_DONE;
}

/* ---- RC: RDMA WRITE ---- */

/*
 * The first (or only) packet of a WRITE, whose RETH names the whole
 * target. Checked in this order: no SEND or WRITE in progress, else
 * invalid request; the RETH length at most 2^31, else invalid request
 * (a length error, before the key is looked at); the rkey grants
 * REMOTE_WRITE over [va, va + len) (sw_resp_rkey) and the range does not
 * reach 2^64, else remote access error. On RESP_DONE the WRITE is in
 * progress and *mr holds its target (NULL for a zero-length WRITE).
 */
static enum resp_outcome write_first(struct sw_qp *qp, const struct sw_pkt *pkt, struct sw_mr **mr)
{
	struct sw_resp *resp = qp->resp;
	int ret;

	if (resp->in_send || resp->in_write)
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	if (pkt->dma_len > SW_MAX_MSG_SZ)
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	resp->wr_va = pkt->va;
	resp->wr_rkey = pkt->rkey;
	resp->wr_left = pkt->dma_len;
	resp->wr_total = pkt->dma_len;
	ret = sw_resp_rkey(qp, pkt->rkey, pkt->va, pkt->dma_len, IBV_ACCESS_REMOTE_WRITE, mr);
	if (ret || range_wraps(pkt->va, pkt->dma_len)) {
		sw_resp_put_mr(*mr);
		*mr = NULL;
		return fatal_nak(qp, SW_AETH_NAK_REM_ACCESS, pkt->psn);
	}
	resp->in_write = true;
	return RESP_DONE;
}

/* Contract: see transport_priv.h (qp->lock held). */
bool sw_resp_write_size_ok(const struct sw_qp *qp, const struct sw_pkt *pkt, uint32_t flags)
{
	const struct sw_resp *resp = qp->resp;

	if (pkt->paylen > resp->wr_left || pkt->paylen > qp->attr.mtu)
		return false;
	if (!(flags & SW_F_LAST))
		return pkt->paylen == qp->attr.mtu;
	return pkt->paylen == resp->wr_left;
}

/*
 * One packet of an RDMA WRITE. The first is checked by write_first();
 * a MIDDLE or LAST needs a WRITE in progress, else invalid request. Then,
 * for every packet, in this order: its size (sw_resp_write_size_ok), else invalid
 * request; a LAST with immediate data takes a receive WQE before any byte
 * is placed, else an RNR NAK (the retry starts the message over if this
 * packet began it); the bytes land at the next address of the target,
 * whose MR a MIDDLE or LAST resolves again for its own range (it may have
 * been deregistered since: remote access error); a placement that fails
 * (no placement worker) is a remote operation error. The last packet
 * counts the message and, with immediate data, completes the WQE.
 */
static enum resp_outcome handle_write(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	uint32_t flags = pkt->info->flags;
	struct sw_mr *mr = NULL;
	enum resp_outcome out;
	int ret = 0;

	if (pkt->placed) {
		/*
		 * The requester wrote the bytes itself, after checking our QP
		 * and MR in the push directory (req_push.c): only the message
		 * is counted. Not while another SEND or WRITE is in progress.
		 */
		if (resp->in_send || resp->in_write || pkt->paylen > qp->attr.mtu)
			return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
		resp->msn = sw_psn_add(resp->msn, 1);
		return RESP_DONE;
	}
	if (flags & SW_F_FIRST) {
		out = write_first(qp, pkt, &mr);
		if (out != RESP_DONE)
			return out;
	} else if (!resp->in_write) {
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	}
	if (!sw_resp_write_size_ok(qp, pkt, flags)) {
		sw_resp_put_mr(mr);
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	}
	if ((flags & SW_F_LAST) && (flags & SW_F_IMMDT) && !resp->have_wqe) {
		if (take_recv(qp)) {
			sw_resp_put_mr(mr);
			if (flags & SW_F_FIRST)
				resp->in_write = false; /* the retry starts over */
			return send_rnr_nak(qp, pkt->psn);
		}
		resp->have_wqe = true;
	}
	if (pkt->paylen) {
		if (!mr && sw_resp_rkey(qp, resp->wr_rkey, resp->wr_va, pkt->paylen,
					IBV_ACCESS_REMOTE_WRITE, &mr))
			return fatal_nak(qp, SW_AETH_NAK_REM_ACCESS, pkt->psn);
		if (pkt->ref)
			sw_place_mr_ref(qp, mr, sw_mr_host(mr, resp->wr_va), pkt);
		else
			ret = sw_place_mr(mr, sw_mr_host(mr, resp->wr_va), pkt->payload,
					  pkt->paylen);
	}
	sw_resp_put_mr(mr);
	if (!ret && pkt->ref && (flags & SW_F_LAST) && (flags & SW_F_IMMDT))
		ret = sw_resp_pull_failed(qp, true); /* before the completion */
	if (ret == -ESRCH)
		return RESP_GONE;
	if (ret)
		return fatal_nak(qp, SW_AETH_NAK_REM_OP, pkt->psn);
	resp->wr_va += pkt->paylen;
	resp->wr_left -= pkt->paylen;
	if (flags & SW_F_LAST) {
		resp->in_write = false;
		resp->msn = sw_psn_add(resp->msn, 1);
		if (flags & SW_F_IMMDT)
			sw_resp_complete_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
					      resp->wr_total, pkt);
	}
	return RESP_DONE;
}

/* ---- RC: READ and atomics ---- */

/*
 * Single copy: write the bytes of READ `res` from packet `from` on, read
 * from `mr`, straight into the requester's memory that request `pkt` (by
 * reference, or NULL) names, as they are now: before any later request
 * of the QP can change them, as a response that carries them would be.
 * True if all of them landed: the responses are then placed (wire.h).
 * Else (the link is gone, the requester stopped holding that memory, the
 * kernel refused, a piece was unmapped) they carry the bytes as usual;
 * whatever landed is overwritten with the same bytes.
 */
static bool push_read(struct sw_qp *qp, const struct sw_pkt *pkt, const struct sw_rd_res *res,
		      uint32_t from, const struct sw_mr *mr)
{
	struct sw_engine *eng = sw_engine_of(qp);
	uint32_t off = from * qp->attr.mtu;
	int ret;

	if (!pkt || !pkt->ref || !mr || off >= res->len || pkt->dma_len != res->len - off ||
	    !sw_net_tx_batch())
		return false;
	sw_place_fence(); /* what this thread placed before lands before it is read */
	if (!sw_shm_push_begin(eng, pkt)) /* as close to the write as it can be (shm_hold.c) */
		return false;
	ret = sw_place_push(pkt->ref_pid, sw_mr_host(mr, res->va + off), res->len - off, pkt->ref,
			    pkt->ref_n);
	sw_shm_push_end(eng, pkt);
	return !ret;
}

/*
 * Contract: see transport_priv.h. Each response carries an ACK syndrome
 * without credits; they go SW_TX_BATCH at a time through
 * sw_net_send_batch(), after the QP's held READs' (resp_hold.c). A
 * response never carries a reference: the bytes are the MR's as it is
 * now, before any later request of the QP changes them.
 */
void sw_resp_send_read(struct sw_qp *qp, const struct sw_rd_res *res, uint32_t from,
		       const struct sw_mr *mr, bool placed, uint32_t msn)
{
	struct sw_tx_batch *b;
	uint32_t mtu = qp->attr.mtu;

	sw_resp_held_first(qp); /* before the batch below is taken */
	b = placed || res->npkts - from > 1 ? sw_net_tx_batch() : NULL;
	if (b) {
		b->n = 0;
		sw_place_fence(); /* as send_resp(), once for all of them */
	}
	for (uint32_t k = from, run = 1; k < res->npkts; k += run) {
		struct sw_pkt p = {0};
		uint32_t off = k * mtu;
		uint32_t n = !mr ? 0 : res->len - off < mtu ? res->len - off : mtu;

		/* placed: the full responses before the last as runs of up to SW_REF_PKTS */
		run = placed && k + 1 < res->npkts ? res->npkts - 1 - k : 1;
		if (run > SW_REF_PKTS)
			run = SW_REF_PKTS;

		if (res->npkts == 1)
			p.opcode = SW_OP_READ_RESP_ONLY;
		else if (k == 0)
			p.opcode = SW_OP_READ_RESP_FIRST;
		else if (k == res->npkts - 1)
			p.opcode = SW_OP_READ_RESP_LAST;
		else
			p.opcode = SW_OP_READ_RESP_MIDDLE;
		p.psn = sw_psn_add(res->psn, k);
		p.syndrome = SW_AETH_ACK_NO_CREDIT;
		p.msn = msn;
		if (!b) {
			send_resp(qp, &p, n ? sw_mr_host(mr, res->va + off) : NULL, n);
			continue;
		}
		sw_ref_none(&b->ref[b->n]);
		b->fate[b->n] = SW_FATE_DRAW;
		b->ref[b->n].placed = placed; /* the link only: else lost, and asked again */
		b->ref[b->n].pkts = placed ? run : 1;
		b->len[b->n] = placed ? build_placed(qp, &p, run * n, run, b->buf[b->n]) :
					build_resp(qp, &p, n ? sw_mr_host(mr, res->va + off) : NULL,
						   n, b->buf[b->n]);
		if (++b->n == SW_TX_BATCH)
			send_resp_batch(qp, b);
	}
	if (b && b->n)
		send_resp_batch(qp, b);
}

/*
 * A READ asked again (a duplicate request `pkt`, NULL for a FLUSH's):
 * answer from packet `from` on, with the rkey checked afresh as for a
 * new READ. A key that no longer grants the range gets no answer; the
 * requester's retries run out.
 */
static void resend_read_resp(struct sw_qp *qp, const struct sw_rd_res *res, uint32_t from,
			     const struct sw_pkt *pkt)
{
	struct sw_mr *mr = NULL;

	if (res->len && sw_resp_rkey(qp, res->rkey, res->va, res->len, IBV_ACCESS_REMOTE_READ, &mr))
		return;
	sw_resp_held_first(qp); /* its push below would pass theirs */
	sw_resp_send_read(qp, res, from, mr, push_read(qp, pkt, res, from, mr), qp->resp->msn);
	sw_resp_put_mr(mr);
}

/*
 * The next READ/atomic resource, oldest reused first: the responder
 * remembers the last max_dest_rd_atomic of them for duplicates.
 */
static struct sw_rd_res *res_alloc(struct sw_resp *resp)
{
	struct sw_rd_res *r = &resp->res[resp->res_next];

	resp->res_next = (resp->res_next + 1) % resp->nres;
	memset(r, 0, sizeof(*r));
	r->used = true;
	return r;
}

/*
 * A READ request. Checked in this order: no SEND or WRITE in progress and
 * the QP accepts READs (max_dest_rd_atomic resources), else invalid
 * request; the RETH length at most 2^31, else invalid request (before the
 * key); the rkey grants REMOTE_READ over [va, va + len) and the range
 * does not reach 2^64, else remote access error. Then the READ is
 * remembered for duplicates and answered at once, from the MR resolved
 * here; its responses take one PSN each, so the expected PSN moves past
 * them all.
 */
static enum resp_outcome handle_read(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	uint32_t mtu = qp->attr.mtu;
	struct sw_rd_res *res;
	struct sw_mr *mr;
	int ret;

	if (resp->in_send || resp->in_write || !resp->nres)
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	if (pkt->dma_len > SW_MAX_MSG_SZ)
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	ret = sw_resp_rkey(qp, pkt->rkey, pkt->va, pkt->dma_len, IBV_ACCESS_REMOTE_READ, &mr);
	if (ret || range_wraps(pkt->va, pkt->dma_len)) {
		sw_resp_put_mr(mr);
		return fatal_nak(qp, SW_AETH_NAK_REM_ACCESS, pkt->psn);
	}
	res = res_alloc(resp);
	res->psn = pkt->psn;
	res->npkts = pkt->dma_len ? (pkt->dma_len + mtu - 1) / mtu : 1;
	res->va = pkt->va;
	res->rkey = pkt->rkey;
	res->len = pkt->dma_len;
	resp->msn = sw_psn_add(resp->msn, 1);
	if (!sw_resp_read_hold(qp, pkt, res, mr, resp->msn)) { /* with the QP's next ones */
		sw_resp_held_first(qp);
		sw_resp_send_read(qp, res, 0, mr, push_read(qp, pkt, res, 0, mr), resp->msn);
	}
	sw_resp_put_mr(mr);
	resp->epsn = sw_psn_add(pkt->psn, res->npkts);
	return RESP_EPSN_SET;
}

static void send_atomic_ack(struct sw_qp *qp, uint32_t psn, uint64_t orig)
{
	struct sw_pkt p = {.opcode = SW_OP_ATOMIC_ACK, .psn = psn, .orig = orig};

	p.syndrome = SW_AETH_ACK_NO_CREDIT;
	p.msn = qp->resp->msn;
	send_resp(qp, &p, NULL, 0);
}

/*
 * An atomic request (compare-and-swap or fetch-and-add on 8 bytes).
 * Checked in this order: no SEND or WRITE in progress and the QP accepts
 * atomics (max_dest_rd_atomic resources), else invalid request; the
 * address 8-byte aligned, else invalid request (before the key); the
 * rkey grants REMOTE_ATOMIC over the 8 bytes, else remote access error.
 * The operation runs once, its original value is remembered so that a
 * duplicate gets the same answer without running it again, and the
 * atomic ACK carries it.
 */
static enum resp_outcome handle_atomic(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	struct sw_rd_res *res;
	struct sw_mr *mr;
	uint64_t *target, orig;

	if (resp->in_send || resp->in_write || !resp->nres)
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	if (pkt->va & 7)
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	if (sw_resp_rkey(qp, pkt->rkey, pkt->va, 8, IBV_ACCESS_REMOTE_ATOMIC, &mr))
		return fatal_nak(qp, SW_AETH_NAK_REM_ACCESS, pkt->psn);
	target = (uint64_t *)(void *)sw_mr_host(mr, pkt->va);
	orig = sw_place_atomic(hint_of(mr), target, pkt->opcode == SW_OP_CMP_SWAP, pkt->compare,
			       pkt->swap_add);
	sw_mr_put(mr);
	res = res_alloc(resp);
	res->atomic = true;
	res->psn = pkt->psn;
	res->npkts = 1;
	res->orig = orig;
	resp->msn = sw_psn_add(resp->msn, 1);
	send_atomic_ack(qp, pkt->psn, orig);
	return RESP_DONE;
}

/* ---- RC: ATOMIC WRITE (IBTA 1.5) ---- */

/*
 * An RDMA ATOMIC WRITE: 8 bytes stored at once. Checked in this order:
 * no SEND or WRITE in progress, else invalid request; the RETH length and
 * the payload exactly 8 bytes, else invalid request; the address 8-byte
 * aligned, else invalid request (before the key, as for the other
 * atomics); the QP and the rkey grant REMOTE_WRITE over the 8 bytes,
 * else remote access error. The value is stored with one aligned 64-bit
 * store after every earlier WRITE has landed, persisted as the MR's DMA
 * handle asks, and the message is acknowledged like a WRITE. A duplicate
 * is only acknowledged (handle_duplicate): the store is never made twice.
 */
static enum resp_outcome handle_atomic_write(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	struct sw_mr *mr;
	uint64_t value;

	if (resp->in_send || resp->in_write)
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	if (pkt->dma_len != sizeof(value) || pkt->paylen != sizeof(value))
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	if (pkt->va & (sizeof(value) - 1))
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	if (sw_resp_rkey(qp, pkt->rkey, pkt->va, sizeof(value), IBV_ACCESS_REMOTE_WRITE, &mr))
		return fatal_nak(qp, SW_AETH_NAK_REM_ACCESS, pkt->psn);
	memcpy(&value, pkt->payload, sizeof(value));
	sw_place_store64(hint_of(mr), (uint64_t *)(void *)sw_mr_host(mr, pkt->va), value);
	sw_mr_put(mr);
	resp->msn = sw_psn_add(resp->msn, 1);
	return RESP_DONE;
}

/* ---- RC: FLUSH (IBTA 1.5) ---- */

/* The MR access a FETH placement type needs (0: a type the device does not know). */
static int flush_access(uint32_t plt)
{
	int need = 0;

	if (!plt || (plt & ~(uint32_t)(SW_FETH_PLT_GLOBAL | SW_FETH_PLT_PERSISTENT)))
		return 0;
	if (plt & SW_FETH_PLT_GLOBAL)
		need |= IBV_ACCESS_FLUSH_GLOBAL;
	if (plt & SW_FETH_PLT_PERSISTENT)
		need |= IBV_ACCESS_FLUSH_PERSISTENT;
	return need;
}

/*
 * The target of a FLUSH at the MR level: the whole MR `rkey` names, as
 * [*va, *va + *len). -EACCES if the key names no MR.
 */
static int flush_whole_mr(struct sw_qp *qp, uint32_t rkey, uint64_t *va, uint64_t *len)
{
	struct sw_mr *mr = sw_mr_table_lookup(&sw_dev_of(qp->ibv.qp_base.context)->mrs, rkey);

	if (!mr)
		return -EACCES;
	*va = mr->iova;
	*len = mr->length;
	sw_mr_put(mr);
	return 0;
}

/*
 * An RDMA FLUSH. Checked in this order: no SEND or WRITE in progress and
 * the QP accepts READ-class requests (max_dest_rd_atomic resources), else
 * invalid request; the FETH: a placement type of global and/or
 * persistent only, a selectivity level of range or MR, else invalid
 * request; at the range level the RETH length at most 2^31, else invalid
 * request; the QP grants every FLUSH access the type needs, and the rkey
 * grants it over the range (the RETH's, or the whole MR at the MR
 * level) without reaching 2^64, else remote access error. Then every
 * placement before it lands and becomes globally visible, a persistent
 * FLUSH of an MR whose DMA handle is of type PM writes the range's cache
 * lines back, and the answer, an empty READ response, goes out only
 * after that. It is remembered like a READ of 0 bytes, so a duplicate
 * gets the same answer.
 */
static enum resp_outcome handle_flush(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	uint32_t plt = pkt->feth & SW_FETH_PLT_MASK;
	uint32_t sel = (pkt->feth & SW_FETH_SEL_MASK) >> SW_FETH_SEL_SHIFT;
	int need = flush_access(plt);
	uint64_t va = pkt->va, len = pkt->dma_len;
	struct sw_rd_res *res;
	struct sw_mr *mr = NULL;

	if (resp->in_send || resp->in_write || !resp->nres || !need ||
	    (sel != SW_FETH_SEL_RANGE && sel != SW_FETH_SEL_MR))
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	if (sel == SW_FETH_SEL_RANGE && len > SW_MAX_MSG_SZ)
		return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
	if (((int)qp->attr.access & need) != need ||
	    (sel == SW_FETH_SEL_MR && flush_whole_mr(qp, pkt->rkey, &va, &len)) ||
	    sw_resp_rkey(qp, pkt->rkey, va, len, need, &mr) || range_wraps(va, len)) {
		sw_resp_put_mr(mr);
		return fatal_nak(qp, SW_AETH_NAK_REM_ACCESS, pkt->psn);
	}
	if (mr) {
		sw_place_flush(hint_of(mr), sw_mr_host(mr, va), len, plt & SW_FETH_PLT_PERSISTENT);
		sw_mr_put(mr);
	} else {
		sw_place_flush(NULL, NULL, 0, false); /* an empty range: still ordered */
	}
	res = res_alloc(resp);
	res->psn = pkt->psn;
	res->npkts = 1;
	resp->msn = sw_psn_add(resp->msn, 1);
	{
		/* what sw_resp_send_read() sends for 0 bytes */
		struct sw_pkt p = {.opcode = SW_OP_READ_RESP_ONLY, .psn = pkt->psn};

		p.syndrome = SW_AETH_ACK_NO_CREDIT;
		p.msn = resp->msn;
		send_resp(qp, &p, NULL, 0);
	}
	return RESP_DONE;
}

/* ---- duplicates ---- */

/*
 * A request behind the expected PSN: the peer did not see our answer.
 * Nothing is executed or placed again. A READ or atomic is answered from
 * the resource that covers its PSN: READ responses from that packet on,
 * an atomic's saved original value (only for the request's own PSN); one
 * too old to be remembered is dropped and the requester times out. A
 * SEND or WRITE is answered with an ACK of the newest PSN done, at the
 * end of the batch: a requester that goes back over packets this
 * responder kept (stash.c) sends a run of duplicates, which one ACK
 * answers. An unsupported opcode gets no answer.
 */
static void handle_duplicate(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	uint32_t flags = pkt->info ? pkt->info->flags : 0;

	SW_COUNT(sw_engine_of(qp), qp, duplicates);
	if (!pkt->info)
		return;
	if (flags & (SW_F_READ | SW_F_ATOMIC | SW_F_FLUSH)) {
		for (uint32_t i = 0; i < resp->nres; i++) {
			struct sw_rd_res *r = &resp->res[i];
			int32_t d = sw_psn_diff(pkt->psn, r->psn);

			if (!r->used || d < 0 || (uint32_t)d >= r->npkts)
				continue;
			if (r->atomic) {
				if (d == 0 && (flags & SW_F_ATOMIC))
					send_atomic_ack(qp, r->psn, r->orig);
			} else if (flags & (SW_F_READ | SW_F_FLUSH)) {
				/* a FLUSH's: empty */
				resend_read_resp(qp, r, (uint32_t)d,
						 (flags & SW_F_READ) ? pkt : NULL);
			}
			return;
		}
		return;
	}
	/* one ACK at the end of the batch answers every duplicate in it */
	resp->ack_psn = sw_psn_add(resp->epsn, SW_PSN_MASK);
	resp->ack_pending = true;
}

/* Send the sequence NAK of a gap, once per gap (IBTA and rxe: the requester goes back once). */
static void nak_gap(struct sw_qp *qp)
{
	struct sw_resp *resp = qp->resp;

	if (resp->nak_seq_sent)
		return;
	resp->nak_seq_sent = true;
	SW_COUNT(sw_engine_of(qp), qp, seq_naks_tx);
	send_ack(qp, SW_AETH_NAK_PSN_SEQ, resp->epsn);
}

/*
 * A packet ahead of the expected PSN: an earlier one was lost. The first
 * of a gap draws a sequence NAK of the expected PSN, the rest of the gap
 * nothing. The packet is dropped, as IBTA and rxe do, unless it came
 * over the same-host link: then it is kept until the gap is filled
 * (stash.c) and counts as dropped only if it finds no room.
 */
static void handle_ahead(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	if (!sw_stash_put(qp, pkt))
		SW_COUNT(sw_engine_of(qp), qp, drops_out_of_window);
	nak_gap(qp);
}

/* The request handler for the packet at the expected PSN (info not NULL). */
static enum resp_outcome handle_expected(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	uint32_t flags = pkt->info->flags;

	if (qp->ibv.qp_base.qp_type == IBV_QPT_XRC_RECV) {
		/* the XRC SRQ: in the QP's domain, and the same for a whole message */
		if (!qp->resp->xsrq ||
		    (!(flags & SW_F_FIRST) && qp->resp->xsrq->srq_num != qp->resp->xsrqn))
			return fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
		qp->resp->xsrqn = qp->resp->xsrq->srq_num;
	}

	if (flags & SW_F_SEND)
		return handle_send(qp, pkt);
	if (flags & SW_F_WRITE)
		return handle_write(qp, pkt);
	if (flags & SW_F_READ)
		return handle_read(qp, pkt);
	if (flags & SW_F_ATOMIC_WRITE)
		return handle_atomic_write(qp, pkt);
	if (flags & SW_F_FLUSH)
		return handle_flush(qp, pkt);
	return handle_atomic(qp, pkt);
}

static void resp_rc(struct sw_qp *qp, const struct sw_pkt *pkt);

/*
 * An XRC request at a TGT QP: RC's rules, with the XRC SRQ its XRCETH
 * names looked up in the QP's domain and held (the domain's lock, read)
 * while the packet is handled: receive WQEs come from it, its CQ takes
 * their completions, and its PD is the one rkeys and SGEs are checked
 * against. A request that names no SRQ of the domain is an invalid
 * request (handle_expected), as is a later packet of a message that
 * names another SRQ than the first.
 */
static void resp_xrc(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_xrcd_dom *dom = qp->xrcd->dom;

	pthread_rwlock_rdlock(&dom->lock);
	qp->resp->xsrq = sw_xrcd_srq_find(dom, pkt->xrc_srqn);
	resp_rc(qp, pkt);
	if (qp->resp) /* still there unless the QP ended */
		qp->resp->xsrq = NULL;
	pthread_rwlock_unlock(&dom->lock);
}

/*
 * Contract: see transport_priv.h (qp->lock held; progress thread). The steps
 * and the answer to each are in the comment at the top of this file.
 */
void sw_resp_handle(struct sw_qp *qp, const struct sw_pkt *pkt, const union sw_sa *src,
		    const union sw_sa *dst)
{
	struct sw_resp *resp = qp->resp;
	enum ibv_qp_state st = qp->ibv.qp_base.state;

	if (!resp ||
	    (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_SQE)) {
		SW_COUNT(sw_engine_of(qp), qp, drops_state);
		return;
	}
	if (qp->ibv.qp_base.qp_type == IBV_QPT_UD) {
		sw_resp_ud(qp, pkt, src, dst);
		return;
	}
	if (qp->ibv.qp_base.qp_type == IBV_QPT_UC) {
		sw_resp_uc(qp, pkt);
		return;
	}
	if (qp->ibv.qp_base.qp_type == IBV_QPT_XRC_RECV) {
		resp_xrc(qp, pkt);
		return;
	}
	resp_rc(qp, pkt);
}

/*
 * The packet at the expected PSN (step 5): handled, and acknowledged as
 * the rules at the top of this file say. True when the expected PSN
 * moved on; false when the packet drew an RNR NAK (the requester sends
 * it again) or ended the QP.
 */
static bool resp_in_order(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;

	resp->nak_seq_sent = false; /* the gap, if any, is filled */
	if (!pkt->info) {
		(void)fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
		return false;
	}
	switch (handle_expected(qp, pkt)) {
	case RESP_FATAL: /* the QP is in error: nothing more to do */
	case RESP_RNR: /* the requester sends this PSN again */
	case RESP_GONE: /* and this one never will */
		return false;
	case RESP_DONE:
		resp->epsn = sw_psn_add(pkt->psn, 1);
		break;
	case RESP_EPSN_SET:
		break;
	}
	if (pkt->info->flags & (SW_F_READ | SW_F_ATOMIC | SW_F_FLUSH)) {
		/* the response is the acknowledgement, of everything before it too */
		resp->unacked = 0;
		resp->ack_pending = false;
		return true;
	}
	/* SEND and WRITE are acknowledged at the end of the batch, or at once when asked */
	resp->ack_psn = pkt->psn;
	if (pkt->ack_req || ++resp->unacked >= SW_ACK_EVERY)
		resp->ack_pending = true;
	return true;
}

/*
 * The gap is filled: handle the packets kept behind it (stash.c)
 * in PSN order, each as if it had just arrived, and acknowledge them at
 * the end of the batch. A kept packet that carries its bytes goes only
 * after they are placed (sw_place_fence: a CPU_ID MR's copies are
 * queued); one by reference at once, its pieces taken by the pull. A packet that
 * ends the QP or draws an RNR NAK ends the run, and the rest is
 * forgotten (the requester sends it again). A packet still kept after
 * the run means another gap: its NAK goes now, and stands for the ACK.
 */
static void resp_drain_stash(struct sw_qp *qp)
{
	const struct sw_pkt *k;
	bool any = false;

	while ((k = sw_stash_next(qp))) {
		bool ok;

		if (sw_resp_drain_middles(qp)) { /* a run's MIDDLEs, in one step */
			any = true;
			continue;
		}
		ok = resp_in_order(qp, k);

		if (!k->ref) /* the copy queued reads the kept bytes; a pull's pieces were taken */
			sw_place_fence();
		sw_stash_drop(qp, k);
		if (!ok) {
			sw_stash_clear(qp);
			return;
		}
		any = true;
	}
	if (sw_stash_count(qp)) {
		qp->resp->ack_pending = false; /* the NAK acknowledges what is before the gap */
		nak_gap(qp);
	} else if (any) {
		qp->resp->ack_pending = true;
	}
}

/*
 * An RC request, or an XRC one (resp_xrc): steps 3 to 5 at the top of
 * this file.
 */
static void resp_rc(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	int32_t d = sw_psn_diff(pkt->psn, qp->resp->epsn);

	if (d < 0) {
		handle_duplicate(qp, pkt);
		return;
	}
	if (d > 0) {
		handle_ahead(qp, pkt);
		return;
	}
	if (resp_in_order(qp, pkt)) {
		if (qp->resp->stash)
			resp_drain_stash(qp);
	} else if (qp->ibv.qp_base.state == IBV_QPS_ERR) {
		sw_stash_clear(qp); /* nothing kept will be handled */
	}
}

/* Contract: see transport_priv.h (qp->lock held). An ACK without credits of the newest PSN done. */
void sw_resp_flush_ack(struct sw_qp *qp)
{
	struct sw_resp *resp = qp->resp;
	int pull_err = sw_resp_pull_failed(qp, false);

	/* a pulled copy failed (the caller fenced): no ACK for bytes that are not there */
	if (resp && qp->ibv.qp_base.state != IBV_QPS_ERR && pull_err) {
		if (pull_err == -ESRCH) {
			resp->ack_pending = false; /* the sender is gone: nobody to answer */
			return;
		}
		atomic_store(&qp->pull_err, 0); /* once: the way to the error state flushes ACKs */
		fatal_nak(qp, SW_AETH_NAK_REM_OP, resp->ack_psn);
		return;
	}

	if (resp && resp->ack_pending && qp->ibv.qp_base.state != IBV_QPS_ERR)
		send_ack(qp, SW_AETH_ACK_NO_CREDIT, resp->ack_psn);
}
