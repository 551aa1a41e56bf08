/* SPDX-License-Identifier: MIT */
/*
 * qp_modify.c - ibv_modify_qp: the IBTA QP state machine for RC, UC, UD and XRC.
 *
 * A request names a current state (the QP's, or IBV_QP_CUR_STATE, which
 * must then equal it and is allowed only where the table lists it) and
 * a next state (IBV_QP_STATE, or the current one). The pair must be a
 * transition of the table below for the QP's type, the mask must hold
 * every required attribute and nothing beyond required | optional;
 * otherwise EINVAL. Then each attribute in the mask is range-checked
 * (EINVAL), and only if all pass is anything changed.
 *
 * Transitions and masks (IBTA 11.2.5 / the Linux modify-QP table);
 * RESET and ERR are reachable from every state with no attributes:
 *
 *   RESET->INIT   RC and UC req PKEY_INDEX PORT ACCESS_FLAGS; UD req PKEY_INDEX PORT QKEY
 *   INIT->INIT    the same bits, all optional
 *   INIT->RTR     RC req AV PATH_MTU DEST_QPN RQ_PSN MAX_DEST_RD_ATOMIC MIN_RNR_TIMER,
 *                    opt ALT_PATH ACCESS_FLAGS PKEY_INDEX;
 *                 UC req AV PATH_MTU DEST_QPN RQ_PSN, opt as RC;
 *                 UD opt PKEY_INDEX QKEY
 *   RTR->RTS      RC req SQ_PSN MAX_QP_RD_ATOMIC RETRY_CNT RNR_RETRY TIMEOUT,
 *                    opt CUR_STATE ALT_PATH ACCESS_FLAGS MIN_RNR_TIMER PATH_MIG_STATE;
 *                 UC req SQ_PSN, opt CUR_STATE ALT_PATH ACCESS_FLAGS PATH_MIG_STATE;
 *                 UD req SQ_PSN, opt CUR_STATE QKEY
 *   RTS->RTS      RC opt CUR_STATE ACCESS_FLAGS ALT_PATH PATH_MIG_STATE MIN_RNR_TIMER;
 *                 UC opt CUR_STATE ACCESS_FLAGS ALT_PATH PATH_MIG_STATE;
 *                 UD opt CUR_STATE QKEY
 *   RTS->SQD      opt EN_SQD_ASYNC_NOTIFY
 *   SQD->RTS      as RTS->RTS
 *   SQD->SQD      RC opt PORT AV TIMEOUT RETRY_CNT RNR_RETRY MAX_QP_RD_ATOMIC
 *                    MAX_DEST_RD_ATOMIC ALT_PATH ACCESS_FLAGS PKEY_INDEX MIN_RNR_TIMER
 *                    PATH_MIG_STATE;
 *                 UC opt AV ALT_PATH ACCESS_FLAGS PKEY_INDEX PATH_MIG_STATE;
 *                 UD opt PKEY_INDEX QKEY
 *   SQE->RTS      UD opt CUR_STATE QKEY; UC opt CUR_STATE ACCESS_FLAGS
 *                 (only the device enters SQE, and it never does for UC)
 *
 * XRC (the kernel's columns): INI (IBV_QPT_XRC_SEND) and TGT
 * (IBV_QPT_XRC_RECV) take RC's RESET->INIT and INIT->INIT bits; INIT->RTR:
 * INI as UC (req AV PATH_MTU DEST_QPN RQ_PSN), TGT as RC; RTR->RTS: INI
 * as RC's required set with UC's optional one, TGT req SQ_PSN TIMEOUT
 * with RC's optional set; RTS->RTS and SQD->RTS: INI as UC, TGT as RC;
 * SQD->SQD: PORT AV TIMEOUT ALT_PATH ACCESS_FLAGS PKEY_INDEX
 * PATH_MIG_STATE, plus RETRY_CNT RNR_RETRY MAX_QP_RD_ATOMIC for INI and
 * MAX_DEST_RD_ATOMIC MIN_RNR_TIMER for TGT; no SQE->RTS.
 *
 * Value checks: port_num 1; pkey_index 0 (one P_Key); path_mtu 256..4096
 * (the port's max_mtu); dest_qp_num < 2^24; timeout and min_rnr_timer <=
 * 31; retry_cnt and rnr_retry <= 7; max_rd_atomic <= max_qp_init_rd_atom
 * and max_dest_rd_atomic <= max_qp_rd_atom; the AV (and
 * the alternate path's) must resolve (RoCE: a GRH with an IPv4-mapped
 * GID); path_mig_state a valid enum. PSNs are taken modulo 2^24. Mask
 * bits beyond IBV_QP_DEST_QPN (IBV_QP_RATE_LIMIT included) give
 * EOPNOTSUPP, as the kernel's classic modify-QP command does for rxe.
 *
 * Access flags: neither rdma-core nor the kernel's core looks at
 * qp_access_flags; the drivers do. As rxe (the software RoCE reference),
 * the set a QP may carry is LOCAL_WRITE, the three remote bits, MW_BIND,
 * ON_DEMAND, FLUSH_GLOBAL, FLUSH_PERSISTENT and the optional range
 * (relaxed ordering); any other bit (ZERO_BASED, HUGETLB, undefined ones)
 * gives EINVAL (mlx5 would ignore it too). Only the remote bits mean
 * something to the responder; ibv_query_qp returns the value as given,
 * as rxe does.
 *
 * Effects: RESET empties both rings without completions, drops the
 * QP's unread completions from its CQs (as mlx5) and forgets the
 * attributes; ERR lets the transport go first (sw_transport_qp_error),
 * then flushes (sw_qp_error_locked); RTS->SQD stops new sends and raises
 * IBV_EVENT_SQ_DRAINED (when asked) at once if nothing is outstanding,
 * else leaves attr.sq_draining for the transport. Every other change of
 * state is shown to the transport after it happened
 * (sw_transport_qp_state; qp->lock held).
 */
#include <string.h>

#include "sw/queue/qp_priv.h"
#include "sw/wire.h"

#define M(x) IBV_QP_##x

/* What a QP's access flags may hold (rxe's set); the responder uses the remote bits. */
#define SW_QP_ACCESS                                                                               \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND |                    \
	 IBV_ACCESS_FLUSH_GLOBAL | IBV_ACCESS_FLUSH_PERSISTENT | IBV_ACCESS_OPTIONAL_RANGE)

/*
 * The attribute bits of the classic modify-QP command (up to DEST_QPN);
 * the kernel refuses the others there with EOPNOTSUPP, as it does for rxe.
 */
#define SW_QP_ATTR_KNOWN ((M(DEST_QPN) << 1) - 1)

enum {
	T_RC,
	T_UD,
	T_UC,
	T_XRC_INI,
	T_XRC_TGT,
	T_NTYPES
};

struct trans {
	bool valid[T_NTYPES];
	uint32_t req[T_NTYPES];
	uint32_t opt[T_NTYPES];
};

/* clang-format off */
/* Per type, in the order RC, UD, UC, XRC INI, XRC TGT. */
#define ALL { true, true, true, true, true }
#define UD_UC { false, true, true, false, false }

/* The attribute sets that more than one transition names, each written once. */
#define RC_INIT (M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS))
#define INIT_ATTRS { RC_INIT, M(PKEY_INDEX) | M(PORT) | M(QKEY), RC_INIT, RC_INIT, RC_INIT }
#define RC_RTS_OPT (M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) | M(PATH_MIG_STATE) | \
		    M(MIN_RNR_TIMER))
#define UC_RTS_OPT (M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) | M(PATH_MIG_STATE))
#define UD_RTS_OPT (M(CUR_STATE) | M(QKEY))
#define UD_PKEY_QKEY (M(PKEY_INDEX) | M(QKEY))
#define RTR_REQ (M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN))
#define RC_RTR_REQ (RTR_REQ | M(MAX_DEST_RD_ATOMIC) | M(MIN_RNR_TIMER))
#define RTR_OPT (M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX))
#define RC_RTS_REQ (M(SQ_PSN) | M(MAX_QP_RD_ATOMIC) | M(RETRY_CNT) | M(RNR_RETRY) | M(TIMEOUT))
#define SQD_PATH (M(PORT) | M(AV) | M(TIMEOUT) | M(ALT_PATH) | M(ACCESS_FLAGS) | \
		  M(PKEY_INDEX) | M(PATH_MIG_STATE))
#define SQD_SEND (M(RETRY_CNT) | M(RNR_RETRY) | M(MAX_QP_RD_ATOMIC))
#define SQD_RECV (M(MAX_DEST_RD_ATOMIC) | M(MIN_RNR_TIMER))

/* Every state may go to RESET and to ERR, with no attributes. */
#define TO_RESET_OR_ERR \
	[IBV_QPS_RESET] = { .valid = ALL }, \
	[IBV_QPS_ERR] = { .valid = ALL }

/* RTS->RTS and SQD->RTS: the same rule. */
#define BACK_TO_RTS { .valid = ALL, \
	.opt = { RC_RTS_OPT, UD_RTS_OPT, UC_RTS_OPT, UC_RTS_OPT, RC_RTS_OPT } }

/* [current][next] */
static const struct trans table[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] = {
		TO_RESET_OR_ERR,
		[IBV_QPS_INIT] = { .valid = ALL, .req = INIT_ATTRS },
	},
	[IBV_QPS_INIT] = {
		TO_RESET_OR_ERR,
		[IBV_QPS_INIT] = { .valid = ALL, .opt = INIT_ATTRS },
		[IBV_QPS_RTR] = {
			.valid = ALL,
			.req = { RC_RTR_REQ, 0, RTR_REQ, RTR_REQ, RC_RTR_REQ },
			.opt = { RTR_OPT, UD_PKEY_QKEY, RTR_OPT, RTR_OPT, RTR_OPT },
		},
	},
	[IBV_QPS_RTR] = {
		TO_RESET_OR_ERR,
		[IBV_QPS_RTS] = {
			.valid = ALL,
			.req = { RC_RTS_REQ, M(SQ_PSN), M(SQ_PSN), RC_RTS_REQ, M(SQ_PSN) | M(TIMEOUT) },
			.opt = { RC_RTS_OPT, UD_RTS_OPT, UC_RTS_OPT, UC_RTS_OPT, RC_RTS_OPT },
		},
	},
	[IBV_QPS_RTS] = {
		TO_RESET_OR_ERR,
		[IBV_QPS_RTS] = BACK_TO_RTS,
		[IBV_QPS_SQD] = {
			.valid = ALL,
			.opt = { M(EN_SQD_ASYNC_NOTIFY), M(EN_SQD_ASYNC_NOTIFY),
				 M(EN_SQD_ASYNC_NOTIFY), M(EN_SQD_ASYNC_NOTIFY),
				 M(EN_SQD_ASYNC_NOTIFY) },
		},
	},
	[IBV_QPS_SQD] = {
		TO_RESET_OR_ERR,
		[IBV_QPS_RTS] = BACK_TO_RTS,
		[IBV_QPS_SQD] = {
			.valid = ALL,
			.opt = { SQD_PATH | SQD_SEND | SQD_RECV,
				 UD_PKEY_QKEY,
				 M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) |
					 M(PATH_MIG_STATE),
				 SQD_PATH | SQD_SEND,
				 SQD_PATH | SQD_RECV },
		},
	},
	[IBV_QPS_SQE] = {
		TO_RESET_OR_ERR,
		[IBV_QPS_RTS] = { .valid = UD_UC,
				  .opt = { 0, UD_RTS_OPT, M(CUR_STATE) | M(ACCESS_FLAGS), 0, 0 } },
	},
	[IBV_QPS_ERR] = {
		TO_RESET_OR_ERR,
	},
};
/* clang-format on */

/* Contract: the table's column of QP type `qpt`. */
static int type_column(enum ibv_qp_type qpt)
{
	switch (qpt) {
	case IBV_QPT_UD:
		return T_UD;
	case IBV_QPT_UC:
		return T_UC;
	case IBV_QPT_XRC_SEND:
		return T_XRC_INI;
	case IBV_QPT_XRC_RECV:
		return T_XRC_TGT;
	default:
		return T_RC;
	}
}

/* Values checked and resolved, applied only when the whole request passes. */
struct modify_req {
	enum ibv_qp_state cur, next;
	struct sw_av av, alt_av;
};

/*
 * Contract: check the state pair and the mask against the table for the
 * QP's type; fill r->cur and r->next. 0 or -EINVAL.
 */
static int check_transition(const struct sw_qp *qp, const struct ibv_qp_attr *attr, int mask,
			    struct modify_req *r)
{
	int t = type_column(qp->ibv.qp_base.qp_type);
	uint32_t m = (uint32_t)mask & ~(uint32_t)IBV_QP_STATE;
	const struct trans *tr;

	r->cur = sw_qp_state(qp);
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != r->cur)
		return -EINVAL;
	r->next = (mask & IBV_QP_STATE) ? attr->qp_state : r->cur;
	if ((unsigned int)r->next > IBV_QPS_ERR)
		return -EINVAL;
	tr = &table[r->cur][r->next];
	if (!tr->valid[t])
		return -EINVAL;
	if ((m & tr->req[t]) != tr->req[t] || (m & ~(tr->req[t] | tr->opt[t])))
		return -EINVAL;
	return 0;
}

/* Contract: range-check every attribute in `mask`; resolve AVs into r. 0 or -EINVAL. */
static int check_values(struct ibv_context *ctx, const struct ibv_qp_attr *attr, int mask,
			struct modify_req *r)
{
	if ((mask & IBV_QP_PORT) && attr->port_num != 1)
		return -EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index >= SW_MAX_PKEYS)
		return -EINVAL;
	if ((mask & IBV_QP_AV) && sw_av_from_attr(ctx, &attr->ah_attr, &r->av))
		return -EINVAL;
	if (mask & IBV_QP_ALT_PATH) {
		if (attr->alt_port_num != 1 || attr->alt_pkey_index >= SW_MAX_PKEYS ||
		    attr->alt_timeout > 31 || sw_av_from_attr(ctx, &attr->alt_ah_attr, &r->alt_av))
			return -EINVAL;
	}
	if ((mask & IBV_QP_PATH_MTU) &&
	    (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096))
		return -EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && attr->dest_qp_num > SW_QPN_MASK)
		return -EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && attr->timeout > 31)
		return -EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31)
		return -EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7)
		return -EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7)
		return -EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > SW_MAX_QP_RD_ATOM)
		return -EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > SW_MAX_QP_RD_ATOM)
		return -EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) && (attr->qp_access_flags & ~(unsigned int)SW_QP_ACCESS))
		return -EINVAL;
	if ((mask & IBV_QP_PATH_MIG_STATE) && (unsigned int)attr->path_mig_state > IBV_MIG_ARMED)
		return -EINVAL;
	return 0;
}

/* Contract: store every attribute in `mask` (already checked) into qp->attr. */
static void apply_values(struct sw_qp *qp, const struct ibv_qp_attr *attr, int mask,
			 const struct modify_req *r)
{
	struct sw_qp_attr *a = &qp->attr;

	if (mask & IBV_QP_ACCESS_FLAGS)
		a->access = attr->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		a->pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		a->port_num = attr->port_num;
	if (mask & IBV_QP_QKEY)
		a->qkey = attr->qkey;
	if (mask & IBV_QP_AV) {
		a->ah_attr = attr->ah_attr;
		a->av = r->av;
	}
	if (mask & IBV_QP_ALT_PATH) {
		a->alt_ah_attr = attr->alt_ah_attr;
		a->alt_pkey_index = attr->alt_pkey_index;
		a->alt_port_num = attr->alt_port_num;
		a->alt_timeout = attr->alt_timeout;
	}
	if (mask & IBV_QP_PATH_MTU) {
		a->path_mtu = attr->path_mtu;
		a->mtu = sw_mtu_bytes(attr->path_mtu);
	}
	if (mask & IBV_QP_TIMEOUT)
		a->timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		a->retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		a->rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_RQ_PSN)
		a->rq_psn = attr->rq_psn & SW_PSN_MASK;
	if (mask & IBV_QP_SQ_PSN)
		a->sq_psn = attr->sq_psn & SW_PSN_MASK;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		a->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		a->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		a->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_DEST_QPN)
		a->dest_qp_num = attr->dest_qp_num;
	if (mask & IBV_QP_PATH_MIG_STATE)
		a->path_mig_state = attr->path_mig_state;
}

/*
 * Contract: enter RESET: both rings empty (no completions), attributes
 * back to their creation values, then the transport forgets everything
 * and the QP's unread completions leave its CQs.
 */
static void enter_reset(struct sw_qp *qp, enum ibv_qp_state old)
{
	struct sw_qp_attr *a = &qp->attr;
	enum ibv_mtu mtu = a->path_mtu;
	bool ud = qp->ibv.qp_base.qp_type == IBV_QPT_UD;

	qp->sq.prod = qp->sq.cons = 0;
	qp->rq.prod = qp->rq.cons = 0;
	memset(a, 0, sizeof(*a));
	if (ud) {
		a->path_mtu = mtu;
		a->mtu = sw_mtu_bytes(mtu);
	}
	qp->ibv.qp_base.state = IBV_QPS_RESET;
	sw_transport_qp_state(qp, old);
	sw_cq_clean(qp->rcq, qp->qpn);
	if (qp->scq != qp->rcq)
		sw_cq_clean(qp->scq, qp->qpn);
}

/*
 * Contract: enter SQD from RTS: new sends wait; SQ_DRAINED (if asked) is
 * raised by the transport once no started send WQE is outstanding: at
 * once if none is (posted but unstarted WQEs wait for RTS and do not
 * count), else when the last of them is retired (attr.sq_draining).
 */
static void enter_sqd(struct sw_qp *qp, const struct ibv_qp_attr *attr, int mask,
		      enum ibv_qp_state old)
{
	qp->attr.en_sqd_async_notify =
		(mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && attr->en_sqd_async_notify;
	qp->attr.sq_draining = 1;
	qp->ibv.qp_base.state = IBV_QPS_SQD;
	sw_transport_qp_state(qp, old);
}

/* Contract: make the checked transition r->cur -> r->next happen. */
static void change_state(struct sw_qp *qp, const struct ibv_qp_attr *attr, int mask,
			 const struct modify_req *r)
{
	if (r->next == r->cur)
		return;
	switch (r->next) {
	case IBV_QPS_RESET:
		enter_reset(qp, r->cur);
		break;
	case IBV_QPS_ERR:
		sw_transport_qp_error(qp); /* the transport lets go first */
		sw_qp_error_locked(qp);
		break;
	case IBV_QPS_SQD:
		enter_sqd(qp, attr, mask, r->cur);
		break;
	default:
		qp->attr.sq_draining = 0;
		qp->ibv.qp_base.state = r->next;
		sw_transport_qp_state(qp, r->cur);
		break;
	}
}

/*
 * Contract: sv_ops.modify_qp. -EOPNOTSUPP for mask bits beyond DEST_QPN,
 * -EINVAL for a missing attr, a transition or mask the table refuses, or
 * a value out of range; nothing changes on failure.
 */
int sw_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct sw_qp *qp = sw_qp_real(ibqp);
	struct modify_req r;
	int ret;

	if ((uint32_t)mask & ~(uint32_t)SW_QP_ATTR_KNOWN)
		return -EOPNOTSUPP;
	if (!attr)
		return -EINVAL;
	memset(&r, 0, sizeof(r));
	if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_ERR)
		sw_transport_settle(qp); /* what arrived before the modify goes first */
	pthread_mutex_lock(&qp->lock);
	ret = check_transition(qp, attr, mask, &r);
	if (!ret)
		ret = check_values(ibqp->context, attr, mask, &r);
	if (!ret) {
		apply_values(qp, attr, mask, &r);
		change_state(qp, attr, mask, &r);
		sw_transport_qp_dir(qp); /* what peers on this host may write into */
	}
	pthread_mutex_unlock(&qp->lock);
	return ret;
}
