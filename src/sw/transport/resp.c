/* SPDX-License-Identifier: MIT */
/*
 * resp.c - the responder: request packets from peers.
 *
 * Runs on the progress thread, so the target application need not call
 * anything. Every packet is checked before it touches memory:
 *   - QP state (RTR or later) and, for UD, the Q_Key;
 *   - PSN: the expected one is processed; an earlier one is a duplicate
 *     (re-ACKed, or a READ / atomic answered again from the responder's
 *     resources, never re-executed for atomics); a later one draws one
 *     sequence NAK per gap;
 *   - opcode sequence (FIRST, MIDDLE..., LAST) and payload sizes against
 *     the path MTU and the RETH length; a RETH length over the largest
 *     message (2^31) is a length error (invalid request);
 *   - RDMA: the rkey resolves, the MR belongs to the QP's PD, the range
 *     lies inside it, and both the MR and the QP grant the access;
 *   - SEND: a receive WQE exists (else RNR NAK) and is large enough.
 * An RC opcode the device does not support (p->info NULL: RESYNC, the
 * reserved ones) is an invalid request once its PSN is the expected one.
 * A remote access or invalid request error NAKs the requester and moves
 * this QP to the error state, as IBTA class C and J errors do.
 */
#include <string.h>

#include "sw/transport/transport.h"

static struct sw_engine *eng_of(struct sw_qp *qp)
{
	return sw_engine_of(qp);
}

/* Send a response packet built from `p` with `payload`, to the peer. */
static void send_resp(struct sw_qp *qp, struct sw_pkt *p, const uint8_t *payload, uint32_t len)
{
	uint8_t buf[SW_PKT_MAX];
	struct sw_icrc_ctx ic;
	size_t hl, n;

	sw_place_fence(); /* nothing acknowledged or read back before it landed */
	p->pkey = SW_DEFAULT_PKEY;
	p->dqpn = qp->attr.dest_qp_num;
	p->padcnt = sw_pad_for(len);
	p->paylen = len;
	hl = sw_pkt_write_hdrs(buf, p);
	if (len)
		sw_fetch(buf + hl, payload, len); /* registered memory (READ) */
	sw_net_icrc_out(eng_of(qp), &qp->attr.av, &ic);
	n = sw_pkt_finish(buf, hl + len, &ic);
	if (!sw_net_send_wait(eng_of(qp), buf, n, &qp->attr.av)) {
		SW_QP_COUNT(qp, tx_pkts, 1);
		SW_QP_COUNT(qp, tx_bytes, n);
	}
}

static void send_ack(struct sw_qp *qp, uint8_t syndrome, uint32_t psn)
{
	struct sw_pkt p = {.opcode = SW_OP_ACK, .psn = psn, .syndrome = syndrome};

	p.msn = qp->resp->msn;
	send_resp(qp, &p, NULL, 0);
	qp->resp->unacked = 0;
	if ((syndrome & SW_AETH_TYPE_MASK) == SW_AETH_ACK) /* the low bits are the credit count */
		qp->resp->ack_pending = false;
}

static void post_qp_event(struct sw_qp *qp, enum ibv_event_type type)
{
	struct ibv_async_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event_type = type;
	ev.element.qp = &qp->ibv.qp_base;
	sv_async_post(qp->ibv.qp_base.context, &ev);
}

/* A class C/J error: NAK it, then this QP is in error. */
static void fatal_nak(struct sw_qp *qp, uint8_t syndrome, uint32_t psn)
{
	SW_COUNT(eng_of(qp), qp, err_naks_tx);
	send_ack(qp, syndrome, psn);
	post_qp_event(qp, syndrome == SW_AETH_NAK_REM_ACCESS ? IBV_EVENT_QP_ACCESS_ERR :
							       IBV_EVENT_QP_REQ_ERR);
	sw_qp_error_locked(qp);
}

/*
 * Resolve an rkey for [va, va + len) with `need` access on both the MR
 * and the QP. Returns a referenced MR, or NULL. A zero-length request
 * needs no MR (returns NULL with *ok set).
 */
static struct sw_mr *rkey_resolve(struct sw_qp *qp, uint32_t rkey, uint64_t va, uint64_t len,
				  int need, bool *ok)
{
	struct sw_mr *mr;

	*ok = false;
	if (!((int)qp->attr.access & need))
		return NULL;
	if (!len) {
		*ok = true;
		return NULL;
	}
	if (sw_mr_resolve(sw_dev_of(qp->ibv.qp_base.context), rkey, sw_pd_base(qp->ibv.qp_base.pd),
			  va, len, need, &mr))
		return NULL;
	*ok = true;
	return mr;
}

static const struct sw_place_hint *hint_of(const struct sw_mr *mr)
{
	return mr->has_hint ? &mr->hint : NULL;
}

/*
 * wc.sl of a RoCE UD receive, as mlx5 reports it there: the packet type,
 * bit 3 set for a UDP (RoCE v2) frame, bits 2:0 its network header, 2 for
 * IPv4 and 1 for IPv6 (0: RoCE v1's GRH). UCX's UD transport reads the low
 * three bits to find the destination address in the GRH area.
 */
enum {
	SW_WC_SL_ROCE_V2_IPV4 = 0x8 | 0x2,
	SW_WC_SL_ROCE_V2_IPV6 = 0x8 | 0x1,
};

/*
 * The address fields of a successful UD receive from `src`. RoCE: the
 * GRH area is filled (IBV_WC_GRH), sl is the packet type, slid 0. The
 * InfiniBand link layer: the sender's LID (ctrl/lid.c) and no GRH (the
 * wire does not say whether the sender used one), sl 0 (it carries none).
 * dlid_path_bits and pkey_index are 0 (LMC 0, one P_Key) on both.
 */
static void ud_recv_fields(const struct sw_qp *qp, const union sw_sa *src, struct ibv_wc *wc)
{
	if (sw_dev_is_ib(sw_dev_of(qp->ibv.qp_base.context))) {
		wc->slid = sw_lid_of(src);
		return;
	}
	wc->wc_flags |= IBV_WC_GRH;
	wc->sl = sw_sa_is_v6(src) ? SW_WC_SL_ROCE_V2_IPV6 : SW_WC_SL_ROCE_V2_IPV4;
}

/*
 * Complete the receive WQE held for the current message. `ud_src`: the
 * sender of a UD message received in full, else NULL.
 */
static void complete_recv(struct sw_qp *qp, enum ibv_wc_status status, enum ibv_wc_opcode op,
			  uint32_t byte_len, const struct sw_pkt *pkt, uint32_t src_qp,
			  const union sw_sa *ud_src)
{
	struct sw_resp *resp = qp->resp;
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = resp->wqe->wr_id;
	wc.status = status;
	wc.opcode = op;
	wc.byte_len = byte_len;
	wc.qp_num = qp->ibv.qp_base.qp_num;
	wc.src_qp = src_qp;
	if (ud_src)
		ud_recv_fields(qp, ud_src, &wc);
	if (status == IBV_WC_SUCCESS && pkt->info && (pkt->info->flags & SW_F_IMMDT)) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = pkt->imm_be;
	}
	resp->have_wqe = false;
	sw_qp_cq_push(qp, qp->rcq, &wc, pkt->se);
}

/* ---- UD ---- */

/* Store `v` big-endian in two bytes at `p`. */
static void grh_be16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/*
 * The 40-byte GRH area of a RoCE v2 UD receive: for IPv4 the IPv4 header
 * in the last 20 bytes, with the sender's ID and DF bit as its ICRC
 * showed them (icrc.c) and TOS 0 and TTL 64, which the socket does not
 * show; for IPv6 the IPv6 header (traffic class and flow label 0, hop
 * limit 64).
 */
static void build_grh(uint8_t grh[SW_GRH_LEN], const union sw_sa *src, const union sw_sa *dst,
		      uint32_t udp_len, const struct sw_icrc_var *ipv)
{
	uint8_t *ip = grh + 20;
	uint32_t sum = 0;

	memset(grh, 0, SW_GRH_LEN);
	if (sw_sa_is_v6(src)) {
		grh[0] = 0x60;
		grh_be16(grh + 4, 8 + udp_len);
		grh[6] = 17;
		grh[7] = 64;
		memcpy(grh + 8, &src->v6.sin6_addr, 16);
		memcpy(grh + 24, &dst->v6.sin6_addr, 16);
		return;
	}
	ip[0] = 0x45;
	grh_be16(ip + 2, 20 + 8 + udp_len);
	grh_be16(ip + 4, ipv->ip_id);
	ip[6] = ipv->df ? 0x40 : 0;
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, &src->v4.sin_addr, 4);
	memcpy(ip + 16, &dst->v4.sin_addr, 4);
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)(ip[i] << 8 | ip[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	grh_be16(ip + 10, ~sum & 0xffff);
}

static void handle_ud(struct sw_qp *qp, const struct sw_pkt *pkt, const union sw_sa *src,
		      const union sw_sa *dst)
{
	struct sw_resp *resp = qp->resp;
	struct sw_engine *eng = eng_of(qp);
	uint8_t grh[SW_GRH_LEN];
	int ret;

	if (pkt->qkey != qp->attr.qkey) {
		SW_COUNT(eng, qp, drops_qkey);
		return;
	}
	if (sw_qp_take_recv(qp, resp->wqe)) {
		SW_COUNT(eng, qp, drops_no_recv);
		return;
	}
	resp->have_wqe = true;
	if (SW_GRH_LEN + (uint64_t)pkt->paylen > resp->wqe->length) {
		complete_recv(qp, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, pkt, pkt->sqpn, NULL);
		return;
	}
	/* InfiniBand link layer: no GRH, the 40 bytes stay as they were */
	ret = 0;
	if (!sw_dev_is_ib(sw_dev_of(qp->ibv.qp_base.context))) {
		build_grh(grh, src, dst,
			  (uint32_t)(pkt->paylen + sw_pkt_hdr_len(pkt) + pkt->padcnt + SW_ICRC_LEN),
			  &pkt->ipv);
		ret = sw_sge_scatter(qp, resp->wqe->sge, resp->wqe->num_sge, 0, grh, SW_GRH_LEN);
	}
	if (!ret && pkt->paylen)
		ret = sw_sge_scatter(qp, resp->wqe->sge, resp->wqe->num_sge, SW_GRH_LEN,
				     pkt->payload, pkt->paylen);
	if (ret) {
		complete_recv(qp, ret == -EINVAL ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR,
			      IBV_WC_RECV, 0, pkt, pkt->sqpn, NULL);
		return;
	}
	complete_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV, SW_GRH_LEN + pkt->paylen, pkt, pkt->sqpn,
		      src);
}

/* ---- RC: SEND ---- */

/* 0 done, 1 RNR NAK sent, -1 fatal (QP in error). */
static int handle_send(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	uint32_t flags = pkt->info->flags;
	int ret;

	if (flags & SW_F_FIRST) {
		if (resp->in_send || resp->in_write) {
			fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
			return -1;
		}
		if (sw_qp_take_recv(qp, resp->wqe)) {
			SW_COUNT(eng_of(qp), qp, rnr_naks_tx);
			send_ack(qp,
				 (uint8_t)(SW_AETH_RNR_NAK |
					   (qp->attr.min_rnr_timer & SW_AETH_VALUE_MASK)),
				 pkt->psn);
			return 1;
		}
		resp->have_wqe = true;
		resp->in_send = true;
		resp->offset = 0;
	} else if (!resp->in_send) {
		fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
		return -1;
	}
	if (pkt->paylen > qp->attr.mtu || (!(flags & SW_F_LAST) && pkt->paylen != qp->attr.mtu)) {
		fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
		return -1;
	}
	if ((uint64_t)resp->offset + pkt->paylen > resp->wqe->length) {
		complete_recv(qp, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, pkt, qp->attr.dest_qp_num,
			      NULL);
		resp->in_send = false;
		fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
		return -1;
	}
	ret = pkt->paylen ? sw_sge_scatter_rx(qp, resp->wqe->sge, resp->wqe->num_sge, resp->offset,
					      pkt->payload, pkt->paylen) :
			    0;
	if (ret) {
		complete_recv(qp, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, pkt, qp->attr.dest_qp_num,
			      NULL);
		resp->in_send = false;
		fatal_nak(qp, SW_AETH_NAK_REM_OP, pkt->psn);
		return -1;
	}
	resp->offset += pkt->paylen;
	if (flags & SW_F_LAST) {
		complete_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV, resp->offset, pkt,
			      qp->attr.dest_qp_num, NULL);
		resp->in_send = false;
		resp->msn = sw_psn_add(resp->msn, 1);
	}
	return 0;
}

/* ---- RC: RDMA WRITE ---- */

static int handle_write(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	uint32_t flags = pkt->info->flags;
	struct sw_mr *mr = NULL;
	bool ok;
	int ret = 0;

	if (flags & SW_F_FIRST) {
		if (resp->in_send || resp->in_write) {
			fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
			return -1;
		}
		if (pkt->dma_len > SW_MAX_MSG_SZ) { /* a length error, before any key */
			fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
			return -1;
		}
		resp->wr_va = pkt->va;
		resp->wr_rkey = pkt->rkey;
		resp->wr_left = pkt->dma_len;
		resp->wr_total = pkt->dma_len;
		mr = rkey_resolve(qp, pkt->rkey, pkt->va, pkt->dma_len, IBV_ACCESS_REMOTE_WRITE,
				  &ok);
		if (!ok || pkt->va + pkt->dma_len < pkt->va) {
			if (mr)
				sw_mr_put(mr);
			fatal_nak(qp, SW_AETH_NAK_REM_ACCESS, pkt->psn);
			return -1;
		}
		resp->in_write = true;
	} else {
		if (!resp->in_write) {
			fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
			return -1;
		}
	}
	/* sizes: at most one MTU, exactly one but on the last, which ends the RETH length */
	if (pkt->paylen > resp->wr_left || pkt->paylen > qp->attr.mtu ||
	    (!(flags & SW_F_LAST) && pkt->paylen != qp->attr.mtu) ||
	    ((flags & SW_F_LAST) && pkt->paylen != resp->wr_left)) {
		if (mr)
			sw_mr_put(mr);
		fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
		return -1;
	}
	/* WRITE with immediate consumes a receive WQE: RNR before placing */
	if ((flags & SW_F_LAST) && (flags & SW_F_IMMDT) && !resp->have_wqe) {
		if (sw_qp_take_recv(qp, resp->wqe)) {
			if (mr)
				sw_mr_put(mr);
			if (flags & SW_F_FIRST)
				resp->in_write = false; /* the retry starts over */
			SW_COUNT(eng_of(qp), qp, rnr_naks_tx);
			send_ack(qp,
				 (uint8_t)(SW_AETH_RNR_NAK |
					   (qp->attr.min_rnr_timer & SW_AETH_VALUE_MASK)),
				 pkt->psn);
			return 1;
		}
		resp->have_wqe = true;
	}
	if (pkt->paylen) {
		if (!mr)
			mr = rkey_resolve(qp, resp->wr_rkey, resp->wr_va, pkt->paylen,
					  IBV_ACCESS_REMOTE_WRITE, &ok);
		if (!mr) {
			/* deregistered under the transfer */
			fatal_nak(qp, SW_AETH_NAK_REM_ACCESS, pkt->psn);
			return -1;
		}
		ret = sw_place_mr(mr, mr->host + (resp->wr_va - mr->iova), pkt->payload,
				  pkt->paylen);
	}
	if (mr)
		sw_mr_put(mr);
	if (ret) {
		fatal_nak(qp, SW_AETH_NAK_REM_OP, pkt->psn);
		return -1;
	}
	resp->wr_va += pkt->paylen;
	resp->wr_left -= pkt->paylen;
	if (flags & SW_F_LAST) {
		resp->in_write = false;
		resp->msn = sw_psn_add(resp->msn, 1);
		if (flags & SW_F_IMMDT)
			complete_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, resp->wr_total,
				      pkt, qp->attr.dest_qp_num, NULL);
	}
	return 0;
}

/* ---- RC: READ and atomics ---- */

/* Send READ responses for packets [from, res->npkts) of `res`. */
static int send_read_resp(struct sw_qp *qp, const struct sw_rd_res *res, uint32_t from)
{
	uint32_t mtu = qp->attr.mtu;
	struct sw_mr *mr = NULL;
	bool ok;

	if (res->len) {
		mr = rkey_resolve(qp, res->rkey, res->va, res->len, IBV_ACCESS_REMOTE_READ, &ok);
		if (!mr)
			return -EACCES;
	}
	for (uint32_t k = from; k < res->npkts; k++) {
		struct sw_pkt p = {0};
		uint32_t off = k * mtu;
		uint32_t n = !mr		  ? 0 :
			     res->len - off < mtu ? res->len - off :
						    mtu; /* no MR: len 0 */

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
		p.msn = qp->resp->msn;
		send_resp(qp, &p, n ? mr->host + (res->va + off - mr->iova) : NULL, n);
	}
	if (mr)
		sw_mr_put(mr);
	return 0;
}

static struct sw_rd_res *res_alloc(struct sw_resp *resp)
{
	struct sw_rd_res *r = &resp->res[resp->res_next];

	resp->res_next = (resp->res_next + 1) % resp->nres;
	memset(r, 0, sizeof(*r));
	r->used = true;
	return r;
}

static int handle_read(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	uint32_t mtu = qp->attr.mtu;
	struct sw_rd_res *res;
	struct sw_mr *mr;
	bool ok;

	if (resp->in_send || resp->in_write || !resp->nres) {
		fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
		return -1;
	}
	if (pkt->dma_len > SW_MAX_MSG_SZ) { /* a length error, before any key */
		fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
		return -1;
	}
	mr = rkey_resolve(qp, pkt->rkey, pkt->va, pkt->dma_len, IBV_ACCESS_REMOTE_READ, &ok);
	if (mr)
		sw_mr_put(mr);
	if (!ok || pkt->va + pkt->dma_len < pkt->va) {
		fatal_nak(qp, SW_AETH_NAK_REM_ACCESS, pkt->psn);
		return -1;
	}
	res = res_alloc(resp);
	res->psn = pkt->psn;
	res->npkts = pkt->dma_len ? (pkt->dma_len + mtu - 1) / mtu : 1;
	res->va = pkt->va;
	res->rkey = pkt->rkey;
	res->len = pkt->dma_len;
	resp->msn = sw_psn_add(resp->msn, 1);
	if (send_read_resp(qp, res, 0)) {
		fatal_nak(qp, SW_AETH_NAK_REM_ACCESS, pkt->psn);
		return -1;
	}
	resp->epsn = sw_psn_add(pkt->psn, res->npkts);
	return 2; /* epsn already advanced */
}

static void send_atomic_ack(struct sw_qp *qp, uint32_t psn, uint64_t orig)
{
	struct sw_pkt p = {.opcode = SW_OP_ATOMIC_ACK, .psn = psn, .orig = orig};

	p.syndrome = SW_AETH_ACK_NO_CREDIT;
	p.msn = qp->resp->msn;
	send_resp(qp, &p, NULL, 0);
}

static int handle_atomic(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	struct sw_rd_res *res;
	struct sw_mr *mr;
	uint64_t *target, orig;
	bool ok;

	if (resp->in_send || resp->in_write || !resp->nres) {
		fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
		return -1;
	}
	if (pkt->va & 7) {
		fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
		return -1;
	}
	mr = rkey_resolve(qp, pkt->rkey, pkt->va, 8, IBV_ACCESS_REMOTE_ATOMIC, &ok);
	if (!mr) {
		fatal_nak(qp, SW_AETH_NAK_REM_ACCESS, pkt->psn);
		return -1;
	}
	target = (uint64_t *)(void *)(mr->host + (pkt->va - mr->iova));
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
	return 0;
}

/* ---- duplicates ---- */

static void handle_duplicate(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	uint32_t flags = pkt->info ? pkt->info->flags : 0;

	SW_COUNT(eng_of(qp), qp, duplicates);
	if (!pkt->info)
		return; /* an unsupported opcode: nothing to answer again */
	if (flags & (SW_F_READ | SW_F_ATOMIC)) {
		for (uint32_t i = 0; i < resp->nres; i++) {
			struct sw_rd_res *r = &resp->res[i];
			int32_t d = sw_psn_diff(pkt->psn, r->psn);

			if (!r->used || d < 0 || (uint32_t)d >= r->npkts)
				continue;
			if (r->atomic) {
				if (d == 0 && (flags & SW_F_ATOMIC))
					send_atomic_ack(qp, r->psn, r->orig); /* never again */
			} else if (flags & SW_F_READ) {
				send_read_resp(qp, r, (uint32_t)d);
			}
			return;
		}
		return; /* too old: dropped, the requester times out */
	}
	/* SEND / WRITE already done: acknowledge what we have */
	send_ack(qp, SW_AETH_ACK_NO_CREDIT, sw_psn_add(resp->epsn, SW_PSN_MASK));
}

/* Contract: see transport.h (qp->lock held; progress thread). */
void sw_resp_handle(struct sw_qp *qp, const struct sw_pkt *pkt, const union sw_sa *src,
		    const union sw_sa *dst)
{
	struct sw_resp *resp = qp->resp;
	struct sw_engine *eng = eng_of(qp);
	enum ibv_qp_state st = qp->ibv.qp_base.state;
	uint32_t flags = pkt->info ? pkt->info->flags : 0;
	int32_t d;
	int ret;

	if (!resp ||
	    (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_SQE)) {
		SW_COUNT(eng, qp, drops_state);
		return;
	}
	if (qp->ibv.qp_base.qp_type == IBV_QPT_UD) {
		handle_ud(qp, pkt, src, dst);
		return;
	}
	d = sw_psn_diff(pkt->psn, resp->epsn);
	if (d < 0) {
		handle_duplicate(qp, pkt);
		return;
	}
	if (d > 0) {
		SW_COUNT(eng, qp, drops_out_of_window);
		if (!resp->nak_seq_sent) { /* one NAK per gap, as IBTA and rxe */
			resp->nak_seq_sent = true;
			SW_COUNT(eng, qp, seq_naks_tx);
			send_ack(qp, SW_AETH_NAK_PSN_SEQ, resp->epsn);
		}
		return;
	}
	resp->nak_seq_sent = false;
	if (!pkt->info) { /* an RC opcode this device does not support */
		fatal_nak(qp, SW_AETH_NAK_INV_REQ, pkt->psn);
		return;
	}
	if (flags & SW_F_SEND)
		ret = handle_send(qp, pkt);
	else if (flags & SW_F_WRITE)
		ret = handle_write(qp, pkt);
	else if (flags & SW_F_READ)
		ret = handle_read(qp, pkt);
	else
		ret = handle_atomic(qp, pkt);
	if (ret < 0 || ret == 1)
		return; /* error (QP in ERR) or RNR: epsn stays */
	if (ret == 0)
		resp->epsn = sw_psn_add(pkt->psn, 1);
	if (flags & (SW_F_READ | SW_F_ATOMIC)) {
		resp->unacked = 0;
		resp->ack_pending = false;
		return; /* the response is the acknowledgement */
	}
	resp->ack_psn = pkt->psn;
	if (pkt->ack_req || ++resp->unacked >= SW_ACK_EVERY)
		resp->ack_pending = true;
}

/* Contract: see transport.h (qp->lock held). */
void sw_resp_flush_ack(struct sw_qp *qp)
{
	struct sw_resp *resp = qp->resp;

	if (resp && resp->ack_pending && qp->ibv.qp_base.state != IBV_QPS_ERR)
		send_ack(qp, SW_AETH_ACK_NO_CREDIT, resp->ack_psn);
}
