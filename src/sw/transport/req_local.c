/* SPDX-License-Identifier: MIT */
/*
 * req_local.c - the send queue's local operations: BIND_MW and
 * LOCAL_INV, which the requester executes itself and which send nothing.
 *
 * The requester runs one once every WQE before it has completed (as if
 * fenced: IBTA lets a bind wait for earlier work), so it completes in
 * order at once. A failure completes it with the status rxe gives,
 * IBV_WC_MW_BIND_ERR for a bind and IBV_WC_LOC_QP_OP_ERR for an
 * invalidation, and the QP moves to the error state (sw_comp_retire),
 * flushing what follows. The rules themselves are mem/mw.c's.
 */
#include "sw/transport/transport_priv.h"

/* Contract: see transport_priv.h (qp->lock held). */
enum ibv_wc_status sw_req_local_op(struct sw_qp *qp, const struct sw_send_wqe *w)
{
	struct sw_dev *dev = sw_dev_of(qp->ibv.qp_base.context);
	const struct sw_pd *pd = sw_pd_base(qp->ibv.qp_base.pd);

	if (w->opcode == IBV_WR_BIND_MW)
		return sw_mw_bind(dev, pd, qp->uid, &w->wr.bind) ? IBV_WC_MW_BIND_ERR :
								   IBV_WC_SUCCESS;
	return sw_mw_invalidate(dev, be32toh(w->imm_data), pd, qp->uid, false) ?
		       IBV_WC_LOC_QP_OP_ERR :
		       IBV_WC_SUCCESS;
}
