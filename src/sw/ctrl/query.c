/* SPDX-License-Identifier: MIT */
/*
 * query.c - device, port, GID and P_Key queries of the software device.
 *
 * The device has one port (number 1) with one GID, the IPv4-mapped
 * address of its UDP socket (RoCE v2), and one P_Key, the default
 * full-membership 0xffff.
 */
#include <endian.h>
#include <string.h>

#include "sw/sw.h"

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
 * Contract: sv_ops.query_gid_ex. Entry 0 of port 1 is ::ffff:a.b.c.d of
 * the bound address, RoCE v2; anything else is -EINVAL.
 */
int sw_query_gid_ex(struct ibv_context *ctx, uint8_t port, uint32_t index,
		    struct ibv_gid_entry *entry)
{
	const struct sw_dev *dev = sw_dev_of(ctx);
	int ret = check_port(port);

	if (ret)
		return ret;
	if (index >= SW_GID_TBL_LEN)
		return -EINVAL;
	memset(entry, 0, sizeof(*entry));
	entry->gid.raw[10] = 0xff;
	entry->gid.raw[11] = 0xff;
	memcpy(&entry->gid.raw[12], &dev->port.addr.s_addr, 4);
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
