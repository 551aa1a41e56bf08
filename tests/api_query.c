/* SPDX-License-Identifier: MIT */
/*
 * api_query: every device, port, GID and P_Key query.
 *
 * Device attributes satisfy pyverbs' test_device asserts and the values
 * the software device documents; the extended query (inline, through
 * verbs_context) agrees with the legacy one. The port is an active RoCE
 * (Ethernet) port whose only GID is ::ffff:127.0.0.N, RoCE v2. The
 * exported ibv_query_port writes exactly the 48-byte compat struct. Bad
 * ports, indexes, flags and sizes fail with the documented convention.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <endian.h>
#include <net/if.h>
#include <unistd.h>

#define COMPAT_PORT_ATTR_SIZE 48

/* The private ibv_query_gid_type() (IBVERBS_PRIVATE_34) and its enum. */
enum t_gid_type_sysfs {
	T_GID_TYPE_SYSFS_IB_ROCE_V1,
	T_GID_TYPE_SYSFS_ROCE_V2,
};
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       enum t_gid_type_sysfs *type);

static struct ibv_context *ctx;
static uint64_t page;

static void case_device(void)
{
	struct ibv_device_attr a;
	__be64 guid = ibv_get_device_guid(ctx->device);

	t_case("ibv_query_device");
	memset(&a, 0, sizeof(a));
	if (!CHECK(ibv_query_device(ctx, &a) == 0))
		return;
	CHECK(a.fw_ver[0] != '\0');
	CHECK(a.vendor_id != 0);
	CHECK_EQ_INT(a.vendor_id, 0xFFFFFF);
	CHECK_EQ_INT(a.vendor_part_id, 0);
	CHECK(a.max_mr_size > page);
	CHECK(a.page_size_cap >= page);
	CHECK(a.page_size_cap & page); /* the system page size itself */
	CHECK(!(a.page_size_cap & (page - 1))); /* nothing smaller */
	CHECK(a.max_qp > 0 && a.max_qp_wr > 0 && a.max_sge > 0 && a.max_sge_rd > 0);
	CHECK(a.max_cq > 0 && a.max_cqe > 0 && a.max_mr > 0 && a.max_pd > 0);
	CHECK(a.max_qp_rd_atom >= 1 && a.max_qp_init_rd_atom >= 1 && a.max_res_rd_atom >= 1);
	CHECK(a.max_srq > 0 && a.max_srq_wr > 0 && a.max_srq_sge > 0 && a.max_ah > 0);
	CHECK(a.node_guid != 0);
	CHECK(a.sys_image_guid != 0);
	CHECK(a.node_guid == guid);
	CHECK(a.sys_image_guid == guid);
	CHECK(a.max_pkeys > 0);
	CHECK_EQ_INT(a.phys_port_cnt, 1);
	CHECK_EQ_INT(a.atomic_cap, IBV_ATOMIC_HCA);
	CHECK(a.device_cap_flags & IBV_DEVICE_RC_RNR_NAK_GEN);
	CHECK(a.device_cap_flags & IBV_DEVICE_SYS_IMAGE_GUID);
	/* memory windows of type 1 and 2B (as rxe); no FMRs; multicast: rxe's (api_mcast) */
	CHECK(a.max_mw > 0);
	CHECK(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	CHECK(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	CHECK_EQ_INT(a.max_mcast_grp, 8192);
	CHECK_EQ_INT(a.max_fmr, 0);
}

static void case_device_ex(void)
{
	struct ibv_query_device_ex_input in = {0};
	struct ibv_device_attr_ex ex;
	struct ibv_device_attr a;

	t_case("ibv_query_device_ex");
	/* the inline wrapper must reach the device through verbs_context */
	CHECK(verbs_get_ctx_op(ctx, query_device_ex) != NULL);
	memset(&ex, 0xa5, sizeof(ex));
	if (!CHECK_RET(ibv_query_device_ex(ctx, NULL, &ex), 0))
		return;
	if (CHECK(ibv_query_device(ctx, &a) == 0))
		CHECK(!memcmp(&a, &ex.orig_attr, sizeof(a)));
	CHECK_EQ_INT(ex.phys_port_cnt_ex, ex.orig_attr.phys_port_cnt);
	CHECK_EQ_INT(ex.comp_mask, 0);
	CHECK((ex.device_cap_flags_ex & 0xffffffffULL) == ex.orig_attr.device_cap_flags);
	CHECK(!(ex.device_cap_flags_ex & IBV_DEVICE_CC_DMA_BOUNCE));
	/* completion timestamps count CLOCK_MONOTONIC ns: a 64-bit 1 GHz clock */
	CHECK(ex.completion_timestamp_mask == UINT64_MAX);
	CHECK_EQ_INT(ex.hca_core_clock, 1000000);
	CHECK_EQ_INT(ex.odp_caps.general_caps, IBV_ODP_SUPPORT); /* explicit ODP (api_odp) */
	CHECK_EQ_INT(ex.max_dm_size, 256 << 10); /* emulated device memory (api_dm) */

	CHECK_RET(ibv_query_device_ex(ctx, &in, &ex), 0);
	in.comp_mask = 1;
	CHECK_RET(ibv_query_device_ex(ctx, &in, &ex), EINVAL);
}

/* Checks the port attributes the software device promises. */
static void check_port_attr(const struct ibv_port_attr *p)
{
	CHECK_EQ_INT(p->state, IBV_PORT_ACTIVE);
	CHECK_EQ_INT(p->link_layer, IBV_LINK_LAYER_ETHERNET);
	CHECK_EQ_INT(p->max_mtu, IBV_MTU_4096);
	CHECK_EQ_INT(p->active_mtu, IBV_MTU_4096); /* a loopback address */
	CHECK_EQ_INT(p->gid_tbl_len, 1);
	CHECK(p->port_cap_flags & IBV_PORT_IP_BASED_GIDS);
	CHECK(p->max_msg_sz >= (1U << 31));
	CHECK_EQ_INT(p->pkey_tbl_len, 1);
	CHECK_EQ_INT(p->lid, 0);
	CHECK_EQ_INT(p->sm_lid, 0);
	CHECK_EQ_INT(p->phys_state, 5); /* LinkUp */
	CHECK_EQ_INT(p->active_width, 2); /* 4X */
	CHECK(p->active_speed != 0);
	CHECK_EQ_INT(p->max_vl_num, 1);
}

static void case_port(void)
{
	struct ibv_port_attr p;
	unsigned char buf[COMPAT_PORT_ATTR_SIZE + 4];
	size_t i;
	int tail_ok = 1;

	t_case("ibv_query_port");
	CHECK(verbs_get_ctx_op(ctx, query_port) != NULL);
	memset(&p, 0xa5, sizeof(p));
	if (CHECK_RET(ibv_query_port(ctx, 1, &p), 0))
		check_port_attr(&p);
	CHECK_RET(ibv_query_port(ctx, 0, &p), EINVAL);
	CHECK_RET(ibv_query_port(ctx, 2, &p), EINVAL);
	CHECK_RET(ibv_query_port(ctx, 255, &p), EINVAL);

	/* the exported symbol, as old binaries call it: 48 bytes, no more */
	memset(buf, 0xa5, sizeof(buf));
	if (CHECK_RET((ibv_query_port)(ctx, 1, (struct _compat_ibv_port_attr *)(void *)buf), 0)) {
		for (i = COMPAT_PORT_ATTR_SIZE; i < sizeof(buf); i++)
			tail_ok &= buf[i] == 0xa5;
		CHECK_MSG(tail_ok, "the exported ibv_query_port wrote past 48 bytes");
		CHECK(!memcmp(buf, &p, COMPAT_PORT_ATTR_SIZE));
	}
	CHECK_RET((ibv_query_port)(ctx, 2, (struct _compat_ibv_port_attr *)(void *)buf), EINVAL);
}

/* Checks that gid is ::ffff:127.0.0.N with N in 1..254; returns N or 0. */
static int check_loopback_gid(const union ibv_gid *gid)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	int ok = CHECK(!memcmp(gid->raw, prefix, sizeof(prefix)));

	ok &= CHECK(gid->raw[12] == 127 && gid->raw[13] == 0 && gid->raw[14] == 0);
	ok &= CHECK(gid->raw[15] >= 1 && gid->raw[15] <= 254);
	return ok ? gid->raw[15] : 0;
}

static void case_gid(void)
{
	union ibv_gid gid, g2;
	struct ibv_gid_entry e;
	unsigned char big[sizeof(e) + 8];
	size_t i;
	int tail_ok = 1;

	t_case("ibv_query_gid and _ibv_query_gid_ex");
	memset(&gid, 0xa5, sizeof(gid));
	if (!CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0))
		return;
	check_loopback_gid(&gid);

	errno = 0;
	CHECK(ibv_query_gid(ctx, 1, 1, &g2) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(ibv_query_gid(ctx, 1, -1, &g2) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(ibv_query_gid(ctx, 2, 0, &g2) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(ibv_query_gid(ctx, 0, 0, &g2) == -1 && errno == EINVAL);

	memset(&e, 0xa5, sizeof(e));
	if (CHECK_RET(ibv_query_gid_ex(ctx, 1, 0, &e, 0), 0)) {
		CHECK(!memcmp(&e.gid, &gid, sizeof(gid)));
		CHECK_EQ_INT(e.gid_index, 0);
		CHECK_EQ_INT(e.port_num, 1);
		CHECK_EQ_INT(e.gid_type, IBV_GID_TYPE_ROCE_V2);
		/* 127/8 belongs to the loopback interface */
		CHECK_EQ_INT(e.ndev_ifindex, if_nametoindex("lo"));
	}
	CHECK_RET(ibv_query_gid_ex(ctx, 1, 0, &e, 1), EINVAL);
	CHECK_RET(ibv_query_gid_ex(ctx, 1, 1, &e, 0), EINVAL);
	CHECK_RET(ibv_query_gid_ex(ctx, 2, 0, &e, 0), EINVAL);
	/* 257 must not be truncated to port 1 */
	CHECK_RET(ibv_query_gid_ex(ctx, 257, 0, &e, 0), EINVAL);
	CHECK_RET(_ibv_query_gid_ex(ctx, 1, 0, &e, 0, sizeof(e) - 1), EINVAL);
	CHECK_RET(_ibv_query_gid_ex(ctx, 1, 0, &e, 0, 0), EINVAL);
	/* a newer caller's bigger struct: our part is filled, the rest left alone */
	memset(big, 0xa5, sizeof(big));
	if (CHECK_RET(_ibv_query_gid_ex(ctx, 1, 0, (struct ibv_gid_entry *)(void *)big, 0,
					sizeof(big)),
		      0)) {
		CHECK(!memcmp(big, &gid, sizeof(gid)));
		for (i = sizeof(e); i < sizeof(big); i++)
			tail_ok &= big[i] == 0xa5;
		CHECK(tail_ok);
	}
}

static void case_gid_table(void)
{
	struct ibv_gid_entry t[4], one;
	unsigned char wide[2][sizeof(struct ibv_gid_entry) + 16];
	ssize_t n;

	t_case("ibv_query_gid_table");
	if (!CHECK_RET(ibv_query_gid_ex(ctx, 1, 0, &one, 0), 0))
		return;
	memset(t, 0xa5, sizeof(t));
	n = ibv_query_gid_table(ctx, t, 4, 0);
	if (CHECK_EQ_INT(n, 1))
		CHECK(!memcmp(&t[0], &one, sizeof(one)));
	n = ibv_query_gid_table(ctx, t, 1, 0);
	CHECK_EQ_INT(n, 1);
	CHECK_EQ_INT(ibv_query_gid_table(ctx, t, 0, 0), -EINVAL);
	CHECK_EQ_INT(ibv_query_gid_table(ctx, t, 4, 1), -EINVAL);
	CHECK_EQ_INT(_ibv_query_gid_table(ctx, t, 4, 0, sizeof(t[0]) - 4), -EINVAL);
	/* a bigger entry size is the stride of a newer caller's array */
	memset(wide, 0xa5, sizeof(wide));
	n = _ibv_query_gid_table(ctx, (struct ibv_gid_entry *)(void *)wide, 2, 0, sizeof(wide[0]));
	if (CHECK_EQ_INT(n, 1)) {
		CHECK(!memcmp(wide[0], &one, sizeof(one)));
		CHECK(wide[0][sizeof(one)] == 0xa5 && wide[1][0] == 0xa5);
	}
}

static void case_gid_type(void)
{
	enum t_gid_type_sysfs type = T_GID_TYPE_SYSFS_IB_ROCE_V1;

	t_case("ibv_query_gid_type (private)");
	if (CHECK(ibv_query_gid_type(ctx, 1, 0, &type) == 0))
		CHECK_EQ_INT(type, T_GID_TYPE_SYSFS_ROCE_V2);
	errno = 0;
	CHECK(ibv_query_gid_type(ctx, 1, 1, &type) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(ibv_query_gid_type(ctx, 3, 0, &type) == -1 && errno == EINVAL);
}

static void case_pkey(void)
{
	__be16 pkey = 0;

	t_case("ibv_query_pkey and ibv_get_pkey_index");
	if (CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0))
		CHECK(pkey == htobe16(0xffff));
	errno = 0;
	CHECK(ibv_query_pkey(ctx, 1, 1, &pkey) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(ibv_query_pkey(ctx, 1, -1, &pkey) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(ibv_query_pkey(ctx, 2, 0, &pkey) == -1 && errno == EINVAL);

	CHECK_EQ_INT(ibv_get_pkey_index(ctx, 1, htobe16(0xffff)), 0);
	errno = 0;
	CHECK(ibv_get_pkey_index(ctx, 1, htobe16(0x1234)) == -1 && errno == ENOENT);
	errno = 0;
	CHECK(ibv_get_pkey_index(ctx, 2, htobe16(0xffff)) == -1 && errno == EINVAL);
}

int main(void)
{
	unsetenv("SOFTVERBS_ADDR");
	unsetenv("SOFTVERBS_MTU");
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	t_start("api_query");
	page = (uint64_t)sysconf(_SC_PAGESIZE);
	t_open_first(&ctx);
	case_device();
	case_device_ex();
	case_port();
	case_gid();
	case_gid_table();
	case_gid_type();
	case_pkey();
	ibv_close_device(ctx);
	return t_finish();
}
