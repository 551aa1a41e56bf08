/* SPDX-License-Identifier: MIT */
/*
 * hostile.h - the hostile peer of the unit_hostile_* tests (white-box,
 * linked with sv_internal). Include harness.h and qp_util.h first.
 *
 * The peer is a plain UDP socket bound to its own 127.0.0.M on the
 * device's RoCE port. It builds RoCE v2 packets itself (the wire
 * format's builder and ICRC), sends them at the live software device,
 * and reads the device's answers (ACK/NAK, READ responses), checking
 * their ICRC too. Victim QPs are real softverbs QPs whose remote is the
 * peer's GID and QPN H_PEER_QPN.
 *
 * Memory the peer targets lives in arenas: a registered range with
 * unregistered bytes on both sides (compared with a shadow copy after
 * every case) and PROT_NONE guard pages beyond (any access crashes).
 *
 * An honest pair of RC QPs on the same device moves verified data on a
 * thread of its own for the whole test.
 */
#ifndef SV_TESTS_HOSTILE_H
#define SV_TESTS_HOSTILE_H

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sw/transport/transport_priv.h"

enum {
	H_PEER_QPN = 0x00beef,
	H_ACK = SW_AETH_ACK_NO_CREDIT, /* an ACK's syndrome: credits invalid */
	H_MTU = 1024, /* the victims' path MTU */
	H_SLACK = 64, /* unregistered bytes on each side of an arena's MR */
};

struct h_arena {
	uint8_t *map, *rw, *buf; /* whole mapping, the RW pages, the registered range */
	size_t map_len, rw_len, len;
	uint8_t *shadow; /* what rw must hold */
	struct ibv_mr *mr;
};

struct h_env {
	struct q_env e;
	struct sw_engine *eng;
	int fd; /* the peer's socket */
	struct sockaddr_in me, dev; /* its address, the device's */
	union ibv_gid gid; /* its GID */
	struct sw_icrc_ctx ic_out, ic_in;
	uint8_t rx[SW_PKT_MAX + 64];
};

/* ---- counters ---- */

#define H_CNT(h, name) atomic_load(&(h)->eng->cnt.name)

/* ---- arenas ---- */

/* Map, fill and register an arena of `len` bytes with `access` on `pd`; bails out on failure. */
static inline void h_arena_open(struct h_arena *a, struct ibv_pd *pd, size_t len, int access)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	memset(a, 0, sizeof(*a));
	a->len = len;
	a->rw_len = (len + 2 * H_SLACK + pg - 1) / pg * pg;
	a->map_len = a->rw_len + 2 * pg;
	a->map = mmap(NULL, a->map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a->map == MAP_FAILED) {
		printf("Bail out! mmap: %s\n", t_errname(errno));
		exit(1);
	}
	a->rw = a->map + pg;
	a->buf = a->rw + H_SLACK;
	a->shadow = malloc(a->rw_len);
	if (!a->shadow || mprotect(a->rw, a->rw_len, PROT_READ | PROT_WRITE)) {
		printf("Bail out! arena: %s\n", t_errname(errno));
		exit(1);
	}
	for (size_t i = 0; i < a->rw_len; i++)
		a->rw[i] = (uint8_t)(i * 131 + 7 + (i >> 9));
	memcpy(a->shadow, a->rw, a->rw_len);
	a->mr = ibv_reg_mr(pd, a->buf, len, access);
	if (!a->mr) {
		printf("Bail out! reg_mr: %s\n", t_errname(errno));
		exit(1);
	}
}

static inline void h_arena_close(struct h_arena *a)
{
	CHECK_RET(ibv_dereg_mr(a->mr), 0);
	munmap(a->map, a->map_len);
	free(a->shadow);
}

/* True if the arena holds exactly its shadow (prints the first difference). */
static inline bool h_arena_intact(const struct h_arena *a)
{
	for (size_t i = 0; i < a->rw_len; i++)
		if (a->rw[i] != a->shadow[i]) {
			printf("# arena byte %ld (of the MR) changed: %02x, was %02x\n",
			       (long)i - H_SLACK, a->rw[i], a->shadow[i]);
			return false;
		}
	return true;
}

/*
 * Order the caller after what the progress thread did for `qp` (NULL:
 * nothing). The peer's ACK already proves the order, but through the
 * network, which ThreadSanitizer does not see; the QP lock (taken by
 * ibv_query_qp, held by the responder) shows it.
 */
static inline void h_sync(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	if (qp)
		ibv_query_qp(qp, &a, IBV_QP_STATE, &i);
}

/* The arena's MR address of byte `off`. */
static inline uint64_t h_va(const struct h_arena *a, int64_t off)
{
	return (uint64_t)(uintptr_t)a->buf + (uint64_t)off;
}

/* ---- the peer's socket ---- */

/* Open the device and bind the peer to a free 127.0.0.M; bails out on failure. */
static inline void h_open(struct h_env *h)
{
	struct sw_dev *dev;
	unsigned int m0 = 100 + (unsigned int)getpid() % 150, m;

	memset(h, 0, sizeof(*h));
	q_env_open(&h->e, 64);
	dev = sw_dev_of(h->e.ctx);
	h->eng = dev->eng;
	h->dev.sin_family = AF_INET;
	h->dev.sin_addr = dev->port.local.v4.sin_addr;
	h->dev.sin_port = htons(dev->port.udp_port);
	h->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (h->fd < 0 || !h->eng) {
		printf("Bail out! socket: %s\n", t_errname(errno));
		exit(1);
	}
	for (m = 0; m < 154; m++) {
		h->me = h->dev;
		h->me.sin_addr.s_addr = htonl(0x7f000000u | (100 + (m0 - 100 + m) % 154));
		if (h->me.sin_addr.s_addr == h->dev.sin_addr.s_addr)
			continue;
		if (!bind(h->fd, (struct sockaddr *)&h->me, sizeof(h->me)))
			break;
	}
	if (m == 154) {
		printf("Bail out! no free 127.0.0.M for the peer\n");
		exit(1);
	}
	h->gid.raw[10] = h->gid.raw[11] = 0xff;
	memcpy(&h->gid.raw[12], &h->me.sin_addr, 4);
	sw_icrc_ctx_set(&h->ic_out, (const union sw_sa *)(const void *)&h->me,
			(const union sw_sa *)(const void *)&h->dev);
	sw_icrc_ctx_set(&h->ic_in, (const union sw_sa *)(const void *)&h->dev,
			(const union sw_sa *)(const void *)&h->me);
	if (fcntl(h->e.ctx->async_fd, F_SETFL, O_NONBLOCK)) {
		printf("Bail out! async_fd: %s\n", t_errname(errno));
		exit(1);
	}
}

static inline void h_close(struct h_env *h)
{
	close(h->fd);
	q_env_close(&h->e);
}

/* Send `len` raw bytes from socket `fd` to the device. */
static inline void h_send_raw_fd(struct h_env *h, int fd, const void *buf, size_t len)
{
	ssize_t n = sendto(fd, buf, len, 0, (const struct sockaddr *)&h->dev, sizeof(h->dev));

	CHECK_MSG(n == (ssize_t)len, "sendto %zu bytes: %zd (%s)", len, n, t_errname(errno));
}

static inline void h_send_raw(struct h_env *h, const void *buf, size_t len)
{
	h_send_raw_fd(h, h->fd, buf, len);
}

/*
 * Build `p` with `len` payload bytes into `buf` (room for SW_PKT_MAX + 64):
 * pad count, headers, payload, pad, ICRC for `ic`. Returns the length.
 */
static inline size_t h_build_ic(uint8_t *buf, struct sw_pkt *p, const void *payload, uint32_t len,
				const struct sw_icrc_ctx *ic)
{
	size_t hl;

	p->padcnt = sw_pad_for(len);
	hl = sw_pkt_write_hdrs(buf, p);
	if (len)
		memcpy(buf + hl, payload, len);
	return sw_pkt_finish(buf, hl + len, ic);
}

static inline size_t h_build(struct h_env *h, uint8_t *buf, struct sw_pkt *p, const void *payload,
			     uint32_t len)
{
	return h_build_ic(buf, p, payload, len, &h->ic_out);
}

/* Build and send. */
static inline void h_send(struct h_env *h, struct sw_pkt *p, const void *payload, uint32_t len)
{
	uint8_t buf[SW_PKT_MAX + 64];

	h_send_raw(h, buf, h_build(h, buf, p, payload, len));
}

/* Recompute the ICRC of a packet of `len` bytes after its bytes were changed. */
static inline void h_reseal(struct h_env *h, uint8_t *buf, size_t len)
{
	uint32_t c = htole32(sw_icrc(&h->ic_out, buf, len));

	memcpy(buf + len - SW_ICRC_LEN, &c, 4);
}

/* Reseal a packet of `len` bytes whose bytes were changed, and send it. */
static inline void h_send_resealed(struct h_env *h, uint8_t *buf, size_t len)
{
	h_reseal(h, buf, len);
	h_send_raw(h, buf, len);
}

/*
 * The device's next packet to the peer within `ms`, ICRC checked, parsed
 * into *p (payload in h->rx). 0, -ETIMEDOUT, or a parse error.
 */
static inline int h_recv(struct h_env *h, struct sw_pkt *p, int ms)
{
	struct pollfd pfd = {.fd = h->fd, .events = POLLIN};
	struct sockaddr_in src;
	socklen_t sl = sizeof(src);
	ssize_t n;

	if (poll(&pfd, 1, ms) != 1)
		return -ETIMEDOUT;
	n = recvfrom(h->fd, h->rx, sizeof(h->rx), 0, (struct sockaddr *)&src, &sl);
	if (n < 0)
		return -errno;
	if (src.sin_addr.s_addr != h->dev.sin_addr.s_addr)
		return -EADDRNOTAVAIL;
	return sw_pkt_parse(p, h->rx, (size_t)n, &h->ic_in);
}

/* Wait for responses: long enough for a loaded machine and valgrind. */
enum {
	H_WAIT_MS = 5000,
	H_QUIET_MS = 30
};

/* Wait until counter `c` reaches `want` (the progress thread counts as it goes). */
static inline int h_wait_cnt_at(atomic_ullong *c, unsigned long long want, const char *what,
				const char *file, int line)
{
	for (int i = 0; i < H_WAIT_MS && atomic_load(c) < want; i++)
		usleep(1000);
	return t_check(atomic_load(c) == want, file, line, "counter %s: want %llu, got %llu", what,
		       want, (unsigned long long)atomic_load(c));
}
#define H_WAIT_CNT(h, name, want)                                                                  \
	h_wait_cnt_at(&(h)->eng->cnt.name, (want), #name, __FILE__, __LINE__)

/* The next packet is an ACK (AETH `syn`) of `psn`. */
static inline int h_expect_ack_at(struct h_env *h, uint8_t syn, uint32_t psn, const char *file,
				  int line)
{
	struct sw_pkt p;
	int r = h_recv(h, &p, H_WAIT_MS);

	if (r)
		return t_check(0, file, line, "want AETH %#x psn %#x, got %s", syn, psn,
			       t_errname(-r));
	return t_check(p.opcode == SW_OP_ACK && p.syndrome == syn && p.psn == psn &&
			       p.dqpn == H_PEER_QPN,
		       file, line,
		       "want ACK AETH %#x psn %#x qpn %#x, got opcode %#x AETH %#x psn %#x qpn %#x",
		       syn, psn, H_PEER_QPN, p.opcode, p.syndrome, p.psn, p.dqpn);
}
#define H_EXPECT_ACK(h, syn, psn) h_expect_ack_at((h), (syn), (psn), __FILE__, __LINE__)

/* Nothing more arrives for a short while (the caller proved ordering otherwise). */
static inline int h_expect_quiet_at(struct h_env *h, const char *file, int line)
{
	struct sw_pkt p;
	int r = h_recv(h, &p, H_QUIET_MS);

	return t_check(r == -ETIMEDOUT, file, line, "want no packet, got opcode %#x psn %#x (%s)",
		       r ? 0 : p.opcode, r ? 0 : p.psn, t_errname(-r));
}
#define H_EXPECT_QUIET(h) h_expect_quiet_at((h), __FILE__, __LINE__)

/* ---- requests ---- */

/* A request header for `qp` at `psn`, AckReq set. */
static inline struct sw_pkt h_req(struct ibv_qp *qp, uint8_t opcode, uint32_t psn)
{
	struct sw_pkt p = {.opcode = opcode,
			   .pkey = SW_DEFAULT_PKEY,
			   .dqpn = qp->qp_num,
			   .ack_req = true,
			   .psn = psn & SW_PSN_MASK};

	return p;
}

/* A request `op` with a RETH (`va`, `rkey`, `dma_len`) and `len` bytes of `data`. */
static inline void h_reth_op(struct h_env *h, struct ibv_qp *qp, uint8_t op, uint32_t psn,
			     uint64_t va, uint32_t rkey, uint32_t dma_len, const void *data,
			     uint32_t len)
{
	struct sw_pkt p = h_req(qp, op, psn);

	p.va = va;
	p.rkey = rkey;
	p.dma_len = dma_len;
	h_send(h, &p, data, len);
}

/* An RDMA WRITE ONLY of `len` bytes of `data` at `va` with `rkey`, RETH length `dma_len`. */
static inline void h_write(struct h_env *h, struct ibv_qp *qp, uint32_t psn, uint64_t va,
			   uint32_t rkey, uint32_t dma_len, const void *data, uint32_t len)
{
	h_reth_op(h, qp, SW_OP_WRITE_ONLY, psn, va, rkey, dma_len, data, len);
}

static inline void h_read(struct h_env *h, struct ibv_qp *qp, uint32_t psn, uint64_t va,
			  uint32_t rkey, uint32_t len)
{
	struct sw_pkt p = h_req(qp, SW_OP_READ_REQ, psn);

	p.va = va;
	p.rkey = rkey;
	p.dma_len = len;
	h_send(h, &p, NULL, 0);
}

static inline void h_atomic(struct h_env *h, struct ibv_qp *qp, uint8_t op, uint32_t psn,
			    uint64_t va, uint32_t rkey, uint64_t swap_add, uint64_t compare)
{
	struct sw_pkt p = h_req(qp, op, psn);

	p.va = va;
	p.rkey = rkey;
	p.swap_add = swap_add;
	p.compare = compare;
	h_send(h, &p, NULL, 0);
}

/*
 * A probe: a zero-length WRITE at `psn` (no key needed), which the QP
 * ACKs. Whatever the packets before it drew arrives before this ACK, so
 * reading the ACK next proves they drew nothing.
 */
static inline int h_probe_at(struct h_env *h, struct ibv_qp *qp, uint32_t psn, const char *file,
			     int line)
{
	h_write(h, qp, psn, 0, 0, 0, NULL, 0);
	return h_expect_ack_at(h, H_ACK, psn & SW_PSN_MASK, file, line);
}
#define H_PROBE(h, qp, psn) h_probe_at((h), (qp), (psn), __FILE__, __LINE__)

/* ---- victims ---- */

/*
 * Bring `qp` (RC, UC or XRC) from RESET to RTS towards `dest` at pe->gid,
 * with the masks its type requires, expecting `rq_psn`, sending from
 * `sq_psn`, retransmit timeout code `timeout`; 0 or an errno.
 */
static inline int h_connect(const struct q_env *pe, struct ibv_qp *qp, uint32_t dest,
			    uint32_t rq_psn, uint32_t sq_psn, uint8_t timeout)
{
	struct ibv_qp_attr a = q_attr(pe, IBV_QPS_INIT, dest);
	enum ibv_qp_type t = qp->qp_type;
	int st = IBV_QP_STATE, ret;

	ret = ibv_modify_qp(qp, &a, st | q_required(t, IBV_QPS_RESET, IBV_QPS_INIT));
	a = q_attr(pe, IBV_QPS_RTR, dest);
	a.rq_psn = rq_psn;
	if (!ret)
		ret = ibv_modify_qp(qp, &a, st | q_required(t, IBV_QPS_INIT, IBV_QPS_RTR));
	a = q_attr(pe, IBV_QPS_RTS, dest);
	a.sq_psn = sq_psn;
	a.timeout = timeout;
	if (!ret)
		ret = ibv_modify_qp(qp, &a, st | q_required(t, IBV_QPS_RTR, IBV_QPS_RTS));
	return ret;
}

/*
 * An RC QP connected to the peer (H_PEER_QPN at the peer's GID), RTS,
 * all remote access, path MTU 1024, expecting `rq_psn`, sending from
 * PSN 0x10 with a retransmit timeout of hours (the peer never sees a
 * retransmission); NULL on failure.
 */
static inline struct ibv_qp *h_rc_victim(struct h_env *h, uint32_t rq_psn)
{
	struct ibv_qp *qp = q_create(&h->e, IBV_QPT_RC);
	struct q_env pe = h->e;

	if (!qp)
		return NULL;
	pe.gid = h->gid;
	if (!h_connect(&pe, qp, H_PEER_QPN, rq_psn, 0x10, 31))
		return qp;
	ibv_destroy_qp(qp);
	return NULL;
}

/*
 * h_rc_victim() with one receive posted (wr_id 77) of `len` bytes at
 * `buf` in `mr`; bails out (exit 1) if the QP cannot be had.
 */
static inline struct ibv_qp *h_rc_victim_recv(struct h_env *h, uint32_t rq_psn, struct ibv_mr *mr,
					      void *buf, uint32_t len)
{
	struct ibv_qp *qp = h_rc_victim(h, rq_psn);
	struct ibv_sge s = {(uintptr_t)buf, len, 0};
	struct ibv_recv_wr w = {.wr_id = 77, .sg_list = &s, .num_sge = 1}, *bad;

	if (!qp) {
		printf("Bail out! victim QP: %s\n", t_errname(errno));
		exit(1);
	}
	s.lkey = mr->lkey;
	CHECK_RET(ibv_post_recv(qp, &w, &bad), 0);
	return qp;
}

/*
 * The next async event is `type` for `qp` (acknowledged); `type` 0:
 * there is no event.
 */
static inline int h_expect_event_at(struct h_env *h, struct ibv_qp *qp, int type, const char *file,
				    int line)
{
	struct pollfd pfd = {.fd = h->e.ctx->async_fd, .events = POLLIN};
	struct ibv_async_event ev;

	if (poll(&pfd, 1, type ? H_WAIT_MS : 0) != 1 || ibv_get_async_event(h->e.ctx, &ev))
		return t_check(!type, file, line, "want async event %d, got none", type);
	ibv_ack_async_event(&ev);
	return t_check(type && (int)ev.event_type == type && ev.element.qp == qp, file, line,
		       "want async event %d for qp %p, got %d for %p", type, (void *)qp,
		       ev.event_type, (void *)ev.element.qp);
}
#define H_EXPECT_EVENT(h, qp, type) h_expect_event_at((h), (qp), (type), __FILE__, __LINE__)

/* ---- the honest pair ---- */

struct h_honest {
	struct h_env *h;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
	struct ibv_mr *src_mr, *dst_mr;
	uint8_t src[8192], dst[8192];
	pthread_t thread;
	atomic_bool stop;
	atomic_ulong rounds, bad; /* transfers done, verified wrong */
};

/* One round: RDMA WRITE a fresh pattern from a to b; 0 if it completed and b holds it. */
static inline int h_honest_round(struct h_honest *o, unsigned long round)
{
	struct ibv_sge s = {(uintptr_t)o->src, sizeof(o->src), o->src_mr->lkey};
	struct ibv_send_wr w = {.wr_id = round,
				.sg_list = &s,
				.num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;
	int n = 0;

	for (size_t i = 0; i < sizeof(o->src); i++)
		o->src[i] = (uint8_t)(round * 7 + i * 13 + (i >> 8));
	w.wr.rdma.remote_addr = (uintptr_t)o->dst;
	w.wr.rdma.rkey = o->dst_mr->rkey;
	if (ibv_post_send(o->a, &w, &bad))
		return -1;
	for (int i = 0; i < 20000 && !n; i++) {
		n = ibv_poll_cq(o->cq, 1, &wc);
		if (!n)
			usleep(500);
	}
	if (n != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != round)
		return -1;
	return memcmp(o->src, o->dst, sizeof(o->src)) ? -1 : 0;
}

static inline void *h_honest_main(void *arg)
{
	struct h_honest *o = arg;

	while (!atomic_load(&o->stop)) {
		if (h_honest_round(o, atomic_load(&o->rounds) + 1))
			atomic_fetch_add(&o->bad, 1);
		atomic_fetch_add(&o->rounds, 1);
		usleep(2000);
	}
	return NULL;
}

/* Start the honest pair's traffic thread; bails out on setup failure. */
static inline void h_honest_start(struct h_env *h, struct h_honest *o)
{
	struct q_env pe = h->e;
	struct ibv_qp_init_attr ia;

	memset(o, 0, sizeof(*o));
	o->h = h;
	o->cq = ibv_create_cq(h->e.ctx, 16, NULL, NULL, 0);
	pe.scq = pe.rcq = o->cq;
	ia = q_init_attr(&pe, IBV_QPT_RC);
	o->a = o->cq ? ibv_create_qp(h->e.pd, &ia) : NULL;
	o->b = o->cq ? ibv_create_qp(h->e.pd, &ia) : NULL;
	o->src_mr = ibv_reg_mr(h->e.pd, o->src, sizeof(o->src), IBV_ACCESS_LOCAL_WRITE);
	o->dst_mr = ibv_reg_mr(h->e.pd, o->dst, sizeof(o->dst),
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!o->a || !o->b || !o->src_mr || !o->dst_mr ||
	    h_connect(&pe, o->a, o->b->qp_num, 0x111, 0x222, 14) ||
	    h_connect(&pe, o->b, o->a->qp_num, 0x222, 0x111, 14) ||
	    pthread_create(&o->thread, NULL, h_honest_main, o)) {
		printf("Bail out! honest pair: %s\n", t_errname(errno));
		exit(1);
	}
}

/* Wait until the pair has finished two more rounds (traffic between attacks). */
static inline void h_honest_tick(struct h_honest *o)
{
	unsigned long want = atomic_load(&o->rounds) + 2;

	for (int i = 0; i < H_WAIT_MS && atomic_load(&o->rounds) < want; i++)
		usleep(1000);
}

/* Stop it, run one more verified round, check every round was right, free it. */
static inline void h_honest_stop(struct h_honest *o)
{
	unsigned long rounds, bad;

	atomic_store(&o->stop, true);
	pthread_join(o->thread, NULL);
	rounds = atomic_load(&o->rounds);
	bad = atomic_load(&o->bad);
	CHECK_MSG(rounds > 0 && bad == 0, "honest pair: %lu rounds, %lu wrong", rounds, bad);
	CHECK_MSG(h_honest_round(o, rounds + 1) == 0, "honest pair: the round after the attack");
	CHECK_EQ_INT(q_state(o->a), IBV_QPS_RTS);
	CHECK_EQ_INT(q_state(o->b), IBV_QPS_RTS);
	printf("# honest pair: %lu verified rounds of %zu bytes during the attack\n", rounds,
	       sizeof(o->src));
	CHECK_RET(ibv_destroy_qp(o->a), 0);
	CHECK_RET(ibv_destroy_qp(o->b), 0);
	CHECK_RET(ibv_dereg_mr(o->src_mr), 0);
	CHECK_RET(ibv_dereg_mr(o->dst_mr), 0);
	CHECK_RET(ibv_destroy_cq(o->cq), 0);
}

#endif /* SV_TESTS_HOSTILE_H */
