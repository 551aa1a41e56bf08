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
 *
 * Except where nothing can set the packets apart: the MIDDLEs of a WRITE
 * run that arrive in order, inside the WRITE in progress, on one MR
 * (write_middles), and the MIDDLEs of a placed READ run that answer the
 * READ at the head in order (sw_comp_placed_middles). They are handled
 * in one step then: the checks each would pass, made once for all, and
 * the state each would leave behind. Anything else (a gap, a duplicate,
 * a failed check, an error state, a stash) goes packet by packet, so
 * that each outcome stays the packet's.
 */
#include <string.h>

#include "sw/transport/transport_priv.h"

/*
 * The `n` MIDDLE packets of a WRITE run from PSN `sub->psn` on, whose
 * bytes are the `np` pieces `pc`, in one step, if each would be handled
 * alike: an RC QP in a state that takes requests, the first of them at
 * the expected PSN, a WRITE in progress with room for
 * all of them (a MIDDLE is a full MTU within the bytes left), and the
 * next n MTUs of its target in one MR that grants remote write. Then
 * one pull is queued for all of them, and the expected PSN, the target
 * address and the ACK owed move as n packets would move them. False
 * (nothing done) otherwise: the caller goes packet by packet. The caller
 * makes sure that none of their PSNs is kept in the stash (a kept one
 * would be left behind, stale): nothing kept at all for a run that
 * arrives, exactly these taken out of it in a drain.
 */
static bool write_middles(struct sw_qp *qp, const struct sw_pkt *sub, uint32_t n,
			  const struct sw_ref_piece *pc, uint32_t np)
{
	struct sw_resp *resp = qp->resp;
	enum ibv_qp_state st = qp->ibv.qp_base.state;
	uint64_t len = (uint64_t)n * qp->attr.mtu;
	struct sw_pkt all = *sub;
	struct sw_mr *mr = NULL;

	if (!resp || qp->ibv.qp_base.qp_type != IBV_QPT_RC ||
	    (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_SQE) ||
	    sub->psn != resp->epsn || !resp->in_write || len > resp->wr_left)
		return false;
	if (sw_resp_rkey(qp, resp->wr_rkey, resp->wr_va, len, IBV_ACCESS_REMOTE_WRITE, &mr) ||
	    !mr) {
		sw_resp_put_mr(mr);
		return false; /* the packet that fails says so itself */
	}
	all.paylen = (uint32_t)len;
	all.ref = (const uint8_t *)pc;
	all.ref_n = np;
	sw_place_mr_ref(qp, mr, sw_mr_host(mr, resp->wr_va), &all);
	sw_resp_put_mr(mr);
	resp->nak_seq_sent = false;
	resp->wr_va += len;
	resp->wr_left -= len;
	resp->epsn = sw_psn_add(sub->psn, n);
	resp->ack_psn = sw_psn_add(sub->psn, n - 1);
	resp->unacked += n;
	if (sub->ack_req || resp->unacked >= SW_ACK_EVERY)
		resp->ack_pending = true;
	return true;
}

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

			out[k++] = (struct sw_ref_piece){
				.addr = in[idx].addr + used, .len = take, .buf = in[idx].buf};
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
		if (i == 0 && m > 1 && (pkt->info->flags & SW_F_WRITE)) {
			/* the rest are MIDDLEs: the pieces from here on, all at once */
			uint32_t np = 0;

			if (idx < pkt->ref_n) {
				out[np++] = (struct sw_ref_piece){.addr = in[idx].addr + used,
								  .len = in[idx].len - used,
								  .buf = in[idx].buf};
				for (uint32_t j = idx + 1; j < pkt->ref_n; j++)
					out[np++] = in[j];
			}
			sub.opcode = middle;
			sub.info = sw_opinfo(middle);
			sub.psn = sw_psn_add(pkt->psn, 1);
			sub.ack_req = pkt->ack_req;
			if (np && !sw_stash_count(qp) && write_middles(qp, &sub, m - 1, out, np))
				return;
		}
	}
}

/* Piece `b` continues piece `a`: the next bytes of the same memory. */
static bool pieces_join(const struct sw_ref_piece *a, const struct sw_ref_piece *b)
{
	return a->addr + a->len == b->addr && a->buf == b->buf;
}

/*
 * Contract: append the `na` pieces `add` to the `*np` of `pc`, a piece
 * that continues the one before it joined to it; false (nothing
 * changed) if the result would not fit in SW_REF_PIECES.
 */
static bool pieces_append(struct sw_ref_piece *pc, uint32_t *np, const struct sw_ref_piece *add,
			  uint32_t na)
{
	uint32_t n = *np, need = 0;

	for (uint32_t i = 0; i < na; i++)
		need += !(i ? pieces_join(&add[i - 1], &add[i]) :
			      n && pieces_join(&pc[n - 1], add));
	if (n + need > SW_REF_PIECES)
		return false;
	for (uint32_t i = 0; i < na; i++) {
		if (n && pieces_join(&pc[n - 1], &add[i]))
			pc[n - 1].len += add[i].len;
		else
			pc[n++] = add[i];
	}
	*np = n;
	return true;
}

/*
 * Contract: see transport_priv.h. A run's MIDDLEs that came after a gap
 * were kept one by one (stash.c); the drain would otherwise pull each
 * packet's 4 KiB with a system call of its own (3.7 us each measured:
 * 410 us for the 112 packets kept behind one loss).
 */
uint32_t sw_resp_drain_middles(struct sw_qp *qp)
{
	struct sw_ref_piece pc[SW_REF_PIECES], one[SW_REF_PIECES];
	uint32_t epsn = qp->resp->epsn, n = 0, np = 0;
	const struct sw_pkt *k, *kept[SW_REF_PKTS];
	struct sw_pkt sub;
	bool ack_req = false;

	while (n < SW_REF_PKTS && (k = sw_stash_peek(qp, sw_psn_add(epsn, n)))) {
		if (!k->ref || k->ref_pkts != 1 || k->ref_n > SW_REF_PIECES ||
		    k->paylen != qp->attr.mtu ||
		    (k->opcode & (uint8_t)~SW_OP_CLASS_MASK) != SW_OP_WRITE_MIDDLE)
			break;
		memcpy(one, k->ref,
		       k->ref_n * sizeof(one[0])); /* kept bytes: no alignment promised */
		if (!pieces_append(pc, &np, one, k->ref_n))
			break;
		ack_req = k->ack_req;
		kept[n++] = k;
	}
	if (n < 2)
		return 0;
	sub = *kept[0];
	sub.ack_req = ack_req;
	if (!write_middles(qp, &sub, n, pc, np))
		return 0;
	/* the pull took the pieces: the kept records may go before it lands */
	for (uint32_t i = 0; i < n; i++)
		sw_stash_drop(qp, kept[i]);
	return n;
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
		if (i == 0 && m > 1 && sw_comp_placed_middles(qp, sw_psn_add(pkt->psn, 1), m - 1))
			return;
	}
}
