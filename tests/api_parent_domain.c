/* SPDX-License-Identifier: MIT */
/*
 * api_parent_domain: ibv_alloc_parent_domain, ibv_alloc_td, ibv_dealloc_td
 * and ibv_dealloc_pd on parent domains (docs/seed-apis.md 1.7).
 *
 * Argument rules: no pd -> EINVAL, unknown comp_mask bits -> EINVAL, and
 * (softverbs) a pd that is itself a parent domain or a pd/td of another
 * context -> EINVAL. A parent domain shares its base's handle and context.
 * ALLOW_CC_UNPROTECTED_ALLOC is accepted silently on a device without CC
 * DMA bounce; on a bounce device with SOFTVERBS_CC_HEAP=kernel it needs
 * /dev/dma_heap/system_cc_shared (ENOENT without it), while auto and
 * builtin fall back to the built-in pool. Reference counts: the base PD
 * and the TD cannot be deallocated (EBUSY) while a parent domain uses
 * them; after the parent domain goes, both can.
 */
#include "harness.h"

#include <unistd.h>

#define HEAP_PATH "/dev/dma_heap/system_cc_shared"
#define CC_FLAG IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC

static struct ibv_context *ctx;

static void *my_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
		      uint64_t resource_type)
{
	(void)pd;
	(void)pd_context;
	(void)size;
	(void)alignment;
	(void)resource_type;
	return IBV_ALLOCATOR_USE_DEFAULT;
}

static void my_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type)
{
	(void)pd;
	(void)pd_context;
	(void)ptr;
	(void)resource_type;
}

static void case_args(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_pd *pd, *parent, *nested;
	static const uint32_t bad_bits[] = {1u << 3, 1u << 8, 1u << 31};
	size_t i;

	t_case("argument checks");
	pd = ibv_alloc_pd(ctx);
	if (!CHECK(pd != NULL))
		return;
	memset(&pa, 0, sizeof(pa));
	CHECK_ERRNO_PTR(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	CHECK_ERRNO_PTR(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	CHECK_ERRNO_PTR(ibv_alloc_parent_domain(ctx, NULL), EINVAL);

	pa.pd = pd;
	for (i = 0; i < sizeof(bad_bits) / sizeof(bad_bits[0]); i++) {
		pa.comp_mask = bad_bits[i];
		CHECK_ERRNO_PTR(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
		pa.comp_mask = bad_bits[i] | IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
		CHECK_ERRNO_PTR(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	}
	/* none of the failures took a reference on the base */
	CHECK_RET(ibv_dealloc_pd(pd), 0);

	/* a parent domain is not a protection domain to build on */
	pd = ibv_alloc_pd(ctx);
	if (!CHECK(pd != NULL))
		return;
	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	parent = ibv_alloc_parent_domain(ctx, &pa);
	if (CHECK(parent != NULL)) {
		pa.pd = parent;
		nested = ibv_alloc_parent_domain(ctx, &pa);
		CHECK(nested == NULL && errno == EINVAL);
		if (nested)
			ibv_dealloc_pd(nested);
		CHECK_RET(ibv_dealloc_pd(parent), 0);
	}
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

static void case_other_context(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_td_init_attr ta = {0};
	struct ibv_context *other = ibv_open_device(ctx->device);
	struct ibv_pd *pd = NULL;
	struct ibv_td *td = NULL;

	t_case("pd or td of another context");
	if (!CHECK(other != NULL))
		return;
	pd = ibv_alloc_pd(other);
	td = ibv_alloc_td(other, &ta);
	if (!CHECK(pd && td))
		goto out;
	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	CHECK_ERRNO_PTR(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	pd = ibv_alloc_pd(ctx);
	if (CHECK(pd != NULL)) {
		pa.pd = pd;
		pa.td = td;
		CHECK_ERRNO_PTR(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
		CHECK_RET(ibv_dealloc_pd(pd), 0);
	}
	pd = NULL;
out:
	if (pd)
		ibv_dealloc_pd(pd);
	if (td)
		CHECK_RET(ibv_dealloc_td(td), 0);
	ibv_close_device(other);
}

static void case_attributes(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_pd *pd, *p[5];
	int i, n = 0;

	t_case("handle, context, ALLOCATORS, PD_CONTEXT, CC without bounce");
	pd = ibv_alloc_pd(ctx);
	if (!CHECK(pd != NULL))
		return;
	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	p[n] = ibv_alloc_parent_domain(ctx, &pa);
	if (CHECK(p[n] != NULL)) {
		CHECK(p[n] != pd);
		CHECK(p[n]->context == ctx);
		CHECK_EQ_INT(p[n]->handle, pd->handle);
		n++;
	}
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
	pa.alloc = my_alloc;
	pa.free = my_free;
	p[n] = ibv_alloc_parent_domain(ctx, &pa);
	n += CHECK(p[n] != NULL);
	/* no NULL check on the allocators (they are used only when both are set) */
	pa.alloc = NULL;
	pa.free = NULL;
	p[n] = ibv_alloc_parent_domain(ctx, &pa);
	n += CHECK(p[n] != NULL);
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	pa.pd_context = &pa;
	p[n] = ibv_alloc_parent_domain(ctx, &pa);
	n += CHECK(p[n] != NULL);
	/* no CC DMA bounce on this device: the opt-in is accepted and ignored */
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
		       IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT | CC_FLAG;
	pa.alloc = my_alloc;
	pa.free = my_free;
	p[n] = ibv_alloc_parent_domain(ctx, &pa);
	n += CHECK_MSG(p[n] != NULL, "CC flag without bounce: %s", t_errname(errno));

	CHECK_EQ_INT(n, 5);
	CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
	for (i = 0; i < n; i++)
		CHECK_RET(ibv_dealloc_pd(p[i]), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

static void case_refcounts(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_td_init_attr ta;
	struct ibv_pd *pd, *p1 = NULL, *p2 = NULL;
	struct ibv_td *td, *bad;

	t_case("td and base refcounts");
	memset(&ta, 0, sizeof(ta));
	ta.comp_mask = 1;
	bad = ibv_alloc_td(ctx, &ta);
	CHECK(bad == NULL && errno == EINVAL);
	if (bad)
		ibv_dealloc_td(bad);
	CHECK_ERRNO_PTR(ibv_alloc_td(ctx, NULL), EINVAL);
	ta.comp_mask = 0;
	td = ibv_alloc_td(ctx, &ta);
	if (!CHECK(td != NULL))
		return;
	CHECK(td->context == ctx);
	pd = ibv_alloc_pd(ctx);
	if (!CHECK(pd != NULL)) {
		ibv_dealloc_td(td);
		return;
	}
	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	pa.td = td;
	p1 = ibv_alloc_parent_domain(ctx, &pa);
	p2 = ibv_alloc_parent_domain(ctx, &pa);
	if (CHECK(p1 && p2)) {
		CHECK_RET(ibv_dealloc_td(td), EBUSY);
		CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
		CHECK_RET(ibv_dealloc_pd(p1), 0);
		p1 = NULL;
		/* p2 still holds both */
		CHECK_RET(ibv_dealloc_td(td), EBUSY);
		CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
		CHECK_RET(ibv_dealloc_pd(p2), 0);
		p2 = NULL;
	}
	if (p1)
		ibv_dealloc_pd(p1);
	if (p2)
		ibv_dealloc_pd(p2);
	CHECK_RET(ibv_dealloc_td(td), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

/* On a bounce device configured with `heap`: allocate with the CC flag. */
static struct ibv_pd *cc_parent(struct ibv_context *c, struct ibv_pd *pd)
{
	struct ibv_parent_domain_init_attr pa;

	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	pa.comp_mask = CC_FLAG;
	errno = 0;
	return ibv_alloc_parent_domain(c, &pa);
}

static void case_bounce(void)
{
	struct ibv_device_attr_ex ex;
	struct ibv_context *c;
	struct ibv_pd *pd, *parent;
	int heap_exists = access(HEAP_PATH, F_OK) == 0, fds;

	t_case("CC opt-in on a bounce device");
	setenv("SOFTVERBS_CC_DMA_BOUNCE", "1", 1);

	/* kernel: the heap is required */
	setenv("SOFTVERBS_CC_HEAP", "kernel", 1);
	c = t_open_dev();
	if (CHECK_MSG(c != NULL, "open: %s", t_errname(errno))) {
		if (CHECK_RET(ibv_query_device_ex(c, NULL, &ex), 0))
			CHECK(ex.device_cap_flags_ex & IBV_DEVICE_CC_DMA_BOUNCE);
		pd = ibv_alloc_pd(c);
		if (CHECK(pd != NULL)) {
			fds = t_count_fds();
			parent = cc_parent(c, pd);
			if (heap_exists) {
				printf("# skip the ENOENT check: %s exists on this machine\n",
				       HEAP_PATH);
				/* success, or open's own errno (e.g. EACCES) */
				CHECK(parent != NULL || errno != 0);
			} else {
				CHECK_MSG(!parent && errno == ENOENT,
					  "kernel heap missing: want NULL/ENOENT, got %s/%s",
					  parent ? "a parent domain" : "NULL", t_errname(errno));
				CHECK_EQ_INT(t_count_fds(), fds);
			}
			if (parent)
				CHECK_RET(ibv_dealloc_pd(parent), 0);
			/* the failure took no reference on the base */
			CHECK_RET(ibv_dealloc_pd(pd), 0);
		}
		ibv_close_device(c);
	}

	/* auto and builtin: the built-in pool when the heap is missing */
	setenv("SOFTVERBS_CC_HEAP", "builtin", 1);
	c = t_open_dev();
	if (CHECK(c != NULL)) {
		pd = ibv_alloc_pd(c);
		parent = pd ? cc_parent(c, pd) : NULL;
		CHECK_MSG(parent != NULL, "builtin: %s", t_errname(errno));
		if (parent)
			CHECK_RET(ibv_dealloc_pd(parent), 0);
		if (pd)
			CHECK_RET(ibv_dealloc_pd(pd), 0);
		ibv_close_device(c);
	}
	setenv("SOFTVERBS_CC_HEAP", "auto", 1);
	c = t_open_dev();
	if (CHECK(c != NULL)) {
		pd = ibv_alloc_pd(c);
		parent = pd ? cc_parent(c, pd) : NULL;
		if (heap_exists)
			CHECK(parent != NULL || errno != 0);
		else
			CHECK_MSG(parent != NULL, "auto without heap: %s", t_errname(errno));
		if (parent)
			CHECK_RET(ibv_dealloc_pd(parent), 0);
		if (pd)
			CHECK_RET(ibv_dealloc_pd(pd), 0);
		ibv_close_device(c);
	}
	unsetenv("SOFTVERBS_CC_HEAP");
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");

	/* without bounce, even heap=kernel leaves the flag without effect */
	setenv("SOFTVERBS_CC_HEAP", "kernel", 1);
	c = t_open_dev();
	if (CHECK(c != NULL)) {
		pd = ibv_alloc_pd(c);
		parent = pd ? cc_parent(c, pd) : NULL;
		CHECK_MSG(parent != NULL, "no bounce, heap=kernel: %s", t_errname(errno));
		if (parent)
			CHECK_RET(ibv_dealloc_pd(parent), 0);
		if (pd)
			CHECK_RET(ibv_dealloc_pd(pd), 0);
		ibv_close_device(c);
	}
	unsetenv("SOFTVERBS_CC_HEAP");
}

int main(void)
{
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	unsetenv("SOFTVERBS_CC_HEAP");
	t_start("api_parent_domain");
	t_open_first(&ctx);
	case_args();
	case_other_context();
	case_attributes();
	case_refcounts();
	case_bounce();
	ibv_close_device(ctx);
	return t_finish();
}
