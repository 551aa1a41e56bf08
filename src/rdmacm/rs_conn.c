/* SPDX-License-Identifier: MIT */
/*
 * rs_conn.c - rsockets connections (contract in rs.h).
 *
 * rconnect resolves, creates the resources (receives posted while the QP
 * is still in INIT, so nothing the peer sends first can find them
 * missing) and sends a REQ whose private data is our 40 bytes of
 * connection data; the REP carries the peer's. raccept takes a
 * CONNECT_REQUEST from the listener's channel, moves the new id to a
 * channel of its own (whose fd is the new socket's number), answers with
 * our connection data and waits for ESTABLISHED. Parameters follow
 * rdma-core: flow control 1, retry and RNR retry 7, no RDMA READ or
 * atomic resources (the QPs get REMOTE_WRITE only).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmacm/rs.h"

/* The next CM event of rs->ch, or NULL; waits up to `ms` (lock released). */
static struct rdma_cm_event *next_event(struct rsocket *rs, int ms)
{
	struct rdma_cm_event *ev;
	struct pollfd p = {.fd = rs->ch->fd, .events = POLLIN};

	if (!rdma_get_cm_event(rs->ch, &ev))
		return ev;
	if (!ms)
		return NULL;
	pthread_mutex_unlock(&rs->lock);
	poll(&p, 1, ms);
	pthread_mutex_lock(&rs->lock);
	return rdma_get_cm_event(rs->ch, &ev) ? NULL : ev;
}

/* Contract: see rs.h. */
void rs_cm_events(struct rsocket *rs)
{
	struct rdma_cm_event *ev;

	while (!rdma_get_cm_event(rs->ch, &ev)) {
		if (ev->event == RDMA_CM_EVENT_DISCONNECTED) {
			if (rs->state == RS_CONNECTED)
				rs->state = RS_DISCONNECTED;
			rs->readable = false;
			rdma_disconnect(rs->id); /* the DREP */
		}
		rdma_ack_cm_event(ev);
	}
}

static int event_errno(const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE:
		return ev->status < 0 ? ev->status : -ETIMEDOUT;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return -EHOSTUNREACH;
	default:
		return ev->status < 0 ? ev->status : -ECONNREFUSED;
	}
}

static int send_req(struct rsocket *rs)
{
	uint8_t cd[RS_CONN_DATA_LEN];
	struct rdma_conn_param p = {
		.private_data = cd,
		.private_data_len = RS_CONN_DATA_LEN,
		.flow_control = 1,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	int ret = rs_create_resources(rs);

	if (ret)
		return ret;
	rs_format_conn_data(rs, cd);
	if (rdma_connect(rs->id, &p))
		return -errno;
	rs->state = RS_CONNECTING;
	return 0;
}

/* Contract: see rs.h. */
int rs_connect_step(struct rsocket *rs, bool wait)
{
	while (rs->state == RS_RESOLVING || rs->state == RS_CONNECTING) {
		struct rdma_cm_event *ev = next_event(rs, wait ? 1000 : 0);
		int ret = 0;

		if (!ev) {
			if (!wait)
				return -EINPROGRESS;
			continue;
		}
		switch (ev->event) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			ret = rdma_resolve_route(rs->id, 2000) ? -errno : 0;
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			ret = send_req(rs);
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			ret = ev->param.conn.private_data_len >= RS_CONN_DATA_LEN ?
				      rs_save_conn_data(rs, ev->param.conn.private_data) :
				      -ENOTSUP;
			if (!ret) {
				rs->state = RS_CONNECTED;
				rs_send_credits(rs);
			}
			break;
		default:
			ret = event_errno(ev);
			break;
		}
		rdma_ack_cm_event(ev);
		if (ret) {
			rs->state = RS_ERROR;
			rs->err = -ret;
			return ret;
		}
	}
	if (rs->state == RS_CONNECTED)
		return 0;
	return rs->err ? -rs->err : -ENOTCONN;
}

/* Contract: see rs.h. */
int rs_connect(struct rsocket *rs, const struct sockaddr *addr, socklen_t len)
{
	if (rs->state == RS_CONNECTED)
		return -EISCONN;
	if (rs->state == RS_RESOLVING || rs->state == RS_CONNECTING)
		return -EALREADY;
	if (rs->state == RS_LISTENING || !addr ||
	    len < (socklen_t)(addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
							    sizeof(struct sockaddr_in)))
		return -EINVAL;
	if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)addr, 2000))
		return -errno;
	rs->state = RS_RESOLVING;
	return rs_connect_step(rs, !rs->nonblock);
}

/* Contract: see rs.h. */
int rs_accept(struct rsocket *l, struct rsocket **out)
{
	struct rdma_cm_event *ev;
	struct rsocket *rs = NULL;
	struct rdma_cm_id *nid;
	uint8_t peer[RS_CONN_DATA_LEN], cd[RS_CONN_DATA_LEN];
	struct rdma_conn_param p;
	int ret;

	for (;;) {
		ev = next_event(l, l->nonblock ? 0 : 1000);
		if (ev && ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		if (ev)
			rdma_ack_cm_event(ev);
		else if (l->nonblock)
			return -EAGAIN;
	}
	p = ev->param.conn;
	nid = ev->id;
	memcpy(peer, ev->param.conn.private_data, RS_CONN_DATA_LEN);
	ret = rs_alloc(SOCK_STREAM, &rs);
	if (ret)
		rs = NULL;
	if (!ret) {
		rs->id = nid;
		rs->sq_size = l->sq_size;
		rs->rq_size = l->rq_size;
		rs->inline_size = l->inline_size;
		rs->iomap_size = l->iomap_size;
		rs->sbuf_size = l->sbuf_size;
		rs->rbuf_size = l->rbuf_size;
		ret = rdma_migrate_id(nid, rs->ch) ? -errno : 0;
	}
	rdma_ack_cm_event(ev);
	if (!ret && peer[0] != RS_CONN_VERSION)
		ret = -ENOTSUP;
	if (!ret)
		ret = rs_create_resources(rs);
	if (!ret)
		ret = rs_save_conn_data(rs, peer);
	if (!ret) {
		rs_format_conn_data(rs, cd);
		p.private_data = cd;
		p.private_data_len = RS_CONN_DATA_LEN;
		ret = rdma_accept(rs->id, &p) ? -errno : 0;
	}
	if (ret) {
		if (rs) {
			rdma_reject(rs->id, NULL, 0);
			rs_free(rs);
		} else {
			rdma_reject(nid, NULL, 0);
			rdma_destroy_id(nid);
		}
		return ret;
	}
	pthread_mutex_lock(&rs->lock);
	for (int i = 0; i < 30 && rs->state != RS_CONNECTED; i++) {
		ev = next_event(rs, 1000);
		if (!ev)
			continue;
		if (ev->event == RDMA_CM_EVENT_ESTABLISHED) {
			rs->state = RS_CONNECTED;
			rs_send_credits(rs);
		} else if (ev->event != RDMA_CM_EVENT_TIMEWAIT_EXIT) {
			rs->state = RS_ERROR;
			rs->err = -event_errno(ev);
		}
		rdma_ack_cm_event(ev);
		if (rs->state == RS_ERROR)
			break;
	}
	pthread_mutex_unlock(&rs->lock);
	if (rs->state != RS_CONNECTED) {
		ret = rs->err ? -rs->err : -ETIMEDOUT;
		rs_free(rs);
		return ret;
	}
	*out = rs;
	return 0;
}
