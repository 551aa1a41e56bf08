/* SPDX-License-Identifier: MIT */
/*
 * api_ah: address handles through the public API.
 *
 * ibv_create_ah / ibv_destroy_ah on a RoCE v2 port: is_global required,
 * an IPv4-mapped dgid, sgid_index below the GID table length and port 1
 * (EINVAL otherwise); the PD stays referenced while the AH exists (a
 * parent domain does not). ibv_init_ah_from_wc from hand-built receive
 * completions: an IPv4 header in the last 20 bytes of the GRH area, an
 * IPv6-style GRH, no GRH, a destination that is not ours and a header
 * that is neither; ibv_create_ah_from_wc; max_ah.
 */
/* test: timeout=120 */
#include "harness.h"

#include <arpa/inet.h>
#include <stdlib.h>

static struct ibv_context *ctx;
static struct ibv_device_attr dev_attr;
static struct ibv_pd *pd;
static union ibv_gid local_gid;

static void set_v4mapped(union ibv_gid *gid, uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	gid->raw[12] = a;
	gid->raw[13] = b;
	gid->raw[14] = c;
	gid->raw[15] = d;
}

static void good_attr(struct ibv_ah_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->is_global = 1;
	set_v4mapped(&a->grh.dgid, 127, 0, 0, 9);
	a->grh.sgid_index = 0;
	a->grh.hop_limit = 64;
	a->grh.traffic_class = 0x20;
	a->grh.flow_label = 0x12345;
	a->sl = 3;
	a->port_num = 1;
}

static void case_create(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_ah_attr a;
	struct ibv_pd *parent;
	struct ibv_ah *ah, *ah2;

	t_case("ibv_create_ah / ibv_destroy_ah and the PD reference");
	good_attr(&a);
	ah = ibv_create_ah(pd, &a);
	if (CHECK_MSG(ah != NULL, "create: %s", t_errname(errno))) {
		CHECK(ah->context == ctx);
		CHECK(ah->pd == pd);
		ah2 = ibv_create_ah(pd, &a);
		if (CHECK(ah2 != NULL)) {
			CHECK(ah2 != ah && ah2->handle != ah->handle);
			CHECK_RET(ibv_destroy_ah(ah2), 0);
		}
		CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
		CHECK_RET(ibv_destroy_ah(ah), 0);
	}
	/* the loopback GID itself, and the local GID */
	a.grh.dgid = local_gid;
	ah = ibv_create_ah(pd, &a);
	if (CHECK(ah != NULL))
		CHECK_RET(ibv_destroy_ah(ah), 0);

	/* on a parent domain: the reference is on its protection domain */
	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	parent = ibv_alloc_parent_domain(ctx, &pa);
	if (CHECK(parent != NULL)) {
		ah = ibv_create_ah(parent, &a);
		if (CHECK(ah != NULL)) {
			CHECK(ah->pd == parent);
			CHECK_RET(ibv_dealloc_pd(parent), 0);
			parent = NULL;
			CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
			CHECK_RET(ibv_destroy_ah(ah), 0);
		}
		if (parent)
			ibv_dealloc_pd(parent);
	}
}

static void case_einval(void)
{
	struct ibv_ah_attr a;
	struct ibv_pd *p;

	t_case("EINVAL rules of a RoCE v2 port");
	p = ibv_alloc_pd(ctx);
	if (!CHECK(p != NULL))
		return;
	good_attr(&a);
	a.is_global = 0;
	CHECK_ERRNO_PTR(ibv_create_ah(p, &a), EINVAL);
	good_attr(&a);
	memset(&a.grh.dgid, 0, sizeof(a.grh.dgid));
	a.grh.dgid.raw[0] = 0xfe;
	a.grh.dgid.raw[1] = 0x80;
	a.grh.dgid.raw[15] = 1;
	CHECK_ERRNO_PTR(ibv_create_ah(p, &a), EINVAL);
	memset(&a.grh.dgid, 0, sizeof(a.grh.dgid));
	CHECK_ERRNO_PTR(ibv_create_ah(p, &a), EINVAL);
	good_attr(&a);
	a.grh.dgid.raw[9] = 1; /* ::1:ffff:a.b.c.d is not IPv4-mapped */
	CHECK_ERRNO_PTR(ibv_create_ah(p, &a), EINVAL);
	good_attr(&a);
	a.grh.sgid_index = 1;
	CHECK_ERRNO_PTR(ibv_create_ah(p, &a), EINVAL);
	a.grh.sgid_index = 255;
	CHECK_ERRNO_PTR(ibv_create_ah(p, &a), EINVAL);
	good_attr(&a);
	a.port_num = 0;
	CHECK_ERRNO_PTR(ibv_create_ah(p, &a), EINVAL);
	a.port_num = 2;
	CHECK_ERRNO_PTR(ibv_create_ah(p, &a), EINVAL);
	/* none of the failures kept a reference */
	CHECK_RET(ibv_dealloc_pd(p), 0);
}

/* A UD receive's GRH area holding an IPv4 header from src to dst. */
static void ipv4_grh(uint8_t *buf, const uint8_t *src, const uint8_t *dst, uint8_t tos)
{
	uint8_t *ip = buf + 20;

	memset(buf, 0, 40);
	ip[0] = 0x45;
	ip[1] = tos;
	ip[2] = 0;
	ip[3] = 0x40; /* total length 64 */
	ip[8] = 64; /* TTL */
	ip[9] = 17; /* UDP */
	memcpy(ip + 12, src, 4);
	memcpy(ip + 16, dst, 4);
}

static void ud_wc(struct ibv_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	wc->status = IBV_WC_SUCCESS;
	wc->opcode = IBV_WC_RECV;
	wc->wc_flags = IBV_WC_GRH;
	wc->src_qp = 0x123;
	wc->slid = 0;
	wc->sl = 2;
	wc->dlid_path_bits = 0;
}

static void case_from_wc(void)
{
	static const uint8_t peer[4] = {192, 0, 2, 7};
	static const uint8_t other[4] = {198, 51, 100, 1};
	union {
		struct ibv_grh grh;
		uint8_t raw[40];
	} g;
	union ibv_gid want;
	struct ibv_ah_attr a;
	struct ibv_wc wc;
	struct ibv_ah *ah;
	uint32_t vtf;

	t_case("ibv_init_ah_from_wc and ibv_create_ah_from_wc");
	/* RoCE v2 over IPv4 */
	ipv4_grh(g.raw, peer, &local_gid.raw[12], 0x28);
	ud_wc(&wc);
	memset(&a, 0xa5, sizeof(a));
	if (CHECK_EQ_INT(ibv_init_ah_from_wc(ctx, 1, &wc, &g.grh, &a), 0)) {
		set_v4mapped(&want, 192, 0, 2, 7);
		CHECK_EQ_INT(a.is_global, 1);
		CHECK(!memcmp(a.grh.dgid.raw, want.raw, 16));
		CHECK_EQ_INT(a.grh.sgid_index, 0);
		CHECK_EQ_INT(a.grh.hop_limit, 0xff);
		CHECK_EQ_INT(a.grh.traffic_class, 0x28);
		CHECK_EQ_INT(a.grh.flow_label, 0);
		CHECK_EQ_INT(a.port_num, 1);
		CHECK_EQ_INT(a.sl, 2);
		CHECK_EQ_INT(a.dlid, 0);
		CHECK_EQ_INT(a.src_path_bits, 0);
		CHECK_EQ_INT(a.static_rate, 0);
	}
	ah = ibv_create_ah_from_wc(pd, &wc, &g.grh, 1);
	if (CHECK_MSG(ah != NULL, "create_ah_from_wc: %s", t_errname(errno)))
		CHECK_RET(ibv_destroy_ah(ah), 0);

	/* a packet not addressed to us: no local GID */
	ipv4_grh(g.raw, peer, other, 0);
	errno = 0;
	CHECK_EQ_INT(ibv_init_ah_from_wc(ctx, 1, &wc, &g.grh, &a), -1);
	CHECK_EQ_INT(errno, EINVAL);
	CHECK_ERRNO_PTR(ibv_create_ah_from_wc(pd, &wc, &g.grh, 1), EINVAL);

	/* neither IPv4 nor IPv6 */
	ipv4_grh(g.raw, peer, &local_gid.raw[12], 0);
	g.raw[20] = 0x46; /* IPv4 with options: not what RoCE v2 sends */
	errno = 0;
	CHECK_EQ_INT(ibv_init_ah_from_wc(ctx, 1, &wc, &g.grh, &a), -1);
	CHECK_EQ_INT(errno, EINVAL);
	memset(g.raw, 0, sizeof(g.raw));
	CHECK_EQ_INT(ibv_init_ah_from_wc(ctx, 1, &wc, &g.grh, &a), -1);

	/* a GRH proper (IPv6 header layout) */
	memset(g.raw, 0, sizeof(g.raw));
	vtf = (6u << 28) | (0x12u << 20) | 0xabcdeu;
	g.grh.version_tclass_flow = htonl(vtf);
	g.grh.hop_limit = 7;
	set_v4mapped(&g.grh.sgid, 192, 0, 2, 8);
	g.grh.dgid = local_gid;
	memset(&a, 0xa5, sizeof(a));
	if (CHECK_EQ_INT(ibv_init_ah_from_wc(ctx, 1, &wc, &g.grh, &a), 0)) {
		set_v4mapped(&want, 192, 0, 2, 8);
		CHECK_EQ_INT(a.is_global, 1);
		CHECK(!memcmp(a.grh.dgid.raw, want.raw, 16));
		CHECK_EQ_INT(a.grh.flow_label, 0xabcde);
		CHECK_EQ_INT(a.grh.traffic_class, 0x12);
		CHECK_EQ_INT(a.grh.hop_limit, 0xff);
		CHECK_EQ_INT(a.grh.sgid_index, 0);
	}
	ah = ibv_create_ah_from_wc(pd, &wc, &g.grh, 1);
	if (CHECK(ah != NULL))
		CHECK_RET(ibv_destroy_ah(ah), 0);

	/* no GRH: a local (non-global) attribute, which this port cannot use */
	wc.wc_flags = 0;
	memset(&a, 0xa5, sizeof(a));
	if (CHECK_EQ_INT(ibv_init_ah_from_wc(ctx, 1, &wc, NULL, &a), 0)) {
		CHECK_EQ_INT(a.is_global, 0);
		CHECK_EQ_INT(a.sl, 2);
		CHECK_EQ_INT(a.port_num, 1);
		CHECK_EQ_INT(a.grh.hop_limit, 0);
	}
	CHECK_ERRNO_PTR(ibv_create_ah_from_wc(pd, &wc, NULL, 1), EINVAL);

	/* a port that does not exist */
	wc.wc_flags = IBV_WC_GRH;
	ipv4_grh(g.raw, peer, &local_gid.raw[12], 0);
	errno = 0;
	CHECK_EQ_INT(ibv_init_ah_from_wc(ctx, 2, &wc, &g.grh, &a), -1);
	CHECK_EQ_INT(errno, EINVAL);
}

static void case_max_ah(void)
{
	struct ibv_ah_attr a;
	struct ibv_ah **ahs;
	int i, n = 0;

	t_case("max_ah");
	ahs = calloc((size_t)dev_attr.max_ah + 1, sizeof(*ahs));
	if (!CHECK(ahs != NULL))
		return;
	good_attr(&a);
	for (i = 0; i < dev_attr.max_ah; i++) {
		ahs[i] = ibv_create_ah(pd, &a);
		if (!ahs[i])
			break;
		n++;
	}
	CHECK_MSG(n == dev_attr.max_ah, "created %d of max_ah %d: %s", n, dev_attr.max_ah,
		  t_errname(errno));
	if (n == dev_attr.max_ah)
		CHECK_ERRNO_PTR(ibv_create_ah(pd, &a), ENOMEM);
	for (i = 0; i < n; i++)
		ibv_destroy_ah(ahs[i]);
	free(ahs);
}

int main(void)
{
	t_start("api_ah");
	t_open_first(&ctx);
	if (ibv_query_device(ctx, &dev_attr) || ibv_query_gid(ctx, 1, 0, &local_gid))
		t_skip_all("cannot query the device");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		t_skip_all("ibv_alloc_pd failed");
	case_create();
	case_einval();
	case_from_wc();
	case_max_ah();
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	ibv_close_device(ctx);
	return t_finish();
}
