/* SPDX-License-Identifier: MIT */
/*
 * api_fault_memlock.c - RLIMIT_MEMLOCK does not limit registration.
 *
 * rdma-core on a kernel device pins registered pages and fails
 * ibv_reg_mr() with ENOMEM past RLIMIT_MEMLOCK (without CAP_IPC_LOCK).
 * The software device pins nothing (like an on-demand-paging MR on a
 * real adapter), so it does not charge registrations to the limit: with
 * the soft limit at 0, where mlock(2) of a single page fails, MRs far
 * larger than the usual 8 MiB default register by address, through
 * ibv_reg_mr_ex and from a memfd, ibv_alloc_buf gives as much, and data
 * moves through them (docs/compatibility.md, "Memory"). The test drops
 * CAP_IPC_LOCK first, so that it means the same run as root.
 */
#include "harness.h"
#include "traffic.h"

#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#define BIG (32u << 20) /* four times the common default limit */
#define XFER (1u << 20)
#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

/* Drop CAP_IPC_LOCK (root ignores RLIMIT_MEMLOCK with it), for this process only. */
static void drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	const unsigned int bit = 1u << (CAP_IPC_LOCK % 32);

	if (syscall(SYS_capget, &h, d))
		return;
	d[CAP_IPC_LOCK / 32].effective &= ~bit;
	d[CAP_IPC_LOCK / 32].permitted &= ~bit;
	d[CAP_IPC_LOCK / 32].inheritable &= ~bit;
	if (syscall(SYS_capset, &h, d))
		printf("# capset: %s\n", t_errname(errno));
}

static uint8_t *map_big(void)
{
	uint8_t *p = mmap(NULL, BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int main(void)
{
	struct rlimit r;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *m1 = NULL, *m2 = NULL, *m3 = NULL, *m4 = NULL;
	struct ibv_buf *b = NULL;
	uint8_t *p1, *p2, *pb = NULL;
	int mfd;
	long page = sysconf(_SC_PAGESIZE);

	t_start("api_fault_memlock");
	if (getrlimit(RLIMIT_MEMLOCK, &r))
		t_skip_all("getrlimit(RLIMIT_MEMLOCK) fails");
	drop_ipc_lock();
	r.rlim_cur = 0;
	if (setrlimit(RLIMIT_MEMLOCK, &r))
		t_skip_all("cannot lower RLIMIT_MEMLOCK");

	t_case("the limit is in force: mlock of one page fails");
	p1 = map_big();
	p2 = map_big();
	if (!p1 || !p2) {
		printf("Bail out! mmap: %s\n", t_errname(errno));
		return 1;
	}
	if (mlock(p1, (size_t)page) == 0) {
		printf("# mlock succeeded: CAP_IPC_LOCK, the limit binds nothing here\n");
		munlock(p1, (size_t)page);
	} else {
		CHECK_MSG(errno == ENOMEM || errno == EPERM, "mlock: %s", t_errname(errno));
	}

	t_case("registration is not charged to RLIMIT_MEMLOCK");
	t_open_first(&ctx);
	pd = ibv_alloc_pd(ctx);
	if (!CHECK(pd))
		return t_finish();
	m1 = ibv_reg_mr(pd, p1, BIG, ACC);
	CHECK_MSG(m1, "ibv_reg_mr(%u MiB): %s", BIG >> 20, t_errname(errno));
	m2 = ibv_reg_mr_ex(pd, &(struct ibv_mr_init_attr){.length = BIG,
							  .access = ACC,
							  .comp_mask = IBV_REG_MR_MASK_ADDR,
							  .addr = p2});
	CHECK_MSG(m2, "ibv_reg_mr_ex(%u MiB): %s", BIG >> 20, t_errname(errno));
	mfd = memfd_create("api_fault_memlock", MFD_CLOEXEC);
	if (CHECK(mfd >= 0) && CHECK(ftruncate(mfd, BIG) == 0)) {
		m3 = ibv_reg_dmabuf_mr(pd, 0, BIG, 0, mfd, ACC);
		CHECK_MSG(m3, "ibv_reg_dmabuf_mr(%u MiB): %s", BIG >> 20, t_errname(errno));
	}
	if (mfd >= 0)
		close(mfd);
	pb = ibv_alloc_buf(pd, BIG, &b);
	CHECK_MSG(pb, "ibv_alloc_buf(%u MiB): %s", BIG >> 20, t_errname(errno));
	if (pb) {
		m4 = ibv_reg_buf_mr(pd, b, pb, BIG, ACC);
		CHECK_MSG(m4, "ibv_reg_buf_mr(%u MiB): %s", BIG >> 20, t_errname(errno));
	}

	t_case("data moves through them");
	if (m1 && m2) {
		struct t_ep a, c;
		struct ibv_sge sge = {(uintptr_t)p1 + BIG - XFER, XFER, 0};
		struct ibv_send_wr wr = {0}, *bad;
		struct ibv_wc wc;

		memset(&a, 0, sizeof(a));
		memset(&c, 0, sizeof(c));
		if (!t_ep_init(&a, ctx, IBV_QPT_RC, 4096, ACC, 4) &&
		    !t_ep_init(&c, ctx, IBV_QPT_RC, 4096, ACC, 4) &&
		    !t_connect(&a, &c, IBV_MTU_4096)) {
			/* the QPs' PDs differ from `pd`: register the same memory on theirs */
			struct ibv_mr *src = ibv_reg_mr(a.pd, p1, BIG, ACC);
			struct ibv_mr *dst = ibv_reg_mr(c.pd, p2, BIG, ACC);

			if (CHECK(src && dst)) {
				t_fill(p1 + BIG - XFER, XFER, 9);
				sge.lkey = src->lkey;
				wr.wr_id = 1;
				wr.sg_list = &sge;
				wr.num_sge = 1;
				wr.opcode = IBV_WR_RDMA_WRITE;
				wr.send_flags = IBV_SEND_SIGNALED;
				wr.wr.rdma.remote_addr = (uintptr_t)p2 + BIG - XFER;
				wr.wr.rdma.rkey = dst->rkey;
				CHECK(ibv_post_send(a.qp, &wr, &bad) == 0);
				CHECK(t_poll(a.cq, &wc, 1, 10000) == 1 &&
				      wc.status == IBV_WC_SUCCESS);
				CHECK(memcmp(p1 + BIG - XFER, p2 + BIG - XFER, XFER) == 0);
			}
			if (src)
				CHECK_EQ_INT(ibv_dereg_mr(src), 0);
			if (dst)
				CHECK_EQ_INT(ibv_dereg_mr(dst), 0);
		}
		t_ep_destroy(&a, false);
		t_ep_destroy(&c, false);
	}

	t_case("teardown");
	if (m4)
		CHECK_EQ_INT(ibv_dereg_mr(m4), 0);
	if (pb)
		ibv_free_buf(b);
	if (m3)
		CHECK_EQ_INT(ibv_dereg_mr(m3), 0);
	if (m2)
		CHECK_EQ_INT(ibv_dereg_mr(m2), 0);
	if (m1)
		CHECK_EQ_INT(ibv_dereg_mr(m1), 0);
	CHECK_EQ_INT(ibv_dealloc_pd(pd), 0);
	CHECK_EQ_INT(ibv_close_device(ctx), 0);
	munmap(p1, BIG);
	munmap(p2, BIG);
	return t_finish();
}
