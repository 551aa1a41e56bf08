/* SPDX-License-Identifier: MIT */
/*
 * api_mcast.c - UD multicast: ibv_attach_mcast / ibv_detach_mcast.
 *
 *   a. the device reports rxe's multicast limits;
 *   b. the kernel's rules: a non-UD QP or a non-multicast GID is EINVAL,
 *      attaching twice succeeds, detaching what is not attached (another
 *      group, another LID, twice) is EINVAL, the 57th QP of a group is
 *      ENOMEM, an AH with a multicast DGID is accepted;
 *   c. two processes, each its own device, over the same-host link (the
 *      default) and over UDP (SOFTVERBS_SHM=0): a UD SEND to a group
 *      (remote QPN 0xffffff) reaches every QP attached to it in both
 *      processes, the sender's own QP included, each message intact with
 *      the group as the GRH's destination and the sender's QPN as src_qp;
 *      QPs of another group, with another Q_Key or not attached get
 *      nothing; after a detach and a destroy (which detaches) only the
 *      remaining members receive.
 */
#include "harness.h"
#include "traffic.h"

#include <sys/socket.h>
#include <sys/wait.h>

/* test: timeout=120 */

enum {
	NMSG = 4,
	MLEN = 700,
	SLOT = 1024, /* a receive: 40-byte GRH area and the message */
	NQP = 4, /* QPs per process */
	QKEY = 0x11111111, /* t_qp_init's */
	OTHER_QKEY = 0x22222222,
	WAIT_MS = 5000,
	QUIET_MS = 300, /* how long "nothing arrives" is watched */
};

/* the test's own groups (another test may use multicast at the same time): of its pid */
static uint32_t tag;

/* 239.x.y.`last` (x.y from the pid), IPv4-mapped */
static union ibv_gid group_gid(uint8_t last)
{
	union ibv_gid g;

	memset(&g, 0, sizeof(g));
	g.raw[10] = g.raw[11] = 0xff;
	g.raw[12] = 239;
	g.raw[13] = (uint8_t)(tag >> 8);
	g.raw[14] = (uint8_t)tag;
	g.raw[15] = last;
	return g;
}

/* A UD QP on `pd` with `cq`, in RTS with Q_Key `qkey`; NULL on failure. */
static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t qkey)
{
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = qkey};
	struct ibv_qp *qp;

	ia.cap.max_send_wr = ia.cap.max_recv_wr = 2 * NMSG;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	if (!CHECK(qp))
		return NULL;
	if (!CHECK_RET(ibv_modify_qp(qp, &a,
				     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
		       0) ||
	    !CHECK_RET(t_qp_rts(qp, 0, NULL, 0, 0, IBV_MTU_1024), 0)) {
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

static void case_rules(void)
{
	struct ibv_context *ctx = t_open_dev();
	struct ibv_device_attr da;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *ud, *rc, *many[57];
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	union ibv_gid g = group_gid(3), g2 = group_gid(4), uni;

	t_case("device limits: rxe's (8192 groups, 56 QPs a group, 0x70000 in all)");
	if (!CHECK(ctx))
		return;
	CHECK_RET(ibv_query_device(ctx, &da), 0);
	CHECK_EQ_INT(da.max_mcast_grp, 8192);
	CHECK_EQ_INT(da.max_mcast_qp_attach, 56);
	CHECK_EQ_INT(da.max_total_mcast_qp_attach, 0x70000);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!CHECK(pd && cq))
		return;
	ud = ud_qp(pd, cq, QKEY);
	{
		struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC};

		ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		rc = ibv_create_qp(pd, &ia);
	}
	if (!CHECK(ud && rc))
		return;

	t_case("attach: EINVAL for a non-UD QP and for a GID that is not multicast");
	CHECK_RET(ibv_attach_mcast(rc, &g, 0), EINVAL);
	uni = group_gid(3);
	uni.raw[12] = 127; /* ::ffff:127.1.2.3 */
	CHECK_RET(ibv_attach_mcast(ud, &uni, 0), EINVAL);
	memset(&uni, 0, sizeof(uni));
	uni.raw[0] = 0xfe;
	uni.raw[1] = 0x80; /* fe80:: */
	CHECK_RET(ibv_attach_mcast(ud, &uni, 0), EINVAL);
	memset(&uni, 0, sizeof(uni));
	CHECK_RET(ibv_attach_mcast(ud, &uni, 0), EINVAL);
	CHECK_RET(ibv_detach_mcast(rc, &g, 0), EINVAL);

	t_case("attach twice succeeds; detach of what is not attached is EINVAL");
	CHECK_RET(ibv_attach_mcast(ud, &g, 0), 0);
	CHECK_RET(ibv_attach_mcast(ud, &g, 0), 0);
	CHECK_RET(ibv_detach_mcast(ud, &g2, 0), EINVAL);
	CHECK_RET(ibv_detach_mcast(ud, &g, 7), EINVAL); /* another LID: another attachment */
	CHECK_RET(ibv_detach_mcast(ud, &g, 0), 0);
	CHECK_RET(ibv_detach_mcast(ud, &g, 0), EINVAL);

	t_case("56 QPs in a group; the 57th is ENOMEM; destroying them leaves the group");
	memset(many, 0, sizeof(many));
	for (int i = 0; i < 57; i++) {
		struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD};

		ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		many[i] = ibv_create_qp(pd, &ia);
		if (!CHECK(many[i]))
			break;
		CHECK_RET(ibv_attach_mcast(many[i], &g2, 0), i < 56 ? 0 : ENOMEM);
	}
	for (int i = 0; i < 57; i++)
		if (many[i])
			CHECK_RET(ibv_destroy_qp(many[i]), 0);
	CHECK_RET(ibv_attach_mcast(ud, &g2, 0), 0); /* the group has room again */
	CHECK_RET(ibv_detach_mcast(ud, &g2, 0), 0);

	t_case("an AH to a multicast GID");
	aa = t_ah_attr(&g);
	ah = ibv_create_ah(pd, &aa);
	if (CHECK(ah))
		CHECK_RET(ibv_destroy_ah(ah), 0);

	CHECK_RET(ibv_attach_mcast(ud, &g, 0), 0); /* left attached: destroy detaches */
	CHECK_RET(ibv_destroy_qp(ud), 0);
	CHECK_RET(ibv_destroy_qp(rc), 0);
	CHECK_RET(ibv_destroy_cq(cq), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
}

/* ---- two processes ---- */

/* One process's side: a device, NQP UD QPs on one CQ, a buffer of NQP * NMSG * 2 slots. */
struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp[NQP];
	uint8_t *buf;
	int got[NQP]; /* intact messages per QP */
	int bad; /* damaged or unexpected completions */
};

enum {
	BUF_LEN = NQP * 2 * NMSG * SLOT + SLOT, /* the receive slots, then the send buffer */
};

/* Slot `k` of QP `q`. */
static uint8_t *slot(struct side *s, int q, int k)
{
	return s->buf + ((size_t)q * 2 * NMSG + (size_t)k) * SLOT;
}

/* Open the device, make the QPs (Q_Key of each from `qkey`), post 2*NMSG receives each. */
static int side_open(struct side *s, const uint32_t qkey[NQP])
{
	memset(s, 0, sizeof(*s));
	s->ctx = t_open_dev();
	if (!CHECK(s->ctx))
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 4 * NQP * NMSG, NULL, NULL, 0);
	s->buf = calloc(1, BUF_LEN);
	if (!CHECK(s->pd && s->cq && s->buf))
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!CHECK(s->mr))
		return -1;
	for (int q = 0; q < NQP; q++) {
		s->qp[q] = ud_qp(s->pd, s->cq, qkey[q]);
		if (!s->qp[q])
			return -1;
		for (int k = 0; k < 2 * NMSG; k++) {
			struct ibv_sge sge = {(uintptr_t)slot(s, q, k), SLOT, s->mr->lkey};
			struct ibv_recv_wr wr = {.wr_id = (uint64_t)(q * 100 + k),
						 .sg_list = &sge,
						 .num_sge = 1},
					   *bad;

			if (!CHECK_RET(ibv_post_recv(s->qp[q], &wr, &bad), 0))
				return -1;
		}
	}
	return 0;
}

static void side_close(struct side *s)
{
	for (int q = 0; q < NQP; q++)
		if (s->qp[q])
			CHECK_RET(ibv_destroy_qp(s->qp[q]), 0);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	free(s->buf);
}

/*
 * One completion of side `s`: a receive is counted intact (got) when it
 * is a SEND from QP `src_qpn` to the IPv4 group of `g`, its message of
 * the pattern its first byte names, else bad. 1 for a receive, 0 else.
 */
static int take_wc(struct side *s, const struct ibv_wc *wc, uint32_t src_qpn,
		   const union ibv_gid *g)
{
	uint8_t ref[MLEN];
	const uint8_t *p;
	int q;

	if (wc->opcode != IBV_WC_RECV)
		return 0;
	q = (int)(wc->wr_id / 100);
	if (q < 0 || q >= NQP) {
		s->bad++;
		return 1;
	}
	p = slot(s, q, (int)(wc->wr_id % 100));
	t_fill(ref, MLEN, p[40]);
	ref[0] = p[40];
	if (wc->status == IBV_WC_SUCCESS && wc->byte_len == 40 + MLEN && wc->src_qp == src_qpn &&
	    (wc->wc_flags & IBV_WC_GRH) && !memcmp(p + 40, ref, MLEN) &&
	    !memcmp(p + 20 + 16, &g->raw[12], 4)) /* the IPv4 header's destination */
		s->got[q]++;
	else
		s->bad++;
	return 1;
}

/* Take completions for `ms` ms, or until `want` receives arrived (want < 0: the whole time). */
static void side_poll(struct side *s, int want, int ms, uint32_t src_qpn, const union ibv_gid *g)
{
	uint64_t end = t_ms() + (uint64_t)ms;
	int total = 0;

	while (t_ms() < end && (want < 0 || total < want)) {
		struct ibv_wc wc;

		if (ibv_poll_cq(s->cq, 1, &wc) == 1)
			total += take_wc(s, &wc, src_qpn, g);
		else
			usleep(1000);
	}
}

/* Send messages [first, first + n) from QP 0 to group `g`, each completed; 0 or -1. */
static int side_send(struct side *s, const union ibv_gid *g, int first, int n)
{
	struct ibv_ah_attr aa = t_ah_attr(g);
	struct ibv_ah *ah = ibv_create_ah(s->pd, &aa);
	uint8_t *src = s->buf + NQP * 2 * NMSG * SLOT;
	int ret = 0;

	if (!CHECK(ah))
		return -1;
	for (int i = first; i < first + n && !ret; i++) {
		struct ibv_sge sge = {(uintptr_t)src, MLEN, s->mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 9000u + (unsigned)i,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;
		uint64_t end = t_ms() + WAIT_MS;
		struct ibv_wc wc;

		t_fill(src, MLEN, (unsigned)i);
		src[0] = (uint8_t)i; /* the pattern's seed, for the receiver */
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = 0xffffff;
		wr.wr.ud.remote_qkey = QKEY;
		ret = CHECK_RET(ibv_post_send(s->qp[0], &wr, &bad), 0) ? 0 : -1;
		/* its completion; receives of our own QPs may come first */
		while (!ret) {
			int m = ibv_poll_cq(s->cq, 1, &wc);

			if (m == 1 && wc.opcode == IBV_WC_SEND) {
				ret = CHECK_EQ_INT(wc.status, IBV_WC_SUCCESS) ? 0 : -1;
				break;
			}
			if (m == 1)
				take_wc(s, &wc, s->qp[0]->qp_num, g);
			if (t_ms() > end)
				ret = CHECK_MSG(0, "no send completion") ? 0 : -1;
		}
	}
	ibv_destroy_ah(ah);
	return ret;
}

/* One byte over the socket, and wait for one. 0 or -1. */
static int say(int fd, char c)
{
	return CHECK(write(fd, &c, 1) == 1) ? 0 : -1;
}

static int hear(int fd, char c)
{
	char got = 0;

	return CHECK(read(fd, &got, 1) == 1 && got == c) ? 0 : -1;
}

/*
 * The sending process: QP 0 sends and is attached to the group (it
 * receives its own messages, looped back as rxe's are), QP 1 is attached,
 * QP 2 is not, QP 3 is in another group.
 */
static int sender(int fd)
{
	static const uint32_t qk[NQP] = {QKEY, QKEY, QKEY, QKEY};
	union ibv_gid g = group_gid(3), g2 = group_gid(4);
	struct side s;
	uint32_t qpn;

	if (side_open(&s, qk))
		return 1;
	qpn = s.qp[0]->qp_num;
	if (!CHECK_RET(ibv_attach_mcast(s.qp[0], &g, 0), 0) ||
	    !CHECK_RET(ibv_attach_mcast(s.qp[1], &g, 0), 0) ||
	    !CHECK_RET(ibv_attach_mcast(s.qp[3], &g2, 0), 0) ||
	    !CHECK(write(fd, &qpn, sizeof(qpn)) == sizeof(qpn)) || hear(fd, 'R') ||
	    side_send(&s, &g, 0, NMSG))
		return 1;
	side_poll(&s, 2 * NMSG - s.got[0] - s.got[1], WAIT_MS, qpn, &g);
	side_poll(&s, -1, QUIET_MS, qpn, &g);
	CHECK_EQ_INT(s.got[0], NMSG);
	CHECK_EQ_INT(s.got[1], NMSG);
	CHECK_EQ_INT(s.got[2] + s.got[3] + s.bad, 0);
	if (say(fd, '1') || hear(fd, '2') || side_send(&s, &g, NMSG, 1))
		return 1;
	side_poll(&s, 2 * NMSG + 2 - s.got[0] - s.got[1], WAIT_MS, qpn, &g);
	CHECK_EQ_INT(s.got[0], NMSG + 1);
	CHECK_EQ_INT(s.got[1], NMSG + 1);
	if (say(fd, '3') || hear(fd, '4'))
		return 1;
	side_close(&s);
	return t_st()->failed ? 1 : 0;
}

/*
 * The receiving process: QP 0 and QP 1 are attached (QP 1 twice, with two
 * LIDs: still one copy), QP 2 is attached with another Q_Key, QP 3 is in
 * another group. Then QP 1 leaves, QP 0 is destroyed while attached and
 * QP 3 joins: only QP 3 receives the next message.
 */
static int receiver(int fd)
{
	static const uint32_t qk[NQP] = {QKEY, QKEY, OTHER_QKEY, QKEY};
	union ibv_gid g = group_gid(3), g2 = group_gid(4);
	struct side s;
	uint32_t qpn = 0;

	if (side_open(&s, qk))
		return 1;
	if (!CHECK_RET(ibv_attach_mcast(s.qp[0], &g, 0), 0) ||
	    !CHECK_RET(ibv_attach_mcast(s.qp[1], &g, 0), 0) ||
	    !CHECK_RET(ibv_attach_mcast(s.qp[1], &g, 5), 0) ||
	    !CHECK_RET(ibv_attach_mcast(s.qp[2], &g, 0), 0) ||
	    !CHECK_RET(ibv_attach_mcast(s.qp[3], &g2, 0), 0) ||
	    !CHECK(read(fd, &qpn, sizeof(qpn)) == sizeof(qpn)) || say(fd, 'R'))
		return 1;
	side_poll(&s, 2 * NMSG, WAIT_MS, qpn, &g);
	if (hear(fd, '1'))
		return 1;
	side_poll(&s, -1, QUIET_MS, qpn, &g);
	CHECK_EQ_INT(s.got[0], NMSG);
	CHECK_EQ_INT(s.got[1], NMSG);
	CHECK_EQ_INT(s.got[2] + s.got[3] + s.bad, 0);
	if (!CHECK_RET(ibv_detach_mcast(s.qp[1], &g, 0), 0) ||
	    !CHECK_RET(ibv_detach_mcast(s.qp[1], &g, 5), 0) ||
	    !CHECK_RET(ibv_destroy_qp(s.qp[0]), 0) ||
	    !CHECK_RET(ibv_attach_mcast(s.qp[3], &g, 0), 0))
		return 1;
	s.qp[0] = NULL;
	memset(s.got, 0, sizeof(s.got));
	if (say(fd, '2'))
		return 1;
	side_poll(&s, 1, WAIT_MS, qpn, &g);
	if (hear(fd, '3'))
		return 1;
	side_poll(&s, -1, QUIET_MS, qpn, &g);
	CHECK_EQ_INT(s.got[3], 1);
	CHECK_EQ_INT(s.got[1] + s.got[2] + s.bad, 0);
	if (say(fd, '4'))
		return 1;
	side_close(&s);
	return t_st()->failed ? 1 : 0;
}

/* Run sender and receiver in two processes with SOFTVERBS_SHM=`shm`; both must pass. */
static void case_two_proc(const char *shm)
{
	int sv[2], status[2] = {-1, -1};
	pid_t pid[2];

	if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0))
		return;
	setenv("SOFTVERBS_SHM", shm, 1);
	fflush(stdout);
	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			close(sv[1 - i]);
			t_st()->failed = 0;
			_exit(i ? receiver(sv[i]) : sender(sv[i]));
		}
	}
	unsetenv("SOFTVERBS_SHM");
	close(sv[0]);
	close(sv[1]);
	for (int i = 0; i < 2; i++)
		if (CHECK(pid[i] > 0))
			waitpid(pid[i], &status[i], 0);
	CHECK_MSG(WIFEXITED(status[0]) && WEXITSTATUS(status[0]) == 0, "sender: status %#x",
		  status[0]);
	CHECK_MSG(WIFEXITED(status[1]) && WEXITSTATUS(status[1]) == 0, "receiver: status %#x",
		  status[1]);
}

int main(void)
{
	t_start("api_mcast");
	tag = (uint32_t)getpid();
	case_rules();
	t_case("two processes over the same-host link (default): every member receives");
	case_two_proc("1");
	t_case("two processes over UDP (SOFTVERBS_SHM=0): every member receives");
	case_two_proc("0");
	return t_finish();
}
