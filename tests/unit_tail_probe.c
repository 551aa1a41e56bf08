/* SPDX-License-Identifier: MIT */
/*
 * unit_tail_probe: the RC requester's tail-loss probe (probe.c) on the
 * wire, white-box, against the hostile peer (tests/hostile.h) playing
 * the responder by hand.
 *
 * A loss at the tail of what the requester sent (the last packets, or
 * the ACK that answered them) leaves nothing behind it for the
 * responder to see a gap by: no sequence NAK comes, and only the
 * retransmit timer (67 ms at timeout 14, charged to retry_cnt) would
 * find it. The probe finds it after PTO = max(2 srtt + 4 rttvar, 1 ms):
 * it resends the oldest unacknowledged packet with AckReq, uncharged.
 * If the answer shows the responder took the probe as new (it filled
 * the gap), the requester goes back and resends the rest; if it was a
 * duplicate, it does not (another probe may follow a PTO later).
 *
 * The victim QP is the requester: it posts RDMA WRITEs to the peer,
 * MTU 1024, timeout 14, retry_cnt 7. The cases:
 *   1. warm-up: one-packet WRITEs answered at once give RTT samples,
 *      and a PTO below half the retransmit timeout;
 *   2. a lost ACK: the peer has all 4 packets of a WRITE and answers
 *      nothing; the probe resends the first one (with AckReq) well
 *      before the timer, the peer ACKs the whole WRITE (what a responder
 *      answers a duplicate with) and nothing is resent after that;
 *   3. a lost tail: the peer has 2 of 4 packets; the first probe (a
 *      duplicate, answered with an ACK of the 2) draws no go-back, the
 *      second probe resends the third packet, the peer takes it as new,
 *      and the requester goes back and sends the fourth; PSNs wrap
 *      2^24 across it;
 *   4. a lost READ request: the peer answers nothing; the probe asks
 *      again, the whole READ, well before the timer, and the peer's
 *      responses complete it (data checked);
 *   5. a lost last READ response: the peer sends 3 of 4 responses; the
 *      probe asks again from the fourth (its VA and length), and the
 *      peer's LAST completes it (a duplicate READ continues the
 *      original's numbering, as the responder and rxe answer one);
 *   6. no RTT sample yet (a fresh QP): no probe, only the timer resends;
 *   7. a sequence NAK from a responder that keeps what follows a gap
 *      (softverbs'): the missing packet alone is sent again;
 *   8. a responder that keeps nothing (a fresh QP): the NAKed packet
 *      alone, twice, then go-back-N, and go-back-N only from then on;
 *   9. the same shown by an ACK of just the packet resent alone (rxe,
 *      when no new packet follows to draw its NAK): go-back-N at once;
 *  10. a responder that keeps: the packet it NAKed is lost again, a
 *      probe resends it, and the answer is a sequence NAK of the next
 *      one (it kept the last): that one alone comes again, no go-back
 *      (before stop 40 the probe's answer made the requester go back
 *      over everything in flight, a window on a lossy link).
 * No case may count a retransmit timeout but the last. Every probe the
 * device counts must be a packet the peer saw: one that came late (sent
 * before the peer's ACK of it arrived, on a slow machine) is a stale
 * probe, tolerated and counted, never mistaken for a go-back.
 *
 * Timed (a probe within 30 ms, the timer at 67 ms), so no memcheck
 * variant: under valgrind the warm-up measures an srtt of ~30 ms, the
 * PTO is not below half the retransmit timeout, and rightly no probe is
 * sent at all.
 */
#include "harness.h"

#include "qp_util.h"
#include "hostile.h"

/* test: no-valgrind */
/* test: timeout=60 */

enum {
	NWARM = 16, /* warm-up WRITEs: srtt forgets an outlier first sample */
	NPKT = 4, /* packets of a WRITE in cases 2-4 */
	/* case 3's WRITE at 0xfffffd: its probe's PSN + 1 wraps to 0 */
	SQ_PSN = (0xfffffd - NWARM - NPKT) & SW_PSN_MASK,
	SQ_PSN4 = 0x200, /* case 6's fresh QP */
	SQ_PSN8 = 0x400, /* case 8's */
	SQ_PSN9 = 0x600, /* case 9's */
	RQ_PSN = 0x123,
	TIMEOUT = 14, /* 4.096 us << 14 = 67 ms */
	RTO_MS = 67,
	PROBE_MS = 30, /* a probe comes within this of the last activity */
	/*
	 * ... a second one, a PTO after a duplicate's ACK (the ACK brings the
	 * progress thread's wake-up forward from the backed-off time of the
	 * unanswered first probe, 2 PTO after it; before it did, the probe
	 * came 2.1-10.3 ms after the ACK at PTOs of 1-5 ms).
	 */
	PROBE2_MS = 30,
	BACK_MS = 30, /* the go-back after the ACK of a probe that filled the gap */
	QUIET_MS = 20, /* nothing more arrives for this long */
	SEL_MS = 5, /* go-back-N would have sent the next packet by then */
};

enum {
	READ_VA = 0x40000,
	READ_RKEY = 0x5678
};

static struct h_env H, *h = &H;
static uint8_t sbuf[NPKT * H_MTU];
static uint8_t rbuf[NPKT * H_MTU]; /* READ destination */
static struct ibv_mr *rmr;
static struct ibv_mr *smr;
static uint64_t t0; /* the current case's start */
static uint32_t msn; /* the peer's responder: messages completed */
static uint32_t acked; /* ... and the last PSN it acknowledged */
static unsigned int stale; /* stale probes seen in the current case */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

static void case_start(const char *name, uint32_t acked_psn)
{
	t_case(name);
	t0 = now_ns();
	acked = acked_psn;
	stale = 0;
}

/* A signalled WRITE of `len` bytes; ibv_post_send's result. */
static int post_write(struct ibv_qp *qp, uint64_t id, uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)sbuf, len, smr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.rdma.remote_addr = 0x10000;
	wr.wr.rdma.rkey = 0x1234;
	return ibv_post_send(qp, &wr, &bad);
}

/*
 * The next packet from the device within `wait` ms (0 or -ETIMEDOUT),
 * when it came in *t. A resend of a PSN the peer acknowledged already is
 * a stale probe: logged, counted in `stale`, and skipped.
 */
static int next_pkt(struct sw_pkt *p, int wait, uint64_t *t)
{
	uint64_t end = now_ns() + (uint64_t)wait * 1000000u;

	for (;;) {
		uint64_t now = now_ns();
		int r = h_recv(h, p, now < end ? (int)((end - now + 999999) / 1000000) : 0);

		*t = now_ns();
		if (r)
			return r;
		printf("# %8.3f ms: psn %#08x opcode %#04x%s\n", ms(*t - t0), p->psn, p->opcode,
		       p->ack_req ? " AckReq" : "");
		if (p->dqpn == H_PEER_QPN && sw_psn_diff(p->psn, acked) <= 0) {
			printf("#   (a stale probe: the peer acknowledged %#08x)\n", acked);
			stale++;
			continue;
		}
		return 0;
	}
}

/*
 * The peer answers `psn` with AETH `syn` (credits invalid, the MSN so
 * far): an ACK of it, or a sequence NAK of it (it has what is before).
 */
static void peer_answer(struct ibv_qp *qp, uint32_t psn, uint8_t syn)
{
	struct sw_pkt p = h_req(qp, SW_OP_ACK, psn);
	bool nak = syn == SW_AETH_NAK_PSN_SEQ;

	p.ack_req = false;
	p.syndrome = syn;
	p.msn = msn & SW_PSN_MASK;
	h_send(h, &p, NULL, 0);
	acked = nak ? sw_psn_add(psn, SW_PSN_MASK) : psn & SW_PSN_MASK;
	printf("# %8.3f ms: the peer %s %#08x (msn %u)\n", ms(now_ns() - t0),
	       nak ? "NAKs (sequence)" : "ACKs", psn & SW_PSN_MASK, msn);
}

static void peer_ack(struct ibv_qp *qp, uint32_t psn)
{
	peer_answer(qp, psn, H_ACK);
}

static void peer_nak(struct ibv_qp *qp, uint32_t psn)
{
	peer_answer(qp, psn, SW_AETH_NAK_PSN_SEQ);
}

static uint8_t write_opcode(uint32_t k, uint32_t n)
{
	if (n == 1)
		return SW_OP_WRITE_ONLY;
	return k == 0 ? SW_OP_WRITE_FIRST : k == n - 1 ? SW_OP_WRITE_LAST : SW_OP_WRITE_MIDDLE;
}

/* `p` is packet `k` of an `n`-packet WRITE at `first`, with AckReq if `ackreq`. */
static int is_write_at(const struct sw_pkt *p, uint32_t first, uint32_t k, uint32_t n, bool ackreq,
		       const char *what, int line)
{
	uint32_t psn = sw_psn_add(first, k);

	return t_check(p->dqpn == H_PEER_QPN && p->psn == psn && p->opcode == write_opcode(k, n) &&
			       (!ackreq || p->ack_req),
		       __FILE__, line,
		       "%s: want psn %#08x opcode %#04x%s, got psn %#08x opcode %#04x%s qpn %#x",
		       what, psn, write_opcode(k, n), ackreq ? " AckReq" : "", p->psn, p->opcode,
		       p->ack_req ? " AckReq" : "", p->dqpn);
}
#define IS_WRITE_AT(p, first, k, n, ackreq, what)                                                  \
	is_write_at((p), (first), (k), (n), (ackreq), (what), __LINE__)

/*
 * Packets `k0`..n-1 of an `n`-packet WRITE at `first`, as sent; when
 * the first and the last came in *t_first (may be NULL) and *t.
 */
static bool recv_write(uint32_t first, uint32_t k0, uint32_t n, uint64_t *t_first, uint64_t *t)
{
	struct sw_pkt p;

	for (uint32_t k = k0; k < n; k++) {
		int r = next_pkt(&p, H_WAIT_MS, t);

		if (k == k0 && t_first)
			*t_first = *t;
		if (!CHECK_MSG(r == 0, "packet %u of the WRITE at %#08x: %s", k, first,
			       t_errname(-r)) ||
		    !IS_WRITE_AT(&p, first, k, n, k == n - 1, "the WRITE"))
			return false;
	}
	return true;
}

/* The work request `id` (a WRITE, or `op`) completed successfully. */
static void expect_op_done(uint64_t id, enum ibv_wc_opcode op)
{
	struct ibv_wc wc;

	if (CHECK_EQ_INT(q_poll(h->e.scq, &wc, 1, 1), 1))
		CHECK_MSG(wc.wr_id == id && wc.status == IBV_WC_SUCCESS && wc.opcode == op,
			  "want wr_id %llu opcode %d SUCCESS, got wr_id %llu opcode %d %s",
			  (unsigned long long)id, op, (unsigned long long)wc.wr_id, wc.opcode,
			  ibv_wc_status_str(wc.status));
}
#define expect_done(id) expect_op_done((id), IBV_WC_RDMA_WRITE)

/* Nothing but stale probes for QUIET_MS. */
static void expect_quiet(const char *after)
{
	struct sw_pkt p;
	uint64_t t;
	int r = next_pkt(&p, QUIET_MS, &t);

	CHECK_MSG(r == -ETIMEDOUT, "%s: want no packet for %d ms, got psn %#08x opcode %#04x",
		  after, QUIET_MS, r ? 0 : p.psn, r ? 0 : p.opcode);
}

/*
 * After a failed expectation: ACK everything of the WRITE ending at
 * `last`, take its completion and whatever the device still sends, so
 * that the next case starts clean.
 */
static void settle(struct ibv_qp *qp, uint32_t last)
{
	struct sw_pkt p;
	struct ibv_wc wc;
	uint64_t t;

	printf("# settling: the peer ACKs %#08x\n", last);
	msn++;
	peer_ack(qp, last);
	q_poll(h->e.scq, &wc, 1, 1);
	while (next_pkt(&p, 3 * RTO_MS, &t) == 0)
		;
}

/* The QP's RTT estimate and PTO (ns) under its lock. */
static uint64_t pto_of(struct ibv_qp *qp, bool print)
{
	struct sw_qp *q = sw_qp(qp);
	uint64_t pto;

	pthread_mutex_lock(&q->lock);
	pto = sw_probe_pto_ns(q);
	if (print)
		printf("# srtt %.3f ms, rttvar %.3f ms: PTO %.3f ms (0: no probe)\n",
		       ms(q->req->srtt_ns), ms(q->req->rttvar_ns), ms(pto));
	pthread_mutex_unlock(&q->lock);
	return pto;
}

/* A requester QP towards the peer, RTS from `sq_psn`, timeout 14, retry_cnt 7. */
static struct ibv_qp *requester(uint32_t sq_psn)
{
	struct ibv_qp *qp = q_create(&h->e, IBV_QPT_RC);
	struct q_env pe = h->e;

	pe.gid = h->gid;
	if (!qp || h_connect(&pe, qp, H_PEER_QPN, RQ_PSN, sq_psn, TIMEOUT)) {
		printf("Bail out! requester QP: %s\n", t_errname(errno));
		exit(1);
	}
	return qp;
}

/*
 * The device counted `want` probes since `p0`, plus the stale ones the
 * peer saw; `why` says what a difference would mean.
 */
static void expect_probes(struct ibv_qp *qp, unsigned long long p0, unsigned int want,
			  const char *why)
{
	h_sync(qp);
	CHECK_MSG(H_CNT(h, probes) - p0 == want + stale,
		  "probes: the device counted %llu, the peer saw %u (%u of them stale): %s",
		  H_CNT(h, probes) - p0, want + stale, stale, why);
}

static void warm_up(struct ibv_qp *qp)
{
	unsigned long long p0 = H_CNT(h, probes), to0 = H_CNT(h, timeouts);
	struct sw_pkt p;
	uint64_t t, pto;

	case_start("warm-up: one-packet WRITEs ACKed at once give an RTT and a PTO",
		   sw_psn_add(SQ_PSN, SW_PSN_MASK));
	CHECK_MSG(pto_of(qp, true) == 0, "a PTO before the first RTT sample");
	for (uint32_t i = 0; i < NWARM; i++) {
		uint32_t psn = sw_psn_add(SQ_PSN, i);

		CHECK_RET(post_write(qp, 100 + i, 64), 0);
		if (!CHECK(next_pkt(&p, H_WAIT_MS, &t) == 0) ||
		    !IS_WRITE_AT(&p, psn, 0, 1, true, "warm-up")) {
			settle(qp, psn);
			continue;
		}
		msn++;
		peer_ack(qp, psn);
		expect_done(100 + i);
	}
	pto = pto_of(qp, true);
	CHECK_MSG(pto > 0 && pto < (uint64_t)RTO_MS * 1000000 / 2,
		  "PTO %.3f ms: want (0, %d ms), half the retransmit timeout", ms(pto), RTO_MS / 2);
	expect_quiet("after the warm-up");
	expect_probes(qp, p0, 0, "a probe while every ACK came at once");
	CHECK_EQ_INT(H_CNT(h, timeouts) - to0, 0);
}

static void lost_ack(struct ibv_qp *qp)
{
	unsigned long long p0 = H_CNT(h, probes), to0 = H_CNT(h, timeouts);
	unsigned long long rt0 = H_CNT(h, retransmits);
	uint32_t first = sw_psn_add(SQ_PSN, NWARM), last = sw_psn_add(first, NPKT - 1);
	struct sw_pkt p;
	uint64_t t_last, t;
	int r;

	case_start("a lost ACK: the probe resends the first packet; its ACK draws no go-back",
		   sw_psn_add(first, SW_PSN_MASK));
	(void)pto_of(qp, true);
	CHECK_RET(post_write(qp, 2, NPKT * H_MTU), 0);
	if (!recv_write(first, 0, NPKT, NULL, &t_last))
		goto fail;
	/* the peer has it all; its ACK is lost */
	r = next_pkt(&p, PROBE_MS, &t);
	if (!CHECK_MSG(r == 0, "no probe within %d ms of the last packet (the timer: %d ms)",
		       PROBE_MS, RTO_MS) ||
	    !IS_WRITE_AT(&p, first, 0, NPKT, true, "the probe"))
		goto fail;
	printf("# the probe came %.3f ms after the last packet\n", ms(t - t_last));
	CHECK_EQ_INT(H_CNT(h, timeouts) - to0, 0);
	/* a duplicate to the responder: it ACKs everything it has */
	msn++;
	peer_ack(qp, last);
	expect_done(2);
	expect_quiet("after the ACK of the whole WRITE");
	expect_probes(qp, p0, 1, "the resend the peer took for the probe was none");
	CHECK_EQ_INT(H_CNT(h, timeouts) - to0, 0);
	CHECK_EQ_INT(H_CNT(h, retransmits) - rt0, 0);
	return;
fail:
	settle(qp, last);
}

static void lost_tail(struct ibv_qp *qp)
{
	unsigned long long p0 = H_CNT(h, probes), to0 = H_CNT(h, timeouts);
	unsigned long long rt0 = H_CNT(h, retransmits);
	uint32_t first = sw_psn_add(SQ_PSN, NWARM + NPKT), last = sw_psn_add(first, NPKT - 1);
	struct sw_pkt p;
	uint64_t t_last, t, t_ack;
	int r;

	case_start("a lost tail: a duplicate probe, then one that fills the gap, then the go-back",
		   sw_psn_add(first, SW_PSN_MASK));
	(void)pto_of(qp, true);
	CHECK_RET(post_write(qp, 3, NPKT * H_MTU), 0);
	/* the peer gets packets 0 and 1; 2 and 3 are lost (it sees them, and forgets them) */
	if (!recv_write(first, 0, NPKT, NULL, &t_last))
		goto fail;
	/* the responder ACKs only on AckReq (packet 3's, lost): nothing yet */
	r = next_pkt(&p, PROBE_MS, &t);
	if (!CHECK_MSG(r == 0, "no first probe within %d ms of the last packet (the timer: %d ms)",
		       PROBE_MS, RTO_MS) ||
	    !IS_WRITE_AT(&p, first, 0, NPKT, true, "the first probe"))
		goto fail;
	printf("# the first probe came %.3f ms after the last packet\n", ms(t - t_last));
	/* a duplicate: the responder ACKs what it has, packet 1 */
	peer_ack(qp, sw_psn_add(first, 1));
	t_ack = now_ns();
	r = next_pkt(&p, PROBE2_MS, &t);
	if (!CHECK_MSG(r == 0, "no second probe within %d ms of the ACK (the timer: %d ms)",
		       PROBE2_MS, RTO_MS) ||
	    !IS_WRITE_AT(&p, first, 2, NPKT, true, "the second probe (no go-back before it)"))
		goto fail;
	printf("# the second probe came %.3f ms after the ACK of packet 1\n", ms(t - t_ack));
	CHECK_EQ_INT(H_CNT(h, timeouts) - to0, 0);
	/* new to the responder: it fills the gap; the requester must go back for packet 3 */
	peer_ack(qp, sw_psn_add(first, 2));
	t_ack = now_ns();
	r = next_pkt(&p, BACK_MS, &t);
	if (!CHECK_MSG(r == 0, "no go-back within %d ms of the ACK of the probe", BACK_MS) ||
	    !IS_WRITE_AT(&p, first, 3, NPKT, true, "the go-back"))
		goto fail;
	printf("# the go-back came %.3f ms after the ACK of packet 2\n", ms(t - t_ack));
	msn++;
	peer_ack(qp, last);
	expect_done(3);
	expect_quiet("after the ACK of the whole WRITE");
	expect_probes(qp, p0, 2, "the last packet came as a probe, not as a go-back");
	CHECK_EQ_INT(H_CNT(h, timeouts) - to0, 0);
	CHECK_EQ_INT(H_CNT(h, retransmits) - rt0, 0);
	return;
fail:
	settle(qp, last);
}

/* A signalled READ of the whole of rbuf from READ_VA; ibv_post_send's result. */
static int post_read(struct ibv_qp *qp, uint64_t id)
{
	struct ibv_sge sge = {(uintptr_t)rbuf, sizeof(rbuf), rmr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_READ,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	memset(rbuf, 0, sizeof(rbuf));
	wr.wr.rdma.remote_addr = READ_VA;
	wr.wr.rdma.rkey = READ_RKEY;
	return ibv_post_send(qp, &wr, &bad);
}

/* `p` is a READ request at `psn` for packets `k`.. of the READ: VA and length. */
static int is_read_at(const struct sw_pkt *p, uint32_t psn, uint32_t k, const char *what, int line)
{
	uint64_t va = READ_VA + (uint64_t)k * H_MTU;
	uint32_t len = (NPKT - k) * H_MTU;

	return t_check(p->dqpn == H_PEER_QPN && p->psn == psn && p->opcode == SW_OP_READ_REQ &&
			       p->va == va && p->rkey == READ_RKEY && p->dma_len == len,
		       __FILE__, line,
		       "%s: want READ psn %#08x va %#llx len %u, got psn %#08x opcode %#04x va "
		       "%#llx len %u",
		       what, psn, (unsigned long long)va, len, p->psn, p->opcode,
		       (unsigned long long)p->va, p->dma_len);
}
#define IS_READ_AT(p, psn, k, what) is_read_at((p), (psn), (k), (what), __LINE__)

/* The peer's READ response `k` of NPKT for the READ at `first`: sbuf's bytes. */
static void peer_read_resp(struct ibv_qp *qp, uint32_t first, uint32_t k)
{
	static const uint8_t op[NPKT] = {SW_OP_READ_RESP_FIRST, SW_OP_READ_RESP_MIDDLE,
					 SW_OP_READ_RESP_MIDDLE, SW_OP_READ_RESP_LAST};
	struct sw_pkt p = h_req(qp, op[k], sw_psn_add(first, k));

	p.ack_req = false;
	p.syndrome = H_ACK;
	p.msn = msn & SW_PSN_MASK;
	h_send(h, &p, sbuf + (size_t)k * H_MTU, H_MTU);
	acked = p.psn;
	printf("# %8.3f ms: the peer sends READ response %u at %#08x\n", ms(now_ns() - t0), k,
	       p.psn);
}

/* The READ `id` completed successfully with sbuf's bytes. */
static void expect_read_done(uint64_t id)
{
	expect_op_done(id, IBV_WC_RDMA_READ);
	CHECK_MSG(memcmp(rbuf, sbuf, sizeof(rbuf)) == 0, "the READ's data differ");
}

/*
 * A READ at `first` whose request (`lost` == NPKT) or last response
 * (`lost` == NPKT - 1) is lost: the probe asks again from packet `lost`
 * (or 0) within PROBE_MS, uncharged, and the answer completes it.
 */
static void lost_read(struct ibv_qp *qp, uint32_t first, uint32_t lost, uint64_t id)
{
	unsigned long long p0 = H_CNT(h, probes), to0 = H_CNT(h, timeouts);
	uint32_t from = lost == NPKT ? 0 : lost;
	struct sw_pkt p;
	uint64_t t_last, t;
	int r;

	case_start(lost == NPKT ? "a lost READ request: the probe asks again for the READ" :
				  "a lost last READ response: the probe asks again from it",
		   sw_psn_add(first, SW_PSN_MASK));
	(void)pto_of(qp, true);
	CHECK_RET(post_read(qp, id), 0);
	r = next_pkt(&p, H_WAIT_MS, &t_last);
	if (!CHECK_MSG(r == 0, "no READ request: %s", t_errname(-r)) ||
	    !IS_READ_AT(&p, first, 0, "the READ request"))
		goto fail;
	for (uint32_t k = 0; k < from; k++)
		peer_read_resp(qp, first, k);
	r = next_pkt(&p, PROBE_MS, &t);
	if (!CHECK_MSG(r == 0, "no probe within %d ms of the request (the timer: %d ms)", PROBE_MS,
		       RTO_MS) ||
	    !IS_READ_AT(&p, sw_psn_add(first, from), from, "the probe"))
		goto fail;
	printf("# the probe came %.3f ms after the request\n", ms(t - t_last));
	CHECK_EQ_INT(H_CNT(h, timeouts) - to0, 0);
	for (uint32_t k = from; k < NPKT; k++)
		peer_read_resp(qp, first, k);
	msn++;
	expect_read_done(id);
	expect_quiet("after the READ's last response");
	expect_probes(qp, p0, 1, "the READ asked again was no probe");
	CHECK_EQ_INT(H_CNT(h, timeouts) - to0, 0);
	return;
fail:
	for (uint32_t k = 0; k < NPKT; k++)
		peer_read_resp(qp, first, k);
	msn++;
	q_poll(h->e.scq, (struct ibv_wc[1]){0}, 1, 1);
	while (next_pkt(&p, 3 * RTO_MS, &t) == 0)
		;
}

static void no_sample(void)
{
	unsigned long long p0 = H_CNT(h, probes), to0 = H_CNT(h, timeouts);
	uint32_t first = SQ_PSN4, last = sw_psn_add(first, NPKT - 1);
	struct ibv_qp *qp = requester(SQ_PSN4);
	struct sw_pkt p;
	uint64_t t_first, t;
	int r;

	case_start("no RTT sample yet: no probe, the retransmit timer resends",
		   sw_psn_add(first, SW_PSN_MASK));
	CHECK_MSG(pto_of(qp, true) == 0, "a PTO before the first RTT sample");
	CHECK_RET(post_write(qp, 4, NPKT * H_MTU), 0);
	if (!recv_write(first, 0, NPKT, &t_first, &t))
		goto fail;
	/* nothing answers: the next packet is the timer's resend, some 67 ms on */
	r = next_pkt(&p, H_WAIT_MS, &t);
	if (!CHECK_MSG(r == 0, "no resend within %d ms", H_WAIT_MS) ||
	    !IS_WRITE_AT(&p, first, 0, NPKT, false, "the timer's resend"))
		goto fail;
	printf("# the resend came %.3f ms after the first packet\n", ms(t - t_first));
	CHECK_MSG(t - t_first >= (uint64_t)(RTO_MS - 10) * 1000000,
		  "the resend %.3f ms after the first packet: sooner than the timer (%d ms)",
		  ms(t - t_first), RTO_MS);
	if (!recv_write(first, 1, NPKT, NULL, &t))
		goto fail;
	msn++;
	peer_ack(qp, last);
	expect_done(4);
	expect_quiet("after the ACK of the whole WRITE");
	expect_probes(qp, p0, 0, "a probe before the first RTT sample");
	CHECK_EQ_INT(H_CNT(h, timeouts) - to0, 1);
	CHECK_RET(ibv_destroy_qp(qp), 0);
	return;
fail:
	settle(qp, last);
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

/*
 * Packet `k` of the `n`-packet WRITE at `first` comes again, with
 * AckReq, and then nothing but probes of it for SEL_MS: not the packets
 * after it (go-back-N would send them at once).
 */
static bool resent_alone(uint32_t first, uint32_t k, uint32_t n, const char *what)
{
	struct sw_pkt p;
	uint64_t t;
	int r = next_pkt(&p, H_WAIT_MS, &t);

	if (!CHECK_MSG(r == 0, "%s: nothing resent (%s)", what, t_errname(-r)) ||
	    !IS_WRITE_AT(&p, first, k, n, true, what))
		return false;
	while ((r = next_pkt(&p, SEL_MS, &t)) == 0)
		if (!CHECK_MSG(p.psn == sw_psn_add(first, k), "%s: then psn %#08x came too", what,
			       p.psn))
			return false;
	return true;
}

/*
 * The peer ACKs the WRITE ending at `last` (work request `id`), which
 * completes it; then nothing comes. The device counted `nsel` selective
 * resends since `s0`, and no retransmit timeout since `to0`.
 */
static void ack_whole(struct ibv_qp *qp, uint32_t last, uint64_t id, unsigned long long s0,
		      unsigned int nsel, unsigned long long to0)
{
	msn++;
	peer_ack(qp, last);
	expect_done(id);
	expect_quiet("after the ACK of the whole WRITE");
	CHECK_EQ_INT(H_CNT(h, selective) - s0, nsel);
	CHECK_EQ_INT(H_CNT(h, timeouts) - to0, 0);
}

/*
 * Case 7: a responder that keeps what follows a gap NAKs the missing
 * packet; the requester sends that one alone again (sw_req_selective),
 * and the ACK of the whole WRITE completes it.
 */
static void selective(struct ibv_qp *qp, uint32_t first)
{
	unsigned long long s0 = H_CNT(h, selective), to0 = H_CNT(h, timeouts);
	uint32_t last = sw_psn_add(first, NPKT - 1);

	case_start("a sequence NAK: only the missing packet is sent again",
		   sw_psn_add(first, SW_PSN_MASK));
	CHECK_RET(post_write(qp, 7, NPKT * H_MTU), 0);
	if (!recv_write(first, 0, NPKT, NULL, (uint64_t[1]){0}))
		goto fail;
	peer_nak(qp, sw_psn_add(first, 1));
	if (!resent_alone(first, 1, NPKT, "the packet NAKed"))
		goto fail;
	ack_whole(qp, last, 7, s0, 1, to0);
	return;
fail:
	settle(qp, last);
}

/*
 * Case 10: of a 4-packet WRITE the peer keeps packets 0 and 3 and NAKs
 * 1; the packet resent for it is lost too, and the probe resends it
 * again. That fills the gap up to packet 2, still missing: the peer's
 * answer is a sequence NAK of 2, which only 2 must follow.
 */
static void probe_then_nak(struct ibv_qp *qp, uint32_t first)
{
	unsigned long long s0 = H_CNT(h, selective), p0 = H_CNT(h, probes);
	unsigned long long to0 = H_CNT(h, timeouts);
	uint32_t last = sw_psn_add(first, NPKT - 1);
	struct sw_pkt p;
	uint64_t t;
	int r;

	case_start("a probe answered by a sequence NAK of the next packet: that one alone again",
		   sw_psn_add(first, SW_PSN_MASK));
	CHECK_RET(post_write(qp, 10, NPKT * H_MTU), 0);
	if (!recv_write(first, 0, NPKT, NULL, (uint64_t[1]){0}))
		goto fail;
	peer_nak(qp, sw_psn_add(first, 1));
	r = next_pkt(&p, H_WAIT_MS, &t);
	if (!CHECK_MSG(r == 0, "the NAKed packet was not resent (%s)", t_errname(-r)) ||
	    !IS_WRITE_AT(&p, first, 1, NPKT, true, "the packet NAKed"))
		goto fail;
	/* lost as well: nothing answers it */
	r = next_pkt(&p, PROBE_MS, &t);
	if (!CHECK_MSG(r == 0, "no probe within %d ms of the resend (the timer: %d ms)", PROBE_MS,
		       RTO_MS) ||
	    !IS_WRITE_AT(&p, first, 1, NPKT, true, "the probe"))
		goto fail;
	expect_probes(qp, p0, 1, "one probe, for the resend that was lost");
	peer_nak(qp, sw_psn_add(first, 2));
	/* (the peer is silent SEL_MS after it: probes of it may follow) */
	if (!resent_alone(first, 2, NPKT, "the NAK that answered the probe"))
		goto fail;
	ack_whole(qp, last, 10, s0, 2, to0);
	return;
fail:
	settle(qp, last);
}

/*
 * Cases 8 and 9: a responder that keeps nothing (IBTA's, rxe's), on a
 * fresh QP (no probe: no RTT sample). Case 8, as it shows in NAKs: NAK
 * of the first packet: it alone comes again; NAK of the next: a second
 * loss, it alone again; NAK of the one after: the peer keeps nothing,
 * go-back-N sends the rest. Case 9, as rxe shows it when nothing new
 * follows: NAK of the second packet, which alone comes again; the peer
 * ACKs just that one: go-back-N sends the rest at once. Either way the
 * next WRITE's NAK draws go-back-N at once.
 */
static void keeps_nothing(bool by_ack, uint32_t sq_psn)
{
	unsigned long long s0 = H_CNT(h, selective), to0 = H_CNT(h, timeouts);
	uint32_t f = sq_psn, g = sw_psn_add(sq_psn, NPKT);
	struct ibv_qp *qp = requester(sq_psn);

	case_start(
		by_ack ?
			"a responder that keeps nothing: the ACK of the packet resent alone "
			"draws go-back-N, then only" :
			"a responder that keeps nothing: go-back-N after two NAKs in a row, then only",
		sw_psn_add(f, SW_PSN_MASK));
	CHECK_RET(post_write(qp, 8, NPKT * H_MTU), 0);
	if (!recv_write(f, 0, NPKT, NULL, (uint64_t[1]){0}))
		goto fail;
	if (!by_ack) {
		peer_nak(qp, f);
		if (!resent_alone(f, 0, NPKT, "the first NAK"))
			goto fail;
	}
	peer_nak(qp, sw_psn_add(f, 1));
	if (!resent_alone(f, 1, NPKT, "the NAK of the second packet"))
		goto fail;
	if (by_ack) {
		msn++;
		peer_ack(qp, sw_psn_add(f, 1));
	} else {
		peer_nak(qp, sw_psn_add(f, 2));
	}
	if (!recv_write(f, 2, NPKT, NULL, (uint64_t[1]){0}))
		goto fail;
	msn++;
	peer_ack(qp, sw_psn_add(f, NPKT - 1));
	expect_done(8);
	CHECK_RET(post_write(qp, 9, NPKT * H_MTU), 0);
	if (!recv_write(g, 0, NPKT, NULL, (uint64_t[1]){0}))
		goto fail;
	peer_nak(qp, sw_psn_add(g, 1));
	if (!recv_write(g, 1, NPKT, NULL, (uint64_t[1]){0}))
		goto fail;
	msn++;
	peer_ack(qp, sw_psn_add(g, NPKT - 1));
	expect_done(9);
	expect_quiet("after the ACK of the second WRITE");
	CHECK_EQ_INT(H_CNT(h, selective) - s0, by_ack ? 1 : 2);
	CHECK_EQ_INT(H_CNT(h, timeouts) - to0, 0);
	CHECK_RET(ibv_destroy_qp(qp), 0);
	return;
fail:
	settle(qp, sw_psn_add(g, NPKT - 1));
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

int main(void)
{
	struct ibv_qp *qp;

	t_start("unit_tail_probe");
	h_open(h);
	smr = ibv_reg_mr(h->e.pd, sbuf, sizeof(sbuf), IBV_ACCESS_LOCAL_WRITE);
	rmr = ibv_reg_mr(h->e.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	if (!smr || !rmr) {
		printf("Bail out! reg_mr: %s\n", t_errname(errno));
		exit(1);
	}
	for (size_t i = 0; i < sizeof(sbuf); i++)
		sbuf[i] = (uint8_t)(i * 7 + 3);
	qp = requester(SQ_PSN);

	warm_up(qp);
	lost_ack(qp);
	lost_tail(qp);
	lost_read(qp, sw_psn_add(SQ_PSN, NWARM + 2 * NPKT), NPKT, 5);
	lost_read(qp, sw_psn_add(SQ_PSN, NWARM + 3 * NPKT), NPKT - 1, 6);
	selective(qp, sw_psn_add(SQ_PSN, NWARM + 4 * NPKT));
	probe_then_nak(qp, sw_psn_add(SQ_PSN, NWARM + 5 * NPKT));
	no_sample();
	keeps_nothing(false, SQ_PSN8);
	keeps_nothing(true, SQ_PSN9);

	CHECK_EQ_INT(q_state(qp), IBV_QPS_RTS);
	CHECK_RET(ibv_destroy_qp(qp), 0);
	CHECK_RET(ibv_dereg_mr(smr), 0);
	CHECK_RET(ibv_dereg_mr(rmr), 0);
	h_close(h);
	return t_finish();
}
