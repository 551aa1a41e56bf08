/* SPDX-License-Identifier: MIT */
/* test: env=SOFTVERBS_SHM=0 */
/*
 * api_rdmacm_held: a connection request that arrives while its server is
 * between two listeners on one port waits for the second instead of
 * being refused (src/rdmacm/held.c, docs/rdmacm.md).
 *
 * Regression (perftest -R, rdmacm_tools_ib_send_lat): the server takes
 * its control connection, destroys that listener and listens again for
 * the test's; the client's second REQ came in between, drew REJ 8
 * (invalid service ID), and the client gave up. On a loaded machine 8
 * attempts of the pair in a row lost that race.
 *
 * One process, client and server on the device's own address (over UDP,
 * as api_rdmacm_loopback):
 *   1. a listener on a port goes; a REQ for that port comes; 150 ms later
 *      a new listener on it gets the CONNECT_REQUEST (rejected by the
 *      server: the client's REJECTED carries 28, not 8);
 *   2. a listener goes and nobody listens again: the REQ is refused with
 *      8 once the wait (1 s) is over, not before 0.5 s, not after 5 s;
 *   3. a port that never had a listener: refused with 8 at once (0.5 s).
 */
#include "harness.h"
#include "rdmacm_util.h"

#include <arpa/inet.h>
#include <poll.h>
#include <time.h>

#include <rdma/rdma_cma.h>

static struct sockaddr_in me;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define expect t_cm_expect

/* A listener on `port` (any address) with events on `ch`. */
static struct rdma_cm_id *listener(struct rdma_event_channel *ch, uint16_t port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct rdma_cm_id *l = NULL;

	CHECK_EQ_INT(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ_INT(rdma_bind_addr(l, (struct sockaddr *)&sin), 0);
	CHECK_EQ_INT(rdma_listen(l, 4), 0);
	return l;
}

/* A client id on `ch` that has sent its REQ to our address, `port`. */
static struct rdma_cm_id *connect_to(struct rdma_event_channel *ch, uint16_t port)
{
	struct rdma_conn_param cp = {.responder_resources = 1, .initiator_depth = 1};
	struct rdma_cm_id *c = t_cm_resolved(ch, &me, port);

	CHECK_EQ_INT(rdma_connect(c, &cp), 0);
	return c;
}

/* The client's REJECTED within `ms`, with `status`; seconds since `t0`. */
static double expect_rejected(struct rdma_event_channel *ch, int status, int ms, double t0)
{
	struct rdma_cm_event *ev = expect(ch, RDMA_CM_EVENT_REJECTED, ms);
	double t = now_s() - t0;

	if (ev) {
		CHECK_EQ_INT(ev->status, status);
		rdma_ack_cm_event(ev);
	}
	return t;
}

static void between_listeners(struct rdma_event_channel *sch, struct rdma_event_channel *cch)
{
	struct rdma_cm_id *l = listener(sch, 6101), *c;
	struct rdma_cm_event *ev;
	struct pollfd p = {.fd = cch->fd, .events = POLLIN};

	t_case("a REQ between two listeners on its port reaches the second");
	CHECK_EQ_INT(rdma_destroy_id(l), 0);
	c = connect_to(cch, 6101);
	CHECK_MSG(poll(&p, 1, 150) == 0, "the client had an event before the new listener");
	l = listener(sch, 6101);
	ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
	if (ev) {
		CHECK(ev->listen_id == l);
		CHECK_EQ_INT(rdma_reject(ev->id, NULL, 0), 0);
		CHECK_EQ_INT(rdma_destroy_id(ev->id), 0);
		rdma_ack_cm_event(ev);
		(void)expect_rejected(cch, 28, 5000, now_s()); /* the consumer's, not 8 */
	}
	CHECK_EQ_INT(rdma_destroy_id(c), 0);
	CHECK_EQ_INT(rdma_destroy_id(l), 0);
}

static void listener_gone(struct rdma_event_channel *sch, struct rdma_event_channel *cch)
{
	struct rdma_cm_id *l = listener(sch, 6102), *c;
	double t0, t;

	t_case("a listener gone for good: its REQ refused (8) after the wait");
	CHECK_EQ_INT(rdma_destroy_id(l), 0);
	t0 = now_s();
	c = connect_to(cch, 6102);
	t = expect_rejected(cch, 8, 10000, t0);
	printf("# refused after %.3f s\n", t);
	CHECK_MSG(t >= 0.5 && t <= 5.0, "refused after %.3f s: want 0.5 to 5 s", t);
	CHECK_EQ_INT(rdma_destroy_id(c), 0);
}

static void never_listened(struct rdma_event_channel *cch)
{
	struct rdma_cm_id *c;
	double t0 = now_s(), t;

	t_case("a port that never had a listener: REJ 8 at once");
	c = connect_to(cch, 6103);
	t = expect_rejected(cch, 8, 10000, t0);
	printf("# refused after %.3f s\n", t);
	CHECK_MSG(t < 0.5, "refused after %.3f s: want at once", t);
	CHECK_EQ_INT(rdma_destroy_id(c), 0);
}

int main(void)
{
	struct rdma_event_channel *sch, *cch;

	t_rdmacm_start("api_rdmacm_held", &me);
	sch = rdma_create_event_channel();
	cch = rdma_create_event_channel();
	if (!CHECK(sch && cch))
		return t_finish();
	between_listeners(sch, cch);
	listener_gone(sch, cch);
	never_listened(cch);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
	return t_finish();
}
