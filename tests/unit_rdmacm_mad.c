/* SPDX-License-Identifier: MIT */
/*
 * unit_rdmacm_mad: the CM MAD codec (src/rdmacm/mad.c) against the
 * layouts: each message encoded with distinct field values, its bytes
 * checked at their MAD offsets (body offset + 24) as docs/rdmacm.md lists
 * them, then decoded back field by field; the MAD header; the rdma_cm IP
 * header; decoders refuse impossible lengths.
 */
#include "harness.h"

#include <stdint.h>

#include "rdmacm/mad.h"

static uint32_t be32_at(const uint8_t *m, int off)
{
	return (uint32_t)m[off] << 24 | (uint32_t)m[off + 1] << 16 | (uint32_t)m[off + 2] << 8 |
	       m[off + 3];
}

static uint32_t be24_at(const uint8_t *m, int off)
{
	return (uint32_t)m[off] << 16 | (uint32_t)m[off + 1] << 8 | m[off + 2];
}

static uint64_t be64_at(const uint8_t *m, int off)
{
	return (uint64_t)be32_at(m, off) << 32 | be32_at(m, off + 4);
}

static void test_header(void)
{
	uint8_t mad[CM_MAD_LEN];
	struct cm_mad_hdr h;

	t_case("MAD header");
	memset(mad, 0xee, sizeof(mad));
	cm_mad_init(mad, CM_ATTR_REP, 0x1122334455667788ull, 0xa1b2c3d4);
	CHECK_EQ_INT(mad[0], 1);
	CHECK_EQ_INT(mad[1], 0x07);
	CHECK_EQ_INT(mad[2], 2);
	CHECK_EQ_INT(mad[3], 0x03);
	CHECK_EQ_INT(be32_at(mad, 4), 0);
	CHECK(be64_at(mad, 8) == 0x1122334455667788ull);
	CHECK_EQ_INT(mad[16] << 8 | mad[17], 0x0013);
	CHECK_EQ_INT(be32_at(mad, 20), 0xa1b2c3d4);
	for (int i = CM_HDR_LEN; i < CM_MAD_LEN; i++)
		if (mad[i]) {
			CHECK_MSG(0, "body byte %d not zeroed", i);
			break;
		}
	CHECK_EQ_INT(cm_mad_parse_hdr(mad, &h), 0);
	CHECK(h.tid == 0x1122334455667788ull);
	CHECK_EQ_INT(h.attr_id, CM_ATTR_REP);
	mad[2] = 1; /* class version 1: no agent */
	CHECK_EQ_INT(cm_mad_parse_hdr(mad, &h), -EBADMSG);
	mad[2] = 2;
	mad[3] = 0x81; /* a GetResp */
	CHECK_EQ_INT(cm_mad_parse_hdr(mad, &h), -EBADMSG);
	mad[3] = 3;
	mad[1] = 0x04;
	CHECK_EQ_INT(cm_mad_parse_hdr(mad, &h), -EBADMSG);
	mad[1] = 7;
	mad[0] = 2;
	CHECK_EQ_INT(cm_mad_parse_hdr(mad, &h), -EBADMSG);
}

static void fill_path(struct cm_req_path *p, uint8_t seed)
{
	p->local_lid = 0xffff;
	p->remote_lid = (uint16_t)(0xfe00 | seed);
	for (int i = 0; i < 16; i++) {
		p->local_gid[i] = (uint8_t)(seed + i);
		p->remote_gid[i] = (uint8_t)(0x80 + seed + i);
	}
	p->flow_label = 0xabcde;
	p->packet_rate = 0x2a;
	p->traffic_class = 0x5c;
	p->hop_limit = 64;
	p->sl = 9;
	p->subnet_local = true;
	p->local_ack_timeout = 17;
}

static void test_req(void)
{
	uint8_t mad[CM_MAD_LEN];
	struct cm_req r, d;

	t_case("REQ");
	memset(&r, 0, sizeof(r));
	r.local_comm_id = 0x01020304;
	r.vendor_id = 0x0a0b0c;
	r.service_id = 0x0000000001061c06ull;
	r.local_ca_guid = 0x1112131415161718ull;
	r.local_qkey = 0x21222324;
	r.local_qpn = 0x313233;
	r.responder_resources = 0x34;
	r.local_eecn = 0x414243;
	r.initiator_depth = 0x44;
	r.remote_eecn = 0x515253;
	r.remote_cm_response_timeout = 20;
	r.transport = 3;
	r.flow_control = true;
	r.starting_psn = 0x616263;
	r.local_cm_response_timeout = 19;
	r.retry_count = 6;
	r.pkey = 0xffff;
	r.path_mtu = 3;
	r.rdc_exists = true;
	r.rnr_retry_count = 5;
	r.max_cm_retries = 15;
	r.srq = true;
	r.ext_transport = 1;
	fill_path(&r.primary, 0x10);
	r.sap_supported = true;
	for (int i = 0; i < CM_REQ_PDATA; i++)
		r.pdata[i] = (uint8_t)(0xc0 + i);
	cm_mad_init(mad, CM_ATTR_REQ, 7, 0);
	cm_encode_req(mad, &r);
	CHECK_EQ_INT(be32_at(mad, 24), 0x01020304);
	CHECK_EQ_INT(mad[28], 0);
	CHECK_EQ_INT(be24_at(mad, 29), 0x0a0b0c);
	CHECK(be64_at(mad, 32) == 0x0000000001061c06ull);
	CHECK_EQ_INT(mad[32 + 4], 0x01); /* the IP CM service byte */
	CHECK(be64_at(mad, 40) == 0x1112131415161718ull);
	CHECK_EQ_INT(be32_at(mad, 52), 0x21222324);
	CHECK_EQ_INT(be24_at(mad, 56), 0x313233);
	CHECK_EQ_INT(mad[59], 0x34);
	CHECK_EQ_INT(be24_at(mad, 60), 0x414243);
	CHECK_EQ_INT(mad[63], 0x44);
	CHECK_EQ_INT(be24_at(mad, 64), 0x515253);
	CHECK_EQ_INT(mad[67], 20 << 3 | 3 << 1 | 1);
	CHECK_EQ_INT(be24_at(mad, 68), 0x616263);
	CHECK_EQ_INT(mad[71], 19 << 3 | 6);
	CHECK_EQ_INT(mad[72] << 8 | mad[73], 0xffff);
	CHECK_EQ_INT(mad[74], 3 << 4 | 1 << 3 | 5);
	CHECK_EQ_INT(mad[75], 15 << 4 | 1 << 3 | 1);
	CHECK_EQ_INT(mad[76] << 8 | mad[77], 0xffff);
	CHECK_EQ_INT(mad[78] << 8 | mad[79], 0xfe10);
	CHECK_EQ_INT(mad[80], 0x10);
	CHECK_EQ_INT(mad[95], 0x1f);
	CHECK_EQ_INT(mad[96], 0x90);
	CHECK_EQ_INT(be32_at(mad, 112), 0xabcdeu << 12 | 0x2a);
	CHECK_EQ_INT(mad[116], 0x5c);
	CHECK_EQ_INT(mad[117], 64);
	CHECK_EQ_INT(mad[118], 9 << 4 | 1 << 3);
	CHECK_EQ_INT(mad[119], 17 << 3);
	for (int i = 120; i < 163; i++)
		if (mad[i]) {
			CHECK_MSG(0, "alternate path byte %d is %#x", i, mad[i]);
			break;
		}
	CHECK_EQ_INT(mad[163], 1 << 2); /* SAP supported */
	CHECK_EQ_INT(mad[164], 0xc0);
	CHECK_EQ_INT(mad[255], (uint8_t)(0xc0 + 91));
	memset(&d, 0, sizeof(d));
	CHECK_EQ_INT(cm_decode_req(mad, &d), 0);
	CHECK(!memcmp(&r.primary, &d.primary, sizeof(r.primary)));
	CHECK_EQ_INT(d.local_comm_id, r.local_comm_id);
	CHECK_EQ_INT(d.vendor_id, r.vendor_id);
	CHECK(d.service_id == r.service_id && d.local_ca_guid == r.local_ca_guid);
	CHECK_EQ_INT(d.local_qkey, r.local_qkey);
	CHECK_EQ_INT(d.local_qpn, r.local_qpn);
	CHECK_EQ_INT(d.responder_resources, r.responder_resources);
	CHECK_EQ_INT(d.initiator_depth, r.initiator_depth);
	CHECK_EQ_INT(d.local_eecn, r.local_eecn);
	CHECK_EQ_INT(d.remote_eecn, r.remote_eecn);
	CHECK_EQ_INT(d.remote_cm_response_timeout, 20);
	CHECK_EQ_INT(d.transport, 3);
	CHECK(d.flow_control && d.rdc_exists && d.srq && d.sap_supported);
	CHECK_EQ_INT(d.starting_psn, r.starting_psn);
	CHECK_EQ_INT(d.local_cm_response_timeout, 19);
	CHECK_EQ_INT(d.retry_count, 6);
	CHECK_EQ_INT(d.pkey, 0xffff);
	CHECK_EQ_INT(d.path_mtu, 3);
	CHECK_EQ_INT(d.rnr_retry_count, 5);
	CHECK_EQ_INT(d.max_cm_retries, 15);
	CHECK_EQ_INT(d.ext_transport, 1);
	CHECK(!memcmp(d.pdata, r.pdata, CM_REQ_PDATA));
	CHECK_EQ_INT(d.alternate.local_lid, 0);
}

static void test_rep(void)
{
	uint8_t mad[CM_MAD_LEN];
	struct cm_rep r, d;

	t_case("REP");
	memset(&r, 0, sizeof(r));
	r.local_comm_id = 0xa1a2a3a4;
	r.remote_comm_id = 0xb1b2b3b4;
	r.local_qkey = 0xc1c2c3c4;
	r.local_qpn = 0xd1d2d3;
	r.vendor_id = 0xe1e2e3;
	r.local_eecn = 0x0f0e0d;
	r.starting_psn = 0x123456;
	r.responder_resources = 7;
	r.initiator_depth = 8;
	r.target_ack_delay = 15;
	r.failover = 2;
	r.flow_control = true;
	r.rnr_retry_count = 7;
	r.srq = true;
	r.local_ca_guid = 0x8877665544332211ull;
	memset(r.pdata, 0x5a, sizeof(r.pdata));
	cm_mad_init(mad, CM_ATTR_REP, 9, 0);
	cm_encode_rep(mad, &r);
	CHECK_EQ_INT(be32_at(mad, 24), 0xa1a2a3a4);
	CHECK_EQ_INT(be32_at(mad, 28), 0xb1b2b3b4);
	CHECK_EQ_INT(be32_at(mad, 32), 0xc1c2c3c4);
	CHECK_EQ_INT(be24_at(mad, 36), 0xd1d2d3);
	CHECK_EQ_INT(mad[39], 0xe1);
	CHECK_EQ_INT(be24_at(mad, 40), 0x0f0e0d);
	CHECK_EQ_INT(mad[43], 0xe2);
	CHECK_EQ_INT(be24_at(mad, 44), 0x123456);
	CHECK_EQ_INT(mad[47], 0xe3);
	CHECK_EQ_INT(mad[48], 7);
	CHECK_EQ_INT(mad[49], 8);
	CHECK_EQ_INT(mad[50], 15 << 3 | 2 << 1 | 1);
	CHECK_EQ_INT(mad[51], 7 << 5 | 1 << 4);
	CHECK(be64_at(mad, 52) == 0x8877665544332211ull);
	CHECK_EQ_INT(mad[60], 0x5a);
	CHECK_EQ_INT(mad[255], 0x5a);
	memset(&d, 0, sizeof(d));
	CHECK_EQ_INT(cm_decode_rep(mad, &d), 0);
	CHECK(!memcmp(&r, &d, sizeof(r)));
}

static void test_small(void)
{
	uint8_t mad[CM_MAD_LEN];
	struct cm_rej j, jd;
	struct cm_mra m, md;
	struct cm_rtu u, ud;
	struct cm_dreq q, qd;

	t_case("MRA, REJ, RTU, DREQ, DREP");
	memset(&m, 0, sizeof(m));
	m.local_comm_id = 1;
	m.remote_comm_id = 2;
	m.msg_mraed = CM_MSG_REP;
	m.service_timeout = 24;
	cm_mad_init(mad, CM_ATTR_MRA, 1, 0);
	cm_encode_mra(mad, &m);
	CHECK_EQ_INT(mad[32], 1 << 6);
	CHECK_EQ_INT(mad[33], 24 << 3);
	memset(&md, 0, sizeof(md));
	CHECK_EQ_INT(cm_decode_mra(mad, &md), 0);
	CHECK(!memcmp(&m, &md, sizeof(m)));

	memset(&j, 0, sizeof(j));
	j.local_comm_id = 0;
	j.remote_comm_id = 0x77;
	j.msg_rejected = CM_MSG_OTHER;
	j.ari_len = 16;
	j.reason = CM_REJ_INVALID_GID;
	memset(j.ari, 0xaa, 16);
	memset(j.pdata, 0x33, CM_REJ_PDATA);
	cm_mad_init(mad, CM_ATTR_REJ, 1, 0);
	cm_encode_rej(mad, &j);
	CHECK_EQ_INT(be32_at(mad, 28), 0x77);
	CHECK_EQ_INT(mad[32], 2 << 6);
	CHECK_EQ_INT(mad[33], 16 << 1);
	CHECK_EQ_INT(mad[34] << 8 | mad[35], 12);
	CHECK_EQ_INT(mad[36], 0xaa);
	CHECK_EQ_INT(mad[52], 0);
	CHECK_EQ_INT(mad[108], 0x33);
	memset(&jd, 0, sizeof(jd));
	CHECK_EQ_INT(cm_decode_rej(mad, &jd), 0);
	CHECK(!memcmp(&j, &jd, sizeof(j)));
	mad[33] = 73 << 1; /* an ARI longer than its field */
	CHECK_EQ_INT(cm_decode_rej(mad, &jd), -EBADMSG);

	memset(&u, 0, sizeof(u));
	u.local_comm_id = 5;
	u.remote_comm_id = 6;
	u.pdata[0] = 9;
	cm_mad_init(mad, CM_ATTR_RTU, 1, 0);
	cm_encode_rtu(mad, &u);
	CHECK_EQ_INT(be32_at(mad, 24), 5);
	CHECK_EQ_INT(be32_at(mad, 28), 6);
	CHECK_EQ_INT(mad[32], 9);
	memset(&ud, 0, sizeof(ud));
	CHECK_EQ_INT(cm_decode_drep(mad, &ud), 0);
	CHECK(!memcmp(&u, &ud, sizeof(u)));

	memset(&q, 0, sizeof(q));
	q.local_comm_id = 10;
	q.remote_comm_id = 11;
	q.remote_qpn = 0xabcdef;
	q.pdata[0] = 1;
	cm_mad_init(mad, CM_ATTR_DREQ, 1, 0);
	cm_encode_dreq(mad, &q);
	CHECK_EQ_INT(be24_at(mad, 32), 0xabcdef);
	CHECK_EQ_INT(mad[35], 0);
	CHECK_EQ_INT(mad[36], 1);
	memset(&qd, 0, sizeof(qd));
	CHECK_EQ_INT(cm_decode_dreq(mad, &qd), 0);
	CHECK(!memcmp(&q, &qd, sizeof(q)));
}

static void test_sidr(void)
{
	uint8_t mad[CM_MAD_LEN];
	struct cm_sidr_req q, qd;
	struct cm_sidr_rep p, pd;

	t_case("SIDR_REQ, SIDR_REP");
	memset(&q, 0, sizeof(q));
	q.request_id = 0x42;
	q.pkey = 0xffff;
	q.service_id = 0x0000000001113039ull;
	q.pdata[0] = 0x00;
	q.pdata[1] = 0x40;
	cm_mad_init(mad, CM_ATTR_SIDR_REQ, 1, 0);
	cm_encode_sidr_req(mad, &q);
	CHECK_EQ_INT(be32_at(mad, 24), 0x42);
	CHECK_EQ_INT(mad[28] << 8 | mad[29], 0xffff);
	CHECK(be64_at(mad, 32) == 0x0000000001113039ull);
	CHECK_EQ_INT(mad[41], 0x40);
	memset(&qd, 0, sizeof(qd));
	CHECK_EQ_INT(cm_decode_sidr_req(mad, &qd), 0);
	CHECK(!memcmp(&q, &qd, sizeof(q)));

	memset(&p, 0, sizeof(p));
	p.request_id = 0x42;
	p.status = CM_SIDR_REJECT;
	p.vendor_id = 0x010203;
	p.qpn = 0x654321;
	p.service_id = q.service_id;
	p.qkey = 0x01234567;
	p.pdata[0] = 0xfe;
	cm_mad_init(mad, CM_ATTR_SIDR_REP, 1, 0);
	cm_encode_sidr_rep(mad, &p);
	CHECK_EQ_INT(mad[28], 2);
	CHECK_EQ_INT(mad[30] << 8 | mad[31], 0x0102);
	CHECK_EQ_INT(be24_at(mad, 32), 0x654321);
	CHECK_EQ_INT(mad[35], 0x03);
	CHECK(be64_at(mad, 36) == q.service_id);
	CHECK_EQ_INT(be32_at(mad, 44), 0x01234567);
	CHECK_EQ_INT(mad[120], 0xfe);
	memset(&pd, 0, sizeof(pd));
	CHECK_EQ_INT(cm_decode_sidr_rep(mad, &pd), 0);
	CHECK(!memcmp(&p, &pd, sizeof(p)));
	mad[29] = 73; /* additional information longer than its field */
	CHECK_EQ_INT(cm_decode_sidr_rep(mad, &pd), -EBADMSG);
}

static void test_cma_hdr(void)
{
	uint8_t b[CMA_HDR_LEN];
	struct cma_hdr h = {.cma_version = 0, .ip_version = 4, .src_port = 0x1c06}, d;

	t_case("rdma_cm IP header");
	h.src_ip[12] = 10, h.src_ip[15] = 1;
	h.dst_ip[12] = 10, h.dst_ip[15] = 2;
	cma_hdr_encode(b, &h);
	CHECK_EQ_INT(b[0], 0);
	CHECK_EQ_INT(b[1], 0x40);
	CHECK_EQ_INT(b[2] << 8 | b[3], 0x1c06);
	CHECK_EQ_INT(b[16], 10);
	CHECK_EQ_INT(b[19], 1);
	CHECK_EQ_INT(b[32], 10);
	CHECK_EQ_INT(b[35], 2);
	CHECK_EQ_INT(cma_hdr_decode(b, &d), 0);
	CHECK(!memcmp(&h, &d, sizeof(h)));
	b[0] = 1;
	CHECK_EQ_INT(cma_hdr_decode(b, &d), -EBADMSG);
	b[0] = 0;
	b[1] = 0x50;
	CHECK_EQ_INT(cma_hdr_decode(b, &d), -EBADMSG);
}

int main(void)
{
	t_start("unit_rdmacm_mad");
	test_header();
	test_req();
	test_rep();
	test_small();
	test_sidr();
	test_cma_hdr();
	return t_finish();
}
