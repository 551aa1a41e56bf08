/* SPDX-License-Identifier: MIT */
/*
 * srq.c - the exported SRQ verbs.
 *
 * ibv_create_srq is the basic form of create_srq_ex. The inline
 * ibv_create_srq_ex() calls it for basic requests, passing its extended
 * attr cast to struct ibv_srq_init_attr, so only that prefix is read
 * here. Other requests reach the device through the verbs_context shim.
 */
#include <string.h>

#include "core/core.h"

SV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *srq_init_attr)
{
	struct ibv_srq_init_attr_ex ex;
	struct ibv_srq *srq = NULL;
	int ret;

	memset(&ex, 0, sizeof(ex));
	ex.srq_context = srq_init_attr->srq_context;
	ex.attr = srq_init_attr->attr;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
	ex.srq_type = IBV_SRQT_BASIC;
	ex.pd = pd;
	ret = sv_ops_of(pd->context)->create_srq_ex(pd->context, &ex, &srq);
	if (!ret) {
		/* the granted sizes, as the kernel reports them */
		srq_init_attr->attr.max_wr = ex.attr.max_wr;
		srq_init_attr->attr.max_sge = ex.attr.max_sge;
	}
	return SV_RET_PTR(ret, srq);
}

SV_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask)
{
	return sv_ret_int(sv_ops_of(srq->context)->modify_srq(srq, srq_attr, srq_attr_mask));
}

SV_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr)
{
	return sv_ret_int(sv_ops_of(srq->context)->query_srq(srq, srq_attr));
}

SV_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	return sv_ret_int(sv_ops_of(srq->context)->destroy_srq(srq));
}
