/* SPDX-License-Identifier: MIT */
/*
 * api_mt: verbs called from many application threads at once, on shared
 * objects, alongside the progress thread (the thread-safety guarantees
 * of docs/architecture.md, "Threads"). Run under ThreadSanitizer by the
 * tsan stage of make check (label "mt").
 *
 * Case "shared QPs and CQs": two RC connections A0-B0 and A1-B1 in one
 * process. The A QPs share one send CQ (an ibv_cq_ex), the B QPs one
 * receive CQ. POSTERS threads post on the A QPs, two threads per QP,
 * each a stream of SEND, WRITE, READ (of that WRITE) and fetch-and-add,
 * half of them with ibv_post_send and half with ibv_wr_* sessions.
 * Two threads poll the send CQ (one with ibv_poll_cq, one with
 * ibv_start_poll/next_poll/end_poll), two poll the receive CQ and post
 * the receives again. At the same time a churn thread creates, connects,
 * uses and destroys QPs, CQs and MRs and moves each QP to SQD with
 * SQ_DRAINED requested, and an async thread reads and acknowledges those
 * events. Checked: each work request completes exactly once and
 * successfully; every SEND arrives once with its payload; every READ
 * returns what its WRITE wrote; the fetched values are exactly
 * init .. init + n - 1 (each once); every churn SEND's payload; one
 * SQ_DRAINED per churned QP.
 *
 * Case "completion channel": two CQs on one channel, three threads each
 * waiting on the channel, acknowledging, re-arming and draining both
 * CQs, while a thread posts; every completion is reaped exactly once.
 */
#include "harness.h"
#include "traffic.h"

#include <pthread.h>
#include <sched.h>
#include <fcntl.h>
#include <stdatomic.h>

/* test: label=mt */
/* test: timeout=300 */

#define POSTERS 4
#define ITERS 1500 /* iterations per poster: 4 operations each */
#define RING 8 /* slots (operations in flight) per poster */
#define SLOT 2048
#define NREG 16 /* WRITE regions per poster on the target */
#define RQD 128
#define CHURN 40
#define ACC                                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* Source side: per poster RING slots; target side: receive slots, WRITE regions, the word. */
#define S_LEN (POSTERS * RING * SLOT)
#define T_RECV 0u
#define T_W (T_RECV + RQD * 2 * SLOT)
#define T_WORD (T_W + POSTERS * NREG * SLOT)
#define T_LEN (T_WORD + 8)
#define WORD_INIT 1000000ull
#define NFAA (POSTERS * ITERS)

enum {
	OP_SEND,
	OP_WRITE,
	OP_READ,
	OP_FAA,
	NOPS
};

static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq_ex *scq;
	struct ibv_cq *rcq;
	struct ibv_qp *a[2], *b[2];
	struct ibv_mr *smr, *tmr;
	uint8_t *sbuf, *tbuf;
	atomic_bool slot_busy[POSTERS][RING];
	atomic_uchar done[POSTERS][ITERS]; /* bit per operation: completed */
	atomic_uchar got_send[POSTERS][ITERS];
	atomic_uchar fetched[NFAA];
	atomic_int completions, recvs, errors, posters_left;
	atomic_bool stop_churn, stop_async;
	atomic_int drained_events, churned;
	uint64_t deadline; /* t_ms() by which every case must be done */
} g;

static void fail(const char *what, uint64_t a, uint64_t b)
{
	if (atomic_fetch_add(&g.errors, 1) < 10)
		printf("# FAIL: %s (%llu, %llu)\n", what, (unsigned long long)a,
		       (unsigned long long)b);
}

/* Past the deadline: fail once, so that every thread stops. */
static bool expired(void)
{
	if (t_ms() < g.deadline)
		return false;
	if (!atomic_load(&g.errors))
		fail("deadline passed", 0, 0);
	return true;
}

/* Payload byte k of operation (poster t, iteration i). */
static uint8_t pat(uint32_t t, uint32_t i, uint32_t k)
{
	return (uint8_t)(k * 13u + i * 7u + t * 101u + (k >> 8));
}

static uint32_t len_of(uint32_t t, uint32_t i)
{
	return 16 + (i * 2654435761u + t * 40503u) % (SLOT - 16);
}

static uint64_t wr_id_of(uint32_t t, uint32_t i, uint32_t op, uint32_t slot)
{
	return (uint64_t)t << 48 | (uint64_t)i << 16 | op << 8 | slot;
}

static uint8_t *slot_ptr(uint32_t t, uint32_t s)
{
	return g.sbuf + ((size_t)t * RING + s) * SLOT;
}

/* Wait until slot s of poster t is free, then take it. */
static void take_slot(uint32_t t, uint32_t s)
{
	while (atomic_load(&g.slot_busy[t][s]) && !expired())
		sched_yield();
	atomic_store(&g.slot_busy[t][s], true);
}

static int connect_pair(struct ibv_qp *a, struct ibv_qp *b, union ibv_gid *gid)
{
	if (t_qp_init(a, ACC) || t_qp_init(b, ACC))
		return -1;
	if (t_qp_rts(a, b->qp_num, gid, 77, 55, IBV_MTU_1024))
		return -1;
	return t_qp_rts(b, a->qp_num, gid, 55, 77, IBV_MTU_1024);
}

/* ---- posters ---- */

struct poster {
	uint32_t t;
	struct ibv_qp *qp;
	struct ibv_qp_ex *x;
};

static void post_one(struct poster *p, uint32_t i, uint32_t op, uint32_t s)
{
	uint32_t t = p->t, len = op == OP_FAA ? 8 : len_of(t, i);
	uint8_t *src = slot_ptr(t, s);
	uint64_t region = (uint64_t)(uintptr_t)g.tbuf + T_W + ((size_t)t * NREG + i % NREG) * SLOT;
	struct ibv_sge sge = {(uintptr_t)src, len, g.smr->lkey};
	struct ibv_send_wr wr = {0}, *bad;
	int ret;

	take_slot(t, s);
	if (op == OP_SEND || op == OP_WRITE) {
		src[0] = (uint8_t)t;
		memcpy(src + 4, &i, 4);
		for (uint32_t k = 8; k < len; k++)
			src[k] = pat(t, i, k);
	} else {
		memset(src, 0, len);
	}
	wr.wr_id = wr_id_of(t, i, op, s);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == OP_SEND && p->t % 2) {
		/* the ibv_wr_* API: the session holds the QP for this thread */
		ibv_wr_start(p->x);
		p->x->wr_id = wr.wr_id;
		p->x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(p->x);
		ibv_wr_set_sge(p->x, g.smr->lkey, (uintptr_t)src, len);
		ret = ibv_wr_complete(p->x);
	} else {
		wr.opcode = op == OP_SEND  ? IBV_WR_SEND :
			    op == OP_WRITE ? IBV_WR_RDMA_WRITE :
			    op == OP_READ  ? IBV_WR_RDMA_READ :
					     IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.rdma.remote_addr = region;
		wr.wr.rdma.rkey = g.tmr->rkey;
		if (op == OP_FAA) {
			wr.wr.atomic.remote_addr = (uintptr_t)g.tbuf + T_WORD;
			wr.wr.atomic.rkey = g.tmr->rkey;
			wr.wr.atomic.compare_add = 1;
		}
		ret = ibv_post_send(p->qp, &wr, &bad);
	}
	if (ret)
		fail("post", t, (uint64_t)ret);
}

static void *poster_main(void *arg)
{
	struct poster *p = arg;
	uint32_t s = 0;

	for (uint32_t i = 0; i < ITERS && !atomic_load(&g.errors); i++)
		for (uint32_t op = 0; op < NOPS; op++, s = (s + 1) % RING)
			post_one(p, i, op, s);
	atomic_fetch_sub(&g.posters_left, 1);
	return NULL;
}

/* ---- send-side pollers ---- */

/* One send completion: account for it, check its data, free its slot. */
static void send_completion(uint64_t wr_id, enum ibv_wc_status st)
{
	uint32_t t = (uint32_t)(wr_id >> 48), i = (uint32_t)(wr_id >> 16);
	uint32_t op = (uint32_t)(wr_id >> 8) & 0xff, s = (uint32_t)wr_id & 0xff;
	const uint8_t *d;

	if (t >= POSTERS || i >= ITERS || op >= NOPS || s >= RING || st != IBV_WC_SUCCESS) {
		fail("send completion", wr_id, st);
		return;
	}
	if (atomic_fetch_or(&g.done[t][i], (uint8_t)(1u << op)) & (1u << op))
		fail("completed twice", t, i);
	d = slot_ptr(t, s);
	if (op == OP_READ) {
		uint32_t len = len_of(t, i), wi;

		memcpy(&wi, d + 4, 4);
		if (d[0] != t || wi != i)
			fail("READ header", t, i);
		for (uint32_t k = 8; k < len; k++)
			if (d[k] != pat(t, i, k)) {
				fail("READ data", t, i);
				break;
			}
	} else if (op == OP_FAA) {
		uint64_t v;

		memcpy(&v, d, 8);
		if (v < WORD_INIT || v >= WORD_INIT + NFAA ||
		    atomic_exchange(&g.fetched[v - WORD_INIT], 1))
			fail("fetched value", t, v);
	}
	atomic_store(&g.slot_busy[t][s], false);
	atomic_fetch_add(&g.completions, 1);
}

static bool all_sent(void)
{
	return atomic_load(&g.completions) >= POSTERS * ITERS * NOPS || atomic_load(&g.errors) ||
	       expired();
}

static void *spoll_main(void *arg)
{
	bool ex = arg != NULL;

	while (!all_sent()) {
		struct ibv_wc wc[16];
		struct ibv_poll_cq_attr pa = {0};
		int n;

		if (!ex) {
			n = ibv_poll_cq(ibv_cq_ex_to_cq(g.scq), 16, wc);
			for (int k = 0; k < n; k++)
				send_completion(wc[k].wr_id, wc[k].status);
			if (n < 0)
				fail("poll_cq", 0, (uint64_t)-n);
			continue;
		}
		/* the extended iterator: one thread holds the CQ from start to end */
		if (ibv_start_poll(g.scq, &pa)) {
			sched_yield();
			continue;
		}
		n = 0;
		do
			send_completion(g.scq->wr_id, g.scq->status);
		while (++n < 16 && !ibv_next_poll(g.scq));
		ibv_end_poll(g.scq);
	}
	return NULL;
}

/* ---- receive-side pollers ---- */

static void *rpoll_main(void *arg)
{
	(void)arg;
	while (atomic_load(&g.recvs) < POSTERS * ITERS && !atomic_load(&g.errors) && !expired()) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(g.rcq, 16, wc);

		for (int k = 0; k < n; k++) {
			uint8_t *d = g.tbuf + T_RECV + wc[k].wr_id * SLOT;
			struct ibv_qp *qp = wc[k].qp_num == g.b[0]->qp_num ? g.b[0] : g.b[1];
			struct ibv_sge sge = {(uintptr_t)d, SLOT, g.tmr->lkey};
			struct ibv_recv_wr rwr = {
				.wr_id = wc[k].wr_id, .sg_list = &sge, .num_sge = 1};
			struct ibv_recv_wr *bad;
			uint32_t t = d[0], i;

			memcpy(&i, d + 4, 4);
			if (wc[k].status != IBV_WC_SUCCESS || t >= POSTERS || i >= ITERS ||
			    wc[k].byte_len != len_of(t, i)) {
				fail("receive", wc[k].wr_id, wc[k].status);
				continue;
			}
			for (uint32_t b = 8; b < wc[k].byte_len; b++)
				if (d[b] != pat(t, i, b)) {
					fail("SEND data", t, i);
					break;
				}
			if (atomic_exchange(&g.got_send[t][i], 1))
				fail("SEND received twice", t, i);
			atomic_fetch_add(&g.recvs, 1);
			if (ibv_post_recv(qp, &rwr, &bad))
				fail("post_recv", t, i);
		}
	}
	return NULL;
}

/* ---- churn: objects created and destroyed during the traffic ---- */

static int churn_once(uint32_t n)
{
	struct ibv_cq *cq = ibv_create_cq(g.ctx, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {0};
	struct ibv_qp *qa = NULL, *qb = NULL;
	uint8_t *buf = calloc(1, 4096);
	struct ibv_mr *mr = buf ? ibv_reg_mr(g.pd, buf, 4096, ACC) : NULL;
	struct ibv_qp_attr a = {0};
	union ibv_gid gid;
	struct ibv_wc wc[2];
	int ret = -1, got = 0;

	if (!cq || !mr || ibv_query_gid(g.ctx, 1, 0, &gid))
		goto out;
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 2;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qa = ibv_create_qp(g.pd, &ia);
	qb = ibv_create_qp(g.pd, &ia);
	if (!qa || !qb || connect_pair(qa, qb, &gid))
		goto out;
	for (uint32_t k = 0; k < 512; k++)
		buf[k] = (uint8_t)(k + n);
	{
		struct ibv_sge rs = {(uintptr_t)buf + 1024, 512, mr->lkey};
		struct ibv_sge ss = {(uintptr_t)buf, 512, mr->lkey};
		struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &rs, .num_sge = 1}, *rbad;
		struct ibv_send_wr swr = {.wr_id = 2,
					  .sg_list = &ss,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED};
		struct ibv_send_wr *sbad;

		if (ibv_post_recv(qb, &rwr, &rbad) || ibv_post_send(qa, &swr, &sbad))
			goto out;
	}
	got = t_poll(cq, wc, 2, 20000);
	if (got != 2 || wc[0].status || wc[1].status || memcmp(buf, buf + 1024, 512)) {
		fail("churn SEND", n, (uint64_t)got);
		goto out;
	}
	/* RTS -> SQD with SQ_DRAINED: nothing is outstanding, so the event comes now */
	a.qp_state = IBV_QPS_SQD;
	a.en_sqd_async_notify = 1;
	if (ibv_modify_qp(qa, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY)) {
		fail("modify to SQD", n, 0);
		goto out;
	}
	/* an event still unread when its QP is destroyed is dropped: wait for the reader */
	for (uint64_t t0 = t_ms(); atomic_load(&g.drained_events) <= (int)n; sched_yield())
		if (t_ms() - t0 > 20000) {
			fail("no SQ_DRAINED", n, 0);
			goto out;
		}
	ret = 0;
out:
	/* destroy_qp waits until the async thread acknowledged the QP's event */
	if (qa && ibv_destroy_qp(qa))
		ret = -1;
	if (qb && ibv_destroy_qp(qb))
		ret = -1;
	if (mr && ibv_dereg_mr(mr))
		ret = -1;
	if (cq && ibv_destroy_cq(cq))
		ret = -1;
	free(buf);
	return ret;
}

static void *churn_main(void *arg)
{
	(void)arg;
	for (uint32_t n = 0; n < CHURN && !atomic_load(&g.errors); n++) {
		if (churn_once(n))
			fail("churn", n, 0);
		atomic_fetch_add(&g.churned, 1);
	}
	return NULL;
}

static void *async_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p = {.fd = g.ctx->async_fd, .events = POLLIN};
		struct ibv_async_event ev;

		if (poll(&p, 1, 10) <= 0) {
			if (atomic_load(&g.stop_async))
				break;
			continue;
		}
		if (ibv_get_async_event(g.ctx, &ev))
			continue; /* EAGAIN: nothing after all */
		if (ev.event_type == IBV_EVENT_SQ_DRAINED && ev.element.qp)
			atomic_fetch_add(&g.drained_events, 1);
		else if (ev.event_type != IBV_EVENT_COMM_EST)
			fail("unexpected async event", ev.event_type, 0);
		ibv_ack_async_event(&ev);
	}
	return NULL;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void case_shared(void)
{
	struct ibv_cq_init_attr_ex ca = {0};
	struct ibv_qp_init_attr_ex ia = {0};
	struct poster ps[POSTERS];
	pthread_t th[POSTERS + 6];
	union ibv_gid gid;
	int nth = 0;

	t_case("shared QPs and CQs, churn and async events alongside");
	ca.cqe = POSTERS * RING + 16;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	g.scq = ibv_create_cq_ex(g.ctx, &ca);
	g.rcq = ibv_create_cq(g.ctx, RQD * 2 + 16, NULL, NULL, 0);
	if (!CHECK(g.scq && g.rcq) || !CHECK(ibv_query_gid(g.ctx, 1, 0, &gid) == 0))
		return;
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = ibv_cq_ex_to_cq(g.scq);
	ia.recv_cq = g.rcq;
	ia.cap.max_send_wr = 2 * RING + 4;
	ia.cap.max_recv_wr = RQD;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.pd = g.pd;
	ia.send_ops_flags = IBV_QP_EX_WITH_SEND;
	for (int k = 0; k < 2; k++) {
		g.a[k] = ibv_create_qp_ex(g.ctx, &ia);
		g.b[k] = ibv_create_qp_ex(g.ctx, &ia);
		if (!CHECK(g.a[k] && g.b[k]) || connect_pair(g.a[k], g.b[k], &gid))
			return;
		for (uint32_t r = 0; r < RQD; r++) {
			uint64_t slot = (uint64_t)k * RQD + r;
			struct ibv_sge sge = {(uintptr_t)g.tbuf + T_RECV + slot * SLOT, SLOT,
					      g.tmr->lkey};
			struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1},
					   *bad;

			if (!CHECK_RET(ibv_post_recv(g.b[k], &wr, &bad), 0))
				return;
		}
	}
	{
		uint64_t v = WORD_INIT;

		memcpy(g.tbuf + T_WORD, &v, 8);
	}
	CHECK(set_nonblock(g.ctx->async_fd) == 0);
	atomic_store(&g.posters_left, POSTERS);
	for (uint32_t t = 0; t < POSTERS; t++) {
		ps[t].t = t;
		ps[t].qp = g.a[t % 2];
		ps[t].x = ibv_qp_to_qp_ex(ps[t].qp);
		if (!CHECK(ps[t].x))
			return;
	}
	/* no CHECK while the threads run: the churn thread makes some (traffic.h) */
	for (uint32_t t = 0; t < POSTERS; t++)
		nth += !pthread_create(&th[nth], NULL, poster_main, &ps[t]);
	nth += !pthread_create(&th[nth], NULL, spoll_main, NULL);
	nth += !pthread_create(&th[nth], NULL, spoll_main, &g);
	nth += !pthread_create(&th[nth], NULL, rpoll_main, NULL);
	nth += !pthread_create(&th[nth], NULL, rpoll_main, NULL);
	nth += !pthread_create(&th[nth], NULL, churn_main, NULL);
	nth += !pthread_create(&th[nth], NULL, async_main, NULL);
	for (int k = 0; k < nth - 1; k++)
		pthread_join(th[k], NULL);
	atomic_store(&g.stop_async, true);
	pthread_join(th[nth - 1], NULL);
	CHECK_EQ_INT(nth, POSTERS + 6);
	printf("# %d send completions, %d SENDs received, %d objects churned, %d SQ_DRAINED\n",
	       atomic_load(&g.completions), atomic_load(&g.recvs), atomic_load(&g.churned),
	       atomic_load(&g.drained_events));
	CHECK_EQ_INT(atomic_load(&g.errors), 0);
	CHECK_EQ_INT(atomic_load(&g.completions), POSTERS * ITERS * NOPS);
	CHECK_EQ_INT(atomic_load(&g.recvs), POSTERS * ITERS);
	CHECK_EQ_INT(atomic_load(&g.drained_events), CHURN);
	for (uint32_t t = 0; t < POSTERS; t++)
		for (uint32_t i = 0; i < ITERS; i++)
			if (!CHECK(g.done[t][i] == (1u << NOPS) - 1 && g.got_send[t][i]))
				t = POSTERS, i = ITERS;
	{
		uint64_t v;

		memcpy(&v, g.tbuf + T_WORD, 8);
		CHECK_EQ_INT(v, WORD_INIT + NFAA);
	}
	for (int k = 0; k < 2; k++) {
		CHECK_RET(ibv_destroy_qp(g.a[k]), 0);
		CHECK_RET(ibv_destroy_qp(g.b[k]), 0);
	}
	CHECK_RET(ibv_destroy_cq(ibv_cq_ex_to_cq(g.scq)), 0);
	CHECK_RET(ibv_destroy_cq(g.rcq), 0);
}

/* ---- completion channel ---- */

#define CH_OPS 3000
#define CH_WAITERS 3

static struct {
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq[2];
	atomic_int reaped, events;
	atomic_uchar seen[2][CH_OPS];
} c;

static void *waiter_main(void *arg)
{
	(void)arg;
	while (atomic_load(&c.reaped) < 2 * CH_OPS && !atomic_load(&g.errors) && !expired()) {
		struct pollfd p = {.fd = c.ch->fd, .events = POLLIN};
		struct ibv_cq *cq;
		void *ctx;
		struct ibv_wc wc[8];
		int n;

		if (poll(&p, 1, 10) <= 0 || ibv_get_cq_event(c.ch, &cq, &ctx))
			continue;
		atomic_fetch_add(&c.events, 1);
		if (cq != c.cq[0] && cq != c.cq[1])
			fail("event for an unknown CQ", 0, 0);
		ibv_ack_cq_events(cq, 1);
		if (ibv_req_notify_cq(cq, 0))
			fail("req_notify_cq", 0, 0);
		while ((n = ibv_poll_cq(cq, 8, wc)) > 0)
			for (int k = 0; k < n; k++) {
				int side = cq == c.cq[1];

				if (wc[k].status != IBV_WC_SUCCESS || wc[k].wr_id >= CH_OPS ||
				    atomic_exchange(&c.seen[side][wc[k].wr_id], 1))
					fail("channel completion", wc[k].wr_id, wc[k].status);
				atomic_fetch_add(&c.reaped, 1);
			}
	}
	return NULL;
}

static void case_channel(void)
{
	struct ibv_qp_init_attr ia = {0};
	struct ibv_qp *qa, *qb;
	pthread_t th[CH_WAITERS];
	union ibv_gid gid;
	uint64_t t0;

	t_case("completion channel shared by two CQs and three waiting threads");
	c.ch = ibv_create_comp_channel(g.ctx);
	if (!CHECK(c.ch) || !CHECK(set_nonblock(c.ch->fd) == 0))
		return;
	c.cq[0] = ibv_create_cq(g.ctx, CH_OPS + 8, &c, c.ch, 0);
	c.cq[1] = ibv_create_cq(g.ctx, CH_OPS + 8, &c, c.ch, 0);
	if (!CHECK(c.cq[0] && c.cq[1]) || !CHECK(ibv_query_gid(g.ctx, 1, 0, &gid) == 0))
		return;
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = c.cq[0];
	ia.recv_cq = c.cq[1];
	ia.cap.max_send_wr = 64;
	ia.cap.max_recv_wr = CH_OPS;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qa = ibv_create_qp(g.pd, &ia);
	qb = ibv_create_qp(g.pd, &ia);
	if (!CHECK(qa && qb) || connect_pair(qa, qb, &gid))
		return;
	for (uint32_t i = 0; i < CH_OPS; i++) {
		struct ibv_sge sge = {(uintptr_t)g.tbuf + T_RECV + (i % RQD) * SLOT, 64,
				      g.tmr->lkey};
		struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;

		if (!CHECK_RET(ibv_post_recv(qb, &wr, &bad), 0))
			return;
	}
	CHECK_RET(ibv_req_notify_cq(c.cq[0], 0), 0);
	CHECK_RET(ibv_req_notify_cq(c.cq[1], 0), 0);
	for (int k = 0; k < CH_WAITERS; k++)
		CHECK(pthread_create(&th[k], NULL, waiter_main, NULL) == 0);
	t0 = t_ms();
	for (uint32_t i = 0; i < CH_OPS && !atomic_load(&g.errors);) {
		struct ibv_sge sge = {(uintptr_t)g.sbuf, 32, g.smr->lkey};
		struct ibv_send_wr wr = {.wr_id = i,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED};
		struct ibv_send_wr *bad;
		int ret = ibv_post_send(qa, &wr, &bad);

		if (ret == ENOMEM) { /* the queue is full: the waiters reap it */
			if (t_ms() - t0 > 120000) {
				fail("channel: no progress", i, 0);
				break;
			}
			sched_yield();
			continue;
		}
		if (ret)
			fail("post_send", i, (uint64_t)ret);
		i++;
	}
	for (int k = 0; k < CH_WAITERS; k++)
		pthread_join(th[k], NULL);
	printf("# %d completions reaped after %d events\n", atomic_load(&c.reaped),
	       atomic_load(&c.events));
	CHECK_EQ_INT(atomic_load(&c.reaped), 2 * CH_OPS);
	CHECK_EQ_INT(atomic_load(&g.errors), 0);
	CHECK_RET(ibv_destroy_qp(qa), 0);
	CHECK_RET(ibv_destroy_qp(qb), 0);
	CHECK_RET(ibv_destroy_cq(c.cq[0]), 0);
	CHECK_RET(ibv_destroy_cq(c.cq[1]), 0);
	CHECK_RET(ibv_destroy_comp_channel(c.ch), 0);
}

int main(void)
{
	t_start("api_mt");
	g.deadline = t_ms() + 200000;
	g.ctx = t_open_dev();
	if (!g.ctx) {
		printf("Bail out! no device: %s\n", t_errname(errno));
		return 1;
	}
	g.pd = ibv_alloc_pd(g.ctx);
	g.sbuf = aligned_alloc(4096, S_LEN);
	g.tbuf = aligned_alloc(4096, (T_LEN + 4095) & ~4095u);
	if (!g.pd || !g.sbuf || !g.tbuf) {
		printf("Bail out! PD or memory\n");
		return 1;
	}
	memset(g.sbuf, 0, S_LEN);
	memset(g.tbuf, 0, T_LEN);
	g.smr = ibv_reg_mr(g.pd, g.sbuf, S_LEN, ACC);
	g.tmr = ibv_reg_mr(g.pd, g.tbuf, T_LEN, ACC);
	if (!g.smr || !g.tmr) {
		printf("Bail out! MRs: %s\n", t_errname(errno));
		return 1;
	}
	case_shared();
	case_channel();
	CHECK_RET(ibv_dereg_mr(g.smr), 0);
	CHECK_RET(ibv_dereg_mr(g.tmr), 0);
	CHECK_RET(ibv_dealloc_pd(g.pd), 0);
	CHECK_RET(ibv_close_device(g.ctx), 0);
	free(g.sbuf);
	free(g.tbuf);
	return t_finish();
}
