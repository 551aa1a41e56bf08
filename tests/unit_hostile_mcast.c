/* SPDX-License-Identifier: MIT */
/*
 * unit_hostile_mcast.c - a hostile peer (tests/hostile.h) sends multicast
 * packets at a live device with UD QPs attached to a group: by IP
 * multicast to the group's address, as a RoCE v2 sender does, and, for a
 * group the device is not in, injected (sw_rx_inject).
 *
 * A valid UD SEND to the group with destination QPN 0xffffff reaches the
 * QP in RTS (GRH destination: the group) and is dropped at the attached
 * QP still in INIT (drops_state). Dropped, counted, with no completion
 * and no change of QP state: a multicast destination with a QPN other
 * than 0xffffff (even the QP's own), an RC opcode to the group, a wrong
 * Q_Key, a bad ICRC, QPN 0xffffff to the device's unicast address, a
 * group the device has not joined. After the detach nothing reaches the
 * QP. Each drop is proved by a valid packet whose completion comes next
 * (one socket, in order).
 */
#include "harness.h"

#include "qp_util.h"
#include "hostile.h"

enum {
	UD_QKEY = 0x11111111, /* q_attr()'s Q_Key */
	LEN = 48,
};

static struct h_env H, *h = &H;
static uint8_t rbuf[4][SW_GRH_LEN + 256], data[LEN];
static struct ibv_mr *rmr;
static struct ibv_qp *u, *u_init;
static union ibv_gid group, other;
static union sw_sa gaddr, oaddr; /* the groups' addresses at the device's port */
static struct sw_icrc_ctx ic_mc; /* peer -> group */

static void post_recv(struct ibv_qp *qp, unsigned int i)
{
	struct ibv_sge s = {(uintptr_t)rbuf[i], sizeof(rbuf[i]), rmr->lkey};
	struct ibv_recv_wr w = {.wr_id = 100 + i, .sg_list = &s, .num_sge = 1}, *bad;

	CHECK_RET(ibv_post_recv(qp, &w, &bad), 0);
}

/* A UD SEND ONLY to `qpn` with `qkey`, LEN bytes of data, ICRC for the group; its length. */
static size_t build_ud(uint8_t *buf, uint8_t opcode, uint32_t qpn, uint32_t qkey)
{
	struct sw_pkt p = h_req(u, opcode, 0);

	p.dqpn = qpn;
	p.ack_req = false;
	p.qkey = qkey;
	p.sqpn = H_PEER_QPN;
	p.va = 0;
	p.dma_len = LEN;
	return h_build_ic(buf, &p, data, LEN, &ic_mc);
}

/* Send `len` bytes to the group by IP multicast. */
static void send_mc(const uint8_t *buf, size_t len)
{
	ssize_t n = sendto(h->fd, buf, len, 0, &gaddr.sa, sw_sa_len(&gaddr));

	CHECK_MSG(n == (ssize_t)len, "sendto group: %zd (%s)", n, t_errname(errno));
}

/* A valid SEND to the group; u receives it in buffer `i` (reposted), GRH to the group. */
static void valid_arrives(unsigned int i)
{
	uint8_t buf[SW_PKT_MAX + 64];
	struct ibv_wc wc;

	send_mc(buf, build_ud(buf, SW_OP_UD | SW_OP_SEND_ONLY, SW_QPN_MCAST, UD_QKEY));
	if (!CHECK_EQ_INT(q_poll(h->e.rcq, &wc, 1, 1), 1))
		return;
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 100 + i && wc.src_qp == H_PEER_QPN &&
	      wc.qp_num == u->qp_num);
	CHECK(wc.byte_len == SW_GRH_LEN + LEN && (wc.wc_flags & IBV_WC_GRH));
	CHECK(!memcmp(rbuf[i] + SW_GRH_LEN, data, LEN));
	CHECK(!memcmp(rbuf[i] + SW_GRH_LEN - 4, &gaddr.v4.sin_addr, 4)); /* IPv4 destination */
	CHECK(!memcmp(rbuf[i] + SW_GRH_LEN - 8, &h->me.sin_addr, 4)); /* IPv4 source */
	post_recv(u, i);
}

/* Nothing completed and u is still in RTS. */
static void nothing_else(void)
{
	struct ibv_wc wc;

	CHECK_EQ_INT(ibv_poll_cq(h->e.rcq, 1, &wc), 0);
	CHECK_EQ_INT(q_state(u), IBV_QPS_RTS);
}

static void cases(void)
{
	uint8_t buf[SW_PKT_MAX + 64];
	unsigned long long m0, n0, k0, s0, c0;
	size_t n;

	t_case("a valid SEND to the group: the QP in RTS receives it, the one in INIT drops it");
	s0 = H_CNT(h, drops_state);
	valid_arrives(0);
	H_WAIT_CNT(h, drops_state, s0 + 1);
	nothing_else();

	t_case("a multicast destination with a QPN other than 0xffffff: dropped");
	m0 = H_CNT(h, drops_malformed);
	send_mc(buf, build_ud(buf, SW_OP_UD | SW_OP_SEND_ONLY, u->qp_num, UD_QKEY));
	send_mc(buf, build_ud(buf, SW_OP_UD | SW_OP_SEND_ONLY, 0xfffffe, UD_QKEY));
	valid_arrives(1);
	CHECK_EQ_INT(H_CNT(h, drops_malformed) - m0, 2);
	nothing_else();

	t_case("an RC or UC opcode to the group: dropped");
	m0 = H_CNT(h, drops_malformed);
	send_mc(buf, build_ud(buf, SW_OP_WRITE_ONLY, SW_QPN_MCAST, UD_QKEY));
	send_mc(buf, build_ud(buf, SW_OP_UC | SW_OP_SEND_ONLY, SW_QPN_MCAST, UD_QKEY));
	valid_arrives(2);
	CHECK_EQ_INT(H_CNT(h, drops_malformed) - m0, 2);
	nothing_else();

	t_case("a wrong Q_Key and a bad ICRC: dropped");
	k0 = H_CNT(h, drops_qkey);
	c0 = H_CNT(h, drops_icrc);
	send_mc(buf, build_ud(buf, SW_OP_UD | SW_OP_SEND_ONLY, SW_QPN_MCAST, 0x12345678));
	n = build_ud(buf, SW_OP_UD | SW_OP_SEND_ONLY, SW_QPN_MCAST, UD_QKEY);
	buf[n - 1] ^= 0x5a;
	send_mc(buf, n);
	valid_arrives(3);
	CHECK_EQ_INT(H_CNT(h, drops_qkey) - k0, 1); /* u's (u_init drops all: its state) */
	CHECK_EQ_INT(H_CNT(h, drops_icrc) - c0, 1);
	nothing_else();

	t_case("QPN 0xffffff to the device's unicast address: no QP");
	n0 = H_CNT(h, drops_no_qp);
	{
		struct sw_pkt p = h_req(u, SW_OP_UD | SW_OP_SEND_ONLY, 0);

		p.dqpn = SW_QPN_MCAST;
		p.ack_req = false;
		p.qkey = UD_QKEY;
		p.sqpn = H_PEER_QPN;
		h_send(h, &p, data, LEN);
	}
	H_WAIT_CNT(h, drops_no_qp, n0 + 1);
	nothing_else();

	t_case("a group the device has not joined (injected): no QP");
	n0 = H_CNT(h, drops_no_qp);
	{
		struct sw_icrc_ctx ic;
		struct sw_pkt p = h_req(u, SW_OP_UD | SW_OP_SEND_ONLY, 0);

		sw_icrc_ctx_set(&ic, (const union sw_sa *)(const void *)&h->me, &oaddr);
		p.dqpn = SW_QPN_MCAST;
		p.ack_req = false;
		p.qkey = UD_QKEY;
		p.sqpn = H_PEER_QPN;
		n = h_build_ic(buf, &p, data, LEN, &ic);
		CHECK_EQ_INT(sw_rx_inject(h->eng, buf, n, (const union sw_sa *)(const void *)&h->me,
					  &oaddr),
			     0);
	}
	CHECK_EQ_INT(H_CNT(h, drops_no_qp) - n0, 1);
	nothing_else();

	t_case("after the detach nothing reaches the QP");
	CHECK_RET(ibv_detach_mcast(u, &group, 0), 0);
	CHECK_RET(ibv_detach_mcast(u_init, &group, 0), 0);
	send_mc(buf, build_ud(buf, SW_OP_UD | SW_OP_SEND_ONLY, SW_QPN_MCAST, UD_QKEY));
	usleep(100 * 1000);
	nothing_else();
}

int main(void)
{
	uint32_t tag = (uint32_t)getpid();
	struct in_addr me;

	t_start("unit_hostile_mcast");
	h_open(h);
	me = h->me.sin_addr;
	if (setsockopt(h->fd, IPPROTO_IP, IP_MULTICAST_IF, &me, sizeof(me))) {
		printf("Bail out! IP_MULTICAST_IF: %s\n", t_errname(errno));
		return 1;
	}
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(0xa5 ^ (i * 11));
	/* groups of this process: 239.x.y.1 and 239.x.y.2 from the pid */
	memset(&group, 0, sizeof(group));
	group.raw[10] = group.raw[11] = 0xff;
	group.raw[12] = 239;
	group.raw[13] = (uint8_t)(tag >> 8);
	group.raw[14] = (uint8_t)tag;
	other = group;
	group.raw[15] = 1;
	other.raw[15] = 2;
	sw_sa_from_gid(&gaddr, &group, ntohs(h->dev.sin_port), 0);
	sw_sa_from_gid(&oaddr, &other, ntohs(h->dev.sin_port), 0);
	sw_icrc_ctx_set(&ic_mc, (const union sw_sa *)(const void *)&h->me, &gaddr);
	rmr = ibv_reg_mr(h->e.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	u = q_create(&h->e, IBV_QPT_UD);
	u_init = q_create(&h->e, IBV_QPT_UD);
	if (!CHECK(rmr && u && u_init) || !CHECK_RET(q_bring_up(&h->e, u, IBV_QPS_RTS, 0), 0) ||
	    !CHECK_RET(q_bring_up(&h->e, u_init, IBV_QPS_INIT, 0), 0) ||
	    !CHECK_RET(ibv_attach_mcast(u, &group, 0), 0) ||
	    !CHECK_RET(ibv_attach_mcast(u_init, &group, 0), 0))
		return t_finish();
	for (unsigned int i = 0; i < 4; i++)
		post_recv(u, i);
	post_recv(u_init, 0);
	cases();
	CHECK_RET(ibv_destroy_qp(u), 0);
	CHECK_RET(ibv_destroy_qp(u_init), 0);
	CHECK_RET(ibv_dereg_mr(rmr), 0);
	h_close(h);
	return t_finish();
}
