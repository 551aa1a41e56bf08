// Our verbs.h must be usable from C++ (C++11 and later) without warnings.
#include <infiniband/verbs.h>
#include <infiniband/tm_types.h>

int use_header(struct ibv_context *ctx, struct ibv_pd *pd, void *buf,
	       int access);

int use_header(struct ibv_context *ctx, struct ibv_pd *pd, void *buf,
	       int access)
{
	struct ibv_port_attr pa;
	struct ibv_device_attr_ex da;
	struct ibv_mr *mr;

	mr = ibv_reg_mr(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE);
	if (mr == NULL)
		mr = ibv_reg_mr(pd, buf, 64, access);
	if (mr == NULL)
		mr = ibv_reg_mr_iova(pd, buf, 64, 0, IBV_ACCESS_RELAXED_ORDERING);
	if (mr == NULL || ibv_query_port(ctx, 1, &pa) != 0)
		return -1;
	if (verbs_get_ctx_op(ctx, alloc_dmah) == NULL)
		return -2;
	return ibv_query_device_ex(ctx, NULL, &da);
}
