/* SPDX-License-Identifier: MIT */
/*
 * unit_hostile_xrc.c - XRC TGT QPs against hand-built XRC packets
 * (hostile.h's peer):
 *   - a SEND lands in the XRC SRQ its XRCETH names, completes on that
 *     SRQ's CQ with the TGT QP's number, and is acknowledged with the XRC
 *     ACK opcode (0xB1, no XRCETH);
 *   - an XRCETH cut short (a SEND ONLY of BTH only; a WRITE ONLY whose
 *     RETH is cut) is dropped as malformed before any QP sees it;
 *   - an XRC request at an RC QP, an RC request at the TGT QP and XRC
 *     responses at the TGT QP are dropped (malformed), unanswered;
 *   - an SRQ number the TGT QP's domain does not have (none, or another
 *     domain's SRQ) draws an invalid request NAK and nothing lands;
 *   - a message whose later packet names another SRQ than its first:
 *     invalid request NAK, and the receive WQE it took is flushed on its
 *     own SRQ's CQ;
 *   - an RDMA WRITE checks its rkey against the PD of the SRQ it names:
 *     an MR of another PD gets a remote access NAK and the arena stays
 *     intact;
 *   - a SEND with Invalidate at a TGT QP (which has no PD of its own and
 *     no window bound to it): invalid request NAK, the receive WQE it took
 *     completes with IBV_WC_REM_INV_REQ_ERR, the MR named stays usable
 *     (found by fuzz_resp: the responder took the TGT QP's missing PD).
 */
#include "harness.h"
#include "qp_util.h"

#include "hostile.h"

enum {
	PSN0 = 0x100,
	RBUF = 8192,
};

static struct h_env henv, *h = &henv;
static struct h_arena ar; /* on h->e.pd */
static struct ibv_xrcd *xd, *xd2;
static struct ibv_srq *sa, *sb, *sforeign; /* sa, sb: xd's; sforeign: xd2's */
static uint32_t na, nb, nforeign;
static struct ibv_mr *rmr;
static uint8_t rbuf[RBUF], data[3 * H_MTU];

/* Contract: an XRC domain (fd -1); bails out on failure. */
static struct ibv_xrcd *open_xrcd(void)
{
	struct ibv_xrcd_init_attr a = {.comp_mask =
					       IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
				       .fd = -1,
				       .oflags = O_CREAT};
	struct ibv_xrcd *x = ibv_open_xrcd(h->e.ctx, &a);

	if (!x) {
		printf("Bail out! ibv_open_xrcd: %s\n", t_errname(errno));
		exit(1);
	}
	return x;
}

/* Contract: an XRC SRQ of `x` completing on h->e.rcq, its number in *n; bails out on failure. */
static struct ibv_srq *xrc_srq(struct ibv_xrcd *x, uint32_t *n)
{
	struct ibv_srq_init_attr_ex a = {0};
	struct ibv_srq *s;

	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
		      IBV_SRQ_INIT_ATTR_PD;
	a.srq_type = IBV_SRQT_XRC;
	a.xrcd = x;
	a.cq = h->e.rcq;
	a.pd = h->e.pd;
	a.attr.max_wr = 16;
	a.attr.max_sge = 1;
	s = ibv_create_srq_ex(h->e.ctx, &a);
	if (!s || ibv_get_srq_num(s, n)) {
		printf("Bail out! XRC SRQ: %s\n", t_errname(errno));
		exit(1);
	}
	return s;
}

/* Contract: a TGT QP of xd in RTS towards the peer, expecting PSN0; NULL on failure. */
static struct ibv_qp *tgt_victim(void)
{
	struct ibv_qp_init_attr_ex x = {
		.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xd};
	struct ibv_qp *qp = ibv_create_qp_ex(h->e.ctx, &x);
	struct q_env pe = h->e;

	if (!qp)
		return NULL;
	pe.gid = h->gid;
	if (!h_connect(&pe, qp, H_PEER_QPN, PSN0, 0x10, 31))
		return qp;
	ibv_destroy_qp(qp);
	return NULL;
}

/* Contract: post a receive of `len` bytes at rbuf + off to `srq`. */
static void post_recv(struct ibv_srq *srq, uint64_t wr_id, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)rbuf + off, len, rmr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;

	CHECK_RET(ibv_post_srq_recv(srq, &wr, &bad), 0);
}

/* Contract: an XRC request header: `op` (RC's operation) at `psn` for `qp`, to SRQ `srqn`. */
static struct sw_pkt xreq(struct ibv_qp *qp, uint8_t op, uint32_t psn, uint32_t srqn)
{
	struct sw_pkt p = h_req(qp, (uint8_t)(SW_OP_XRC | op), psn);

	p.xrc_srqn = srqn;
	return p;
}

/* Contract: the peer's next packet is an XRC ACK (AETH `syn`) of `psn`. */
static void expect_xack(uint8_t syn, uint32_t psn)
{
	struct sw_pkt p;
	int r = h_recv(h, &p, H_WAIT_MS);

	if (!CHECK_MSG(!r, "want an XRC ACK of %#x, got %s", psn, t_errname(-r)))
		return;
	CHECK_MSG(p.opcode == (SW_OP_XRC | SW_OP_ACK) && p.syndrome == syn && p.psn == psn &&
			  p.dqpn == H_PEER_QPN,
		  "want XRC ACK %#x psn %#x, got opcode %#x AETH %#x psn %#x qpn %#x", syn, psn,
		  p.opcode, p.syndrome, p.psn, p.dqpn);
}

/* Contract: the next receive completion is wr_id/status (and, on success, of `len` bytes at `qpn`).
 */
static void expect_recv(uint64_t wr_id, enum ibv_wc_status status, uint32_t len, uint32_t qpn)
{
	struct ibv_wc wc;

	if (!CHECK_EQ_INT(q_poll(h->e.rcq, &wc, 1, 1), 1))
		return;
	CHECK_EQ_INT(wc.wr_id, wr_id);
	CHECK_MSG(wc.status == status, "status %s", ibv_wc_status_str(wc.status));
	CHECK_EQ_INT(wc.qp_num, qpn);
	if (status != IBV_WC_SUCCESS)
		return;
	CHECK_EQ_INT(wc.opcode, IBV_WC_RECV);
	CHECK_EQ_INT(wc.byte_len, len);
	CHECK_EQ_INT(wc.src_qp, H_PEER_QPN);
}

static void good_send(struct ibv_qp *t)
{
	struct sw_pkt p;

	t_case("XRC SEND into the named SRQ: its CQ, the TGT QP's number, an XRC ACK");
	memset(rbuf, 0, 256);
	post_recv(sb, 20, 0, 256);
	p = xreq(t, SW_OP_SEND_ONLY, PSN0, nb);
	h_send(h, &p, data, 100);
	expect_xack(H_ACK, PSN0);
	expect_recv(20, IBV_WC_SUCCESS, 100, t->qp_num);
	CHECK(memcmp(rbuf, data, 100) == 0 && rbuf[100] == 0);
}

static void malformed(struct ibv_qp *t, struct ibv_qp *rc)
{
	unsigned long long m0 = H_CNT(h, drops_malformed);
	uint8_t buf[SW_PKT_MAX + 64];
	struct sw_pkt p;
	size_t len;

	t_case("an XRCETH cut short, XRC at RC, RC at XRC, responses at TGT: dropped unanswered");
	/* SEND ONLY with the BTH alone: no room for the XRCETH */
	p = xreq(t, SW_OP_SEND_ONLY, sw_psn_add(PSN0, 1), na);
	len = h_build(h, buf, &p, NULL, 0);
	h_send_resealed(h, buf, len - SW_XRCETH_LEN);
	/* WRITE ONLY whose RETH is cut after 8 bytes */
	p = xreq(t, SW_OP_WRITE_ONLY, sw_psn_add(PSN0, 1), na);
	p.va = h_va(&ar, 0);
	p.rkey = ar.mr->rkey;
	p.dma_len = 16;
	len = h_build(h, buf, &p, NULL, 0);
	h_send_resealed(h, buf, len - 8);
	CHECK(H_WAIT_CNT(h, drops_malformed, m0 + 2));
	/* an XRC SEND at the RC QP; an RC SEND and an RC WRITE at the TGT QP */
	p = xreq(rc, SW_OP_SEND_ONLY, 0x40, na);
	h_send(h, &p, data, 8);
	p = h_req(t, SW_OP_SEND_ONLY, sw_psn_add(PSN0, 1));
	h_send(h, &p, data, 8);
	h_write(h, t, sw_psn_add(PSN0, 1), h_va(&ar, 0), ar.mr->rkey, 8, data, 8);
	/* XRC responses at the TGT QP: an ACK and a READ response */
	p = h_req(t, SW_OP_XRC | SW_OP_ACK, sw_psn_add(PSN0, 1));
	p.syndrome = H_ACK;
	h_send(h, &p, NULL, 0);
	p = h_req(t, SW_OP_XRC | SW_OP_READ_RESP_ONLY, sw_psn_add(PSN0, 1));
	h_send(h, &p, data, 8);
	CHECK(H_WAIT_CNT(h, drops_malformed, m0 + 7));
	CHECK(h_arena_intact(&ar));
	CHECK_EQ_INT(q_state(t), IBV_QPS_RTS);
	CHECK_EQ_INT(q_state(rc), IBV_QPS_RTS);
	H_EXPECT_QUIET(h);
	/* the TGT QP still takes the next PSN */
	post_recv(sa, 21, 0, 256);
	p = xreq(t, SW_OP_SEND_ONLY, sw_psn_add(PSN0, 1), na);
	h_send(h, &p, data + 3, 40);
	expect_xack(H_ACK, sw_psn_add(PSN0, 1));
	expect_recv(21, IBV_WC_SUCCESS, 40, t->qp_num);
}

/* Contract: `t` is in ERR after an invalid request, with its async event; destroys it. */
static void end_req_err(struct ibv_qp *t)
{
	CHECK_EQ_INT(q_state(t), IBV_QPS_ERR);
	H_EXPECT_EVENT(h, t, IBV_EVENT_QP_REQ_ERR);
	CHECK_RET(ibv_destroy_qp(t), 0);
}

/* Contract: a SEND ONLY to SRQ number `srqn` at a fresh TGT QP draws an invalid request NAK. */
static void bad_srqn(uint32_t srqn, const char *what)
{
	struct ibv_qp *t = tgt_victim();
	struct ibv_wc wc;
	struct sw_pkt p;

	if (!CHECK_MSG(t, "%s: TGT QP", what))
		return;
	memset(rbuf, 0, 64);
	p = xreq(t, SW_OP_SEND_ONLY, PSN0, srqn);
	h_send(h, &p, data, 64);
	expect_xack(SW_AETH_NAK_INV_REQ, PSN0);
	CHECK_EQ_INT(q_state(t), IBV_QPS_ERR);
	CHECK_MSG(ibv_poll_cq(h->e.rcq, 1, &wc) == 0 && rbuf[0] == 0, "%s: something landed", what);
	H_EXPECT_EVENT(h, t, IBV_EVENT_QP_REQ_ERR);
	CHECK_RET(ibv_destroy_qp(t), 0);
}

static void foreign(void)
{
	t_case("an SRQ number the TGT QP's domain lacks: invalid request NAK, nothing lands");
	post_recv(sforeign, 30, 0, 256);
	bad_srqn(nforeign, "another domain's SRQ");
	bad_srqn(0xabcdef, "no such SRQ");
	bad_srqn(0, "SRQ number 0");
	/* the foreign SRQ's WQE is still there: nothing took it */
	{
		struct ibv_srq_attr at;

		CHECK(ibv_query_srq(sforeign, &at) == 0);
	}
}

/* Contract: start case `what` with a fresh TGT QP (tgt_victim); NULL (a failed check) if none. */
static struct ibv_qp *tgt_case(const char *what)
{
	struct ibv_qp *t;

	t_case(what);
	t = tgt_victim();
	CHECK_MSG(t, "a TGT QP in RTS");
	return t;
}

static void switch_srq(void)
{
	struct ibv_qp *t = tgt_case(
		"a message whose LAST names another SRQ: NAK, its WQE flushed on its own SRQ");
	struct sw_pkt p;

	if (!t)
		return;
	post_recv(sa, 40, 0, 4096);
	post_recv(sb, 41, 4096, 4096);
	p = xreq(t, SW_OP_SEND_FIRST, PSN0, na);
	p.ack_req = false; /* else the ACK it is owed follows the NAK */
	h_send(h, &p, data, H_MTU);
	p = xreq(t, SW_OP_SEND_LAST, sw_psn_add(PSN0, 1), nb);
	p.ack_req = true;
	h_send(h, &p, data + H_MTU, 10);
	expect_xack(SW_AETH_NAK_INV_REQ, sw_psn_add(PSN0, 1));
	expect_recv(40, IBV_WC_WR_FLUSH_ERR, 0, t->qp_num);
	end_req_err(t);
	/* sb's WQE is untouched: a good SEND to sb takes it */
	t = tgt_victim();
	if (!CHECK(t))
		return;
	p = xreq(t, SW_OP_SEND_ONLY, PSN0, nb);
	h_send(h, &p, data, 12);
	expect_xack(H_ACK, PSN0);
	expect_recv(41, IBV_WC_SUCCESS, 12, t->qp_num);
	CHECK_RET(ibv_destroy_qp(t), 0);
}

/* Contract: a WRITE ONLY (PSN0, SRQ na) of `len` bytes at `off` into the arena lands, ACKed. */
static void write_lands(struct ibv_qp *t, uint32_t off, uint32_t len)
{
	struct sw_pkt p = xreq(t, SW_OP_WRITE_ONLY, PSN0, na);

	p.va = h_va(&ar, off);
	p.rkey = ar.mr->rkey;
	p.dma_len = len;
	h_send(h, &p, data, len);
	expect_xack(H_ACK, PSN0);
	h_sync(t);
	memcpy(ar.shadow + H_SLACK + off, data, len);
	CHECK(h_arena_intact(&ar));
}

static void write_pd(void)
{
	struct ibv_pd *pd2 = ibv_alloc_pd(h->e.ctx);
	struct h_arena ar2;
	struct ibv_qp *t = tgt_victim();
	struct sw_pkt p;

	t_case("RDMA WRITE: the rkey against the named SRQ's PD (another PD: remote access NAK)");
	if (!CHECK(pd2 && t))
		return;
	h_arena_open(&ar2, pd2, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	H_EXPECT_QUIET(h);
	/* the arena of the SRQ's PD: lands */
	write_lands(t, 100, 32);
	/* an MR of another PD: refused */
	p = xreq(t, SW_OP_WRITE_ONLY, sw_psn_add(PSN0, 1), na);
	p.va = h_va(&ar2, 0);
	p.rkey = ar2.mr->rkey;
	p.dma_len = 32;
	h_send(h, &p, data, 32);
	expect_xack(SW_AETH_NAK_REM_ACCESS, sw_psn_add(PSN0, 1));
	CHECK(h_arena_intact(&ar2));
	H_EXPECT_EVENT(h, t, IBV_EVENT_QP_ACCESS_ERR);
	CHECK_RET(ibv_destroy_qp(t), 0);
	h_arena_close(&ar2);
	CHECK_RET(ibv_dealloc_pd(pd2), 0);
}

static void send_inv(void)
{
	struct ibv_qp *t =
		tgt_case("SEND with Invalidate at a TGT QP: invalid request NAK, REM_INV_REQ_ERR");
	struct sw_pkt p;

	if (!t)
		return;
	post_recv(sa, 50, 0, 256);
	p = xreq(t, SW_OP_SEND_ONLY_INV, PSN0, na);
	p.imm_be = htonl(ar.mr->rkey);
	h_send(h, &p, data, 16);
	expect_xack(SW_AETH_NAK_INV_REQ, PSN0);
	expect_recv(50, IBV_WC_REM_INV_REQ_ERR, 0, t->qp_num);
	end_req_err(t);
	/* the MR is not invalidated: a WRITE through it at a fresh TGT QP lands */
	t = tgt_victim();
	if (!CHECK(t))
		return;
	write_lands(t, 200, 8);
	CHECK_RET(ibv_destroy_qp(t), 0);
}

int main(void)
{
	struct ibv_qp *t, *rc;

	t_start("unit_hostile_xrc");
	h_open(h);
	h_arena_open(&ar, h->e.pd, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	rmr = ibv_reg_mr(h->e.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(0x5a ^ (i * 13) ^ (i >> 8));
	xd = open_xrcd();
	xd2 = open_xrcd();
	sa = xrc_srq(xd, &na);
	sb = xrc_srq(xd, &nb);
	sforeign = xrc_srq(xd2, &nforeign);
	t = tgt_victim();
	rc = h_rc_victim(h, 0x40);
	if (!CHECK(rmr && t && rc))
		return t_finish();
	good_send(t);
	malformed(t, rc);
	foreign();
	switch_srq();
	write_pd();
	send_inv();
	t_case("teardown");
	CHECK_RET(ibv_destroy_qp(t), 0);
	CHECK_RET(ibv_destroy_qp(rc), 0);
	for (int i = 0; i < 3; i++)
		CHECK_RET(ibv_destroy_srq(i == 0 ? sa : i == 1 ? sb : sforeign), 0);
	CHECK(ibv_close_xrcd(xd) == 0 && ibv_close_xrcd(xd2) == 0);
	CHECK_RET(ibv_dereg_mr(rmr), 0);
	h_arena_close(&ar);
	h_close(h);
	return t_finish();
}
