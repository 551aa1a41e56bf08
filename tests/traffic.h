/* SPDX-License-Identifier: MIT */
/*
 * traffic.h - helpers for data-path tests: endpoints, connection, polling.
 *
 * An endpoint is a context, PD, CQ, QP and one registered buffer. Two
 * endpoints connect in one process (t_connect) or across processes by
 * exchanging struct t_addr over a socket (t_addr_of / t_connect_to).
 * Everything uses the public verbs API only. Include after harness.h.
 */
#ifndef SV_TESTS_TRAFFIC_H
#define SV_TESTS_TRAFFIC_H

#include <arpa/inet.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define SV_ARRAY_N(a) (sizeof(a) / sizeof((a)[0]))

struct t_ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct ibv_buf *ibuf; /* buf came from ibv_alloc_buf (t_ep_use_buf) */
	size_t len;
	enum ibv_qp_type type;
	union ibv_gid gid;
};

/* What a peer needs to reach an endpoint. */
struct t_addr {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	union ibv_gid gid;
};

/* The GID index the endpoints use: SV_TEST_GID_INDEX, default 0 (netns_two_hosts.sh). */
static inline int t_gid_index(void)
{
	const char *v = getenv("SV_TEST_GID_INDEX");

	return v ? atoi(v) : 0;
}

/*
 * Set up an endpoint on `ctx` (NULL: open the first device) with a
 * `len`-byte buffer registered with `access`, a CQ of `depth` entries
 * (its events to `ch`, or none) and a QP of `type` in INIT. 0 or -1 (a
 * failed CHECK says why).
 */
static inline int t_ep_init_ch(struct t_ep *e, struct ibv_context *ctx, enum ibv_qp_type type,
			       size_t len, int access, int depth, struct ibv_comp_channel *ch)
{
	struct ibv_qp_init_attr ia = {0};
	struct ibv_qp_attr a = {0};
	int mask;

	memset(e, 0, sizeof(*e));
	e->type = type;
	e->ctx = ctx ? ctx : t_open_dev();
	if (!CHECK(e->ctx))
		return -1;
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, depth * 2, NULL, ch, 0);
	e->len = len;
	e->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (!CHECK(e->pd && e->cq && e->buf))
		return -1;
	memset(e->buf, 0, len);
	e->mr = ibv_reg_mr(e->pd, e->buf, len, access);
	if (!CHECK(e->mr))
		return -1;
	ia.send_cq = e->cq;
	ia.recv_cq = e->cq;
	ia.qp_type = type;
	ia.cap.max_send_wr = (uint32_t)depth;
	ia.cap.max_recv_wr = (uint32_t)depth;
	ia.cap.max_send_sge = 4;
	ia.cap.max_recv_sge = 4;
	ia.cap.max_inline_data = 64;
	e->qp = ibv_create_qp(e->pd, &ia);
	if (!CHECK(e->qp))
		return -1;
	CHECK(ibv_query_gid(e->ctx, 1, t_gid_index(), &e->gid) == 0);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (type == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags =
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return CHECK(ibv_modify_qp(e->qp, &a, mask) == 0) ? 0 : -1;
}

/* t_ep_init_ch() without a completion channel. */
static inline int t_ep_init(struct t_ep *e, struct ibv_context *ctx, enum ibv_qp_type type,
			    size_t len, int access, int depth)
{
	return t_ep_init_ch(e, ctx, type, len, access, depth, NULL);
}

static inline struct t_addr t_addr_of(const struct t_ep *e, uint32_t psn)
{
	struct t_addr a;

	memset(&a, 0, sizeof(a)); /* padding too: it crosses a socket */
	a.qpn = e->qp->qp_num;
	a.psn = psn;
	a.rkey = e->mr->rkey;
	a.addr = (uintptr_t)e->buf;
	a.gid = e->gid;
	return a;
}

static inline struct ibv_ah_attr t_ah_attr(const union ibv_gid *gid)
{
	struct ibv_ah_attr ah = {0};

	ah.is_global = 1;
	ah.grh.dgid = *gid;
	ah.grh.sgid_index = (uint8_t)t_gid_index();
	ah.grh.hop_limit = 64;
	ah.port_num = 1;
	return ah;
}

/* RTR/RTS settings t_connect_to() uses; tests may change them first. */
static uint8_t t_timeout = 14, t_retry_cnt = 7, t_rnr_retry = 7, t_min_rnr_timer = 1;

/* Move an RC or UC endpoint to RTS towards `peer` (or a UD one to RTS). */
static inline int t_connect_to(struct t_ep *e, const struct t_addr *peer, uint32_t my_psn,
			       enum ibv_mtu mtu)
{
	struct ibv_qp_attr a = {0};

	a.qp_state = IBV_QPS_RTR;
	if (e->type == IBV_QPT_RC) {
		a.path_mtu = mtu;
		a.dest_qp_num = peer->qpn;
		a.rq_psn = peer->psn;
		a.max_dest_rd_atomic = 16;
		a.min_rnr_timer = t_min_rnr_timer;
		a.ah_attr = t_ah_attr(&peer->gid);
		if (!CHECK(ibv_modify_qp(e->qp, &a,
					 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
						 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
						 IBV_QP_MAX_DEST_RD_ATOMIC |
						 IBV_QP_MIN_RNR_TIMER) == 0))
			return -1;
	} else if (e->type == IBV_QPT_UC) {
		a.path_mtu = mtu;
		a.dest_qp_num = peer->qpn;
		a.rq_psn = peer->psn;
		a.ah_attr = t_ah_attr(&peer->gid);
		if (!CHECK(ibv_modify_qp(e->qp, &a,
					 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
						 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN) == 0))
			return -1;
	} else if (!CHECK(ibv_modify_qp(e->qp, &a, IBV_QP_STATE) == 0)) {
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = my_psn;
	if (e->type == IBV_QPT_RC) {
		a.timeout = t_timeout;
		a.retry_cnt = t_retry_cnt;
		a.rnr_retry = t_rnr_retry;
		a.max_rd_atomic = 16;
		return CHECK(ibv_modify_qp(e->qp, &a,
					   IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
						   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						   IBV_QP_MAX_QP_RD_ATOMIC) == 0) ?
			       0 :
			       -1;
	}
	return CHECK(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0) ? 0 : -1;
}

/* Connect two endpoints of this process to each other. */
static inline int t_connect(struct t_ep *a, struct t_ep *b, enum ibv_mtu mtu)
{
	struct t_addr aa = t_addr_of(a, 100), ba = t_addr_of(b, 0xfffff0); /* b wraps soon */

	if (t_connect_to(a, &ba, 100, mtu))
		return -1;
	return t_connect_to(b, &aa, 0xfffff0, mtu);
}

/*
 * Give endpoint `e` (set up by t_ep_init) a zeroed buffer of the same
 * length from ibv_alloc_buf(), registered with ibv_reg_buf_mr() and
 * `access`, in place of its own. 0 or -1 (a failed CHECK says why).
 */
static inline int t_ep_use_buf(struct t_ep *e, int access)
{
	void *p;

	if (!CHECK(ibv_dereg_mr(e->mr) == 0))
		return -1;
	free(e->buf);
	e->mr = NULL;
	p = ibv_alloc_buf(e->pd, e->len, &e->ibuf);
	e->buf = p;
	if (!CHECK(p))
		return -1;
	memset(e->buf, 0, e->len);
	e->mr = ibv_reg_buf_mr(e->pd, e->ibuf, e->buf, e->len, access);
	return CHECK(e->mr) ? 0 : -1;
}

static inline void t_ep_destroy(struct t_ep *e, bool close_ctx)
{
	if (e->qp)
		CHECK(ibv_destroy_qp(e->qp) == 0);
	if (e->mr)
		CHECK(ibv_dereg_mr(e->mr) == 0);
	if (e->ibuf) {
		ibv_free_buf(e->ibuf); /* while its PD lives */
		e->buf = NULL;
	}
	if (e->cq)
		CHECK(ibv_destroy_cq(e->cq) == 0);
	if (e->pd)
		CHECK(ibv_dealloc_pd(e->pd) == 0);
	if (close_ctx && e->ctx)
		ibv_close_device(e->ctx);
	free(e->buf);
	memset(e, 0, sizeof(*e));
}

static inline uint64_t t_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Poll `cq` until `n` completions arrived or `timeout_ms` passed. Returns
 * the number received (stored in wc[]).
 */
static inline int t_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n, int timeout_ms)
{
	uint64_t end = t_ms() + (uint64_t)timeout_ms;
	int got = 0;

	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r < 0)
			return got;
		got += r;
		if (!r) {
			if (t_ms() > end)
				break;
			usleep(50);
		}
	}
	return got;
}

/*
 * Spin on `cq` (ibv_poll_cq yields when empty, never sleeping) for one
 * completion until t_ms() passes `deadline_ms`: 0 if it came and
 * succeeded, -1 otherwise.
 */
static inline int t_spin_one(struct ibv_cq *cq, uint64_t deadline_ms)
{
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		if (t_ms() > deadline_ms)
			return -1;
	return n == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

/* Post one work request with one SGE into the endpoint's own buffer. */
static inline int t_post(struct t_ep *e, enum ibv_wr_opcode op, uint64_t wr_id, size_t off,
			 uint32_t len, uint64_t raddr, uint32_t rkey, int flags)
{
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf + off, .length = len, .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {0}, *bad = NULL;

	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = op;
	wr.send_flags = (unsigned int)flags;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

static inline int t_post_recv(struct t_ep *e, uint64_t wr_id, size_t off, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf + off, .length = len, .lkey = e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad = NULL;

	return ibv_post_recv(e->qp, &wr, &bad);
}

/* Fill with a pattern that depends on the position and `seed`. */
static inline void t_fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 8)) ^ seed);
}

/*
 * Generic QP moves, for tests that build their own objects (not t_ep):
 * RESET->INIT with `access` (RC) or the Q_Key 0x11111111 (UD).
 */
static inline int t_qp_init(struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr a = {0};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = (unsigned int)access;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return CHECK(ibv_modify_qp(qp, &a, mask) == 0) ? 0 : -1;
}

/*
 * INIT->RTR->RTS towards QPN `dqpn` at `dgid` (RC), or just RTR->RTS
 * (UD), with the settings t_connect_to() uses.
 */
static inline int t_qp_rts(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *dgid,
			   uint32_t rq_psn, uint32_t sq_psn, enum ibv_mtu mtu)
{
	struct t_ep e;
	struct t_addr peer;

	memset(&e, 0, sizeof(e));
	memset(&peer, 0, sizeof(peer));
	e.qp = qp;
	e.type = qp->qp_type;
	peer.qpn = dqpn;
	peer.psn = rq_psn;
	if (dgid)
		peer.gid = *dgid;
	return t_connect_to(&e, &peer, sq_psn, mtu);
}

/* Move exactly `n` bytes over a socket or pipe (out: write, else read). 0 or -1. */
static inline int t_xfer(int fd, void *p, size_t n, bool out)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = out ? write(fd, (char *)p + done, n - done) :
				  read(fd, (char *)p + done, n - done);

		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

#endif
