/* SPDX-License-Identifier: MIT */
/*
 * mad.c - encoders and decoders of the CM MADs (contract in mad.h).
 *
 * Every field is written and read through the accessors below, by byte
 * offset in the message body and, for sub-byte fields, by bit position;
 * the body is zeroed first, so reserved bits go out as 0.
 */
#include <errno.h>
#include <string.h>

#include "rdmacm/mad.h"

/* Body accessors: `b` is the body (MAD + 24). */
static void put8(uint8_t *b, unsigned int off, uint8_t v)
{
	b[off] = v;
}

static void put16(uint8_t *b, unsigned int off, uint16_t v)
{
	b[off] = (uint8_t)(v >> 8);
	b[off + 1] = (uint8_t)v;
}

static void put24(uint8_t *b, unsigned int off, uint32_t v)
{
	b[off] = (uint8_t)(v >> 16);
	b[off + 1] = (uint8_t)(v >> 8);
	b[off + 2] = (uint8_t)v;
}

static void put32(uint8_t *b, unsigned int off, uint32_t v)
{
	put16(b, off, (uint16_t)(v >> 16));
	put16(b, off + 2, (uint16_t)v);
}

static void put64(uint8_t *b, unsigned int off, uint64_t v)
{
	put32(b, off, (uint32_t)(v >> 32));
	put32(b, off + 4, (uint32_t)v);
}

/* OR `v` (masked to `width` bits) into byte `off` at bits hi..hi-width+1. */
static void putbits(uint8_t *b, unsigned int off, unsigned int hi, unsigned int width, unsigned v)
{
	unsigned int shift = hi + 1 - width, mask = (1u << width) - 1;

	b[off] = (uint8_t)((b[off] & ~(mask << shift)) | ((v & mask) << shift));
}

static uint16_t get16(const uint8_t *b, unsigned int off)
{
	return (uint16_t)(b[off] << 8 | b[off + 1]);
}

static uint32_t get24(const uint8_t *b, unsigned int off)
{
	return (uint32_t)b[off] << 16 | (uint32_t)b[off + 1] << 8 | b[off + 2];
}

static uint32_t get32(const uint8_t *b, unsigned int off)
{
	return (uint32_t)get16(b, off) << 16 | get16(b, off + 2);
}

static uint64_t get64(const uint8_t *b, unsigned int off)
{
	return (uint64_t)get32(b, off) << 32 | get32(b, off + 4);
}

static unsigned int getbits(const uint8_t *b, unsigned int off, unsigned int hi, unsigned int width)
{
	return (b[off] >> (hi + 1 - width)) & ((1u << width) - 1);
}

/* Contract: see mad.h. */
void cm_mad_init(uint8_t mad[CM_MAD_LEN], uint16_t attr_id, uint64_t tid, uint32_t attr_mod)
{
	memset(mad, 0, CM_MAD_LEN);
	mad[0] = CM_BASE_VERSION;
	mad[1] = CM_MGMT_CLASS;
	mad[2] = CM_CLASS_VERSION;
	mad[3] = CM_METHOD_SEND;
	put64(mad, 8, tid);
	put16(mad, 16, attr_id);
	put32(mad, 20, attr_mod);
}

/* Contract: see mad.h. */
int cm_mad_parse_hdr(const uint8_t mad[CM_MAD_LEN], struct cm_mad_hdr *h)
{
	h->base_version = mad[0];
	h->mgmt_class = mad[1];
	h->class_version = mad[2];
	h->method = mad[3];
	h->status = get16(mad, 4);
	h->class_specific = get16(mad, 6);
	h->tid = get64(mad, 8);
	h->attr_id = get16(mad, 16);
	h->attr_mod = get32(mad, 20);
	if (h->base_version != CM_BASE_VERSION || h->mgmt_class != CM_MGMT_CLASS ||
	    h->class_version != CM_CLASS_VERSION || h->method != CM_METHOD_SEND)
		return -EBADMSG;
	return 0;
}

/* A REQ path at body offset `o`: LIDs, GIDs, flow label and rate, TC, hop, SL, ACK timeout. */
static void put_path(uint8_t *b, unsigned int o, const struct cm_req_path *p)
{
	put16(b, o, p->local_lid);
	put16(b, o + 2, p->remote_lid);
	memcpy(b + o + 4, p->local_gid, 16);
	memcpy(b + o + 20, p->remote_gid, 16);
	put32(b, o + 36, (p->flow_label & 0xfffff) << 12 | (p->packet_rate & 0x3f));
	put8(b, o + 40, p->traffic_class);
	put8(b, o + 41, p->hop_limit);
	putbits(b, o + 42, 7, 4, p->sl);
	putbits(b, o + 42, 3, 1, p->subnet_local);
	putbits(b, o + 43, 7, 5, p->local_ack_timeout);
}

static void get_path(const uint8_t *b, unsigned int o, struct cm_req_path *p)
{
	uint32_t fl = get32(b, o + 36);

	p->local_lid = get16(b, o);
	p->remote_lid = get16(b, o + 2);
	memcpy(p->local_gid, b + o + 4, 16);
	memcpy(p->remote_gid, b + o + 20, 16);
	p->flow_label = fl >> 12;
	p->packet_rate = fl & 0x3f;
	p->traffic_class = b[o + 40];
	p->hop_limit = b[o + 41];
	p->sl = (uint8_t)getbits(b, o + 42, 7, 4);
	p->subnet_local = getbits(b, o + 42, 3, 1);
	p->local_ack_timeout = (uint8_t)getbits(b, o + 43, 7, 5);
}

/* Contract: see mad.h. */
void cm_encode_req(uint8_t mad[CM_MAD_LEN], const struct cm_req *m)
{
	uint8_t *b = mad + CM_HDR_LEN;

	put32(b, 0, m->local_comm_id);
	put24(b, 5, m->vendor_id);
	put64(b, 8, m->service_id);
	put64(b, 16, m->local_ca_guid);
	put32(b, 28, m->local_qkey);
	put24(b, 32, m->local_qpn);
	put8(b, 35, m->responder_resources);
	put24(b, 36, m->local_eecn);
	put8(b, 39, m->initiator_depth);
	put24(b, 40, m->remote_eecn);
	putbits(b, 43, 7, 5, m->remote_cm_response_timeout);
	putbits(b, 43, 2, 2, m->transport);
	putbits(b, 43, 0, 1, m->flow_control);
	put24(b, 44, m->starting_psn);
	putbits(b, 47, 7, 5, m->local_cm_response_timeout);
	putbits(b, 47, 2, 3, m->retry_count);
	put16(b, 48, m->pkey);
	putbits(b, 50, 7, 4, m->path_mtu);
	putbits(b, 50, 3, 1, m->rdc_exists);
	putbits(b, 50, 2, 3, m->rnr_retry_count);
	putbits(b, 51, 7, 4, m->max_cm_retries);
	putbits(b, 51, 3, 1, m->srq);
	putbits(b, 51, 2, 3, m->ext_transport);
	put_path(b, 52, &m->primary);
	put_path(b, 96, &m->alternate);
	putbits(b, 139, 2, 1, m->sap_supported);
	memcpy(b + 140, m->pdata, CM_REQ_PDATA);
}

/* Contract: see mad.h. */
int cm_decode_req(const uint8_t mad[CM_MAD_LEN], struct cm_req *m)
{
	const uint8_t *b = mad + CM_HDR_LEN;

	m->local_comm_id = get32(b, 0);
	m->vendor_id = get24(b, 5);
	m->service_id = get64(b, 8);
	m->local_ca_guid = get64(b, 16);
	m->local_qkey = get32(b, 28);
	m->local_qpn = get24(b, 32);
	m->responder_resources = b[35];
	m->local_eecn = get24(b, 36);
	m->initiator_depth = b[39];
	m->remote_eecn = get24(b, 40);
	m->remote_cm_response_timeout = (uint8_t)getbits(b, 43, 7, 5);
	m->transport = (uint8_t)getbits(b, 43, 2, 2);
	m->flow_control = getbits(b, 43, 0, 1);
	m->starting_psn = get24(b, 44);
	m->local_cm_response_timeout = (uint8_t)getbits(b, 47, 7, 5);
	m->retry_count = (uint8_t)getbits(b, 47, 2, 3);
	m->pkey = get16(b, 48);
	m->path_mtu = (uint8_t)getbits(b, 50, 7, 4);
	m->rdc_exists = getbits(b, 50, 3, 1);
	m->rnr_retry_count = (uint8_t)getbits(b, 50, 2, 3);
	m->max_cm_retries = (uint8_t)getbits(b, 51, 7, 4);
	m->srq = getbits(b, 51, 3, 1);
	m->ext_transport = (uint8_t)getbits(b, 51, 2, 3);
	get_path(b, 52, &m->primary);
	get_path(b, 96, &m->alternate);
	m->sap_supported = getbits(b, 139, 2, 1);
	memcpy(m->pdata, b + 140, CM_REQ_PDATA);
	return 0;
}

/* Contract: see mad.h. */
void cm_encode_mra(uint8_t mad[CM_MAD_LEN], const struct cm_mra *m)
{
	uint8_t *b = mad + CM_HDR_LEN;

	put32(b, 0, m->local_comm_id);
	put32(b, 4, m->remote_comm_id);
	putbits(b, 8, 7, 2, m->msg_mraed);
	putbits(b, 9, 7, 5, m->service_timeout);
	memcpy(b + 10, m->pdata, CM_MRA_PDATA);
}

/* Contract: see mad.h. */
int cm_decode_mra(const uint8_t mad[CM_MAD_LEN], struct cm_mra *m)
{
	const uint8_t *b = mad + CM_HDR_LEN;

	m->local_comm_id = get32(b, 0);
	m->remote_comm_id = get32(b, 4);
	m->msg_mraed = (uint8_t)getbits(b, 8, 7, 2);
	m->service_timeout = (uint8_t)getbits(b, 9, 7, 5);
	memcpy(m->pdata, b + 10, CM_MRA_PDATA);
	return 0;
}

/* Contract: see mad.h. */
void cm_encode_rej(uint8_t mad[CM_MAD_LEN], const struct cm_rej *m)
{
	uint8_t *b = mad + CM_HDR_LEN;

	put32(b, 0, m->local_comm_id);
	put32(b, 4, m->remote_comm_id);
	putbits(b, 8, 7, 2, m->msg_rejected);
	putbits(b, 9, 7, 7, m->ari_len);
	put16(b, 10, m->reason);
	memcpy(b + 12, m->ari, CM_REJ_ARI);
	memcpy(b + 84, m->pdata, CM_REJ_PDATA);
}

/* Contract: see mad.h. */
int cm_decode_rej(const uint8_t mad[CM_MAD_LEN], struct cm_rej *m)
{
	const uint8_t *b = mad + CM_HDR_LEN;

	m->local_comm_id = get32(b, 0);
	m->remote_comm_id = get32(b, 4);
	m->msg_rejected = (uint8_t)getbits(b, 8, 7, 2);
	m->ari_len = (uint8_t)getbits(b, 9, 7, 7);
	m->reason = get16(b, 10);
	memcpy(m->ari, b + 12, CM_REJ_ARI);
	memcpy(m->pdata, b + 84, CM_REJ_PDATA);
	return m->ari_len > CM_REJ_ARI ? -EBADMSG : 0;
}

/* Contract: see mad.h. */
void cm_encode_rep(uint8_t mad[CM_MAD_LEN], const struct cm_rep *m)
{
	uint8_t *b = mad + CM_HDR_LEN;

	put32(b, 0, m->local_comm_id);
	put32(b, 4, m->remote_comm_id);
	put32(b, 8, m->local_qkey);
	put24(b, 12, m->local_qpn);
	put8(b, 15, (uint8_t)(m->vendor_id >> 16));
	put24(b, 16, m->local_eecn);
	put8(b, 19, (uint8_t)(m->vendor_id >> 8));
	put24(b, 20, m->starting_psn);
	put8(b, 23, (uint8_t)m->vendor_id);
	put8(b, 24, m->responder_resources);
	put8(b, 25, m->initiator_depth);
	putbits(b, 26, 7, 5, m->target_ack_delay);
	putbits(b, 26, 2, 2, m->failover);
	putbits(b, 26, 0, 1, m->flow_control);
	putbits(b, 27, 7, 3, m->rnr_retry_count);
	putbits(b, 27, 4, 1, m->srq);
	put64(b, 28, m->local_ca_guid);
	memcpy(b + 36, m->pdata, CM_REP_PDATA);
}

/* Contract: see mad.h. */
int cm_decode_rep(const uint8_t mad[CM_MAD_LEN], struct cm_rep *m)
{
	const uint8_t *b = mad + CM_HDR_LEN;

	m->local_comm_id = get32(b, 0);
	m->remote_comm_id = get32(b, 4);
	m->local_qkey = get32(b, 8);
	m->local_qpn = get24(b, 12);
	m->vendor_id = (uint32_t)b[15] << 16 | (uint32_t)b[19] << 8 | b[23];
	m->local_eecn = get24(b, 16);
	m->starting_psn = get24(b, 20);
	m->responder_resources = b[24];
	m->initiator_depth = b[25];
	m->target_ack_delay = (uint8_t)getbits(b, 26, 7, 5);
	m->failover = (uint8_t)getbits(b, 26, 2, 2);
	m->flow_control = getbits(b, 26, 0, 1);
	m->rnr_retry_count = (uint8_t)getbits(b, 27, 7, 3);
	m->srq = getbits(b, 27, 4, 1);
	m->local_ca_guid = get64(b, 28);
	memcpy(m->pdata, b + 36, CM_REP_PDATA);
	return 0;
}

/* Contract: see mad.h. RTU and DREP share one layout. */
void cm_encode_rtu(uint8_t mad[CM_MAD_LEN], const struct cm_rtu *m)
{
	uint8_t *b = mad + CM_HDR_LEN;

	put32(b, 0, m->local_comm_id);
	put32(b, 4, m->remote_comm_id);
	memcpy(b + 8, m->pdata, CM_RTU_PDATA);
}

/* Contract: see mad.h. */
int cm_decode_rtu(const uint8_t mad[CM_MAD_LEN], struct cm_rtu *m)
{
	const uint8_t *b = mad + CM_HDR_LEN;

	m->local_comm_id = get32(b, 0);
	m->remote_comm_id = get32(b, 4);
	memcpy(m->pdata, b + 8, CM_RTU_PDATA);
	return 0;
}

/* Contract: see mad.h. */
void cm_encode_drep(uint8_t mad[CM_MAD_LEN], const struct cm_rtu *m)
{
	cm_encode_rtu(mad, m);
}

/* Contract: see mad.h. */
int cm_decode_drep(const uint8_t mad[CM_MAD_LEN], struct cm_rtu *m)
{
	return cm_decode_rtu(mad, m);
}

/* Contract: see mad.h. */
void cm_encode_dreq(uint8_t mad[CM_MAD_LEN], const struct cm_dreq *m)
{
	uint8_t *b = mad + CM_HDR_LEN;

	put32(b, 0, m->local_comm_id);
	put32(b, 4, m->remote_comm_id);
	put24(b, 8, m->remote_qpn);
	memcpy(b + 12, m->pdata, CM_DREQ_PDATA);
}

/* Contract: see mad.h. */
int cm_decode_dreq(const uint8_t mad[CM_MAD_LEN], struct cm_dreq *m)
{
	const uint8_t *b = mad + CM_HDR_LEN;

	m->local_comm_id = get32(b, 0);
	m->remote_comm_id = get32(b, 4);
	m->remote_qpn = get24(b, 8);
	memcpy(m->pdata, b + 12, CM_DREQ_PDATA);
	return 0;
}

/* Contract: see mad.h. */
void cm_encode_sidr_req(uint8_t mad[CM_MAD_LEN], const struct cm_sidr_req *m)
{
	uint8_t *b = mad + CM_HDR_LEN;

	put32(b, 0, m->request_id);
	put16(b, 4, m->pkey);
	put64(b, 8, m->service_id);
	memcpy(b + 16, m->pdata, CM_SIDR_REQ_PDATA);
}

/* Contract: see mad.h. */
int cm_decode_sidr_req(const uint8_t mad[CM_MAD_LEN], struct cm_sidr_req *m)
{
	const uint8_t *b = mad + CM_HDR_LEN;

	m->request_id = get32(b, 0);
	m->pkey = get16(b, 4);
	m->service_id = get64(b, 8);
	memcpy(m->pdata, b + 16, CM_SIDR_REQ_PDATA);
	return 0;
}

/* Contract: see mad.h. */
void cm_encode_sidr_rep(uint8_t mad[CM_MAD_LEN], const struct cm_sidr_rep *m)
{
	uint8_t *b = mad + CM_HDR_LEN;

	put32(b, 0, m->request_id);
	put8(b, 4, m->status);
	put8(b, 5, m->info_len);
	put16(b, 6, (uint16_t)(m->vendor_id >> 8));
	put24(b, 8, m->qpn);
	put8(b, 11, (uint8_t)m->vendor_id);
	put64(b, 12, m->service_id);
	put32(b, 20, m->qkey);
	memcpy(b + 24, m->info, CM_SIDR_REP_INFO);
	memcpy(b + 96, m->pdata, CM_SIDR_REP_PDATA);
}

/* Contract: see mad.h. */
int cm_decode_sidr_rep(const uint8_t mad[CM_MAD_LEN], struct cm_sidr_rep *m)
{
	const uint8_t *b = mad + CM_HDR_LEN;

	m->request_id = get32(b, 0);
	m->status = b[4];
	m->info_len = b[5];
	m->vendor_id = (uint32_t)get16(b, 6) << 8 | b[11];
	m->qpn = get24(b, 8);
	m->service_id = get64(b, 12);
	m->qkey = get32(b, 20);
	memcpy(m->info, b + 24, CM_SIDR_REP_INFO);
	memcpy(m->pdata, b + 96, CM_SIDR_REP_PDATA);
	return m->info_len > CM_SIDR_REP_INFO ? -EBADMSG : 0;
}

/* Contract: see mad.h. */
void cma_hdr_encode(uint8_t p[CMA_HDR_LEN], const struct cma_hdr *h)
{
	memset(p, 0, CMA_HDR_LEN);
	p[0] = h->cma_version;
	p[1] = (uint8_t)(h->ip_version << 4);
	put16(p, 2, h->src_port);
	memcpy(p + 4, h->src_ip, 16);
	memcpy(p + 20, h->dst_ip, 16);
}

/* Contract: see mad.h. */
int cma_hdr_decode(const uint8_t p[CMA_HDR_LEN], struct cma_hdr *h)
{
	h->cma_version = p[0];
	h->ip_version = p[1] >> 4;
	h->src_port = get16(p, 2);
	memcpy(h->src_ip, p + 4, 16);
	memcpy(h->dst_ip, p + 20, 16);
	if (h->cma_version != CMA_VERSION || (h->ip_version != 4 && h->ip_version != 6))
		return -EBADMSG;
	return 0;
}
