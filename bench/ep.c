/* SPDX-License-Identifier: MIT */
/*
 * ep.c - sv_bench's verbs endpoint: open, register (plainly or through
 * ibv_reg_mr_ex with a DMA handle), connect an RC QP, post and reap.
 */
#include "ep.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ACCESS                                                                                     \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

const char *const mr_names[MR_NKINDS] = {"plain",    "dmah_ph0", "dmah_ph1",
					 "dmah_cpu", "dmah_pm",	 "alloc_buf"};

/*
 * Register e->buf as `kind`: ibv_reg_mr, or ibv_reg_mr_ex with a DMA
 * handle. A memory type comes with a CPU id or not at all (the rule of
 * mlx5 and the kernel): the CPU is the one this process runs on now.
 */
static void ep_reg(struct ep *e, enum mr_kind kind)
{
	struct ibv_dmah_init_attr da = {.comp_mask = IBV_DMAH_INIT_ATTR_MASK_PH};
	struct ibv_mr_init_attr ma = {
		.length = e->len,
		.access = ACCESS,
		.comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH,
		.addr = e->buf,
	};

	if (kind == MR_PLAIN) {
		e->mr = ibv_reg_mr(e->pd, e->buf, e->len, ACCESS);
		if (!e->mr)
			die("ibv_reg_mr: %s", strerror(errno));
		return;
	}
	da.ph = kind == MR_DMAH_PH1 ? 1 : 0;
	if (kind == MR_DMAH_CPU || kind == MR_DMAH_PM) {
		da.comp_mask |=
			IBV_DMAH_INIT_ATTR_MASK_CPU_ID | IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE;
		da.cpu_id = (uint32_t)(sched_getcpu() > 0 ? sched_getcpu() : 0);
		da.tph_mem_type = kind == MR_DMAH_PM ? IBV_TPH_MEM_TYPE_PM : IBV_TPH_MEM_TYPE_VM;
	}
	e->dmah = ibv_alloc_dmah(e->ctx, &da);
	if (!e->dmah)
		die("ibv_alloc_dmah: %s", strerror(errno));
	ma.dmah = e->dmah;
	e->mr = ibv_reg_mr_ex(e->pd, &ma);
	if (!e->mr)
		die("ibv_reg_mr_ex with a DMA handle: %s", strerror(errno));
}

/* Contract: see ep.h. */
void ep_open(struct ep *e, int cqe)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device_attr da;
	struct ibv_port_attr pa;

	memset(e, 0, sizeof(*e));
	if (!list || !list[0])
		die("no verbs device");
	e->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!e->ctx)
		die("ibv_open_device: %s", strerror(errno));
	if (ibv_query_device(e->ctx, &da) || ibv_query_port(e->ctx, 1, &pa) ||
	    ibv_query_gid(e->ctx, 1, 0, &e->gid))
		die("device queries failed");
	e->mtu = pa.active_mtu;
	e->max_rd = (uint8_t)(da.max_qp_rd_atom < 16 ? da.max_qp_rd_atom : 16);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, cqe, NULL, NULL, 0);
	if (!e->pd || !e->cq)
		die("PD or CQ allocation failed");
}

/* Contract: see ep.h. */
struct ibv_qp *ep_rc_qp(const struct ep *e, uint32_t send_wr, uint32_t recv_wr,
			uint32_t *max_inline)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->cq;
	ia.recv_cq = e->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = send_wr;
	ia.cap.max_recv_wr = recv_wr;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = 64;
	qp = ibv_create_qp(e->pd, &ia);
	if (!qp) { /* a device without inline data */
		ia.cap.max_inline_data = 0;
		qp = ibv_create_qp(e->pd, &ia);
	}
	if (!qp)
		die("ibv_create_qp: %s", strerror(errno));
	if (max_inline)
		*max_inline = ia.cap.max_inline_data;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags =
		IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify QP to INIT failed");
	return qp;
}

/*
 * Open, make buffer, MR (as `kind`) and an RC QP in INIT; dies on
 * failure. MR_ALLOC_BUF: the buffer comes from ibv_alloc_buf() and is
 * registered with ibv_reg_buf_mr(); else aligned_alloc() and ep_reg().
 */
static void ep_init(struct ep *e, size_t len, uint32_t depth, enum mr_kind kind)
{
	ep_open(e, (int)depth * 2 + 16);
	e->len = len < 64 ? 64 : len;
	if (kind == MR_ALLOC_BUF)
		e->buf = ibv_alloc_buf(e->pd, e->len, &e->ibuf);
	else
		e->buf = aligned_alloc(4096, (e->len + 4095) & ~(size_t)4095);
	if (!e->buf)
		die("buffer allocation failed: %s", strerror(errno));
	memset(e->buf, 0, e->len);
	if (kind == MR_ALLOC_BUF) {
		e->mr = ibv_reg_buf_mr(e->pd, e->ibuf, e->buf, e->len, ACCESS);
		if (!e->mr)
			die("ibv_reg_buf_mr: %s", strerror(errno));
	} else {
		ep_reg(e, kind);
	}
	e->qp = ep_rc_qp(e, depth, depth, &e->max_inline);
}

/* Contract: see ep.h. */
void ep_rc_connect(const struct ep *e, struct ibv_qp *qp, uint32_t sq_psn,
		   const struct ep_addr *peer)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = e->mtu;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = e->max_rd;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify QP to RTR failed");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = e->max_rd;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify QP to RTS failed");
}

void ep_setup(struct ep *e, int sock, size_t len, uint32_t depth, enum mr_kind mr,
	      struct ep_addr *peer)
{
	struct ep_addr me;

	ep_init(e, len, depth, mr);
	memset(&me, 0, sizeof(me));
	me.qpn = e->qp->qp_num;
	me.psn = (uint32_t)getpid() & 0xffffff;
	me.rkey = e->mr->rkey;
	me.addr = (uintptr_t)e->buf;
	me.gid = e->gid;
	if (xfer(sock, &me, sizeof(me), true) || xfer(sock, peer, sizeof(*peer), false))
		die("address exchange failed");
	ep_rc_connect(e, e->qp, me.psn, peer);
}

/* Contract: see ep.h. Everything ep_setup() made, in reverse order. */
void ep_destroy(struct ep *e)
{
	ibv_destroy_qp(e->qp);
	ibv_dereg_mr(e->mr);
	if (e->dmah)
		ibv_dealloc_dmah(e->dmah);
	if (e->ibuf)
		ibv_free_buf(e->ibuf);
	else
		free(e->buf);
	ibv_destroy_cq(e->cq);
	ibv_dealloc_pd(e->pd);
	ibv_close_device(e->ctx);
}

int post_one(struct ep *e, enum ibv_wr_opcode op, uint8_t *local, uint32_t len, uint64_t raddr,
	     uint32_t rkey, unsigned int flags)
{
	struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = e->mr->lkey};
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = flags;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		sge.length = 8;
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 1 : 0;
		wr.wr.atomic.swap = 0;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(e->qp, &wr, &bad);
}

/* Contract: see ep.h. One receive of `len` bytes at the buffer's start. */
int post_recv_one(struct ep *e, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf, .length = len, .lkey = e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1}, *bad = NULL;

	return ibv_post_recv(e->qp, &wr, &bad);
}

/* Contract: see ep.h. */
int reap(struct ep *e, int max)
{
	struct ibv_wc wc[32];
	int n = ibv_poll_cq(e->cq, max < 32 ? max : 32, wc);

	if (n < 0)
		die("ibv_poll_cq failed");
	for (int i = 0; i < n; i++)
		if (wc[i].status != IBV_WC_SUCCESS)
			die("completion error: %s", ibv_wc_status_str(wc[i].status));
	return n;
}
