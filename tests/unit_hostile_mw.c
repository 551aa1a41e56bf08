/* SPDX-License-Identifier: MIT */
/*
 * unit_hostile_mw: a hostile peer (tests/hostile.h) against memory
 * windows and SEND with Invalidate on RC QPs of a live device.
 *
 *   - SEND ONLY with Invalidate of a type 2 window bound to the QP: the
 *     receive completes with IBV_WC_WITH_INV and the rkey, the ACK goes
 *     out, and a WRITE through the key is a remote access error;
 *   - FIRST + LAST with Invalidate: the bytes land, the window goes at
 *     the last packet;
 *   - an IETH too short for its header (a truncated packet) is dropped as
 *     malformed: no answer, the QP and the window unchanged;
 *   - an IETH naming an unknown rkey, an MR's rkey, a type 1 window's, an
 *     unbound type 2 window's, or one bound to another QP: invalid
 *     request NAK, the receive WQE completes with IBV_WC_REM_INV_REQ_ERR,
 *     the QP in error; the MR or window named is still usable;
 *   - a LAST with Invalidate without a SEND in progress: invalid request;
 *   - through a window: a range past its end but inside the MR, a READ
 *     of a write-only window, and a type 2 window from another QP get
 *     remote access errors; a zero-based window is addressed from 0;
 *   - nothing outside the windows' ranges changed (arena shadow, guard
 *     pages), and no request through a window touched memory it refused.
 */
#include "harness.h"

#include "qp_util.h"
#include "hostile.h"

enum {
	ARENA_LEN = 4 * 4096 - 2 * H_SLACK,
	PSN0 = 0x1000,
	WOFF = 4096, /* the windows cover [WOFF, WOFF + WLEN) of the arena */
	WLEN = 4096,
};

static struct h_env H, *h = &H;
static struct h_arena all;
static uint8_t rbuf[4096], data[4096];
static struct ibv_mr *rmr;

/* Contract: a fresh RC victim expecting PSN0 with one receive (wr_id 77); exits on failure. */
static struct ibv_qp *victim(void)
{
	return h_rc_victim_recv(h, PSN0, rmr, rbuf, sizeof(rbuf));
}

/* Contract: bind `mw` (type 2) on `qp` over the arena's window with `access`; its new rkey. */
static uint32_t bind2(struct ibv_qp *qp, struct ibv_mw *mw, unsigned int access)
{
	struct ibv_send_wr wr = {0}, *bad;
	struct ibv_wc wc;

	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info.mr = all.mr;
	wr.bind_mw.bind_info.addr = h_va(&all, WOFF);
	wr.bind_mw.bind_info.length = WLEN;
	wr.bind_mw.bind_info.mw_access_flags = access;
	CHECK_RET(ibv_post_send(qp, &wr, &bad), 0);
	CHECK(q_poll(h->e.scq, &wc, 1, 1) == 1 && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_BIND_MW);
	mw->rkey = wr.bind_mw.rkey;
	return mw->rkey;
}

/* Contract: a SEND packet `op` at `psn` with `len` bytes and IETH `rkey`. */
static void send_inv(struct ibv_qp *qp, uint8_t op, uint32_t psn, uint32_t len, uint32_t rkey)
{
	struct sw_pkt p = h_req(qp, op, psn);

	p.ack_req = op != (SW_OP_RC | SW_OP_SEND_FIRST); /* one ACK, of the last packet */
	p.imm_be = htonl(rkey);
	h_send(h, &p, data, len);
}

/* Contract: the receive (wr_id 77) completed with `st`; with WITH_INV of `rkey` on success. */
static void expect_recv(enum ibv_wc_status st, uint32_t len, uint32_t rkey)
{
	struct ibv_wc wc;

	if (!CHECK_EQ_INT(q_poll(h->e.rcq, &wc, 1, 1), 1))
		return;
	CHECK_MSG(wc.wr_id == 77 && wc.status == st, "wr_id %llu status %s",
		  (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	if (st != IBV_WC_SUCCESS)
		return;
	CHECK_EQ_INT(wc.opcode, IBV_WC_RECV);
	CHECK_EQ_INT(wc.byte_len, len);
	CHECK(wc.wc_flags & IBV_WC_WITH_INV);
	CHECK_EQ_INT(wc.invalidated_rkey, rkey);
}

/* Contract: after a fatal NAK: the QP in error, its async event taken, memory intact; destroys qp.
 */
static void fatal_end(struct ibv_qp *qp, uint8_t syn, uint32_t psn)
{
	H_EXPECT_ACK(h, syn, psn);
	CHECK_EQ_INT(q_state(qp), IBV_QPS_ERR);
	H_EXPECT_EVENT(h, qp,
		       syn == SW_AETH_NAK_REM_ACCESS ? IBV_EVENT_QP_ACCESS_ERR :
						       IBV_EVENT_QP_REQ_ERR);
	h_sync(qp);
	CHECK(h_arena_intact(&all));
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

/* Contract: a WRITE of 8 bytes at arena offset `off` through `rkey` at `psn` on qp is ACKed. */
static void write_ok(uint32_t off, uint32_t rkey, struct ibv_qp *qp, uint32_t psn)
{
	h_write(h, qp, psn, h_va(&all, off), rkey, 8, data, 8);
	H_EXPECT_ACK(h, H_ACK, psn);
	memcpy(all.shadow + H_SLACK + off, data, 8);
	h_sync(qp);
	CHECK(h_arena_intact(&all));
}

static void send_with_invalidate(void)
{
	struct ibv_mw *mw = ibv_alloc_mw(h->e.pd, IBV_MW_TYPE_2);
	struct ibv_qp *v;
	uint32_t k;

	t_case("SEND ONLY with Invalidate: WITH_INV and the rkey, then the key is dead");
	if (!CHECK(mw))
		return;
	v = victim();
	k = bind2(v, mw, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
	send_inv(v, SW_OP_RC | SW_OP_SEND_ONLY_INV, PSN0, 100, k);
	H_EXPECT_ACK(h, H_ACK, PSN0);
	expect_recv(IBV_WC_SUCCESS, 100, k);
	CHECK(memcmp(rbuf, data, 100) == 0);
	h_write(h, v, PSN0 + 1, h_va(&all, WOFF), k, 8, data, 8);
	fatal_end(v, SW_AETH_NAK_REM_ACCESS, PSN0 + 1);

	t_case("FIRST + LAST with Invalidate: the bytes land, the window goes at the last");
	v = victim();
	k = bind2(v, mw, IBV_ACCESS_REMOTE_WRITE);
	send_inv(v, SW_OP_RC | SW_OP_SEND_FIRST, PSN0, H_MTU, 0);
	send_inv(v, SW_OP_RC | SW_OP_SEND_LAST_INV, PSN0 + 1, 10, k);
	H_EXPECT_ACK(h, H_ACK, PSN0 + 1);
	expect_recv(IBV_WC_SUCCESS, H_MTU + 10, k);
	h_write(h, v, PSN0 + 2, h_va(&all, WOFF), k, 8, data, 8);
	fatal_end(v, SW_AETH_NAK_REM_ACCESS, PSN0 + 2);

	t_case("an IETH cut short (truncated packet): dropped as malformed, nothing changes");
	{
		unsigned long long m0 = H_CNT(h, drops_malformed);
		uint8_t buf[SW_PKT_MAX + 64];
		struct sw_pkt p;
		size_t n;

		v = victim();
		k = bind2(v, mw, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
		/* a SEND ONLY without payload, relabelled ONLY with Invalidate: 0 of 4 IETH bytes
		 */
		p = h_req(v, SW_OP_RC | SW_OP_SEND_ONLY, PSN0);
		n = h_build(h, buf, &p, NULL, 0);
		buf[0] = SW_OP_RC | SW_OP_SEND_ONLY_INV;
		h_send_resealed(h, buf, n);
		/* and one with 2 of its 4 IETH bytes */
		p = h_req(v, SW_OP_RC | SW_OP_SEND_ONLY, PSN0);
		n = h_build(h, buf, &p, data, 2);
		buf[0] = SW_OP_RC | SW_OP_SEND_ONLY_INV;
		buf[1] &= (uint8_t)~0x30; /* no pad: the 2 bytes are all there is */
		h_send_resealed(h, buf, n - 2);
		CHECK(H_WAIT_CNT(h, drops_malformed, m0 + 2));
		CHECK_EQ_INT(q_state(v), IBV_QPS_RTS);
		write_ok(WOFF + 64, k, v, PSN0); /* the window is still bound */
		CHECK_RET(ibv_destroy_qp(v), 0);
	}
	CHECK_RET(ibv_dealloc_mw(mw), 0);
}

/* Contract: a SEND ONLY with Invalidate of `rkey` on `v`: invalid request, REM_INV_REQ_ERR. */
static void refused(struct ibv_qp *v, uint32_t rkey)
{
	send_inv(v, SW_OP_RC | SW_OP_SEND_ONLY_INV, PSN0, 16, rkey);
	H_EXPECT_ACK(h, SW_AETH_NAK_INV_REQ, PSN0);
	expect_recv(IBV_WC_REM_INV_REQ_ERR, 0, 0);
	CHECK_EQ_INT(q_state(v), IBV_QPS_ERR);
	H_EXPECT_EVENT(h, v, IBV_EVENT_QP_REQ_ERR);
	CHECK_RET(ibv_destroy_qp(v), 0);
}

static void refused_invalidations(void)
{
	struct ibv_mw *m1 = ibv_alloc_mw(h->e.pd, IBV_MW_TYPE_1);
	struct ibv_mw *m2 = ibv_alloc_mw(h->e.pd, IBV_MW_TYPE_2);
	struct ibv_qp *owner, *v;
	uint32_t k;

	if (!CHECK(m1 && m2))
		return;
	t_case("IETH of an unknown rkey: invalid request, REM_INV_REQ_ERR");
	refused(victim(), 0x9abcdef0);
	t_case("IETH of an MR's rkey: refused, the MR still serves");
	refused(victim(), all.mr->rkey);
	v = victim();
	write_ok(8, all.mr->rkey, v, PSN0);
	CHECK_RET(ibv_destroy_qp(v), 0);
	t_case("IETH of a type 1 window: refused");
	refused(victim(), m1->rkey);
	t_case("IETH of an unbound type 2 window: refused");
	refused(victim(), m2->rkey);
	t_case("IETH of a type 2 window bound to another QP: refused, the window still serves its QP");
	owner = victim();
	k = bind2(owner, m2, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
	refused(victim(), k);
	write_ok(WOFF + 128, k, owner, PSN0);
	t_case("LAST with Invalidate without a SEND in progress: invalid request");
	v = victim();
	send_inv(v, SW_OP_RC | SW_OP_SEND_LAST_INV, PSN0, 16, k);
	H_EXPECT_ACK(h, SW_AETH_NAK_INV_REQ, PSN0);
	CHECK_EQ_INT(q_state(v), IBV_QPS_ERR);
	H_EXPECT_EVENT(h, v, IBV_EVENT_QP_REQ_ERR);
	CHECK_RET(ibv_destroy_qp(v), 0);
	write_ok(WOFF + 256, k, owner, PSN0 + 1); /* not invalidated by the refused packet */
	CHECK_RET(ibv_destroy_qp(owner), 0);
	CHECK_RET(ibv_dealloc_mw(m1), 0);
	CHECK_RET(ibv_dealloc_mw(m2), 0);
}

static void window_access(void)
{
	struct ibv_mw *mw = ibv_alloc_mw(h->e.pd, IBV_MW_TYPE_2);
	struct ibv_mw *zb = ibv_alloc_mw(h->e.pd, IBV_MW_TYPE_2);
	struct ibv_qp *owner, *v;
	uint32_t k, kz;

	if (!CHECK(mw && zb))
		return;
	owner = victim();
	k = bind2(owner, mw, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
	t_case("WRITE past the window's end, inside the MR: remote access error");
	h_write(h, owner, PSN0, h_va(&all, WOFF + WLEN - 4), k, 8, data, 8);
	fatal_end(owner, SW_AETH_NAK_REM_ACCESS, PSN0);
	t_case("READ of a write-only window: remote access error");
	owner = victim();
	CHECK_RET(ibv_dealloc_mw(mw), 0);
	mw = ibv_alloc_mw(h->e.pd, IBV_MW_TYPE_2);
	if (!CHECK(mw))
		return;
	k = bind2(owner, mw, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
	h_read(h, owner, PSN0, h_va(&all, WOFF), k, 8);
	fatal_end(owner, SW_AETH_NAK_REM_ACCESS, PSN0);
	t_case("a type 2 window from a QP that did not bind it: remote access error");
	v = victim();
	h_write(h, v, PSN0, h_va(&all, WOFF), k, 8, data, 8);
	fatal_end(v, SW_AETH_NAK_REM_ACCESS, PSN0);
	t_case("a zero-based window is addressed from 0; past its length refused");
	owner = victim();
	kz = bind2(owner, zb, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ZERO_BASED);
	h_write(h, owner, PSN0, 16, kz, 8, data, 8);
	H_EXPECT_ACK(h, H_ACK, PSN0);
	memcpy(all.shadow + H_SLACK + WOFF + 16, data, 8);
	h_write(h, owner, PSN0 + 1, WLEN - 4, kz, 8, data, 8);
	fatal_end(owner, SW_AETH_NAK_REM_ACCESS, PSN0 + 1);
	CHECK_RET(ibv_dealloc_mw(mw), 0);
	CHECK_RET(ibv_dealloc_mw(zb), 0);
}

int main(void)
{
	t_start("unit_hostile_mw");
	h_open(h);
	h_arena_open(&all, h->e.pd, ARENA_LEN,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_MW_BIND);
	rmr = ibv_reg_mr(h->e.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(0x3c ^ i);
	if (!CHECK(rmr))
		return t_finish();
	send_with_invalidate();
	refused_invalidations();
	window_access();
	CHECK_RET(ibv_dereg_mr(rmr), 0);
	h_arena_close(&all);
	h_close(h);
	return t_finish();
}
