/* SPDX-License-Identifier: MIT */
/*
 * run.h - softverbs-run: what the launcher knows about each device, and
 * the three steps it takes (query, namespace, tree).
 *
 * Every value of the generated tree comes from struct run_dev, which
 * run_query() fills from the library's own verbs (ibv_query_device,
 * ibv_query_port, ibv_query_gid_ex, ibv_query_pkey), so the files and
 * the verbs cannot disagree. Internal functions return 0 or -errno and
 * describe a failure in the caller's message buffer.
 */
#ifndef SV_RUN_H
#define SV_RUN_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#define RUN_PROG "softverbs-run"
#define RUN_MAX_PORTS 8
#define RUN_ERR_MAX 512
#define RUN_CPUMAP_MAX 1024

struct run_gid {
	bool valid; /* ibv_query_gid_ex found an entry at this index */
	union ibv_gid gid;
	uint32_t type; /* enum ibv_gid_type */
	char ndev[IF_NAMESIZE]; /* "" when the entry has no netdev */
};

struct run_port {
	struct ibv_port_attr attr;
	int ngids; /* attr.gid_tbl_len */
	struct run_gid *gids;
	int npkeys; /* attr.pkey_tbl_len */
	uint16_t *pkeys; /* host order */
};

struct run_dev {
	char name[IBV_SYSFS_NAME_MAX]; /* softverbs0 */
	char dev_name[IBV_SYSFS_NAME_MAX]; /* uverbs0 */
	char ibdev_path[IBV_SYSFS_PATH_MAX]; /* <sysfs>/class/infiniband/softverbs0 */
	char dev_path[IBV_SYSFS_PATH_MAX]; /* <sysfs>/class/infiniband_verbs/uverbs0 */
	int node_type; /* enum ibv_node_type */
	struct ibv_device_attr attr;
	int nports;
	struct run_port ports[RUN_MAX_PORTS];
	int numa_node; /* -1: none */
	char local_cpus[RUN_CPUMAP_MAX]; /* the kernel's cpumap format */
	char local_cpulist[RUN_CPUMAP_MAX]; /* "0-3,8" */
};

/* query.c: every device the library lists, opened, queried and closed. */
int run_query(struct run_dev **devs, int *ndevs, char *err, size_t errsz);
void run_free(struct run_dev *devs, int ndevs);

/* topo.c: the NUMA node and CPUs reported as the device's locality. */
int run_locality(struct run_dev *dev, char *err, size_t errsz);

/* tree.c: write a device's sysfs directory and its verbs directory. */
int run_write_ibdev(int dirfd, const struct run_dev *dev, char *err, size_t errsz);
int run_write_verbs_dev(int dirfd, const struct run_dev *dev, char *err, size_t errsz);
int run_write_verbs_class(int dirfd, char *err, size_t errsz);

/* ns.c: the private mount namespace and the directories made in it. */
enum run_ns_mode {
	RUN_NS_AUTO, /* a mount namespace as root, else a user namespace too */
	RUN_NS_USER, /* always a user namespace (also as root) */
};
enum run_ns_kind {
	RUN_NS_MOUNT, /* a mount namespace only (root) */
	RUN_NS_USER_MOUNT, /* a user and a mount namespace */
};
int run_ns_enter(enum run_ns_mode mode, enum run_ns_kind *kind, char *err, size_t errsz);
int run_private_dir(const char *path, char *err, size_t errsz);
int run_bind(const char *src, const char *dst, char *err, size_t errsz);
int run_make_readonly(const char *path, char *err, size_t errsz);

/* Exported by libibverbs (IBVERBS_1.0), declared in rdma-core's driver.h only. */
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

/* util: "a/b" into out; 0 or -ENAMETOOLONG. */
int run_path(char *out, size_t size, const char *a, const char *b);

/* util: write `text` to dirfd/name (mode 0444), creating parent dirs. */
int run_put(int dirfd, const char *name, const char *text);
int run_mkdirs(int dirfd, const char *path);

#endif
