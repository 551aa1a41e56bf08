/* SPDX-License-Identifier: MIT */
/*
 * api_modify_cq.c - CQ moderation (ibv_modify_cq), over the same-host
 * link and over UDP (SOFTVERBS_SHM=0), with the receive CQ of an RC QP
 * (on a completion channel) moderated, SENDs from its peer:
 *   - between two processes and in one: with cq_count 4 an armed CQ
 *     raises no event for 3 receive completions (they can be polled) and
 *     raises it at the 4th; with cq_period 4095 us (and a count it never
 *     reaches) the event comes no sooner than about the period after the
 *     SEND, while the same run's control (no moderation) has it there
 *     with the completion; 0/0 turns moderation off again;
 *   - cq_mod_caps reports max_cq_count 65535 and max_cq_period 4095;
 *   - attr_mask 0 and a period over 4095: EINVAL; a reserved attr_mask
 *     bit: EOPNOTSUPP; the limits themselves are accepted;
 *   - turning moderation off releases an event it was holding.
 */
#include "twoproc.h"

#include <poll.h>
#include <time.h>

/* test: timeout=240 */

#define LEN 4096u
#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define PERIOD 4095 /* us: the largest */
#define NRECV 32

/* The moderated side: an endpoint whose QP's receive CQ `cq` is on channel `ch`. */
struct mod {
	struct t_ep e;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	unsigned int unacked; /* events received, not yet acknowledged */
};

/* How the moderated side makes its peer send `n` SENDs, and waits until they completed there. */
typedef void (*send_fn)(void *arg, int n);

/* Contract: set up *m (NRECV receives posted); 0 or -1. */
static int mod_open(struct mod *m)
{
	struct ibv_qp_init_attr ia = {0};

	memset(m, 0, sizeof(*m));
	if (t_ep_init(&m->e, NULL, IBV_QPT_RC, LEN, ACC, NRECV))
		return -1;
	m->ch = ibv_create_comp_channel(m->e.ctx);
	m->cq = m->ch ? ibv_create_cq(m->e.ctx, 2 * NRECV, NULL, m->ch, 0) : NULL;
	if (!CHECK(m->cq))
		return -1;
	CHECK_RET(ibv_destroy_qp(m->e.qp), 0);
	ia.send_cq = m->e.cq;
	ia.recv_cq = m->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = NRECV;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	m->e.qp = ibv_create_qp(m->e.pd, &ia);
	if (!m->e.qp) {
		CHECK_MSG(0, "ibv_create_qp: %s", strerror(errno));
		return -1;
	}
	if (t_qp_init(m->e.qp, ACC))
		return -1;
	for (int i = 0; i < NRECV; i++)
		if (!CHECK_RET(t_post_recv(&m->e, (uint64_t)i, 64 * (size_t)i, 64), 0))
			return -1;
	return 0;
}

static void mod_close(struct mod *m)
{
	struct ibv_context *ctx = m->e.ctx; /* t_ep_destroy() clears it */

	if (m->cq && m->unacked)
		ibv_ack_cq_events(m->cq, m->unacked);
	t_ep_destroy(&m->e, false);
	if (m->cq)
		CHECK_RET(ibv_destroy_cq(m->cq), 0);
	if (m->ch)
		CHECK_RET(ibv_destroy_comp_channel(m->ch), 0);
	if (ctx)
		ibv_close_device(ctx);
}

/* Contract: ibv_modify_cq with IBV_CQ_ATTR_MODERATE; its result. */
static int moderate(struct ibv_cq *cq, uint16_t count, uint16_t period)
{
	struct ibv_modify_cq_attr a = {.attr_mask = IBV_CQ_ATTR_MODERATE,
				       .moderate = {.cq_count = count, .cq_period = period}};

	return ibv_modify_cq(cq, &a);
}

/* Contract: true if a completion event of m->cq arrives within `ms`. */
static bool event_within(struct mod *m, int ms)
{
	struct pollfd pfd = {.fd = m->ch->fd, .events = POLLIN};
	struct ibv_cq *cq;
	void *ctx;

	if (poll(&pfd, 1, ms) != 1)
		return false;
	if (!CHECK_RET(ibv_get_cq_event(m->ch, &cq, &ctx), 0))
		return false;
	m->unacked++;
	return CHECK(cq == m->cq);
}

/* Contract: poll m->cq until `n` receive completions were taken (5 s at most). */
static void take(struct mod *m, int n)
{
	struct ibv_wc wc[NRECV];
	int got = 0;

	while (got < n) {
		int r = t_poll(m->cq, wc, n - got, 5000);

		if (!CHECK_MSG(r > 0, "receive completions: %d of %d", got, n))
			return;
		for (int i = 0; i < r; i++)
			CHECK(wc[i].status == IBV_WC_SUCCESS && wc[i].opcode == IBV_WC_RECV);
		got += r;
	}
}

/* Contract: CLOCK_MONOTONIC in microseconds. */
static long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

/*
 * Contract: arm, have one SEND sent, spin until its receive completion is
 * seen; *at_once says whether its event was there by then. Returns the
 * microseconds from before the send to the event (-1: none in 5 s),
 * which the period bounds from below however late anything is seen.
 */
static long event_delay_us(struct mod *m, send_fn send, void *arg, bool *at_once)
{
	struct ibv_wc wc;
	long t0;

	CHECK_RET(ibv_req_notify_cq(m->cq, 0), 0);
	t0 = now_us();
	send(arg, 1);
	while (ibv_poll_cq(m->cq, 1, &wc) == 0)
		;
	*at_once = event_within(m, 0);
	return *at_once || event_within(m, 5000) ? now_us() - t0 : -1;
}

/*
 * The scenario, on the moderated side: count, period against a control,
 * off again. `send` makes the peer send; NRECV receives are enough.
 */
static void scenario(struct mod *m, send_fn send, void *arg)
{
	bool ctl_now, mod_now;
	long ctl, mod;

	/* count 4: nothing for 3, the event at the 4th */
	CHECK_RET(moderate(m->cq, 4, 0), 0);
	CHECK_RET(ibv_req_notify_cq(m->cq, 0), 0);
	send(arg, 3);
	take(m, 3);
	CHECK_MSG(!event_within(m, 200), "count 4: an event after 3 completions");
	send(arg, 1);
	CHECK_MSG(event_within(m, 5000), "count 4: no event after the 4th completion");
	take(m, 1);
	/* period against a control in the same run */
	CHECK_RET(moderate(m->cq, 0, 0), 0);
	ctl = event_delay_us(m, send, arg, &ctl_now);
	CHECK_RET(moderate(m->cq, 1000, PERIOD), 0);
	mod = event_delay_us(m, send, arg, &mod_now);
	printf("# event %ld us after the send unmoderated (there with the completion: %d), "
	       "%ld us with period %d us (%d)\n",
	       ctl, ctl_now, mod, PERIOD, mod_now);
	CHECK_MSG(ctl >= 0 && mod >= 0, "an event never came");
	CHECK_MSG(ctl_now, "unmoderated: the event was not there with the completion");
	CHECK_MSG(mod >= PERIOD, "period %d us: the event came %ld us after the send", PERIOD, mod);
	/* off again: the next completion raises the event at once */
	CHECK_RET(moderate(m->cq, 0, 0), 0);
	CHECK_RET(ibv_req_notify_cq(m->cq, 0), 0);
	send(arg, 1);
	CHECK_MSG(event_within(m, 5000), "moderation off: no event");
	take(m, 1);
}

/* ---- two processes: the moderated side is the target ---- */

/* Contract: ask the initiator over `*(int *)arg` for `n` SENDs and wait for them. */
static void send_remote(void *arg, int n)
{
	int sock = *(int *)arg;
	char c = (char)n, done;

	CHECK(t_xfer(sock, &c, 1, true) == 0 && t_xfer(sock, &done, 1, false) == 0);
}

static void target(int sock, void *arg)
{
	struct mod m;
	struct t_addr peer;
	char end = 0;

	(void)arg;
	if (!mod_open(&m) && !tp_connect(sock, &m.e, 0x200, &peer))
		scenario(&m, send_remote, &sock);
	t_xfer(sock, &end, 1, true); /* 0: the initiator is done */
	mod_close(&m);
}

/* Contract: post `n` signaled SENDs of 8 bytes on `e` and wait for their completions. */
static void send_n(struct t_ep *e, int n)
{
	struct ibv_wc wc;

	for (int i = 0; i < n; i++) {
		CHECK_RET(t_post(e, IBV_WR_SEND, 50, 0, 8, 0, 0, IBV_SEND_SIGNALED), 0);
		CHECK_EQ_INT(t_poll(e->cq, &wc, 1, 5000), 1);
		CHECK(wc.status == IBV_WC_SUCCESS);
	}
}

static void initiator(int sock, void *arg)
{
	struct t_ep e;
	struct t_addr peer;
	char c;

	(void)arg;
	if (t_ep_init(&e, NULL, IBV_QPT_RC, LEN, ACC, 16) || tp_connect(sock, &e, 0x100, &peer))
		goto out;
	while (t_xfer(sock, &c, 1, false) == 0 && c) {
		send_n(&e, c);
		CHECK(t_xfer(sock, &c, 1, true) == 0);
	}
out:
	t_ep_destroy(&e, true);
}

/* ---- one process ---- */

static void send_local(void *arg, int n)
{
	send_n(arg, n);
}

static void case_caps_and_errors(void)
{
	struct ibv_context *ctx = t_open_dev();
	struct ibv_cq *cq = ctx ? ibv_create_cq(ctx, 4, NULL, NULL, 0) : NULL;
	struct ibv_modify_cq_attr a = {0};
	struct ibv_device_attr_ex x;

	t_case("cq_mod_caps 65535 / 4095; mask 0, period 4096: EINVAL; reserved mask: EOPNOTSUPP");
	if (!CHECK(cq))
		goto out;
	if (CHECK_RET(ibv_query_device_ex(ctx, NULL, &x), 0)) {
		CHECK_EQ_INT(x.cq_mod_caps.max_cq_count, 65535);
		CHECK_EQ_INT(x.cq_mod_caps.max_cq_period, 4095);
	}
	CHECK_RET(ibv_modify_cq(cq, &a), EINVAL);
	a.attr_mask = IBV_CQ_ATTR_RESERVED;
	CHECK_RET(ibv_modify_cq(cq, &a), EOPNOTSUPP);
	a.attr_mask = IBV_CQ_ATTR_MODERATE | IBV_CQ_ATTR_RESERVED;
	CHECK_RET(ibv_modify_cq(cq, &a), EOPNOTSUPP);
	CHECK_RET(moderate(cq, 1, 4096), EINVAL);
	CHECK_RET(moderate(cq, 65535, 4095), 0);
	CHECK_RET(moderate(cq, 0, 0), 0);
out:
	if (cq)
		CHECK_RET(ibv_destroy_cq(cq), 0);
	if (ctx)
		ibv_close_device(ctx);
}

static void case_local(void)
{
	struct mod m;
	struct t_ep a;
	struct t_addr aa, ma;

	t_case("one process: count, period against a control, off; turning off releases an "
	       "event");
	if (mod_open(&m) || t_ep_init(&a, NULL, IBV_QPT_RC, LEN, ACC, 16))
		goto out;
	aa = t_addr_of(&a, 0x100);
	ma = t_addr_of(&m.e, 0x200);
	if (t_connect_to(&a, &ma, 0x100, IBV_MTU_1024) ||
	    t_connect_to(&m.e, &aa, 0x200, IBV_MTU_1024))
		goto out;
	scenario(&m, send_local, &a);
	/* a held event goes when moderation is turned off */
	CHECK_RET(moderate(m.cq, 10, 0), 0);
	CHECK_RET(ibv_req_notify_cq(m.cq, 0), 0);
	send_n(&a, 2);
	CHECK_MSG(!event_within(&m, 100), "count 10: an event after 2 completions");
	CHECK_RET(moderate(m.cq, 0, 0), 0);
	CHECK_MSG(event_within(&m, 1000), "turning moderation off did not release the event");
	take(&m, 2);
out:
	t_ep_destroy(&a, true);
	mod_close(&m);
}

static void in_process(void)
{
	case_caps_and_errors();
	case_local();
}

int main(void)
{
	t_start("api_modify_cq");
	tp_both_modes("count, period against a control, off", target, initiator, in_process);
	return t_finish();
}
