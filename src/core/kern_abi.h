/* SPDX-License-Identifier: MIT */
/*
 * kern_abi.h - the kernel ABI structs that rdma-core's marshalling helpers
 * ibv_copy_*_kern() convert, and the libibverbs path record they convert
 * to. Our own definitions with our own names: the layouts are fixed by
 * the Linux uapi headers <rdma/ib_user_verbs.h> (QP and AH attributes) and
 * <rdma/ib_user_sa.h> (path record, which rdma-core's sa-kern-abi.h calls
 * struct ib_user_path_rec), and by rdma-core's <infiniband/sa.h> (struct
 * ibv_sa_path_rec). librdmacm passes these structs to the exported
 * functions, so every size and offset is checked at compile time.
 */
#ifndef SV_KERN_ABI_H
#define SV_KERN_ABI_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

/* struct ib_uverbs_global_route */
struct sv_kern_global_route {
	uint8_t dgid[16];
	uint32_t flow_label;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t reserved;
};

/* struct ib_uverbs_ah_attr */
struct sv_kern_ah_attr {
	struct sv_kern_global_route grh;
	uint16_t dlid;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate;
	uint8_t is_global;
	uint8_t port_num;
	uint8_t reserved;
};

/* struct ib_uverbs_qp_attr */
struct sv_kern_qp_attr {
	uint32_t qp_attr_mask;
	uint32_t qp_state;
	uint32_t cur_qp_state;
	uint32_t path_mtu;
	uint32_t path_mig_state;
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	uint32_t qp_access_flags;
	struct sv_kern_ah_attr ah_attr;
	struct sv_kern_ah_attr alt_ah_attr;
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
	uint16_t pkey_index;
	uint16_t alt_pkey_index;
	uint8_t en_sqd_async_notify;
	uint8_t sq_draining;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t port_num;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t alt_port_num;
	uint8_t alt_timeout;
	uint8_t reserved[5];
};

/* struct ib_user_path_rec: network byte order where noted */
struct sv_kern_path_rec {
	uint8_t dgid[16];
	uint8_t sgid[16];
	__be16 dlid;
	__be16 slid;
	uint32_t raw_traffic;
	__be32 flow_label;
	uint32_t reversible;
	uint32_t mtu;
	__be16 pkey;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t numb_path;
	uint8_t sl;
	uint8_t mtu_selector;
	uint8_t rate_selector;
	uint8_t rate;
	uint8_t packet_life_time_selector;
	uint8_t packet_life_time;
	uint8_t preference;
};

/* libibverbs' struct ibv_sa_path_rec (<infiniband/sa.h>) */
struct sv_sa_path_rec {
	union ibv_gid dgid;
	union ibv_gid sgid;
	__be16 dlid;
	__be16 slid;
	int raw_traffic;
	__be32 flow_label;
	uint8_t hop_limit;
	uint8_t traffic_class;
	int reversible;
	uint8_t numb_path;
	__be16 pkey;
	uint8_t sl;
	uint8_t mtu_selector;
	uint8_t mtu;
	uint8_t rate_selector;
	uint8_t rate;
	uint8_t packet_life_time_selector;
	uint8_t packet_life_time;
	uint8_t preference;
};

#define SV_KERN_OFF(type, member, off)                                                             \
	_Static_assert(offsetof(type, member) == (off), #type "." #member " at " #off)

_Static_assert(sizeof(struct sv_kern_global_route) == 24, "ib_uverbs_global_route is 24 bytes");
SV_KERN_OFF(struct sv_kern_global_route, flow_label, 16);
SV_KERN_OFF(struct sv_kern_global_route, traffic_class, 22);

_Static_assert(sizeof(struct sv_kern_ah_attr) == 32, "ib_uverbs_ah_attr is 32 bytes");
SV_KERN_OFF(struct sv_kern_ah_attr, dlid, 24);
SV_KERN_OFF(struct sv_kern_ah_attr, port_num, 30);

_Static_assert(sizeof(struct sv_kern_qp_attr) == 144, "ib_uverbs_qp_attr is 144 bytes");
SV_KERN_OFF(struct sv_kern_qp_attr, ah_attr, 40);
SV_KERN_OFF(struct sv_kern_qp_attr, alt_ah_attr, 72);
SV_KERN_OFF(struct sv_kern_qp_attr, max_send_wr, 104);
SV_KERN_OFF(struct sv_kern_qp_attr, pkey_index, 124);
SV_KERN_OFF(struct sv_kern_qp_attr, en_sqd_async_notify, 128);
SV_KERN_OFF(struct sv_kern_qp_attr, alt_timeout, 138);

_Static_assert(sizeof(struct sv_kern_path_rec) == 64, "ib_user_path_rec is 64 bytes");
SV_KERN_OFF(struct sv_kern_path_rec, dlid, 32);
SV_KERN_OFF(struct sv_kern_path_rec, raw_traffic, 36);
SV_KERN_OFF(struct sv_kern_path_rec, mtu, 48);
SV_KERN_OFF(struct sv_kern_path_rec, pkey, 52);
SV_KERN_OFF(struct sv_kern_path_rec, preference, 63);

_Static_assert(sizeof(struct sv_sa_path_rec) == 64, "ibv_sa_path_rec is 64 bytes");
SV_KERN_OFF(struct sv_sa_path_rec, raw_traffic, 36);
SV_KERN_OFF(struct sv_sa_path_rec, flow_label, 40);
SV_KERN_OFF(struct sv_sa_path_rec, hop_limit, 44);
SV_KERN_OFF(struct sv_sa_path_rec, reversible, 48);
SV_KERN_OFF(struct sv_sa_path_rec, numb_path, 52);
SV_KERN_OFF(struct sv_sa_path_rec, pkey, 54);
SV_KERN_OFF(struct sv_sa_path_rec, sl, 56);
SV_KERN_OFF(struct sv_sa_path_rec, preference, 63);

/* Exported by kern_abi.c (rdma-core declares them in its marshall.h). */
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct sv_kern_ah_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct sv_kern_qp_attr *src);
void ibv_copy_path_rec_from_kern(struct sv_sa_path_rec *dst, struct sv_kern_path_rec *src);
void ibv_copy_path_rec_to_kern(struct sv_kern_path_rec *dst, struct sv_sa_path_rec *src);

#endif
