/* SPDX-License-Identifier: MIT */
/*
 * unit_fault_enomem.c - every allocation of the control path fails once.
 *
 * The library's malloc, calloc, realloc and posix_memalign go through
 * wrappers here (linked with --wrap, no LD_PRELOAD) that fail the Nth call
 * made by this thread. For N = 1, 2, ... a program runs (fork protection
 * on, so registration records ranges): list and open the device, a PD, a
 * completion channel, a CQ, two RC QPs, an MR, an SRQ, an AH, a thread
 * domain and a parent domain, a DMA handle and an MR using it, a buffer
 * from ibv_alloc_buf, the QPs to RTS. The verb that meets the failure must fail with ENOMEM (NULL
 * and errno, or the returned error); everything made before it is torn
 * down; no fd stays open (checked here) and no memory leaks (valgrind and
 * ASan check at exit). When the whole program runs through, a WRITE and a
 * READ between the two QPs must work: a failure swallowed on the way
 * would show here. The loop ends at the first N that is never reached.
 */
#include "harness.h"
#include "traffic.h"

/* test: wrap=malloc */
/* test: wrap=calloc */
/* test: wrap=realloc */
/* test: wrap=posix_memalign */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);

static _Thread_local long fail_at, calls; /* fail_at 0: never */

/* True if this call is the one to fail. */
static bool inject(void)
{
	return fail_at && ++calls == fail_at;
}

void *__wrap_malloc(size_t n)
{
	if (inject()) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	if (inject()) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
	if (inject()) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_realloc(p, n);
}

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
	if (inject())
		return ENOMEM;
	return __real_posix_memalign(p, align, n);
}

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define LEN 8192

struct objs {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
	struct ibv_mr *mr, *mr_dmah;
	struct ibv_srq *srq;
	struct ibv_ah *ah;
	struct ibv_td *td;
	struct ibv_pd *par;
	struct ibv_dmah *dmah;
	struct ibv_buf *b;
	void *bp;
	uint8_t *buf;
};

/* Record a failed verb: it must say ENOMEM. Returns false (stop the program). */
static bool failed(const char *verb, int err, long n)
{
	CHECK_MSG(err == ENOMEM, "allocation %ld failing: %s gave %s, want ENOMEM", n, verb,
		  t_errname(err));
	return false;
}

#define PTR_STEP(lhs, expr, n)                                                                     \
	do {                                                                                       \
		errno = 0;                                                                         \
		(lhs) = (expr);                                                                    \
		if (!(lhs))                                                                        \
			return failed(#expr, errno, (n));                                          \
	} while (0)

/* RESET -> INIT -> RTR -> RTS towards `peer`; 0 or the first error. */
static int to_rts(struct ibv_qp *qp, uint32_t peer, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = {0};
	int ret;

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = ACC;
	ret = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer;
	a.rq_psn = 7;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr = t_ah_attr(gid);
	ret = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				    IBV_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 7;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* The program, with allocation n failing; true if every verb succeeded. */
static bool program(struct objs *o, long n)
{
	struct ibv_qp_init_attr ia = {0};
	union ibv_gid gid;
	int i, ret;

	PTR_STEP(o->list, ibv_get_device_list(NULL), n);
	if (!CHECK(o->list[0]))
		return false;
	PTR_STEP(o->ctx, ibv_open_device(o->list[0]), n);
	PTR_STEP(o->pd, ibv_alloc_pd(o->ctx), n);
	PTR_STEP(o->ch, ibv_create_comp_channel(o->ctx), n);
	PTR_STEP(o->cq, ibv_create_cq(o->ctx, 16, NULL, o->ch, 0), n);
	ia.send_cq = ia.recv_cq = o->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	PTR_STEP(o->qp[0], ibv_create_qp(o->pd, &ia), n);
	PTR_STEP(o->qp[1], ibv_create_qp(o->pd, &ia), n);
	PTR_STEP(o->mr, ibv_reg_mr(o->pd, o->buf, LEN, ACC), n);
	ret = ibv_query_gid(o->ctx, 1, 0, &gid);
	if (ret)
		return failed("ibv_query_gid", ret, n);
	{
		struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 1}};
		struct ibv_ah_attr ah = t_ah_attr(&gid);
		struct ibv_td_init_attr ta = {0};
		struct ibv_parent_domain_init_attr pa = {0};
		struct ibv_dmah_init_attr da = {.comp_mask = IBV_DMAH_INIT_ATTR_MASK_PH, .ph = 1};
		struct ibv_mr_init_attr ma = {0};

		PTR_STEP(o->srq, ibv_create_srq(o->pd, &sa), n);
		PTR_STEP(o->ah, ibv_create_ah(o->pd, &ah), n);
		PTR_STEP(o->td, ibv_alloc_td(o->ctx, &ta), n);
		pa.pd = o->pd;
		pa.td = o->td;
		PTR_STEP(o->par, ibv_alloc_parent_domain(o->ctx, &pa), n);
		PTR_STEP(o->dmah, ibv_alloc_dmah(o->ctx, &da), n);
		ma.length = LEN / 2;
		ma.access = IBV_ACCESS_LOCAL_WRITE;
		ma.comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH;
		ma.addr = o->buf + LEN / 2;
		ma.dmah = o->dmah;
		PTR_STEP(o->mr_dmah, ibv_reg_mr_ex(o->pd, &ma), n);
		PTR_STEP(o->bp, ibv_alloc_buf(o->pd, 4096, &o->b), n);
	}
	for (i = 0; i < 2; i++) {
		ret = to_rts(o->qp[i], o->qp[!i]->qp_num, &gid);
		if (ret)
			return failed("ibv_modify_qp", ret, n);
	}
	return true;
}

/* A WRITE and a READ from QP 0 into QP 1's half of the buffer. */
static void check_traffic(struct objs *o, long n)
{
	struct ibv_sge sge = {(uintptr_t)o->buf, LEN / 4, o->mr->lkey};
	struct ibv_send_wr wr = {0}, *bad;
	struct ibv_wc wc;
	int i;

	t_fill(o->buf, LEN / 2, (unsigned int)n);
	memset(o->buf + LEN / 2, 0, LEN / 2);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.rkey = o->mr->rkey;
	for (i = 0; i < 2; i++) {
		wr.wr_id = (uint64_t)i;
		wr.opcode = i ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		/* WRITE [0, L/4) to [L/2, 3L/4); READ that back into [L/4, L/2) */
		sge.addr = (uintptr_t)o->buf + (i ? LEN / 4 : 0);
		wr.wr.rdma.remote_addr = (uintptr_t)o->buf + LEN / 2;
		if (!CHECK(ibv_post_send(o->qp[0], &wr, &bad) == 0))
			return;
		CHECK_MSG(t_poll(o->cq, &wc, 1, 10000) == 1 && wc.status == IBV_WC_SUCCESS,
			  "allocation %ld failed silently: %s fails", n,
			  i ? "RDMA READ" : "RDMA WRITE");
	}
	CHECK(memcmp(o->buf, o->buf + LEN / 2, LEN / 4) == 0);
	CHECK(memcmp(o->buf, o->buf + LEN / 4, LEN / 4) == 0);
}

static void teardown(struct objs *o)
{
	for (int i = 0; i < 2; i++)
		if (o->qp[i])
			CHECK_EQ_INT(ibv_destroy_qp(o->qp[i]), 0);
	if (o->mr)
		CHECK_EQ_INT(ibv_dereg_mr(o->mr), 0);
	if (o->bp)
		ibv_free_buf(o->b);
	if (o->mr_dmah)
		CHECK_EQ_INT(ibv_dereg_mr(o->mr_dmah), 0);
	if (o->dmah)
		CHECK_EQ_INT(ibv_dealloc_dmah(o->dmah), 0);
	if (o->par)
		CHECK_EQ_INT(ibv_dealloc_pd(o->par), 0);
	if (o->td)
		CHECK_EQ_INT(ibv_dealloc_td(o->td), 0);
	if (o->ah)
		CHECK_EQ_INT(ibv_destroy_ah(o->ah), 0);
	if (o->srq)
		CHECK_EQ_INT(ibv_destroy_srq(o->srq), 0);
	if (o->cq)
		CHECK_EQ_INT(ibv_destroy_cq(o->cq), 0);
	if (o->ch)
		CHECK_EQ_INT(ibv_destroy_comp_channel(o->ch), 0);
	if (o->pd)
		CHECK_EQ_INT(ibv_dealloc_pd(o->pd), 0);
	if (o->ctx)
		CHECK_EQ_INT(ibv_close_device(o->ctx), 0);
	if (o->list)
		ibv_free_device_list(o->list);
}

int main(void)
{
	static uint8_t buf[LEN] __attribute__((aligned(4096)));
	struct objs o;
	long n, reached = 0;
	int fds;

	t_start("unit_fault_enomem");
	t_case("each allocation fails once: ENOMEM, nothing left behind");
	CHECK_EQ_INT(ibv_fork_init(), 0);
	fds = t_count_fds();
	for (n = 1; n < 10000; n++) {
		bool ok;

		memset(&o, 0, sizeof(o));
		o.buf = buf;
		calls = 0;
		fail_at = n;
		ok = program(&o, n);
		reached = calls;
		fail_at = 0;
		if (ok && reached >= n)
			CHECK_MSG(0, "allocation %ld failed, yet every verb succeeded", n);
		if (ok)
			check_traffic(&o, n);
		teardown(&o);
		CHECK_MSG(t_count_fds() == fds, "allocation %ld failing: %d fds open, %d before", n,
			  t_count_fds(), fds);
		if (reached < n)
			break; /* the program made fewer than n allocations: all covered */
	}
	printf("# %ld allocations, each failed once\n", n - 1);
	CHECK(n > 10);
	return t_finish();
}
