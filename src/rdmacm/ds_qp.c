/* SPDX-License-Identifier: MIT */
/*
 * ds_qp.c - a datagram rsocket's UD QPs and peers (contract in rs.h).
 *
 * Each local source address gets one UD QP with a CM id of its own
 * (RDMA_PS_UDP, bound to the address), a CQ for its sends and receives
 * and one registered buffer: DS_RQ receive slots of DS_SLOT bytes (GRH,
 * then the message), then DS_SQ send slots of DS_MSG_MAX bytes. The UDP
 * socket, when still unbound, is bound to the first QP's address, so the
 * address our ds_headers name is the one our UDP messages come from.
 *
 * A peer is found by its address. A new one gets its AH at once: a
 * synchronous CM id resolves the address (which also picks the local
 * source, hence our QP) and the route, whose path gives the GRH fields.
 * Its QPN stays 0 until the peer tells it over UDP (ds_data.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmacm/rs.h"

/* Contract: see rs.h. */
socklen_t ds_addr_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* Same family and IP; ports compared too when `port`. */
static bool same_addr(const struct sockaddr *a, const struct sockaddr *b, bool port)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const struct sockaddr_in *)a;
		const struct sockaddr_in *y = (const struct sockaddr_in *)b;

		return x->sin_addr.s_addr == y->sin_addr.s_addr &&
		       (!port || x->sin_port == y->sin_port);
	}
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)a;
		const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)b;

		return !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) &&
		       (!port || x->sin6_port == y->sin6_port);
	}
	return false;
}

static void set_port(struct sockaddr *sa, uint16_t port_be)
{
	if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = port_be;
	else
		((struct sockaddr_in *)sa)->sin_port = port_be;
}

/* The port (both families keep it in the first two bytes after the family). */
static uint16_t get_port(const struct sockaddr *sa)
{
	uint16_t port = 0;

	memcpy(&port, sa->sa_data, sizeof(port));
	return port;
}

static bool is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, &in6addr_any,
			       sizeof(in6addr_any));
	return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
}

/* The UDP socket's address, bound to `ip` (port 0) first if unbound. */
static int udp_name(struct rsocket *rs, const struct sockaddr *ip, struct sockaddr_storage *out)
{
	socklen_t len = sizeof(*out);

	if (getsockname(rs->fd, (struct sockaddr *)out, &len))
		return -errno;
	if (get_port((struct sockaddr *)out))
		return 0;
	memcpy(out, ip, ds_addr_len(ip));
	set_port((struct sockaddr *)out, 0);
	if (bind(rs->fd, (struct sockaddr *)out, ds_addr_len(ip)))
		return -errno;
	len = sizeof(*out);
	return getsockname(rs->fd, (struct sockaddr *)out, &len) ? -errno : 0;
}

static void qp_free(struct ds_qp *qp)
{
	if (qp->id && qp->id->qp)
		rdma_destroy_qp(qp->id);
	if (qp->cq)
		ibv_destroy_cq(qp->cq);
	if (qp->cch)
		ibv_destroy_comp_channel(qp->cch);
	if (qp->mr)
		ibv_dereg_mr(qp->mr);
	free(qp->buf);
	if (qp->pd)
		ibv_dealloc_pd(qp->pd);
	if (qp->id)
		rdma_destroy_id(qp->id);
	free(qp);
}

/* The verbs side of a new QP whose id is bound: buffers, CQ, QP, receives. */
static int qp_create(struct ds_qp *qp)
{
	size_t size = (size_t)DS_RQ * DS_SLOT + (size_t)DS_SQ * DS_MSG_MAX;
	struct ibv_qp_init_attr a = {
		.qp_type = IBV_QPT_UD,
		.cap = {.max_send_wr = DS_SQ,
			.max_recv_wr = DS_RQ,
			.max_send_sge = 1,
			.max_recv_sge = 1},
	};
	struct ibv_context *verbs = qp->id->verbs;

	qp->pd = ibv_alloc_pd(verbs);
	qp->cch = qp->pd ? ibv_create_comp_channel(verbs) : NULL;
	if (!qp->cch)
		return errno ? -errno : -ENOMEM;
	fcntl(qp->cch->fd, F_SETFL, fcntl(qp->cch->fd, F_GETFL) | O_NONBLOCK);
	qp->cq = ibv_create_cq(verbs, DS_RQ + DS_SQ, qp, qp->cch, 0);
	qp->buf = qp->cq ? calloc(1, size) : NULL;
	qp->mr = qp->buf ? ibv_reg_mr(qp->pd, qp->buf, size, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!qp->mr)
		return errno ? -errno : -ENOMEM;
	a.send_cq = a.recv_cq = qp->cq;
	if (rdma_create_qp(qp->id, qp->pd, &a))
		return -errno;
	for (uint32_t i = 0; i < DS_RQ; i++) {
		int ret = ds_post_recv(qp, i);

		if (ret)
			return ret;
	}
	qp->sfree = DS_SQ;
	return 0;
}

/* Contract: see rs.h. */
int ds_post_recv(struct ds_qp *qp, uint32_t slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(qp->buf + (size_t)slot * DS_SLOT),
		.length = DS_SLOT,
		.lkey = qp->mr->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;

	return -ibv_post_recv(qp->id->qp, &wr, &bad);
}

/* Contract: see rs.h. */
int ds_get_qp(struct rsocket *rs, const struct sockaddr *ip, struct ds_qp **out)
{
	struct sockaddr_storage name = {0}, bind_to = {0};
	struct ds_qp *qp;
	int n = 0, ret;

	for (qp = rs->ds_qps; qp; qp = qp->next, n++) {
		if (same_addr((struct sockaddr *)&qp->src, ip, false)) {
			*out = qp;
			return 0;
		}
	}
	if (n >= DS_MAX_QPS)
		return -EADDRNOTAVAIL;
	ret = udp_name(rs, ip, &name);
	if (ret)
		return ret;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	memcpy(&qp->src, ip, ds_addr_len(ip));
	set_port((struct sockaddr *)&qp->src, get_port((struct sockaddr *)&name));
	memcpy(&bind_to, ip, ds_addr_len(ip));
	set_port((struct sockaddr *)&bind_to, 0);
	ret = rdma_create_id(NULL, &qp->id, qp, RDMA_PS_UDP) ? -errno : 0;
	if (!ret)
		ret = rdma_bind_addr(qp->id, (struct sockaddr *)&bind_to) ? -errno : 0;
	if (!ret)
		ret = qp_create(qp);
	if (ret) {
		qp_free(qp);
		return ret;
	}
	qp->next = rs->ds_qps;
	rs->ds_qps = qp;
	*out = qp;
	return 0;
}

/* Resolve `addr` (address, then route) on a new synchronous id; our source
 * is the UDP socket's IP when it is bound to one. */
static int resolve(struct rsocket *rs, const struct sockaddr *addr, struct rdma_cm_id **out)
{
	struct sockaddr_storage src = {0};
	socklen_t len = sizeof(src);
	struct sockaddr *s = NULL;
	struct rdma_cm_id *id;
	int ret;

	if (!getsockname(rs->fd, (struct sockaddr *)&src, &len) &&
	    src.ss_family == addr->sa_family && !is_any((struct sockaddr *)&src)) {
		set_port((struct sockaddr *)&src, 0);
		s = (struct sockaddr *)&src;
	}
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP))
		return -errno;
	ret = rdma_resolve_addr(id, s, (struct sockaddr *)addr, 2000) ? -errno : 0;
	if (!ret)
		ret = rdma_resolve_route(id, 2000) ? -errno : 0;
	if (!ret && !id->route.num_paths)
		ret = -EHOSTUNREACH;
	if (ret) {
		rdma_destroy_id(id);
		return ret;
	}
	*out = id;
	return 0;
}

/* Contract: see rs.h. */
int ds_get_dest(struct rsocket *rs, const struct sockaddr *addr, struct ds_dest **out)
{
	struct ibv_ah_attr a = {.is_global = 1, .port_num = 1};
	struct ibv_sa_path_rec *path;
	struct rdma_cm_id *id = NULL;
	struct ds_dest *d;
	int ret;

	for (d = rs->ds_dests; d; d = d->next) {
		if (same_addr((struct sockaddr *)&d->addr, addr, true)) {
			*out = d;
			return 0;
		}
	}
	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return -EAFNOSUPPORT;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	memcpy(&d->addr, addr, ds_addr_len(addr));
	ret = resolve(rs, addr, &id);
	if (ret || !id) {
		free(d);
		return ret ? ret : -EHOSTUNREACH;
	}
	path = id->route.path_rec;
	ret = path ? ds_get_qp(rs, rdma_get_local_addr(id), &d->qp) : -EHOSTUNREACH;
	if (!ret) {
		a.grh.dgid = path->dgid;
		a.grh.hop_limit = path->hop_limit ? path->hop_limit : 1;
		a.grh.traffic_class = path->traffic_class;
		a.sl = path->sl;
		d->ah = ibv_create_ah(d->qp->pd, &a);
		if (!d->ah)
			ret = errno ? -errno : -ENOMEM;
	}
	rdma_destroy_id(id);
	if (ret) {
		free(d);
		return ret;
	}
	d->next = rs->ds_dests;
	rs->ds_dests = d;
	*out = d;
	return 0;
}

/* Contract: see rs.h. */
void ds_free_qps(struct rsocket *rs)
{
	while (rs->ds_dests) {
		struct ds_dest *d = rs->ds_dests;

		rs->ds_dests = d->next;
		if (d->ah)
			ibv_destroy_ah(d->ah);
		free(d);
	}
	rs->ds_conn = NULL;
	while (rs->ds_qps) {
		struct ds_qp *qp = rs->ds_qps;

		rs->ds_qps = qp->next;
		qp_free(qp);
	}
}
