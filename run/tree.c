/* SPDX-License-Identifier: MIT */
/*
 * tree.c - a device's sysfs files, in the formats of the kernel's
 * /sys/class/infiniband and /sys/class/infiniband_verbs, written from a
 * struct run_dev (so from the library's own queries).
 *
 * Under the class directory: <name>/node_type, node_guid, sys_image_guid,
 * fw_ver, hw_rev, hca_type, node_desc, device/{numa_node,local_cpus,
 * local_cpulist}, device/net/<ifname>/ifindex for each network interface
 * that carries one of the device's addresses (what rdma-core's tests
 * read to find a device's interface and IP address), and per port ports/<p>/{state,phys_state,rate,
 * link_layer,lid,sm_lid,sm_sl,lid_mask_count,cap_mask}, gids/<i> for
 * every index of the table (zeros where the entry is empty, as the
 * kernel shows them), gid_attrs/types/<i> and gid_attrs/ndevs/<i> for
 * the entries that exist (the kernel fails those reads on empty ones; a
 * missing file fails them too), pkeys/<i>.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define UVERBS_ABI_VERSION "6"

/* Contract: `fmt` into dirfd/<dir>/<name>; 0 or -errno. */
__attribute__((format(printf, 4, 5))) static int put(int dirfd, const char *dir, const char *name,
						     const char *fmt, ...)
{
	char path[512], text[RUN_CPUMAP_MAX + 64];
	va_list ap;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	return run_put(dirfd, path, text);
}

/* Contract: a GUID (network order) as the kernel prints it. */
static void guid_text(__be64 guid, char *out, size_t size)
{
	uint64_t g = be64toh(guid);

	snprintf(out, size, "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
}

/* Contract: a GID as the kernel prints it: eight groups of four digits. */
static void gid_text(const union ibv_gid *gid, char *out, size_t size)
{
	const uint8_t *b = gid->raw;

	snprintf(out, size,
		 "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0],
		 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
		 b[14], b[15]);
}

/* Contract: the sysfs "rate" text of a port: "100 Gb/sec (4X EDR)". */
static void rate_text(const struct ibv_port_attr *a, char *out, size_t size)
{
	static const struct {
		int speed;
		int tenths; /* Gb/s per lane, in tenths, as the kernel counts them */
		const char *name;
	} speeds[] = {
		{1, 25, ""},	    {2, 50, " DDR"},	 {4, 100, " QDR"},
		{8, 100, " FDR10"}, {16, 140, " FDR"},	 {32, 250, " EDR"},
		{64, 500, " HDR"},  {128, 1000, " NDR"}, {256, 2000, " XDR"},
	};
	static const struct {
		int width;
		int lanes;
	} widths[] = {{1, 1}, {2, 4}, {4, 8}, {8, 12}, {16, 2}};
	int tenths = 25, lanes = 1;
	const char *name = "";
	size_t i;

	for (i = 0; i < NELEMS(speeds); i++) {
		if (speeds[i].speed == a->active_speed) {
			tenths = speeds[i].tenths;
			name = speeds[i].name;
		}
	}
	for (i = 0; i < NELEMS(widths); i++)
		if (widths[i].width == a->active_width)
			lanes = widths[i].lanes;
	tenths *= lanes;
	snprintf(out, size, "%d%s Gb/sec (%dX%s)", tenths / 10, tenths % 10 ? ".5" : "", lanes,
		 name);
}

/* Contract: the "N: NAME" text of a port state. */
static const char *state_name(int s)
{
	static const char *const names[] = {"NOP",   "DOWN",   "INIT",
					    "ARMED", "ACTIVE", "ACTIVE_DEFER"};

	return s >= 0 && (size_t)s < NELEMS(names) ? names[s] : "UNKNOWN";
}

static const char *phys_state_name(int s)
{
	static const char *const names[] = {"<unknown>",
					    "Sleep",
					    "Polling",
					    "Disabled",
					    "PortConfigurationTraining",
					    "LinkUp",
					    "LinkErrorRecovery",
					    "Phy Test"};

	return s >= 0 && (size_t)s < NELEMS(names) ? names[s] : "<unknown>";
}

static const char *node_type_name(int t)
{
	switch (t) {
	case IBV_NODE_CA:
		return "CA";
	case IBV_NODE_SWITCH:
		return "switch";
	case IBV_NODE_ROUTER:
		return "router";
	case IBV_NODE_RNIC:
		return "RNIC";
	default:
		return "unknown";
	}
}

/* Contract: the files of port p (1-based) under <name>/ports/<p>; 0 or -errno. */
static int write_port(int fd, const struct run_dev *dev, int p)
{
	const struct run_port *port = &dev->ports[p - 1];
	const struct ibv_port_attr *a = &port->attr;
	char dir[256], sub[320], text[64];
	int i, ret = 0;

	snprintf(dir, sizeof(dir), "%s/ports/%d", dev->name, p);
	rate_text(a, text, sizeof(text));
	ret = ret ?: put(fd, dir, "state", "%d: %s\n", a->state, state_name(a->state));
	ret = ret   ?:
		      put(fd, dir, "phys_state", "%u: %s\n", a->phys_state,
			  phys_state_name(a->phys_state));
	ret = ret ?: put(fd, dir, "rate", "%s\n", text);
	ret = ret   ?:
		      put(fd, dir, "link_layer", "%s\n",
			  a->link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
	ret = ret ?: put(fd, dir, "lid", "0x%x\n", a->lid);
	ret = ret ?: put(fd, dir, "sm_lid", "0x%x\n", a->sm_lid);
	ret = ret ?: put(fd, dir, "sm_sl", "%u\n", a->sm_sl);
	ret = ret ?: put(fd, dir, "lid_mask_count", "%u\n", a->lmc);
	ret = ret ?: put(fd, dir, "cap_mask", "0x%08x\n", a->port_cap_flags);
	for (i = 0; i < port->ngids && !ret; i++) {
		const struct run_gid *g = &port->gids[i];
		union ibv_gid zero;
		char num[16];

		memset(&zero, 0, sizeof(zero));
		snprintf(num, sizeof(num), "%d", i);
		gid_text(g->valid ? &g->gid : &zero, text, sizeof(text));
		snprintf(sub, sizeof(sub), "%s/gids", dir);
		ret = put(fd, sub, num, "%s\n", text);
		if (ret || !g->valid)
			continue;
		snprintf(sub, sizeof(sub), "%s/gid_attrs/types", dir);
		ret = put(fd, sub, num, "%s\n",
			  g->type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1");
		snprintf(sub, sizeof(sub), "%s/gid_attrs/ndevs", dir);
		if (!ret && g->ndev[0])
			ret = put(fd, sub, num, "%s\n", g->ndev);
	}
	snprintf(sub, sizeof(sub), "%s/pkeys", dir);
	for (i = 0; i < port->npkeys && !ret; i++) {
		char num[16];

		snprintf(num, sizeof(num), "%d", i);
		ret = put(fd, sub, num, "0x%04x\n", port->pkeys[i]);
	}
	return ret;
}

/*
 * Contract: <name>/device/net/<ifname>/ifindex for each distinct
 * interface named by a GID entry of any port (the interface that carries
 * the address: lo for 127.0.0.N), as the kernel lists the net devices of
 * an RDMA device's parent; 0 or -errno. None when no entry names one.
 */
static int write_net(int dirfd, const struct run_dev *dev)
{
	char dir[IBV_SYSFS_NAME_MAX + IF_NAMESIZE + 32];
	int p, i, ret = 0;

	for (p = 0; p < dev->nports && !ret; p++) {
		const struct run_port *port = &dev->ports[p];

		for (i = 0; i < port->ngids && !ret; i++) {
			const char *ndev = port->gids[i].ndev;

			if (!port->gids[i].valid || !ndev[0])
				continue;
			snprintf(dir, sizeof(dir), "%s/device/net/%s", dev->name, ndev);
			ret = put(dirfd, dir, "ifindex", "%u\n", if_nametoindex(ndev));
		}
	}
	return ret;
}

/* Contract: see run.h; `dirfd` is the class directory (.../infiniband). */
int run_write_ibdev(int dirfd, const struct run_dev *dev, char *err, size_t errsz)
{
	char guid[32], sysguid[32], host[256], dir[256];
	int p, ret = 0;

	if (gethostname(host, sizeof(host) - 1))
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	guid_text(dev->attr.node_guid, guid, sizeof(guid));
	guid_text(dev->attr.sys_image_guid, sysguid, sizeof(sysguid));
	ret = ret   ?:
		      put(dirfd, dev->name, "node_type", "%d: %s\n", dev->node_type,
			  node_type_name(dev->node_type));
	ret = ret ?: put(dirfd, dev->name, "node_guid", "%s\n", guid);
	ret = ret ?: put(dirfd, dev->name, "sys_image_guid", "%s\n", sysguid);
	ret = ret ?: put(dirfd, dev->name, "fw_ver", "%s\n", dev->attr.fw_ver);
	ret = ret ?: put(dirfd, dev->name, "hw_rev", "%x\n", dev->attr.hw_ver);
	ret = ret ?: put(dirfd, dev->name, "hca_type", "softverbs\n");
	ret = ret ?: put(dirfd, dev->name, "node_desc", "%s %s\n", host, dev->name);
	snprintf(dir, sizeof(dir), "%s/device", dev->name);
	ret = ret ?: put(dirfd, dir, "numa_node", "%d\n", dev->numa_node);
	ret = ret ?: put(dirfd, dir, "local_cpus", "%s\n", dev->local_cpus);
	ret = ret ?: put(dirfd, dir, "local_cpulist", "%s\n", dev->local_cpulist);
	ret = ret ?: write_net(dirfd, dev);
	for (p = 1; p <= dev->nports && !ret; p++)
		ret = write_port(dirfd, dev, p);
	if (ret)
		snprintf(err, errsz, "cannot write the sysfs files of %s: %s", dev->name,
			 strerror(-ret));
	return ret;
}

/* Contract: see run.h; `dirfd` is .../infiniband_verbs. */
int run_write_verbs_dev(int dirfd, const struct run_dev *dev, char *err, size_t errsz)
{
	int ret;

	ret = put(dirfd, dev->dev_name, "ibdev", "%s\n", dev->name);
	ret = ret ?: put(dirfd, dev->dev_name, "abi_version", "%s\n", UVERBS_ABI_VERSION);
	if (ret)
		snprintf(err, errsz, "cannot write the sysfs files of %s: %s", dev->dev_name,
			 strerror(-ret));
	return ret;
}

/* Contract: see run.h. */
int run_write_verbs_class(int dirfd, char *err, size_t errsz)
{
	int ret = run_put(dirfd, "abi_version", UVERBS_ABI_VERSION "\n");

	if (ret)
		snprintf(err, errsz, "cannot write abi_version: %s", strerror(-ret));
	return ret;
}
