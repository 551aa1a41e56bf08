/* SPDX-License-Identifier: MIT */
/*
 * unit_regress_stall_timers: after a stall the progress thread reads
 * what arrived before it runs the retransmit timers.
 *
 * Regression: the progress thread ran its timers after every receive
 * batch of 32 packets. When it had not been scheduled for longer than a
 * retransmit timeout (two processes polling on two CPUs: stalls of up to
 * 100 ms were measured), the first batch after the stall was followed by
 * the timers, which found the deadline passed and retransmitted
 * everything, although the packets and ACKs that would have retired it
 * were still queued on the socket: spurious timeouts, go-back-N storms
 * and halved windows in ibv_srq_pingpong and the perftest lat tools.
 *
 * The test makes the stall deterministic: the process runs on one CPU
 * under SCHED_FIFO, so the progress thread runs only once the test
 * thread sleeps. QP a posts 64 one-packet WRITEs to QP b (same device)
 * with the shortest retransmit timeout (0.5 ms), then spins for 20 ms:
 * the 64 requests wait on the socket. After the stall everything must
 * complete without a single retransmit timeout. Skipped without the
 * privilege for SCHED_FIFO.
 */
#include "harness.h"

#include <pthread.h>
#include <sched.h>

#include "qp_util.h"
#include "sw/transport/transport_priv.h"

/* test: no-valgrind */
/* test: timeout=60 */

enum {
	NWR = 64
};

static struct q_env env;
static uint8_t src[4096], dst[4096];

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int main(void)
{
	struct sched_param sp = {.sched_priority = 1};
	struct ibv_mr *smr, *dmr;
	struct ibv_qp *a, *b;
	struct ibv_qp_attr at;
	struct ibv_wc wc[NWR];
	struct sw_engine *eng;
	cpu_set_t one;
	uint64_t t0, timeouts;
	int cpu, i, got;

	t_start("unit_regress_stall_timers");
	cpu = sched_getcpu();
	CPU_ZERO(&one);
	CPU_SET(cpu < 0 ? 0 : cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		t_skip_all("cannot pin the process to one CPU");
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp))
		t_skip_all("no SCHED_FIFO (needs CAP_SYS_NICE or RLIMIT_RTPRIO)");
	/* the progress thread, created when the device opens, inherits both */
	q_env_open(&env, 2 * NWR);
	smr = ibv_reg_mr(env.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(env.pd, dst, sizeof(dst),
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	{
		struct ibv_qp_init_attr ia = q_init_attr(&env, IBV_QPT_RC);

		ia.cap.max_send_wr = NWR;
		a = ibv_create_qp(env.pd, &ia);
		b = ibv_create_qp(env.pd, &ia);
	}
	if (!CHECK(smr && dmr && a && b) ||
	    !CHECK(q_bring_up(&env, b, IBV_QPS_RTR, a->qp_num) == 0) ||
	    !CHECK(q_bring_up(&env, a, IBV_QPS_RTR, b->qp_num) == 0))
		return t_finish();
	at = q_attr(&env, IBV_QPS_RTS, b->qp_num);
	at.sq_psn = q_attr(&env, IBV_QPS_RTR, 0).rq_psn; /* what b expects */
	at.timeout = 1; /* the shortest: 0.5 ms */
	if (!CHECK(ibv_modify_qp(a, &at,
				 IBV_QP_STATE | q_required(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS)) ==
		   0))
		return t_finish();
	eng = sw_dev_of(env.ctx)->eng;

	t_case("64 WRITEs queued during a 20 ms stall complete without a retransmit timeout");
	timeouts = atomic_load(&eng->cnt.timeouts);
	for (i = 0; i < NWR; i++) {
		struct ibv_sge sge = {(uintptr_t)src, 64, smr->lkey};
		struct ibv_send_wr wr = {.wr_id = (uint64_t)i,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE},
				   *bad;

		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)dst + (uint64_t)i * 64;
		wr.wr.rdma.rkey = dmr->rkey;
		CHECK(ibv_post_send(a, &wr, &bad) == 0);
	}
	/* the stall: this thread keeps the only CPU; nothing else runs */
	t0 = now_ms();
	while (now_ms() - t0 < 20)
		;
	/* now the progress thread runs, while this one sleeps in q_poll */
	got = q_poll(env.scq, wc, NWR, NWR);
	CHECK_EQ_INT(got, NWR);
	for (i = 0; i < got; i++)
		CHECK(wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == (uint64_t)i);
	CHECK_MSG(atomic_load(&eng->cnt.timeouts) == timeouts,
		  "%llu retransmit timeouts, with every ACK on its way",
		  (unsigned long long)(atomic_load(&eng->cnt.timeouts) - timeouts));

	sp.sched_priority = 0;
	pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
	CHECK_RET(ibv_destroy_qp(a), 0);
	CHECK_RET(ibv_destroy_qp(b), 0);
	CHECK_RET(ibv_dereg_mr(smr), 0);
	CHECK_RET(ibv_dereg_mr(dmr), 0);
	q_env_close(&env);
	return t_finish();
}
