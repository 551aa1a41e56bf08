/* SPDX-License-Identifier: MIT */
/*
 * compat_cmd.c - the ibv_cmd_* stubs of rdma-core's private nodes
 * IBVERBS_PRIVATE_34 to _65: rdma-core's uverbs command marshalling for
 * its kernel providers. Each fails with EOPNOTSUPP and counts the call
 * (see compat_private.c for why they exist and what they may assume).
 * Each is exported at every private node that lists it (private_abi.h).
 */
#include "core/compat.h"
#include "core/core.h"
#include "core/private_abi.h"

/* A stub under an internal name; `since` is the first node with the name. */
#define CMD_STUB(since, name)                                                                      \
	static int cmd_##name(void *a1, void *a2, void *a3, void *a4, void *a5, void *a6)          \
	{                                                                                          \
		return sv_private_stub_fail();                                                     \
	}                                                                                          \
	SV_PRIVATE_SINCE_##since(cmd_##name, ibv_cmd_##name)

CMD_STUB(34, advise_mr);
CMD_STUB(34, alloc_dm);
CMD_STUB(34, alloc_mw);
CMD_STUB(34, alloc_pd);
CMD_STUB(34, attach_mcast);
CMD_STUB(34, close_xrcd);
CMD_STUB(34, create_ah);
CMD_STUB(34, create_counters);
CMD_STUB(34, create_cq);
CMD_STUB(34, create_cq_ex);
CMD_STUB(34, create_flow);
CMD_STUB(34, create_flow_action_esp);
CMD_STUB(34, create_qp);
CMD_STUB(34, create_qp_ex);
CMD_STUB(34, create_qp_ex2);
CMD_STUB(34, create_rwq_ind_table);
CMD_STUB(34, create_srq);
CMD_STUB(34, create_srq_ex);
CMD_STUB(34, create_wq);
CMD_STUB(34, dealloc_mw);
CMD_STUB(34, dealloc_pd);
CMD_STUB(34, dereg_mr);
CMD_STUB(34, destroy_ah);
CMD_STUB(34, destroy_counters);
CMD_STUB(34, destroy_cq);
CMD_STUB(34, destroy_flow);
CMD_STUB(34, destroy_flow_action);
CMD_STUB(34, destroy_qp);
CMD_STUB(34, destroy_rwq_ind_table);
CMD_STUB(34, destroy_srq);
CMD_STUB(34, destroy_wq);
CMD_STUB(34, detach_mcast);
CMD_STUB(34, free_dm);
CMD_STUB(34, get_context);
CMD_STUB(34, modify_cq);
CMD_STUB(34, modify_flow_action_esp);
CMD_STUB(34, modify_qp);
CMD_STUB(34, modify_qp_ex);
CMD_STUB(34, modify_srq);
CMD_STUB(34, modify_wq);
CMD_STUB(34, open_qp);
CMD_STUB(34, open_xrcd);
CMD_STUB(34, poll_cq);
CMD_STUB(34, post_recv);
CMD_STUB(34, post_send);
CMD_STUB(34, post_srq_recv);
CMD_STUB(34, query_context);
CMD_STUB(34, query_device_any);
CMD_STUB(34, query_mr);
CMD_STUB(34, query_port);
CMD_STUB(34, query_qp);
CMD_STUB(34, query_srq);
CMD_STUB(34, read_counters);
CMD_STUB(34, reg_dm_mr);
CMD_STUB(34, reg_dmabuf_mr);
CMD_STUB(34, reg_mr);
CMD_STUB(34, req_notify_cq);
CMD_STUB(34, rereg_mr);
CMD_STUB(34, resize_cq);

/* Added by rdma-core 57 to 65. */
CMD_STUB(57, create_cq_ex2);
CMD_STUB(59, alloc_dmah);
CMD_STUB(59, free_dmah);
CMD_STUB(59, reg_mr_ex);
CMD_STUB(64, export_dmabuf_fd);
CMD_STUB(64, query_port_speed);
CMD_STUB(65, create_comp_cntr);
CMD_STUB(65, destroy_comp_cntr);
CMD_STUB(65, inc_comp_cntr);
CMD_STUB(65, inc_err_comp_cntr);
CMD_STUB(65, qp_attach_comp_cntr);
CMD_STUB(65, query_comp_cntr_caps);
CMD_STUB(65, read_comp_cntr);
CMD_STUB(65, read_err_comp_cntr);
CMD_STUB(65, set_comp_cntr);
CMD_STUB(65, set_err_comp_cntr);

/* Only in IBVERBS_PRIVATE_34 (rdma-core 57 dropped it). */
static int cmd_query_device(void *a1, void *a2, void *a3, void *a4, void *a5, void *a6)
{
	return sv_private_stub_fail();
}

SV_PRIVATE_ONLY(cmd_query_device, ibv_cmd_query_device, 34);
