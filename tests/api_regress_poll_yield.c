/* SPDX-License-Identifier: MIT */
/*
 * api_regress_poll_yield.c - a thread spinning on ibv_poll_cq leaves the
 * CPU to the device's progress thread.
 *
 * Regression: completions come from the progress thread, but an empty
 * ibv_poll_cq returned at once, so an application polling in a tight loop
 * (ibv_rc_pingpong, ib_send_lat, every perftest client) kept its CPU
 * until the scheduler preempted it. With as many spinning threads as
 * CPUs each message waited up to milliseconds for a progress thread to be
 * scheduled (ibv_rc_pingpong on two CPUs: 1-3 ms per iteration instead
 * of ~0.2, and spurious retransmit timeouts). An empty poll now yields.
 *
 * Check, deterministically: the process runs on one CPU under SCHED_FIFO,
 * where a thread of equal priority runs only when the running one blocks
 * or yields. Two QPs ping-pong SENDs, the application spinning on
 * ibv_poll_cq between them. Without the yield the progress thread never
 * runs and nothing completes. Skipped without the privilege for
 * SCHED_FIFO.
 */
#include "harness.h"
#include "traffic.h"

#include <pthread.h>
#include <sched.h>

/* test: no-valgrind */
/* test: timeout=60 */

enum {
	ROUNDS = 100,
	SIZE = 64
};

/* The same through the ibv_cq_ex iterator (ibv_start_poll until not ENOENT). */
static int spin_one_ex(struct ibv_cq_ex *cq, uint64_t deadline_ms)
{
	struct ibv_poll_cq_attr attr = {0};
	int ret;

	while ((ret = ibv_start_poll(cq, &attr)) == ENOENT)
		if (t_ms() > deadline_ms)
			return -1;
	if (ret)
		return -1;
	ret = cq->status == IBV_WC_SUCCESS ? 0 : -1;
	ibv_end_poll(cq);
	return ret;
}

static struct ibv_cq_ex *cqx[2]; /* set: the endpoints' CQs are extended CQs */

static int wait_cq(struct t_ep *e, int i, uint64_t deadline_ms)
{
	return cqx[i] ? spin_one_ex(cqx[i], deadline_ms) : t_spin_one(e->cq, deadline_ms);
}

/* a sends to b: b's receive and a's send complete (one CQ per endpoint). */
static int one_way(struct t_ep *a, int ai, struct t_ep *b, int bi, uint64_t deadline_ms)
{
	if (t_post_recv(b, 1, 0, SIZE) ||
	    t_post(a, IBV_WR_SEND, 2, 0, SIZE, 0, 0, IBV_SEND_SIGNALED))
		return -1;
	return wait_cq(b, bi, deadline_ms) || wait_cq(a, ai, deadline_ms) ? -1 : 0;
}

/* An RC endpoint like t_ep_init()'s, on an extended CQ (stored in cqx[i]). */
static int ep_init_ex(struct t_ep *e, struct ibv_context *ctx, int i)
{
	struct ibv_cq_init_attr_ex ca = {.cqe = 32, .wc_flags = IBV_WC_STANDARD_FLAGS};
	struct ibv_qp_init_attr ia = {0};
	struct ibv_qp_attr qa = {0};

	memset(e, 0, sizeof(*e));
	e->type = IBV_QPT_RC;
	e->ctx = ctx;
	e->pd = ibv_alloc_pd(ctx);
	cqx[i] = ibv_create_cq_ex(ctx, &ca);
	e->len = 4096;
	e->buf = aligned_alloc(4096, 4096);
	if (!CHECK(e->pd && cqx[i] && e->buf))
		return -1;
	e->cq = ibv_cq_ex_to_cq(cqx[i]);
	e->mr = ibv_reg_mr(e->pd, e->buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	ia.send_cq = ia.recv_cq = e->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	e->qp = ibv_create_qp(e->pd, &ia);
	if (!CHECK(e->mr && e->qp) || !CHECK(ibv_query_gid(ctx, 1, 0, &e->gid) == 0))
		return -1;
	qa.qp_state = IBV_QPS_INIT;
	qa.port_num = 1;
	qa.qp_access_flags = 0;
	return CHECK(ibv_modify_qp(e->qp, &qa,
				   IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					   IBV_QP_ACCESS_FLAGS) == 0) ?
		       0 :
		       -1;
}

/* ROUNDS round trips between a and b; true if all completed in time. */
static bool rounds(struct t_ep *a, struct t_ep *b)
{
	uint64_t t0 = t_ms(), deadline = t0 + 3000;
	int i;

	for (i = 0; i < ROUNDS; i++)
		if (one_way(a, 0, b, 1, deadline) || one_way(b, 1, a, 0, deadline))
			break;
	printf("# %d round trips in %llu ms\n", i, (unsigned long long)(t_ms() - t0));
	return CHECK_MSG(i == ROUNDS,
			 "%d of %d round trips in %llu ms: the poller never let the "
			 "progress thread run",
			 i, ROUNDS, (unsigned long long)(t_ms() - t0));
}

int main(void)
{
	struct sched_param sp = {.sched_priority = 1};
	struct t_ep a, b;
	struct ibv_context *ctx;
	cpu_set_t one;
	int cpu, ret;

	t_start("api_regress_poll_yield");
	cpu = sched_getcpu();
	CPU_ZERO(&one);
	CPU_SET(cpu < 0 ? 0 : cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		t_skip_all("cannot pin the process to one CPU");
	/* the progress thread, created when the device opens, inherits both */
	ret = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	if (ret)
		t_skip_all("no SCHED_FIFO (needs CAP_SYS_NICE or RLIMIT_RTPRIO)");
	if (t_ep_init(&a, NULL, IBV_QPT_RC, 4096, IBV_ACCESS_LOCAL_WRITE, 16) ||
	    t_ep_init(&b, a.ctx, IBV_QPT_RC, 4096, IBV_ACCESS_LOCAL_WRITE, 16) ||
	    t_connect(&a, &b, IBV_MTU_1024))
		return t_finish();
	ctx = a.ctx;

	t_case("SEND ping-pong spinning on ibv_poll_cq, SCHED_FIFO on one CPU");
	rounds(&a, &b);
	t_ep_destroy(&b, false);
	t_ep_destroy(&a, false);

	t_case("the same spinning on ibv_start_poll of extended CQs");
	if (!ep_init_ex(&a, ctx, 0) && !ep_init_ex(&b, ctx, 1) && !t_connect(&a, &b, IBV_MTU_1024))
		rounds(&a, &b);

	/* back to normal scheduling for the teardown */
	sp.sched_priority = 0;
	pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
	t_ep_destroy(&b, false);
	t_ep_destroy(&a, true);
	return t_finish();
}
