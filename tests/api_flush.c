/* SPDX-License-Identifier: MIT */
/*
 * api_flush.c - RDMA FLUSH (IBTA 1.5), over the same-host link and over
 * UDP (SOFTVERBS_SHM=0):
 *   - between two processes: RDMA WRITEs followed by FLUSHes (global at
 *     the range level; persistent to an MR of a PM DMA handle at the
 *     range and the MR level) complete with IBV_WC_FLUSH, and the target,
 *     which makes no verbs call meanwhile, finds the WRITEs' bytes;
 *   - the device reports IBV_DEVICE_FLUSH_GLOBAL and _PERSISTENT and the
 *     RC ODP bit; FLUSH_GLOBAL registers, FLUSH_PERSISTENT only with a
 *     DMA handle of type PM (EINVAL without one or with a VM one);
 *   - refused: ibv_post_send with IBV_WR_FLUSH, a placement type or level
 *     the verbs do not define, a length over 2^31 (EINVAL), UC QPs with
 *     IBV_QP_EX_WITH_FLUSH (EOPNOTSUPP);
 *   - IBV_WC_REM_ACCESS_ERR for an MR or QP without the FLUSH access
 *     the type needs, a range beyond the MR, and an unknown key at the
 *     MR level.
 */
#include "twoproc.h"

#include "place_util.h"

#include <sched.h>

/* test: timeout=240 */

#define LEN 8192u
#define LW IBV_ACCESS_LOCAL_WRITE
#define FG IBV_ACCESS_FLUSH_GLOBAL
#define FP IBV_ACCESS_FLUSH_PERSISTENT
#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define QACC (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | FG | FP)
#define WLEN 3000u

/* A region of persistent memory: a PM DMA handle and an MR over a buffer. */
struct pmem {
	struct ibv_dmah *d;
	struct ibv_mr *mr;
	uint8_t *buf;
};

/*
 * Contract: a DMA handle of TPH memory type `mem` on `ctx` (the type
 * needs a CPU id and a processing hint: the calling CPU, ph 0), or NULL.
 */
static struct ibv_dmah *dmah_of(struct ibv_context *ctx, uint8_t mem)
{
	int cpu = sched_getcpu();
	struct ibv_dmah_init_attr a = {.comp_mask = IBV_DMAH_INIT_ATTR_MASK_CPU_ID |
						    IBV_DMAH_INIT_ATTR_MASK_PH |
						    IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE,
				       .cpu_id = cpu < 0 ? 0 : (uint32_t)cpu,
				       .tph_mem_type = mem};

	return ibv_alloc_dmah(ctx, &a);
}

/* Contract: set up *p on `pd` with `access`; 0 or -1. */
static int pmem_open(struct pmem *p, struct ibv_pd *pd, int access)
{
	memset(p, 0, sizeof(*p));
	p->d = dmah_of(pd->context, IBV_TPH_MEM_TYPE_PM);
	p->buf = aligned_alloc(4096, LEN);
	if (!CHECK(p->d && p->buf))
		return -1;
	memset(p->buf, 0, LEN);
	p->mr = pu_reg(pd, p->buf, LEN, access, p->d);
	return CHECK_MSG(p->mr, "PM MR: %s", strerror(errno)) ? 0 : -1;
}

static void pmem_close(struct pmem *p)
{
	if (p->mr)
		CHECK_RET(ibv_dereg_mr(p->mr), 0);
	if (p->d)
		CHECK_RET(ibv_dealloc_dmah(p->d), 0);
	free(p->buf);
}

/*
 * Contract: give `e` (fresh from t_ep_init) an RC QP created with
 * WRITE and FLUSH in send_ops_flags, in INIT with `access`; 0 or -1.
 */
static int ex_qp(struct t_ep *e, int access)
{
	struct ibv_qp_init_attr_ex x = {0};

	CHECK_RET(ibv_destroy_qp(e->qp), 0);
	x.qp_type = IBV_QPT_RC;
	x.send_cq = x.recv_cq = e->cq;
	x.cap.max_send_wr = x.cap.max_recv_wr = 16;
	x.cap.max_send_sge = x.cap.max_recv_sge = 1;
	x.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	x.pd = e->pd;
	x.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_FLUSH;
	e->qp = ibv_create_qp_ex(e->ctx, &x);
	if (!e->qp) {
		CHECK_MSG(0, "ibv_create_qp_ex: %s", strerror(errno));
		return -1;
	}
	return t_qp_init(e->qp, access);
}

/* Contract: post one signaled FLUSH on `qp`; ibv_wr_complete's result. */
static int flush(struct ibv_qp *qp, uint64_t wr_id, uint32_t rkey, uint64_t addr, size_t len,
		 uint8_t type, uint8_t level)
{
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(qp);

	if (!CHECK(qx))
		return -1;
	ibv_wr_start(qx);
	qx->wr_id = wr_id;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_flush(qx, rkey, addr, len, type, level);
	return ibv_wr_complete(qx);
}

/* ---- two processes ---- */

struct pm_addr {
	uint64_t addr;
	uint32_t rkey;
};

static void target(int sock, void *arg)
{
	struct t_ep e;
	struct t_addr peer;
	struct pmem pm = {0};
	struct pm_addr pa;
	uint8_t want[WLEN];
	char cmd;

	(void)arg;
	if (t_ep_init(&e, NULL, IBV_QPT_RC, LEN, ACC | FG, 16) ||
	    !CHECK(ibv_modify_qp(e.qp, &(struct ibv_qp_attr){.qp_access_flags = QACC},
				 IBV_QP_ACCESS_FLAGS) == 0) ||
	    pmem_open(&pm, e.pd, ACC | FG | FP) || tp_connect(sock, &e, 0x200, &peer))
		goto out;
	memset(&pa, 0, sizeof(pa)); /* padding too: it crosses a socket */
	pa.addr = (uintptr_t)pm.buf;
	pa.rkey = pm.mr->rkey;
	if (!CHECK(t_xfer(sock, &pa, sizeof(pa), true) == 0) ||
	    !CHECK(t_xfer(sock, &cmd, 1, false) == 0)) /* asleep while the initiator works */
		goto out;
	t_fill(want, WLEN, 3);
	CHECK_MSG(memcmp(e.buf + 100, want, WLEN) == 0, "target: the WRITE before FLUSH differs");
	t_fill(want, WLEN, 4);
	CHECK_MSG(memcmp(pm.buf + 64, want, WLEN) == 0, "target: the WRITE to PM differs");
out:
	cmd = t_st()->failed ? 'f' : 'o';
	t_xfer(sock, &cmd, 1, true);
	pmem_close(&pm);
	t_ep_destroy(&e, true);
}

/* Contract: post a WRITE (`id`) of WLEN bytes at e->buf + off to raddr, then a FLUSH (`id` + 1) of
 * it. */
static void write_flush(struct t_ep *e, uint64_t id, size_t off, uint64_t raddr, uint32_t rkey,
			uint8_t type)
{
	CHECK_RET(t_post(e, IBV_WR_RDMA_WRITE, id, off, WLEN, raddr, rkey, IBV_SEND_SIGNALED), 0);
	CHECK_RET(flush(e->qp, id + 1, rkey, raddr, WLEN, type, IBV_FLUSH_RANGE), 0);
}

static void initiator(int sock, void *arg)
{
	struct t_ep e;
	struct t_addr peer;
	struct pm_addr pa;
	char cmd = 'c';

	(void)arg;
	if (t_ep_init(&e, NULL, IBV_QPT_RC, LEN, ACC, 16) || ex_qp(&e, QACC) ||
	    tp_connect(sock, &e, 0x100, &peer) || !CHECK(t_xfer(sock, &pa, sizeof(pa), false) == 0))
		goto out;
	t_fill(e.buf, WLEN, 3);
	t_fill(e.buf + 4096, WLEN, 4);
	write_flush(&e, 1, 0, peer.addr + 100, peer.rkey, IBV_FLUSH_GLOBAL);
	write_flush(&e, 3, 4096, pa.addr + 64, pa.rkey, IBV_FLUSH_PERSISTENT);
	CHECK_RET(flush(e.qp, 5, pa.rkey, 0, 0, IBV_FLUSH_GLOBAL | IBV_FLUSH_PERSISTENT,
			IBV_FLUSH_MR),
		  0);
	for (uint64_t id = 1; id <= 5; id++)
		tp_expect_wc(e.cq, id, IBV_WC_SUCCESS,
			     id == 1 || id == 3 ? IBV_WC_RDMA_WRITE : IBV_WC_FLUSH);
	CHECK(t_xfer(sock, &cmd, 1, true) == 0);
	CHECK(t_xfer(sock, &cmd, 1, false) == 0 && cmd == 'o');
out:
	t_ep_destroy(&e, true);
}

/* ---- one process ---- */

static void case_caps_and_registration(void)
{
	struct ibv_device_attr_ex x;
	struct ibv_context *ctx = t_open_dev();
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_dmah *vm = pd ? dmah_of(ctx, IBV_TPH_MEM_TYPE_VM) : NULL;
	uint8_t *buf = aligned_alloc(4096, LEN);
	struct ibv_mr *mr;
	struct pmem pm = {0};

	t_case("caps: IBV_DEVICE_FLUSH_*; FLUSH_PERSISTENT registers only with a PM handle");
	if (!CHECK(ctx && pd && vm && buf))
		goto out;
	if (CHECK_RET(ibv_query_device_ex(ctx, NULL, &x), 0)) {
		CHECK(x.device_cap_flags_ex & IBV_DEVICE_FLUSH_GLOBAL);
		CHECK(x.device_cap_flags_ex & IBV_DEVICE_FLUSH_PERSISTENT);
		CHECK(x.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_FLUSH);
	}
	mr = ibv_reg_mr(pd, buf, LEN, LW | FG);
	if (CHECK(mr))
		CHECK_RET(ibv_dereg_mr(mr), 0);
	CHECK_ERRNO_PTR(ibv_reg_mr(pd, buf, LEN, LW | FP), EINVAL);
	CHECK_ERRNO_PTR(pu_reg(pd, buf, LEN, LW | FP, vm), EINVAL);
	CHECK(pmem_open(&pm, pd, LW | FG | FP) == 0);
	pmem_close(&pm);
out:
	if (vm)
		CHECK_RET(ibv_dealloc_dmah(vm), 0);
	if (pd)
		CHECK_RET(ibv_dealloc_pd(pd), 0);
	if (ctx)
		ibv_close_device(ctx);
	free(buf);
}

/*
 * Contract: a connected pair: a (an ex QP with FLUSH, all flush access)
 * and b, b's MR registered with `b_mr`, b's QP granting `b_qp`. 0 or -1.
 */
static int pair(struct t_ep *a, struct t_ep *b, int b_mr, int b_qp)
{
	if (t_ep_init(a, NULL, IBV_QPT_RC, LEN, ACC, 16) || ex_qp(a, QACC) ||
	    t_ep_init(b, NULL, IBV_QPT_RC, LEN, b_mr, 16))
		return -1;
	if (!CHECK(ibv_modify_qp(b->qp, &(struct ibv_qp_attr){.qp_access_flags = (unsigned)b_qp},
				 IBV_QP_ACCESS_FLAGS) == 0))
		return -1;
	return t_connect(a, b, IBV_MTU_1024);
}

static void case_rules(void)
{
	struct ibv_send_wr wr = {0}, *bad;
	struct ibv_qp_init_attr_ex x = {0};
	struct t_ep a, b;

	t_case("post_send FLUSH, undefined type or level, over 2^31: EINVAL; UC: EOPNOTSUPP");
	if (pair(&a, &b, ACC | FG, QACC))
		goto out;
	wr.opcode = IBV_WR_FLUSH;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
	wr.wr.rdma.rkey = b.mr->rkey;
	CHECK_RET(ibv_post_send(a.qp, &wr, &bad), EINVAL);
	CHECK_RET(flush(a.qp, 1, b.mr->rkey, (uintptr_t)b.buf, 8, 0, IBV_FLUSH_RANGE), EINVAL);
	CHECK_RET(flush(a.qp, 1, b.mr->rkey, (uintptr_t)b.buf, 8, 4, IBV_FLUSH_RANGE), EINVAL);
	CHECK_RET(flush(a.qp, 1, b.mr->rkey, (uintptr_t)b.buf, 8, IBV_FLUSH_GLOBAL, 2), EINVAL);
	CHECK_RET(flush(a.qp, 1, b.mr->rkey, (uintptr_t)b.buf, (1ull << 31) + 1, IBV_FLUSH_GLOBAL,
			IBV_FLUSH_RANGE),
		  EINVAL);
	CHECK_EQ_INT(ibv_poll_cq(a.cq, 1, (struct ibv_wc[1]){0}), 0);
	x.qp_type = IBV_QPT_UC;
	x.send_cq = x.recv_cq = a.cq;
	x.cap.max_send_wr = x.cap.max_recv_wr = 4;
	x.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	x.pd = a.pd;
	x.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_FLUSH;
	errno = 0;
	CHECK(ibv_create_qp_ex(a.ctx, &x) == NULL);
	CHECK_EQ_INT(errno, EOPNOTSUPP);

	t_case("FLUSH after a WRITE: IBV_WC_FLUSH, the bytes there; an empty range too");
	t_fill(a.buf, WLEN, 9);
	CHECK_RET(t_post(&a, IBV_WR_RDMA_WRITE, 2, 0, WLEN, (uintptr_t)b.buf + 8, b.mr->rkey, 0),
		  0);
	CHECK_RET(flush(a.qp, 3, b.mr->rkey, (uintptr_t)b.buf + 8, WLEN, IBV_FLUSH_GLOBAL,
			IBV_FLUSH_RANGE),
		  0);
	if (tp_expect_wc(a.cq, 3, IBV_WC_SUCCESS, IBV_WC_FLUSH))
		CHECK(memcmp(a.buf, b.buf + 8, WLEN) == 0);
	CHECK_RET(
		flush(a.qp, 4, b.mr->rkey, (uintptr_t)b.buf, 0, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE),
		0);
	tp_expect_wc(a.cq, 4, IBV_WC_SUCCESS, IBV_WC_FLUSH);
out:
	tp_unpair(&a, &b);
}

/* Contract: one FLUSH from a to b (MR `b_mr`, QP `b_qp`) completes with `status`. */
static void one_flush(int b_mr, int b_qp, int64_t off, size_t len, uint8_t type, uint8_t level,
		      bool bad_key, enum ibv_wc_status status)
{
	struct t_ep a, b;

	if (pair(&a, &b, b_mr, b_qp))
		goto out;
	CHECK_RET(flush(a.qp, 7, b.mr->rkey ^ (bad_key ? 0x5a5a00u : 0), (uintptr_t)b.buf + off,
			len, type, level),
		  0);
	tp_expect_wc(a.cq, 7, status, IBV_WC_FLUSH);
out:
	tp_unpair(&a, &b);
}

static void case_errors(void)
{
	t_case("no FLUSH access (MR, QP, persistent on a global MR), beyond the MR, unknown key: "
	       "REM_ACCESS_ERR");
	one_flush(ACC, QACC, 0, 64, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE, false,
		  IBV_WC_REM_ACCESS_ERR);
	one_flush(ACC | FG, IBV_ACCESS_REMOTE_WRITE, 0, 64, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE,
		  false, IBV_WC_REM_ACCESS_ERR);
	one_flush(ACC | FG, QACC, 0, 64, IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE, false,
		  IBV_WC_REM_ACCESS_ERR);
	one_flush(ACC | FG, QACC, LEN - 8, 16, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE, false,
		  IBV_WC_REM_ACCESS_ERR);
	one_flush(ACC | FG, QACC, 0, 0, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR, true,
		  IBV_WC_REM_ACCESS_ERR);
	one_flush(ACC | FG, QACC, 0, 0, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR, false, IBV_WC_SUCCESS);
}

static void in_process(void)
{
	case_caps_and_registration();
	case_rules();
	case_errors();
}

int main(void)
{
	t_start("api_flush");
	tp_both_modes("WRITEs, FLUSHes global and PM", target, initiator, in_process);
	return t_finish();
}
