/* SPDX-License-Identifier: MIT */
/*
 * misc.c - the small exported calls: devices, ports, event names,
 * ECE, user events and rdma-core 65's
 * asynchronous getaddrinfo.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rdmacm/cm.h"

CM_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;
	int ret = cm_init();

	if (num_devices)
		*num_devices = 0;
	if (ret) {
		errno = -ret;
		return NULL;
	}
	list = calloc((size_t)cm.ndev + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < cm.ndev; i++)
		list[i] = cm.dev[i].ctx;
	if (num_devices)
		*num_devices = cm.ndev;
	return list;
}

CM_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

static __be16 port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)(const void *)sa)->sin6_port;
	return 0;
}

CM_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return port_of(&id->route.addr.src_addr);
}

CM_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return port_of(&id->route.addr.dst_addr);
}

CM_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		"RDMA_CM_EVENT_ADDR_RESOLVED",	   "RDMA_CM_EVENT_ADDR_ERROR",
		"RDMA_CM_EVENT_ROUTE_RESOLVED",	   "RDMA_CM_EVENT_ROUTE_ERROR",
		"RDMA_CM_EVENT_CONNECT_REQUEST",   "RDMA_CM_EVENT_CONNECT_RESPONSE",
		"RDMA_CM_EVENT_CONNECT_ERROR",	   "RDMA_CM_EVENT_UNREACHABLE",
		"RDMA_CM_EVENT_REJECTED",	   "RDMA_CM_EVENT_ESTABLISHED",
		"RDMA_CM_EVENT_DISCONNECTED",	   "RDMA_CM_EVENT_DEVICE_REMOVAL",
		"RDMA_CM_EVENT_MULTICAST_JOIN",	   "RDMA_CM_EVENT_MULTICAST_ERROR",
		"RDMA_CM_EVENT_ADDR_CHANGE",	   "RDMA_CM_EVENT_TIMEWAIT_EXIT",
		"RDMA_CM_EVENT_ADDRINFO_RESOLVED", "RDMA_CM_EVENT_ADDRINFO_ERROR",
	};

	if ((unsigned int)event < sizeof(names) / sizeof(names[0]))
		return names[event];
	return "UNKNOWN EVENT";
}

CM_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	int ret;

	if (!ece || !ece->vendor_id || ece->comp_mask)
		return cm_ret(-EINVAL);
	ret = cm_lock_id(id);
	if (ret)
		return cm_ret(ret);
	if (id->qp)
		ret = -EINVAL;
	else
		cm_id_of(id)->local_ece = *ece;
	pthread_mutex_unlock(&cm.lock);
	return cm_ret(ret);
}

CM_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	int ret;

	if (!ece)
		return cm_ret(-EINVAL);
	ret = cm_lock_id(id);
	if (ret)
		return cm_ret(ret);
	if (id->qp) {
		ret = -EINVAL;
	} else {
		*ece = cm_id_of(id)->remote_ece;
		ece->comp_mask = 0;
	}
	pthread_mutex_unlock(&cm.lock);
	return cm_ret(ret);
}

CM_EXPORT int rdma_write_cm_event(struct rdma_cm_id *id, enum rdma_cm_event_type event, int status,
				  uint64_t arg)
{
	struct cm_event *e;
	int ret;

	if (event != RDMA_CM_EVENT_USER)
		return cm_ret(-EINVAL);
	ret = cm_lock_id(id);
	if (ret)
		return cm_ret(ret);
	e = cm_queue_event(cm_id_of(id), event, status, NULL, 0);
	if (e)
		e->ev.param.arg = arg;
	pthread_mutex_unlock(&cm.lock);
	return cm_ret(e ? 0 : -ENOMEM);
}

CM_EXPORT int rdma_resolve_addrinfo(struct rdma_cm_id *id, const char *node, const char *service,
				    const struct rdma_addrinfo *hints)
{
	struct cm_id *cid = cm_id_of(id);
	struct rdma_addrinfo *ai = NULL;
	int ret;

	if (hints && (hints->ai_flags & RAI_SA))
		return cm_ret(-ENOTSUP);
	ret = cm_lock_id(id);
	if (ret)
		return cm_ret(ret);
	if (cid->ai_pending) {
		pthread_mutex_unlock(&cm.lock);
		return cm_ret(-EBUSY);
	}
	cid->ai_pending = true;
	pthread_mutex_unlock(&cm.lock);
	ret = rdma_getaddrinfo(node, service, hints, &ai);
	ret = ret ? (ret == -1 ? errno : -ret) : 0;
	pthread_mutex_lock(&cm.lock);
	cid->pending_ai = ai;
	if (ret)
		cid->ai_pending = false;
	cm_queue_event(cid, ret ? RDMA_CM_EVENT_ADDRINFO_ERROR : RDMA_CM_EVENT_ADDRINFO_RESOLVED,
		       ret ? -ret : 0, NULL, 0);
	pthread_mutex_unlock(&cm.lock);
	if (cid->sync)
		return cm_ret(cm_sync_wait(cid));
	return 0;
}

CM_EXPORT int rdma_query_addrinfo(struct rdma_cm_id *id, struct rdma_addrinfo **info)
{
	struct cm_id *cid = cm_id_of(id);
	int ret;

	if (!info)
		return cm_ret(-EINVAL);
	ret = cm_lock_id(id);
	if (ret)
		return cm_ret(ret);
	if (!cid->ai_pending || !cid->pending_ai) {
		ret = -ENOENT;
	} else {
		*info = cid->pending_ai;
		cid->pending_ai = NULL;
		cid->ai_pending = false;
	}
	pthread_mutex_unlock(&cm.lock);
	return cm_ret(ret);
}
