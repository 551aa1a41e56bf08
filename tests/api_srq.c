/* SPDX-License-Identifier: MIT */
/*
 * api_srq: shared receive queues through the public API.
 *
 * ibv_create_srq and the inline ibv_create_srq_ex (basic, and through the
 * verbs_context slot): granted sizes (>= requested), limits (EINVAL),
 * types other than basic (EOPNOTSUPP), unknown comp_mask bits, the PD
 * reference; ibv_modify_srq (resize, limit) and ibv_query_srq;
 * ibv_post_srq_recv (ENOMEM when full, EINVAL for too many SGEs, *bad
 * naming the failing WR); ibv_get_srq_num; max_srq; and no SRQs at all on
 * a CC DMA bounce device.
 */
/* test: timeout=120 */
#include "harness.h"

#include <stdlib.h>

static struct ibv_context *ctx;
static struct ibv_device_attr dev_attr;
static struct ibv_pd *pd;

static struct ibv_srq *srq_basic(struct ibv_pd *p, uint32_t max_wr, uint32_t max_sge,
				 struct ibv_srq_init_attr *out)
{
	struct ibv_srq_init_attr a;
	struct ibv_srq *s;

	memset(&a, 0, sizeof(a));
	a.attr.max_wr = max_wr;
	a.attr.max_sge = max_sge;
	errno = 0;
	s = ibv_create_srq(p ? p : pd, &a);
	if (out)
		*out = a;
	return s;
}

static void case_create(void)
{
	struct ibv_srq_init_attr a;
	struct ibv_srq *srq;
	int cookie;

	t_case("ibv_create_srq: granted sizes and limits");
	memset(&a, 0, sizeof(a));
	a.srq_context = &cookie;
	a.attr.max_wr = 10;
	a.attr.max_sge = 3;
	a.attr.srq_limit = 5; /* ignored at creation */
	srq = ibv_create_srq(pd, &a);
	if (CHECK_MSG(srq != NULL, "create: %s", t_errname(errno))) {
		struct ibv_srq_attr q;

		CHECK(srq->context == ctx);
		CHECK(srq->pd == pd);
		CHECK(srq->srq_context == &cookie);
		CHECK_MSG(a.attr.max_wr >= 10, "granted max_wr %u", a.attr.max_wr);
		CHECK_MSG(a.attr.max_sge >= 3, "granted max_sge %u", a.attr.max_sge);
		memset(&q, 0xff, sizeof(q));
		CHECK_RET(ibv_query_srq(srq, &q), 0);
		CHECK_EQ_INT(q.max_wr, a.attr.max_wr);
		CHECK_EQ_INT(q.max_sge, a.attr.max_sge);
		CHECK_EQ_INT(q.srq_limit, 0); /* not armed */
		CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
		CHECK_RET(ibv_destroy_srq(srq), 0);
	}
	srq = srq_basic(NULL, (uint32_t)dev_attr.max_srq_wr, (uint32_t)dev_attr.max_srq_sge, &a);
	if (CHECK_MSG(srq != NULL, "max sizes: %s", t_errname(errno))) {
		CHECK_EQ_INT(a.attr.max_wr, dev_attr.max_srq_wr);
		CHECK_EQ_INT(a.attr.max_sge, dev_attr.max_srq_sge);
		CHECK_RET(ibv_destroy_srq(srq), 0);
	}
	srq = srq_basic(NULL, 1, 1, &a);
	if (CHECK(srq != NULL)) {
		CHECK_EQ_INT(a.attr.max_wr, 1);
		CHECK_EQ_INT(a.attr.max_sge, 1);
		CHECK_RET(ibv_destroy_srq(srq), 0);
	}
	CHECK_ERRNO_PTR(srq_basic(NULL, 0, 1, NULL), EINVAL);
	CHECK_ERRNO_PTR(srq_basic(NULL, (uint32_t)dev_attr.max_srq_wr + 1, 1, NULL), EINVAL);
	CHECK_ERRNO_PTR(srq_basic(NULL, 4, 0, NULL), EINVAL);
	CHECK_ERRNO_PTR(srq_basic(NULL, 4, (uint32_t)dev_attr.max_srq_sge + 1, NULL), EINVAL);
	CHECK_ERRNO_PTR(srq_basic(NULL, UINT32_MAX, 1, NULL), EINVAL);
	/* none of the failures kept a reference on the PD */
	{
		struct ibv_pd *p = ibv_alloc_pd(ctx);

		if (CHECK(p != NULL)) {
			CHECK_ERRNO_PTR(srq_basic(p, 0, 1, NULL), EINVAL);
			CHECK_RET(ibv_dealloc_pd(p), 0);
		}
	}
}

static struct ibv_srq *srq_ex(uint32_t comp_mask, enum ibv_srq_type type, struct ibv_pd *p,
			      uint32_t max_wr, struct ibv_srq_init_attr_ex *out)
{
	struct ibv_srq_init_attr_ex a;
	struct ibv_srq *s;

	memset(&a, 0, sizeof(a));
	a.comp_mask = comp_mask;
	a.srq_type = type;
	a.pd = p;
	a.attr.max_wr = max_wr;
	a.attr.max_sge = 2;
	errno = 0;
	s = ibv_create_srq_ex(ctx, &a);
	if (out)
		*out = a;
	return s;
}

static void case_create_ex(void)
{
	struct ibv_srq_init_attr_ex a;
	struct ibv_parent_domain_init_attr pa;
	struct ibv_pd *parent;
	struct ibv_srq *srq;
	struct ibv_cq *cq;

	t_case("ibv_create_srq_ex: basic, types, comp_mask");
	srq = srq_ex(IBV_SRQ_INIT_ATTR_PD, IBV_SRQT_BASIC, pd, 5, &a);
	if (CHECK(srq != NULL)) {
		CHECK_MSG(a.attr.max_wr >= 5, "granted max_wr %u", a.attr.max_wr);
		CHECK_RET(ibv_destroy_srq(srq), 0);
	}
	srq = srq_ex(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE, IBV_SRQT_BASIC, pd, 5, &a);
	if (CHECK(srq != NULL))
		CHECK_RET(ibv_destroy_srq(srq), 0);
	/* through the verbs_context slot: a basic SRQ with an ignored CQ */
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (CHECK(cq != NULL)) {
		memset(&a, 0, sizeof(a));
		a.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;
		a.pd = pd;
		a.cq = cq;
		a.attr.max_wr = 7;
		a.attr.max_sge = 1;
		srq = ibv_create_srq_ex(ctx, &a);
		if (CHECK_MSG(srq != NULL, "PD|CQ: %s", t_errname(errno))) {
			CHECK_MSG(a.attr.max_wr >= 7, "granted max_wr %u", a.attr.max_wr);
			CHECK_RET(ibv_destroy_srq(srq), 0);
		}
		CHECK_RET(ibv_destroy_cq(cq), 0);
	}
	/* XRC without an XRC domain and a CQ: tests/api_xrc.c has the rest */
	CHECK_ERRNO_PTR(
		srq_ex(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE, IBV_SRQT_XRC, pd, 5, NULL),
		EINVAL);
	CHECK_ERRNO_PTR(srq_ex(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_TM,
			       IBV_SRQT_TM, pd, 5, NULL),
			EOPNOTSUPP);
	CHECK_ERRNO_PTR(srq_ex(IBV_SRQ_INIT_ATTR_TYPE, IBV_SRQT_BASIC, pd, 5, NULL), EINVAL);
	CHECK_ERRNO_PTR(srq_ex(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_RESERVED, IBV_SRQT_BASIC,
			       pd, 5, NULL),
			EINVAL);
	CHECK_ERRNO_PTR(srq_ex(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD, IBV_SRQT_BASIC, NULL,
			       5, NULL),
			EINVAL);
	CHECK_ERRNO_PTR(
		srq_ex(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD, IBV_SRQT_BASIC, pd, 0, NULL),
		EINVAL);

	/* on a parent domain: the reference is on its protection domain */
	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	parent = ibv_alloc_parent_domain(ctx, &pa);
	if (CHECK(parent != NULL)) {
		srq = srq_basic(parent, 4, 1, NULL);
		if (CHECK_MSG(srq != NULL, "on a parent domain: %s", t_errname(errno))) {
			CHECK(srq->pd == parent);
			CHECK_RET(ibv_dealloc_pd(parent), 0);
			parent = NULL;
			CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
			CHECK_RET(ibv_destroy_srq(srq), 0);
		}
		if (parent)
			CHECK_RET(ibv_dealloc_pd(parent), 0);
	}
}

static void case_modify_query(void)
{
	struct ibv_srq_init_attr a;
	struct ibv_srq_attr m, q;
	struct ibv_srq *srq;

	t_case("ibv_modify_srq and ibv_query_srq");
	srq = srq_basic(NULL, 16, 2, &a);
	if (!CHECK(srq != NULL))
		return;
	memset(&m, 0, sizeof(m));
	m.srq_limit = a.attr.max_wr + 1;
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT), EINVAL);
	m.srq_limit = 5;
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT), 0);
	CHECK_RET(ibv_query_srq(srq, &q), 0);
	CHECK_EQ_INT(q.srq_limit, 5);
	m.srq_limit = a.attr.max_wr; /* the largest valid limit */
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT), 0);
	m.srq_limit = 0;
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT), 0);
	CHECK_RET(ibv_query_srq(srq, &q), 0);
	CHECK_EQ_INT(q.srq_limit, 0);

	CHECK_RET(ibv_modify_srq(srq, &m, 0), 0);
	CHECK_RET(ibv_modify_srq(srq, &m, 1 << 2), EINVAL);

	/* resize */
	m.max_wr = 100;
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR), 0);
	CHECK_RET(ibv_query_srq(srq, &q), 0);
	CHECK_MSG(q.max_wr >= 100, "max_wr %u after resize to 100", q.max_wr);
	CHECK_EQ_INT(m.max_wr, q.max_wr);
	CHECK_EQ_INT(q.max_sge, a.attr.max_sge);
	m.max_wr = 0;
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR), EINVAL);
	m.max_wr = (uint32_t)dev_attr.max_srq_wr + 1;
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR), EINVAL);
	/* both at once: all or nothing */
	m.max_wr = 8;
	m.srq_limit = 50; /* above the new size */
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), EINVAL);
	CHECK_RET(ibv_query_srq(srq, &q), 0);
	CHECK_MSG(q.max_wr >= 100 && q.srq_limit == 0, "max_wr %u limit %u after a failed modify",
		  q.max_wr, q.srq_limit);
	m.max_wr = 8;
	m.srq_limit = 3;
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), 0);
	CHECK_RET(ibv_query_srq(srq, &q), 0);
	CHECK_MSG(q.max_wr >= 8 && q.max_wr < 100, "max_wr %u after resize to 8", q.max_wr);
	CHECK_EQ_INT(q.srq_limit, 3);
	CHECK_RET(ibv_destroy_srq(srq), 0);
}

/* Posts single WRs until one fails; returns how many were taken. */
static int fill(struct ibv_srq *srq, struct ibv_sge *sge, int *err)
{
	struct ibv_recv_wr wr, *bad;
	int n = 0;

	for (;;) {
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)n;
		wr.sg_list = sge;
		wr.num_sge = 1;
		bad = NULL;
		*err = ibv_post_srq_recv(srq, &wr, &bad);
		if (*err) {
			CHECK(bad == &wr);
			return n;
		}
		CHECK(bad == NULL);
		if (++n > 1 << 20)
			return n;
	}
}

static void case_post(void)
{
	struct ibv_recv_wr wr[3], *bad;
	struct ibv_sge sge[4];
	struct ibv_srq_init_attr a;
	struct ibv_srq_attr m;
	struct ibv_srq *srq;
	int n, err, i;

	t_case("ibv_post_srq_recv: room, SGE count, *bad");
	memset(sge, 0, sizeof(sge));
	srq = srq_basic(NULL, 6, 2, &a);
	if (!CHECK(srq != NULL))
		return;
	/* too many SGEs: the second WR of a list fails, the first is posted */
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 3; i++) {
		wr[i].wr_id = 100 + (uint64_t)i;
		wr[i].sg_list = sge;
		wr[i].num_sge = 2;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	wr[1].num_sge = 3;
	bad = NULL;
	CHECK_RET(ibv_post_srq_recv(srq, &wr[0], &bad), EINVAL);
	CHECK(bad == &wr[1]);
	wr[1].num_sge = -1;
	bad = NULL;
	CHECK_RET(ibv_post_srq_recv(srq, &wr[1], &bad), EINVAL);
	CHECK(bad == &wr[1]);
	/* zero SGEs is a valid receive */
	wr[1].num_sge = 0;
	wr[1].next = NULL;
	bad = NULL;
	CHECK_RET(ibv_post_srq_recv(srq, &wr[1], &bad), 0);

	n = fill(srq, sge, &err);
	CHECK_EQ_INT(err, ENOMEM);
	CHECK_EQ_INT(n + 2, (int)a.attr.max_wr);

	/* shrinking below what is queued fails; growing makes room */
	m.max_wr = a.attr.max_wr - 1;
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR), EINVAL);
	m.max_wr = a.attr.max_wr + 1;
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR), 0);
	n = fill(srq, sge, &err);
	CHECK_EQ_INT(err, ENOMEM);
	CHECK_EQ_INT(n, (int)(m.max_wr - a.attr.max_wr));
	CHECK_RET(ibv_destroy_srq(srq), 0);

	/* a list running into the end: the first WR that finds no room is bad */
	srq = srq_basic(NULL, 4, 1, &a);
	if (!CHECK(srq != NULL))
		return;
	CHECK_EQ_INT(a.attr.max_wr, 4); /* a power of two is granted as asked */
	{
		struct ibv_recv_wr list[6];

		memset(list, 0, sizeof(list));
		for (i = 0; i < 6; i++) {
			list[i].wr_id = (uint64_t)i;
			list[i].sg_list = sge;
			list[i].num_sge = 1;
			list[i].next = i < 5 ? &list[i + 1] : NULL;
		}
		bad = NULL;
		CHECK_RET(ibv_post_srq_recv(srq, &list[0], &bad), ENOMEM);
		CHECK(bad == &list[4]);
		bad = NULL;
		CHECK_RET(ibv_post_srq_recv(srq, &list[5], &bad), ENOMEM);
		CHECK(bad == &list[5]);
	}
	m.max_wr = 3;
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR), EINVAL);
	CHECK_RET(ibv_destroy_srq(srq), 0);
}

static void case_srq_num(void)
{
	struct ibv_srq *s1, *s2;
	uint32_t n1 = 0, n2 = 0;

	t_case("ibv_get_srq_num");
	s1 = srq_basic(NULL, 4, 1, NULL);
	s2 = srq_basic(NULL, 4, 1, NULL);
	if (CHECK(s1 && s2)) {
		CHECK_RET(ibv_get_srq_num(s1, &n1), 0);
		CHECK_RET(ibv_get_srq_num(s2, &n2), 0);
		CHECK(n1 != 0 && n2 != 0 && n1 != n2);
		CHECK(n1 <= 0xffffff && n2 <= 0xffffff);
	}
	if (s1)
		CHECK_RET(ibv_destroy_srq(s1), 0);
	if (s2)
		CHECK_RET(ibv_destroy_srq(s2), 0);
}

static void case_max_srq(void)
{
	struct ibv_srq **s;
	int i, n = 0;

	t_case("max_srq");
	s = calloc((size_t)dev_attr.max_srq + 1, sizeof(*s));
	if (!CHECK(s != NULL))
		return;
	for (i = 0; i < dev_attr.max_srq; i++) {
		s[i] = srq_basic(NULL, 1, 1, NULL);
		if (!s[i])
			break;
		n++;
	}
	CHECK_MSG(n == dev_attr.max_srq, "created %d of max_srq %d: %s", n, dev_attr.max_srq,
		  t_errname(errno));
	if (n == dev_attr.max_srq)
		CHECK_ERRNO_PTR(srq_basic(NULL, 1, 1, NULL), ENOMEM);
	for (i = 0; i < n; i++)
		ibv_destroy_srq(s[i]);
	free(s);
	s = NULL;
	/* all gone: one can be made again */
	{
		struct ibv_srq *one = srq_basic(NULL, 1, 1, NULL);

		if (CHECK(one != NULL))
			CHECK_RET(ibv_destroy_srq(one), 0);
	}
}

static void case_bounce(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_srq_init_attr a;
	struct ibv_pd *p = NULL, *cc = NULL;
	struct ibv_context *c;

	t_case("CC DMA bounce: no SRQs");
	setenv("SOFTVERBS_CC_DMA_BOUNCE", "1", 1);
	setenv("SOFTVERBS_CC_HEAP", "builtin", 1);
	c = t_open_dev();
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	unsetenv("SOFTVERBS_CC_HEAP");
	if (!CHECK(c != NULL))
		return;
	p = ibv_alloc_pd(c);
	if (!CHECK(p != NULL))
		goto out;
	memset(&pa, 0, sizeof(pa));
	pa.pd = p;
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC;
	cc = ibv_alloc_parent_domain(c, &pa);
	if (!CHECK(cc != NULL))
		goto out;
	memset(&a, 0, sizeof(a));
	a.attr.max_wr = 4;
	a.attr.max_sge = 1;
	CHECK_ERRNO_PTR(ibv_create_srq(p, &a), EOPNOTSUPP);
	CHECK_ERRNO_PTR(ibv_create_srq(cc, &a), EOPNOTSUPP);
	CHECK_RET(ibv_dealloc_pd(cc), 0);
	cc = NULL;
out:
	if (cc)
		ibv_dealloc_pd(cc);
	if (p)
		CHECK_RET(ibv_dealloc_pd(p), 0);
	ibv_close_device(c);
}

int main(void)
{
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	t_start("api_srq");
	t_open_first(&ctx);
	if (ibv_query_device(ctx, &dev_attr))
		t_skip_all("ibv_query_device failed");
	CHECK(dev_attr.device_cap_flags & IBV_DEVICE_SRQ_RESIZE);
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		t_skip_all("ibv_alloc_pd failed");
	case_create();
	case_create_ex();
	case_modify_query();
	case_post();
	case_srq_num();
	case_max_srq();
	case_bounce();
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	ibv_close_device(ctx);
	return t_finish();
}
