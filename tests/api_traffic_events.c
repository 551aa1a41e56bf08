/* SPDX-License-Identifier: MIT */
/*
 * api_traffic_events.c - events and errors under traffic:
 *
 *   - solicited events: with ibv_req_notify_cq(cq, 1), an unsolicited
 *     SEND raises no completion event, a solicited one does;
 *   - several QPs sharing an SRQ, and the SRQ limit event under traffic;
 *   - CQ overflow under traffic raising IBV_EVENT_CQ_ERR;
 *   - a QP moved to ERR mid-stream: a prefix succeeds, the rest flushes
 *     with IBV_WC_WR_FLUSH_ERR in order; then both QPs work again after
 *     RESET;
 *   - 64 QP pairs moving data at once.
 * Every received byte is compared, and the bytes after each target range
 * must be untouched. The endpoints and helpers are in traffic_ep.h; the
 * other api_traffic_* programs cover sizes (api_traffic_sizes), SGE
 * lists, signalling, fences and ibv_qp_ex (api_traffic_sge), and two
 * processes (api_traffic_2proc).
 */
#include "harness.h"
#include "traffic.h"
#include "traffic_ep.h"

#include <fcntl.h>

/* ---- solicited events ---- */

/* true if a completion event arrives on `ch` within `ms`; acks it */
static bool cq_event(struct ibv_comp_channel *ch, struct ibv_cq *want, int ms)
{
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	struct ibv_cq *cq;
	void *cq_ctx;
	int flags = fcntl(ch->fd, F_GETFL);

	if (poll(&pfd, 1, ms) != 1)
		return false;
	fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK);
	if (ibv_get_cq_event(ch, &cq, &cq_ctx)) {
		fcntl(ch->fd, F_SETFL, flags);
		return false;
	}
	fcntl(ch->fd, F_SETFL, flags);
	CHECK(cq == want);
	ibv_ack_cq_events(cq, 1);
	return true;
}

static void case_solicited(void)
{
	struct ep_opts oa = {.len = MiB, .depth = 16}, ob = oa;
	struct ep a, b;
	struct ibv_wc wc;

	t_case("solicited events: notify(solicited_only) fires for SOLICITED only");
	memset(&b, 0, sizeof(b));
	ob.channel = true;
	if (ep_init(&a, &oa) || ep_init(&b, &ob) || ep_connect(&a, &b, IBV_MTU_1024))
		goto out;
	for (int i = 0; i < 6; i++)
		if (recv1(&b, (uint64_t)i, b.buf + (size_t)i * 8192, 8192))
			goto out;
	CHECK_RET(ibv_req_notify_cq(b.cq, 1), 0);
	/* unsolicited SEND (multi-packet): a completion but no event */
	if (post1(&a, IBV_WR_SEND, 1, a.buf, 5000, 0, 0, IBV_SEND_SIGNALED, 0) ||
	    wait1(a.cq, &wc, "send") || wait1(b.cq, &wc, "recv"))
		goto out;
	CHECK_MSG(!cq_event(b.ch, b.cq, 200), "an unsolicited SEND raised an event");
	/* solicited SEND: an event */
	if (post1(&a, IBV_WR_SEND, 2, a.buf, 5000, 0, 0, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED,
		  0) ||
	    wait1(a.cq, &wc, "solicited send"))
		goto out;
	CHECK_MSG(cq_event(b.ch, b.cq, 5000), "a solicited SEND raised no event");
	wait1(b.cq, &wc, "solicited recv");
	/* the arm is used up: another solicited SEND raises nothing until re-armed */
	if (post1(&a, IBV_WR_SEND, 3, a.buf, 10, 0, 0, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, 0) ||
	    wait1(a.cq, &wc, "send") || wait1(b.cq, &wc, "recv"))
		goto out;
	CHECK_MSG(!cq_event(b.ch, b.cq, 100), "an event without an arm");
	/* solicited WRITE_WITH_IMM under a solicited-only arm */
	CHECK_RET(ibv_req_notify_cq(b.cq, 1), 0);
	if (post1(&a, IBV_WR_RDMA_WRITE_WITH_IMM, 4, a.buf, 3000, (uintptr_t)b.buf + 65536,
		  b.mr->rkey, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, 9) ||
	    wait1(a.cq, &wc, "write imm"))
		goto out;
	CHECK_MSG(cq_event(b.ch, b.cq, 5000), "a solicited WRITE_WITH_IMM raised no event");
	wait1(b.cq, &wc, "write imm recv");
	/* an arm for any completion fires on an unsolicited SEND */
	CHECK_RET(ibv_req_notify_cq(b.cq, 0), 0);
	if (post1(&a, IBV_WR_SEND, 5, a.buf, 100, 0, 0, IBV_SEND_SIGNALED, 0) ||
	    wait1(a.cq, &wc, "send"))
		goto out;
	CHECK_MSG(cq_event(b.ch, b.cq, 5000), "notify(any) raised no event");
	wait1(b.cq, &wc, "recv");
out:
	ep_fini(&a);
	ep_fini(&b);
}

/* ---- async events ---- */

/* Wait for async event `type` (others are acked and skipped). */
static bool async_wait(enum ibv_event_type type, void *elem, int ms)
{
	uint64_t end = t_ms() + (uint64_t)ms;
	int flags = fcntl(ctx->async_fd, F_GETFL);
	bool found = false;

	fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
	while (!found && t_ms() < end) {
		struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
		struct ibv_async_event ev;

		if (poll(&pfd, 1, 50) != 1 || ibv_get_async_event(ctx, &ev))
			continue;
		if (ev.event_type == type) {
			found = true;
			if (type == IBV_EVENT_CQ_ERR)
				CHECK(ev.element.cq == elem);
			else if (type == IBV_EVENT_SRQ_LIMIT_REACHED)
				CHECK(ev.element.srq == elem);
		} else {
			printf("# async event %s while waiting for %s\n",
			       ibv_event_type_str(ev.event_type), ibv_event_type_str(type));
		}
		ibv_ack_async_event(&ev);
	}
	fcntl(ctx->async_fd, F_SETFL, flags);
	return found;
}

/* ---- SRQ ---- */

#define NSRQ_QP 4
#define SRQ_MSGS 24
#define SRQ_SLOT 20000

static void case_srq(void)
{
	struct ep_opts oa = {.len = MiB, .depth = 64}, ob = oa;
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 256, .max_sge = 2}};
	struct ep a[NSRQ_QP], b[NSRQ_QP];
	struct ibv_srq *srq = NULL;
	struct ibv_mr *rmr = NULL;
	uint8_t *rbuf = NULL;
	bool seen[NSRQ_QP][SRQ_MSGS];
	struct ibv_srq_attr qa;
	int total = NSRQ_QP * SRQ_MSGS;

	t_case("SRQ: several QPs share one SRQ under traffic; the limit event fires");
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	memset(seen, 0, sizeof(seen));
	srq = ibv_create_srq(gpd, &sa);
	rbuf = calloc(total + 20, SRQ_SLOT);
	if (!CHECK(srq && rbuf))
		goto out;
	rmr = ibv_reg_mr(gpd, rbuf, (size_t)(total + 20) * SRQ_SLOT, IBV_ACCESS_LOCAL_WRITE);
	if (!CHECK(rmr))
		goto out;
	ob.srq = srq;
	for (int q = 0; q < NSRQ_QP; q++)
		if (ep_init(&a[q], &oa) || ep_init(&b[q], &ob) ||
		    ep_connect(&a[q], &b[q], (enum ibv_mtu)(IBV_MTU_512 + q % 3)))
			goto out;
	/* every slot is a two-SGE receive: 1000 bytes, then the rest */
	for (int i = 0; i < total + 20; i++) {
		struct ibv_sge sg[2] = {{(uintptr_t)rbuf + (size_t)i * SRQ_SLOT, 1000, rmr->lkey},
					{(uintptr_t)rbuf + (size_t)i * SRQ_SLOT + 1000,
					 SRQ_SLOT - 1000, rmr->lkey}};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = sg, .num_sge = 2}, *bad;

		if (!CHECK_RET(ibv_post_srq_recv(srq, &wr, &bad), 0))
			goto out;
	}
	/* arm the limit: it fires when fewer than 30 receives remain (20 will) */
	qa.srq_limit = 30;
	CHECK_RET(ibv_modify_srq(srq, &qa, IBV_SRQ_LIMIT), 0);
	/* all QPs send at once, interleaved; each message names its sender and number */
	for (int m = 0; m < SRQ_MSGS; m++)
		for (int q = 0; q < NSRQ_QP; q++) {
			uint32_t len = 8 + (uint32_t)(m * 731 + q * 97) % (SRQ_SLOT - 8);
			uint8_t *p = a[q].buf + (size_t)m * SRQ_SLOT;

			t_fill(p, len, (unsigned int)(q * 100 + m));
			p[0] = (uint8_t)q;
			p[1] = (uint8_t)m;
			if (post1(&a[q], IBV_WR_SEND, (uint64_t)m, p, len, 0, 0,
				  m == SRQ_MSGS - 1 ? IBV_SEND_SIGNALED : 0, 0))
				goto out;
		}
	for (int q = 0; q < NSRQ_QP; q++) {
		struct ibv_wc wc;

		wait1(a[q].cq, &wc, "last send");
	}
	/* the receives: spread over the b QPs' CQs */
	for (int q = 0; q < NSRQ_QP; q++) {
		struct ibv_wc wc[SRQ_MSGS];
		int got = t_poll(b[q].cq, wc, SRQ_MSGS, 5000);

		CHECK_EQ_INT(got, SRQ_MSGS);
		for (int i = 0; i < got; i++) {
			uint8_t *p = rbuf + wc[i].wr_id * SRQ_SLOT;
			int sq = p[0], sm = p[1];
			uint32_t len = 8 + (uint32_t)(sm * 731 + sq * 97) % (SRQ_SLOT - 8);
			long bad;

			if (!CHECK_MSG(wc[i].status == IBV_WC_SUCCESS &&
					       wc[i].qp_num == b[q].qp->qp_num && sq == q &&
					       sm < SRQ_MSGS && !seen[sq][sm],
				       "SRQ completion %d on QP %d: %s, from %d/%d", i, q,
				       ibv_wc_status_str(wc[i].status), sq, sm))
				continue;
			seen[sq][sm] = true;
			CHECK_MSG(i == 0 || sm > rbuf[wc[i - 1].wr_id * SRQ_SLOT + 1],
				  "QP %d: messages out of order", q);
			CHECK_EQ_INT(wc[i].byte_len, len);
			p[0] = p[1] = 0;
			{
				uint8_t *want = malloc(len);

				if (want) {
					t_fill(want, len, (unsigned int)(sq * 100 + sm));
					want[0] = want[1] = 0;
					bad = memcmp(p, want, len);
					CHECK_MSG(!bad, "SRQ message %d/%d differs", sq, sm);
					free(want);
				}
			}
			p[1] = (uint8_t)sm; /* for the order check of the next one */
		}
	}
	CHECK_MSG(async_wait(IBV_EVENT_SRQ_LIMIT_REACHED, srq, 2000), "no SRQ limit event");
	CHECK_RET(ibv_query_srq(srq, &qa), 0);
	CHECK_MSG(qa.srq_limit == 0, "the limit is still armed: %u", qa.srq_limit);
out:
	for (int q = 0; q < NSRQ_QP; q++) {
		ep_fini(&a[q]);
		ep_fini(&b[q]);
	}
	if (rmr)
		CHECK_RET(ibv_dereg_mr(rmr), 0);
	if (srq)
		CHECK_RET(ibv_destroy_srq(srq), 0);
	free(rbuf);
}

/* ---- CQ overflow ---- */

static void case_cq_overflow(void)
{
	struct ep_opts oa = {.len = MiB, .depth = 64}, ob = {.len = MiB, .depth = 64, .cqe = 4};
	struct ep a, b;
	struct ibv_wc wc[64];

	t_case("CQ overflow under traffic raises IBV_EVENT_CQ_ERR");
	memset(&b, 0, sizeof(b));
	if (ep_init(&a, &oa) || ep_init(&b, &ob) || ep_connect(&a, &b, IBV_MTU_1024))
		goto out;
	for (int i = 0; i < 48; i++)
		if (recv1(&b, (uint64_t)i, b.buf + (size_t)i * 2048, 2048))
			goto out;
	for (int i = 0; i < 48; i++)
		if (post1(&a, IBV_WR_SEND, (uint64_t)i, a.buf, 1500, 0, 0, 0, 0))
			goto out;
	CHECK_MSG(async_wait(IBV_EVENT_CQ_ERR, b.cq, 5000), "no IBV_EVENT_CQ_ERR (cqe %d)",
		  b.cq->cqe);
	/* what the CQ holds is still readable */
	CHECK(t_poll(b.cq, wc, 64, 100) >= 1);
out:
	ep_fini(&a);
	ep_fini(&b);
}

/* ---- ERR mid-stream ---- */

static void case_err_midstream(void)
{
	struct ep_opts o = {.len = 8 * MiB, .depth = 128};
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR}, reset = {.qp_state = IBV_QPS_RESET};
	struct ep a, b;
	struct ibv_wc wc[128];
	int got, ok = 0, flushed = 0, rflushed = 0;

	t_case("a QP moved to ERR mid-stream: a prefix succeeds, the rest flushes in order");
	if (ep_init(&a, &o) || ep_init(&b, &o) || ep_connect(&a, &b, IBV_MTU_1024))
		goto out;
	for (int i = 0; i < 8; i++)
		if (recv1(&a, 1000 + (uint64_t)i, a.buf + 7 * MiB, 4096))
			goto out;
	for (int i = 0; i < 64; i++)
		if (post1(&a, IBV_WR_RDMA_WRITE, (uint64_t)i, a.buf, 128 * 1024,
			  (uintptr_t)b.buf + (size_t)(i % 32) * 128 * 1024, b.mr->rkey,
			  IBV_SEND_SIGNALED, 0))
			goto out;
	usleep(2000); /* let some of it go */
	CHECK_RET(ibv_modify_qp(a.qp, &err, IBV_QP_STATE), 0);
	got = t_poll(a.cq, wc, 72, 10000);
	CHECK_EQ_INT(got, 72);
	for (int i = 0, next = 0; i < got; i++) {
		if (wc[i].wr_id >= 1000) {
			CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR);
			rflushed++;
			continue;
		}
		CHECK_MSG(wc[i].wr_id == (uint64_t)next++, "send completions out of order");
		if (wc[i].status == IBV_WC_SUCCESS) {
			CHECK_MSG(!flushed, "a success after a flush");
			ok++;
		} else {
			CHECK_MSG(wc[i].status == IBV_WC_WR_FLUSH_ERR, "status %s",
				  ibv_wc_status_str(wc[i].status));
			flushed++;
		}
	}
	printf("# ERR mid-stream: %d WRITEs completed, %d flushed, %d receives flushed\n", ok,
	       flushed, rflushed);
	CHECK_EQ_INT(ok + flushed, 64);
	CHECK_EQ_INT(rflushed, 8);
	CHECK_EQ_INT(t_poll(a.cq, wc, 1, 50), 0);
	/* new requests flush at once */
	if (!post1(&a, IBV_WR_RDMA_WRITE, 77, a.buf, 10, (uintptr_t)b.buf, b.mr->rkey, 0, 0))
		CHECK(t_poll(a.cq, wc, 1, 1000) == 1 && wc[0].wr_id == 77 &&
		      wc[0].status == IBV_WC_WR_FLUSH_ERR);
	/* RESET both and start again: the pair works */
	(void)t_poll(b.cq, wc, 128, 100);
	if (!CHECK_RET(ibv_modify_qp(a.qp, &reset, IBV_QP_STATE), 0) ||
	    !CHECK_RET(ibv_modify_qp(b.qp, &reset, IBV_QP_STATE), 0) || t_qp_init(a.qp, ACC_ALL) ||
	    t_qp_init(b.qp, ACC_ALL) || ep_connect(&a, &b, IBV_MTU_4096))
		goto out;
	t_fill(a.buf, 500000, 3);
	if (!post1(&a, IBV_WR_RDMA_WRITE, 5, a.buf, 500000, (uintptr_t)b.buf + MiB, b.mr->rkey,
		   IBV_SEND_SIGNALED, 0) &&
	    !wait1(a.cq, wc, "write after reset"))
		CHECK(pattern_diff(b.buf + MiB, 500000, 3) < 0);
out:
	ep_fini(&a);
	ep_fini(&b);
}

/* ---- many QPs ---- */

#define NPAIRS 64
#define PAIR_SLOT (96 * 1024)

static void case_many_qps(void)
{
	struct ep_opts o = {.depth = 8};
	struct ep a[NPAIRS], b[NPAIRS];
	struct ibv_cq *cqa = ibv_create_cq(ctx, NPAIRS * 8, NULL, NULL, 0);
	struct ibv_cq *cqb = ibv_create_cq(ctx, NPAIRS * 8, NULL, NULL, 0);
	size_t len = (size_t)NPAIRS * PAIR_SLOT;
	uint8_t *ba = aligned_alloc(4096, len), *bb = aligned_alloc(4096, len);
	struct ibv_mr *ma = NULL, *mb = NULL;
	struct ibv_wc *wc = calloc(NPAIRS * 4, sizeof(*wc));
	int got;

	t_case("64 QP pairs move data at the same time");
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	if (!CHECK(cqa && cqb && ba && bb && wc))
		goto out;
	memset(bb, 0, len);
	ma = ibv_reg_mr(gpd, ba, len, ACC_ALL);
	mb = ibv_reg_mr(gpd, bb, len, ACC_ALL);
	if (!CHECK(ma && mb))
		goto out;
	/*
	 * 64 windows at once can overrun the socket buffers, and the losses
	 * are then retransmitted after the ACK timeout: give it 1 s, so that
	 * a slow run (valgrind) does not exhaust retry_cnt.
	 */
	t_timeout = 18;
	for (int i = 0; i < NPAIRS; i++) {
		o.cq = cqa;
		o.mr = ma;
		if (ep_init(&a[i], &o))
			goto out;
		o.cq = cqb;
		o.mr = mb;
		if (ep_init(&b[i], &o) || ep_connect(&a[i], &b[i], mtus[i % 5]))
			goto out;
	}
	/* each pair: a WRITE, a SEND and a READ of its own slot */
	for (int i = 0; i < NPAIRS; i++) {
		uint8_t *sa = ba + (size_t)i * PAIR_SLOT, *sb = bb + (size_t)i * PAIR_SLOT;
		uint32_t n = 20000 + (uint32_t)i * 140;

		t_fill(sa, 30000, (unsigned int)i);
		t_fill(sb + 60000, 30000, (unsigned int)i + 500);
		if (recv1(&b[i], (uint64_t)i, sb + 30000, 30000) ||
		    post1(&a[i], IBV_WR_RDMA_WRITE, (uint64_t)i, sa, n, (uintptr_t)sb, mb->rkey,
			  IBV_SEND_SIGNALED, 0) ||
		    post1(&a[i], IBV_WR_SEND, (uint64_t)i, sa, 29999, 0, 0, IBV_SEND_SIGNALED, 0) ||
		    post1(&a[i], IBV_WR_RDMA_READ, (uint64_t)i, sa + 60000, 30000,
			  (uintptr_t)sb + 60000, mb->rkey, IBV_SEND_SIGNALED, 0))
			goto out;
	}
	got = t_poll(cqa, wc, NPAIRS * 3, 20000);
	CHECK_EQ_INT(got, NPAIRS * 3);
	for (int i = 0; i < got; i++)
		if (!CHECK_MSG(wc[i].status == IBV_WC_SUCCESS, "pair %llu: %s",
			       (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status)))
			break;
	got = t_poll(cqb, wc, NPAIRS, 10000);
	CHECK_EQ_INT(got, NPAIRS);
	for (int i = 0; i < NPAIRS; i++) {
		uint8_t *sa = ba + (size_t)i * PAIR_SLOT, *sb = bb + (size_t)i * PAIR_SLOT;
		uint32_t n = 20000 + (uint32_t)i * 140;

		if (!CHECK_MSG(pattern_diff(sb, n, (unsigned int)i) < 0 &&
				       pattern_diff(sb + 30000, 29999, (unsigned int)i) < 0 &&
				       pattern_diff(sa + 60000, 30000, (unsigned int)i + 500) < 0,
			       "pair %d: data differs", i))
			break;
	}
out:
	t_timeout = 14;
	for (int i = 0; i < NPAIRS; i++) {
		ep_fini(&a[i]);
		ep_fini(&b[i]);
	}
	if (ma)
		CHECK_RET(ibv_dereg_mr(ma), 0);
	if (mb)
		CHECK_RET(ibv_dereg_mr(mb), 0);
	if (cqa)
		CHECK_RET(ibv_destroy_cq(cqa), 0);
	if (cqb)
		CHECK_RET(ibv_destroy_cq(cqb), 0);
	free(ba);
	free(bb);
	free(wc);
}

int main(void)
{
	t_start("api_traffic_events");
	if (!tr_open())
		return t_finish();

	case_solicited();
	case_srq();
	case_cq_overflow();
	case_err_midstream();
	case_many_qps();

	return tr_finish();
}
