/* SPDX-License-Identifier: MIT */
/*
 * api_dm.c - device memory, emulated in host memory: ibv_alloc_dm and its
 * limits, ibv_memcpy_to/from_dm and their alignment and range rules,
 * zero-based DM MRs that a peer writes and reads over RC and that receive
 * a SEND, ibv_free_dm while an MR uses the DM, and a context closed with
 * DMs left over (memcheck finds a leak if they are not freed).
 *
 * Regression: the device reported max_dm_size 0 and every DM verb failed
 * with EOPNOTSUPP, so rdma-core's DMTest, DeviceMemoryAPITest and
 * DeviceMemoryTest (13 tests) skipped.
 */
#include "harness.h"
#include "traffic.h"

enum {
	DM_LEN = 4096
};

static struct ibv_context *ctx;

static struct ibv_dm *alloc_dm(size_t len, uint32_t log_align, uint32_t comp_mask)
{
	struct ibv_alloc_dm_attr a = {
		.length = len, .log_align_req = log_align, .comp_mask = comp_mask};

	return ibv_alloc_dm(ctx, &a);
}

static void case_alloc(uint64_t max)
{
	struct ibv_dm *dm[8];
	int i, n = 0;

	t_case("ibv_alloc_dm: limits, then ibv_free_dm");
	CHECK_ERRNO_PTR(alloc_dm(0, 0, 0), EINVAL);
	CHECK_ERRNO_PTR(alloc_dm(max + 1, 0, 0), EINVAL);
	CHECK_ERRNO_PTR(alloc_dm(64, 0, 1), EINVAL);
	CHECK_ERRNO_PTR(alloc_dm(64, 13, 0), EINVAL);
	/* the space is the device's: max/4 four times fills it */
	for (i = 0; i < 4; i++) {
		dm[n] = alloc_dm(max / 4, 6, 0);
		n += CHECK(dm[n]) ? 1 : 0;
	}
	CHECK_ERRNO_PTR(alloc_dm(4, 0, 0), ENOMEM);
	while (n)
		CHECK_RET(ibv_free_dm(dm[--n]), 0);
	dm[0] = alloc_dm(max, 0, 0);
	if (CHECK(dm[0]))
		CHECK_RET(ibv_free_dm(dm[0]), 0);
}

static void case_copy(void)
{
	uint8_t in[256], out[256];
	struct ibv_dm *dm = alloc_dm(100, 0, 0);

	t_case("ibv_memcpy_to/from_dm: data, alignment and range");
	if (!CHECK(dm))
		return;
	t_fill(in, sizeof(in), 3);
	memset(out, 0xee, sizeof(out));
	CHECK_RET(ibv_memcpy_from_dm(out, dm, 0, 100), 0);
	CHECK(out[0] == 0 && out[99] == 0); /* a new DM reads as zeros */
	CHECK_RET(ibv_memcpy_to_dm(dm, 8, in, 92), 0);
	CHECK_RET(ibv_memcpy_from_dm(out, dm, 8, 92), 0);
	CHECK(!memcmp(in, out, 92));
	CHECK_RET(ibv_memcpy_to_dm(dm, 0, in, 0), 0);
	CHECK_RET(ibv_memcpy_to_dm(dm, 3, in, 4), EINVAL);
	CHECK_RET(ibv_memcpy_to_dm(dm, 4, in, 3), EINVAL);
	CHECK_RET(ibv_memcpy_from_dm(out, dm, 2, 4), EINVAL);
	CHECK_RET(ibv_memcpy_to_dm(dm, 104, in, 4), EFAULT);
	CHECK_RET(ibv_memcpy_from_dm(out, dm, 0, 104), EFAULT);
	CHECK_RET(ibv_free_dm(dm), 0);
}

static int one_ok(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	return t_poll(cq, &wc, 1, 20000) == 1 && wc.status == IBV_WC_SUCCESS;
}

static void case_mr(void)
{
	const unsigned int acc = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
				 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	uint8_t got[DM_LEN];
	struct ibv_dm *dm;
	struct ibv_mr *mr, *mr0;
	struct t_ep a, b;

	t_case("zero-based DM MRs: RDMA WRITE, READ and SEND over RC; free is EBUSY meanwhile");
	if (t_ep_init(&a, ctx, IBV_QPT_RC, DM_LEN, IBV_ACCESS_LOCAL_WRITE, 8) ||
	    t_ep_init(&b, ctx, IBV_QPT_RC, DM_LEN, IBV_ACCESS_LOCAL_WRITE, 8) ||
	    t_connect(&a, &b, IBV_MTU_1024))
		return;
	dm = alloc_dm(2 * DM_LEN, 0, 0);
	if (!CHECK(dm))
		return;
	CHECK_ERRNO_PTR(ibv_reg_dm_mr(a.pd, dm, 0, DM_LEN, IBV_ACCESS_LOCAL_WRITE), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_dm_mr(a.pd, dm, 0, DM_LEN, acc | IBV_ACCESS_MW_BIND), EINVAL);
	CHECK_ERRNO_PTR(
		ibv_reg_dm_mr(a.pd, dm, 0, DM_LEN, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_REMOTE_WRITE),
		EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_dm_mr(a.pd, dm, DM_LEN + 4, DM_LEN, acc), EINVAL);
	mr0 = ibv_reg_dm_mr(a.pd, dm, 0, 0, acc); /* length 0 is valid */
	if (CHECK(mr0))
		CHECK_RET(ibv_dereg_mr(mr0), 0);
	/* the MR starts DM_LEN bytes in; its addresses are offsets from there */
	mr = ibv_reg_dm_mr(a.pd, dm, DM_LEN, DM_LEN, acc);
	if (!CHECK(mr)) {
		ibv_free_dm(dm);
		return;
	}
	/* as rdma-core: addr is the DM offset; RDMA addresses the MR from 0 */
	CHECK(mr->addr == (void *)(uintptr_t)DM_LEN && mr->length == DM_LEN);
	CHECK_RET(ibv_free_dm(dm), EBUSY);

	t_fill(b.buf, DM_LEN, 5);
	CHECK(t_post(&b, IBV_WR_RDMA_WRITE, 1, 0, DM_LEN, 0, mr->rkey, IBV_SEND_SIGNALED) == 0);
	CHECK(one_ok(b.cq));
	CHECK_RET(ibv_memcpy_from_dm(got, dm, DM_LEN, DM_LEN), 0);
	CHECK(!memcmp(got, b.buf, DM_LEN));
	CHECK_RET(ibv_memcpy_from_dm(got, dm, 0, 16), 0);
	CHECK(got[0] == 0 && got[15] == 0); /* nothing before the MR's offset was written */

	t_fill(got, 64, 8);
	CHECK_RET(ibv_memcpy_to_dm(dm, DM_LEN + 64, got, 64), 0);
	CHECK(t_post(&b, IBV_WR_RDMA_READ, 2, 0, 64, 64, mr->rkey, IBV_SEND_SIGNALED) == 0);
	CHECK(one_ok(b.cq));
	CHECK(!memcmp(b.buf, got, 64));
	/* a READ past the MR's end is a remote access error */
	CHECK(t_post(&b, IBV_WR_RDMA_READ, 3, 0, 64, DM_LEN - 32, mr->rkey, IBV_SEND_SIGNALED) ==
	      0);
	{
		struct ibv_wc wc;

		CHECK(t_poll(b.cq, &wc, 1, 20000) == 1 && wc.status == IBV_WC_REM_ACCESS_ERR);
	}
	t_ep_destroy(&b, false);

	/* a's local SGE names the DM MR by offset: a SEND lands there */
	{
		struct t_ep c;
		struct ibv_sge sge = {.addr = 128, .length = 256, .lkey = mr->lkey};
		struct ibv_recv_wr rwr = {.wr_id = 9, .sg_list = &sge, .num_sge = 1}, *bad;

		if (!t_ep_init(&c, ctx, IBV_QPT_RC, DM_LEN, IBV_ACCESS_LOCAL_WRITE, 8)) {
			struct t_ep a2;

			if (!t_ep_init(&a2, ctx, IBV_QPT_RC, DM_LEN, IBV_ACCESS_LOCAL_WRITE, 8) &&
			    !t_connect(&a2, &c, IBV_MTU_1024)) {
				struct ibv_mr *mr2 = ibv_reg_dm_mr(a2.pd, dm, DM_LEN, DM_LEN, acc);

				if (CHECK(mr2)) {
					sge.lkey = mr2->lkey;
					CHECK(ibv_post_recv(a2.qp, &rwr, &bad) == 0);
					t_fill(c.buf, 256, 11);
					CHECK(t_post(&c, IBV_WR_SEND, 10, 0, 256, 0, 0,
						     IBV_SEND_SIGNALED) == 0);
					CHECK(one_ok(c.cq));
					CHECK(one_ok(a2.cq));
					CHECK_RET(ibv_memcpy_from_dm(got, dm, DM_LEN + 128, 256),
						  0);
					CHECK(!memcmp(got, c.buf, 256));
					CHECK_RET(ibv_dereg_mr(mr2), 0);
				}
			}
			t_ep_destroy(&a2, false);
			t_ep_destroy(&c, false);
		}
	}
	CHECK_RET(ibv_dereg_mr(mr), 0);
	CHECK_RET(ibv_free_dm(dm), 0);
	t_ep_destroy(&a, false);
}

int main(void)
{
	struct ibv_device_attr_ex ax;
	struct ibv_context *ctx2;

	t_start("api_dm");
	ctx = t_open_dev();
	if (!CHECK(ctx))
		return t_finish();
	memset(&ax, 0, sizeof(ax));
	CHECK_RET(ibv_query_device_ex(ctx, NULL, &ax), 0);
	CHECK_EQ_INT(ax.max_dm_size, 256 << 10);
	case_alloc(ax.max_dm_size);
	case_copy();
	case_mr();

	t_case("a context closed with DM left frees it");
	ctx2 = ibv_open_device(ctx->device);
	if (CHECK(ctx2)) {
		struct ibv_alloc_dm_attr a = {.length = 64};
		struct ibv_dm *dm = ibv_alloc_dm(ctx2, &a);
		struct ibv_dm *dm2 = ibv_alloc_dm(ctx2, &a);

		CHECK(dm && dm2);
		CHECK_RET(ibv_close_device(ctx2), 0);
	}
	/* its space came back to the device */
	{
		struct ibv_dm *dm = alloc_dm(ax.max_dm_size, 0, 0);

		if (CHECK(dm))
			CHECK_RET(ibv_free_dm(dm), 0);
	}
	CHECK_RET(ibv_close_device(ctx), 0);
	return t_finish();
}
