/* SPDX-License-Identifier: MIT */
/*
 * stash.c - the RC responder's packets that arrive after a gap.
 *
 * IBTA's responder drops every packet after a gap and NAKs the first;
 * the requester then sends again everything from the gap (go-back-N),
 * a window of packets for each one lost. softverbs does better when
 * both ends are softverbs (docs/queue-pairs.md, "Selective repeat"):
 *
 *   - the responder keeps a copy of each SEND or WRITE packet that
 *     arrives ahead of the expected PSN (this file), NAKs the gap once
 *     as before, and when the missing packet comes it handles the kept
 *     ones in PSN order, as if they had just arrived (resp.c);
 *   - the requester answers the NAK by sending the one missing packet
 *     again (req.c, sw_req_selective) and goes on with new ones.
 *
 * A kept packet is handled exactly as it would have been on arrival in
 * order: every check (state, rkey, bounds, receive WQE) runs when it is
 * handled, not when it is kept; only the parsing and the ICRC check were
 * done on arrival. Nothing on the wire changes. A requester that goes
 * back anyway (IBTA's, rxe's) finds the packets it sends again answered
 * as duplicates, one ACK per receive batch; a responder that keeps
 * nothing shows itself to ours by NAKing the packet right after each one
 * sent again, and gets go-back-N from then on (req.c).
 *
 * Bounds: a QP keeps packets within SW_STASH_SLOTS PSNs of the expected
 * one (the device budget lets no sender have as many in flight), and a
 * device at most SW_STASH_DEV_MAX packets in all. A packet that finds no
 * room, or that is not kept (a READ, atomic or FLUSH request), is dropped
 * as IBTA's responder drops it, and so is everything kept before it and
 * after it until the gap is filled: the next NAK then names the packet
 * right after the one sent again, which the requester answers by going
 * back.
 *
 * All under qp->lock (progress thread), but the device-wide count, which
 * is atomic.
 */
#include <stdlib.h>
#include <string.h>

#include "sw/transport/transport_priv.h"

/* One kept packet: the parsed headers, the payload after them. */
struct sw_stash_pkt {
	struct sw_pkt pkt; /* pkt.payload (or pkt.ref) points at data */
	uint8_t data[];
};

struct sw_stash {
	uint32_t n; /* packets kept */
	bool broken; /* one was refused since the gap opened: keep none until it is filled */
	struct sw_stash_pkt *slot[SW_STASH_SLOTS]; /* by PSN modulo SW_STASH_SLOTS */
};

static struct sw_stash_pkt **slot_of(struct sw_stash *s, uint32_t psn)
{
	return &s->slot[psn & (SW_STASH_SLOTS - 1)];
}

/* Contract: see transport_priv.h (qp->lock held). */
bool sw_stash_put(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_resp *resp = qp->resp;
	struct sw_engine *eng = sw_engine_of(qp);
	int32_t d = sw_psn_diff(pkt->psn, resp->epsn);
	struct sw_stash_pkt *e, **slot;
	struct sw_stash *s = resp->stash;
	size_t len;

	if (qp->ibv.qp_base.qp_type != IBV_QPT_RC || d <= 0)
		return false;
	if (!s) {
		s = resp->stash = calloc(1, sizeof(*s));
		if (!s)
			return false;
	}
	if (s->broken)
		return false;
	if (!pkt->info || !(pkt->info->flags & (SW_F_SEND | SW_F_WRITE)) || d >= SW_STASH_SLOTS)
		goto refuse;
	slot = slot_of(s, pkt->psn);
	if (*slot)
		return true; /* kept already: a duplicate of it */
	if (atomic_fetch_add_explicit(&eng->stash_pkts, 1, memory_order_relaxed) >=
	    SW_STASH_DEV_MAX)
		goto undo;
	/* by reference (single copy): the pieces; the sender keeps the bytes until acknowledged */
	/* placed (its bytes already written, req_push.c): the headers alone */
	len = pkt->ref ? pkt->ref_n * sizeof(struct sw_ref_piece) : pkt->placed ? 0 : pkt->paylen;
	e = malloc(sizeof(*e) + len);
	if (!e)
		goto undo;
	e->pkt = *pkt;
	if (len)
		memcpy(e->data, pkt->ref ? pkt->ref : pkt->payload, len);
	if (pkt->ref)
		e->pkt.ref = e->data;
	else if (!pkt->placed)
		e->pkt.payload = e->data;
	*slot = e;
	s->n++;
	atomic_fetch_add_explicit(&eng->cnt.stashed, 1, memory_order_relaxed);
	return true;
undo:
	atomic_fetch_sub_explicit(&eng->stash_pkts, 1, memory_order_relaxed);
refuse:
	/* a gap the requester cannot fill one packet at a time: keep nothing */
	sw_stash_clear(qp);
	s->broken = true;
	return false;
}

/* Contract: see transport_priv.h (qp->lock held). */
const struct sw_pkt *sw_stash_next(struct sw_qp *qp)
{
	struct sw_stash *s = qp->resp->stash;
	struct sw_stash_pkt *e;

	if (!s)
		return NULL;
	s->broken = false; /* the gap is filled: what comes next may be kept again */
	if (!s->n || !(e = *slot_of(s, qp->resp->epsn)) || e->pkt.psn != qp->resp->epsn)
		return NULL;
	return &e->pkt;
}

/* Contract: see transport_priv.h (qp->lock held). */
const struct sw_pkt *sw_stash_peek(const struct sw_qp *qp, uint32_t psn)
{
	struct sw_stash *s = qp->resp ? qp->resp->stash : NULL;
	struct sw_stash_pkt *e;

	if (!s || !s->n || !(e = *slot_of(s, psn)) || e->pkt.psn != psn)
		return NULL;
	return &e->pkt;
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_stash_drop(struct sw_qp *qp, const struct sw_pkt *pkt)
{
	struct sw_stash *s = qp->resp->stash;
	struct sw_stash_pkt **slot = slot_of(s, pkt->psn);

	if (*slot && &(*slot)->pkt == pkt) {
		free(*slot);
		*slot = NULL;
		s->n--;
		atomic_fetch_sub_explicit(&sw_engine_of(qp)->stash_pkts, 1, memory_order_relaxed);
	}
}

/* Contract: see transport_priv.h (qp->lock held). */
uint32_t sw_stash_count(const struct sw_qp *qp)
{
	return qp->resp && qp->resp->stash ? qp->resp->stash->n : 0;
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_stash_clear(struct sw_qp *qp)
{
	struct sw_stash *s = qp->resp ? qp->resp->stash : NULL;

	if (!s)
		return;
	for (uint32_t i = 0; i < SW_STASH_SLOTS && s->n; i++) {
		if (!s->slot[i])
			continue;
		free(s->slot[i]);
		s->slot[i] = NULL;
		s->n--;
		atomic_fetch_sub_explicit(&sw_engine_of(qp)->stash_pkts, 1, memory_order_relaxed);
	}
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_stash_free(struct sw_qp *qp)
{
	if (!qp->resp || !qp->resp->stash)
		return;
	sw_stash_clear(qp);
	free(qp->resp->stash);
	qp->resp->stash = NULL;
}
