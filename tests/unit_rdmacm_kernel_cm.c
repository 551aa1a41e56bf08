/* SPDX-License-Identifier: MIT */
/*
 * unit_rdmacm_kernel_cm: the CM MAD decoders (src/rdmacm/mad.c) against
 * MADs the Linux kernel's CM sent. tests/data/rxe_cm.pcap holds the CM
 * MADs of two rping connections between softverbs (10.77.0.1) and the
 * kernel's rdma_cm over rxe0 (Debian 12, kernel 6.1, 10.77.0.2), one in
 * each direction, both sides' packets, whole (make interop's
 * `tests/interop/interop.sh --capture-cm`). Every MAD must be a RoCE v2 UD
 * SEND Only from QP 1 to QP 1 with the GSI Q_Key, a CM MAD of class
 * version 2 whose message decodes; the kernel's REQ, REP, RTU, DREQ and
 * DREP must all be there, with the fields the kernel is known to send
 * (RC, port 7174's service ID, the rdma_cm IPv4 header naming both
 * addresses, the GIDs of both sides), and every message must belong to a
 * connection that a REQ opened (communication IDs matched as the CM
 * matches them).
 */
#include "harness.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "rdmacm/mad.h"

#define MAX_MADS 64
#define ETH_LEN 14
#define ROCE_PORT 4791
#define BTH_LEN 12
#define DETH_LEN 8

static const uint8_t kernel_ip[4] = {10, 77, 0, 2}, sv_ip[4] = {10, 77, 0, 1};

struct mad_pkt {
	uint8_t src[4];
	uint8_t bth[BTH_LEN], deth[DETH_LEN];
	uint8_t mad[CM_MAD_LEN];
};

static struct mad_pkt pkts[MAX_MADS];
static int npkts;

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)be16(p) << 16 | be16(p + 2);
}

/* A little-endian pcap word (tcpdump on x86 writes them so). */
static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* One Ethernet frame: kept when it is an IPv4 RoCE v2 packet of MAD size; 0 or -EINVAL. */
static int take_frame(const uint8_t *fr, uint32_t len)
{
	const uint8_t *u = fr + ETH_LEN + 20;

	if (len < ETH_LEN + 28 || be16(fr + 12) != 0x0800 || fr[ETH_LEN] != 0x45 ||
	    fr[ETH_LEN + 9] != 17 || be16(u + 2) != ROCE_PORT)
		return 0;
	if (be16(u + 4) != 8 + BTH_LEN + DETH_LEN + CM_MAD_LEN + 4 ||
	    len < ETH_LEN + 20u + be16(u + 4) || npkts == MAX_MADS)
		return -EINVAL;
	memcpy(pkts[npkts].src, fr + ETH_LEN + 12, 4);
	memcpy(pkts[npkts].bth, u + 8, BTH_LEN);
	memcpy(pkts[npkts].deth, u + 8 + BTH_LEN, DETH_LEN);
	memcpy(pkts[npkts].mad, u + 8 + BTH_LEN + DETH_LEN, CM_MAD_LEN);
	npkts++;
	return 0;
}

/* The whole capture (classic little-endian pcap, microseconds, Ethernet) into pkts; 0 or -errno. */
static int load(const char *path)
{
	static uint8_t buf[1 << 16];
	FILE *f = fopen(path, "rb");
	size_t n, off = 24;

	if (!f)
		return -errno;
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (n < off || n == sizeof(buf) || le32(buf) != 0xa1b2c3d4u || le32(buf + 20) != 1)
		return -EINVAL;
	while (off + 16 <= n) {
		uint32_t incl = le32(buf + off + 8);

		off += 16;
		if (incl > n - off || take_frame(buf + off, incl))
			return -EINVAL;
		off += incl;
	}
	return off == n ? 0 : -EINVAL;
}

static void gid_of(uint8_t gid[16], const uint8_t ip[4])
{
	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, ip, 4);
}

/* Connections by the active side's communication ID (from its REQ). */
static struct {
	uint32_t active, passive;
	bool kernel_active;
} conns[MAX_MADS];
static int nconns;

static int conn_of(uint32_t a, uint32_t b)
{
	for (int i = 0; i < nconns; i++)
		if ((conns[i].active == a && (!b || conns[i].passive == b)) ||
		    (conns[i].passive == a && conns[i].active == b))
			return i;
	return -1;
}

static void test_transport(void)
{
	t_case("every CM MAD: UD SEND Only, QP 1 to QP 1, the GSI Q_Key, class version 2");
	for (int i = 0; i < npkts; i++) {
		struct cm_mad_hdr h;

		CHECK_EQ_INT(pkts[i].bth[0], 0x64);
		CHECK_EQ_INT(be32(pkts[i].bth + 4) & 0xffffff, 1);
		CHECK_EQ_INT(be16(pkts[i].bth + 2), 0xffff);
		CHECK(be32(pkts[i].deth) == 0x80010000u);
		CHECK_EQ_INT(be32(pkts[i].deth + 4) & 0xffffff, 1);
		CHECK_EQ_INT(cm_mad_parse_hdr(pkts[i].mad, &h), 0);
		CHECK(!memcmp(pkts[i].src, kernel_ip, 4) || !memcmp(pkts[i].src, sv_ip, 4));
	}
}

static void check_req(const struct mad_pkt *p, const struct cm_req *r)
{
	const bool kernel = !memcmp(p->src, kernel_ip, 4);
	uint8_t lgid[16], rgid[16];
	struct cma_hdr ch;

	gid_of(lgid, kernel ? kernel_ip : sv_ip);
	gid_of(rgid, kernel ? sv_ip : kernel_ip);
	CHECK(r->service_id == 0x0000000001061C06ull); /* RDMA_PS_TCP, port 7174 */
	CHECK_EQ_INT(r->transport, 0);
	CHECK_EQ_INT(r->pkey, 0xffff);
	CHECK(!memcmp(r->primary.local_gid, lgid, 16));
	CHECK(!memcmp(r->primary.remote_gid, rgid, 16));
	CHECK_EQ_INT(r->primary.hop_limit, 64);
	CHECK(r->local_qpn > 1);
	CHECK_EQ_INT(cma_hdr_decode(r->pdata, &ch), 0);
	CHECK_EQ_INT(ch.ip_version, 4);
	CHECK(!memcmp(ch.src_ip + 12, p->src, 4));
	CHECK(!memcmp(ch.dst_ip + 12, kernel ? sv_ip : kernel_ip, 4));
	if (nconns < MAX_MADS) {
		conns[nconns].active = r->local_comm_id;
		conns[nconns].passive = 0;
		conns[nconns].kernel_active = kernel;
		nconns++;
	}
}

static void test_exchange(void)
{
	int kernel_sent[0x20] = {0};

	t_case("each message decodes and belongs to a connection a REQ opened");
	for (int i = 0; i < npkts; i++) {
		const struct mad_pkt *p = &pkts[i];
		const bool kernel = !memcmp(p->src, kernel_ip, 4);
		struct cm_mad_hdr h;
		struct cm_req req;
		struct cm_rep rep;
		struct cm_rtu rtu;
		struct cm_dreq dreq;
		int c;

		if (cm_mad_parse_hdr(p->mad, &h))
			continue;
		if (kernel && h.attr_id < 0x20)
			kernel_sent[h.attr_id]++;
		switch (h.attr_id) {
		case CM_ATTR_REQ:
			CHECK_EQ_INT(cm_decode_req(p->mad, &req), 0);
			check_req(p, &req);
			break;
		case CM_ATTR_REP:
			CHECK_EQ_INT(cm_decode_rep(p->mad, &rep), 0);
			c = conn_of(rep.remote_comm_id, 0);
			CHECK_MSG(c >= 0, "REP for comm ID 0x%x: no REQ", rep.remote_comm_id);
			if (c >= 0) {
				conns[c].passive = rep.local_comm_id;
				CHECK(conns[c].kernel_active != kernel);
			}
			CHECK(rep.local_qpn > 1);
			break;
		case CM_ATTR_RTU:
		case CM_ATTR_DREP:
			CHECK_EQ_INT(h.attr_id == CM_ATTR_RTU ? cm_decode_rtu(p->mad, &rtu) :
								cm_decode_drep(p->mad, &rtu),
				     0);
			CHECK_MSG(conn_of(rtu.local_comm_id, rtu.remote_comm_id) >= 0,
				  "attribute 0x%x for comm IDs 0x%x/0x%x: no connection", h.attr_id,
				  rtu.local_comm_id, rtu.remote_comm_id);
			break;
		case CM_ATTR_DREQ:
			CHECK_EQ_INT(cm_decode_dreq(p->mad, &dreq), 0);
			CHECK_MSG(conn_of(dreq.local_comm_id, dreq.remote_comm_id) >= 0,
				  "DREQ for comm IDs 0x%x/0x%x: no connection", dreq.local_comm_id,
				  dreq.remote_comm_id);
			CHECK(dreq.remote_qpn > 1);
			break;
		default:
			CHECK_MSG(0, "unexpected attribute 0x%x", h.attr_id);
		}
	}
	t_case("the kernel sent REQ, REP, RTU, DREQ and DREP");
	CHECK(kernel_sent[CM_ATTR_REQ] > 0);
	CHECK(kernel_sent[CM_ATTR_REP] > 0);
	CHECK(kernel_sent[CM_ATTR_RTU] > 0);
	CHECK(kernel_sent[CM_ATTR_DREQ] > 0);
	CHECK(kernel_sent[CM_ATTR_DREP] > 0);
	CHECK(nconns >= 2);
}

int main(void)
{
	t_start("unit_rdmacm_kernel_cm");
	t_case("tests/data/rxe_cm.pcap: the MADs of two connections");
	CHECK_EQ_INT(load(SV_TEST_DATA "/rxe_cm.pcap"), 0);
	CHECK_EQ_INT(npkts, 10); /* REQ REP RTU DREQ DREP, twice */
	if (npkts) {
		test_transport();
		test_exchange();
	}
	return t_finish();
}
