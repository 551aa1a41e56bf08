/* SPDX-License-Identifier: MIT */
/*
 * mad.h - InfiniBand CM MADs (management class 0x07, class version 2):
 * the 24-byte MAD header and the CM messages, in host form, with their
 * encoders and decoders. Pure functions with no state: unit_rdmacm_mad
 * checks them against byte vectors.
 *
 * A CM MAD is 256 bytes: the header, then a 232-byte message body. Field
 * positions below are byte offsets from the start of the body ("B"); the
 * MAD offset is B + 24. Multi-byte fields are big-endian; a field of less
 * than a byte names its bits, 7 being the most significant.
 * docs/rdmacm.md, "Wire format", lists every field.
 */
#ifndef SV_RDMACM_MAD_H
#define SV_RDMACM_MAD_H

#include <stdbool.h>
#include <stdint.h>

enum {
	CM_MAD_LEN = 256,
	CM_HDR_LEN = 24,
	CM_BODY_LEN = CM_MAD_LEN - CM_HDR_LEN,
	CM_BASE_VERSION = 1,
	CM_MGMT_CLASS = 0x07,
	CM_CLASS_VERSION = 2,
	CM_METHOD_SEND = 0x03,
};

enum cm_attr_id {
	CM_ATTR_CLASS_PORT_INFO = 0x0001,
	CM_ATTR_REQ = 0x0010,
	CM_ATTR_MRA = 0x0011,
	CM_ATTR_REJ = 0x0012,
	CM_ATTR_REP = 0x0013,
	CM_ATTR_RTU = 0x0014,
	CM_ATTR_DREQ = 0x0015,
	CM_ATTR_DREP = 0x0016,
	CM_ATTR_SIDR_REQ = 0x0017,
	CM_ATTR_SIDR_REP = 0x0018,
	CM_ATTR_LAP = 0x0019,
	CM_ATTR_APR = 0x001a,
};

/* Private data field sizes. */
enum {
	CM_REQ_PDATA = 92,
	CM_MRA_PDATA = 222,
	CM_REJ_ARI = 72,
	CM_REJ_PDATA = 148,
	CM_REP_PDATA = 196,
	CM_RTU_PDATA = 224,
	CM_DREQ_PDATA = 220,
	CM_DREP_PDATA = 224,
	CM_SIDR_REQ_PDATA = 216,
	CM_SIDR_REP_INFO = 72,
	CM_SIDR_REP_PDATA = 136,
};

/* MessageMRAed / MessageREJected */
enum {
	CM_MSG_REQ = 0,
	CM_MSG_REP = 1,
	CM_MSG_OTHER = 2,
};

/* REJ reasons used here. */
enum {
	CM_REJ_TIMEOUT = 4,
	CM_REJ_INVALID_SERVICE_ID = 8,
	CM_REJ_STALE_CONN = 10,
	CM_REJ_INVALID_GID = 12,
	CM_REJ_CONSUMER_DEFINED = 28,
	CM_REJ_VENDOR_OPTION_NOT_SUPPORTED = 35,
};

/* SIDR_REP status */
enum {
	CM_SIDR_SUCCESS = 0,
	CM_SIDR_UNSUPPORTED = 1,
	CM_SIDR_REJECT = 2,
	CM_SIDR_NO_QP = 3,
};

struct cm_mad_hdr {
	uint8_t base_version, mgmt_class, class_version, method;
	uint16_t status, class_specific;
	uint64_t tid;
	uint16_t attr_id;
	uint32_t attr_mod;
};

/* A primary or alternate path of a REQ. */
struct cm_req_path {
	uint16_t local_lid, remote_lid;
	uint8_t local_gid[16], remote_gid[16];
	uint32_t flow_label; /* 20 bits */
	uint8_t packet_rate; /* 6 bits */
	uint8_t traffic_class, hop_limit;
	uint8_t sl; /* 4 bits */
	bool subnet_local;
	uint8_t local_ack_timeout; /* 5 bits */
};

struct cm_req {
	uint32_t local_comm_id;
	uint32_t vendor_id; /* 24 bits */
	uint64_t service_id;
	uint64_t local_ca_guid; /* host order of the 8 wire bytes */
	uint32_t local_qkey;
	uint32_t local_qpn; /* 24 bits */
	uint8_t responder_resources;
	uint32_t local_eecn; /* 24 bits */
	uint8_t initiator_depth;
	uint32_t remote_eecn; /* 24 bits */
	uint8_t remote_cm_response_timeout; /* 5 bits */
	uint8_t transport; /* 2 bits: 0 RC, 1 UC, 3 XRC */
	bool flow_control;
	uint32_t starting_psn; /* 24 bits */
	uint8_t local_cm_response_timeout; /* 5 bits */
	uint8_t retry_count; /* 3 bits */
	uint16_t pkey;
	uint8_t path_mtu; /* 4 bits */
	bool rdc_exists;
	uint8_t rnr_retry_count; /* 3 bits */
	uint8_t max_cm_retries; /* 4 bits */
	bool srq;
	uint8_t ext_transport; /* 3 bits */
	struct cm_req_path primary, alternate;
	bool sap_supported;
	uint8_t pdata[CM_REQ_PDATA];
};

struct cm_mra {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t msg_mraed; /* 2 bits */
	uint8_t service_timeout; /* 5 bits */
	uint8_t pdata[CM_MRA_PDATA];
};

struct cm_rej {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t msg_rejected; /* 2 bits */
	uint8_t ari_len; /* 7 bits, at most CM_REJ_ARI */
	uint16_t reason;
	uint8_t ari[CM_REJ_ARI];
	uint8_t pdata[CM_REJ_PDATA];
};

struct cm_rep {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t local_qkey;
	uint32_t local_qpn; /* 24 bits */
	uint32_t vendor_id; /* 24 bits, spread over three bytes */
	uint32_t local_eecn; /* 24 bits */
	uint32_t starting_psn; /* 24 bits */
	uint8_t responder_resources, initiator_depth;
	uint8_t target_ack_delay; /* 5 bits */
	uint8_t failover; /* 2 bits */
	bool flow_control;
	uint8_t rnr_retry_count; /* 3 bits */
	bool srq;
	uint64_t local_ca_guid;
	uint8_t pdata[CM_REP_PDATA];
};

/* RTU and DREP: the two comm IDs and private data (224 bytes both). */
struct cm_rtu {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t pdata[CM_RTU_PDATA];
};

struct cm_dreq {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t remote_qpn; /* 24 bits */
	uint8_t pdata[CM_DREQ_PDATA];
};

struct cm_sidr_req {
	uint32_t request_id;
	uint16_t pkey;
	uint64_t service_id;
	uint8_t pdata[CM_SIDR_REQ_PDATA];
};

struct cm_sidr_rep {
	uint32_t request_id;
	uint8_t status;
	uint8_t info_len;
	uint32_t vendor_id; /* 24 bits */
	uint32_t qpn; /* 24 bits */
	uint64_t service_id;
	uint32_t qkey;
	uint8_t info[CM_SIDR_REP_INFO];
	uint8_t pdata[CM_SIDR_REP_PDATA];
};

/*
 * Write the header of a CM MAD (base version 1, class 0x07, class
 * version 2, method SEND, status 0) with `attr_id` and `tid`, and zero
 * the body.
 */
void cm_mad_init(uint8_t mad[CM_MAD_LEN], uint16_t attr_id, uint64_t tid, uint32_t attr_mod);
/*
 * Read the header. -EBADMSG unless it is a CM MAD this CM handles:
 * base version 1, class 0x07, class version 2, method SEND.
 */
int cm_mad_parse_hdr(const uint8_t mad[CM_MAD_LEN], struct cm_mad_hdr *h);

/*
 * Encoders write the body of a MAD that cm_mad_init() prepared; a DREP's
 * body is an RTU's (cm_encode_rtu; cm_send_comm_ids sends both).
 */
void cm_encode_req(uint8_t mad[CM_MAD_LEN], const struct cm_req *m);
void cm_encode_mra(uint8_t mad[CM_MAD_LEN], const struct cm_mra *m);
void cm_encode_rej(uint8_t mad[CM_MAD_LEN], const struct cm_rej *m);
void cm_encode_rep(uint8_t mad[CM_MAD_LEN], const struct cm_rep *m);
void cm_encode_rtu(uint8_t mad[CM_MAD_LEN], const struct cm_rtu *m);
void cm_encode_dreq(uint8_t mad[CM_MAD_LEN], const struct cm_dreq *m);
void cm_encode_sidr_req(uint8_t mad[CM_MAD_LEN], const struct cm_sidr_req *m);
void cm_encode_sidr_rep(uint8_t mad[CM_MAD_LEN], const struct cm_sidr_rep *m);

/*
 * Decoders read every field; they fail with -EBADMSG only where a field
 * cannot be valid (a REJ ARI length above 72, a SIDR_REP info length
 * above 72). Semantic checks belong to the state machines.
 */
int cm_decode_req(const uint8_t mad[CM_MAD_LEN], struct cm_req *m);
int cm_decode_mra(const uint8_t mad[CM_MAD_LEN], struct cm_mra *m);
int cm_decode_rej(const uint8_t mad[CM_MAD_LEN], struct cm_rej *m);
int cm_decode_rep(const uint8_t mad[CM_MAD_LEN], struct cm_rep *m);
int cm_decode_rtu(const uint8_t mad[CM_MAD_LEN], struct cm_rtu *m);
int cm_decode_dreq(const uint8_t mad[CM_MAD_LEN], struct cm_dreq *m);
int cm_decode_drep(const uint8_t mad[CM_MAD_LEN], struct cm_rtu *m);
int cm_decode_sidr_req(const uint8_t mad[CM_MAD_LEN], struct cm_sidr_req *m);
int cm_decode_sidr_rep(const uint8_t mad[CM_MAD_LEN], struct cm_sidr_rep *m);

/*
 * The rdma_cm IP header at the start of REQ and SIDR_REQ private data
 * (36 bytes): version 0, IP version (4 or 6) in the high nibble of byte
 * 1, source port, source and destination address (IPv4 in the last four
 * bytes of each 16).
 */
enum {
	CMA_HDR_LEN = 36,
	CMA_VERSION = 0,
};

struct cma_hdr {
	uint8_t cma_version;
	uint8_t ip_version; /* 4 or 6 */
	uint16_t src_port; /* host order */
	uint8_t src_ip[16], dst_ip[16]; /* IPv4: 12 zero bytes, then the address */
};

void cma_hdr_encode(uint8_t pdata[CMA_HDR_LEN], const struct cma_hdr *h);
/* -EBADMSG unless version 0 and IP version 4 or 6. */
int cma_hdr_decode(const uint8_t pdata[CMA_HDR_LEN], struct cma_hdr *h);

#endif
