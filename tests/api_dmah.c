/* SPDX-License-Identifier: MIT */
/*
 * api_dmah: ibv_alloc_dmah / ibv_dealloc_dmah and DMA handles in
 * ibv_reg_mr_ex (docs/seed-apis.md 1.5, 1.8; docs/cc-and-tph.md).
 *
 * Every row of the validation table in docs/cc-and-tph.md, and the order
 * of the rows wherever two of them would give different errnos: unknown
 * bits before a missing PH, PH and the CPU_ID/TPH_MEM_TYPE pairing before
 * the handle limit and the memory type, the limit before the memory type,
 * the memory type before the CPU, the CPU range before the affinity, and
 * the affinity before ph. Then what a handle does to MRs: EBUSY while an
 * MR uses it (the handle still usable), both registration paths, ODP and
 * rereg refused, and a handle of another context refused.
 */
#include "harness.h"
#include "place_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define LW IBV_ACCESS_LOCAL_WRITE
#define M_CPU IBV_DMAH_INIT_ATTR_MASK_CPU_ID
#define M_PH IBV_DMAH_INIT_ATTR_MASK_PH
#define M_MEM IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE
#define M_ALL (M_CPU | M_PH | M_MEM)
#define VM IBV_TPH_MEM_TYPE_VM
#define PM IBV_TPH_MEM_TYPE_PM

static struct ibv_context *ctx;
static size_t page;
static unsigned int ncpus_possible; /* the kernel's nr_cpu_ids */
static uint32_t my_cpu; /* a CPU this thread may run on */

/* Highest CPU number in /sys/devices/system/cpu/possible, plus one. */
static unsigned int read_possible(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
	char line[256], *s, *end;
	unsigned long v, max = 0;

	if (!f || !fgets(line, sizeof(line), f)) {
		if (f)
			fclose(f);
		return 0;
	}
	fclose(f);
	for (s = line; *s;) {
		v = strtoul(s, &end, 10);
		if (end == s)
			break;
		if (v + 1 > max)
			max = v + 1;
		s = end;
		if (*s == '-' || *s == ',')
			s++;
	}
	return (unsigned int)max;
}

/*
 * Try one allocation. Returns 0 on success (the handle is deallocated
 * again), else the errno.
 */
static int try_alloc(uint32_t mask, uint32_t cpu, uint8_t ph, uint8_t mem)
{
	struct ibv_dmah_init_attr a;
	struct ibv_dmah *d;
	int e;

	memset(&a, 0, sizeof(a));
	a.comp_mask = mask;
	a.cpu_id = cpu;
	a.ph = ph;
	a.tph_mem_type = mem;
	errno = 0;
	d = ibv_alloc_dmah(ctx, &a);
	if (!d) {
		e = errno;
		return e ? e : -1;
	}
	CHECK_MSG(d->context == ctx, "handle context");
	CHECK_RET(ibv_dealloc_dmah(d), 0);
	return 0;
}

#define CHECK_ALLOC(mask, cpu, ph, mem, want)                                                      \
	t_check(try_alloc((mask), (cpu), (ph), (mem)) == (want), __FILE__, __LINE__,               \
		"alloc(mask 0x%x, cpu %u, ph %u, mem %u): want %s", (unsigned)(mask),              \
		(unsigned)(cpu), (unsigned)(ph), (unsigned)(mem), t_errname(want))

static void case_rows(void)
{
	static const uint32_t unknown[] = {1u << 3, 1u << 7, 1u << 31};
	size_t i;

	t_case("row 1: unknown comp_mask bits are EOPNOTSUPP");
	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		CHECK_ALLOC(unknown[i] | M_ALL, my_cpu, 0, VM, EOPNOTSUPP);
		CHECK_ALLOC(unknown[i] | M_PH, 0, 0, VM, EOPNOTSUPP);
		/* before row 2 (no PH), row 3 (one of CPU/MEM) and rows 5-8 */
		CHECK_ALLOC(unknown[i], 0, 0, VM, EOPNOTSUPP);
		CHECK_ALLOC(unknown[i] | M_CPU, my_cpu, 0, VM, EOPNOTSUPP);
		CHECK_ALLOC(unknown[i] | M_ALL, 0xffff, 9, 0xFE, EOPNOTSUPP);
	}

	t_case("row 2: PH missing is EINVAL");
	CHECK_ALLOC(0, 0, 0, VM, EINVAL);
	CHECK_ALLOC(M_CPU | M_MEM, my_cpu, 0, VM, EINVAL);
	/* with exactly one of CPU/MEM as well */
	CHECK_ALLOC(M_CPU, my_cpu, 0, VM, EINVAL);
	CHECK_ALLOC(M_MEM, 0, 0, PM, EINVAL);
	/* before row 5 (memory type) */
	CHECK_ALLOC(M_CPU | M_MEM, my_cpu, 0, 0xFE, EINVAL);
	CHECK_ALLOC(M_MEM, 0, 0, 0xFE, EINVAL);

	t_case("row 3: exactly one of CPU_ID and TPH_MEM_TYPE is EINVAL");
	CHECK_ALLOC(M_PH | M_CPU, my_cpu, 0, VM, EINVAL);
	CHECK_ALLOC(M_PH | M_MEM, 0, 0, VM, EINVAL);
	CHECK_ALLOC(M_PH | M_MEM, 0, 0, PM, EINVAL);
	/* before rows 5 and 7 */
	CHECK_ALLOC(M_PH | M_MEM, 0, 0, 0xFE, EINVAL);

	t_case("row 5: tph_mem_type >= 2 is EOPNOTSUPP");
	CHECK_ALLOC(M_ALL, my_cpu, 0, 2, EOPNOTSUPP);
	CHECK_ALLOC(M_ALL, my_cpu, 0, 0xFE, EOPNOTSUPP);
	CHECK_ALLOC(M_ALL, my_cpu, 0, 0xFF, EOPNOTSUPP);
	/* before row 6 (cpu out of range) and row 8 (ph) */
	CHECK_ALLOC(M_ALL, 0xffff, 0, 0xFE, EOPNOTSUPP);
	CHECK_ALLOC(M_ALL, my_cpu, 4, 0xFE, EOPNOTSUPP);

	t_case("row 6: cpu_id >= the number of possible CPUs is EINVAL");
	CHECK_ALLOC(M_ALL, ncpus_possible, 0, VM, EINVAL);
	CHECK_ALLOC(M_ALL, 0xffff, 3, VM, EINVAL);
	CHECK_ALLOC(M_ALL, UINT32_MAX, 0, PM, EINVAL);
	/* the last possible CPU is in range: success, or EPERM outside the affinity */
	{
		int e = try_alloc(M_ALL, ncpus_possible - 1, 0, VM);

		CHECK_MSG(e == 0 || e == EPERM, "cpu %u: %s", ncpus_possible - 1, t_errname(e));
	}
	/* before row 8 */
	CHECK_ALLOC(M_ALL, ncpus_possible, 4, VM, EINVAL);

	t_case("row 8: ph > 3 is EINVAL");
	CHECK_ALLOC(M_PH, 0, 4, VM, EINVAL);
	CHECK_ALLOC(M_PH, 0, 0xFF, VM, EINVAL);
	CHECK_ALLOC(M_ALL, my_cpu, 4, VM, EINVAL);
	CHECK_ALLOC(M_ALL, my_cpu, 0x80, PM, EINVAL);

	t_case("valid handles: PH only, VM, PM, every ph");
	for (i = 0; i <= 3; i++) {
		CHECK_ALLOC(M_PH, 0, (uint8_t)i, VM, 0);
		CHECK_ALLOC(M_ALL, my_cpu, (uint8_t)i, VM, 0);
		CHECK_ALLOC(M_ALL, my_cpu, (uint8_t)i, PM, 0);
	}
	/* fields without their bit are not looked at */
	CHECK_ALLOC(M_PH, 0xffff, 1, 0xFE, 0);
}

/* Row 7: a CPU outside the calling thread's affinity. */
static void case_affinity(void)
{
	cpu_set_t old, one;
	uint32_t other;

	t_case("row 7: a CPU outside the caller's affinity is EPERM");
	if (ncpus_possible < 2) {
		printf("# skip: only one possible CPU, so no CPU lies outside any affinity\n");
		return;
	}
	other = my_cpu == 0 ? 1 : 0;
	if (!CHECK_EQ_INT(pthread_getaffinity_np(pthread_self(), sizeof(old), &old), 0))
		return;
	CPU_ZERO(&one);
	CPU_SET(my_cpu, &one);
	if (!CHECK_EQ_INT(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0))
		return;
	CHECK_ALLOC(M_ALL, other, 0, VM, EPERM);
	CHECK_ALLOC(M_ALL, other, 3, PM, EPERM);
	CHECK_ALLOC(M_ALL, my_cpu, 0, VM, 0);
	/* row 6 before 7, row 7 before 8 */
	CHECK_ALLOC(M_ALL, ncpus_possible, 0, VM, EINVAL);
	CHECK_ALLOC(M_ALL, other, 4, VM, EPERM);
	/* row 5 before 7 */
	CHECK_ALLOC(M_ALL, other, 0, 0xFE, EOPNOTSUPP);
	CHECK_EQ_INT(pthread_setaffinity_np(pthread_self(), sizeof(old), &old), 0);
	/* back to the old mask: the other CPU is fine again if it is in it */
	if (CPU_ISSET(other, &old))
		CHECK_ALLOC(M_ALL, other, 0, VM, 0);
}

/* Row 4: the device's handle limit is ENOMEM, and comes before row 5. */
static void case_limit(void)
{
	enum {
		BOUND = 1 << 16
	};
	struct ibv_dmah_init_attr a = {.comp_mask = M_PH, .ph = 2};
	struct ibv_dmah **h = calloc(BOUND, sizeof(*h));
	int n = 0, e = 0, i;

	t_case("row 4: more handles than the device's limit is ENOMEM");
	if (!CHECK(h))
		return;
	for (n = 0; n < BOUND; n++) {
		errno = 0;
		h[n] = ibv_alloc_dmah(ctx, &a);
		if (!h[n]) {
			e = errno;
			break;
		}
	}
	printf("# the limit is %d handles\n", n);
	CHECK_MSG(n > 0 && n < BOUND, "no limit below %d handles", BOUND);
	CHECK_MSG(e == ENOMEM, "at the limit: %s", t_errname(e));
	if (n > 0 && n < BOUND) {
		/* the same request fails again: a limit, not chance */
		CHECK_ALLOC(M_PH, 0, 2, VM, ENOMEM);
		/* rows 1-3 come before the limit, row 5 after it */
		CHECK_ALLOC(1u << 5 | M_PH, 0, 2, VM, EOPNOTSUPP);
		CHECK_ALLOC(M_CPU, my_cpu, 0, VM, EINVAL);
		CHECK_ALLOC(M_PH | M_CPU, my_cpu, 0, VM, EINVAL);
		CHECK_ALLOC(M_ALL, my_cpu, 0, 0xFE, ENOMEM);
		CHECK_ALLOC(M_ALL, 0xffff, 0, VM, ENOMEM);
		/*
		 * One freed: requests refused by rows 5-8 do not use up the
		 * free unit, so one more handle still fits; then the limit again.
		 */
		CHECK_RET(ibv_dealloc_dmah(h[n - 1]), 0);
		CHECK_ALLOC(M_ALL, my_cpu, 0, 0xFE, EOPNOTSUPP);
		CHECK_ALLOC(M_ALL, 0xffff, 0, VM, EINVAL);
		CHECK_ALLOC(M_PH, 0, 4, VM, EINVAL);
		h[n - 1] = ibv_alloc_dmah(ctx, &a);
		CHECK_MSG(h[n - 1] != NULL, "the freed unit: %s", t_errname(errno));
		CHECK_ALLOC(M_PH, 0, 2, VM, ENOMEM);
	}
	for (i = 0; i < n; i++)
		if (h[i])
			CHECK_RET(ibv_dealloc_dmah(h[i]), 0);
	/* all of them came back: the limit is the same again */
	for (i = 0; i < n; i++) {
		h[i] = ibv_alloc_dmah(ctx, &a);
		if (!h[i])
			break;
	}
	CHECK_MSG(i == n, "only %d of %d handles the second time", i, n);
	while (i > 0)
		CHECK_RET(ibv_dealloc_dmah(h[--i]), 0);
	free(h);
	CHECK_ALLOC(M_PH, 0, 2, VM, 0);
}

static struct ibv_mr *reg_dmah(struct ibv_pd *pd, void *addr, size_t len, int access,
			       struct ibv_dmah *d)
{
	return pu_reg(pd, addr, len, access, d);
}

static struct ibv_mr *reg_dmah_fd(struct ibv_pd *pd, int fd, uint64_t off, size_t len,
				  struct ibv_dmah *d)
{
	struct ibv_mr_init_attr a;

	memset(&a, 0, sizeof(a));
	a.length = len;
	a.access = LW;
	a.comp_mask = IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET | IBV_REG_MR_MASK_IOVA |
		      IBV_REG_MR_MASK_DMAH;
	a.fd = fd;
	a.fd_offset = off;
	a.iova = 0x100000 + off;
	a.dmah = d;
	errno = 0;
	return ibv_reg_mr_ex(pd, &a);
}

static void case_mrs(void)
{
	struct ibv_dmah_init_attr da = {
		.comp_mask = M_ALL,
		.cpu_id = my_cpu,
		.ph = 1,
		.tph_mem_type = PM,
	};
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_context *ctx2;
	struct ibv_dmah *d, *d2;
	struct ibv_mr *m1, *m2, *m3;
	uint8_t *mem;
	int mfd;

	t_case("dealloc: EBUSY while an MR uses the handle, which stays usable");
	mem = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mfd = memfd_create("api_dmah", MFD_CLOEXEC);
	if (!CHECK(pd) || !CHECK(mem != MAP_FAILED) || !CHECK(mfd >= 0) ||
	    !CHECK_EQ_INT(ftruncate(mfd, (off_t)(4 * page)), 0))
		return;
	d = ibv_alloc_dmah(ctx, &da);
	if (!CHECK_MSG(d != NULL, "alloc: %s", t_errname(errno)))
		return;
	CHECK_RET(ibv_dealloc_dmah(d), 0);
	d = ibv_alloc_dmah(ctx, &da);
	if (!CHECK(d))
		return;
	m1 = reg_dmah(pd, mem, page, LW, d);
	if (CHECK_MSG(m1 != NULL, "address path: %s", t_errname(errno))) {
		CHECK(m1->addr == mem && m1->length == page && m1->lkey != 0);
		CHECK_RET(ibv_dealloc_dmah(d), EBUSY);
		CHECK_RET(ibv_dealloc_dmah(d), EBUSY);
	}
	/* still valid after EBUSY: another MR, this time on the fd path */
	m2 = reg_dmah_fd(pd, mfd, page, 2 * page, d);
	if (CHECK_MSG(m2 != NULL, "fd path: %s", t_errname(errno)))
		CHECK(m2->addr == (void *)(uintptr_t)page && m2->length == 2 * page);
	m3 = reg_dmah(pd, mem + page, 3 * page, LW | IBV_ACCESS_REMOTE_WRITE, d);
	CHECK_MSG(m3 != NULL, "third MR: %s", t_errname(errno));
	if (m1)
		CHECK_RET(ibv_dereg_mr(m1), 0);
	CHECK_RET(ibv_dealloc_dmah(d), EBUSY);
	if (m2)
		CHECK_RET(ibv_dereg_mr(m2), 0);
	CHECK_RET(ibv_dealloc_dmah(d), m3 ? EBUSY : 0);

	t_case("rereg of an MR with a handle: IBV_REREG_MR_ERR_CMD, EOPNOTSUPP");
	if (m3) {
		errno = 0;
		CHECK_EQ_INT(ibv_rereg_mr(m3, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, LW),
			     IBV_REREG_MR_ERR_CMD);
		CHECK_EQ_INT(errno, EOPNOTSUPP);
		errno = 0;
		CHECK_EQ_INT(ibv_rereg_mr(m3, IBV_REREG_MR_CHANGE_TRANSLATION, pd, mem, page, 0),
			     IBV_REREG_MR_ERR_CMD);
		CHECK_EQ_INT(errno, EOPNOTSUPP);
		/* access bits without CHANGE_ACCESS: rdma-core's input error, before the device */
		errno = 0;
		CHECK_EQ_INT(ibv_rereg_mr(m3, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, LW),
			     IBV_REREG_MR_ERR_INPUT);
		CHECK_EQ_INT(errno, EINVAL);
		/* the MR is unchanged and still holds the handle */
		CHECK(m3->addr == mem + page && m3->length == 3 * page);
		CHECK_RET(ibv_dealloc_dmah(d), EBUSY);
		CHECK_RET(ibv_dereg_mr(m3), 0);
		CHECK_RET(ibv_dealloc_dmah(d), 0);
	}

	t_case("ODP with a handle is EOPNOTSUPP");
	d = ibv_alloc_dmah(ctx, &(struct ibv_dmah_init_attr){.comp_mask = M_PH});
	if (CHECK(d)) {
		CHECK_ERRNO_PTR(reg_dmah(pd, mem, page, LW | IBV_ACCESS_ON_DEMAND, d), EOPNOTSUPP);
		/* the failure holds no use count */
		CHECK_RET(ibv_dealloc_dmah(d), 0);
	}

	t_case("a handle of another context is EINVAL");
	ctx2 = ibv_open_device(ctx->device);
	if (CHECK(ctx2)) {
		d2 = ibv_alloc_dmah(ctx2, &(struct ibv_dmah_init_attr){.comp_mask = M_PH});
		if (CHECK(d2)) {
			CHECK(d2->context == ctx2);
			CHECK_ERRNO_PTR(reg_dmah(pd, mem, page, LW, d2), EINVAL);
			CHECK_ERRNO_PTR(reg_dmah_fd(pd, mfd, 0, page, d2), EINVAL);
			CHECK_RET(ibv_dealloc_dmah(d2), 0);
		}
		CHECK_RET(ibv_close_device(ctx2), 0);
	}
	close(mfd);
	munmap(mem, 4 * page);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

int main(void)
{
	cpu_set_t set;
	int c;

	t_start("api_dmah");
	page = (size_t)sysconf(_SC_PAGESIZE);
	ncpus_possible = read_possible();
	if (!ncpus_possible || sched_getaffinity(0, sizeof(set), &set)) {
		printf("Bail out! cannot read the possible CPUs or the affinity\n");
		return 1;
	}
	for (c = CPU_SETSIZE - 1; c >= 0; c--)
		if (CPU_ISSET(c, &set))
			my_cpu = (uint32_t)c; /* the lowest allowed CPU */
	printf("# %u possible CPUs, using CPU %u\n", ncpus_possible, my_cpu);
	t_open_first(&ctx);
	case_rows();
	case_affinity();
	case_limit();
	case_mrs();
	t_case("teardown");
	CHECK_RET(ibv_close_device(ctx), 0);
	return t_finish();
}
