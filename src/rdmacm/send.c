/* SPDX-License-Identifier: MIT */
/*
 * send.c - the CM MADs of a connection, built from the id's state and
 * sent through the device's GSI endpoint (lock held throughout).
 *
 * REQ, REP, DREQ and SIDR_REQ are retransmitted until answered: they are
 * kept in conn->mad and resent, identical, by the timers (recv.c). The
 * answers to a message (REP, REJ, MRA, RTU, SIDR_REP to a request; DREP
 * to a DREQ) echo its transaction ID.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "rdmacm/cm.h"

/* Contract: see cm.h. */
uint64_t cm_new_tid(uint32_t cid)
{
	return cm.tid_hi << 32 | cid;
}

/* Contract: see cm.h. */
uint32_t cm_req_timeout_ms(void)
{
	return 2 * cm_timeout_ms(CM_PACKET_LIFETIME) + cm_timeout_ms(CM_RESPONSE_TIMEOUT);
}

/* Contract: see cm.h (the kernel's cm_ack_timeout). */
uint8_t cm_ack_timeout(uint8_t delay, uint8_t life)
{
	unsigned int a = life + 1u;

	if (a >= delay) {
		if (delay >= a - 1)
			a++;
	} else {
		unsigned int d = delay;

		a = d + (life + 1u >= d - 1 ? 1 : 0);
	}
	return (uint8_t)(a > 31 ? 31 : a);
}

/* Contract: see cm.h. A lost send is a loss on the wire: the timer resends. */
int cm_send_armed(struct cm_id *cid, uint32_t timeout_ms, int retries)
{
	struct cm_conn *c = &cid->conn;

	c->mad_armed = true;
	c->retries_left = retries;
	c->timeout_ms = timeout_ms;
	c->deadline_ms = cm_now_ms() + timeout_ms;
	cm_send_mad(cid->dev, c->peer_gid, c->mad);
	cm_wake();
	return 0;
}

/* Contract: see cm.h. */
void cm_disarm(struct cm_id *cid)
{
	cid->conn.mad_armed = false;
	cid->conn.deadline_ms = 0;
}

static uint8_t clamp7(uint8_t v)
{
	return v > 7 ? 7 : v;
}

static uint64_t guid_host(const struct cm_id *cid)
{
	return cid->dev->guid;
}

/* The rdma_cm IP header of the id (REQ and SIDR_REQ private data). */
static void cma_hdr_of(const struct cm_id *cid, uint8_t out[CMA_HDR_LEN])
{
	const struct sockaddr *src = &cid->id.route.addr.src_addr;
	struct cma_hdr h = {.cma_version = CMA_VERSION};

	h.ip_version = src->sa_family == AF_INET6 ? 6 : 4;
	h.src_port = ntohs(rdma_get_src_port((struct rdma_cm_id *)&cid->id));
	if (h.ip_version == 4) {
		struct in_addr s = cm_src_v4(cid), d = cm_dst_v4(cid);

		memcpy(h.src_ip + 12, &s, 4);
		memcpy(h.dst_ip + 12, &d, 4);
	} else {
		memcpy(h.src_ip, &cid->id.route.addr.src_sin6.sin6_addr, 16);
		memcpy(h.dst_ip, &cid->id.route.addr.dst_sin6.sin6_addr, 16);
	}
	cma_hdr_encode(out, &h);
}

static uint64_t service_id(const struct cm_id *cid)
{
	return (uint64_t)cid->id.ps << 16 | ntohs(rdma_get_dst_port((struct rdma_cm_id *)&cid->id));
}

/* Contract: see cm.h. Starts the connection: IDs, PSN, negotiated values. */
int cm_send_req(struct cm_id *cid, const struct rdma_conn_param *p)
{
	struct cm_conn *c = &cid->conn;
	struct ibv_sa_path_rec *path = &cid->path;
	struct cm_dev *d = cid->dev;
	struct cm_req r;

	memset(&r, 0, sizeof(r));
	c->lcid = cm_new_cid();
	c->lpsn = cm_random32() & 0xffffff;
	c->tid = cm_new_tid(c->lcid);
	c->sid = service_id(cid);
	memcpy(c->peer_gid, path->dgid.raw, 16);
	c->mtu = path->mtu;
	c->retry = p ? clamp7(p->retry_count) : 7;
	c->ack_timeout = cm_ack_timeout(CM_LOCAL_ACK_DELAY, path->packet_life_time);
	r.local_comm_id = c->lcid;
	r.service_id = c->sid;
	r.local_ca_guid = guid_host(cid);
	r.local_qpn = cid->id.qp ? cid->id.qp->qp_num : (p ? p->qp_num : 0);
	r.responder_resources = p && p->responder_resources != RDMA_MAX_RESP_RES ?
					p->responder_resources :
					d->max_rd_atom;
	r.initiator_depth = p && p->initiator_depth != RDMA_MAX_INIT_DEPTH ? p->initiator_depth :
									     d->max_init_rd_atom;
	r.remote_cm_response_timeout = CM_RESPONSE_TIMEOUT;
	r.transport = 0; /* RC */
	r.flow_control = p ? p->flow_control != 0 : false;
	r.starting_psn = c->lpsn;
	r.local_cm_response_timeout = CM_RESPONSE_TIMEOUT;
	r.retry_count = c->retry;
	r.pkey = 0xffff;
	r.path_mtu = path->mtu;
	r.rnr_retry_count = p ? clamp7(p->rnr_retry_count) : 7;
	r.max_cm_retries = CM_MAX_CM_RETRIES;
	r.srq = cid->id.qp ? cid->id.qp->srq != NULL : (p ? p->srq != 0 : false);
	r.primary.local_lid = 0xffff;
	r.primary.remote_lid = 0xffff;
	memcpy(r.primary.local_gid, path->sgid.raw, 16);
	memcpy(r.primary.remote_gid, path->dgid.raw, 16);
	r.primary.flow_label = be32toh(path->flow_label) & 0xfffff;
	r.primary.traffic_class = path->traffic_class;
	r.primary.hop_limit = path->hop_limit;
	r.primary.sl = path->sl;
	r.primary.subnet_local = path->hop_limit <= 1;
	r.primary.local_ack_timeout = c->ack_timeout;
	cma_hdr_of(cid, r.pdata);
	if (p && p->private_data && p->private_data_len)
		memcpy(r.pdata + CMA_HDR_LEN, p->private_data, p->private_data_len);
	cm_mad_init(c->mad, CM_ATTR_REQ, c->tid, 0);
	cm_encode_req(c->mad, &r);
	c->state = CM_REQ_SENT;
	return cm_send_armed(cid, cm_req_timeout_ms(), CM_MAX_CM_RETRIES);
}

/* Contract: see cm.h. conn holds the REQ's values (recv.c) and the accepted ones. */
int cm_send_rep(struct cm_id *cid, const struct rdma_conn_param *p)
{
	struct cm_conn *c = &cid->conn;
	struct cm_rep r;

	memset(&r, 0, sizeof(r));
	r.local_comm_id = c->lcid;
	r.remote_comm_id = c->rcid;
	r.local_qpn = cid->id.qp ? cid->id.qp->qp_num : (p ? p->qp_num : 0);
	r.starting_psn = c->lpsn;
	r.responder_resources = c->resp_res;
	r.initiator_depth = c->init_depth;
	r.target_ack_delay = CM_LOCAL_ACK_DELAY;
	r.flow_control = p ? p->flow_control != 0 : false;
	r.rnr_retry_count = p ? clamp7(p->rnr_retry_count) : 7;
	r.srq = cid->id.qp ? cid->id.qp->srq != NULL : (p ? p->srq != 0 : false);
	r.local_ca_guid = guid_host(cid);
	if (p && p->private_data && p->private_data_len)
		memcpy(r.pdata, p->private_data, p->private_data_len);
	cm_mad_init(c->mad, CM_ATTR_REP, c->tid, 0);
	cm_encode_rep(c->mad, &r);
	c->state = CM_REP_SENT;
	return cm_send_armed(cid, cm_timeout_ms(c->peer_response_timeout), c->max_cm_retries);
}

/* Contract: see cm.h. */
int cm_send_comm_ids(struct cm_dev *d, const uint8_t peer_gid[16], uint16_t attr_id, uint64_t tid,
		     uint32_t lcid, uint32_t rcid)
{
	uint8_t mad[CM_MAD_LEN];
	struct cm_rtu r;

	memset(&r, 0, sizeof(r));
	r.local_comm_id = lcid;
	r.remote_comm_id = rcid;
	cm_mad_init(mad, attr_id, tid, 0);
	cm_encode_rtu(mad, &r); /* a DREP's body is an RTU's (mad.h) */
	return cm_send_mad(d, peer_gid, mad);
}

/* Contract: see cm.h. */
int cm_send_rtu(struct cm_id *cid)
{
	struct cm_conn *c = &cid->conn;

	return cm_send_comm_ids(cid->dev, c->peer_gid, CM_ATTR_RTU, c->tid, c->lcid, c->rcid);
}

/* Contract: see cm.h. */
int cm_send_dreq(struct cm_id *cid)
{
	struct cm_conn *c = &cid->conn;
	struct cm_dreq r;

	memset(&r, 0, sizeof(r));
	r.local_comm_id = c->lcid;
	r.remote_comm_id = c->rcid;
	r.remote_qpn = c->rqpn;
	cm_mad_init(c->mad, CM_ATTR_DREQ, cm_new_tid(c->lcid) ^ ((uint64_t)cm_random32() << 32), 0);
	cm_encode_dreq(c->mad, &r);
	c->state = CM_DREQ_SENT;
	return cm_send_armed(
		cid, cid->passive ? cm_timeout_ms(c->peer_response_timeout) : cm_req_timeout_ms(),
		CM_MAX_CM_RETRIES);
}

/* Contract: see cm.h. */
int cm_send_drep(struct cm_id *cid)
{
	struct cm_conn *c = &cid->conn;

	return cm_send_comm_ids(cid->dev, c->peer_gid, CM_ATTR_DREP, c->dreq_tid, c->lcid, c->rcid);
}

/* MessageREJected by the state the REJ leaves (the kernel's choice). */
static uint8_t rej_msg(enum cm_state s)
{
	switch (s) {
	case CM_REQ_RCVD:
	case CM_MRA_REQ_SENT:
		return CM_MSG_REQ;
	case CM_REP_RCVD:
	case CM_MRA_REP_SENT:
		return CM_MSG_REP;
	default:
		return CM_MSG_OTHER;
	}
}

/* Contract: see cm.h. */
int cm_send_rej(struct cm_id *cid, uint16_t reason, const void *ari, uint8_t ari_len,
		const void *pdata, uint8_t len)
{
	struct cm_conn *c = &cid->conn;
	uint8_t mad[CM_MAD_LEN];
	struct cm_rej r;

	memset(&r, 0, sizeof(r));
	r.local_comm_id = c->state == CM_REQ_RCVD ? 0 : c->lcid;
	r.remote_comm_id = c->rcid;
	r.msg_rejected = rej_msg(c->state);
	r.reason = reason;
	if (ari && ari_len <= CM_REJ_ARI) {
		r.ari_len = ari_len;
		memcpy(r.ari, ari, ari_len);
	}
	if (pdata && len)
		memcpy(r.pdata, pdata, len > CM_REJ_PDATA ? CM_REJ_PDATA : len);
	cm_mad_init(mad, CM_ATTR_REJ, c->tid, 0);
	cm_encode_rej(mad, &r);
	return cm_send_mad(cid->dev, c->peer_gid, mad);
}

/* Contract: see cm.h. */
int cm_send_mra(struct cm_id *cid, uint8_t msg)
{
	struct cm_conn *c = &cid->conn;
	uint8_t mad[CM_MAD_LEN];
	struct cm_mra r;

	memset(&r, 0, sizeof(r));
	r.local_comm_id = c->lcid;
	r.remote_comm_id = c->rcid;
	r.msg_mraed = msg;
	r.service_timeout = CM_MRA_TIMEOUT;
	cm_mad_init(mad, CM_ATTR_MRA, c->tid, 0);
	cm_encode_mra(mad, &r);
	return cm_send_mad(cid->dev, c->peer_gid, mad);
}

/* Contract: see cm.h. */
int cm_send_sidr_req(struct cm_id *cid, const struct rdma_conn_param *p)
{
	struct cm_conn *c = &cid->conn;
	struct cm_sidr_req r;

	memset(&r, 0, sizeof(r));
	c->lcid = cm_new_cid();
	c->tid = cm_new_tid(c->lcid);
	c->sid = service_id(cid);
	memcpy(c->peer_gid, cid->path.dgid.raw, 16);
	r.request_id = c->lcid;
	r.pkey = 0xffff;
	r.service_id = c->sid;
	cma_hdr_of(cid, r.pdata);
	if (p && p->private_data && p->private_data_len)
		memcpy(r.pdata + CMA_HDR_LEN, p->private_data, p->private_data_len);
	cm_mad_init(c->mad, CM_ATTR_SIDR_REQ, c->tid, 0);
	cm_encode_sidr_req(c->mad, &r);
	c->state = CM_SIDR_REQ_SENT;
	return cm_send_armed(cid, cm_timeout_ms(CM_RESPONSE_TIMEOUT), CM_MAX_CM_RETRIES);
}

/* Contract: see cm.h. */
int cm_send_sidr_rep(struct cm_id *cid, uint8_t status, uint32_t qpn, const void *pdata,
		     uint8_t len)
{
	struct cm_conn *c = &cid->conn;
	uint8_t mad[CM_MAD_LEN];
	struct cm_sidr_rep r;

	memset(&r, 0, sizeof(r));
	r.request_id = c->rcid;
	r.status = status;
	r.qpn = status == CM_SIDR_SUCCESS ? qpn : 0;
	r.service_id = c->sid;
	r.qkey = status == CM_SIDR_SUCCESS ? RDMA_UDP_QKEY : 0;
	if (pdata && len)
		memcpy(r.pdata, pdata, len > CM_SIDR_REP_PDATA ? CM_SIDR_REP_PDATA : len);
	cm_mad_init(mad, CM_ATTR_SIDR_REP, c->tid, 0);
	cm_encode_sidr_rep(mad, &r);
	return cm_send_mad(cid->dev, c->peer_gid, mad);
}
