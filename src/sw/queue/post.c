/* SPDX-License-Identifier: MIT */
/*
 * post.c - ibv_post_send and ibv_post_recv on the software device, and
 * the send-WQE rules the ibv_wr_* API shares.
 *
 * Both verbs hold qp->lock for the whole list. A work request that fails
 * a check stops the list: it and everything after it are not posted,
 * *bad names it, and the verb returns a positive errno; the requests
 * before it stay posted (and are sent). Per request, in order:
 *   opcode not valid for the QP type                 EINVAL
 *   num_sge < 0 or > max_send_sge / max_recv_sge     EINVAL
 *   IBV_SEND_INLINE (SEND and RDMA WRITE only; other
 *   opcodes ignore the flag) beyond max_inline_data  EINVAL
 *   message longer than 2^31 bytes                   EINVAL
 *   UD without an AH, or longer than the path MTU    EINVAL
 *   BIND_MW without a window                         EINVAL
 *   atomic without exactly one 8-byte SGE, or with
 *   a remote address not 8-byte aligned              EINVAL
 *   ATOMIC_WRITE whose SGEs do not hold exactly 8
 *   bytes (its value; the remote address in wr.rdma,
 *   its alignment the responder's to check)          EINVAL
 *   FLUSH (it needs ibv_wr_flush's type and level,
 *   which struct ibv_send_wr cannot carry)           EINVAL
 *   queue full                                       ENOMEM
 *
 * States (as rxe, the software reference): sends need RTS or SQD (queued,
 * not started, while draining); in ERR and SQE they are accepted and
 * flushed at once with IBV_WC_WR_FLUSH_ERR; before RTS they fail with
 * EINVAL. Receives may be posted from INIT on (RESET gives EINVAL, as
 * rxe; mlx5 accepts them); in ERR they are flushed at once. A QP with an
 * SRQ takes no receives of its own (EINVAL), nor do XRC QPs (INI has no
 * receive side, TGT takes its receives from XRC SRQs); an XRC TGT QP
 * takes no sends (EINVAL). An XRC INI send carries
 * wr->qp_type.xrc.remote_srqn (24 bits) to the XRCETH.
 *
 * Inline data is copied into the WQE, and so are the SGE lists, so the
 * application may reuse its buffers and lists as soon as the call returns.
 */
#include <string.h>

#include "sw/queue/qp_priv.h"
#include "sw/wire.h"

/* Contract: see qp_priv.h. */
bool sw_qp_opcode_ok(const struct sw_qp *qp, uint32_t op)
{
	enum ibv_qp_type t = qp->ibv.qp_base.qp_type;

	if (t == IBV_QPT_XRC_RECV)
		return false; /* no send queue */
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return true;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return t != IBV_QPT_UD;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
	case IBV_WR_BIND_MW:
		return t == IBV_QPT_RC;
	case IBV_WR_ATOMIC_WRITE:
	case IBV_WR_FLUSH:
		return t == IBV_QPT_RC;
	default:
		return false;
	}
}

/* Contract: see qp_priv.h. */
bool sw_opcode_inline_ok(uint32_t op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_SEND_WITH_INV ||
	       op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/* Contract: see qp_priv.h. */
void sw_send_wqe_bind(struct sw_send_wqe *w, const struct ibv_mw *mw, uint32_t rkey,
		      const struct ibv_mw_bind_info *info)
{
	struct sw_mw_bind *b = &w->wr.bind;

	b->mw_rkey = mw->rkey;
	b->new_rkey = rkey;
	b->mr_lkey = info->mr ? info->mr->lkey : 0;
	b->access = info->mw_access_flags;
	b->addr = info->addr;
	b->length = info->length;
}

/* Contract: true for the atomic opcodes. */
static bool opcode_atomic(uint32_t op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* Contract: see qp_priv.h. */
int sw_qp_send_state(const struct sw_qp *qp)
{
	switch (sw_qp_state(qp)) {
	case IBV_QPS_RTS:
	case IBV_QPS_SQD:
		return 0;
	case IBV_QPS_SQE:
	case IBV_QPS_ERR:
		return 1;
	default:
		return -EINVAL;
	}
}

/* Contract: see qp_priv.h. */
void sw_send_wqe_start(const struct sw_qp *qp, struct sw_send_wqe *w, uint64_t wr_id,
		       uint32_t opcode, unsigned int flags)
{
	memset(w, 0, sizeof(*w));
	w->wr_id = wr_id;
	w->opcode = opcode;
	w->send_flags = flags & ~(unsigned int)IBV_SEND_INLINE;
	if (qp->sq_sig_all)
		w->send_flags |= IBV_SEND_SIGNALED;
}

/*
 * Contract: the rules of sw_send_wqe_check() (qp_priv.h) on a request's
 * parts: `length` payload bytes, `num_sge` SGEs at `sge`, and for an
 * atomic its remote address. 0 or -EINVAL.
 */
static int send_rules(const struct sw_qp *qp, uint32_t opcode, uint64_t length, uint32_t num_sge,
		      const struct ibv_sge *sge, uint64_t atomic_addr)
{
	if (qp->ibv.qp_base.qp_type == IBV_QPT_UD && length > qp->attr.mtu)
		return -EINVAL;
	if (opcode_atomic(opcode) && (num_sge != 1 || sge->length != sizeof(uint64_t) ||
				      (atomic_addr & (sizeof(uint64_t) - 1))))
		return -EINVAL;
	if (opcode == IBV_WR_ATOMIC_WRITE && length != sizeof(uint64_t))
		return -EINVAL;
	return 0;
}

/* Contract: see qp_priv.h. */
int sw_send_wqe_check(const struct sw_qp *qp, const struct sw_send_wqe *w)
{
	return send_rules(qp, w->opcode, w->length, w->num_sge,
			  (const struct ibv_sge *)(const void *)w->data, w->wr.atomic.remote_addr);
}

/* Contract: the opcode-specific part of a send WQE from `wr`. */
static void fill_wr(struct sw_send_wqe *w, const struct ibv_send_wr *wr)
{
	switch (wr->opcode) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		w->imm_data = wr->imm_data;
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		w->imm_data = htobe32(wr->invalidate_rkey);
		break;
	case IBV_WR_BIND_MW:
		sw_send_wqe_bind(w, wr->bind_mw.mw, wr->bind_mw.rkey, &wr->bind_mw.bind_info);
		break;
	default:
		break;
	}
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		w->wr.rdma.remote_addr = wr->wr.rdma.remote_addr;
		w->wr.rdma.rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_WRITE:
		/* the target as for a WRITE; the value stays in the SGEs */
		w->wr.atomic.remote_addr = wr->wr.rdma.remote_addr;
		w->wr.atomic.rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w->wr.atomic.remote_addr = wr->wr.atomic.remote_addr;
		w->wr.atomic.compare_add = wr->wr.atomic.compare_add;
		w->wr.atomic.swap = wr->wr.atomic.swap;
		w->wr.atomic.rkey = wr->wr.atomic.rkey;
		break;
	default:
		break;
	}
}

/* Contract: copy the bytes the SGEs of `wr` name into `dst` (inline data). */
static void copy_inline(uint8_t *dst, const struct ibv_send_wr *wr)
{
	int i;

	for (i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge *s = &wr->sg_list[i];

		if (s->length)
			memcpy(dst, (const void *)(uintptr_t)s->addr, s->length);
		dst += s->length;
	}
}

/* Contract: queue one send work request; 0 or a positive errno (see the top). */
static int post_one_send(struct sw_qp *qp, const struct ibv_send_wr *wr)
{
	bool ud = qp->ibv.qp_base.qp_type == IBV_QPT_UD;
	bool inl = (wr->send_flags & IBV_SEND_INLINE) && sw_opcode_inline_ok(wr->opcode);
	uint64_t total = 0;
	struct sw_send_wqe *w;
	int i;

	if (!sw_qp_opcode_ok(qp, wr->opcode) || wr->opcode == IBV_WR_FLUSH)
		return EINVAL;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge)
		return EINVAL;
	for (i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if (inl && total > qp->cap.max_inline_data)
		return EINVAL;
	if (total > SW_MAX_MSG_SZ)
		return EINVAL;
	if (ud && !wr->wr.ud.ah)
		return EINVAL;
	if (wr->opcode == IBV_WR_BIND_MW && !wr->bind_mw.mw)
		return EINVAL;
	if (send_rules(qp, wr->opcode, total, (uint32_t)wr->num_sge, wr->sg_list,
		       wr->wr.atomic.remote_addr))
		return EINVAL;
	if (sw_ring_used(&qp->sq) >= qp->cap.max_send_wr)
		return ENOMEM;

	w = sw_sq_wqe(qp, qp->sq.prod);
	sw_send_wqe_start(qp, w, wr->wr_id, wr->opcode, wr->send_flags);
	w->length = (uint32_t)total;
	if (inl) {
		w->send_flags |= IBV_SEND_INLINE;
		copy_inline(w->data, wr);
	} else {
		w->num_sge = (uint32_t)wr->num_sge;
		if (wr->num_sge)
			memcpy(w->data, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
	}
	fill_wr(w, wr);
	if (sw_wr_is_local(wr->opcode)) {
		w->num_sge = 0; /* no data: SGEs are not looked at */
		w->length = 0;
	}
	if (qp->ibv.qp_base.qp_type == IBV_QPT_XRC_SEND)
		w->xrc_srqn = wr->qp_type.xrc.remote_srqn & SW_QPN_MASK;
	if (ud) {
		w->wr.ud.av = sw_ah(wr->wr.ud.ah)->av;
		w->wr.ud.remote_qpn = wr->wr.ud.remote_qpn & SW_QPN_MASK;
		w->wr.ud.remote_qkey = wr->wr.ud.remote_qkey;
	}
	qp->sq.prod++;
	return 0;
}

/* Contract: sv_ops.post_send (ABI: 0 or a positive errno, *bad on failure). */
int sw_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sw_qp *qp = sw_qp_real(ibqp);
	uint32_t start;
	int ret = 0, st;

	pthread_mutex_lock(&qp->lock);
	st = sw_qp_send_state(qp);
	if (st < 0) {
		pthread_mutex_unlock(&qp->lock);
		*bad = wr;
		return -st;
	}
	start = qp->sq.prod;
	for (; wr; wr = wr->next) {
		ret = post_one_send(qp, wr);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	if (qp->sq.prod != start) {
		if (st)
			sw_qp_flush_sq_locked(qp);
		else
			sw_transport_kick(qp);
	}
	pthread_mutex_unlock(&qp->lock);
	return ret;
}

/* Contract: queue one receive work request; 0 or a positive errno. */
static int post_one_recv(struct sw_qp *qp, const struct ibv_recv_wr *wr)
{
	struct sw_recv_wqe *w;
	uint64_t total = 0;
	int i;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_recv_sge)
		return EINVAL;
	if (sw_ring_used(&qp->rq) >= qp->cap.max_recv_wr)
		return ENOMEM;
	for (i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	w = sw_ring_slot(&qp->rq, qp->rq.prod);
	w->wr_id = wr->wr_id;
	w->num_sge = (uint32_t)wr->num_sge;
	w->length = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
	if (wr->num_sge)
		memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
	qp->rq.prod++;
	return 0;
}

/* Contract: sv_ops.post_recv (ABI: 0 or a positive errno, *bad on failure). */
int sw_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sw_qp *qp = sw_qp_real(ibqp);
	uint32_t start;
	int ret = 0;

	pthread_mutex_lock(&qp->lock);
	if (qp->srq || sw_qp_state(qp) == IBV_QPS_RESET ||
	    qp->ibv.qp_base.qp_type == IBV_QPT_XRC_SEND ||
	    qp->ibv.qp_base.qp_type == IBV_QPT_XRC_RECV) {
		pthread_mutex_unlock(&qp->lock);
		*bad = wr;
		return EINVAL;
	}
	start = qp->rq.prod;
	for (; wr; wr = wr->next) {
		ret = post_one_recv(qp, wr);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	if (qp->rq.prod != start && sw_qp_state(qp) == IBV_QPS_ERR)
		sw_qp_flush_rq_locked(qp);
	pthread_mutex_unlock(&qp->lock);
	return ret;
}

/*
 * Contract: the sv_ops bind_mw slot (ABI: 0 or a positive errno, also in
 * errno): a type 1 bind, as rdma-core's rxe provider has it: a BIND_MW
 * work request with the next key (ibv_inc_rkey) posted on `qp`; once it
 * is posted the window's rkey is the new key (the application undoes
 * that if the completion fails). A type 2 window, or ZERO_BASED, EINVAL.
 */
int sw_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	struct ibv_send_wr wr, *bad;
	int ret;

	if (mw->type != IBV_MW_TYPE_1 ||
	    (bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED)) {
		errno = EINVAL;
		return EINVAL;
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = bind->bind_info;
	ret = sw_post_send(qp, &wr, &bad);
	if (ret) {
		errno = ret;
		return ret;
	}
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}
