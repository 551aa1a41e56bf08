/* SPDX-License-Identifier: MIT */
/*
 * unit_private_stubs: the private-node compatibility stubs
 * (src/core/compat_private.c, compat_cmd.c) are never reached from a
 * softverbs context, and each one, called directly (through its default
 * version), fails cleanly and counts the call.
 *
 * Case 1 runs the public API surface that exists without the data path
 * (device list, queries, PD, MR, completion channel, CQ, strings, sysfs,
 * kernel ABI conversions, unsupported families) and asserts that
 * sv_private_stub_calls stayed 0. Case 2 calls all 89 counting stubs:
 * each returns its failure (EOPNOTSUPP, NULL with errno, -1 with errno,
 * or nothing for void ones) and adds exactly one to the counter. Case 3:
 * the registration entry points and the data object, which neither
 * count nor act.
 */
#include "harness.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/compat.h"
#include "core/core.h"
#include "core/kern_abi.h"
#include "core/private.h"

/* The stubs' prototypes, as compat_private.c declares them (no header has them). */
void *_verbs_init_and_alloc_context(void *device, int cmd_fd, size_t alloc_size,
				    void *context_offset, uint32_t driver_id);
void *verbs_open_device(void *device, void *private_data);
void verbs_init_cq(void *cq, void *context, void *channel, void *cq_context);
void verbs_set_ops(void *vctx, const void *ops);
void verbs_uninit_context(void *vctx);
void __verbs_log(void *vctx, uint32_t level, const char *fmt, ...);
int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev, const char *fnfmt, ...);
int execute_ioctl(void *context, void *cmd);
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link);
void verbs_register_driver_34(const void *ops);
void verbs_register_driver_57(const void *ops);
void verbs_register_driver_59(const void *ops);
void verbs_register_driver_64(const void *ops);
void verbs_register_driver_65(const void *ops);
void *ibv_dmabuf_heap_cc_shared_init(void);
void ibv_dmabuf_heap_destroy(void *heap);
void *ibv_dmabuf_heap_alloc(void *heap, size_t size, int *dmabuf_fd);
void ibv_dmabuf_heap_free(void *buf, size_t size, int dmabuf_fd);
void sv_compat_ibv_register_driver(const char *name, void *init_func);
extern bool verbs_allow_disassociate_destroy;

typedef int (*cmd_fn)(void *, void *, void *, void *, void *, void *);

#define CMD_LIST(X)                                                                                \
	X(ibv_cmd_advise_mr)                                                                       \
	X(ibv_cmd_alloc_dm)                                                                        \
	X(ibv_cmd_alloc_mw)                                                                        \
	X(ibv_cmd_alloc_pd)                                                                        \
	X(ibv_cmd_attach_mcast)                                                                    \
	X(ibv_cmd_close_xrcd)                                                                      \
	X(ibv_cmd_create_ah)                                                                       \
	X(ibv_cmd_create_counters)                                                                 \
	X(ibv_cmd_create_cq)                                                                       \
	X(ibv_cmd_create_cq_ex)                                                                    \
	X(ibv_cmd_create_flow)                                                                     \
	X(ibv_cmd_create_flow_action_esp)                                                          \
	X(ibv_cmd_create_qp)                                                                       \
	X(ibv_cmd_create_qp_ex)                                                                    \
	X(ibv_cmd_create_qp_ex2)                                                                   \
	X(ibv_cmd_create_rwq_ind_table)                                                            \
	X(ibv_cmd_create_srq)                                                                      \
	X(ibv_cmd_create_srq_ex)                                                                   \
	X(ibv_cmd_create_wq)                                                                       \
	X(ibv_cmd_dealloc_mw)                                                                      \
	X(ibv_cmd_dealloc_pd)                                                                      \
	X(ibv_cmd_dereg_mr)                                                                        \
	X(ibv_cmd_destroy_ah)                                                                      \
	X(ibv_cmd_destroy_counters)                                                                \
	X(ibv_cmd_destroy_cq)                                                                      \
	X(ibv_cmd_destroy_flow)                                                                    \
	X(ibv_cmd_destroy_flow_action)                                                             \
	X(ibv_cmd_destroy_qp)                                                                      \
	X(ibv_cmd_destroy_rwq_ind_table)                                                           \
	X(ibv_cmd_destroy_srq)                                                                     \
	X(ibv_cmd_destroy_wq)                                                                      \
	X(ibv_cmd_detach_mcast)                                                                    \
	X(ibv_cmd_free_dm)                                                                         \
	X(ibv_cmd_get_context)                                                                     \
	X(ibv_cmd_modify_cq)                                                                       \
	X(ibv_cmd_modify_flow_action_esp)                                                          \
	X(ibv_cmd_modify_qp)                                                                       \
	X(ibv_cmd_modify_qp_ex)                                                                    \
	X(ibv_cmd_modify_srq)                                                                      \
	X(ibv_cmd_modify_wq)                                                                       \
	X(ibv_cmd_open_qp)                                                                         \
	X(ibv_cmd_open_xrcd)                                                                       \
	X(ibv_cmd_poll_cq)                                                                         \
	X(ibv_cmd_post_recv)                                                                       \
	X(ibv_cmd_post_send)                                                                       \
	X(ibv_cmd_post_srq_recv)                                                                   \
	X(ibv_cmd_query_context)                                                                   \
	X(ibv_cmd_query_device_any)                                                                \
	X(ibv_cmd_query_mr)                                                                        \
	X(ibv_cmd_query_port)                                                                      \
	X(ibv_cmd_query_qp)                                                                        \
	X(ibv_cmd_query_srq)                                                                       \
	X(ibv_cmd_read_counters)                                                                   \
	X(ibv_cmd_reg_dm_mr)                                                                       \
	X(ibv_cmd_reg_dmabuf_mr)                                                                   \
	X(ibv_cmd_reg_mr)                                                                          \
	X(ibv_cmd_req_notify_cq)                                                                   \
	X(ibv_cmd_rereg_mr)                                                                        \
	X(ibv_cmd_resize_cq)                                                                       \
	X(ibv_cmd_query_device)                                                                    \
	X(ibv_cmd_create_cq_ex2)                                                                   \
	X(ibv_cmd_alloc_dmah)                                                                      \
	X(ibv_cmd_free_dmah)                                                                       \
	X(ibv_cmd_reg_mr_ex)                                                                       \
	X(ibv_cmd_export_dmabuf_fd)                                                                \
	X(ibv_cmd_query_port_speed)                                                                \
	X(ibv_cmd_create_comp_cntr)                                                                \
	X(ibv_cmd_destroy_comp_cntr)                                                               \
	X(ibv_cmd_inc_comp_cntr)                                                                   \
	X(ibv_cmd_inc_err_comp_cntr)                                                               \
	X(ibv_cmd_qp_attach_comp_cntr)                                                             \
	X(ibv_cmd_query_comp_cntr_caps)                                                            \
	X(ibv_cmd_read_comp_cntr)                                                                  \
	X(ibv_cmd_read_err_comp_cntr)                                                              \
	X(ibv_cmd_set_comp_cntr)                                                                   \
	X(ibv_cmd_set_err_comp_cntr)

#define DECLARE_CMD(name) int name(void *, void *, void *, void *, void *, void *);
CMD_LIST(DECLARE_CMD)

#define CMD_ENTRY(name) {#name, name},
static const struct {
	const char *name;
	cmd_fn fn;
} cmds[] = {CMD_LIST(CMD_ENTRY)};

static unsigned long calls(void)
{
	return atomic_load(&sv_private_stub_calls);
}

/* Everything of the public surface that works without the data path. */
static void run_public_surface(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	struct ibv_gid_entry entry, table[8];
	enum ibv_gid_type_sysfs gtype;
	union ibv_gid gid;
	__be16 pkey;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_comp_cntr_caps caps;
	struct ibv_ah_attr ah;
	struct sv_kern_path_rec kp;
	struct sv_sa_path_rec sp;
	uint64_t speed = 0;
	uint8_t mac[ETHERNET_LL_SIZE];
	uint16_t vid;
	char buf[64];
	void *mem = NULL;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (!CHECK(list && n >= 1))
		return;
	CHECK(ibv_get_device_name(list[0]) != NULL);
	CHECK(ibv_get_device_guid(list[0]) != 0);
	CHECK(ibv_get_device_index(list[0]) >= 0);
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!CHECK(ctx))
		return;

	CHECK_RET(ibv_query_device(ctx, &dattr), 0);
	CHECK_RET(ibv_query_port(ctx, 1, &pattr), 0);
	CHECK_EQ_INT(ibv_query_gid(ctx, 1, 0, &gid), 0);
	CHECK_RET(ibv_query_gid_ex(ctx, 1, 0, &entry, 0), 0);
	CHECK(ibv_query_gid_table(ctx, table, 8, 0) >= 1);
	CHECK_EQ_INT(ibv_query_gid_type(ctx, 1, 0, &gtype), 0);
	CHECK_EQ_INT(ibv_query_pkey(ctx, 1, 0, &pkey), 0);
	CHECK_EQ_INT(ibv_get_pkey_index(ctx, 1, pkey), 0);
	CHECK_RET(ibv_query_port_speed(ctx, 1, &speed), 0);
	CHECK(speed > 0);

	pd = ibv_alloc_pd(ctx);
	if (CHECK(pd)) {
		/* page-aligned, so that an iova with page offset 0 is valid */
		if (posix_memalign(&mem, 4096, 8192))
			mem = NULL;
		mr = mem ? ibv_reg_mr(pd, mem, 8192, IBV_ACCESS_LOCAL_WRITE) : NULL;
		if (CHECK(mr)) {
			CHECK_RET(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
					       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
				  0);
			CHECK_RET(ibv_dereg_mr(mr), 0);
		}
		mr = mem ? ibv_reg_mr_iova2(pd, mem, 4096, 0x10000, IBV_ACCESS_LOCAL_WRITE) : NULL;
		if (CHECK(mr))
			CHECK_RET(ibv_dereg_mr(mr), 0);
		CHECK_ERRNO_PTR(ibv_import_mr(pd, 1), EOPNOTSUPP);
		CHECK_RET(ibv_dealloc_pd(pd), 0);
		free(mem);
	}
	CHECK_ERRNO_PTR(ibv_import_pd(ctx, 1), EOPNOTSUPP);
	CHECK_ERRNO_PTR(ibv_import_dm(ctx, 1), EOPNOTSUPP);
	CHECK_ERRNO_PTR(ibv_import_device(ctx->cmd_fd), EOPNOTSUPP);

	ch = ibv_create_comp_channel(ctx);
	if (CHECK(ch)) {
		cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
		if (CHECK(cq))
			CHECK_RET(ibv_destroy_cq(cq), 0);
		CHECK_RET(ibv_destroy_comp_channel(ch), 0);
	}

	CHECK_RET(ibv_query_comp_cntr_caps(ctx, &caps), EOPNOTSUPP);
	CHECK_ERRNO_PTR(ibv_create_comp_cntr(ctx, NULL), EOPNOTSUPP);
	memset(&ah, 0, sizeof(ah));
	ah.is_global = 1;
	ah.port_num = 1;
	CHECK_RET(ibv_resolve_eth_l2_from_gid(ctx, &ah, mac, &vid), EOPNOTSUPP);

	CHECK(ibv_get_sysfs_path() != NULL);
	CHECK_EQ_INT(ibv_read_sysfs_file(ctx->device->ibdev_path, "board_id", buf, sizeof(buf)),
		     -1);
	memset(&kp, 0, sizeof(kp));
	ibv_copy_path_rec_from_kern(&sp, &kp);
	ibv_copy_path_rec_to_kern(&kp, &sp);

	CHECK(strcmp(ibv_event_type_str(IBV_EVENT_PORT_ACTIVE), "unknown") != 0);
	CHECK(ibv_wc_status_str(IBV_WC_SUCCESS) != NULL);
	CHECK_EQ_INT(ibv_close_device(ctx), 0);
}

int main(void)
{
	unsigned long before;
	char buf[16];
	size_t i;

	t_start("unit_private_stubs");

	t_case("a softverbs context never reaches a private stub");
	CHECK_EQ_INT(calls(), 0);
	run_public_surface();
	CHECK_EQ_INT(calls(), 0);

	t_case("each counting stub fails cleanly and counts one call");
	for (i = 0; i < SV_ARRAY_SIZE(cmds); i++) {
		before = calls();
		errno = 0;
		CHECK_MSG(cmds[i].fn(NULL, NULL, NULL, NULL, NULL, NULL) == EOPNOTSUPP &&
				  errno == EOPNOTSUPP,
			  "%s: want EOPNOTSUPP", cmds[i].name);
		CHECK_MSG(calls() == before + 1, "%s: counted %lu calls", cmds[i].name,
			  calls() - before);
	}
	CHECK_EQ_INT(SV_ARRAY_SIZE(cmds), 76);

	before = calls();
	CHECK_ERRNO_PTR(_verbs_init_and_alloc_context(NULL, -1, 4096, NULL, 0), EOPNOTSUPP);
	CHECK_ERRNO_PTR(verbs_open_device(NULL, NULL), EOPNOTSUPP);
	verbs_init_cq(NULL, NULL, NULL, NULL);
	verbs_set_ops(NULL, NULL);
	verbs_uninit_context(NULL);
	__verbs_log(NULL, 0, "%s %d", "never printed", 1);
	errno = 0;
	CHECK_EQ_INT(ibv_read_ibdev_sysfs_file(buf, sizeof(buf), NULL, "%s", "x"), -1);
	CHECK_EQ_INT(errno, EOPNOTSUPP);
	CHECK_RET(execute_ioctl(NULL, NULL), EOPNOTSUPP);
	CHECK_EQ_INT(__ioctl_final_num_attrs(3, NULL), 3);
	CHECK_ERRNO_PTR(ibv_dmabuf_heap_cc_shared_init(), EOPNOTSUPP);
	CHECK_ERRNO_PTR(ibv_dmabuf_heap_alloc(NULL, 4096, NULL), EOPNOTSUPP);
	ibv_dmabuf_heap_free(NULL, 4096, -1);
	ibv_dmabuf_heap_destroy(NULL);
	CHECK_EQ_INT(calls() - before, 13);
	CHECK_EQ_INT(calls(), 89);

	t_case("registration entry points ignore their arguments and do not count");
	before = calls();
	/* never dereferenced: a bogus pointer must not crash */
	verbs_register_driver_34((const void *)(uintptr_t)1);
	verbs_register_driver_34(NULL);
	verbs_register_driver_57((const void *)(uintptr_t)1);
	verbs_register_driver_59((const void *)(uintptr_t)1);
	verbs_register_driver_64((const void *)(uintptr_t)1);
	verbs_register_driver_65((const void *)(uintptr_t)1);
	sv_compat_ibv_register_driver("old", (void *)(uintptr_t)1);
	CHECK_EQ_INT(calls(), before);
	CHECK_EQ_INT(sizeof(verbs_allow_disassociate_destroy), 1);
	CHECK(!verbs_allow_disassociate_destroy);

	return t_finish();
}
