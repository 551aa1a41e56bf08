/* SPDX-License-Identifier: MIT */
/*
 * xrc_util.h - helpers for the XRC tests (api_xrc, api_xrc_2proc): an
 * XRC "side" is a context with a PD, a registered buffer, an XRC domain,
 * an XRC SRQ with its CQ, an XRC TGT QP (receives) and an XRC INI QP
 * (sends, with its own CQ). Public verbs only. Include after harness.h
 * and traffic.h.
 */
#ifndef SV_TESTS_XRC_UTIL_H
#define SV_TESTS_XRC_UTIL_H

#include <fcntl.h>

struct x_side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq; /* the INI QP's send CQ; the SRQ's CQ */
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t len;
	struct ibv_xrcd *xrcd;
	struct ibv_srq *srq;
	struct ibv_qp *ini, *tgt;
	uint32_t srqn;
	union ibv_gid gid;
};

/* What the other side needs: its TGT and INI QPNs, SRQ number, buffer and GID. */
struct x_addr {
	uint32_t tgt, ini, srqn, rkey;
	uint64_t addr;
	union ibv_gid gid;
};

/* ibv_open_xrcd with FD | OFLAGS. */
static inline struct ibv_xrcd *x_open_xrcd(struct ibv_context *ctx, int fd, int oflags)
{
	struct ibv_xrcd_init_attr a = {0};

	a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	a.fd = fd;
	a.oflags = oflags;
	return ibv_open_xrcd(ctx, &a);
}

/* An XRC SRQ of `max_wr` one-SGE receives on `xrcd`, completing on `cq`. */
static inline struct ibv_srq *x_srq(struct ibv_context *ctx, struct ibv_pd *pd,
				    struct ibv_xrcd *xrcd, struct ibv_cq *cq, uint32_t max_wr)
{
	struct ibv_srq_init_attr_ex a = {0};

	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
		      IBV_SRQ_INIT_ATTR_PD;
	a.srq_type = IBV_SRQT_XRC;
	a.xrcd = xrcd;
	a.cq = cq;
	a.pd = pd;
	a.attr.max_wr = max_wr;
	a.attr.max_sge = 1;
	return ibv_create_srq_ex(ctx, &a);
}

/* An XRC TGT QP on `xrcd`. */
static inline struct ibv_qp *x_tgt(struct ibv_context *ctx, struct ibv_xrcd *xrcd)
{
	struct ibv_qp_init_attr_ex a = {0};

	a.qp_type = IBV_QPT_XRC_RECV;
	a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	a.xrcd = xrcd;
	return ibv_create_qp_ex(ctx, &a);
}

/* An XRC INI QP of `depth` sends (ibv_wr_* too when `ops` is nonzero). */
static inline struct ibv_qp *x_ini(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *scq,
				   uint32_t depth, uint64_t ops)
{
	struct ibv_qp_init_attr_ex a = {0};

	a.qp_type = IBV_QPT_XRC_SEND;
	a.comp_mask = IBV_QP_INIT_ATTR_PD | (ops ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0);
	a.pd = pd;
	a.send_cq = scq;
	a.cap.max_send_wr = depth;
	a.cap.max_send_sge = 1;
	a.send_ops_flags = ops;
	return ibv_create_qp_ex(ctx, &a);
}

/* Set up a side on `ctx` (NULL: open the first device): a private XRC domain (fd -1). */
static inline int x_side_init(struct x_side *s, struct ibv_context *ctx, size_t len)
{
	memset(s, 0, sizeof(*s));
	s->ctx = ctx ? ctx : t_open_dev();
	if (!CHECK(s->ctx))
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->scq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	s->rcq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	s->len = len;
	s->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (!CHECK(s->pd && s->scq && s->rcq && s->buf))
		return -1;
	memset(s->buf, 0, len);
	s->mr = ibv_reg_mr(s->pd, s->buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	s->xrcd = x_open_xrcd(s->ctx, -1, O_CREAT);
	if (!CHECK(s->mr && s->xrcd))
		return -1;
	s->srq = x_srq(s->ctx, s->pd, s->xrcd, s->rcq, 128);
	s->tgt = x_tgt(s->ctx, s->xrcd);
	s->ini = x_ini(s->ctx, s->pd, s->scq, 128, 0);
	if (!CHECK(s->srq && s->tgt && s->ini) || !CHECK(ibv_get_srq_num(s->srq, &s->srqn) == 0))
		return -1;
	CHECK(ibv_query_gid(s->ctx, 1, t_gid_index(), &s->gid) == 0);
	return t_qp_init(s->ini, 0) ||
			       t_qp_init(s->tgt, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
							 IBV_ACCESS_REMOTE_ATOMIC) ?
		       -1 :
		       0;
}

static inline struct x_addr x_addr_of(const struct x_side *s)
{
	struct x_addr a;

	memset(&a, 0, sizeof(a)); /* padding too: it crosses a socket */
	a.tgt = s->tgt->qp_num;
	a.ini = s->ini->qp_num;
	a.srqn = s->srqn;
	a.rkey = s->mr->rkey;
	a.addr = (uintptr_t)s->buf;
	a.gid = s->gid;
	return a;
}

/* The XRC masks of INIT->RTR and RTR->RTS (the kernel's XRC INI and TGT columns). */
#define X_RTR (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN)
#define X_INI_RTS                                                                                  \
	(IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |     \
	 IBV_QP_MAX_QP_RD_ATOMIC)
#define X_TGT_RTR (X_RTR | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define X_TGT_RTS (IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT)

/*
 * QP `qp` (in INIT) to RTR then RTS towards QPN `dqpn` at `gid`, PSN
 * `psn` both ways, with the masks given (every attribute is set; the
 * masks pick what the call passes).
 */
static inline int x_rts(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *gid, uint32_t psn,
			int rtr_mask, int rts_mask)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
				.path_mtu = IBV_MTU_1024,
				.dest_qp_num = dqpn,
				.rq_psn = psn,
				.sq_psn = psn,
				.max_dest_rd_atomic = 16,
				.max_rd_atomic = 16,
				.min_rnr_timer = 1,
				.timeout = 14,
				.retry_cnt = 7,
				.rnr_retry = 7};

	a.ah_attr = t_ah_attr(gid);
	if (!CHECK(ibv_modify_qp(qp, &a, rtr_mask) == 0))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	return CHECK(ibv_modify_qp(qp, &a, rts_mask) == 0) ? 0 : -1;
}

/* An INI QP to RTS towards TGT QP `tgt_qpn`: RTR without MAX_DEST_RD_ATOMIC and MIN_RNR_TIMER. */
static inline int x_ini_rts(struct ibv_qp *ini, uint32_t tgt_qpn, const union ibv_gid *gid,
			    uint32_t psn)
{
	return x_rts(ini, tgt_qpn, gid, psn, X_RTR, X_INI_RTS);
}

/* A TGT QP to RTS towards INI QP `ini_qpn`: RTR as RC's, RTS with only SQ_PSN and TIMEOUT. */
static inline int x_tgt_rts(struct ibv_qp *tgt, uint32_t ini_qpn, const union ibv_gid *gid,
			    uint32_t psn)
{
	return x_rts(tgt, ini_qpn, gid, psn, X_TGT_RTR, X_TGT_RTS);
}

/*
 * Post one XRC send work request `op` on INI QP `qp` from `s`'s buffer at
 * `off`, `len` bytes, to XRC SRQ `srqn` (remote address and key for RDMA
 * and atomics; fetch-and-add adds 5).
 */
static inline int x_post_on(struct ibv_qp *qp, struct x_side *s, enum ibv_wr_opcode op,
			    uint64_t wr_id, size_t off, uint32_t len, uint32_t srqn, uint64_t raddr,
			    uint32_t rkey, uint32_t imm)
{
	struct ibv_sge sge = {(uintptr_t)s->buf + off, len, s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED,
				 .imm_data = htonl(imm)},
			   *bad = NULL;

	wr.qp_type.xrc.remote_srqn = srqn;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 5;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

/* x_post_on() on the side's own INI QP. */
static inline int x_post(struct x_side *s, enum ibv_wr_opcode op, uint64_t wr_id, size_t off,
			 uint32_t len, uint32_t srqn, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	return x_post_on(s->ini, s, op, wr_id, off, len, srqn, raddr, rkey, imm);
}

/* Post one receive of `len` bytes at `off` of `s`'s buffer to `srq`. */
static inline int x_recv(struct x_side *s, struct ibv_srq *srq, uint64_t wr_id, size_t off,
			 uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)s->buf + off, len, s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad = NULL;

	return ibv_post_srq_recv(srq, &wr, &bad);
}

/* Tear a side down (its context too when `close_ctx`). */
static inline void x_side_destroy(struct x_side *s, bool close_ctx)
{
	if (s->ini)
		CHECK(ibv_destroy_qp(s->ini) == 0);
	if (s->tgt)
		CHECK(ibv_destroy_qp(s->tgt) == 0);
	if (s->srq)
		CHECK(ibv_destroy_srq(s->srq) == 0);
	if (s->xrcd)
		CHECK(ibv_close_xrcd(s->xrcd) == 0);
	if (s->mr)
		CHECK(ibv_dereg_mr(s->mr) == 0);
	if (s->scq)
		CHECK(ibv_destroy_cq(s->scq) == 0);
	if (s->rcq)
		CHECK(ibv_destroy_cq(s->rcq) == 0);
	if (s->pd)
		CHECK(ibv_dealloc_pd(s->pd) == 0);
	if (close_ctx && s->ctx)
		ibv_close_device(s->ctx);
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

#endif
