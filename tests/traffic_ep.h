/* SPDX-License-Identifier: MIT */
/*
 * traffic_ep.h - the endpoints and helpers shared by the api_traffic_*
 * programs (sizes, sge, events, 2proc): one device context and PD per
 * process, endpoints of a CQ, a QP and a registered buffer on them, and
 * post / receive / wait helpers that CHECK every step. Include after
 * harness.h and traffic.h.
 *
 * After t_start(), tr_open() opens device 0, its PD (gpd) and GID (gid);
 * tr_finish() frees them, prints the message and byte totals that post1()
 * counted and returns t_finish(). All static inline.
 */
#ifndef SV_TESTS_TRAFFIC_EP_H
#define SV_TESTS_TRAFFIC_EP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1u << 20)
#define ACC_ALL                                                                                    \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

static struct ibv_context *ctx;
static uint64_t n_msgs, n_bytes;

static const enum ibv_mtu mtus[] = {IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024, IBV_MTU_2048,
				    IBV_MTU_4096};

static inline uint32_t mtu_bytes(enum ibv_mtu m)
{
	return 128u << m;
}

/* ---- endpoints ---- */

struct ep {
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	bool own_cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t len;
	bool own_buf;
};

struct ep_opts {
	size_t len; /* buffer bytes (0: use `buf`/`mr` given) */
	int depth; /* send and receive queue depth */
	int cqe; /* 0: 2 * depth */
	uint32_t sge; /* max_send_sge = max_recv_sge (0: 4) */
	bool sig_all;
	bool channel; /* a completion channel for the CQ */
	uint64_t ops; /* ibv_qp_ex send_ops_flags (0: plain ibv_create_qp) */
	struct ibv_srq *srq;
	struct ibv_cq *cq; /* shared CQ */
	struct ibv_pd *pd; /* shared PD */
	struct ibv_mr *mr; /* shared buffer */
	enum ibv_qp_type type;
};

static struct ibv_pd *gpd;

static inline int ep_init(struct ep *e, const struct ep_opts *o)
{
	struct ibv_qp_init_attr_ex ia;

	memset(e, 0, sizeof(*e));
	e->pd = o->pd ? o->pd : gpd;
	if (o->channel) {
		e->ch = ibv_create_comp_channel(ctx);
		if (!CHECK(e->ch))
			return -1;
	}
	if (o->cq) {
		e->cq = o->cq;
	} else {
		e->cq = ibv_create_cq(ctx, o->cqe ? o->cqe : 2 * o->depth, NULL, e->ch, 0);
		e->own_cq = true;
		if (!CHECK(e->cq))
			return -1;
	}
	if (o->mr) {
		e->mr = o->mr;
		e->buf = o->mr->addr;
		e->len = o->mr->length;
	} else {
		e->len = o->len;
		e->buf = aligned_alloc(4096, (o->len + 4095) & ~(size_t)4095);
		e->own_buf = true;
		if (!CHECK(e->buf))
			return -1;
		memset(e->buf, 0, o->len);
		e->mr = ibv_reg_mr(e->pd, e->buf, o->len, ACC_ALL);
		if (!CHECK(e->mr))
			return -1;
	}
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->cq;
	ia.recv_cq = e->cq;
	ia.srq = o->srq;
	ia.qp_type = o->type ? o->type : IBV_QPT_RC;
	ia.sq_sig_all = o->sig_all;
	ia.cap.max_send_wr = (uint32_t)o->depth;
	ia.cap.max_recv_wr = o->srq ? 0 : (uint32_t)o->depth;
	ia.cap.max_send_sge = o->sge ? o->sge : 4;
	ia.cap.max_recv_sge = o->srq ? 0 : (o->sge ? o->sge : 4);
	ia.cap.max_inline_data = 64;
	ia.pd = e->pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	if (o->ops) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ia.send_ops_flags = o->ops;
	}
	errno = 0;
	e->qp = ibv_create_qp_ex(ctx, &ia);
	if (!CHECK_MSG(e->qp, "ibv_create_qp_ex: %s", t_errname(errno)))
		return -1;
	if (o->ops) {
		e->qpx = ibv_qp_to_qp_ex(e->qp);
		if (!CHECK(e->qpx))
			return -1;
	}
	if (o->sge)
		CHECK_MSG(ia.cap.max_send_sge >= o->sge, "granted %u SGEs", ia.cap.max_send_sge);
	return t_qp_init(e->qp, ACC_ALL);
}

static inline void ep_fini(struct ep *e)
{
	if (e->qp)
		CHECK_RET(ibv_destroy_qp(e->qp), 0);
	if (e->own_buf) {
		if (e->mr)
			CHECK_RET(ibv_dereg_mr(e->mr), 0);
		free(e->buf);
	}
	if (e->own_cq && e->cq)
		CHECK_RET(ibv_destroy_cq(e->cq), 0);
	if (e->ch)
		CHECK_RET(ibv_destroy_comp_channel(e->ch), 0);
	memset(e, 0, sizeof(*e));
}

static union ibv_gid gid;

static inline int ep_connect(struct ep *a, struct ep *b, enum ibv_mtu mtu)
{
	if (t_qp_rts(a->qp, b->qp->qp_num, &gid, 0xfffffa, 17, mtu)) /* b's PSNs wrap */
		return -1;
	return t_qp_rts(b->qp, a->qp->qp_num, &gid, 17, 0xfffffa, mtu);
}

static inline int post(struct ep *e, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int ret = ibv_post_send(e->qp, wr, &bad);

	return CHECK_MSG(ret == 0, "ibv_post_send: %s", t_errname(ret)) ? 0 : -1;
}

static inline int post1(struct ep *e, enum ibv_wr_opcode op, uint64_t wr_id, uint8_t *src,
			uint32_t len, uint64_t raddr, uint32_t rkey, unsigned int flags,
			uint32_t imm)
{
	struct ibv_sge sge = {(uintptr_t)src, len, e->mr->lkey};
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	n_msgs++;
	n_bytes += len;
	return post(e, &wr);
}

static inline int recv1(struct ep *e, uint64_t wr_id, uint8_t *dst, uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)dst, len, e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = len ? 1 : 0}, *bad;
	int ret = ibv_post_recv(e->qp, &wr, &bad);

	return CHECK_MSG(ret == 0, "ibv_post_recv: %s", t_errname(ret)) ? 0 : -1;
}

/* Exactly one successful completion, or a failed check. */
static inline int wait1(struct ibv_cq *cq, struct ibv_wc *wc, const char *what)
{
	if (!CHECK_MSG(t_poll(cq, wc, 1, 10000) == 1, "%s: no completion", what))
		return -1;
	return CHECK_MSG(wc->status == IBV_WC_SUCCESS, "%s: %s", what,
			 ibv_wc_status_str(wc->status)) ?
		       0 :
		       -1;
}

/* First differing byte of `got` against the pattern, or -1. */
static inline long pattern_diff(const uint8_t *got, size_t n, unsigned int seed)
{
	static uint8_t *want;
	static size_t cap;

	if (!n)
		return -1;
	if (n > cap) {
		free(want);
		want = malloc(n);
		cap = want ? n : 0;
		if (!want)
			return 0;
	}
	t_fill(want, n, seed);
	if (!memcmp(got, want, n))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i])
			return (long)i;
	return 0;
}

/* Device 0, its PD and GID; false (and a failed CHECK) if not. */
static inline bool tr_open(void)
{
	t_open_first(&ctx);
	gpd = ibv_alloc_pd(ctx);
	return CHECK(gpd) && CHECK_RET(ibv_query_gid(ctx, 1, 0, &gid), 0);
}

/* The teardown case, the totals, and the exit code. */
static inline int tr_finish(void)
{
	t_case("teardown");
	CHECK_RET(ibv_dealloc_pd(gpd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	printf("# traffic: %llu messages, %llu payload bytes\n", (unsigned long long)n_msgs,
	       (unsigned long long)n_bytes);
	return t_finish();
}

#endif
