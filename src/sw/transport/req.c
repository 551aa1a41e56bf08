/* SPDX-License-Identifier: MIT */
/*
 * req.c - the requester: send WQEs become request packets.
 *
 * WQEs leave the SQ in order. A message of n bytes takes
 * max(1, ceil(n / MTU)) packets and as many PSNs; an RDMA READ request is
 * one packet that reserves a PSN for each response packet; an atomic
 * takes one. Sending stops at the window (packets in flight), at a
 * fence behind outstanding READs/atomics, at max_rd_atomic, during an RNR
 * back-off, when the device's budget is spent, and when the socket or
 * ring is full (then the QP waits in the budget's line, budget.c).
 * Whenever it stops with packets outstanding, the last packet it sent
 * asks for an ACK (AckReq), so the pipe never waits for the retransmit
 * timer unless a packet really was lost. The timer runs while anything
 * is unacknowledged; on expiry the requester goes back to the PSN the
 * peer is missing (go-back-N) and halves its window, never below one
 * message after an isolated loss (sw_req_cut); each window's worth of
 * packets acknowledged, by ACKs or by READ and atomic responses, grows
 * it by one packet (sw_req_grow). A sequence
 * NAK from a responder that keeps what follows a gap (softverbs',
 * stash.c) is answered with the one packet it names (sw_req_selective),
 * the window halved as well over the network, once per round trip of
 * losses (sw_req_cut_at); on the same-host link, whose ring pushes back
 * (a loss there is never congestion), not cut, and opened fully once a
 * full window went through since the last cut (sw_req_selective); from
 * any other responder, with go-back-N. Each consecutive
 * expiry doubles the timeout (at most 8x) until the peer acknowledges
 * something.
 *
 * UD sends complete as soon as they are on the wire; UC sends (req_uc.c)
 * once their last packet is.
 */
#include <string.h>

#include "sw/mem/place.h"
#include "sw/transport/transport_priv.h"

static struct sw_send_wqe *wqe_at(struct sw_qp *qp, uint32_t idx)
{
	return sw_ring_slot(&qp->sq, idx);
}

/* Contract: see transport_priv.h. */
uint32_t sw_wqe_npkts(const struct sw_qp *qp, const struct sw_send_wqe *w)
{
	uint32_t mtu = qp->attr.mtu ? qp->attr.mtu : 1024;

	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	    qp->ibv.qp_base.qp_type == IBV_QPT_UD)
		return 1;
	return w->length ? (w->length + mtu - 1) / mtu : 1;
}

/* Contract: see transport_priv.h. Floor of 500 us keeps tiny values sane. */
uint64_t sw_req_timeout_ns(const struct sw_qp *qp)
{
	uint64_t ns;

	if (!qp->attr.timeout)
		return 0; /* infinite */
	ns = 4096ull << qp->attr.timeout;
	return (ns < 500000 ? 500000 : ns) << qp->req->backoff;
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_req_acked(struct sw_qp *qp)
{
	qp->req->retries = qp->attr.retry_cnt;
	qp->req->rnr_retries = qp->attr.rnr_retry; /* RNR retries count per message too */
	qp->req->backoff = 0;
	if (qp->req->recovering && sw_psn_diff(qp->req->una_psn, qp->req->recover_psn) >= 0)
		qp->req->recovering = false; /* what the last cut answered is through */
	sw_probe_acked(qp);
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_req_arm_timer(struct sw_qp *qp)
{
	struct sw_req *req = qp->req;
	uint64_t t = sw_req_timeout_ns(qp);

	if (!t || req->deadline_ns)
		return;
	req->deadline_ns = sw_now_ns() + t;
	sw_engine_wake_for(sw_engine_of(qp), req->deadline_ns);
}

/* The opcode of packet `k` of `n` for a SEND or WRITE, in the group of QP type `qpt`. */
static uint8_t msg_opcode(const struct sw_send_wqe *w, uint32_t k, uint32_t n, enum ibv_qp_type qpt)
{
	bool first = k == 0, last = k == n - 1;
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	uint8_t cls = qpt == IBV_QPT_UC ? SW_OP_UC : SW_OP_RC;

	if (qpt == IBV_QPT_UD)
		return SW_OP_UD | (imm ? SW_OP_SEND_ONLY_IMM : SW_OP_SEND_ONLY);
	if (w->opcode == IBV_WR_SEND_WITH_INV) { /* RC only */
		if (first)
			return SW_OP_RC | (last ? SW_OP_SEND_ONLY_INV : SW_OP_SEND_FIRST);
		return SW_OP_RC | (last ? SW_OP_SEND_LAST_INV : SW_OP_SEND_MIDDLE);
	}
	if (w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM) {
		if (first && last)
			return cls | (imm ? SW_OP_SEND_ONLY_IMM : SW_OP_SEND_ONLY);
		if (first)
			return cls | SW_OP_SEND_FIRST;
		return cls |
		       (last ? (imm ? SW_OP_SEND_LAST_IMM : SW_OP_SEND_LAST) : SW_OP_SEND_MIDDLE);
	}
	if (first && last)
		return cls | (imm ? SW_OP_WRITE_ONLY_IMM : SW_OP_WRITE_ONLY);
	if (first)
		return cls | SW_OP_WRITE_FIRST;
	return cls | (last ? (imm ? SW_OP_WRITE_LAST_IMM : SW_OP_WRITE_LAST) : SW_OP_WRITE_MIDDLE);
}

/*
 * AckReq at least every this many packets: SW_ACK_EVERY, or a quarter of
 * the window when that is less (after losses cut it), so that several
 * ACKs are on their way in any window and the sender need not wait for
 * one at the window's edge (at least 2).
 */
static uint32_t ack_every(const struct sw_req *req)
{
	uint32_t n = req->window / 4;

	return n >= SW_ACK_EVERY ? SW_ACK_EVERY : n < 2 ? 2 : n;
}

/*
 * Packet `p` of `w` (`len` payload bytes at `off`) by reference, into
 * `buf` (wire.h), its MRs held in `ref`: its length, -E2BIG if the
 * payload has more than SW_REF_PIECES pieces, or the SGE errors of a
 * gather.
 */
static int build_ref(struct sw_qp *qp, struct sw_send_wqe *w, uint32_t off, uint32_t len,
		     uint32_t npk, struct sw_pkt *p, uint8_t *buf, struct sw_ref_hold *ref)
{
	struct sw_ref_piece pc[SW_REF_PIECES];
	int n = sw_sge_refs(qp, (const struct ibv_sge *)(void *)w->data, w->num_sge, off, len, pc,
			    SW_REF_PIECES, ref);

	return n < 0 ? n : (int)sw_pkt_write_ref(buf, p, pc, (uint32_t)n, len, npk);
}

/*
 * READ request `p` of `w` by reference (wire.h): the pieces of its sink
 * from byte `off` on, the MRs held in `ref` as sinks. Its length, or
 * < 0 (nothing held) when it goes as usual: the responses then carry the
 * bytes, and a bad SGE fails when they come, as without single copy.
 * Only the first request of a READ goes so: one asked again (a probe, a
 * NAK, a gap in the responses) may be answered after the first answer
 * completed the READ, and then its bytes must be ones the completer can
 * refuse, not ones written into memory the application owns again.
 */
static int build_sink(struct sw_qp *qp, struct sw_send_wqe *w, uint32_t off, struct sw_pkt *p,
		      uint8_t *buf, struct sw_ref_hold *ref)
{
	struct sw_ref_piece pc[SW_REF_PIECES];
	int n;

	ref->sink = true;
	n = sw_sge_refs(qp, (const struct ibv_sge *)(void *)w->data, w->num_sge, off, p->dma_len,
			pc, SW_REF_PIECES, ref);
	if (n < 0) {
		sw_ref_none(ref);
		return n;
	}
	w->pushed = 1;
	for (int i = 0; i < n; i++) /* the responder may write them */
		SW_DMA_WRITTEN((void *)(uintptr_t)pc[i].addr, pc[i].len);
	return (int)sw_pkt_write_ref(buf, p, pc, (uint32_t)n, p->dma_len, 1);
}

/* Contract: see transport_priv.h (qp->lock held). */
int sw_req_build(struct sw_qp *qp, struct sw_send_wqe *w, uint32_t k, uint32_t npk, uint8_t *buf,
		 bool ack_req, struct sw_ref_hold *ref)
{
	enum ibv_qp_type qpt = qp->ibv.qp_base.qp_type;
	bool ud = qpt == IBV_QPT_UD, rc = qpt == IBV_QPT_RC || qpt == IBV_QPT_XRC_SEND;
	uint32_t mtu = qp->attr.mtu ? qp->attr.mtu : 1024;
	struct sw_pkt p = {0};
	uint32_t off = k * mtu, len = 0;
	size_t hl;
	int ret;

	p.pkey = SW_DEFAULT_PKEY;
	p.psn = sw_psn_add(w->first_psn, k);
	p.dqpn = ud ? w->wr.ud.remote_qpn : qp->attr.dest_qp_num;
	switch (w->opcode) {
	case IBV_WR_RDMA_READ:
		p.opcode = SW_OP_READ_REQ;
		p.va = w->wr.rdma.remote_addr + off;
		p.rkey = w->wr.rdma.rkey;
		p.dma_len = w->length - off;
		p.ack_req = true;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		p.opcode =
			w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? SW_OP_CMP_SWAP : SW_OP_FETCH_ADD;
		p.va = w->wr.atomic.remote_addr;
		p.rkey = w->wr.atomic.rkey;
		p.swap_add = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->wr.atomic.swap :
								      w->wr.atomic.compare_add;
		p.compare = w->wr.atomic.compare_add;
		p.ack_req = true;
		break;
	case IBV_WR_FLUSH:
		/* FETH and RETH; the range's length rides in compare_add */
		p.opcode = SW_OP_FLUSH;
		p.va = w->wr.atomic.remote_addr;
		p.rkey = w->wr.atomic.rkey;
		p.dma_len = (uint32_t)w->wr.atomic.compare_add;
		p.feth = (uint32_t)w->wr.atomic.swap;
		p.ack_req = true;
		break;
	case IBV_WR_ATOMIC_WRITE:
		/* one packet: RETH and the 8 bytes, from the SGEs or the WQE itself */
		p.opcode = SW_OP_ATOMIC_WRITE;
		p.va = w->wr.atomic.remote_addr;
		p.rkey = w->wr.atomic.rkey;
		p.dma_len = w->length;
		p.ack_req = true;
		len = w->length;
		break;
	default:
		p.opcode = msg_opcode(w, k, w->npkts, qpt);
		len = w->length - off < mtu ? w->length - off : mtu;
		if (w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
			p.va = w->wr.rdma.remote_addr;
			p.rkey = w->wr.rdma.rkey;
			p.dma_len = w->length;
		}
		p.imm_be = w->imm_data;
		if (k == w->npkts - 1) {
			p.se = w->send_flags & IBV_SEND_SOLICITED;
			p.ack_req = rc;
		}
		if (ud) {
			p.qkey = (w->wr.ud.remote_qkey & 0x80000000u) ? qp->attr.qkey :
									w->wr.ud.remote_qkey;
			p.sqpn = qp->qpn;
		}
		break;
	}
	if (qpt == IBV_QPT_XRC_SEND) { /* RC's opcode in the XRC group, and the XRCETH */
		p.opcode |= SW_OP_XRC;
		p.xrc_srqn = w->xrc_srqn;
	}
	if (rc && (ack_req || ++qp->req->since_ackreq >= ack_every(qp->req)))
		p.ack_req = true;
	if (p.ack_req && rc) {
		qp->req->since_ackreq = 0;
		qp->req->ackreq_psn = p.psn;
	}
	if (ref)
		sw_ref_none(ref);
	/* once: asked again, the answer carries bytes (build_sink) */
	if (ref && w->opcode == IBV_WR_RDMA_READ && !w->pushed && w->num_sge &&
	    p.dma_len >= SW_REF_MIN_MSG && qpt == IBV_QPT_RC &&
	    (ret = build_sink(qp, w, off, &p, buf, ref)) > 0)
		return ret;
	if (ref && len && w->num_sge && w->length >= SW_REF_MIN_MSG && qpt == IBV_QPT_RC &&
	    w->opcode != IBV_WR_ATOMIC_WRITE) {
		/* a run of npk full packets (never the last: wire.h), else this one */
		if (npk > 1 &&
		    (ret = build_ref(qp, w, off, npk * mtu, npk, &p, buf, ref)) != -E2BIG) {
			if (ret > 0) {
				ref->pkts = npk;
				if (p.ack_req) /* a run's AckReq asks for its last packet */
					qp->req->ackreq_psn = sw_psn_add(p.psn, npk - 1);
			}
			return ret;
		}
		ret = build_ref(qp, w, off, len, 1, &p, buf, ref);
		if (ret != -E2BIG)
			return ret; /* (too many pieces: a copy) */
	}
	p.padcnt = sw_pad_for(len);
	p.paylen = len;
	hl = sw_pkt_write_hdrs(buf, &p);
	if (len && w->opcode == IBV_WR_ATOMIC_WRITE && !w->num_sge) {
		memcpy(buf + hl, &w->wr.atomic.swap, len);
	} else if (len) {
		if (w->num_sge)
			ret = sw_sge_gather(qp, (const struct ibv_sge *)(void *)w->data, w->num_sge,
					    off, buf + hl, len);
		else
			ret = (memcpy(buf + hl, w->data + off, len), 0);
		if (ret)
			return ret;
	}
	return (int)sw_pkt_finish(buf, hl + len, NULL); /* the ICRC at the socket (net.c) */
}

/*
 * `n` packets at consecutive PSNs from `psn` on (one, or a run's) went
 * out, `len` bytes in all: count those whose PSN went before as resent.
 * Returns true if the last of them never went before.
 */
static bool count_sent(struct sw_qp *qp, uint32_t psn, uint32_t n, size_t len)
{
	struct sw_req *req = qp->req;
	int32_t before = sw_psn_diff(req->high_psn, psn); /* of them, sent already */

	SW_QP_COUNT(qp, tx_pkts, n);
	SW_QP_COUNT(qp, tx_bytes, (unsigned long long)len);
	if (before > 0) {
		uint32_t resent = (uint32_t)before < n ? (uint32_t)before : n;

		atomic_fetch_add_explicit(&sw_engine_of(qp)->cnt.resent_pkts, resent,
					  memory_order_relaxed);
		if (resent == n)
			return false;
	}
	req->high_psn = sw_psn_add(psn, n);
	return true;
}

/*
 * Send the packets built into `tx`. On a full socket, go back to the
 * first packet that did not go out and wait in the budget's line for
 * room. Returns true if all went out.
 */
static bool tx_flush(struct sw_qp *qp, struct sw_tx_batch *tx, const struct sw_av *av)
{
	struct sw_engine *eng = sw_engine_of(qp);
	uint32_t n = tx->n, sent;
	bool fresh = false;

	if (!n)
		return true;
	sent = sw_net_send_batch(eng, tx, av);
	tx->n = 0;
	for (uint32_t i = 0; i < n; i++) /* the link keeps what it needs (shm_hold.c) */
		if (tx->ref[i].n)
			sw_ref_hold_put(&tx->ref[i]);
	for (uint32_t i = 0; i < sent; i++) /* a run of packets counts as each of them */
		fresh = count_sent(qp, tx->psn[i], tx->npsn[i], tx->len[i]);
	if (sent) {
		sw_req_arm_timer(qp);
		sw_probe_sent(qp, sw_psn_add(tx->psn[sent - 1], tx->npsn[sent - 1] - 1), fresh);
	}
	if (sent == n)
		return true;
	sw_req_rewind(qp, tx->psn[sent]);
	qp->req->wait_writable = true;
	sw_budget_wait(qp);
	return false;
}

/*
 * A packet with AckReq is outstanding: its ACK will come (or its loss
 * will show), and with it the QP sends again, so a stop needs no further
 * AckReq. Asking on every packet of a full window would make the peer
 * acknowledge each one. The last packet of each batch of SW_TX_BATCH
 * asks anyway, so a stop right after a batch went out is covered.
 */
static bool ack_coming(struct sw_qp *qp)
{
	/*
	 * Not while QPs wait in the budget's line: this one may join it
	 * when that ACK comes, and then send nothing (so ask for no ACK)
	 * until its turn.
	 */
	return sw_psn_diff(qp->req->ackreq_psn, qp->req->una_psn) >= 0 &&
	       !atomic_load_explicit(&sw_engine_of(qp)->budget.nwait, memory_order_relaxed);
}

/*
 * The requester stops with the batch's packets not yet sent: unless an
 * ACK is coming already, the last of them asks for one, whatever made it
 * stop.
 */
static void ask_ack_last(struct sw_qp *qp, struct sw_tx_batch *tx)
{
	if (!tx || !tx->n || qp->ibv.qp_base.qp_type == IBV_QPT_UD || ack_coming(qp))
		return;
	qp->req->ackreq_psn = sw_psn_add(tx->psn[tx->n - 1], tx->npsn[tx->n - 1] - 1);
	sw_pkt_set_ack_req(tx->buf[tx->n - 1], tx->len[tx->n - 1]);
}

/*
 * Packets are in flight and none of them asks for an ACK any more: the
 * last AckReq among them was acknowledged (ack_coming() let the ones
 * after it go without), and then the QP could not go on (the budget's
 * line). Its peer owes it nothing, so only its timer would move it.
 */
static bool unasked(const struct sw_req *req)
{
	return sw_req_in_flight(req) && sw_psn_diff(req->ackreq_psn, req->una_psn) < 0;
}

/* PSNs packet `send_off` of `w` puts in flight: a READ request all its responses'. */
static uint32_t pkt_psns(const struct sw_qp *qp, const struct sw_send_wqe *w)
{
	return w->opcode == IBV_WR_RDMA_READ ? w->npkts - qp->req->send_off : 1;
}

static bool resend_due(struct sw_qp *qp);

/*
 * Single copy: how many packets of `w`, from the next one on, may go in
 * one record by reference (wire.h): full ones only (never the last),
 * SW_REF_PKTS at most, no more than the window has room for, and cut
 * by send-side loss (*fate: sw_fault_run_cut).
 */
static uint32_t run_len(struct sw_qp *qp, const struct sw_send_wqe *w, uint8_t *fate)
{
	const struct sw_req *req = qp->req;
	uint32_t n = w->npkts - 1 - req->send_off;
	uint32_t room = req->window - (uint32_t)sw_psn_diff(req->psn, req->una_psn);

	if (n > SW_REF_PKTS)
		n = SW_REF_PKTS;
	return sw_fault_run_cut(qp, n < room ? n : room, fate);
}

/*
 * Single copy: may this RC QP's packets go by reference now? Its device
 * allows it, no send-side duplicates or reordering (fault injection,
 * which sends those one by one, copied: losses alone keep the batch,
 * net.c), and the link to the peer is open with pulls accepted (shm.c).
 * Looked up once per run (*cache, -1 until then).
 */
static bool link_pulls(struct sw_qp *qp, int *cache)
{
	struct sw_engine *eng = sw_engine_of(qp);
	const struct sw_fault *f = &eng->fault.cfg;

	if (*cache < 0)
		*cache = eng->pull && !sw_fault_one_by_one(f) &&
			 qp->ibv.qp_base.qp_type == IBV_QPT_RC &&
			 sw_shm_pull_ok(eng, &qp->attr.av.dst);
	return *cache > 0;
}

/*
 * Contract: see transport_priv.h (qp->lock held). RC packets are built into
 * the thread's batch and go out SW_TX_BATCH at a time; UD packets (and
 * RC ones when no batch buffer could be had) one by one.
 */
static void req_run(struct sw_qp *qp)
{
	struct sw_req *req = qp->req;
	enum ibv_qp_state st = qp->ibv.qp_base.state;
	bool ud = qp->ibv.qp_base.qp_type == IBV_QPT_UD;
	uint8_t one[SW_PKT_MAX];
	uint32_t max_rd = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1;
	struct sw_tx_batch *tx = NULL;
	bool pass, stop = false;
	int refs = -1; /* may packets go by reference? -1: not looked yet */

	if (!req || (st != IBV_QPS_RTS && st != IBV_QPS_SQD))
		return;
	if (req->rnr_until_ns) {
		if (sw_now_ns() < req->rnr_until_ns)
			return;
		req->rnr_until_ns = 0;
	}
	if (req->sel_due && !resend_due(qp))
		return;
	/*
	 * An unasked QP sends one packet past the line and the budget, with
	 * AckReq, before it waits: else what it holds in flight could sit
	 * unacknowledged until its timer fired, the budget held by every QP
	 * in that state. One packet a QP at most over the budget.
	 */
	pass = !ud && unasked(req);
	if (!ud && req->send_idx != qp->sq.prod && !pass && sw_budget_must_wait(qp)) {
		sw_budget_wait(qp); /* others wait for the budget or room: behind them */
		return;
	}
	req->wait_writable = false;
	if (!ud && req->send_idx != qp->sq.prod) {
		tx = sw_net_tx_batch();
		if (tx)
			tx->n = 0;
	}
	while (req->send_idx != qp->sq.prod) {
		struct sw_send_wqe *w = wqe_at(qp, req->send_idx);
		const struct sw_av *av = ud ? &w->wr.ud.av : &qp->attr.av;
		uint8_t *buf = tx ? tx->buf[tx->n] : one;
		uint32_t npk = 1, psns, gone;
		uint8_t fate = SW_FATE_DRAW;
		int len, ret;
		bool ack, by_ref, pushed, start, calm;

		if (w->state == SW_WQE_FAILED) {
			/* completes in order: once everything before it is retired */
			if (qp->sq.cons == req->send_idx)
				sw_comp_retire(qp, (enum ibv_wc_status)w->fail_status);
			break; /* (the batch is empty then: nothing is outstanding) */
		}
		if (sw_wr_is_local(w->opcode)) {
			/* after everything before it, and not while draining (req_local.c) */
			if (qp->sq.cons != req->send_idx ||
			    (st == IBV_QPS_SQD && (int32_t)(req->send_idx - req->started_idx) >= 0))
				break;
			w->first_psn = req->psn;
			req->send_idx++;
			req->started_idx = req->send_idx;
			sw_comp_retire(qp, sw_req_local_op(qp, w));
			if (qp->ibv.qp_base.state == IBV_QPS_ERR)
				return;
			continue;
		}
		if (req->send_off == 0) {
			/* draining: nothing new starts, what a rewind took back is resent */
			if (st == IBV_QPS_SQD && w->state == SW_WQE_NEW &&
			    (int32_t)(req->send_idx - req->started_idx) >= 0)
				break;
			if (w->state == SW_WQE_NEW) {
				if ((w->send_flags & IBV_SEND_FENCE) && req->rd_atomic)
					break;
				if (sw_wr_is_rd_atomic(w->opcode) && req->rd_atomic >= max_rd)
					break;
			}
			w->first_psn = req->psn;
			w->npkts = sw_wqe_npkts(qp, w);
		}
		if (!ud && (uint32_t)sw_psn_diff(req->psn, req->una_psn) >= req->window)
			break;
		by_ref = tx && w->length >= SW_REF_MIN_MSG && link_pulls(qp, &refs);
		if (by_ref && !pass && w->opcode != IBV_WR_RDMA_READ &&
		    req->send_off + 1 < w->npkts)
			/* full packets of a SEND or WRITE in one record */
			npk = run_len(qp, w, &fate);
		psns = npk > 1 ? npk : pkt_psns(qp, w); /* what this packet puts in flight */
		if (!ud && !sw_budget_take(qp, psns, pass, by_ref)) {
			sw_budget_wait(qp);
			break;
		}
		if (pass) {
			pass = false;
			stop = sw_budget_must_wait(qp); /* then it waits after this one */
		}
		ack = !ud &&
		      (stop || !tx || tx->n == SW_TX_BATCH - 1 ||
		       (!ack_coming(qp) &&
			(uint32_t)sw_psn_diff(req->psn, req->una_psn) + psns >= req->window));
		start = req->send_off == 0; /* a message's first packet: is the QP streaming? */
		calm = start && (uint32_t)sw_psn_diff(req->psn, req->una_psn) < SW_PUSH_AHEAD;
		pushed = tx && !by_ref && sw_req_may_push(qp, w) && link_pulls(qp, &refs);
		if (pushed) { /* written into the peer here, if its directory allows (req_push.c) */
			len = sw_req_push(qp, w, buf, ack, &tx->ref[tx->n]);
			pushed = by_ref = len > 0 && tx->ref[tx->n].placed;
		} else {
			len = sw_req_build(qp, w, req->send_off, npk, buf, ack,
					   by_ref ? &tx->ref[tx->n] : NULL);
		}
		if (len < 0) {
			/*
			 * A bad local SGE fails the WQE. It completes in order:
			 * now if it is the oldest, else once the WQEs ahead of
			 * it are retired (comp.c). Nothing more is sent.
			 */
			if (tx && !tx_flush(qp, tx, av))
				return; /* it is sent again, and fails, after the rewind */
			w->state = SW_WQE_FAILED;
			w->fail_status = len == -EINVAL ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR;
			if (qp->sq.cons == req->send_idx)
				sw_comp_retire(qp, (enum ibv_wc_status)w->fail_status);
			return;
		}
		gone = 1; /* PSNs the packet took */
		if (tx) {
			tx->psn[tx->n] = req->psn;
			if (!by_ref)
				sw_ref_none(&tx->ref[tx->n]);
			gone = tx->npsn[tx->n] = tx->ref[tx->n].pkts;
			tx->fate[tx->n] = fate;
			tx->len[tx->n++] = (size_t)len;
		} else {
			ret = sw_net_send(sw_engine_of(qp), buf, (size_t)len, av);
			if (ret == -EAGAIN) {
				req->wait_writable = true;
				if (!ud)
					sw_budget_wait(qp);
				else
					sw_engine_wake(sw_engine_of(qp));
				return;
			}
			if (!ret && !ud)
				sw_probe_sent(qp, req->psn,
					      count_sent(qp, req->psn, 1, (size_t)len));
			else if (!ret)
				count_sent(qp, req->psn, 1, (size_t)len);
		}
		if (req->send_off == 0 && w->state == SW_WQE_NEW) {
			w->state = SW_WQE_STARTED;
			if ((int32_t)(req->send_idx + 1 - req->started_idx) > 0)
				req->started_idx = req->send_idx + 1;
			if (sw_wr_is_rd_atomic(w->opcode))
				req->rd_atomic++;
		}
		if (ud) {
			req->psn = sw_psn_add(req->psn, 1);
			req->send_idx++;
			req->send_off = 0;
			sw_comp_retire(qp, IBV_WC_SUCCESS);
			continue;
		}
		if (w->opcode == IBV_WR_RDMA_READ) {
			/* one request reserves the PSNs of all remaining responses */
			req->psn = sw_psn_add(w->first_psn, w->npkts);
			req->send_off = w->npkts;
		} else {
			req->psn = sw_psn_add(req->psn, gone);
			req->send_off += gone;
		}
		req->push_chain = pushed; /* everything before req->psn is placed */
		req->push_psn = req->psn;
		if (start)
			req->calm = calm; /* a stream's messages start with more in flight */
		if (req->send_off >= w->npkts) {
			req->send_idx++;
			req->send_off = 0;
		}
		if (!tx)
			sw_req_arm_timer(qp);
		else if (tx->n == SW_TX_BATCH && !tx_flush(qp, tx, av))
			return;
		if (stop) {
			sw_budget_wait(qp);
			break;
		}
	}
	if (tx) {
		ask_ack_last(qp, tx);
		tx_flush(qp, tx, &qp->attr.av);
	}
}

/*
 * Contract: see transport_priv.h (qp->lock held). The budget follows what
 * went out (RC; UC sends without budget or window, req_uc.c).
 */
void sw_req_run(struct sw_qp *qp)
{
	if (qp->ibv.qp_base.qp_type == IBV_QPT_UC) {
		sw_req_uc_run(qp);
		return;
	}
	req_run(qp);
	if (qp->req)
		sw_budget_sync(qp);
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_req_grow(struct sw_qp *qp, uint32_t n)
{
	struct sw_req *req = qp->req;

	req->grow_acc += n;
	req->acked_since_cut =
		n < SW_WINDOW_MAX - req->acked_since_cut ? req->acked_since_cut + n : SW_WINDOW_MAX;
	while (req->grow_acc >= req->window && req->window < SW_WINDOW_MAX) {
		req->grow_acc -= req->window;
		req->window++;
	}
	if (req->window >= SW_WINDOW_MAX)
		req->grow_acc = 0;
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_req_cut(struct sw_qp *qp)
{
	struct sw_req *req = qp->req;
	uint32_t floor = SW_WINDOW_MIN;

	/*
	 * One message is the floor after an isolated loss: at least that
	 * much was acknowledged since the last cut. Losses closer together
	 * than one message mean a lossy path, and the window may halve below
	 * it: every loss costs go-back-N a window of resends.
	 */
	if (qp->sq.cons != qp->sq.prod) {
		uint32_t n = sw_wqe_npkts(qp, wqe_at(qp, qp->sq.cons));

		if (n > SW_WINDOW_MAX)
			n = SW_WINDOW_MAX;
		if (n > floor && req->acked_since_cut >= n)
			floor = n;
	}
	req->window = req->window / 2 > floor ? req->window / 2 : floor;
	req->grow_acc = 0;
	req->acked_since_cut = 0;
	req->recover_psn = req->psn;
	req->recovering = true;
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_req_cut_at(struct sw_qp *qp, uint32_t psn)
{
	struct sw_req *req = qp->req;

	if (req->recovering && sw_psn_diff(psn, req->recover_psn) < 0)
		return;
	sw_req_cut(qp);
}

/*
 * Contract: see transport_priv.h. Find the WQE holding `psn` among those sent
 * and resume there; a READ resumes at the response that was missed.
 * Every WQE after the rewind point goes out again as if new.
 */
void sw_req_rewind(struct sw_qp *qp, uint32_t psn)
{
	struct sw_req *req = qp->req;
	uint32_t end = req->send_idx + (req->send_off ? 1 : 0);
	uint32_t idx, rd = 0;
	int32_t d = 0;

	if (sw_psn_diff(psn, req->una_psn) < 0)
		psn = req->una_psn; /* never before what the peer acknowledged */
	for (idx = qp->sq.cons; idx != end; idx++) {
		struct sw_send_wqe *w = wqe_at(qp, idx);

		d = sw_psn_diff(psn, w->first_psn);
		if (d >= 0 && (uint32_t)d < w->npkts)
			break;
		if (sw_wr_is_rd_atomic(w->opcode) && w->state == SW_WQE_STARTED)
			rd++;
	}
	if (idx == end)
		return; /* nothing sent holds that PSN */
	req->send_idx = idx;
	req->send_off = (uint32_t)d;
	req->psn = psn;
	req->ackreq_psn = sw_psn_add(psn, SW_PSN_MASK); /* what asked after it is resent */
	req->sel_due = false; /* go-back-N sends it anyway */
	req->push_chain = false; /* what is sent again may still be ahead of a push */
	sw_probe_rewound(qp);
	for (uint32_t j = idx; j != qp->sq.prod; j++) {
		struct sw_send_wqe *w = wqe_at(qp, j);

		if (j == idx && d > 0) {
			if (sw_wr_is_rd_atomic(w->opcode))
				rd++; /* resumes mid-way: still outstanding */
			continue;
		}
		if (w->state == SW_WQE_STARTED)
			w->state = SW_WQE_NEW;
	}
	req->rd_atomic = rd;
	if (idx == qp->sq.cons && wqe_at(qp, idx)->opcode == IBV_WR_RDMA_READ)
		req->read_rx_pkts = (uint32_t)d;
}

/*
 * The tail-loss probe of a READ at the head: its request once more from
 * the first response missing, as the completer asks after a gap
 * (lost_response in comp.c). The responder runs a duplicate READ again
 * (IBTA 9.7.5.1.3.2), so whether the request or the last responses were
 * lost, the answer moves una_psn; what was sent after the READ goes
 * again as after a NAK. The probe count survives the rewind, so an
 * unanswered probe doubles the wait as for SEND and WRITE.
 */
static void probe_read(struct sw_qp *qp, uint64_t now)
{
	struct sw_req *req = qp->req;
	uint8_t out = req->probes_out;

	sw_req_rewind(qp, req->una_psn);
	req->resp_asked = true; /* later responses of the gap do not ask again */
	req->probes_out = out + 1;
	req->last_act_ns = now;
	atomic_fetch_add_explicit(&sw_engine_of(qp)->cnt.probes, 1, memory_order_relaxed);
	sw_req_run(qp);
}

/*
 * The tail-loss probe (probe.c): the oldest unacknowledged packet once
 * more, with AckReq, if it belongs to a SEND or WRITE; a READ asks again
 * (probe_read). Nothing else of the requester's state moves; a full
 * socket just means no probe now.
 */
/*
 * The started WQE holding una_psn and that packet's index in it (*k);
 * NULL when none is (nothing unacknowledged was sent).
 */
static struct sw_send_wqe *una_wqe(struct sw_qp *qp, uint32_t *k)
{
	struct sw_req *req = qp->req;
	uint32_t end = req->send_idx + (req->send_off ? 1 : 0);

	for (uint32_t idx = qp->sq.cons; idx != end; idx++) {
		struct sw_send_wqe *w = wqe_at(qp, idx);
		int32_t d = sw_psn_diff(req->una_psn, w->first_psn);

		if (d >= 0 && (uint32_t)d < w->npkts) {
			*k = (uint32_t)d;
			return w->state == SW_WQE_STARTED ? w : NULL;
		}
	}
	return NULL;
}

/* Send packet `k` of `w`, una_psn, once more with AckReq; 0 or -errno. */
static int resend_una(struct sw_qp *qp, struct sw_send_wqe *w, uint32_t k)
{
	uint8_t buf[SW_PKT_MAX];
	int len = sw_req_build(qp, w, k, 1, buf, true, NULL);

	if (len < 0)
		return len;
	if (sw_net_send(sw_engine_of(qp), buf, (size_t)len, &qp->attr.av))
		return -EAGAIN;
	count_sent(qp, qp->req->una_psn, 1, (size_t)len);
	return 0;
}

static void send_probe(struct sw_qp *qp, uint64_t now)
{
	struct sw_req *req = qp->req;
	struct sw_engine *eng = sw_engine_of(qp);
	struct sw_send_wqe *w;
	uint32_t k;

	w = una_wqe(qp, &k);
	if (!w)
		return;
	if (req->on_link)
		sw_probe_loss(qp, now); /* the link handled everything, and nothing answered */
	req->on_link = sw_shm_linked(eng, &qp->attr.av.dst); /* the next probe's rule (probe.c) */
	if (w->opcode == IBV_WR_RDMA_READ) {
		probe_read(qp, now);
		return;
	}
	if (sw_wr_is_rd_atomic(w->opcode) || resend_una(qp, w, k))
		return;
	req->probed = true;
	req->probes_out++;
	req->probe_psn = req->una_psn;
	/*
	 * The timed packet stays timed (unlike Karn's rule for resent
	 * packets): an answer after the probe gives a sample of at least the
	 * probe's wait, so a peer slower than the estimate (the probe was
	 * spurious: an emulated guest, a loaded host) raises the estimate
	 * instead of drawing a probe every round trip. After a real tail
	 * loss the sample overstates the round trip by about a PTO, which
	 * the clean samples that follow wear off (gain 1/8).
	 */
	req->last_act_ns = now;
	atomic_fetch_add_explicit(&eng->cnt.probes, 1, memory_order_relaxed);
}

/*
 * Contract: see transport_priv.h (qp->lock held; una_psn is the NAK's
 * PSN, the caller acknowledged what is before it). A softverbs peer kept
 * what came after the gap (stash.c), so the missing packet alone fills
 * it. NAKs of the packet right after the one sent again last time,
 * twice in a row, mean the peer kept nothing behind it (no room, or a
 * packet it does not keep): go-back-N then. Once is taken for a second
 * loss (two lost in a row is common at a few percent of loss, three
 * rare). A responder never seen to keep anything after such a run is
 * taken to keep nothing, as IBTA's and rxe's do not: go-back-N only
 * from then on. The other sign of such a responder is an ACK of just
 * the packet resent (sw_req_sel_acked).
 */
bool sw_req_selective(struct sw_qp *qp, uint32_t psn)
{
	struct sw_req *req = qp->req;
	struct sw_send_wqe *w;
	uint32_t k;

	if (req->sel_on && psn == sw_psn_add(req->sel_psn, 1)) {
		req->sel_next++;
	} else {
		if (req->sel_on && sw_psn_diff(psn, req->sel_psn) > 1)
			req->sel_kept = true; /* the gap filled up to a later loss: it keeps */
		req->sel_next = 0;
	}
	req->on_link = sw_shm_linked(sw_engine_of(qp), &qp->attr.av.dst);
	if (req->sel_next >= 2) {
		/*
		 * A responder that keeps nothing: IBTA's, rxe's. Never one on
		 * the link, which is softverbs: there a third loss in a row,
		 * or a burst, goes back this once only.
		 */
		if (!req->sel_kept && !req->on_link)
			req->sel_never = true;
		goto back;
	}
	if (qp->ibv.qp_base.qp_type != IBV_QPT_RC || psn != req->una_psn || req->sel_never)
		goto back;
	w = una_wqe(qp, &k);
	if (!w || sw_wr_is_rd_atomic(w->opcode) || w->opcode == IBV_WR_RDMA_READ)
		goto back;
	req->sel_on = true;
	/*
	 * On the link a ring that pushes back and the device budget bound
	 * what is in flight: no window to find. Once a full window went
	 * through since the last cut, though: a go-back resends all of it.
	 */
	if (req->on_link && req->acked_since_cut >= SW_WINDOW_MAX)
		req->window = SW_WINDOW_MAX;
	req->sel_due = true; /* req_run sends it, first (resend_due) */
	req->sel_wait = true;
	req->sel_psn = psn;
	req->sel_hi = req->psn;
	req->rtt_on = false; /* Karn: no sample across a resend */
	req->last_act_ns = sw_now_ns();
	atomic_fetch_add_explicit(&sw_engine_of(qp)->cnt.selective, 1, memory_order_relaxed);
	return true;
back:
	req->sel_on = false;
	req->sel_wait = false;
	req->sel_next = 0;
	return false;
}

/*
 * Contract: see transport_priv.h (qp->lock held; after an ACK moved
 * una_psn). The answer to a packet sent alone: an ACK of that packet and
 * no further, though packets after it were out before it, means the
 * responder took it and has nothing after it. A responder that keeps
 * would have handled what it kept and acknowledged it, or NAKed the next
 * gap; IBTA's and rxe's dropped it all, and without going back now the
 * QP would wait for a probe (rxe sends no NAK for what it dropped before
 * the gap filled). So: go-back-N from there, and, if this responder was
 * never seen to keep anything, go-back-N only from now on. An ACK beyond
 * it shows the responder keeps.
 */
void sw_req_sel_acked(struct sw_qp *qp)
{
	struct sw_req *req = qp->req;
	int32_t d = sw_psn_diff(req->una_psn, req->sel_psn);

	if (!req->sel_wait || d <= 0)
		return;
	req->sel_wait = false;
	if (d > 1) {
		req->sel_kept = true;
		return;
	}
	if (sw_psn_diff(req->sel_hi, req->una_psn) <= 0 || !sw_req_in_flight(req))
		return; /* nothing was out after it */
	if (!req->sel_kept && !req->on_link) /* (as looked up by sw_req_selective) */
		req->sel_never = true; /* a link's peer is softverbs: it keeps */
	sw_req_cut(qp);
	sw_req_rewind(qp, req->una_psn);
}

/*
 * The packet sw_req_selective chose goes before anything new: false
 * while it waits for room (the QP is in the budget's line then), true
 * once it went or is no longer owed (acknowledged meanwhile). A packet
 * that cannot be built again (its MR went away) goes back to the rewind,
 * where the WQE fails as it would have.
 */
static bool resend_due(struct sw_qp *qp)
{
	struct sw_req *req = qp->req;
	struct sw_send_wqe *w;
	uint32_t k;
	int ret;

	req->sel_due = false;
	if (req->una_psn != req->sel_psn || !(w = una_wqe(qp, &k)))
		return true;
	ret = resend_una(qp, w, k);
	if (ret == -EAGAIN) {
		req->sel_due = true;
		req->wait_writable = true;
		sw_budget_wait(qp);
		return false;
	}
	if (ret)
		sw_req_rewind(qp, req->una_psn);
	return true;
}

/*
 * The retransmit timer expired while the same-host link to the peer
 * still holds packets its consumer has not handled (read and answered).
 * The link loses nothing (only fault injection does, and it drops before
 * the ring or after the read), so what is in flight is queued, not lost:
 * a retry now would put duplicates behind it and spend retry_cnt on a
 * peer that is merely slow (a progress thread a loaded host starves; a
 * NIC would answer for a descheduled process). The expiry is deferred,
 * charging nothing, while the consumer has handled more since the last
 * deferral, and for at most SW_LINK_STALLS deferrals in a row while it
 * has not (a stopped or hung process): then expiries count as usual and
 * retry_cnt ends the QP as it would over the network.
 */
static bool link_draining(struct sw_qp *qp)
{
	struct sw_req *req = qp->req;
	struct sw_engine *eng = sw_engine_of(qp);
	uint64_t done;

	/*
	 * Our own side first: the peer's answers may wait unread in its
	 * link into this device (this thread was starved, and runs its
	 * timers before it has read them all): read them before a timeout
	 * counts. We read on, so this defers no longer than that takes.
	 */
	if (sw_shm_unread(eng, &qp->attr.av.dst))
		return true;
	if (!sw_shm_backlog(eng, &qp->attr.av.dst, &done))
		return false;
	if (done != req->link_done) {
		req->link_done = done;
		req->link_stalls = 0;
		return true;
	}
	return req->link_stalls++ < SW_LINK_STALLS;
}

/* Contract: see transport_priv.h. */
void sw_req_timer(struct sw_qp *qp, uint64_t now)
{
	struct sw_req *req = qp->req;
	struct sw_engine *eng = sw_engine_of(qp);

	if (req->deadline_ns && now >= req->deadline_ns) {
		req->deadline_ns = 0;
		if (!sw_req_in_flight(req))
			goto more; /* nothing outstanding after all */
		if (link_draining(qp)) {
			req->deadline_ns = now + sw_req_timeout_ns(qp);
			atomic_fetch_add_explicit(&eng->cnt.timer_deferrals, 1,
						  memory_order_relaxed);
			goto more;
		}
		SW_COUNT(eng, qp, timeouts);
		sw_probe_loss(qp, now);
		if (!req->retries) {
			sw_comp_retire(qp, IBV_WC_RETRY_EXC_ERR);
			return;
		}
		req->retries--;
		if (req->backoff < SW_BACKOFF_MAX)
			req->backoff++;
		sw_req_cut(qp);
		SW_COUNT(eng, qp, retransmits);
		req->resp_asked = false;
		sw_req_rewind(qp, req->una_psn);
	}
more:
	if (sw_probe_should_fire(qp, now))
		send_probe(qp, now);
	if ((req->rnr_until_ns && now >= req->rnr_until_ns) || req->wait_writable ||
	    (req->deadline_ns == 0 && req->send_idx != qp->sq.prod))
		sw_req_run(qp);
}
