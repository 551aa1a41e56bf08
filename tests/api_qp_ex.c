/* SPDX-License-Identifier: MIT */
/*
 * api_qp_ex: the ibv_qp_ex "new post send" API (ibv_wr_*).
 *
 * ibv_wr_complete posts every request built since ibv_wr_start, each
 * with the wr_id and wr_flags current when its builder ran; ibv_wr_abort
 * drops them. The first error is latched and returned by ibv_wr_complete,
 * which then posts nothing of the session: EOPNOTSUPP for operations the
 * device lacks, ENOMEM past the queue, EINVAL for a setter without a
 * request, inline data that does not fit or on the wrong operation, too
 * many SGEs, malformed atomics, UD without an address, RDMA on UD, or a
 * state before RTS. The session holds the QP's lock. What was posted is
 * made visible by moving the QP to ERR: each posted request then flushes.
 * (unit_qp compares the WQEs with those of ibv_post_send.)
 */
/* test: label=mt */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "qp_util.h"

#define ALL_RC_OPS                                                                                 \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |          \
	 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |                           \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

static struct q_env env;
static struct ibv_mr *mr;
static uint64_t buf[512];

/* An extended QP on CQs of its own. */
struct xqp {
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *x;
	struct ibv_qp_cap cap;
};

/* Create it and bring it to `st` (RTS, or SQD through RTS, or earlier states). */
static bool xqp_create(struct xqp *q, enum ibv_qp_type type, uint32_t max_send_wr,
		       enum ibv_qp_state st)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp_attr m;

	memset(q, 0, sizeof(*q));
	q->scq = ibv_create_cq(env.ctx, 64, NULL, NULL, 0);
	q->rcq = ibv_create_cq(env.ctx, 64, NULL, NULL, 0);
	if (!q->scq || !q->rcq)
		return false;
	memset(&a, 0, sizeof(a));
	a.send_cq = q->scq;
	a.recv_cq = q->rcq;
	a.qp_type = type;
	a.cap.max_send_wr = max_send_wr;
	a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = 2;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = 32;
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.pd = env.pd;
	a.send_ops_flags = type == IBV_QPT_UD ? IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM :
						ALL_RC_OPS;
	q->qp = ibv_create_qp_ex(env.ctx, &a);
	if (!q->qp)
		return false;
	q->cap = a.cap;
	q->x = ibv_qp_to_qp_ex(q->qp);
	if (!q->x)
		return false;
	if (st == IBV_QPS_ERR) {
		memset(&m, 0, sizeof(m));
		m.qp_state = IBV_QPS_ERR;
		return ibv_modify_qp(q->qp, &m, IBV_QP_STATE) == 0;
	}
	if (q_bring_up(&env, q->qp, st == IBV_QPS_SQD ? IBV_QPS_RTS : st, 0x4242))
		return false;
	if (st == IBV_QPS_SQD) {
		memset(&m, 0, sizeof(m));
		m.qp_state = IBV_QPS_SQD;
		return ibv_modify_qp(q->qp, &m, IBV_QP_STATE) == 0;
	}
	return true;
}

static void xqp_destroy(struct xqp *q)
{
	if (q->qp)
		CHECK_RET(ibv_destroy_qp(q->qp), 0);
	if (q->scq)
		CHECK_RET(ibv_destroy_cq(q->scq), 0);
	if (q->rcq)
		CHECK_RET(ibv_destroy_cq(q->rcq), 0);
}

/*
 * Move the QP to ERR and collect the flushed send completions: the wr_ids
 * of what was posted, in order. Returns how many (at most max).
 */
static int posted_ids(struct xqp *q, uint64_t *ids, int max)
{
	struct ibv_qp_attr m;
	struct ibv_wc wc[64];
	int n, i;

	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_ERR;
	if (q_state(q->qp) != IBV_QPS_ERR && ibv_modify_qp(q->qp, &m, IBV_QP_STATE))
		return -1;
	n = ibv_poll_cq(q->scq, 64, wc);
	for (i = 0; i < n && i < max; i++) {
		CHECK_EQ_INT(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		ids[i] = wc[i].wr_id;
	}
	return n;
}

/* A send of 8 bytes from the registered buffer, with wr_id `id`. */
static void send8(struct ibv_qp_ex *x, uint64_t id)
{
	x->wr_id = id;
	x->wr_flags = 0;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, mr->lkey, (uintptr_t)buf, 8);
}

static void test_session(void)
{
	uint64_t ids[16];
	struct xqp q;
	int n;

	t_case("wr_complete posts the session; wr_id per request");
	if (!CHECK(xqp_create(&q, IBV_QPT_RC, 8, IBV_QPS_SQD)))
		goto out;
	CHECK(q.x == (struct ibv_qp_ex *)q.qp);
	ibv_wr_start(q.x);
	send8(q.x, 1);
	q.x->wr_id = 2;
	q.x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
	ibv_wr_rdma_write(q.x, mr->rkey, (uintptr_t)&buf[256]);
	ibv_wr_set_sge(q.x, mr->lkey, (uintptr_t)buf, 16);
	q.x->wr_id = 3;
	ibv_wr_rdma_read(q.x, mr->rkey, (uintptr_t)&buf[256]);
	ibv_wr_set_sge(q.x, mr->lkey, (uintptr_t)buf, 16);
	q.x->wr_id = 4;
	ibv_wr_atomic_cmp_swp(q.x, mr->rkey, (uintptr_t)&buf[300], 1, 2);
	ibv_wr_set_sge(q.x, mr->lkey, (uintptr_t)buf, 8);
	q.x->wr_id = 5;
	ibv_wr_atomic_fetch_add(q.x, mr->rkey, (uintptr_t)&buf[300], 1);
	ibv_wr_set_sge(q.x, mr->lkey, (uintptr_t)buf, 8);
	q.x->wr_id = 6;
	ibv_wr_send_imm(q.x, htobe32(7));
	ibv_wr_set_inline_data(q.x, buf, 32);
	q.x->wr_id = 7;
	ibv_wr_rdma_write_imm(q.x, mr->rkey, (uintptr_t)&buf[256], htobe32(8));
	{
		struct ibv_data_buf d[2] = {{buf, 10}, {&buf[8], 22}};

		ibv_wr_set_inline_data_list(q.x, 2, d);
	}
	q.x->wr_id = 8;
	ibv_wr_send(q.x); /* no data: a zero-length send */
	CHECK_RET(ibv_wr_complete(q.x), 0);
	n = posted_ids(&q, ids, 16);
	CHECK_EQ_INT(n, 8);
	for (int i = 0; i < n && i < 8; i++)
		CHECK_EQ_INT(ids[i], (uint64_t)i + 1);
out:
	xqp_destroy(&q);
}

static void test_abort(void)
{
	struct ibv_send_wr w[5], *bad;
	struct ibv_sge sge;
	uint64_t ids[16];
	struct xqp q;
	int i, n;

	t_case("wr_abort drops the session");
	if (!CHECK(xqp_create(&q, IBV_QPT_RC, 4, IBV_QPS_SQD)))
		goto out;
	ibv_wr_start(q.x);
	for (i = 0; i < 4; i++)
		send8(q.x, 100 + (uint64_t)i);
	ibv_wr_abort(q.x);
	/* all four slots are free again */
	memset(w, 0, sizeof(w));
	sge.addr = (uintptr_t)buf;
	sge.length = 8;
	sge.lkey = mr->lkey;
	for (i = 0; i < 5; i++) {
		w[i].wr_id = 200 + (uint64_t)i;
		w[i].sg_list = &sge;
		w[i].num_sge = 1;
		w[i].opcode = IBV_WR_SEND;
		w[i].next = i < 4 ? &w[i + 1] : NULL;
	}
	bad = NULL;
	CHECK_RET(ibv_post_send(q.qp, w, &bad), ENOMEM);
	CHECK(bad == &w[4]);
	/* and a session that does not fit posts nothing */
	ibv_wr_start(q.x);
	send8(q.x, 300);
	CHECK_RET(ibv_wr_complete(q.x), ENOMEM);
	n = posted_ids(&q, ids, 16);
	CHECK_EQ_INT(n, 4);
	for (i = 0; i < n && i < 4; i++)
		CHECK_EQ_INT(ids[i], 200 + (uint64_t)i);
out:
	xqp_destroy(&q);
}

/* Run `build` in a session between two good sends; complete must give `want`. */
static void session_err(struct xqp *q, void (*build)(struct xqp *q), int want, const char *what)
{
	int ret;

	ibv_wr_start(q->x);
	send8(q->x, 900);
	build(q);
	send8(q->x, 901);
	ret = ibv_wr_complete(q->x);
	CHECK_MSG(ret == want, "%s: want %s, got %s", what, t_errname(want), t_errname(ret));
}

static void b_bind_mw(struct xqp *q)
{
	ibv_wr_bind_mw(q->x, NULL, 5, NULL);
}

static void b_tso(struct xqp *q)
{
	ibv_wr_send_tso(q->x, buf, 16, 100);
}

static void b_flush(struct xqp *q)
{
	ibv_wr_flush(q->x, mr->rkey, (uintptr_t)&buf[300], 8, 4, IBV_FLUSH_RANGE);
}

static void b_xrc(struct xqp *q)
{
	ibv_wr_set_xrc_srqn(q->x, 5);
}

static void b_orphan_setter(struct xqp *q)
{
	/* a new session's first call is a setter */
	ibv_wr_abort(q->x);
	ibv_wr_start(q->x);
	ibv_wr_set_sge(q->x, mr->lkey, (uintptr_t)buf, 8);
}

static void b_inline_long(struct xqp *q)
{
	ibv_wr_send(q->x);
	ibv_wr_set_inline_data(q->x, buf, q->cap.max_inline_data + 1);
}

static void b_inline_list_long(struct xqp *q)
{
	struct ibv_data_buf d[2] = {{buf, q->cap.max_inline_data}, {buf, 1}};

	ibv_wr_rdma_write(q->x, mr->rkey, (uintptr_t)&buf[256]);
	ibv_wr_set_inline_data_list(q->x, 2, d);
}

static void b_inline_read(struct xqp *q)
{
	ibv_wr_rdma_read(q->x, mr->rkey, (uintptr_t)&buf[256]);
	ibv_wr_set_inline_data(q->x, buf, 8);
}

static void b_inline_atomic(struct xqp *q)
{
	ibv_wr_atomic_fetch_add(q->x, mr->rkey, (uintptr_t)&buf[300], 1);
	ibv_wr_set_inline_data(q->x, buf, 8);
}

static void b_many_sges(struct xqp *q)
{
	struct ibv_sge s[40];

	for (unsigned int i = 0; i < 40; i++)
		s[i] = (struct ibv_sge){(uintptr_t)buf, 8, mr->lkey};
	ibv_wr_send(q->x);
	ibv_wr_set_sge_list(q->x, q->cap.max_send_sge + 1, s);
}

static void b_huge(struct xqp *q)
{
	struct ibv_sge s[2] = {{(uintptr_t)buf, 0x80000000u, mr->lkey},
			       {(uintptr_t)buf, 1, mr->lkey}};

	ibv_wr_rdma_write(q->x, mr->rkey, (uintptr_t)&buf[256]);
	ibv_wr_set_sge_list(q->x, 2, s);
}

static void b_atomic_len(struct xqp *q)
{
	ibv_wr_atomic_cmp_swp(q->x, mr->rkey, (uintptr_t)&buf[300], 1, 2);
	ibv_wr_set_sge(q->x, mr->lkey, (uintptr_t)buf, 4);
}

static void b_atomic_nodata(struct xqp *q)
{
	ibv_wr_atomic_fetch_add(q->x, mr->rkey, (uintptr_t)&buf[300], 1);
}

static void b_atomic_misaligned(struct xqp *q)
{
	ibv_wr_atomic_fetch_add(q->x, mr->rkey, (uintptr_t)&buf[300] + 4, 1);
	ibv_wr_set_sge(q->x, mr->lkey, (uintptr_t)buf, 8);
}

static void b_ud_addr_on_rc(struct xqp *q)
{
	ibv_wr_send(q->x);
	ibv_wr_set_ud_addr(q->x, NULL, 5, 5);
	ibv_wr_set_sge(q->x, mr->lkey, (uintptr_t)buf, 8);
}

static void b_overflow(struct xqp *q)
{
	for (int i = 0; i < 8; i++)
		send8(q->x, 950);
}

static void b_first_error_wins(struct xqp *q)
{
	ibv_wr_send_tso(q->x, buf, 16, 100);
	b_overflow(q);
}

static void test_errors_rc(void)
{
	static const struct {
		void (*build)(struct xqp *q);
		int want;
		const char *what;
	} cases[] = {
		{b_bind_mw, EINVAL, "bind_mw without a window or bind info"},
		{b_tso, EOPNOTSUPP, "send_tso"},
		{b_flush, EINVAL, "flush of an undefined placement type"},
		{b_xrc, EINVAL, "set_xrc_srqn on RC"},
		{b_orphan_setter, EINVAL, "setter without a request"},
		{b_inline_long, EINVAL, "inline beyond max_inline_data"},
		{b_inline_list_long, EINVAL, "inline list beyond max_inline_data"},
		{b_inline_read, EINVAL, "inline on RDMA READ"},
		{b_inline_atomic, EINVAL, "inline on an atomic"},
		{b_many_sges, EINVAL, "SGE list beyond max_send_sge"},
		{b_huge, EINVAL, "more than 2^31 bytes"},
		{b_atomic_len, EINVAL, "atomic with a 4-byte SGE"},
		{b_atomic_nodata, EINVAL, "atomic without an SGE"},
		{b_atomic_misaligned, EINVAL, "atomic at a misaligned address"},
		{b_ud_addr_on_rc, EINVAL, "set_ud_addr on RC"},
		{b_overflow, ENOMEM, "more requests than the queue holds"},
		{b_first_error_wins, EOPNOTSUPP, "the first error wins"},
	};
	uint64_t ids[16];
	struct xqp q;
	size_t i;
	int n;

	t_case("RC: errors are latched and the session posts nothing");
	if (!CHECK(xqp_create(&q, IBV_QPT_RC, 8, IBV_QPS_SQD)))
		goto out;
	for (i = 0; i < Q_ARRAY(cases); i++)
		session_err(&q, cases[i].build, cases[i].want, cases[i].what);
	/* the error does not outlive its session */
	ibv_wr_start(q.x);
	send8(q.x, 42);
	CHECK_RET(ibv_wr_complete(q.x), 0);
	n = posted_ids(&q, ids, 16);
	CHECK_EQ_INT(n, 1);
	if (n == 1)
		CHECK_EQ_INT(ids[0], 42);
out:
	xqp_destroy(&q);
}

static struct ibv_ah *ud_ah;

static void b_ud_write(struct xqp *q)
{
	ibv_wr_rdma_write(q->x, mr->rkey, (uintptr_t)buf);
	ibv_wr_set_ud_addr(q->x, ud_ah, 5, 5);
	ibv_wr_set_sge(q->x, mr->lkey, (uintptr_t)buf, 8);
}

static void b_ud_no_addr(struct xqp *q)
{
	ibv_wr_send(q->x);
	ibv_wr_set_sge(q->x, mr->lkey, (uintptr_t)buf, 8);
}

static void b_ud_null_ah(struct xqp *q)
{
	ibv_wr_send(q->x);
	ibv_wr_set_ud_addr(q->x, NULL, 5, 5);
	ibv_wr_set_sge(q->x, mr->lkey, (uintptr_t)buf, 8);
}

static void b_ud_too_long(struct xqp *q)
{
	ibv_wr_send(q->x);
	ibv_wr_set_ud_addr(q->x, ud_ah, 5, 5);
	ibv_wr_set_sge(q->x, mr->lkey, (uintptr_t)buf, 8192 + 1);
}

/* UD sessions: the good sends around the bad one need an address too. */
static void ud_session_err(struct xqp *q, void (*build)(struct xqp *q), int want, const char *what)
{
	int ret;

	ibv_wr_start(q->x);
	build(q);
	ret = ibv_wr_complete(q->x);
	CHECK_MSG(ret == want, "%s: want %s, got %s", what, t_errname(want), t_errname(ret));
}

static void test_errors_ud(void)
{
	struct ibv_ah_attr aa;
	uint64_t ids[16];
	struct xqp q;
	int n;

	t_case("UD: SEND only, an address per request, at most the path MTU");
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.dgid = env.gid;
	ud_ah = ibv_create_ah(env.pd, &aa);
	if (!CHECK(ud_ah) || !CHECK(xqp_create(&q, IBV_QPT_UD, 8, IBV_QPS_ERR)))
		goto out;
	ud_session_err(&q, b_ud_write, EINVAL, "RDMA WRITE on UD");
	ud_session_err(&q, b_ud_no_addr, EINVAL, "UD send without an address");
	ud_session_err(&q, b_ud_null_ah, EINVAL, "UD send with a NULL AH");
	ud_session_err(&q, b_ud_too_long, EINVAL, "UD send beyond the path MTU");
	/* a good one, posted in ERR: flushed at once */
	ibv_wr_start(q.x);
	q.x->wr_id = 77;
	ibv_wr_send_imm(q.x, 0);
	ibv_wr_set_ud_addr(q.x, ud_ah, 5, 0x11111111);
	ibv_wr_set_sge(q.x, mr->lkey, (uintptr_t)buf, 8);
	CHECK_RET(ibv_wr_complete(q.x), 0);
	n = posted_ids(&q, ids, 16);
	CHECK_EQ_INT(n, 1);
	if (n == 1)
		CHECK_EQ_INT(ids[0], 77);
out:
	xqp_destroy(&q);
	if (ud_ah)
		CHECK_RET(ibv_destroy_ah(ud_ah), 0);
}

static void test_states(void)
{
	static const enum ibv_qp_state early[] = {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR};
	struct xqp q;
	size_t i;

	t_case("wr_complete before RTS: EINVAL");
	for (i = 0; i < Q_ARRAY(early); i++) {
		if (!CHECK(xqp_create(&q, IBV_QPT_RC, 8, early[i]))) {
			xqp_destroy(&q);
			continue;
		}
		ibv_wr_start(q.x);
		send8(q.x, 1);
		CHECK_RET(ibv_wr_complete(q.x), EINVAL);
		xqp_destroy(&q);
	}
}

struct poster {
	struct ibv_qp *qp;
	atomic_bool done;
	int ret;
};

static void *post_thread(void *arg)
{
	struct poster *p = arg;
	struct ibv_send_wr w, *bad;
	struct ibv_sge sge = {(uintptr_t)buf, 8, mr->lkey};

	memset(&w, 0, sizeof(w));
	w.wr_id = 5;
	w.sg_list = &sge;
	w.num_sge = 1;
	w.opcode = IBV_WR_SEND;
	p->ret = ibv_post_send(p->qp, &w, &bad);
	atomic_store(&p->done, true);
	return NULL;
}

static void test_lock(void)
{
	struct poster p;
	uint64_t ids[8];
	pthread_t th;
	struct xqp q;
	int n;

	t_case("a session holds the QP: ibv_post_send waits for wr_complete");
	if (!CHECK(xqp_create(&q, IBV_QPT_RC, 8, IBV_QPS_SQD)))
		goto out;
	p.qp = q.qp;
	p.ret = -1;
	atomic_init(&p.done, false);
	ibv_wr_start(q.x);
	send8(q.x, 4);
	if (!CHECK_EQ_INT(pthread_create(&th, NULL, post_thread, &p), 0)) {
		ibv_wr_abort(q.x);
		goto out;
	}
	usleep(100 * 1000);
	CHECK_MSG(!atomic_load(&p.done), "post_send ran inside a wr_start session");
	CHECK_RET(ibv_wr_complete(q.x), 0);
	pthread_join(th, NULL);
	CHECK_EQ_INT(p.ret, 0);
	n = posted_ids(&q, ids, 8);
	CHECK_EQ_INT(n, 2);
	if (n == 2) {
		CHECK_EQ_INT(ids[0], 4);
		CHECK_EQ_INT(ids[1], 5);
	}
out:
	xqp_destroy(&q);
}

int main(void)
{
	t_start("api_qp_ex");
	q_env_open(&env, 16);
	mr = ibv_reg_mr(env.pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr) {
		printf("Bail out! reg_mr: %s\n", t_errname(errno));
		return 1;
	}
	test_session();
	test_abort();
	test_errors_rc();
	test_errors_ud();
	test_states();
	test_lock();
	t_case("teardown");
	CHECK_RET(ibv_dereg_mr(mr), 0);
	q_env_close(&env);
	return t_finish();
}
