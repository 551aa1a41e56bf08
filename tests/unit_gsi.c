/* SPDX-License-Identifier: MIT */
/*
 * unit_gsi: the device's general services endpoint (QP 1, sw/gsi.h).
 * Packets are injected as if received (sw_rx_inject):
 *   - while no endpoint is open, QP 1 packets are dropped (no QP);
 *   - open: one endpoint per device (EBUSY for a second);
 *   - a valid MAD (UD SEND Only, Q_Key 0x80010000, 256 bytes) is queued,
 *     the fd turns readable, recv returns it with its source, then EAGAIN;
 *   - a wrong Q_Key, a payload of 255 or 260 bytes, an RC opcode, another
 *     partition are counted and dropped;
 *   - past SV_GSI_QUEUE_MAX queued MADs the rest are dropped;
 *   - send builds a packet that the device itself accepts (loopback).
 */
#include "harness.h"

#include <arpa/inet.h>
#include <poll.h>

#include "sw/gsi.h"
#include "sw/transport/transport_priv.h"

static struct sw_engine *eng;
static union sw_sa peer = {.v4 = {.sin_family = AF_INET, .sin_port = 0xb712}};

static void inject(uint8_t opcode, uint32_t qkey, uint16_t pkey, uint32_t len, uint8_t fill)
{
	uint8_t buf[SW_PKT_MAX];
	uint8_t pay[512];
	struct sw_pkt p = {.opcode = opcode, .pkey = pkey, .dqpn = 1, .qkey = qkey, .sqpn = 1};
	struct sw_icrc_ctx ic;
	size_t hl, n;

	sw_icrc_ctx_set(&ic, &peer, &eng->dev->port.local);
	memset(pay, fill, sizeof(pay));
	p.padcnt = sw_pad_for(len);
	hl = sw_pkt_write_hdrs(buf, &p);
	memcpy(buf + hl, pay, len);
	n = sw_pkt_finish(buf, hl + len, &ic);
	CHECK_EQ_INT(sw_rx_inject(eng, buf, n, &peer, &eng->dev->port.local), 0);
}

static bool readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

int main(void)
{
	struct softverbs_gsi *g, *g2;
	struct softverbs_gsi_addr a;
	struct ibv_context *ctx;
	uint8_t mad[SV_GSI_MAD_LEN];
	unsigned long long q0, m0, n0;

	t_start("unit_gsi");
	if (t_open_first(&ctx))
		return t_finish();
	eng = sw_dev_of(ctx)->eng;
	peer.v4.sin_addr.s_addr = htonl(0x7f0000fa);

	t_case("closed: dropped as no QP");
	n0 = atomic_load(&eng->cnt.drops_no_qp);
	inject(SW_OP_UD | SW_OP_SEND_ONLY, SV_GSI_QKEY, 0xffff, 256, 1);
	CHECK_EQ_INT(atomic_load(&eng->cnt.drops_no_qp), n0 + 1);

	t_case("open, one per device");
	CHECK_EQ_INT(softverbs_gsi_open(ctx, &g), 0);
	CHECK_EQ_INT(softverbs_gsi_open(ctx, &g2), -EBUSY);
	CHECK(!readable(softverbs_gsi_fd(g)));
	CHECK_EQ_INT(softverbs_gsi_recv(g, &a, mad), -EAGAIN);

	t_case("a valid MAD is queued with its source");
	inject(SW_OP_UD | SW_OP_SEND_ONLY, SV_GSI_QKEY, 0xffff, 256, 0x5a);
	CHECK(readable(softverbs_gsi_fd(g)));
	CHECK_EQ_INT(softverbs_gsi_recv(g, &a, mad), 0);
	CHECK_EQ_INT(mad[0], 0x5a);
	CHECK_EQ_INT(mad[255], 0x5a);
	CHECK(!memcmp(a.peer_gid + 12, &peer.v4.sin_addr, 4) && a.peer_gid[10] == 0xff);
	CHECK(!memcmp(a.local_gid + 12, &eng->dev->port.local.v4.sin_addr, 4));
	CHECK_EQ_INT(a.src_qp, 1);
	CHECK_EQ_INT(a.pkey, 0xffff);
	CHECK(!readable(softverbs_gsi_fd(g)));
	CHECK_EQ_INT(softverbs_gsi_recv(g, &a, mad), -EAGAIN);

	t_case("hostile: Q_Key, length, opcode, partition");
	q0 = atomic_load(&eng->cnt.drops_qkey);
	m0 = atomic_load(&eng->cnt.drops_malformed);
	inject(SW_OP_UD | SW_OP_SEND_ONLY, 0x01234567, 0xffff, 256, 2);
	inject(SW_OP_UD | SW_OP_SEND_ONLY, SV_GSI_QKEY, 0xffff, 255, 3);
	inject(SW_OP_UD | SW_OP_SEND_ONLY, SV_GSI_QKEY, 0xffff, 260, 4);
	inject(SW_OP_UD | SW_OP_SEND_ONLY_IMM, SV_GSI_QKEY, 0xffff, 256, 5);
	inject(SW_OP_RC | SW_OP_SEND_ONLY, 0, 0xffff, 256, 6);
	inject(SW_OP_UD | SW_OP_SEND_ONLY, SV_GSI_QKEY, 0x1234, 256, 7);
	CHECK_EQ_INT(atomic_load(&eng->cnt.drops_qkey), q0 + 1);
	CHECK(atomic_load(&eng->cnt.drops_malformed) >= m0 + 4);
	CHECK_EQ_INT(softverbs_gsi_recv(g, &a, mad), -EAGAIN);

	t_case("a full queue drops");
	for (int i = 0; i < SV_GSI_QUEUE_MAX + 10; i++)
		inject(SW_OP_UD | SW_OP_SEND_ONLY, SV_GSI_QKEY, 0xffff, 256, (uint8_t)i);
	int got = 0;

	while (!softverbs_gsi_recv(g, &a, mad))
		got++;
	CHECK_EQ_INT(got, SV_GSI_QUEUE_MAX);

	t_case("send: the device takes its own MAD");
	memset(&a, 0, sizeof(a));
	a.peer_gid[10] = a.peer_gid[11] = 0xff;
	memcpy(a.peer_gid + 12, &eng->dev->port.local.v4.sin_addr, 4);
	memset(mad, 0x77, sizeof(mad));
	CHECK_EQ_INT(softverbs_gsi_send(g, &a, mad), 0);
	for (int i = 0; i < 200 && !readable(softverbs_gsi_fd(g)); i++)
		usleep(5000);
	memset(mad, 0, sizeof(mad));
	CHECK_EQ_INT(softverbs_gsi_recv(g, &a, mad), 0);
	CHECK_EQ_INT(mad[100], 0x77);
	a.peer_gid[0] = 0xfe; /* an IPv6 peer of an IPv4 device */
	CHECK_EQ_INT(softverbs_gsi_send(g, &a, mad), -EAFNOSUPPORT);

	softverbs_gsi_close(g);
	CHECK_EQ_INT(softverbs_gsi_open(ctx, &g), 0); /* free again */
	softverbs_gsi_close(g);
	ibv_close_device(ctx);
	return t_finish();
}
