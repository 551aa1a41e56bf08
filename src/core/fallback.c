/* SPDX-License-Identifier: MIT */
/*
 * fallback.c - EOPNOTSUPP for every op a device leaves out.
 *
 * sv_ops_fill_fallbacks() runs once per context, before the ops are
 * published, so the dispatch code never tests for NULL.
 */
#include "core/core.h"

#define FALLBACK(name, ...)                                                                        \
	static int fb_##name(__VA_ARGS__)                                                          \
	{                                                                                          \
		return -EOPNOTSUPP;                                                                \
	}

FALLBACK(query_device_ex, struct ibv_context *c, struct ibv_device_attr_ex *a)
FALLBACK(query_port, struct ibv_context *c, uint8_t p, struct ibv_port_attr *a)
FALLBACK(query_gid_ex, struct ibv_context *c, uint8_t p, uint32_t i, struct ibv_gid_entry *e)
FALLBACK(query_pkey, struct ibv_context *c, uint8_t p, int i, __be16 *k)
FALLBACK(query_rt_values, struct ibv_context *c, struct ibv_values_ex *v)
FALLBACK(alloc_pd, struct ibv_context *c, struct ibv_pd **pd)
FALLBACK(dealloc_pd, struct ibv_pd *pd)
FALLBACK(alloc_parent_domain, struct ibv_context *c, struct ibv_parent_domain_init_attr *a,
	 struct ibv_pd **pd)
FALLBACK(alloc_td, struct ibv_context *c, struct ibv_td_init_attr *a, struct ibv_td **td)
FALLBACK(dealloc_td, struct ibv_td *td)
FALLBACK(reg_mr, struct ibv_pd *pd, const struct ibv_mr_init_attr *a, bool l, struct ibv_mr **mr)
FALLBACK(rereg_mr, struct ibv_mr *mr, int f, struct ibv_pd *pd, void *a, size_t l, int acc)
FALLBACK(dereg_mr, struct ibv_mr *mr)
FALLBACK(alloc_null_mr, struct ibv_pd *pd, struct ibv_mr **mr)
FALLBACK(advise_mr, struct ibv_pd *pd, enum ibv_advise_mr_advice a, uint32_t f, struct ibv_sge *s,
	 uint32_t n)
FALLBACK(alloc_buf, struct ibv_pd *pd, size_t s, struct ibv_buf **b, void **a)
FALLBACK(alloc_dmah, struct ibv_context *c, struct ibv_dmah_init_attr *a, struct ibv_dmah **d)
FALLBACK(dealloc_dmah, struct ibv_dmah *d)
FALLBACK(alloc_mw, struct ibv_pd *pd, enum ibv_mw_type t, struct ibv_mw **mw)
FALLBACK(dealloc_mw, struct ibv_mw *mw)
FALLBACK(alloc_dm, struct ibv_context *c, struct ibv_alloc_dm_attr *a, struct ibv_dm **dm)
FALLBACK(free_dm, struct ibv_dm *dm)
FALLBACK(reg_dm_mr, struct ibv_pd *pd, struct ibv_dm *dm, uint64_t o, size_t l, unsigned int a,
	 struct ibv_mr **mr)
FALLBACK(dm_export_dmabuf_fd, struct ibv_dm *dm)
FALLBACK(create_cq_ex, struct ibv_context *c, struct ibv_cq_init_attr_ex *a, struct ibv_cq_ex **cq)
FALLBACK(destroy_cq, struct ibv_cq *cq)
FALLBACK(resize_cq, struct ibv_cq *cq, int n)
FALLBACK(modify_cq, struct ibv_cq *cq, struct ibv_modify_cq_attr *a)
FALLBACK(create_qp_ex, struct ibv_context *c, struct ibv_qp_init_attr_ex *a, struct ibv_qp **qp)
FALLBACK(open_qp, struct ibv_context *c, struct ibv_qp_open_attr *a, struct ibv_qp **qp)
FALLBACK(modify_qp, struct ibv_qp *qp, struct ibv_qp_attr *a, int m)
FALLBACK(query_qp, struct ibv_qp *qp, struct ibv_qp_attr *a, int m, struct ibv_qp_init_attr *i)
FALLBACK(destroy_qp, struct ibv_qp *qp)
FALLBACK(query_ece, struct ibv_qp *qp, struct ibv_ece *e)
FALLBACK(set_ece, struct ibv_qp *qp, struct ibv_ece *e)
FALLBACK(query_qp_data_in_order, struct ibv_qp *qp, enum ibv_wr_opcode o, uint32_t f)
FALLBACK(modify_qp_rate_limit, struct ibv_qp *qp, struct ibv_qp_rate_limit_attr *a)
FALLBACK(attach_mcast, struct ibv_qp *qp, const union ibv_gid *g, uint16_t l)
FALLBACK(detach_mcast, struct ibv_qp *qp, const union ibv_gid *g, uint16_t l)
FALLBACK(create_srq_ex, struct ibv_context *c, struct ibv_srq_init_attr_ex *a, struct ibv_srq **s)
FALLBACK(modify_srq, struct ibv_srq *s, struct ibv_srq_attr *a, int m)
FALLBACK(query_srq, struct ibv_srq *s, struct ibv_srq_attr *a)
FALLBACK(destroy_srq, struct ibv_srq *s)
FALLBACK(get_srq_num, struct ibv_srq *s, uint32_t *n)
FALLBACK(create_ah, struct ibv_pd *pd, struct ibv_ah_attr *a, struct ibv_ah **ah)
FALLBACK(destroy_ah, struct ibv_ah *ah)
FALLBACK(open_xrcd, struct ibv_context *c, struct ibv_xrcd_init_attr *a, struct ibv_xrcd **x)
FALLBACK(close_xrcd, struct ibv_xrcd *x)
FALLBACK(create_wq, struct ibv_context *c, struct ibv_wq_init_attr *a, struct ibv_wq **wq)
FALLBACK(modify_wq, struct ibv_wq *wq, struct ibv_wq_attr *a)
FALLBACK(destroy_wq, struct ibv_wq *wq)
FALLBACK(create_rwq_ind_table, struct ibv_context *c, struct ibv_rwq_ind_table_init_attr *a,
	 struct ibv_rwq_ind_table **t)
FALLBACK(destroy_rwq_ind_table, struct ibv_rwq_ind_table *t)
FALLBACK(create_flow, struct ibv_qp *qp, struct ibv_flow_attr *a, struct ibv_flow **f)
FALLBACK(destroy_flow, struct ibv_flow *f)
FALLBACK(create_counters, struct ibv_context *c, struct ibv_counters_init_attr *a,
	 struct ibv_counters **cn)
FALLBACK(destroy_counters, struct ibv_counters *cn)

/* Data-path fallbacks speak the ABI: positive errno, negative for poll. */
static int fb_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return -EOPNOTSUPP;
}

#define FALLBACK_ABI(name, ...)                                                                    \
	static int fb_##name(__VA_ARGS__)                                                          \
	{                                                                                          \
		return EOPNOTSUPP;                                                                 \
	}

FALLBACK_ABI(req_notify_cq, struct ibv_cq *cq, int s)
FALLBACK_ABI(bind_mw, struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b)

/* A post that fails names its first work request as the bad one. */
#define FALLBACK_POST(name, obj_t, wr_t)                                                           \
	static int fb_##name(obj_t *o, wr_t *wr, wr_t **bad)                                       \
	{                                                                                          \
		*bad = wr;                                                                         \
		return EOPNOTSUPP;                                                                 \
	}

FALLBACK_POST(post_send, struct ibv_qp, struct ibv_send_wr)
FALLBACK_POST(post_recv, struct ibv_qp, struct ibv_recv_wr)
FALLBACK_POST(post_srq_recv, struct ibv_srq, struct ibv_recv_wr)
FALLBACK_POST(post_srq_ops, struct ibv_srq, struct ibv_ops_wr)
static void fb_free_buf(struct ibv_buf *buf)
{
}

static int fb_qp_to_qp_ex(struct ibv_qp *qp, struct ibv_qp_ex **qpx)
{
	*qpx = NULL;
	return 0;
}

static void fb_close_context(struct ibv_context *ctx)
{
}

#define FILL(slot)                                                                                 \
	do {                                                                                       \
		if (!ops->slot)                                                                    \
			ops->slot = fb_##slot;                                                     \
	} while (0)

/* Contract: after this returns, every slot of `ops` is non-NULL. */
void sv_ops_fill_fallbacks(struct sv_ops *ops)
{
	FILL(query_device_ex);
	FILL(query_port);
	FILL(query_gid_ex);
	FILL(query_pkey);
	FILL(query_rt_values);
	FILL(alloc_pd);
	FILL(dealloc_pd);
	FILL(alloc_parent_domain);
	FILL(alloc_td);
	FILL(dealloc_td);
	FILL(reg_mr);
	FILL(rereg_mr);
	FILL(dereg_mr);
	FILL(alloc_null_mr);
	FILL(advise_mr);
	FILL(alloc_buf);
	FILL(free_buf);
	FILL(alloc_dmah);
	FILL(dealloc_dmah);
	FILL(alloc_mw);
	FILL(dealloc_mw);
	FILL(alloc_dm);
	FILL(free_dm);
	FILL(reg_dm_mr);
	FILL(dm_export_dmabuf_fd);
	FILL(create_cq_ex);
	FILL(destroy_cq);
	FILL(resize_cq);
	FILL(modify_cq);
	FILL(create_qp_ex);
	FILL(open_qp);
	FILL(modify_qp);
	FILL(query_qp);
	FILL(destroy_qp);
	FILL(qp_to_qp_ex);
	FILL(query_ece);
	FILL(set_ece);
	FILL(query_qp_data_in_order);
	FILL(modify_qp_rate_limit);
	FILL(attach_mcast);
	FILL(detach_mcast);
	FILL(create_srq_ex);
	FILL(modify_srq);
	FILL(query_srq);
	FILL(destroy_srq);
	FILL(get_srq_num);
	FILL(create_ah);
	FILL(destroy_ah);
	FILL(open_xrcd);
	FILL(close_xrcd);
	FILL(create_wq);
	FILL(modify_wq);
	FILL(destroy_wq);
	FILL(create_rwq_ind_table);
	FILL(destroy_rwq_ind_table);
	FILL(create_flow);
	FILL(destroy_flow);
	FILL(create_counters);
	FILL(destroy_counters);
	FILL(close_context);
	FILL(poll_cq);
	FILL(req_notify_cq);
	FILL(post_send);
	FILL(post_recv);
	FILL(post_srq_recv);
	FILL(post_srq_ops);
	FILL(bind_mw);
}
