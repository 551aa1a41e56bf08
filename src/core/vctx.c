/* SPDX-License-Identifier: MIT */
/*
 * vctx.c - the verbs_context slots that inline header code calls.
 *
 * Inline helpers in verbs.h (ibv_query_port, ibv_create_qp_ex, ...) call
 * these slots directly, so each speaks the libibverbs convention: NULL
 * plus errno for pointers, a positive errno for int. Each shim forwards
 * to the context's sv_ops slot.
 */
#include <string.h>

#include "core/core.h"
#include "core/vctx.h"

static int vq_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr,
			 size_t len)
{
	struct ibv_port_attr full;
	int ret;

	memset(&full, 0, sizeof(full));
	ret = sv_ops_of(ctx)->query_port(ctx, port, &full);
	if (ret)
		return -ret;
	/* Never write more than the caller's (possibly older) struct holds. */
	memcpy(attr, &full, len < sizeof(full) ? len : sizeof(full));
	return 0;
}

static int vq_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t size)
{
	struct ibv_device_attr_ex full;
	int ret;

	if (in && in->comp_mask)
		return EINVAL;
	if (size < sizeof(attr->orig_attr))
		return EINVAL;
	memset(&full, 0, sizeof(full));
	ret = sv_ops_of(ctx)->query_device_ex(ctx, &full);
	if (ret)
		return -ret;
	memcpy(attr, &full, size < sizeof(full) ? size : sizeof(full));
	return 0;
}

static int vq_query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *values)
{
	return sv_ret_int(sv_ops_of(ctx)->query_rt_values(ctx, values));
}

static struct ibv_pd *vq_alloc_parent_domain(struct ibv_context *ctx,
					     struct ibv_parent_domain_init_attr *attr)
{
	struct ibv_pd *pd = NULL;

	return SV_RET_PTR(sv_ops_of(ctx)->alloc_parent_domain(ctx, attr, &pd), pd);
}

static struct ibv_td *vq_alloc_td(struct ibv_context *ctx, struct ibv_td_init_attr *attr)
{
	struct ibv_td *td = NULL;

	return SV_RET_PTR(sv_ops_of(ctx)->alloc_td(ctx, attr, &td), td);
}

static int vq_dealloc_td(struct ibv_td *td)
{
	return sv_ret_int(sv_ops_of(td->context)->dealloc_td(td));
}

static struct ibv_mr *vq_alloc_null_mr(struct ibv_pd *pd)
{
	struct ibv_mr *mr = NULL;
	int ret = sv_ops_of(pd->context)->alloc_null_mr(pd, &mr);

	if (!ret) {
		mr->context = pd->context;
		mr->pd = pd;
	}
	return SV_RET_PTR(ret, mr);
}

static int vq_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
			struct ibv_sge *sg, uint32_t n)
{
	return sv_ret_int(sv_ops_of(pd->context)->advise_mr(pd, advice, flags, sg, n));
}

static struct ibv_dm *vq_alloc_dm(struct ibv_context *ctx, struct ibv_alloc_dm_attr *attr)
{
	struct ibv_dm *dm = NULL;

	return SV_RET_PTR(sv_ops_of(ctx)->alloc_dm(ctx, attr, &dm), dm);
}

static int vq_free_dm(struct ibv_dm *dm)
{
	return sv_ret_int(sv_ops_of(dm->context)->free_dm(dm));
}

static struct ibv_mr *vq_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t off, size_t len,
				   unsigned int access)
{
	struct ibv_mr *mr = NULL;
	int ret = sv_ops_of(pd->context)->reg_dm_mr(pd, dm, off, len, access, &mr);

	if (!ret) {
		mr->context = pd->context;
		mr->pd = pd;
		mr->addr = (void *)(uintptr_t)off;
		mr->length = len;
	}
	return SV_RET_PTR(ret, mr);
}

static int vq_dm_export_dmabuf_fd(struct ibv_dm *dm)
{
	int ret = sv_ops_of(dm->context)->dm_export_dmabuf_fd(dm);

	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return ret;
}

static struct ibv_cq_ex *vq_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a)
{
	struct ibv_cq_ex *cq = NULL;

	return SV_RET_PTR(sv_ops_of(ctx)->create_cq_ex(ctx, a, &cq), cq);
}

static int vq_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr)
{
	return sv_ret_int(sv_ops_of(cq->context)->modify_cq(cq, attr));
}

static struct ibv_qp *vq_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	struct ibv_qp *qp = NULL;

	return SV_RET_PTR(sv_ops_of(ctx)->create_qp_ex(ctx, a, &qp), qp);
}

static struct ibv_qp *vq_open_qp(struct ibv_context *ctx, struct ibv_qp_open_attr *a)
{
	struct ibv_qp *qp = NULL;

	return SV_RET_PTR(sv_ops_of(ctx)->open_qp(ctx, a, &qp), qp);
}

static int vq_modify_qp_rate_limit(struct ibv_qp *qp, struct ibv_qp_rate_limit_attr *attr)
{
	return sv_ret_int(sv_ops_of(qp->context)->modify_qp_rate_limit(qp, attr));
}

static struct ibv_srq *vq_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *a)
{
	struct ibv_srq *srq = NULL;

	return SV_RET_PTR(sv_ops_of(ctx)->create_srq_ex(ctx, a, &srq), srq);
}

static int vq_get_srq_num(struct ibv_srq *srq, uint32_t *num)
{
	return sv_ret_int(sv_ops_of(srq->context)->get_srq_num(srq, num));
}

static struct ibv_xrcd *vq_open_xrcd(struct ibv_context *ctx, struct ibv_xrcd_init_attr *a)
{
	struct ibv_xrcd *x = NULL;

	return SV_RET_PTR(sv_ops_of(ctx)->open_xrcd(ctx, a, &x), x);
}

static int vq_close_xrcd(struct ibv_xrcd *x)
{
	return sv_ret_int(sv_ops_of(x->context)->close_xrcd(x));
}

static struct ibv_wq *vq_create_wq(struct ibv_context *ctx, struct ibv_wq_init_attr *a)
{
	struct ibv_wq *wq = NULL;

	return SV_RET_PTR(sv_ops_of(ctx)->create_wq(ctx, a, &wq), wq);
}

static int vq_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *a)
{
	return sv_ret_int(sv_ops_of(wq->context)->modify_wq(wq, a));
}

static int vq_destroy_wq(struct ibv_wq *wq)
{
	return sv_ret_int(sv_ops_of(wq->context)->destroy_wq(wq));
}

static struct ibv_rwq_ind_table *vq_create_rwq_ind_table(struct ibv_context *ctx,
							 struct ibv_rwq_ind_table_init_attr *a)
{
	struct ibv_rwq_ind_table *t = NULL;

	return SV_RET_PTR(sv_ops_of(ctx)->create_rwq_ind_table(ctx, a, &t), t);
}

static int vq_destroy_rwq_ind_table(struct ibv_rwq_ind_table *t)
{
	return sv_ret_int(sv_ops_of(t->context)->destroy_rwq_ind_table(t));
}

static struct ibv_flow *vq_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *a)
{
	struct ibv_flow *f = NULL;

	return SV_RET_PTR(sv_ops_of(qp->context)->create_flow(qp, a, &f), f);
}

static int vq_destroy_flow(struct ibv_flow *f)
{
	return sv_ret_int(sv_ops_of(f->context)->destroy_flow(f));
}

static struct ibv_counters *vq_create_counters(struct ibv_context *ctx,
					       struct ibv_counters_init_attr *a)
{
	struct ibv_counters *c = NULL;

	return SV_RET_PTR(sv_ops_of(ctx)->create_counters(ctx, a, &c), c);
}

static int vq_destroy_counters(struct ibv_counters *c)
{
	return sv_ret_int(sv_ops_of(c->context)->destroy_counters(c));
}

static struct ibv_mw *vq_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ibv_mw *mw = NULL;

	return SV_RET_PTR(sv_ops_of(pd->context)->alloc_mw(pd, type, &mw), mw);
}

static int vq_dealloc_mw(struct ibv_mw *mw)
{
	return sv_ret_int(sv_ops_of(mw->context)->dealloc_mw(mw));
}

/* Verbs the software device has no object model for at all. */
static int vq_read_counters(struct ibv_counters *c, uint64_t *v, uint32_t n, uint32_t flags)
{
	return EOPNOTSUPP;
}

static int vq_attach_counters_point_flow(struct ibv_counters *c, struct ibv_counter_attach_attr *a,
					 struct ibv_flow *f)
{
	return EOPNOTSUPP;
}

static struct ibv_flow_action *vq_create_flow_action_esp(struct ibv_context *ctx,
							 struct ibv_flow_action_esp_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int vq_modify_flow_action_esp(struct ibv_flow_action *fa, struct ibv_flow_action_esp_attr *a)
{
	return EOPNOTSUPP;
}

static int vq_destroy_flow_action(struct ibv_flow_action *fa)
{
	return EOPNOTSUPP;
}

/* Contract: see vctx.h. */
void sv_vctx_install(struct sv_context *sctx)
{
	struct verbs_context *v = &sctx->vctx;
	struct ibv_context_ops *o = &v->context.ops;
	const struct sv_ops *ops = &sctx->ops;

	o->poll_cq = ops->poll_cq;
	o->req_notify_cq = ops->req_notify_cq;
	o->post_send = ops->post_send;
	o->post_recv = ops->post_recv;
	o->post_srq_recv = ops->post_srq_recv;
	o->bind_mw = ops->bind_mw;
	o->alloc_mw = vq_alloc_mw;
	o->dealloc_mw = vq_dealloc_mw;

	v->free_buf = ibv_free_buf;
	v->alloc_buf = ibv_alloc_buf;
	v->dm_export_dmabuf_fd = vq_dm_export_dmabuf_fd;
	v->reg_mr_ex = ibv_reg_mr_ex;
	v->dealloc_dmah = ibv_dealloc_dmah;
	v->alloc_dmah = ibv_alloc_dmah;
	v->query_port = vq_query_port;
	v->advise_mr = vq_advise_mr;
	v->alloc_null_mr = vq_alloc_null_mr;
	v->read_counters = vq_read_counters;
	v->attach_counters_point_flow = vq_attach_counters_point_flow;
	v->create_counters = vq_create_counters;
	v->destroy_counters = vq_destroy_counters;
	v->reg_dm_mr = vq_reg_dm_mr;
	v->alloc_dm = vq_alloc_dm;
	v->free_dm = vq_free_dm;
	v->modify_flow_action_esp = vq_modify_flow_action_esp;
	v->destroy_flow_action = vq_destroy_flow_action;
	v->create_flow_action_esp = vq_create_flow_action_esp;
	v->modify_qp_rate_limit = vq_modify_qp_rate_limit;
	v->alloc_parent_domain = vq_alloc_parent_domain;
	v->dealloc_td = vq_dealloc_td;
	v->alloc_td = vq_alloc_td;
	v->modify_cq = vq_modify_cq;
	v->post_srq_ops = ops->post_srq_ops;
	v->destroy_rwq_ind_table = vq_destroy_rwq_ind_table;
	v->create_rwq_ind_table = vq_create_rwq_ind_table;
	v->destroy_wq = vq_destroy_wq;
	v->modify_wq = vq_modify_wq;
	v->create_wq = vq_create_wq;
	v->query_rt_values = vq_query_rt_values;
	v->create_cq_ex = vq_create_cq_ex;
	v->query_device_ex = vq_query_device_ex;
	v->ibv_destroy_flow = vq_destroy_flow;
	v->ibv_create_flow = vq_create_flow;
	v->open_qp = vq_open_qp;
	v->create_qp_ex = vq_create_qp_ex;
	v->get_srq_num = vq_get_srq_num;
	v->create_srq_ex = vq_create_srq_ex;
	v->open_xrcd = vq_open_xrcd;
	v->close_xrcd = vq_close_xrcd;
}
