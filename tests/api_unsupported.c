/* SPDX-License-Identifier: MIT */
/*
 * api_unsupported: on a real context, the verbs the software device does
 * not implement reach the core's fallback and fail cleanly with the
 * errno their verbs.h wrapper documents (EOPNOTSUPP for all of these),
 * without handing out an object and without breaking the context.
 *
 * Also the verbs_context ABI of an opened context: extended, full size,
 * and every operation slot from free_buf to close_xrcd set, so that no
 * inline wrapper takes its "provider lacks the op" path.
 *
 * ibv_create_flow needs a QP and is not covered yet. When the device
 * gains one of these verbs, its check moves to that verb's own test.
 */
#include "harness.h"

#include <stddef.h>
#include <stdint.h>

/* Members between free_buf and close_xrcd that are not operations. */
static const struct {
	size_t off;
	const char *name;
} not_ops[] = {
	{offsetof(struct verbs_context, priv), "priv"},
	{offsetof(struct verbs_context, ABI_placeholder1), "ABI_placeholder1"},
	{offsetof(struct verbs_context, ABI_placeholder2), "ABI_placeholder2"},
};

static int is_op_slot(size_t off)
{
	size_t i;

	for (i = 0; i < sizeof(not_ops) / sizeof(not_ops[0]); i++)
		if (not_ops[i].off == off)
			return 0;
	return 1;
}

static void check_vctx(struct ibv_context *ctx)
{
	const size_t first = offsetof(struct verbs_context, free_buf);
	const size_t last = offsetof(struct verbs_context, close_xrcd);
	struct verbs_context *v = verbs_get_ctx(ctx);
	size_t off, nops = 0;

	CHECK(ctx->abi_compat == __VERBS_ABI_IS_EXTENDED);
	if (!CHECK(v != NULL))
		return;
	CHECK_EQ_INT(v->sz, sizeof(struct verbs_context));
	CHECK(&v->context == ctx);
	CHECK_EQ_INT((last - first) % sizeof(void *), 0);
	CHECK_EQ_INT(first, 0);

	for (off = first; off <= last; off += sizeof(void *)) {
		void *slot;

		memcpy(&slot, (char *)v + off, sizeof(slot));
		if (!is_op_slot(off))
			continue;
		nops++;
		CHECK_MSG(slot != NULL, "verbs_context slot at offset %zu is NULL", off);
	}
	/* 6 new in rdma-core 65 + 35 older ones */
	CHECK_EQ_INT(nops, 41);

	/* a few by name, so that a failure above is easy to place */
	CHECK(v->free_buf && v->alloc_buf && v->reg_mr_ex && v->alloc_dmah);
	CHECK(v->query_port && v->query_device_ex && v->create_cq_ex && v->create_qp_ex);
	CHECK(v->open_xrcd && v->close_xrcd);

	/* the legacy table's data-path slots that inline wrappers call */
	CHECK(ctx->ops.poll_cq && ctx->ops.req_notify_cq);
	CHECK(ctx->ops.post_send && ctx->ops.post_recv && ctx->ops.post_srq_recv);
	CHECK(ctx->ops.alloc_mw && ctx->ops.dealloc_mw && ctx->ops.bind_mw);
}

static void check_ctx_verbs(struct ibv_context *ctx)
{
	struct ibv_wq_init_attr wq_attr;
	struct ibv_rwq_ind_table_init_attr tbl_attr;
	struct ibv_counters_init_attr cnt_attr;
	struct ibv_flow_action_esp_attr esp_attr;
	struct ibv_values_ex values;

	memset(&wq_attr, 0, sizeof(wq_attr));
	wq_attr.wq_type = IBV_WQT_RQ;
	wq_attr.max_wr = 1;
	wq_attr.max_sge = 1;
	CHECK_ERRNO_PTR(ibv_create_wq(ctx, &wq_attr), EOPNOTSUPP);

	memset(&tbl_attr, 0, sizeof(tbl_attr));
	CHECK_ERRNO_PTR(ibv_create_rwq_ind_table(ctx, &tbl_attr), EOPNOTSUPP);

	memset(&cnt_attr, 0, sizeof(cnt_attr));
	CHECK_ERRNO_PTR(ibv_create_counters(ctx, &cnt_attr), EOPNOTSUPP);

	memset(&esp_attr, 0, sizeof(esp_attr));
	CHECK_ERRNO_PTR(ibv_create_flow_action_esp(ctx, &esp_attr), EOPNOTSUPP);

	/* supported: the raw clock that completion timestamps count */
	memset(&values, 0, sizeof(values));
	values.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
	CHECK_RET(ibv_query_rt_values_ex(ctx, &values), 0);
	CHECK(values.comp_mask == IBV_VALUES_MASK_RAW_CLOCK);
	CHECK(values.raw_clock.tv_sec > 0 || values.raw_clock.tv_nsec > 0);
}

static void check_pd_verbs(struct ibv_context *ctx)
{
	struct ibv_pd *pd;

	errno = 0;
	pd = ibv_alloc_pd(ctx);
	if (!CHECK_MSG(pd != NULL, "ibv_alloc_pd: %s", t_errname(errno)))
		return;

	CHECK_ERRNO_PTR(ibv_alloc_null_mr(pd), EOPNOTSUPP);
	/* memory windows moved to api_mw */

	/* nothing above took a reference on the PD */
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

int main(void)
{
	struct ibv_device_attr attr;
	struct ibv_context *ctx;

	t_start("api_unsupported");
	t_open_first(&ctx);

	t_case("verbs_context of an opened context");
	check_vctx(ctx);

	t_case("context-level verbs fail with EOPNOTSUPP");
	check_ctx_verbs(ctx);

	t_case("PD-level verbs fail with EOPNOTSUPP");
	check_pd_verbs(ctx);

	t_case("the context still works afterwards");
	CHECK_RET(ibv_query_device(ctx, &attr), 0);
	CHECK_RET(ibv_close_device(ctx), 0);

	return t_finish();
}
