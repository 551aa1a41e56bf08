/* SPDX-License-Identifier: MIT */
/*
 * api_qp: ibv_create_qp, ibv_create_qp_ex, ibv_query_qp, ibv_destroy_qp
 * and the small QP verbs, through the public API.
 *
 * Creation: RC, UC, UD and XRC (tests/api_xrc.c) only (RAW_PACKET, DRIVER: EOPNOTSUPP);
 * comp_mask beyond PD | CREATE_FLAGS | SEND_OPS_FLAGS, nonzero
 * create_flags and send operations the type lacks: EOPNOTSUPP; no PD, no
 * CQs, capacities beyond the device's: EINVAL. Granted capacities are
 * written back (rounded up, never below the request) and match
 * ibv_query_qp. With an SRQ the receive capacities are ignored and 0.
 * References: CQs, SRQ, PD and a parent domain cannot go (EBUSY) while a
 * QP uses them. QPNs are distinct 24-bit numbers, never 0 or 1, not
 * reused at once; more than max_qp QPs: ENOMEM.
 */
#include "harness.h"

#include "qp_util.h"

static struct q_env env;

/* The caps of `qp` as ibv_query_qp reports them, or all 0xff bytes on failure. */
static struct ibv_qp_cap query_caps(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	if (ibv_query_qp(qp, &a, IBV_QP_CAP, &i))
		memset(&a.cap, 0xff, sizeof(a.cap));
	return a.cap;
}

static bool caps_equal(const struct ibv_qp_cap *a, const struct ibv_qp_cap *b)
{
	return a->max_send_wr == b->max_send_wr && a->max_recv_wr == b->max_recv_wr &&
	       a->max_send_sge == b->max_send_sge && a->max_recv_sge == b->max_recv_sge &&
	       a->max_inline_data == b->max_inline_data;
}

static void create_one(enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a;
	struct ibv_qp_cap got;
	struct ibv_qp *qp;
	int ctx_tag;

	memset(&a, 0, sizeof(a));
	a.qp_context = &ctx_tag;
	a.send_cq = env.scq;
	a.recv_cq = env.rcq;
	a.qp_type = type;
	a.sq_sig_all = 1;
	a.cap.max_send_wr = 5;
	a.cap.max_recv_wr = 3;
	a.cap.max_send_sge = 3;
	a.cap.max_recv_sge = 2;
	a.cap.max_inline_data = 100;
	qp = ibv_create_qp(env.pd, &a);
	if (!CHECK_MSG(qp, "create %d: %s", type, t_errname(errno)))
		return;
	/* written back: rounded up, never below the request */
	CHECK_EQ_INT(a.cap.max_send_wr, 8);
	CHECK_EQ_INT(a.cap.max_recv_wr, 4);
	CHECK(a.cap.max_send_sge >= 3 && a.cap.max_send_sge <= 32);
	CHECK_EQ_INT(a.cap.max_recv_sge, 2);
	CHECK(a.cap.max_inline_data >= 100 && a.cap.max_inline_data <= 512);
	got = query_caps(qp);
	CHECK_MSG(caps_equal(&got, &a.cap), "query_qp caps differ from the written-back caps");

	CHECK(qp->context == env.ctx);
	CHECK(qp->qp_context == &ctx_tag);
	CHECK(qp->pd == env.pd);
	CHECK(qp->send_cq == env.scq);
	CHECK(qp->recv_cq == env.rcq);
	CHECK(qp->srq == NULL);
	CHECK_EQ_INT(qp->qp_type, type);
	CHECK_EQ_INT(qp->state, IBV_QPS_RESET);
	CHECK_EQ_INT(q_state(qp), IBV_QPS_RESET);
	CHECK(qp->qp_num > 1 && qp->qp_num <= 0xffffff);
	CHECK_EQ_INT(qp->events_completed, 0);
	errno = 0;
	CHECK(ibv_qp_to_qp_ex(qp) == NULL); /* created without send_ops_flags */
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

static void test_create(void)
{
	struct ibv_qp_init_attr_ex x;
	struct ibv_qp *qp;

	t_case("create RC and UD; caps written back");
	create_one(IBV_QPT_RC);
	create_one(IBV_QPT_UD);

	/* the inline ibv_create_qp_ex: comp_mask PD goes through ibv_create_qp */
	memset(&x, 0, sizeof(x));
	x.send_cq = env.scq;
	x.recv_cq = env.rcq;
	x.qp_type = IBV_QPT_RC;
	x.cap.max_send_wr = 3;
	x.cap.max_recv_wr = 1;
	x.comp_mask = IBV_QP_INIT_ATTR_PD;
	x.pd = env.pd;
	qp = ibv_create_qp_ex(env.ctx, &x);
	if (CHECK(qp)) {
		CHECK_EQ_INT(x.cap.max_send_wr, 4);
		CHECK_EQ_INT(x.cap.max_recv_wr, 1);
		CHECK(ibv_qp_to_qp_ex(qp) == NULL);
		CHECK_RET(ibv_destroy_qp(qp), 0);
	}
	/* the verbs_context path: extended QP */
	x.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
		      IBV_QP_INIT_ATTR_CREATE_FLAGS;
	x.create_flags = 0;
	x.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
			   IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND_WITH_IMM |
			   IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			   IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	x.cap.max_send_wr = 9;
	qp = ibv_create_qp_ex(env.ctx, &x);
	if (CHECK_MSG(qp, "create_qp_ex with send_ops_flags: %s", t_errname(errno))) {
		struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);

		CHECK_EQ_INT(x.cap.max_send_wr, 16);
		CHECK(qpx != NULL && &qpx->qp_base == qp);
		CHECK(qpx && qpx->wr_start && qpx->wr_complete && qpx->wr_abort && qpx->wr_send &&
		      qpx->wr_set_sge && qpx->wr_bind_mw && qpx->wr_flush && qpx->wr_atomic_write &&
		      qpx->wr_set_xrc_srqn && qpx->wr_send_tso);
		CHECK_RET(ibv_destroy_qp(qp), 0);
	}
	/* UD with its two operations */
	x.qp_type = IBV_QPT_UD;
	x.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	qp = ibv_create_qp_ex(env.ctx, &x);
	if (CHECK(qp)) {
		CHECK(ibv_qp_to_qp_ex(qp) != NULL);
		CHECK_RET(ibv_destroy_qp(qp), 0);
	}
	/* maxima are accepted */
	x.qp_type = IBV_QPT_RC;
	x.comp_mask = IBV_QP_INIT_ATTR_PD;
	x.cap.max_send_wr = 16384;
	x.cap.max_recv_wr = 16384;
	x.cap.max_send_sge = 32;
	x.cap.max_recv_sge = 32;
	x.cap.max_inline_data = 512;
	qp = ibv_create_qp_ex(env.ctx, &x);
	if (CHECK(qp)) {
		CHECK_EQ_INT(x.cap.max_send_wr, 16384);
		CHECK_EQ_INT(x.cap.max_send_sge, 32);
		CHECK_EQ_INT(x.cap.max_inline_data, 512);
		CHECK_RET(ibv_destroy_qp(qp), 0);
	}
	/* zero work requests: a QP that never sends or receives */
	x.cap.max_send_wr = 0;
	x.cap.max_recv_wr = 0;
	x.cap.max_send_sge = 0;
	x.cap.max_recv_sge = 0;
	x.cap.max_inline_data = 0;
	qp = ibv_create_qp_ex(env.ctx, &x);
	if (CHECK(qp)) {
		CHECK_EQ_INT(x.cap.max_send_wr, 0);
		CHECK_EQ_INT(x.cap.max_recv_wr, 0);
		CHECK_RET(ibv_destroy_qp(qp), 0);
	}
}

/* A valid ex request for an RC QP on the environment. */
static struct ibv_qp_init_attr_ex good_ex(void)
{
	struct ibv_qp_init_attr_ex x;

	memset(&x, 0, sizeof(x));
	x.send_cq = env.scq;
	x.recv_cq = env.rcq;
	x.qp_type = IBV_QPT_RC;
	x.cap.max_send_wr = 4;
	x.cap.max_recv_wr = 4;
	x.cap.max_send_sge = 1;
	x.cap.max_recv_sge = 1;
	x.comp_mask = IBV_QP_INIT_ATTR_PD;
	x.pd = env.pd;
	return x;
}

static void test_create_errors(void)
{
	static const enum ibv_qp_type types[] = {IBV_QPT_RAW_PACKET, IBV_QPT_DRIVER};
	static const uint32_t masks[] = {IBV_QP_INIT_ATTR_MAX_TSO_HEADER,
					 IBV_QP_INIT_ATTR_IND_TABLE, IBV_QP_INIT_ATTR_RX_HASH,
					 1u << 7, 1u << 31};
	static const uint64_t rc_ops[] = {IBV_QP_EX_WITH_TSO, 1ull << 40};
	static const uint64_t ud_ops[] = {IBV_QP_EX_WITH_RDMA_WRITE,
					  IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
					  IBV_QP_EX_WITH_RDMA_READ,
					  IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
					  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
					  IBV_QP_EX_WITH_LOCAL_INV,
					  IBV_QP_EX_WITH_BIND_MW,
					  IBV_QP_EX_WITH_SEND_WITH_INV};
	struct ibv_qp_init_attr_ex x;
	struct ibv_qp_init_attr a;
	size_t i;

	t_case("create: EOPNOTSUPP and EINVAL");
	for (i = 0; i < Q_ARRAY(types); i++) {
		x = good_ex();
		x.qp_type = types[i];
		CHECK_ERRNO_PTR(ibv_create_qp_ex(env.ctx, &x), EOPNOTSUPP);
		a = q_init_attr(&env, types[i]);
		CHECK_ERRNO_PTR(ibv_create_qp(env.pd, &a), EOPNOTSUPP);
	}
	for (i = 0; i < Q_ARRAY(masks); i++) {
		x = good_ex();
		x.comp_mask |= masks[i];
		CHECK_ERRNO_PTR(ibv_create_qp_ex(env.ctx, &x), EOPNOTSUPP);
	}
	x = good_ex();
	x.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
	x.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
	CHECK_ERRNO_PTR(ibv_create_qp_ex(env.ctx, &x), EOPNOTSUPP);
	x.create_flags = IBV_QP_CREATE_SCATTER_FCS;
	CHECK_ERRNO_PTR(ibv_create_qp_ex(env.ctx, &x), EOPNOTSUPP);
	for (i = 0; i < Q_ARRAY(rc_ops); i++) {
		x = good_ex();
		x.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		x.send_ops_flags = IBV_QP_EX_WITH_SEND | rc_ops[i];
		CHECK_ERRNO_PTR(ibv_create_qp_ex(env.ctx, &x), EOPNOTSUPP);
	}
	for (i = 0; i < Q_ARRAY(ud_ops); i++) {
		x = good_ex();
		x.qp_type = IBV_QPT_UD;
		x.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		x.send_ops_flags = IBV_QP_EX_WITH_SEND | ud_ops[i];
		CHECK_ERRNO_PTR(ibv_create_qp_ex(env.ctx, &x), EOPNOTSUPP);
	}

	/* no PD */
	x = good_ex();
	x.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	x.send_ops_flags = IBV_QP_EX_WITH_SEND;
	CHECK_ERRNO_PTR(ibv_create_qp_ex(env.ctx, &x), EINVAL);
	x.comp_mask |= IBV_QP_INIT_ATTR_PD;
	x.pd = NULL;
	CHECK_ERRNO_PTR(ibv_create_qp_ex(env.ctx, &x), EINVAL);
	a = q_init_attr(&env, IBV_QPT_RC);
	CHECK_ERRNO_PTR(ibv_create_qp(NULL, &a), EINVAL);
	CHECK_ERRNO_PTR(ibv_create_qp(env.pd, NULL), EINVAL);
	/* no CQs */
	a = q_init_attr(&env, IBV_QPT_RC);
	a.send_cq = NULL;
	CHECK_ERRNO_PTR(ibv_create_qp(env.pd, &a), EINVAL);
	a = q_init_attr(&env, IBV_QPT_UD);
	a.recv_cq = NULL;
	CHECK_ERRNO_PTR(ibv_create_qp(env.pd, &a), EINVAL);
	/* capacities */
	a = q_init_attr(&env, IBV_QPT_RC);
	a.cap.max_send_wr = 16385;
	CHECK_ERRNO_PTR(ibv_create_qp(env.pd, &a), EINVAL);
	a = q_init_attr(&env, IBV_QPT_RC);
	a.cap.max_recv_wr = 16385;
	CHECK_ERRNO_PTR(ibv_create_qp(env.pd, &a), EINVAL);
	a = q_init_attr(&env, IBV_QPT_UD);
	a.cap.max_send_sge = 33;
	CHECK_ERRNO_PTR(ibv_create_qp(env.pd, &a), EINVAL);
	a = q_init_attr(&env, IBV_QPT_RC);
	a.cap.max_recv_sge = 33;
	CHECK_ERRNO_PTR(ibv_create_qp(env.pd, &a), EINVAL);
	a = q_init_attr(&env, IBV_QPT_RC);
	a.cap.max_inline_data = 513;
	CHECK_ERRNO_PTR(ibv_create_qp(env.pd, &a), EINVAL);
	a = q_init_attr(&env, IBV_QPT_RC);
	a.cap.max_send_wr = UINT32_MAX;
	CHECK_ERRNO_PTR(ibv_create_qp(env.pd, &a), EINVAL);
	/* none of the failures kept a reference: the CQs and PD go at the end */
}

static void test_srq(void)
{
	struct ibv_srq_init_attr sa;
	struct ibv_qp_init_attr a;
	struct ibv_qp_cap got;
	struct ibv_srq *srq;
	struct ibv_qp *qp;

	t_case("QP with an SRQ: receive caps ignored, SRQ busy");
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 3;
	srq = ibv_create_srq(env.pd, &sa);
	if (!CHECK(srq))
		return;
	a = q_init_attr(&env, IBV_QPT_RC);
	a.srq = srq;
	a.cap.max_recv_wr = 100000; /* ignored with an SRQ */
	a.cap.max_recv_sge = 99;
	qp = ibv_create_qp(env.pd, &a);
	if (CHECK_MSG(qp, "create with SRQ: %s", t_errname(errno))) {
		CHECK(qp->srq == srq);
		CHECK_EQ_INT(a.cap.max_recv_wr, 0);
		CHECK_EQ_INT(a.cap.max_recv_sge, 0);
		got = query_caps(qp);
		CHECK_EQ_INT(got.max_recv_wr, 0);
		CHECK_EQ_INT(got.max_recv_sge, 0);
		CHECK_RET(ibv_destroy_srq(srq), EBUSY);
		CHECK_RET(ibv_destroy_qp(qp), 0);
	}
	CHECK_RET(ibv_destroy_srq(srq), 0);
}

static void test_query(void)
{
	struct ibv_qp_init_attr a, init;
	struct ibv_qp_attr qa;
	struct ibv_qp *qp;
	int tag;

	t_case("query_qp: creation attributes");
	a = q_init_attr(&env, IBV_QPT_UD);
	a.qp_context = &tag;
	a.sq_sig_all = 1;
	qp = ibv_create_qp(env.pd, &a);
	if (!CHECK(qp))
		return;
	memset(&init, 0xa5, sizeof(init));
	memset(&qa, 0xa5, sizeof(qa));
	CHECK_RET(ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_CAP, &init), 0);
	CHECK(init.qp_context == &tag);
	CHECK(init.send_cq == env.scq && init.recv_cq == env.rcq && init.srq == NULL);
	CHECK_EQ_INT(init.qp_type, IBV_QPT_UD);
	CHECK(init.sq_sig_all != 0);
	CHECK(caps_equal(&init.cap, &a.cap));
	CHECK_EQ_INT(qa.qp_state, IBV_QPS_RESET);
	CHECK_EQ_INT(qa.cur_qp_state, IBV_QPS_RESET);
	CHECK_EQ_INT(qa.sq_draining, 0);
	CHECK_RET(ibv_destroy_qp(qp), 0);

	a = q_init_attr(&env, IBV_QPT_RC);
	qp = ibv_create_qp(env.pd, &a);
	if (!CHECK(qp))
		return;
	CHECK_RET(ibv_query_qp(qp, &qa, 0, &init), 0);
	CHECK(init.sq_sig_all == 0);
	CHECK(init.qp_context == NULL);
	CHECK_EQ_INT(init.qp_type, IBV_QPT_RC);
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

static void test_busy(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_cq *scq, *rcq;
	struct ibv_pd *pd, *parent;
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp, *qp2;

	t_case("CQ, PD and parent domain busy while a QP uses them");
	pd = ibv_alloc_pd(env.ctx);
	scq = ibv_create_cq(env.ctx, 4, NULL, NULL, 0);
	rcq = ibv_create_cq(env.ctx, 4, NULL, NULL, 0);
	if (!CHECK(pd && scq && rcq))
		return;
	a = q_init_attr(&env, IBV_QPT_RC);
	a.send_cq = scq;
	a.recv_cq = rcq;
	qp = ibv_create_qp(pd, &a);
	if (CHECK(qp)) {
		CHECK_RET(ibv_destroy_cq(scq), EBUSY);
		CHECK_RET(ibv_destroy_cq(rcq), EBUSY);
		CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
		/* a second QP on the same CQs: both must go */
		qp2 = ibv_create_qp(pd, &a);
		CHECK(qp2);
		CHECK_RET(ibv_destroy_qp(qp), 0);
		CHECK_RET(ibv_destroy_cq(scq), EBUSY);
		CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
		if (qp2)
			CHECK_RET(ibv_destroy_qp(qp2), 0);
	}
	/* one CQ for both directions */
	a.recv_cq = scq;
	qp = ibv_create_qp(pd, &a);
	if (CHECK(qp)) {
		CHECK_RET(ibv_destroy_cq(scq), EBUSY);
		CHECK_RET(ibv_destroy_qp(qp), 0);
	}
	CHECK_RET(ibv_destroy_cq(scq), 0);
	CHECK_RET(ibv_destroy_cq(rcq), 0);

	/* parent domain: the QP holds it, and through it the base */
	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	parent = ibv_alloc_parent_domain(env.ctx, &pa);
	if (CHECK(parent)) {
		a = q_init_attr(&env, IBV_QPT_UD);
		qp = ibv_create_qp(parent, &a);
		if (CHECK_MSG(qp, "QP on a parent domain: %s", t_errname(errno))) {
			CHECK(qp->pd == parent);
			CHECK_RET(ibv_dealloc_pd(parent), EBUSY);
			CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
			CHECK_RET(ibv_destroy_qp(qp), 0);
		}
		CHECK_RET(ibv_dealloc_pd(parent), 0);
	}
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void test_qpn(void)
{
	enum {
		N = 64
	};
	struct ibv_qp *qps[N];
	uint32_t nums[N], old;
	struct ibv_qp *qp;
	int i, dup = 0, range = 0;

	t_case("QPNs: distinct, 24-bit, never 0 or 1, not reused at once");
	for (i = 0; i < N; i++) {
		qps[i] = q_create(&env, i % 2 ? IBV_QPT_RC : IBV_QPT_UD);
		if (!CHECK(qps[i]))
			return;
		nums[i] = qps[i]->qp_num;
		range += nums[i] <= 1 || nums[i] > 0xffffff;
	}
	qsort(nums, N, sizeof(nums[0]), cmp_u32);
	for (i = 1; i < N; i++)
		dup += nums[i] == nums[i - 1];
	CHECK_EQ_INT(dup, 0);
	CHECK_EQ_INT(range, 0);
	old = qps[0]->qp_num;
	for (i = 0; i < N; i++)
		CHECK_RET(ibv_destroy_qp(qps[i]), 0);
	qp = q_create(&env, IBV_QPT_RC);
	if (CHECK(qp)) {
		CHECK(qp->qp_num != old);
		CHECK(qp->qp_num > 1);
		CHECK_RET(ibv_destroy_qp(qp), 0);
	}
}

static void test_max_qp(void)
{
	struct ibv_device_attr da;
	struct ibv_qp_init_attr a;
	struct ibv_qp **qps;
	int i, n = 0, max;

	t_case("more than max_qp QPs: ENOMEM");
	if (!CHECK_RET(ibv_query_device(env.ctx, &da), 0))
		return;
	max = da.max_qp;
	qps = calloc((size_t)max + 1, sizeof(*qps));
	if (!CHECK(qps))
		return;
	a = q_init_attr(&env, IBV_QPT_UD);
	a.cap.max_send_wr = 1;
	a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = 0;
	a.cap.max_recv_sge = 0;
	a.cap.max_inline_data = 0;
	for (i = 0; i < max; i++) {
		qps[i] = ibv_create_qp(env.pd, &a);
		if (!qps[i])
			break;
		n++;
	}
	CHECK_EQ_INT(n, max);
	if (n == max)
		CHECK_ERRNO_PTR(ibv_create_qp(env.pd, &a), ENOMEM);
	for (i = 0; i < n; i++)
		ibv_destroy_qp(qps[i]);
	free(qps);
	/* room again */
	qps = NULL;
	{
		struct ibv_qp *qp = ibv_create_qp(env.pd, &a);

		if (CHECK(qp))
			CHECK_RET(ibv_destroy_qp(qp), 0);
	}
}

static void test_misc(void)
{
	struct ibv_ece ece;
	struct ibv_qp *qp;

	t_case("ECE, data-in-order");
	qp = q_create(&env, IBV_QPT_UD);
	if (!CHECK(qp))
		return;
	memset(&ece, 0, sizeof(ece));
	CHECK_RET(ibv_query_ece(qp, &ece), EOPNOTSUPP);
	CHECK_RET(ibv_set_ece(qp, &ece), EOPNOTSUPP);
	/* no in-order guarantee is claimed (see src/sw/queue/qp.c) */
	CHECK_EQ_INT(ibv_query_qp_data_in_order(qp, IBV_WR_RDMA_WRITE, 0), 0);
	CHECK_EQ_INT(
		ibv_query_qp_data_in_order(qp, IBV_WR_SEND, IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS),
		0);
	CHECK_EQ_INT(ibv_query_qp_data_in_order(qp, IBV_WR_RDMA_WRITE, 1u << 7), 0);
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

int main(void)
{
	t_start("api_qp");
	q_env_open(&env, 16);
	test_create();
	test_create_errors();
	test_srq();
	test_query();
	test_busy();
	test_qpn();
	test_max_qp();
	test_misc();
	t_case("teardown: nothing left busy");
	q_env_close(&env);
	return t_finish();
}
