/* SPDX-License-Identifier: MIT */
/*
 * unit_qp: what the QP layer puts in its rings and tables, white-box.
 *
 * ibv_post_send and the ibv_wr_* API queue byte-identical send WQEs for
 * the same requests (RC: every operation, inline and SGE data; UD: the
 * resolved address); inline data is copied at post time; sq_sig_all
 * marks every WQE signalled; granted capacities match the rings. The QPN
 * table resolves a live QP with a reference that keeps it alive past
 * ibv_destroy_qp, and nothing else. sw_qp_take_recv hands out receive
 * WQEs in order, from the QP's ring or its SRQ. sw_qp_error_locked
 * flushes and moves to ERR.
 */
#include "harness.h"

#include <stddef.h>

#include "qp_util.h"
#include "sw/queue/qp_priv.h"

static struct q_env env;
static struct ibv_mr *mr;
static uint64_t buf[512];

/* An RC or UD QP in SQD (so the transport starts nothing), extended or not. */
static struct ibv_qp *make_qp(enum ibv_qp_type type, bool ex, int sig_all)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp_attr m;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	a.send_cq = env.scq;
	a.recv_cq = env.rcq;
	a.qp_type = type;
	a.sq_sig_all = sig_all;
	a.cap.max_send_wr = 16;
	a.cap.max_recv_wr = 16;
	a.cap.max_send_sge = 2;
	a.cap.max_recv_sge = 3;
	a.cap.max_inline_data = 48;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = env.pd;
	if (ex) {
		a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
		if (type == IBV_QPT_RC)
			a.send_ops_flags |=
				IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
				IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	}
	qp = ibv_create_qp_ex(env.ctx, &a);
	if (!qp)
		return NULL;
	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_SQD;
	if (q_bring_up(&env, qp, IBV_QPS_RTS, 0x4242) || ibv_modify_qp(qp, &m, IBV_QP_STATE)) {
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

/* Compare the meaningful bytes of two send WQEs; 0 if equal. */
static int wqe_cmp(const struct sw_send_wqe *a, const struct sw_send_wqe *b)
{
	size_t data;

	if (memcmp(a, b, offsetof(struct sw_send_wqe, data)))
		return 1;
	data = a->num_sge ? a->num_sge * sizeof(struct ibv_sge) : a->length;
	return memcmp(a->data, b->data, data) ? 2 : 0;
}

static void test_same_wqes_rc(void)
{
	struct ibv_qp *p = make_qp(IBV_QPT_RC, false, 0), *x = make_qp(IBV_QPT_RC, true, 0);
	struct ibv_sge s2[2] = {{(uintptr_t)buf, 24, 0}, {(uintptr_t)&buf[8], 40, 0}};
	struct ibv_sge s8 = {(uintptr_t)&buf[16], 8, 0};
	struct ibv_sge sin = {(uintptr_t)&buf[32], 40, 0};
	struct ibv_send_wr w[7], *bad;
	struct ibv_qp_ex *qx;
	struct sw_qp *sp, *sx;
	int i;

	t_case("RC: post_send and ibv_wr_* build the same WQEs");
	if (!CHECK(p && x))
		goto out;
	s2[0].lkey = s2[1].lkey = s8.lkey = mr->lkey;
	for (i = 0; i < 64; i++)
		((uint8_t *)buf)[i + 256] = (uint8_t)(i * 3 + 1);
	memset(w, 0, sizeof(w));
	for (i = 0; i < 7; i++) {
		w[i].wr_id = 0x1000 + (uint64_t)i;
		w[i].next = i < 6 ? &w[i + 1] : NULL;
	}
	w[0].opcode = IBV_WR_SEND;
	w[0].sg_list = s2;
	w[0].num_sge = 2;
	w[0].send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	w[1].opcode = IBV_WR_SEND_WITH_IMM;
	w[1].imm_data = htobe32(0xabcd);
	w[1].sg_list = &sin;
	w[1].num_sge = 1;
	w[1].send_flags = IBV_SEND_INLINE;
	w[2].opcode = IBV_WR_RDMA_WRITE;
	w[2].sg_list = s2;
	w[2].num_sge = 1;
	w[2].wr.rdma.remote_addr = 0x123456789aULL;
	w[2].wr.rdma.rkey = 0x77;
	w[2].send_flags = IBV_SEND_FENCE;
	w[3].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	w[3].imm_data = htobe32(5);
	w[3].sg_list = &sin;
	w[3].num_sge = 1;
	w[3].send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
	w[3].wr.rdma.remote_addr = 0x42;
	w[3].wr.rdma.rkey = 0x78;
	w[4].opcode = IBV_WR_RDMA_READ;
	w[4].sg_list = s2;
	w[4].num_sge = 2;
	w[4].wr.rdma.remote_addr = 0x1000;
	w[4].wr.rdma.rkey = 0x79;
	w[5].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	w[5].sg_list = &s8;
	w[5].num_sge = 1;
	w[5].wr.atomic.remote_addr = 0x2000;
	w[5].wr.atomic.compare_add = 11;
	w[5].wr.atomic.swap = 22;
	w[5].wr.atomic.rkey = 0x7a;
	w[6].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	w[6].sg_list = &s8;
	w[6].num_sge = 1;
	w[6].wr.atomic.remote_addr = 0x3000;
	w[6].wr.atomic.compare_add = 33;
	w[6].wr.atomic.rkey = 0x7b;
	w[6].send_flags = IBV_SEND_SIGNALED;
	sin.addr = (uintptr_t)buf + 256;
	CHECK_RET(ibv_post_send(p, w, &bad), 0);

	qx = ibv_qp_to_qp_ex(x);
	ibv_wr_start(qx);
	for (i = 0; i < 7; i++) {
		qx->wr_id = w[i].wr_id;
		qx->wr_flags = w[i].send_flags;
		switch (w[i].opcode) {
		case IBV_WR_SEND:
			ibv_wr_send(qx);
			break;
		case IBV_WR_SEND_WITH_IMM:
			ibv_wr_send_imm(qx, w[i].imm_data);
			break;
		case IBV_WR_RDMA_WRITE:
			ibv_wr_rdma_write(qx, w[i].wr.rdma.rkey, w[i].wr.rdma.remote_addr);
			break;
		case IBV_WR_RDMA_WRITE_WITH_IMM:
			ibv_wr_rdma_write_imm(qx, w[i].wr.rdma.rkey, w[i].wr.rdma.remote_addr,
					      w[i].imm_data);
			break;
		case IBV_WR_RDMA_READ:
			ibv_wr_rdma_read(qx, w[i].wr.rdma.rkey, w[i].wr.rdma.remote_addr);
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
			ibv_wr_atomic_cmp_swp(qx, w[i].wr.atomic.rkey, w[i].wr.atomic.remote_addr,
					      w[i].wr.atomic.compare_add, w[i].wr.atomic.swap);
			break;
		default:
			ibv_wr_atomic_fetch_add(qx, w[i].wr.atomic.rkey, w[i].wr.atomic.remote_addr,
						w[i].wr.atomic.compare_add);
			break;
		}
		if (w[i].send_flags & IBV_SEND_INLINE)
			ibv_wr_set_inline_data(qx, (void *)(uintptr_t)w[i].sg_list[0].addr,
					       w[i].sg_list[0].length);
		else
			ibv_wr_set_sge_list(qx, (size_t)w[i].num_sge, w[i].sg_list);
	}
	CHECK_RET(ibv_wr_complete(qx), 0);

	sp = sw_qp(p);
	sx = sw_qp(x);
	CHECK_EQ_INT(sp->sq.prod - sp->sq.cons, 7);
	CHECK_EQ_INT(sx->sq.prod - sx->sq.cons, 7);
	for (i = 0; i < 7; i++) {
		const struct sw_send_wqe *a = sw_ring_slot(&sp->sq, sp->sq.cons + (uint32_t)i);
		const struct sw_send_wqe *b = sw_ring_slot(&sx->sq, sx->sq.cons + (uint32_t)i);

		CHECK_MSG(wqe_cmp(a, b) == 0, "WQE %d differs (%d)", i, wqe_cmp(a, b));
		CHECK_EQ_INT(a->opcode, w[i].opcode);
		CHECK_EQ_INT(a->wr_id, w[i].wr_id);
	}
	/* spot checks of the content */
	{
		const struct sw_send_wqe *a = sw_ring_slot(&sp->sq, sp->sq.cons);
		const struct ibv_sge *sg = (const struct ibv_sge *)(const void *)a->data;

		CHECK_EQ_INT(a->num_sge, 2);
		CHECK_EQ_INT(a->length, 64);
		CHECK(sg[1].addr == s2[1].addr && sg[1].length == 40 && sg[1].lkey == mr->lkey);
		CHECK_EQ_INT(a->send_flags, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
		a = sw_ring_slot(&sp->sq, sp->sq.cons + 1);
		CHECK_EQ_INT(a->num_sge, 0);
		CHECK_EQ_INT(a->length, 40);
		CHECK(a->send_flags & IBV_SEND_INLINE);
		CHECK(!memcmp(a->data, (uint8_t *)buf + 256, 40));
		CHECK_EQ_INT(a->imm_data, htobe32(0xabcd));
		a = sw_ring_slot(&sp->sq, sp->sq.cons + 5);
		CHECK_EQ_INT(a->wr.atomic.swap, 22);
		CHECK_EQ_INT(a->wr.atomic.compare_add, 11);
		CHECK_EQ_INT(a->length, 8);
	}
out:
	if (p)
		CHECK_RET(ibv_destroy_qp(p), 0);
	if (x)
		CHECK_RET(ibv_destroy_qp(x), 0);
}

static void test_same_wqes_ud(void)
{
	struct ibv_qp *p = make_qp(IBV_QPT_UD, false, 0), *x = make_qp(IBV_QPT_UD, true, 0);
	struct ibv_sge sge = {(uintptr_t)buf, 100, 0};
	struct ibv_send_wr w, *bad;
	struct ibv_ah_attr aa;
	struct ibv_qp_ex *qx;
	struct ibv_ah *ah;
	const struct sw_send_wqe *a, *b;

	t_case("UD: the same WQEs, with the AH's address vector");
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.dgid = env.gid;
	aa.grh.hop_limit = 3;
	ah = ibv_create_ah(env.pd, &aa);
	if (!CHECK(p && x && ah))
		goto out;
	sge.lkey = mr->lkey;
	memset(&w, 0, sizeof(w));
	w.wr_id = 9;
	w.opcode = IBV_WR_SEND_WITH_IMM;
	w.imm_data = htobe32(1);
	w.sg_list = &sge;
	w.num_sge = 1;
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = 0x1234;
	w.wr.ud.remote_qkey = 0x80000000u;
	CHECK_RET(ibv_post_send(p, &w, &bad), 0);
	qx = ibv_qp_to_qp_ex(x);
	ibv_wr_start(qx);
	qx->wr_id = 9;
	qx->wr_flags = 0;
	ibv_wr_send_imm(qx, htobe32(1));
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 100);
	ibv_wr_set_ud_addr(qx, ah, 0x1234, 0x80000000u);
	CHECK_RET(ibv_wr_complete(qx), 0);
	a = sw_ring_slot(&sw_qp(p)->sq, sw_qp(p)->sq.cons);
	b = sw_ring_slot(&sw_qp(x)->sq, sw_qp(x)->sq.cons);
	CHECK_EQ_INT(wqe_cmp(a, b), 0);
	CHECK(!memcmp(&a->wr.ud.av, &sw_ah(ah)->av, sizeof(a->wr.ud.av)));
	CHECK_EQ_INT(a->wr.ud.remote_qpn, 0x1234);
	CHECK_EQ_INT(a->wr.ud.remote_qkey, 0x80000000u);
	CHECK_EQ_INT(a->length, 100);
out:
	if (p)
		CHECK_RET(ibv_destroy_qp(p), 0);
	if (x)
		CHECK_RET(ibv_destroy_qp(x), 0);
	if (ah)
		CHECK_RET(ibv_destroy_ah(ah), 0);
}

static void test_inline_and_sig_all(void)
{
	struct ibv_qp *qp = make_qp(IBV_QPT_RC, false, 1);
	uint8_t src[48], orig[48];
	struct ibv_sge sge = {0, sizeof(src), 0};
	struct ibv_send_wr w, *bad;
	const struct sw_send_wqe *a;
	struct sw_qp *s;
	int i;

	t_case("inline data is copied at post; sq_sig_all signals every WQE");
	if (!CHECK(qp))
		return;
	s = sw_qp(qp);
	for (i = 0; i < 48; i++)
		src[i] = orig[i] = (uint8_t)(0x40 + i);
	sge.addr = (uintptr_t)src;
	memset(&w, 0, sizeof(w));
	w.opcode = IBV_WR_SEND;
	w.sg_list = &sge;
	w.num_sge = 1;
	w.send_flags = IBV_SEND_INLINE;
	CHECK_RET(ibv_post_send(qp, &w, &bad), 0);
	memset(src, 0xee, sizeof(src));
	a = sw_ring_slot(&s->sq, s->sq.cons);
	CHECK(!memcmp(a->data, orig, sizeof(orig)));
	CHECK(a->send_flags & IBV_SEND_SIGNALED);
	CHECK(a->send_flags & IBV_SEND_INLINE);
	/* an RDMA READ ignores IBV_SEND_INLINE: its SGE is where data goes */
	w.opcode = IBV_WR_RDMA_READ;
	sge.lkey = mr->lkey;
	sge.addr = (uintptr_t)buf;
	CHECK_RET(ibv_post_send(qp, &w, &bad), 0);
	a = sw_ring_slot(&s->sq, s->sq.cons + 1);
	CHECK_EQ_INT(a->num_sge, 1);
	CHECK(!(a->send_flags & IBV_SEND_INLINE));
	/* capacities and rings agree */
	CHECK_EQ_INT(s->sq.nslots, 16);
	CHECK_EQ_INT(s->cap.max_send_wr, 16);
	CHECK(s->sq.stride >=
	      offsetof(struct sw_send_wqe, data) + s->cap.max_send_sge * sizeof(struct ibv_sge));
	CHECK(s->sq.stride >= offsetof(struct sw_send_wqe, data) + s->cap.max_inline_data);
	CHECK_EQ_INT(s->sq.stride % 8, 0);
	CHECK(s->rq.stride >= sizeof(struct sw_recv_wqe) + 3 * sizeof(struct ibv_sge));
	CHECK_EQ_INT(s->sq.shm_fd, -1);
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

static void test_table(void)
{
	struct sw_dev *dev = sw_dev_of(env.ctx);
	struct ibv_qp *qp = q_create(&env, IBV_QPT_UD);
	struct sw_qp *s, *r;
	uint32_t qpn;

	t_case("QPN table: refcounted lookups of live QPs only");
	if (!CHECK(qp))
		return;
	s = sw_qp(qp);
	qpn = qp->qp_num;
	CHECK_EQ_INT(s->qpn, qpn);
	CHECK_EQ_INT(qp->handle, qpn);
	r = sw_qp_table_lookup(dev, qpn);
	CHECK(r == s);
	CHECK_EQ_INT(atomic_load(&s->refcnt), 2);
	if (r)
		sw_qp_put(r);
	CHECK(sw_qp_table_lookup(dev, 0) == NULL);
	CHECK(sw_qp_table_lookup(dev, 1) == NULL);
	CHECK(sw_qp_table_lookup(dev, qpn ^ 0x10000) == NULL); /* same slot, another QPN */
	CHECK(sw_qp_table_lookup(dev, qpn ^ 0x1) == NULL);
	CHECK(sw_qp_table_lookup(dev, qpn | 0x1000000) == NULL);
	/* a reference outlives ibv_destroy_qp; the QPN stops resolving at once */
	r = sw_qp_table_lookup(dev, qpn);
	CHECK(r == s);
	CHECK_RET(ibv_destroy_qp(qp), 0);
	CHECK(sw_qp_table_lookup(dev, qpn) == NULL);
	if (r) {
		CHECK_EQ_INT(atomic_load(&r->refcnt), 1);
		CHECK_EQ_INT(r->qpn, qpn); /* still readable: freed by this put */
		sw_qp_put(r);
	}
}

static void test_qpn_alloc(void)
{
	struct sw_qp_table *t = sw_dev_of(env.ctx)->qps;
	struct ibv_qp *a, *b, *c;

	t_case("QPN allocation skips 0xffffff, 0, 1 and taken slots");
	pthread_rwlock_wrlock(&t->lock);
	t->next = 0xfffffe;
	pthread_rwlock_unlock(&t->lock);
	a = q_create(&env, IBV_QPT_UD);
	b = q_create(&env, IBV_QPT_UD);
	if (CHECK(a && b)) {
		CHECK_EQ_INT(a->qp_num, 0xfffffe);
		CHECK_EQ_INT(b->qp_num, 2);
	}
	/* the next candidate's slot is taken by `b`: it is skipped */
	pthread_rwlock_wrlock(&t->lock);
	t->next = 2 + SW_QP_TABLE_SLOTS;
	pthread_rwlock_unlock(&t->lock);
	c = q_create(&env, IBV_QPT_RC);
	if (CHECK(c))
		CHECK_EQ_INT(c->qp_num, 3 + SW_QP_TABLE_SLOTS);
	if (c && b)
		CHECK(sw_qp_table_lookup(sw_dev_of(env.ctx), 2 + SW_QP_TABLE_SLOTS) == NULL);
	if (a)
		CHECK_RET(ibv_destroy_qp(a), 0);
	if (b)
		CHECK_RET(ibv_destroy_qp(b), 0);
	if (c)
		CHECK_RET(ibv_destroy_qp(c), 0);
}

static void test_take_recv(void)
{
	struct ibv_qp *qp = q_create(&env, IBV_QPT_RC);
	struct ibv_sge sg[3] = {
		{(uintptr_t)buf, 10, 0}, {(uintptr_t)&buf[4], 20, 0}, {(uintptr_t)&buf[16], 30, 0}};
	struct ibv_recv_wr r[2], *bad;
	uint64_t outbuf[(sizeof(struct sw_recv_wqe) + 4 * sizeof(struct ibv_sge)) / 8];
	struct sw_recv_wqe *ow = (struct sw_recv_wqe *)(void *)outbuf;
	struct ibv_srq_init_attr sa;
	struct ibv_qp_init_attr ia;
	struct ibv_srq *srq = NULL;
	struct sw_qp *s;

	t_case("sw_qp_take_recv: in order, from the RQ or the SRQ");
	if (!CHECK(qp) || !CHECK_RET(q_bring_up(&env, qp, IBV_QPS_INIT, 0), 0))
		goto out;
	s = sw_qp(qp);
	sg[0].lkey = sg[1].lkey = sg[2].lkey = mr->lkey;
	memset(r, 0, sizeof(r));
	r[0].wr_id = 1;
	r[0].sg_list = sg;
	r[0].num_sge = 2;
	r[0].next = &r[1];
	r[1].wr_id = 2;
	r[1].sg_list = &sg[2];
	r[1].num_sge = 1;
	CHECK_RET(ibv_post_recv(qp, r, &bad), 0);
	pthread_mutex_lock(&s->lock);
	CHECK_EQ_INT(sw_qp_take_recv(s, ow), 0);
	CHECK_EQ_INT(ow->wr_id, 1);
	CHECK_EQ_INT(ow->num_sge, 2);
	CHECK_EQ_INT(ow->length, 30);
	CHECK(ow->sge[1].addr == sg[1].addr && ow->sge[1].length == 20);
	CHECK_EQ_INT(sw_qp_take_recv(s, ow), 0);
	CHECK_EQ_INT(ow->wr_id, 2);
	CHECK_EQ_INT(ow->length, 30);
	CHECK_EQ_INT(sw_qp_take_recv(s, ow), -EAGAIN);
	pthread_mutex_unlock(&s->lock);
	CHECK_RET(ibv_destroy_qp(qp), 0);
	qp = NULL;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 3;
	srq = ibv_create_srq(env.pd, &sa);
	if (!CHECK(srq))
		goto out;
	ia = q_init_attr(&env, IBV_QPT_RC);
	ia.srq = srq;
	qp = ibv_create_qp(env.pd, &ia);
	if (!CHECK(qp))
		goto out;
	s = sw_qp(qp);
	CHECK_EQ_INT(s->cap.max_recv_sge, 3); /* the room an SRQ WQE needs */
	r[0].num_sge = 3;
	r[0].next = NULL;
	CHECK_RET(ibv_post_srq_recv(srq, r, &bad), 0);
	pthread_mutex_lock(&s->lock);
	CHECK_EQ_INT(sw_qp_take_recv(s, ow), 0);
	CHECK_EQ_INT(ow->wr_id, 1);
	CHECK_EQ_INT(ow->num_sge, 3);
	CHECK_EQ_INT(sw_qp_take_recv(s, ow), -EAGAIN);
	pthread_mutex_unlock(&s->lock);
out:
	if (qp)
		CHECK_RET(ibv_destroy_qp(qp), 0);
	if (srq)
		CHECK_RET(ibv_destroy_srq(srq), 0);
}

static void test_error_locked(void)
{
	struct ibv_qp *qp = make_qp(IBV_QPT_RC, false, 0);
	struct ibv_sge sge = {(uintptr_t)buf, 8, 0};
	struct ibv_send_wr w, *bad;
	struct ibv_wc wc[4];
	struct sw_qp *s;

	t_case("sw_qp_error_locked: ERR, every WQE flushed, rings empty");
	if (!CHECK(qp))
		return;
	s = sw_qp(qp);
	sge.lkey = mr->lkey;
	memset(&w, 0, sizeof(w));
	w.wr_id = 61;
	w.opcode = IBV_WR_RDMA_WRITE;
	w.sg_list = &sge;
	w.num_sge = 1;
	CHECK_RET(ibv_post_send(qp, &w, &bad), 0);
	pthread_mutex_lock(&s->lock);
	sw_qp_error_locked(s);
	CHECK_EQ_INT(qp->state, IBV_QPS_ERR);
	CHECK_EQ_INT(s->sq.prod, s->sq.cons);
	sw_qp_error_locked(s); /* again: nothing more */
	pthread_mutex_unlock(&s->lock);
	CHECK_EQ_INT(ibv_poll_cq(env.scq, 4, wc), 1);
	CHECK_EQ_INT(wc[0].wr_id, 61);
	CHECK_EQ_INT(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ_INT(wc[0].opcode, IBV_WC_RDMA_WRITE);
	CHECK_EQ_INT(q_state(qp), IBV_QPS_ERR);
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

int main(void)
{
	t_start("unit_qp");
	q_env_open(&env, 64);
	mr = ibv_reg_mr(env.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr) {
		printf("Bail out! reg_mr\n");
		return 1;
	}
	test_same_wqes_rc();
	test_same_wqes_ud();
	test_inline_and_sig_all();
	test_table();
	test_qpn_alloc();
	test_take_recv();
	test_error_locked();
	t_case("teardown");
	CHECK_RET(ibv_dereg_mr(mr), 0);
	q_env_close(&env);
	return t_finish();
}
