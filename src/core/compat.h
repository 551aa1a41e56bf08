/* SPDX-License-Identifier: MIT */
/*
 * compat.h - exported names that rdma-core declares outside the public
 * verbs.h (in its driver, sysfs and marshalling headers), and the internal
 * counter of the private-node compatibility stubs.
 *
 * The stubs themselves (ibv_cmd_*, verbs_*, execute_ioctl, ...) are
 * defined only in compat_private.c and compat_cmd.c, under internal
 * names: nothing in softverbs may call them.
 */
#ifndef SV_COMPAT_H
#define SV_COMPAT_H

#include <stdatomic.h>
#include <stddef.h>

/*
 * Number of calls that reached a private-node stub in this process
 * (compat_private.c, compat_cmd.c). A softverbs context never leads to
 * one: the count stays 0 unless foreign provider code calls in.
 */
extern atomic_ulong sv_private_stub_calls;
/* Count one stub call. */
void sv_private_stub_count(void);
/* Count one stub call; EOPNOTSUPP as errno and as the result. */
int sv_private_stub_fail(void);

/* sysfs.c: IBVERBS_1.0 */
/* "/sys", or $SYSFS_PATH without trailing slashes. Never NULL. */
const char *ibv_get_sysfs_path(void);
/*
 * Read dir/file into buf (at most size - 1 bytes, NUL-terminated, one
 * trailing newline removed). The length, or -1 with errno.
 */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

#endif
