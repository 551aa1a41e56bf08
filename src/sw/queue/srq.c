/* SPDX-License-Identifier: MIT */
/*
 * srq.c - shared receive queues of the software device.
 *
 * An SRQ is a ring of receive WQEs (struct sw_recv_wqe with room for
 * max_sge SGEs), guarded by srq->lock. post_srq_recv produces; the
 * responder consumes through sw_srq_take(), called from the QP's
 * sw_qp_take_recv(), or for an XRC SRQ from the responder of an XRC TGT
 * QP that found it by number in its domain (queue/xrcd.c). Basic and XRC
 * SRQs exist; tag matching gives EOPNOTSUPP. An XRC SRQ needs an XRC
 * domain handle and a CQ (IBV_SRQ_INIT_ATTR_XRCD and _CQ, else EINVAL, as
 * rdma-core), holds a reference on both, and its receives complete on
 * that CQ. A bounce (CC) device refuses SRQs altogether, as mlx5 and
 * the kernel together do (docs/cc-and-tph.md).
 *
 * Granted sizes: max_wr rounds up to a power of two (the ring's size),
 * max_sge is exact. The SRQ holds a reference on its protection domain
 * proper (a parent domain's base), never on a parent domain. max_srq is
 * counted per process (the device is one per process).
 */
#include <stdlib.h>
#include <string.h>

#include "sw/queue.h"

#define SW_SRQ_COMP_MASK                                                                           \
	(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |                  \
	 IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM)
#define SW_SRQ_NUM_MASK 0xffffffu

static atomic_uint nsrq; /* live SRQs, against SW_MAX_SRQ */
static atomic_uint next_srq_num; /* 24-bit SRQ numbers, never 0 */

/* Contract: a fresh nonzero 24-bit SRQ number. */
static uint32_t srq_num_new(void)
{
	uint32_t n;

	do
		n = (atomic_fetch_add(&next_srq_num, 1) + 1) & SW_SRQ_NUM_MASK;
	while (!n);
	return n;
}

/* Contract: true for a create request of an XRC SRQ. */
static bool is_xrc(const struct ibv_srq_init_attr_ex *attr)
{
	return (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type == IBV_SRQT_XRC;
}

/*
 * Contract: check a create request: unknown comp_mask bits or no PD ->
 * EINVAL, a type other than basic or XRC -> EOPNOTSUPP, a PD of another
 * context -> EINVAL, XRC without an XRC domain handle or a CQ (both of
 * this context) -> EINVAL, max_wr / max_sge outside 1..limit -> EINVAL, any SRQ on a
 * bounce device -> EOPNOTSUPP. 0 or -errno.
 */
static int check_create(struct ibv_context *ctx, const struct ibv_srq_init_attr_ex *attr)
{
	if (!attr || (attr->comp_mask & ~(uint32_t)SW_SRQ_COMP_MASK))
		return -EINVAL;
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC &&
	    attr->srq_type != IBV_SRQT_XRC)
		return -EOPNOTSUPP;
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TM) && !(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return -EOPNOTSUPP;
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd || attr->pd->context != ctx)
		return -EINVAL;
	if (is_xrc(attr) && (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) ||
			     !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->xrcd ||
			     !attr->cq || attr->cq->context != ctx || attr->xrcd->context != ctx))
		return -EINVAL;
	if (attr->attr.max_wr < 1 || attr->attr.max_wr > SW_MAX_SRQ_WR)
		return -EINVAL;
	if (attr->attr.max_sge < 1 || attr->attr.max_sge > SW_MAX_SRQ_SGE)
		return -EINVAL;
	if (sw_dev_of(ctx)->cfg.cc_dma_bounce)
		return -EOPNOTSUPP;
	return 0;
}

/*
 * Contract: sv_ops.create_srq_ex. Errors per check_create, -ENOMEM past
 * max_srq. On success attr->attr holds the granted max_wr and max_sge;
 * srq_limit is ignored (a new SRQ is not armed).
 */
int sw_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *attr,
		     struct ibv_srq **out)
{
	struct sw_pd *base;
	struct sw_srq *srq;
	int ret;

	ret = check_create(ctx, attr);
	if (ret)
		return ret;
	srq = sw_limit_calloc(&nsrq, SW_MAX_SRQ, sizeof(*srq));
	if (!srq)
		return -ENOMEM;
	base = sw_pd_base(attr->pd);
	srq->pd = base;
	ret = sw_ring_alloc(&srq->ring, ctx, base, attr->attr.max_wr,
			    sw_recv_wqe_size(attr->attr.max_sge));
	if (ret)
		goto err_free;
	pthread_mutex_init(&srq->lock, NULL);
	srq->max_wr = srq->ring.nslots;
	srq->max_sge = attr->attr.max_sge;
	srq->limit = 0;
	srq->srq_num = srq_num_new();
	atomic_init(&srq->usecnt, 0);
	srq->ibv.context = ctx;
	srq->ibv.srq_context = attr->srq_context;
	srq->ibv.pd = attr->pd;
	srq->ibv.handle = srq->srq_num;
	srq->ibv.events_completed = 0;
	pthread_mutex_init(&srq->ibv.mutex, NULL);
	pthread_cond_init(&srq->ibv.cond, NULL);
	atomic_fetch_add(&base->usecnt, 1);
	if (is_xrc(attr)) {
		srq->xrcd = sw_xrcd(attr->xrcd);
		srq->cq = sw_cq(attr->cq);
		atomic_fetch_add(&srq->xrcd->usecnt, 1);
		atomic_fetch_add(&srq->cq->usecnt, 1);
		sw_xrcd_srq_add(srq);
	}
	attr->attr.max_wr = srq->max_wr;
	attr->attr.max_sge = srq->max_sge;
	*out = &srq->ibv;
	return 0;

err_free:
	free(srq);
	atomic_fetch_sub(&nsrq, 1);
	return ret;
}

/*
 * Contract: sv_ops.destroy_srq. -EBUSY while a QP uses the SRQ. An XRC
 * SRQ leaves its domain first (waiting for a responder that uses it),
 * then lets go of its CQ and XRC domain handle.
 */
int sw_destroy_srq(struct ibv_srq *ibsrq)
{
	struct sw_srq *srq = sw_srq(ibsrq);

	if (atomic_load(&srq->usecnt) > 0)
		return -EBUSY;
	if (srq->xrcd) {
		sw_xrcd_srq_remove(srq);
		atomic_fetch_sub(&srq->cq->usecnt, 1);
		atomic_fetch_sub(&srq->xrcd->usecnt, 1);
	}
	sv_async_forget(ibsrq->context, ibsrq);
	sv_async_wait_acked(ibsrq->context, ibsrq, &ibsrq->mutex, &ibsrq->cond,
			    &ibsrq->events_completed);
	atomic_fetch_sub(&srq->pd->usecnt, 1);
	pthread_cond_destroy(&ibsrq->cond);
	pthread_mutex_destroy(&ibsrq->mutex);
	sw_ring_free(&srq->ring);
	pthread_mutex_destroy(&srq->lock);
	free(srq);
	atomic_fetch_sub(&nsrq, 1);
	return 0;
}

/*
 * Contract: move the ring of `srq` (lock held) to one of at least
 * `max_wr` slots, keeping the queued WQEs in order; on success srq->max_wr
 * is the new size. 0, -EINVAL if fewer than the queued WQEs, -ENOMEM.
 */
static int srq_resize_locked(struct sw_srq *srq, uint32_t max_wr)
{
	uint32_t used = sw_ring_used(&srq->ring), i;
	struct sw_ring nr;
	int ret;

	if (max_wr < used)
		return -EINVAL;
	ret = sw_ring_alloc(&nr, srq->ibv.context, srq->pd, max_wr, srq->ring.stride);
	if (ret)
		return ret;
	for (i = 0; i < used; i++)
		memcpy(sw_ring_slot(&nr, i), sw_ring_slot(&srq->ring, srq->ring.cons + i),
		       srq->ring.stride);
	nr.prod = used;
	nr.cons = 0;
	sw_ring_free(&srq->ring);
	srq->ring = nr;
	srq->max_wr = nr.nslots;
	return 0;
}

/*
 * Contract: sv_ops.modify_srq. IBV_SRQ_MAX_WR resizes (1..max_srq_wr and
 * not below the queued WQEs, else -EINVAL); IBV_SRQ_LIMIT arms the limit
 * event (0 disarms; above the resulting max_wr -EINVAL). Unknown mask
 * bits are -EINVAL. Nothing changes unless everything is valid; on
 * success attr->max_wr is the granted size when resized.
 */
int sw_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct sw_srq *srq = sw_srq(ibsrq);
	uint32_t max_wr;
	int ret = 0;

	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return -EINVAL;
	if ((mask & IBV_SRQ_MAX_WR) && (attr->max_wr < 1 || attr->max_wr > SW_MAX_SRQ_WR))
		return -EINVAL;
	pthread_mutex_lock(&srq->lock);
	max_wr = srq->max_wr;
	if (mask & IBV_SRQ_MAX_WR) {
		if (attr->max_wr < sw_ring_used(&srq->ring)) {
			ret = -EINVAL;
			goto out;
		}
		max_wr = attr->max_wr; /* a lower bound: the granted size may be larger */
	}
	if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit > max_wr) {
		ret = -EINVAL;
		goto out;
	}
	if (mask & IBV_SRQ_MAX_WR) {
		ret = srq_resize_locked(srq, attr->max_wr);
		if (ret)
			goto out;
		attr->max_wr = srq->max_wr;
	}
	if (mask & IBV_SRQ_LIMIT)
		srq->limit = attr->srq_limit;
out:
	pthread_mutex_unlock(&srq->lock);
	return ret;
}

/* Contract: sv_ops.query_srq: granted max_wr and max_sge, the armed limit (0 = none). */
int sw_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct sw_srq *srq = sw_srq(ibsrq);

	pthread_mutex_lock(&srq->lock);
	attr->max_wr = srq->max_wr;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = srq->limit;
	pthread_mutex_unlock(&srq->lock);
	return 0;
}

/* Contract: sv_ops.get_srq_num. */
int sw_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	*srq_num = sw_srq(ibsrq)->srq_num;
	return 0;
}

/*
 * Contract: the ABI post_srq_recv (positive errno). Queues the WRs in
 * order; the first one that has num_sge outside 0..max_sge (EINVAL) or
 * finds the SRQ full (ENOMEM) stops the list and is returned in *bad.
 */
int sw_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sw_srq *srq = sw_srq(ibsrq);
	struct sw_recv_wqe *w;
	int ret = 0, i;

	pthread_mutex_lock(&srq->lock);
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > srq->max_sge) {
			ret = EINVAL;
			break;
		}
		if (sw_ring_used(&srq->ring) >= srq->max_wr) {
			ret = ENOMEM;
			break;
		}
		w = sw_ring_slot(&srq->ring, srq->ring.prod);
		w->wr_id = wr->wr_id;
		w->num_sge = (uint32_t)wr->num_sge;
		w->length = 0;
		for (i = 0; i < wr->num_sge; i++) {
			w->sge[i] = wr->sg_list[i];
			w->length += wr->sg_list[i].length;
		}
		srq->ring.prod++;
	}
	pthread_mutex_unlock(&srq->lock);
	if (ret)
		*bad = wr;
	return ret;
}

/* Contract: raise IBV_EVENT_SRQ_LIMIT_REACHED for `srq`. */
static void post_limit_event(struct sw_srq *srq)
{
	struct ibv_async_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
	ev.element.srq = &srq->ibv;
	(void)sv_async_post(srq->ibv.context, &ev);
}

/* Contract: see queue.h. */
int sw_srq_take(struct sw_srq *srq, struct sw_recv_wqe *out)
{
	const struct sw_recv_wqe *w;
	bool limit_reached = false;

	pthread_mutex_lock(&srq->lock);
	if (!sw_ring_used(&srq->ring)) {
		pthread_mutex_unlock(&srq->lock);
		return -EAGAIN;
	}
	w = sw_ring_slot(&srq->ring, srq->ring.cons);
	memcpy(out, w, sw_recv_wqe_size(w->num_sge));
	srq->ring.cons++;
	if (srq->limit && sw_ring_used(&srq->ring) < srq->limit) {
		srq->limit = 0;
		limit_reached = true;
	}
	pthread_mutex_unlock(&srq->lock);
	if (limit_reached)
		post_limit_event(srq);
	return 0;
}
