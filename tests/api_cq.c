/* SPDX-License-Identifier: MIT */
/*
 * api_cq: CQs and completion channels through the public API.
 *
 * ibv_create_cq and ibv_create_cq_ex: cqe limits (1..max_cqe, EINVAL
 * outside), comp_vector, the channel's context, wc_flags accepted
 * (standard, completion timestamp and wallclock) or refused (EOPNOTSUPP),
 * unknown comp_mask bits (EINVAL), creation flags, MASK_PD (a parent
 * domain only; it stays referenced while the CQ exists), max_cq, empty
 * polls, ibv_resize_cq, completion channels (EBUSY while a CQ uses one),
 * and CC DMA bounce: a CQ needs a CC parent domain there, which refuses
 * resize.
 */
/* test: timeout=120 */
#include "harness.h"

#include <stdlib.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static struct ibv_context *ctx;
static struct ibv_device_attr dev_attr;

static struct ibv_cq_ex *cq_ex(struct ibv_context *c, uint32_t cqe, uint64_t wc_flags,
			       uint32_t comp_mask, uint32_t flags, struct ibv_pd *pd)
{
	struct ibv_cq_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.cqe = cqe;
	a.wc_flags = wc_flags;
	a.comp_mask = comp_mask;
	a.flags = flags;
	a.parent_domain = pd;
	errno = 0;
	return ibv_create_cq_ex(c, &a);
}

static void destroy_ex(struct ibv_cq_ex *cq)
{
	if (cq)
		CHECK_RET(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
}

static void case_create(void)
{
	struct ibv_cq *cq;
	int cookie;

	t_case("ibv_create_cq: sizes, context, comp_vector");
	cq = ibv_create_cq(ctx, 1, &cookie, NULL, 0);
	if (CHECK(cq != NULL)) {
		CHECK(cq->context == ctx);
		CHECK(cq->cq_context == &cookie);
		CHECK(cq->channel == NULL);
		CHECK_MSG(cq->cqe >= 1, "cqe %d", cq->cqe);
		CHECK_RET(ibv_destroy_cq(cq), 0);
	}
	cq = ibv_create_cq(ctx, 1000, NULL, NULL, 0);
	if (CHECK(cq != NULL)) {
		CHECK_MSG(cq->cqe >= 1000, "cqe %d", cq->cqe);
		CHECK_RET(ibv_destroy_cq(cq), 0);
	}
	cq = ibv_create_cq(ctx, dev_attr.max_cqe, NULL, NULL, 0);
	if (CHECK_MSG(cq != NULL, "cqe = max_cqe %d: %s", dev_attr.max_cqe, t_errname(errno))) {
		CHECK_EQ_INT(cq->cqe, dev_attr.max_cqe);
		CHECK_RET(ibv_destroy_cq(cq), 0);
	}
	CHECK_ERRNO_PTR(ibv_create_cq(ctx, 0, NULL, NULL, 0), EINVAL);
	CHECK_ERRNO_PTR(ibv_create_cq(ctx, -1, NULL, NULL, 0), EINVAL);
	CHECK_ERRNO_PTR(ibv_create_cq(ctx, dev_attr.max_cqe + 1, NULL, NULL, 0), EINVAL);
	CHECK_EQ_INT(ctx->num_comp_vectors, 1);
	CHECK_ERRNO_PTR(ibv_create_cq(ctx, 8, NULL, NULL, 1), EINVAL);
	CHECK_ERRNO_PTR(ibv_create_cq(ctx, 8, NULL, NULL, -1), EINVAL);
}

static void case_wc_flags(void)
{
	static const uint64_t good[] = {
		0,
		IBV_WC_EX_WITH_BYTE_LEN,
		IBV_WC_EX_WITH_IMM,
		IBV_WC_EX_WITH_QP_NUM,
		IBV_WC_EX_WITH_SRC_QP,
		IBV_WC_EX_WITH_SLID,
		IBV_WC_EX_WITH_SL,
		IBV_WC_EX_WITH_DLID_PATH_BITS,
		IBV_WC_STANDARD_FLAGS,
		IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
		IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
		IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
	};
	static const uint64_t bad[] = {
		IBV_WC_EX_WITH_CVLAN,
		IBV_WC_EX_WITH_FLOW_TAG,
		IBV_WC_EX_WITH_TM_INFO,
		IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_CVLAN,
		1ULL << 12,
		1ULL << 63,
	};
	struct ibv_cq_ex *cq;
	size_t i;

	t_case("ibv_create_cq_ex: wc_flags");
	for (i = 0; i < ARRAY_SIZE(good); i++) {
		cq = cq_ex(ctx, 16, good[i], 0, 0, NULL);
		CHECK_MSG(cq != NULL, "wc_flags %#llx: %s", (unsigned long long)good[i],
			  t_errname(errno));
		if (cq) {
			CHECK(cq->start_poll && cq->next_poll && cq->end_poll);
			CHECK_EQ_INT(ibv_start_poll(cq, NULL), ENOENT);
			CHECK_MSG(!!cq->read_byte_len == !!(good[i] & IBV_WC_EX_WITH_BYTE_LEN),
				  "read_byte_len for %#llx", (unsigned long long)good[i]);
			CHECK_MSG(!!cq->read_completion_ts ==
					  !!(good[i] & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP),
				  "read_completion_ts for %#llx", (unsigned long long)good[i]);
		}
		destroy_ex(cq);
	}
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		cq = cq_ex(ctx, 16, bad[i], 0, 0, NULL);
		CHECK_MSG(!cq && errno == EOPNOTSUPP,
			  "wc_flags %#llx: want NULL/EOPNOTSUPP, got %s",
			  (unsigned long long)bad[i], cq ? "a CQ" : t_errname(errno));
		destroy_ex(cq);
	}
}

static void case_masks(void)
{
	struct ibv_cq_ex *cq;

	t_case("ibv_create_cq_ex: comp_mask, flags, cqe, comp_vector");
	CHECK_ERRNO_PTR(cq_ex(ctx, 16, 0, 1u << 2, 0, NULL), EINVAL);
	CHECK_ERRNO_PTR(cq_ex(ctx, 16, 0, 1u << 31, 0, NULL), EINVAL);
	cq = cq_ex(ctx, 16, 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
		   NULL);
	CHECK_MSG(cq != NULL, "SINGLE_THREADED: %s", t_errname(errno));
	destroy_ex(cq);
	/* flags are read only with MASK_FLAGS */
	cq = cq_ex(ctx, 16, 0, 0, IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN, NULL);
	CHECK_MSG(cq != NULL, "flags without MASK_FLAGS: %s", t_errname(errno));
	destroy_ex(cq);
	CHECK_ERRNO_PTR(cq_ex(ctx, 16, 0, IBV_CQ_INIT_ATTR_MASK_FLAGS,
			      IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN, NULL),
			EOPNOTSUPP);
	CHECK_ERRNO_PTR(cq_ex(ctx, 16, 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, 1u << 2, NULL), EOPNOTSUPP);
	CHECK_ERRNO_PTR(cq_ex(ctx, 0, 0, 0, 0, NULL), EINVAL);
	CHECK_ERRNO_PTR(cq_ex(ctx, (uint32_t)dev_attr.max_cqe + 1, 0, 0, 0, NULL), EINVAL);
	CHECK_ERRNO_PTR(cq_ex(ctx, UINT32_MAX, 0, 0, 0, NULL), EINVAL);
	{
		struct ibv_cq_init_attr_ex a;

		memset(&a, 0, sizeof(a));
		a.cqe = 4;
		a.comp_vector = 1;
		CHECK_ERRNO_PTR(ibv_create_cq_ex(ctx, &a), EINVAL);
	}
}

static void case_parent_domain(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_context *other;
	struct ibv_pd *pd, *parent = NULL, *oparent = NULL, *opd = NULL;
	struct ibv_cq_ex *cq1, *cq2;

	t_case("MASK_PD: parent domains only, referenced while the CQ exists");
	pd = ibv_alloc_pd(ctx);
	if (!CHECK(pd != NULL))
		return;
	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	parent = ibv_alloc_parent_domain(ctx, &pa);
	if (!CHECK(parent != NULL))
		goto out;
	CHECK_ERRNO_PTR(cq_ex(ctx, 16, 0, IBV_CQ_INIT_ATTR_MASK_PD, 0, NULL), EINVAL);
	CHECK_ERRNO_PTR(cq_ex(ctx, 16, 0, IBV_CQ_INIT_ATTR_MASK_PD, 0, pd), EINVAL);
	/* without MASK_PD the pointer is not read */
	cq1 = cq_ex(ctx, 16, 0, 0, 0, pd);
	CHECK(cq1 != NULL);
	destroy_ex(cq1);
	CHECK_RET(ibv_dealloc_pd(parent), 0);

	parent = ibv_alloc_parent_domain(ctx, &pa);
	if (!CHECK(parent != NULL))
		goto out;
	cq1 = cq_ex(ctx, 16, IBV_WC_STANDARD_FLAGS, IBV_CQ_INIT_ATTR_MASK_PD, 0, parent);
	cq2 = cq_ex(ctx, 16, 0, IBV_CQ_INIT_ATTR_MASK_PD | IBV_CQ_INIT_ATTR_MASK_FLAGS,
		    IBV_CREATE_CQ_ATTR_SINGLE_THREADED, parent);
	CHECK_MSG(cq1 && cq2, "CQs on a parent domain: %s", t_errname(errno));
	CHECK_RET(ibv_dealloc_pd(parent), EBUSY);
	CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
	destroy_ex(cq1);
	CHECK_RET(ibv_dealloc_pd(parent), EBUSY);
	destroy_ex(cq2);
	/* failed creations took no reference */
	CHECK_ERRNO_PTR(cq_ex(ctx, 0, 0, IBV_CQ_INIT_ATTR_MASK_PD, 0, parent), EINVAL);
	CHECK_ERRNO_PTR(cq_ex(ctx, 16, IBV_WC_EX_WITH_CVLAN, IBV_CQ_INIT_ATTR_MASK_PD, 0, parent),
			EOPNOTSUPP);
	CHECK_RET(ibv_dealloc_pd(parent), 0);
	parent = NULL;

	/* a parent domain of another context */
	other = ibv_open_device(ctx->device);
	if (CHECK(other != NULL)) {
		opd = ibv_alloc_pd(other);
		pa.pd = opd;
		oparent = opd ? ibv_alloc_parent_domain(other, &pa) : NULL;
		if (CHECK(oparent != NULL)) {
			CHECK_ERRNO_PTR(cq_ex(ctx, 16, 0, IBV_CQ_INIT_ATTR_MASK_PD, 0, oparent),
					EINVAL);
			CHECK_RET(ibv_dealloc_pd(oparent), 0);
		}
		if (opd)
			CHECK_RET(ibv_dealloc_pd(opd), 0);
		ibv_close_device(other);
	}
out:
	if (parent)
		CHECK_RET(ibv_dealloc_pd(parent), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

static void case_poll_empty(void)
{
	struct ibv_wc wc[4];
	struct ibv_cq *cq;

	t_case("empty CQ: poll, notify");
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (!CHECK(cq != NULL))
		return;
	CHECK_EQ_INT(ibv_poll_cq(cq, 4, wc), 0);
	CHECK_RET(ibv_req_notify_cq(cq, 0), 0);
	CHECK_RET(ibv_req_notify_cq(cq, 1), 0);
	CHECK_RET(ibv_modify_cq(cq, &(struct ibv_modify_cq_attr){0}), EINVAL); /* no attr_mask */
	CHECK_RET(ibv_destroy_cq(cq), 0);
}

static void case_resize(void)
{
	struct ibv_cq *cq;

	t_case("ibv_resize_cq");
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (!CHECK(cq != NULL))
		return;
	CHECK_RET(ibv_resize_cq(cq, 100), 0);
	CHECK_MSG(cq->cqe >= 100, "cqe %d after resize to 100", cq->cqe);
	CHECK_RET(ibv_resize_cq(cq, 2), 0);
	CHECK_MSG(cq->cqe >= 2 && cq->cqe < 100, "cqe %d after resize to 2", cq->cqe);
	CHECK_RET(ibv_resize_cq(cq, 0), EINVAL);
	CHECK_RET(ibv_resize_cq(cq, -5), EINVAL);
	CHECK_RET(ibv_resize_cq(cq, dev_attr.max_cqe + 1), EINVAL);
	CHECK_MSG(cq->cqe >= 2 && cq->cqe < 100, "cqe %d after failed resizes", cq->cqe);
	CHECK_RET(ibv_destroy_cq(cq), 0);
}

static void case_channel(void)
{
	struct ibv_comp_channel *ch, *och;
	struct ibv_context *other;
	struct ibv_cq *cq1, *cq2;
	struct ibv_cq_init_attr_ex a;
	struct ibv_cq_ex *cqx;

	t_case("completion channels");
	ch = ibv_create_comp_channel(ctx);
	if (!CHECK(ch != NULL))
		return;
	CHECK(ch->fd >= 0);
	CHECK(ch->context == ctx);
	CHECK_EQ_INT(ch->refcnt, 0);
	cq1 = ibv_create_cq(ctx, 4, NULL, ch, 0);
	memset(&a, 0, sizeof(a));
	a.cqe = 4;
	a.channel = ch;
	cqx = ibv_create_cq_ex(ctx, &a);
	cq2 = cqx ? ibv_cq_ex_to_cq(cqx) : NULL;
	if (!CHECK(cq1 && cq2)) {
		if (cq1)
			ibv_destroy_cq(cq1);
		if (cq2)
			ibv_destroy_cq(cq2);
		ibv_destroy_comp_channel(ch);
		return;
	}
	CHECK(cq1->channel == ch && cq2->channel == ch);
	CHECK_EQ_INT(ch->refcnt, 2);
	CHECK_RET(ibv_destroy_comp_channel(ch), EBUSY);
	CHECK_RET(ibv_destroy_cq(cq1), 0);
	CHECK_EQ_INT(ch->refcnt, 1);
	CHECK_RET(ibv_destroy_comp_channel(ch), EBUSY);
	CHECK_RET(ibv_destroy_cq(cq2), 0);
	CHECK_EQ_INT(ch->refcnt, 0);
	/* a failed creation does not count */
	CHECK_ERRNO_PTR(ibv_create_cq(ctx, 0, NULL, ch, 0), EINVAL);
	CHECK_EQ_INT(ch->refcnt, 0);

	/* a channel of another context */
	other = ibv_open_device(ctx->device);
	if (CHECK(other != NULL)) {
		och = ibv_create_comp_channel(other);
		if (CHECK(och != NULL)) {
			CHECK_ERRNO_PTR(ibv_create_cq(ctx, 4, NULL, och, 0), EINVAL);
			CHECK_RET(ibv_destroy_comp_channel(och), 0);
		}
		ibv_close_device(other);
	}
	CHECK_RET(ibv_destroy_comp_channel(ch), 0);
}

static void case_max_cq(void)
{
	struct ibv_cq **cqs;
	int i, n = 0;

	t_case("max_cq");
	cqs = calloc((size_t)dev_attr.max_cq + 1, sizeof(*cqs));
	if (!CHECK(cqs != NULL))
		return;
	for (i = 0; i < dev_attr.max_cq; i++) {
		cqs[i] = ibv_create_cq(ctx, 1, NULL, NULL, 0);
		if (!cqs[i])
			break;
		n++;
	}
	CHECK_MSG(n == dev_attr.max_cq, "created %d of max_cq %d: %s", n, dev_attr.max_cq,
		  t_errname(errno));
	if (n == dev_attr.max_cq)
		CHECK_ERRNO_PTR(ibv_create_cq(ctx, 1, NULL, NULL, 0), ENOMEM);
	/* one freed makes room for one */
	if (n > 0) {
		CHECK_RET(ibv_destroy_cq(cqs[--n]), 0);
		cqs[n] = ibv_create_cq(ctx, 1, NULL, NULL, 0);
		n += CHECK(cqs[n] != NULL);
	}
	for (i = 0; i < n; i++)
		ibv_destroy_cq(cqs[i]);
	free(cqs);
}

static void case_bounce(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_pd *pd = NULL, *plain = NULL, *cc = NULL;
	struct ibv_context *c;
	struct ibv_cq_ex *cq;

	t_case("CC DMA bounce: CQs need a CC parent domain");
	setenv("SOFTVERBS_CC_DMA_BOUNCE", "1", 1);
	setenv("SOFTVERBS_CC_HEAP", "builtin", 1);
	c = t_open_dev();
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	unsetenv("SOFTVERBS_CC_HEAP");
	if (!CHECK(c != NULL))
		return;
	CHECK_ERRNO_PTR(ibv_create_cq(c, 16, NULL, NULL, 0), EOPNOTSUPP);
	CHECK_ERRNO_PTR(cq_ex(c, 16, IBV_WC_STANDARD_FLAGS, 0, 0, NULL), EOPNOTSUPP);
	pd = ibv_alloc_pd(c);
	if (!CHECK(pd != NULL))
		goto out;
	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	plain = ibv_alloc_parent_domain(c, &pa);
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC;
	cc = ibv_alloc_parent_domain(c, &pa);
	if (!CHECK(plain && cc))
		goto out;
	/* a parent domain without the opt-in still has ordinary memory */
	CHECK_ERRNO_PTR(cq_ex(c, 16, 0, IBV_CQ_INIT_ATTR_MASK_PD, 0, plain), EOPNOTSUPP);
	CHECK_RET(ibv_dealloc_pd(plain), 0);
	plain = NULL;
	cq = cq_ex(c, 16, IBV_WC_STANDARD_FLAGS, IBV_CQ_INIT_ATTR_MASK_PD, 0, cc);
	if (CHECK_MSG(cq != NULL, "CQ on a CC parent domain: %s", t_errname(errno))) {
		struct ibv_wc wc;

		CHECK_MSG(cq->cqe >= 16, "cqe %d", cq->cqe);
		CHECK_EQ_INT(ibv_poll_cq(ibv_cq_ex_to_cq(cq), 1, &wc), 0);
		CHECK_EQ_INT(ibv_start_poll(cq, NULL), ENOENT);
		CHECK_RET(ibv_resize_cq(ibv_cq_ex_to_cq(cq), 64), EOPNOTSUPP);
		CHECK_RET(ibv_dealloc_pd(cc), EBUSY);
		destroy_ex(cq);
	}
	CHECK_RET(ibv_dealloc_pd(cc), 0);
	cc = NULL;
out:
	if (plain)
		ibv_dealloc_pd(plain);
	if (cc)
		ibv_dealloc_pd(cc);
	if (pd)
		CHECK_RET(ibv_dealloc_pd(pd), 0);
	ibv_close_device(c);
}

int main(void)
{
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	t_start("api_cq");
	t_open_first(&ctx);
	if (ibv_query_device(ctx, &dev_attr))
		t_skip_all("ibv_query_device failed");
	case_create();
	case_wc_flags();
	case_masks();
	case_parent_domain();
	case_poll_empty();
	case_resize();
	case_channel();
	case_max_cq();
	case_bounce();
	ibv_close_device(ctx);
	return t_finish();
}
