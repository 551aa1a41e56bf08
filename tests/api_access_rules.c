/* SPDX-License-Identifier: MIT */
/*
 * api_access_rules: QP access flags follow rdma-core plus rxe (rdma-core
 * and the kernel's core do not look at them): ibv_modify_qp takes
 * LOCAL_WRITE, the remote bits, MW_BIND (uDAPL passes it), ON_DEMAND, the
 * FLUSH bits (rdma-core 65's tests pass them) and the optional range, and
 * refuses ZERO_BASED, HUGETLB and undefined bits with EINVAL; ibv_query_qp
 * returns them as given (as rxe does), and the remote bits keep their
 * meaning: traffic works with the extra bits, and a target without
 * REMOTE_WRITE still refuses a WRITE (IBV_WC_REM_ACCESS_ERR).
 */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#include "traffic.h"

#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ
#define RA IBV_ACCESS_REMOTE_ATOMIC

/* Bits a QP's access flags may carry that the responder does not act on. */
static const unsigned int ignored[] = {
	IBV_ACCESS_LOCAL_WRITE,
	IBV_ACCESS_MW_BIND,
	IBV_ACCESS_ON_DEMAND,
	IBV_ACCESS_FLUSH_GLOBAL,
	IBV_ACCESS_FLUSH_PERSISTENT,
	IBV_ACCESS_RELAXED_ORDERING,
	1u << 25,
	1u << 29,
};

/* Bits rxe refuses in a QP's access flags. */
static const unsigned int refused[] = {
	IBV_ACCESS_ZERO_BASED, IBV_ACCESS_HUGETLB, 1u << 10, 1u << 19, 1u << 30, 1u << 31,
};

/* The QP's access flags as ibv_query_qp reports them, or ~0 on failure. */
static unsigned int queried_access(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (!CHECK_RET(ibv_query_qp(qp, &a, IBV_QP_ACCESS_FLAGS, &ia), 0))
		return ~0u;
	return a.qp_access_flags;
}

static int modify_access(struct ibv_qp *qp, enum ibv_qp_state st, unsigned int access)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = st;
	a.qp_access_flags = access;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS);
}

static void test_accepted(void)
{
	struct t_ep e;
	size_t i;

	t_case("rxe's QP access set is accepted by RESET->INIT, INIT->INIT and RTS->RTS, the rest refused");
	if (t_ep_init(&e, NULL, IBV_QPT_RC, 4096, IBV_ACCESS_LOCAL_WRITE, 8))
		return;
	for (i = 0; i < SV_ARRAY_N(ignored); i++) {
		unsigned int acc = RW | RR | ignored[i];

		CHECK_MSG(modify_access(e.qp, IBV_QPS_INIT, acc) == 0, "INIT->INIT with 0x%x", acc);
		CHECK_MSG(queried_access(e.qp) == acc, "0x%x queried as 0x%x", acc,
			  queried_access(e.qp));
	}
	for (i = 0; i < SV_ARRAY_N(refused); i++) {
		unsigned int acc = RW | refused[i];

		CHECK_MSG(modify_access(e.qp, IBV_QPS_INIT, acc) == EINVAL,
			  "INIT->INIT with 0x%x: want EINVAL", acc);
		CHECK_EQ_INT(queried_access(e.qp), RW | RR | (1u << 29));
	}
	{
		struct ibv_qp_attr a;

		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RESET;
		CHECK_RET(ibv_modify_qp(e.qp, &a, IBV_QP_STATE), 0);
	}
	CHECK_RET(t_qp_init(e.qp, (int)(RW | IBV_ACCESS_MW_BIND | IBV_ACCESS_FLUSH_GLOBAL |
					IBV_ACCESS_FLUSH_PERSISTENT)),
		  0);
	CHECK_EQ_INT(queried_access(e.qp), RW | IBV_ACCESS_MW_BIND | IBV_ACCESS_FLUSH_GLOBAL |
						   IBV_ACCESS_FLUSH_PERSISTENT);
	if (t_qp_rts(e.qp, e.qp->qp_num, &e.gid, 0, 0, IBV_MTU_1024) == 0) {
		CHECK_RET(modify_access(e.qp, IBV_QPS_RTS, RR | IBV_ACCESS_RELAXED_ORDERING), 0);
		CHECK_EQ_INT(queried_access(e.qp), RR | IBV_ACCESS_RELAXED_ORDERING);
	}
	t_ep_destroy(&e, true);
}

/* One signalled WRITE of `len` bytes from a to b; its completion status on a. */
static enum ibv_wc_status write_status(struct t_ep *a, struct t_ep *b, uint32_t len)
{
	struct ibv_wc wc;

	if (!CHECK_RET(t_post(a, IBV_WR_RDMA_WRITE, 7, 0, len, (uintptr_t)b->buf, b->mr->rkey,
			      IBV_SEND_SIGNALED),
		       0))
		return IBV_WC_GENERAL_ERR;
	if (!CHECK_EQ_INT(t_poll(a->cq, &wc, 1, 5000), 1))
		return IBV_WC_GENERAL_ERR;
	return wc.status;
}

static void test_traffic(void)
{
	const unsigned int extra = IBV_ACCESS_MW_BIND | IBV_ACCESS_FLUSH_GLOBAL |
				   IBV_ACCESS_FLUSH_PERSISTENT | IBV_ACCESS_RELAXED_ORDERING;
	const uint32_t len = 3000;
	struct t_ep a, b;

	t_case("a WRITE lands with the extra bits; without REMOTE_WRITE it is refused");
	if (t_ep_init(&a, NULL, IBV_QPT_RC, 8192, IBV_ACCESS_LOCAL_WRITE | RW, 8) ||
	    t_ep_init(&b, a.ctx, IBV_QPT_RC, 8192, IBV_ACCESS_LOCAL_WRITE | RW, 8))
		return;
	CHECK_RET(modify_access(b.qp, IBV_QPS_INIT, RW | extra), 0);
	if (t_connect(&a, &b, IBV_MTU_1024))
		return;
	t_fill(a.buf, len, 5);
	CHECK_EQ_INT(write_status(&a, &b, len), IBV_WC_SUCCESS);
	CHECK_MSG(!memcmp(a.buf, b.buf, len), "written data differs");

	/* the target keeps the extra bits but loses REMOTE_WRITE */
	CHECK_RET(modify_access(b.qp, IBV_QPS_RTS, RR | extra), 0);
	memset(b.buf, 0, len);
	CHECK_EQ_INT(write_status(&a, &b, len), IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ_INT(b.buf[0] | b.buf[len - 1], 0);

	t_ep_destroy(&b, false);
	t_ep_destroy(&a, true);
}

int main(void)
{
	t_start("api_access_rules");
	test_accepted();
	test_traffic();
	return t_finish();
}
