/* SPDX-License-Identifier: MIT */
/*
 * api_dmabuf_mr: ibv_reg_dmabuf_mr (docs/seed-apis.md 1.6) on memfds and
 * other fds: the MR fields (mr->addr is the offset), every errno (bad
 * fd, page offsets, access narrowing, range), read-only fds, and an fd
 * the caller closes right after registering. The data itself is checked
 * white-box in unit_dmabuf_mr.
 */
#include "harness.h"

#include <fcntl.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ
#define RA IBV_ACCESS_REMOTE_ATOMIC

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static size_t page;

static int check_mr(struct ibv_mr *mr, uint64_t off, size_t len, const char *what)
{
	if (!CHECK_MSG(mr != NULL, "%s: NULL, errno %s", what, t_errname(errno)))
		return 0;
	CHECK_MSG(mr->context == ctx && mr->pd == pd, "%s: context/pd", what);
	CHECK_MSG(mr->addr == (void *)(uintptr_t)off, "%s: addr %p want offset 0x%llx", what,
		  mr->addr, (unsigned long long)off);
	CHECK_MSG(mr->length == len, "%s: length %zu want %zu", what, mr->length, len);
	CHECK_MSG(mr->lkey && mr->lkey == mr->rkey, "%s: keys", what);
	return 1;
}

static void dereg(struct ibv_mr *mr)
{
	if (mr)
		CHECK_RET(ibv_dereg_mr(mr), 0);
}

static int new_memfd(size_t size)
{
	int fd = memfd_create("api_dmabuf_mr", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, (off_t)size)) {
		printf("Bail out! memfd: %s\n", t_errname(errno));
		exit(1);
	}
	return fd;
}

static void test_success(int fd)
{
	static const int access[] = {
		0,
		LW,
		RR,
		LW | RW,
		LW | RA,
		LW | RW | RR | RA,
		LW | IBV_ACCESS_RELAXED_ORDERING,
		LW | RW | RR | RA | IBV_ACCESS_RELAXED_ORDERING,
	};
	struct ibv_mr *mr;
	size_t i;

	t_case("registration on a memfd");
	mr = ibv_reg_dmabuf_mr(pd, 0, 4 * page, 0, fd, LW | RW | RR);
	if (check_mr(mr, 0, 4 * page, "whole file"))
		dereg(mr);
	mr = ibv_reg_dmabuf_mr(pd, page, 2 * page, 0x7f0000000000ULL, fd, LW);
	if (check_mr(mr, page, 2 * page, "middle pages"))
		dereg(mr);
	mr = ibv_reg_dmabuf_mr(pd, 3 * page + 100, page - 100, 100, fd, LW);
	if (check_mr(mr, 3 * page + 100, page - 100, "unaligned tail"))
		dereg(mr);
	mr = ibv_reg_dmabuf_mr(pd, 5, 1, 0x1005, fd, 0);
	if (check_mr(mr, 5, 1, "one byte"))
		dereg(mr);
	for (i = 0; i < sizeof(access) / sizeof(access[0]); i++) {
		mr = ibv_reg_dmabuf_mr(pd, 0, page, 0, fd, access[i]);
		if (check_mr(mr, 0, page, "allowed access"))
			dereg(mr);
		else
			printf("# access 0x%x\n", access[i]);
	}

	t_case("two MRs on one fd get different keys");
	{
		struct ibv_mr *a = ibv_reg_dmabuf_mr(pd, 0, page, 0, fd, LW);
		struct ibv_mr *b = ibv_reg_dmabuf_mr(pd, 0, page, 0, fd, LW);

		CHECK(a && b && a->lkey != b->lkey);
		dereg(a);
		dereg(b);
	}
}

static void test_errors(int fd)
{
	static const int bad_access[] = {
		IBV_ACCESS_MW_BIND,
		IBV_ACCESS_ZERO_BASED,
		IBV_ACCESS_ON_DEMAND,
		LW | IBV_ACCESS_ON_DEMAND,
		LW | IBV_ACCESS_HUGETLB,
		LW | IBV_ACCESS_FLUSH_GLOBAL,
		LW | IBV_ACCESS_FLUSH_PERSISTENT,
		/* optional bits other than relaxed ordering: the kernel's DMA-buf method refuses
		   them */
		LW | (int)IBV_ACCESS_OPTIONAL_RANGE,
		LW | (1 << 21),
		LW | (1 << 29),
		RW,
		RA,
		RR | RW,
		LW | (1 << 12),
	};
	size_t i;
	int closed, p[2];

	t_case("bad fd: EBADF");
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 0, -1, LW), EBADF);
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 0, -100, LW), EBADF);
	closed = dup(fd);
	close(closed);
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 0, closed, LW), EBADF);
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 0, 1 << 28, LW), EBADF);

	t_case("page offsets of offset and iova differ: EINVAL");
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 1, page, 0, fd, LW), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 8, fd, LW), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, page + 8, 8, page + 16, fd, LW), EINVAL);
	/* checked before the fd */
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 1, page, 0, -1, LW), EINVAL);

	t_case("access narrowing: EINVAL");
	for (i = 0; i < sizeof(bad_access) / sizeof(bad_access[0]); i++)
		if (!CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 0, fd, bad_access[i]), EINVAL))
			printf("# access 0x%x\n", bad_access[i]);
	/* checked before the fd */
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 0, -1, IBV_ACCESS_MW_BIND), EINVAL);

	t_case("range: EINVAL");
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, 0, 0, fd, LW), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, 4 * page + 1, 0, fd, LW), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 4 * page, 1, 0, fd, LW), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 3 * page, 2 * page, 0, fd, LW), EINVAL);
	CHECK_ERRNO_PTR(
		ibv_reg_dmabuf_mr(pd, UINT64_MAX & ~(uint64_t)(page - 1), 2 * page, 0, fd, LW),
		EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, SIZE_MAX, 0, fd, LW), EINVAL);
	/* [iova, +length) may end at 2^64 but not wrap */
	CHECK_ERRNO_PTR(
		ibv_reg_dmabuf_mr(pd, 0, 2 * page, UINT64_MAX & ~(uint64_t)(page - 1), fd, LW),
		EINVAL);
	{
		struct ibv_mr *mr =
			ibv_reg_dmabuf_mr(pd, 0, page, UINT64_MAX & ~(uint64_t)(page - 1), fd, LW);

		if (check_mr(mr, 0, page, "iova range ending at 2^64"))
			dereg(mr);
	}
	CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(NULL, 0, page, 0, fd, LW), EINVAL);

	t_case("fd that cannot be mapped: mmap's errno");
	if (CHECK_EQ_INT(pipe(p), 0)) {
		/* read-only end: EACCES with write access, else the pipe's ENODEV */
		CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 0, p[0], LW), EACCES);
		CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 0, p[0], RR), ENODEV);
		close(p[0]);
		close(p[1]);
	}
	{
		int efd = eventfd(0, EFD_CLOEXEC);

		if (CHECK(efd >= 0)) {
			CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 0, efd, LW), ENODEV);
			close(efd);
		}
	}
}

static void test_fd_modes(int fd)
{
	char path[64];
	struct ibv_mr *mr;
	int ro, wo;

	t_case("read-only fd: read-only access only");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	wo = open(path, O_WRONLY | O_CLOEXEC);
	if (CHECK(ro >= 0)) {
		mr = ibv_reg_dmabuf_mr(pd, 0, page, 0, ro, RR);
		if (check_mr(mr, 0, page, "read-only fd, RR"))
			dereg(mr);
		mr = ibv_reg_dmabuf_mr(pd, 0, page, 0, ro, 0);
		if (check_mr(mr, 0, page, "read-only fd, no access"))
			dereg(mr);
		CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 0, ro, LW), EACCES);
		CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 0, ro, LW | RW), EACCES);
		close(ro);
	}
	if (CHECK(wo >= 0)) {
		CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 0, wo, LW), EACCES);
		CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, 0, page, 0, wo, 0), EACCES);
		close(wo);
	}

	t_case("the caller may close the fd after registering");
	{
		int tmp = new_memfd(2 * page);
		int fds_before;

		mr = ibv_reg_dmabuf_mr(pd, page, page, 0, tmp, LW | RW);
		fds_before = t_count_fds();
		close(tmp);
		CHECK_EQ_INT(t_count_fds(), fds_before - 1);
		if (check_mr(mr, page, page, "after close")) {
			CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
			dereg(mr); /* releases the library's duplicate: the harness sees no fd leak
				    */
			CHECK_EQ_INT(t_count_fds(), fds_before - 2);
		}
	}

	t_case("a regular file works too");
	{
		FILE *f = tmpfile();

		if (CHECK(f) && CHECK_EQ_INT(ftruncate(fileno(f), (off_t)(2 * page)), 0)) {
			mr = ibv_reg_dmabuf_mr(pd, page, page, 0, fileno(f), LW);
			if (check_mr(mr, page, page, "tmpfile"))
				dereg(mr);
			CHECK_ERRNO_PTR(ibv_reg_dmabuf_mr(pd, page, page + 1, 0, fileno(f), LW),
					EINVAL);
		}
		if (f)
			fclose(f);
	}
}

int main(void)
{
	int fd;

	t_start("api_dmabuf_mr");
	page = (size_t)sysconf(_SC_PAGESIZE);
	fd = new_memfd(4 * page);
	t_open_first(&ctx);
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		printf("Bail out! ibv_alloc_pd: %s\n", t_errname(errno));
		return 1;
	}
	test_success(fd);
	test_errors(fd);
	test_fd_modes(fd);

	t_case("teardown");
	close(fd);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	return t_finish();
}
