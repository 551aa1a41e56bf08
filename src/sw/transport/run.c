/* SPDX-License-Identifier: MIT */
/*
 * run.c - runs: one record of the same-host link that stands for several
 * full packets (single copy, wire.h, docs/single-copy.md).
 *
 * The requester puts up to SW_REF_PKTS packets of a SEND or WRITE by
 * reference in one record, so that a 1 MiB WRITE is 17 records, not 256;
 * a responder that wrote a READ's bytes itself answers with placed runs
 * of READ responses the same way. The receiver cuts a run back into its
 * packets, each with its PSN, its opcode (the record's for the first,
 * MIDDLE for the others), a full MTU of payload (and for a request its
 * share of the pieces), and hands them to sw_resp_handle() or
 * sw_comp_handle() one by one, exactly as if they had come alone: every
 * check, every outcome (duplicates, a gap, RNR, errors) is the packet's.
 */
#include <string.h>

#include "sw/transport/transport_priv.h"

/* Contract: see transport_priv.h (qp->lock held). */
void sw_resp_handle_run(struct sw_qp *qp, const struct sw_pkt *pkt, const union sw_sa *src,
			const union sw_sa *dst)
{
	struct sw_ref_piece in[SW_REF_PIECES], out[SW_REF_PIECES];
	uint32_t mtu = qp->attr.mtu, m = pkt->ref_pkts, idx = 0, used = 0;
	uint8_t middle = (pkt->opcode & SW_OP_CLASS_MASK) |
			 ((pkt->info->flags & SW_F_SEND) ? SW_OP_SEND_MIDDLE : SW_OP_WRITE_MIDDLE);
	struct sw_pkt sub = *pkt;

	if (!mtu || pkt->paylen != m * mtu) { /* a run is of full packets only */
		SW_COUNT(sw_engine_of(qp), qp, drops_malformed);
		return;
	}
	memcpy(in, pkt->ref, pkt->ref_n * sizeof(in[0]));
	for (uint32_t i = 0; i < m; i++) {
		uint32_t need = mtu, k = 0;

		while (need) { /* this packet's share of the pieces (they add up: pkt.c) */
			uint32_t take = in[idx].len - used < need ? in[idx].len - used : need;

			out[k++] = (struct sw_ref_piece){.addr = in[idx].addr + used, .len = take};
			used += take;
			need -= take;
			if (used == in[idx].len) {
				idx++;
				used = 0;
			}
		}
		if (i) {
			sub.opcode = middle;
			sub.info = sw_opinfo(middle);
		}
		sub.psn = sw_psn_add(pkt->psn, i);
		sub.ack_req = pkt->ack_req && i == m - 1;
		sub.paylen = mtu;
		sub.ref = (const uint8_t *)out;
		sub.ref_n = k;
		sub.ref_pkts = 1;
		sw_resp_handle(qp, &sub, src, dst);
	}
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_comp_handle_run(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	uint32_t mtu = qp->attr.mtu, m = pkt->ref_pkts;
	uint8_t middle = (pkt->opcode & SW_OP_CLASS_MASK) | SW_OP_READ_RESP_MIDDLE;
	struct sw_pkt sub = *pkt;

	if (!mtu || pkt->paylen != m * mtu) { /* a run is of full responses only */
		SW_COUNT(sw_engine_of(qp), qp, drops_malformed);
		return;
	}
	for (uint32_t i = 0; i < m; i++) {
		if (i) {
			sub.opcode = middle;
			sub.info = sw_opinfo(middle);
		}
		sub.psn = sw_psn_add(pkt->psn, i);
		sub.paylen = mtu;
		sub.ref_pkts = 1;
		sw_comp_handle(qp, &sub);
	}
}
