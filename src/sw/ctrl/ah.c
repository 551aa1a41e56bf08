/* SPDX-License-Identifier: MIT */
/*
 * ah.c - address handles and address vectors of the software device.
 *
 * The port is RoCE v2: every destination is global, its GID an IPv6
 * address or an IPv4-mapped one (::ffff:a.b.c.d), and packets go to that
 * address at the device's configured UDP port, from the socket of the
 * source GID (sgid_index). On the InfiniBand link layer
 * (SOFTVERBS_LINK_LAYER=ib) the GRH is optional: without one (is_global
 * 0) the DLID names the peer, whose address follows from it (lid.c); the
 * packets are RoCE v2 over UDP all the same. An AH holds a reference
 * on its protection domain proper (a parent domain's base). max_ah is
 * counted per process (the device is one per process).
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "sw/ctrl.h"

static atomic_uint nah; /* live AHs, against SW_MAX_AH */
static atomic_uint next_ah_handle = 1;

/*
 * Contract: see queue.h. The destination must be reachable from the
 * source GID's socket: the same family (an IPv4-mapped dgid from an IPv4
 * source, an IPv6 one from an IPv6 source), not zero; a link-local
 * destination, and an IPv6 multicast one (sent to its group: the
 * kernel's core resolves a multicast DGID too), goes out on the source's
 * interface. Without a
 * GRH (InfiniBand only) the packets leave from the device's address.
 */
int sw_av_from_attr(struct ibv_context *ctx, const struct ibv_ah_attr *attr, struct sw_av *av)
{
	const struct sw_dev *dev = sw_dev_of(ctx);
	const struct sw_gid_slot *sg;
	const union sw_sa *src;
	union sw_sa dst;

	if (attr->port_num != 1)
		return -EINVAL;
	if (!attr->is_global) {
		/* RoCE needs the GRH; InfiniBand routes by DLID within the subnet */
		if (!sw_dev_is_ib(dev) || sw_addr_of_lid(&dev->port.local, attr->dlid, &dst))
			return -EINVAL;
		memset(av, 0, sizeof(*av));
		av->dst = dst;
		sw_sa_gid(&dst, &av->dgid);
		av->sgid_index = (uint8_t)dev->port.addr_slot;
		av->hop_limit = 0xff;
		av->sl = attr->sl;
		return 0;
	}
	sg = sw_port_gid(&dev->port, attr->grh.sgid_index);
	if (!sg)
		return -EINVAL;
	src = sw_port_addr_of(&dev->port, sg);
	sw_sa_from_gid(&dst, &attr->grh.dgid, dev->cfg.udp_port,
		       sw_sa_is_v6(src) ? src->v6.sin6_scope_id : 0);
	if (dst.sa.sa_family != src->sa.sa_family || sw_gid_is_zero(&attr->grh.dgid))
		return -EINVAL;
	if (sw_sa_is_v6(&dst) && !dst.v6.sin6_scope_id &&
	    (IN6_IS_ADDR_LINKLOCAL(&dst.v6.sin6_addr) || IN6_IS_ADDR_MULTICAST(&dst.v6.sin6_addr)))
		dst.v6.sin6_scope_id = dev->port.ifindex;
	memset(av, 0, sizeof(*av));
	av->dst = dst;
	av->dgid = attr->grh.dgid;
	av->flow_label = attr->grh.flow_label;
	av->sgid_index = attr->grh.sgid_index;
	av->hop_limit = attr->grh.hop_limit;
	av->traffic_class = attr->grh.traffic_class;
	av->sl = attr->sl;
	return 0;
}

/*
 * Contract: sv_ops.create_ah. -EINVAL for a missing attr or an attr that
 * sw_av_from_attr() refuses, -ENOMEM past max_ah. The PD gains a reference.
 */
int sw_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr, struct ibv_ah **out)
{
	struct sw_ah *ah;
	struct sw_av av;
	int ret;

	if (!attr)
		return -EINVAL;
	ret = sw_av_from_attr(pd->context, attr, &av);
	if (ret)
		return ret;
	ah = sw_limit_calloc(&nah, SW_MAX_AH, sizeof(*ah));
	if (!ah)
		return -ENOMEM;
	ah->ibv.context = pd->context;
	ah->ibv.pd = pd;
	ah->ibv.handle = atomic_fetch_add(&next_ah_handle, 1);
	ah->av = av;
	ah->attr = *attr;
	ah->pd = sw_pd_base(pd);
	atomic_fetch_add(&ah->pd->usecnt, 1);
	*out = &ah->ibv;
	return 0;
}

/* Contract: sv_ops.destroy_ah. Never fails. */
int sw_destroy_ah(struct ibv_ah *ibah)
{
	struct sw_ah *ah = sw_ah(ibah);

	/* ibah->pd may be a parent domain that is gone already */
	atomic_fetch_sub(&ah->pd->usecnt, 1);
	free(ah);
	atomic_fetch_sub(&nah, 1);
	return 0;
}
