/*
 * rdma-core 65 facts that Debian's rdma-core 44 header does not have, so
 * that probe.c cannot compare them: checked here against our header only.
 * The facts are listed in docs/seed-apis.md section 2 (buffers, MR
 * registration, parent domains, DMA handles) and docs/compatibility.md,
 * "The public header: rdma-core 44 to 65" (everything else).
 *
 * Prints every failed check and a summary line; exits 1 on any failure.
 */
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

static int checks, failures;

static void check_long(const char *what, long long got, long long want)
{
	checks++;
	if (got != want) {
		failures++;
		printf("rc65: FAIL %s: got %lld, want %lld\n", what, got, want);
	}
}

#define EQ(expr, want) check_long(#expr, (long long)(expr), (long long)(want))
#define SIZE(T, n) EQ(sizeof(T), n)
#define OFF(T, f, n) EQ(offsetof(T, f), n)
/* offset of a verbs_context member relative to the embedded ibv_context */
#define VOFF(f, n)                                                           \
	check_long("verbs_context." #f " - context",                         \
		   (long long)offsetof(struct verbs_context, f) -            \
			   (long long)offsetof(struct verbs_context, context), \
		   n)
/* the type of an expression is exactly the given one */
#define TYPE(expr, ty)                                                       \
	check_long("type of " #expr " is " #ty,                              \
		   __builtin_types_compatible_p(__typeof__(expr), ty), 1)
#define MEMBER(T, f) (((T *)0)->f)

static void layouts(void)
{
	/* docs/seed-apis.md section 2 */
	SIZE(struct ibv_mr_init_attr, 72);
	OFF(struct ibv_mr_init_attr, length, 0);
	OFF(struct ibv_mr_init_attr, access, 8);
	OFF(struct ibv_mr_init_attr, comp_mask, 16);
	OFF(struct ibv_mr_init_attr, iova, 24);
	OFF(struct ibv_mr_init_attr, addr, 32);
	OFF(struct ibv_mr_init_attr, fd, 40);
	OFF(struct ibv_mr_init_attr, fd_offset, 48);
	OFF(struct ibv_mr_init_attr, dmah, 56);
	OFF(struct ibv_mr_init_attr, buf, 64);
	TYPE(MEMBER(struct ibv_mr_init_attr, length), size_t);
	TYPE(MEMBER(struct ibv_mr_init_attr, access), int);
	TYPE(MEMBER(struct ibv_mr_init_attr, comp_mask), uint64_t);
	TYPE(MEMBER(struct ibv_mr_init_attr, iova), uint64_t);
	TYPE(MEMBER(struct ibv_mr_init_attr, addr), void *);
	TYPE(MEMBER(struct ibv_mr_init_attr, fd), int);
	TYPE(MEMBER(struct ibv_mr_init_attr, fd_offset), uint64_t);
	TYPE(MEMBER(struct ibv_mr_init_attr, dmah), struct ibv_dmah *);
	TYPE(MEMBER(struct ibv_mr_init_attr, buf), struct ibv_buf *);

	SIZE(struct ibv_parent_domain_init_attr, 48);
	OFF(struct ibv_parent_domain_init_attr, pd, 0);
	OFF(struct ibv_parent_domain_init_attr, td, 8);
	OFF(struct ibv_parent_domain_init_attr, comp_mask, 16);
	OFF(struct ibv_parent_domain_init_attr, alloc, 24);
	OFF(struct ibv_parent_domain_init_attr, free, 32);
	OFF(struct ibv_parent_domain_init_attr, pd_context, 40);

	SIZE(struct ibv_dmah_init_attr, 12);
	OFF(struct ibv_dmah_init_attr, comp_mask, 0);
	OFF(struct ibv_dmah_init_attr, cpu_id, 4);
	OFF(struct ibv_dmah_init_attr, ph, 8);
	OFF(struct ibv_dmah_init_attr, tph_mem_type, 9);
	TYPE(MEMBER(struct ibv_dmah_init_attr, comp_mask), uint32_t);
	TYPE(MEMBER(struct ibv_dmah_init_attr, cpu_id), uint32_t);
	TYPE(MEMBER(struct ibv_dmah_init_attr, ph), uint8_t);
	TYPE(MEMBER(struct ibv_dmah_init_attr, tph_mem_type), uint8_t);

	SIZE(struct ibv_dmah, 8);
	OFF(struct ibv_dmah, context, 0);
	TYPE(MEMBER(struct ibv_dmah, context), struct ibv_context *);

	/* docs/compatibility.md, "The public header": new types */
	SIZE(struct ibv_fd_arr, 16);
	OFF(struct ibv_fd_arr, arr, 0);
	OFF(struct ibv_fd_arr, count, 8);
	TYPE(MEMBER(struct ibv_fd_arr, arr), int *);
	TYPE(MEMBER(struct ibv_fd_arr, count), uint32_t);

	SIZE(struct ibv_comp_cntr, 16);
	OFF(struct ibv_comp_cntr, context, 0);
	OFF(struct ibv_comp_cntr, handle, 8);
	SIZE(struct ibv_comp_cntr_caps, 16);
	OFF(struct ibv_comp_cntr_caps, max_value, 0);
	OFF(struct ibv_comp_cntr_caps, max_counters, 8);
	OFF(struct ibv_comp_cntr_caps, supported_qp_attach_ops, 12);
	TYPE(MEMBER(struct ibv_comp_cntr_caps, max_value), uint64_t);
	SIZE(struct ibv_comp_cntr_init_attr, 12);
	OFF(struct ibv_comp_cntr_init_attr, comp_mask, 0);
	OFF(struct ibv_comp_cntr_init_attr, type, 4);
	OFF(struct ibv_comp_cntr_init_attr, flags, 8);
	TYPE(MEMBER(struct ibv_comp_cntr_init_attr, type),
	     enum ibv_comp_cntr_type);
	SIZE(struct ibv_qp_attach_comp_cntr_attr, 8);
	OFF(struct ibv_qp_attach_comp_cntr_attr, comp_mask, 0);
	OFF(struct ibv_qp_attach_comp_cntr_attr, op_mask, 4);

	/* struct verbs_context: six ops prepended (docs/compatibility.md,
	 * "The public header"), "context" still last */
	SIZE(struct verbs_context, 696);
	OFF(struct verbs_context, free_buf, 0);
	OFF(struct verbs_context, alloc_buf, 8);
	OFF(struct verbs_context, dm_export_dmabuf_fd, 16);
	OFF(struct verbs_context, reg_mr_ex, 24);
	OFF(struct verbs_context, dealloc_dmah, 32);
	OFF(struct verbs_context, alloc_dmah, 40);
	OFF(struct verbs_context, query_port, 48);
	OFF(struct verbs_context, sz, 360);
	OFF(struct verbs_context, context, 368);
	EQ(sizeof(struct verbs_context) - offsetof(struct verbs_context, context),
	   sizeof(struct ibv_context));
	SIZE(struct ibv_context, 328);
	OFF(struct ibv_context, abi_compat, 320);

	/* every rdma-core 44 op keeps its offset from "context" (docs/compatibility.md, "The public header") */
	VOFF(query_port, -320);
	VOFF(advise_mr, -312);
	VOFF(alloc_null_mr, -304);
	VOFF(read_counters, -296);
	VOFF(attach_counters_point_flow, -288);
	VOFF(create_counters, -280);
	VOFF(destroy_counters, -272);
	VOFF(reg_dm_mr, -264);
	VOFF(alloc_dm, -256);
	VOFF(free_dm, -248);
	VOFF(modify_flow_action_esp, -240);
	VOFF(destroy_flow_action, -232);
	VOFF(create_flow_action_esp, -224);
	VOFF(modify_qp_rate_limit, -216);
	VOFF(alloc_parent_domain, -208);
	VOFF(dealloc_td, -200);
	VOFF(alloc_td, -192);
	VOFF(modify_cq, -184);
	VOFF(post_srq_ops, -176);
	VOFF(destroy_rwq_ind_table, -168);
	VOFF(create_rwq_ind_table, -160);
	VOFF(destroy_wq, -152);
	VOFF(modify_wq, -144);
	VOFF(create_wq, -136);
	VOFF(query_rt_values, -128);
	VOFF(create_cq_ex, -120);
	VOFF(priv, -112);
	VOFF(query_device_ex, -104);
	VOFF(ibv_destroy_flow, -96);
	VOFF(ABI_placeholder2, -88);
	VOFF(ibv_create_flow, -80);
	VOFF(ABI_placeholder1, -72);
	VOFF(open_qp, -64);
	VOFF(create_qp_ex, -56);
	VOFF(get_srq_num, -48);
	VOFF(create_srq_ex, -40);
	VOFF(open_xrcd, -32);
	VOFF(close_xrcd, -24);
	VOFF(_ABI_placeholder3, -16);
	VOFF(sz, -8);
	VOFF(context, 0);
	/* and the new ones lie in front of them */
	VOFF(alloc_dmah, -328);
	VOFF(dealloc_dmah, -336);
	VOFF(reg_mr_ex, -344);
	VOFF(dm_export_dmabuf_fd, -352);
	VOFF(alloc_buf, -360);
	VOFF(free_buf, -368);

	/* op signatures */
	TYPE(MEMBER(struct verbs_context, free_buf), void (*)(struct ibv_buf *));
	TYPE(MEMBER(struct verbs_context, alloc_buf),
	     void *(*)(struct ibv_pd *, size_t, struct ibv_buf **));
	TYPE(MEMBER(struct verbs_context, dm_export_dmabuf_fd),
	     int (*)(struct ibv_dm *));
	TYPE(MEMBER(struct verbs_context, reg_mr_ex),
	     struct ibv_mr *(*)(struct ibv_pd *, struct ibv_mr_init_attr *));
	TYPE(MEMBER(struct verbs_context, dealloc_dmah),
	     int (*)(struct ibv_dmah *));
	TYPE(MEMBER(struct verbs_context, alloc_dmah),
	     struct ibv_dmah *(*)(struct ibv_context *,
				  struct ibv_dmah_init_attr *));
	TYPE(MEMBER(struct verbs_context, query_port),
	     int (*)(struct ibv_context *, uint8_t, struct ibv_port_attr *,
		     size_t));

	/* struct ibv_qp_ex: wr_flush appended */
	SIZE(struct ibv_qp_ex, 360);
	OFF(struct ibv_qp_ex, wr_abort, 336);
	OFF(struct ibv_qp_ex, wr_atomic_write, 344);
	OFF(struct ibv_qp_ex, wr_flush, 352);
	TYPE(MEMBER(struct ibv_qp_ex, wr_flush),
	     void (*)(struct ibv_qp_ex *, uint32_t, uint64_t, size_t, uint8_t,
		      uint8_t));

	/* struct ibv_port_attr: active_speed_ex appended */
	SIZE(struct ibv_port_attr, 56);
	OFF(struct ibv_port_attr, port_cap_flags2, 48);
	OFF(struct ibv_port_attr, active_speed_ex, 52);
	TYPE(MEMBER(struct ibv_port_attr, active_speed_ex), uint32_t);
}

static void constants(void)
{
	/* docs/seed-apis.md section 2 */
	EQ(IBV_REG_MR_MASK_IOVA, 1 << 0);
	EQ(IBV_REG_MR_MASK_ADDR, 1 << 1);
	EQ(IBV_REG_MR_MASK_FD, 1 << 2);
	EQ(IBV_REG_MR_MASK_FD_OFFSET, 1 << 3);
	EQ(IBV_REG_MR_MASK_DMAH, 1 << 4);
	EQ(IBV_REG_MR_MASK_BUF, 1 << 5);
	EQ(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS, 1 << 0);
	EQ(IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT, 1 << 1);
	EQ(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC, 1 << 2);
	EQ((intptr_t)IBV_ALLOCATOR_USE_DEFAULT, -1);
	EQ(IBV_DMAH_INIT_ATTR_MASK_CPU_ID, 1 << 0);
	EQ(IBV_DMAH_INIT_ATTR_MASK_PH, 1 << 1);
	EQ(IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE, 1 << 2);
	EQ(IBV_TPH_MEM_TYPE_VM, 0);
	EQ(IBV_TPH_MEM_TYPE_PM, 1);
	EQ(IBV_DEVICE_CC_DMA_BOUNCE, 0x20000000000LL);
	TYPE(IBV_DEVICE_CC_DMA_BOUNCE, unsigned long long);

	/* docs/compatibility.md, "The public header": new constants */
	EQ(IBV_ODP_SUPPORT_FLUSH, 1 << 6);
	EQ(IBV_ODP_SUPPORT_ATOMIC_WRITE, 1 << 7);
	EQ(IBV_PORT_LINK_SPEED_XDR_SUP, 1 << 12);
	EQ(IBV_EVENT_DEVICE_SPEED_CHANGE, IBV_EVENT_WQ_FATAL + 1);
	EQ(IBV_EVENT_DEVICE_SPEED_CHANGE, 20);
	EQ(IBV_WC_FLUSH, IBV_WC_TSO + 1);
	EQ(IBV_WC_FLUSH, 8);
	EQ(IBV_WC_ATOMIC_WRITE, 9);
	EQ(IBV_ACCESS_FLUSH_GLOBAL, 1 << 8);
	EQ(IBV_ACCESS_FLUSH_PERSISTENT, 1 << 9);
	EQ(IBV_QP_EX_WITH_FLUSH, 1 << 11);
	EQ(IBV_QP_EX_WITH_ATOMIC_WRITE, 1 << 12);
	EQ(IBV_WR_FLUSH, 14);
	EQ(IBV_WR_ATOMIC_WRITE, 15);
	EQ(IBV_FLUSH_GLOBAL, 1);
	EQ(IBV_FLUSH_PERSISTENT, 2);
	EQ(IBV_FLUSH_RANGE, 0);
	EQ(IBV_FLUSH_MR, 1);
	EQ(IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS, 1);
	EQ(IBV_QUERY_QP_DATA_IN_ORDER_DEVICE_ONLY, 2);
	EQ(IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG, 1);
	EQ(IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES, 2);
	EQ(IBV_QP_ATTACH_COMP_CNTR_OP_SEND, 1);
	EQ(IBV_QP_ATTACH_COMP_CNTR_OP_RECV, 2);
	EQ(IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_READ, 4);
	EQ(IBV_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ, 8);
	EQ(IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE, 16);
	EQ(IBV_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE, 32);
	EQ(IBV_COMP_CNTR_TYPE_WRS, 0);
	EQ(IBV_COMP_CNTR_TYPE_BYTES, 1);
	EQ((intptr_t)__VERBS_ABI_IS_EXTENDED, -1);
}

static void prototypes(void)
{
	/* the new entry points (docs/compatibility.md, "The public header") */
	TYPE(ibv_alloc_buf, void *(struct ibv_pd *, size_t, struct ibv_buf **));
	TYPE(ibv_free_buf, void(struct ibv_buf *));
	TYPE(ibv_reg_buf_mr, struct ibv_mr *(struct ibv_pd *, struct ibv_buf *,
					     void *, size_t, int));
	TYPE(ibv_export_buf_dmabuf_fd, int(struct ibv_buf *));
	TYPE(ibv_reg_mr_ex,
	     struct ibv_mr *(struct ibv_pd *, struct ibv_mr_init_attr *));
	TYPE(ibv_alloc_dmah, struct ibv_dmah *(struct ibv_context *,
					       struct ibv_dmah_init_attr *));
	TYPE(ibv_dealloc_dmah, int(struct ibv_dmah *));
	TYPE(ibv_dm_export_dmabuf_fd, int(struct ibv_dm *));
	TYPE(ibv_wr_opcode_str, const char *(enum ibv_wr_opcode));
	TYPE(ibv_query_port_speed,
	     int(struct ibv_context *, uint32_t, uint64_t *));
	TYPE(ibv_wr_flush, void(struct ibv_qp_ex *, uint32_t, uint64_t, size_t,
				uint8_t, uint8_t));
	TYPE(_ibv_query_comp_cntr_caps,
	     int(struct ibv_context *, struct ibv_comp_cntr_caps *, size_t));
	TYPE(ibv_query_comp_cntr_caps,
	     int(struct ibv_context *, struct ibv_comp_cntr_caps *));
	TYPE(ibv_create_comp_cntr,
	     struct ibv_comp_cntr *(struct ibv_context *,
				    struct ibv_comp_cntr_init_attr *));
	TYPE(ibv_destroy_comp_cntr, int(struct ibv_comp_cntr *));
	TYPE(ibv_set_comp_cntr, int(struct ibv_comp_cntr *, uint64_t));
	TYPE(ibv_set_err_comp_cntr, int(struct ibv_comp_cntr *, uint64_t));
	TYPE(ibv_inc_comp_cntr, int(struct ibv_comp_cntr *, uint64_t));
	TYPE(ibv_inc_err_comp_cntr, int(struct ibv_comp_cntr *, uint64_t));
	TYPE(ibv_read_comp_cntr, int(struct ibv_comp_cntr *, uint64_t *));
	TYPE(ibv_read_err_comp_cntr, int(struct ibv_comp_cntr *, uint64_t *));
	TYPE(ibv_qp_attach_comp_cntr,
	     int(struct ibv_qp *, struct ibv_comp_cntr *,
		 struct ibv_qp_attach_comp_cntr_attr *));
}

/*
 * The sz mechanism with the 65 layout: a 44-sized provider structure
 * (sz = 648) must hide the new ops even if the memory in front happens to
 * be non-zero, and must expose the old ones.
 */
static struct ibv_dmah *fake_alloc_dmah(struct ibv_context *c,
					struct ibv_dmah_init_attr *a)
{
	(void)c;
	(void)a;
	return NULL;
}

static int fake_query_port(struct ibv_context *c, uint8_t p,
			   struct ibv_port_attr *a, size_t len)
{
	(void)c;
	(void)p;
	(void)a;
	return (int)len;
}

/* Stand-in for the library symbol the ibv_query_port() wrapper falls back
 * to (this program is not linked with the library). */
int (ibv_query_port)(struct ibv_context *c, uint8_t p,
		     struct _compat_ibv_port_attr *a)
{
	(void)c;
	(void)p;
	(void)a;
	return -1;
}

static void sz_mechanism(void)
{
	static struct verbs_context vc;
	struct ibv_context *ctx = &vc.context;

	vc.alloc_dmah = fake_alloc_dmah;
	vc.query_port = fake_query_port;

	ctx->abi_compat = NULL;
	EQ(verbs_get_ctx(ctx) == NULL, 1);
	EQ(verbs_get_ctx_op(ctx, query_port) == NULL, 1);

	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	EQ(verbs_get_ctx(ctx) == &vc, 1);

	vc.sz = 648;	/* an rdma-core 44 sized provider */
	EQ(verbs_get_ctx_op(ctx, alloc_dmah) == NULL, 1);
	EQ(verbs_get_ctx_op(ctx, query_port) == &vc, 1);
	EQ(verbs_get_ctx_op(ctx, advise_mr) == NULL, 1); /* op is NULL */

	vc.sz = 696;	/* a full rdma-core 65 provider */
	EQ(verbs_get_ctx_op(ctx, alloc_dmah) == &vc, 1);
	EQ(verbs_get_ctx_op(ctx, free_buf) == NULL, 1);	/* op is NULL */

	/* the ibv_query_port() wrapper passes the 65 attribute size */
	EQ(ibv_query_port(ctx, 1, &(struct ibv_port_attr){ 0 }), 56);
	vc.sz = 640;	/* too small to contain query_port: legacy path */
	EQ(ibv_query_port(ctx, 1, &(struct ibv_port_attr){ 0 }), -1);
}

/* librdmacm: what rdma-core 65's rdma_cma.h and rsocket.h add to rdma-core 44's */
static void rdmacm(void)
{
	EQ(RDMA_CM_EVENT_ADDRINFO_RESOLVED, 16);
	EQ(RDMA_CM_EVENT_ADDRINFO_ERROR, 17);
	EQ(RDMA_CM_EVENT_USER, 18);
	EQ(RDMA_CM_EVENT_INTERNAL, 19);
	EQ(RAI_SA, 0x10);
	EQ(RAI_DNS, 0x20);
	OFF(struct rdma_cm_event, param.arg, 24);
	EQ(sizeof(MEMBER(struct rdma_cm_event, param.arg)), 8);
	SIZE(struct rdma_cm_event, 80);
	SIZE(struct rdma_cm_id, 416);
	OFF(struct rdma_cm_id, qp_type, 408);
	TYPE(&rdma_resolve_addrinfo, int (*)(struct rdma_cm_id *, const char *, const char *,
					     const struct rdma_addrinfo *));
	TYPE(&rdma_query_addrinfo, int (*)(struct rdma_cm_id *, struct rdma_addrinfo **));
	TYPE(&rdma_write_cm_event,
	     int (*)(struct rdma_cm_id *, enum rdma_cm_event_type, int, uint64_t));
	TYPE(&repoll_create, int (*)(int));
	TYPE(&repoll_ctl, int (*)(int, int, int, struct epoll_event *));
	TYPE(&repoll_wait, int (*)(int, struct epoll_event *, int, int));
}

int main(void)
{
	rdmacm();
	layouts();
	constants();
	prototypes();
	sz_mechanism();
	printf("rc65_facts: %d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
