/* SPDX-License-Identifier: MIT */
/*
 * api_upstream_dmah: the API scenarios of rdma-core's tests/test_dmah.py
 * (docs/seed-apis.md 4, scenarios 22-27), in C, with the same assertions.
 *
 * The default handle attributes are upstream's: CPU_ID|TPH_MEM_TYPE|PH,
 * CPU 0, volatile memory, ph 0. Upstream skips a scenario when the
 * device does not support DMA handles (EOPNOTSUPP, EPROTONOSUPPORT); the
 * software device does, so such an error fails here. Where upstream only
 * asserts that a call fails, the errno the software device documents is
 * asserted too. Scenario 27 needs RC ODP; the software device reports
 * it (checked), so the scenario runs. Scenario 22 draws its length from
 * 1 byte up: a zero-length MR is EINVAL here (docs/seed-apis.md 5.19).
 */
#include "harness.h"
#include "upstream.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define LW IBV_ACCESS_LOCAL_WRITE

static struct ibv_context *ctx;
static struct ibv_pd *pd;

static struct ibv_dmah_init_attr default_attr(void)
{
	struct ibv_dmah_init_attr a;

	memset(&a, 0, sizeof(a));
	a.comp_mask = IBV_DMAH_INIT_ATTR_MASK_CPU_ID | IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE |
		      IBV_DMAH_INIT_ATTR_MASK_PH;
	a.cpu_id = 0;
	a.tph_mem_type = IBV_TPH_MEM_TYPE_VM;
	a.ph = 0;
	return a;
}

/*
 * MREx(pd, len, access, dmah=): fresh memory registered with ADDR|DMAH.
 * Returns 0 (the MR was checked and deregistered again) or the errno.
 */
static int mrex(size_t len, int access, struct ibv_dmah *d)
{
	struct ibv_mr_init_attr a;
	struct ibv_mr *mr;
	void *mem;
	int e;

	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return errno;
	memset(&a, 0, sizeof(a));
	a.length = len;
	a.access = access;
	a.comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH;
	a.addr = mem;
	a.dmah = d;
	errno = 0;
	mr = ibv_reg_mr_ex(pd, &a);
	e = mr ? 0 : errno;
	if (mr) {
		CHECK(mr->addr == mem && mr->length == len);
		CHECK_RET(ibv_dealloc_dmah(d), EBUSY); /* the MR holds the handle */
		CHECK_RET(ibv_dereg_mr(mr), 0);
	}
	munmap(mem, len);
	return e;
}

/* Allocate with `a`, which must fail with `want`. */
static void alloc_must_fail(struct ibv_dmah_init_attr *a, int want)
{
	struct ibv_dmah *d;

	errno = 0;
	d = ibv_alloc_dmah(ctx, a);
	CHECK_MSG(d == NULL, "ibv_alloc_dmah succeeded");
	CHECK_MSG(d || errno == want, "errno %s, want %s", t_errname(errno), t_errname(want));
	if (d)
		ibv_dealloc_dmah(d);
}

/* 22 */
static void test_dmah_with_mrex(void)
{
	struct ibv_dmah_init_attr a = default_attr();
	struct ibv_dmah *d;
	unsigned int seed = (unsigned int)getpid();
	size_t len;
	int e;

	up_case("test_dmah_with_mrex");
	/* upstream draws from [0, 4 MiB); a 0-byte region is not a region */
	srand(seed);
	len = 1 + (size_t)rand() % ((4u << 20) - 1);
	printf("# length %zu (seed %u)\n", len, seed);
	errno = 0;
	d = ibv_alloc_dmah(ctx, &a);
	if (!CHECK_MSG(d != NULL, "ibv_alloc_dmah: %s (CPU 0 must be in the affinity)",
		       t_errname(errno)))
		return;
	e = mrex(len, LW, d);
	CHECK_MSG(e == 0, "MREx(%zu, LW, dmah): %s", len, t_errname(e));
	CHECK_RET(ibv_dealloc_dmah(d), 0);
}

/* 23 */
static void test_dmah_invalid_ph(void)
{
	struct ibv_dmah_init_attr a = default_attr();

	up_case("test_dmah_invalid_ph");
	a.ph = 4;
	alloc_must_fail(&a, EINVAL);
}

/* 24 */
static void test_dmah_persistent_memory(void)
{
	struct ibv_dmah_init_attr a = default_attr();
	struct ibv_dmah *d;

	up_case("test_dmah_persistent_memory");
	a.tph_mem_type = IBV_TPH_MEM_TYPE_PM;
	errno = 0;
	d = ibv_alloc_dmah(ctx, &a);
	if (CHECK_MSG(d != NULL, "ibv_alloc_dmah(PM): %s", t_errname(errno)))
		CHECK_RET(ibv_dealloc_dmah(d), 0);
}

/* 25: the kernel's attribute parser refuses the enum value */
static void test_dmah_invalid_mem_type(void)
{
	struct ibv_dmah_init_attr a = default_attr();

	up_case("test_dmah_invalid_mem_type");
	a.tph_mem_type = 0xFE;
	alloc_must_fail(&a, EOPNOTSUPP);
}

/* 26: EINVAL when >= the possible CPUs, EPERM for a CPU outside the affinity */
static void test_dmah_inval_cpu_id(void)
{
	struct ibv_dmah_init_attr a = default_attr();
	struct ibv_dmah *d;
	long conf = sysconf(_SC_NPROCESSORS_CONF);

	up_case("test_dmah_inval_cpu_id");
	a.cpu_id = 0xffff;
	a.ph = 3;
	errno = 0;
	d = ibv_alloc_dmah(ctx, &a);
	CHECK_MSG(d == NULL, "ibv_alloc_dmah succeeded");
	if (conf > 0 && conf <= 0xffff)
		CHECK_MSG(d || errno == EINVAL, "errno %s, want EINVAL", t_errname(errno));
	else
		CHECK_MSG(d || errno == EINVAL || errno == EPERM, "errno %s", t_errname(errno));
	if (d)
		ibv_dealloc_dmah(d);
}

/* 27 */
static void test_dmah_mrex_odp_bad_flow(void)
{
	const uint32_t need = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
	struct ibv_dmah_init_attr a = default_attr();
	struct ibv_device_attr_ex ax;
	struct ibv_dmah *d;
	int e;

	up_case("test_dmah_mrex_odp_bad_flow");
	memset(&ax, 0xff, sizeof(ax));
	if (!CHECK_RET(ibv_query_device_ex(ctx, NULL, &ax), 0))
		return;
	/* the software device has explicit ODP for RC, UD and XRC (src/sw/mem/access.c) */
	CHECK_EQ_INT(ax.odp_caps.general_caps, IBV_ODP_SUPPORT);
	CHECK_EQ_INT(ax.odp_caps.per_transport_caps.rc_odp_caps & need, need);
	CHECK_EQ_INT(ax.odp_caps.per_transport_caps.uc_odp_caps, 0);
	CHECK(ax.xrc_odp_caps & IBV_ODP_SUPPORT_SRQ_RECV);
	if ((ax.odp_caps.per_transport_caps.rc_odp_caps & need) != need) {
		up_skip("the device has no ODP");
		return;
	}
	/* upstream's body, for a device with RC ODP */
	errno = 0;
	d = ibv_alloc_dmah(ctx, &a);
	if (!CHECK_MSG(d != NULL, "ibv_alloc_dmah: %s", t_errname(errno)))
		return;
	e = mrex(1 << 16, LW | IBV_ACCESS_ON_DEMAND, d);
	CHECK_MSG(e != 0, "MREx with ON_DEMAND and a dmah succeeded");
	CHECK_RET(ibv_dealloc_dmah(d), 0);
}

int main(void)
{
	t_start("api_upstream_dmah");
	t_open_first(&ctx);
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		printf("Bail out! ibv_alloc_pd: %s\n", t_errname(errno));
		return 1;
	}
	test_dmah_with_mrex();
	test_dmah_invalid_ph();
	test_dmah_persistent_memory();
	test_dmah_invalid_mem_type();
	test_dmah_inval_cpu_id();
	test_dmah_mrex_odp_bad_flow();
	up_case("teardown");
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	return up_finish();
}
