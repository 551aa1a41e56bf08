/* SPDX-License-Identifier: MIT */
/*
 * ah.c - address handles and address vectors of the software device.
 *
 * The port is RoCE v2 over IPv4: every destination is global, its GID is
 * an IPv4-mapped IPv6 address (::ffff:a.b.c.d) and packets go to that
 * address at the device's configured UDP port. On the InfiniBand link
 * layer (SOFTVERBS_LINK_LAYER=ib) the GRH is optional: without one
 * (is_global 0) the DLID names the peer, whose address follows from it
 * (lid.c); the packets are RoCE v2 over UDP all the same. An AH holds a reference
 * on its protection domain proper (a parent domain's base). max_ah is
 * counted per process (the device is one per process).
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "sw/queue.h"

static atomic_uint nah; /* live AHs, against SW_MAX_AH */
static atomic_uint next_ah_handle = 1;

/* Contract: true if `gid` is ::ffff:a.b.c.d. */
static bool gid_is_v4mapped(const union ibv_gid *gid)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return !memcmp(gid->raw, prefix, sizeof(prefix));
}

/* Contract: see queue.h. */
int sw_av_from_attr(struct ibv_context *ctx, const struct ibv_ah_attr *attr, struct sw_av *av)
{
	const struct sw_dev *dev = sw_dev_of(ctx);
	struct in_addr peer;

	if (attr->port_num != 1)
		return -EINVAL;
	if (!attr->is_global) {
		/* RoCE needs the GRH; InfiniBand routes by DLID within the subnet */
		if (!sw_dev_is_ib(dev) || sw_addr_of_lid(dev->port.addr, attr->dlid, &peer))
			return -EINVAL;
		memset(av, 0, sizeof(*av));
		av->dst.sin_family = AF_INET;
		av->dst.sin_port = htons(dev->cfg.udp_port);
		av->dst.sin_addr = peer;
		av->dgid.raw[10] = 0xff;
		av->dgid.raw[11] = 0xff;
		memcpy(&av->dgid.raw[12], &peer.s_addr, 4);
		av->hop_limit = 0xff;
		av->sl = attr->sl;
		return 0;
	}
	if (attr->grh.sgid_index >= SW_GID_TBL_LEN)
		return -EINVAL;
	if (!gid_is_v4mapped(&attr->grh.dgid))
		return -EINVAL;
	memset(av, 0, sizeof(*av));
	av->dst.sin_family = AF_INET;
	av->dst.sin_port = htons(dev->cfg.udp_port);
	memcpy(&av->dst.sin_addr.s_addr, &attr->grh.dgid.raw[12], 4);
	av->dgid = attr->grh.dgid;
	av->flow_label = attr->grh.flow_label;
	av->sgid_index = attr->grh.sgid_index;
	av->hop_limit = attr->grh.hop_limit;
	av->traffic_class = attr->grh.traffic_class;
	av->sl = attr->sl;
	return 0;
}

/* Contract: take one AH off the device limit; -ENOMEM at the limit. */
static int nah_take(void)
{
	unsigned int cur = atomic_load(&nah);

	do {
		if (cur >= SW_MAX_AH)
			return -ENOMEM;
	} while (!atomic_compare_exchange_weak(&nah, &cur, cur + 1));
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
	ret = nah_take();
	if (ret)
		return ret;
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		atomic_fetch_sub(&nah, 1);
		return -ENOMEM;
	}
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
