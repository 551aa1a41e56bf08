/* SPDX-License-Identifier: MIT */
/*
 * compat_private.c - compatibility stubs for rdma-core's IBVERBS_PRIVATE_34
 * node and the old ibv_register_driver@IBVERBS_1.1.
 *
 * COMPATIBILITY ONLY. These names are rdma-core's internal interface
 * between libibverbs and its kernel providers (libmlx5, libefa, ...): the
 * uverbs command marshalling (ibv_cmd_*, execute_ioctl), the provider
 * context life cycle (verbs_*) and provider registration. softverbs has no
 * kernel providers and implements none of it. The names exist only
 * because Debian's libmlx5.so.1 and libefa.so.1 are linked BIND_NOW
 * against them, and every perftest binary and pyverbs load those
 * libraries: a missing name would stop the process at start-up.
 *
 * What the stubs do:
 *  - verbs_register_driver_34() is called twice before main() in such
 *    processes (by the constructors of libmlx5 and libefa). It ignores its
 *    argument: it records nothing and never calls through the pointer, so
 *    no foreign provider is ever matched to a softverbs device.
 *  - verbs_allow_disassociate_destroy is a bool data object, as in
 *    rdma-core (libmlx5 imports it as data); nothing in softverbs reads it.
 *  - every other stub fails cleanly: int stubs return EOPNOTSUPP (and set
 *    errno), pointer stubs return NULL with errno EOPNOTSUPP, void stubs
 *    do nothing, and each call counts in sv_private_stub_calls, so tests
 *    can prove that no softverbs context ever reaches one. A provider's
 *    code runs only on its own contexts, which softverbs never creates.
 *
 * Their real prototypes are internal rdma-core ABI and are declared here
 * only, never in a header. A stub needs just a compatible calling
 * convention: the right return type, and arguments it never reads. On
 * x86-64 and AArch64 a caller that passes fewer or more integer/pointer
 * arguments than six is harmless to a callee that ignores them (the caller
 * owns any stack arguments), so the ibv_cmd_* stubs take six `void *`.
 * The two variadic functions are defined variadic.
 */
#include <stdbool.h>

#include "core/compat.h"
#include "core/core.h"

atomic_ulong sv_private_stub_calls;

static void count_call(void)
{
	atomic_fetch_add_explicit(&sv_private_stub_calls, 1, memory_order_relaxed);
}

/* Contract: count the call; EOPNOTSUPP as errno and as the result. */
static int stub_fail(void)
{
	count_call();
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

/* ---- data --------------------------------------------------------------- */

extern bool verbs_allow_disassociate_destroy;
SV_EXPORT bool verbs_allow_disassociate_destroy;

/* ---- provider registration ---------------------------------------------- */

void verbs_register_driver_34(const void *ops);

/* Called by provider constructors before main(); deliberately ignores ops. */
SV_EXPORT void verbs_register_driver_34(const void *ops)
{
}

/*
 * ibv_register_driver@IBVERBS_1.1 (compat only, no default version): the
 * registration call of providers older than rdma-core's, taking a name and
 * an init function. Ignored like verbs_register_driver_34(). The local
 * name is made local by the version script; only the versioned alias is
 * exported.
 */
void sv_compat_ibv_register_driver(const char *name, void *init_func);
__asm__(".symver sv_compat_ibv_register_driver, ibv_register_driver@IBVERBS_1.1");
SV_EXPORT void sv_compat_ibv_register_driver(const char *name, void *init_func)
{
}

/* ---- provider context life cycle ---------------------------------------- */

void *_verbs_init_and_alloc_context(void *device, int cmd_fd, size_t alloc_size,
				    void *context_offset, uint32_t driver_id);
void *verbs_open_device(void *device, void *private_data);
void verbs_init_cq(void *cq, void *context, void *channel, void *cq_context);
void verbs_set_ops(void *vctx, const void *ops);
void verbs_uninit_context(void *vctx);
void __verbs_log(void *vctx, uint32_t level, const char *fmt, ...);

SV_EXPORT void *_verbs_init_and_alloc_context(void *device, int cmd_fd, size_t alloc_size,
					      void *context_offset, uint32_t driver_id)
{
	stub_fail();
	return NULL;
}

SV_EXPORT void *verbs_open_device(void *device, void *private_data)
{
	stub_fail();
	return NULL;
}

SV_EXPORT void verbs_init_cq(void *cq, void *context, void *channel, void *cq_context)
{
	count_call();
}

SV_EXPORT void verbs_set_ops(void *vctx, const void *ops)
{
	count_call();
}

SV_EXPORT void verbs_uninit_context(void *vctx)
{
	count_call();
}

SV_EXPORT void __verbs_log(void *vctx, uint32_t level, const char *fmt, ...)
{
	count_call();
}

/* ---- sysfs and ioctl helpers --------------------------------------------- */

int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev, const char *fnfmt, ...);
int execute_ioctl(void *context, void *cmd);
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link);

/* -1 with errno, as the sysfs readers do. */
SV_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev, const char *fnfmt,
					...)
{
	stub_fail();
	return -1;
}

SV_EXPORT int execute_ioctl(void *context, void *cmd)
{
	return stub_fail();
}

/*
 * Sizes a command buffer, so it cannot fail: the attribute count the
 * caller asked for (a buffer too small would be worse than a useless one).
 */
SV_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link)
{
	count_call();
	return num_attrs;
}

/* ---- uverbs commands ------------------------------------------------------ */

#define CMD_STUB(name)                                                                             \
	int name(void *a1, void *a2, void *a3, void *a4, void *a5, void *a6);                      \
	SV_EXPORT int name(void *a1, void *a2, void *a3, void *a4, void *a5, void *a6)             \
	{                                                                                          \
		return stub_fail();                                                                \
	}

CMD_STUB(ibv_cmd_advise_mr)
CMD_STUB(ibv_cmd_alloc_dm)
CMD_STUB(ibv_cmd_alloc_mw)
CMD_STUB(ibv_cmd_alloc_pd)
CMD_STUB(ibv_cmd_attach_mcast)
CMD_STUB(ibv_cmd_close_xrcd)
CMD_STUB(ibv_cmd_create_ah)
CMD_STUB(ibv_cmd_create_counters)
CMD_STUB(ibv_cmd_create_cq)
CMD_STUB(ibv_cmd_create_cq_ex)
CMD_STUB(ibv_cmd_create_flow)
CMD_STUB(ibv_cmd_create_flow_action_esp)
CMD_STUB(ibv_cmd_create_qp)
CMD_STUB(ibv_cmd_create_qp_ex)
CMD_STUB(ibv_cmd_create_qp_ex2)
CMD_STUB(ibv_cmd_create_rwq_ind_table)
CMD_STUB(ibv_cmd_create_srq)
CMD_STUB(ibv_cmd_create_srq_ex)
CMD_STUB(ibv_cmd_create_wq)
CMD_STUB(ibv_cmd_dealloc_mw)
CMD_STUB(ibv_cmd_dealloc_pd)
CMD_STUB(ibv_cmd_dereg_mr)
CMD_STUB(ibv_cmd_destroy_ah)
CMD_STUB(ibv_cmd_destroy_counters)
CMD_STUB(ibv_cmd_destroy_cq)
CMD_STUB(ibv_cmd_destroy_flow)
CMD_STUB(ibv_cmd_destroy_flow_action)
CMD_STUB(ibv_cmd_destroy_qp)
CMD_STUB(ibv_cmd_destroy_rwq_ind_table)
CMD_STUB(ibv_cmd_destroy_srq)
CMD_STUB(ibv_cmd_destroy_wq)
CMD_STUB(ibv_cmd_detach_mcast)
CMD_STUB(ibv_cmd_free_dm)
CMD_STUB(ibv_cmd_get_context)
CMD_STUB(ibv_cmd_modify_cq)
CMD_STUB(ibv_cmd_modify_flow_action_esp)
CMD_STUB(ibv_cmd_modify_qp)
CMD_STUB(ibv_cmd_modify_qp_ex)
CMD_STUB(ibv_cmd_modify_srq)
CMD_STUB(ibv_cmd_modify_wq)
CMD_STUB(ibv_cmd_open_qp)
CMD_STUB(ibv_cmd_open_xrcd)
CMD_STUB(ibv_cmd_poll_cq)
CMD_STUB(ibv_cmd_post_recv)
CMD_STUB(ibv_cmd_post_send)
CMD_STUB(ibv_cmd_post_srq_recv)
CMD_STUB(ibv_cmd_query_context)
CMD_STUB(ibv_cmd_query_device_any)
CMD_STUB(ibv_cmd_query_mr)
CMD_STUB(ibv_cmd_query_port)
CMD_STUB(ibv_cmd_query_qp)
CMD_STUB(ibv_cmd_query_srq)
CMD_STUB(ibv_cmd_read_counters)
CMD_STUB(ibv_cmd_reg_dm_mr)
CMD_STUB(ibv_cmd_reg_dmabuf_mr)
CMD_STUB(ibv_cmd_reg_mr)
CMD_STUB(ibv_cmd_req_notify_cq)
CMD_STUB(ibv_cmd_rereg_mr)
CMD_STUB(ibv_cmd_resize_cq)
