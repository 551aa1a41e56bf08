/* SPDX-License-Identifier: MIT */
/*
 * qp_priv.h - helpers the QP files share (queue/qp.c, qp_flush.c, post.c,
 * qp_ex.c and qp_modify.c); not for the transport.
 */
#ifndef SV_SW_QUEUE_QP_PRIV_H
#define SV_SW_QUEUE_QP_PRIV_H

#include "sw/queue.h"

/*
 * qp_table.c: the QPN table (see there). A QP lives in slot
 * qpn % SW_QP_TABLE_SLOTS; at most half the slots are ever taken.
 */
enum {
	SW_QP_TABLE_SLOTS = 2 * SW_MAX_QP, /* power of two */
};

_Static_assert((SW_QP_TABLE_SLOTS & (SW_QP_TABLE_SLOTS - 1)) == 0, "slots: a power of two");

struct sw_qp_table {
	pthread_rwlock_t lock;
	struct sw_qp **slot; /* SW_QP_TABLE_SLOTS entries, NULL when free */
	uint32_t next; /* next QPN candidate */
	uint32_t count; /* live QPs */
};

/* The QP's current state (ibv_qp.state is ours to keep). */
static inline enum ibv_qp_state sw_qp_state(const struct sw_qp *qp)
{
	return qp->ibv.qp_base.state;
}

/* The send WQE at free-running index `idx`. */
static inline struct sw_send_wqe *sw_sq_wqe(const struct sw_qp *qp, uint32_t idx)
{
	return sw_ring_slot(&qp->sq, idx);
}

/* Path MTU enum (1..5) to bytes. */
static inline uint32_t sw_mtu_bytes(enum ibv_mtu mtu)
{
	return 128u << mtu;
}

/* post.c: true if `op` is a send opcode the QP's type supports. */
bool sw_qp_opcode_ok(const struct sw_qp *qp, uint32_t op);

/* post.c: true if `op` may carry inline data (SEND and RDMA WRITE, with or without imm). */
bool sw_opcode_inline_ok(uint32_t op);

/*
 * post.c: whether send WQEs may be posted in the QP's state: 0 to post
 * and run (RTS, SQD), 1 to post and flush at once (ERR, SQE), -EINVAL
 * before RTS (RESET, INIT, RTR), as rxe does.
 */
int sw_qp_send_state(const struct sw_qp *qp);

/*
 * post.c: the BIND_MW part of send WQE `w`: window `mw` (its rkey now),
 * the new rkey and the bind's MR, range and access.
 */
void sw_send_wqe_bind(struct sw_send_wqe *w, const struct ibv_mw *mw, uint32_t rkey,
		      const struct ibv_mw_bind_info *info);

/*
 * post.c: start send WQE `w`: every field zero except wr_id, opcode and
 * send_flags (`flags` without INLINE, plus SIGNALED under sq_sig_all).
 * Both post_send and the ibv_wr_* API build WQEs through it.
 */
void sw_send_wqe_start(const struct sw_qp *qp, struct sw_send_wqe *w, uint64_t wr_id,
		       uint32_t opcode, unsigned int flags);

/*
 * post.c: the checks a complete send WQE must pass, whichever API built
 * it: a UD message fits the path MTU; an atomic has exactly one SGE of 8
 * bytes and an 8-byte aligned remote address. 0 or -EINVAL.
 */
int sw_send_wqe_check(const struct sw_qp *qp, const struct sw_send_wqe *w);

/* qp_flush.c: flush every send / receive WQE of the rings (FLUSH_ERR). qp->lock held. */
void sw_qp_flush_sq_locked(struct sw_qp *qp);
void sw_qp_flush_rq_locked(struct sw_qp *qp);

/* qp_ex.c: point the ibv_qp_ex work-request ops at the device's. */
void sw_qp_ex_install(struct sw_qp *qp);

#endif
