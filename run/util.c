/* SPDX-License-Identifier: MIT */
/*
 * util.c - writing the generated tree: files of fixed text, and the
 * directories that hold them, relative to a directory descriptor.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

/* Contract: see run.h. */
int run_path(char *out, size_t size, const char *a, const char *b)
{
	int n = snprintf(out, size, "%s/%s", a, b);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* Contract: see run.h. Every component of `path`, each 0755; 0 or -errno. */
int run_mkdirs(int dirfd, const char *path)
{
	char buf[512];
	size_t i, len = strlen(path);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdirat(dirfd, buf, 0755) && errno != EEXIST)
			return -errno;
		if (i < len)
			buf[i] = '/';
	}
	return 0;
}

/* Contract: see run.h. */
int run_put(int dirfd, const char *name, const char *text)
{
	const char *slash = strrchr(name, '/');
	size_t len = strlen(text), off = 0;
	int fd, ret;

	if (slash) {
		char dir[512];

		if ((size_t)(slash - name) >= sizeof(dir))
			return -ENAMETOOLONG;
		memcpy(dir, name, (size_t)(slash - name));
		dir[slash - name] = '\0';
		ret = run_mkdirs(dirfd, dir);
		if (ret)
			return ret;
	}
	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0444);
	if (fd < 0)
		return -errno;
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			close(fd);
			return ret;
		}
		off += (size_t)n;
	}
	if (close(fd))
		return -errno;
	return 0;
}
