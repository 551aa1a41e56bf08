/* SPDX-License-Identifier: MIT */
/*
 * unit_regress_read_window: READ responses grow the requester's window
 * as ACKs do, white-box.
 *
 * Regression: the congestion window (src/sw/transport/req.c) grew by one
 * packet per window's worth acknowledged, but only ACKs counted. A
 * stream of READs, answered by responses alone, kept SW_WINDOW_INIT (128
 * packets) for good: with 1 MiB READs (256 PSNs each, at MTU 4096) one
 * READ was in flight at a time, and the responder idled while the
 * requester turned around (sv_bench READ 1 MiB 9-14 GB/s, with the
 * window growing as for WRITEs 12-18 in the same minutes).
 *
 * As unit_regress_late_ack, the QP sends to a QP in INIT, which drops
 * everything, and the test hands the completer the answers itself.
 */
#include "harness.h"

#include "comp_util.h"

enum {
	MTU = 1024,
	NPKT = 8
};

static struct q_env env;
static struct cu_pair cp;
static uint8_t buf[NPKT * MTU], src[NPKT * MTU];

/* Hand the completer READ response `k` of NPKT at `psn`, with src's bytes (q->lock held). */
static void read_resp(struct sw_qp *q, uint32_t psn, uint32_t k)
{
	struct sw_pkt p = {.psn = psn, .syndrome = SW_AETH_ACK_NO_CREDIT};
	struct sw_icrc_ctx ic = {0};
	uint8_t pkt[SW_PKT_MAX];
	size_t hl;

	p.opcode = k == 0	 ? SW_OP_READ_RESP_FIRST :
		   k == NPKT - 1 ? SW_OP_READ_RESP_LAST :
				   SW_OP_READ_RESP_MIDDLE;
	p.paylen = MTU;
	hl = sw_pkt_write_hdrs(pkt, &p);
	memcpy(pkt + hl, src + (size_t)k * MTU, MTU);
	if (!CHECK(sw_pkt_parse(&p, pkt, sw_pkt_finish(pkt, hl + MTU, &ic), &ic) == 0))
		return;
	sw_comp_handle(q, &p);
}

/* Start from a window of NPKT packets, nothing counted towards growing it (q->lock held). */
static void small_window(struct sw_qp *q)
{
	q->req->window = NPKT;
	q->req->grow_acc = 0;
}

int main(void)
{
	struct ibv_qp *a;
	struct sw_qp *q;
	struct ibv_wc wc[4];
	uint32_t first;

	t_start("unit_regress_read_window");
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 7 + 5);
	if (cu_setup(&env, &cp, buf, sizeof(buf)))
		return t_finish();
	a = cp.a;
	q = cp.q;

	t_case("an ACK of a window's worth of WRITE packets: the window grows by one");
	pthread_mutex_lock(&q->lock);
	small_window(q);
	pthread_mutex_unlock(&q->lock);
	CHECK_RET(cu_post_write(a, cp.mr, buf, 1, sizeof(buf)), 0);
	pthread_mutex_lock(&q->lock);
	first = ((struct sw_send_wqe *)sw_ring_slot(&q->sq, 0))->first_psn;
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, NPKT));
	cu_aeth(q, sw_psn_add(first, NPKT - 1), SW_AETH_ACK_NO_CREDIT);
	CHECK_EQ_INT(q->req->window, NPKT + 1);
	pthread_mutex_unlock(&q->lock);
	if (CHECK_EQ_INT(q_poll(env.scq, wc, 4, 1), 1))
		CHECK(wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS);

	t_case("a window's worth of READ responses: the window grows by one, as for the ACK");
	pthread_mutex_lock(&q->lock);
	small_window(q);
	pthread_mutex_unlock(&q->lock);
	CHECK_RET(cu_post_op(a, cp.mr, buf, 2, sizeof(buf), IBV_WR_RDMA_READ), 0);
	CHECK_RET(cu_post_op(a, cp.mr, buf, 3, sizeof(buf), IBV_WR_RDMA_READ), 0);
	pthread_mutex_lock(&q->lock);
	first = ((struct sw_send_wqe *)sw_ring_slot(&q->sq, 1))->first_psn;
	/* the first READ fills the window: the second waits */
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, NPKT));
	CHECK_EQ_INT(q->req->send_idx, 2);
	for (uint32_t k = 0; k < NPKT; k++)
		read_resp(q, sw_psn_add(first, k), k);
	CHECK_EQ_INT(q->sq.cons, 2);
	CHECK_EQ_INT(q->req->window, NPKT + 1);
	/* and the second went out */
	CHECK_EQ_INT(q->req->psn, sw_psn_add(first, 2 * NPKT));
	for (uint32_t k = 0; k < NPKT; k++)
		read_resp(q, sw_psn_add(first, NPKT + k), k);
	CHECK_EQ_INT(q->sq.cons, 3);
	pthread_mutex_unlock(&q->lock);
	if (CHECK_EQ_INT(q_poll(env.scq, wc, 4, 2), 2)) {
		CHECK(wc[0].wr_id == 2 && wc[0].status == IBV_WC_SUCCESS);
		CHECK(wc[1].wr_id == 3 && wc[1].status == IBV_WC_SUCCESS);
	}
	CHECK_MSG(!memcmp(buf, src, sizeof(buf)), "the READs' bytes differ");

	cu_teardown(&env, &cp);
	return t_finish();
}
