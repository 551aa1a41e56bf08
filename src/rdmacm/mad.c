/* SPDX-License-Identifier: MIT */
/*
 * mad.c - encoders and decoders of the CM MADs (contract in mad.h).
 *
 * Each message's layout is written once, as a table of fields, and one
 * encoder and one decoder walk it: the two directions cannot disagree.
 * A field is a run of bits in a big-endian word of 1 to 8 bytes at a
 * byte offset in the message body, or a byte array. Encoders start from
 * the zeroed body cm_mad_init() leaves, so reserved bits go out as 0;
 * decoders start from a zeroed host struct and fill every member.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "rdmacm/mad.h"

/* The host type of a field's member. */
enum kind {
	K_U8,
	K_U16,
	K_U32,
	K_U64,
	K_BOOL,
	K_BYTES, /* an array of `len` bytes, copied as it is */
};

/*
 * One field: `width` bits starting at bit `shift` (0 = least significant)
 * of the big-endian word of `len` bytes at offset `off`, holding bits
 * `vshift` to `vshift + width - 1` of the host member at `member` (most
 * fields hold a whole member: vshift 0). A field with `max` > 0 is a
 * length that cannot be valid above `max`.
 */
struct field {
	uint8_t off, len, shift, width, vshift, max;
	uint8_t kind;
	uint16_t member;
};

/* The table rows; MSG names the host struct of the table being written. */
/* clang-format off */
#define KIND_OF(m)							\
	_Generic(((MSG *)0)->m,						\
		 bool: K_BOOL,						\
		 uint8_t: K_U8,						\
		 uint16_t: K_U16,					\
		 uint32_t: K_U32,					\
		 uint64_t: K_U64,					\
		 default: K_BYTES)
#define FIELD(m, o, l, sh, w, vsh, mx)					\
	{ .off = (o), .len = (l), .shift = (sh), .width = (w),		\
	  .vshift = (vsh), .max = (mx), .kind = KIND_OF(m),		\
	  .member = offsetof(MSG, m) }
/* A whole member in `l` bytes (1, 2, 3, 4 or 8) at `o`. */
#define WHOLE(m, o, l) FIELD(m, o, l, 0, (l) * 8, 0, 0)
/* A member in bits hi..hi-w+1 of the byte at `o` (7 = most significant). */
#define BITS(m, o, hi, w) FIELD(m, o, 1, (hi) + 1 - (w), w, 0, 0)
/* A byte array at `o`, as long as the member. */
#define BYTES(m, o)							\
	{ .off = (o), .len = sizeof(((MSG *)0)->m), .kind = K_BYTES,	\
	  .member = offsetof(MSG, m) }
/* clang-format on */

#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

static uint64_t mask_of(const struct field *f)
{
	return f->width >= 64 ? UINT64_MAX : (UINT64_C(1) << f->width) - 1;
}

static uint64_t word_get(const uint8_t *b, const struct field *f)
{
	uint64_t w = 0;

	for (unsigned int i = 0; i < f->len; i++)
		w = w << 8 | b[f->off + i];
	return w;
}

static void word_put(uint8_t *b, const struct field *f, uint64_t w)
{
	for (unsigned int i = f->len; i-- > 0; w >>= 8)
		b[f->off + i] = (uint8_t)w;
}

static uint64_t member_get(const void *msg, const struct field *f)
{
	const uint8_t *p = (const uint8_t *)msg + f->member;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
	bool flag;

	switch (f->kind) {
	case K_U16:
		memcpy(&u16, p, sizeof(u16));
		return u16;
	case K_U32:
		memcpy(&u32, p, sizeof(u32));
		return u32;
	case K_U64:
		memcpy(&u64, p, sizeof(u64));
		return u64;
	case K_BOOL:
		memcpy(&flag, p, sizeof(flag));
		return flag;
	default:
		return *p;
	}
}

static void member_set(void *msg, const struct field *f, uint64_t v)
{
	uint8_t *p = (uint8_t *)msg + f->member;
	uint16_t u16 = (uint16_t)v;
	uint32_t u32 = (uint32_t)v;
	bool flag = v != 0;

	switch (f->kind) {
	case K_U16:
		memcpy(p, &u16, sizeof(u16));
		break;
	case K_U32:
		memcpy(p, &u32, sizeof(u32));
		break;
	case K_U64:
		memcpy(p, &v, sizeof(v));
		break;
	case K_BOOL:
		memcpy(p, &flag, sizeof(flag));
		break;
	default:
		*p = (uint8_t)v;
		break;
	}
}

/* Write the `n` fields of `msg` into `b` (the bits of each field only). */
static void encode(uint8_t *b, const struct field *f, size_t n, const void *msg)
{
	for (; n--; f++) {
		uint64_t mask = mask_of(f), w;

		if (f->kind == K_BYTES) {
			memcpy(b + f->off, (const uint8_t *)msg + f->member, f->len);
			continue;
		}
		w = word_get(b, f) & ~(mask << f->shift);
		word_put(b, f, w | ((member_get(msg, f) >> f->vshift) & mask) << f->shift);
	}
}

/*
 * Zero `msg` (`size` bytes) and read the `n` fields from `b` into it: 0,
 * or -EBADMSG when a length field is above its max (every field is read).
 */
static int decode(const uint8_t *b, const struct field *f, size_t n, void *msg, size_t size)
{
	int ret = 0;

	memset(msg, 0, size);
	for (; n--; f++) {
		uint64_t v;

		if (f->kind == K_BYTES) {
			memcpy((uint8_t *)msg + f->member, b + f->off, f->len);
			continue;
		}
		v = (word_get(b, f) >> f->shift) & mask_of(f);
		if (f->max && v > f->max)
			ret = -EBADMSG;
		member_set(msg, f, member_get(msg, f) | v << f->vshift);
	}
	return ret;
}

/*
 * The layouts, in wire order. Offsets are from the start of the message
 * body, except for the MAD header (from the start of the MAD) and the
 * rdma_cm IP header (from the start of the private data).
 */
/* clang-format off */
#define MSG struct cm_mad_hdr
static const struct field hdr_fields[] = {
	WHOLE(base_version, 0, 1),
	WHOLE(mgmt_class, 1, 1),
	WHOLE(class_version, 2, 1),
	WHOLE(method, 3, 1),
	WHOLE(status, 4, 2),
	WHOLE(class_specific, 6, 2),
	WHOLE(tid, 8, 8),
	WHOLE(attr_id, 16, 2),
	WHOLE(attr_mod, 20, 4),
};
#undef MSG

/*
 * A REQ path at body offset `o` (member `p`): LIDs, GIDs, flow label
 * (bits 31-12) and rate (bits 5-0) of one word, TC, hop limit, SL and
 * subnet local, ACK timeout.
 */
#define REQ_PATH(p, o)						\
	WHOLE(p.local_lid, (o), 2),				\
	WHOLE(p.remote_lid, (o) + 2, 2),			\
	BYTES(p.local_gid, (o) + 4),				\
	BYTES(p.remote_gid, (o) + 20),				\
	FIELD(p.flow_label, (o) + 36, 4, 12, 20, 0, 0),		\
	BITS(p.packet_rate, (o) + 39, 5, 6),			\
	WHOLE(p.traffic_class, (o) + 40, 1),			\
	WHOLE(p.hop_limit, (o) + 41, 1),			\
	BITS(p.sl, (o) + 42, 7, 4),				\
	BITS(p.subnet_local, (o) + 42, 3, 1),			\
	BITS(p.local_ack_timeout, (o) + 43, 7, 5)

#define MSG struct cm_req
static const struct field req_fields[] = {
	WHOLE(local_comm_id, 0, 4),
	WHOLE(vendor_id, 5, 3),
	WHOLE(service_id, 8, 8),
	WHOLE(local_ca_guid, 16, 8),
	WHOLE(local_qkey, 28, 4),
	WHOLE(local_qpn, 32, 3),
	WHOLE(responder_resources, 35, 1),
	WHOLE(local_eecn, 36, 3),
	WHOLE(initiator_depth, 39, 1),
	WHOLE(remote_eecn, 40, 3),
	BITS(remote_cm_response_timeout, 43, 7, 5),
	BITS(transport, 43, 2, 2),
	BITS(flow_control, 43, 0, 1),
	WHOLE(starting_psn, 44, 3),
	BITS(local_cm_response_timeout, 47, 7, 5),
	BITS(retry_count, 47, 2, 3),
	WHOLE(pkey, 48, 2),
	BITS(path_mtu, 50, 7, 4),
	BITS(rdc_exists, 50, 3, 1),
	BITS(rnr_retry_count, 50, 2, 3),
	BITS(max_cm_retries, 51, 7, 4),
	BITS(srq, 51, 3, 1),
	BITS(ext_transport, 51, 2, 3),
	REQ_PATH(primary, 52),
	REQ_PATH(alternate, 96),
	BITS(sap_supported, 139, 2, 1),
	BYTES(pdata, 140),
};
#undef MSG

#define MSG struct cm_mra
static const struct field mra_fields[] = {
	WHOLE(local_comm_id, 0, 4),
	WHOLE(remote_comm_id, 4, 4),
	BITS(msg_mraed, 8, 7, 2),
	BITS(service_timeout, 9, 7, 5),
	BYTES(pdata, 10),
};
#undef MSG

#define MSG struct cm_rej
static const struct field rej_fields[] = {
	WHOLE(local_comm_id, 0, 4),
	WHOLE(remote_comm_id, 4, 4),
	BITS(msg_rejected, 8, 7, 2),
	FIELD(ari_len, 9, 1, 1, 7, 0, CM_REJ_ARI),	/* bits 7-1, at most 72 */
	WHOLE(reason, 10, 2),
	BYTES(ari, 12),
	BYTES(pdata, 84),
};
#undef MSG

/* The vendor ID's three bytes stand apart, at 15, 19 and 23. */
#define MSG struct cm_rep
static const struct field rep_fields[] = {
	WHOLE(local_comm_id, 0, 4),
	WHOLE(remote_comm_id, 4, 4),
	WHOLE(local_qkey, 8, 4),
	WHOLE(local_qpn, 12, 3),
	FIELD(vendor_id, 15, 1, 0, 8, 16, 0),
	WHOLE(local_eecn, 16, 3),
	FIELD(vendor_id, 19, 1, 0, 8, 8, 0),
	WHOLE(starting_psn, 20, 3),
	FIELD(vendor_id, 23, 1, 0, 8, 0, 0),
	WHOLE(responder_resources, 24, 1),
	WHOLE(initiator_depth, 25, 1),
	BITS(target_ack_delay, 26, 7, 5),
	BITS(failover, 26, 2, 2),
	BITS(flow_control, 26, 0, 1),
	BITS(rnr_retry_count, 27, 7, 3),
	BITS(srq, 27, 4, 1),
	WHOLE(local_ca_guid, 28, 8),
	BYTES(pdata, 36),
};
#undef MSG

/* RTU and DREP share one layout. */
#define MSG struct cm_rtu
static const struct field rtu_fields[] = {
	WHOLE(local_comm_id, 0, 4),
	WHOLE(remote_comm_id, 4, 4),
	BYTES(pdata, 8),
};
#undef MSG

#define MSG struct cm_dreq
static const struct field dreq_fields[] = {
	WHOLE(local_comm_id, 0, 4),
	WHOLE(remote_comm_id, 4, 4),
	WHOLE(remote_qpn, 8, 3),
	BYTES(pdata, 12),
};
#undef MSG

#define MSG struct cm_sidr_req
static const struct field sidr_req_fields[] = {
	WHOLE(request_id, 0, 4),
	WHOLE(pkey, 4, 2),
	WHOLE(service_id, 8, 8),
	BYTES(pdata, 16),
};
#undef MSG

/* The vendor ID: its high 16 bits at 6, its low byte at 11. */
#define MSG struct cm_sidr_rep
static const struct field sidr_rep_fields[] = {
	WHOLE(request_id, 0, 4),
	WHOLE(status, 4, 1),
	FIELD(info_len, 5, 1, 0, 8, 0, CM_SIDR_REP_INFO),	/* at most 72 */
	FIELD(vendor_id, 6, 2, 0, 16, 8, 0),
	WHOLE(qpn, 8, 3),
	FIELD(vendor_id, 11, 1, 0, 8, 0, 0),
	WHOLE(service_id, 12, 8),
	WHOLE(qkey, 20, 4),
	BYTES(info, 24),
	BYTES(pdata, 96),
};
#undef MSG

#define MSG struct cma_hdr
static const struct field cma_fields[] = {
	WHOLE(cma_version, 0, 1),
	BITS(ip_version, 1, 7, 4),
	WHOLE(src_port, 2, 2),
	BYTES(src_ip, 4),
	BYTES(dst_ip, 20),
};
#undef MSG
/* clang-format on */

/* Contract: see mad.h. */
void cm_mad_init(uint8_t mad[CM_MAD_LEN], uint16_t attr_id, uint64_t tid, uint32_t attr_mod)
{
	const struct cm_mad_hdr h = {
		.base_version = CM_BASE_VERSION,
		.mgmt_class = CM_MGMT_CLASS,
		.class_version = CM_CLASS_VERSION,
		.method = CM_METHOD_SEND,
		.tid = tid,
		.attr_id = attr_id,
		.attr_mod = attr_mod,
	};

	memset(mad, 0, CM_MAD_LEN);
	encode(mad, hdr_fields, NFIELDS(hdr_fields), &h);
}

/* Contract: see mad.h. */
int cm_mad_parse_hdr(const uint8_t mad[CM_MAD_LEN], struct cm_mad_hdr *h)
{
	decode(mad, hdr_fields, NFIELDS(hdr_fields), h, sizeof(*h));
	if (h->base_version != CM_BASE_VERSION || h->mgmt_class != CM_MGMT_CLASS ||
	    h->class_version != CM_CLASS_VERSION || h->method != CM_METHOD_SEND)
		return -EBADMSG;
	return 0;
}

/*
 * The typed encoders and decoders of mad.h (contracts there): each
 * writes or reads its message's table in the body (MAD + 24).
 */
#define CM_CODEC(name, type)                                                                       \
	void cm_encode_##name(uint8_t mad[CM_MAD_LEN], const type *m)                              \
	{                                                                                          \
		encode(mad + CM_HDR_LEN, name##_fields, NFIELDS(name##_fields), m);                \
	}                                                                                          \
	int cm_decode_##name(const uint8_t mad[CM_MAD_LEN], type *m)                               \
	{                                                                                          \
		return decode(mad + CM_HDR_LEN, name##_fields, NFIELDS(name##_fields), m,          \
			      sizeof(*m));                                                         \
	}

CM_CODEC(req, struct cm_req)
CM_CODEC(mra, struct cm_mra)
CM_CODEC(rej, struct cm_rej)
CM_CODEC(rep, struct cm_rep)
CM_CODEC(rtu, struct cm_rtu)
CM_CODEC(dreq, struct cm_dreq)
CM_CODEC(sidr_req, struct cm_sidr_req)
CM_CODEC(sidr_rep, struct cm_sidr_rep)

/* Contract: see mad.h. */
int cm_decode_drep(const uint8_t mad[CM_MAD_LEN], struct cm_rtu *m)
{
	return cm_decode_rtu(mad, m);
}

/* Contract: see mad.h. */
void cma_hdr_encode(uint8_t p[CMA_HDR_LEN], const struct cma_hdr *h)
{
	memset(p, 0, CMA_HDR_LEN);
	encode(p, cma_fields, NFIELDS(cma_fields), h);
}

/* Contract: see mad.h. */
int cma_hdr_decode(const uint8_t p[CMA_HDR_LEN], struct cma_hdr *h)
{
	decode(p, cma_fields, NFIELDS(cma_fields), h, sizeof(*h));
	if (h->cma_version != CMA_VERSION || (h->ip_version != 4 && h->ip_version != 6))
		return -EBADMSG;
	return 0;
}
