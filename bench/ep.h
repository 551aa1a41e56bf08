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
	struct ibv_buf *ibuf; /* MR_ALLOC_BUF: buf's ibv_alloc_buf() handle */
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

/* The first device opened, its port and GID queried, a PD and a CQ of `cqe`; dies on failure. */
void ep_open(struct ep *e, int cqe);
/* An RC QP on e's PD and CQ, moved to INIT; its inline limit in *max_inline (may be NULL). */
struct ibv_qp *ep_rc_qp(const struct ep *e, uint32_t send_wr, uint32_t recv_wr,
			uint32_t *max_inline);
/* INIT -> RTR -> RTS towards `peer` (its QPN and PSN), sending from `sq_psn`; dies on failure. */
void ep_rc_connect(const struct ep *e, struct ibv_qp *qp, uint32_t sq_psn,
		   const struct ep_addr *peer);
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
