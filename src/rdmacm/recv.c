/* SPDX-License-Identifier: MIT */
/*
 * recv.c - the CM thread: received MADs through the state machines, and
 * the timers (retransmission, MRA waits, timewait).
 *
 * Network input is untrusted: the header is checked first (cm_mad_parse_hdr),
 * every message is matched to a connection by its communication IDs and
 * the connection's state before any field is used, and anything that
 * matches nothing is dropped, except what the protocol answers: a REQ for
 * no listener gets REJ 8, a DREQ for no connection a DREP, a SIDR_REQ for
 * no listener SIDR_REP status 1. Nothing here trusts a length or index
 * from the wire beyond the fixed MAD layout.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmacm/cm.h"

/* The connection whose local communication ID is `lcid` (not idle). */
static struct cm_id *by_lcid(uint32_t lcid)
{
	if (!lcid)
		return NULL;
	for (struct cm_id *i = cm.ids; i; i = i->next)
		if (i->conn.state != CM_IDLE && i->conn.lcid == lcid)
			return i;
	return NULL;
}

/* The connection made by the peer's request (remote ID, CA GUID). */
static struct cm_id *by_remote(uint32_t rcid, uint64_t guid)
{
	for (struct cm_id *i = cm.ids; i; i = i->next)
		if (i->conn.state != CM_IDLE && i->conn.rcid == rcid && i->conn.rguid == guid)
			return i;
	return NULL;
}

/* A REJ answering a message that matched no id. */
static void reply_rej(struct cm_dev *d, const uint8_t gid[16], uint64_t tid, uint32_t rcid,
		      uint16_t reason, const void *ari, uint8_t ari_len)
{
	uint8_t mad[CM_MAD_LEN];
	struct cm_rej r;

	memset(&r, 0, sizeof(r));
	r.remote_comm_id = rcid;
	r.msg_rejected = CM_MSG_REQ;
	r.reason = reason;
	if (ari) {
		r.ari_len = ari_len;
		memcpy(r.ari, ari, ari_len);
	}
	cm_mad_init(mad, CM_ATTR_REJ, tid, 0);
	cm_encode_rej(mad, &r);
	cm_send_mad(d, gid, mad);
}

static void reply_sidr(struct cm_dev *d, const uint8_t gid[16], uint64_t tid,
		       const struct cm_sidr_req *q, uint8_t status)
{
	uint8_t mad[CM_MAD_LEN];
	struct cm_sidr_rep r;

	memset(&r, 0, sizeof(r));
	r.request_id = q->request_id;
	r.status = status;
	r.service_id = q->service_id;
	cm_mad_init(mad, CM_ATTR_SIDR_REP, tid, 0);
	cm_encode_sidr_rep(mad, &r);
	cm_send_mad(d, gid, mad);
}

/* The listener for an IP service ID on device `d` (specific address first). */
static struct cm_id *find_listener(struct cm_dev *d, uint64_t sid, struct in_addr dst)
{
	struct cm_id *wild = NULL;
	uint16_t ps = (uint16_t)(sid >> 16), port = (uint16_t)sid;

	if ((sid & 0xffffffffff000000ull) != 0x01000000ull)
		return NULL;
	for (struct cm_id *i = cm.ids; i; i = i->next) {
		if (i->state != CMA_LISTEN || (uint16_t)i->id.ps != ps ||
		    ntohs(rdma_get_src_port(&i->id)) != port || (i->dev && i->dev != d))
			continue;
		if (cm_src_v4(i).s_addr == dst.s_addr)
			return i;
		if (!wild)
			wild = i;
	}
	return wild;
}

/*
 * Is `dip`, the destination address of a request, ours? The device's
 * address, or the address the listener `l` is bound to when it is one the
 * same-host rendezvous publishes (rendezvous.c: a 127/8 address that
 * other processes connect to for this listener).
 */
static bool dst_is_ours(const struct cm_dev *d, const struct cm_id *l, struct in_addr dip)
{
	if (dip.s_addr == d->addr.s_addr)
		return true;
	return l->dev == d && cm_rdv_addr(dip) && cm_src_v4(l).s_addr == dip.s_addr;
}

/* addresses of a passive id from the CMA header: src = {dst IP, service port}, dst = {src IP, port}
 */
static void passive_addrs(struct cm_id *nid, const struct cma_hdr *h, uint16_t port)
{
	struct rdma_addr *a = &nid->id.route.addr;

	if (h->ip_version == 4) {
		a->src_sin.sin_family = AF_INET;
		memcpy(&a->src_sin.sin_addr, h->dst_ip + 12, 4);
		a->src_sin.sin_port = htons(port);
		a->dst_sin.sin_family = AF_INET;
		memcpy(&a->dst_sin.sin_addr, h->src_ip + 12, 4);
		a->dst_sin.sin_port = htons(h->src_port);
	} else {
		a->src_sin6.sin6_family = AF_INET6;
		memcpy(&a->src_sin6.sin6_addr, h->dst_ip, 16);
		a->src_sin6.sin6_port = htons(port);
		a->dst_sin6.sin6_family = AF_INET6;
		memcpy(&a->dst_sin6.sin6_addr, h->src_ip, 16);
		a->dst_sin6.sin6_port = htons(h->src_port);
	}
}

/* A new passive id under `l` for a request from `gid` (lock held). */
static int new_passive(struct cm_id *l, struct cm_dev *d, enum ibv_qp_type qpt,
		       const struct cma_hdr *h, uint16_t port, struct cm_id **out)
{
	struct cm_id *nid;
	int ret = cm_id_alloc(cm_chan_of(&l->id), l->id.context, l->id.ps, qpt, &nid);

	if (ret)
		return ret;
	ret = cm_id_attach_dev(nid, d);
	if (ret) {
		cm_id_free(nid);
		return ret;
	}
	nid->passive = true;
	nid->state = CMA_CONNECT;
	nid->tos = l->tos;
	nid->ack_timeout = l->ack_timeout;
	nid->ack_timeout_set = l->ack_timeout_set;
	passive_addrs(nid, h, port);
	*out = nid;
	return 0;
}

/*
 * Contract: offer the new passive id `nid` to its listener `l` as a
 * CONNECT_REQUEST whose private data is `pdata` (len bytes) past the CMA
 * header; lock held. Returns the event for the caller to fill in, or NULL
 * when none could be queued: `nid` is then freed.
 */
static struct cm_event *offer_to_listener(struct cm_id *l, struct cm_id *nid, const uint8_t *pdata,
					  size_t len)
{
	struct cm_event *e;

	nid->listener = l;
	l->queued_reqs++;
	e = cm_queue_event(l, RDMA_CM_EVENT_CONNECT_REQUEST, 0, pdata + CMA_HDR_LEN,
			   len - CMA_HDR_LEN);
	if (!e) {
		l->queued_reqs--;
		cm_id_free(nid);
		return NULL;
	}
	e->ev.id = &nid->id;
	e->ev.listen_id = &l->id;
	return e;
}

static bool gid_is_v4(const uint8_t gid[16])
{
	static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return !memcmp(gid, pre, sizeof(pre));
}

static void handle_req(struct cm_dev *d, const struct softverbs_gsi_addr *src,
		       const struct cm_mad_hdr *hdr, const uint8_t mad[CM_MAD_LEN])
{
	struct cm_event *e;
	struct cm_id *l, *nid;
	struct cma_hdr ch;
	struct in_addr dip;
	struct cm_req r;

	cm_decode_req(mad, &r);
	nid = by_remote(r.local_comm_id, r.local_ca_guid);
	if (nid) { /* a duplicate */
		if (nid->conn.state == CM_REQ_RCVD || nid->conn.state == CM_MRA_REQ_SENT) {
			cm_send_mra(nid, CM_MSG_REQ);
			nid->conn.state = CM_MRA_REQ_SENT;
		} else if (nid->conn.state == CM_TIMEWAIT) {
			reply_rej(d, src->peer_gid, hdr->tid, r.local_comm_id, CM_REJ_STALE_CONN,
				  NULL, 0);
		}
		return;
	}
	if (cma_hdr_decode(r.pdata, &ch)) {
		memset(&ch, 0, sizeof(ch)); /* refused below, after the listener check */
		ch.ip_version = 0;
	}
	memcpy(&dip, ch.dst_ip + 12, 4);
	l = find_listener(d, r.service_id, dip);
	if (!l) {
		if (!cm_hold_req(d, src, mad, r.service_id, r.local_comm_id))
			reply_rej(d, src->peer_gid, hdr->tid, r.local_comm_id,
				  CM_REJ_INVALID_SERVICE_ID, NULL, 0);
		return;
	}
	if (memcmp(r.primary.remote_gid, d->gid.raw, 16)) {
		reply_rej(d, src->peer_gid, hdr->tid, r.local_comm_id, CM_REJ_INVALID_GID,
			  d->gid.raw, 16);
		return;
	}
	if (ch.ip_version != 4 || !dst_is_ours(d, l, dip) || r.transport != 0 ||
	    l->id.qp_type != IBV_QPT_RC || r.alternate.local_lid || !gid_is_v4(src->peer_gid)) {
		reply_rej(d, src->peer_gid, hdr->tid, r.local_comm_id, CM_REJ_CONSUMER_DEFINED,
			  NULL, 0);
		return;
	}
	if (l->queued_reqs >= l->backlog)
		return; /* backlog full: silent, the peer retries */
	if (new_passive(l, d, IBV_QPT_RC, &ch, (uint16_t)r.service_id, &nid))
		return; /* out of memory: as a loss */
	struct cm_conn *c = &nid->conn;

	c->state = CM_REQ_RCVD;
	c->lcid = cm_new_cid();
	c->lpsn = cm_random32() & 0xffffff;
	c->rcid = r.local_comm_id;
	c->rguid = r.local_ca_guid;
	c->tid = hdr->tid;
	c->sid = r.service_id;
	c->rqpn = r.local_qpn;
	c->rpsn = r.starting_psn;
	c->resp_res = r.initiator_depth < d->max_rd_atom ? r.initiator_depth : d->max_rd_atom;
	c->init_depth = r.responder_resources < d->max_init_rd_atom ? r.responder_resources :
								      d->max_init_rd_atom;
	c->retry = r.retry_count;
	c->rnr_retry = r.rnr_retry_count;
	c->ack_timeout = r.primary.local_ack_timeout;
	c->mtu =
		r.path_mtu >= IBV_MTU_256 && r.path_mtu <= IBV_MTU_4096 ? r.path_mtu : IBV_MTU_1024;
	c->srq = r.srq;
	c->flow_control = r.flow_control;
	c->max_cm_retries = r.max_cm_retries;
	c->peer_response_timeout = r.local_cm_response_timeout;
	memcpy(c->peer_gid, src->peer_gid, 16);
	/* the path, from the REQ */
	struct ibv_sa_path_rec *p = &nid->path;

	memcpy(p->dgid.raw, r.primary.local_gid, 16);
	memcpy(p->sgid.raw, r.primary.remote_gid, 16);
	p->flow_label = htobe32(r.primary.flow_label);
	p->hop_limit = src->hop_limit ? src->hop_limit : CM_HOP_LIMIT;
	p->traffic_class = r.primary.traffic_class;
	p->reversible = 1;
	p->pkey = htobe16(r.pkey);
	p->sl = r.primary.sl;
	p->mtu_selector = 2;
	p->mtu = c->mtu;
	p->rate_selector = 2;
	p->rate = r.primary.packet_rate;
	p->packet_life_time_selector = 2;
	p->packet_life_time = r.primary.local_ack_timeout ? r.primary.local_ack_timeout - 1 : 0;
	nid->has_path = true;
	nid->id.route.path_rec = p;
	nid->id.route.num_paths = 1;
	nid->id.route.addr.addr.ibaddr.dgid = p->dgid;
	e = offer_to_listener(l, nid, r.pdata, sizeof(r.pdata));
	if (!e)
		return;
	e->ev.param.conn.responder_resources = r.initiator_depth;
	e->ev.param.conn.initiator_depth = r.responder_resources;
	e->ev.param.conn.flow_control = r.flow_control;
	e->ev.param.conn.retry_count = r.retry_count;
	e->ev.param.conn.rnr_retry_count = r.rnr_retry_count;
	e->ev.param.conn.srq = r.srq;
	e->ev.param.conn.qp_num = r.local_qpn;
}

/* The conn parameters of CONNECT_RESPONSE / active ESTABLISHED, from a REP. */
static void rep_params(struct cm_event *e, const struct cm_rep *r)
{
	if (!e)
		return;
	e->ev.param.conn.responder_resources = r->initiator_depth;
	e->ev.param.conn.initiator_depth = r->responder_resources;
	e->ev.param.conn.flow_control = r->flow_control;
	e->ev.param.conn.rnr_retry_count = r->rnr_retry_count;
	e->ev.param.conn.srq = r->srq;
	e->ev.param.conn.qp_num = r->local_qpn;
}

static void handle_rep(const uint8_t mad[CM_MAD_LEN])
{
	struct cm_id *cid;
	struct cm_conn *c;
	struct cm_rep r;
	int ret;

	cm_decode_rep(mad, &r);
	cid = by_lcid(r.remote_comm_id);
	if (!cid || cid->passive)
		return;
	c = &cid->conn;
	if (c->state == CM_ESTABLISHED && c->rcid == r.local_comm_id) {
		cm_send_rtu(cid); /* our RTU was lost */
		return;
	}
	if ((c->state == CM_REP_RCVD || c->state == CM_MRA_REP_SENT) &&
	    c->rcid == r.local_comm_id) {
		cm_send_mra(cid, CM_MSG_REP);
		c->state = CM_MRA_REP_SENT;
		return;
	}
	if (c->state != CM_REQ_SENT && c->state != CM_MRA_REQ_RCVD)
		return;
	cm_disarm(cid);
	c->rcid = r.local_comm_id;
	c->rguid = r.local_ca_guid;
	c->rqpn = r.local_qpn;
	c->rpsn = r.starting_psn;
	c->init_depth = r.responder_resources < cid->dev->max_init_rd_atom ?
				r.responder_resources :
				cid->dev->max_init_rd_atom;
	c->resp_res = r.initiator_depth < cid->dev->max_rd_atom ? r.initiator_depth :
								  cid->dev->max_rd_atom;
	c->rnr_retry = r.rnr_retry_count;
	c->ack_timeout = cm_ack_timeout(r.target_ack_delay, cid->path.packet_life_time);
	if (!cid->id.qp) {
		c->state = CM_REP_RCVD;
		rep_params(
			cm_deliver(cid, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, r.pdata, CM_REP_PDATA),
			&r);
		return;
	}
	c->state = CM_REP_RCVD;
	ret = cm_qp_to_rts(cid);
	if (ret) {
		cm_qp_to_err(cid);
		cm_send_rej(cid, CM_REJ_CONSUMER_DEFINED, NULL, 0, NULL, 0);
		c->state = CM_IDLE;
		cm_deliver(cid, RDMA_CM_EVENT_CONNECT_ERROR, ret, NULL, 0);
		cid->connect_error = true;
		return;
	}
	cm_send_rtu(cid);
	c->state = CM_ESTABLISHED;
	rep_params(cm_deliver(cid, RDMA_CM_EVENT_ESTABLISHED, 0, r.pdata, CM_REP_PDATA), &r);
}

static void handle_rtu(const uint8_t mad[CM_MAD_LEN])
{
	struct cm_id *cid;
	struct cm_rtu r;

	cm_decode_rtu(mad, &r);
	cid = by_lcid(r.remote_comm_id);
	if (!cid || cid->conn.rcid != r.local_comm_id ||
	    (cid->conn.state != CM_REP_SENT && cid->conn.state != CM_MRA_REP_RCVD))
		return;
	cm_disarm(cid);
	cid->conn.state = CM_ESTABLISHED;
	cm_deliver(cid, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
}

static void handle_rej(const uint8_t mad[CM_MAD_LEN])
{
	struct cm_id *cid = NULL;
	struct cm_conn *c;
	struct cm_rej r;
	uint64_t guid = 0;

	if (cm_decode_rej(mad, &r))
		return;
	if (r.reason == CM_REJ_TIMEOUT && r.ari_len >= 8) { /* by (their ID, their GUID) */
		for (int i = 0; i < 8; i++)
			guid = guid << 8 | r.ari[i];
		cid = by_remote(r.local_comm_id, guid);
	}
	if (!cid)
		cid = by_lcid(r.remote_comm_id);
	if (!cid)
		return;
	c = &cid->conn;
	if (c->rcid && r.local_comm_id && c->rcid != r.local_comm_id)
		return; /* for another incarnation */
	switch (c->state) {
	case CM_REQ_SENT:
	case CM_MRA_REQ_RCVD:
	case CM_REP_RCVD:
	case CM_MRA_REP_SENT:
		cm_disarm(cid);
		cm_qp_to_err(cid);
		if (r.reason == CM_REJ_STALE_CONN)
			cm_enter_timewait(cid);
		else
			c->state = CM_IDLE;
		cm_deliver(cid, RDMA_CM_EVENT_REJECTED, r.reason, r.pdata, CM_REJ_PDATA);
		break;
	case CM_REQ_RCVD:
	case CM_MRA_REQ_SENT:
		c->state = CM_IDLE; /* the application has not answered: not reported */
		break;
	case CM_REP_SENT:
	case CM_MRA_REP_RCVD:
	case CM_ESTABLISHED:
		cm_disarm(cid);
		cm_qp_to_err(cid);
		cm_enter_timewait(cid);
		cm_deliver(cid, RDMA_CM_EVENT_REJECTED, r.reason, r.pdata, CM_REJ_PDATA);
		break;
	default:
		break;
	}
}

static void handle_mra(const uint8_t mad[CM_MAD_LEN])
{
	struct cm_id *cid;
	struct cm_mra r;
	struct cm_conn *c;

	cm_decode_mra(mad, &r);
	cid = by_lcid(r.remote_comm_id);
	if (!cid)
		return;
	c = &cid->conn;
	if (r.msg_mraed == CM_MSG_REQ && c->state == CM_REQ_SENT)
		c->state = CM_MRA_REQ_RCVD;
	else if (r.msg_mraed == CM_MSG_REP && c->state == CM_REP_SENT && c->rcid == r.local_comm_id)
		c->state = CM_MRA_REP_RCVD;
	else
		return;
	/* wait for the peer's service time; the retries left stay as they are */
	c->deadline_ms = cm_now_ms() + cm_timeout_ms(r.service_timeout) +
			 cm_timeout_ms(CM_PACKET_LIFETIME + 1);
	cm_wake();
}

static void handle_dreq(struct cm_dev *d, const struct softverbs_gsi_addr *src,
			const struct cm_mad_hdr *hdr, const uint8_t mad[CM_MAD_LEN])
{
	struct cm_id *cid;
	struct cm_conn *c;
	struct cm_dreq q;

	cm_decode_dreq(mad, &q);
	cid = by_lcid(q.remote_comm_id);
	if (!cid || cid->conn.rcid != q.local_comm_id) {
		/* not ours (any more): answer with the DREQ's IDs swapped */
		cm_send_comm_ids(d, src->peer_gid, CM_ATTR_DREP, hdr->tid, q.remote_comm_id,
				 q.local_comm_id);
		return;
	}
	c = &cid->conn;
	if (cid->id.qp && q.remote_qpn != cid->id.qp->qp_num)
		return; /* not for our QP: the kernel ignores it too */
	c->dreq_tid = hdr->tid;
	switch (c->state) {
	case CM_REP_SENT:
	case CM_MRA_REP_RCVD:
	case CM_ESTABLISHED:
		cm_disarm(cid);
		c->state = CM_DREQ_RCVD;
		cid->state = CMA_DISCONNECT;
		cm_deliver(cid, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
		break;
	case CM_DREQ_SENT: /* crossed DREQs: answer and finish */
		cm_disarm(cid);
		cm_send_drep(cid);
		cm_enter_timewait(cid);
		cm_deliver(cid, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
		break;
	case CM_TIMEWAIT:
		cm_send_drep(cid);
		break;
	default:
		break;
	}
}

static void handle_drep(const uint8_t mad[CM_MAD_LEN])
{
	struct cm_id *cid;
	struct cm_rtu r;

	cm_decode_drep(mad, &r);
	cid = by_lcid(r.remote_comm_id);
	if (!cid || cid->conn.rcid != r.local_comm_id || cid->conn.state != CM_DREQ_SENT)
		return;
	cm_disarm(cid);
	cm_enter_timewait(cid);
	cm_deliver(cid, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
}

static void handle_sidr_req(struct cm_dev *d, const struct softverbs_gsi_addr *src,
			    const struct cm_mad_hdr *hdr, const uint8_t mad[CM_MAD_LEN])
{
	struct cm_sidr_req q;
	struct cm_id *l, *nid;
	struct cma_hdr ch;
	struct in_addr dip = {0};

	cm_decode_sidr_req(mad, &q);
	for (struct cm_id *i = cm.ids; i; i = i->next)
		if (i->conn.state == CM_SIDR_REQ_RCVD && i->conn.rcid == q.request_id &&
		    !memcmp(i->conn.peer_gid, src->peer_gid, 16))
			return; /* a duplicate while the application decides */
	if (!cma_hdr_decode(q.pdata, &ch))
		memcpy(&dip, ch.dst_ip + 12, 4);
	l = find_listener(d, q.service_id, dip);
	if (!l || l->id.qp_type != IBV_QPT_UD) {
		reply_sidr(d, src->peer_gid, hdr->tid, &q, CM_SIDR_UNSUPPORTED);
		return;
	}
	if (cma_hdr_decode(q.pdata, &ch) || ch.ip_version != 4 || !dst_is_ours(d, l, dip) ||
	    !gid_is_v4(src->peer_gid)) {
		reply_sidr(d, src->peer_gid, hdr->tid, &q, CM_SIDR_REJECT);
		return;
	}
	if (l->queued_reqs >= l->backlog)
		return;
	if (new_passive(l, d, IBV_QPT_UD, &ch, (uint16_t)q.service_id, &nid))
		return;
	nid->conn.state = CM_SIDR_REQ_RCVD;
	nid->conn.rcid = q.request_id;
	nid->conn.tid = hdr->tid;
	nid->conn.sid = q.service_id;
	memcpy(nid->conn.peer_gid, src->peer_gid, 16);
	memcpy(nid->id.route.addr.addr.ibaddr.dgid.raw, src->peer_gid, 16);
	offer_to_listener(l, nid, q.pdata, sizeof(q.pdata));
}

static void handle_sidr_rep(const uint8_t mad[CM_MAD_LEN])
{
	struct cm_sidr_rep r;
	struct cm_id *cid;
	struct cm_event *e;

	if (cm_decode_sidr_rep(mad, &r))
		return;
	cid = by_lcid(r.request_id);
	if (!cid || cid->conn.state != CM_SIDR_REQ_SENT)
		return;
	cm_disarm(cid);
	cid->conn.state = CM_IDLE;
	if (r.status != CM_SIDR_SUCCESS) {
		cm_deliver(cid, RDMA_CM_EVENT_UNREACHABLE, r.status, r.pdata, CM_SIDR_REP_PDATA);
		return;
	}
	e = cm_deliver(cid, RDMA_CM_EVENT_ESTABLISHED, 0, r.pdata, CM_SIDR_REP_PDATA);
	if (!e)
		return;
	struct ibv_ah_attr *ah = &e->ev.param.ud.ah_attr;

	ah->is_global = 1;
	ah->grh.dgid = cid->path.dgid;
	ah->grh.sgid_index = 0;
	ah->grh.hop_limit = cid->path.hop_limit;
	ah->grh.traffic_class = cid->path.traffic_class;
	ah->grh.flow_label = be32toh(cid->path.flow_label);
	ah->sl = cid->path.sl;
	ah->static_rate = cid->path.rate;
	ah->port_num = 1;
	e->ev.param.ud.qp_num = r.qpn;
	e->ev.param.ud.qkey = r.qkey;
}

/* Contract: see cm.h. */
void cm_handle_mad(struct cm_dev *d, const struct softverbs_gsi_addr *src,
		   const uint8_t mad[CM_MAD_LEN])
{
	struct cm_mad_hdr h;

	if (cm_mad_parse_hdr(mad, &h))
		return;
	switch (h.attr_id) {
	case CM_ATTR_REQ:
		handle_req(d, src, &h, mad);
		break;
	case CM_ATTR_MRA:
		handle_mra(mad);
		break;
	case CM_ATTR_REJ:
		handle_rej(mad);
		break;
	case CM_ATTR_REP:
		handle_rep(mad);
		break;
	case CM_ATTR_RTU:
		handle_rtu(mad);
		break;
	case CM_ATTR_DREQ:
		handle_dreq(d, src, &h, mad);
		break;
	case CM_ATTR_DREP:
		handle_drep(mad);
		break;
	case CM_ATTR_SIDR_REQ:
		handle_sidr_req(d, src, &h, mad);
		break;
	case CM_ATTR_SIDR_REP:
		handle_sidr_rep(mad);
		break;
	default: /* LAP, APR (dropped on RoCE, as the kernel does), anything else */
		break;
	}
}

/* A retransmission timer ran out of retries. */
static void give_up(struct cm_id *cid)
{
	struct cm_conn *c = &cid->conn;

	cm_disarm(cid);
	switch (c->state) {
	case CM_REQ_SENT:
	case CM_MRA_REQ_RCVD:
	case CM_REP_SENT:
	case CM_MRA_REP_RCVD:
	case CM_SIDR_REQ_SENT:
		c->state = CM_IDLE;
		cm_deliver(cid, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0);
		break;
	case CM_DREQ_SENT:
		cm_enter_timewait(cid);
		cm_deliver(cid, RDMA_CM_EVENT_DISCONNECTED, -ETIMEDOUT, NULL, 0);
		break;
	default:
		c->state = CM_IDLE;
		break;
	}
}

/* Contract: see cm.h. */
uint64_t cm_run_timers(uint64_t now)
{
	uint64_t next = cm_held_timers(now);

	for (struct cm_id *i = cm.ids; i; i = i->next) {
		struct cm_conn *c = &i->conn;

		if (!c->deadline_ms)
			continue;
		if (c->deadline_ms <= now) {
			if (c->mad_armed && c->retries_left > 0) {
				c->retries_left--;
				c->deadline_ms = now + c->timeout_ms;
				cm_send_mad(i->dev, c->peer_gid, c->mad);
			} else if (c->mad_armed) {
				give_up(i);
			} else if (c->state == CM_TIMEWAIT) {
				c->deadline_ms = 0;
				c->state = CM_IDLE;
				cm_deliver(i, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, NULL, 0);
			} else {
				c->deadline_ms = 0;
			}
		}
		if (c->deadline_ms && (!next || c->deadline_ms < next))
			next = c->deadline_ms;
	}
	return next;
}

/* Contract: see cm.h. The CM thread: poll the GSI endpoints and the wake fd. */
void *cm_thread_main(void *arg)
{
	struct pollfd p[CM_MAX_DEVICES + 1 + CM_RDV_POLL_MAX];
	int n = cm.ndev;

	(void)arg;
	for (int i = 0; i < n; i++)
		p[i] = (struct pollfd){.fd = softverbs_gsi_fd(cm.dev[i].gsi), .events = POLLIN};
	p[n] = (struct pollfd){.fd = cm.wake_fd, .events = POLLIN};
	for (;;) {
		uint64_t now = cm_now_ms(), next;
		int ms, nrdv;

		pthread_mutex_lock(&cm.lock);
		next = cm_run_timers(now);
		pthread_mutex_unlock(&cm.lock);
		/* published listeners change with a wake: read again every round */
		nrdv = cm_rdv_pollfds(&p[n + 1], CM_RDV_POLL_MAX);
		ms = !next ? -1 : next <= now ? 0 : (int)(next - now > 60000 ? 60000 : next - now);
		if (poll(p, (nfds_t)(n + 1 + nrdv), ms) <= 0)
			continue;
		cm_rdv_serve(&p[n + 1], nrdv);
		if (p[n].revents & POLLIN) {
			uint64_t v;

			if (read(cm.wake_fd, &v, sizeof(v)) < 0)
				(void)0;
		}
		for (int i = 0; i < n; i++) {
			struct softverbs_gsi_addr src;
			uint8_t mad[CM_MAD_LEN];

			if (!(p[i].revents & POLLIN))
				continue;
			while (!softverbs_gsi_recv(cm.dev[i].gsi, &src, mad)) {
				pthread_mutex_lock(&cm.lock);
				cm_handle_mad(&cm.dev[i], &src, mad);
				pthread_mutex_unlock(&cm.lock);
			}
		}
	}
	return NULL;
}
