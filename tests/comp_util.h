/* SPDX-License-Identifier: MIT */
/*
 * comp_util.h - white-box helpers for the requester/completer regression
 * tests (unit_regress_*): a QP sends towards a QP left in INIT, which
 * drops everything, and the test hands the completer the ACKs and NAKs
 * itself, under the QP's lock.
 */
#ifndef SV_TESTS_COMP_UTIL_H
#define SV_TESTS_COMP_UTIL_H

#include "harness.h"
#include "qp_util.h"
#include "sw/transport/transport_priv.h"

/* `qp` to RTS towards `dest`, with a retransmit timeout of minutes. 0 or an errno. */
static inline int cu_connect_slow(struct q_env *env, struct ibv_qp *qp, uint32_t dest)
{
	struct ibv_qp_attr a;

	if (q_bring_up(env, qp, IBV_QPS_RTR, dest))
		return -1;
	a = q_attr(env, IBV_QPS_RTS, dest);
	a.timeout = 31;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | q_required(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS));
}

/* What cu_setup() opens: the device, an MR over the test's buffer, the QP and its sink. */
struct cu_pair {
	struct ibv_mr *mr;
	struct ibv_qp *a, *sink;
	struct sw_qp *q; /* a's device QP */
};

/*
 * Open `env` (CQs of 64), register `len` bytes at `buf` for local write,
 * create two RC QPs, leave the sink in INIT and connect `a` to it with
 * cu_connect_slow(). 0, or -1 after a failed check.
 */
static inline int cu_setup(struct q_env *env, struct cu_pair *p, void *buf, size_t len)
{
	q_env_open(env, 64);
	p->mr = ibv_reg_mr(env->pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
	p->a = q_create(env, IBV_QPT_RC);
	p->sink = q_create(env, IBV_QPT_RC);
	if (!CHECK(p->mr && p->a && p->sink) ||
	    !CHECK(q_bring_up(env, p->sink, IBV_QPS_INIT, 0) == 0) ||
	    !CHECK(cu_connect_slow(env, p->a, p->sink->qp_num) == 0))
		return -1;
	p->q = sw_qp(p->a);
	return 0;
}

/* Destroy what cu_setup() made and close `env`, checking each step. */
static inline void cu_teardown(struct q_env *env, struct cu_pair *p)
{
	CHECK_RET(ibv_destroy_qp(p->a), 0);
	CHECK_RET(ibv_destroy_qp(p->sink), 0);
	CHECK_RET(ibv_dereg_mr(p->mr), 0);
	q_env_close(env);
}

/*
 * A signaled `op` (WRITE or READ) of `len` bytes from or into `buf`
 * (registered as `mr`); ibv_post_send's result.
 */
static inline int cu_post_op(struct ibv_qp *qp, struct ibv_mr *mr, void *buf, uint64_t id,
			     uint32_t len, enum ibv_wr_opcode op)
{
	struct ibv_sge sge = {(uintptr_t)buf, len, mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.rdma.remote_addr = 0x10000;
	wr.wr.rdma.rkey = 0x1234;
	return ibv_post_send(qp, &wr, &bad);
}

/* A signaled WRITE of `len` bytes from `buf` (registered as `mr`); ibv_post_send's result. */
static inline int cu_post_write(struct ibv_qp *qp, struct ibv_mr *mr, void *buf, uint64_t id,
				uint32_t len)
{
	return cu_post_op(qp, mr, buf, id, len, IBV_WR_RDMA_WRITE);
}

/* Hand the completer an ACK or NAK of `psn`, as the progress thread would (q->lock held). */
static inline void cu_aeth(struct sw_qp *q, uint32_t psn, uint8_t syndrome)
{
	struct sw_pkt p = {.opcode = SW_OP_ACK, .psn = psn, .syndrome = syndrome};
	struct sw_icrc_ctx ic = {0};
	uint8_t pkt[64];
	size_t len = sw_pkt_finish(pkt, sw_pkt_write_hdrs(pkt, &p), &ic);

	if (!CHECK(sw_pkt_parse(&p, pkt, len, &ic) == 0))
		return;
	sw_comp_handle(q, &p);
}

#endif
