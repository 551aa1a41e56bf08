/* SPDX-License-Identifier: MIT */
/*
 * cq_ex.c - the ibv_cq_ex iterator: start_poll, next_poll, end_poll and
 * the ibv_wc_read_*() accessors.
 *
 * start_poll takes cq->lock and makes the oldest completion current;
 * next_poll consumes it and moves on; end_poll consumes the current one
 * (if any) and releases the lock. ibv_cq_ex.status and wr_id follow the
 * current completion.
 *
 * As on other providers, only the accessors of fields the CQ was created
 * with (wc_flags) are installed; opcode, vendor_err and wc_flags always
 * are. The others stay NULL.
 */

#include "sw/queue.h"

static struct sw_cq *cq_of(struct ibv_cq_ex *ibcq)
{
	return sv_container_of(ibcq, struct sw_cq, ibv);
}

/* Contract: the current completion (valid between start_poll and end_poll). */
static const struct ibv_wc *cur_wc(struct ibv_cq_ex *ibcq)
{
	return &cq_of(ibcq)->cur->wc;
}

/* Contract: make the completion at the consumer index current, or none. */
static int set_current(struct sw_cq *cq)
{
	if (!sw_ring_used(&cq->ring)) {
		cq->cur = NULL;
		return ENOENT;
	}
	cq->cur = sw_ring_slot(&cq->ring, cq->ring.cons);
	cq->ibv.status = cq->cur->wc.status;
	cq->ibv.wr_id = cq->cur->wc.wr_id;
	return 0;
}

/* Contract: ABI start_poll. 0 with the lock held, ENOENT (lock released) when empty. */
static int sw_start_poll(struct ibv_cq_ex *ibcq, struct ibv_poll_cq_attr *attr)
{
	struct sw_cq *cq = cq_of(ibcq);
	int ret;

	if (attr && attr->comp_mask)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	ret = set_current(cq);
	if (ret == ENOENT) { /* as an empty poll_cq (cq.c) */
		pthread_mutex_unlock(&cq->lock);
		if (!sw_cq_empty_poll(ibcq->context))
			return ENOENT;
		pthread_mutex_lock(&cq->lock);
		ret = set_current(cq);
	}
	if (ret)
		pthread_mutex_unlock(&cq->lock);
	return ret;
}

/* Contract: ABI next_poll. Consumes the current completion; ENOENT at the end. */
static int sw_next_poll(struct ibv_cq_ex *ibcq)
{
	struct sw_cq *cq = cq_of(ibcq);

	if (cq->cur) {
		cq->ring.cons++;
		sw_cq_avail_set(cq);
		cq->cur = NULL;
	}
	return set_current(cq);
}

/* Contract: ABI end_poll. Consumes the current completion and releases the lock. */
static void sw_end_poll(struct ibv_cq_ex *ibcq)
{
	struct sw_cq *cq = cq_of(ibcq);

	if (cq->cur) {
		cq->ring.cons++;
		sw_cq_avail_set(cq);
		cq->cur = NULL;
	}
	pthread_mutex_unlock(&cq->lock);
}

static enum ibv_wc_opcode sw_read_opcode(struct ibv_cq_ex *ibcq)
{
	return cur_wc(ibcq)->opcode;
}

static uint32_t sw_read_vendor_err(struct ibv_cq_ex *ibcq)
{
	return cur_wc(ibcq)->vendor_err;
}

static uint32_t sw_read_byte_len(struct ibv_cq_ex *ibcq)
{
	return cur_wc(ibcq)->byte_len;
}

/* The immediate data, or the invalidated rkey (same slot of ibv_wc). */
static __be32 sw_read_imm_data(struct ibv_cq_ex *ibcq)
{
	return cur_wc(ibcq)->imm_data;
}

static uint32_t sw_read_qp_num(struct ibv_cq_ex *ibcq)
{
	return cur_wc(ibcq)->qp_num;
}

static uint32_t sw_read_src_qp(struct ibv_cq_ex *ibcq)
{
	return cur_wc(ibcq)->src_qp;
}

static unsigned int sw_read_wc_flags(struct ibv_cq_ex *ibcq)
{
	return cur_wc(ibcq)->wc_flags;
}

static uint32_t sw_read_slid(struct ibv_cq_ex *ibcq)
{
	return cur_wc(ibcq)->slid;
}

static uint8_t sw_read_sl(struct ibv_cq_ex *ibcq)
{
	return cur_wc(ibcq)->sl;
}

static uint8_t sw_read_dlid_path_bits(struct ibv_cq_ex *ibcq)
{
	return cur_wc(ibcq)->dlid_path_bits;
}

/* In HCA clock units: CLOCK_MONOTONIC nanoseconds (SW_HCA_CORE_CLOCK_KHZ). */
static uint64_t sw_read_completion_ts(struct ibv_cq_ex *ibcq)
{
	return cq_of(ibcq)->cur->ts_ns;
}

static uint64_t sw_read_completion_wallclock_ns(struct ibv_cq_ex *ibcq)
{
	return cq_of(ibcq)->cur->wallclock_ns;
}

/* Contract: see queue.h. Requires cq->wc_flags to be set. */
void sw_cq_ex_install(struct sw_cq *cq)
{
	struct ibv_cq_ex *x = &cq->ibv;
	uint64_t f = cq->wc_flags;

	x->start_poll = sw_start_poll;
	x->next_poll = sw_next_poll;
	x->end_poll = sw_end_poll;
	x->read_opcode = sw_read_opcode;
	x->read_vendor_err = sw_read_vendor_err;
	x->read_wc_flags = sw_read_wc_flags;
	if (f & IBV_WC_EX_WITH_BYTE_LEN)
		x->read_byte_len = sw_read_byte_len;
	if (f & IBV_WC_EX_WITH_IMM)
		x->read_imm_data = sw_read_imm_data;
	if (f & IBV_WC_EX_WITH_QP_NUM)
		x->read_qp_num = sw_read_qp_num;
	if (f & IBV_WC_EX_WITH_SRC_QP)
		x->read_src_qp = sw_read_src_qp;
	if (f & IBV_WC_EX_WITH_SLID)
		x->read_slid = sw_read_slid;
	if (f & IBV_WC_EX_WITH_SL)
		x->read_sl = sw_read_sl;
	if (f & IBV_WC_EX_WITH_DLID_PATH_BITS)
		x->read_dlid_path_bits = sw_read_dlid_path_bits;
	if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		x->read_completion_ts = sw_read_completion_ts;
	if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		x->read_completion_wallclock_ns = sw_read_completion_wallclock_ns;
}
