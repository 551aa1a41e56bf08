/* SPDX-License-Identifier: MIT */
/*
 * req_push.c - a small RDMA WRITE that the requester writes into the
 * target itself (docs/single-copy.md, "Small WRITEs written by the
 * requester").
 *
 * Between two devices on one host, a WRITE below SW_REF_MIN_MSG bytes
 * otherwise travels in its packet, and the target's progress thread
 * places it: a hop between threads that a ping-pong pays twice per round
 * trip. When the target's push directory (shm_dir.c) shows that its QP
 * and MR allow the WRITE, the posting thread writes the bytes with
 * process_vm_writev(2) and sends the packet as a placed WRITE, headers
 * only: the responder checks its PSN and acknowledges it as usual, and
 * the WRITE completes when that ACK comes, as any other.
 *
 * Ordering: only a WRITE that nothing of its QP may still be ahead of is
 * pushed: every PSN before it acknowledged (so placed), or written the
 * same way (at most SW_PUSH_AHEAD of them unacknowledged). A WRITE with
 * immediate data, a SEND, a READ or an atomic goes in its packet, and so
 * does everything after them until they are acknowledged. A WRITE sent
 * again (a rewind, a timeout) carries its bytes: the responder, which
 * has seen its placed packet by then, takes it for a duplicate.
 *
 * Streams: only while the QP does not stream (its previous message too
 * started with fewer than SW_PUSH_AHEAD PSNs in flight: req->calm). A
 * system call per WRITE would slow a stream, whose packets the ring
 * batches: with pushes at each restart of sv_bench's 8-byte stream (1%
 * of its WRITEs) its rate fell by a tenth or more.
 */
#include "sw/transport/transport_priv.h"

/* Contract: see transport_priv.h (qp->lock held). */
bool sw_req_may_push(const struct sw_qp *qp, const struct sw_send_wqe *w)
{
	const struct sw_req *req = qp->req;

	return w->opcode == IBV_WR_RDMA_WRITE && w->state == SW_WQE_NEW && !w->pushed &&
	       req->send_off == 0 && req->calm && w->npkts == 1 && w->length &&
	       w->length < SW_REF_MIN_MSG && qp->ibv.qp_base.qp_type == IBV_QPT_RC &&
	       (req->una_psn == req->psn ||
		(req->push_chain && req->push_psn == req->psn &&
		 (uint32_t)sw_psn_diff(req->psn, req->una_psn) < SW_PUSH_AHEAD));
}

/* Contract: see transport_priv.h (qp->lock held). */
int sw_req_push(struct sw_qp *qp, struct sw_send_wqe *w, uint8_t *buf, bool ack_req,
		struct sw_ref_hold *ref)
{
	struct sw_engine *eng = sw_engine_of(qp);
	int len = sw_req_build(qp, w, 0, 1, buf, ack_req, ref);
	struct sw_pkt p;
	int ret;

	if (len <= 0 || eng->fork_gen != sw_fork_gen_now())
		return len; /* (a fork child's copy of a QP is not ours to use) */
	if (sw_pkt_parse(&p, buf, (size_t)len, NULL) || !p.paylen || p.paylen != p.dma_len)
		return len;
	ret = sw_shm_push_write(eng, &qp->attr.av.dst, p.dqpn, p.rkey, p.va, p.payload, p.paylen);
	if (ret) {
		if (ret != -EAGAIN)
			atomic_fetch_add_explicit(&eng->cnt.dir_refused, 1, memory_order_relaxed);
		return len;
	}
	atomic_fetch_add_explicit(&eng->cnt.dir_pushes, 1, memory_order_relaxed);
	w->pushed = 1; /* sent again, it carries its bytes */
	ref->placed = true;
	ref->pkts = 1;
	return (int)sw_pkt_write_placed(buf, &p, p.paylen, 1);
}
