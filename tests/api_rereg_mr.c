/* SPDX-License-Identifier: MIT */
/*
 * api_rereg_mr: ibv_rereg_mr (man ibv_rereg_mr, rdma-core semantics).
 *
 * Core input errors (IBV_REREG_MR_ERR_INPUT: unsupported flags, a new
 * translation without address or length, access bits without
 * IBV_REREG_MR_CHANGE_ACCESS, an MR that is not address-based), device
 * errors (IBV_REREG_MR_ERR_CMD with errno), and
 * each change alone and together: the MR fields, the keys (kept), the PD
 * reference moving from the old PD to the new one, and that a failed
 * call leaves the MR intact and usable.
 */
#include "harness.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ

#define TRANS IBV_REREG_MR_CHANGE_TRANSLATION
#define CPD IBV_REREG_MR_CHANGE_PD
#define ACC IBV_REREG_MR_CHANGE_ACCESS

static struct ibv_context *ctx;
static struct ibv_pd *pd, *pd2;
static size_t page;
static uint8_t *mem; /* 4 pages */

/* ibv_rereg_mr must return `want` and, when it fails, set errno `eno`. */
#define CHECK_REREG(call, want, eno)                                                               \
	do {                                                                                       \
		int r_;                                                                            \
		errno = 0;                                                                         \
		r_ = (call);                                                                       \
		CHECK_MSG(r_ == (want) && (!(want) || errno == (eno)),                             \
			  "%s: got %d/%s, want %d/%s", #call, r_, t_errname(errno), (want),        \
			  t_errname(eno));                                                         \
	} while (0)

/* The MR is unchanged: same fields and keys as recorded. */
static void check_same(const struct ibv_mr *mr, const struct ibv_mr *was)
{
	CHECK(mr->pd == was->pd);
	CHECK(mr->addr == was->addr);
	CHECK_EQ_INT(mr->length, was->length);
	CHECK_EQ_INT(mr->lkey, was->lkey);
	CHECK_EQ_INT(mr->rkey, was->rkey);
	CHECK(mr->context == was->context);
}

static void test_input_errors(void)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, mem, page, LW);
	struct ibv_mr was;
	int fd;

	t_case("input errors: IBV_REREG_MR_ERR_INPUT, MR unchanged");
	if (!CHECK(mr))
		return;
	was = *mr;
	CHECK_REREG(ibv_rereg_mr(mr, 1 << 3, pd, mem, page, LW), IBV_REREG_MR_ERR_INPUT, EINVAL);
	CHECK_REREG(ibv_rereg_mr(mr, ACC | (1 << 8), pd, mem, page, LW), IBV_REREG_MR_ERR_INPUT,
		    EINVAL);
	CHECK_REREG(ibv_rereg_mr(mr, -1, pd, mem, page, LW), IBV_REREG_MR_ERR_INPUT, EINVAL);
	CHECK_REREG(ibv_rereg_mr(mr, TRANS, pd, mem, 0, LW), IBV_REREG_MR_ERR_INPUT, EINVAL);
	CHECK_REREG(ibv_rereg_mr(mr, TRANS | ACC, pd, mem, 0, LW), IBV_REREG_MR_ERR_INPUT, EINVAL);
	CHECK_REREG(ibv_rereg_mr(mr, TRANS, pd, NULL, page, LW), IBV_REREG_MR_ERR_INPUT, EINVAL);
	CHECK_REREG(ibv_rereg_mr(NULL, ACC, pd, mem, page, LW), IBV_REREG_MR_ERR_INPUT, EINVAL);
	/* access bits count only with CHANGE_ACCESS: rdma-core refuses them otherwise */
	CHECK_REREG(ibv_rereg_mr(mr, CPD, pd2, NULL, 0, LW), IBV_REREG_MR_ERR_INPUT, EINVAL);
	CHECK_REREG(ibv_rereg_mr(mr, TRANS, pd, mem + page, page, LW), IBV_REREG_MR_ERR_INPUT,
		    EINVAL);
	CHECK_REREG(ibv_rereg_mr(mr, TRANS | CPD, pd2, mem + page, page, RR),
		    IBV_REREG_MR_ERR_INPUT, EINVAL);
	CHECK_REREG(ibv_rereg_mr(mr, 0, pd, mem, page, LW), IBV_REREG_MR_ERR_INPUT, EINVAL);
	check_same(mr, &was);
	/* the MR stayed valid: the PD reference did not move, the MR still re-registers */
	CHECK_RET(ibv_dealloc_pd(pd2), 0);
	pd2 = ibv_alloc_pd(ctx);
	CHECK(pd2);
	/* without TRANSLATION, addr and length are not looked at */
	CHECK_REREG(ibv_rereg_mr(mr, ACC, NULL, NULL, 0, LW | RW), 0, 0);
	was = *mr;
	check_same(mr, &was);
	CHECK_RET(ibv_dereg_mr(mr), 0);

	t_case("a DMA-buf MR cannot be re-registered");
	fd = memfd_create("api_rereg_mr", MFD_CLOEXEC);
	if (CHECK(fd >= 0) && CHECK_EQ_INT(ftruncate(fd, (off_t)page), 0)) {
		mr = ibv_reg_dmabuf_mr(pd, 0, page, 0, fd, LW);
		if (CHECK(mr)) {
			was = *mr;
			CHECK_REREG(ibv_rereg_mr(mr, ACC, pd, NULL, 0, LW | RW),
				    IBV_REREG_MR_ERR_INPUT, EINVAL);
			CHECK_REREG(ibv_rereg_mr(mr, TRANS, pd, mem, page, 0),
				    IBV_REREG_MR_ERR_INPUT, EINVAL);
			check_same(mr, &was);
			CHECK_RET(ibv_dereg_mr(mr), 0);
		}
	}
	if (fd >= 0)
		close(fd);
}

static void test_device_errors(void)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, mem, page, LW | RR);
	struct ibv_mr was;

	t_case("device errors: IBV_REREG_MR_ERR_CMD with errno, MR unchanged");
	if (!CHECK(mr))
		return;
	was = *mr;
	CHECK_REREG(ibv_rereg_mr(mr, 0, pd, mem, page, 0), IBV_REREG_MR_ERR_CMD, EINVAL);
	CHECK_REREG(ibv_rereg_mr(mr, ACC, pd, NULL, 0, LW | IBV_ACCESS_FLUSH_PERSISTENT),
		    IBV_REREG_MR_ERR_CMD, EINVAL); /* not persistent memory */
	CHECK_REREG(ibv_rereg_mr(mr, ACC, pd, NULL, 0, RW), IBV_REREG_MR_ERR_CMD, EINVAL);
	CHECK_REREG(ibv_rereg_mr(mr, ACC, pd, NULL, 0, 1 << 12), IBV_REREG_MR_ERR_CMD, EINVAL);
	CHECK_REREG(ibv_rereg_mr(mr, ACC, pd, NULL, 0, LW | IBV_ACCESS_ON_DEMAND),
		    IBV_REREG_MR_ERR_CMD, EOPNOTSUPP);
	CHECK_REREG(ibv_rereg_mr(mr, CPD, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_CMD, EINVAL);
	{
		/* a PD of another context, even on the same device */
		struct ibv_context *ctx2 = ibv_open_device(ctx->device);
		struct ibv_pd *other = ctx2 ? ibv_alloc_pd(ctx2) : NULL;

		if (CHECK(other)) {
			CHECK_REREG(ibv_rereg_mr(mr, CPD, other, NULL, 0, 0), IBV_REREG_MR_ERR_CMD,
				    EINVAL);
			CHECK_RET(ibv_dealloc_pd(other), 0);
		}
		if (ctx2)
			CHECK_RET(ibv_close_device(ctx2), 0);
	}
	CHECK_REREG(ibv_rereg_mr(mr, TRANS, pd, (void *)(uintptr_t)page, page, 0),
		    IBV_REREG_MR_ERR_CMD, EFAULT);
	CHECK_REREG(ibv_rereg_mr(mr, TRANS, pd, mem, SIZE_MAX, 0), IBV_REREG_MR_ERR_CMD, EINVAL);
	/* all-or-nothing: a bad access with a good PD and translation changes nothing */
	CHECK_REREG(ibv_rereg_mr(mr, TRANS | CPD | ACC, pd2, mem + page, page, RW),
		    IBV_REREG_MR_ERR_CMD, EINVAL);
	CHECK_REREG(ibv_rereg_mr(mr, TRANS | CPD | ACC, pd2, (void *)(uintptr_t)page, page, LW),
		    IBV_REREG_MR_ERR_CMD, EFAULT);
	check_same(mr, &was);
	/* the PD reference did not move */
	CHECK_RET(ibv_dealloc_pd(pd2), 0);
	pd2 = ibv_alloc_pd(ctx);
	CHECK(pd2);
	/* and the MR still works */
	CHECK_REREG(ibv_rereg_mr(mr, ACC, pd, NULL, 0, LW), 0, 0);
	CHECK_RET(ibv_dereg_mr(mr), 0);
}

static void test_changes(void)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, mem, page, LW);
	uint32_t lkey;

	t_case("CHANGE_ACCESS");
	if (!CHECK(mr))
		return;
	lkey = mr->lkey;
	CHECK_REREG(ibv_rereg_mr(mr, ACC, NULL, NULL, 0, LW | RW | RR), 0, 0);
	CHECK_REREG(ibv_rereg_mr(mr, ACC, NULL, NULL, 0, 0), 0, 0);
	CHECK_REREG(ibv_rereg_mr(mr, ACC, NULL, NULL, 0, RR | IBV_ACCESS_RELAXED_ORDERING), 0, 0);
	CHECK(mr->pd == pd && mr->addr == mem && mr->length == page);
	CHECK_EQ_INT(mr->lkey, lkey);

	t_case("CHANGE_TRANSLATION");
	CHECK_REREG(ibv_rereg_mr(mr, TRANS, NULL, mem + page + 8, 2 * page, 0), 0, 0);
	CHECK(mr->addr == mem + page + 8);
	CHECK_EQ_INT(mr->length, 2 * page);
	CHECK(mr->pd == pd);
	CHECK_EQ_INT(mr->lkey, lkey);
	CHECK_EQ_INT(mr->rkey, lkey);
	/* the old range may go away now */
	CHECK_REREG(ibv_rereg_mr(mr, TRANS, NULL, mem + 3 * page, page, 0), 0, 0);
	CHECK(mr->addr == mem + 3 * page && mr->length == page);

	t_case("CHANGE_PD moves the PD reference");
	CHECK_REREG(ibv_rereg_mr(mr, CPD, pd2, NULL, 0, 0), 0, 0);
	CHECK(mr->pd == pd2);
	CHECK(mr->addr == mem + 3 * page && mr->length == page);
	CHECK_RET(ibv_dealloc_pd(pd2), EBUSY);
	{
		/* pd is free of this MR now: a throwaway PD proves the count moved */
		struct ibv_pd *tmp = ibv_alloc_pd(ctx);
		struct ibv_mr *m2 = tmp ? ibv_reg_mr(tmp, mem, page, LW) : NULL;

		if (CHECK(tmp && m2)) {
			CHECK_REREG(ibv_rereg_mr(m2, CPD, pd2, NULL, 0, 0), 0, 0);
			CHECK_RET(ibv_dealloc_pd(tmp), 0);
			CHECK_REREG(ibv_rereg_mr(m2, CPD, pd, NULL, 0, 0), 0, 0);
			CHECK_RET(ibv_dereg_mr(m2), 0);
		}
	}

	t_case("all three at once, and onto a parent domain");
	CHECK_REREG(ibv_rereg_mr(mr, TRANS | CPD | ACC, pd, mem, 4 * page, LW | RW), 0, 0);
	CHECK(mr->pd == pd && mr->addr == mem && mr->length == 4 * page);
	CHECK_EQ_INT(mr->lkey, lkey);
	CHECK_RET(ibv_dealloc_pd(pd2), 0);
	pd2 = ibv_alloc_pd(ctx);
	CHECK(pd2);
	{
		struct ibv_parent_domain_init_attr pa = {.pd = pd2};
		struct ibv_pd *parent = pd2 ? ibv_alloc_parent_domain(ctx, &pa) : NULL;

		if (CHECK(parent)) {
			CHECK_REREG(ibv_rereg_mr(mr, CPD, parent, NULL, 0, 0), 0, 0);
			CHECK(mr->pd == parent);
			CHECK_RET(ibv_dealloc_pd(parent), 0); /* the MR counts on pd2, not on it */
			CHECK_RET(ibv_dealloc_pd(pd2), EBUSY);
			CHECK_REREG(ibv_rereg_mr(mr, CPD, pd, NULL, 0, 0), 0, 0);
		}
	}
	CHECK_RET(ibv_dereg_mr(mr), 0);
}

int main(void)
{
	t_start("api_rereg_mr");
	page = (size_t)sysconf(_SC_PAGESIZE);
	mem = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		printf("Bail out! mmap: %s\n", t_errname(errno));
		return 1;
	}
	t_open_first(&ctx);
	pd = ibv_alloc_pd(ctx);
	pd2 = ibv_alloc_pd(ctx);
	if (!pd || !pd2) {
		printf("Bail out! ibv_alloc_pd: %s\n", t_errname(errno));
		return 1;
	}
	test_input_errors();
	test_device_errors();
	test_changes();

	t_case("teardown");
	CHECK_RET(ibv_dealloc_pd(pd2), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	munmap(mem, 4 * page);
	return t_finish();
}
