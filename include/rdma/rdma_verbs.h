/*
 * softverbs - verbs shortcuts on an rdma_cm_id (librdmacm compatible).
 *
 * Everything here except the SRQ calls is static inline and acts on the
 * id's own PD, QP, SRQ and CQs, as rdma-core 65's <rdma/rdma_verbs.h>
 * does. The int helpers return 0, or -1 with errno set.
 */
#ifndef RDMA_VERBS_H
#define RDMA_VERBS_H

#include <assert.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A verbs result (0 or a positive errno) in the -1 / errno convention. */
static inline int rdma_seterrno(int ret)
{
	if (!ret)
		return 0;
	errno = ret;
	return -1;
}

int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr);
void rdma_destroy_srq(struct rdma_cm_id *id);

/* Memory registration on id->pd: messages, RDMA READ targets, RDMA WRITE targets. */
static inline struct ibv_mr *rdma_reg_msgs(struct rdma_cm_id *id, void *addr, size_t length)
{
	return ibv_reg_mr(id->pd, addr, length, IBV_ACCESS_LOCAL_WRITE);
}

static inline struct ibv_mr *rdma_reg_read(struct rdma_cm_id *id, void *addr, size_t length)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;

	return ibv_reg_mr(id->pd, addr, length, access);
}

static inline struct ibv_mr *rdma_reg_write(struct rdma_cm_id *id, void *addr, size_t length)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	return ibv_reg_mr(id->pd, addr, length, access);
}

static inline int rdma_dereg_mr(struct ibv_mr *mr)
{
	return rdma_seterrno(ibv_dereg_mr(mr));
}

/* Receives go to the id's SRQ when it has one, else to its QP. */
static inline int rdma_post_recvv(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl,
				  int nsge)
{
	struct ibv_recv_wr wr, *bad;

	wr.wr_id = (uintptr_t)context;
	wr.next = NULL;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	return rdma_seterrno(id->srq ? ibv_post_srq_recv(id->srq, &wr, &bad) :
				       ibv_post_recv(id->qp, &wr, &bad));
}

/* One send work request of `opcode` on id->qp (RDMA fields unused for SEND). */
static inline int rdma_post_wr_(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl, int nsge,
				int flags, enum ibv_wr_opcode opcode, uint64_t remote_addr,
				uint32_t rkey)
{
	struct ibv_send_wr wr, *bad;

	wr.wr_id = (uintptr_t)context;
	wr.next = NULL;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.opcode = opcode;
	wr.send_flags = flags;
	if (opcode != IBV_WR_SEND) {
		wr.wr.rdma.remote_addr = remote_addr;
		wr.wr.rdma.rkey = rkey;
	}
	return rdma_seterrno(ibv_post_send(id->qp, &wr, &bad));
}

static inline int rdma_post_sendv(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl,
				  int nsge, int flags)
{
	return rdma_post_wr_(id, context, sgl, nsge, flags, IBV_WR_SEND, 0, 0);
}

static inline int rdma_post_readv(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl,
				  int nsge, int flags, uint64_t remote_addr, uint32_t rkey)
{
	return rdma_post_wr_(id, context, sgl, nsge, flags, IBV_WR_RDMA_READ, remote_addr, rkey);
}

static inline int rdma_post_writev(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl,
				   int nsge, int flags, uint64_t remote_addr, uint32_t rkey)
{
	return rdma_post_wr_(id, context, sgl, nsge, flags, IBV_WR_RDMA_WRITE, remote_addr, rkey);
}

/* A single-SGE list over [addr, addr + length) of `mr` (lkey 0 without one). */
static inline struct ibv_sge rdma_sge_(void *addr, size_t length, struct ibv_mr *mr)
{
	struct ibv_sge sge;

	sge.addr = (uint64_t)(uintptr_t)addr;
	sge.length = (uint32_t)length;
	sge.lkey = mr ? mr->lkey : 0;
	return sge;
}

/* The buffer must lie inside `mr` (asserted). */
static inline int rdma_post_recv(struct rdma_cm_id *id, void *context, void *addr, size_t length,
				 struct ibv_mr *mr)
{
	struct ibv_sge sge;

	assert(addr >= mr->addr && (uint8_t *)addr + length <= (uint8_t *)mr->addr + mr->length);
	sge = rdma_sge_(addr, length, mr);
	return rdma_post_recvv(id, context, &sge, 1);
}

static inline int rdma_post_send(struct rdma_cm_id *id, void *context, void *addr, size_t length,
				 struct ibv_mr *mr, int flags)
{
	struct ibv_sge sge = rdma_sge_(addr, length, mr);

	return rdma_post_sendv(id, context, &sge, 1, flags);
}

static inline int rdma_post_read(struct rdma_cm_id *id, void *context, void *addr, size_t length,
				 struct ibv_mr *mr, int flags, uint64_t remote_addr, uint32_t rkey)
{
	struct ibv_sge sge = rdma_sge_(addr, length, mr);

	return rdma_post_readv(id, context, &sge, 1, flags, remote_addr, rkey);
}

static inline int rdma_post_write(struct rdma_cm_id *id, void *context, void *addr, size_t length,
				  struct ibv_mr *mr, int flags, uint64_t remote_addr, uint32_t rkey)
{
	struct ibv_sge sge = rdma_sge_(addr, length, mr);

	return rdma_post_writev(id, context, &sge, 1, flags, remote_addr, rkey);
}

/* A UD SEND to (ah, remote_qpn) with the rdma_cm Q_Key. */
static inline int rdma_post_ud_send(struct rdma_cm_id *id, void *context, void *addr, size_t length,
				    struct ibv_mr *mr, int flags, struct ibv_ah *ah,
				    uint32_t remote_qpn)
{
	struct ibv_sge sge = rdma_sge_(addr, length, mr);
	struct ibv_send_wr wr, *bad;

	wr.wr_id = (uintptr_t)context;
	wr.next = NULL;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = flags;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = remote_qpn;
	wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
	return rdma_seterrno(ibv_post_send(id->qp, &wr, &bad));
}

/*
 * Wait for one completion on `cq`: poll, arm, poll again, then sleep on
 * `channel`. The CQ must be the id's own (the library's CQs carry the id
 * as their context). 1 (one wc) or -1 with errno.
 */
static inline int rdma_get_comp_(struct rdma_cm_id *id, struct ibv_cq *cq,
				 struct ibv_comp_channel *channel, struct ibv_wc *wc)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int ret;

	for (;;) {
		ret = ibv_poll_cq(cq, 1, wc);
		if (ret)
			break;
		ret = ibv_req_notify_cq(cq, 0);
		if (ret)
			return rdma_seterrno(ret);
		ret = ibv_poll_cq(cq, 1, wc);
		if (ret)
			break;
		ret = ibv_get_cq_event(channel, &ev_cq, &ev_ctx);
		if (ret)
			return ret;
		assert(ev_cq == cq && ev_ctx == id);
		ibv_ack_cq_events(cq, 1);
	}
	return ret < 0 ? rdma_seterrno(ret) : ret;
}

static inline int rdma_get_send_comp(struct rdma_cm_id *id, struct ibv_wc *wc)
{
	return rdma_get_comp_(id, id->send_cq, id->send_cq_channel, wc);
}

static inline int rdma_get_recv_comp(struct rdma_cm_id *id, struct ibv_wc *wc)
{
	return rdma_get_comp_(id, id->recv_cq, id->recv_cq_channel, wc);
}

#ifdef __cplusplus
}
#endif

#endif
