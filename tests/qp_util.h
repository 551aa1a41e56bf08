/* SPDX-License-Identifier: MIT */
/*
 * qp_util.h - header-only helpers of the QP tests (api_qp*, api_post,
 * unit_qp*): a device context with a PD and CQs, QP creation, and the
 * modify_qp calls of each transition with exactly the required mask.
 * Include harness.h first.
 */
#ifndef SV_TESTS_QP_UTIL_H
#define SV_TESTS_QP_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define Q_ARRAY(a) (sizeof(a) / sizeof((a)[0]))

struct q_env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	union ibv_gid gid; /* port 1, index 0 */
};

/* Opens the first device, a PD, and a send and a receive CQ; bails out on failure. */
static inline void q_env_open(struct q_env *e, int cqe)
{
	memset(e, 0, sizeof(*e));
	t_open_first(&e->ctx);
	e->pd = ibv_alloc_pd(e->ctx);
	e->scq = ibv_create_cq(e->ctx, cqe, NULL, NULL, 0);
	e->rcq = ibv_create_cq(e->ctx, cqe, NULL, NULL, 0);
	if (!e->pd || !e->scq || !e->rcq || ibv_query_gid(e->ctx, 1, 0, &e->gid)) {
		printf("Bail out! PD, CQs or GID: %s\n", t_errname(errno));
		exit(1);
	}
}

static inline void q_env_close(struct q_env *e)
{
	CHECK_RET(ibv_destroy_cq(e->scq), 0);
	CHECK_RET(ibv_destroy_cq(e->rcq), 0);
	CHECK_RET(ibv_dealloc_pd(e->pd), 0);
	CHECK_RET(ibv_close_device(e->ctx), 0);
}

/* Creation attributes of a small QP of `type` on the environment. */
static inline struct ibv_qp_init_attr q_init_attr(const struct q_env *e, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = e->scq;
	a.recv_cq = e->rcq;
	a.qp_type = type;
	a.cap.max_send_wr = 8;
	a.cap.max_recv_wr = 8;
	a.cap.max_send_sge = 2;
	a.cap.max_recv_sge = 2;
	a.cap.max_inline_data = 64;
	return a;
}

/* A QP of `type` with q_init_attr(); NULL on failure. */
static inline struct ibv_qp *q_create(const struct q_env *e, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a = q_init_attr(e, type);

	return ibv_create_qp(e->pd, &a);
}

/* The QP's state as ibv_query_qp reports it, or -1. */
static inline int q_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &i))
		return -1;
	return (int)a.qp_state;
}

/*
 * The required mask of a transition, without IBV_QP_STATE. XRC INI sends
 * as RC and is connected as UC; XRC TGT is connected as RC and needs
 * only SQ_PSN and TIMEOUT for RTS.
 */
static inline int q_required(enum ibv_qp_type type, enum ibv_qp_state from, enum ibv_qp_state to)
{
	bool ini = type == IBV_QPT_XRC_SEND, tgt = type == IBV_QPT_XRC_RECV;
	bool rc = type == IBV_QPT_RC, uc = type == IBV_QPT_UC;
	int path = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;

	if (from == IBV_QPS_RESET && to == IBV_QPS_INIT)
		return IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		       (rc || uc || ini || tgt ? IBV_QP_ACCESS_FLAGS : IBV_QP_QKEY);
	if (from == IBV_QPS_INIT && to == IBV_QPS_RTR)
		return rc || tgt ? path | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER :
		       uc || ini ? path :
				   0;
	if (from == IBV_QPS_RTR && to == IBV_QPS_RTS)
		return rc || ini ? IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT |
					   IBV_QP_RNR_RETRY | IBV_QP_TIMEOUT :
		       tgt ? IBV_QP_SQ_PSN | IBV_QP_TIMEOUT :
			     IBV_QP_SQ_PSN;
	return 0;
}

/* Valid values for every attribute a transition may carry; dest is the peer's QPN. */
static inline struct ibv_qp_attr q_attr(const struct q_env *e, enum ibv_qp_state to,
					uint32_t dest_qpn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = to;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	a.qkey = 0x11111111;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = 0x123456;
	a.sq_psn = 0x654321;
	a.max_dest_rd_atomic = 4;
	a.max_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = e->gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 64;
	a.alt_ah_attr = a.ah_attr;
	a.alt_port_num = 1;
	a.alt_timeout = 14;
	a.path_mig_state = IBV_MIG_MIGRATED;
	a.en_sqd_async_notify = 0;
	return a;
}

/* Modify `qp` from `from` to `to` with exactly the required mask; the verb's result. */
static inline int q_step(const struct q_env *e, struct ibv_qp *qp, enum ibv_qp_state from,
			 enum ibv_qp_state to, uint32_t dest_qpn)
{
	struct ibv_qp_attr a = q_attr(e, to, dest_qpn);

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | q_required(qp->qp_type, from, to));
}

/* Bring a RESET QP to `to` (INIT, RTR or RTS) along the main path; 0 or the first error. */
static inline int q_bring_up(const struct q_env *e, struct ibv_qp *qp, enum ibv_qp_state to,
			     uint32_t dest_qpn)
{
	static const enum ibv_qp_state path[] = {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR,
						 IBV_QPS_RTS};
	unsigned int i;
	int ret;

	for (i = 1; i < sizeof(path) / sizeof(path[0]) && path[i - 1] != to; i++) {
		ret = q_step(e, qp, path[i - 1], path[i], dest_qpn);
		if (ret)
			return ret;
	}
	return 0;
}

/* Poll up to `max` completions of `cq` into `wc`, waiting up to about 2 s for `want`. */
static inline int q_poll(struct ibv_cq *cq, struct ibv_wc *wc, int max, int want)
{
	int n = 0, i;

	for (i = 0; i < 2000 && n < want; i++) {
		int r = ibv_poll_cq(cq, max - n, wc + n);

		if (r < 0)
			return r;
		n += r;
		if (n < want) {
			struct timespec ts = {0, 1000 * 1000};

			nanosleep(&ts, NULL);
		}
	}
	return n;
}

#endif
