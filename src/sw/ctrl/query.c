/* SPDX-License-Identifier: MIT */
/*
 * query.c - device, port, GID and P_Key queries of the software device.
 *
 * The device has one port (number 1) with a GID table of one or more
 * RoCE v2 GIDs (ctrl/gid.c: the address of its UDP socket, IPv4-mapped
 * for IPv4, in the slot SOFTVERBS_GID_TABLE says), and one P_Key, the
 * default full-membership 0xffff.
 */
#include <endian.h>
#include <string.h>

#include "sw/ctrl.h"

/* Contract: 0 for the device's only port, else -EINVAL. */
static int check_port(uint8_t port)
{
	return port == 1 ? 0 : -EINVAL;
}

/* Contract: sv_ops.query_device_ex. Never fails. */
int sw_query_device_ex(struct ibv_context *ctx, struct ibv_device_attr_ex *attr)
{
	sw_device_fill_attr(sw_dev_of(ctx), attr);
	return 0;
}

/* Contract: sv_ops.query_port; -EINVAL for any port but 1. */
int sw_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	int ret = check_port(port);

	if (ret)
		return ret;
	sw_device_fill_port(sw_dev_of(ctx), attr);
	return 0;
}

/*
 * Contract: sv_ops.query_gid_ex. A listed slot of port 1's GID table
 * (ctrl/gid.c): its address, RoCE v2, the interface owning it; an empty
 * slot below gid_tbl_len is -ENODATA (ibv_query_gid reads it as the zero
 * GID); anything else is -EINVAL.
 */
int sw_query_gid_ex(struct ibv_context *ctx, uint8_t port, uint32_t index,
		    struct ibv_gid_entry *entry)
{
	const struct sw_dev *dev = sw_dev_of(ctx);
	const struct sw_gid_slot *g;
	int ret = check_port(port);

	if (ret)
		return ret;
	if (index >= dev->port.gid_tbl_len)
		return -EINVAL;
	g = sw_port_gid(&dev->port, index);
	if (!g)
		return -ENODATA;
	memset(entry, 0, sizeof(*entry));
	entry->gid = g->gid;
	entry->gid_index = index;
	entry->port_num = port;
	/* the same value on the InfiniBand link layer, as an IB GID (lid.c) */
	entry->gid_type = sw_dev_is_ib(dev) ? IBV_GID_TYPE_IB : IBV_GID_TYPE_ROCE_V2;
	entry->ndev_ifindex = dev->port.ifindex;
	return 0;
}

/* Contract: sv_ops.query_pkey. Index 0 of port 1 is 0xffff; else -EINVAL. */
int sw_query_pkey(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey)
{
	int ret = check_port(port);

	(void)ctx;
	if (ret)
		return ret;
	if (index < 0 || index >= SW_MAX_PKEYS)
		return -EINVAL;
	*pkey = htobe16(SW_DEFAULT_PKEY);
	return 0;
}
