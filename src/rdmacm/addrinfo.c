/* SPDX-License-Identifier: MIT */
/*
 * addrinfo.c - rdma_getaddrinfo / rdma_freeaddrinfo, and the endpoint
 * calls built on them: rdma_create_ep, rdma_destroy_ep, rdma_get_request.
 *
 * rdma_getaddrinfo is getaddrinfo(3) with the hints translated (QP type to
 * socket type, port space to protocol) and only the first result kept;
 * with neither node nor service, the result is the hints themselves (their
 * flags, family, QP type, port space and both addresses).
 * There is no SA and no ibacm: ai_route and ai_connect stay empty, and
 * RAI_SA is refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "rdmacm/cm.h"

static int qpt_to_socktype(int qpt)
{
	return qpt == IBV_QPT_UD ? SOCK_DGRAM : SOCK_STREAM;
}

static void hints_to_ai(const struct rdma_addrinfo *h, struct addrinfo *ai)
{
	memset(ai, 0, sizeof(*ai));
	if (!h)
		return;
	if (h->ai_flags & RAI_PASSIVE)
		ai->ai_flags |= AI_PASSIVE;
	if (h->ai_flags & RAI_NUMERICHOST)
		ai->ai_flags |= AI_NUMERICHOST;
	if (h->ai_family != AF_IB)
		ai->ai_family = h->ai_family;
	if (h->ai_qp_type)
		ai->ai_socktype = qpt_to_socktype(h->ai_qp_type);
	switch (h->ai_port_space) {
	case RDMA_PS_TCP:
		ai->ai_protocol = IPPROTO_TCP;
		break;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		ai->ai_protocol = IPPROTO_UDP;
		break;
	case RDMA_PS_IB:
		ai->ai_protocol = ai->ai_socktype == SOCK_DGRAM ? IPPROTO_UDP : IPPROTO_TCP;
		break;
	default:
		break;
	}
}

static int copy_addr(struct sockaddr **dst, socklen_t *dlen, const struct sockaddr *src,
		     socklen_t len)
{
	*dst = malloc(len);
	if (!*dst)
		return -ENOMEM;
	memcpy(*dst, src, len);
	*dlen = len;
	return 0;
}

static int convert(const struct addrinfo *ai, const struct rdma_addrinfo *h,
		   struct rdma_addrinfo *r)
{
	int ret;

	r->ai_family = ai->ai_family;
	r->ai_qp_type = h && h->ai_qp_type	      ? h->ai_qp_type :
			ai->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD :
							IBV_QPT_RC;
	r->ai_port_space = h && h->ai_port_space ? h->ai_port_space :
			   ai->ai_protocol == IPPROTO_UDP || ai->ai_socktype == SOCK_DGRAM ?
						   RDMA_PS_UDP :
						   RDMA_PS_TCP;
	if (h && (h->ai_flags & RAI_PASSIVE)) {
		r->ai_flags = RAI_PASSIVE;
		ret = copy_addr(&r->ai_src_addr, &r->ai_src_len, ai->ai_addr, ai->ai_addrlen);
		if (!ret && ai->ai_canonname && !(r->ai_src_canonname = strdup(ai->ai_canonname)))
			ret = -ENOMEM;
	} else {
		ret = copy_addr(&r->ai_dst_addr, &r->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
		if (!ret && ai->ai_canonname && !(r->ai_dst_canonname = strdup(ai->ai_canonname)))
			ret = -ENOMEM;
		if (!ret && h && h->ai_src_len && h->ai_src_addr)
			ret = copy_addr(&r->ai_src_addr, &r->ai_src_len, h->ai_src_addr,
					h->ai_src_len);
	}
	return ret;
}

CM_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			       const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct addrinfo ai_hints, *ai;
	struct rdma_addrinfo *r;
	int ret;

	if (!res || (!node && !service && !hints))
		return cm_ret(-EINVAL);
	if (hints && (hints->ai_flags & RAI_SA))
		return cm_ret(node || (hints->ai_flags & RAI_DNS) ? -EOPNOTSUPP : -ENOENT);
	r = calloc(1, sizeof(*r));
	if (!r)
		return cm_ret(-ENOMEM);
	if (!node && !service) { /* the hints alone */
		r->ai_flags = hints->ai_flags;
		r->ai_family = hints->ai_family;
		r->ai_qp_type = hints->ai_qp_type;
		r->ai_port_space = hints->ai_port_space;
		/* both addresses of the hints: libfabric's rxm passes its source this way */
		if ((hints->ai_src_len && hints->ai_src_addr &&
		     copy_addr(&r->ai_src_addr, &r->ai_src_len, hints->ai_src_addr,
			       hints->ai_src_len)) ||
		    (hints->ai_dst_len && hints->ai_dst_addr &&
		     copy_addr(&r->ai_dst_addr, &r->ai_dst_len, hints->ai_dst_addr,
			       hints->ai_dst_len))) {
			rdma_freeaddrinfo(r);
			return cm_ret(-ENOMEM);
		}
		*res = r;
		return 0;
	}
	hints_to_ai(hints, &ai_hints);
	ret = getaddrinfo(node, service, &ai_hints, &ai);
	if (ret) {
		free(r);
		return ret; /* the EAI_* code */
	}
	ret = convert(ai, hints, r);
	freeaddrinfo(ai);
	if (ret) {
		rdma_freeaddrinfo(r);
		return cm_ret(ret);
	}
	*res = r;
	return 0;
}

CM_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *n = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = n;
	}
}

CM_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;
	int ret;

	if (!id || !res)
		return cm_ret(-EINVAL);
	ret = rdma_create_id(NULL, &cid, NULL, (enum rdma_port_space)res->ai_port_space);
	if (ret)
		return ret;
	cid->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	if (res->ai_flags & RAI_PASSIVE) {
		ret = rdma_bind_addr(cid, res->ai_src_addr);
		if (ret)
			goto err;
		if (qp_init_attr) {
			struct ibv_qp_init_attr *a = malloc(sizeof(*a));

			if (!a) {
				errno = ENOMEM;
				goto err;
			}
			*a = *qp_init_attr;
			a->qp_type = (enum ibv_qp_type)res->ai_qp_type;
			cm_id_of(cid)->ep_qp_attr = a;
		}
		if (pd)
			cid->pd = pd;
		*id = cid;
		return 0;
	}
	ret = rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000);
	if (ret)
		goto err;
	ret = rdma_resolve_route(cid, 2000);
	if (ret)
		goto err;
	if (qp_init_attr) {
		qp_init_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
		ret = rdma_create_qp(cid, pd, qp_init_attr);
		if (ret)
			goto err;
	}
	*id = cid;
	return 0;
err : {
	int e = errno;

	rdma_destroy_ep(cid);
	errno = e;
	return -1;
}
}

CM_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	int ret;

	pthread_mutex_lock(&cm.lock);
	ret = cm_id_check(id);
	pthread_mutex_unlock(&cm.lock);
	if (ret == -EINVAL)
		return; /* not a live id: nothing of it is read */
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	pthread_mutex_lock(&cm.lock);
	cm_destroy_lib_cqs(cm_id_of(id));
	pthread_mutex_unlock(&cm.lock);
	rdma_destroy_id(id);
}

CM_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cm_id *l = cm_id_of(listen);
	struct rdma_cm_event *ev;
	struct cm_channel *priv;
	struct cm_id *nid;
	int ret;

	if (!id)
		return cm_ret(-EINVAL);
	ret = cm_lock_id(listen);
	if (ret)
		return cm_ret(ret);
	if (!l->sync)
		ret = -EINVAL;
	pthread_mutex_unlock(&cm.lock);
	if (ret)
		return cm_ret(ret);
	if (listen->event) {
		cm_ack_event(listen->event);
		listen->event = NULL;
	}
	do
		ret = cm_get_event(cm_chan_of(listen), &ev);
	while (ret == -EINTR);
	if (ret)
		return cm_ret(ret);
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		ret = -ECONNREFUSED;
	else if (ev->status)
		ret = ev->status < 0 ? ev->status : -ev->status;
	else if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		ret = -EINVAL;
	if (ret) {
		listen->event = ev;
		return cm_ret(ret);
	}
	nid = cm_id_of(ev->id);
	ret = cm_channel_create(true, &priv);
	if (ret) {
		cm_ack_event(ev);
		return cm_ret(ret);
	}
	pthread_mutex_lock(&cm.lock);
	nid->id.channel = &priv->ch;
	nid->sync = true;
	pthread_mutex_unlock(&cm.lock);
	nid->id.event = ev;
	if (l->ep_qp_attr) {
		struct ibv_qp_init_attr a = *l->ep_qp_attr;

		ret = rdma_create_qp(&nid->id, listen->pd, &a);
		if (ret) {
			int e = errno;

			rdma_destroy_id(&nid->id);
			errno = e;
			return -1;
		}
	}
	*id = &nid->id;
	return 0;
}
