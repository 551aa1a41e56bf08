/* SPDX-License-Identifier: MIT */
/*
 * api_load_ops: millions of small RC operations between two processes,
 * every payload checked; with SV_LOAD_SECONDS and SV_LOAD_FAULT it is
 * also the soak run (docs/reliability.md, "Load and soak").
 *
 * An initiator process drives NQP QPs (one shared send CQ) towards a
 * target process (one CQ shared by all its QPs). Each QP runs its own
 * deterministic plan of small WRITEs, SENDs, READs and fetch-and-adds,
 * DEPTH deep, in lists of up to 32, signalled only every SIG-th work
 * request; a signalled completion retires everything before it. Every
 * EPOCH-th operation is a marker: a zero-byte SEND with immediate data.
 *
 *   - WRITE i lands in slot i % EPOCH of log half (i / EPOCH) % 2 of the
 *     target. When the target receives the marker of epoch e (RC keeps
 *     order, so every WRITE of the epoch has landed), it checks every
 *     slot of that half (written bytes carry the pattern, the rest is
 *     zero), zeroes the half and grants a credit with a SEND back. The
 *     initiator starts epoch e + 2 (the same half) only after that credit.
 *   - SEND payloads are checked by the target on receipt, in order.
 *   - READ data (from a patterned area) and every fetched atomic value
 *     (against a replay of the plan) are checked by the initiator when a
 *     later signalled completion retires them; the target checks the
 *     atomic word's final value.
 *
 * Environment (none needed for make check):
 *   SV_LOAD_OPS=N       operations in all (default 2000000), rounded up to
 *                       whole epochs per QP
 *   SV_LOAD_SECONDS=S   run for S seconds instead (the soak), at least one
 *                       epoch per QP
 *   SV_LOAD_FAULT=SPEC  SOFTVERBS_FAULT of both processes (seed added if
 *                       absent: SV_LOAD_SEED, default 1, and SEED + 1)
 *   SV_LOAD_QPS=N       QPs (default 4, at most 64)
 *   SV_LOAD_STALL=S     no progress for S seconds fails the run with a dump
 *                       of each QP (default 60)
 * Under ASan and clang (the other check stages) the default is a quarter
 * of the operations, under TSan two epochs: gcc's stage runs the millions.
 */
#include "harness.h"
#include "traffic.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>

/* test: no-valgrind */
/* test: timeout=300 */
/*
 * Its own UDP port: a capture of port 4791 on lo (a developer's, or a
 * wire test's) does not fill up with its millions of packets.
 */
/* test: env=SOFTVERBS_UDP_PORT=4793 */
/* test: label=mt */

#define MAX_QP 64
#define DEPTH 256 /* send WRs outstanding per QP */
#define SIG 32 /* signal every SIG-th WR */
#define LIST 32 /* WRs per ibv_post_send call, at most */
#define EPOCH 8192 /* operations per epoch, the marker included */
#define SLOT 64 /* largest payload; bytes per log and local slot */
#define R_LEN 4096 /* the patterned READ area */
#define RQD 512 /* target receives per QP */
#define CREDITS 8 /* initiator receives per QP (credits) */
#define LAST_BIT 0x80000000u

#define LOG_LEN (2u * EPOCH * SLOT)
#define T_R_OFF LOG_LEN
#define T_RECV_OFF (T_R_OFF + R_LEN)
#define T_WORD_OFF (T_RECV_OFF + RQD * SLOT)
#define T_LEN (T_WORD_OFF + 8)
#define I_LEN ((DEPTH + CREDITS) * SLOT)
#define ACC                                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

enum {
	OP_WRITE,
	OP_READ,
	OP_SEND,
	OP_FAA,
	OP_MARK
};

struct op {
	uint8_t type;
	uint8_t len;
	uint16_t roff; /* READ: offset in the R area */
	uint64_t add; /* FAA */
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x9E3779B97F4A7C15ull;
	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	return x ^ (x >> 32);
}

/* Operation i of QP q: the same in both processes. */
static struct op plan(uint32_t q, uint64_t i)
{
	uint64_t x = mix(i * 64 + q + 1);
	struct op o = {0};
	uint32_t r = (uint32_t)(x % 100);

	if (i % EPOCH == EPOCH - 1) {
		o.type = OP_MARK;
		return o;
	}
	o.type = r < 40 ? OP_WRITE : r < 65 ? OP_SEND : r < 85 ? OP_READ : OP_FAA;
	o.len = (uint8_t)(((x >> 8) & 63) == 0 ? 0 : 1 + (x >> 14) % SLOT);
	if (o.type == OP_READ)
		o.roff = (uint16_t)((x >> 24) % (R_LEN - SLOT));
	if (o.type == OP_FAA) {
		o.len = 8;
		o.add = (x >> 32) | 1;
	}
	return o;
}

/* Byte k of the payload of operation i of QP q. */
static uint8_t pat(uint32_t q, uint64_t i, uint32_t k)
{
	return (uint8_t)((k * 131u) ^ (uint32_t)(i * 7u) ^ (q * 29u) ^ (uint32_t)(i >> 8) ^ 0x5a);
}

/* Byte k of QP q's READ area. */
static uint8_t rpat(uint32_t q, uint32_t k)
{
	return (uint8_t)(k * 37u + (k >> 8) + q * 101u + 3);
}

static uint64_t word_init(uint32_t q)
{
	return 1000003ull * q + 11;
}

/* ---- shared state: settings, results, stall reports ---- */

struct result {
	atomic_ullong ops, bytes, bad_ops, bad_bytes;
	atomic_int setup_failed, finished;
};

struct shared {
	uint32_t nqp;
	uint64_t per_qp; /* operations per QP; 0: run for `seconds` */
	uint64_t seconds, stall_s;
	struct result r[2]; /* initiator, target */
};

static struct shared *sh;

/* ---- endpoints ---- */

struct qp_ep {
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	/* initiator */
	uint64_t posted, done, credits, end, faa_sum;
	uint64_t fetch[DEPTH];
	/* target */
	uint64_t next, recvs;
	bool last_seen;
	struct t_addr peer; /* traffic.h */
};

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq, *rcq; /* rcq: initiator's credits (target: == cq) */
	struct qp_ep q[MAX_QP];
	union ibv_gid gid;
	int sock;
	struct result *res;
};

static int side_open(struct side *s, size_t len, int cqe, bool initiator)
{
	struct ibv_qp_init_attr ia = {0};

	s->ctx = t_open_dev();
	if (!CHECK(s->ctx))
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, cqe, NULL, NULL, 0);
	s->rcq = initiator ? ibv_create_cq(s->ctx, (int)sh->nqp * CREDITS * 2, NULL, NULL, 0) :
			     s->cq;
	if (!CHECK(s->pd && s->cq && s->rcq) || !CHECK(ibv_query_gid(s->ctx, 1, 0, &s->gid) == 0))
		return -1;
	ia.send_cq = s->cq;
	ia.recv_cq = s->rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = DEPTH;
	ia.cap.max_recv_wr = initiator ? CREDITS : RQD;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	for (uint32_t q = 0; q < sh->nqp; q++) {
		struct qp_ep *e = &s->q[q];

		e->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
		if (!CHECK(e->buf))
			return -1;
		memset(e->buf, 0, len);
		e->mr = ibv_reg_mr(s->pd, e->buf, len, ACC);
		e->qp = ibv_create_qp(s->pd, &ia);
		if (!CHECK(e->mr && e->qp) || t_qp_init(e->qp, ACC))
			return -1;
	}
	return 0;
}

static void side_close(struct side *s)
{
	for (uint32_t q = 0; q < sh->nqp; q++) {
		struct qp_ep *e = &s->q[q];

		if (e->qp)
			CHECK_RET(ibv_destroy_qp(e->qp), 0);
		if (e->mr)
			CHECK_RET(ibv_dereg_mr(e->mr), 0);
		free(e->buf);
	}
	if (s->rcq && s->rcq != s->cq)
		CHECK_RET(ibv_destroy_cq(s->rcq), 0);
	if (s->cq)
		CHECK_RET(ibv_destroy_cq(s->cq), 0);
	if (s->pd)
		CHECK_RET(ibv_dealloc_pd(s->pd), 0);
	if (s->ctx)
		ibv_close_device(s->ctx);
}

/* Swap QP addresses with the other process and move every QP to RTS. */
static int side_connect(struct side *s)
{
	struct t_addr mine[MAX_QP];

	memset(mine, 0, sizeof(mine));
	for (uint32_t q = 0; q < sh->nqp; q++) {
		mine[q].qpn = s->q[q].qp->qp_num;
		mine[q].rkey = s->q[q].mr->rkey;
		mine[q].addr = (uintptr_t)s->q[q].buf;
		mine[q].gid = s->gid;
	}
	if (!CHECK(t_xfer(s->sock, mine, sizeof(mine), true) == 0))
		return -1;
	if (!CHECK(t_xfer(s->sock, mine, sizeof(mine), false) == 0))
		return -1;
	for (uint32_t q = 0; q < sh->nqp; q++) {
		s->q[q].peer = mine[q];
		if (t_qp_rts(s->q[q].qp, mine[q].qpn, &mine[q].gid, 1000 + q, 1000 + q,
			     IBV_MTU_1024))
			return -1;
	}
	return 0;
}

static int post_recv_slot(struct qp_ep *e, uint32_t off, uint64_t wr_id)
{
	struct ibv_sge sge = {(uintptr_t)e->buf + off, SLOT, e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(e->qp, &wr, &bad);
}

static int qp_index(const struct side *s, uint32_t qpn)
{
	for (uint32_t q = 0; q < sh->nqp; q++)
		if (s->q[q].qp->qp_num == qpn)
			return (int)q;
	return -1;
}

/* Count a wrong operation; the first few are described. */
__attribute__((format(printf, 4, 5))) static void bad_op(struct result *r, uint32_t q, uint64_t i,
							 const char *fmt, ...)
{
	va_list ap;

	if (atomic_fetch_add(&r->bad_ops, 1) >= 10)
		return;
	printf("# QP %u op %llu: ", q, (unsigned long long)i);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/*
 * Has the other process stopped: closed its end of the socket, or (with
 * `any`) written to it, which it does only once its own loop is over.
 */
static bool peer_gone(int sock, bool any)
{
	char c;
	ssize_t n = recv(sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	return n == 0 || (any && n > 0);
}

/* ---- initiator ---- */

/* Fill in one send WR for operation e->posted of QP q (not yet posted). */
static void make_wr(struct qp_ep *e, uint32_t q, struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	uint64_t i = e->posted;
	struct op o = plan(q, i);
	uint8_t *slot = e->buf + (i % DEPTH) * SLOT;

	memset(wr, 0, sizeof(*wr));
	sge->addr = (uintptr_t)slot;
	sge->length = o.len;
	sge->lkey = e->mr->lkey;
	wr->wr_id = i;
	wr->sg_list = sge;
	wr->num_sge = o.len ? 1 : 0;
	if (i % SIG == SIG - 1 || o.type == OP_MARK || i + 1 == e->end)
		wr->send_flags = IBV_SEND_SIGNALED;
	switch (o.type) {
	case OP_WRITE:
		for (uint32_t k = 0; k < o.len; k++)
			slot[k] = pat(q, i, k);
		wr->opcode = IBV_WR_RDMA_WRITE;
		wr->wr.rdma.remote_addr =
			e->peer.addr + ((i / EPOCH) % 2) * EPOCH * SLOT + (i % EPOCH) * SLOT;
		wr->wr.rdma.rkey = e->peer.rkey;
		break;
	case OP_SEND:
		for (uint32_t k = 0; k < o.len; k++)
			slot[k] = pat(q, i, k);
		wr->opcode = IBV_WR_SEND;
		break;
	case OP_READ:
		memset(slot, 0, SLOT);
		wr->opcode = IBV_WR_RDMA_READ;
		wr->wr.rdma.remote_addr = e->peer.addr + T_R_OFF + o.roff;
		wr->wr.rdma.rkey = e->peer.rkey;
		break;
	case OP_FAA:
		memset(slot, 0xee, 8);
		wr->opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr->wr.atomic.remote_addr = e->peer.addr + T_WORD_OFF;
		wr->wr.atomic.rkey = e->peer.rkey;
		wr->wr.atomic.compare_add = o.add;
		e->fetch[i % DEPTH] = e->faa_sum;
		e->faa_sum += o.add;
		break;
	default: /* the epoch marker */
		wr->opcode = IBV_WR_SEND_WITH_IMM;
		wr->imm_data = htonl((uint32_t)(i / EPOCH) | (i + 1 == e->end ? LAST_BIT : 0));
		break;
	}
}

/* Post what the depth and the credits allow on QP q. */
static int post_some(struct side *s, uint32_t q)
{
	struct qp_ep *e = &s->q[q];
	struct ibv_send_wr wr[LIST], *bad;
	struct ibv_sge sge[LIST];
	int n = 0;

	while (n < LIST && e->posted < e->end && e->posted - e->done < DEPTH &&
	       e->posted / EPOCH < e->credits + 2) {
		make_wr(e, q, &wr[n], &sge[n]);
		if (n)
			wr[n - 1].next = &wr[n];
		n++;
		e->posted++;
	}
	if (!n)
		return 0;
	return CHECK_RET(ibv_post_send(e->qp, wr, &bad), 0) ? n : -1;
}

/* Check operations done..upto of QP q, which a signalled completion retired. */
static void retire(struct side *s, uint32_t q, uint64_t upto)
{
	struct qp_ep *e = &s->q[q];

	for (; e->done <= upto; e->done++) {
		uint64_t i = e->done;
		struct op o = plan(q, i);
		const uint8_t *slot = e->buf + (i % DEPTH) * SLOT;
		uint64_t v;

		if (o.type == OP_READ) {
			uint64_t wrong = 0;

			for (uint32_t k = 0; k < o.len; k++)
				wrong += slot[k] != rpat(q, o.roff + k);
			if (wrong) {
				atomic_fetch_add(&s->res->bad_bytes, wrong);
				bad_op(s->res, q, i, "READ: %lld bytes wrong", (long long)wrong);
			}
		} else if (o.type == OP_FAA) {
			memcpy(&v, slot, 8);
			if (v != e->fetch[i % DEPTH])
				bad_op(s->res, q, i, "FAA fetched a wrong value (%lld off)",
				       (long long)(v - e->fetch[i % DEPTH]));
		}
		if (o.type != OP_MARK) {
			atomic_fetch_add_explicit(&s->res->ops, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&s->res->bytes, o.len, memory_order_relaxed);
		}
	}
}

static void dump_qps(struct side *s, const char *who)
{
	for (uint32_t q = 0; q < sh->nqp; q++) {
		struct qp_ep *e = &s->q[q];
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;
		int st = ibv_query_qp(e->qp, &a, IBV_QP_STATE, &ia) ? -1 : (int)a.qp_state;

		printf("# %s QP %u (qpn 0x%x): state %d, posted %llu, retired %llu, credits %llu, "
		       "recvs %llu, next %llu\n",
		       who, q, e->qp->qp_num, st, (unsigned long long)e->posted,
		       (unsigned long long)e->done, (unsigned long long)e->credits,
		       (unsigned long long)e->recvs, (unsigned long long)e->next);
	}
}

/* After a failure: the first error completions of both CQs, then each QP. */
static void initiator_failed(struct side *s, uint64_t start)
{
	int shown = 0;

	printf("# initiator: failed after %.1f s\n", (double)(t_ms() - start) / 1000.0);
	for (int c = 0; c < 2; c++) {
		struct ibv_wc wc[64];
		int n;

		while ((n = ibv_poll_cq(c ? s->rcq : s->cq, 64, wc)) > 0)
			for (int k = 0; k < n; k++)
				if (wc[k].status != IBV_WC_SUCCESS && shown++ < 8)
					printf("# initiator: %s completion, qpn 0x%x wr_id %llu: %s\n",
					       c ? "receive" : "send", wc[k].qp_num,
					       (unsigned long long)wc[k].wr_id,
					       ibv_wc_status_str(wc[k].status));
	}
	dump_qps(s, "initiator");
}

static void initiator_run(struct side *s)
{
	uint64_t start = t_ms(), last_progress = start, report = start, stop_at = 0;
	uint32_t active = sh->nqp;

	if (sh->seconds)
		stop_at = start + sh->seconds * 1000;
	for (uint32_t q = 0; q < sh->nqp; q++) {
		struct qp_ep *e = &s->q[q];

		e->end = sh->per_qp ? sh->per_qp : UINT64_MAX;
		e->faa_sum = word_init(q);
		for (uint32_t c = 0; c < CREDITS; c++)
			if (!CHECK_RET(post_recv_slot(e, (DEPTH + c) * SLOT, c), 0))
				return;
	}
	while (active) {
		struct ibv_wc wc[64];
		int n, progress = 0;
		uint64_t now = t_ms();

		if (stop_at && now >= stop_at)
			for (uint32_t q = 0; q < sh->nqp; q++) {
				struct qp_ep *e = &s->q[q];

				if (e->end == UINT64_MAX) /* finish the epoch in progress */
					e->end = (e->posted / EPOCH + 1) * EPOCH;
			}
		for (uint32_t q = 0; q < sh->nqp; q++)
			if (post_some(s, q) < 0)
				return;
		n = ibv_poll_cq(s->cq, 64, wc);
		for (int k = 0; k < n; k++) {
			int q = qp_index(s, wc[k].qp_num);

			if (q < 0 || wc[k].status != IBV_WC_SUCCESS || wc[k].wr_id < s->q[q].done ||
			    wc[k].wr_id >= s->q[q].posted) {
				printf("# initiator: completion on qpn 0x%x wr_id %llu: %s\n",
				       wc[k].qp_num, (unsigned long long)wc[k].wr_id,
				       ibv_wc_status_str(wc[k].status));
				atomic_fetch_add(&s->res->bad_ops, 1);
				initiator_failed(s, start);
				return;
			}
			retire(s, (uint32_t)q, wc[k].wr_id);
			progress = 1;
		}
		n = ibv_poll_cq(s->rcq, 64, wc);
		for (int k = 0; k < n; k++) {
			int q = qp_index(s, wc[k].qp_num);
			struct qp_ep *e = q < 0 ? NULL : &s->q[q];

			if (!e || wc[k].status != IBV_WC_SUCCESS ||
			    !(wc[k].wc_flags & IBV_WC_WITH_IMM) ||
			    ntohl(wc[k].imm_data) != e->credits) {
				printf("# initiator: bad credit on qpn 0x%x: %s\n", wc[k].qp_num,
				       ibv_wc_status_str(wc[k].status));
				atomic_fetch_add(&s->res->bad_ops, 1);
				initiator_failed(s, start);
				return;
			}
			e->credits++;
			if (e->credits * EPOCH < e->end &&
			    !CHECK_RET(post_recv_slot(e, (uint32_t)(DEPTH + wc[k].wr_id) * SLOT,
						      wc[k].wr_id),
				       0)) {
				return;
			}
			progress = 1;
		}
		/*
		 * A QP is done with its last credit and its last completion: the
		 * credit may come first (the target's SEND can overtake the ACK).
		 */
		active = 0;
		for (uint32_t q = 0; q < sh->nqp; q++)
			active +=
				s->q[q].credits * EPOCH < s->q[q].end || s->q[q].done < s->q[q].end;
		if (progress) {
			last_progress = now;
		} else if (now - last_progress > sh->stall_s * 1000) {
			printf("# initiator: no progress for %llu s\n",
			       (unsigned long long)sh->stall_s);
			atomic_fetch_add(&s->res->bad_ops, 1);
			initiator_failed(s, start);
			return;
		} else if (now - last_progress > 1000 && peer_gone(s->sock, false)) {
			printf("# initiator: the target is gone\n");
			atomic_fetch_add(&s->res->bad_ops, 1);
			return;
		}
		if (sh->seconds && now - report >= 60000) {
			report = now;
			printf("# %llu s: %llu operations, %llu bytes\n",
			       (unsigned long long)(now - start) / 1000,
			       (unsigned long long)atomic_load(&s->res->ops),
			       (unsigned long long)atomic_load(&s->res->bytes));
		}
	}
}

/* ---- target ---- */

/* Check the log half of epoch `ep` of QP q, then zero it; wrong bytes. */
static uint64_t check_epoch(struct side *s, uint32_t q, uint64_t ep)
{
	uint8_t *half = s->q[q].buf + (ep % 2) * EPOCH * SLOT;
	uint64_t wrong_total = 0;

	for (uint32_t j = 0; j < EPOCH; j++) {
		uint64_t i = ep * EPOCH + j, wrong = 0;
		struct op o = plan(q, i);
		const uint8_t *slot = half + (size_t)j * SLOT;
		uint32_t len = o.type == OP_WRITE ? o.len : 0;

		for (uint32_t k = 0; k < SLOT; k++)
			wrong += slot[k] != (k < len ? pat(q, i, k) : 0);
		if (wrong)
			bad_op(s->res, q, i, "WRITE: %lld bytes wrong in the log",
			       (long long)wrong);
		wrong_total += wrong;
	}
	memset(half, 0, EPOCH * SLOT);
	return wrong_total;
}

/* Grant the credit for epoch `ep` of QP q: a signalled zero-byte SEND with immediate. */
static int grant(struct side *s, uint32_t q, uint64_t ep)
{
	struct ibv_send_wr wr = {0}, *bad;

	wr.wr_id = ep;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl((uint32_t)ep);
	wr.send_flags = IBV_SEND_SIGNALED;
	return ibv_post_send(s->q[q].qp, &wr, &bad);
}

/* A receive completion of QP q: the next SEND or marker of its plan. */
static int target_recv(struct side *s, uint32_t q, const struct ibv_wc *wc)
{
	struct qp_ep *e = &s->q[q];
	const uint8_t *got = e->buf + T_RECV_OFF + (wc->wr_id % RQD) * SLOT;
	struct op o;
	uint64_t i;

	while (o = plan(q, e->next), o.type != OP_SEND && o.type != OP_MARK)
		e->next++;
	i = e->next++;
	if (wc->wr_id != e->recvs++) {
		bad_op(s->res, q, i, "receive out of order (wr_id %lld)", (long long)wc->wr_id);
		return -1;
	}
	if (o.type == OP_SEND) {
		uint64_t wrong = 0;

		if (wc->byte_len != o.len || (wc->wc_flags & IBV_WC_WITH_IMM)) {
			bad_op(s->res, q, i, "SEND: %lld bytes, or immediate data",
			       (long long)wc->byte_len);
			return -1;
		}
		for (uint32_t k = 0; k < o.len; k++)
			wrong += got[k] != pat(q, i, k);
		if (wrong) {
			atomic_fetch_add(&s->res->bad_bytes, wrong);
			bad_op(s->res, q, i, "SEND: %lld bytes wrong", (long long)wrong);
		}
		atomic_fetch_add_explicit(&s->res->ops, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&s->res->bytes, o.len, memory_order_relaxed);
	} else {
		uint32_t imm = ntohl(wc->imm_data);

		if (!(wc->wc_flags & IBV_WC_WITH_IMM) || wc->byte_len ||
		    (imm & ~LAST_BIT) != (uint32_t)(i / EPOCH)) {
			bad_op(s->res, q, i, "marker: wrong immediate 0x%llx", (long long)imm);
			return -1;
		}
		atomic_fetch_add(&s->res->bad_bytes, check_epoch(s, q, i / EPOCH));
		if (!CHECK_RET(grant(s, q, i / EPOCH), 0))
			return -1;
		e->last_seen = imm & LAST_BIT;
	}
	return CHECK_RET(post_recv_slot(e, T_RECV_OFF + (uint32_t)(wc->wr_id % RQD) * SLOT,
					e->recvs + RQD - 1),
			 0) ?
		       0 :
		       -1;
}

/* The final value of QP q's atomic word after operations [0, end). */
static uint64_t word_final(uint32_t q, uint64_t end)
{
	uint64_t v = word_init(q);

	for (uint64_t i = 0; i < end; i++) {
		struct op o = plan(q, i);

		if (o.type == OP_FAA)
			v += o.add;
	}
	return v;
}

static void target_run(struct side *s)
{
	uint32_t left = sh->nqp;
	uint64_t last_progress = t_ms();

	while (left) {
		struct ibv_wc wc[64];
		int n = ibv_poll_cq(s->cq, 64, wc);

		for (int k = 0; k < n; k++) {
			int q = qp_index(s, wc[k].qp_num);

			if (q < 0 || wc[k].status != IBV_WC_SUCCESS) {
				printf("# target: completion on qpn 0x%x: %s\n", wc[k].qp_num,
				       ibv_wc_status_str(wc[k].status));
				atomic_fetch_add(&s->res->bad_ops, 1);
				dump_qps(s, "target");
				return;
			}
			if (wc[k].opcode == IBV_WC_SEND)
				continue; /* a credit went out */
			if (target_recv(s, (uint32_t)q, &wc[k]))
				return;
			if (s->q[q].last_seen)
				left--;
		}
		if (n > 0) {
			last_progress = t_ms();
		} else if (t_ms() - last_progress > 1000 && peer_gone(s->sock, true)) {
			printf("# target: the initiator stopped\n");
			dump_qps(s, "target");
			return;
		} else if (t_ms() - last_progress > (sh->stall_s + 5) * 1000) {
			printf("# target: no progress\n");
			atomic_fetch_add(&s->res->bad_ops, 1);
			dump_qps(s, "target");
			return;
		}
	}
	for (uint32_t q = 0; q < sh->nqp; q++) {
		uint64_t v, want = word_final(q, s->q[q].next);

		memcpy(&v, s->q[q].buf + T_WORD_OFF, 8);
		if (v != want)
			bad_op(s->res, q, s->q[q].next, "atomic word off by %lld at the end",
			       (long long)(v - want));
	}
}

/* ---- processes ---- */

static int child(bool initiator, int sock, const char *fault)
{
	struct side s;
	char c = 'x';

	memset(&s, 0, sizeof(s));
	s.sock = sock;
	s.res = &sh->r[initiator ? 0 : 1];
	if (fault)
		setenv("SOFTVERBS_FAULT", fault, 1);
	setenv("SOFTVERBS_STATS", "1", 1);
	if (side_open(&s, initiator ? I_LEN : T_LEN,
		      (int)sh->nqp * (initiator ? DEPTH : RQD + CREDITS) + 64, initiator)) {
		atomic_store(&s.res->setup_failed, 1);
		goto out;
	}
	for (uint32_t q = 0; q < sh->nqp && !initiator; q++) {
		uint64_t w = word_init(q);

		for (uint32_t k = 0; k < R_LEN; k++)
			s.q[q].buf[T_R_OFF + k] = rpat(q, k);
		memcpy(s.q[q].buf + T_WORD_OFF, &w, 8);
		for (uint32_t r = 0; r < RQD; r++)
			if (!CHECK_RET(post_recv_slot(&s.q[q], T_RECV_OFF + r * SLOT, r), 0))
				atomic_store(&s.res->setup_failed, 1);
	}
	if (atomic_load(&s.res->setup_failed) || side_connect(&s)) {
		atomic_store(&s.res->setup_failed, 1);
		goto out;
	}
	/* both sides in RTS before the first request */
	if (!CHECK(t_xfer(sock, &c, 1, true) == 0 && t_xfer(sock, &c, 1, false) == 0)) {
		atomic_store(&s.res->setup_failed, 1);
		goto out;
	}
	if (initiator)
		initiator_run(&s);
	else
		target_run(&s);
	/* keep the QPs until the other side is done with them */
	t_xfer(sock, &c, 1, true);
	t_xfer(sock, &c, 1, false);
out:
	side_close(&s);
	atomic_fetch_add(&s.res->bad_ops, (unsigned long long)t_st()->failed);
	atomic_store(&s.res->finished, 1);
	fflush(stdout);
	fflush(stderr);
	return 0;
}

/*
 * Add the device's SOFTVERBS_STATS counters named in `keys` from stderr
 * text `f`; copy the rest to stdout, and the per-QP lines if `verbose`.
 */
static void sum_stats(FILE *f, unsigned long long *tot, const char *const *keys, int nkeys,
		      bool verbose)
{
	char line[512];

	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "softverbs:", 10)) {
			fputs(line, stdout); /* anything else the child said */
			continue;
		}
		if (strstr(line, " QP 0x")) {
			if (verbose) /* a QP's own counters: the device's add them up */
				fputs(line, stdout);
			continue;
		}
		for (int k = 0; k < nkeys; k++) {
			const char *p = strstr(line, keys[k]);

			if (p)
				tot[k] += strtoull(p + strlen(keys[k]), NULL, 10);
		}
	}
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);

	return v && *v ? strtoull(v, NULL, 10) : def;
}

int main(void)
{
	static const char *const keys[] = {
		" tx ", "retransmits ",	   "timeouts ",	  "duplicates ", "rx seq ",
		"rnr ", "faults dropped ", "duplicated ", "reordered "};
	enum {
		K_TX,
		K_RETX,
		K_TIMEOUT,
		K_DUP_SEEN,
		K_SEQ_NAK,
		K_RNR,
		K_DROP,
		K_DUP,
		K_REORD,
		K_N
	};
	unsigned long long tot[K_N] = {0};
	const char *fault = getenv("SV_LOAD_FAULT");
	char fault_spec[2][256];
	uint64_t ops, seed = env_u64("SV_LOAD_SEED", 1), t0;
	FILE *err[2];
	pid_t pid[2];
	int sv[2];

	t_start("api_load_ops");
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		t_skip_all("no shared memory");
	memset(sh, 0, sizeof(*sh));
	ops = 2000000;
#if defined(__SANITIZE_THREAD__)
	ops = 2 * EPOCH * 4; /* the tsan stage: two epochs of 4 QPs, about 10 s */
#elif defined(__SANITIZE_ADDRESS__) || defined(__clang__)
	ops /= 4;
#endif
	ops = env_u64("SV_LOAD_OPS", ops);
	sh->nqp = (uint32_t)env_u64("SV_LOAD_QPS", 4);
	if (sh->nqp < 1 || sh->nqp > MAX_QP)
		sh->nqp = 4;
	sh->seconds = env_u64("SV_LOAD_SECONDS", 0);
	sh->stall_s = env_u64("SV_LOAD_STALL", 60);
	sh->per_qp = sh->seconds ? 0 : ((ops + sh->nqp - 1) / sh->nqp + EPOCH - 1) / EPOCH * EPOCH;
	for (int k = 0; k < 2 && fault; k++)
		snprintf(fault_spec[k], sizeof(fault_spec[k]),
			 strstr(fault, "seed=") ? "%s" : "%s,seed=%llu", fault,
			 (unsigned long long)(seed + (uint64_t)k));
	printf("# %u QPs, %s %llu, DEPTH %d, signal every %d, fault %s\n", sh->nqp,
	       sh->seconds ? "seconds" : "operations per QP",
	       (unsigned long long)(sh->seconds ? sh->seconds : sh->per_qp), DEPTH, SIG,
	       fault ? fault_spec[0] : "none");
	if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0))
		return t_finish();
	t0 = t_ms();
	fflush(stdout);
	for (int k = 0; k < 2; k++) {
		err[k] = tmpfile();
		if (!CHECK(err[k]))
			return t_finish();
		pid[k] = fork();
		if (pid[k] == 0) {
			close(sv[1 - k]);
			dup2(fileno(err[k]), 2);
			_exit(child(k == 0, sv[k], fault ? fault_spec[k] : NULL));
		}
	}
	close(sv[0]);
	close(sv[1]);
	for (int k = 0; k < 2; k++) {
		int st;

		CHECK(waitpid(pid[k], &st, 0) == pid[k] && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	for (int k = 0; k < 2; k++) {
		sum_stats(err[k], tot, keys, K_N,
			  sh->r[0].bad_ops + sh->r[1].bad_ops + sh->r[0].setup_failed > 0);
		fclose(err[k]);
	}
	t0 = t_ms() - t0;
	{
		struct result *i = &sh->r[0], *t = &sh->r[1];
		unsigned long long nops = i->ops,
				   want = (sh->per_qp - sh->per_qp / EPOCH) * sh->nqp;
		unsigned long long bad = i->bad_ops + t->bad_ops,
				   badb = i->bad_bytes + t->bad_bytes;

		printf("# %llu operations (%llu SENDs also checked by the target), %llu payload "
		       "bytes, in %.1f s (%.0f operations/s)\n",
		       nops, (unsigned long long)t->ops, (unsigned long long)i->bytes, t0 / 1000.0,
		       t0 ? nops * 1000.0 / (double)t0 : 0.0);
		printf("# packets sent %llu; injected: %llu dropped, %llu duplicated, %llu reordered; "
		       "recovered by %llu retransmissions after %llu timeouts and by %llu "
		       "sequence-NAK rewinds; %llu duplicates seen, %llu RNR NAKs\n",
		       tot[K_TX], tot[K_DROP], tot[K_DUP], tot[K_REORD], tot[K_RETX],
		       tot[K_TIMEOUT], tot[K_SEQ_NAK], tot[K_DUP_SEEN], tot[K_RNR]);
		printf("# wrong: %llu operations, %llu bytes\n", bad, badb);
		CHECK_MSG(!i->setup_failed && !t->setup_failed, "setup failed");
		CHECK_MSG(i->finished && t->finished, "a process did not finish");
		CHECK_MSG(bad == 0 && badb == 0, "operations or bytes wrong");
		if (!sh->seconds)
			CHECK_MSG(nops == want, "%llu operations retired, want %llu", nops, want);
		if (fault)
			CHECK_MSG(tot[K_DROP] + tot[K_DUP] + tot[K_REORD] > 0,
				  "no fault was injected");
	}
	munmap(sh, sizeof(*sh));
	return t_finish();
}
