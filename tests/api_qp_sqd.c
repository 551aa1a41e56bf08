/* SPDX-License-Identifier: MIT */
/*
 * api_qp_sqd: the send queue drain state with live traffic.
 *
 * IBV_EVENT_SQ_DRAINED (asked for with en_sqd_async_notify) means that no
 * send WQE the QP had started is outstanding any more. WQEs that had not
 * started when the QP entered SQD, and those posted in SQD, wait for RTS:
 *
 *   1. a SEND waiting out an RNR back-off (the receiver had no receive
 *      posted, min_rnr_timer 655 ms) has nothing on the wire: the event
 *      comes (at once: the time is printed), the SEND stays queued and
 *      completes after RTS;
 *   2. hundreds of WRITEs, most still in flight: the event comes once
 *      they are acknowledged, WRITEs posted in SQD do not start, and all
 *      complete in order after RTS.
 */
#include "harness.h"
#include "traffic.h"

#include <poll.h>

#define N_WRITES 400
#define N_LATE 10

/* Wait up to `ms` for an async event on `ctx`; true if one was read. */
static bool next_event(struct ibv_context *ctx, int ms, struct ibv_async_event *ev)
{
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};

	if (poll(&p, 1, ms) != 1)
		return false;
	return ibv_get_async_event(ctx, ev) == 0;
}

/* Move `qp` to `st` (SQD with the drain notification asked for). */
static int move(struct ibv_qp *qp, enum ibv_qp_state st)
{
	struct ibv_qp_attr a = {.qp_state = st, .en_sqd_async_notify = 1};

	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | (st == IBV_QPS_SQD ? IBV_QP_EN_SQD_ASYNC_NOTIFY : 0));
}

/* The drain event for `qp` within `ms`; checks sq_draining is then 0. */
static bool drained(struct t_ep *e, int ms)
{
	struct ibv_async_event ev;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr q;

	if (!CHECK_MSG(next_event(e->ctx, ms, &ev), "no async event within %d ms", ms))
		return false;
	CHECK_EQ_INT(ev.event_type, IBV_EVENT_SQ_DRAINED);
	CHECK(ev.element.qp == e->qp);
	ibv_ack_async_event(&ev);
	CHECK_RET(ibv_query_qp(e->qp, &q, IBV_QP_STATE, &ia), 0);
	CHECK_EQ_INT(q.qp_state, IBV_QPS_SQD);
	CHECK_EQ_INT(q.sq_draining, 0);
	return true;
}

static void rnr_wait(void)
{
	struct t_ep a, b;
	struct ibv_wc wc[2];
	uint64_t t0;

	t_case("SQD during an RNR back-off: drained at once, the SEND completes after RTS");
	if (t_ep_init(&a, NULL, IBV_QPT_RC, 4096, IBV_ACCESS_LOCAL_WRITE, 16) ||
	    t_ep_init(&b, a.ctx, IBV_QPT_RC, 4096, IBV_ACCESS_LOCAL_WRITE, 16))
		goto out;
	t_min_rnr_timer = 0; /* the longest back-off: 655.36 ms */
	if (t_connect(&a, &b, IBV_MTU_1024))
		goto out;
	memset(a.buf, 0x5a, 64);
	CHECK_RET(t_post(&a, IBV_WR_SEND, 1, 0, 64, 0, 0, IBV_SEND_SIGNALED), 0);
	usleep(50 * 1000); /* the RNR NAK is back: the SEND waits out its back-off */
	/*
	 * Before the fix the event never came (the SEND stays unstarted in
	 * SQD); the limit only keeps a loaded machine from failing the test.
	 */
	t0 = t_ms();
	CHECK_RET(move(a.qp, IBV_QPS_SQD), 0);
	if (drained(&a, 5000))
		printf("# drained %llu ms after entering SQD\n", (unsigned long long)(t_ms() - t0));
	CHECK_EQ_INT(ibv_poll_cq(a.cq, 1, wc), 0);
	CHECK_RET(t_post_recv(&b, 2, 0, 4096), 0);
	CHECK_RET(move(a.qp, IBV_QPS_RTS), 0);
	if (CHECK_EQ_INT(t_poll(a.cq, wc, 1, 5000), 1)) {
		CHECK_EQ_INT(wc[0].status, IBV_WC_SUCCESS);
		CHECK_EQ_INT(wc[0].wr_id, 1);
	}
	if (CHECK_EQ_INT(t_poll(b.cq, wc, 1, 5000), 1)) {
		CHECK_EQ_INT(wc[0].status, IBV_WC_SUCCESS);
		CHECK_EQ_INT(wc[0].byte_len, 64);
		CHECK_EQ_INT(b.buf[63], 0x5a);
	}
out:
	t_min_rnr_timer = 1;
	t_ep_destroy(&b, false);
	t_ep_destroy(&a, true);
}

static void many_writes(void)
{
	static struct ibv_wc wc[N_WRITES + N_LATE];
	struct t_ep a, b;
	int got, i;

	t_case("SQD with WRITEs in flight: drained once acknowledged; late WRITEs wait for RTS");
	if (t_ep_init(&a, NULL, IBV_QPT_RC, 64 * 1024, IBV_ACCESS_LOCAL_WRITE, N_WRITES + N_LATE) ||
	    t_ep_init(&b, a.ctx, IBV_QPT_RC, 64 * 1024,
		      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 16) ||
	    t_connect(&a, &b, IBV_MTU_1024))
		goto out;
	t_fill(a.buf, a.len, 7);
	for (i = 0; i < N_WRITES; i++)
		if (!CHECK_RET(t_post(&a, IBV_WR_RDMA_WRITE, (uint64_t)i, (size_t)i * 128, 128,
				      (uintptr_t)b.buf + (size_t)i * 128, b.mr->rkey,
				      IBV_SEND_SIGNALED),
			       0))
			goto out;
	CHECK_RET(move(a.qp, IBV_QPS_SQD), 0);
	if (!drained(&a, 10000))
		goto out;
	got = ibv_poll_cq(a.cq, N_WRITES, wc);
	CHECK_MSG(got >= 1, "the drain came before any WRITE completed");
	for (i = 0; i < N_LATE; i++)
		CHECK_RET(t_post(&a, IBV_WR_RDMA_WRITE, (uint64_t)(N_WRITES + i),
				 (size_t)(N_WRITES + i) * 128, 128,
				 (uintptr_t)b.buf + (size_t)(N_WRITES + i) * 128, b.mr->rkey,
				 IBV_SEND_SIGNALED),
			  0);
	usleep(100 * 1000);
	got += ibv_poll_cq(a.cq, N_WRITES + N_LATE - got, wc + got);
	CHECK_MSG(got <= N_WRITES, "%d completions in SQD: a late WRITE started", got);
	CHECK_RET(move(a.qp, IBV_QPS_RTS), 0);
	got += t_poll(a.cq, wc + got, N_WRITES + N_LATE - got, 10000);
	CHECK_EQ_INT(got, N_WRITES + N_LATE);
	for (i = 0; i < got; i++)
		if (!CHECK_EQ_INT(wc[i].status, IBV_WC_SUCCESS) || !CHECK_EQ_INT(wc[i].wr_id, i))
			break;
	CHECK(memcmp(a.buf, b.buf, (N_WRITES + N_LATE) * 128) == 0);
out:
	t_ep_destroy(&b, false);
	t_ep_destroy(&a, true);
}

int main(void)
{
	t_start("api_qp_sqd");
	rnr_wait();
	many_writes();
	return t_finish();
}
