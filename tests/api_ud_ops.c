/* SPDX-License-Identifier: MIT */
/*
 * api_ud_ops.c - UD sends: the 40-byte GRH lands in front of the payload
 * (for RoCE v2 over IPv4, the IPv4 header in its last 20 bytes), Q_Keys
 * are checked, immediates arrive, a reply AH made from the completion
 * reaches the sender, and a message over the path MTU is refused. The
 * completion's address fields are what RoCE hardware reports: sl is the
 * packet type as mlx5 gives it (0xa: bit 3 UDP, network header 2 =
 * IPv4; UCX reads the low three bits), slid, dlid_path_bits and
 * pkey_index 0, IBV_WC_GRH set, src_qp the sender's QPN; the GRH area is
 * 20 zero bytes and a valid IPv4 header of the packet (checksum, UDP,
 * total length, addresses).
 */
#include "harness.h"
#include "traffic.h"

#define BUF (64u << 10)

static struct t_ep a, b;

/* The IPv4 header checksum over 20 bytes is 0xffff when it is right. */
static unsigned int ip_sum(const uint8_t *ip)
{
	unsigned int sum = 0;

	for (int i = 0; i < 20; i += 2)
		sum += (unsigned int)(ip[i] << 8 | ip[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

/* The fields of a UD receive of `len` payload bytes with an immediate. */
static void check_ud_fields(const struct ibv_wc *wc, const uint8_t *grh, uint32_t len)
{
	static const uint8_t zero[20];
	const uint8_t *ip = grh + 20;

	CHECK_EQ_INT(wc->sl, 0xa); /* RoCE v2 (bit 3) over IPv4 (2), as mlx5 */
	CHECK_EQ_INT(wc->sl & 7, 2); /* what UCX's UD transport tests */
	CHECK_EQ_INT(wc->slid, 0);
	CHECK_EQ_INT(wc->dlid_path_bits, 0);
	CHECK_EQ_INT(wc->pkey_index, 0);
	CHECK(wc->wc_flags & IBV_WC_GRH);
	CHECK_EQ_INT(wc->src_qp, a.qp->qp_num);
	CHECK_EQ_INT(wc->qp_num, b.qp->qp_num);
	CHECK(!memcmp(grh, zero, sizeof(zero)));
	CHECK_EQ_INT(ip[0], 0x45);
	CHECK_EQ_INT(ip[9], 17); /* UDP */
	CHECK(ip[8] > 0); /* TTL */
	CHECK_EQ_INT(ip_sum(ip), 0xffff);
	/* IP 20 + UDP 8 + BTH 12 + DETH 8 + ImmDt 4 + payload + pad + ICRC 4 */
	CHECK_EQ_INT(ip[2] << 8 | ip[3], 20 + 8 + 12 + 8 + 4 + len + (-len & 3) + 4);
}

static int post_ud(struct t_ep *from, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey, uint32_t len,
		   bool imm, uint64_t id)
{
	struct ibv_sge sge = {(uintptr_t)from->buf, len, from->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.imm_data = htonl(0x55aa);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(from->qp, &wr, &bad);
}

int main(void)
{
	int access = IBV_ACCESS_LOCAL_WRITE;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah, *reply;
	struct ibv_wc wc;
	struct t_addr x;
	uint32_t mtu = 0;

	t_start("api_ud_ops");
	if (t_ep_init(&a, NULL, IBV_QPT_UD, BUF, access, 16) ||
	    t_ep_init(&b, NULL, IBV_QPT_UD, BUF, access, 16))
		return t_finish();
	x = t_addr_of(&a, 0);
	if (t_connect_to(&a, &x, 1, IBV_MTU_1024) || t_connect_to(&b, &x, 2, IBV_MTU_1024))
		return t_finish();
	aa = t_ah_attr(&b.gid);
	ah = ibv_create_ah(a.pd, &aa);
	if (!CHECK(ah))
		return t_finish();

	t_case("GRH then payload; byte_len counts the GRH; immediate");
	t_fill(a.buf, 1000, 4);
	CHECK(t_post_recv(&b, 1, 0, 2000) == 0);
	CHECK(post_ud(&a, ah, b.qp->qp_num, 0x11111111, 1000, true, 10) == 0);
	CHECK_EQ_INT(t_poll(a.cq, &wc, 1, 30000), 1);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 10);
	if (CHECK_EQ_INT(t_poll(b.cq, &wc, 1, 30000), 1)) {
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV);
		CHECK_EQ_INT(wc.byte_len, 1040);
		CHECK(wc.wc_flags & IBV_WC_GRH);
		CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
		CHECK_EQ_INT(ntohl(wc.imm_data), 0x55aa);
		CHECK_EQ_INT(wc.src_qp, a.qp->qp_num);
		check_ud_fields(&wc, b.buf, 1000);
	}
	CHECK(memcmp(b.buf + 40, a.buf, 1000) == 0);
	CHECK_EQ_INT(b.buf[20], 0x45); /* IPv4, 5 words */
	CHECK(memcmp(b.buf + 32, &a.gid.raw[12], 4) == 0); /* source address */
	CHECK(memcmp(b.buf + 36, &b.gid.raw[12], 4) == 0); /* destination */

	t_case("a reply AH from the completion reaches the sender");
	reply = ibv_create_ah_from_wc(b.pd, &wc, (struct ibv_grh *)(void *)b.buf, 1);
	if (CHECK(reply)) {
		CHECK(t_post_recv(&a, 2, 0, 2000) == 0);
		CHECK(post_ud(&b, reply, wc.src_qp, 0x11111111, 10, false, 11) == 0);
		CHECK_EQ_INT(t_poll(b.cq, &wc, 1, 30000), 1);
		CHECK_EQ_INT(t_poll(a.cq, &wc, 1, 30000), 1);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 && wc.byte_len == 50);
		CHECK(ibv_destroy_ah(reply) == 0);
	}

	t_case("a wrong Q_Key is dropped; an over-MTU message is refused");
	{
		struct ibv_port_attr pa;

		CHECK(ibv_query_port(a.ctx, 1, &pa) == 0);
		mtu = 128u << pa.active_mtu;
	}
	CHECK(t_post_recv(&b, 3, 0, 8192) == 0);
	CHECK(post_ud(&a, ah, b.qp->qp_num, 0x22222222, 10, false, 12) == 0);
	CHECK_EQ_INT(t_poll(a.cq, &wc, 1, 30000), 1);
	CHECK_EQ_INT(t_poll(b.cq, &wc, 1, 200), 0); /* the posted receive stays */
	/* UD messages are bounded by the port's active MTU */
	CHECK_EQ_INT(post_ud(&a, ah, b.qp->qp_num, 0x11111111, mtu + 1, false, 13), EINVAL);
	CHECK(post_ud(&a, ah, b.qp->qp_num, 0x11111111, mtu, false, 14) == 0);
	CHECK_EQ_INT(t_poll(b.cq, &wc, 1, 30000), 1);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == mtu + 40);
	CHECK_EQ_INT(t_poll(a.cq, &wc, 1, 30000), 1);

	CHECK(ibv_destroy_ah(ah) == 0);
	t_ep_destroy(&a, true);
	t_ep_destroy(&b, true);
	return t_finish();
}
