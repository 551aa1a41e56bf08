/* SPDX-License-Identifier: MIT */
/*
 * api_udp_offload: RC traffic over UDP with the kernel's UDP GSO and GRO
 * (SOFTVERBS_GSO, src/sw/transport/net.c and progress.c), and without.
 *
 * One device (SOFTVERBS_SHM=0: everything through its UDP socket, to
 * itself), two RC QPs at MTU 1024, opened afresh for each case. Each
 * case moves WRITEs of 256 KiB and 3000 bytes, a SEND of 64 KiB + 8 and
 * a READ of 64 KiB (runs of equal packets with a shorter last one, and
 * FIRST packets with a RETH longer than the MIDDLE ones), checks every
 * byte, and reads the device's counters (SOFTVERBS_STATS=1) at the close:
 *
 *   1. default: GSO sends were made (at least 2 packets each on average)
 *      and GRO datagrams received, no packet was dropped for its ICRC,
 *      and the GSO segments' non-zero IPv4 IDs were recovered from their
 *      ICRCs and taken (ip id: recovered > 0, refused 0): each segment
 *      carries the ICRC of the ID the kernel gave it;
 *   2. IPv6 (SOFTVERBS_ADDR=::1): GSO and GRO used, no ICRC drop, and no
 *      recovered ID (IPv6 has none);
 *   3. SOFTVERBS_GSO=0: the same data, no GSO send and no GRO datagram.
 *
 * Case 1 fails on a device without GSO/GRO (the counters stay 0), and on
 * one whose receiver refuses a zero sender's segment IDs (ipid.c).
 */
#include "harness.h"
#include "stats.h"
#include "traffic.h"

#include <stdlib.h>

/* test: timeout=120 */

enum {
	BUF = 512 << 10,
	BIG = 256 << 10, /* WRITE: 256 packets of 1 KiB */
	ODD = 3000, /* WRITE: FIRST, MIDDLE, a shorter LAST */
	SEND_LEN = (64 << 10) + 8,
	READ_LEN = 64 << 10,
};

/* Post one request from a and wait for its completion (and b's receive, for a SEND). */
static int op(struct t_ep *a, struct t_ep *b, enum ibv_wr_opcode code, size_t off, uint32_t len)
{
	uint64_t deadline = t_ms() + 20000;
	struct ibv_wc wc;

	if (code == IBV_WR_SEND && t_post_recv(b, 7, off, len))
		return -1;
	if (t_post(a, code, 1, off, len, (uintptr_t)b->buf + off, b->mr->rkey, IBV_SEND_SIGNALED))
		return -1;
	if (t_poll(a->cq, &wc, 1, (int)(deadline - t_ms())) != 1 || wc.status != IBV_WC_SUCCESS)
		return -1;
	if (code == IBV_WR_SEND && (t_poll(b->cq, &wc, 1, (int)(deadline - t_ms())) != 1 ||
				    wc.status != IBV_WC_SUCCESS || wc.byte_len != len))
		return -1;
	return 0;
}

/* The traffic of one case on a fresh device; its counters in *st. 0 or -1. */
static int run(struct t_stats *st)
{
	static char text[16384];
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_context *ctx = t_open_dev();
	struct t_ep a, b;
	int ret = -1;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (!CHECK(ctx))
		return -1;
	if (!CHECK(t_ep_init(&a, ctx, IBV_QPT_RC, BUF, access, 16) == 0 &&
		   t_ep_init(&b, ctx, IBV_QPT_RC, BUF, access, 16) == 0 &&
		   t_connect(&a, &b, IBV_MTU_1024) == 0))
		goto out;
	t_fill(a.buf, BUF, 1);
	t_fill(b.buf, BUF, 2);
	if (!CHECK(op(&a, &b, IBV_WR_RDMA_WRITE, 0, BIG) == 0) ||
	    !CHECK(memcmp(a.buf, b.buf, BIG) == 0))
		goto out;
	if (!CHECK(op(&a, &b, IBV_WR_RDMA_WRITE, BIG, ODD) == 0) ||
	    !CHECK(memcmp(a.buf + BIG, b.buf + BIG, ODD) == 0))
		goto out;
	t_fill(a.buf, BUF, 3);
	if (!CHECK(op(&a, &b, IBV_WR_SEND, 0, SEND_LEN) == 0) ||
	    !CHECK(memcmp(a.buf, b.buf, SEND_LEN) == 0))
		goto out;
	t_fill(b.buf + BIG, READ_LEN, 4);
	if (!CHECK(op(&a, &b, IBV_WR_RDMA_READ, BIG, READ_LEN) == 0) ||
	    !CHECK(memcmp(a.buf + BIG, b.buf + BIG, READ_LEN) == 0))
		goto out;
	ret = 0;
out:
	t_ep_destroy(&a, false);
	t_ep_destroy(&b, false);
	if (t_close_report(ctx, text, sizeof(text), st, T_STATS_OFFLOAD | T_STATS_IPID))
		return -1;
	printf("# gso sends %llu pkts %llu refused %llu, gro recvs %llu pkts %llu; ip id "
	       "recovered %llu refused %llu; drops icrc %llu\n",
	       st->gso_sends, st->gso_pkts, st->gso_refused, st->gro_recvs, st->gro_pkts,
	       st->ip_id_rx, st->ip_id_refused, st->drops[1]);
	return ret;
}

int main(void)
{
	struct t_stats st;

	t_start("api_udp_offload");
	setenv("SOFTVERBS_SHM", "0", 1);
	setenv("SOFTVERBS_STATS", "1", 1);

	t_case("UDP GSO and GRO on (default): used, every ICRC right, the data intact");
	unsetenv("SOFTVERBS_GSO");
	memset(&st, 0, sizeof(st));
	if (run(&st) == 0) {
		CHECK(st.gso_sends > 0);
		CHECK(st.gso_pkts >= 2 * st.gso_sends);
		CHECK(st.gro_recvs > 0 && st.gro_pkts >= 2 * st.gro_recvs);
		CHECK_EQ_INT((int)st.gso_refused, 0);
		CHECK(st.ip_id_rx > 0);
		CHECK_EQ_INT((int)st.ip_id_refused, 0);
		CHECK_EQ_INT((int)st.drops[1], 0);
	}

	t_case("IPv6 (SOFTVERBS_ADDR=::1): GSO and GRO used, no ID to recover");
	setenv("SOFTVERBS_ADDR", "::1", 1);
	memset(&st, 0, sizeof(st));
	if (run(&st) == 0) {
		CHECK(st.gso_sends > 0 && st.gro_recvs > 0);
		CHECK_EQ_INT((int)st.ip_id_rx, 0);
		CHECK_EQ_INT((int)st.drops[1], 0);
	}
	unsetenv("SOFTVERBS_ADDR");

	t_case("SOFTVERBS_GSO=0: one datagram per packet, the same data");
	setenv("SOFTVERBS_GSO", "0", 1);
	memset(&st, 0, sizeof(st));
	if (run(&st) == 0) {
		CHECK_EQ_INT((int)st.gso_sends, 0);
		CHECK_EQ_INT((int)st.gro_recvs, 0);
		CHECK_EQ_INT((int)st.ip_id_rx, 0);
		CHECK_EQ_INT((int)st.drops[1], 0);
	}
	unsetenv("SOFTVERBS_GSO");
	return t_finish();
}
