/* SPDX-License-Identifier: MIT */
/*
 * unit_hostile_stash: the RC responder's packets kept after a gap
 * (src/sw/transport/stash.c), on the wire, against the hostile peer
 * (tests/hostile.h) playing the requester by hand.
 *
 * A SEND or WRITE packet ahead of the expected PSN is kept, not dropped;
 * the gap draws one sequence NAK as before; when the missing packet
 * comes, the kept ones are handled in PSN order as if they had just
 * arrived, and one answer covers them. The cases:
 *   1. two WRITEs ahead, then the missing one: nothing is placed before
 *      the gap fills, then all three are, and one ACK names the last;
 *   2. a kept WRITE with a wrong rkey is checked when it is handled, not
 *      when kept: a remote access NAK of its PSN, the QP in error with
 *      its event, nothing placed, nothing left kept;
 *   3. a second gap among the kept packets: the run stops there and its
 *      sequence NAK (not an ACK) goes out; filling it drains the rest;
 *   4. a SEND kept twice (the peer sent it again) is delivered once;
 *   5. a packet SW_STASH_SLOTS ahead or more, or one of a kind not kept
 *      (a READ request), ends keeping for that gap: what was kept is forgotten,
 *      so the gap's one NAK is followed by the ACK of the missing packet
 *      alone, and the rest must come again (IBTA's go-back-N);
 *   6. a QP destroyed, and one reset, with packets kept: the device's
 *      count of kept packets falls back (ASan's leak check does the rest).
 * Every case checks the arena (nothing outside registered bytes, nothing
 * inside before its time) and the device's counters.
 */
#include "harness.h"

#include "qp_util.h"
#include "hostile.h"

enum {
	PSN0 = 0x7ffff0, /* the runs cross 2^23; case 5 crosses 2^24 too */
};

static struct h_env H, *h = &H;
static struct h_arena all;
static uint8_t rbuf[4096];
static struct ibv_mr *rmr;
static uint8_t data[3][64];

static unsigned int kept_now(void)
{
	return atomic_load(&h->eng->stash_pkts);
}

/* A WRITE ONLY of data[i] at arena offset `off`, AckReq set. */
static void write_at(struct ibv_qp *v, uint32_t psn, int i, int64_t off, uint32_t rkey)
{
	h_write(h, v, psn, h_va(&all, off), rkey, sizeof(data[i]), data[i], sizeof(data[i]));
}

/* The arena holds data[i] at `off` (the shadow learns it), or still its old bytes. */
static bool placed(struct ibv_qp *v, int i, int64_t off)
{
	h_sync(v);
	if (memcmp(all.buf + off, data[i], sizeof(data[i])))
		return false;
	memcpy(all.shadow + H_SLACK + off, data[i], sizeof(data[i]));
	return true;
}

static struct ibv_qp *victim(void)
{
	return h_rc_victim_recv(h, PSN0, rmr, rbuf, sizeof(rbuf));
}

/*
 * Data 1 and 2 at `off1` and `off2` sent `d1` and `d2` PSNs after the
 * expected one: one sequence NAK of the expected PSN, both kept.
 */
static void kept_two(struct ibv_qp *v, uint32_t d1, int64_t off1, uint32_t d2, int64_t off2)
{
	unsigned long long st0 = H_CNT(h, stashed);

	write_at(v, PSN0 + d1, 1, off1, all.mr->rkey);
	write_at(v, PSN0 + d2, 2, off2, all.mr->rkey);
	H_EXPECT_ACK(h, SW_AETH_NAK_PSN_SEQ, PSN0);
	H_WAIT_CNT(h, stashed, st0 + 2);
}

static void filled_gap(void)
{
	struct ibv_qp *v = victim();
	unsigned long long seq0 = H_CNT(h, seq_naks_tx);
	uint32_t e = PSN0, k = all.mr->rkey;

	t_case("two WRITEs kept after a gap, placed in order when it fills, one ACK");
	kept_two(v, 1, 64, 2, 128);
	CHECK(h_arena_intact(&all)); /* nothing placed yet */
	CHECK_EQ_INT(kept_now(), 2);
	write_at(v, e, 0, 0, k);
	H_EXPECT_ACK(h, H_ACK, e + 2);
	CHECK(placed(v, 0, 0) && placed(v, 1, 64) && placed(v, 2, 128));
	CHECK(h_arena_intact(&all));
	CHECK_EQ_INT(H_CNT(h, seq_naks_tx), seq0 + 1);
	CHECK_EQ_INT(kept_now(), 0);
	H_PROBE(h, v, e + 3);
	CHECK_EQ_INT(ibv_destroy_qp(v), 0);
}

static void checked_when_handled(void)
{
	struct ibv_qp *v = victim();
	uint32_t e = PSN0, k = all.mr->rkey;
	struct ibv_wc wc;

	t_case("a kept WRITE with a wrong rkey: remote access NAK when handled, QP in error");
	write_at(v, e + 1, 1, 256, k + 1);
	H_EXPECT_ACK(h, SW_AETH_NAK_PSN_SEQ, e);
	write_at(v, e, 0, 1152, k);
	H_EXPECT_ACK(h, SW_AETH_NAK_REM_ACCESS, e + 1);
	CHECK_EQ_INT(q_state(v), IBV_QPS_ERR);
	H_EXPECT_EVENT(h, v, IBV_EVENT_QP_ACCESS_ERR);
	CHECK(placed(v, 0, 1152));
	CHECK(h_arena_intact(&all)); /* offset 256 untouched */
	CHECK_EQ_INT(kept_now(), 0);
	CHECK_EQ_INT(ibv_poll_cq(h->e.rcq, 1, &wc), 1); /* the posted receive, flushed */
	CHECK_EQ_INT(wc.status, IBV_WC_WR_FLUSH_ERR);
	H_EXPECT_QUIET(h);
	CHECK_EQ_INT(ibv_destroy_qp(v), 0);
}

static void second_gap(void)
{
	struct ibv_qp *v = victim();
	uint32_t e = PSN0, k = all.mr->rkey;

	t_case("a second gap among the kept packets: its NAK, then the rest when it fills");
	kept_two(v, 1, 512, 3, 640);
	write_at(v, e, 0, 384, k);
	H_EXPECT_ACK(h, SW_AETH_NAK_PSN_SEQ, e + 2);
	CHECK(placed(v, 0, 384) && placed(v, 1, 512));
	CHECK(h_arena_intact(&all)); /* e + 3's bytes not yet */
	CHECK_EQ_INT(kept_now(), 1);
	h_write(h, v, e + 2, 0, 0, 0, NULL, 0); /* fills it: the ACK names e + 3 */
	H_EXPECT_ACK(h, H_ACK, e + 3);
	CHECK(placed(v, 2, 640));
	CHECK_EQ_INT(kept_now(), 0);
	CHECK_EQ_INT(ibv_destroy_qp(v), 0);
}

static void send_once(void)
{
	struct ibv_qp *v = victim();
	unsigned long long st0 = H_CNT(h, stashed), oow0 = H_CNT(h, drops_out_of_window);
	struct sw_pkt p = h_req(v, SW_OP_SEND_ONLY, PSN0 + 1);
	struct ibv_wc wc;

	t_case("a SEND kept twice is delivered once");
	h_send(h, &p, data[1], sizeof(data[1]));
	h_send(h, &p, data[1], sizeof(data[1]));
	H_EXPECT_ACK(h, SW_AETH_NAK_PSN_SEQ, PSN0);
	H_WAIT_CNT(h, stashed, st0 + 1);
	CHECK_EQ_INT(H_CNT(h, drops_out_of_window), oow0);
	CHECK_EQ_INT(ibv_poll_cq(h->e.rcq, 1, &wc), 0);
	write_at(v, PSN0, 0, 768, all.mr->rkey);
	H_EXPECT_ACK(h, H_ACK, PSN0 + 1);
	CHECK(placed(v, 0, 768));
	CHECK_EQ_INT(ibv_poll_cq(h->e.rcq, 1, &wc), 1);
	CHECK(wc.wr_id == 77 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	      wc.byte_len == sizeof(data[1]) && !memcmp(rbuf, data[1], sizeof(data[1])));
	CHECK_EQ_INT(ibv_poll_cq(h->e.rcq, 1, &wc), 0);
	CHECK_EQ_INT(kept_now(), 0);
	CHECK_EQ_INT(ibv_destroy_qp(v), 0);
}

/* The peer sends `bad` ahead of a kept WRITE: nothing stays kept, go-back-N. */
static void gap_broken(const char *name, void (*bad)(struct ibv_qp *v, uint32_t e), int64_t off)
{
	struct ibv_qp *v = victim();
	unsigned long long oow0 = H_CNT(h, drops_out_of_window);
	uint32_t e = PSN0, k = all.mr->rkey;

	t_case(name);
	write_at(v, e + 1, 1, off, k);
	H_EXPECT_ACK(h, SW_AETH_NAK_PSN_SEQ, e);
	bad(v, e);
	write_at(v, e + 2, 2, off + 64, k); /* after the break: not kept either */
	H_WAIT_CNT(h, drops_out_of_window, oow0 + 2);
	CHECK_EQ_INT(kept_now(), 0);
	H_PROBE(h, v, e); /* the ACK of e alone: what was kept is gone */
	CHECK(h_arena_intact(&all));
	write_at(v, e + 1, 1, off, k); /* sent again, it is taken */
	H_EXPECT_ACK(h, H_ACK, e + 1);
	CHECK(placed(v, 1, off));
	CHECK_EQ_INT(ibv_destroy_qp(v), 0);
}

static void far_ahead(struct ibv_qp *v, uint32_t e)
{
	write_at(v, e + SW_STASH_SLOTS, 0, 2048, all.mr->rkey);
}

static void read_ahead(struct ibv_qp *v, uint32_t e)
{
	h_read(h, v, e + 3, h_va(&all, 2048), all.mr->rkey, 16);
}

static void kept_at_end(void)
{
	struct ibv_qp *v = victim();
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};

	t_case("a QP destroyed, and one reset, with packets kept: none stay kept");
	kept_two(v, 1, 2048, 2, 2048);
	h_sync(v);
	CHECK_EQ_INT(kept_now(), 2);
	CHECK_EQ_INT(ibv_modify_qp(v, &a, IBV_QP_STATE), 0);
	CHECK_EQ_INT(kept_now(), 0);
	CHECK_EQ_INT(ibv_destroy_qp(v), 0);
	v = victim();
	write_at(v, PSN0 + 1, 1, 2048, all.mr->rkey);
	H_EXPECT_ACK(h, SW_AETH_NAK_PSN_SEQ, PSN0);
	h_sync(v);
	CHECK_EQ_INT(kept_now(), 1);
	CHECK_EQ_INT(ibv_destroy_qp(v), 0);
	CHECK_EQ_INT(kept_now(), 0);
	CHECK(h_arena_intact(&all));
	H_EXPECT_QUIET(h);
}

int main(void)
{
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	t_start("unit_hostile_stash");
	h_open(h);
	h_arena_open(&all, h->e.pd, 4 * 4096 - 2 * H_SLACK, rw);
	rmr = ibv_reg_mr(h->e.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	if (!rmr)
		return t_finish();
	for (int i = 0; i < 3; i++)
		for (size_t j = 0; j < sizeof(data[i]); j++)
			data[i][j] = (uint8_t)(0x31 * (i + 1) ^ j);

	filled_gap();
	checked_when_handled();
	second_gap();
	send_once();
	gap_broken("a packet beyond SW_STASH_SLOTS ends keeping for the gap", far_ahead, 896);
	gap_broken("a READ request ahead (never kept) ends keeping for the gap", read_ahead, 1024);
	kept_at_end();

	ibv_dereg_mr(rmr);
	h_arena_close(&all);
	h_close(h);
	return t_finish();
}
