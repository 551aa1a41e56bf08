/* SPDX-License-Identifier: MIT */
/*
 * mcast.c - multicast joins on RoCE: rdma_join_multicast,
 * rdma_join_multicast_ex and rdma_leave_multicast.
 *
 * RoCE has no SA to ask: as in the kernel's RoCE path, a join is local.
 * The group's GID is the IPv4-mapped form of the IPv4 multicast address
 * (RoCE v2); the id's QP, if it has one and the join is not send-only,
 * is attached to it (ibv_attach_mcast: the device then receives the
 * group's datagrams, transport/mcast.c); and RDMA_CM_EVENT_MULTICAST_JOIN
 * is queued at once with the UD parameters to send to the group: an AH
 * attribute to the group's GID, remote QPN 0xffffff and the port space's
 * Q_Key (RDMA_UDP_QKEY), the caller's context in param.ud.private_data
 * (as librdmacm hands it back). A failed attach turns the event into
 * RDMA_CM_EVENT_MULTICAST_ERROR with the errno as status, as librdmacm
 * does. Leaving detaches the QP and forgets the join; an address never
 * joined is EADDRNOTAVAIL.
 *
 * Rules, as librdmacm and the kernel give them: the id must have a
 * device and be bound or resolved, and be of a UD port space (EINVAL);
 * the address must be an IPv4 (or IPv4-mapped) multicast address
 * (EINVAL; the device's CM is IPv4 only); join_multicast_ex refuses
 * unknown comp_mask bits (ENOTSUP), and wants ADDRESS and JOIN_FLAGS with
 * a known flag (EINVAL).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rdmacm/cm.h"

/* The IPv4 multicast group of `addr` as a RoCE v2 GID into *mgid; -EINVAL if it is none. */
static int mgid_of(const struct sockaddr *addr, union ibv_gid *mgid)
{
	const uint8_t *a;

	memset(mgid, 0, sizeof(*mgid));
	if (addr->sa_family == AF_INET) {
		a = (const uint8_t *)&((const struct sockaddr_in *)(const void *)addr)->sin_addr;
	} else if (addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)addr;

		if (!IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
			return -EINVAL;
		a = &s6->sin6_addr.s6_addr[12];
	} else {
		return -EINVAL;
	}
	if ((a[0] & 0xf0) != 0xe0)
		return -EINVAL; /* not 224.0.0.0/4 */
	mgid->raw[10] = mgid->raw[11] = 0xff;
	memcpy(&mgid->raw[12], a, 4);
	return 0;
}

/* The length of a sockaddr of a family the CM knows, else 0. */
static socklen_t addr_len(const struct sockaddr *addr)
{
	if (addr->sa_family == AF_INET)
		return sizeof(struct sockaddr_in);
	if (addr->sa_family == AF_INET6)
		return sizeof(struct sockaddr_in6);
	return 0;
}

/* Does another join of `cid` than `skip` hold an attachment to `mgid`? Lock held. */
static bool attached_elsewhere(const struct cm_id *cid, const struct cm_mc *skip,
			       const union ibv_gid *mgid)
{
	for (const struct cm_mc *m = cid->mcs; m; m = m->next)
		if (m != skip && m->attached && !memcmp(m->mgid.raw, mgid->raw, sizeof(mgid->raw)))
			return true;
	return false;
}

/* The MULTICAST_JOIN (or _ERROR) event of join `mc`, its attach status `err`; lock held. */
static int queue_join(struct cm_id *cid, struct cm_mc *mc, int err)
{
	struct cm_event *e;
	struct ibv_ah_attr *ah;

	e = cm_queue_event(cid, err ? RDMA_CM_EVENT_MULTICAST_ERROR : RDMA_CM_EVENT_MULTICAST_JOIN,
			   err, NULL, 0);
	if (!e)
		return -ENOMEM;
	ah = &e->ev.param.ud.ah_attr;
	ah->is_global = 1;
	ah->grh.dgid = mc->mgid;
	ah->grh.sgid_index = 0;
	ah->grh.hop_limit = CM_HOP_LIMIT;
	ah->grh.traffic_class = cid->tos;
	ah->port_num = cid->id.port_num ? cid->id.port_num : 1;
	e->ev.param.ud.qp_num = 0xffffff;
	e->ev.param.ud.qkey = RDMA_UDP_QKEY;
	e->ev.param.ud.private_data = mc->context;
	return 0;
}

/* The join itself, for both calls. */
static int join(struct rdma_cm_id *id, const struct sockaddr *addr, uint8_t flags, void *context)
{
	struct cm_id *cid = cm_id_of(id);
	struct cm_mc *mc;
	union ibv_gid mgid;
	int ret, err = 0;

	ret = mgid_of(addr, &mgid);
	if (ret)
		return ret;
	ret = cm_lock_id(id);
	if (ret)
		return ret;
	if (!cid->dev || (cid->state != CMA_ADDR_BOUND && cid->state != CMA_ADDR_RESOLVED) ||
	    id->qp_type != IBV_QPT_UD) {
		ret = -EINVAL;
		goto out;
	}
	mc = calloc(1, sizeof(*mc));
	if (!mc) {
		ret = -ENOMEM;
		goto out;
	}
	mc->addrlen = addr_len(addr);
	memcpy(&mc->addr, addr, mc->addrlen);
	mc->mgid = mgid;
	mc->join_flags = flags;
	mc->context = context;
	if (id->qp && flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
		err = ibv_attach_mcast(id->qp, &mgid, 0);
		mc->attached = !err;
	}
	ret = queue_join(cid, mc, err);
	if (ret) {
		if (mc->attached && !attached_elsewhere(cid, mc, &mgid))
			ibv_detach_mcast(id->qp, &mgid, 0);
		free(mc);
		goto out;
	}
	mc->next = cid->mcs;
	cid->mcs = mc;
out:
	pthread_mutex_unlock(&cm.lock);
	if (!ret && cid->sync)
		ret = cm_sync_wait(cid);
	return ret;
}

CM_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	if (!id || !addr)
		return cm_ret(-EINVAL);
	return cm_ret(join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context));
}

CM_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id,
				     struct rdma_cm_join_mc_attr_ex *mc_join_attr, void *context)
{
	if (!id || !mc_join_attr)
		return cm_ret(-EINVAL);
	if (mc_join_attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return cm_ret(-ENOTSUP);
	if (!(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) || !mc_join_attr->addr ||
	    !(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    mc_join_attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return cm_ret(-EINVAL);
	return cm_ret(join(id, mc_join_attr->addr, (uint8_t)mc_join_attr->join_flags, context));
}

CM_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_id *cid = cm_id_of(id);
	struct cm_mc **pp, *mc = NULL;
	socklen_t len;
	int ret;

	if (!id || !addr)
		return cm_ret(-EINVAL);
	len = addr_len(addr);
	ret = cm_lock_id(id);
	if (ret)
		return cm_ret(ret);
	for (pp = &cid->mcs; *pp; pp = &(*pp)->next)
		if ((*pp)->addrlen == len && len && !memcmp(&(*pp)->addr, addr, len)) {
			mc = *pp;
			*pp = mc->next;
			break;
		}
	if (!mc) {
		pthread_mutex_unlock(&cm.lock);
		return cm_ret(-EADDRNOTAVAIL); /* never joined */
	}
	if (mc->attached && id->qp && !attached_elsewhere(cid, mc, &mc->mgid))
		ibv_detach_mcast(id->qp, &mc->mgid, 0);
	pthread_mutex_unlock(&cm.lock);
	free(mc);
	return 0;
}

/* Contract: see cm.h. */
void cm_mc_free_all(struct cm_id *cid)
{
	while (cid->mcs) {
		struct cm_mc *mc = cid->mcs;

		cid->mcs = mc->next;
		free(mc);
	}
}

/* Contract: see cm.h. */
void cm_mc_qp_changed(struct cm_id *cid)
{
	struct ibv_qp *qp = cid->id.qp;

	for (struct cm_mc *m = cid->mcs; m; m = m->next) {
		bool want = qp && m->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;

		m->attached = want && !ibv_attach_mcast(qp, &m->mgid, 0);
	}
}
