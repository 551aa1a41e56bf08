/* SPDX-License-Identifier: MIT */
/*
 * ah.c - the exported address-handle verbs, and building an ah_attr from
 * a received UD completion.
 *
 * For a UD receive with IBV_WC_GRH, the first 40 bytes of the receive
 * buffer hold the GRH area. On RoCE v2 over IPv4 that area is 20 unused
 * bytes followed by the packet's IPv4 header; over IPv6 (and on IB) it is
 * the GRH itself. The reply goes to the packet's source; the local GID is
 * the one equal to the packet's destination.
 */
#include <arpa/inet.h>
#include <string.h>

#include "core/core.h"

#define SV_GRH_IPV4_OFFSET 20

SV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ibv_ah *ah = NULL;

	return SV_RET_PTR(sv_ops_of(pd->context)->create_ah(pd, attr, &ah), ah);
}

SV_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	return sv_ret_int(sv_ops_of(ah->context)->destroy_ah(ah));
}

/*
 * Contract: the index of the GID of `port` equal to `gid` into *index;
 * 0, -EINVAL when none matches, or the query's -errno.
 */
static int find_gid_index(struct ibv_context *ctx, uint8_t port, const union ibv_gid *gid,
			  uint8_t *index)
{
	const struct sv_ops *ops = sv_ops_of(ctx);
	struct ibv_port_attr pa;
	struct ibv_gid_entry e;
	int i, ret;

	memset(&pa, 0, sizeof(pa));
	ret = ops->query_port(ctx, port, &pa);
	if (ret)
		return ret;
	for (i = 0; i < pa.gid_tbl_len && i <= UINT8_MAX; i++) {
		memset(&e, 0, sizeof(e));
		if (ops->query_gid_ex(ctx, port, (uint32_t)i, &e))
			continue; /* an empty entry */
		if (!memcmp(e.gid.raw, gid->raw, sizeof(gid->raw))) {
			*index = (uint8_t)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* Contract: ::ffff:addr, addr being 4 bytes in network order. */
static void gid_from_ipv4(union ibv_gid *gid, const uint8_t *addr)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	memcpy(&gid->raw[12], addr, 4);
}

/* Contract: fill the GRH part of `ah` from an IPv4 header; 0 or -errno. */
static int grh_from_ipv4(struct ibv_context *ctx, uint8_t port, const uint8_t *ip,
			 struct ibv_ah_attr *ah)
{
	union ibv_gid local;

	gid_from_ipv4(&ah->grh.dgid, ip + 12); /* the source address */
	gid_from_ipv4(&local, ip + 16); /* the destination address */
	ah->grh.traffic_class = ip[1]; /* TOS */
	ah->grh.flow_label = 0;
	ah->grh.hop_limit = 0xff;
	return find_gid_index(ctx, port, &local, &ah->grh.sgid_index);
}

/* Contract: fill the GRH part of `ah` from an IB/IPv6 GRH; 0 or -errno. */
static int grh_from_ipv6(struct ibv_context *ctx, uint8_t port, const struct ibv_grh *grh,
			 struct ibv_ah_attr *ah)
{
	uint32_t vtf = ntohl(grh->version_tclass_flow);

	ah->grh.dgid = grh->sgid;
	ah->grh.flow_label = vtf & 0xfffff;
	ah->grh.traffic_class = (uint8_t)(vtf >> 20);
	ah->grh.hop_limit = 0xff;
	return find_gid_index(ctx, port, &grh->dgid, &ah->grh.sgid_index);
}

/* Contract: the IP version the GRH area holds: 4, 6, or 0 if neither. */
static int grh_version(const struct ibv_grh *grh)
{
	const uint8_t *b = (const uint8_t *)grh;

	if (b[0] >> 4 == 6)
		return 6;
	if (b[SV_GRH_IPV4_OFFSET] == 0x45) /* version 4, 20-byte header */
		return 4;
	return 0;
}

/* 0, or -1 with errno: EINVAL for a GRH area we cannot read or no local GID. */
SV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
				  struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	int ret = 0;

	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (wc->wc_flags & IBV_WC_GRH) {
		ah_attr->is_global = 1;
		switch (grh ? grh_version(grh) : 0) {
		case 4:
			ret = grh_from_ipv4(context, port_num,
					    (const uint8_t *)grh + SV_GRH_IPV4_OFFSET, ah_attr);
			break;
		case 6:
			ret = grh_from_ipv6(context, port_num, grh, ah_attr);
			break;
		default:
			ret = -EINVAL;
			break;
		}
	}
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

SV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
					       struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr attr;

	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}
