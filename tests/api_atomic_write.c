/* SPDX-License-Identifier: MIT */
/*
 * api_atomic_write.c - RDMA ATOMIC WRITE (IBTA 1.5), over the same-host
 * link and over UDP (SOFTVERBS_SHM=0):
 *   - between two processes: ATOMIC WRITEs after an RDMA WRITE land at
 *     the target, which makes no verbs call meanwhile;
 *   - the device reports IBV_DEVICE_ATOMIC_WRITE and the RC ODP bit;
 *   - ibv_post_send (the value in the SGEs, one or two of them) and
 *     ibv_wr_atomic_write complete with IBV_WC_ATOMIC_WRITE and store
 *     the 8 bytes, nothing around them;
 *   - refused: a value that is not 8 bytes (EINVAL), UC and UD QPs (post
 *     EINVAL, send_ops_flags EOPNOTSUPP, ibv_wr_atomic_write EINVAL);
 *   - answered with an error completion, the target word untouched: a
 *     misaligned address (REM_INV_REQ_ERR), an MR or QP without
 *     REMOTE_WRITE and a range beyond the MR (REM_ACCESS_ERR).
 */
#include "twoproc.h"

/* test: timeout=240 */

#define LEN 4096u
#define LW IBV_ACCESS_LOCAL_WRITE
#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define NAW 32 /* ATOMIC WRITEs between the processes */
#define WR_LEN 2048u /* the RDMA WRITE before them */

static const uint64_t magic = 0x0123456789abcdefull;

/* Contract: post an ATOMIC WRITE of the 8 bytes at a->buf + src to b's buffer + dst. */
static int post_aw(struct t_ep *a, const struct t_addr *b, uint64_t wr_id, size_t src, size_t dst,
		   uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)a->buf + src, len, a->mr->lkey};
	struct ibv_send_wr wr = {0}, *bad;

	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = b->addr + dst;
	wr.wr.rdma.rkey = b->rkey;
	return ibv_post_send(a->qp, &wr, &bad);
}

/* ---- two processes ---- */

static void target(int sock, void *arg)
{
	struct t_ep e;
	struct t_addr peer;
	uint8_t want[WR_LEN];
	char cmd;

	(void)arg;
	if (t_ep_init(&e, NULL, IBV_QPT_RC, LEN, ACC, 16) || tp_connect(sock, &e, 0x200, &peer))
		goto out;
	if (!CHECK(t_xfer(sock, &cmd, 1, false) == 0)) /* asleep while the initiator works */
		goto out;
	t_fill(want, WR_LEN, 7);
	CHECK_MSG(memcmp(e.buf + 1024, want, WR_LEN) == 0, "target: the RDMA WRITE differs");
	for (uint64_t i = 0; i < 8; i++) {
		uint64_t v;

		memcpy(&v, e.buf + 8 * i, 8);
		CHECK_MSG(v == magic + i + 24, "target: word %llu is %#llx", (unsigned long long)i,
			  (unsigned long long)v);
	}
	CHECK(e.buf[64] == 0);
out:
	cmd = t_st()->failed ? 'f' : 'o';
	t_xfer(sock, &cmd, 1, true);
	t_ep_destroy(&e, true);
}

static void initiator(int sock, void *arg)
{
	struct t_ep e;
	struct t_addr peer;
	char cmd = 'c';

	(void)arg;
	if (t_ep_init(&e, NULL, IBV_QPT_RC, LEN, ACC, 64) || tp_connect(sock, &e, 0x100, &peer))
		goto out;
	t_fill(e.buf + 1024, WR_LEN, 7);
	CHECK(t_post(&e, IBV_WR_RDMA_WRITE, 1, 1024, WR_LEN, peer.addr + 1024, peer.rkey,
		     IBV_SEND_SIGNALED) == 0);
	for (uint64_t i = 0; i < NAW; i++) {
		uint64_t v = magic + i;

		memcpy(e.buf + 8 * i, &v, 8);
		CHECK(post_aw(&e, &peer, 10 + i, 8 * i, 8 * (i % 8), 8) == 0);
	}
	tp_expect_wc(e.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	for (uint64_t i = 0; i < NAW; i++)
		tp_expect_wc(e.cq, 10 + i, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE);
	CHECK(t_xfer(sock, &cmd, 1, true) == 0);
	CHECK(t_xfer(sock, &cmd, 1, false) == 0 && cmd == 'o');
out:
	t_ep_destroy(&e, true);
}

/* ---- one process, two devices ---- */

/*
 * Contract: a connected RC pair: a (initiator, QP ex with ATOMIC_WRITE
 * when `ex`) and b, b's MR registered with `b_mr`, b's QP granting
 * `b_qp` remote access. 0 or -1.
 */
static int pair(struct t_ep *a, struct t_ep *b, int b_mr, int b_qp)
{
	struct ibv_qp_attr at = {.qp_access_flags = (unsigned int)b_qp};

	if (t_ep_init(a, NULL, IBV_QPT_RC, LEN, ACC, 16) ||
	    t_ep_init(b, NULL, IBV_QPT_RC, LEN, b_mr, 16))
		return -1;
	if (!CHECK(ibv_modify_qp(b->qp, &at, IBV_QP_ACCESS_FLAGS) == 0))
		return -1;
	return t_connect(a, b, IBV_MTU_1024);
}

static void case_caps(void)
{
	struct ibv_device_attr_ex x;
	struct ibv_context *ctx = t_open_dev();

	t_case("device caps: IBV_DEVICE_ATOMIC_WRITE, RC ODP ATOMIC_WRITE");
	if (!CHECK(ctx))
		return;
	if (CHECK_RET(ibv_query_device_ex(ctx, NULL, &x), 0)) {
		CHECK(x.device_cap_flags_ex & IBV_DEVICE_ATOMIC_WRITE);
		CHECK(x.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_ATOMIC_WRITE);
		CHECK(!(x.odp_caps.per_transport_caps.ud_odp_caps & IBV_ODP_SUPPORT_ATOMIC_WRITE));
	}
	ibv_close_device(ctx);
}

static void case_post(void)
{
	struct t_ep a, b;
	struct t_addr ba;
	struct ibv_sge sge[2];
	struct ibv_send_wr wr = {0}, *bad;
	uint64_t v = magic, got;

	t_case("ibv_post_send: the 8 bytes of one or two SGEs land, IBV_WC_ATOMIC_WRITE");
	if (pair(&a, &b, ACC, IBV_ACCESS_REMOTE_WRITE))
		goto out;
	ba = t_addr_of(&b, 0);
	memset(b.buf, 0xee, 64);
	memcpy(a.buf, &v, 8);
	CHECK_RET(post_aw(&a, &ba, 1, 0, 16, 8), 0);
	if (tp_expect_wc(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE)) {
		memcpy(&got, b.buf + 16, 8);
		CHECK_EQ_INT(got, v);
		CHECK(b.buf[15] == 0xee && b.buf[24] == 0xee);
	}
	/* two SGEs of 4 bytes, far apart */
	v = ~magic;
	memcpy(a.buf + 100, &v, 4);
	memcpy(a.buf + 300, (uint8_t *)&v + 4, 4);
	sge[0] = (struct ibv_sge){(uintptr_t)a.buf + 100, 4, a.mr->lkey};
	sge[1] = (struct ibv_sge){(uintptr_t)a.buf + 300, 4, a.mr->lkey};
	wr.wr_id = 2;
	wr.sg_list = sge;
	wr.num_sge = 2;
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = ba.addr + 32;
	wr.wr.rdma.rkey = ba.rkey;
	CHECK_RET(ibv_post_send(a.qp, &wr, &bad), 0);
	if (tp_expect_wc(a.cq, 2, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE)) {
		memcpy(&got, b.buf + 32, 8);
		CHECK_EQ_INT(got, v);
	}
	/* refused at post: the value is not 8 bytes */
	CHECK_RET(post_aw(&a, &ba, 3, 0, 40, 4), EINVAL);
	CHECK_RET(post_aw(&a, &ba, 3, 0, 40, 16), EINVAL);
	CHECK_EQ_INT(ibv_poll_cq(a.cq, 1, (struct ibv_wc[1]){0}), 0);
out:
	tp_unpair(&a, &b);
}

static void case_wr_api(void)
{
	struct ibv_qp_init_attr_ex x = {0};
	struct t_ep a, b;
	struct ibv_qp *q = NULL;
	struct ibv_qp_ex *qx;
	uint64_t v = magic ^ 0x5555, got;

	t_case("ibv_wr_atomic_write: created with IBV_QP_EX_WITH_ATOMIC_WRITE, the value lands");
	if (pair(&a, &b, ACC, IBV_ACCESS_REMOTE_WRITE))
		goto out;
	x.qp_type = IBV_QPT_RC;
	x.send_cq = x.recv_cq = a.cq;
	x.cap.max_send_wr = x.cap.max_recv_wr = 4;
	x.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	x.pd = a.pd;
	x.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
	q = ibv_create_qp_ex(a.ctx, &x);
	if (!q) {
		CHECK_MSG(0, "ibv_create_qp_ex: %s", strerror(errno));
		goto out;
	}
	/* b's QP was connected to a.qp: connect it to q instead */
	if (t_qp_init(q, ACC) || t_qp_rts(q, b.qp->qp_num, &b.gid, 9, 7, IBV_MTU_1024))
		goto out;
	if (!CHECK(ibv_modify_qp(b.qp, &(struct ibv_qp_attr){.qp_state = IBV_QPS_RESET},
				 IBV_QP_STATE) == 0) ||
	    t_qp_init(b.qp, IBV_ACCESS_REMOTE_WRITE) ||
	    t_qp_rts(b.qp, q->qp_num, &a.gid, 7, 9, IBV_MTU_1024))
		goto out;
	qx = ibv_qp_to_qp_ex(q);
	if (!CHECK(qx))
		goto out;
	ibv_wr_start(qx);
	qx->wr_id = 5;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(qx, b.mr->rkey, (uintptr_t)b.buf + 48, &v);
	v = 0; /* copied at the call */
	CHECK_RET(ibv_wr_complete(qx), 0);
	if (tp_expect_wc(a.cq, 5, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE)) {
		memcpy(&got, b.buf + 48, 8);
		CHECK_EQ_INT(got, magic ^ 0x5555);
	}
out:
	if (q)
		CHECK(ibv_destroy_qp(q) == 0);
	tp_unpair(&a, &b);
}

static void case_refused(void)
{
	static const enum ibv_qp_type types[] = {IBV_QPT_UC, IBV_QPT_UD};
	struct ibv_qp_init_attr_ex x = {0};
	struct t_ep u;
	struct t_addr self;

	t_case("UC and UD: refused at post (EINVAL) and creation (EOPNOTSUPP)");
	for (size_t i = 0; i < SV_ARRAY_N(types); i++) {
		if (t_ep_init(&u, NULL, types[i], LEN, ACC, 4))
			break;
		self = t_addr_of(&u, 0);
		CHECK(t_connect_to(&u, &self, 0, IBV_MTU_1024) == 0);
		CHECK_RET(post_aw(&u, &self, 1, 0, 8, 8), EINVAL);
		x.qp_type = types[i];
		x.send_cq = x.recv_cq = u.cq;
		x.cap.max_send_wr = x.cap.max_recv_wr = 4;
		x.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		x.pd = u.pd;
		x.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_ATOMIC_WRITE;
		errno = 0;
		CHECK(ibv_create_qp_ex(u.ctx, &x) == NULL);
		CHECK_EQ_INT(errno, EOPNOTSUPP);
		if (types[i] == IBV_QPT_UC) {
			struct ibv_qp *q;
			struct ibv_qp_ex *qx;
			uint64_t v = 1;

			x.send_ops_flags = IBV_QP_EX_WITH_SEND;
			q = ibv_create_qp_ex(u.ctx, &x);
			if (!CHECK(q))
				break;
			qx = ibv_qp_to_qp_ex(q);
			if (CHECK(qx) && CHECK(t_qp_init(q, ACC) == 0) &&
			    CHECK(t_qp_rts(q, self.qpn, &self.gid, 0, 0, IBV_MTU_1024) == 0)) {
				ibv_wr_start(qx);
				ibv_wr_atomic_write(qx, self.rkey, self.addr, &v);
				CHECK_RET(ibv_wr_complete(qx), EINVAL);
			}
			CHECK(ibv_destroy_qp(q) == 0);
		}
		t_ep_destroy(&u, true);
	}
}

/*
 * Contract: one ATOMIC WRITE from a to b's buffer + `dst` (MR `b_mr`, QP
 * access `b_qp`) completes with `status`, and b's first 64 bytes (0xee)
 * stay as they were.
 */
static void one_error(int b_mr, int b_qp, uint64_t dst, enum ibv_wc_status status)
{
	struct t_ep a, b;
	struct t_addr ba;
	uint64_t v = magic;

	if (pair(&a, &b, b_mr, b_qp))
		goto out;
	ba = t_addr_of(&b, 0);
	memset(b.buf, 0xee, 64);
	memcpy(a.buf, &v, 8);
	CHECK_RET(post_aw(&a, &ba, 9, 0, dst, 8), 0);
	tp_expect_wc(a.cq, 9, status, IBV_WC_ATOMIC_WRITE);
	for (int i = 0; i < 64; i++)
		if (!CHECK_MSG(b.buf[i] == 0xee, "byte %d of the target changed", i))
			break;
out:
	tp_unpair(&a, &b);
}

static void case_errors(void)
{
	t_case("misaligned: REM_INV_REQ_ERR; no REMOTE_WRITE (MR, QP), beyond the MR: "
	       "REM_ACCESS_ERR");
	one_error(ACC, IBV_ACCESS_REMOTE_WRITE, 4, IBV_WC_REM_INV_REQ_ERR);
	one_error(LW | IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 8,
		  IBV_WC_REM_ACCESS_ERR);
	one_error(ACC, IBV_ACCESS_REMOTE_READ, 8, IBV_WC_REM_ACCESS_ERR);
	one_error(ACC, IBV_ACCESS_REMOTE_WRITE, LEN, IBV_WC_REM_ACCESS_ERR);
}

static void in_process(void)
{
	case_caps();
	case_post();
	case_wr_api();
	case_refused();
	case_errors();
}

int main(void)
{
	t_start("api_atomic_write");
	tp_both_modes("WRITE then ATOMIC WRITEs land", target, initiator, in_process);
	return t_finish();
}
