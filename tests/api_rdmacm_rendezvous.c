/* SPDX-License-Identifier: MIT */
/* test: env=SOFTVERBS_CM_TIMEOUT=100 */
/* test: env=SOFTVERBS_SHM=0 */
/*
 * api_rdmacm_rendezvous: the same-host rendezvous (docs/rdmacm.md), two
 * processes with a device each on one loopback address A that neither
 * device has, as rdma-core's Python tests use the address of the
 * device's interface for both sides:
 *   - a listener bound to A:P in the child; in the parent, a second
 *     listen on A:P fails with EADDRINUSE;
 *   - the parent, bound to A too, connects to A:P: the request reaches
 *     the child's listener (not the parent's own device, not a device at
 *     A, which would time out as UNREACHABLE), which sees A:P as its
 *     local address and A as the peer's; ESTABLISHED on both sides, a
 *     SEND goes through, DISCONNECTED on both sides;
 *   - once the child's listener is gone, A:P can be listened on again.
 * Over UDP (SOFTVERBS_SHM=0): a same-host link to the child's device
 * closes when its hangup is seen, at any time, which the fd count at the
 * end would catch.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

static struct sockaddr_in addr_a; /* A:P */

/* The next event of `ch` within 10 s if it is `type` (TIMEWAIT_EXIT skipped), else NULL. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, enum rdma_cm_event_type type)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;

	for (;;) {
		if (poll(&p, 1, 10000) != 1 || rdma_get_cm_event(ch, &ev))
			return NULL;
		if (ev->event != RDMA_CM_EVENT_TIMEWAIT_EXIT)
			break;
		rdma_ack_cm_event(ev);
	}
	if (ev->event != type) {
		fprintf(stderr, "# event %s (status %d), want %s\n", rdma_event_str(ev->event),
			ev->status, rdma_event_str(type));
		rdma_ack_cm_event(ev);
		return NULL;
	}
	return ev;
}

static int make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
		.sq_sig_all = 1,
	};

	return rdma_create_qp(id, NULL, &qa);
}

static bool same_sin(const struct sockaddr *sa, const struct sockaddr_in *want, bool port)
{
	const struct sockaddr_in *s = (const struct sockaddr_in *)(const void *)sa;

	return s->sin_family == AF_INET && s->sin_addr.s_addr == want->sin_addr.s_addr &&
	       (!port || s->sin_port == want->sin_port);
}

/*
 * The child: listen on A:P, say 'L' on `out`, take one connection and
 * receive one SEND on it, then wait for the disconnect. Its exit status
 * is the number of the step that failed, 0 when all went well.
 */
static int listener(int out)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *l = NULL, *c;
	struct rdma_cm_event *ev;
	char buf[64] = "";
	struct ibv_mr *mr;
	struct ibv_wc wc;

	if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&addr_a) || rdma_listen(l, 4))
		return 1;
	if (write(out, "L", 1) != 1)
		return 2;
	ev = next_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	if (!ev)
		return 3;
	c = ev->id;
	if (!same_sin(rdma_get_local_addr(c), &addr_a, true) ||
	    !same_sin(rdma_get_peer_addr(c), &addr_a, false))
		return 4;
	rdma_ack_cm_event(ev);
	if (make_qp(c) || !(mr = rdma_reg_msgs(c, buf, sizeof(buf))) ||
	    rdma_post_recv(c, NULL, buf, sizeof(buf), mr) || rdma_accept(c, NULL))
		return 5;
	ev = next_event(ch, RDMA_CM_EVENT_ESTABLISHED);
	if (!ev)
		return 6;
	rdma_ack_cm_event(ev);
	if (rdma_get_recv_comp(c, &wc) != 1 || wc.status != IBV_WC_SUCCESS || strcmp(buf, "hi"))
		return 7;
	ev = next_event(ch, RDMA_CM_EVENT_DISCONNECTED);
	if (!ev)
		return 8;
	rdma_ack_cm_event(ev);
	rdma_dereg_mr(mr);
	rdma_destroy_qp(c);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* Wait up to 10 s for one byte from `fd`: true if it is `want`. */
static bool got(int fd, char want)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c = 0;

	return poll(&p, 1, 10000) == 1 && read(fd, &c, 1) == 1 && c == want;
}

/* Listen on A:P in this process: rdma_listen fails with `eno`, or succeeds for 0. */
static void listen_on_a(int eno)
{
	struct rdma_cm_id *id;
	int ret;

	if (!CHECK_EQ_INT(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0))
		return;
	CHECK_EQ_INT(rdma_bind_addr(id, (struct sockaddr *)&addr_a), 0);
	ret = rdma_listen(id, 1);
	CHECK_MSG(eno ? ret == -1 && errno == eno : ret == 0, "rdma_listen: %d (%s), want %s", ret,
		  t_errname(errno), eno ? t_errname(eno) : "0");
	CHECK_EQ_INT(rdma_destroy_id(id), 0);
}

static void connect_to_listener(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in src = addr_a;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	char msg[64] = "hi";
	struct ibv_mr *mr;
	union ibv_gid own;
	struct ibv_wc wc;

	t_case("a connection to A:P from A in another process reaches the listener");
	if (!CHECK(ch) || !CHECK_EQ_INT(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0))
		return;
	src.sin_port = 0;
	CHECK_EQ_INT(
		rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&addr_a, 1000),
		0);
	if ((ev = next_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED)))
		rdma_ack_cm_event(ev);
	CHECK_EQ_INT(rdma_resolve_route(id, 1000), 0);
	if ((ev = next_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED)))
		rdma_ack_cm_event(ev);
	CHECK_EQ_INT(make_qp(id), 0);
	mr = rdma_reg_msgs(id, msg, sizeof(msg));
	CHECK(mr);
	CHECK_EQ_INT(rdma_connect(id, NULL), 0);
	ev = next_event(ch, RDMA_CM_EVENT_ESTABLISHED);
	CHECK_MSG(ev, "no ESTABLISHED: the request did not reach the listener");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK_EQ_INT(ibv_query_gid(id->verbs, 1, 0, &own), 0);
	CHECK_MSG(memcmp(&own, &id->route.addr.addr.ibaddr.dgid, 16),
		  "the destination GID is the own device's");
	if (ev && mr) {
		CHECK_EQ_INT(rdma_post_send(id, NULL, msg, sizeof(msg), mr, 0), 0);
		CHECK_EQ_INT(rdma_get_send_comp(id, &wc), 1);
		CHECK_EQ_INT(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ_INT(rdma_disconnect(id), 0);
		if ((ev = next_event(ch, RDMA_CM_EVENT_DISCONNECTED)))
			rdma_ack_cm_event(ev);
		CHECK(ev);
	}
	if (mr)
		rdma_dereg_mr(mr);
	rdma_destroy_qp(id);
	CHECK_EQ_INT(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	int fds[2], status = -1, n = 0;
	struct ibv_context **devs;
	pid_t pid;

	addr_a.sin_family = AF_INET;
	addr_a.sin_addr.s_addr = htonl(0x7f4d0001); /* 127.77.0.1: no device takes it */
	addr_a.sin_port = htons((uint16_t)(20000 + getpid() % 20000));
	if (pipe(fds))
		return 1;
	pid = fork(); /* before the library opens a device: each process has its own */
	if (pid == 0) {
		close(fds[0]);
		_exit(listener(fds[1]));
	}
	close(fds[1]);
	devs = rdma_get_devices(&n); /* the library's device stays open: before the fd count */
	t_start("api_rdmacm_rendezvous");
	if (!devs || !n) {
		if (pid > 0)
			kill(pid, SIGKILL);
		t_skip_all("no softverbs device");
	}
	rdma_free_devices(devs);
	if (!CHECK_MSG(pid > 0 && got(fds[0], 'L'), "the listener did not start")) {
		if (pid > 0)
			kill(pid, SIGKILL);
	} else {
		t_case("a second listener on A:P in another process: EADDRINUSE");
		listen_on_a(EADDRINUSE);
		connect_to_listener();
	}
	if (pid > 0 && waitpid(pid, &status, 0) == pid) {
		t_case("the listener's side");
		CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			  "the listener failed at step %d",
			  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		t_case("the listener gone, A:P can be listened on again");
		listen_on_a(0);
	}
	return t_finish(); /* fds[0] still open: it was counted at the start */
}
