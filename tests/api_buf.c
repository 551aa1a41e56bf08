/* SPDX-License-Identifier: MIT */
/*
 * api_buf: ibv_alloc_buf, ibv_free_buf, ibv_export_buf_dmabuf_fd and
 * ibv_reg_buf_mr as the software device implements them
 * (docs/seed-apis.md 1.1-1.4, 3; docs/cc-and-tph.md).
 *
 * Plain PD: page-aligned memory whose recorded size is rounded up to the
 * page (seen through registration), not exportable (ENODATA), kept out
 * of forked children once fork protection is on; size 0 is EINVAL, a
 * size whose rounding overflows ENOMEM.
 * Custom allocators of a parent domain: every argument of alloc and
 * free, IBV_ALLOCATOR_USE_DEFAULT, a NULL return, and half-set pairs.
 * The CC opt-in on a device without bounce changes nothing.
 * CC DMA bounce mode (a second device in the same process: every
 * ibv_get_device_list() re-reads SOFTVERBS_*): builtin and auto heaps
 * give sealed memfds whose exports are new close-on-exec fds (the lowest
 * free number) of the same memory, registrable with ibv_reg_dmabuf_mr;
 * more than the RAM is ENOMEM; kernel needs the real heap (ENOENT);
 * DMA-buf wins over custom allocators; registration of a CC buffer goes
 * down the fd path (mr->addr is the offset), of a plain one is refused
 * (EOPNOTSUPP); out of fds is EMFILE, not ENOMEM, for allocation and
 * export alike.
 */
#include "harness.h"
#include "fork_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LW IBV_ACCESS_LOCAL_WRITE
#define CC_FLAG IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC
#define HEAP_PATH "/dev/dma_heap/system_cc_shared"
#define POOL_NAME "/memfd:softverbs-cc-shared"

static size_t page;

/* ---- helpers ---- */

/* Open a CC DMA bounce device with SOFTVERBS_CC_HEAP=heap; the environment is restored. */
static struct ibv_context *open_bounce(const char *heap)
{
	struct ibv_context *c;

	setenv("SOFTVERBS_CC_DMA_BOUNCE", "1", 1);
	setenv("SOFTVERBS_CC_HEAP", heap, 1);
	c = t_open_dev();
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	unsetenv("SOFTVERBS_CC_HEAP");
	return c;
}

static struct ibv_pd *parent_of(struct ibv_context *c, struct ibv_pd *pd, uint32_t mask,
				void *(*alloc)(struct ibv_pd *, void *, size_t, size_t, uint64_t),
				void (*fr)(struct ibv_pd *, void *, void *, uint64_t), void *pdctx)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_pd *p;

	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	pa.comp_mask = mask;
	pa.alloc = alloc;
	pa.free = fr;
	pa.pd_context = pdctx;
	errno = 0;
	p = ibv_alloc_parent_domain(c, &pa);
	CHECK_MSG(p != NULL, "ibv_alloc_parent_domain(mask 0x%x): %s", mask, t_errname(errno));
	return p;
}

static size_t round_page(size_t n)
{
	return (n + page - 1) / page * page;
}

/*
 * The recorded size of `b` is exactly `want`: registering `want` bytes
 * from the start succeeds, one byte more is EINVAL, and so is a range
 * that starts at `want`.
 */
static void check_recorded_size(struct ibv_pd *pd, struct ibv_buf *b, uint8_t *addr, size_t want,
				const char *what)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_buf_mr(pd, b, addr, want, LW);
	if (CHECK_MSG(mr != NULL, "%s: register %zu bytes: %s", what, want, t_errname(errno)))
		CHECK_RET(ibv_dereg_mr(mr), 0);
	errno = 0;
	mr = ibv_reg_buf_mr(pd, b, addr, want + 1, LW);
	CHECK_MSG(!mr && errno == EINVAL, "%s: register %zu bytes: want EINVAL, got %s", what,
		  want + 1, mr ? "an MR" : t_errname(errno));
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_buf_mr(pd, b, addr + want, 1, LW);
	CHECK_MSG(!mr && errno == EINVAL, "%s: register 1 byte at %zu: want EINVAL, got %s", what,
		  want, mr ? "an MR" : t_errname(errno));
	if (mr)
		ibv_dereg_mr(mr);
}

/* Physical memory, in bytes. */
static size_t ram_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES);

	return pages > 0 ? (size_t)pages * page : SIZE_MAX / 2;
}

static void check_no_export(struct ibv_buf *b, const char *what)
{
	int fd;

	errno = 0;
	fd = ibv_export_buf_dmabuf_fd(b);
	CHECK_MSG(fd == -1 && errno == ENODATA, "%s: export: want -1/ENODATA, got %d/%s", what, fd,
		  t_errname(errno));
	if (fd >= 0)
		close(fd);
}

/* The number the next new fd gets, or -1. */
static int lowest_free_fd(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (fd >= 0)
		close(fd);
	return fd;
}

/* What /proc/self/fd/<fd> points to starts with `prefix`. */
static bool fd_is(int fd, const char *prefix)
{
	char path[64], target[256];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = '\0';
	if (strncmp(target, prefix, strlen(prefix)))
		printf("# fd %d is %s\n", fd, target);
	return !strncmp(target, prefix, strlen(prefix));
}

/* ---- plain PD ---- */

static void case_plain(struct ibv_context *ctx)
{
	static const size_t sizes[] = {1, 100, 4095, 4096, 4097, 3 * 4096 + 5};
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2;
	struct ibv_buf *b, *b2;
	uint8_t *p, *p2;
	size_t i, sz;

	t_case("plain PD: page aligned, size rounded up to the page, not exportable");
	if (!CHECK(pd))
		return;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		sz = sizes[i] / 4096 * page + sizes[i] % 4096; /* scale to this page size */
		b = NULL;
		errno = 0;
		p = ibv_alloc_buf(pd, sz, &b);
		if (!CHECK_MSG(p && b, "ibv_alloc_buf(%zu): %s", sz, t_errname(errno)))
			continue;
		CHECK_MSG((uintptr_t)p % page == 0, "ibv_alloc_buf(%zu) = %p: not page aligned", sz,
			  (void *)p);
		memset(p, 0x5a, round_page(sz)); /* the whole rounded size is ours */
		check_recorded_size(pd, b, p, round_page(sz), "plain");
		check_no_export(b, "plain");
		ibv_free_buf(b);
	}

	t_case("plain PD: a buffer belongs to its PD");
	pd2 = ibv_alloc_pd(ctx);
	p = ibv_alloc_buf(pd, page, &b);
	p2 = ibv_alloc_buf(pd, page, &b2);
	if (CHECK(pd2 && p && p2)) {
		struct ibv_mr *mr;

		CHECK(p != p2);
		CHECK_ERRNO_PTR(ibv_reg_buf_mr(pd2, b, p, page, LW), EINVAL);
		/* an address of the other buffer is outside this one */
		CHECK_ERRNO_PTR(ibv_reg_buf_mr(pd, b, p2, page, LW), EINVAL);
		mr = ibv_reg_buf_mr(pd, b, p, page, LW);
		if (CHECK(mr)) {
			CHECK(mr->addr == p && mr->length == page && mr->pd == pd);
			CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
			CHECK_RET(ibv_dereg_mr(mr), 0);
		}
	}
	if (p)
		ibv_free_buf(b);
	if (p2)
		ibv_free_buf(b2);
	if (pd2)
		CHECK_RET(ibv_dealloc_pd(pd2), 0);

	t_case("plain PD: size 0 is EINVAL, a size whose rounding overflows ENOMEM");
	b = (struct ibv_buf *)&b; /* must stay untouched */
	CHECK_ERRNO_PTR(ibv_alloc_buf(pd, 0, &b), EINVAL);
	CHECK(b == (struct ibv_buf *)&b);
	/*
	 * Rounding overflows. (A size that merely exceeds memory is the C
	 * library's ENOMEM; the sanitizers abort on such a request instead.)
	 */
	CHECK_ERRNO_PTR(ibv_alloc_buf(pd, SIZE_MAX, &b), ENOMEM);
	CHECK_ERRNO_PTR(ibv_alloc_buf(pd, SIZE_MAX - page + 2, &b), ENOMEM);
	CHECK(b == (struct ibv_buf *)&b);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

/* Fork-protected buffer of 2 pages on `pd`: a child touching it faults. */
static void check_dontfork(struct ibv_pd *pd, const char *what)
{
	struct ibv_buf *b;
	uint8_t *p;

	errno = 0;
	p = ibv_alloc_buf(pd, 2 * page, &b);
	if (!CHECK_MSG(p != NULL, "%s: ibv_alloc_buf: %s", what, t_errname(errno)))
		return;
	memset(p, 0x77, 2 * page);
	CHECK_MSG(child_reads(p, 0x77) == CHILD_FAULT, "%s: first byte in the child", what);
	CHECK_MSG(child_reads(p + 2 * page - 1, 0x77) == CHILD_FAULT, "%s: last byte in the child",
		  what);
	ibv_free_buf(b);
}

static void case_fork(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *bpd, *par;
	struct ibv_context *c;
	uint8_t *ctl;

	t_case("with ibv_fork_init: buffer pages stay out of children");
	ctl = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!CHECK(pd) || !CHECK(ctl != MAP_FAILED))
		return;
	CHECK_RET(ibv_fork_init(), 0);
	memset(ctl, 0x77, page);
	/* the probe itself: an ordinary page is in the child */
	CHECK_EQ_INT(child_reads(ctl, 0x77), CHILD_OK);
	check_dontfork(pd, "plain PD");
	/* shared CC memory too */
	c = open_bounce("builtin");
	if (CHECK(c)) {
		bpd = ibv_alloc_pd(c);
		par = bpd ? parent_of(c, bpd, CC_FLAG, NULL, NULL, NULL) : NULL;
		if (par) {
			check_dontfork(par, "CC parent domain");
			CHECK_RET(ibv_dealloc_pd(par), 0);
		}
		if (bpd)
			CHECK_RET(ibv_dealloc_pd(bpd), 0);
		CHECK_RET(ibv_close_device(c), 0);
	}
	munmap(ctl, page);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

/* ---- custom allocators ---- */

enum alloc_mode {
	GIVE_MEMORY,
	GIVE_DEFAULT,
	GIVE_NULL
};

static struct {
	enum alloc_mode mode;
	int nalloc, nfree;
	struct ibv_pd *pd;
	void *pd_context;
	size_t size, alignment;
	uint64_t resource_type;
	void *returned;
	struct ibv_pd *free_pd;
	void *free_pd_context, *free_ptr;
	uint64_t free_resource_type;
} al;

static void *my_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
		      uint64_t resource_type)
{
	void *p = NULL;

	al.nalloc++;
	al.pd = pd;
	al.pd_context = pd_context;
	al.size = size;
	al.alignment = alignment;
	al.resource_type = resource_type;
	switch (al.mode) {
	case GIVE_MEMORY:
		/* page aligned like any buffer, and clearly our own */
		if (posix_memalign(&p, page, round_page(size)))
			p = NULL;
		break;
	case GIVE_DEFAULT:
		p = IBV_ALLOCATOR_USE_DEFAULT;
		break;
	case GIVE_NULL:
		break;
	}
	al.returned = p;
	return p;
}

static void my_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type)
{
	al.nfree++;
	al.free_pd = pd;
	al.free_pd_context = pd_context;
	al.free_ptr = ptr;
	al.free_resource_type = resource_type;
	if (al.mode == GIVE_MEMORY)
		free(ptr);
}

static void reset_al(enum alloc_mode mode)
{
	memset(&al, 0, sizeof(al));
	al.mode = mode;
}

static void case_custom(struct ibv_context *ctx)
{
	static int cookie;
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *par, *half;
	struct ibv_buf *b;
	uint8_t *p;
	const size_t sz = page + 123;

	t_case("custom allocators: arguments of alloc and free");
	if (!CHECK(pd))
		return;
	par = parent_of(ctx, pd,
			IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
				IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
			my_alloc, my_free, &cookie);
	if (!par)
		goto out;
	reset_al(GIVE_MEMORY);
	p = ibv_alloc_buf(par, sz, &b);
	if (CHECK_MSG(p != NULL, "alloc: %s", t_errname(errno))) {
		CHECK_EQ_INT(al.nalloc, 1);
		CHECK(al.pd == par);
		CHECK(al.pd_context == &cookie);
		CHECK_EQ_INT(al.size, sz);
		CHECK_EQ_INT(al.alignment, page);
		CHECK_EQ_INT(al.resource_type, 0);
		CHECK(p == al.returned);
		/* the size is the exact one the application asked for */
		check_recorded_size(par, b, p, sz, "custom");
		check_no_export(b, "custom");
		CHECK_EQ_INT(al.nfree, 0);
		ibv_free_buf(b);
		CHECK_EQ_INT(al.nfree, 1);
		CHECK(al.free_pd == par);
		CHECK(al.free_pd_context == &cookie);
		CHECK(al.free_ptr == al.returned);
		CHECK_EQ_INT(al.free_resource_type, 0);
	}

	t_case("custom allocators: IBV_ALLOCATOR_USE_DEFAULT gives default memory");
	reset_al(GIVE_DEFAULT);
	p = ibv_alloc_buf(par, sz, &b);
	if (CHECK_MSG(p != NULL, "alloc: %s", t_errname(errno))) {
		CHECK_EQ_INT(al.nalloc, 1);
		CHECK(p != IBV_ALLOCATOR_USE_DEFAULT);
		CHECK((uintptr_t)p % page == 0);
		memset(p, 1, round_page(sz));
		/* default memory: rounded like on a plain PD */
		check_recorded_size(par, b, p, round_page(sz), "default via allocator");
		ibv_free_buf(b);
		CHECK_EQ_INT(al.nfree, 0); /* not the application's memory */
	}

	t_case("custom allocators: alloc returning NULL is ENOMEM");
	reset_al(GIVE_NULL);
	b = NULL;
	CHECK_ERRNO_PTR(ibv_alloc_buf(par, sz, &b), ENOMEM);
	CHECK_EQ_INT(al.nalloc, 1);
	CHECK_EQ_INT(al.nfree, 0);
	CHECK_RET(ibv_dealloc_pd(par), 0);

	t_case("custom allocators: only one of alloc/free set means the default path");
	reset_al(GIVE_MEMORY);
	half = parent_of(ctx, pd, IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS, my_alloc, NULL, NULL);
	if (half) {
		p = ibv_alloc_buf(half, sz, &b);
		if (CHECK(p)) {
			check_recorded_size(half, b, p, round_page(sz), "alloc only");
			ibv_free_buf(b);
		}
		CHECK_RET(ibv_dealloc_pd(half), 0);
	}
	half = parent_of(ctx, pd, IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS, NULL, my_free, NULL);
	if (half) {
		p = ibv_alloc_buf(half, sz, &b);
		if (CHECK(p)) {
			check_recorded_size(half, b, p, round_page(sz), "free only");
			ibv_free_buf(b);
		}
		CHECK_RET(ibv_dealloc_pd(half), 0);
	}
	CHECK_EQ_INT(al.nalloc, 0);
	CHECK_EQ_INT(al.nfree, 0);

	t_case("CC opt-in on a device without bounce: ordinary memory");
	par = parent_of(ctx, pd, CC_FLAG, NULL, NULL, NULL);
	if (par) {
		p = ibv_alloc_buf(par, sz, &b);
		if (CHECK_MSG(p != NULL, "alloc: %s", t_errname(errno))) {
			memset(p, 2, round_page(sz));
			check_no_export(b, "CC without bounce");
			check_recorded_size(par, b, p, round_page(sz), "CC without bounce");
			ibv_free_buf(b);
		}
		CHECK_RET(ibv_dealloc_pd(par), 0);
	}
	/* ... and the allocators of such a parent domain are still used */
	reset_al(GIVE_MEMORY);
	par = parent_of(ctx, pd, CC_FLAG | IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS, my_alloc,
			my_free, NULL);
	if (par) {
		p = ibv_alloc_buf(par, sz, &b);
		if (CHECK(p)) {
			CHECK(p == al.returned);
			check_no_export(b, "CC without bounce, allocators");
			ibv_free_buf(b);
		}
		CHECK_EQ_INT(al.nalloc, 1);
		CHECK_EQ_INT(al.nfree, 1);
		CHECK_RET(ibv_dealloc_pd(par), 0);
	}
out:
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

/* ---- CC DMA bounce mode ---- */

/*
 * A CC buffer of `sz` bytes on `par`: fd-backed by the built-in pool,
 * exported as new close-on-exec fds of the same sealed memory.
 */
static void check_cc_buffer(struct ibv_pd *par, size_t sz, const char *what)
{
	size_t len = round_page(sz);
	struct ibv_buf *b;
	struct ibv_mr *mr;
	struct stat st;
	uint8_t *p, *map;
	int fd1, fd2, seals, lowest;

	errno = 0;
	p = ibv_alloc_buf(par, sz, &b);
	if (!CHECK_MSG(p != NULL, "%s: ibv_alloc_buf(%zu): %s", what, sz, t_errname(errno)))
		return;
	CHECK((uintptr_t)p % page == 0);
	memset(p, 0x11, len);
	lowest = lowest_free_fd();
	errno = 0;
	fd1 = ibv_export_buf_dmabuf_fd(b);
	fd2 = ibv_export_buf_dmabuf_fd(b);
	if (CHECK_MSG(fd1 >= 0 && fd2 >= 0, "%s: export: %d %d, %s", what, fd1, fd2,
		      t_errname(errno))) {
		CHECK_MSG(fd1 == lowest, "%s: exported fd %d, lowest free was %d", what, fd1,
			  lowest);
		CHECK(fd1 != fd2);
		CHECK_EQ_INT(fcntl(fd1, F_GETFD), FD_CLOEXEC);
		CHECK_EQ_INT(fcntl(fd2, F_GETFD), FD_CLOEXEC);
		CHECK_MSG(fd_is(fd1, POOL_NAME), "%s: not a memfd of the built-in pool", what);
		if (CHECK_EQ_INT(fstat(fd1, &st), 0))
			CHECK_EQ_INT(st.st_size, len);
		seals = fcntl(fd1, F_GET_SEALS);
		CHECK_MSG(seals >= 0 && (seals & F_SEAL_GROW) && (seals & F_SEAL_SHRINK) &&
				  (seals & F_SEAL_SEAL),
			  "%s: seals 0x%x", what, seals);
		CHECK_MSG(ftruncate(fd1, (off_t)(2 * len)) == -1 && errno == EPERM,
			  "%s: a sealed buffer must not grow", what);
		map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd2, 0);
		if (CHECK(map != MAP_FAILED)) {
			/* the same memory both ways */
			CHECK(map[0] == 0x11 && map[len - 1] == 0x11);
			memset(map + len / 2, 0x22, len / 2);
			CHECK(p[len / 2] == 0x22 && p[len - 1] == 0x22 && p[len / 2 - 1] == 0x11);
			p[0] = 0x33;
			CHECK(map[0] == 0x33);
			munmap(map, len);
		}
		/* the fd path is open on a bounce device: the export registers directly */
		errno = 0;
		mr = ibv_reg_dmabuf_mr(par, 0, len, (uintptr_t)p, fd2, LW);
		if (CHECK_MSG(mr != NULL, "%s: ibv_reg_dmabuf_mr of the export: %s", what,
			      t_errname(errno))) {
			CHECK(mr->addr == NULL && mr->length == len && mr->lkey != 0);
			CHECK_RET(ibv_dereg_mr(mr), 0);
		}
	}
	if (fd1 >= 0)
		close(fd1);
	if (fd2 >= 0)
		close(fd2);
	/* registration: the fd path; mr->addr is the offset inside the buffer */
	if (len >= 2 * page) {
		errno = 0;
		mr = ibv_reg_buf_mr(par, b, p + page, len - page, LW | IBV_ACCESS_REMOTE_WRITE);
		if (CHECK_MSG(mr != NULL, "%s: reg_buf_mr: %s", what, t_errname(errno))) {
			CHECK_MSG(mr->addr == (void *)(uintptr_t)page, "%s: mr->addr %p", what,
				  mr->addr);
			CHECK(mr->length == len - page && mr->pd == par);
			CHECK(mr->lkey != 0 && mr->lkey == mr->rkey);
			CHECK_RET(ibv_dereg_mr(mr), 0);
		}
	}
	mr = ibv_reg_buf_mr(par, b, p, len, LW);
	if (CHECK(mr)) {
		CHECK(mr->addr == NULL && mr->lkey != 0);
		CHECK_RET(ibv_dereg_mr(mr), 0);
	}
	check_recorded_size(par, b, p, len, what);
	ibv_free_buf(b);
}

static void case_bounce_builtin(void)
{
	struct ibv_context *c = open_bounce("builtin");
	struct ibv_device_attr_ex ax;
	struct ibv_pd *pd, *par;
	struct ibv_buf *b;
	uint8_t *p;

	t_case("bounce, builtin heap: fd-backed buffers, exportable");
	if (!CHECK(c))
		return;
	memset(&ax, 0, sizeof(ax));
	if (CHECK_RET(ibv_query_device_ex(c, NULL, &ax), 0))
		CHECK(ax.device_cap_flags_ex & IBV_DEVICE_CC_DMA_BOUNCE);
	pd = ibv_alloc_pd(c);
	if (!CHECK(pd)) {
		ibv_close_device(c);
		return;
	}
	par = parent_of(c, pd, CC_FLAG, NULL, NULL, NULL);
	if (par) {
		check_cc_buffer(par, 1, "builtin 1 byte");
		check_cc_buffer(par, 3 * page - 100, "builtin 3 pages");
		CHECK_ERRNO_PTR(ibv_alloc_buf(par, 0, &b), EINVAL);
		CHECK_ERRNO_PTR(ibv_alloc_buf(par, SIZE_MAX, &b), ENOMEM);
		CHECK_ERRNO_PTR(ibv_alloc_buf(par, SIZE_MAX / 2, &b), ENOMEM);
		/* more than the RAM: ENOMEM, as the kernel heap would say */
		CHECK_ERRNO_PTR(ibv_alloc_buf(par, ram_bytes() + page, &b), ENOMEM);
	}

	t_case("bounce: plain PD buffers allocate but cannot be registered");
	p = ibv_alloc_buf(pd, page, &b);
	if (CHECK(p)) {
		memset(p, 0, page);
		check_no_export(b, "bounce plain PD");
		CHECK_ERRNO_PTR(ibv_reg_buf_mr(pd, b, p, page, LW), EOPNOTSUPP);
		CHECK_ERRNO_PTR(ibv_reg_mr(pd, p, page, LW), EOPNOTSUPP);
		ibv_free_buf(b);
	}
	/* the range checks still come first */
	if (par) {
		p = ibv_alloc_buf(par, page, &b);
		if (CHECK(p)) {
			CHECK_ERRNO_PTR(ibv_reg_buf_mr(pd, b, p, page, LW), EINVAL);
			ibv_free_buf(b);
		}
	}

	t_case("bounce: DMA-buf wins over custom allocators");
	if (par)
		CHECK_RET(ibv_dealloc_pd(par), 0);
	reset_al(GIVE_MEMORY);
	par = parent_of(c, pd,
			CC_FLAG | IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
				IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
			my_alloc, my_free, &al);
	if (par) {
		p = ibv_alloc_buf(par, page, &b);
		if (CHECK(p)) {
			int fd = ibv_export_buf_dmabuf_fd(b);

			CHECK(fd >= 0 && fd_is(fd, POOL_NAME));
			if (fd >= 0)
				close(fd);
			ibv_free_buf(b);
		}
		CHECK_EQ_INT(al.nalloc, 0);
		CHECK_EQ_INT(al.nfree, 0);
	}

	t_case("bounce: out of fds is EMFILE, for allocation and export");
	if (par) {
		struct ibv_buf *held = NULL;
		struct rlimit old, low;
		int lowest, fd, e;

		/* a buffer that exists before the limit drops, to export under it */
		CHECK(ibv_alloc_buf(par, page, &held));
		lowest = lowest_free_fd();
		if (CHECK(lowest >= 0) && CHECK_EQ_INT(getrlimit(RLIMIT_NOFILE, &old), 0)) {
			low = old;
			low.rlim_cur = (rlim_t)lowest; /* no fd number is free below it */
			if (CHECK_EQ_INT(setrlimit(RLIMIT_NOFILE, &low), 0)) {
				errno = 0;
				p = ibv_alloc_buf(par, page, &b);
				e = errno;
				errno = 0;
				fd = held ? ibv_export_buf_dmabuf_fd(held) : -1;
				CHECK_MSG(!held || (fd == -1 && errno == EMFILE),
					  "export: want -1/EMFILE, got %d/%s", fd,
					  t_errname(errno));
				CHECK_EQ_INT(setrlimit(RLIMIT_NOFILE, &old), 0);
				CHECK_MSG(!p && e == EMFILE, "want NULL/EMFILE, got %s/%s",
					  p ? "a buffer" : "NULL", t_errname(e));
				if (p)
					ibv_free_buf(b);
				if (fd >= 0)
					close(fd);
			}
			/* and with the limit back, the same calls work */
			p = ibv_alloc_buf(par, page, &b);
			if (CHECK(p))
				ibv_free_buf(b);
			fd = held ? ibv_export_buf_dmabuf_fd(held) : -1;
			if (CHECK(fd >= 0))
				close(fd);
		}
		if (held)
			ibv_free_buf(held);
		CHECK_RET(ibv_dealloc_pd(par), 0);
	}
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(c), 0);
}

static void case_bounce_auto_kernel(void)
{
	bool heap = access(HEAP_PATH, F_OK) == 0;
	struct ibv_context *c;
	struct ibv_pd *pd, *par;

	t_case("bounce, auto heap without a kernel heap: the built-in pool");
	c = open_bounce("auto");
	if (!CHECK(c))
		return;
	pd = ibv_alloc_pd(c);
	if (CHECK(pd)) {
		if (heap) {
			printf("# skip: %s exists here, auto uses it (not the built-in pool)\n",
			       HEAP_PATH);
		} else {
			par = parent_of(c, pd, CC_FLAG, NULL, NULL, NULL);
			if (par) {
				check_cc_buffer(par, 2 * page, "auto");
				CHECK_RET(ibv_dealloc_pd(par), 0);
			}
		}
		CHECK_RET(ibv_dealloc_pd(pd), 0);
	}
	CHECK_RET(ibv_close_device(c), 0);

	t_case("bounce, kernel heap missing: parent domain ENOENT");
	c = open_bounce("kernel");
	if (!CHECK(c))
		return;
	pd = ibv_alloc_pd(c);
	if (CHECK(pd)) {
		struct ibv_parent_domain_init_attr pa;

		memset(&pa, 0, sizeof(pa));
		pa.pd = pd;
		pa.comp_mask = CC_FLAG;
		if (heap) {
			printf("# skip: %s exists here, so kernel mode cannot fail with ENOENT\n",
			       HEAP_PATH);
		} else {
			CHECK_ERRNO_PTR(ibv_alloc_parent_domain(c, &pa), ENOENT);
			/* without the opt-in the same device gives a parent domain */
			pa.comp_mask = 0;
			par = ibv_alloc_parent_domain(c, &pa);
			if (CHECK(par))
				CHECK_RET(ibv_dealloc_pd(par), 0);
		}
		CHECK_RET(ibv_dealloc_pd(pd), 0);
	}
	CHECK_RET(ibv_close_device(c), 0);
}

int main(void)
{
	/* static: still reachable when a child's valgrind looks for leaks */
	static struct ibv_context *ctx;

	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	unsetenv("SOFTVERBS_CC_HEAP");
	t_start("api_buf");
	page = (size_t)sysconf(_SC_PAGESIZE);
	t_open_first(&ctx);
	case_plain(ctx);
	case_custom(ctx);
	case_bounce_builtin();
	case_bounce_auto_kernel();
	/* last: fork protection stays on for the rest of the process */
	case_fork(ctx);
	t_case("teardown");
	CHECK_RET(ibv_close_device(ctx), 0);
	return t_finish();
}
