/* SPDX-License-Identifier: MIT */
/*
 * api_odp.c - explicit on-demand paging: the ODP capabilities, RC traffic
 * (SEND, WRITE, READ, atomics) into an ODP MR whose pages were never
 * touched before, ibv_advise_mr() and its errors, rereg rules, and a QP
 * whose access flags carry ON_DEMAND (as rdma-core's test_odp sets them).
 *
 * Regression: the device reported no ODP and refused ON_DEMAND with
 * EOPNOTSUPP although it never pins memory, so rdma-core's test_odp
 * skipped 14 tests; ibv_advise_mr() was EOPNOTSUPP.
 */
#include "harness.h"
#include "traffic.h"

#include <sys/mman.h>

#define ACC                                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)
#define ODP IBV_ACCESS_ON_DEMAND

enum {
	LEN = 64 << 10
};

static struct ibv_context *ctx;

static void case_caps(void)
{
	const uint32_t rc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
			    IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
			    IBV_ODP_SUPPORT_SRQ_RECV;
	struct ibv_device_attr_ex ax;

	t_case("ODP capabilities: explicit ODP for RC, UD and XRC, no implicit ODP");
	memset(&ax, 0, sizeof(ax));
	if (!CHECK_RET(ibv_query_device_ex(ctx, NULL, &ax), 0))
		return;
	CHECK_EQ_INT(ax.odp_caps.general_caps, IBV_ODP_SUPPORT);
	CHECK_EQ_INT(ax.odp_caps.per_transport_caps.rc_odp_caps & rc, rc);
	CHECK(ax.odp_caps.per_transport_caps.ud_odp_caps & IBV_ODP_SUPPORT_SEND);
	CHECK(ax.odp_caps.per_transport_caps.ud_odp_caps & IBV_ODP_SUPPORT_RECV);
	CHECK_EQ_INT(ax.odp_caps.per_transport_caps.uc_odp_caps, 0);
	CHECK_EQ_INT(ax.xrc_odp_caps, IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE |
					      IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
					      IBV_ODP_SUPPORT_SRQ_RECV);
}

static int one_ok(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	return t_poll(cq, &wc, 1, 20000) == 1 && wc.status == IBV_WC_SUCCESS;
}

/* b moves data into and out of `region` (LEN bytes, never touched) on a's ODP MR. */
static void case_traffic(struct t_ep *a, struct t_ep *b, uint8_t *region, struct ibv_mr *mr)
{
	uint64_t *word = (uint64_t *)(region + LEN - 8);
	size_t i;
	int bad = 0;

	t_case("RC WRITE, READ, atomics and SEND into untouched ODP pages");
	t_fill(b->buf, LEN, 7);
	CHECK(t_post(b, IBV_WR_RDMA_WRITE, 1, 0, LEN, (uintptr_t)region, mr->rkey,
		     IBV_SEND_SIGNALED) == 0);
	CHECK(one_ok(b->cq));
	for (i = 0; i < LEN; i++)
		bad += region[i] != b->buf[i];
	CHECK_EQ_INT(bad, 0);
	memset(b->buf, 0, LEN);
	CHECK(t_post(b, IBV_WR_RDMA_READ, 2, 0, LEN, (uintptr_t)region, mr->rkey,
		     IBV_SEND_SIGNALED) == 0);
	CHECK(one_ok(b->cq));
	CHECK(!memcmp(b->buf, region, LEN));
	*word = 40;
	{
		struct ibv_sge sge = {.addr = (uintptr_t)b->buf, .length = 8, .lkey = b->mr->lkey};
		struct ibv_send_wr wr = {0}, *badwr;

		wr.wr_id = 3;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.atomic.remote_addr = (uintptr_t)word;
		wr.wr.atomic.rkey = mr->rkey;
		wr.wr.atomic.compare_add = 2;
		CHECK(ibv_post_send(b->qp, &wr, &badwr) == 0);
		CHECK(one_ok(b->cq));
		CHECK_EQ_INT(*word, 42);
	}
	/* a SEND lands in a's ODP buffer */
	CHECK(t_post_recv(a, 4, 0, 256) == 0);
	t_fill(b->buf, 256, 9);
	CHECK(t_post(b, IBV_WR_SEND, 5, 0, 256, 0, 0, IBV_SEND_SIGNALED) == 0);
	CHECK(one_ok(b->cq));
	CHECK(one_ok(a->cq));
	CHECK(!memcmp(a->buf, b->buf, 256));
}

static int advise(struct ibv_pd *pd, int advice, uint32_t flags, struct ibv_mr *mr, uint64_t off,
		  uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)mr->addr + off, .length = len, .lkey = mr->lkey};

	return ibv_advise_mr(pd, (enum ibv_advise_mr_advice)advice, flags, &sge, 1);
}

static void case_advise(struct t_ep *a, struct t_ep *b, uint8_t *region, struct ibv_mr *mr)
{
	const uint32_t F = IBV_ADVISE_MR_FLAG_FLUSH;
	struct ibv_mr *ro;
	struct ibv_sge two[2];

	t_case("ibv_advise_mr: prefetch an ODP MR; errors as mlx5");
	CHECK_RET(advise(a->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, F, mr, 0, LEN), 0);
	CHECK_RET(advise(a->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, F, mr, 4096, 100), 0);
	CHECK_RET(advise(a->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, mr, 0, LEN), 0);
	CHECK_RET(advise(a->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, mr, LEN - 1, 1), 0);
	two[0] = (struct ibv_sge){(uintptr_t)region, 8, mr->lkey};
	two[1] = (struct ibv_sge){(uintptr_t)region + 8192, 8, mr->lkey};
	CHECK_RET(ibv_advise_mr(a->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, F, two, 2), 0);

	CHECK_RET(advise(a->pd, 7, F, mr, 0, 8), EOPNOTSUPP);
	CHECK_RET(advise(a->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 2, mr, 0, 8), EINVAL);
	CHECK_RET(ibv_advise_mr(a->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, F, two, 0), EINVAL);
	CHECK_RET(advise(a->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, F, mr, LEN - 4, 8), EFAULT);
	/* not an ODP MR, or another PD's */
	CHECK_RET(advise(b->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, F, b->mr, 0, 8), ENOENT);
	CHECK_RET(advise(b->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, F, mr, 0, 8), ENOENT);
	two[1].lkey ^= 0x5a5a5a5a; /* one bad SGE fails the call */
	CHECK_RET(ibv_advise_mr(a->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, F, two, 2), ENOENT);
	/* PREFETCH_WRITE needs a writable MR */
	ro = ibv_reg_mr(a->pd, region, 4096, ODP | IBV_ACCESS_REMOTE_READ);
	if (CHECK(ro)) {
		CHECK_RET(advise(a->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, F, ro, 0, 8), 0);
		CHECK_RET(advise(a->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, F, ro, 0, 8), ENOENT);
		CHECK_RET(ibv_dereg_mr(ro), 0);
	}
}

/* ibv_rereg_mr fails with IBV_REREG_MR_ERR_CMD and the device's errno */
static int rereg_errno(struct ibv_mr *mr, int access)
{
	errno = 0;
	if (ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, access) !=
	    IBV_REREG_MR_ERR_CMD)
		return -1;
	return errno;
}

static void case_rules(struct t_ep *a, uint8_t *region, struct ibv_mr *mr)
{
	struct ibv_qp_attr qa = {0};
	struct ibv_mr *plain;

	t_case("registration, rereg and QP access rules");
	CHECK_ERRNO_PTR(ibv_reg_mr(a->pd, NULL, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE | ODP),
			EOPNOTSUPP);
	/* ODP-ness is fixed: rereg may keep it, not add or drop it */
	CHECK_RET(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, ACC | ODP), 0);
	CHECK_EQ_INT(rereg_errno(mr, ACC), EOPNOTSUPP);
	plain = ibv_reg_mr(a->pd, region, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (CHECK(plain)) {
		CHECK_EQ_INT(rereg_errno(plain, IBV_ACCESS_LOCAL_WRITE | ODP), EOPNOTSUPP);
		CHECK_RET(ibv_dereg_mr(plain), 0);
	}
	/* a QP's access flags may carry ON_DEMAND (ignored) */
	qa.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | ODP;
	CHECK_RET(ibv_modify_qp(a->qp, &qa, IBV_QP_ACCESS_FLAGS), 0);
}

int main(void)
{
	struct t_ep a, b;
	struct ibv_mr *mr = NULL;
	uint8_t *region;

	t_start("api_odp");
	ctx = t_open_dev();
	if (!CHECK(ctx))
		return t_finish();
	case_caps();
	if (t_ep_init(&a, ctx, IBV_QPT_RC, LEN, ACC | ODP, 16) ||
	    t_ep_init(&b, ctx, IBV_QPT_RC, LEN, ACC, 16) || t_connect(&a, &b, IBV_MTU_1024))
		return t_finish();
	region = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (CHECK(region != MAP_FAILED)) {
		mr = ibv_reg_mr(a.pd, region, LEN, ACC | ODP);
		if (CHECK(mr)) {
			case_traffic(&a, &b, region, mr);
			case_advise(&a, &b, region, mr);
			case_rules(&a, region, mr);
			CHECK_RET(ibv_dereg_mr(mr), 0);
		}
		munmap(region, LEN);
	}
	t_ep_destroy(&b, false);
	t_ep_destroy(&a, false);
	CHECK_RET(ibv_close_device(ctx), 0);
	return t_finish();
}
