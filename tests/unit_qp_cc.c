/* SPDX-License-Identifier: MIT */
/*
 * unit_qp_cc: QPs on a CC DMA bounce device (docs/cc-and-tph.md).
 *
 * A QP whose PD is a CC parent domain keeps its send and receive rings
 * in shared memory (white-box: ring.shm_fd >= 0); a QP on a plain PD, or
 * on a parent domain without ALLOW_CC_UNPROTECTED_ALLOC, is refused with
 * EOPNOTSUPP, and the refusal leaves no reference behind. The parent
 * domain cannot be deallocated while the QP exists.
 */
/* test: env=SOFTVERBS_CC_DMA_BOUNCE=1 */
/* test: env=SOFTVERBS_CC_HEAP=builtin */
#include "harness.h"

#include "qp_util.h"
#include "sw/queue.h"

static struct ibv_context *ctx;

/* A CQ on parent domain `pd` (the only kind a bounce device allows). */
static struct ibv_cq *cc_cq(struct ibv_pd *pd)
{
	struct ibv_cq_init_attr_ex ca;
	struct ibv_cq_ex *cq;

	memset(&ca, 0, sizeof(ca));
	ca.cqe = 16;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	ca.parent_domain = pd;
	cq = ibv_create_cq_ex(ctx, &ca);
	return cq ? ibv_cq_ex_to_cq(cq) : NULL;
}

int main(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_pd *pd, *cc, *plain_parent;
	struct ibv_device_attr_ex da;
	struct ibv_qp_init_attr a;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct sw_qp *s;

	t_start("unit_qp_cc");
	t_open_first(&ctx);
	memset(&da, 0, sizeof(da));
	if (ibv_query_device_ex(ctx, NULL, &da) ||
	    !(da.device_cap_flags_ex & IBV_DEVICE_CC_DMA_BOUNCE)) {
		printf("Bail out! the device does not bounce\n");
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	plain_parent = ibv_alloc_parent_domain(ctx, &pa);
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC;
	cc = ibv_alloc_parent_domain(ctx, &pa);
	cq = cc ? cc_cq(cc) : NULL;
	if (!pd || !plain_parent || !cc || !cq) {
		printf("Bail out! PD, parent domains or CQ: %s\n", t_errname(errno));
		return 1;
	}

	t_case("a QP without a CC parent domain: EOPNOTSUPP");
	memset(&a, 0, sizeof(a));
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 8;
	a.cap.max_recv_wr = 8;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	CHECK_ERRNO_PTR(ibv_create_qp(pd, &a), EOPNOTSUPP);
	CHECK_ERRNO_PTR(ibv_create_qp(plain_parent, &a), EOPNOTSUPP);
	a.qp_type = IBV_QPT_UD;
	CHECK_ERRNO_PTR(ibv_create_qp(pd, &a), EOPNOTSUPP);
	/* the refusals took no reference */
	CHECK_RET(ibv_dealloc_pd(plain_parent), 0);

	t_case("a QP on a CC parent domain: rings in shared memory");
	a.qp_type = IBV_QPT_RC;
	qp = ibv_create_qp(cc, &a);
	if (CHECK_MSG(qp, "QP on the CC parent domain: %s", t_errname(errno))) {
		s = sw_qp(qp);
		CHECK(s->sq.shm_fd >= 0);
		CHECK(s->rq.shm_fd >= 0);
		CHECK(s->sq.buf != NULL && s->rq.buf != NULL);
		CHECK_EQ_INT(a.cap.max_send_wr, 8);
		/* it works as a QP */
		CHECK_RET(q_bring_up(&(struct q_env){.ctx = ctx, .pd = cc}, qp, IBV_QPS_INIT, 0),
			  0);
		CHECK_EQ_INT(q_state(qp), IBV_QPS_INIT);

		t_case("the parent domain is busy while the QP exists");
		CHECK_RET(ibv_dealloc_pd(cc), EBUSY);
		CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
		CHECK_RET(ibv_destroy_cq(cq), EBUSY);
		CHECK_RET(ibv_destroy_qp(qp), 0);
	}
	t_case("teardown");
	CHECK_RET(ibv_dealloc_pd(cc), EBUSY); /* the CQ still holds it */
	CHECK_RET(ibv_destroy_cq(cq), 0);
	CHECK_RET(ibv_dealloc_pd(cc), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	return t_finish();
}
