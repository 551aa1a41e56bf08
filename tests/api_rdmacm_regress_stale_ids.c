/* SPDX-License-Identifier: MIT */
/* test: env=SOFTVERBS_CM_TIMEOUT=100 */
/* test: env=SOFTVERBS_SHM=0 */
/*
 * api_rdmacm_regress_stale_ids: ids and event channels used after they
 * were destroyed, or after their channel was, fail with an error instead
 * of touching freed memory.
 *
 * perftest 4.5's ib_write_bw -R client, when its data connection is
 * rejected (REJ 8: the rxe server in the interop guest listened late),
 * destroys its ids and the event channel, frees the array that held the
 * ids, and retries with that array: rdma_resolve_addr and rdma_destroy_id
 * on an id already destroyed (or on whatever pointer the reused memory
 * then held: the bytes of a sockaddr_in), rdma_destroy_event_channel on a
 * channel already destroyed. The kernel's librdmacm answers such calls
 * with an error (the command goes to a closed descriptor); ours freed the
 * id a second time, corrupted the list of ids and the heap, and the
 * client died of SIGSEGV (exit 139) in its error path. Now a pointer that
 * is not a live id of this library is never dereferenced: EINVAL, and a
 * channel destroyed is EBADF (a second destroy does nothing), but for
 * rdma_get_cm_event, which blocks on it for ever
 * (api_rdmacm_regress_stale_channel checks that).
 *
 * An id whose channel is destroyed first (the kernel destroys the ids of
 * a closed rdma_cm descriptor) stops listening and loses its queued
 * events; it pointed at the freed channel before, which the CM thread
 * wrote to when a request came for it. Every call but rdma_destroy_id
 * then fails with EBADF, and rdma_destroy_id frees it.
 */
#include "harness.h"
#include "rdmacm_util.h"

#include <arpa/inet.h>
#include <poll.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

static struct sockaddr_in me;

/* The next event of `ch` (up to 10 s), checked to be `type`, or NULL. */
#define expect(ch, type) t_cm_expect((ch), (type), 10000)

/*
 * An RC id on `ch` connecting to our own address at `port`; with qp != NULL
 * it has a QP on a CQ of the caller's (*cq), as perftest makes them.
 */
static struct rdma_cm_id *connect_to(struct rdma_event_channel *ch, uint16_t port,
				     struct ibv_qp **qp, struct ibv_cq **cq)
{
	struct ibv_qp_init_attr qa = {
		.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_RC};
	struct rdma_conn_param cp = {.retry_count = 7, .rnr_retry_count = 7};
	struct rdma_cm_id *id = t_cm_resolved(ch, &me, port);

	if (qp) {
		*cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
		CHECK(*cq != NULL);
		qa.send_cq = qa.recv_cq = *cq;
		CHECK_EQ_INT(rdma_create_qp(id, NULL, &qa), 0);
		*qp = id->qp;
	}
	CHECK_EQ_INT(rdma_connect(id, &cp), 0);
	return id;
}

/* perftest's order: REJ 8, destroy the id (QP left on it) and the channel, then use both. */
static void destroyed_then_used(void)
{
	struct sockaddr_in dst = me;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id, *other;
	struct ibv_qp *qp = NULL;
	struct ibv_cq *cq = NULL;

	t_case("a rejected id and its channel, destroyed, then used again (perftest -R)");
	CHECK(ch != NULL);
	if (!ch)
		return;
	id = connect_to(ch, 6301, &qp, &cq);
	if ((ev = expect(ch, RDMA_CM_EVENT_REJECTED))) {
		CHECK_EQ_INT(ev->status, 8); /* nobody listens on 6301 */
		rdma_ack_cm_event(ev);
	}
	CHECK_EQ_INT(rdma_destroy_id(id), 0); /* the QP stays, as perftest leaves it */
	rdma_destroy_event_channel(ch);
	/* nothing is created from here on: the freed memory must stay unused by ids */
	dst.sin_port = htons(6301);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == -1 && errno == EINVAL);
	CHECK(rdma_resolve_route(id, 2000) == -1 && errno == EINVAL);
	CHECK(rdma_connect(id, NULL) == -1 && errno == EINVAL);
	CHECK(rdma_disconnect(id) == -1 && errno == EINVAL);
	CHECK(rdma_destroy_id(id) == -1 && errno == EINVAL);
	rdma_destroy_qp(id); /* void: nothing happens */
	rdma_destroy_event_channel(ch);
	other = NULL;
	CHECK(rdma_create_id(ch, &other, NULL, RDMA_PS_TCP) == -1 && errno == EBADF && !other);
	/* what perftest's freed array held when it crashed: a sockaddr_in's bytes */
	id = (struct rdma_cm_id *)(uintptr_t)0x0300007f384a0002ull;
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == -1 && errno == EINVAL);
	CHECK(rdma_destroy_id(id) == -1 && errno == EINVAL);
	CHECK_EQ_INT(ibv_destroy_qp(qp), 0);
	CHECK_EQ_INT(ibv_destroy_cq(cq), 0);
}

/* The channel goes first: its ids stop listening, drop their events, then only destroy works. */
static void channel_destroyed_first(void)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(6302)};
	struct rdma_event_channel *lch = rdma_create_event_channel();
	struct rdma_event_channel *ach = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct sockaddr_in dst = me;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l = NULL, *a = NULL, *c;

	t_case("ids outliving their channel: no listener, no events, destroy frees them");
	CHECK(lch && ach && cch);
	if (!lch || !ach || !cch)
		return;
	CHECK_EQ_INT(rdma_create_id(lch, &l, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ_INT(rdma_bind_addr(l, (struct sockaddr *)&sin), 0);
	CHECK_EQ_INT(rdma_listen(l, 4), 0);
	rdma_destroy_event_channel(lch);
	/* a request for the orphaned listener: refused as for no listener */
	c = connect_to(cch, 6302, NULL, NULL);
	if ((ev = expect(cch, RDMA_CM_EVENT_REJECTED))) {
		CHECK_EQ_INT(ev->status, 8);
		rdma_ack_cm_event(ev);
	}
	CHECK_EQ_INT(rdma_destroy_id(c), 0);
	/* its port is free again */
	CHECK_EQ_INT(rdma_create_id(cch, &c, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ_INT(rdma_bind_addr(c, (struct sockaddr *)&sin), 0);
	CHECK_EQ_INT(rdma_destroy_id(c), 0);
	CHECK(rdma_listen(l, 4) == -1 && errno == EBADF);
	CHECK(rdma_migrate_id(l, cch) == -1 && errno == EBADF);
	CHECK_EQ_INT(rdma_destroy_id(l), 0);
	/* an ADDR_RESOLVED still queued when the channel goes */
	dst.sin_port = htons(6303);
	CHECK_EQ_INT(rdma_create_id(ach, &a, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ_INT(rdma_resolve_addr(a, NULL, (struct sockaddr *)&dst, 2000), 0);
	rdma_destroy_event_channel(ach);
	CHECK(rdma_resolve_route(a, 2000) == -1 && errno == EBADF);
	CHECK_EQ_INT(rdma_destroy_id(a), 0);
	rdma_destroy_event_channel(cch);
}

int main(void)
{
	t_rdmacm_start("api_rdmacm_regress_stale_ids", &me);
	channel_destroyed_first();
	destroyed_then_used();
	return t_finish();
}
