/* SPDX-License-Identifier: MIT */
/*
 * ds_data.c - a datagram rsocket's data path (contract in rs.h).
 *
 * A UD message is a ds_header (the sender's IP and UDP port: 8 bytes for
 * IPv4, 24 for IPv6) and the data, at most DS_MSG_MAX bytes together,
 * sent with the rdma_cm Q_Key. A peer whose QPN we do not know yet gets
 * the data over UDP instead, behind a ds_udp_header naming our QP. A UDP
 * DATA message is answered with a CTRL message naming ours, and both
 * kinds teach us the sender's QPN (its AH is made when it is first seen),
 * so later messages take the UD QPs both ways.
 *
 * Whichever call uses the socket (rrecv, rsend, rpoll) takes in the UDP
 * messages and the completions; received messages queue in rs->ds_rx in
 * arrival order (a UDP DATA message waits in rs->ds_udp_msg, one at a
 * time). All with rs->lock held; waits release it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "rdmacm/rs.h"

enum {
	DS_OP_DATA = 0,
	DS_OP_CTRL = 7,
	RX_RING = DS_MAX_QPS * DS_RQ + 2
};

/* Write the ds_header for `a` at p; its length. */
static uint32_t put_hdr(uint8_t *p, const struct sockaddr *a)
{
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)a;

		p[0] = 6;
		p[1] = DS_HDR6;
		memcpy(p + 2, &s->sin6_port, 2);
		memcpy(p + 4, &s->sin6_flowinfo, 4);
		memcpy(p + 8, &s->sin6_addr, 16);
		return DS_HDR6;
	}
	p[0] = 4;
	p[1] = DS_HDR4;
	memcpy(p + 2, &((const struct sockaddr_in *)a)->sin_port, 2);
	memcpy(p + 4, &((const struct sockaddr_in *)a)->sin_addr, 4);
	return DS_HDR4;
}

/* The address of the ds_header at p (n bytes there); its length, 0 if bad. */
static uint32_t get_hdr(const uint8_t *p, uint32_t n, struct sockaddr_storage *a)
{
	memset(a, 0, sizeof(*a));
	if (n >= DS_HDR4 && p[0] == 4 && p[1] == DS_HDR4) {
		struct sockaddr_in *s = (struct sockaddr_in *)a;

		s->sin_family = AF_INET;
		memcpy(&s->sin_port, p + 2, 2);
		memcpy(&s->sin_addr, p + 4, 4);
		return DS_HDR4;
	}
	if (n >= DS_HDR6 && p[0] == 6 && p[1] == DS_HDR6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)a;

		s->sin6_family = AF_INET6;
		memcpy(&s->sin6_port, p + 2, 2);
		memcpy(&s->sin6_flowinfo, p + 4, 4);
		memcpy(&s->sin6_addr, p + 8, 16);
		return DS_HDR6;
	}
	return 0;
}

/* Write a ds_udp_header for `qp` at p; its length. */
static uint32_t put_udp_hdr(uint8_t *p, const struct ds_qp *qp, uint8_t op)
{
	const struct sockaddr *a = (const struct sockaddr *)&qp->src;
	uint32_t tag = htonl(DS_UDP_TAG), qpn = htonl(qp->id->qp->qp_num & 0xffffff);
	bool v6 = a->sa_family == AF_INET6;

	memcpy(p, &tag, 4);
	p[4] = v6 ? 6 : 4;
	p[5] = op;
	p[6] = v6 ? DS_UDP6 : DS_UDP4;
	p[7] = 0;
	memcpy(p + 8, &qpn, 4);
	if (v6)
		memcpy(p + 12, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
	else
		memcpy(p + 12, &((const struct sockaddr_in *)a)->sin_addr, 4);
	return p[6];
}

static void rx_push(struct rsocket *rs, struct ds_qp *qp, uint32_t slot, uint32_t len)
{
	rs->ds_rx[rs->ds_rx_tail] = (struct ds_rx){.qp = qp, .slot = slot, .len = len};
	rs->ds_rx_tail = (rs->ds_rx_tail + 1) % RX_RING;
}

/* Send our CTRL message (our QPN) to `to`. */
static void send_ctrl(struct rsocket *rs, struct ds_qp *qp, const struct sockaddr *to)
{
	uint8_t h[DS_UDP6];
	uint32_t n = put_udp_hdr(h, qp, DS_OP_CTRL);

	sendto(rs->fd, h, n, 0, to, ds_addr_len(to));
}

/*
 * One UDP message, len bytes in rs->ds_udp_msg from `from`: learn the
 * sender's QPN (making its AH); a DATA message is answered with CTRL and
 * queued. Anything malformed is dropped.
 */
static void udp_message(struct rsocket *rs, uint32_t len, const struct sockaddr_storage *from)
{
	const uint8_t *p = rs->ds_udp_msg;
	struct sockaddr_storage peer;
	struct ds_dest *d;
	uint32_t tag, qpn, hl;

	if (len < DS_UDP4)
		return;
	memcpy(&tag, p, 4);
	memcpy(&qpn, p + 8, 4);
	hl = p[6];
	if (ntohl(tag) != DS_UDP_TAG || (p[5] != DS_OP_DATA && p[5] != DS_OP_CTRL) ||
	    !((p[4] == 4 && hl == DS_UDP4) || (p[4] == 6 && hl == DS_UDP6)) || len < hl ||
	    from->ss_family != (p[4] == 4 ? AF_INET : AF_INET6))
		return;
	/* the peer is its QP's IP with the port it sends from: its ds_headers say so too */
	memcpy(&peer, from, sizeof(peer));
	if (p[4] == 4)
		memcpy(&((struct sockaddr_in *)&peer)->sin_addr, p + 12, 4);
	else
		memcpy(&((struct sockaddr_in6 *)&peer)->sin6_addr, p + 12, 16);
	if (ds_get_dest(rs, (struct sockaddr *)&peer, &d))
		return;
	d->qpn = ntohl(qpn) & 0xffffff;
	if (p[5] != DS_OP_DATA)
		return;
	send_ctrl(rs, d->qp, (const struct sockaddr *)from);
	rs->ds_udp_src = peer;
	rs->ds_udp_held = true;
	rx_push(rs, NULL, hl, len - hl);
}

/* A received slot holds a ds_header. */
static bool valid(const struct ds_qp *qp, uint32_t slot, uint32_t byte_len)
{
	struct sockaddr_storage a;

	return byte_len > DS_GRH && slot < DS_RQ &&
	       get_hdr(qp->buf + (size_t)slot * DS_SLOT + DS_GRH, byte_len - DS_GRH, &a);
}

/* Contract: see rs.h. */
int ds_poll(struct rsocket *rs)
{
	struct ibv_wc wc[16];

	for (struct ds_qp *qp = rs->ds_qps; qp; qp = qp->next) {
		int n;

		while ((n = ibv_poll_cq(qp->cq, 16, wc)) > 0) {
			for (int i = 0; i < n; i++) {
				uint32_t slot = (uint32_t)wc[i].wr_id;

				if (!(wc[i].opcode & IBV_WC_RECV))
					qp->sfree++;
				else if (wc[i].status == IBV_WC_SUCCESS &&
					 valid(qp, slot, wc[i].byte_len))
					rx_push(rs, qp, slot, wc[i].byte_len - DS_GRH);
				else
					ds_post_recv(qp, slot);
			}
		}
		if (n < 0)
			return -EIO;
	}
	while (!rs->ds_udp_held) {
		struct sockaddr_storage from = {0};
		socklen_t flen = sizeof(from);
		ssize_t n = recvfrom(rs->fd, rs->ds_udp_msg, DS_UDP6 + DS_MSG_MAX, MSG_DONTWAIT,
				     (struct sockaddr *)&from, &flen);

		if (n < 0)
			break;
		udp_message(rs, (uint32_t)n, &from);
	}
	return 0;
}

/* Contract: see rs.h. */
bool ds_readable(struct rsocket *rs)
{
	return rs->ds_rx_head != rs->ds_rx_tail;
}

/* Contract: see rs.h. */
bool ds_writable(struct rsocket *rs)
{
	struct ds_qp *qp = rs->ds_conn ? rs->ds_conn->qp : rs->ds_qps;

	return !qp || qp->sfree > 0;
}

/* Contract: see rs.h. */
int ds_wait_fds(struct rsocket *rs, struct pollfd *p)
{
	int n = 0;

	p[n++] = (struct pollfd){.fd = rs->fd, .events = POLLIN};
	for (struct ds_qp *qp = rs->ds_qps; qp; qp = qp->next) {
		ibv_req_notify_cq(qp->cq, 0);
		p[n++] = (struct pollfd){.fd = qp->cch->fd, .events = POLLIN};
	}
	return n;
}

/* Contract: see rs.h. */
void ds_ack_events(struct rsocket *rs)
{
	for (struct ds_qp *qp = rs->ds_qps; qp; qp = qp->next) {
		struct ibv_cq *cq;
		void *ctx;

		while (!ibv_get_cq_event(qp->cch, &cq, &ctx))
			ibv_ack_cq_events(cq, 1);
	}
}

/* Wait until `done` holds (checked after arming) or something wakes us. */
static int wait_for(struct rsocket *rs, bool (*done)(struct rsocket *))
{
	struct pollfd p[1 + DS_MAX_QPS];
	int n = ds_wait_fds(rs, p), ret = ds_poll(rs);

	if (ret || done(rs))
		return ret;
	pthread_mutex_unlock(&rs->lock);
	ret = poll(p, (nfds_t)n, -1) < 0 ? -errno : 0;
	pthread_mutex_lock(&rs->lock);
	ds_ack_events(rs);
	return ret == -EINTR ? 0 : ret;
}

/* Contract: see rs.h. */
ssize_t ds_send(struct rsocket *rs, const void *buf, size_t len, int flags, struct ds_dest *dest)
{
	bool nb = rs->nonblock || (flags & MSG_DONTWAIT);
	struct ds_qp *qp;
	uint32_t hl;
	uint8_t *p;

	if (!dest)
		return -EDESTADDRREQ;
	qp = dest->qp;
	hl = qp->src.ss_family == AF_INET6 ? DS_HDR6 : DS_HDR4;
	if (len + hl > DS_MSG_MAX)
		return -EMSGSIZE;
	if (!dest->qpn) { /* the peer's QPN is not known yet: UDP */
		uint8_t h[DS_UDP6];
		struct iovec iov[2] = {{h, put_udp_hdr(h, qp, DS_OP_DATA)}, {(void *)buf, len}};
		struct msghdr m = {.msg_name = &dest->addr,
				   .msg_namelen = ds_addr_len((struct sockaddr *)&dest->addr),
				   .msg_iov = iov,
				   .msg_iovlen = 2};

		return sendmsg(rs->fd, &m, MSG_DONTWAIT) < 0 ? -errno : (ssize_t)len;
	}
	while (!qp->sfree) {
		int ret = ds_poll(rs);

		if (!ret && !qp->sfree)
			ret = nb ? -EAGAIN : wait_for(rs, ds_writable);
		if (ret)
			return ret;
	}
	p = qp->buf + (size_t)DS_RQ * DS_SLOT + (size_t)qp->snext * DS_MSG_MAX;
	put_hdr(p, (struct sockaddr *)&qp->src);
	memcpy(p + hl, buf, len);
	{
		struct ibv_sge sge = {
			.addr = (uintptr_t)p, .length = (uint32_t)len + hl, .lkey = qp->mr->lkey};
		struct ibv_send_wr wr = {.wr_id = qp->snext,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;
		int ret;

		wr.wr.ud.ah = dest->ah;
		wr.wr.ud.remote_qpn = dest->qpn;
		wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
		ret = ibv_post_send(qp->id->qp, &wr, &bad);
		if (ret)
			return -ret;
	}
	qp->snext = (qp->snext + 1) % DS_SQ;
	qp->sfree--;
	return (ssize_t)len;
}

static void copy_src(const struct sockaddr_storage *a, struct sockaddr *src, socklen_t *srclen)
{
	socklen_t n = ds_addr_len((const struct sockaddr *)a);

	if (!src || !srclen)
		return;
	memcpy(src, a, *srclen < n ? *srclen : n);
	*srclen = n;
}

/* Contract: see rs.h. Datagram semantics: a longer message is cut to len. */
ssize_t ds_recv(struct rsocket *rs, void *buf, size_t len, int flags, struct sockaddr *src,
		socklen_t *srclen)
{
	bool nb = rs->nonblock || (flags & MSG_DONTWAIT);
	struct sockaddr_storage from;
	const uint8_t *p;
	struct ds_rx rx;
	uint32_t n;

	for (;;) {
		int ret = ds_poll(rs);

		if (ret)
			return ret;
		if (ds_readable(rs))
			break;
		if (nb)
			return -EAGAIN;
		ret = wait_for(rs, ds_readable);
		if (ret)
			return ret;
	}
	rx = rs->ds_rx[rs->ds_rx_head];
	if (!(flags & MSG_PEEK))
		rs->ds_rx_head = (rs->ds_rx_head + 1) % RX_RING;
	if (!rx.qp) {
		p = rs->ds_udp_msg + rx.slot;
		n = rx.len;
		from = rs->ds_udp_src;
	} else {
		uint32_t hl;

		p = rx.qp->buf + (size_t)rx.slot * DS_SLOT + DS_GRH;
		hl = get_hdr(p, rx.len, &from); /* checked by valid() */
		p += hl;
		n = rx.len - hl;
	}
	if (n > len)
		n = (uint32_t)len;
	memcpy(buf, p, n);
	copy_src(&from, src, srclen);
	if (flags & MSG_PEEK)
		return n;
	if (!rx.qp)
		rs->ds_udp_held = false;
	else
		ds_post_recv(rx.qp, rx.slot);
	return n;
}
