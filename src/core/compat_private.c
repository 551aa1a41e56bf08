/* SPDX-License-Identifier: MIT */
/*
 * compat_private.c - compatibility stubs for rdma-core's private nodes
 * IBVERBS_PRIVATE_34 to _65 (all but the uverbs commands, compat_cmd.c)
 * and the old ibv_register_driver@IBVERBS_1.1.
 *
 * COMPATIBILITY ONLY. These names are rdma-core's internal interface
 * between libibverbs and its kernel providers (libmlx5, libefa, ...): the
 * uverbs command marshalling (ibv_cmd_*, execute_ioctl), the provider
 * context life cycle (verbs_*), provider registration and, since 64, a
 * DMA-buf heap allocator. softverbs has no kernel providers and
 * implements none of it. The names exist only because provider libraries
 * (Debian's libmlx5.so.1 and libefa.so.1, or those of any rdma-core 34 to
 * 65) are linked BIND_NOW against them, and every perftest binary and
 * pyverbs load those libraries: a missing name or node would stop the
 * process at start-up. Each name is exported at every private node that
 * has it (private_abi.h).
 *
 * What the stubs do:
 *  - verbs_register_driver_<N>() (one per node) is called before main()
 *    in such processes (by the constructors of the providers). It ignores
 *    its argument: it records nothing and never calls through the
 *    pointer, so no foreign provider is ever matched to a softverbs device.
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
#include "core/private_abi.h"

atomic_ulong sv_private_stub_calls;

/* Contract: see compat.h. */
void sv_private_stub_count(void)
{
	atomic_fetch_add_explicit(&sv_private_stub_calls, 1, memory_order_relaxed);
}

/* Contract: see compat.h. */
int sv_private_stub_fail(void)
{
	sv_private_stub_count();
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

/* ---- data --------------------------------------------------------------- */

static bool allow_disassociate_destroy;
SV_PRIVATE_SINCE_34(allow_disassociate_destroy, verbs_allow_disassociate_destroy);

/* ---- provider registration ---------------------------------------------- */

/* Called by provider constructors before main(); deliberately ignores ops. */
static void register_driver(const void *ops)
{
}

SV_PRIVATE_ONLY(register_driver, verbs_register_driver_34, 34);
SV_PRIVATE_ONLY(register_driver, verbs_register_driver_57, 57);
SV_PRIVATE_ONLY(register_driver, verbs_register_driver_59, 59);
SV_PRIVATE_ONLY(register_driver, verbs_register_driver_64, 64);
SV_PRIVATE_ONLY(register_driver, verbs_register_driver_65, 65);

/*
 * ibv_register_driver@IBVERBS_1.1 (compat only, no default version): the
 * registration call of providers older than rdma-core's, taking a name and
 * an init function. Ignored like verbs_register_driver_<N>(). The local
 * name is made local by the version script; only the versioned alias is
 * exported.
 */
void sv_compat_ibv_register_driver(const char *name, void *init_func);
__asm__(".symver sv_compat_ibv_register_driver, ibv_register_driver@IBVERBS_1.1");
SV_EXPORT void sv_compat_ibv_register_driver(const char *name, void *init_func)
{
}

/* ---- provider context life cycle ---------------------------------------- */

static void *init_and_alloc_context(void *device, int cmd_fd, size_t alloc_size,
				    void *context_offset, uint32_t driver_id)
{
	sv_private_stub_fail();
	return NULL;
}

static void *open_device(void *device, void *private_data)
{
	sv_private_stub_fail();
	return NULL;
}

static void init_cq(void *cq, void *context, void *channel, void *cq_context)
{
	sv_private_stub_count();
}

static void set_ops(void *vctx, const void *ops)
{
	sv_private_stub_count();
}

static void uninit_context(void *vctx)
{
	sv_private_stub_count();
}

static void verbs_log(void *vctx, uint32_t level, const char *fmt, ...)
{
	sv_private_stub_count();
}

SV_PRIVATE_SINCE_34(init_and_alloc_context, _verbs_init_and_alloc_context);
SV_PRIVATE_SINCE_34(open_device, verbs_open_device);
SV_PRIVATE_SINCE_34(init_cq, verbs_init_cq);
SV_PRIVATE_SINCE_34(set_ops, verbs_set_ops);
SV_PRIVATE_SINCE_34(uninit_context, verbs_uninit_context);
SV_PRIVATE_SINCE_34(verbs_log, __verbs_log);

/* ---- sysfs and ioctl helpers --------------------------------------------- */

/* -1 with errno, as the sysfs readers do. */
static int read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev, const char *fnfmt, ...)
{
	sv_private_stub_fail();
	return -1;
}

static int exec_ioctl(void *context, void *cmd)
{
	return sv_private_stub_fail();
}

/*
 * Sizes a command buffer, so it cannot fail: the attribute count the
 * caller asked for (a buffer too small would be worse than a useless one).
 */
static unsigned int final_num_attrs(unsigned int num_attrs, void *link)
{
	sv_private_stub_count();
	return num_attrs;
}

SV_PRIVATE_SINCE_34(read_ibdev_sysfs_file, ibv_read_ibdev_sysfs_file);
SV_PRIVATE_SINCE_34(exec_ioctl, execute_ioctl);
SV_PRIVATE_SINCE_34(final_num_attrs, __ioctl_final_num_attrs);

/* ---- DMA-buf heap allocator (IBVERBS_PRIVATE_64 on) ---------------------- */

/*
 * Providers use it for confidential-computing buffers; softverbs' own
 * buffers come from mem/shmem.c. Nothing is ever handed out, so the
 * release calls have nothing to release.
 */
static void *heap_cc_shared_init(void)
{
	sv_private_stub_fail();
	return NULL;
}

static void heap_destroy(void *heap)
{
	sv_private_stub_count();
}

static void *heap_alloc(void *heap, size_t size, int *dmabuf_fd)
{
	sv_private_stub_fail();
	return NULL;
}

static void heap_free(void *buf, size_t size, int dmabuf_fd)
{
	sv_private_stub_count();
}

SV_PRIVATE_SINCE_64(heap_cc_shared_init, ibv_dmabuf_heap_cc_shared_init);
SV_PRIVATE_SINCE_64(heap_destroy, ibv_dmabuf_heap_destroy);
SV_PRIVATE_SINCE_64(heap_alloc, ibv_dmabuf_heap_alloc);
SV_PRIVATE_SINCE_64(heap_free, ibv_dmabuf_heap_free);
