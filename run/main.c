/* SPDX-License-Identifier: MIT */
/*
 * softverbs-run - run a program on softverbs as if an RDMA NIC were
 * installed (man/softverbs-run.1).
 *
 *   softverbs-run [options] [--] PROGRAM [ARGS...]
 *
 * 1. Queries every softverbs device through the library it is linked
 *    with (the one next to it: build/lib, or the installed libdir).
 * 2. In a private mount namespace (and a user namespace when not root),
 *    makes /dev/infiniband/<uverbsN> a character device each program may
 *    open (a bind of /dev/null: software such as UCX only checks that it
 *    is there), and mounts a read-only /sys/class/infiniband/<name> and
 *    /sys/class/infiniband_verbs/<uverbsN> written from those queries.
 * 3. Puts that library first on LD_LIBRARY_PATH and executes PROGRAM.
 *
 * Exit status: PROGRAM's; 125 when softverbs-run itself fails, 126 when
 * PROGRAM cannot be executed, 127 when it is not found (as env(1)).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

#define EXIT_FAIL 125

struct opts {
	const char *tree; /* --tree DIR: write the sysfs tree there and exit */
	bool no_ns;
	bool verbose;
	enum run_ns_mode mode;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: " RUN_PROG " [options] [--] PROGRAM [ARGS...]\n"
		   "Run PROGRAM on softverbs as if an RDMA NIC were installed.\n"
		   "  -a, --addr ADDR      device address of every process (SOFTVERBS_ADDR);\n"
		   "                       default: each process takes the first free 127.0.0.N\n"
		   "  -n, --dev-name NAME  device name (SOFTVERBS_DEV_NAME, default softverbs0)\n"
		   "      --userns         a user namespace even when run as root\n"
		   "      --no-namespace   only put the library on the loader path\n"
		   "      --tree DIR       write the sysfs tree under DIR/class and exit\n"
		   "  -v, --verbose        say what was made\n"
		   "  -h, --help           this text\n");
}

/* Contract: the directory of the libibverbs.so.1 this process runs on. */
static int lib_dir(char *out, size_t size)
{
	Dl_info info;
	char *slash;

	if (!dladdr((void *)ibv_get_device_list, &info) || !info.dli_fname)
		return -ENOENT;
	if (!realpath(info.dli_fname, out))
		return -errno;
	slash = strrchr(out, '/');
	if (!slash || (size_t)(slash - out) >= size)
		return -ENAMETOOLONG;
	*slash = '\0';
	return 0;
}

/* Contract: `path` without its last component, in out. */
static void parent_of(const char *path, char *out, size_t size)
{
	char *slash;

	snprintf(out, size, "%s", path);
	slash = strrchr(out, '/');
	if (slash && slash != out)
		*slash = '\0';
}

/* Contract: the sysfs files of every device under the class directories. */
static int write_sysfs(const char *ibclass, const char *verbsclass, const struct run_dev *devs,
		       int ndevs, char *err, size_t errsz)
{
	int ib = open(ibclass, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int verbs = open(verbsclass, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int i, ret = 0;

	if (ib < 0 || verbs < 0) {
		ret = -errno;
		snprintf(err, errsz, "cannot open %s: %s", ib < 0 ? ibclass : verbsclass,
			 strerror(errno));
	}
	if (!ret)
		ret = run_write_verbs_class(verbs, err, errsz);
	for (i = 0; i < ndevs && !ret; i++) {
		ret = run_write_ibdev(ib, &devs[i], err, errsz);
		if (!ret)
			ret = run_write_verbs_dev(verbs, &devs[i], err, errsz);
	}
	if (ib >= 0)
		close(ib);
	if (verbs >= 0)
		close(verbs);
	return ret;
}

/* Contract: --tree DIR: the sysfs tree under DIR/class; 0 or -errno. */
static int write_tree_dir(const char *dir, const struct run_dev *devs, int ndevs, char *err,
			  size_t errsz)
{
	char ib[PATH_MAX], verbs[PATH_MAX];
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;

	if (fd < 0) {
		ret = -errno;
		snprintf(err, errsz, "cannot open %s: %s", dir, strerror(errno));
		return ret;
	}
	ret = run_mkdirs(fd, "class/infiniband");
	if (!ret)
		ret = run_mkdirs(fd, "class/infiniband_verbs");
	close(fd);
	if (ret) {
		snprintf(err, errsz, "cannot create %s/class: %s", dir, strerror(-ret));
		return ret;
	}
	if (run_path(ib, sizeof(ib), dir, "class/infiniband") ||
	    run_path(verbs, sizeof(verbs), dir, "class/infiniband_verbs")) {
		snprintf(err, errsz, "%s: path too long", dir);
		return -ENAMETOOLONG;
	}
	return write_sysfs(ib, verbs, devs, ndevs, err, errsz);
}

/* Contract: /dev/infiniband and the sysfs tree in this namespace; 0 or -errno. */
static int make_tree(const struct run_dev *devs, int ndevs, bool verbose, char *err, size_t errsz)
{
	char ibclass[PATH_MAX], verbsclass[PATH_MAX], node[PATH_MAX];
	int i, ret;

	/* where the library says its devices are: ibdev_path, dev_path */
	if (ndevs > 0) {
		parent_of(devs[0].ibdev_path, ibclass, sizeof(ibclass));
		parent_of(devs[0].dev_path, verbsclass, sizeof(verbsclass));
	} else {
		if (run_path(ibclass, sizeof(ibclass), ibv_get_sysfs_path(), "class/infiniband") ||
		    run_path(verbsclass, sizeof(verbsclass), ibv_get_sysfs_path(),
			     "class/infiniband_verbs")) {
			snprintf(err, errsz, "the sysfs path is too long");
			return -ENAMETOOLONG;
		}
	}
	ret = run_private_dir(ibclass, err, errsz);
	ret = ret ?: run_private_dir(verbsclass, err, errsz);
	ret = ret ?: write_sysfs(ibclass, verbsclass, devs, ndevs, err, errsz);
	ret = ret ?: run_make_readonly(ibclass, err, errsz);
	ret = ret ?: run_make_readonly(verbsclass, err, errsz);
	ret = ret ?: run_private_dir("/dev/infiniband", err, errsz);
	for (i = 0; i < ndevs && !ret; i++) {
		ret = run_path(node, sizeof(node), "/dev/infiniband", devs[i].dev_name);
		ret = ret ?: run_bind("/dev/null", node, err, errsz);
	}
	ret = ret ?: run_make_readonly("/dev/infiniband", err, errsz);
	if (ret || !verbose)
		return ret;
	for (i = 0; i < ndevs; i++) {
		char gid[INET6_ADDRSTRLEN];

		gid[0] = '\0';
		if (devs[i].nports > 0 && devs[i].ports[0].ngids > 0 &&
		    devs[i].ports[0].gids[0].valid)
			inet_ntop(AF_INET6, devs[i].ports[0].gids[0].gid.raw, gid, sizeof(gid));
		fprintf(stderr, RUN_PROG ": %s: /dev/infiniband/%s, %s/%s, GID 0 %s\n",
			devs[i].name, devs[i].dev_name, ibclass, devs[i].name,
			gid[0] ? gid : "(none)");
	}
	return 0;
}

/* Contract: LD_LIBRARY_PATH with `dir` first; 0 or -errno. */
static int put_lib_first(const char *dir)
{
	const char *old = getenv("LD_LIBRARY_PATH");
	char *val;
	int ret;

	if (old && *old)
		ret = asprintf(&val, "%s:%s", dir, old);
	else
		ret = asprintf(&val, "%s", dir);
	if (ret < 0)
		return -ENOMEM;
	ret = setenv("LD_LIBRARY_PATH", val, 1) ? -errno : 0;
	free(val);
	return ret;
}

/* Contract: parse argv into *o; the index of PROGRAM, or -1 (exit 2). */
static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{"addr", required_argument, NULL, 'a'}, {"dev-name", required_argument, NULL, 'n'},
		{"userns", no_argument, NULL, 'U'},	{"no-namespace", no_argument, NULL, 'N'},
		{"tree", required_argument, NULL, 'T'}, {"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},	{NULL, 0, NULL, 0},
	};
	int c;

	/* "+": stop at PROGRAM, whose own options are its own */
	while ((c = getopt_long(argc, argv, "+a:n:vh", longs, NULL)) != -1) {
		switch (c) {
		case 'a':
			setenv("SOFTVERBS_ADDR", optarg, 1);
			break;
		case 'n':
			setenv("SOFTVERBS_DEV_NAME", optarg, 1);
			break;
		case 'U':
			o->mode = RUN_NS_USER;
			break;
		case 'N':
			o->no_ns = true;
			break;
		case 'T':
			o->tree = optarg;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (!o->tree && optind >= argc) {
		fprintf(stderr, RUN_PROG ": no PROGRAM given\n");
		usage(stderr);
		return -1;
	}
	return optind;
}

int main(int argc, char **argv)
{
	struct opts o = {.mode = RUN_NS_AUTO};
	char err[RUN_ERR_MAX] = "", libdir[PATH_MAX];
	struct run_dev *devs = NULL;
	enum run_ns_kind kind;
	bool in_ns = false;
	int prog, ndevs = 0, ret;

	prog = parse(argc, argv, &o);
	if (prog < 0)
		return 2;
	ret = lib_dir(libdir, sizeof(libdir));
	if (ret) {
		fprintf(stderr, RUN_PROG ": cannot find its libibverbs.so.1: %s\n", strerror(-ret));
		return EXIT_FAIL;
	}
	if (!o.tree && !o.no_ns) {
		ret = run_ns_enter(o.mode, &kind, err, sizeof(err));
		if (ret)
			fprintf(stderr,
				RUN_PROG
				": no private namespace (%s).\n" RUN_PROG
				": running %s with softverbs' library only: programs "
				"that use the verbs (ibv_devinfo, perftest, pyverbs, "
				"fi_info -p verbs, qperf) work; software that looks for "
				"/dev/infiniband or /sys/class/infiniband (UCX and so Open "
				"MPI's pml ucx, ibstat, ibstatus) will not see the device.\n",
				err, argv[prog]);
		in_ns = !ret;
	}
	if (o.tree || in_ns) {
		/* the launcher's own open and close are no traffic of the program's */
		char *stats = getenv("SOFTVERBS_STATS");

		stats = stats ? strdup(stats) : NULL;
		unsetenv("SOFTVERBS_STATS");
		ret = run_query(&devs, &ndevs, err, sizeof(err));
		if (stats)
			setenv("SOFTVERBS_STATS", stats, 1);
		free(stats);
		if (!ret && o.tree)
			ret = write_tree_dir(o.tree, devs, ndevs, err, sizeof(err));
		else if (!ret)
			ret = make_tree(devs, ndevs, o.verbose, err, sizeof(err));
		run_free(devs, ndevs);
		if (ret) {
			fprintf(stderr, RUN_PROG ": %s\n", err);
			return EXIT_FAIL;
		}
		if (o.tree)
			return 0;
		if (o.verbose)
			fprintf(stderr, RUN_PROG ": in a %s namespace\n",
				kind == RUN_NS_MOUNT ? "mount" : "user and mount");
	}
	ret = put_lib_first(libdir);
	if (ret) {
		fprintf(stderr, RUN_PROG ": cannot set LD_LIBRARY_PATH: %s\n", strerror(-ret));
		return EXIT_FAIL;
	}
	execvp(argv[prog], argv + prog);
	ret = errno;
	fprintf(stderr, RUN_PROG ": cannot run %s: %s\n", argv[prog], strerror(ret));
	return ret == ENOENT ? 127 : 126;
}
