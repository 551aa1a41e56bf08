/* SPDX-License-Identifier: MIT */
/*
 * api_stats: the diagnostics view. With SOFTVERBS_STATS=1 the device
 * prints its counters when its last context closes and each QP prints
 * its own when it is destroyed (stderr, captured here). Two RC QPs of
 * one device talk to each other:
 *
 *   1. lossy: SOFTVERBS_FAULT drops 3% of the packets sent; 48 WRITEs of
 *      16 KiB and 16 SENDs, one at a time, all complete successfully.
 *      The per-QP packets add up to the device's (sent: the device's
 *      plus what fault injection dropped; received: the device's minus
 *      its QP-less drops), losses show as timeouts or sequence NAKs on
 *      the requester, no QP saw an error, and the completions counted are
 *      the ones the test polled.
 *   2. errors, no faults: a WRITE with a wrong rkey then a good one. The
 *      requester counts one error NAK received, one error completion and
 *      one flushed; the responder one error NAK sent and its two posted
 *      receives flushed; the device totals match.
 */
#include "harness.h"
#include "stats.h"
#include "traffic.h"

#include <stdlib.h>

/* test: timeout=180 */

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define WLEN (16u * 1024)
#define NWRITE 48
#define NSEND 16
#define BUFLEN (256u * 1024)

struct qp_cnt {
	unsigned int qpn;
	unsigned long long tx, rx, retrans, timeouts, dups, naks[6], drops[5], ok, err, flush;
	int lines;
};

/* The report of QP `qpn`; lines = how many of its two lines were found. */
static void parse_qp(const char *text, unsigned int qpn, struct qp_cnt *q)
{
	memset(q, 0, sizeof(*q));
	q->qpn = qpn;
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		unsigned int n;
		int off = 0;

		if (sscanf(p, "softverbs: %*s QP 0x%x RC:%n", &n, &off) != 1 || !off || n != qpn)
			continue;
		p += off;
		if (sscanf(p,
			   " tx %llu pkts %*u bytes, rx %llu pkts %*u bytes, retransmits %llu "
			   "timeouts %llu duplicates %llu",
			   &q->tx, &q->rx, &q->retrans, &q->timeouts, &q->dups) == 5)
			q->lines++;
		else if (
			sscanf(p,
			       " naks rx seq %llu rnr %llu err %llu, tx seq %llu rnr %llu err %llu; "
			       "drops malformed %llu state %llu qkey %llu no_recv %llu out_of_window "
			       "%llu; completions ok %llu errors %llu flushed %llu",
			       &q->naks[0], &q->naks[1], &q->naks[2], &q->naks[3], &q->naks[4],
			       &q->naks[5], &q->drops[0], &q->drops[1], &q->drops[2], &q->drops[3],
			       &q->drops[4], &q->ok, &q->err, &q->flush) == 14)
			q->lines++;
	}
}

/* Two connected RC endpoints on one fresh device (configured by the env now). */
static int pair_up(struct t_ep *a, struct t_ep *b)
{
	if (t_ep_init(a, NULL, IBV_QPT_RC, BUFLEN, ACC, 64) ||
	    t_ep_init(b, a->ctx, IBV_QPT_RC, BUFLEN, ACC, 64))
		return -1;
	return t_connect(a, b, IBV_MTU_4096);
}

static void pair_down(struct t_ep *a, struct t_ep *b)
{
	struct ibv_context *ctx = a->ctx;

	t_ep_destroy(b, false);
	t_ep_destroy(a, false);
	if (ctx)
		ibv_close_device(ctx);
}

static void lossy(void)
{
	static char text[16384];
	struct t_ep a, b;
	struct t_capture cap;
	struct t_stats d = {0};
	struct qp_cnt qa, qb;
	struct ibv_wc wc;
	unsigned int na = 0, nb = 0, ok_a = 0, ok_b = 0;

	t_case("lossy traffic: per-QP counters add up to the device's");
	setenv("SOFTVERBS_STATS", "1", 1);
	setenv("SOFTVERBS_FAULT", "drop=0.03,side=tx,seed=7", 1);
	t_timeout = 12; /* 16.8 ms: a lost packet costs little */
	if (!CHECK(t_capture_begin(&cap) == 0))
		return;
	if (pair_up(&a, &b) == 0) {
		na = a.qp->qp_num;
		nb = b.qp->qp_num;
		for (uint32_t i = 0; i < NWRITE; i++) {
			CHECK(t_post(&a, IBV_WR_RDMA_WRITE, i, 0, WLEN,
				     (uintptr_t)b.buf + (i % 8) * WLEN, b.mr->rkey,
				     IBV_SEND_SIGNALED) == 0);
			if (CHECK(t_poll(a.cq, &wc, 1, 20000) == 1) &&
			    CHECK_MSG(wc.status == IBV_WC_SUCCESS, "WRITE %u: %s", i,
				      ibv_wc_status_str(wc.status)))
				ok_a++;
		}
		for (uint32_t i = 0; i < NSEND; i++) {
			int got_a = 0, got_b = 0;

			CHECK(t_post_recv(&b, 100 + i, 0, 4096) == 0);
			CHECK(t_post(&a, IBV_WR_SEND, 200 + i, 0, 2048, 0, 0, IBV_SEND_SIGNALED) ==
			      0);
			for (uint64_t end = t_ms() + 20000; (!got_a || !got_b) && t_ms() < end;) {
				if (!got_a && ibv_poll_cq(a.cq, 1, &wc) == 1) {
					got_a = 1;
					ok_a += wc.status == IBV_WC_SUCCESS;
				}
				if (!got_b && ibv_poll_cq(b.cq, 1, &wc) == 1) {
					got_b = 1;
					ok_b += wc.status == IBV_WC_SUCCESS;
				}
				usleep(50);
			}
			CHECK_MSG(got_a && got_b, "SEND %u: completions %d/%d", i, got_a, got_b);
		}
	}
	pair_down(&a, &b);
	t_capture_end(&cap, text, sizeof(text));
	unsetenv("SOFTVERBS_FAULT");
	unsetenv("SOFTVERBS_STATS");
	printf("%s", text);
	CHECK_EQ_INT(ok_a, NWRITE + NSEND);
	CHECK_EQ_INT(ok_b, NSEND);
	t_stats_parse(text, &d);
	parse_qp(text, na, &qa);
	parse_qp(text, nb, &qb);
	if (!CHECK_MSG(d.lines == T_STATS_ALL && qa.lines == 2 && qb.lines == 2,
		       "reports incomplete: device lines %#x, QP lines %d and %d",
		       (unsigned)d.lines, qa.lines, qb.lines))
		return;
	CHECK_MSG(d.fault_drops > 0, "fault injection dropped nothing");
	CHECK_EQ_INT(qa.tx + qb.tx, d.tx + d.fault_drops);
	CHECK_EQ_INT(qa.rx + qb.rx, d.rx - d.drops[1] - d.drops[2] - d.drops[0]);
	CHECK(qa.tx >= NWRITE * (WLEN / 4096) + NSEND);
	CHECK(qb.rx >= NWRITE * (WLEN / 4096) + NSEND - d.fault_drops);
	CHECK_EQ_INT(qa.retrans + qb.retrans, d.retransmits);
	CHECK_EQ_INT(qa.timeouts + qb.timeouts, d.timeouts);
	CHECK_MSG(qa.timeouts + qa.naks[0] > 0, "no loss noticed: timeouts %llu seq NAKs %llu",
		  qa.timeouts, qa.naks[0]);
	CHECK(qa.naks[0] <= qb.naks[3]); /* a NAK sent may be lost, never invented */
	CHECK_EQ_INT(qa.naks[0] + qb.naks[0], d.naks_rx[0]);
	CHECK_EQ_INT(qa.naks[3] + qb.naks[3], d.naks_tx[0]);
	CHECK_EQ_INT(qa.ok, NWRITE + NSEND);
	CHECK_EQ_INT(qb.ok, NSEND);
	CHECK_EQ_INT(qa.err + qb.err + qa.flush + qb.flush, 0);
	CHECK_EQ_INT(d.wc_err + d.wc_flush, 0);
	CHECK_EQ_INT(qa.naks[2] + qa.naks[5] + qb.naks[2] + qb.naks[5], 0);
}

static void errors(void)
{
	static char text[16384];
	struct t_ep a, b;
	struct t_capture cap;
	struct t_stats d = {0};
	struct qp_cnt qa, qb;
	struct ibv_wc wc[4];
	unsigned int na = 0, nb = 0;
	int got_a = 0, got_b = 0;

	t_case("a remote access error: error NAK, error and flushed completions");
	setenv("SOFTVERBS_STATS", "1", 1);
	if (!CHECK(t_capture_begin(&cap) == 0))
		return;
	if (pair_up(&a, &b) == 0) {
		na = a.qp->qp_num;
		nb = b.qp->qp_num;
		CHECK(t_post_recv(&b, 1, 0, 4096) == 0);
		CHECK(t_post_recv(&b, 2, 4096, 4096) == 0);
		CHECK(t_post(&a, IBV_WR_RDMA_WRITE, 10, 0, 64, (uintptr_t)b.buf,
			     b.mr->rkey ^ 0x5a5a, IBV_SEND_SIGNALED) == 0);
		CHECK(t_post(&a, IBV_WR_RDMA_WRITE, 11, 0, 64, (uintptr_t)b.buf, b.mr->rkey,
			     IBV_SEND_SIGNALED) == 0);
		got_a = t_poll(a.cq, wc, 2, 20000);
		if (CHECK_EQ_INT(got_a, 2)) {
			CHECK_MSG(wc[0].status == IBV_WC_REM_ACCESS_ERR, "first: %s",
				  ibv_wc_status_str(wc[0].status));
			CHECK_MSG(wc[1].status == IBV_WC_WR_FLUSH_ERR, "second: %s",
				  ibv_wc_status_str(wc[1].status));
		}
		got_b = t_poll(b.cq, wc, 2, 20000);
		CHECK_EQ_INT(got_b, 2);
	}
	pair_down(&a, &b);
	t_capture_end(&cap, text, sizeof(text));
	unsetenv("SOFTVERBS_STATS");
	printf("%s", text);
	t_stats_parse(text, &d);
	parse_qp(text, na, &qa);
	parse_qp(text, nb, &qb);
	if (!CHECK_MSG(d.lines == T_STATS_ALL && qa.lines == 2 && qb.lines == 2,
		       "reports incomplete: device lines %#x, QP lines %d and %d",
		       (unsigned)d.lines, qa.lines, qb.lines))
		return;
	CHECK_EQ_INT(qa.naks[2], 1); /* err NAK received */
	CHECK_EQ_INT(qb.naks[5], 1); /* err NAK sent */
	CHECK_EQ_INT(d.naks_rx[2], 1);
	CHECK_EQ_INT(d.naks_tx[2], 1);
	CHECK_EQ_INT(qa.err, 1);
	CHECK_EQ_INT(qa.flush, 1);
	CHECK_EQ_INT(qb.err, 0);
	CHECK_EQ_INT(qb.flush, 2);
	CHECK_EQ_INT(d.wc_err, 1);
	CHECK_EQ_INT(d.wc_flush, 3);
	CHECK_EQ_INT(qa.ok + qb.ok, 0);
	CHECK_EQ_INT(d.fault_drops + d.retransmits, 0);
}

int main(void)
{
	t_start("api_stats");
	lossy();
	errors();
	return t_finish();
}
