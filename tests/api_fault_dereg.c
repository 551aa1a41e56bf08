/* SPDX-License-Identifier: MIT */
/*
 * api_fault_dereg.c - MRs deregistered while RDMA targets them.
 *
 * An initiator streams RDMA WRITEs, READs or atomics at a target MR; the
 * target deregisters it after k of them completed (k varies) and at once
 * unmaps the memory, as an application may as soon as ibv_dereg_mr()
 * returns. Any access by the device after that is a crash (SIGSEGV) here,
 * and a use-after-free for valgrind and ASan. Each operation ends as
 * SUCCESS (it was placed before the deregistration), then exactly one
 * IBV_WC_REM_ACCESS_ERR, then IBV_WC_WR_FLUSH_ERR, in posting order; the
 * responder's QP goes to ERR (with IBV_EVENT_QP_ACCESS_ERR). The same for
 * the initiator's own MR (the source of WRITEs, the sink of READs): the
 * error is then IBV_WC_LOC_PROT_ERR.
 */
#include "harness.h"
#include "traffic.h"

#include <sys/mman.h>

/* test: timeout=180 */

#define N 24 /* WRs posted before the deregistration */
#define CHUNK 65536u /* WRITE and READ size: 16 packets at MTU 4096 */
#define REGION (N * CHUNK)
#define ACC                                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

static struct ibv_context *ctx;

struct region {
	uint8_t *p;
	struct ibv_mr *mr;
};

static int region_map(struct region *r, struct ibv_pd *pd)
{
	r->p = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!CHECK(r->p != MAP_FAILED)) {
		r->p = NULL;
		return -1;
	}
	r->mr = ibv_reg_mr(pd, r->p, REGION, ACC);
	return CHECK(r->mr) ? 0 : -1;
}

/* Deregister and unmap at once; later device accesses fault. */
static void region_drop(struct region *r)
{
	if (r->mr)
		CHECK_EQ_INT(ibv_dereg_mr(r->mr), 0);
	if (r->p)
		munmap(r->p, REGION);
	r->mr = NULL;
	r->p = NULL;
}

/* Post WR `i` of operation `op` from `src` (lkey) to the target at raddr/rkey. */
static int post_op(struct t_ep *a, enum ibv_wr_opcode op, uint64_t i, const struct region *src,
		   uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	bool atomic = op == IBV_WR_ATOMIC_FETCH_AND_ADD;
	uint64_t off = atomic ? (i % N) * 8 : (i % N) * CHUNK;
	struct ibv_sge sge = {.addr = (uintptr_t)src->p + (i % N) * CHUNK,
			      .length = atomic ? 8 : CHUNK,
			      .lkey = lkey};
	struct ibv_send_wr wr = {0}, *bad;

	wr.wr_id = i;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (atomic) {
		wr.wr.atomic.remote_addr = raddr + off;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = raddr + off;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(a->qp, &wr, &bad);
}

static const char *op_name(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_WRITE ? "WRITE" : op == IBV_WR_RDMA_READ ? "READ" : "FETCH_ADD";
}

static int q_state_of(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	return ibv_query_qp(qp, &a, IBV_QP_STATE, &i) ? -1 : (int)a.qp_state;
}

/*
 * One round: N operations `op`, then after k completions the target MR
 * (remote) or the initiator's MR (!remote) goes, then two more operations.
 * Returns how many completed successfully.
 */
static int round_of(enum ibv_wr_opcode op, bool remote, int k)
{
	struct t_ep a, b;
	struct region src = {0}, tgt = {0};
	struct ibv_wc wc;
	enum ibv_wc_status want_err = remote ? IBV_WC_REM_ACCESS_ERR : IBV_WC_LOC_PROT_ERR;
	uint32_t lkey, rkey;
	uint64_t raddr, i, next = 0, total = N + 2;
	int ok = 0, errs = 0, got = 0;

	if (t_ep_init(&a, ctx, IBV_QPT_RC, 4096, ACC, N + 4) ||
	    t_ep_init(&b, ctx, IBV_QPT_RC, 4096, ACC, N + 4) || t_connect(&a, &b, IBV_MTU_4096) ||
	    region_map(&src, a.pd) || region_map(&tgt, b.pd))
		goto out;
	lkey = src.mr->lkey;
	rkey = tgt.mr->rkey;
	raddr = (uintptr_t)tgt.p;
	for (i = 0; i < N; i++)
		if (!CHECK(post_op(&a, op, i, &src, lkey, raddr, rkey) == 0))
			goto out;
	/* wait for k completions, then pull the memory from under the rest */
	while (got < k) {
		if (!CHECK_MSG(t_poll(a.cq, &wc, 1, 10000) == 1, "%s: no completion", op_name(op)))
			goto out;
		CHECK_EQ_INT(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ_INT(wc.wr_id, next);
		next++;
		got++;
		ok++;
	}
	region_drop(remote ? &tgt : &src);
	for (i = N; i < total; i++)
		CHECK(post_op(&a, op, i, &src, lkey, raddr, rkey) == 0);
	for (; next < total; next++) {
		if (!CHECK_MSG(t_poll(a.cq, &wc, 1, 10000) == 1,
			       "%s: no completion for %llu (hang)", op_name(op),
			       (unsigned long long)next))
			break;
		if (!CHECK_MSG(wc.wr_id == next, "%s: completion %llu, want %llu", op_name(op),
			       (unsigned long long)wc.wr_id, (unsigned long long)next))
			break;
		if (wc.status == want_err) {
			errs++;
		} else if (!CHECK_MSG(wc.status == (errs ? IBV_WC_WR_FLUSH_ERR : IBV_WC_SUCCESS),
				      "%s: wr %llu: %s after %d errors", op_name(op),
				      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
				      errs)) {
			break;
		}
		ok += wc.status == IBV_WC_SUCCESS;
	}
	CHECK_MSG(errs == 1, "%s k=%d: %d %s", op_name(op), k, errs, ibv_wc_status_str(want_err));
	CHECK_EQ_INT(q_state_of(a.qp), IBV_QPS_ERR);
	if (remote) {
		/* the responder's QP errs too (its own async event says why) */
		struct ibv_async_event ev;
		int st = -1;

		for (i = 0; i < 2000 && (st = q_state_of(b.qp)) != IBV_QPS_ERR; i++)
			usleep(1000);
		CHECK_EQ_INT(st, IBV_QPS_ERR);
		if (CHECK(ibv_get_async_event(ctx, &ev) == 0)) {
			CHECK_EQ_INT(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
			CHECK(ev.element.qp == b.qp);
			ibv_ack_async_event(&ev);
		}
	}
out:
	region_drop(&src);
	region_drop(&tgt);
	t_ep_destroy(&a, false);
	t_ep_destroy(&b, false);
	return ok;
}

int main(void)
{
	static const enum ibv_wr_opcode ops[] = {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
						 IBV_WR_ATOMIC_FETCH_AND_ADD};
	static const int ks[] = {0, 1, 5, 12};

	t_start("api_fault_dereg");
	ctx = t_open_dev();
	if (!CHECK(ctx))
		return t_finish();
	t_case("target MR deregistered under WRITE, READ and atomics: REM_ACCESS_ERR, no access");
	for (size_t o = 0; o < SV_ARRAY_N(ops); o++) {
		int placed = 0;

		for (size_t j = 0; j < SV_ARRAY_N(ks); j++)
			placed += round_of(ops[o], true, ks[j]);
		printf("# %s: %d of %zu placed before the deregistration\n", op_name(ops[o]),
		       placed, SV_ARRAY_N(ks) * N);
	}
	t_case("initiator's own MR deregistered under WRITE and READ: LOC_PROT_ERR, no access");
	for (size_t o = 0; o < 2; o++)
		for (size_t j = 0; j < SV_ARRAY_N(ks); j++)
			round_of(ops[o], false, ks[j]);
	CHECK_EQ_INT(ibv_close_device(ctx), 0);
	return t_finish();
}
