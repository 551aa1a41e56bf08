/* SPDX-License-Identifier: MIT */
/*
 * api_upstream_buf: the API scenarios of rdma-core's tests/test_buf.py
 * (docs/seed-apis.md 4, scenarios 1-12), in C, with the same assertions.
 *
 * The whole set runs twice: on the default device, then on a CC DMA
 * bounce device (SOFTVERBS_CC_DMA_BOUNCE=1, SOFTVERBS_CC_HEAP=builtin;
 * each ibv_get_device_list() re-reads the configuration). Skips follow
 * upstream: the two bounce-only scenarios skip on the default device,
 * and get_pd() skips the plain-PD scenarios on a bounce device.
 *
 * Upstream also skips when a parent domain, a buffer or a buffer MR
 * fails with EOPNOTSUPP, ENOENT or ENODEV: that is a device that lacks
 * the feature. The software device has all of them, so such a failure
 * here is a failure, never a skip.
 *
 * As in the Python suite, an MR's address is the VA that was registered.
 * ibv_mr.addr equals it for plain memory; for a DMA-buf backed buffer it
 * is the offset inside the buffer (docs/seed-apis.md 5.1), which is asserted
 * as well.
 */
#include "harness.h"
#include "upstream.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define LW IBV_ACCESS_LOCAL_WRITE
#define CC_FLAG IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC

/* One run of the set: a device and what it reports. */
struct run {
	const char *label;
	struct ibv_context *ctx;
	bool bounce; /* the device reports IBV_DEVICE_CC_DMA_BOUNCE */
};

static size_t page;
static char case_name[256];

static void ucase(const struct run *r, const char *test)
{
	snprintf(case_name, sizeof(case_name), "%s (%s)", test, r->label);
	up_case(case_name);
}

/* upstream get_pd(): a plain PD, skipping on a bounce device. NULL when skipped. */
static struct ibv_pd *get_pd(const struct run *r)
{
	struct ibv_pd *pd;

	if (r->bounce) {
		up_skip("a plain PD cannot register memory on a CC DMA bounce device (get_pd)");
		return NULL;
	}
	errno = 0;
	pd = ibv_alloc_pd(r->ctx);
	CHECK_MSG(pd != NULL, "ibv_alloc_pd: %s", t_errname(errno));
	return pd;
}

/* A CC PD: a base PD and a parent domain with ALLOW_CC_UNPROTECTED_ALLOC. */
struct cc_pd {
	struct ibv_pd *base, *pd;
};

static bool cc_pd_alloc(const struct run *r, struct cc_pd *c)
{
	struct ibv_parent_domain_init_attr pa;

	c->pd = NULL;
	errno = 0;
	c->base = ibv_alloc_pd(r->ctx);
	if (!CHECK_MSG(c->base != NULL, "ibv_alloc_pd: %s", t_errname(errno)))
		return false;
	memset(&pa, 0, sizeof(pa));
	pa.pd = c->base;
	pa.comp_mask = CC_FLAG;
	errno = 0;
	c->pd = ibv_alloc_parent_domain(r->ctx, &pa);
	if (!CHECK_MSG(c->pd != NULL, "CC parent domain: %s", t_errname(errno))) {
		ibv_dealloc_pd(c->base);
		return false;
	}
	return true;
}

static void cc_pd_free(struct cc_pd *c)
{
	CHECK_RET(ibv_dealloc_pd(c->pd), 0);
	CHECK_RET(ibv_dealloc_pd(c->base), 0);
}

static uint8_t *buf_alloc(struct ibv_pd *pd, size_t size, struct ibv_buf **b)
{
	uint8_t *p;

	errno = 0;
	p = ibv_alloc_buf(pd, size, b);
	CHECK_MSG(p != NULL, "ibv_alloc_buf(%zu): %s", size, t_errname(errno));
	return p;
}

/* ---- BufAPITest ---- */

/* 1 */
static void test_buf_export_dmabuf_fd_plain_pd(const struct run *r)
{
	struct ibv_pd *pd;
	struct ibv_buf *b;
	int fd;

	ucase(r, "test_buf_export_dmabuf_fd_plain_pd");
	pd = get_pd(r);
	if (!pd)
		return;
	if (buf_alloc(pd, page, &b)) {
		errno = 0;
		fd = ibv_export_buf_dmabuf_fd(b);
		CHECK_MSG(fd == -1 && errno == ENODATA, "export: want -1/ENODATA, got %d/%s", fd,
			  t_errname(errno));
		if (fd >= 0)
			close(fd);
		ibv_free_buf(b);
	}
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

/* 2 */
static void test_buf_export_dmabuf_fd_on_bounce_device(const struct run *r)
{
	struct cc_pd c;
	struct ibv_buf *b;
	int fd;

	ucase(r, "test_buf_export_dmabuf_fd_on_bounce_device");
	if (!r->bounce) {
		up_skip("the device does not report CC_DMA_BOUNCE");
		return;
	}
	if (!cc_pd_alloc(r, &c))
		return;
	if (buf_alloc(c.pd, page, &b)) {
		errno = 0;
		fd = ibv_export_buf_dmabuf_fd(b);
		if (CHECK_MSG(fd >= 0, "export: %s", t_errname(errno)))
			CHECK_EQ_INT(close(fd), 0);
		ibv_free_buf(b);
	}
	cc_pd_free(&c);
}

/* Register [va, +len) of `b` by ibv_reg_buf_mr, or ibv_reg_mr_ex(ADDR|BUF) with `ex`. */
static struct ibv_mr *buf_mr(struct ibv_pd *pd, struct ibv_buf *b, uint8_t *va, size_t len, bool ex)
{
	struct ibv_mr_init_attr a;
	struct ibv_mr *mr;

	errno = 0;
	if (!ex) {
		mr = ibv_reg_buf_mr(pd, b, va, len, LW);
	} else {
		memset(&a, 0, sizeof(a));
		a.length = len;
		a.access = LW;
		a.comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_BUF;
		a.addr = va;
		a.buf = b;
		mr = ibv_reg_mr_ex(pd, &a);
	}
	CHECK_MSG(mr != NULL, "%s: %s", ex ? "ibv_reg_mr_ex(ADDR|BUF)" : "ibv_reg_buf_mr",
		  t_errname(errno));
	return mr;
}

/*
 * 3, 4, 5: two MRs on the two pages of one buffer. `dmabuf`: the buffer
 * is DMA-buf backed, so ibv_mr.addr is the offset.
 */
static void multiple_mrs_one_buf(struct ibv_pd *pd, bool ex, bool dmabuf)
{
	uint8_t *base, *want_a, *want_b;
	struct ibv_mr *mr1 = NULL, *mr2 = NULL;
	struct ibv_buf *b;
	uint8_t *va1, *va2;

	base = buf_alloc(pd, 2 * page, &b);
	if (!base)
		return;
	va1 = base;
	va2 = base + page;
	mr1 = buf_mr(pd, b, va1, page, ex);
	mr2 = buf_mr(pd, b, va2, page, ex);
	want_a = malloc(page);
	want_b = malloc(page);
	if (mr1 && mr2 && CHECK(want_a && want_b)) {
		CHECK_MSG(mr1->lkey != mr2->lkey, "lkeys 0x%x 0x%x", mr1->lkey, mr2->lkey);
		/* the addresses: the VAs registered */
		CHECK(va1 == base && va2 == base + page);
		if (dmabuf) {
			CHECK_MSG(mr1->addr == NULL, "mr1->addr %p", mr1->addr);
			CHECK_MSG(mr2->addr == (void *)(uintptr_t)page, "mr2->addr %p", mr2->addr);
		} else {
			CHECK_MSG(mr1->addr == base, "mr1->addr %p", mr1->addr);
			CHECK_MSG(mr2->addr == base + page, "mr2->addr %p", mr2->addr);
		}
		CHECK(mr1->length == page && mr2->length == page);
		/* CPU writes through each MR's range, then reads both back */
		memset(want_a, 'a', page);
		memset(want_b, 'b', page);
		memcpy(va1, want_a, page);
		memcpy(va2, want_b, page);
		CHECK(!memcmp(va1, want_a, page));
		CHECK(!memcmp(va2, want_b, page));
	}
	free(want_a);
	free(want_b);
	if (mr1)
		CHECK_RET(ibv_dereg_mr(mr1), 0);
	if (mr2)
		CHECK_RET(ibv_dereg_mr(mr2), 0);
	ibv_free_buf(b);
}

/* 3 */
static void test_multiple_mrs_one_buf_plain_pd_reg_buf_mr(const struct run *r)
{
	struct ibv_pd *pd;

	ucase(r, "test_multiple_mrs_one_buf_plain_pd_reg_buf_mr");
	pd = get_pd(r);
	if (!pd)
		return;
	multiple_mrs_one_buf(pd, false, false);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

/* 4 */
static void test_multiple_mrs_one_buf_plain_pd_reg_mr_ex(const struct run *r)
{
	struct ibv_pd *pd;

	ucase(r, "test_multiple_mrs_one_buf_plain_pd_reg_mr_ex");
	pd = get_pd(r);
	if (!pd)
		return;
	multiple_mrs_one_buf(pd, true, false);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

/* 5: ordinary memory on a device without bounce, DMA-buf with it */
static void test_multiple_mrs_one_buf_cc_pd_reg_buf_mr(const struct run *r)
{
	struct cc_pd c;

	ucase(r, "test_multiple_mrs_one_buf_cc_pd_reg_buf_mr");
	if (!cc_pd_alloc(r, &c))
		return;
	multiple_mrs_one_buf(c.pd, false, r->bounce);
	cc_pd_free(&c);
}

/* Register [va, +len) of `b` on `pd` and expect EINVAL. */
static void reg_fails_einval(struct ibv_pd *pd, struct ibv_buf *b, uint8_t *va, size_t len)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_buf_mr(pd, b, va, len, LW);
	CHECK_MSG(!mr && errno == EINVAL, "want NULL/EINVAL, got %s/%s", mr ? "an MR" : "NULL",
		  t_errname(errno));
	if (mr)
		ibv_dereg_mr(mr);
}

/* 6 */
static void test_buf_reg_wrong_allocating_pd_fails_plain_pd(const struct run *r)
{
	struct ibv_pd *pd_a, *pd_b;
	struct ibv_buf *b;
	uint8_t *p;

	ucase(r, "test_buf_reg_wrong_allocating_pd_fails_plain_pd");
	pd_a = get_pd(r);
	if (!pd_a)
		return;
	pd_b = ibv_alloc_pd(r->ctx);
	p = buf_alloc(pd_a, page, &b);
	if (CHECK(pd_b) && p)
		reg_fails_einval(pd_b, b, p, page);
	if (p)
		ibv_free_buf(b);
	if (pd_b)
		CHECK_RET(ibv_dealloc_pd(pd_b), 0);
	CHECK_RET(ibv_dealloc_pd(pd_a), 0);
}

/* 7 */
static void test_buf_reg_wrong_allocating_pd_fails_cc_pd(const struct run *r)
{
	struct cc_pd c1, c2;
	struct ibv_buf *b;
	uint8_t *p;

	ucase(r, "test_buf_reg_wrong_allocating_pd_fails_cc_pd");
	if (!cc_pd_alloc(r, &c1))
		return;
	if (cc_pd_alloc(r, &c2)) {
		p = buf_alloc(c1.pd, page, &b);
		if (p) {
			reg_fails_einval(c2.pd, b, p, page);
			ibv_free_buf(b);
		}
		cc_pd_free(&c2);
	}
	cc_pd_free(&c1);
}

/* 8-11: a buffer of one page, a registration that does not fit */
static void exceeds(struct ibv_pd *pd, size_t off, size_t len)
{
	struct ibv_buf *b;
	uint8_t *p = buf_alloc(pd, page, &b);

	if (!p)
		return;
	reg_fails_einval(pd, b, p + off, len);
	ibv_free_buf(b);
}

/* 8 */
static void test_buf_reg_length_exceeds_buffer_fails_plain_pd(const struct run *r)
{
	struct ibv_pd *pd;

	ucase(r, "test_buf_reg_length_exceeds_buffer_fails_plain_pd");
	pd = get_pd(r);
	if (!pd)
		return;
	exceeds(pd, 0, 2 * page);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

/* 9 */
static void test_buf_reg_length_exceeds_buffer_fails_cc_pd(const struct run *r)
{
	struct cc_pd c;

	ucase(r, "test_buf_reg_length_exceeds_buffer_fails_cc_pd");
	if (!cc_pd_alloc(r, &c))
		return;
	exceeds(c.pd, 0, 2 * page);
	cc_pd_free(&c);
}

/* 10 */
static void test_buf_reg_offset_length_exceeds_buffer_fails_plain_pd(const struct run *r)
{
	struct ibv_pd *pd;

	ucase(r, "test_buf_reg_offset_length_exceeds_buffer_fails_plain_pd");
	pd = get_pd(r);
	if (!pd)
		return;
	exceeds(pd, page, page);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

/* 11 */
static void test_buf_reg_offset_length_exceeds_buffer_fails_cc_pd(const struct run *r)
{
	struct cc_pd c;

	ucase(r, "test_buf_reg_offset_length_exceeds_buffer_fails_cc_pd");
	if (!cc_pd_alloc(r, &c))
		return;
	exceeds(c.pd, page, page);
	cc_pd_free(&c);
}

/* 12: upstream checks only that it fails; the kernel (and we) say EOPNOTSUPP */
static void test_plain_mr_rejected_on_bounce_device(const struct run *r)
{
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *mem;

	ucase(r, "test_plain_mr_rejected_on_bounce_device");
	if (!r->bounce) {
		up_skip("the device does not report CC_DMA_BOUNCE");
		return;
	}
	pd = ibv_alloc_pd(r->ctx); /* a plain PD on purpose: not get_pd() */
	mem = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (CHECK(pd) && CHECK(mem != MAP_FAILED)) {
		errno = 0;
		mr = ibv_reg_mr(pd, mem, page, LW);
		CHECK_MSG(mr == NULL, "ibv_reg_mr of ordinary memory succeeded");
		CHECK_MSG(mr || errno == EOPNOTSUPP, "errno %s, want EOPNOTSUPP", t_errname(errno));
		if (mr)
			ibv_dereg_mr(mr);
	}
	if (mem != MAP_FAILED)
		munmap(mem, page);
	if (pd)
		CHECK_RET(ibv_dealloc_pd(pd), 0);
}

static void run_set(const struct run *r)
{
	test_buf_export_dmabuf_fd_plain_pd(r);
	test_buf_export_dmabuf_fd_on_bounce_device(r);
	test_multiple_mrs_one_buf_plain_pd_reg_buf_mr(r);
	test_multiple_mrs_one_buf_plain_pd_reg_mr_ex(r);
	test_multiple_mrs_one_buf_cc_pd_reg_buf_mr(r);
	test_buf_reg_wrong_allocating_pd_fails_plain_pd(r);
	test_buf_reg_wrong_allocating_pd_fails_cc_pd(r);
	test_buf_reg_length_exceeds_buffer_fails_plain_pd(r);
	test_buf_reg_length_exceeds_buffer_fails_cc_pd(r);
	test_buf_reg_offset_length_exceeds_buffer_fails_plain_pd(r);
	test_buf_reg_offset_length_exceeds_buffer_fails_cc_pd(r);
	test_plain_mr_rejected_on_bounce_device(r);
}

/* Open device 0 as configured now and learn whether it bounces. */
static bool open_run(struct run *r, bool want_bounce)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device_attr_ex ax;

	r->ctx = NULL;
	if (list && list[0])
		r->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!CHECK_MSG(r->ctx != NULL, "%s: open: %s", r->label, t_errname(errno)))
		return false;
	memset(&ax, 0, sizeof(ax));
	CHECK_RET(ibv_query_device_ex(r->ctx, NULL, &ax), 0);
	r->bounce = ax.device_cap_flags_ex & IBV_DEVICE_CC_DMA_BOUNCE;
	CHECK_MSG(r->bounce == want_bounce, "%s: CC_DMA_BOUNCE is %s", r->label,
		  r->bounce ? "set" : "clear");
	return true;
}

int main(void)
{
	struct run def = {.label = "default device"};
	struct run cc = {.label = "CC bounce, builtin heap"};

	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	unsetenv("SOFTVERBS_CC_HEAP");
	t_start("api_upstream_buf");
	page = (size_t)sysconf(_SC_PAGESIZE);

	up_case("setup: the default device");
	if (open_run(&def, false)) {
		run_set(&def);
		up_case("teardown: the default device");
		CHECK_RET(ibv_close_device(def.ctx), 0);
	}

	up_case("setup: a CC DMA bounce device");
	setenv("SOFTVERBS_CC_DMA_BOUNCE", "1", 1);
	setenv("SOFTVERBS_CC_HEAP", "builtin", 1);
	if (open_run(&cc, true)) {
		run_set(&cc);
		up_case("teardown: the CC DMA bounce device");
		CHECK_RET(ibv_close_device(cc.ctx), 0);
	}
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	unsetenv("SOFTVERBS_CC_HEAP");
	return up_finish();
}
