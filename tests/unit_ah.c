/* SPDX-License-Identifier: MIT */
/*
 * unit_ah: the address vector an AH resolves to, white-box.
 *
 * sw_av_from_attr() / the AH's av: the peer's IPv4 address from the
 * IPv4-mapped dgid, the device's configured UDP port (4791, or
 * SOFTVERBS_UDP_PORT), and the GRH fields as given.
 */
#include "harness.h"

#include <arpa/inet.h>

#include "sw/queue.h"

static void fill_attr(struct ibv_ah_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->is_global = 1;
	a->grh.dgid.raw[10] = 0xff;
	a->grh.dgid.raw[11] = 0xff;
	a->grh.dgid.raw[12] = 10;
	a->grh.dgid.raw[13] = 1;
	a->grh.dgid.raw[14] = 2;
	a->grh.dgid.raw[15] = 3;
	a->grh.flow_label = 0x54321;
	a->grh.hop_limit = 17;
	a->grh.traffic_class = 0x48;
	a->sl = 5;
	a->port_num = 1;
}

/* Creates an AH on a new context and checks its av; udp_port is the expected port. */
static void check_av(uint16_t udp_port)
{
	struct ibv_context *c = t_open_dev();
	struct ibv_ah_attr a;
	struct ibv_pd *pd;
	struct ibv_ah *ah;
	struct sw_av av;

	if (!CHECK_MSG(c != NULL, "open: %s", t_errname(errno)))
		return;
	pd = ibv_alloc_pd(c);
	if (!CHECK(pd != NULL))
		goto out;
	fill_attr(&a);
	ah = ibv_create_ah(pd, &a);
	if (CHECK(ah != NULL)) {
		const struct sw_av *v = &sw_ah(ah)->av;

		CHECK_EQ_INT(v->dst.v4.sin_family, AF_INET);
		CHECK_EQ_INT(ntohs(v->dst.v4.sin_port), udp_port);
		CHECK_EQ_INT(ntohl(v->dst.v4.sin_addr.s_addr), 0x0a010203);
		CHECK(!memcmp(v->dgid.raw, a.grh.dgid.raw, 16));
		CHECK_EQ_INT(v->flow_label, 0x54321);
		CHECK_EQ_INT(v->hop_limit, 17);
		CHECK_EQ_INT(v->traffic_class, 0x48);
		CHECK_EQ_INT(v->sl, 5);
		CHECK_EQ_INT(v->sgid_index, 0);
		CHECK(!memcmp(&sw_ah(ah)->attr, &a, sizeof(a)));
		CHECK(sw_ah(ah)->pd == sw_pd(pd));
		CHECK_RET(ibv_destroy_ah(ah), 0);
	}
	/* the same resolution without an AH */
	memset(&av, 0, sizeof(av));
	if (CHECK_EQ_INT(sw_av_from_attr(c, &a, &av), 0))
		CHECK_EQ_INT(ntohs(av.dst.v4.sin_port), udp_port);
	a.is_global = 0;
	CHECK_EQ_INT(sw_av_from_attr(c, &a, &av), -EINVAL);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
out:
	ibv_close_device(c);
}

int main(void)
{
	unsetenv("SOFTVERBS_UDP_PORT");
	t_start("unit_ah");
	t_case("default UDP port");
	check_av(4791);
	t_case("SOFTVERBS_UDP_PORT");
	setenv("SOFTVERBS_UDP_PORT", "4799", 1);
	check_av(4799);
	unsetenv("SOFTVERBS_UDP_PORT");
	return t_finish();
}
