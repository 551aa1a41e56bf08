/* SPDX-License-Identifier: MIT */
/*
 * strings.c - names for enum values, and the link-rate conversions.
 *
 * Every function is total: an unknown value gets a fixed fallback.
 */
#include "core/core.h"
#include "core/private_abi.h"

#define NAME_OF(table, v, fallback)                                                                \
	(((unsigned)(v) < SV_ARRAY_SIZE(table) && (table)[v]) ? (table)[v] : (fallback))

SV_EXPORT const char *ibv_node_type_str(enum ibv_node_type t)
{
	static const char *const names[] = {
		[IBV_NODE_CA] = "InfiniBand channel adapter",
		[IBV_NODE_SWITCH] = "InfiniBand switch",
		[IBV_NODE_ROUTER] = "InfiniBand router",
		[IBV_NODE_RNIC] = "iWARP NIC",
		[IBV_NODE_USNIC] = "usNIC",
		[IBV_NODE_USNIC_UDP] = "usNIC UDP",
		[IBV_NODE_UNSPECIFIED] = "unspecified",
	};

	return NAME_OF(names, t, "unknown");
}

SV_EXPORT const char *ibv_port_state_str(enum ibv_port_state s)
{
	static const char *const names[] = {
		[IBV_PORT_NOP] = "PORT_NOP",	   [IBV_PORT_DOWN] = "PORT_DOWN",
		[IBV_PORT_INIT] = "PORT_INIT",	   [IBV_PORT_ARMED] = "PORT_ARMED",
		[IBV_PORT_ACTIVE] = "PORT_ACTIVE", [IBV_PORT_ACTIVE_DEFER] = "PORT_ACTIVE_DEFER",
	};

	return NAME_OF(names, s, "unknown");
}

SV_EXPORT const char *ibv_event_type_str(enum ibv_event_type e)
{
	static const char *const names[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "QP fatal error",
		[IBV_EVENT_QP_REQ_ERR] = "QP invalid request error",
		[IBV_EVENT_QP_ACCESS_ERR] = "QP access error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration error",
		[IBV_EVENT_DEVICE_FATAL] = "device fatal error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID changed",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key table changed",
		[IBV_EVENT_SM_CHANGE] = "subnet manager changed",
		[IBV_EVENT_SRQ_ERR] = "SRQ error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration requested",
		[IBV_EVENT_GID_CHANGE] = "GID table changed",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal error",
		[IBV_EVENT_DEVICE_SPEED_CHANGE] = "device speed changed",
	};

	return NAME_OF(names, e, "unknown");
}

SV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status s)
{
	static const char *const names[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "work request flushed error",
		[IBV_WC_MW_BIND_ERR] = "memory window bind error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "operation aborted",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "tag matching error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "tag matching rendezvous incomplete",
	};

	return NAME_OF(names, s, "unknown");
}

/*
 * Declared in verbs.h, but rdma-core exports it from its private nodes
 * only (57 to 65).
 */
static const char *wr_opcode_str(enum ibv_wr_opcode op)
{
	static const char *const names[] = {
		[IBV_WR_RDMA_WRITE] = "RDMA_WRITE",
		[IBV_WR_RDMA_WRITE_WITH_IMM] = "RDMA_WRITE_WITH_IMM",
		[IBV_WR_SEND] = "SEND",
		[IBV_WR_SEND_WITH_IMM] = "SEND_WITH_IMM",
		[IBV_WR_RDMA_READ] = "RDMA_READ",
		[IBV_WR_ATOMIC_CMP_AND_SWP] = "ATOMIC_CMP_AND_SWP",
		[IBV_WR_ATOMIC_FETCH_AND_ADD] = "ATOMIC_FETCH_AND_ADD",
		[IBV_WR_LOCAL_INV] = "LOCAL_INV",
		[IBV_WR_BIND_MW] = "BIND_MW",
		[IBV_WR_SEND_WITH_INV] = "SEND_WITH_INV",
		[IBV_WR_TSO] = "TSO",
		[IBV_WR_DRIVER1] = "DRIVER1",
		[IBV_WR_FLUSH] = "FLUSH",
		[IBV_WR_ATOMIC_WRITE] = "ATOMIC_WRITE",
	};

	return NAME_OF(names, op, "unknown");
}

SV_PRIVATE_SINCE_57(wr_opcode_str, ibv_wr_opcode_str);

/*
 * One row per rate: the enum, its multiple of 2.5 Gb/s (-1 where the
 * rate is not such a multiple) and its signalling rate in Mb/s.
 */
static const struct {
	enum ibv_rate rate;
	int mult;
	int mbps;
} rates[] = {
	{IBV_RATE_2_5_GBPS, 1, 2500},	    {IBV_RATE_5_GBPS, 2, 5000},
	{IBV_RATE_10_GBPS, 4, 10000},	    {IBV_RATE_20_GBPS, 8, 20000},
	{IBV_RATE_30_GBPS, 12, 30000},	    {IBV_RATE_40_GBPS, 16, 40000},
	{IBV_RATE_60_GBPS, 24, 60000},	    {IBV_RATE_80_GBPS, 32, 80000},
	{IBV_RATE_120_GBPS, 48, 120000},    {IBV_RATE_14_GBPS, -1, 14062},
	{IBV_RATE_56_GBPS, -1, 56250},	    {IBV_RATE_112_GBPS, -1, 112500},
	{IBV_RATE_168_GBPS, -1, 168750},    {IBV_RATE_25_GBPS, -1, 25781},
	{IBV_RATE_100_GBPS, -1, 103125},    {IBV_RATE_200_GBPS, -1, 206250},
	{IBV_RATE_300_GBPS, -1, 309375},    {IBV_RATE_28_GBPS, 11, 28125},
	{IBV_RATE_50_GBPS, 20, 53125},	    {IBV_RATE_400_GBPS, 160, 425000},
	{IBV_RATE_600_GBPS, 240, 637500},   {IBV_RATE_800_GBPS, 320, 850000},
	{IBV_RATE_1200_GBPS, 480, 1275000},
};

SV_EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
	size_t i;

	for (i = 0; i < SV_ARRAY_SIZE(rates); i++)
		if (rates[i].rate == rate)
			return rates[i].mult;
	return -1;
}

SV_EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
	size_t i;

	for (i = 0; i < SV_ARRAY_SIZE(rates); i++)
		if (rates[i].mult == mult && mult > 0)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

SV_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
	size_t i;

	for (i = 0; i < SV_ARRAY_SIZE(rates); i++)
		if (rates[i].rate == rate)
			return rates[i].mbps;
	return -1;
}

SV_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	size_t i;

	for (i = 0; i < SV_ARRAY_SIZE(rates); i++)
		if (rates[i].mbps == mbps)
			return rates[i].rate;
	return IBV_RATE_MAX;
}
