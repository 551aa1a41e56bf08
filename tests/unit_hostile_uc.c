/* SPDX-License-Identifier: MIT */
/*
 * unit_hostile_uc.c - a UC QP against hand-built UC packets (hostile.h's
 * peer): multi-packet SEND and WRITE land; a lost middle packet drops the
 * rest of its message silently and the receive WQE serves the next one;
 * the responder resynchronises on FIRST/ONLY at any PSN; a SEND without a
 * receive WQE, a bad rkey, a WRITE beyond its MR and a SEND beyond its
 * receive WQE drop the message (the latter completes the WQE with
 * IBV_WC_LOC_LEN_ERR) and the QP stays in RTS; RC opcodes are dropped;
 * and the QP never answers anything (no ACK, NAK or RNR NAK).
 */
#include "harness.h"
#include "qp_util.h"

#include "hostile.h"

enum {
	PSN0 = 0xfffffe, /* the first messages wrap the PSN */
	RBUF = 8192,
};

static struct h_env henv, *h = &henv;
static struct h_arena ar;
static struct ibv_qp *u;
static struct ibv_mr *rmr;
static uint8_t rbuf[RBUF], data[3 * H_MTU];
static uint32_t psn = PSN0;

/* Contract: a UC QP in RTS towards the peer, expecting PSN0; NULL on failure. */
static struct ibv_qp *uc_victim(void)
{
	struct ibv_qp *qp = q_create(&h->e, IBV_QPT_UC);
	struct q_env pe = h->e;

	if (!qp)
		return NULL;
	pe.gid = h->gid;
	if (!h_connect(&pe, qp, H_PEER_QPN, PSN0, 0x10, 14))
		return qp;
	ibv_destroy_qp(qp);
	return NULL;
}

/* Contract: post a receive of `len` bytes at the start of rbuf. */
static void post_recv(uint64_t wr_id, uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)rbuf, len, rmr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;

	CHECK_RET(ibv_post_recv(u, &wr, &bad), 0);
}

/* Contract: send UC packet `op` at PSN `at` with `len` bytes of data[off..], imm 0x77. */
static void send_at(uint8_t op, uint32_t at, uint32_t off, uint32_t len, uint64_t va, uint32_t rkey,
		    uint32_t dma_len)
{
	struct sw_pkt p = h_req(u, (uint8_t)(SW_OP_UC | op), at);

	p.ack_req = false;
	p.va = va;
	p.rkey = rkey;
	p.dma_len = dma_len;
	p.imm_be = htonl(0x77);
	h_send(h, &p, data + off, len);
}

/* Contract: the next packet of a message, at the next PSN. */
static void send_next(uint8_t op, uint32_t off, uint32_t len, uint64_t va, uint32_t rkey,
		      uint32_t dma_len)
{
	send_at(op, psn, off, len, va, rkey, dma_len);
	psn = sw_psn_add(psn, 1);
}

/* Contract: the next receive completion (within ~2 s) is wr_id/status/opcode/len. */
static void expect_recv(uint64_t wr_id, enum ibv_wc_status status, enum ibv_wc_opcode op,
			uint32_t len)
{
	struct ibv_wc wc;

	if (!CHECK_EQ_INT(q_poll(h->e.rcq, &wc, 1, 1), 1))
		return;
	CHECK_EQ_INT(wc.wr_id, wr_id);
	CHECK_MSG(wc.status == status, "status %s", ibv_wc_status_str(wc.status));
	if (status != IBV_WC_SUCCESS)
		return;
	CHECK_EQ_INT(wc.opcode, op);
	CHECK_EQ_INT(wc.byte_len, len);
	CHECK_EQ_INT(wc.src_qp, H_PEER_QPN);
}

/* Contract: a one-packet SEND at the next PSN is received whole into `wr_id`: order proven. */
static void sync_send(uint64_t wr_id)
{
	memset(rbuf, 0, 64);
	send_next(SW_OP_SEND_ONLY, 7, 64, 0, 0, 0);
	expect_recv(wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, 64);
	CHECK(memcmp(rbuf, data + 7, 64) == 0);
	CHECK_EQ_INT(q_state(u), IBV_QPS_RTS);
	H_EXPECT_QUIET(h); /* nothing ever comes back */
}

static void sends(void)
{
	unsigned long long d0 = H_CNT(h, drops_out_of_window);
	struct ibv_wc wc;

	t_case("UC SEND of three packets lands whole, wrapping the PSN, unanswered");
	memset(rbuf, 0, sizeof(rbuf));
	post_recv(1, RBUF);
	send_next(SW_OP_SEND_FIRST, 0, H_MTU, 0, 0, 0);
	send_next(SW_OP_SEND_MIDDLE, H_MTU, H_MTU, 0, 0, 0);
	send_next(SW_OP_SEND_LAST_IMM, 2 * H_MTU, 100, 0, 0, 0);
	if (CHECK_EQ_INT(q_poll(h->e.rcq, &wc, 1, 1), 1)) {
		CHECK(wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV);
		CHECK_EQ_INT(wc.byte_len, 2 * H_MTU + 100);
		CHECK((wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0x77);
	}
	CHECK(memcmp(rbuf, data, 2 * H_MTU + 100) == 0);
	H_EXPECT_QUIET(h);

	t_case("UC SEND with its middle packet lost: dropped, the WQE serves the next message");
	post_recv(2, RBUF);
	post_recv(3, RBUF);
	send_next(SW_OP_SEND_FIRST, 0, H_MTU, 0, 0, 0);
	psn = sw_psn_add(psn, 1); /* the middle packet is lost */
	send_next(SW_OP_SEND_LAST, 2 * H_MTU, 10, 0, 0, 0);
	sync_send(2); /* WQE 2, taken by the lost message, is reused */
	CHECK_EQ_INT(H_CNT(h, drops_out_of_window) - d0, 1);
	CHECK_EQ_INT(ibv_poll_cq(h->e.rcq, 1, &wc), 0);

	t_case("UC resynchronises on FIRST or ONLY at any PSN; a stray MIDDLE or LAST is dropped");
	psn = sw_psn_add(psn, 5000);
	send_next(SW_OP_SEND_MIDDLE, 0, H_MTU, 0, 0, 0);
	send_next(SW_OP_SEND_LAST, 0, 10, 0, 0, 0);
	sync_send(3);
	CHECK_EQ_INT(H_CNT(h, drops_out_of_window) - d0, 3);
}

static void no_recv_and_lengths(void)
{
	unsigned long long n0 = H_CNT(h, drops_no_recv);

	t_case("UC SEND without a receive WQE: dropped silently (no RNR NAK)");
	send_next(SW_OP_SEND_FIRST, 0, H_MTU, 0, 0, 0);
	send_next(SW_OP_SEND_LAST, 0, 10, 0, 0, 0);
	send_next(SW_OP_SEND_ONLY, 0, 10, 0, 0, 0);
	CHECK(H_WAIT_CNT(h, drops_no_recv, n0 + 2));
	H_EXPECT_QUIET(h);
	post_recv(10, RBUF);
	sync_send(10);

	t_case("UC SEND beyond its receive WQE: LOC_LEN_ERR, the QP stays in RTS");
	post_recv(11, 100);
	post_recv(12, RBUF);
	send_next(SW_OP_SEND_FIRST, 0, H_MTU, 0, 0, 0);
	send_next(SW_OP_SEND_LAST, 0, 10, 0, 0, 0);
	expect_recv(11, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0);
	sync_send(12);
}

static void writes(void)
{
	uint64_t va = h_va(&ar, 0);
	uint32_t rkey = ar.mr->rkey, total = 2 * H_MTU + 50;
	unsigned long long m0 = H_CNT(h, drops_malformed);

	t_case("UC RDMA WRITE of three packets, and WRITE ONLY with immediate");
	send_next(SW_OP_WRITE_FIRST, 0, H_MTU, va, rkey, total);
	send_next(SW_OP_WRITE_MIDDLE, H_MTU, H_MTU, 0, 0, 0);
	send_next(SW_OP_WRITE_LAST, 2 * H_MTU, 50, 0, 0, 0);
	memcpy(ar.shadow + H_SLACK, data, total);
	post_recv(20, RBUF);
	send_next(SW_OP_WRITE_ONLY_IMM, 0, 8, va + 4000, rkey, 8);
	memcpy(ar.shadow + H_SLACK + 4000, data, 8);
	expect_recv(20, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 8);
	h_sync(u);
	CHECK(h_arena_intact(&ar));
	H_EXPECT_QUIET(h);

	t_case("UC WRITE with a lost middle packet: the LAST with immediate completes nothing");
	post_recv(21, RBUF);
	send_next(SW_OP_WRITE_FIRST, 0, H_MTU, va, rkey, total);
	psn = sw_psn_add(psn, 1);
	send_next(SW_OP_WRITE_LAST_IMM, 2 * H_MTU, 50, 0, 0, 0);
	sync_send(21);
	memcpy(ar.shadow + H_SLACK, data, H_MTU); /* the first packet landed */

	t_case("UC WRITE with a bad rkey, beyond the MR, or of another transport: dropped");
	post_recv(22, RBUF);
	send_next(SW_OP_WRITE_ONLY, 0, 16, va, rkey ^ 0x100, 16);
	send_next(SW_OP_WRITE_ONLY, 0, 16, va + 4090, rkey, 16);
	send_next(SW_OP_WRITE_FIRST, 0, H_MTU, va, rkey, 4 * H_MTU + 8);
	send_next(SW_OP_WRITE_LAST, 0, H_MTU, 0, 0, 0);
	{
		struct sw_pkt p = h_req(u, SW_OP_RC | SW_OP_SEND_ONLY, psn);

		h_send(h, &p, data, 16); /* an RC SEND to a UC QP */
	}
	sync_send(22);
	h_sync(u);
	CHECK(h_arena_intact(&ar));
	CHECK_EQ_INT(H_CNT(h, drops_malformed) - m0, 4);
	CHECK_EQ_INT(ibv_get_async_event(h->e.ctx, &(struct ibv_async_event){0}), -1);
}

int main(void)
{
	t_start("unit_hostile_uc");
	h_open(h);
	h_arena_open(&ar, h->e.pd, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	rmr = ibv_reg_mr(h->e.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(0x5a ^ (i * 13) ^ (i >> 8));
	u = uc_victim();
	if (!CHECK(rmr && u))
		return t_finish();
	sends();
	no_recv_and_lengths();
	writes();
	t_case("teardown");
	CHECK_RET(ibv_destroy_qp(u), 0);
	CHECK_RET(ibv_dereg_mr(rmr), 0);
	h_arena_close(&ar);
	h_close(h);
	return t_finish();
}
