/* SPDX-License-Identifier: MIT */
/*
 * qp_ex.c - the ibv_qp_ex "new post send" API of the software device.
 *
 * ibv_wr_start() takes qp->lock and opens a session; each builder starts
 * a WQE in the next free send slot (beyond sq.prod, so the transport does
 * not see it yet) from qp->ibv.wr_id and wr_flags, and the setters fill
 * it in. ibv_wr_complete() publishes every WQE of the session at once by
 * moving sq.prod, kicks the transport and unlocks; ibv_wr_abort() drops
 * them and unlocks. WQEs are built with the same helpers and pass the
 * same checks as with ibv_post_send (post.c), so both APIs queue
 * identical WQEs.
 *
 * The calls return nothing, so the first error is latched in qp->wr_err
 * (a positive errno) and returned by ibv_wr_complete(), which then posts
 * nothing of the session ("the entire posting will be aborted"):
 *   builder for an opcode the QP type lacks                EINVAL
 *   builder of an operation the device lacks (send_tso)    EOPNOTSUPP
 *   bind_mw without a window or bind information           EINVAL
 *   send queue full                                        ENOMEM
 *   setter without a WQE, set_ud_addr on a non-UD QP or
 *   without an AH, set_xrc_srqn on a QP other than XRC
 *   INI, an SGE list beyond max_send_sge, more
 *   than 2^31 bytes, inline data beyond max_inline_data
 *   or on an opcode other than SEND / RDMA WRITE           EINVAL
 *   flush with a type or level the verbs do not define,
 *   or longer than 2^31                                    EINVAL
 *   on completion of each WQE: UD without set_ud_addr, a
 *   UD message beyond the path MTU, an atomic without
 *   exactly one 8-byte SGE or with a misaligned address    EINVAL
 *   QP state before RTS at ibv_wr_complete()               EINVAL
 * In ERR (and SQE) the session's WQEs are posted and flushed at once,
 * as with ibv_post_send. A builder for an operation the QP supports but
 * that was not named in send_ops_flags is accepted, as rxe does.
 */
#include <string.h>

#include "sw/queue/qp_priv.h"
#include "sw/wire.h"

enum {
	WR_SET_DATA = 1 << 0, /* an SGE or inline setter ran */
	WR_SET_ADDR = 1 << 1, /* set_ud_addr ran */
};

static inline struct sw_qp *qpx_to_qp(struct ibv_qp_ex *qpx)
{
	return (struct sw_qp *)qpx;
}

/* Contract: remember `err` (positive errno) unless an error is already latched. */
static void latch(struct sw_qp *qp, int err)
{
	if (!qp->wr_err)
		qp->wr_err = err;
}

/* Contract: run the completion checks on the WQE being built, and close it. */
static void finish_cur(struct sw_qp *qp)
{
	struct sw_send_wqe *w = qp->wr_cur;

	if (!w)
		return;
	qp->wr_cur = NULL;
	if (qp->ibv.qp_base.qp_type == IBV_QPT_UD && !(qp->wr_cur_set & WR_SET_ADDR))
		latch(qp, EINVAL);
	else if (sw_send_wqe_check(qp, w))
		latch(qp, EINVAL);
}

/* Contract: start a WQE for `op` in the next slot; NULL (error latched) if none. */
static struct sw_send_wqe *begin(struct ibv_qp_ex *qpx, uint32_t op)
{
	struct sw_qp *qp = qpx_to_qp(qpx);
	struct sw_send_wqe *w;

	finish_cur(qp);
	if (qp->wr_err)
		return NULL;
	if (!sw_qp_opcode_ok(qp, op)) {
		latch(qp, EINVAL);
		return NULL;
	}
	if (qp->wr_prod - qp->sq.cons >= qp->cap.max_send_wr) {
		latch(qp, ENOMEM);
		return NULL;
	}
	w = sw_sq_wqe(qp, qp->wr_prod++);
	sw_send_wqe_start(qp, w, qpx->wr_id, op, qpx->wr_flags);
	qp->wr_cur = w;
	qp->wr_cur_set = 0;
	return w;
}

/* Contract: the WQE a setter applies to; NULL (EINVAL latched unless already failed). */
static struct sw_send_wqe *cur(struct sw_qp *qp)
{
	if (!qp->wr_cur)
		latch(qp, EINVAL);
	return qp->wr_cur;
}

static void wr_rdma(struct ibv_qp_ex *qpx, uint32_t op, uint32_t rkey, uint64_t addr, __be32 imm)
{
	struct sw_send_wqe *w = begin(qpx, op);

	if (!w)
		return;
	w->wr.rdma.remote_addr = addr;
	w->wr.rdma.rkey = rkey;
	w->imm_data = imm;
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr)
{
	wr_rdma(qpx, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, __be32 imm)
{
	wr_rdma(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr)
{
	wr_rdma(qpx, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void wr_send(struct ibv_qp_ex *qpx)
{
	begin(qpx, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	struct sw_send_wqe *w = begin(qpx, IBV_WR_SEND_WITH_IMM);

	if (w)
		w->imm_data = imm;
}

static void wr_atomic(struct ibv_qp_ex *qpx, uint32_t op, uint32_t rkey, uint64_t addr,
		      uint64_t compare_add, uint64_t swap)
{
	struct sw_send_wqe *w = begin(qpx, op);

	if (!w)
		return;
	w->wr.atomic.remote_addr = addr;
	w->wr.atomic.compare_add = compare_add;
	w->wr.atomic.swap = swap;
	w->wr.atomic.rkey = rkey;
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t compare,
			      uint64_t swap)
{
	wr_atomic(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, compare, swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t add)
{
	wr_atomic(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

/* Contract: an operation the device does not have: latch EOPNOTSUPP. */
static void unsupported(struct ibv_qp_ex *qpx)
{
	struct sw_qp *qp = qpx_to_qp(qpx);

	finish_cur(qp);
	latch(qp, EOPNOTSUPP);
}

static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct sw_send_wqe *w = begin(qpx, IBV_WR_BIND_MW);

	if (w && (!mw || !info))
		latch(qpx_to_qp(qpx), EINVAL);
	else if (w)
		sw_send_wqe_bind(w, mw, rkey, info);
}

/* Contract: a WQE for `op` (LOCAL_INV, SEND_WITH_INV) naming `rkey` to invalidate. */
static void wr_inv(struct ibv_qp_ex *qpx, uint32_t op, uint32_t rkey)
{
	struct sw_send_wqe *w = begin(qpx, op);

	if (w)
		w->imm_data = htobe32(rkey);
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t rkey)
{
	wr_inv(qpx, IBV_WR_LOCAL_INV, rkey);
}

static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t rkey)
{
	wr_inv(qpx, IBV_WR_SEND_WITH_INV, rkey);
}

static void wr_send_tso(struct ibv_qp_ex *qpx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	unsupported(qpx);
}

/*
 * Contract: an RDMA ATOMIC WRITE of the 8 bytes at `atomic_wr` (copied
 * now, in memory order) to `addr`; RC only (EINVAL latched otherwise).
 */
static void wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr,
			    const void *atomic_wr)
{
	struct sw_send_wqe *w = begin(qpx, IBV_WR_ATOMIC_WRITE);

	if (!w)
		return;
	w->wr.atomic.remote_addr = addr;
	w->wr.atomic.rkey = rkey;
	memcpy(&w->wr.atomic.swap, atomic_wr, sizeof(w->wr.atomic.swap));
	w->length = sizeof(w->wr.atomic.swap);
}

/*
 * Contract: an RDMA FLUSH of [addr, addr + len) under `rkey` (level
 * IBV_FLUSH_RANGE) or of the whole MR `rkey` names (IBV_FLUSH_MR), with
 * placement `type` (IBV_FLUSH_GLOBAL and/or IBV_FLUSH_PERSISTENT). RC
 * only; a type outside those bits or none, another level, or a length
 * beyond 2^31: EINVAL latched. The length and FETH ride in the WQE's
 * atomic fields; the WQE carries no payload.
 */
static void wr_flush(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, size_t len, uint8_t type,
		     uint8_t level)
{
	struct sw_send_wqe *w = begin(qpx, IBV_WR_FLUSH);

	if (!w)
		return;
	if (!type || (type & ~(IBV_FLUSH_GLOBAL | IBV_FLUSH_PERSISTENT)) ||
	    (level != IBV_FLUSH_RANGE && level != IBV_FLUSH_MR) || len > SW_MAX_MSG_SZ) {
		latch(qpx_to_qp(qpx), EINVAL);
		return;
	}
	w->wr.atomic.remote_addr = addr;
	w->wr.atomic.rkey = rkey;
	w->wr.atomic.compare_add = len;
	w->wr.atomic.swap = (uint64_t)type | (uint64_t)level << SW_FETH_SEL_SHIFT;
}

/* Contract: the remote XRC SRQ of the WQE being built; EINVAL on a QP that is not XRC INI. */
static void wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t srqn)
{
	struct sw_qp *qp = qpx_to_qp(qpx);
	struct sw_send_wqe *w = cur(qp);

	if (!w)
		return;
	if (qp->ibv.qp_base.qp_type != IBV_QPT_XRC_SEND) {
		latch(qp, EINVAL);
		return;
	}
	w->xrc_srqn = srqn & SW_QPN_MASK;
}

static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t remote_qpn,
			   uint32_t remote_qkey)
{
	struct sw_qp *qp = qpx_to_qp(qpx);
	struct sw_send_wqe *w = cur(qp);

	if (!w)
		return;
	if (qp->ibv.qp_base.qp_type != IBV_QPT_UD || !ah) {
		latch(qp, EINVAL);
		return;
	}
	w->wr.ud.av = sw_ah(ah)->av;
	w->wr.ud.remote_qpn = remote_qpn & SW_QPN_MASK;
	w->wr.ud.remote_qkey = remote_qkey;
	qp->wr_cur_set |= WR_SET_ADDR;
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge, const struct ibv_sge *sg)
{
	struct sw_qp *qp = qpx_to_qp(qpx);
	struct sw_send_wqe *w = cur(qp);
	uint64_t total = 0;
	size_t i;

	if (!w)
		return;
	if (num_sge > qp->cap.max_send_sge) {
		latch(qp, EINVAL);
		return;
	}
	for (i = 0; i < num_sge; i++)
		total += sg[i].length;
	if (total > SW_MAX_MSG_SZ) {
		latch(qp, EINVAL);
		return;
	}
	if (num_sge)
		memcpy(w->data, sg, num_sge * sizeof(*sg));
	w->num_sge = (uint32_t)num_sge;
	w->length = (uint32_t)total;
	w->send_flags &= ~(unsigned int)IBV_SEND_INLINE;
	qp->wr_cur_set |= WR_SET_DATA;
}

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = {.addr = addr, .length = length, .lkey = lkey};

	wr_set_sge_list(qpx, 1, &sge);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
				    const struct ibv_data_buf *buf)
{
	struct sw_qp *qp = qpx_to_qp(qpx);
	struct sw_send_wqe *w = cur(qp);
	uint64_t total = 0;
	uint8_t *dst;
	size_t i;

	if (!w)
		return;
	for (i = 0; i < num_buf; i++)
		total += buf[i].length;
	if (!sw_opcode_inline_ok(w->opcode) || total > qp->cap.max_inline_data) {
		latch(qp, EINVAL);
		return;
	}
	dst = w->data;
	for (i = 0; i < num_buf; i++) {
		if (buf[i].length)
			memcpy(dst, buf[i].addr, buf[i].length);
		dst += buf[i].length;
	}
	w->num_sge = 0;
	w->length = (uint32_t)total;
	w->send_flags |= IBV_SEND_INLINE;
	qp->wr_cur_set |= WR_SET_DATA;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length)
{
	struct ibv_data_buf buf = {.addr = addr, .length = length};

	wr_set_inline_data_list(qpx, 1, &buf);
}

/* Contract: ibv_wr_start: lock the QP and open an empty session. */
static void wr_start(struct ibv_qp_ex *qpx)
{
	struct sw_qp *qp = qpx_to_qp(qpx);

	pthread_mutex_lock(&qp->lock);
	qp->wr_prod = qp->sq.prod;
	qp->wr_cur = NULL;
	qp->wr_cur_set = 0;
	qp->wr_err = 0;
}

/* Contract: close the session and unlock. */
static void end_session(struct sw_qp *qp)
{
	qp->wr_cur = NULL;
	qp->wr_prod = qp->sq.prod;
	qp->wr_err = 0;
	pthread_mutex_unlock(&qp->lock);
}

/*
 * Contract: ibv_wr_complete: post the session's WQEs unless an error was
 * latched or the state forbids posting; 0 or the positive errno.
 */
static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct sw_qp *qp = qpx_to_qp(qpx);
	int ret, st = 0;

	finish_cur(qp);
	ret = qp->wr_err;
	if (!ret) {
		st = sw_qp_send_state(qp);
		if (st < 0)
			ret = -st;
	}
	if (!ret && qp->wr_prod != qp->sq.prod) {
		qp->sq.prod = qp->wr_prod;
		if (st)
			sw_qp_flush_sq_locked(qp);
		else
			sw_transport_kick(qp);
	}
	end_session(qp);
	return ret;
}

/* Contract: ibv_wr_abort: drop the session's WQEs and unlock. */
static void wr_abort(struct ibv_qp_ex *qpx)
{
	end_session(qpx_to_qp(qpx));
}

/* Contract: see qp_priv.h. Every slot is set; none is NULL. */
void sw_qp_ex_install(struct sw_qp *qp)
{
	struct ibv_qp_ex *x = &qp->ibv;

	x->comp_mask = 0;
	x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	x->wr_bind_mw = wr_bind_mw;
	x->wr_local_inv = wr_local_inv;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_send_inv = wr_send_inv;
	x->wr_send_tso = wr_send_tso;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	x->wr_atomic_write = wr_atomic_write;
	x->wr_flush = wr_flush;
}
