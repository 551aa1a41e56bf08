/* SPDX-License-Identifier: MIT */
/*
 * cq.c - the exported CQ verbs and the core's part of every CQ.
 *
 * ibv_create_cq_ex reaches the device through the verbs_context shim;
 * ibv_create_cq is the same call with the standard wc_flags. The device
 * calls sv_cq_init()/sv_cq_fini() so that the fields rdma-core's own
 * code owns (mutex, cond, event counters, the channel's refcnt) are kept
 * the way rdma-core keeps them, whichever way the CQ was made.
 */
#include "core/core.h"

/* Contract: see core.h. */
void sv_cq_init(struct ibv_cq *cq, struct ibv_context *ctx, struct ibv_comp_channel *channel,
		void *cq_context)
{
	cq->context = ctx;
	cq->channel = channel;
	cq->cq_context = cq_context;
	cq->comp_events_completed = 0;
	cq->async_events_completed = 0;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
	if (channel) {
		pthread_mutex_lock(&channel->context->mutex);
		channel->refcnt++;
		pthread_mutex_unlock(&channel->context->mutex);
	}
}

/* Contract: see core.h. */
void sv_cq_fini(struct ibv_cq *cq)
{
	struct ibv_comp_channel *channel = cq->channel;

	if (channel) {
		pthread_mutex_lock(&channel->context->mutex);
		channel->refcnt--;
		pthread_mutex_unlock(&channel->context->mutex);
	}
	pthread_cond_destroy(&cq->cond);
	pthread_mutex_destroy(&cq->mutex);
}

/* Contract: see core.h. */
void sv_cq_wait_acks(struct ibv_cq *cq, uint32_t comp_reported)
{
	pthread_mutex_lock(&cq->mutex);
	while (cq->comp_events_completed != comp_reported)
		pthread_cond_wait(&cq->cond, &cq->mutex);
	pthread_mutex_unlock(&cq->mutex);
}

SV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
				       struct ibv_comp_channel *channel, int comp_vector)
{
	struct ibv_cq_init_attr_ex attr = {
		.cqe = (uint32_t)cqe,
		.cq_context = cq_context,
		.channel = channel,
		.comp_vector = (uint32_t)comp_vector,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_cq_ex *cq = NULL;

	if (cqe < 0 || comp_vector < 0) {
		errno = EINVAL;
		return NULL;
	}
	return SV_RET_PTR(sv_ops_of(context)->create_cq_ex(context, &attr, &cq),
			  ibv_cq_ex_to_cq(cq));
}

SV_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	return sv_ret_int(sv_ops_of(cq->context)->destroy_cq(cq));
}

SV_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	return sv_ret_int(sv_ops_of(cq->context)->resize_cq(cq, cqe));
}

/* Count acknowledged completion events and wake a destroy waiting for them. */
SV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}
