/* SPDX-License-Identifier: MIT */
/*
 * gsi.h - the software device's general services endpoint (QP1), for
 * softverbs' own librdmacm.
 *
 * Not part of the verbs API: exported from libibverbs.so.1 in the private
 * node SOFTVERBS_PRIVATE_1, which only softverbs' librdmacm imports. An
 * application that never opens the endpoint sees no difference: packets
 * for QP1 are counted and dropped, as before.
 *
 * One endpoint per device (and process). While it is open, the progress
 * thread queues every valid GSI packet for it: a RoCE v2 UD SEND Only to
 * destination QP 1 with Q_Key 0x80010000, the default P_Key and a payload
 * of exactly 256 bytes (one MAD). Anything else sent to QP 1 is counted
 * and dropped. The queue holds SV_GSI_QUEUE_MAX MADs; more are dropped
 * (the CM retransmits). Sending builds the same packet with source QP 1
 * and the endpoint's own incrementing PSN.
 *
 * Addresses are GIDs: IPv4 peers are IPv4-mapped (::ffff:a.b.c.d), IPv6
 * peers their address; a device reaches peers of its own family.
 * Every function returns 0 or -errno and is safe from any thread.
 */
#ifndef SV_SW_GSI_H
#define SV_SW_GSI_H

#include <stdint.h>

#include <infiniband/verbs.h>

enum {
	SV_GSI_MAD_LEN = 256,
	SV_GSI_QUEUE_MAX = 512,
	SV_GSI_QKEY = 0x80010000u,
	SV_GSI_QPN = 1,
};

struct softverbs_gsi;

/* Where a MAD came from (recv) or goes to (send). */
struct softverbs_gsi_addr {
	uint8_t peer_gid[16]; /* recv: IP source; send: IP destination */
	uint8_t local_gid[16]; /* recv: the local address it was sent to */
	uint16_t peer_udp_port; /* recv: UDP source port (host order) */
	uint16_t pkey; /* recv: BTH P_Key */
	uint32_t src_qp; /* recv: DETH source QP */
	uint8_t tclass; /* send: IP TOS (recv: 0, not reported) */
	uint8_t hop_limit; /* send: IPv6 hop limit (IPv4: the socket's TTL); recv: 64 */
	uint32_t flow_label; /* send: 20 bits, IPv6 only */
};

/*
 * Open the endpoint of ctx's device: -EBUSY if it is already open,
 * -ENODEV if ctx is not a softverbs context with a running device.
 */
int softverbs_gsi_open(struct ibv_context *ctx, struct softverbs_gsi **gsi);
/* Close it; queued MADs are dropped. */
void softverbs_gsi_close(struct softverbs_gsi *gsi);
/* An eventfd (non-blocking) readable while MADs are queued. */
int softverbs_gsi_fd(struct softverbs_gsi *gsi);
/* Take the oldest MAD: 0, or -EAGAIN when none is queued. */
int softverbs_gsi_recv(struct softverbs_gsi *gsi, struct softverbs_gsi_addr *src,
		       uint8_t mad[SV_GSI_MAD_LEN]);
/*
 * Send one MAD to QP 1 of dst->peer_gid: 0, -EAFNOSUPPORT (a peer of the
 * other address family) or the send's -errno (-EAGAIN: the socket stayed full).
 */
int softverbs_gsi_send(struct softverbs_gsi *gsi, const struct softverbs_gsi_addr *dst,
		       const uint8_t mad[SV_GSI_MAD_LEN]);

#endif
