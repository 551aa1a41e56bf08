/* SPDX-License-Identifier: MIT */
/*
 * rdmacm_util.h - the start of a librdmacm test that runs in one process
 * on the device's own address.
 */
#ifndef SV_TESTS_RDMACM_UTIL_H
#define SV_TESTS_RDMACM_UTIL_H

#include <netinet/in.h>
#include <poll.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "harness.h"

/*
 * t_start(name), with librdmacm's devices opened first (the library
 * keeps them open: before the harness counts descriptors), and *me the
 * address of the first device (its IPv4-mapped GID 0). Skips the whole
 * test without a device.
 */
static inline void t_rdmacm_start(const char *name, struct sockaddr_in *me)
{
	struct ibv_context **devs;
	union ibv_gid gid;
	int n;

	devs = rdma_get_devices(&n);
	t_start(name);
	if (!devs || !n)
		t_skip_all("no softverbs device");
	CHECK_EQ_INT(ibv_query_gid(devs[0], 1, 0, &gid), 0);
	memset(me, 0, sizeof(*me));
	me->sin_family = AF_INET;
	memcpy(&me->sin_addr, gid.raw + 12, 4);
	rdma_free_devices(devs);
}

/* The next event of `ch` within `ms`, checked to be `type`; NULL if none came. */
static inline struct rdma_cm_event *t_cm_expect(struct rdma_event_channel *ch,
						enum rdma_cm_event_type type, int ms)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev = NULL;

	if (poll(&p, 1, ms) != 1) {
		CHECK_MSG(0, "no event within %d ms (want %s)", ms, rdma_event_str(type));
		return NULL;
	}
	if (rdma_get_cm_event(ch, &ev)) {
		CHECK_MSG(0, "rdma_get_cm_event: %s", t_errname(errno));
		return NULL;
	}
	CHECK_MSG(ev->event == type, "event %s (status %d), want %s", rdma_event_str(ev->event),
		  ev->status, rdma_event_str(type));
	return ev;
}

/* A new RC id on `ch` with its address and route resolved to `port` at `me`. */
static inline struct rdma_cm_id *t_cm_resolved(struct rdma_event_channel *ch,
					       const struct sockaddr_in *me, uint16_t port)
{
	struct sockaddr_in dst = *me;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id = NULL;

	dst.sin_port = htons(port);
	CHECK_EQ_INT(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ_INT(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0);
	if ((ev = t_cm_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 10000)))
		rdma_ack_cm_event(ev);
	CHECK_EQ_INT(rdma_resolve_route(id, 2000), 0);
	if ((ev = t_cm_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 10000)))
		rdma_ack_cm_event(ev);
	return id;
}

#endif
