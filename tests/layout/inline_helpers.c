/*
 * Behaviour of the inline helpers and macros of our verbs.h, without the
 * library: the few exported functions they fall back to are stubbed here
 * and record how they were called, and the provider is a fake
 * struct verbs_context.  Built with the project's strict warning set, so it
 * also shows that the header is warning-clean when its helpers are used.
 *
 * It builds against Debian's rdma-core 44 header as well (the rdma-core 65
 * parts are under #ifdef RC65), which shows that the expectations below are
 * upstream's behaviour.
 *
 * Prints every failed check and a summary line; exits 1 on any failure.
 */
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <infiniband/verbs.h>

#ifdef IBV_DEVICE_CC_DMA_BOUNCE	/* only in rdma-core 65 era headers */
#define RC65 1
#endif

static int checks, failures;

static void check(int ok, const char *what, int line)
{
	checks++;
	if (!ok) {
		failures++;
		printf("inline_helpers: FAIL line %d: %s\n", line, what);
	}
}
#define CHECK(x) check(!!(x), #x, __LINE__)

/* What the last stub or fake op saw */
static const char *last_call;
static size_t last_size;
static uint64_t last_iova;
static unsigned int last_access;
static int op_ret;

/* ---- stand-ins for library symbols ------------------------------------ */

int ibv_query_device(struct ibv_context *context,
		     struct ibv_device_attr *device_attr)
{
	(void)context;
	last_call = "ibv_query_device";
	device_attr->phys_port_cnt = 7;
	return 0;
}

int (ibv_query_port)(struct ibv_context *context, uint8_t port_num,
		     struct _compat_ibv_port_attr *port_attr)
{
	(void)context;
	(void)port_num;
	(void)port_attr;
	last_call = "ibv_query_port";
	return 0;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	static struct ibv_qp qp;

	(void)pd;
	(void)qp_init_attr;
	last_call = "ibv_create_qp";
	return &qp;
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
			       struct ibv_srq_init_attr *srq_init_attr)
{
	static struct ibv_srq srq;

	(void)pd;
	(void)srq_init_attr;
	last_call = "ibv_create_srq";
	return &srq;
}

static struct ibv_mr the_mr;

struct ibv_mr *(ibv_reg_mr)(struct ibv_pd *pd, void *addr, size_t length,
			    int access)
{
	(void)pd;
	(void)addr;
	(void)length;
	last_call = "ibv_reg_mr";
	last_access = (unsigned int)access;
	return &the_mr;
}

struct ibv_mr *(ibv_reg_mr_iova)(struct ibv_pd *pd, void *addr, size_t length,
				 uint64_t iova, int access)
{
	(void)pd;
	(void)addr;
	(void)length;
	last_call = "ibv_reg_mr_iova";
	last_iova = iova;
	last_access = (unsigned int)access;
	return &the_mr;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	(void)pd;
	(void)addr;
	(void)length;
	last_call = "ibv_reg_mr_iova2";
	last_iova = iova;
	last_access = access;
	return &the_mr;
}

int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
		      uint32_t gid_index, struct ibv_gid_entry *entry,
		      uint32_t flags, size_t entry_size)
{
	(void)context;
	(void)port_num;
	(void)gid_index;
	(void)entry;
	(void)flags;
	last_call = "_ibv_query_gid_ex";
	last_size = entry_size;
	return 0;
}

ssize_t _ibv_query_gid_table(struct ibv_context *context,
			     struct ibv_gid_entry *entries, size_t max_entries,
			     uint32_t flags, size_t entry_size)
{
	(void)context;
	(void)entries;
	(void)flags;
	last_call = "_ibv_query_gid_table";
	last_size = entry_size;
	return (ssize_t)max_entries;
}

#ifdef RC65
int _ibv_query_comp_cntr_caps(struct ibv_context *context,
			      struct ibv_comp_cntr_caps *caps,
			      size_t caps_size)
{
	(void)context;
	(void)caps;
	last_call = "_ibv_query_comp_cntr_caps";
	last_size = caps_size;
	return 0;
}
#endif

/* ---- fake provider ---------------------------------------------------- */

static struct verbs_context vc;
static struct ibv_context *const ctx = &vc.context;

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	(void)cq;
	(void)wc;
	last_call = "poll_cq";
	return n;
}

static int fake_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)cq;
	last_call = "req_notify_cq";
	return solicited_only + 10;
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad)
{
	(void)qp;
	(void)wr;
	(void)bad;
	last_call = "post_send";
	return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad)
{
	(void)qp;
	(void)wr;
	(void)bad;
	last_call = "post_recv";
	return 0;
}

static int fake_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			      struct ibv_recv_wr **bad)
{
	(void)srq;
	(void)wr;
	(void)bad;
	last_call = "post_srq_recv";
	return 0;
}

static int fake_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
			struct ibv_mw_bind *mw_bind)
{
	(void)qp;
	(void)mw;
	(void)mw_bind;
	last_call = "bind_mw";
	return 0;
}

static int fake_query_device_ex(struct ibv_context *context,
				const struct ibv_query_device_ex_input *input,
				struct ibv_device_attr_ex *attr,
				size_t attr_size)
{
	(void)context;
	(void)input;
	last_call = "query_device_ex";
	last_size = attr_size;
	attr->phys_port_cnt_ex = 3;
	return op_ret;
}

static int fake_query_port(struct ibv_context *context, uint8_t port_num,
			   struct ibv_port_attr *port_attr, size_t len)
{
	(void)context;
	(void)port_num;
	(void)port_attr;
	last_call = "query_port";
	last_size = len;
	return 0;
}

static struct ibv_qp *fake_create_qp_ex(struct ibv_context *context,
					struct ibv_qp_init_attr_ex *attr)
{
	static struct ibv_qp qp;

	(void)context;
	(void)attr;
	last_call = "create_qp_ex";
	return &qp;
}

static struct ibv_srq *fake_create_srq_ex(struct ibv_context *context,
					  struct ibv_srq_init_attr_ex *attr)
{
	static struct ibv_srq srq;

	(void)context;
	(void)attr;
	last_call = "create_srq_ex";
	return &srq;
}

static struct ibv_wq the_wq;

static struct ibv_wq *fake_create_wq(struct ibv_context *context,
				     struct ibv_wq_init_attr *attr)
{
	(void)context;
	(void)attr;
	last_call = "create_wq";
	the_wq.events_completed = 99;
	return &the_wq;
}

static int fake_close_xrcd(struct ibv_xrcd *xrcd)
{
	(void)xrcd;
	last_call = "close_xrcd";
	return 0;
}

static void reset_provider(void)
{
	memset(&vc, 0, sizeof(vc));
	vc.sz = sizeof(vc);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->ops.poll_cq = fake_poll_cq;
	ctx->ops.req_notify_cq = fake_req_notify_cq;
	ctx->ops.post_send = fake_post_send;
	ctx->ops.post_recv = fake_post_recv;
	ctx->ops.post_srq_recv = fake_post_srq_recv;
	ctx->ops.bind_mw = fake_bind_mw;
	last_call = NULL;
	last_size = 0;
}

/* ---- tests ------------------------------------------------------------ */

static void data_path(void)
{
	struct ibv_cq cq;
	struct ibv_qp qp;
	struct ibv_srq srq;
	struct ibv_wc wc[4];
	struct ibv_send_wr swr, *bad_swr;
	struct ibv_recv_wr rwr, *bad_rwr;

	reset_provider();
	cq.context = ctx;
	qp.context = ctx;
	srq.context = ctx;
	memset(&swr, 0, sizeof(swr));
	memset(&rwr, 0, sizeof(rwr));

	CHECK(ibv_poll_cq(&cq, 4, wc) == 4 && !strcmp(last_call, "poll_cq"));
	CHECK(ibv_req_notify_cq(&cq, 1) == 11);
	CHECK(ibv_post_send(&qp, &swr, &bad_swr) == 0 &&
	      !strcmp(last_call, "post_send"));
	CHECK(ibv_post_recv(&qp, &rwr, &bad_rwr) == 0 &&
	      !strcmp(last_call, "post_recv"));
	CHECK(ibv_post_srq_recv(&srq, &rwr, &bad_rwr) == 0 &&
	      !strcmp(last_call, "post_srq_recv"));
}

static void query_port(void)
{
	struct ibv_port_attr pa;

	reset_provider();
	memset(&pa, 0xff, sizeof(pa));
	CHECK(ibv_query_port(ctx, 1, &pa) == 0);
	CHECK(!strcmp(last_call, "ibv_query_port"));
	CHECK(pa.port_cap_flags2 == 0);
#ifdef RC65
	CHECK(pa.active_speed_ex == 0);
#endif

	vc.query_port = fake_query_port;
	CHECK(ibv_query_port(ctx, 1, &pa) == 0);
	CHECK(!strcmp(last_call, "query_port"));
	CHECK(last_size == sizeof(struct ibv_port_attr));
#ifdef RC65
	CHECK(last_size == 56);
#endif

	/* an old provider whose sz does not reach query_port */
	vc.sz = 640;
	CHECK(ibv_query_port(ctx, 1, &pa) == 0 &&
	      !strcmp(last_call, "ibv_query_port"));
	/* not an extended context at all */
	reset_provider();
	vc.query_port = fake_query_port;
	ctx->abi_compat = NULL;
	CHECK(ibv_query_port(ctx, 1, &pa) == 0 &&
	      !strcmp(last_call, "ibv_query_port"));
}

static void query_device_ex(void)
{
	struct ibv_device_attr_ex attr;
	struct ibv_query_device_ex_input in;

	reset_provider();
	in.comp_mask = 1;
	last_call = NULL;
	CHECK(ibv_query_device_ex(ctx, &in, &attr) == EINVAL && !last_call);

	/* no op: legacy query, extended part zeroed */
	memset(&attr, 0xff, sizeof(attr));
	CHECK(ibv_query_device_ex(ctx, NULL, &attr) == 0);
	CHECK(!strcmp(last_call, "ibv_query_device"));
	CHECK(attr.orig_attr.phys_port_cnt == 7 && attr.comp_mask == 0 &&
	      attr.phys_port_cnt_ex == 0);

	vc.query_device_ex = fake_query_device_ex;
	op_ret = 0;
	in.comp_mask = 0;
	CHECK(ibv_query_device_ex(ctx, &in, &attr) == 0);
	CHECK(!strcmp(last_call, "query_device_ex") && last_size == 400);
	CHECK(attr.phys_port_cnt_ex == 3);

	op_ret = EOPNOTSUPP;
	CHECK(ibv_query_device_ex(ctx, NULL, &attr) == 0 &&
	      !strcmp(last_call, "ibv_query_device") &&
	      attr.phys_port_cnt_ex == 0);
	op_ret = ENOSYS;
	CHECK(ibv_query_device_ex(ctx, NULL, &attr) == 0 &&
	      !strcmp(last_call, "ibv_query_device"));
	op_ret = EIO;
	CHECK(ibv_query_device_ex(ctx, NULL, &attr) == EIO &&
	      !strcmp(last_call, "query_device_ex"));
}

static void create_ex(void)
{
	struct ibv_qp_init_attr_ex qa;
	struct ibv_srq_init_attr_ex sa;

	reset_provider();
	memset(&qa, 0, sizeof(qa));
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	CHECK(ibv_create_qp_ex(ctx, &qa) != NULL &&
	      !strcmp(last_call, "ibv_create_qp"));
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	errno = 0;
	last_call = NULL;
	CHECK(ibv_create_qp_ex(ctx, &qa) == NULL && errno == EOPNOTSUPP &&
	      !last_call);
	vc.create_qp_ex = fake_create_qp_ex;
	CHECK(ibv_create_qp_ex(ctx, &qa) != NULL &&
	      !strcmp(last_call, "create_qp_ex"));

	memset(&sa, 0, sizeof(sa));
	sa.comp_mask = IBV_SRQ_INIT_ATTR_PD;
	CHECK(ibv_create_srq_ex(ctx, &sa) != NULL &&
	      !strcmp(last_call, "ibv_create_srq"));
	sa.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
	sa.srq_type = IBV_SRQT_BASIC;
	CHECK(ibv_create_srq_ex(ctx, &sa) != NULL &&
	      !strcmp(last_call, "ibv_create_srq"));
	sa.srq_type = IBV_SRQT_XRC;
	errno = 0;
	last_call = NULL;
	CHECK(ibv_create_srq_ex(ctx, &sa) == NULL && errno == EOPNOTSUPP);
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE;	/* no PD */
	sa.srq_type = IBV_SRQT_BASIC;
	vc.create_srq_ex = fake_create_srq_ex;
	CHECK(ibv_create_srq_ex(ctx, &sa) != NULL &&
	      !strcmp(last_call, "create_srq_ex"));
	sa.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;
	CHECK(ibv_create_srq_ex(ctx, &sa) != NULL &&
	      !strcmp(last_call, "create_srq_ex"));
}

static void reg_mr(unsigned int runtime_access)
{
	struct ibv_pd pd;
	char buf[64];

	reset_provider();
	pd.context = ctx;
	CHECK(ibv_reg_mr(&pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) ==
	      &the_mr);
	CHECK(!strcmp(last_call, "ibv_reg_mr") &&
	      last_access == IBV_ACCESS_LOCAL_WRITE);
	CHECK(ibv_reg_mr(&pd, buf, sizeof(buf),
			 IBV_ACCESS_LOCAL_WRITE |
				 IBV_ACCESS_RELAXED_ORDERING) == &the_mr);
	CHECK(!strcmp(last_call, "ibv_reg_mr_iova2") &&
	      last_iova == (uintptr_t)buf);
	CHECK(ibv_reg_mr(&pd, buf, sizeof(buf), runtime_access) == &the_mr);
	CHECK(!strcmp(last_call, "ibv_reg_mr_iova2") &&
	      last_access == runtime_access);

	CHECK(ibv_reg_mr_iova(&pd, buf, sizeof(buf), 0x1000,
			      IBV_ACCESS_REMOTE_READ) == &the_mr);
	CHECK(!strcmp(last_call, "ibv_reg_mr_iova") && last_iova == 0x1000);
	CHECK(ibv_reg_mr_iova(&pd, buf, sizeof(buf), 0x2000,
			      IBV_ACCESS_RELAXED_ORDERING) == &the_mr);
	CHECK(!strcmp(last_call, "ibv_reg_mr_iova2") && last_iova == 0x2000);
	CHECK(ibv_reg_mr_iova(&pd, buf, sizeof(buf), 0x3000, runtime_access) ==
	      &the_mr);
	CHECK(!strcmp(last_call, "ibv_reg_mr_iova2") && last_iova == 0x3000);
}

static void misc(void)
{
	struct ibv_pd pd, pd2;
	struct ibv_mr mr;
	struct ibv_mw mw;
	struct ibv_qp qp;
	struct ibv_mw_bind bind;
	struct ibv_srq srq;
	struct ibv_ops_wr op, *bad_op = NULL;
	struct ibv_wq_init_attr wqa;
	struct ibv_wq *wq;
	struct ibv_xrcd xrcd;
	struct ibv_gid_entry ent;
#ifdef RC65
	struct ibv_comp_cntr_caps caps;
#endif
	uint32_t num;

	reset_provider();
	pd.context = ctx;
	pd2.context = ctx;
	errno = 0;
	CHECK(ibv_alloc_mw(&pd, IBV_MW_TYPE_1) == NULL && errno == EOPNOTSUPP);

	memset(&mw, 0, sizeof(mw));
	memset(&bind, 0, sizeof(bind));
	mw.context = ctx;
	mw.pd = &pd;
	mw.type = IBV_MW_TYPE_2;
	CHECK(ibv_bind_mw(&qp, &mw, &bind) == EINVAL);
	mw.type = IBV_MW_TYPE_1;
	bind.bind_info.length = 1;
	CHECK(ibv_bind_mw(&qp, &mw, &bind) == EINVAL);
	mr.pd = &pd2;
	bind.bind_info.mr = &mr;
	CHECK(ibv_bind_mw(&qp, &mw, &bind) == EPERM);
	mr.pd = &pd;
	last_call = NULL;
	CHECK(ibv_bind_mw(&qp, &mw, &bind) == 0 &&
	      !strcmp(last_call, "bind_mw"));
	bind.bind_info.mr = NULL;
	bind.bind_info.length = 0;
	CHECK(ibv_bind_mw(&qp, &mw, &bind) == 0);

	srq.context = ctx;
	CHECK(ibv_post_srq_ops(&srq, &op, &bad_op) == EOPNOTSUPP &&
	      bad_op == &op);
	CHECK(ibv_get_srq_num(&srq, &num) == EOPNOTSUPP);
	CHECK(ibv_modify_cq(&(struct ibv_cq){ .context = ctx }, NULL) ==
	      EOPNOTSUPP);

	memset(&wqa, 0, sizeof(wqa));
	wqa.wq_context = &wqa;
	errno = 0;
	CHECK(ibv_create_wq(ctx, &wqa) == NULL && errno == EOPNOTSUPP);
	vc.create_wq = fake_create_wq;
	wq = ibv_create_wq(ctx, &wqa);
	CHECK(wq == &the_wq && wq->wq_context == &wqa &&
	      wq->events_completed == 0);

	xrcd.context = ctx;
	errno = 0;
	CHECK(ibv_open_xrcd(ctx, NULL) == NULL && errno == EOPNOTSUPP);
	vc.close_xrcd = fake_close_xrcd;
	CHECK(ibv_close_xrcd(&xrcd) == 0 && !strcmp(last_call, "close_xrcd"));

	errno = 0;
	CHECK(ibv_alloc_parent_domain(ctx, NULL) == NULL && errno == EOPNOTSUPP);
	CHECK(ibv_alloc_td(ctx, NULL) == NULL && errno == EOPNOTSUPP);
	CHECK(ibv_alloc_dm(ctx, NULL) == NULL && errno == EOPNOTSUPP);
	CHECK(ibv_create_cq_ex(ctx, NULL) == NULL && errno == EOPNOTSUPP);
	CHECK(ibv_advise_mr(&pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, NULL, 0) ==
	      EOPNOTSUPP);
	CHECK(ibv_query_rt_values_ex(ctx, NULL) == EOPNOTSUPP);

	CHECK(ibv_query_gid_ex(ctx, 1, 0, &ent, 0) == 0 && last_size == 32);
	CHECK(ibv_query_gid_table(ctx, &ent, 1, 0) == 1 && last_size == 32);
#ifdef RC65
	CHECK(ibv_query_comp_cntr_caps(ctx, &caps) == 0 && last_size == 16);
#endif

	CHECK(ibv_inc_rkey(0x123456ffu) == 0x12345600u);
	CHECK(ibv_inc_rkey(0x12345601u) == 0x12345602u);
	CHECK(ibv_is_qpt_supported(1u << IBV_QPT_RC, IBV_QPT_RC) == 1);
	CHECK(ibv_is_qpt_supported(1u << IBV_QPT_RC, IBV_QPT_UD) == 0);
	CHECK(ibv_flow_label_to_udp_sport(0) == 0xC000);
	CHECK(ibv_flow_label_to_udp_sport(0xFFFFF) == 0xFFC0);
	CHECK(ibv_flow_label_to_udp_sport(0x4001) == 0xC000);
	CHECK(ibv_flow_label_to_udp_sport(0x8000) == 0xC002);
	CHECK(ibv_flow_label_to_udp_sport(0x00123) == 0xC123);
	CHECK(ibv_cq_ex_to_cq((struct ibv_cq_ex *)(void *)&the_wq) ==
	      (struct ibv_cq *)(void *)&the_wq);
	CHECK(vext_field_avail(struct ibv_port_attr, port_cap_flags2, 52));
	CHECK(!vext_field_avail(struct ibv_port_attr, port_cap_flags2, 48));
#ifdef RC65
	CHECK(vext_field_avail(struct ibv_port_attr, active_speed_ex, 56));
	CHECK(!vext_field_avail(struct ibv_port_attr, active_speed_ex, 52));
#endif
}

int main(int argc, char **argv)
{
	(void)argv;
	data_path();
	query_port();
	query_device_ex();
	create_ex();
	/* argc keeps the access flags from being a compile-time constant */
	reg_mr((unsigned int)argc);
	misc();
	printf("inline_helpers: %d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
