/* SPDX-License-Identifier: MIT */
/*
 * pd.c - the exported protection-domain verbs.
 *
 * Parent and thread domains have no exported symbols: their inline
 * wrappers in verbs.h reach the device through the verbs_context shims.
 * ibv_dealloc_pd() serves both PDs and parent domains.
 */
#include "core/core.h"

SV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct ibv_pd *pd = NULL;
	int ret = sv_ops_of(context)->alloc_pd(context, &pd);

	if (!ret)
		pd->context = context;
	return SV_RET_PTR(ret, pd);
}

SV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	return sv_ret_int(sv_ops_of(pd->context)->dealloc_pd(pd));
}
