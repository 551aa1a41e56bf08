/* SPDX-License-Identifier: MIT */
/*
 * api_pd: ibv_alloc_pd / ibv_dealloc_pd.
 *
 * A PD belongs to its context and has a handle no other live PD of the
 * device shares; exactly max_pd PDs fit on a device (across its
 * contexts), the next allocation fails with ENOMEM and a freed slot can
 * be reused; a PD with a parent domain on it cannot be deallocated
 * (EBUSY) until the parent domain is gone; a PD with an MR on it neither.
 */
#include "harness.h"

#include <stdint.h>

static struct ibv_context *ctx;

static void case_basic(void)
{
	struct ibv_pd *pd[8];
	int i, j, distinct = 1;

	t_case("alloc and dealloc");
	for (i = 0; i < 8; i++) {
		pd[i] = ibv_alloc_pd(ctx);
		if (!CHECK(pd[i] != NULL))
			break;
		CHECK(pd[i]->context == ctx);
	}
	if (i < 8) {
		while (i-- > 0)
			ibv_dealloc_pd(pd[i]);
		return;
	}
	for (i = 0; i < 8; i++)
		for (j = i + 1; j < 8; j++)
			distinct &= pd[i]->handle != pd[j]->handle && pd[i] != pd[j];
	CHECK_MSG(distinct, "two PDs share a handle");
	for (i = 0; i < 8; i++)
		CHECK_RET(ibv_dealloc_pd(pd[i]), 0);
}

static void case_max(void)
{
	struct ibv_device_attr attr;
	struct ibv_context *ctx2;
	struct ibv_pd **pds, *extra;
	int max, n = 0, i;

	t_case("max_pd per device");
	if (!CHECK(ibv_query_device(ctx, &attr) == 0) || !CHECK(attr.max_pd > 0))
		return;
	max = attr.max_pd;
	pds = calloc((size_t)max, sizeof(*pds));
	ctx2 = ibv_open_device(ctx->device);
	if (!CHECK(pds && ctx2))
		goto out;
	/* the limit is the device's: both contexts draw from it */
	for (n = 0; n < max; n++) {
		pds[n] = ibv_alloc_pd(n % 2 ? ctx2 : ctx);
		if (!pds[n])
			break;
	}
	CHECK_MSG(n == max, "only %d of max_pd = %d PDs (errno %s)", n, max, t_errname(errno));
	if (n == max) {
		CHECK_ERRNO_PTR(ibv_alloc_pd(ctx), ENOMEM);
		CHECK_ERRNO_PTR(ibv_alloc_pd(ctx2), ENOMEM);
		CHECK_RET(ibv_dealloc_pd(pds[--n]), 0);
		extra = ibv_alloc_pd(ctx);
		if (CHECK(extra != NULL))
			pds[n++] = extra;
	}
out:
	for (i = 0; i < n; i++)
		ibv_dealloc_pd(pds[i]);
	free(pds);
	if (ctx2)
		ibv_close_device(ctx2);
	/* everything returned: allocation works again */
	extra = ibv_alloc_pd(ctx);
	if (CHECK(extra != NULL))
		ibv_dealloc_pd(extra);
}

static void case_busy(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_pd *pd, *parent, *parent2;

	t_case("EBUSY while a parent domain uses the PD");
	pd = ibv_alloc_pd(ctx);
	if (!CHECK(pd != NULL))
		return;
	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	parent = ibv_alloc_parent_domain(ctx, &pa);
	parent2 = ibv_alloc_parent_domain(ctx, &pa);
	if (CHECK(parent && parent2)) {
		CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
		CHECK_RET(ibv_dealloc_pd(parent), 0);
		CHECK_RET(ibv_dealloc_pd(pd), EBUSY); /* parent2 still there */
		CHECK_RET(ibv_dealloc_pd(parent2), 0);
	}
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

static void case_busy_mr(void)
{
	static char buf[4096];
	struct ibv_pd *pd;
	struct ibv_mr *mr;

	t_case("EBUSY while an MR uses the PD");
	pd = ibv_alloc_pd(ctx);
	if (!CHECK(pd != NULL))
		return;
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (CHECK_MSG(mr != NULL, "ibv_reg_mr: %s", t_errname(errno))) {
		CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
		CHECK_RET(ibv_dereg_mr(mr), 0);
	}
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

int main(void)
{
	t_start("api_pd");
	t_open_first(&ctx);
	case_basic();
	case_max();
	case_busy();
	case_busy_mr();
	ibv_close_device(ctx);
	return t_finish();
}
