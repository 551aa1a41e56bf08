/* SPDX-License-Identifier: MIT */
/* test: timeout=60 */
/*
 * api_rdmacm_mcast: multicast joins through librdmacm, in one process.
 *
 *   a. refused: a join on an id that is not bound (EINVAL), of an address
 *      that is not multicast (EINVAL), on a TCP (RC) id (EINVAL);
 *      join_multicast_ex with an unknown comp_mask bit (ENOTSUP), without
 *      JOIN_FLAGS or with an unknown flag (EINVAL); a leave of an address
 *      never joined (EADDRNOTAVAIL);
 *   b. two UDP ids on the device join the same group (one with
 *      join_multicast, one with join_multicast_ex): each gets
 *      RDMA_CM_EVENT_MULTICAST_JOIN with param.ud as the kernel's RoCE
 *      path gives it (AH to the IPv4-mapped group GID, QPN 0xffffff,
 *      Q_Key 0x01234567) and its context in private_data;
 *   c. a UD SEND from the first id's QP with the event's AH reaches the
 *      second id's QP intact, and a third id's, whose QP was made after
 *      its join; after the second id leaves, the next one does not; a
 *      second leave is EADDRNOTAVAIL.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdbool.h>

#include <rdma/rdma_cma.h>

enum {
	LEN = 256,
	SLOT = 40 + LEN,
};

struct player {
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	uint8_t buf[2 * SLOT];
	struct rdma_ud_param ud;
};

/* An rdma_cm call's result `r`: it must have failed (-1) with errno `eno`. */
static int cm_fails_at(int r, int eno, const char *expr, int line)
{
	int e = errno;

	return t_check(r == -1 && e == eno, __FILE__, line, "%s: want -1/%s, got %d/%s", expr,
		       t_errname(eno), r, t_errname(e));
}
#define CM_FAILS(expr, eno) cm_fails_at((expr), (eno), #expr, __LINE__)

static struct rdma_event_channel *ch;
static struct sockaddr_in me, group;

/* The next event on the channel, which must be `type` for `id`; its ud param into *ud. */
static int expect_event(struct rdma_cm_id *id, enum rdma_cm_event_type type,
			struct rdma_ud_param *ud)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *e;
	int ok;

	if (!CHECK_MSG(poll(&p, 1, 5000) == 1, "no event (want %s)", rdma_event_str(type)) ||
	    !CHECK_RET(rdma_get_cm_event(ch, &e), 0))
		return -1;
	ok = CHECK_MSG(e->event == type && e->id == id, "event %s, want %s",
		       rdma_event_str(e->event), rdma_event_str(type));
	if (ud)
		*ud = e->param.ud;
	rdma_ack_cm_event(e);
	return ok ? 0 : -1;
}

/* The id's UD QP and the MR of its buffer; 0 or -1. */
static int player_qp(struct player *p)
{
	struct ibv_qp_init_attr ia = {.qp_type = IBV_QPT_UD};

	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	if (!CHECK_RET(rdma_create_qp(p->id, NULL, &ia), 0))
		return -1;
	p->mr = ibv_reg_mr(p->id->pd, p->buf, sizeof(p->buf), IBV_ACCESS_LOCAL_WRITE);
	return CHECK(p->mr) ? 0 : -1;
}

/* A UDP id bound to the device's address, resolved to the group, with a QP if `qp`; 0 or -1. */
static int player_open(struct player *p, bool qp)
{
	memset(p, 0, sizeof(*p));
	if (!CHECK_RET(rdma_create_id(ch, &p->id, p, RDMA_PS_UDP), 0) ||
	    !CHECK_RET(rdma_bind_addr(p->id, (struct sockaddr *)&me), 0) ||
	    !CHECK_RET(rdma_resolve_addr(p->id, NULL, (struct sockaddr *)&group, 1000), 0) ||
	    expect_event(p->id, RDMA_CM_EVENT_ADDR_RESOLVED, NULL))
		return -1;
	return qp ? player_qp(p) : 0;
}

static void player_close(struct player *p)
{
	if (p->mr)
		ibv_dereg_mr(p->mr);
	if (p->id && p->id->qp)
		rdma_destroy_qp(p->id);
	if (p->id)
		CHECK_RET(rdma_destroy_id(p->id), 0);
}

/* The MULTICAST_JOIN event's ud param: the kernel's RoCE values. */
static void check_ud(const struct rdma_ud_param *ud, void *context)
{
	CHECK_EQ_INT(ud->qp_num, 0xffffff);
	CHECK_EQ_INT(ud->qkey, 0x01234567);
	CHECK(ud->private_data == context);
	CHECK(ud->ah_attr.is_global);
	CHECK_EQ_INT(ud->ah_attr.grh.dgid.raw[10], 0xff);
	CHECK_EQ_INT(ud->ah_attr.grh.dgid.raw[11], 0xff);
	CHECK(!memcmp(&ud->ah_attr.grh.dgid.raw[12], &group.sin_addr, 4));
	CHECK_EQ_INT(ud->ah_attr.port_num, 1);
}

/* Send LEN bytes of `seed` from a to the group; a's send completes. */
static void send_group(struct player *a, uint8_t seed)
{
	struct ibv_ah *ah = ibv_create_ah(a->id->pd, &a->ud.ah_attr);
	struct ibv_sge sge = {(uintptr_t)a->buf, LEN, a->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;
	int n = 0;

	if (!CHECK(ah))
		return;
	memset(a->buf, seed, LEN);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = a->ud.qp_num;
	wr.wr.ud.remote_qkey = a->ud.qkey;
	CHECK_RET(ibv_post_send(a->id->qp, &wr, &bad), 0);
	for (int i = 0; i < 5000 && n == 0; i++) {
		n = ibv_poll_cq(a->id->send_cq, 1, &wc);
		if (!n)
			usleep(1000);
	}
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS);
	ibv_destroy_ah(ah);
}

/* Within `ms`: did b receive LEN bytes of `seed` (true), or nothing (false)? */
static bool received(struct player *b, uint8_t seed, int ms)
{
	struct ibv_wc wc;

	for (int i = 0; i < ms; i++) {
		if (ibv_poll_cq(b->id->recv_cq, 1, &wc) == 1) {
			uint8_t ref[LEN];

			memset(ref, seed, LEN);
			CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == SLOT &&
			      !memcmp(b->buf + 40, ref, LEN));
			return true;
		}
		usleep(1000);
	}
	return false;
}

static void post_recv(struct player *b)
{
	struct ibv_sge sge = {(uintptr_t)b->buf, SLOT, b->mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;

	CHECK_RET(ibv_post_recv(b->id->qp, &wr, &bad), 0);
}

static void case_refused(void)
{
	struct rdma_cm_id *id, *tcp;
	struct sockaddr_in uni = me;
	struct rdma_cm_join_mc_attr_ex ex = {0};
	struct player p;

	t_case("refused joins and leaves");
	if (!CHECK_RET(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP), 0) ||
	    !CHECK_RET(rdma_create_id(ch, &tcp, NULL, RDMA_PS_TCP), 0))
		return;
	CM_FAILS(rdma_join_multicast(id, (struct sockaddr *)&group, NULL), EINVAL); /* unbound */
	CHECK_RET(rdma_bind_addr(tcp, (struct sockaddr *)&me), 0);
	CM_FAILS(rdma_join_multicast(tcp, (struct sockaddr *)&group, NULL), EINVAL); /* RC */
	CM_FAILS(rdma_leave_multicast(id, (struct sockaddr *)&group), EADDRNOTAVAIL);
	CHECK_RET(rdma_destroy_id(tcp), 0);
	CHECK_RET(rdma_destroy_id(id), 0);
	if (player_open(&p, true))
		return;
	CM_FAILS(rdma_join_multicast(p.id, (struct sockaddr *)&uni, NULL), EINVAL);
	ex.addr = (struct sockaddr *)&group;
	ex.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
	CM_FAILS(rdma_join_multicast_ex(p.id, &ex, NULL), ENOTSUP);
	ex.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
	CM_FAILS(rdma_join_multicast_ex(p.id, &ex, NULL), EINVAL);
	ex.comp_mask |= RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	ex.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
	CM_FAILS(rdma_join_multicast_ex(p.id, &ex, NULL), EINVAL);
	player_close(&p);
}

static void case_traffic(void)
{
	static int ctx_a, ctx_b;
	struct rdma_cm_join_mc_attr_ex ex = {0};
	struct player a, b, c;

	t_case("two ids join: MULTICAST_JOIN with the kernel's UD parameters and the context");
	if (player_open(&a, true) || player_open(&b, true) || player_open(&c, false))
		return;
	CHECK_RET(rdma_join_multicast(a.id, (struct sockaddr *)&group, &ctx_a), 0);
	if (expect_event(a.id, RDMA_CM_EVENT_MULTICAST_JOIN, &a.ud))
		return;
	check_ud(&a.ud, &ctx_a);
	ex.addr = (struct sockaddr *)&group;
	ex.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	ex.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
	CHECK_RET(rdma_join_multicast_ex(b.id, &ex, &ctx_b), 0);
	if (expect_event(b.id, RDMA_CM_EVENT_MULTICAST_JOIN, &b.ud))
		return;
	check_ud(&b.ud, &ctx_b);
	CHECK_RET(rdma_join_multicast(c.id, (struct sockaddr *)&group, NULL), 0);
	if (expect_event(c.id, RDMA_CM_EVENT_MULTICAST_JOIN, &c.ud) || player_qp(&c))
		return; /* c's QP, made after the join, is in the group */

	t_case("a SEND to the group reaches the other ids' QPs; after a leave, nothing");
	post_recv(&b);
	post_recv(&c);
	send_group(&a, 0x5c);
	CHECK(received(&b, 0x5c, 5000));
	CHECK(received(&c, 0x5c, 5000));
	player_close(&c);
	CHECK_RET(rdma_leave_multicast(b.id, (struct sockaddr *)&group), 0);
	post_recv(&b);
	send_group(&a, 0x6d);
	CHECK(!received(&b, 0x6d, 300));
	CM_FAILS(rdma_leave_multicast(b.id, (struct sockaddr *)&group), EADDRNOTAVAIL);
	CHECK_RET(rdma_leave_multicast(a.id, (struct sockaddr *)&group), 0);
	player_close(&b);
	player_close(&a);
}

int main(void)
{
	struct ibv_context **devs;
	union ibv_gid gid;
	uint32_t tag = (uint32_t)getpid();
	int n;

	devs = rdma_get_devices(&n); /* the library's device stays open: before the fd count */
	t_start("api_rdmacm_mcast");
	if (!CHECK(devs && n > 0) || !CHECK_RET(ibv_query_gid(devs[0], 1, 0, &gid), 0))
		return t_finish();
	memset(&me, 0, sizeof(me));
	me.sin_family = AF_INET;
	memcpy(&me.sin_addr, gid.raw + 12, 4);
	rdma_free_devices(devs);
	group = me;
	group.sin_addr.s_addr = htonl(0xef000000u | (tag & 0xffff) << 8 | 0x21); /* 239.x.y.33 */
	ch = rdma_create_event_channel();
	if (!CHECK(ch))
		return t_finish();
	case_refused();
	case_traffic();
	rdma_destroy_event_channel(ch);
	return t_finish();
}
