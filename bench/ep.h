/* SPDX-License-Identifier: MIT */
/*
 * ep.h - a verbs endpoint of sv_bench's child processes: the first
 * device, a PD, one CQ, one RC QP and one registered buffer, connected
 * to the peer process over the control socket (ep.c).
 */
#ifndef SV_BENCH_EP_H
#define SV_BENCH_EP_H

#include "bench.h"

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_dmah *dmah; /* MR_DMAH_*: the MR's DMA handle */
	uint8_t *buf;
	size_t len;
	uint32_t max_inline;
	uint8_t max_rd;
	enum ibv_mtu mtu;
	union ibv_gid gid;
};

/* What the peer needs, sent as is over the socketpair (same binary). */
struct ep_addr {
	uint32_t qpn, psn, rkey, pad;
	uint64_t addr;
	union ibv_gid gid;
};

/* Set up with a `len`-byte buffer registered as `mr`, swap addresses, connect. */
void ep_setup(struct ep *e, int sock, size_t len, uint32_t depth, enum mr_kind mr,
	      struct ep_addr *peer);
void ep_destroy(struct ep *e);
/* One work request with one SGE (RDMA ops and SEND; atomics add 1 / swap 0->0). */
int post_one(struct ep *e, enum ibv_wr_opcode op, uint8_t *local, uint32_t len, uint64_t raddr,
	     uint32_t rkey, unsigned int flags);
int post_recv_one(struct ep *e, uint32_t len);
/* Poll up to `max`; die on a failed completion. Returns the number polled. */
int reap(struct ep *e, int max);

#endif
