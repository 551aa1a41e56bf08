/* SPDX-License-Identifier: MIT */
/*
 * sysfs.c - ibv_get_sysfs_path() and ibv_read_sysfs_file() (IBVERBS_1.0).
 *
 * rdma-core finds its kernel devices in sysfs; softverbs does not, but
 * ibv_devinfo reads "board_id" from a device's ibdev_path and librdmacm
 * imports both names. The software device's ibdev_path
 * (/sys/class/infiniband/<name>) does not exist, so such reads fail with
 * -1 and ENOENT, which both callers accept.
 */
#define _GNU_SOURCE /* secure_getenv */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/compat.h"
#include "core/core.h"

static char sysfs_path[IBV_SYSFS_PATH_MAX];
static pthread_once_t sysfs_once = PTHREAD_ONCE_INIT;

/*
 * $SYSFS_PATH (ignored in set-user-ID programs) without its trailing
 * slashes; "/sys" when it is unset, empty, or too long for the buffer.
 */
static void sysfs_path_init(void)
{
	const char *env = secure_getenv("SYSFS_PATH");
	size_t len;

	if (!env || !*env || strlen(env) >= sizeof(sysfs_path)) {
		strcpy(sysfs_path, "/sys");
		return;
	}
	len = strlen(env);
	while (len > 0 && env[len - 1] == '/')
		len--;
	memcpy(sysfs_path, env, len);
	sysfs_path[len] = '\0';
}

SV_EXPORT const char *ibv_get_sysfs_path(void)
{
	pthread_once(&sysfs_once, sysfs_path_init);
	return sysfs_path;
}

SV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[PATH_MAX];
	size_t len = 0;
	int fd, n, saved;

	if (!dir || !file || !buf || !size) {
		errno = EINVAL;
		return -1;
	}
	n = snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (size - 1 > INT_MAX)
		size = (size_t)INT_MAX + 1; /* the length must fit the int result */
	while (len < size - 1) {
		ssize_t r = read(fd, buf + len, size - 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			saved = errno;
			close(fd);
			errno = saved;
			return -1;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	buf[len] = '\0';
	return (int)len;
}
