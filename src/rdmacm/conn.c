/* SPDX-License-Identifier: MIT */
/*
 * conn.c - the connection calls: rdma_connect, rdma_accept, rdma_reject,
 * rdma_establish, rdma_notify, rdma_disconnect. Each checks the id's
 * state, acts under the lock (MADs, QP transitions) and, on a
 * synchronous id, waits for the outcome without it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "rdmacm/cm.h"

static bool is_ud(const struct cm_id *cid)
{
	return cid->id.qp_type == IBV_QPT_UD;
}

static int do_connect(struct cm_id *cid, const struct rdma_conn_param *p)
{
	struct cm_dev *d = cid->dev;

	if (cid->state != CMA_ROUTE_RESOLVED || !d)
		return -EINVAL;
	if (is_ud(cid)) {
		if (p && p->private_data_len > CM_SIDR_REQ_PDATA - CMA_HDR_LEN)
			return -EINVAL;
		cid->state = CMA_CONNECT;
		return cm_send_sidr_req(cid, p);
	}
	if (p && p->private_data_len > CM_REQ_PDATA - CMA_HDR_LEN)
		return -EINVAL;
	if (cid->id.ps == RDMA_PS_TCP) {
		if (!cid->id.qp && !p)
			return -EINVAL;
		if (p && p->responder_resources != RDMA_MAX_RESP_RES &&
		    p->responder_resources > d->max_rd_atom)
			return -EINVAL;
		if (p && p->initiator_depth != RDMA_MAX_INIT_DEPTH &&
		    p->initiator_depth > d->max_init_rd_atom)
			return -EINVAL;
	}
	cid->state = CMA_CONNECT;
	return cm_send_req(cid, p);
}

/*
 * The same-host rendezvous (rendezvous.c): for a 127/8 destination, the
 * GID of the device whose process listens on it, into gid. True when one
 * answered. Takes and releases the lock itself; the id may be gone after.
 */
static bool find_listener_gid(struct cm_id *cid, uint8_t gid[16])
{
	struct in_addr a;
	uint16_t port;
	int ps;

	if (cm_lock_id(&cid->id))
		return false;
	a = cm_dst_v4(cid);
	port = ntohs(rdma_get_dst_port(&cid->id));
	ps = cid->id.ps;
	pthread_mutex_unlock(&cm.lock);
	return cm_rdv_addr(a) && !cm_rdv_lookup(ps, a, port, gid);
}

CM_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct cm_id *cid = cm_id_of(id);
	uint8_t gid[16];
	bool found = find_listener_gid(cid, gid);
	int ret = cm_lock_id(id);

	if (ret)
		return cm_ret(ret);
	if (found && cid->state == CMA_ROUTE_RESOLVED) { /* the request goes to that listener */
		memcpy(cid->id.route.addr.addr.ibaddr.dgid.raw, gid, 16);
		memcpy(cid->path.dgid.raw, gid, 16);
	}
	ret = do_connect(cid, conn_param);
	pthread_mutex_unlock(&cm.lock);
	if (!ret && cid->sync)
		ret = cm_sync_wait(cid);
	return cm_ret(ret);
}

static int do_accept(struct cm_id *cid, const struct rdma_conn_param *p)
{
	struct cm_conn *c = &cid->conn;
	struct cm_dev *d = cid->dev;
	int ret;

	if (cid->state != CMA_CONNECT || !d)
		return -EINVAL;
	if (!p && !cid->id.qp)
		return -EINVAL;
	if (c->state == CM_SIDR_REQ_RCVD) {
		if (p && p->private_data_len > CM_SIDR_REP_PDATA)
			return -EINVAL;
		cid->app_owned = true;
		ret = cm_send_sidr_rep(cid, CM_SIDR_SUCCESS,
				       cid->id.qp ? cid->id.qp->qp_num : p->qp_num,
				       p ? p->private_data : NULL, p ? p->private_data_len : 0);
		c->state = CM_IDLE;
		return ret;
	}
	if (c->state != CM_REQ_RCVD && c->state != CM_MRA_REQ_SENT)
		return -EINVAL;
	if (p && p->private_data_len > CM_REP_PDATA)
		return -EINVAL;
	if (p && p->responder_resources != RDMA_MAX_RESP_RES)
		c->resp_res = p->responder_resources;
	if (p && p->initiator_depth != RDMA_MAX_INIT_DEPTH)
		c->init_depth = p->initiator_depth;
	if (cid->ack_timeout_set)
		c->ack_timeout = cid->ack_timeout;
	if (cid->id.qp) {
		ret = cm_qp_to_rts(cid);
		if (ret)
			return ret;
	}
	cid->app_owned = true;
	return cm_send_rep(cid, p);
}

CM_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct cm_id *cid = cm_id_of(id);
	bool ud;
	int ret = cm_lock_id(id);

	if (ret)
		return cm_ret(ret);
	ud = cid->conn.state == CM_SIDR_REQ_RCVD;
	ret = do_accept(cid, conn_param);
	pthread_mutex_unlock(&cm.lock);
	if (ret || !cid->sync)
		return cm_ret(ret);
	if (ud) { /* nothing follows a SIDR_REP: just acknowledge the request */
		if (id->event) {
			cm_ack_event(id->event);
			id->event = NULL;
		}
		return 0;
	}
	return cm_ret(cm_sync_wait(cid));
}

static int do_reject(struct cm_id *cid, const void *pdata, uint8_t len, uint16_t reason)
{
	struct cm_conn *c = &cid->conn;
	int ret;

	if (c->state == CM_SIDR_REQ_RCVD) {
		if (len > CM_SIDR_REP_PDATA)
			return -EINVAL;
		ret = cm_send_sidr_rep(cid, CM_SIDR_REJECT, 0, pdata, len);
	} else if (c->state == CM_REQ_RCVD || c->state == CM_MRA_REQ_SENT ||
		   c->state == CM_REP_RCVD || c->state == CM_MRA_REP_SENT) {
		if (len > CM_REJ_PDATA)
			return -EINVAL;
		ret = cm_send_rej(cid, reason, NULL, 0, pdata, len);
	} else {
		return -EINVAL;
	}
	cid->app_owned = true;
	cm_disarm(cid);
	c->state = CM_IDLE;
	return ret;
}

static int reject(struct rdma_cm_id *id, const void *pdata, uint8_t len, uint16_t reason)
{
	int ret = cm_lock_id(id);

	if (ret)
		return cm_ret(ret);
	ret = do_reject(cm_id_of(id), pdata, len, reason);
	pthread_mutex_unlock(&cm.lock);
	return cm_ret(ret);
}

CM_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len, CM_REJ_CONSUMER_DEFINED);
}

CM_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			      uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len, CM_REJ_VENDOR_OPTION_NOT_SUPPORTED);
}

CM_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct cm_id *cid = cm_id_of(id);
	int ret = cm_lock_id(id);

	if (ret)
		return cm_ret(ret);
	if (id->qp || (cid->conn.state != CM_REP_RCVD && cid->conn.state != CM_MRA_REP_SENT)) {
		ret = -EINVAL;
	} else {
		ret = cm_send_rtu(cid);
		cid->conn.state = CM_ESTABLISHED;
	}
	pthread_mutex_unlock(&cm.lock);
	return cm_ret(ret);
}

CM_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct cm_id *cid = cm_id_of(id);
	int ret = cm_lock_id(id);

	if (ret)
		return cm_ret(ret);
	if (event != IBV_EVENT_COMM_EST) {
		ret = -EINVAL;
	} else if (cid->conn.state == CM_REP_SENT || cid->conn.state == CM_MRA_REP_RCVD) {
		cm_disarm(cid);
		cid->conn.state = CM_ESTABLISHED;
		cm_deliver(cid, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	} else if (cid->conn.state == CM_ESTABLISHED) {
		ret = -EISCONN;
	} else {
		ret = -EINVAL;
	}
	pthread_mutex_unlock(&cm.lock);
	return cm_ret(ret);
}

CM_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cm_id *cid = cm_id_of(id);
	bool wait = false;
	int ret = cm_lock_id(id);

	if (ret)
		return cm_ret(ret);
	if (!cid->dev || (cid->state != CMA_CONNECT && cid->state != CMA_DISCONNECT)) {
		ret = -EINVAL;
	} else {
		cm_qp_to_err(cid);
		switch (cid->conn.state) {
		case CM_ESTABLISHED:
			cm_send_dreq(cid);
			wait = true;
			break;
		case CM_DREQ_RCVD:
			cm_send_drep(cid);
			cm_enter_timewait(cid);
			wait = cm_chan_of(id)->head != NULL; /* its DISCONNECTED is still queued */
			break;
		default:
			break;
		}
	}
	pthread_mutex_unlock(&cm.lock);
	if (!ret && wait && cid->sync)
		ret = cm_sync_wait(cid);
	return cm_ret(ret);
}
