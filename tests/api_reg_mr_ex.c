/* SPDX-License-Identifier: MIT */
/*
 * api_reg_mr_ex: ibv_reg_mr_ex and ibv_reg_buf_mr (docs/seed-apis.md 1.4, 1.5).
 *
 * Every comp_mask rule (valid final masks, missing and conflicting bits,
 * unknown bits ignored, fields used only when their bit is set), page
 * offsets, fd-path access narrowing, the caller's attr left untouched,
 * mr->addr for the fd path, every BUF translation rule with hand-built
 * struct ibv_buf (the internal layout of src/core/buf.h, which is the
 * library ABI of docs/seed-apis.md 2), parent domain vs base PD, and the CC
 * DMA bounce device (address paths EOPNOTSUPP, fd paths fine).
 */
#include "harness.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../src/core/buf.h"

#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ
#define RA IBV_ACCESS_REMOTE_ATOMIC

#define M_IOVA IBV_REG_MR_MASK_IOVA
#define M_ADDR IBV_REG_MR_MASK_ADDR
#define M_FD IBV_REG_MR_MASK_FD
#define M_OFF IBV_REG_MR_MASK_FD_OFFSET
#define M_DMAH IBV_REG_MR_MASK_DMAH
#define M_BUF IBV_REG_MR_MASK_BUF

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static size_t page;
static uint8_t *mem; /* 4 private pages */
static int mfd = -1; /* memfd of 4 pages */

static int check_mr(struct ibv_mr *mr, struct ibv_pd *want_pd, void *addr, size_t len,
		    const char *what)
{
	if (!CHECK_MSG(mr != NULL, "%s: NULL, errno %s", what, t_errname(errno)))
		return 0;
	CHECK_MSG(mr->context == want_pd->context, "%s: context", what);
	CHECK_MSG(mr->pd == want_pd, "%s: pd", what);
	CHECK_MSG(mr->addr == addr, "%s: addr %p want %p", what, mr->addr, addr);
	CHECK_MSG(mr->length == len, "%s: length %zu want %zu", what, mr->length, len);
	CHECK_MSG(mr->lkey && mr->lkey == mr->rkey, "%s: keys 0x%x/0x%x", what, mr->lkey, mr->rkey);
	return 1;
}

static void dereg(struct ibv_mr *mr)
{
	if (mr)
		CHECK_RET(ibv_dereg_mr(mr), 0);
}

/* Every member equal (padding aside, which a struct copy need not keep). */
static bool same_attr(const struct ibv_mr_init_attr *x, const struct ibv_mr_init_attr *y)
{
	return x->length == y->length && x->access == y->access && x->comp_mask == y->comp_mask &&
	       x->iova == y->iova && x->addr == y->addr && x->fd == y->fd &&
	       x->fd_offset == y->fd_offset && x->dmah == y->dmah && x->buf == y->buf;
}

/* ibv_reg_mr_ex on *a; the caller's struct must come back unchanged, byte for byte. */
static struct ibv_mr *reg_ex(struct ibv_pd *p, struct ibv_mr_init_attr *a)
{
	struct ibv_mr_init_attr before, *in = malloc(sizeof(*in));
	struct ibv_mr *mr;
	int e;

	if (!in) {
		printf("Bail out! out of memory\n");
		exit(1);
	}
	/* a fully initialised copy, so that memcmp also covers the padding */
	memset(in, 0x5c, sizeof(*in));
	in->length = a->length;
	in->access = a->access;
	in->comp_mask = a->comp_mask;
	in->iova = a->iova;
	in->addr = a->addr;
	in->fd = a->fd;
	in->fd_offset = a->fd_offset;
	in->dmah = a->dmah;
	in->buf = a->buf;
	memcpy(&before, in, sizeof(before));
	errno = 0;
	mr = ibv_reg_mr_ex(p, in);
	e = errno;
	CHECK_MSG(!memcmp(&before, in, sizeof(*in)) && same_attr(in, a),
		  "ibv_reg_mr_ex modified the caller's attr");
	free(in);
	errno = e;
	return mr;
}

/* Expect NULL with errno `eno` from reg_ex. */
#define CHECK_EX_FAILS(p, a, eno) CHECK_ERRNO_PTR(reg_ex((p), (a)), (eno))

static struct ibv_mr_init_attr va_attr(void *addr, size_t len, int access)
{
	struct ibv_mr_init_attr a;

	memset(&a, 0, sizeof(a));
	a.length = len;
	a.access = access;
	a.comp_mask = M_ADDR;
	a.addr = addr;
	return a;
}

static struct ibv_mr_init_attr fd_attr(int fd, uint64_t off, size_t len, uint64_t iova, int access)
{
	struct ibv_mr_init_attr a;

	memset(&a, 0, sizeof(a));
	a.length = len;
	a.access = access;
	a.comp_mask = M_FD | M_OFF | M_IOVA;
	a.fd = fd;
	a.fd_offset = off;
	a.iova = iova;
	return a;
}

static void test_masks(void)
{
	struct ibv_mr_init_attr a;
	struct ibv_mr *mr;

	t_case("valid masks: ADDR, ADDR|IOVA, FD|FD_OFFSET|IOVA");
	a = va_attr(mem, 2 * page, LW);
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, mem, 2 * page, "ADDR"))
		dereg(mr);
	a = va_attr(mem + 7, 100, LW | RW);
	a.comp_mask |= M_IOVA;
	a.iova = 0x40000007;
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, mem + 7, 100, "ADDR|IOVA"))
		dereg(mr);
	a = fd_attr(mfd, page, 2 * page, 0x1000, LW | RR);
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, (void *)(uintptr_t)page, 2 * page, "FD|FD_OFFSET|IOVA"))
		dereg(mr);
	a = fd_attr(mfd, 0, 4 * page, (uintptr_t)mem, LW);
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, NULL, 4 * page, "fd path at offset 0: mr->addr is the offset"))
		dereg(mr);
	a = fd_attr(mfd, 3 * page + 5, 10, 5, LW);
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, (void *)(uintptr_t)(3 * page + 5), 10, "fd path unaligned offset"))
		dereg(mr);

	t_case("unknown comp_mask bits are ignored");
	a = va_attr(mem, page, LW);
	a.comp_mask |= 1ULL << 6 | 1ULL << 40 | 1ULL << 63;
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, mem, page, "ADDR|unknown"))
		dereg(mr);
	a = fd_attr(mfd, 0, page, 0, LW);
	a.comp_mask |= 1ULL << 7;
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, NULL, page, "FD|FD_OFFSET|IOVA|unknown"))
		dereg(mr);

	t_case("fields without their bit are not used");
	a = va_attr(mem, page, LW);
	a.iova = 0x123; /* would be a page-offset mismatch */
	a.fd = 12345; /* not an fd */
	a.fd_offset = 77;
	a.dmah = (struct ibv_dmah *)(uintptr_t)0x10; /* would crash if read */
	a.buf = (struct ibv_buf *)(uintptr_t)0x20;
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, mem, page, "ADDR with garbage elsewhere"))
		dereg(mr);
	a = fd_attr(mfd, page, page, 0, LW);
	a.addr = (void *)(uintptr_t)0x5; /* ADDR not set: mr->addr must be the offset */
	a.buf = (struct ibv_buf *)(uintptr_t)0x20;
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, (void *)(uintptr_t)page, page, "fd path with garbage addr"))
		dereg(mr);

	t_case("missing and conflicting bits: EINVAL");
	a = va_attr(mem, page, LW);
	a.comp_mask = 0;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a.comp_mask = M_IOVA;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a.comp_mask = M_ADDR | M_OFF;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a.comp_mask = M_ADDR | M_IOVA | M_OFF;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a.comp_mask = M_OFF | M_IOVA;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = fd_attr(mfd, 0, page, 0, LW);
	a.comp_mask = M_FD;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a.comp_mask = M_FD | M_IOVA;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a.comp_mask = M_FD | M_OFF; /* the fd path has no default iova */
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a.comp_mask = M_FD | M_OFF | M_IOVA | M_ADDR;
	a.addr = mem;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a.comp_mask = M_FD | M_ADDR;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	/* mask errors come before access errors */
	a = fd_attr(mfd, 0, page, 0, IBV_ACCESS_ON_DEMAND);
	a.comp_mask = M_FD | M_OFF;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = va_attr(mem, page, IBV_ACCESS_ON_DEMAND);
	a.comp_mask = 0;
	CHECK_EX_FAILS(pd, &a, EINVAL);

	t_case("page offsets of addr/fd_offset and iova must match");
	a = va_attr(mem, page, LW);
	a.comp_mask |= M_IOVA;
	a.iova = 1;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a.iova = (uintptr_t)mem + page;
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, mem, page, "iova one page further"))
		dereg(mr);
	a = fd_attr(mfd, 1, page, 0, LW);
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = fd_attr(mfd, 0, page, page - 1, LW);
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = fd_attr(mfd, page + 16, 16, 0x9990010, LW);
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, (void *)(uintptr_t)(page + 16), 16, "fd offsets match"))
		dereg(mr);

	t_case("other errors reach the caller");
	a = va_attr(mem, 0, LW);
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = va_attr(NULL, page, LW);
	CHECK_EX_FAILS(pd, &a, EFAULT);
	a = va_attr(mem, page, RW);
	CHECK_EX_FAILS(pd, &a, EINVAL);
	/* ODP by address registers; implicit ODP (NULL, SIZE_MAX) is refused */
	a = va_attr(mem, page, LW | IBV_ACCESS_ON_DEMAND);
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, mem, page, "explicit ODP"))
		dereg(mr);
	a = va_attr(NULL, SIZE_MAX, LW | IBV_ACCESS_ON_DEMAND);
	CHECK_EX_FAILS(pd, &a, EOPNOTSUPP);
	a = va_attr(mem, page, LW | IBV_ACCESS_RELAXED_ORDERING);
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, mem, page, "relaxed ordering dropped"))
		dereg(mr);
	a = fd_attr(-1, 0, page, 0, LW);
	CHECK_EX_FAILS(pd, &a, EBADF);
	a = fd_attr(mfd, 0, 0, 0, LW);
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = fd_attr(mfd, 2 * page, 3 * page, 0, LW); /* past the end of the memfd */
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = va_attr(mem, page, LW);
	CHECK_ERRNO_PTR(ibv_reg_mr_ex(NULL, &a), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_mr_ex(pd, NULL), EINVAL);
}

static void test_fd_access(void)
{
	static const int bad[] = {
		IBV_ACCESS_MW_BIND,
		IBV_ACCESS_ZERO_BASED,
		IBV_ACCESS_ON_DEMAND,
		LW | IBV_ACCESS_ON_DEMAND,
		LW | IBV_ACCESS_HUGETLB,
		LW | IBV_ACCESS_FLUSH_GLOBAL,
		LW | IBV_ACCESS_FLUSH_PERSISTENT,
		LW | (1 << 10),
		LW | (1 << 25), /* optional, but not relaxed ordering */
	};
	static const int good[] = {
		0, LW, RR, LW | RW, LW | RA, LW | RW | RR | RA, LW | IBV_ACCESS_RELAXED_ORDERING,
	};
	struct ibv_mr_init_attr a;
	struct ibv_mr *mr;
	size_t i;

	t_case("fd path access narrowing");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a = fd_attr(mfd, 0, page, 0, bad[i]);
		if (!CHECK_EX_FAILS(pd, &a, EINVAL))
			printf("# access 0x%x\n", bad[i]);
		/* the same bits are fine by address (ON_DEMAND aside) */
	}
	a = fd_attr(mfd, 0, page, 0, RW);
	CHECK_EX_FAILS(pd, &a, EINVAL);
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		a = fd_attr(mfd, 0, page, 0, good[i]);
		mr = reg_ex(pd, &a);
		if (check_mr(mr, pd, NULL, page, "fd path allowed access"))
			dereg(mr);
	}
	a = va_attr(mem, page, LW | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED);
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, mem, page, "address path: MW_BIND|ZERO_BASED"))
		dereg(mr);
	a = va_attr(mem, page, LW | (1 << 25));
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, mem, page, "address path: an optional bit"))
		dereg(mr);
	a = va_attr(mem, page, LW | IBV_ACCESS_FLUSH_GLOBAL);
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, mem, page, "address path: FLUSH_GLOBAL"))
		dereg(mr);
	a = va_attr(mem, page, LW | IBV_ACCESS_FLUSH_PERSISTENT);
	CHECK_EX_FAILS(pd, &a, EINVAL); /* no PM DMA handle: not persistent memory */
}

static void test_dmah(void)
{
	struct ibv_dmah_init_attr da = {.comp_mask = IBV_DMAH_INIT_ATTR_MASK_PH, .ph = 2};
	struct ibv_dmah *dmah = ibv_alloc_dmah(ctx, &da);
	struct ibv_mr_init_attr a;
	struct ibv_mr *mr1, *mr2;

	t_case("DMAH on the address and fd paths; the handle is busy while used");
	if (!CHECK(dmah))
		return;
	a = va_attr(mem, page, LW);
	a.comp_mask |= M_DMAH;
	a.dmah = dmah;
	mr1 = ibv_reg_mr_ex(pd, &a);
	CHECK(mr1);
	a = fd_attr(mfd, 0, page, 0, LW);
	a.comp_mask |= M_DMAH;
	a.dmah = dmah;
	mr2 = ibv_reg_mr_ex(pd, &a);
	CHECK(mr2);
	CHECK_RET(ibv_dealloc_dmah(dmah), EBUSY);
	/* mask and access errors come before the handle */
	a.comp_mask &= ~(uint64_t)M_IOVA;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = va_attr(mem, page, RW);
	a.comp_mask |= M_DMAH;
	a.dmah = dmah;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	/* ODP with a handle: EOPNOTSUPP, as mlx5 */
	a = va_attr(mem, page, LW | IBV_ACCESS_ON_DEMAND);
	a.comp_mask |= M_DMAH;
	a.dmah = dmah;
	CHECK_EX_FAILS(pd, &a, EOPNOTSUPP);
	/* rereg of an MR with a handle: EOPNOTSUPP */
	if (mr1) {
		errno = 0;
		CHECK_EQ_INT(ibv_rereg_mr(mr1, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
					  LW | IBV_ACCESS_REMOTE_READ),
			     IBV_REREG_MR_ERR_CMD);
		CHECK_EQ_INT(errno, EOPNOTSUPP);
	}
	if (mr1)
		CHECK_RET(ibv_dereg_mr(mr1), 0);
	CHECK_RET(ibv_dealloc_dmah(dmah), EBUSY);
	if (mr2)
		CHECK_RET(ibv_dereg_mr(mr2), 0);
	CHECK_RET(ibv_dealloc_dmah(dmah), 0);
}

static struct ibv_mr_init_attr buf_attr(struct ibv_buf *b, void *addr, size_t len, int access)
{
	struct ibv_mr_init_attr a = va_attr(addr, len, access);

	a.comp_mask |= M_BUF;
	a.buf = b;
	return a;
}

static void test_buf_plain(void)
{
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	struct ibv_buf b;
	struct ibv_mr_init_attr a;
	struct ibv_mr *m1, *m2, *mr;

	t_case("BUF, plain memory: sub-ranges");
	sv_buf_init(&b, pd, mem, 2 * page);
	a = buf_attr(&b, mem, page, LW);
	m1 = reg_ex(pd, &a);
	a = buf_attr(&b, mem + page, page, LW);
	m2 = reg_ex(pd, &a);
	check_mr(m1, pd, mem, page, "BUF first page");
	check_mr(m2, pd, mem + page, page, "BUF second page");
	CHECK(!m1 || !m2 || m1->lkey != m2->lkey);
	dereg(m1);
	dereg(m2);
	m1 = ibv_reg_buf_mr(pd, &b, mem, 2 * page, LW);
	if (check_mr(m1, pd, mem, 2 * page, "ibv_reg_buf_mr whole"))
		dereg(m1);
	m1 = ibv_reg_buf_mr(pd, &b, mem + page + 1, page - 1, LW);
	if (check_mr(m1, pd, mem + page + 1, page - 1, "ibv_reg_buf_mr tail"))
		dereg(m1);
	/* a caller IOVA passes through for plain buffers (and is then checked) */
	a = buf_attr(&b, mem, page, LW);
	a.comp_mask |= M_IOVA;
	a.iova = 0x2000;
	mr = reg_ex(pd, &a);
	if (check_mr(mr, pd, mem, page, "BUF|ADDR|IOVA plain"))
		dereg(mr);
	a.iova = 0x2001;
	CHECK_EX_FAILS(pd, &a, EINVAL);

	t_case("BUF rules: EINVAL");
	if (CHECK(pd2)) {
		a = buf_attr(&b, mem, page, LW);
		CHECK_EX_FAILS(pd2, &a, EINVAL); /* allocated on another PD */
		CHECK_ERRNO_PTR(ibv_reg_buf_mr(pd2, &b, mem, page, LW), EINVAL);
	}
	a = buf_attr(&b, mem, page, LW);
	a.comp_mask &= ~(uint64_t)M_ADDR; /* ADDR is required */
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = buf_attr(&b, mem - 1, page, LW); /* before the buffer */
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = buf_attr(&b, mem, 2 * page + 1, LW); /* longer than the buffer */
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = buf_attr(&b, mem + page, page + 1, LW); /* offset + length beyond */
	CHECK_EX_FAILS(pd, &a, EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_buf_mr(pd, &b, mem + page, 2 * page, LW), EINVAL);
	a = buf_attr(&b, mem + 2 * page + 1, 0, LW); /* offset beyond */
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = buf_attr(&b, mem + page, SIZE_MAX, LW); /* offset + length wraps */
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = buf_attr(&b, mem, page, LW);
	a.comp_mask |= M_FD;
	a.fd = mfd;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = buf_attr(&b, mem, page, LW);
	a.comp_mask |= M_OFF;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	a = buf_attr(NULL, mem, page, LW);
	CHECK_EX_FAILS(pd, &a, EINVAL);
	/* the BUF checks come before the device's */
	a = buf_attr(&b, mem - 1, page, RW);
	CHECK_EX_FAILS(pd, &a, EINVAL);
	/* a buffer of rounded size: the whole size is usable */
	sv_buf_init(&b, pd, mem, 3 * page);
	mr = ibv_reg_buf_mr(pd, &b, mem + 2 * page, page, LW);
	if (check_mr(mr, pd, mem + 2 * page, page, "rounded buffer tail"))
		dereg(mr);
	if (pd2)
		CHECK_RET(ibv_dealloc_pd(pd2), 0);
}

static void test_buf_parent(void)
{
	struct ibv_parent_domain_init_attr pa = {.pd = pd};
	struct ibv_pd *parent = ibv_alloc_parent_domain(ctx, &pa);
	struct ibv_buf b;
	struct ibv_mr *mr;

	t_case("BUF: parent domain and its base PD are different PDs");
	if (!parent) {
		CHECK_MSG(0, "ibv_alloc_parent_domain: %s", t_errname(errno));
		return;
	}
	sv_buf_init(&b, parent, mem, page);
	CHECK_ERRNO_PTR(ibv_reg_buf_mr(pd, &b, mem, page, LW), EINVAL);
	mr = ibv_reg_buf_mr(parent, &b, mem, page, LW);
	if (check_mr(mr, parent, mem, page, "buffer of the parent on the parent")) {
		/* the MR pins the base PD, not the parent domain */
		CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
		dereg(mr);
	}
	sv_buf_init(&b, pd, mem, page);
	CHECK_ERRNO_PTR(ibv_reg_buf_mr(parent, &b, mem, page, LW), EINVAL);
	mr = ibv_reg_mr(parent, mem, page, LW);
	if (check_mr(mr, parent, mem, page, "ibv_reg_mr on a parent domain")) {
		CHECK_RET(ibv_dealloc_pd(parent), 0); /* MRs hold no parent reference */
		parent = NULL;
		dereg(mr);
	}
	if (parent)
		CHECK_RET(ibv_dealloc_pd(parent), 0);
}

static void test_buf_dmabuf(void)
{
	void *map = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	struct ibv_mr_init_attr a;
	struct ibv_buf b;
	struct ibv_mr *mr;

	t_case("BUF, DMA-buf backed: translated to the fd path");
	if (!CHECK(map != MAP_FAILED))
		return;
	sv_buf_init_dmabuf(&b, pd, map, 4 * page, mfd);
	a = buf_attr(&b, (uint8_t *)map + page, 2 * page, LW | RW);
	mr = reg_ex(pd, &a);
	/* mr->addr is the offset inside the buffer, not the VA */
	if (check_mr(mr, pd, (void *)(uintptr_t)page, 2 * page, "reg_mr_ex BUF dmabuf"))
		dereg(mr);
	mr = ibv_reg_buf_mr(pd, &b, (uint8_t *)map + 3 * page + 8, 8, LW | RA);
	if (check_mr(mr, pd, (void *)(uintptr_t)(3 * page + 8), 8, "ibv_reg_buf_mr dmabuf"))
		dereg(mr);
	mr = ibv_reg_buf_mr(pd, &b, map, 4 * page, LW);
	if (check_mr(mr, pd, NULL, 4 * page, "ibv_reg_buf_mr dmabuf at offset 0"))
		dereg(mr);
	/* the fd path never touches the VA: an unmapped buffer address still works */
	sv_buf_init_dmabuf(&b, pd, (void *)(uintptr_t)0x10000, 4 * page, mfd);
	mr = ibv_reg_buf_mr(pd, &b, (void *)(uintptr_t)(0x10000 + page), page, LW);
	if (check_mr(mr, pd, (void *)(uintptr_t)page, page, "dmabuf buffer, VA unmapped"))
		dereg(mr);
	/* fd-path rules apply after translation */
	sv_buf_init_dmabuf(&b, pd, map, 4 * page, mfd);
	CHECK_ERRNO_PTR(ibv_reg_buf_mr(pd, &b, map, page, LW | IBV_ACCESS_MW_BIND), EINVAL);
	CHECK_ERRNO_PTR(ibv_reg_buf_mr(pd, &b, map, page, IBV_ACCESS_ON_DEMAND), EINVAL);
	mr = ibv_reg_buf_mr(pd, &b, (uint8_t *)map + 1, page, LW); /* iova and offset both +1 */
	if (check_mr(mr, pd, (void *)(uintptr_t)1, page, "dmabuf buffer, unaligned"))
		dereg(mr);

	t_case("BUF, DMA-buf backed: caller IOVA is EINVAL");
	a = buf_attr(&b, map, page, LW);
	a.comp_mask |= M_IOVA;
	a.iova = (uintptr_t)map;
	CHECK_EX_FAILS(pd, &a, EINVAL);
	munmap(map, 4 * page);
}

/* The same process, a new device that bounces DMA (docs/seed-apis.md 3). */
static void test_bounce(void)
{
	struct ibv_device **list;
	struct ibv_context *bctx;
	struct ibv_pd *bpd;
	struct ibv_mr_init_attr a;
	struct ibv_buf b;
	struct ibv_mr *mr;
	int n = 0;

	t_case("CC DMA bounce device: address paths EOPNOTSUPP, fd paths work");
	setenv("SOFTVERBS_CC_DMA_BOUNCE", "1", 1);
	list = ibv_get_device_list(&n);
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	if (!CHECK(list && n >= 1))
		return;
	bctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!CHECK(bctx))
		return;
	bpd = ibv_alloc_pd(bctx);
	if (CHECK(bpd)) {
		struct ibv_device_attr_ex ax;

		memset(&ax, 0, sizeof(ax));
		if (CHECK_RET(ibv_query_device_ex(bctx, NULL, &ax), 0))
			CHECK(ax.device_cap_flags_ex & IBV_DEVICE_CC_DMA_BOUNCE);
		CHECK_ERRNO_PTR(ibv_reg_mr(bpd, mem, page, IBV_ACCESS_LOCAL_WRITE), EOPNOTSUPP);
		CHECK_ERRNO_PTR(ibv_reg_mr_iova(bpd, mem, page, 0, IBV_ACCESS_LOCAL_WRITE),
				EOPNOTSUPP);
		CHECK_ERRNO_PTR(ibv_reg_mr_iova2(bpd, mem, page, 0, LW), EOPNOTSUPP);
		a = va_attr(mem, page, LW);
		CHECK_EX_FAILS(bpd, &a, EOPNOTSUPP);
		sv_buf_init(&b, bpd, mem, 2 * page);
		CHECK_ERRNO_PTR(ibv_reg_buf_mr(bpd, &b, mem, page, LW), EOPNOTSUPP);
		/* the bounce check comes after mask and access checks, before the memory */
		CHECK_ERRNO_PTR(ibv_reg_mr(bpd, mem, page, RW), EINVAL);
		a = va_attr(mem, page, LW);
		a.comp_mask |= M_IOVA;
		a.iova = 1;
		CHECK_EX_FAILS(bpd, &a, EINVAL);
		CHECK_ERRNO_PTR(ibv_reg_mr(bpd, NULL, page, LW), EOPNOTSUPP);
		CHECK_ERRNO_PTR(ibv_reg_mr(bpd, mem, 0, LW), EOPNOTSUPP);

		a = fd_attr(mfd, page, page, 0x1000, LW | RW);
		mr = reg_ex(bpd, &a);
		if (check_mr(mr, bpd, (void *)(uintptr_t)page, page, "bounce: fd path"))
			dereg(mr);
		mr = ibv_reg_dmabuf_mr(bpd, 0, 2 * page, 0, mfd, LW);
		if (check_mr(mr, bpd, NULL, 2 * page, "bounce: ibv_reg_dmabuf_mr"))
			dereg(mr);
		sv_buf_init_dmabuf(&b, bpd, mem, 4 * page, mfd);
		mr = ibv_reg_buf_mr(bpd, &b, mem + page, page, LW);
		if (check_mr(mr, bpd, (void *)(uintptr_t)page, page, "bounce: DMA-buf buffer"))
			dereg(mr);
		CHECK_RET(ibv_dealloc_pd(bpd), 0);
	}
	CHECK_RET(ibv_close_device(bctx), 0);
}

int main(void)
{
	t_start("api_reg_mr_ex");
	page = (size_t)sysconf(_SC_PAGESIZE);
	mem = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mfd = memfd_create("api_reg_mr_ex", MFD_CLOEXEC);
	if (mem == MAP_FAILED || mfd < 0 || ftruncate(mfd, (off_t)(4 * page))) {
		printf("Bail out! mmap/memfd: %s\n", t_errname(errno));
		return 1;
	}
	t_open_first(&ctx);
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		printf("Bail out! ibv_alloc_pd: %s\n", t_errname(errno));
		return 1;
	}
	test_masks();
	test_fd_access();
	test_dmah();
	test_buf_plain();
	test_buf_parent();
	test_buf_dmabuf();
	test_bounce();

	t_case("teardown");
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	close(mfd);
	munmap(mem, 4 * page);
	return t_finish();
}
