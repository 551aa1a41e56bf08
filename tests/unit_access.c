/* SPDX-License-Identifier: MIT */
/*
 * unit_access: the registration access rules (sw_access_check) and the
 * per-use range/permission check (sw_mr_check_range), including every
 * overflow corner of the range arithmetic.
 */
#include "harness.h"

#include <stdint.h>

#include "sw/ctrl.h"

#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ
#define RA IBV_ACCESS_REMOTE_ATOMIC
#define RO IBV_ACCESS_RELAXED_ORDERING

struct acase {
	int access;
	int want_va, want_fd; /* 0 or -errno */
};

static const struct acase cases[] = {
	{0, 0, 0},
	{LW, 0, 0},
	{RR, 0, 0},
	{LW | RW, 0, 0},
	{LW | RA, 0, 0},
	{LW | RW | RR | RA, 0, 0},
	{RW, -EINVAL, -EINVAL},
	{RA, -EINVAL, -EINVAL},
	{RW | RA | RR, -EINVAL, -EINVAL},
	/* relaxed ordering on both paths; the other optional bits on the address path only */
	{RO, 0, 0},
	{LW | RO, 0, 0},
	{(int)IBV_ACCESS_OPTIONAL_RANGE, 0, -EINVAL},
	{LW | (1 << 25), 0, -EINVAL},
	{LW | (1 << 29), 0, -EINVAL},
	/* known bits that the fd path does not allow; the address path ignores them */
	{IBV_ACCESS_MW_BIND, 0, -EINVAL},
	{IBV_ACCESS_ZERO_BASED, 0, -EINVAL},
	{LW | IBV_ACCESS_HUGETLB, 0, -EINVAL},
	/* flush: the device reports the flush capabilities (the fd path refuses them) */
	{LW | IBV_ACCESS_FLUSH_GLOBAL, 0, -EINVAL},
	{LW | IBV_ACCESS_FLUSH_PERSISTENT, 0, -EINVAL},
	{RW | IBV_ACCESS_FLUSH_GLOBAL, -EINVAL, -EINVAL},
	{LW | (1 << 10) | IBV_ACCESS_FLUSH_GLOBAL, -EINVAL, -EINVAL},
	/* on-demand paging by address (explicit ODP); the fd path refuses it */
	{IBV_ACCESS_ON_DEMAND, 0, -EINVAL},
	{LW | IBV_ACCESS_ON_DEMAND, 0, -EINVAL},
	{RW | IBV_ACCESS_ON_DEMAND, -EINVAL, -EINVAL},
	/* unknown bits between the known ones and the optional range */
	{1 << 10, -EINVAL, -EINVAL},
	{LW | (1 << 19), -EINVAL, -EINVAL},
	{(int)(1U << 30), -EINVAL, -EINVAL},
	{(int)(1U << 31), -EINVAL, -EINVAL},
	{-1, -EINVAL, -EINVAL},
};

static void test_access_check(void)
{
	size_t i;

	t_case("sw_access_check");
	for (i = 0; i < SV_ARRAY_SIZE(cases); i++) {
		const struct acase *c = &cases[i];
		int va = sw_access_check(c->access, false);
		int fd = sw_access_check(c->access, true);

		CHECK_MSG(va == c->want_va, "access 0x%x va path: got %d want %d", c->access, va,
			  c->want_va);
		CHECK_MSG(fd == c->want_fd, "access 0x%x fd path: got %d want %d", c->access, fd,
			  c->want_fd);
	}
}

static void test_range(void)
{
	struct sw_mr mr;

	t_case("sw_mr_check_range bounds");
	memset(&mr, 0, sizeof(mr));
	mr.iova = 0x10000;
	mr.length = 0x1000;
	mr.access = LW | RR;

	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10000, 0x1000, 0), 0);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10000, 0, 0), 0);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x11000, 0, 0), 0); /* empty range at the end */
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10fff, 1, 0), 0);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10800, 0x800, 0), 0);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0xffff, 1, 0), -EINVAL);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10000, 0x1001, 0), -EINVAL);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10001, 0x1000, 0), -EINVAL);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x11000, 1, 0), -EINVAL);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x11001, 0, 0), -EINVAL);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0, 0, 0), -EINVAL);

	t_case("sw_mr_check_range overflow");
	/* iova + len wraps to inside the MR: must not pass */
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10800, UINT64_MAX - 0x7ff + 0x10800, 0), -EINVAL);
	CHECK_EQ_INT(sw_mr_check_range(&mr, UINT64_MAX, 0x10001, 0), -EINVAL);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10000, UINT64_MAX, 0), -EINVAL);
	CHECK_EQ_INT(sw_mr_check_range(&mr, UINT64_MAX, UINT64_MAX, 0), -EINVAL);

	/* an MR at the very top of the address space */
	mr.iova = UINT64_MAX - 0xfff;
	mr.length = 0x1000;
	CHECK_EQ_INT(sw_mr_check_range(&mr, UINT64_MAX - 0xfff, 0x1000, 0), 0);
	CHECK_EQ_INT(sw_mr_check_range(&mr, UINT64_MAX, 1, 0), 0);
	CHECK_EQ_INT(sw_mr_check_range(&mr, UINT64_MAX, 2, 0), -EINVAL);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0, 1, 0), -EINVAL);

	/* the whole address space */
	mr.iova = 0;
	mr.length = UINT64_MAX;
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0, UINT64_MAX, 0), 0);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 1, UINT64_MAX, 0), -EINVAL);
	CHECK_EQ_INT(sw_mr_check_range(&mr, UINT64_MAX - 1, 1, 0), 0);

	t_case("sw_mr_check_range permissions");
	mr.iova = 0x10000;
	mr.length = 0x1000;
	mr.access = LW | RR;
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10000, 8, LW), 0);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10000, 8, RR), 0);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10000, 8, LW | RR), 0);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10000, 8, RW), -EACCES);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10000, 8, RA), -EACCES);
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10000, 8, LW | RW), -EACCES);
	/* range errors win over permission errors */
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x20000, 8, RW), -EINVAL);
	mr.access = 0;
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10000, 8, 0), 0); /* local read always allowed */
	CHECK_EQ_INT(sw_mr_check_range(&mr, 0x10000, 8, LW), -EACCES);
}

int main(void)
{
	t_start("unit_access");
	test_access_check();
	test_range();
	return t_finish();
}
