/* SPDX-License-Identifier: MIT */
/*
 * api_post: ibv_post_send and ibv_post_recv argument and state rules,
 * and flushing.
 *
 * A failing work request stops the list: the verb returns its errno and
 * *bad points at it, the requests before it stay posted. Send: opcode
 * not valid for the QP type, num_sge beyond max_send_sge, inline data
 * beyond max_inline_data, an atomic without exactly one 8-byte SGE or
 * with a misaligned remote address, more than 2^31 bytes, UD without an
 * AH or beyond the path MTU: EINVAL; a full queue: ENOMEM; a state
 * before RTS: EINVAL. Receive: num_sge beyond max_recv_sge or a QP with
 * an SRQ: EINVAL; full: ENOMEM; RESET: EINVAL. In ERR both are accepted
 * and complete at once with IBV_WC_WR_FLUSH_ERR, signalled or not;
 * moving to ERR flushes what is posted, oldest first; RESET discards it.
 *
 * Full queues are filled in SQD, where the device starts nothing new.
 */
#include "harness.h"

#include "qp_util.h"

static struct q_env env;
static struct ibv_qp *qa, *qb; /* RC pair, connected to each other, in RTS */
static struct ibv_mr *mr;
static uint64_t buf[512];

static void setup(void)
{
	struct ibv_qp_init_attr a = q_init_attr(&env, IBV_QPT_RC);

	a.cap.max_send_wr = 256;
	qa = ibv_create_qp(env.pd, &a);
	qb = ibv_create_qp(env.pd, &a);
	mr = ibv_reg_mr(env.pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	if (!qa || !qb || !mr || q_bring_up(&env, qa, IBV_QPS_RTS, qb->qp_num) ||
	    q_bring_up(&env, qb, IBV_QPS_RTS, qa->qp_num)) {
		printf("Bail out! setup: %s\n", t_errname(errno));
		exit(1);
	}
}

/* An unsignalled RDMA WRITE of 8 bytes into the peer's buffer: always valid on RC. */
static struct ibv_send_wr good_write(struct ibv_sge *sge)
{
	struct ibv_send_wr w;

	memset(&w, 0, sizeof(w));
	sge->addr = (uintptr_t)buf;
	sge->length = 8;
	sge->lkey = mr->lkey;
	w.wr_id = 1;
	w.sg_list = sge;
	w.num_sge = 1;
	w.opcode = IBV_WR_RDMA_WRITE;
	w.wr.rdma.remote_addr = (uintptr_t)&buf[256];
	w.wr.rdma.rkey = mr->rkey;
	return w;
}

/*
 * Post [good, bad, good] to `qp`; the verb must return `want` with *bad
 * on the middle request. The first request is posted.
 */
static void post_bad(struct ibv_qp *qp, const struct ibv_send_wr *bad_wr, int want, int line)
{
	struct ibv_send_wr wr[3], *bad = NULL;
	struct ibv_sge s0, s2;
	int ret;

	wr[0] = good_write(&s0);
	wr[1] = *bad_wr;
	wr[2] = good_write(&s2);
	wr[0].next = &wr[1];
	wr[1].next = &wr[2];
	wr[2].next = NULL;
	ret = ibv_post_send(qp, &wr[0], &bad);
	CHECK_MSG(ret == want && bad == &wr[1], "line %d: want %s with *bad = wr[1], got %s, %s",
		  line, t_errname(want), t_errname(ret),
		  bad == &wr[0] ? "wr[0]" :
		  bad == &wr[2] ? "wr[2]" :
		  bad		? "other" :
				  "NULL");
}
#define POST_BAD(qp, w, want) post_bad((qp), (w), (want), __LINE__)

static void test_send_args(void)
{
	/* BIND_MW without a window; LOCAL_INV and SEND_WITH_INV are RC's (api_mw) */
	static const int bad_ops[] = {IBV_WR_BIND_MW, IBV_WR_TSO, IBV_WR_DRIVER1, IBV_WR_FLUSH, 99};
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr qattr;
	struct ibv_sge sge[40];
	struct ibv_send_wr w, *bad;
	uint8_t big[600];
	size_t i;

	t_case("post_send: argument errors name the failing request");
	CHECK_RET(ibv_query_qp(qa, &qattr, IBV_QP_CAP, &init), 0);
	for (i = 0; i < Q_ARRAY(bad_ops); i++) {
		w = good_write(&sge[0]);
		w.opcode = (enum ibv_wr_opcode)bad_ops[i];
		POST_BAD(qa, &w, EINVAL);
	}
	/* SGE count */
	w = good_write(&sge[0]);
	for (i = 0; i < Q_ARRAY(sge); i++)
		sge[i] = sge[0];
	w.num_sge = (int)qattr.cap.max_send_sge + 1;
	POST_BAD(qa, &w, EINVAL);
	w.num_sge = -1;
	POST_BAD(qa, &w, EINVAL);
	w.num_sge = (int)qattr.cap.max_send_sge; /* the maximum is fine */
	bad = NULL;
	CHECK_RET(ibv_post_send(qa, &w, &bad), 0);

	/* inline */
	memset(big, 7, sizeof(big));
	w = good_write(&sge[0]);
	w.send_flags = IBV_SEND_INLINE;
	sge[0].addr = (uintptr_t)big;
	sge[0].lkey = 0; /* inline data needs no key */
	sge[0].length = qattr.cap.max_inline_data + 1;
	POST_BAD(qa, &w, EINVAL);
	w.opcode = IBV_WR_SEND;
	POST_BAD(qa, &w, EINVAL);
	w.opcode = IBV_WR_RDMA_WRITE; /* a SEND would wait for a receive at the peer */
	sge[0].length = qattr.cap.max_inline_data;
	CHECK_RET(ibv_post_send(qa, &w, &bad), 0);
	/* two SGEs that add up to one byte too many */
	sge[0].length = qattr.cap.max_inline_data / 2;
	sge[1] = sge[0];
	sge[1].length = qattr.cap.max_inline_data - sge[0].length + 1;
	w.num_sge = 2;
	POST_BAD(qa, &w, EINVAL);

	/* atomics: one 8-byte SGE, aligned remote address */
	w = good_write(&sge[0]);
	w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	w.wr.atomic.remote_addr = (uintptr_t)&buf[300];
	w.wr.atomic.rkey = mr->rkey;
	w.wr.atomic.compare_add = 1;
	sge[0].length = 4;
	POST_BAD(qa, &w, EINVAL);
	sge[0].length = 16;
	POST_BAD(qa, &w, EINVAL);
	sge[0].length = 8;
	sge[1] = sge[0];
	w.num_sge = 2;
	POST_BAD(qa, &w, EINVAL);
	w.num_sge = 0;
	POST_BAD(qa, &w, EINVAL);
	w.num_sge = 1;
	w.wr.atomic.remote_addr += 4;
	POST_BAD(qa, &w, EINVAL);
	w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	POST_BAD(qa, &w, EINVAL);
	w.wr.atomic.remote_addr -= 4;
	CHECK_RET(ibv_post_send(qa, &w, &bad), 0);
	/* IBV_SEND_INLINE is ignored on an atomic: it still needs its SGE */
	w.send_flags = IBV_SEND_INLINE;
	CHECK_RET(ibv_post_send(qa, &w, &bad), 0);

	/* message size */
	w = good_write(&sge[0]);
	sge[0].length = 0x80000001u;
	POST_BAD(qa, &w, EINVAL);
	sge[0].length = 0x80000000u;
	sge[1] = sge[0];
	sge[1].length = 1;
	w.num_sge = 2;
	POST_BAD(qa, &w, EINVAL);
	/* an empty list posts nothing and succeeds */
	CHECK_RET(ibv_post_send(qa, NULL, &bad), 0);
}

static void test_ud_args(void)
{
	struct ibv_port_attr pa;
	struct ibv_ah_attr aa;
	struct ibv_send_wr w, wr2[2], *bad;
	struct ibv_sge sge;
	struct ibv_ah *ah;
	struct ibv_qp *ud;
	uint8_t *payload;
	uint32_t mtu;

	t_case("post_send on UD: SEND only, an AH, at most the path MTU");
	ud = q_create(&env, IBV_QPT_UD);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.dgid = env.gid;
	ah = ibv_create_ah(env.pd, &aa);
	if (!CHECK(ud && ah) || !CHECK_RET(ibv_query_port(env.ctx, 1, &pa), 0) ||
	    !CHECK_RET(q_bring_up(&env, ud, IBV_QPS_RTS, 0), 0))
		goto out;
	mtu = 128u << pa.active_mtu;
	payload = calloc(1, mtu + 1);
	if (!CHECK(payload))
		goto out;
	memset(&w, 0, sizeof(w));
	sge.addr = (uintptr_t)buf;
	sge.length = 8;
	sge.lkey = mr->lkey;
	w.sg_list = &sge;
	w.num_sge = 1;
	w.opcode = IBV_WR_RDMA_WRITE;
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = 0x4242; /* nobody: the datagram is dropped */
	w.wr.ud.remote_qkey = 0x11111111;
	wr2[0] = w;
	wr2[0].opcode = IBV_WR_SEND;
	wr2[0].next = &wr2[1];
	wr2[1] = w;
	wr2[1].next = NULL;
	bad = NULL;
	CHECK_RET(ibv_post_send(ud, wr2, &bad), EINVAL);
	CHECK(bad == &wr2[1]);
	wr2[1].opcode = IBV_WR_RDMA_READ;
	CHECK_RET(ibv_post_send(ud, wr2, &bad), EINVAL);
	CHECK(bad == &wr2[1]);
	wr2[1].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	CHECK_RET(ibv_post_send(ud, wr2, &bad), EINVAL);
	CHECK(bad == &wr2[1]);
	wr2[1].opcode = IBV_WR_SEND_WITH_IMM;
	wr2[1].wr.ud.ah = NULL;
	CHECK_RET(ibv_post_send(ud, wr2, &bad), EINVAL);
	CHECK(bad == &wr2[1]);
	wr2[1].wr.ud.ah = ah;
	sge.length = mtu + 1;
	CHECK_RET(ibv_post_send(ud, &wr2[1], &bad), EINVAL);
	CHECK(bad == &wr2[1]);
	/* exactly one MTU is fine (inline-free, from a registered buffer) */
	{
		struct ibv_mr *pmr = ibv_reg_mr(env.pd, payload, mtu + 1, IBV_ACCESS_LOCAL_WRITE);

		if (CHECK(pmr)) {
			sge.addr = (uintptr_t)payload;
			sge.lkey = pmr->lkey;
			sge.length = mtu;
			CHECK_RET(ibv_post_send(ud, &wr2[1], &bad), 0);
			CHECK_RET(ibv_destroy_qp(ud), 0);
			ud = NULL;
			CHECK_RET(ibv_dereg_mr(pmr), 0);
		}
	}
	free(payload);
out:
	if (ud)
		CHECK_RET(ibv_destroy_qp(ud), 0);
	if (ah)
		CHECK_RET(ibv_destroy_ah(ah), 0);
}

static void test_states(void)
{
	static const enum ibv_qp_state early[] = {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR};
	struct ibv_send_wr w, *bad;
	struct ibv_recv_wr r, *rbad;
	struct ibv_sge sge, rsge;
	struct ibv_qp *qp;
	size_t i;

	t_case("post in the wrong state: EINVAL naming the first request");
	memset(&r, 0, sizeof(r));
	rsge.addr = (uintptr_t)buf;
	rsge.length = 64;
	rsge.lkey = mr->lkey;
	r.sg_list = &rsge;
	r.num_sge = 1;
	for (i = 0; i < Q_ARRAY(early); i++) {
		qp = q_create(&env, IBV_QPT_RC);
		if (!CHECK(qp))
			return;
		if (early[i] != IBV_QPS_RESET)
			CHECK_RET(q_bring_up(&env, qp, early[i], qb->qp_num), 0);
		w = good_write(&sge);
		bad = NULL;
		CHECK_RET(ibv_post_send(qp, &w, &bad), EINVAL);
		CHECK(bad == &w);
		rbad = NULL;
		if (early[i] == IBV_QPS_RESET) {
			CHECK_RET(ibv_post_recv(qp, &r, &rbad), EINVAL);
			CHECK(rbad == &r);
		} else {
			CHECK_RET(ibv_post_recv(qp, &r, &rbad), 0);
		}
		CHECK_RET(ibv_destroy_qp(qp), 0);
	}
}

static void test_full(void)
{
	struct ibv_qp_init_attr a = q_init_attr(&env, IBV_QPT_RC);
	struct ibv_send_wr w[6], *bad;
	struct ibv_recv_wr r[6], *rbad;
	struct ibv_sge sge, rsge;
	struct ibv_qp_attr m;
	struct ibv_qp *qp;
	int i;

	t_case("full queues: ENOMEM naming the first request that does not fit");
	a.cap.max_send_wr = 4;
	a.cap.max_recv_wr = 4;
	qp = ibv_create_qp(env.pd, &a);
	if (!CHECK(qp))
		return;
	CHECK_EQ_INT(a.cap.max_send_wr, 4);
	CHECK_EQ_INT(a.cap.max_recv_wr, 4);
	CHECK_RET(q_bring_up(&env, qp, IBV_QPS_RTS, qb->qp_num), 0);
	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_SQD;
	CHECK_RET(ibv_modify_qp(qp, &m, IBV_QP_STATE), 0);
	for (i = 0; i < 6; i++) {
		w[i] = good_write(&sge);
		w[i].wr_id = (uint64_t)i;
		w[i].next = i < 5 ? &w[i + 1] : NULL;
	}
	w[2].next = NULL; /* three fit */
	CHECK_RET(ibv_post_send(qp, &w[0], &bad), 0);
	w[2].next = &w[3];
	bad = NULL;
	CHECK_RET(ibv_post_send(qp, &w[3], &bad), ENOMEM); /* w[3] fits, w[4] does not */
	CHECK(bad == &w[4]);
	CHECK_RET(ibv_post_send(qp, &w[5], &bad), ENOMEM);
	CHECK(bad == &w[5]);

	memset(r, 0, sizeof(r));
	rsge.addr = (uintptr_t)buf;
	rsge.length = 8;
	rsge.lkey = mr->lkey;
	for (i = 0; i < 6; i++) {
		r[i].wr_id = (uint64_t)i;
		r[i].sg_list = &rsge;
		r[i].num_sge = 1;
		r[i].next = i < 5 ? &r[i + 1] : NULL;
	}
	rbad = NULL;
	CHECK_RET(ibv_post_recv(qp, &r[0], &rbad), ENOMEM);
	CHECK(rbad == &r[4]);
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

static void test_recv_args(void)
{
	struct ibv_srq_init_attr sa;
	struct ibv_qp_init_attr a;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr qattr;
	struct ibv_recv_wr r[3], *bad;
	struct ibv_sge sge[40];
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	int i;

	t_case("post_recv: argument errors; a QP with an SRQ takes none");
	qp = q_create(&env, IBV_QPT_UD);
	if (!CHECK(qp) || !CHECK_RET(q_bring_up(&env, qp, IBV_QPS_INIT, 0), 0))
		return;
	CHECK_RET(ibv_query_qp(qp, &qattr, IBV_QP_CAP, &init), 0);
	memset(r, 0, sizeof(r));
	for (i = 0; i < 40; i++) {
		sge[i].addr = (uintptr_t)buf;
		sge[i].length = 8;
		sge[i].lkey = mr->lkey;
	}
	for (i = 0; i < 3; i++) {
		r[i].sg_list = sge;
		r[i].num_sge = 1;
		r[i].next = i < 2 ? &r[i + 1] : NULL;
	}
	r[1].num_sge = (int)qattr.cap.max_recv_sge + 1;
	bad = NULL;
	CHECK_RET(ibv_post_recv(qp, r, &bad), EINVAL);
	CHECK(bad == &r[1]);
	r[1].num_sge = -1;
	CHECK_RET(ibv_post_recv(qp, r, &bad), EINVAL);
	CHECK(bad == &r[1]);
	r[1].num_sge = (int)qattr.cap.max_recv_sge;
	r[1].next = NULL;
	CHECK_RET(ibv_post_recv(qp, r, &bad), 0);
	CHECK_RET(ibv_destroy_qp(qp), 0);

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq(env.pd, &sa);
	if (!CHECK(srq))
		return;
	a = q_init_attr(&env, IBV_QPT_RC);
	a.srq = srq;
	qp = ibv_create_qp(env.pd, &a);
	if (CHECK(qp)) {
		CHECK_RET(q_bring_up(&env, qp, IBV_QPS_INIT, 0), 0);
		r[0].next = NULL;
		bad = NULL;
		CHECK_RET(ibv_post_recv(qp, r, &bad), EINVAL);
		CHECK(bad == &r[0]);
		CHECK_RET(ibv_destroy_qp(qp), 0);
	}
	CHECK_RET(ibv_destroy_srq(srq), 0);
}

/* A QP on fresh CQs of its own, so completions can be counted exactly. */
struct own {
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
};

static bool own_create(struct own *o, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a = q_init_attr(&env, type);

	o->scq = ibv_create_cq(env.ctx, 64, NULL, NULL, 0);
	o->rcq = ibv_create_cq(env.ctx, 64, NULL, NULL, 0);
	a.send_cq = o->scq;
	a.recv_cq = o->rcq;
	o->qp = o->scq && o->rcq ? ibv_create_qp(env.pd, &a) : NULL;
	return o->qp != NULL;
}

static void own_destroy(struct own *o)
{
	if (o->qp)
		CHECK_RET(ibv_destroy_qp(o->qp), 0);
	if (o->scq)
		CHECK_RET(ibv_destroy_cq(o->scq), 0);
	if (o->rcq)
		CHECK_RET(ibv_destroy_cq(o->rcq), 0);
}

/* Contract: `n` completions, all FLUSH_ERR of `qp`, wr_ids first_id.. and opcodes `ops`. */
static void expect_flush(struct ibv_cq *cq, struct ibv_qp *qp, int n, uint64_t first_id,
			 const enum ibv_wc_opcode *ops, int line)
{
	struct ibv_wc wc[16];
	int got = q_poll(cq, wc, 16, n), i;

	CHECK_MSG(got == n, "line %d: %d completions, want %d", line, got, n);
	for (i = 0; i < got && i < n; i++) {
		CHECK_MSG(wc[i].status == IBV_WC_WR_FLUSH_ERR && wc[i].wr_id == first_id + i &&
				  wc[i].qp_num == qp->qp_num && wc[i].opcode == ops[i],
			  "line %d: wc %d: status %d wr_id %llu qp %u opcode %d", line, i,
			  wc[i].status, (unsigned long long)wc[i].wr_id, wc[i].qp_num,
			  wc[i].opcode);
	}
	CHECK_MSG(ibv_poll_cq(cq, 16, wc) == 0, "line %d: more completions than expected", line);
}

static void test_flush(void)
{
	static const enum ibv_wc_opcode recv_ops[] = {IBV_WC_RECV, IBV_WC_RECV, IBV_WC_RECV};
	static const enum ibv_wc_opcode send_ops[] = {
		IBV_WC_SEND,	  IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,
		IBV_WC_COMP_SWAP, IBV_WC_FETCH_ADD,  IBV_WC_SEND};
	static const enum ibv_wc_opcode write_ops[] = {IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE,
						       IBV_WC_RDMA_WRITE};
	static const enum ibv_wr_opcode wr_ops[] = {
		IBV_WR_SEND,	     IBV_WR_RDMA_WRITE,		IBV_WR_RDMA_WRITE_WITH_IMM,
		IBV_WR_RDMA_READ,    IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
		IBV_WR_SEND_WITH_IMM};
	struct ibv_send_wr w[7], *bad;
	struct ibv_recv_wr r[3], *rbad;
	struct ibv_sge sge;
	struct ibv_qp_attr m;
	struct own o;
	int i;

	t_case("ERR flushes posted and new requests with IBV_WC_WR_FLUSH_ERR");
	if (!CHECK(own_create(&o, IBV_QPT_RC)))
		goto out;
	CHECK_RET(q_bring_up(&env, o.qp, IBV_QPS_INIT, 0), 0);
	memset(r, 0, sizeof(r));
	sge.addr = (uintptr_t)buf;
	sge.length = 8;
	sge.lkey = mr->lkey;
	for (i = 0; i < 3; i++) {
		r[i].wr_id = 100 + (uint64_t)i;
		r[i].sg_list = &sge;
		r[i].num_sge = 1;
		r[i].next = i < 2 ? &r[i + 1] : NULL;
	}
	CHECK_RET(ibv_post_recv(o.qp, r, &rbad), 0);
	CHECK_EQ_INT(ibv_poll_cq(o.rcq, 1, (struct ibv_wc[1]){0}), 0);
	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_ERR;
	CHECK_RET(ibv_modify_qp(o.qp, &m, IBV_QP_STATE), 0);
	expect_flush(o.rcq, o.qp, 3, 100, recv_ops, __LINE__);

	/* in ERR: every send opcode, unsignalled, flushes at once */
	for (i = 0; i < 7; i++) {
		w[i] = good_write(&sge);
		w[i].wr_id = 10 + (uint64_t)i;
		w[i].opcode = wr_ops[i];
		w[i].wr.atomic.remote_addr = (uintptr_t)&buf[300];
		w[i].wr.atomic.rkey = mr->rkey;
		w[i].next = i < 6 ? &w[i + 1] : NULL;
	}
	CHECK_RET(ibv_post_send(o.qp, w, &bad), 0);
	expect_flush(o.scq, o.qp, 7, 10, send_ops, __LINE__);
	/* in ERR: receives too */
	r[0].next = NULL;
	CHECK_RET(ibv_post_recv(o.qp, r, &rbad), 0);
	expect_flush(o.rcq, o.qp, 1, 100, recv_ops, __LINE__);
	/* in ERR the argument checks still apply */
	w[0].opcode = IBV_WR_TSO;
	w[0].next = NULL;
	bad = NULL;
	CHECK_RET(ibv_post_send(o.qp, w, &bad), EINVAL);
	CHECK(bad == &w[0]);
	CHECK_EQ_INT(ibv_poll_cq(o.scq, 1, (struct ibv_wc[1]){0}), 0);
out:
	own_destroy(&o);

	/* outstanding sends (held back in SQD) flush when the QP goes to ERR */
	if (!CHECK(own_create(&o, IBV_QPT_RC)))
		goto out2;
	CHECK_RET(q_bring_up(&env, o.qp, IBV_QPS_RTS, qb->qp_num), 0);
	m.qp_state = IBV_QPS_SQD;
	CHECK_RET(ibv_modify_qp(o.qp, &m, IBV_QP_STATE), 0);
	for (i = 0; i < 3; i++) {
		w[i] = good_write(&sge);
		w[i].wr_id = 20 + (uint64_t)i;
		w[i].next = i < 2 ? &w[i + 1] : NULL;
	}
	w[1].send_flags = IBV_SEND_SIGNALED;
	CHECK_RET(ibv_post_send(o.qp, w, &bad), 0);
	CHECK_EQ_INT(ibv_poll_cq(o.scq, 1, (struct ibv_wc[1]){0}), 0);
	m.qp_state = IBV_QPS_ERR;
	CHECK_RET(ibv_modify_qp(o.qp, &m, IBV_QP_STATE), 0);
	expect_flush(o.scq, o.qp, 3, 20, write_ops, __LINE__);
out2:
	own_destroy(&o);
}

static void test_reset_discards(void)
{
	struct ibv_recv_wr r[8], *rbad;
	struct ibv_sge sge;
	struct ibv_qp_attr m;
	struct own o;
	int i;

	t_case("RESET discards posted requests without completions");
	if (!CHECK(own_create(&o, IBV_QPT_UD)))
		goto out;
	CHECK_RET(q_bring_up(&env, o.qp, IBV_QPS_INIT, 0), 0);
	memset(r, 0, sizeof(r));
	sge.addr = (uintptr_t)buf;
	sge.length = 8;
	sge.lkey = mr->lkey;
	for (i = 0; i < 8; i++) {
		r[i].wr_id = (uint64_t)i;
		r[i].sg_list = &sge;
		r[i].num_sge = 1;
		r[i].next = i < 7 ? &r[i + 1] : NULL;
	}
	CHECK_RET(ibv_post_recv(o.qp, r, &rbad), 0); /* the queue is full now */
	CHECK_RET(ibv_post_recv(o.qp, r, &rbad), ENOMEM);
	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_RESET;
	CHECK_RET(ibv_modify_qp(o.qp, &m, IBV_QP_STATE), 0);
	m.qp_state = IBV_QPS_ERR;
	CHECK_RET(ibv_modify_qp(o.qp, &m, IBV_QP_STATE), 0); /* nothing left to flush */
	CHECK_EQ_INT(ibv_poll_cq(o.rcq, 1, (struct ibv_wc[1]){0}), 0);
	m.qp_state = IBV_QPS_RESET;
	CHECK_RET(ibv_modify_qp(o.qp, &m, IBV_QP_STATE), 0);
	CHECK_RET(q_bring_up(&env, o.qp, IBV_QPS_INIT, 0), 0);
	CHECK_RET(ibv_post_recv(o.qp, r, &rbad), 0); /* room for all eight again */
out:
	own_destroy(&o);
}

int main(void)
{
	t_start("api_post");
	q_env_open(&env, 256);
	setup();
	test_send_args();
	test_ud_args();
	test_states();
	test_full();
	test_recv_args();
	test_flush();
	test_reset_discards();
	t_case("teardown");
	CHECK_RET(ibv_destroy_qp(qa), 0);
	CHECK_RET(ibv_destroy_qp(qb), 0);
	CHECK_RET(ibv_dereg_mr(mr), 0);
	q_env_close(&env);
	return t_finish();
}
