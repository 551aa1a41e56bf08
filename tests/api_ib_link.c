/* SPDX-License-Identifier: MIT */
/*
 * api_ib_link: the InfiniBand link layer (SOFTVERBS_LINK_LAYER=ib).
 *
 * The port reports IBV_LINK_LAYER_INFINIBAND, LID 1 + (address & 0x7fff)
 * and IB GIDs. Two processes, each with its own device, address each
 * other by LID alone (is_global 0), as qperf does: an RC pair moves a
 * WRITE, a READ and a SEND, every byte checked; a UD SEND arrives with
 * the sender's LID in wc.slid, no GRH, sl 0, and the reply AH made from
 * that completion (a LID route) reaches the sender. A GRH stays optional
 * but allowed. LIDs that name no device, and a route without GRH on the
 * Ethernet link layer, are EINVAL.
 */
/* test: env=SOFTVERBS_LINK_LAYER=ib */
/* test: timeout=240 */
#include "harness.h"
#include "traffic.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define BUF (256u << 10)
#define ACC                                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)
#define QKEY 0x11111111

/* What one process tells the other. */
struct peer {
	uint16_t lid;
	uint32_t rc_qpn, ud_qpn, rkey;
	uint64_t addr;
};

struct side {
	struct t_ep rc, ud;
	uint16_t lid;
	struct peer peer;
};

static uint16_t port_lid(struct ibv_context *ctx)
{
	struct ibv_port_attr pa;

	if (!CHECK_RET(ibv_query_port(ctx, 1, &pa), 0))
		return 0;
	return pa.lid;
}

static struct ibv_ah_attr lid_route(uint16_t lid)
{
	struct ibv_ah_attr ah = {0};

	ah.dlid = lid;
	ah.port_num = 1;
	ah.is_global = 0;
	return ah;
}

/* RC: INIT -> RTR -> RTS towards `p` with a path that has no GRH. 0 or -1. */
static int connect_by_lid(struct t_ep *e, const struct peer *p)
{
	struct ibv_qp_attr a = {0};

	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = p->rc_qpn;
	a.rq_psn = 7;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr = lid_route(p->lid);
	if (!CHECK_RET(ibv_modify_qp(e->qp, &a,
				     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					     IBV_QP_MIN_RNR_TIMER),
		       0))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 7;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	return CHECK_RET(ibv_modify_qp(e->qp, &a,
				       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					       IBV_QP_MAX_QP_RD_ATOMIC),
			 0) ?
		       0 :
		       -1;
}

/* Set up both endpoints on one device, swap addresses over `sock`, connect. 0 or -1. */
static int side_up(struct side *s, int sock)
{
	struct t_addr self;
	struct peer mine;

	if (t_ep_init(&s->rc, NULL, IBV_QPT_RC, BUF, ACC, 16) ||
	    t_ep_init(&s->ud, s->rc.ctx, IBV_QPT_UD, BUF, IBV_ACCESS_LOCAL_WRITE, 16))
		return -1;
	s->lid = port_lid(s->rc.ctx);
	memset(&mine, 0, sizeof(mine));
	mine.lid = s->lid;
	mine.rc_qpn = s->rc.qp->qp_num;
	mine.ud_qpn = s->ud.qp->qp_num;
	mine.rkey = s->rc.mr->rkey;
	mine.addr = (uintptr_t)s->rc.buf;
	if (t_xfer(sock, &mine, sizeof(mine), true) ||
	    t_xfer(sock, &s->peer, sizeof(s->peer), false))
		return -1;
	self = t_addr_of(&s->ud, 0);
	if (t_connect_to(&s->ud, &self, 1, IBV_MTU_1024))
		return -1;
	return connect_by_lid(&s->rc, &s->peer);
}

static void side_down(struct side *s)
{
	t_ep_destroy(&s->ud, false);
	t_ep_destroy(&s->rc, true);
}

static int post_ud(struct t_ep *e, struct ibv_ah *ah, uint32_t qpn, uint32_t len, uint64_t id)
{
	struct ibv_sge sge = {(uintptr_t)e->buf, len, e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = QKEY;
	return ibv_post_send(e->qp, &wr, &bad);
}

/*
 * The child: receives a UD message by LID and answers it through the AH
 * made from its completion, then checks what the parent wrote into its
 * RC buffer and sends it back over RC. Its exit status counts failures.
 */
static int child(int sock)
{
	struct side s;
	struct ibv_wc wc;
	struct ibv_ah *reply;
	uint8_t *want = malloc(BUF);
	char cmd;
	int bad = 0;

	if (!want || side_up(&s, sock))
		return 100;
	if (t_post_recv(&s.ud, 1, 0, 4096) || t_post_recv(&s.rc, 2, BUF / 2, 64))
		return 101;
	cmd = 'r';
	if (t_xfer(sock, &cmd, 1, true))
		return 102;
	/* a UD message from the parent, sent by LID */
	if (t_poll(s.ud.cq, &wc, 1, 30000) != 1 || wc.status != IBV_WC_SUCCESS)
		return 103;
	bad += wc.slid != s.peer.lid;
	bad += (wc.wc_flags & IBV_WC_GRH) != 0;
	bad += wc.sl != 0;
	bad += wc.src_qp != s.peer.ud_qpn;
	bad += wc.byte_len != 40 + 1500;
	t_fill(want, 1500, 9);
	bad += memcmp(s.ud.buf + 40, want, 1500) != 0;
	reply = ibv_create_ah_from_wc(s.ud.pd, &wc, (struct ibv_grh *)(void *)s.ud.buf, 1);
	if (!reply)
		return 104;
	memcpy(s.ud.buf, "reply by LID", 13);
	if (post_ud(&s.ud, reply, wc.src_qp, 13, 3) || t_poll(s.ud.cq, &wc, 1, 30000) != 1 ||
	    wc.status != IBV_WC_SUCCESS)
		return 105;
	ibv_destroy_ah(reply);
	/* the parent WRITEs, then SENDs: its pattern must be in the first half */
	if (t_poll(s.rc.cq, &wc, 1, 30000) != 1 || wc.status != IBV_WC_SUCCESS ||
	    wc.opcode != IBV_WC_RECV)
		return 106;
	t_fill(want, BUF / 2, 4);
	bad += memcmp(s.rc.buf, want, BUF / 2) != 0;
	bad += memcmp(s.rc.buf + BUF / 2, "over RC", 8) != 0;
	if (t_xfer(sock, &bad, sizeof(bad), true) || t_xfer(sock, &cmd, 1, false))
		return 107;
	side_down(&s);
	free(want);
	return 0;
}

static void test_port(void)
{
	struct ibv_context *ctx = t_open_dev();
	struct ibv_port_attr pa;
	struct ibv_gid_entry ge;
	uint32_t a;

	t_case("the port: InfiniBand link layer, LID from the address, IB GIDs");
	if (!CHECK(ctx))
		return;
	if (CHECK_RET(ibv_query_port(ctx, 1, &pa), 0) &&
	    CHECK_RET(ibv_query_gid_ex(ctx, 1, 0, &ge, 0), 0)) {
		CHECK_EQ_INT(pa.link_layer, IBV_LINK_LAYER_INFINIBAND);
		CHECK_EQ_INT(pa.state, IBV_PORT_ACTIVE);
		CHECK(!(pa.port_cap_flags & IBV_PORT_IP_BASED_GIDS));
		CHECK_EQ_INT(ge.gid_type, IBV_GID_TYPE_IB);
		memcpy(&a, &ge.gid.raw[12], 4);
		CHECK_EQ_INT(pa.lid, 1 + (ntohl(a) & 0x7fff));
		CHECK(pa.lid >= 1 && pa.lid <= 0xbfff);
	}
	CHECK_RET(ibv_close_device(ctx), 0);
}

static void test_bad_routes(void)
{
	static const uint16_t bad_lids[] = {0, 0x8001, 0xbfff, 0xc000, 0xfffe, 0xffff};
	struct ibv_context *ctx = t_open_dev();
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	union ibv_gid gid;
	size_t i;

	t_case("LIDs that name no device; a GRH is still allowed");
	if (!CHECK(pd))
		return;
	for (i = 0; i < SV_ARRAY_N(bad_lids); i++) {
		aa = lid_route(bad_lids[i]);
		CHECK_MSG(!ibv_create_ah(pd, &aa) && errno == EINVAL, "DLID 0x%x: want EINVAL",
			  bad_lids[i]);
	}
	aa = lid_route(port_lid(ctx));
	ah = ibv_create_ah(pd, &aa);
	if (CHECK(ah))
		CHECK_RET(ibv_destroy_ah(ah), 0);
	CHECK_RET(ibv_query_gid(ctx, 1, 0, &gid), 0);
	aa = t_ah_attr(&gid);
	ah = ibv_create_ah(pd, &aa);
	if (CHECK(ah))
		CHECK_RET(ibv_destroy_ah(ah), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);

	t_case("the Ethernet link layer needs the GRH");
	setenv("SOFTVERBS_LINK_LAYER", "eth", 1);
	ctx = t_open_dev();
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (CHECK(pd)) {
		struct ibv_port_attr pa;

		CHECK_RET(ibv_query_port(ctx, 1, &pa), 0);
		CHECK_EQ_INT(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
		CHECK_EQ_INT(pa.lid, 0);
		aa = lid_route(2);
		CHECK_ERRNO_PTR(ibv_create_ah(pd, &aa), EINVAL);
		CHECK_RET(ibv_dealloc_pd(pd), 0);
	}
	if (ctx)
		CHECK_RET(ibv_close_device(ctx), 0);
	setenv("SOFTVERBS_LINK_LAYER", "ib", 1);
}

static void test_two_processes(void)
{
	struct side s;
	struct ibv_wc wc;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	int sv[2], bad = -1, status;
	pid_t pid;
	char cmd;

	t_case("two processes by LID alone: UD there and back, RC WRITE, READ and SEND");
	if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0))
		return;
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		_exit(child(sv[1]));
	}
	close(sv[1]);
	if (side_up(&s, sv[0]) || !CHECK_RET(t_xfer(sv[0], &cmd, 1, false), 0))
		goto out;
	CHECK_MSG(s.lid != s.peer.lid, "both devices have LID 0x%x", s.lid);

	/* UD by LID, and the child's reply through the AH it built from the completion */
	aa = lid_route(s.peer.lid);
	ah = ibv_create_ah(s.ud.pd, &aa);
	if (!CHECK(ah))
		goto out;
	CHECK_RET(t_post_recv(&s.ud, 5, 0, 4096), 0);
	t_fill(s.ud.buf + 2048, 1500, 9);
	memmove(s.ud.buf, s.ud.buf + 2048, 1500);
	CHECK_RET(post_ud(&s.ud, ah, s.peer.ud_qpn, 1500, 4), 0);
	{
		struct ibv_wc w2[2];

		/* our send completion and the reply, in either order */
		if (CHECK_EQ_INT(t_poll(s.ud.cq, w2, 2, 30000), 2)) {
			wc = w2[0].opcode == IBV_WC_RECV ? w2[0] : w2[1];
			CHECK(w2[0].status == IBV_WC_SUCCESS && w2[1].status == IBV_WC_SUCCESS);
			CHECK_EQ_INT(wc.opcode, IBV_WC_RECV);
			CHECK_EQ_INT(wc.slid, s.peer.lid);
			CHECK_EQ_INT(wc.byte_len, 40 + 13);
			CHECK(!memcmp(s.ud.buf + 40, "reply by LID", 13));
		}
	}
	CHECK_RET(ibv_destroy_ah(ah), 0);

	/* RC over a path without GRH */
	t_fill(s.rc.buf, BUF / 2, 4);
	CHECK_RET(t_post(&s.rc, IBV_WR_RDMA_WRITE, 6, 0, BUF / 2, s.peer.addr, s.peer.rkey,
			 IBV_SEND_SIGNALED),
		  0);
	CHECK(t_poll(s.rc.cq, &wc, 1, 30000) == 1 && wc.status == IBV_WC_SUCCESS);
	CHECK_RET(t_post(&s.rc, IBV_WR_RDMA_READ, 7, BUF / 2, BUF / 2, s.peer.addr, s.peer.rkey,
			 IBV_SEND_SIGNALED),
		  0);
	CHECK(t_poll(s.rc.cq, &wc, 1, 30000) == 1 && wc.status == IBV_WC_SUCCESS);
	CHECK_MSG(!memcmp(s.rc.buf, s.rc.buf + BUF / 2, BUF / 2), "READ back differs");
	memcpy(s.rc.buf, "over RC", 8);
	CHECK_RET(t_post(&s.rc, IBV_WR_SEND, 8, 0, 8, 0, 0, IBV_SEND_SIGNALED), 0);
	CHECK(t_poll(s.rc.cq, &wc, 1, 30000) == 1 && wc.status == IBV_WC_SUCCESS);
	CHECK_RET(t_xfer(sv[0], &bad, sizeof(bad), false), 0);
	CHECK_MSG(bad == 0, "the child found %d problems", bad);
	cmd = 'q';
	t_xfer(sv[0], &cmd, 1, true);
	side_down(&s);
out:
	close(sv[0]);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
	CHECK_MSG(WEXITSTATUS(status) == 0, "child exit %d", WEXITSTATUS(status));
}

int main(void)
{
	t_start("api_ib_link");
	test_port();
	test_bad_routes();
	test_two_processes();
	return t_finish();
}
