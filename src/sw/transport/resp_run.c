/* SPDX-License-Identifier: MIT */
/*
 * resp_run.c - a run by reference: one record of the same-host link that
 * stands for several full packets of a SEND or WRITE (single copy,
 * wire.h, docs/single-copy.md).
 *
 * The requester puts up to SW_REF_PKTS packets of a message in one
 * record, so that a 1 MiB WRITE is 17 records, not 256. The responder
 * cuts the run back into its packets, each with its PSN, its opcode (the
 * record's for the first, MIDDLE for the others), a full MTU of payload
 * and its share of the pieces, and hands them to sw_resp_handle() one by
 * one, exactly as if they had come alone: every check, every outcome
 * (duplicates, a gap, RNR, errors) is the packet's own.
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
