/* SPDX-License-Identifier: MIT */
/*
 * sv_devinfo - show the RDMA devices, their ports and GIDs.
 *
 * Uses only the public verbs API (and softverbs' header-only helpers), so
 * it runs on any libibverbs. Every value is printed as "label  value",
 * the values of a device starting in one column. A verb that fails is
 * reported on stderr with its errno, the rest is still printed, and the
 * exit status is then 1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <softverbs/softverbs.h>

#define PROG "sv_devinfo"
#define VALUE_COL 30 /* column where every value starts */
#define LINE_MAX_COLS 100

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

static bool verbose;
static int status; /* exit status: 1 once anything failed */

struct bit_name {
	int bit;
	const char *name;
};

/* ------------------------------------------------------------------ */
/* output helpers                                                     */

/* One "label value" line; `indent` spaces before the label. */
__attribute__((format(printf, 3, 4))) static void kv(int indent, const char *label, const char *fmt,
						     ...)
{
	int pad = VALUE_COL - indent - (int)strlen(label);
	va_list ap;

	printf("%*s%s%*s", indent, "", label, pad > 1 ? pad : 1, "");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* A verb failed: say which one, on what, and why. */
static void report(const char *verb, const char *what, int err)
{
	fprintf(stderr, PROG ": %s(%s) failed: %s (errno %d)\n", verb, what, strerror(err), err);
	status = 1;
}

/*
 * "0x... NAME NAME ..." for a bit mask, wrapped under the value column.
 * Bits without a name show as bitN.
 */
static void kv_flags(int indent, const char *label, uint64_t v, int hex_digits,
		     const struct bit_name *names, size_t n)
{
	char word[48];
	int col, bit;
	size_t i;

	col = printf("%*s%s", indent, "", label);
	col += printf("%*s", VALUE_COL - col > 1 ? VALUE_COL - col : 1, "");
	col += printf("0x%0*" PRIx64, hex_digits, v);
	for (bit = 0; bit < 64; bit++) {
		const char *name = NULL;

		if (!(v & (1ULL << bit)))
			continue;
		for (i = 0; i < n; i++)
			if (names[i].bit == bit)
				name = names[i].name;
		if (name)
			snprintf(word, sizeof(word), "%s", name);
		else
			snprintf(word, sizeof(word), "bit%d", bit);
		if (col + 1 + (int)strlen(word) > LINE_MAX_COLS) {
			printf("\n%*s", VALUE_COL + 2 + hex_digits, "");
			col = VALUE_COL + 2 + hex_digits;
		}
		col += printf(" %s", word);
	}
	putchar('\n');
}

#define KV_FLAGS(indent, label, v, digits, tab) kv_flags(indent, label, v, digits, tab, NELEMS(tab))

/* ------------------------------------------------------------------ */
/* names                                                              */

static const struct bit_name device_cap_names[] = {
	{0, "RESIZE_MAX_WR"},
	{1, "BAD_PKEY_CNTR"},
	{2, "BAD_QKEY_CNTR"},
	{3, "RAW_MULTI"},
	{4, "AUTO_PATH_MIG"},
	{5, "CHANGE_PHY_PORT"},
	{6, "UD_AV_PORT_ENFORCE"},
	{7, "CURR_QP_STATE_MOD"},
	{8, "SHUTDOWN_PORT"},
	{9, "INIT_TYPE"},
	{10, "PORT_ACTIVE_EVENT"},
	{11, "SYS_IMAGE_GUID"},
	{12, "RC_RNR_NAK_GEN"},
	{13, "SRQ_RESIZE"},
	{14, "N_NOTIFY_CQ"},
	{17, "MEM_WINDOW"},
	{18, "UD_IP_CSUM"},
	{20, "XRC"},
	{21, "MEM_MGT_EXTENSIONS"},
	{23, "MEM_WINDOW_TYPE_2A"},
	{24, "MEM_WINDOW_TYPE_2B"},
	{25, "RC_IP_CSUM"},
	{26, "RAW_IP_CSUM"},
	{29, "MANAGED_FLOW_STEERING"},
	/* only in device_cap_flags_ex */
	{34, "RAW_SCATTER_FCS"},
	{36, "PCI_WRITE_END_PADDING"},
	{38, "FLUSH_GLOBAL"},
	{39, "FLUSH_PERSISTENT"},
	{40, "ATOMIC_WRITE"},
	{41, "CC_DMA_BOUNCE"},
};

static const struct bit_name port_cap_names[] = {
	{1, "SM"},
	{2, "NOTICE_SUP"},
	{3, "TRAP_SUP"},
	{4, "OPT_IPD_SUP"},
	{5, "AUTO_MIGR_SUP"},
	{6, "SL_MAP_SUP"},
	{7, "MKEY_NVRAM"},
	{8, "PKEY_NVRAM"},
	{9, "LED_INFO_SUP"},
	{11, "SYS_IMAGE_GUID_SUP"},
	{12, "PKEY_SW_EXT_PORT_TRAP_SUP"},
	{14, "EXTENDED_SPEEDS_SUP"},
	{15, "CAP_MASK2_SUP"},
	{16, "CM_SUP"},
	{17, "SNMP_TUNNEL_SUP"},
	{18, "REINIT_SUP"},
	{19, "DEVICE_MGMT_SUP"},
	{20, "VENDOR_CLASS_SUP"},
	{21, "DR_NOTICE_SUP"},
	{22, "CAP_MASK_NOTICE_SUP"},
	{23, "BOOT_MGMT_SUP"},
	{24, "LINK_LATENCY_SUP"},
	{25, "CLIENT_REG_SUP"},
	{26, "IP_BASED_GIDS"},
};

static const struct bit_name port_cap2_names[] = {
	{0, "SET_NODE_DESC_SUP"},	    {1, "INFO_EXT_SUP"},	{2, "VIRT_SUP"},
	{3, "SWITCH_PORT_STATE_TABLE_SUP"}, {4, "LINK_WIDTH_2X_SUP"},	{5, "LINK_SPEED_HDR_SUP"},
	{10, "LINK_SPEED_NDR_SUP"},	    {12, "LINK_SPEED_XDR_SUP"},
};

static const struct bit_name odp_general_names[] = {
	{0, "ODP_SUPPORT"},
	{1, "ODP_SUPPORT_IMPLICIT"},
};

static const struct bit_name odp_transport_names[] = {
	{0, "SEND"},   {1, "RECV"},	{2, "WRITE"}, {3, "READ"},
	{4, "ATOMIC"}, {5, "SRQ_RECV"}, {6, "FLUSH"}, {7, "ATOMIC_WRITE"},
};

/* Masks of (1 << enum ibv_qp_type). */
static const struct bit_name qpt_names[] = {
	{IBV_QPT_RC, "RC"},
	{IBV_QPT_UC, "UC"},
	{IBV_QPT_UD, "UD"},
	{IBV_QPT_RAW_PACKET, "RAW_PACKET"},
	{IBV_QPT_XRC_SEND, "XRC_SEND"},
	{IBV_QPT_XRC_RECV, "XRC_RECV"},
};

static const struct bit_name raw_packet_names[] = {
	{0, "CVLAN_STRIPPING"},
	{1, "SCATTER_FCS"},
	{2, "IP_CSUM"},
	{3, "DELAY_DROP"},
};

static const struct bit_name rx_hash_names[] = {
	{0, "SRC_IPV4"},     {1, "DST_IPV4"},	  {2, "SRC_IPV6"},     {3, "DST_IPV6"},
	{4, "SRC_PORT_TCP"}, {5, "DST_PORT_TCP"}, {6, "SRC_PORT_UDP"}, {7, "DST_PORT_UDP"},
	{8, "IPSEC_SPI"},    {31, "INNER"},
};

static const struct bit_name pci_atomic_names[] = {
	{0, "4_BYTE"},
	{1, "8_BYTE"},
	{2, "16_BYTE"},
};

static const char *transport_name(enum ibv_transport_type t)
{
	switch (t) {
	case IBV_TRANSPORT_IB:
		return "InfiniBand";
	case IBV_TRANSPORT_IWARP:
		return "iWARP";
	case IBV_TRANSPORT_USNIC:
		return "usNIC";
	case IBV_TRANSPORT_USNIC_UDP:
		return "usNIC UDP";
	case IBV_TRANSPORT_UNSPECIFIED:
		return "unspecified";
	default:
		return "unknown";
	}
}

static const char *link_layer_name(uint8_t ll)
{
	switch (ll) {
	case IBV_LINK_LAYER_UNSPECIFIED:
		return "unspecified";
	case IBV_LINK_LAYER_INFINIBAND:
		return "InfiniBand";
	case IBV_LINK_LAYER_ETHERNET:
		return "Ethernet";
	default:
		return "unknown";
	}
}

static const char *atomic_cap_name(enum ibv_atomic_cap a)
{
	switch (a) {
	case IBV_ATOMIC_NONE:
		return "ATOMIC_NONE";
	case IBV_ATOMIC_HCA:
		return "ATOMIC_HCA";
	case IBV_ATOMIC_GLOB:
		return "ATOMIC_GLOB";
	default:
		return "unknown";
	}
}

static const char *gid_type_name(uint32_t t)
{
	switch (t) {
	case IBV_GID_TYPE_IB:
		return "IB";
	case IBV_GID_TYPE_ROCE_V1:
		return "RoCE v1";
	case IBV_GID_TYPE_ROCE_V2:
		return "RoCE v2";
	default:
		return "unknown";
	}
}

/* Physical port states of the InfiniBand PortInfo attribute. */
static const char *phys_state_name(uint8_t s)
{
	static const char *const names[] = {
		[1] = "sleep",	  [2] = "polling", [3] = "disabled",
		[4] = "training", [5] = "link up", [6] = "link error recovery",
		[7] = "phy test",
	};

	return s < NELEMS(names) && names[s] ? names[s] : "unknown";
}

static const char *width_name(uint8_t w)
{
	switch (w) {
	case 1:
		return "1X";
	case 2:
		return "4X";
	case 4:
		return "8X";
	case 8:
		return "12X";
	case 16:
		return "2X";
	default:
		return "unknown";
	}
}

/* Lane speed of active_speed (and active_speed_ex for the newest ones). */
static const char *speed_name(uint8_t s, uint32_t s_ex)
{
	switch (s_ex ? s_ex : s) {
	case 1:
		return "2.5 Gb/s (SDR)";
	case 2:
		return "5 Gb/s (DDR)";
	case 4:
		return "10 Gb/s (QDR)";
	case 8:
		return "10.3125 Gb/s (FDR10)";
	case 16:
		return "14.0625 Gb/s (FDR)";
	case 32:
		return "25.78125 Gb/s (EDR)";
	case 64:
		return "53.125 Gb/s (HDR)";
	case 128:
		return "106.25 Gb/s (NDR)";
	case 256:
		return "212.5 Gb/s (XDR)";
	default:
		return "unknown";
	}
}

/* ------------------------------------------------------------------ */
/* formatting of identifiers                                          */

static void fmt_guid(char *buf, size_t size, __be64 guid)
{
	uint64_t g = be64toh(guid);

	snprintf(buf, size, "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
}

static void fmt_gid(char *buf, size_t size, const union ibv_gid *gid)
{
	const uint8_t *r = gid->raw;
	size_t off = 0;
	int i;

	for (i = 0; i < 16 && off < size; i += 2)
		off += (size_t)snprintf(buf + off, size - off, "%s%02x%02x", i ? ":" : "", r[i],
					r[i + 1]);
}

/* "ipv4 a.b.c.d" for an IPv4-mapped GID, "ipv6 ..." for another non-zero one. */
static void fmt_gid_addr(char *buf, size_t size, const union ibv_gid *gid)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t zero[16];
	char a[INET6_ADDRSTRLEN];

	buf[0] = '\0';
	if (!memcmp(gid->raw, mapped, sizeof(mapped))) {
		if (inet_ntop(AF_INET, &gid->raw[12], a, sizeof(a)))
			snprintf(buf, size, "ipv4 %s", a);
	} else if (memcmp(gid->raw, zero, sizeof(zero))) {
		if (inet_ntop(AF_INET6, gid->raw, a, sizeof(a)))
			snprintf(buf, size, "ipv6 %s", a);
	}
}

static void fmt_mtu(char *buf, size_t size, enum ibv_mtu mtu)
{
	int bytes = softverbs_mtu_to_bytes(mtu);

	if (bytes > 0)
		snprintf(buf, size, "%d", bytes);
	else
		snprintf(buf, size, "invalid (%d)", (int)mtu);
}

/* ------------------------------------------------------------------ */
/* device and port                                                    */

static void print_limits(const struct ibv_device_attr_ex *ax)
{
	const struct ibv_device_attr *a = &ax->orig_attr;
	char guid[32];

	fmt_guid(guid, sizeof(guid), a->sys_image_guid);
	kv(2, "sys_image_guid", "%s", guid);
	kv(2, "max_mr_size", "0x%" PRIx64, a->max_mr_size);
	kv(2, "page_size_cap", "0x%" PRIx64, a->page_size_cap);
	kv(2, "max_qp", "%d", a->max_qp);
	kv(2, "max_qp_wr", "%d", a->max_qp_wr);
	kv(2, "max_sge", "%d", a->max_sge);
	kv(2, "max_sge_rd", "%d", a->max_sge_rd);
	kv(2, "max_cq", "%d", a->max_cq);
	kv(2, "max_cqe", "%d", a->max_cqe);
	kv(2, "max_mr", "%d", a->max_mr);
	kv(2, "max_pd", "%d", a->max_pd);
	kv(2, "max_qp_rd_atom", "%d", a->max_qp_rd_atom);
	kv(2, "max_ee_rd_atom", "%d", a->max_ee_rd_atom);
	kv(2, "max_res_rd_atom", "%d", a->max_res_rd_atom);
	kv(2, "max_qp_init_rd_atom", "%d", a->max_qp_init_rd_atom);
	kv(2, "max_ee_init_rd_atom", "%d", a->max_ee_init_rd_atom);
	kv(2, "atomic_cap", "%s (%d)", atomic_cap_name(a->atomic_cap), (int)a->atomic_cap);
	kv(2, "max_ee", "%d", a->max_ee);
	kv(2, "max_rdd", "%d", a->max_rdd);
	kv(2, "max_mw", "%d", a->max_mw);
	kv(2, "max_raw_ipv6_qp", "%d", a->max_raw_ipv6_qp);
	kv(2, "max_raw_ethy_qp", "%d", a->max_raw_ethy_qp);
	kv(2, "max_mcast_grp", "%d", a->max_mcast_grp);
	kv(2, "max_mcast_qp_attach", "%d", a->max_mcast_qp_attach);
	kv(2, "max_total_mcast_qp_attach", "%d", a->max_total_mcast_qp_attach);
	kv(2, "max_ah", "%d", a->max_ah);
	kv(2, "max_fmr", "%d", a->max_fmr);
	kv(2, "max_map_per_fmr", "%d", a->max_map_per_fmr);
	kv(2, "max_srq", "%d", a->max_srq);
	kv(2, "max_srq_wr", "%d", a->max_srq_wr);
	kv(2, "max_srq_sge", "%d", a->max_srq_sge);
	kv(2, "max_pkeys", "%u", a->max_pkeys);
	kv(2, "local_ca_ack_delay", "%u", a->local_ca_ack_delay);
	KV_FLAGS(2, "device_cap_flags", a->device_cap_flags, 8, device_cap_names);
	KV_FLAGS(2, "device_cap_flags_ex", ax->device_cap_flags_ex, 16, device_cap_names);
	KV_FLAGS(2, "odp_general_caps", ax->odp_caps.general_caps, 8, odp_general_names);
	KV_FLAGS(2, "rc_odp_caps", ax->odp_caps.per_transport_caps.rc_odp_caps, 8,
		 odp_transport_names);
	KV_FLAGS(2, "uc_odp_caps", ax->odp_caps.per_transport_caps.uc_odp_caps, 8,
		 odp_transport_names);
	KV_FLAGS(2, "ud_odp_caps", ax->odp_caps.per_transport_caps.ud_odp_caps, 8,
		 odp_transport_names);
	KV_FLAGS(2, "xrc_odp_caps", ax->xrc_odp_caps, 8, odp_transport_names);
	kv(2, "completion_timestamp_mask", "0x%016" PRIx64, ax->completion_timestamp_mask);
	kv(2, "hca_core_clock", "%" PRIu64 " kHz", ax->hca_core_clock);
	kv(2, "max_tso", "%u", ax->tso_caps.max_tso);
	KV_FLAGS(2, "tso_qp_types", ax->tso_caps.supported_qpts, 8, qpt_names);
	KV_FLAGS(2, "rss_qp_types", ax->rss_caps.supported_qpts, 8, qpt_names);
	kv(2, "max_rwq_ind_tables", "%u", ax->rss_caps.max_rwq_indirection_tables);
	kv(2, "max_rwq_ind_table_size", "%u", ax->rss_caps.max_rwq_indirection_table_size);
	KV_FLAGS(2, "rx_hash_fields", ax->rss_caps.rx_hash_fields_mask, 8, rx_hash_names);
	kv(2, "rx_hash_function", "0x%02x", ax->rss_caps.rx_hash_function);
	kv(2, "max_wq_type_rq", "%u", ax->max_wq_type_rq);
	kv(2, "qp_rate_limit", "%u..%u kbit/s", ax->packet_pacing_caps.qp_rate_limit_min,
	   ax->packet_pacing_caps.qp_rate_limit_max);
	KV_FLAGS(2, "rate_limit_qp_types", ax->packet_pacing_caps.supported_qpts, 8, qpt_names);
	KV_FLAGS(2, "raw_packet_caps", ax->raw_packet_caps, 8, raw_packet_names);
	kv(2, "tm_max_num_tags", "%u", ax->tm_caps.max_num_tags);
	kv(2, "tm_max_ops", "%u", ax->tm_caps.max_ops);
	kv(2, "tm_max_sge", "%u", ax->tm_caps.max_sge);
	kv(2, "tm_max_rndv_hdr_size", "%u", ax->tm_caps.max_rndv_hdr_size);
	kv(2, "tm_flags", "0x%08x%s", ax->tm_caps.flags,
	   ax->tm_caps.flags & IBV_TM_CAP_RC ? " RC" : "");
	kv(2, "max_cq_moderation_count", "%u", ax->cq_mod_caps.max_cq_count);
	kv(2, "max_cq_moderation_period", "%u us", ax->cq_mod_caps.max_cq_period);
	kv(2, "max_dm_size", "%" PRIu64, ax->max_dm_size);
	KV_FLAGS(2, "pci_atomic_fetch_add", ax->pci_atomic_caps.fetch_add, 4, pci_atomic_names);
	KV_FLAGS(2, "pci_atomic_swap", ax->pci_atomic_caps.swap, 4, pci_atomic_names);
	KV_FLAGS(2, "pci_atomic_compare_swap", ax->pci_atomic_caps.compare_swap, 4,
		 pci_atomic_names);
	kv(2, "phys_port_cnt_ex", "%u", ax->phys_port_cnt_ex);
}

static void print_gids(struct ibv_context *ctx, const char *dev, uint8_t port, int len)
{
	char label[32], gid[48], addr[64], ifname[IF_NAMESIZE], what[96];
	struct ibv_gid_entry e;
	int i, ret;

	for (i = 0; i < len; i++) {
		snprintf(label, sizeof(label), "gid[%d]", i);
		memset(&e, 0, sizeof(e));
		ret = ibv_query_gid_ex(ctx, port, (uint32_t)i, &e, 0);
		if (ret == ENODATA) {
			kv(4, label, "(empty)");
			continue;
		}
		if (ret) {
			snprintf(what, sizeof(what), "%s, port %u, index %d", dev, port, i);
			report("ibv_query_gid_ex", what, ret);
			continue;
		}
		fmt_gid(gid, sizeof(gid), &e.gid);
		fmt_gid_addr(addr, sizeof(addr), &e.gid);
		ifname[0] = '\0';
		if (e.ndev_ifindex && !if_indextoname(e.ndev_ifindex, ifname))
			snprintf(ifname, sizeof(ifname), "#%u", e.ndev_ifindex);
		kv(4, label, "%s  %s%s%s%s%s", gid, gid_type_name(e.gid_type), addr[0] ? "  " : "",
		   addr, ifname[0] ? "  dev " : "", ifname);
	}
}

static void print_pkeys(struct ibv_context *ctx, const char *dev, uint8_t port, int len)
{
	char label[32], what[96];
	__be16 pkey;
	int i;

	for (i = 0; i < len; i++) {
		snprintf(label, sizeof(label), "pkey[%d]", i);
		if (ibv_query_pkey(ctx, port, i, &pkey)) {
			snprintf(what, sizeof(what), "%s, port %u, index %d", dev, port, i);
			report("ibv_query_pkey", what, errno);
			continue;
		}
		kv(4, label, "0x%04x", be16toh(pkey));
	}
}

static void print_port(struct ibv_context *ctx, const char *dev, uint8_t port)
{
	struct ibv_port_attr pa;
	char what[96], mtu[32];
	int ret;

	memset(&pa, 0, sizeof(pa));
	ret = ibv_query_port(ctx, port, &pa);
	if (ret) {
		snprintf(what, sizeof(what), "%s, port %u", dev, port);
		report("ibv_query_port", what, ret);
		return;
	}
	printf("\n  port %u\n", port);
	kv(4, "state", "%s (%d)", ibv_port_state_str(pa.state), (int)pa.state);
	fmt_mtu(mtu, sizeof(mtu), pa.max_mtu);
	kv(4, "max_mtu", "%s (%d)", mtu, (int)pa.max_mtu);
	fmt_mtu(mtu, sizeof(mtu), pa.active_mtu);
	kv(4, "active_mtu", "%s (%d)", mtu, (int)pa.active_mtu);
	kv(4, "link_layer", "%s", link_layer_name(pa.link_layer));
	KV_FLAGS(4, "port_cap_flags", pa.port_cap_flags, 8, port_cap_names);
	if (verbose) {
		KV_FLAGS(4, "port_cap_flags2", pa.port_cap_flags2, 4, port_cap2_names);
		kv(4, "max_msg_sz", "0x%x", pa.max_msg_sz);
		kv(4, "bad_pkey_cntr", "%u", pa.bad_pkey_cntr);
		kv(4, "qkey_viol_cntr", "%u", pa.qkey_viol_cntr);
		kv(4, "lid", "%u", pa.lid);
		kv(4, "sm_lid", "%u", pa.sm_lid);
		kv(4, "lmc", "%u", pa.lmc);
		kv(4, "sm_sl", "%u", pa.sm_sl);
		kv(4, "max_vl_num", "%u", pa.max_vl_num);
		kv(4, "subnet_timeout", "%u", pa.subnet_timeout);
		kv(4, "init_type_reply", "%u", pa.init_type_reply);
		kv(4, "active_width", "%s (%u)", width_name(pa.active_width), pa.active_width);
		kv(4, "active_speed", "%s (%u)", speed_name(pa.active_speed, pa.active_speed_ex),
		   pa.active_speed_ex ? pa.active_speed_ex : pa.active_speed);
		kv(4, "phys_state", "%s (%u)", phys_state_name(pa.phys_state), pa.phys_state);
		kv(4, "flags", "0x%02x", pa.flags);
		kv(4, "pkey_tbl_len", "%u", pa.pkey_tbl_len);
	}
	kv(4, "gid_tbl_len", "%d", pa.gid_tbl_len);
	print_gids(ctx, dev, port, pa.gid_tbl_len);
	/* Without -v only P_Key 0, the default one; a port with no table has none. */
	print_pkeys(ctx, dev, port, verbose ? pa.pkey_tbl_len : pa.pkey_tbl_len > 0);
}

static void print_device(struct ibv_device *device)
{
	const char *name = ibv_get_device_name(device);
	struct ibv_device_attr_ex ax;
	struct ibv_context *ctx;
	char guid[32];
	int ret;
	uint8_t p;

	if (!name)
		name = "(unnamed)";
	printf("%s\n", name);
	ctx = ibv_open_device(device);
	if (!ctx) {
		report("ibv_open_device", name, errno);
		return;
	}
	memset(&ax, 0, sizeof(ax));
	ret = ibv_query_device_ex(ctx, NULL, &ax);
	if (ret) {
		report("ibv_query_device_ex", name, ret);
		goto out;
	}
	fmt_guid(guid, sizeof(guid), ax.orig_attr.node_guid);
	kv(2, "node_guid", "%s", guid);
	kv(2, "transport", "%s (%d)", transport_name(device->transport_type),
	   (int)device->transport_type);
	kv(2, "node_type", "%s (%d)", ibv_node_type_str(device->node_type), (int)device->node_type);
	kv(2, "vendor_id", "0x%04x", ax.orig_attr.vendor_id);
	kv(2, "vendor_part_id", "%u", ax.orig_attr.vendor_part_id);
	kv(2, "hw_ver", "0x%x", ax.orig_attr.hw_ver);
	kv(2, "fw_ver", "%s", ax.orig_attr.fw_ver[0] ? ax.orig_attr.fw_ver : "(none)");
	kv(2, "phys_port_cnt", "%u", ax.orig_attr.phys_port_cnt);
	if (verbose) {
		kv(2, "device_index", "%d", ibv_get_device_index(device));
		kv(2, "kernel_device", "%s", device->dev_name);
		print_limits(&ax);
	}
	for (p = 1; p <= ax.orig_attr.phys_port_cnt && p != 0; p++)
		print_port(ctx, name, p);
out:
	ret = ibv_close_device(ctx);
	if (ret)
		report("ibv_close_device", name, ret < 0 ? errno : ret);
}

/* ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " [-v] [-d NAME]\n"
		   "       " PROG " -l\n"
		   "Show the RDMA devices, their ports, GIDs and P_Keys.\n"
		   "  -d NAME  only the device NAME\n"
		   "  -l       list the device names and nothing else\n"
		   "  -v       also every device limit and capability, and more port detail\n"
		   "  -h       this help\n"
		   "Exit status: 0 if all went well, 1 if no device was found or a verb\n"
		   "failed, 2 for a bad command line.\n");
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	const char *want = NULL;
	bool list_only = false;
	int opt, n = 0, i, shown = 0;

	while ((opt = getopt(argc, argv, "d:lvh")) != -1) {
		switch (opt) {
		case 'd':
			want = optarg;
			break;
		case 'l':
			list_only = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		report("ibv_get_device_list", "", errno ? errno : EIO);
		return 1;
	}
	if (n == 0) {
		fprintf(stderr, PROG ": no RDMA device found\n");
		ibv_free_device_list(list);
		return 1;
	}

	for (i = 0; i < n; i++) {
		const char *name = ibv_get_device_name(list[i]);

		if (want && (!name || strcmp(name, want)))
			continue;
		if (list_only) {
			printf("%s\n", name ? name : "(unnamed)");
		} else {
			if (shown)
				putchar('\n');
			print_device(list[i]);
		}
		shown++;
	}
	if (want && !shown) {
		fprintf(stderr, PROG ": no device named '%s'; there are:", want);
		for (i = 0; i < n; i++)
			fprintf(stderr, " %s", ibv_get_device_name(list[i]));
		fputc('\n', stderr);
		status = 1;
	}
	ibv_free_device_list(list);
	fflush(stdout);
	if (ferror(stdout)) {
		fprintf(stderr, PROG ": error writing the output\n");
		status = 1;
	}
	return status;
}
