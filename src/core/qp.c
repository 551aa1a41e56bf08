/* SPDX-License-Identifier: MIT */
/*
 * qp.c - the exported queue-pair verbs.
 *
 * ibv_create_qp_ex is an inline in verbs.h: with comp_mask == PD it calls
 * ibv_create_qp, otherwise the verbs_context slot (vctx.c). Both end in
 * the device's create_qp_ex, which writes the granted capacities back
 * into the caller's cap, as rdma-core's command layer does.
 *
 * Unlike rdma-core, the core does not copy the state into ibv_qp.state
 * after modify or query: the device keeps that field itself, under the
 * QP's lock, and its transport may move the QP to ERR at any moment; a
 * late copy of the requested state would undo that.
 */
#include <string.h>

#include "core/core.h"

SV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;
	struct ibv_qp *qp = NULL;
	int ret;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, attr, sizeof(*attr)); /* ibv_qp_init_attr is ex's prefix */
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	ret = sv_ops_of(pd->context)->create_qp_ex(pd->context, &ex, &qp);
	if (!ret)
		attr->cap = ex.cap;
	return SV_RET_PTR(ret, qp);
}

SV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	return sv_ret_int(sv_ops_of(qp->context)->modify_qp(qp, attr, attr_mask));
}

SV_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			   struct ibv_qp_init_attr *init_attr)
{
	return sv_ret_int(sv_ops_of(qp->context)->query_qp(qp, attr, attr_mask, init_attr));
}

SV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	return sv_ret_int(sv_ops_of(qp->context)->destroy_qp(qp));
}

/* NULL, with errno EOPNOTSUPP, for a QP created without send_ops_flags. */
SV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct ibv_qp_ex *qpx = NULL;
	int ret = sv_ops_of(qp->context)->qp_to_qp_ex(qp, &qpx);

	if (!ret && !qpx)
		ret = -EOPNOTSUPP;
	return SV_RET_PTR(ret, qpx);
}

SV_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return sv_ret_int(sv_ops_of(qp->context)->query_ece(qp, ece));
}

SV_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return sv_ret_int(sv_ops_of(qp->context)->set_ece(qp, ece));
}

/*
 * rdma-core's rules: flags outside RETURN_CAPS | DEVICE_ONLY give 0; off
 * x86 the CPU may reorder, so only DEVICE_ONLY asks the device at all;
 * WHOLE_MSG implies ALIGNED_128_BYTES; without RETURN_CAPS the answer is
 * 1 or 0 for WHOLE_MSG. A device error counts as no guarantee.
 */
SV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	const uint32_t known =
		IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS | IBV_QUERY_QP_DATA_IN_ORDER_DEVICE_ONLY;
	int caps;

	if (flags & ~known)
		return 0;
#if !defined(__i386__) && !defined(__x86_64__)
	if (!(flags & IBV_QUERY_QP_DATA_IN_ORDER_DEVICE_ONLY))
		return 0;
#endif
	caps = sv_ops_of(qp->context)->query_qp_data_in_order(qp, op, flags);
	if (caps < 0)
		caps = 0;
	if (caps & IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG)
		caps |= IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES;
	if (flags & IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS)
		return caps;
	return !!(caps & IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG);
}

SV_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return sv_ret_int(sv_ops_of(qp->context)->attach_mcast(qp, gid, lid));
}

SV_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return sv_ret_int(sv_ops_of(qp->context)->detach_mcast(qp, gid, lid));
}
