/* SPDX-License-Identifier: MIT */
/*
 * qp.c - the QP, CQs and SRQ the library makes for an id, and the QP
 * attributes of each connection step (rdma_init_qp_attr and the
 * library's own transitions).
 *
 * CQs the library creates have the id as their context and a completion
 * channel each (rdma_get_send_comp / rdma_get_recv_comp rely on both).
 * A new RC QP goes to INIT; a UD QP straight to RTS with the rdma_cm
 * Q_Key. Connecting moves an RC QP to INIT (with the access the
 * negotiated resources allow), RTR and RTS.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rdmacm/cm.h"

/* Contract: see cm.h. */
int cm_init_qp_attr(struct cm_id *cid, struct ibv_qp_attr *a, int *mask)
{
	struct cm_conn *c = &cid->conn;
	enum ibv_qp_state want = a->qp_state;
	bool connected;

	memset(a, 0, sizeof(*a));
	a->qp_state = want;
	a->pkey_index = 0;
	a->port_num = 1;
	connected = c->state != CM_IDLE && c->state != CM_SIDR_REQ_SENT &&
		    c->state != CM_SIDR_REQ_RCVD && c->state != CM_TIMEWAIT;
	if (cid->id.qp_type == IBV_QPT_UD || !connected) {
		if (want != IBV_QPS_INIT && want != IBV_QPS_RTR && want != IBV_QPS_RTS)
			return -EINVAL;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (cid->id.qp_type == IBV_QPT_UD) {
			a->qkey = RDMA_UDP_QKEY;
			*mask |= IBV_QP_QKEY;
		} else {
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	}
	switch (want) {
	case IBV_QPS_INIT:
		*mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		if (c->resp_res)
			a->qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		return 0;
	case IBV_QPS_RTR:
		if (c->state == CM_REQ_SENT || c->state == CM_MRA_REQ_RCVD)
			return -EINVAL;
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		a->ah_attr.is_global = 1;
		a->ah_attr.grh.dgid = cid->path.dgid;
		a->ah_attr.grh.sgid_index = 0;
		a->ah_attr.grh.hop_limit = cid->path.hop_limit;
		a->ah_attr.grh.traffic_class = cid->path.traffic_class;
		a->ah_attr.grh.flow_label = be32toh(cid->path.flow_label);
		a->ah_attr.sl = cid->path.sl;
		a->ah_attr.static_rate = cid->path.rate;
		a->ah_attr.port_num = 1;
		a->path_mtu = (enum ibv_mtu)c->mtu;
		a->dest_qp_num = c->rqpn;
		a->rq_psn = c->lpsn;
		a->max_dest_rd_atomic = c->resp_res;
		a->min_rnr_timer = 0;
		return 0;
	case IBV_QPS_RTS:
		if (c->state == CM_REQ_SENT || c->state == CM_MRA_REQ_RCVD)
			return -EINVAL;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		a->sq_psn = c->rpsn;
		a->timeout = cid->ack_timeout_set ? cid->ack_timeout : c->ack_timeout;
		a->retry_cnt = c->retry;
		a->rnr_retry = c->rnr_retry;
		a->max_rd_atomic = c->init_depth;
		return 0;
	default:
		return -EINVAL;
	}
}

static int modify(struct cm_id *cid, enum ibv_qp_state st)
{
	struct ibv_qp_attr a = {.qp_state = st};
	int mask, ret = cm_init_qp_attr(cid, &a, &mask);

	if (ret)
		return ret;
	ret = ibv_modify_qp(cid->id.qp, &a, mask);
	return ret ? -ret : 0;
}

/* Contract: see cm.h. */
int cm_qp_to_rts(struct cm_id *cid)
{
	int ret = modify(cid, IBV_QPS_INIT);

	if (!ret)
		ret = modify(cid, IBV_QPS_RTR);
	if (!ret)
		ret = modify(cid, IBV_QPS_RTS);
	return ret;
}

/* Contract: see cm.h. */
int cm_qp_to_err(struct cm_id *cid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

	if (!cid->id.qp || cid->id.qp_type != IBV_QPT_RC)
		return 0;
	return -ibv_modify_qp(cid->id.qp, &a, IBV_QP_STATE);
}

static int lib_cq(struct cm_id *cid, int cqe, struct ibv_comp_channel **ch, struct ibv_cq **cq)
{
	*ch = ibv_create_comp_channel(cid->id.verbs);
	if (!*ch)
		return errno ? -errno : -ENOMEM;
	*cq = ibv_create_cq(cid->id.verbs, cqe > 0 ? cqe : 1, cid, *ch, 0);
	if (!*cq) {
		int ret = errno ? -errno : -ENOMEM;

		ibv_destroy_comp_channel(*ch);
		*ch = NULL;
		return ret;
	}
	return 0;
}

/* Contract: see cm.h. */
void cm_destroy_lib_cqs(struct cm_id *cid)
{
	struct rdma_cm_id *id = &cid->id;

	if (!cid->own_cqs)
		return;
	if (id->recv_cq && id->recv_cq != id->send_cq)
		ibv_destroy_cq(id->recv_cq);
	if (id->send_cq)
		ibv_destroy_cq(id->send_cq);
	if (id->recv_cq_channel && id->recv_cq_channel != id->send_cq_channel)
		ibv_destroy_comp_channel(id->recv_cq_channel);
	if (id->send_cq_channel)
		ibv_destroy_comp_channel(id->send_cq_channel);
	id->send_cq = id->recv_cq = NULL;
	id->send_cq_channel = id->recv_cq_channel = NULL;
	cid->own_cqs = false;
}

/* A new QP's first transitions: RC to INIT, UD to RTS. */
static int qp_first_states(struct cm_id *cid, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT, ret;

	if (qp->qp_type != IBV_QPT_UD)
		return -ibv_modify_qp(qp, &a, mask | IBV_QP_ACCESS_FLAGS);
	if (cid->id.ps == RDMA_PS_IPOIB)
		return -EOPNOTSUPP;
	a.qkey = RDMA_UDP_QKEY;
	ret = ibv_modify_qp(qp, &a, mask | IBV_QP_QKEY);
	if (!ret) {
		a.qp_state = IBV_QPS_RTR;
		ret = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	}
	if (!ret) {
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0;
		ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	return -ret;
}

/*
 * Contract: make the id's QP from `arg` (a struct ibv_qp_init_attr_ex,
 * completed in place), with library CQs where it names none; cm.lock
 * held. 0 or -errno; on failure the CQs made here are gone again.
 */
static int create_qp_ex(struct cm_id *cid, void *arg)
{
	struct ibv_qp_init_attr_ex *attr = arg;
	struct rdma_cm_id *id = &cid->id;
	struct ibv_qp *qp;
	bool made_send = false, made_recv = false;
	int ret;

	if (id->qp || !id->verbs)
		return -EINVAL;
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd;
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (!attr->pd || attr->pd->context != id->verbs)
		return -EINVAL;
	if ((id->send_cq && attr->send_cq && attr->send_cq != id->send_cq) ||
	    (id->recv_cq && attr->recv_cq && attr->recv_cq != id->recv_cq))
		return -EINVAL;
	if (!attr->send_cq && !id->send_cq) {
		ret = lib_cq(cid, (int)attr->cap.max_send_wr, &id->send_cq_channel, &id->send_cq);
		if (ret)
			return ret;
		made_send = true;
	}
	if (!attr->recv_cq && !id->recv_cq) {
		ret = lib_cq(cid, (int)attr->cap.max_recv_wr, &id->recv_cq_channel, &id->recv_cq);
		if (ret)
			goto err_cq;
		made_recv = true;
	}
	if (made_send || made_recv)
		cid->own_cqs = true;
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	if (id->srq && !attr->srq)
		attr->srq = id->srq;
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		ret = errno ? -errno : -ENOMEM;
		goto err_cq;
	}
	ret = qp_first_states(cid, qp);
	if (ret) {
		ibv_destroy_qp(qp);
		goto err_cq;
	}
	id->qp = qp;
	id->pd = qp->pd;
	cm_mc_qp_changed(cid); /* a QP made after a join joins its groups */
	return 0;
err_cq:
	if (made_recv) {
		ibv_destroy_cq(id->recv_cq);
		ibv_destroy_comp_channel(id->recv_cq_channel);
		id->recv_cq = NULL;
		id->recv_cq_channel = NULL;
	}
	if (made_send) {
		ibv_destroy_cq(id->send_cq);
		ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq = NULL;
		id->send_cq_channel = NULL;
	}
	if (!id->send_cq && !id->recv_cq)
		cid->own_cqs = false;
	return ret;
}

/*
 * Contract: the body of rdma_create_qp_ex and rdma_create_srq_ex: EINVAL
 * for a NULL `arg`, cm_lock_id's error for a dead id, else fn(cid, arg)
 * with cm.lock held. Returns as librdmacm does: 0, or -1 and errno.
 */
static int call_locked(struct rdma_cm_id *id, int (*fn)(struct cm_id *, void *), void *arg)
{
	int ret;

	if (!arg)
		return cm_ret(-EINVAL);
	ret = cm_lock_id(id);
	if (ret)
		return cm_ret(ret);
	ret = fn(cm_id_of(id), arg);
	pthread_mutex_unlock(&cm.lock);
	return cm_ret(ret);
}

CM_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	return call_locked(id, create_qp_ex, attr);
}

CM_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ax;
	int ret;

	if (!qp_init_attr)
		return cm_ret(-EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, qp_init_attr, sizeof(*qp_init_attr));
	ax.comp_mask = IBV_QP_INIT_ATTR_PD;
	ax.pd = pd; /* NULL: create_qp_ex takes the id's */
	ret = rdma_create_qp_ex(id, &ax);
	if (ret)
		return ret;
	qp_init_attr->send_cq = ax.send_cq;
	qp_init_attr->recv_cq = ax.recv_cq;
	qp_init_attr->srq = ax.srq;
	qp_init_attr->cap = ax.cap;
	return 0;
}

CM_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	pthread_mutex_lock(&cm.lock);
	if (cm_id_check(id) == -EINVAL) { /* an orphan's QP can still go */
		pthread_mutex_unlock(&cm.lock);
		return;
	}
	if (id->qp)
		ibv_destroy_qp(id->qp); /* which leaves its groups */
	id->qp = NULL;
	cm_mc_qp_changed(cm_id_of(id));
	if (!id->srq)
		cm_destroy_lib_cqs(cm_id_of(id));
	pthread_mutex_unlock(&cm.lock);
}

CM_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
				int *qp_attr_mask)
{
	int ret;

	if (!qp_attr || !qp_attr_mask)
		return cm_ret(-EINVAL);
	ret = cm_lock_id(id);
	if (ret)
		return cm_ret(ret);
	ret = cm_init_qp_attr(cm_id_of(id), qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&cm.lock);
	return cm_ret(ret);
}

/*
 * Contract: make the id's SRQ from `arg` (a struct ibv_srq_init_attr_ex,
 * its PD filled in from the id's when it names none); cm.lock held.
 * 0 or -errno.
 */
static int create_srq(struct cm_id *cid, void *arg)
{
	struct ibv_srq_init_attr_ex *attr = arg;
	struct rdma_cm_id *id = &cid->id;
	struct ibv_srq *srq;

	if (!id->verbs || id->srq)
		return -EINVAL;
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return -EINVAL;
	if (attr->srq_type != IBV_SRQT_BASIC)
		return -EOPNOTSUPP;
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq)
		return errno ? -errno : -ENOMEM;
	id->srq = srq;
	if (!id->pd)
		id->pd = attr->pd;
	return 0;
}

CM_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	return call_locked(id, create_srq, attr);
}

CM_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			      struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ax;
	int ret;

	if (!attr)
		return cm_ret(-EINVAL);
	memset(&ax, 0, sizeof(ax));
	ax.srq_context = attr->srq_context;
	ax.attr = attr->attr;
	ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	ax.srq_type = IBV_SRQT_BASIC;
	ax.pd = pd; /* NULL: create_srq takes the id's */
	ret = rdma_create_srq_ex(id, &ax);
	if (!ret)
		attr->attr = ax.attr;
	return ret;
}

CM_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	pthread_mutex_lock(&cm.lock);
	if (cm_id_check(id) == -EINVAL) { /* an orphan's SRQ can still go */
		pthread_mutex_unlock(&cm.lock);
		return;
	}
	if (id->srq)
		ibv_destroy_srq(id->srq);
	id->srq = NULL;
	if (!id->qp)
		cm_destroy_lib_cqs(cm_id_of(id));
	pthread_mutex_unlock(&cm.lock);
}
