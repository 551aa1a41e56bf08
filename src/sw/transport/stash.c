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

/*
 * Entry sizes: pieces (by reference) or none (placed), a payload of up
 * to the largest MTU; each class has a free list per QP, so that a loss
 * in a stream does not cost a malloc(3) and a free(3) per packet kept
 * behind it (and the heap trims, with their TLB flushes, when a drain
 * frees a thousand at once). What the lists keep is bounded per device
 * (cache_max).
 */
enum {
	CLS_SMALL,
	CLS_BIG,
	CLS_N,
	CLS_NONE = CLS_N, /* larger than any class: malloc'd and freed alone */
};

static const size_t cls_len[CLS_N] = {SW_REF_PIECES * sizeof(struct sw_ref_piece),
				      SW_REF_MAX_BYTES};
static const unsigned int cache_max[CLS_N] = {SW_STASH_DEV_MAX, SW_STASH_DEV_MAX / 8};

/* One kept packet: the parsed headers, the payload after them. */
struct sw_stash_pkt {
	struct sw_pkt pkt; /* pkt.payload (or pkt.ref) points at data */
	struct sw_stash_pkt *next; /* on a free list */
	uint8_t cls;
	_Alignas(8) uint8_t data[];
};

struct sw_stash {
	uint32_t n; /* packets kept */
	bool broken; /* one was refused since the gap opened: keep none until it is filled */
	struct sw_stash_pkt *free[CLS_N];
	struct sw_stash_pkt *slot[SW_STASH_SLOTS]; /* by PSN modulo SW_STASH_SLOTS */
};

/* An entry for `len` bytes of data: from its class's free list, else malloc'd. */
static struct sw_stash_pkt *entry_get(struct sw_engine *eng, struct sw_stash *s, size_t len)
{
	uint8_t c = len <= cls_len[CLS_SMALL] ? CLS_SMALL :
		    len <= cls_len[CLS_BIG]   ? CLS_BIG :
						CLS_NONE;
	struct sw_stash_pkt *e;

	if (c != CLS_NONE && (e = s->free[c])) {
		s->free[c] = e->next;
		atomic_fetch_sub_explicit(&eng->stash_cached[c], 1, memory_order_relaxed);
		return e;
	}
	e = malloc(sizeof(*e) + (c == CLS_NONE ? len : cls_len[c]));
	if (e)
		e->cls = c;
	return e;
}

/* Back on its free list, or freed when the device's lists hold enough. */
static void entry_put(struct sw_engine *eng, struct sw_stash *s, struct sw_stash_pkt *e)
{
	uint8_t c = e->cls;

	if (c == CLS_NONE || atomic_fetch_add_explicit(&eng->stash_cached[c], 1,
						       memory_order_relaxed) >= cache_max[c]) {
		if (c != CLS_NONE)
			atomic_fetch_sub_explicit(&eng->stash_cached[c], 1, memory_order_relaxed);
		free(e);
		return;
	}
	e->next = s->free[c];
	s->free[c] = e;
}

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
	e = entry_get(eng, s, len);
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
		entry_put(sw_engine_of(qp), s, *slot);
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
		entry_put(sw_engine_of(qp), s, s->slot[i]);
		s->slot[i] = NULL;
		s->n--;
		atomic_fetch_sub_explicit(&sw_engine_of(qp)->stash_pkts, 1, memory_order_relaxed);
	}
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_stash_free(struct sw_qp *qp)
{
	struct sw_stash *s = qp->resp ? qp->resp->stash : NULL;

	if (!s)
		return;
	sw_stash_clear(qp);
	for (int c = 0; c < CLS_N; c++) {
		while (s->free[c]) {
			struct sw_stash_pkt *e = s->free[c];

			s->free[c] = e->next;
			atomic_fetch_sub_explicit(&sw_engine_of(qp)->stash_cached[c], 1,
						  memory_order_relaxed);
			free(e);
		}
	}
	free(qp->resp->stash);
	qp->resp->stash = NULL;
}
