/* SPDX-License-Identifier: MIT */
/* test: env=SOFTVERBS_CM_TIMEOUT=100 */
/* test: env=SOFTVERBS_SHM=0 */
/*
 * api_rdmacm_loopback: the connection manager API in one process, the
 * active and the passive side on the same device (a connection to its own
 * address goes out and comes back through the device's QP1):
 *   - devices, event names, state rules (EINVAL, EADDRINUSE, ENODEV);
 *   - event channels: POLLIN exactly while events wait, O_NONBLOCK EAGAIN;
 *   - a full RC exchange: resolve, route, QP, connect with private data,
 *     CONNECT_REQUEST (56 bytes), accept, ESTABLISHED on both sides, a
 *     SEND through the QPs, disconnect, DISCONNECTED on both sides;
 *   - rdma_reject: REJECTED 28 with the 148-byte private data; no
 *     listener: REJECTED 8; no peer: UNREACHABLE -ETIMEDOUT (the CM
 *     timers scaled down with SOFTVERBS_CM_TIMEOUT);
 *   - a synchronous id (NULL channel) connecting to an async listener;
 *   - rdma_migrate_id moves queued events; destroy drops them.
 * Over UDP (SOFTVERBS_SHM=0): the same-host link to the own address would
 * hold two sockets open past the fd count.
 */
#include "harness.h"
#include "rdmacm_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

static struct sockaddr_in me;

static bool readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

/*
 * The next event of `ch` (waiting up to 10 s), checked to be `type`. A
 * TIMEWAIT_EXIT comes when the timewait of a disconnected id ends, at any
 * time from there on: skipped unless asked for.
 */
static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type type)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev = NULL;

	for (;;) {
		if (poll(&p, 1, 10000) != 1) {
			CHECK_MSG(0, "no event (want %s)", rdma_event_str(type));
			return NULL;
		}
		if (rdma_get_cm_event(ch, &ev)) {
			CHECK_MSG(0, "rdma_get_cm_event: %s", t_errname(errno));
			return NULL;
		}
		if (ev->event != RDMA_CM_EVENT_TIMEWAIT_EXIT || type == RDMA_CM_EVENT_TIMEWAIT_EXIT)
			break;
		rdma_ack_cm_event(ev);
	}
	CHECK_MSG(ev->event == type, "event %s (status %d), want %s", rdma_event_str(ev->event),
		  ev->status, rdma_event_str(type));
	return ev;
}

static void basics(void)
{
	struct ibv_context **devs;
	struct rdma_cm_id *a, *b;
	struct sockaddr_in sin = me, other = me;
	int n = -1;

	t_case("devices, names, state rules");
	devs = rdma_get_devices(&n);
	CHECK(devs && n >= 1 && devs[0] && !devs[n]);
	rdma_free_devices(devs);
	CHECK(!strcmp(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED"));
	CHECK(!strcmp(rdma_event_str(RDMA_CM_EVENT_USER), "UNKNOWN EVENT"));
	CHECK(rdma_create_id(NULL, &a, NULL, (enum rdma_port_space)0x55) == -1 && errno == EINVAL);
	CHECK_EQ_INT(rdma_create_id(NULL, &a, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ_INT(rdma_create_id(NULL, &b, NULL, RDMA_PS_TCP), 0);
	CHECK(rdma_connect(a, NULL) == -1 && errno == EINVAL);
	sin.sin_port = htons(6001);
	CHECK_EQ_INT(rdma_bind_addr(a, (struct sockaddr *)&sin), 0);
	CHECK(a->verbs && a->pd && a->port_num == 1);
	CHECK(rdma_bind_addr(b, (struct sockaddr *)&sin) == -1 && errno == EADDRINUSE);
	CHECK(rdma_bind_addr(a, (struct sockaddr *)&sin) == -1 && errno == EINVAL);
	other.sin_addr.s_addr = htonl(0x0a4d4d4d); /* 10.77.77.77: nobody's */
	CHECK(rdma_bind_addr(b, (struct sockaddr *)&other) == -1 &&
	      (errno == EADDRNOTAVAIL || errno == ENODEV));
	CHECK_EQ_INT(rdma_listen(a, 0), 0);
	CHECK(rdma_listen(a, 0) == -1 && errno == EINVAL);
	CHECK_EQ_INT(ntohs(rdma_get_src_port(a)), 6001);
	CHECK_EQ_INT(rdma_destroy_id(a), 0);
	CHECK_EQ_INT(rdma_destroy_id(b), 0);
}

struct pair {
	struct rdma_event_channel *sch, *cch;
	struct rdma_cm_id *listen, *srv, *cli;
};

static void client_to(struct pair *p, uint16_t port, const void *pdata, uint8_t len, bool qp)
{
	struct sockaddr_in dst = me;
	struct ibv_qp_init_attr qa = {
		.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_RC};
	struct rdma_conn_param cp = {.private_data = pdata,
				     .private_data_len = len,
				     .responder_resources = 1,
				     .initiator_depth = 1,
				     .retry_count = 7,
				     .rnr_retry_count = 7};
	struct rdma_cm_event *ev;

	dst.sin_port = htons(port);
	CHECK_EQ_INT(rdma_create_id(p->cch, &p->cli, p, RDMA_PS_TCP), 0);
	CHECK_EQ_INT(rdma_resolve_addr(p->cli, NULL, (struct sockaddr *)&dst, 1000), 0);
	if ((ev = expect(p->cch, RDMA_CM_EVENT_ADDR_RESOLVED)))
		rdma_ack_cm_event(ev);
	CHECK_EQ_INT(rdma_resolve_route(p->cli, 1000), 0);
	if ((ev = expect(p->cch, RDMA_CM_EVENT_ROUTE_RESOLVED)))
		rdma_ack_cm_event(ev);
	CHECK(p->cli->route.num_paths == 1 && p->cli->route.path_rec->hop_limit == 64);
	if (qp)
		CHECK_EQ_INT(rdma_create_qp(p->cli, NULL, &qa), 0);
	CHECK_EQ_INT(rdma_connect(p->cli, &cp), 0);
}

static void listen_on(struct pair *p, uint16_t port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};

	p->sch = rdma_create_event_channel();
	p->cch = rdma_create_event_channel();
	CHECK(p->sch && p->cch);
	CHECK_EQ_INT(rdma_create_id(p->sch, &p->listen, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ_INT(rdma_bind_addr(p->listen, (struct sockaddr *)&sin), 0); /* wildcard */
	CHECK_EQ_INT(rdma_listen(p->listen, 8), 0);
}

static void close_pair(struct pair *p)
{
	if (p->cli) {
		rdma_destroy_qp(p->cli);
		rdma_destroy_id(p->cli);
	}
	if (p->srv) {
		rdma_destroy_qp(p->srv);
		rdma_destroy_id(p->srv);
	}
	rdma_destroy_id(p->listen);
	rdma_destroy_event_channel(p->sch);
	rdma_destroy_event_channel(p->cch);
	memset(p, 0, sizeof(*p));
}

static void full_exchange(void)
{
	struct ibv_qp_init_attr qa = {
		.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_RC};
	struct rdma_conn_param cp = {.responder_resources = 1,
				     .initiator_depth = 1,
				     .rnr_retry_count = 7,
				     .private_data = "accepted",
				     .private_data_len = 9};
	char buf[64] = "hello over rdma_cm", rbuf[64] = "";
	struct rdma_cm_event *ev;
	struct ibv_mr *smr, *rmr;
	struct ibv_wc wc;
	struct pair p = {0};
	int fl;

	t_case("connect, accept, SEND, disconnect (async, own address)");
	listen_on(&p, 6002);
	CHECK(!readable(p.sch->fd));
	fl = fcntl(p.sch->fd, F_GETFL);
	fcntl(p.sch->fd, F_SETFL, fl | O_NONBLOCK);
	CHECK(rdma_get_cm_event(p.sch, &ev) == -1 && errno == EAGAIN);
	fcntl(p.sch->fd, F_SETFL, fl);
	client_to(&p, 6002, "request!", 9, true);
	ev = expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	if (!ev)
		goto out;
	CHECK(!readable(p.sch->fd));
	p.srv = ev->id;
	CHECK(ev->listen_id == p.listen);
	CHECK_EQ_INT(ev->param.conn.private_data_len, 56);
	CHECK(!memcmp(ev->param.conn.private_data, "request!", 9));
	CHECK(p.srv->verbs == p.cli->verbs && p.srv->pd);
	CHECK_EQ_INT(ntohs(rdma_get_src_port(p.srv)), 6002);
	CHECK(rdma_get_peer_addr(p.srv)->sa_family == AF_INET);
	rdma_ack_cm_event(ev);
	CHECK_EQ_INT(rdma_create_qp(p.srv, NULL, &qa), 0);
	rmr = rdma_reg_msgs(p.srv, rbuf, sizeof(rbuf));
	smr = rdma_reg_msgs(p.cli, buf, sizeof(buf));
	CHECK(rmr && smr);
	CHECK_EQ_INT(rdma_post_recv(p.srv, NULL, rbuf, sizeof(rbuf), rmr), 0);
	CHECK_EQ_INT(rdma_accept(p.srv, &cp), 0);
	if ((ev = expect(p.cch, RDMA_CM_EVENT_ESTABLISHED))) {
		CHECK_EQ_INT(ev->param.conn.private_data_len, 196);
		CHECK(!memcmp(ev->param.conn.private_data, "accepted", 9));
		rdma_ack_cm_event(ev);
	}
	if ((ev = expect(p.sch, RDMA_CM_EVENT_ESTABLISHED)))
		rdma_ack_cm_event(ev);
	CHECK_EQ_INT(rdma_post_send(p.cli, NULL, buf, sizeof(buf), smr, IBV_SEND_SIGNALED), 0);
	CHECK_EQ_INT(rdma_get_send_comp(p.cli, &wc), 1);
	CHECK_EQ_INT(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ_INT(rdma_get_recv_comp(p.srv, &wc), 1);
	CHECK_EQ_INT(wc.status, IBV_WC_SUCCESS);
	CHECK(!strcmp(rbuf, "hello over rdma_cm"));
	CHECK_EQ_INT(rdma_disconnect(p.cli), 0);
	if ((ev = expect(p.sch, RDMA_CM_EVENT_DISCONNECTED)))
		rdma_ack_cm_event(ev);
	CHECK_EQ_INT(rdma_disconnect(p.srv), 0);
	if ((ev = expect(p.cch, RDMA_CM_EVENT_DISCONNECTED)))
		rdma_ack_cm_event(ev);
	rdma_dereg_mr(rmr);
	rdma_dereg_mr(smr);
out:
	close_pair(&p);
}

static void refusals(void)
{
	struct rdma_cm_event *ev;
	struct pair p = {0};
	char why[20] = "go away";

	t_case("reject (28 + private data), no listener (8), no peer (UNREACHABLE)");
	listen_on(&p, 6003);
	client_to(&p, 6003, NULL, 0, true);
	if ((ev = expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST))) {
		CHECK_EQ_INT(rdma_reject(ev->id, why, sizeof(why)), 0);
		rdma_destroy_id(ev->id);
		rdma_ack_cm_event(ev);
	}
	if ((ev = expect(p.cch, RDMA_CM_EVENT_REJECTED))) {
		CHECK_EQ_INT(ev->status, 28);
		CHECK_EQ_INT(ev->param.conn.private_data_len, 148);
		CHECK(!strcmp(ev->param.conn.private_data, "go away"));
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_qp(p.cli);
	rdma_destroy_id(p.cli);
	p.cli = NULL;
	client_to(&p, 6099, NULL, 0, true);
	if ((ev = expect(p.cch, RDMA_CM_EVENT_REJECTED))) {
		CHECK_EQ_INT(ev->status, 8);
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_qp(p.cli);
	rdma_destroy_id(p.cli);
	p.cli = NULL;
	/* a peer address with no device: the REQ is retried, then UNREACHABLE */
	me.sin_addr.s_addr ^= htonl(0x00ff0000);
	client_to(&p, 6003, NULL, 0, true);
	me.sin_addr.s_addr ^= htonl(0x00ff0000);
	if ((ev = expect(p.cch, RDMA_CM_EVENT_UNREACHABLE))) {
		CHECK_EQ_INT(ev->status, -ETIMEDOUT);
		rdma_ack_cm_event(ev);
	}
	close_pair(&p);
}

static void *sync_client(void *arg)
{
	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP}, *res = NULL;
	struct ibv_qp_init_attr qa = {
		.cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1},
		.sq_sig_all = 1};
	char host[INET_ADDRSTRLEN];
	struct rdma_cm_id *id;
	intptr_t ret;

	(void)arg;
	inet_ntop(AF_INET, &me.sin_addr, host, sizeof(host));
	if (rdma_getaddrinfo(host, "6004", &hints, &res))
		return (void *)(intptr_t)-1;
	ret = rdma_create_ep(&id, res, NULL, &qa);
	rdma_freeaddrinfo(res);
	if (ret)
		return (void *)(intptr_t)-2;
	ret = rdma_connect(id, NULL) ? -3 : 0;
	if (!ret)
		ret = rdma_disconnect(id) ? -4 : 0;
	rdma_destroy_ep(id);
	return (void *)ret;
}

static void sync_and_migrate(void)
{
	struct rdma_event_channel *other;
	struct rdma_cm_event *ev;
	struct pair p = {0};
	pthread_t t;
	void *ret = NULL;

	t_case("a synchronous client (rdma_create_ep), migrate, destroy with events pending");
	listen_on(&p, 6004);
	CHECK_EQ_INT(pthread_create(&t, NULL, sync_client, NULL), 0);
	if ((ev = expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST))) {
		struct ibv_qp_init_attr qa = {.cap = {.max_send_wr = 2,
						      .max_recv_wr = 2,
						      .max_send_sge = 1,
						      .max_recv_sge = 1},
					      .qp_type = IBV_QPT_RC};

		p.srv = ev->id;
		rdma_ack_cm_event(ev);
		CHECK_EQ_INT(rdma_create_qp(p.srv, NULL, &qa), 0);
		CHECK_EQ_INT(rdma_accept(p.srv, NULL), 0);
	}
	if ((ev = expect(p.sch, RDMA_CM_EVENT_ESTABLISHED)))
		rdma_ack_cm_event(ev);
	/* the client disconnects first and waits for our DREP */
	if ((ev = expect(p.sch, RDMA_CM_EVENT_DISCONNECTED)))
		rdma_ack_cm_event(ev);
	CHECK_EQ_INT(rdma_disconnect(p.srv), 0);
	pthread_join(t, &ret);
	CHECK_EQ_INT((intptr_t)ret, 0);
	/* queued events move with the id, in order */
	other = rdma_create_event_channel();
	CHECK_EQ_INT(rdma_write_cm_event(p.srv, RDMA_CM_EVENT_USER, 7, 41), 0);
	CHECK(readable(p.sch->fd));
	CHECK_EQ_INT(rdma_migrate_id(p.srv, other), 0);
	CHECK(!readable(p.sch->fd));
	if ((ev = expect(other, RDMA_CM_EVENT_USER))) {
		CHECK_EQ_INT(ev->status, 7);
		CHECK(ev->param.arg == 41);
		rdma_ack_cm_event(ev);
	}
	CHECK_EQ_INT(rdma_write_cm_event(p.srv, RDMA_CM_EVENT_USER, 5, 42), 0);
	CHECK(rdma_write_cm_event(p.srv, RDMA_CM_EVENT_ESTABLISHED, 0, 0) == -1 && errno == EINVAL);
	CHECK(readable(other->fd));
	rdma_destroy_qp(p.srv);
	CHECK_EQ_INT(rdma_destroy_id(p.srv), 0); /* with the USER event still queued */
	p.srv = NULL;
	CHECK(!readable(other->fd));
	rdma_destroy_event_channel(other);
	close_pair(&p);
}

int main(void)
{
	t_rdmacm_start("api_rdmacm_loopback", &me);
	basics();
	full_exchange();
	refusals();
	sync_and_migrate();
	return t_finish();
}
