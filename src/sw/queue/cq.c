/* SPDX-License-Identifier: MIT */
/*
 * cq.c - completion queues of the software device.
 *
 * A CQ is a ring of struct sw_cqe with one slot more than its capacity
 * (ibv_cq.cqe = nslots - 1), guarded by cq->lock. Producers (the
 * transport, flushes, local errors) call sw_cq_push(); consumers are
 * poll_cq and the ibv_cq_ex iterator (cq_ex.c), which holds the lock
 * from start_poll to end_poll.
 *
 * Events: req_notify_cq arms the CQ for the next completion, or for the
 * next solicited or error completion; that completion disarms it and
 * queues one event on the CQ's channel (unless CQ moderation holds the
 * event back for more completions or until its period is over: cq_mod.c). A full CQ drops the
 * completion and raises IBV_EVENT_CQ_ERR, once in the CQ's life (an overrun is a fatal CQ error in
 * the IB model; the CQ keeps working for completions that fit).
 *
 * Limits: max_cq is counted per process (the device is one per process).
 * IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN is refused with EOPNOTSUPP, as rxe
 * does; SINGLE_THREADED is accepted (the lock stays: producers run on
 * other threads).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sw/queue.h"

#define SW_CQ_COMP_MASK (IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)
#define SW_CQ_FLAGS IBV_CREATE_CQ_ATTR_SINGLE_THREADED

enum {
	SW_CQ_ARM_NEXT = 1,
	SW_CQ_ARM_SOLICITED = 2
};

static atomic_uint ncq; /* live CQs, against SW_MAX_CQ */
static atomic_uint next_cq_handle = 1;

/*
 * Contract: check a create request in the order mlx5 and the kernel do;
 * on success *pd is the parent domain given (or NULL). 0 or -errno.
 */
static int check_create(struct ibv_context *ctx, const struct ibv_cq_init_attr_ex *attr,
			struct sw_pd **pd)
{
	*pd = NULL;
	if (!attr)
		return -EINVAL;
	if (attr->comp_mask & ~(uint32_t)SW_CQ_COMP_MASK)
		return -EINVAL;
	if (attr->wc_flags & ~SW_CQ_WC_FLAGS)
		return -EOPNOTSUPP;
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~(uint32_t)SW_CQ_FLAGS))
		return -EOPNOTSUPP;
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
		struct ibv_pd *p = attr->parent_domain;

		if (!p || !sw_pd(p)->is_parent || p->context != ctx)
			return -EINVAL;
		*pd = sw_pd(p);
	}
	if (attr->cqe < 1 || attr->cqe > SW_MAX_CQE)
		return -EINVAL;
	if (attr->comp_vector >= (uint32_t)ctx->num_comp_vectors)
		return -EINVAL;
	if (attr->channel && attr->channel->context != ctx)
		return -EINVAL;
	return 0;
}

/*
 * Contract: sv_ops.create_cq_ex. -EINVAL / -EOPNOTSUPP per check_create,
 * -ENOMEM past max_cq, -EOPNOTSUPP on a bounce device unless the CQ is
 * made on a CC parent domain (its ring is then shared memory). A parent
 * domain gains a reference for the CQ's lifetime.
 */
int sw_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr,
		    struct ibv_cq_ex **out)
{
	struct sw_pd *pd;
	struct sw_cq *cq;
	int ret;

	ret = check_create(ctx, attr, &pd);
	if (ret)
		return ret;
	cq = sw_limit_calloc(&ncq, SW_MAX_CQ, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	ret = sw_ring_alloc(&cq->ring, ctx, pd, attr->cqe + 1, sizeof(struct sw_cqe));
	if (ret)
		goto err_free;
	pthread_mutex_init(&cq->lock, NULL);
	sv_cq_init(ibv_cq_ex_to_cq(&cq->ibv), ctx, attr->channel, attr->cq_context);
	cq->ibv.handle = atomic_fetch_add(&next_cq_handle, 1);
	cq->ibv.cqe = (int)(cq->ring.nslots - 1);
	cq->ibv.comp_mask = 0;
	cq->wc_flags = attr->wc_flags;
	cq->pd = pd;
	atomic_init(&cq->usecnt, 0);
	sw_cq_ex_install(cq);
	if (pd)
		atomic_fetch_add(&pd->usecnt, 1);
	*out = &cq->ibv;
	return 0;

err_free:
	free(cq);
	atomic_fetch_sub(&ncq, 1);
	return ret;
}

/*
 * Contract: sv_ops.destroy_cq. -EBUSY while QPs or SRQs use the CQ.
 * Otherwise drops the CQ's unread channel events, waits until every
 * event the application received has been acknowledged, and frees it.
 */
int sw_destroy_cq(struct ibv_cq *ibcq)
{
	struct sw_cq *cq = sw_cq(ibcq);
	unsigned int removed = 0;
	uint32_t reported;

	if (atomic_load(&cq->usecnt) > 0)
		return -EBUSY;
	sw_engine_cq_unwatch(sw_dev_of(ibcq->context), cq);
	if (ibcq->channel)
		removed = sv_comp_channel_forget(ibcq->channel, ibcq);
	pthread_mutex_lock(&cq->lock);
	cq->events_reported -= removed;
	reported = cq->events_reported;
	pthread_mutex_unlock(&cq->lock);
	sv_cq_wait_acks(ibcq, reported);
	sv_async_forget(ibcq->context, ibcq);
	sv_async_wait_acked(ibcq->context, ibcq, &ibcq->mutex, &ibcq->cond,
			    &ibcq->async_events_completed);
	sv_cq_fini(ibcq);
	if (cq->pd)
		atomic_fetch_sub(&cq->pd->usecnt, 1);
	sw_ring_free(&cq->ring);
	pthread_mutex_destroy(&cq->lock);
	free(cq);
	atomic_fetch_sub(&ncq, 1);
	return 0;
}

/*
 * Contract: sv_ops.resize_cq. Keeps the queued completions in order.
 * -EOPNOTSUPP on a CC parent domain (as mlx5), -EINVAL for cqe outside
 * 1..max_cqe or below the number of queued completions, -ENOMEM.
 */
int sw_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sw_cq *cq = sw_cq(ibcq);
	struct sw_ring nr;
	uint32_t used, i;
	int ret;

	if (cq->pd && cq->pd->cc_alloc)
		return -EOPNOTSUPP;
	if (cqe < 1 || cqe > SW_MAX_CQE)
		return -EINVAL;
	pthread_mutex_lock(&cq->lock);
	used = sw_ring_used(&cq->ring);
	if ((uint32_t)cqe < used) {
		ret = -EINVAL;
		goto out;
	}
	ret = sw_ring_alloc(&nr, ibcq->context, cq->pd, (uint32_t)cqe + 1, sizeof(struct sw_cqe));
	if (ret)
		goto out;
	for (i = 0; i < used; i++)
		memcpy(sw_ring_slot(&nr, i), sw_ring_slot(&cq->ring, cq->ring.cons + i),
		       sizeof(struct sw_cqe));
	nr.prod = used;
	nr.cons = 0;
	sw_ring_free(&cq->ring);
	cq->ring = nr;
	sw_cq_avail_set(cq);
	ibcq->cqe = (int)(nr.nslots - 1);
out:
	pthread_mutex_unlock(&cq->lock);
	return ret;
}

/* Contract: up to num_entries completions of `cq` into wc, oldest first. */
static int take(struct sw_cq *cq, int num_entries, struct ibv_wc *wc)
{
	int n = 0;

	pthread_mutex_lock(&cq->lock);
	while (n < num_entries && sw_ring_used(&cq->ring)) {
		const struct sw_cqe *e = sw_ring_slot(&cq->ring, cq->ring.cons);

		wc[n++] = e->wc;
		cq->ring.cons++;
	}
	sw_cq_avail_set(cq);
	pthread_mutex_unlock(&cq->lock);
	return n;
}

/* Contract: the ABI poll_cq: up to num_entries completions, oldest first; -EINVAL if < 0. */
int sw_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct sw_cq *cq = sw_cq(ibcq);
	int n;

	if (num_entries < 0)
		return -EINVAL;
	/* empty: no lock (sw_cq.avail) */
	n = atomic_load_explicit(&cq->avail, memory_order_relaxed) ? take(cq, num_entries, wc) : 0;
	/*
	 * Empty: a receive pass (sw_cq_empty_poll). Fewer than asked: what the
	 * links hold may complete more (a stream's ACKs), and this thread takes
	 * them while the progress thread sleeps rather than leave them to a
	 * wake-up (sw_transport_poll).
	 */
	if (!n && num_entries && sw_cq_empty_poll(ibcq->context))
		n = take(cq, num_entries, wc);
	else if (n && n < num_entries && sw_transport_poll(sw_dev_of(ibcq->context), true))
		n += take(cq, num_entries - n, wc + n);
	return n;
}

/* Contract: see sw/queue.h. */
bool sw_cq_empty_poll(struct ibv_context *ctx)
{
	struct sw_dev *dev = sw_dev_of(ctx);

	/* without writing the shared line when it is set already */
	if (!atomic_load_explicit(&dev->app_polls, memory_order_relaxed))
		atomic_store_explicit(&dev->app_polls, true, memory_order_relaxed);
	if (sw_transport_poll(dev, false))
		return true;
	sched_yield();
	return false;
}

/*
 * Contract: the ABI req_notify_cq (positive errno). Arms the CQ for the
 * next completion, or with solicited_only for the next solicited or
 * error completion; an arm for any completion is never narrowed.
 */
int sw_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct sw_cq *cq = sw_cq(ibcq);
	int arm = solicited_only ? SW_CQ_ARM_SOLICITED : SW_CQ_ARM_NEXT;

	pthread_mutex_lock(&cq->lock);
	if (!cq->armed || arm == SW_CQ_ARM_NEXT)
		cq->armed = arm;
	pthread_mutex_unlock(&cq->lock);
	sw_transport_unlease(sw_dev_of(ibcq->context));
	return 0;
}

/* Contract: nanoseconds of `clk` now (0 if the clock fails). */
static uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	if (clock_gettime(clk, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Contract: raise IBV_EVENT_CQ_ERR for `cq` on its context's async queue. */
static void post_cq_err(struct sw_cq *cq)
{
	struct ibv_async_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event_type = IBV_EVENT_CQ_ERR;
	ev.element.cq = ibv_cq_ex_to_cq(&cq->ibv);
	(void)sv_async_post(cq->ibv.context, &ev);
}

/* Contract: see queue.h. */
int sw_cq_push(struct sw_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	uint64_t ts = 0, wall = 0;
	struct sw_cqe *e;
	bool first;

	if (cq->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		ts = clock_ns(SW_CQ_TS_CLOCK);
	if (cq->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		wall = clock_ns(CLOCK_REALTIME);
	pthread_mutex_lock(&cq->lock);
	if (sw_ring_used(&cq->ring) >= cq->ring.nslots - 1) {
		first = !cq->overflow;
		cq->overflow = true;
		pthread_mutex_unlock(&cq->lock);
		if (first)
			post_cq_err(cq);
		return -ENOSPC;
	}
	e = sw_ring_slot(&cq->ring, cq->ring.prod);
	e->wc = *wc;
	e->ts_ns = ts;
	e->wallclock_ns = wall;
	cq->ring.prod++;
	sw_cq_avail_set(cq);
	if ((cq->armed == SW_CQ_ARM_NEXT ||
	     (cq->armed == SW_CQ_ARM_SOLICITED && (solicited || wc->status != IBV_WC_SUCCESS))) &&
	    !sw_cq_mod_hold(cq))
		sw_cq_fire_locked(cq);
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

/* Contract: see queue.h. */
void sw_cq_fire_locked(struct sw_cq *cq)
{
	struct ibv_cq *ibcq = ibv_cq_ex_to_cq(&cq->ibv);

	cq->armed = 0;
	cq->mod_pending = 0;
	cq->mod_deadline_ns = 0;
	if (ibcq->channel && !sv_comp_channel_post(ibcq->channel, ibcq))
		cq->events_reported++;
}

/* Contract: see queue.h. */
void sw_cq_clean(struct sw_cq *cq, uint32_t qp_num)
{
	uint32_t i, keep;

	if (!cq)
		return;
	pthread_mutex_lock(&cq->lock);
	keep = cq->ring.prod;
	for (i = cq->ring.prod; i != cq->ring.cons; i--) {
		struct sw_cqe *e = sw_ring_slot(&cq->ring, i - 1);

		if (e->wc.qp_num == qp_num)
			continue;
		keep--;
		if (keep != i - 1)
			memcpy(sw_ring_slot(&cq->ring, keep), e, sizeof(*e));
	}
	cq->ring.cons = keep;
	sw_cq_avail_set(cq);
	pthread_mutex_unlock(&cq->lock);
}
