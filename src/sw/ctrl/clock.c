/* SPDX-License-Identifier: MIT */
/*
 * clock.c - the device's "HCA clock": CLOCK_MONOTONIC in nanoseconds.
 *
 * Completion timestamps (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) count this
 * clock, so ibv_query_rt_values_ex() reads it for correlation, and the
 * device reports hca_core_clock = 1,000,000 kHz.
 */
#include <time.h>

#include "sw/ctrl.h"

/*
 * Contract: the sv_ops query_rt_values slot. Fills the values requested
 * in values->comp_mask that the device has (the raw clock) and leaves in
 * comp_mask exactly those it filled. 0 or -errno.
 */
int sw_query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *values)
{
	uint32_t want = values->comp_mask;

	values->comp_mask = 0;
	if (want & IBV_VALUES_MASK_RAW_CLOCK) {
		if (clock_gettime(SW_CQ_TS_CLOCK, &values->raw_clock))
			return -errno;
		values->comp_mask |= IBV_VALUES_MASK_RAW_CLOCK;
	}
	return 0;
}
