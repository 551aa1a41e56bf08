/*
 * softverbs - subnet administration records (libibverbs compatible).
 *
 * The path, multicast member and service records as librdmacm and its
 * users see them, with the binary layout of rdma-core's <infiniband/sa.h>.
 * ibv_path_record is the big-endian wire form used by RDMA_OPTION_IB_PATH
 * and rsockets' RDMA_ROUTE option. softverbs performs no SA queries: on
 * RoCE the connection manager builds path records itself.
 */
#ifndef INFINIBAND_SA_H
#define INFINIBAND_SA_H

#include <linux/types.h>
#include <infiniband/verbs.h>

/* A path in host form (GIDs and the be* fields in network order). */
struct ibv_sa_path_rec {
	union ibv_gid dgid; /* destination port GID */
	union ibv_gid sgid; /* source port GID */
	__be16 dlid; /* 0 on RoCE */
	__be16 slid;
	int raw_traffic;
	__be32 flow_label; /* 20 bits */
	uint8_t hop_limit;
	uint8_t traffic_class;
	int reversible;
	uint8_t numb_path;
	__be16 pkey;
	uint8_t sl;
	uint8_t mtu_selector;
	uint8_t mtu; /* enum ibv_mtu */
	uint8_t rate_selector;
	uint8_t rate;
	uint8_t packet_life_time_selector;
	uint8_t packet_life_time;
	uint8_t preference;
};

struct ibv_sa_mcmember_rec {
	union ibv_gid mgid;
	union ibv_gid port_gid;
	uint32_t qkey;
	uint16_t mlid;
	uint8_t mtu_selector;
	uint8_t mtu;
	uint8_t traffic_class;
	uint16_t pkey;
	uint8_t rate_selector;
	uint8_t rate;
	uint8_t packet_life_time_selector;
	uint8_t packet_life_time;
	uint8_t sl;
	uint32_t flow_label;
	uint8_t hop_limit;
	uint8_t scope;
	uint8_t join_state;
	int proxy_join;
};

struct ibv_sa_service_rec {
	uint64_t id;
	union ibv_gid gid;
	uint16_t pkey;
	uint32_t lease;
	uint8_t key[16];
	uint8_t name[64];
	uint8_t data8[16];
	uint16_t data16[8];
	uint32_t data32[4];
	uint64_t data64[2];
};

/* Bit 7 of ibv_path_record.reversible_numpath. */
#define IBV_PATH_RECORD_REVERSIBLE 0x80

/* A path record as it travels (64 bytes, every field big-endian). */
struct ibv_path_record {
	__be64 service_id;
	union ibv_gid dgid;
	union ibv_gid sgid;
	__be16 dlid;
	__be16 slid;
	__be32 flowlabel_hoplimit; /* bits 27-8 flow label, bits 7-0 hop limit */
	uint8_t tclass;
	uint8_t reversible_numpath; /* bit 7 reversible, bits 6-0 path count */
	__be16 pkey;
	__be16 qosclass_sl; /* bits 15-4 QoS class, bits 3-0 SL */
	uint8_t mtu; /* bits 7-6 selector, bits 5-0 MTU */
	uint8_t rate; /* bits 7-6 selector, bits 5-0 rate */
	uint8_t packetlifetime; /* bits 7-6 selector, bits 5-0 lifetime */
	uint8_t preference;
	uint8_t reserved[6];
};

/* ibv_path_data.flags */
#define IBV_PATH_FLAG_GMP (1 << 0)
#define IBV_PATH_FLAG_PRIMARY (1 << 1)
#define IBV_PATH_FLAG_ALTERNATE (1 << 2)
#define IBV_PATH_FLAG_OUTBOUND (1 << 3)
#define IBV_PATH_FLAG_INBOUND (1 << 4)
#define IBV_PATH_FLAG_INBOUND_REVERSE (1 << 5)
#define IBV_PATH_FLAG_BIDIRECTIONAL (IBV_PATH_FLAG_OUTBOUND | IBV_PATH_FLAG_INBOUND_REVERSE)

/* One entry of an RDMA_OPTION_IB_PATH array. */
struct ibv_path_data {
	uint32_t flags; /* IBV_PATH_FLAG_* */
	uint32_t reserved;
	struct ibv_path_record path;
};

#endif
