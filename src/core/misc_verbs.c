/* SPDX-License-Identifier: MIT */
/*
 * misc_verbs.c - exported verbs that neither dispatch to a device object
 * nor belong to a family the software device implements:
 *
 *  - ibv_query_port_speed() and ibv_dm_export_dmabuf_fd() (IBVERBS_1.16);
 *  - object import (IBVERBS_1.10 and 1.13): rdma-core shares PDs, MRs
 *    and DM between processes through a uverbs command fd; a softverbs
 *    context has none (cmd_fd is an empty memfd), so every import fails with
 *    EOPNOTSUPP and there is never anything to unimport;
 *  - completion counters (IBVERBS_1.18): the software device has none,
 *    so every call fails with EOPNOTSUPP;
 *  - ibv_resolve_eth_l2_from_gid() (IBVERBS_1.1): the software device's
 *    GIDs are UDP endpoints, not Ethernet neighbours; there is no MAC.
 */
#include <string.h>

#include "core/core.h"

/* ---- port speed ----------------------------------------------------------- */

/* Contract: lanes of an IB PortInfo link width code; 0 if unknown. */
static unsigned int width_lanes(uint8_t width)
{
	switch (width) {
	case 1:
		return 1;
	case 2:
		return 4;
	case 4:
		return 8;
	case 8:
		return 12;
	case 16:
		return 2;
	default:
		return 0;
	}
}

/*
 * Contract: data rate of one lane in units of 100 Mb/s for an IB PortInfo
 * speed code (active_speed, or active_speed_ex for codes beyond 8 bits),
 * as the kernel's sysfs "rate" counts it (FDR 14.0625 Gb/s is 140); 0 if
 * unknown.
 */
static uint64_t lane_rate(uint32_t speed)
{
	switch (speed) {
	case 1: /* SDR */
		return 25;
	case 2: /* DDR */
		return 50;
	case 4: /* QDR */
	case 8: /* FDR10 */
		return 100;
	case 16: /* FDR */
		return 140;
	case 32: /* EDR */
		return 250;
	case 64: /* HDR */
		return 500;
	case 128: /* NDR */
		return 1000;
	case 256: /* XDR */
		return 2000;
	default:
		return 0;
	}
}

/*
 * The port's effective data rate in units of 100 Mb/s (rdma-core's unit:
 * 1000 is 100 Gb/s), as lanes times the lane rate of its active width and
 * speed; 0 while the port reports no width or speed. 0 or a positive
 * errno: EINVAL for a port out of range, EOPNOTSUPP for a width or speed
 * code it cannot convert.
 */
SV_EXPORT int ibv_query_port_speed(struct ibv_context *context, uint32_t port_num,
				   uint64_t *port_speed)
{
	struct ibv_port_attr attr;
	unsigned int lanes;
	uint32_t speed;
	uint64_t rate;
	int ret;

	if (!port_speed || port_num == 0 || port_num > UINT8_MAX)
		return EINVAL;
	memset(&attr, 0, sizeof(attr));
	ret = sv_ops_of(context)->query_port(context, (uint8_t)port_num, &attr);
	if (ret)
		return sv_ret_int(ret);
	speed = attr.active_speed_ex ? attr.active_speed_ex : attr.active_speed;
	if (!attr.active_width || !speed) {
		*port_speed = 0;
		return 0;
	}
	lanes = width_lanes(attr.active_width);
	rate = lane_rate(speed);
	if (!lanes || !rate)
		return EOPNOTSUPP;
	*port_speed = lanes * rate;
	return 0;
}

/* ---- device memory --------------------------------------------------------- */

/*
 * Through the context's verbs_context op, like every other DM verb (they
 * are inline). The software device has no device memory, so no ibv_dm of
 * it exists; the op of any context answers for its own objects.
 */
SV_EXPORT int ibv_dm_export_dmabuf_fd(struct ibv_dm *dm)
{
	struct verbs_context *vctx = verbs_get_ctx_op(dm->context, dm_export_dmabuf_fd);

	if (!vctx) {
		errno = EOPNOTSUPP;
		return -1;
	}
	return vctx->dm_export_dmabuf_fd(dm);
}

/* ---- import and unimport ---------------------------------------------------- */

SV_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* Nothing is ever imported: an unimport has nothing to release. */
SV_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
}

SV_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
}

SV_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
}

/* ---- completion counters ------------------------------------------------------ */

SV_EXPORT int _ibv_query_comp_cntr_caps(struct ibv_context *context,
					struct ibv_comp_cntr_caps *caps, size_t caps_size)
{
	return EOPNOTSUPP;
}

SV_EXPORT struct ibv_comp_cntr *ibv_create_comp_cntr(struct ibv_context *context,
						     struct ibv_comp_cntr_init_attr *init_attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT int ibv_destroy_comp_cntr(struct ibv_comp_cntr *comp_cntr)
{
	return EOPNOTSUPP;
}

SV_EXPORT int ibv_set_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t value)
{
	return EOPNOTSUPP;
}

SV_EXPORT int ibv_set_err_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t value)
{
	return EOPNOTSUPP;
}

SV_EXPORT int ibv_inc_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t amount)
{
	return EOPNOTSUPP;
}

SV_EXPORT int ibv_inc_err_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t amount)
{
	return EOPNOTSUPP;
}

SV_EXPORT int ibv_read_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t *value)
{
	return EOPNOTSUPP;
}

SV_EXPORT int ibv_read_err_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t *value)
{
	return EOPNOTSUPP;
}

SV_EXPORT int ibv_qp_attach_comp_cntr(struct ibv_qp *qp, struct ibv_comp_cntr *comp_cntr,
				      struct ibv_qp_attach_comp_cntr_attr *attr)
{
	return EOPNOTSUPP;
}

/* ---- Ethernet L2 resolution ---------------------------------------------------- */

/*
 * rdma-core resolves the neighbour of a RoCE GID through the kernel's
 * neighbour table to fill an mlx5 address vector; only provider code
 * (libmlx5) imports it, for its own contexts. A softverbs GID names a UDP
 * endpoint: there is no Ethernet peer to resolve. EINVAL without a GRH
 * (as rdma-core), else EOPNOTSUPP; the outputs are left untouched.
 */
SV_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
					  uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t *vid)
{
	if (!attr || !attr->is_global)
		return EINVAL;
	return EOPNOTSUPP;
}
