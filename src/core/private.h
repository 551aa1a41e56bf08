/* SPDX-License-Identifier: MIT */
/*
 * private.h - ABI pieces of libibverbs that the public header does not
 * carry: types and prototypes of exported private or compat symbols.
 */
#ifndef SV_PRIVATE_H
#define SV_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

/*
 * GID types as the sysfs-based private ibv_query_gid_type() reports them.
 * Not the public enum ibv_gid_type: here RoCE v2 is 1.
 */
enum ibv_gid_type_sysfs {
	IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
	IBV_GID_TYPE_SYSFS_ROCE_V2,
};

/* IBVERBS_PRIVATE: used by ibv_devinfo. 0, or -1 with errno. */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       enum ibv_gid_type_sysfs *type);

/*
 * The port attributes of the exported ibv_query_port@IBVERBS_1.1: struct
 * ibv_port_attr up to and including `flags` (48 bytes). Binaries built
 * against old headers pass a buffer of exactly this size.
 */
struct _compat_ibv_port_attr {
	enum ibv_port_state state;
	enum ibv_mtu max_mtu;
	enum ibv_mtu active_mtu;
	int gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
};

_Static_assert(sizeof(struct _compat_ibv_port_attr) == 48, "compat port attr is 48 bytes");
_Static_assert(offsetof(struct _compat_ibv_port_attr, flags) ==
		       offsetof(struct ibv_port_attr, flags),
	       "compat port attr is a prefix of struct ibv_port_attr");

#endif
