/* SPDX-License-Identifier: MIT */
/*
 * resp_ud.c - the responder's UD half: a datagram into a receive WQE.
 *
 * A UD message is one packet, checked and placed at once: the Q_Key
 * must match, a receive WQE must be posted, and the WQE must hold the
 * 40-byte GRH area and the payload. The sender never gets an answer and
 * the QP's state never changes; a packet that fails is dropped (and
 * counted) or completes its WQE with an error. The RC responder and the
 * checks every packet passes before it gets here are in resp.c.
 */
#include <string.h>

#include "sw/transport/transport_priv.h"

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

/*
 * Complete the receive WQE held for a UD message from QP `pkt->sqpn`:
 * with its sender's address fields when `src` is given (received in full).
 */
static void complete_ud(struct sw_qp *qp, enum ibv_wc_status status, uint32_t byte_len,
			const struct sw_pkt *pkt, const union sw_sa *src)
{
	struct ibv_wc wc;

	sw_wc_init(&wc, qp, qp->resp->wqe->wr_id, status, IBV_WC_RECV);
	wc.byte_len = byte_len;
	wc.src_qp = pkt->sqpn;
	if (src)
		ud_recv_fields(qp, src, &wc);
	sw_resp_push_recv(qp, &wc, pkt);
}

/*
 * Contract: see transport_priv.h (qp->lock held). A UD message (one
 * packet) from `src` to our address `dst`. Checked in
 * this order: the Q_Key, else dropped (drops_qkey); a receive WQE, else
 * dropped (drops_no_recv: UD has no RNR); GRH area and payload fit the
 * WQE, else it completes with LOC_LEN_ERR; its SGEs take the bytes, else
 * LOC_LEN_ERR (SGE list too short) or LOC_PROT_ERR (lkey). The sender
 * gets no answer either way and the QP stays as it is.
 */
void sw_resp_ud(struct sw_qp *qp, const struct sw_pkt *pkt, const union sw_sa *src,
		const union sw_sa *dst)
{
	struct sw_resp *resp = qp->resp;
	struct sw_engine *eng = sw_engine_of(qp);
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
		complete_ud(qp, IBV_WC_LOC_LEN_ERR, 0, pkt, NULL);
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
		complete_ud(qp, ret == -EINVAL ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR, 0, pkt,
			    NULL);
		return;
	}
	complete_ud(qp, IBV_WC_SUCCESS, SW_GRH_LEN + pkt->paylen, pkt, src);
}
