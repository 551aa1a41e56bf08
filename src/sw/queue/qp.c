/* SPDX-License-Identifier: MIT */
/*
 * qp.c - queue pairs of the software device: create, destroy, query,
 * references and async events.
 *
 * RC, UC and UD QPs exist. A QP owns a send ring and, without an SRQ, a
 * receive ring; both come from sw_ring_alloc() with the QP's PD as given,
 * so a QP on a CC parent domain keeps its rings in shared memory and a
 * QP on anything else is refused on a bounce device (EOPNOTSUPP).
 *
 * Granted capacities (written back into the caller's attr->cap):
 *   max_send_wr / max_recv_wr   rounded up to a power of two (the ring's
 *                               size); 0 stays 0 (a QP that never sends
 *                               or receives; rxe and mlx5 allow it too)
 *   max_send_sge, max_inline    both grow to fill the WQE's data area,
 *                               max(16 * sge, inline) rounded up to 16
 *                               bytes, as rxe does
 *   max_recv_sge                exact
 * With an SRQ the receive capacities are ignored and reported as 0.
 *
 * References: the send and receive CQs and the SRQ count the QP in their
 * usecnt (their destroy gives EBUSY); the protection domain proper counts
 * it, and so does a parent domain the QP was created on (docs/seed-apis.md
 * 1.7). The QP itself is refcounted: 1 while it exists plus one per
 * transport lookup in progress; the last sw_qp_put() (qp_table.c) frees
 * it.
 */
#include <stdlib.h>
#include <string.h>

#include "sw/queue/qp_priv.h"

#define SW_QP_COMP_MASK                                                                            \
	(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |             \
	 IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)

#define SW_UD_SEND_OPS ((uint64_t)IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)
#define SW_UC_SEND_OPS                                                                             \
	(SW_UD_SEND_OPS | IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
#define SW_RC_SEND_OPS                                                                             \
	(SW_UC_SEND_OPS | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |           \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | \
	 IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_FLUSH)

_Static_assert(offsetof(struct sw_send_wqe, data) % sizeof(uint64_t) == 0,
	       "send WQE data must be aligned for struct ibv_sge");
_Static_assert(sizeof(struct sw_send_wqe) % sizeof(uint64_t) == 0,
	       "send WQE slots keep 8-byte alignment");
_Static_assert(offsetof(struct sw_qp, ibv) == 0, "sw_qp starts with its ibv_qp_ex");

/* Contract: see queue.h. */
int sw_qp_event(struct sw_qp *qp, enum ibv_event_type type)
{
	struct ibv_async_event ev;

	if (qp->creator_gone)
		return 0; /* an XRC TGT QP's events go to its creator's handle only */
	memset(&ev, 0, sizeof(ev));
	ev.event_type = type;
	ev.element.qp = &qp->ibv.qp_base;
	return sv_async_post(qp->ibv.qp_base.context, &ev);
}

/* Contract: the send operations a QP of `type` may be created with (XRC TGT: none). */
static uint64_t supported_send_ops(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_UD:
		return SW_UD_SEND_OPS;
	case IBV_QPT_UC:
		return SW_UC_SEND_OPS;
	case IBV_QPT_XRC_RECV:
		return 0;
	default:
		return SW_RC_SEND_OPS;
	}
}

/* Contract: true for the QP types the device creates. */
static bool type_supported(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_UD || t == IBV_QPT_XRC_SEND ||
	       t == IBV_QPT_XRC_RECV;
}

/*
 * Contract: the objects of a create request, as rdma-core and the kernel
 * take them: an XRC TGT QP needs only an XRC domain handle
 * (IBV_QP_INIT_ATTR_XRCD) of this context, and its PD, CQs, SRQ and capacities are ignored; every
 * other type needs a PD and a send CQ of this context; an XRC INI QP
 * ignores the receive CQ, the SRQ and the receive capacities; the others
 * need a receive CQ, and an SRQ they name must be a basic SRQ of this
 * context. 0 or -EINVAL.
 */
static int check_objects(struct ibv_context *ctx, const struct ibv_qp_init_attr_ex *attr)
{
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd ||
		    attr->xrcd->context != ctx)
			return -EINVAL;
		return 0;
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd || attr->pd->context != ctx)
		return -EINVAL;
	if (!attr->send_cq || attr->send_cq->context != ctx)
		return -EINVAL;
	if (attr->qp_type == IBV_QPT_XRC_SEND)
		return 0;
	if (!attr->recv_cq || attr->recv_cq->context != ctx)
		return -EINVAL;
	if (attr->srq && (attr->srq->context != ctx || sw_srq(attr->srq)->xrcd))
		return -EINVAL;
	return 0;
}

/* Contract: true when the QP of a create request has a receive queue of its own. */
static bool own_rq(const struct ibv_qp_init_attr_ex *attr)
{
	return !attr->srq && attr->qp_type != IBV_QPT_XRC_SEND && attr->qp_type != IBV_QPT_XRC_RECV;
}

/*
 * Contract: check a create request in rdma-core's order: unsupported
 * comp_mask bits, create flags, QP types and send operations ->
 * EOPNOTSUPP; missing objects or objects of another context
 * (check_objects) or capacities beyond the device's -> EINVAL. 0 or
 * -errno.
 */
static int check_create(struct ibv_context *ctx, const struct ibv_qp_init_attr_ex *attr)
{
	const struct ibv_qp_cap *cap;
	int ret;

	if (!attr)
		return -EINVAL;
	if (attr->comp_mask & ~(uint32_t)SW_QP_COMP_MASK)
		return -EOPNOTSUPP;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)
		return -EOPNOTSUPP;
	if (!type_supported(attr->qp_type))
		return -EOPNOTSUPP;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (attr->send_ops_flags & ~supported_send_ops(attr->qp_type)))
		return -EOPNOTSUPP;
	ret = check_objects(ctx, attr);
	if (ret || attr->qp_type == IBV_QPT_XRC_RECV)
		return ret;
	cap = &attr->cap;
	if (cap->max_send_wr > SW_MAX_QP_WR || cap->max_send_sge > SW_MAX_SGE ||
	    cap->max_inline_data > SW_MAX_INLINE)
		return -EINVAL;
	if (own_rq(attr) && (cap->max_recv_wr > SW_MAX_QP_WR || cap->max_recv_sge > SW_MAX_SGE))
		return -EINVAL;
	return 0;
}

/* Contract: bytes of send-WQE data area for the requested SGEs and inline data. */
static uint32_t send_data_area(const struct ibv_qp_cap *cap)
{
	uint32_t sge = cap->max_send_sge * (uint32_t)sizeof(struct ibv_sge);
	uint32_t area = sge > cap->max_inline_data ? sge : cap->max_inline_data;

	return (area + 15) & ~15u;
}

/*
 * Contract: allocate the rings of `qp` (the send ring always, the receive
 * ring without an SRQ) and fill qp->cap with what was granted. On failure
 * nothing stays allocated. 0 or -errno (EOPNOTSUPP on a bounce device
 * without a CC parent domain).
 */
static int alloc_rings(struct sw_qp *qp, struct ibv_context *ctx,
		       const struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp_cap xrc_cap;
	const struct ibv_qp_cap *want = &attr->cap;
	uint32_t area;
	int ret;

	if (!own_rq(attr) && !attr->srq) {
		/* XRC: INI has no receive side, TGT no queue at all */
		xrc_cap = attr->qp_type == IBV_QPT_XRC_SEND ? attr->cap : (struct ibv_qp_cap){0};
		xrc_cap.max_recv_wr = 0;
		xrc_cap.max_recv_sge = 0;
		want = &xrc_cap;
	}
	area = send_data_area(want);

	ret = sw_ring_alloc(&qp->sq, ctx, qp->pd, want->max_send_wr ? want->max_send_wr : 1,
			    (uint32_t)sizeof(struct sw_send_wqe) + area);
	if (ret)
		return ret;
	qp->cap.max_send_wr = want->max_send_wr ? qp->sq.nslots : 0;
	qp->cap.max_send_sge = area / (uint32_t)sizeof(struct ibv_sge);
	if (qp->cap.max_send_sge > SW_MAX_SGE)
		qp->cap.max_send_sge = SW_MAX_SGE;
	qp->cap.max_inline_data = area > SW_MAX_INLINE ? SW_MAX_INLINE : area;
	if (qp->srq) {
		/* the room a WQE taken from the SRQ needs (see queue.h) */
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = qp->srq->max_sge;
		return 0;
	}
	ret = sw_ring_alloc(&qp->rq, ctx, qp->pd, want->max_recv_wr ? want->max_recv_wr : 1,
			    sw_recv_wqe_size(want->max_recv_sge));
	if (ret) {
		sw_ring_free(&qp->sq);
		return ret;
	}
	qp->cap.max_recv_wr = want->max_recv_wr ? qp->rq.nslots : 0;
	qp->cap.max_recv_sge = want->max_recv_sge;
	return 0;
}

/* Contract: the capacities as the API reports them (0 receive caps with an SRQ). */
static void report_caps(const struct sw_qp *qp, struct ibv_qp_cap *cap)
{
	*cap = qp->cap;
	if (qp->srq) {
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
	}
}

/*
 * Contract: add (+1) or drop (-1) the QP's references on its PD, CQs and
 * SRQ, or on its XRC domain handle (TGT).
 */
static void qp_refs(struct sw_qp *qp, int delta)
{
	if (qp->xrcd)
		atomic_fetch_add(&qp->xrcd->usecnt, delta);
	if (qp->pd) {
		atomic_fetch_add(&sw_pd_base(&qp->pd->ibv)->usecnt, delta);
		if (qp->pd->is_parent)
			atomic_fetch_add(&qp->pd->usecnt, delta);
	}
	if (qp->scq)
		atomic_fetch_add(&qp->scq->usecnt, delta);
	if (qp->rcq)
		atomic_fetch_add(&qp->rcq->usecnt, delta);
	if (qp->srq)
		atomic_fetch_add(&qp->srq->usecnt, delta);
}

/* Contract: fill the public struct ibv_qp of a new QP (qp_num comes later). */
static void init_ibv(struct sw_qp *qp, struct ibv_context *ctx,
		     const struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp *ibqp = &qp->ibv.qp_base;

	bool tgt = attr->qp_type == IBV_QPT_XRC_RECV, ini = attr->qp_type == IBV_QPT_XRC_SEND;

	ibqp->context = ctx;
	ibqp->qp_context = attr->qp_context;
	ibqp->pd = tgt ? NULL : attr->pd;
	ibqp->send_cq = tgt ? NULL : attr->send_cq;
	ibqp->recv_cq = tgt || ini ? NULL : attr->recv_cq;
	ibqp->srq = tgt || ini ? NULL : attr->srq;
	ibqp->state = IBV_QPS_RESET;
	ibqp->qp_type = attr->qp_type;
	ibqp->events_completed = 0;
	pthread_mutex_init(&ibqp->mutex, NULL);
	pthread_cond_init(&ibqp->cond, NULL);
}

/*
 * Contract: sv_ops.create_qp_ex. Errors per check_create, then -ENOMEM
 * (memory, or more than SW_MAX_QP QPs), ring errors (EOPNOTSUPP on a
 * bounce device without a CC parent domain) and the transport's. On
 * success attr->cap holds the granted capacities.
 */
int sw_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr, struct ibv_qp **out)
{
	static atomic_ullong next_uid = 1;
	struct sw_dev *dev = sw_dev_of(ctx);
	struct sw_qp *qp;
	int ret;

	ret = check_create(ctx, attr);
	if (ret)
		return ret;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	atomic_init(&qp->refcnt, 1);
	pthread_mutex_init(&qp->lock, NULL);
	qp->uid = atomic_fetch_add(&next_uid, 1);
	init_ibv(qp, ctx, attr);
	qp->pd = qp->ibv.qp_base.pd ? sw_pd(qp->ibv.qp_base.pd) : NULL;
	qp->scq = qp->ibv.qp_base.send_cq ? sw_cq(qp->ibv.qp_base.send_cq) : NULL;
	qp->rcq = qp->ibv.qp_base.recv_cq ? sw_cq(qp->ibv.qp_base.recv_cq) : NULL;
	qp->srq = qp->ibv.qp_base.srq ? sw_srq(qp->ibv.qp_base.srq) : NULL;
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		qp->xrcd = sw_xrcd(attr->xrcd);
		qp->nopen = 1;
	}
	qp->sq_sig_all = attr->sq_sig_all != 0;
	ret = alloc_rings(qp, ctx, attr);
	if (ret)
		goto err_free;
	if (attr->qp_type == IBV_QPT_UD) {
		/* UD has no path MTU attribute: messages are bounded by the port's. */
		qp->attr.path_mtu = dev->port.active_mtu;
		qp->attr.mtu = sw_mtu_bytes(dev->port.active_mtu);
	}
	ret = sw_transport_qp_init(qp);
	if (ret)
		goto err_free;
	ret = sw_qp_table_insert(dev, qp);
	if (ret)
		goto err_transport;
	qp->ibv.qp_base.handle = qp->qpn;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		qp->is_ex = true;
		qp->send_ops_flags = attr->send_ops_flags;
		sw_qp_ex_install(qp);
	}
	qp_refs(qp, 1);
	report_caps(qp, &attr->cap);
	*out = &qp->ibv.qp_base;
	return 0;

err_transport:
	pthread_mutex_lock(&qp->lock);
	sw_transport_qp_fini(qp);
	pthread_mutex_unlock(&qp->lock);
err_free:
	sw_qp_put(qp);
	return ret;
}

/*
 * Contract: sv_ops.destroy_qp. An XRC TGT QP has handles (its creator's
 * and ibv_open_qp()'s): destroying one that is not the last frees only
 * that handle (an opened one) and leaves the QP as it is. Otherwise the QPN stops resolving first,
 * then the transport lets go (under qp->lock, so a packet handler still holding a reference finds
 * no transport state), its unread completions leave its CQs (as with mlx5: no wr_id of a destroyed
 * QP is polled afterwards; libfabric's rxm reposts what it polls to the endpoint it freed), the
 * references on PD, CQs and SRQ drop, the QP's unread async events are
 * dropped and the call waits until every event of it that
 * ibv_get_async_event() delivered has been acknowledged, as rdma-core
 * with the kernel does. The memory goes with the last reference.
 * Always 0.
 */
int sw_destroy_qp(struct ibv_qp *ibqp)
{
	struct sw_qp *qp = sw_qp(ibqp);
	struct sw_qp *real = sw_qp_real(ibqp);

	if (real->xrcd && !sw_xrcd_qp_close(real)) {
		if (qp->real) {
			sw_xrcd_qp_handle_free(qp);
		} else { /* the creator's handle: its events end with it */
			pthread_mutex_lock(&qp->lock);
			qp->creator_gone = true;
			pthread_mutex_unlock(&qp->lock);
			sv_async_forget(ibqp->context, ibqp);
			sv_async_wait_acked(ibqp->context, ibqp, &ibqp->mutex, &ibqp->cond,
					    &ibqp->events_completed);
		}
		return 0; /* another handle keeps the XRC TGT QP */
	}
	if (qp->real) {
		sw_xrcd_qp_handle_free(qp); /* real keeps its own reference */
		qp = real;
		ibqp = &real->ibv.qp_base;
	}
	sw_qp_table_remove(sw_dev_of(ibqp->context), qp);
	sw_mcast_qp_gone(qp); /* no packet reaches it through a group any more */
	pthread_mutex_lock(&qp->lock);
	sw_transport_qp_fini(qp);
	pthread_mutex_unlock(&qp->lock);
	sw_cq_clean(qp->rcq, qp->qpn);
	if (qp->scq != qp->rcq)
		sw_cq_clean(qp->scq, qp->qpn);
	sw_qp_stats_report(qp);
	qp_refs(qp, -1);
	sv_async_forget(ibqp->context, ibqp);
	sv_async_wait_acked(ibqp->context, ibqp, &ibqp->mutex, &ibqp->cond,
			    &ibqp->events_completed);
	sw_qp_put(qp);
	return 0;
}

/*
 * Contract: sv_ops.query_qp. Fills every attribute whatever `mask` asks
 * (the mask is a hint, as with rxe), and the creation attributes with
 * the granted capacities. -EINVAL without attr or init.
 */
int sw_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		struct ibv_qp_init_attr *init)
{
	struct sw_qp *qp = sw_qp_real(ibqp);
	const struct sw_qp_attr *a = &qp->attr;

	if (!attr || !init)
		return -EINVAL;
	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));
	pthread_mutex_lock(&qp->lock);
	attr->qp_state = sw_qp_state(qp);
	attr->cur_qp_state = attr->qp_state;
	attr->path_mtu = a->path_mtu;
	attr->path_mig_state = a->path_mig_state;
	attr->qkey = a->qkey;
	attr->rq_psn = a->rq_psn;
	attr->sq_psn = a->sq_psn;
	attr->dest_qp_num = a->dest_qp_num;
	attr->qp_access_flags = a->access;
	report_caps(qp, &attr->cap);
	attr->ah_attr = a->ah_attr;
	attr->alt_ah_attr = a->alt_ah_attr;
	attr->pkey_index = a->pkey_index;
	attr->alt_pkey_index = a->alt_pkey_index;
	attr->en_sqd_async_notify = a->en_sqd_async_notify;
	attr->sq_draining = a->sq_draining;
	attr->max_rd_atomic = a->max_rd_atomic;
	attr->max_dest_rd_atomic = a->max_dest_rd_atomic;
	attr->min_rnr_timer = a->min_rnr_timer;
	attr->port_num = a->port_num;
	attr->timeout = a->timeout;
	attr->retry_cnt = a->retry_cnt;
	attr->rnr_retry = a->rnr_retry;
	attr->alt_port_num = a->alt_port_num;
	attr->alt_timeout = a->alt_timeout;

	init->qp_context = ibqp->qp_context;
	init->send_cq = qp->ibv.qp_base.send_cq;
	init->recv_cq = qp->ibv.qp_base.recv_cq;
	init->srq = qp->ibv.qp_base.srq;
	init->cap = attr->cap;
	init->qp_type = ibqp->qp_type;
	init->sq_sig_all = qp->sq_sig_all;
	pthread_mutex_unlock(&qp->lock);
	return 0;
}

/* Contract: sv_ops.qp_to_qp_ex: the QP if created with send_ops_flags, else NULL. */
int sw_qp_to_qp_ex(struct ibv_qp *ibqp, struct ibv_qp_ex **qpx)
{
	struct sw_qp *qp = sw_qp(ibqp);

	*qpx = qp->is_ex ? &qp->ibv : NULL;
	return 0;
}

/*
 * Contract: sv_ops.query_qp_data_in_order: no ordering capability (0).
 * Placement only promises that the last byte of each packet lands after
 * the others (so polling the last byte of a message works, as
 * ib_write_lat does); the bytes before it may land in any order, which
 * is weaker than what IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG or
 * _ALIGNED_128_BYTES promise.
 */
int sw_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	return 0;
}
