/* SPDX-License-Identifier: MIT */
/*
 * api_regress_ack_storm.c - an idle RC connection sends nothing.
 *
 * Regression: the responder marked an ACK as owed and cleared the mark
 * only for a syndrome of exactly 0, but it sends its ACKs with the credit
 * field set (0x1f), so the mark stayed. From then on every packet the QP
 * received, ACKs included, made it send another ACK. Once both sides of
 * a connection had received a SEND (ibv_rc_pingpong: each side sends),
 * the two QPs bounced ACKs at each other forever: 100 packets per
 * message and a progress thread at 100% CPU while the connection was
 * idle. Seen as ibv_rc_pingpong taking 5 ms per iteration.
 *
 * Check: after a SEND in each direction the process uses (almost) no CPU
 * while it sleeps.
 */
#include "harness.h"
#include "traffic.h"

#include <sys/resource.h>

/* test: timeout=120 */

static uint64_t cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

static void exchange(struct t_ep *from, struct t_ep *to, uint64_t id)
{
	struct ibv_wc wc[2];

	CHECK(t_post_recv(to, id, 0, 4096) == 0);
	CHECK(t_post(from, IBV_WR_SEND, id, 0, 4096, 0, 0, IBV_SEND_SIGNALED) == 0);
	CHECK(t_poll(from->cq, wc, 1, 5000) == 1 && wc[0].status == IBV_WC_SUCCESS);
	CHECK(t_poll(to->cq, wc, 1, 5000) == 1 && wc[0].status == IBV_WC_SUCCESS);
}

int main(void)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct t_ep a, b;
	uint64_t c0, t0, cpu, wall;

	t_start("api_regress_ack_storm");
	if (t_ep_init(&a, NULL, IBV_QPT_RC, 8192, access, 16) ||
	    t_ep_init(&b, a.ctx, IBV_QPT_RC, 8192, access, 16) || t_connect(&a, &b, IBV_MTU_1024))
		return t_finish();

	t_case("SEND both ways, then the connection stays quiet");
	for (int i = 0; i < 4; i++) {
		exchange(&a, &b, (uint64_t)i);
		exchange(&b, &a, (uint64_t)i);
	}
	usleep(20 * 1000); /* let the last ACKs land */
	c0 = cpu_ms();
	t0 = t_ms();
	usleep(400 * 1000);
	cpu = cpu_ms() - c0;
	wall = t_ms() - t0;
	CHECK_MSG(cpu * 4 < wall, "idle for %llu ms, the process used %llu ms of CPU",
		  (unsigned long long)wall, (unsigned long long)cpu);
	/* and the connection still works */
	exchange(&a, &b, 10);
	exchange(&b, &a, 11);

	t_ep_destroy(&b, false);
	t_ep_destroy(&a, true);
	return t_finish();
}
