/* SPDX-License-Identifier: MIT */
/*
 * ns.c - the private mount namespace of softverbs-run, and the
 * directories it adds there.
 *
 * As root the launcher takes a new mount namespace; otherwise (or with
 * --userns) a new user namespace too, in which it maps only its own uid
 * and gid, so the program runs as the same user. Mount propagation is
 * turned off first, for every mount, so that nothing made afterwards is
 * seen outside.
 *
 * A directory is added where none exists (/dev/infiniband,
 * /sys/class/infiniband) by covering its parent with a tmpfs that
 * shows what the parent held: each entry is bind-mounted back (with
 * what is mounted below it) from a detached copy of the parent, symbolic
 * links are copied, and the new directory is made beside them. The new
 * directory then gets a tmpfs of its own, which the tree is written into
 * and which is then made read-only. An existing directory (a host with
 * RDMA hardware) is hidden by that tmpfs instead. What the host adds to
 * a covered parent later (a hot-plugged device node) does not show in
 * the namespace.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

#define HIDDEN ".softverbs-run-orig"
#define MAX_COVERED 8

static char covered[MAX_COVERED][PATH_MAX]; /* parents this process covered */
static int ncovered;

/* Contract: write `text` to the /proc file `path`; 0 or -errno. */
static int write_proc(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t len = strlen(text);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, len);
	if (n < 0 || (size_t)n != len) {
		int ret = n < 0 ? -errno : -EIO;

		close(fd);
		return ret;
	}
	close(fd);
	return 0;
}

/* Contract: a user namespace in which this process keeps its uid and gid. */
static int enter_userns(uid_t uid, gid_t gid, char *err, size_t errsz)
{
	char map[64];
	int ret;

	if (unshare(CLONE_NEWUSER | CLONE_NEWNS)) {
		ret = -errno;
		snprintf(err, errsz, "cannot create a user namespace: %s", strerror(errno));
		return ret;
	}
	ret = write_proc("/proc/self/setgroups", "deny");
	if (ret && ret != -ENOENT) {
		snprintf(err, errsz, "cannot write /proc/self/setgroups: %s", strerror(-ret));
		return ret;
	}
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	ret = write_proc("/proc/self/uid_map", map);
	if (!ret) {
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
		ret = write_proc("/proc/self/gid_map", map);
	}
	if (ret)
		snprintf(err, errsz, "cannot map uid %u and gid %u in the user namespace: %s",
			 (unsigned)uid, (unsigned)gid, strerror(-ret));
	return ret;
}

/* Contract: see run.h. */
int run_ns_enter(enum run_ns_mode mode, enum run_ns_kind *kind, char *err, size_t errsz)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char first[RUN_ERR_MAX] = "";
	int ret;

	if (mode == RUN_NS_AUTO && uid == 0) {
		if (!unshare(CLONE_NEWNS)) {
			*kind = RUN_NS_MOUNT;
			goto private;
		}
		/* root without CAP_SYS_ADMIN (a container): a user namespace may work */
		snprintf(first, sizeof(first), "cannot create a mount namespace: %s; ",
			 strerror(errno));
	}
	ret = enter_userns(uid, gid, err, errsz);
	if (ret) {
		if (first[0]) {
			char tail[RUN_ERR_MAX];

			snprintf(tail, sizeof(tail), "%s", err);
			snprintf(err, errsz, "%s%s", first, tail);
		}
		return ret;
	}
	*kind = RUN_NS_USER_MOUNT;

      private:
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		ret = -errno;
		snprintf(err, errsz, "cannot make the mounts private: %s", strerror(errno));
		return ret;
	}
	return 0;
}

/* Contract: a tmpfs (mode `mode`) on `path`; 0 or -errno. */
static int mount_tmpfs(const char *path, mode_t mode, unsigned long flags)
{
	char opts[32];

	snprintf(opts, sizeof(opts), "mode=%04o", (unsigned)(mode & 07777));
	if (mount("tmpfs", path, "tmpfs", flags, opts))
		return -errno;
	return 0;
}

/* Contract: entry `name` of `from` back at `to`/`name`; 0 or -errno. */
static int restore_entry(int dfd, const char *from, const char *to, const char *name)
{
	char src[PATH_MAX], dst[PATH_MAX], target[PATH_MAX];
	struct stat st;
	ssize_t n;
	int fd;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (run_path(src, sizeof(src), from, name) || run_path(dst, sizeof(dst), to, name))
		return -ENAMETOOLONG;
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(dfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = '\0';
		return symlink(target, dst) ? -errno : 0;
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdir(dst, st.st_mode & 07777))
			return -errno;
	} else {
		fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		close(fd);
	}
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL))
		return -errno;
	return 0;
}

/*
 * Contract: cover directory `parent` with a tmpfs that shows its entries
 * (see the head of this file); 0 or -errno with *what naming the step.
 */
static int cover(const char *parent, const char **what)
{
	char hidden[PATH_MAX];
	struct dirent *e;
	struct stat st;
	int tree, dfd, ret = 0;
	DIR *d;

	*what = "stat";
	if (stat(parent, &st))
		return -errno;
	*what = "open_tree";
	tree = open_tree(AT_FDCWD, parent, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (tree < 0)
		return -errno;
	*what = "mount tmpfs";
	ret = run_path(hidden, sizeof(hidden), parent, HIDDEN);
	if (!ret)
		ret = mount_tmpfs(parent, st.st_mode, MS_NOSUID);
	if (!ret && mkdir(hidden, 0700))
		ret = -errno;
	*what = ret ? *what : "move_mount";
	if (!ret && move_mount(tree, "", AT_FDCWD, hidden, MOVE_MOUNT_F_EMPTY_PATH))
		ret = -errno;
	close(tree);
	if (ret)
		return ret;
	*what = "read the directory";
	dfd = open(hidden, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		ret = -errno;
		if (dfd >= 0)
			close(dfd);
		umount2(hidden, MNT_DETACH);
		return ret;
	}
	*what = "restore an entry";
	while (!ret && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		ret = restore_entry(dirfd(d), hidden, parent, e->d_name);
	}
	closedir(d);
	if (umount2(hidden, MNT_DETACH) && !ret) {
		*what = "umount";
		ret = -errno;
	}
	if (rmdir(hidden) && !ret) {
		*what = "rmdir";
		ret = -errno;
	}
	return ret;
}

/* Contract: true if this process covered `path` already. */
static bool is_covered(const char *path)
{
	int i;

	for (i = 0; i < ncovered; i++)
		if (!strcmp(covered[i], path))
			return true;
	return false;
}

/* Contract: see run.h. `path` is absolute. */
int run_private_dir(const char *path, char *err, size_t errsz)
{
	char parent[PATH_MAX];
	const char *what = "mount tmpfs";
	struct stat st;
	char *slash;
	int ret;

	if (!stat(path, &st)) {
		if (!S_ISDIR(st.st_mode)) {
			snprintf(err, errsz, "%s exists and is not a directory", path);
			return -ENOTDIR;
		}
		goto own_tmpfs;
	}
	if (errno != ENOENT || path[0] != '/') {
		ret = errno != ENOENT ? -errno : -EINVAL;
		snprintf(err, errsz, "cannot use %s: %s", path, strerror(-ret));
		return ret;
	}
	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (slash == parent)
		slash[1] = '\0';
	else
		*slash = '\0';
	if (stat(parent, &st)) {
		ret = run_private_dir(parent, err, errsz);
		if (ret)
			return ret;
	} else if (!is_covered(parent)) {
		ret = cover(parent, &what);
		if (ret) {
			snprintf(err, errsz, "cannot add a directory to %s (%s): %s", parent, what,
				 strerror(-ret));
			return ret;
		}
		if (ncovered < MAX_COVERED)
			snprintf(covered[ncovered++], PATH_MAX, "%s", parent);
	}
	if (mkdir(path, 0755) && errno != EEXIST) {
		ret = -errno;
		snprintf(err, errsz, "cannot create %s: %s", path, strerror(errno));
		return ret;
	}
	st.st_mode = 0755;
own_tmpfs:
	ret = mount_tmpfs(path, 0755, MS_NOSUID | MS_NODEV | MS_NOEXEC);
	if (ret) {
		snprintf(err, errsz, "cannot mount a tmpfs on %s: %s", path, strerror(-ret));
		return ret;
	}
	if (ncovered < MAX_COVERED)
		snprintf(covered[ncovered++], PATH_MAX, "%s", path);
	return 0;
}

/* Contract: see run.h. `dst` is created as an empty file first. */
int run_bind(const char *src, const char *dst, char *err, size_t errsz)
{
	int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0444), ret;

	if (fd < 0 || close(fd) || mount(src, dst, NULL, MS_BIND, NULL)) {
		ret = -errno;
		snprintf(err, errsz, "cannot bind %s to %s: %s", src, dst, strerror(errno));
		return ret;
	}
	return 0;
}

/* Contract: see run.h. */
int run_make_readonly(const char *path, char *err, size_t errsz)
{
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
	int ret;

	if (mount_setattr(AT_FDCWD, path, 0, &attr, sizeof(attr))) {
		ret = -errno;
		snprintf(err, errsz, "cannot make %s read-only: %s", path, strerror(errno));
		return ret;
	}
	return 0;
}
