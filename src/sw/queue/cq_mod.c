/* SPDX-License-Identifier: MIT */
/*
 * cq_mod.c - CQ moderation (ibv_modify_cq with IBV_CQ_ATTR_MODERATE).
 *
 * A moderated CQ that is armed does not raise its completion event at
 * the first completion that meets the arm: it holds the event back until
 * `cq_count` such completions have come, or until `cq_period`
 * microseconds have passed since the first of them, whichever is first.
 * A count of 0 waits for the period alone, a period of 0 for the count
 * alone; both 0 turn moderation off (the default): every completion that
 * meets the arm raises the event at once. Completions themselves are
 * queued and can be polled at once either way: only the event waits.
 *
 * The period runs on the progress thread's timers (transport/progress.c
 * runs sw_cq_mod_tick on every CQ that was ever moderated, and the first
 * held completion makes it look in time: sw_engine_cq_deadline), so
 * nothing spins.
 *
 * Limits (ibv_query_device_ex's cq_mod_caps): max_cq_count 65535, the
 * largest a uint16_t holds; max_cq_period 4095 us, as mlx5 reports.
 * ibv_modify_cq's checks, in rdma-core's and the kernel's order:
 *   attr_mask with a bit from IBV_CQ_ATTR_RESERVED up      EOPNOTSUPP
 *   attr_mask 0                                           EINVAL
 *   cq_period beyond max_cq_period                        EINVAL
 */
#include <time.h>

#include "sw/queue.h"

enum {
	SW_CQ_MOD_MAX_PERIOD = 4095, /* us */
};

/* Contract: CLOCK_MONOTONIC in ns, the progress thread's clock. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Contract: see queue.h. */
int sw_modify_cq(struct ibv_cq *ibcq, struct ibv_modify_cq_attr *attr)
{
	struct sw_cq *cq = sw_cq(ibcq);
	bool on;

	if (!attr)
		return -EINVAL;
	if (attr->attr_mask & ~(uint32_t)(IBV_CQ_ATTR_RESERVED - 1))
		return -EOPNOTSUPP;
	if (!attr->attr_mask)
		return -EINVAL;
	if (attr->moderate.cq_period > SW_CQ_MOD_MAX_PERIOD)
		return -EINVAL;
	on = attr->moderate.cq_count || attr->moderate.cq_period;
	if (on) /* before the first held event can need the timer */
		sw_engine_cq_watch(sw_dev_of(ibcq->context), cq);
	pthread_mutex_lock(&cq->lock);
	cq->mod_count = attr->moderate.cq_count;
	cq->mod_period_us = attr->moderate.cq_period;
	/* a held event the new settings would not hold any more goes now */
	if (cq->armed && cq->mod_pending &&
	    (!on || (cq->mod_count && cq->mod_pending >= cq->mod_count)))
		sw_cq_fire_locked(cq);
	else if (cq->mod_pending)
		cq->mod_deadline_ns =
			cq->mod_period_us ? now_ns() + (uint64_t)cq->mod_period_us * 1000 : 0;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

/* Contract: see queue.h. */
bool sw_cq_mod_hold(struct sw_cq *cq)
{
	if (!cq->mod_count && !cq->mod_period_us)
		return false;
	cq->mod_pending++;
	if (cq->mod_count && cq->mod_pending >= cq->mod_count)
		return false;
	if (cq->mod_pending == 1 && cq->mod_period_us) {
		cq->mod_deadline_ns = now_ns() + (uint64_t)cq->mod_period_us * 1000;
		sw_engine_cq_deadline(sw_dev_of(cq->ibv.context), cq->mod_deadline_ns);
	}
	return true;
}

/* Contract: see queue.h. */
uint64_t sw_cq_mod_tick(struct sw_cq *cq, uint64_t now)
{
	uint64_t d;

	pthread_mutex_lock(&cq->lock);
	if (cq->armed && cq->mod_pending && cq->mod_deadline_ns && now >= cq->mod_deadline_ns)
		sw_cq_fire_locked(cq);
	d = cq->mod_pending ? cq->mod_deadline_ns : 0;
	pthread_mutex_unlock(&cq->lock);
	return d;
}
