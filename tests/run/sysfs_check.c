/* SPDX-License-Identifier: MIT */
/*
 * sysfs_check [--any-addr] [--no-dev]: run by tests/softverbs_run.sh under
 * softverbs-run (or with SYSFS_PATH at a tree from softverbs-run --tree):
 * every file of the device's sysfs tree says what the library's verbs
 * say, read both with ibv_read_sysfs_file() on the device's ibdev_path
 * and dev_path and, where those are under /sys, with plain stdio, and
 * /dev/infiniband/<dev_name> is a character device it may open.
 *
 *   --any-addr  the launcher's query and this process may have had
 *               different addresses (no SOFTVERBS_ADDR): if the first GID
 *               of the tree is not this process's, the values derived from the
 *               address (GIDs, node and system image GUIDs, LID) are only
 *               checked to be well formed
 *   --no-dev    no /dev/infiniband check (a --tree run has none)
 *
 * The expected texts are formatted here, independently of run/tree.c.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdbool.h>
#include <sys/stat.h>

/* exported by libibverbs (IBVERBS_1.0), declared in rdma-core's driver.h only */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

static bool any_addr, no_dev;
static bool other_addr; /* --any-addr, and the tree has another address */

/* The file dir/name through ibv_read_sysfs_file; -1 if it cannot be read. */
static int rd(const char *dir, const char *name, char *buf, size_t size)
{
	return ibv_read_sysfs_file(dir, name, buf, size);
}

/* dir/name must read `want` exactly. */
static void expect(const char *dir, const char *name, const char *want)
{
	char got[512];

	if (!CHECK_MSG(rd(dir, name, got, sizeof(got)) >= 0, "%s/%s: %s", dir, name,
		       strerror(errno)))
		return;
	CHECK_MSG(!strcmp(got, want), "%s/%s: '%s', want '%s'", dir, name, got, want);
}

/* dir/name starts with "N: " and N equals `want`. */
static void expect_num_prefix(const char *dir, const char *name, long want)
{
	char got[128], *end;
	long v;

	if (!CHECK_MSG(rd(dir, name, got, sizeof(got)) >= 0, "%s/%s unreadable", dir, name))
		return;
	v = strtol(got, &end, 10);
	CHECK_MSG(end != got && end[0] == ':' && end[1] == ' ' && v == want,
		  "%s/%s: '%s', want %ld: ...", dir, name, got, want);
}

static void guid_str(__be64 g, char *out, size_t size)
{
	uint64_t v = be64toh(g);

	snprintf(out, size, "%04x:%04x:%04x:%04x", (unsigned)(v >> 48),
		 (unsigned)(v >> 32) & 0xffff, (unsigned)(v >> 16) & 0xffff, (unsigned)v & 0xffff);
}

/* A sysfs GID text into 16 bytes; 0 or -1. */
static int parse_gid(const char *s, uint8_t *raw)
{
	unsigned int w[8];
	int i, n = 0;

	if (sscanf(s, "%4x:%4x:%4x:%4x:%4x:%4x:%4x:%4x%n", &w[0], &w[1], &w[2], &w[3], &w[4], &w[5],
		   &w[6], &w[7], &n) != 8 ||
	    s[n] != '\0' || n != 39)
		return -1;
	for (i = 0; i < 8; i++) {
		raw[2 * i] = (uint8_t)(w[i] >> 8);
		raw[2 * i + 1] = (uint8_t)w[i];
	}
	return 0;
}

static void check_gid(struct ibv_context *ctx, const char *pdir, uint8_t port, int i)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	char dir[600], name[32], got[128];
	struct ibv_gid_entry e;
	uint8_t raw[16];
	int ret;

	memset(&e, 0, sizeof(e));
	ret = ibv_query_gid_ex(ctx, port, (uint32_t)i, &e, 0);
	snprintf(name, sizeof(name), "gids/%d", i);
	if (!CHECK_MSG(rd(pdir, name, got, sizeof(got)) >= 0, "%s/%s unreadable", pdir, name) ||
	    !CHECK_MSG(!parse_gid(got, raw), "%s/%s: '%s' is not a sysfs GID", pdir, name, got))
		return;
	snprintf(dir, sizeof(dir), "%s/gid_attrs", pdir);
	if (ret) {
		static const uint8_t zero[16];

		CHECK_MSG(!memcmp(raw, zero, 16), "%s/%s: '%s' for an empty entry", pdir, name,
			  got);
		snprintf(name, sizeof(name), "types/%d", i);
		CHECK_MSG(rd(dir, name, got, sizeof(got)) < 0, "%s/%s exists for an empty entry",
			  dir, name);
		return;
	}
	if (other_addr && !memcmp(e.gid.raw, mapped, 12))
		CHECK_MSG(!memcmp(raw, mapped, 12) && raw[12] == 127, "%s/%s: '%s', want 127.x",
			  pdir, name, got);
	else if (other_addr)
		CHECK_MSG(memcmp(raw, mapped, 12) != 0, "%s/%s: '%s', want an IPv6 GID", pdir, name,
			  got);
	else
		CHECK_MSG(!memcmp(raw, e.gid.raw, 16), "%s/%s: '%s' differs from ibv_query_gid_ex",
			  pdir, name, got);
	snprintf(name, sizeof(name), "types/%d", i);
	expect(dir, name, e.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1");
	if (e.ndev_ifindex) {
		char ifname[IF_NAMESIZE];

		snprintf(name, sizeof(name), "ndevs/%d", i);
		if (CHECK(if_indextoname(e.ndev_ifindex, ifname)))
			expect(dir, name, ifname);
	}
}

static void check_port(struct ibv_context *ctx, const char *ibdev, uint8_t port)
{
	static const int lanes[] = {[1] = 1, [2] = 4, [4] = 8, [8] = 12, [16] = 2};
	struct ibv_port_attr a;
	char dir[300], want[128], got[128], name[32];
	int i;

	if (!CHECK_RET(ibv_query_port(ctx, port, &a), 0))
		return;
	snprintf(dir, sizeof(dir), "%s/ports/%u", ibdev, port);
	expect_num_prefix(dir, "state", a.state);
	expect_num_prefix(dir, "phys_state", a.phys_state);
	expect(dir, "link_layer",
	       a.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
	snprintf(want, sizeof(want), "0x%x", a.lid);
	if (other_addr)
		CHECK(rd(dir, "lid", got, sizeof(got)) > 2 && !strncmp(got, "0x", 2));
	else
		expect(dir, "lid", want);
	snprintf(want, sizeof(want), "0x%x", a.sm_lid);
	expect(dir, "sm_lid", want);
	snprintf(want, sizeof(want), "%u", a.lmc);
	expect(dir, "lid_mask_count", want);
	snprintf(want, sizeof(want), "%u", a.sm_sl);
	expect(dir, "sm_sl", want);
	snprintf(want, sizeof(want), "0x%08x", a.port_cap_flags);
	expect(dir, "cap_mask", want);
	/* rate: "<Gb/s> Gb/sec (<lanes>X<speed name>)"; the lanes from active_width */
	if (CHECK(rd(dir, "rate", got, sizeof(got)) > 0) && a.active_width < 17) {
		snprintf(want, sizeof(want), " Gb/sec (%dX", lanes[a.active_width]);
		CHECK_MSG(strstr(got, want) != NULL, "%s/rate: '%s' lacks '%s'", dir, got, want);
	}
	for (i = 0; i < a.gid_tbl_len; i++)
		check_gid(ctx, dir, port, i);
	snprintf(name, sizeof(name), "gids/%d", a.gid_tbl_len);
	CHECK_MSG(rd(dir, name, got, sizeof(got)) < 0, "%s/%s exists past gid_tbl_len", dir, name);
	for (i = 0; i < a.pkey_tbl_len; i++) {
		__be16 pk;

		if (!CHECK_RET(ibv_query_pkey(ctx, port, i, &pk), 0))
			continue;
		snprintf(name, sizeof(name), "pkeys/%d", i);
		snprintf(want, sizeof(want), "0x%04x", be16toh(pk));
		expect(dir, name, want);
	}
}

#define MAX_CPUS 1024

/* CPU c is set in a kernel bitmap text ("3", "ff,ffffffff": word 0 last). */
static bool mask_has(const char *mask, int c)
{
	const char *p = mask + strlen(mask);
	int word = 0;

	while (p > mask) {
		const char *q = p;
		char w[9] = "";

		while (q > mask && q[-1] != ',')
			q--;
		if (p - q > 8)
			return false;
		memcpy(w, q, (size_t)(p - q));
		if (word == c / 32)
			return (strtoul(w, NULL, 16) >> (c % 32)) & 1;
		word++;
		p = q > mask ? q - 1 : q;
	}
	return false;
}

/* CPU c is in a CPU list text ("0-3,8"). */
static bool list_has(const char *list, int c)
{
	const char *p = list;
	char *end;

	while (*p) {
		long a = strtol(p, &end, 10), b = a;

		if (end == p)
			return false;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		if (c >= a && c <= b)
			return true;
		p = *end == ',' ? end + 1 : end;
	}
	return false;
}

/* device/numa_node, local_cpus and local_cpulist agree with each other. */
static void check_locality(const char *ibdev)
{
	char dir[300], mask[1024], list[1024], *end;
	int c, diff = -1, count = 0;
	long node;

	snprintf(dir, sizeof(dir), "%s/device", ibdev);
	if (CHECK(rd(dir, "numa_node", mask, sizeof(mask)) > 0)) {
		node = strtol(mask, &end, 10);
		CHECK_MSG(*end == '\0' && node >= -1, "numa_node '%s'", mask);
	}
	if (!CHECK(rd(dir, "local_cpus", mask, sizeof(mask)) > 0) ||
	    !CHECK(rd(dir, "local_cpulist", list, sizeof(list)) > 0))
		return;
	for (c = 0; c < MAX_CPUS; c++) {
		if (mask_has(mask, c) != list_has(list, c) && diff < 0)
			diff = c;
		count += list_has(list, c);
	}
	CHECK_MSG(diff < 0 && count > 0, "local_cpus '%s' and local_cpulist '%s' differ at CPU %d",
		  mask, list, diff);
}

/* The tree's first GID of port 1 (at the first index that has one) is this process's. */
static bool same_addr(struct ibv_context *ctx, const char *ibdev)
{
	struct ibv_gid_entry e;
	char name[32], got[128];
	uint8_t raw[16];
	uint32_t i;

	for (i = 0; i < 256; i++) {
		if (ibv_query_gid_ex(ctx, 1, i, &e, 0))
			continue;
		snprintf(name, sizeof(name), "ports/1/gids/%u", i);
		return rd(ibdev, name, got, sizeof(got)) > 0 && !parse_gid(got, raw) &&
		       !memcmp(raw, e.gid.raw, 16);
	}
	return true;
}

static void check_dev(struct ibv_device *dev)
{
	const char *ibdev = dev->ibdev_path;
	struct ibv_device_attr attr;
	struct ibv_context *ctx;
	char want[300], path[400];
	struct stat st;
	uint8_t p;

	t_case(ibv_get_device_name(dev));
	ctx = ibv_open_device(dev);
	if (!CHECK_MSG(ctx != NULL, "open %s: %s", dev->name, strerror(errno)))
		return;
	if (!CHECK_RET(ibv_query_device(ctx, &attr), 0))
		goto out;
	other_addr = any_addr && !same_addr(ctx, ibdev);
	if (other_addr)
		printf("# the tree has another address than this process\n");
	expect(ibdev, "node_type", "1: CA");
	guid_str(attr.node_guid, want, sizeof(want));
	if (!other_addr)
		expect(ibdev, "node_guid", want);
	CHECK(ibv_get_device_guid(dev) == attr.node_guid);
	guid_str(attr.sys_image_guid, want, sizeof(want));
	if (!other_addr)
		expect(ibdev, "sys_image_guid", want);
	expect(ibdev, "fw_ver", attr.fw_ver);
	snprintf(want, sizeof(want), "%x", attr.hw_ver);
	expect(ibdev, "hw_rev", want);
	expect(dev->dev_path, "ibdev", dev->name);
	check_locality(ibdev);
	for (p = 1; p <= attr.phys_port_cnt; p++)
		check_port(ctx, ibdev, p);
	snprintf(want, sizeof(want), "ports/%u/state", attr.phys_port_cnt + 1);
	CHECK_MSG(rd(ibdev, want, path, sizeof(path)) < 0, "%s/%s exists", ibdev, want);
	/* the same files through stdio, at the path every tool uses */
	if (!strncmp(ibdev, "/sys/", 5) && !other_addr) {
		FILE *f;

		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/node_guid", dev->name);
		f = fopen(path, "re");
		if (CHECK_MSG(f != NULL, "%s: %s", path, strerror(errno))) {
			guid_str(attr.node_guid, want, sizeof(want));
			CHECK(fgets(path, sizeof(path), f) && !strncmp(path, want, strlen(want)) &&
			      path[strlen(want)] == '\n');
			fclose(f);
		}
	}
	if (!no_dev) {
		snprintf(path, sizeof(path), "/dev/infiniband/%s", dev->dev_name);
		if (CHECK_MSG(!stat(path, &st), "%s: %s", path, strerror(errno)))
			CHECK_MSG(S_ISCHR(st.st_mode) && !access(path, R_OK | W_OK),
				  "%s: not an accessible character device", path);
	}
out:
	ibv_close_device(ctx);
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	int i, n = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--any-addr"))
			any_addr = true;
		else if (!strcmp(argv[i], "--no-dev"))
			no_dev = true;
	}
	t_start("sysfs_check");
	list = ibv_get_device_list(&n);
	if (!CHECK(list && n > 0))
		return t_finish();
	for (i = 0; i < n; i++)
		check_dev(list[i]);
	ibv_free_device_list(list);
	return t_finish();
}
