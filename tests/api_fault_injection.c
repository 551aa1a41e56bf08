/* SPDX-License-Identifier: MIT */
/*
 * api_fault_injection: RC traffic survives a lossy wire. With
 * SOFTVERBS_FAULT set (dropped, duplicated and reordered packets, on the
 * sending side, the receiving side or both), thousands of RDMA WRITE,
 * READ, SEND, fetch-and-add and compare-and-swap operations of mixed
 * sizes, 16 in flight, must all complete successfully, and afterwards
 * every byte and every atomic result is checked:
 *
 *   - each READ's data and each atomic's fetched value as it completes;
 *   - the target's WRITE area against a replay of every WRITE, in order;
 *   - every SEND in its receive, in order, with its length;
 *   - the atomic words against a model of every atomic, in order.
 *
 * Scenarios (each in forked worker processes, which set SOFTVERBS_FAULT
 * and SOFTVERBS_STATS=1 before their first verbs call; their stderr comes
 * back through a pipe and the counters are parsed from it):
 *   1. one process, both endpoints on one device, faults on both sides;
 *   2. two processes: initiator drops and duplicates on tx, target drops
 *      on rx;
 *   3. two processes: 5% drops on both sides of both, plus duplicates;
 *   4. two processes: 2% drops and 2% reordering on both sides of both;
 *   5. two processes: 10% of sends (and of batches, part-way) refused as
 *      if the socket were full, nothing lost: the requester goes back to
 *      the first packet not sent and resumes when the socket has room.
 * The counters must show the injected faults and their recovery
 * (timeouts or sequence-NAK rewinds for losses) and no retransmission storm; the data checks
 * show nothing was lost. The figures are printed. Under valgrind 400
 * operations run instead of 2000. For debugging: FI_ONLY=N runs scenario
 * N alone, FI_OPS=N sets the operations, FI_FAULT_A / FI_FAULT_B replace
 * the first / second worker's SOFTVERBS_FAULT, FI_STALL_MS sets how long
 * the initiator waits for a completion (default 120000), and with
 * FI_HANG_ON_STALL set a stuck initiator prints its pid and waits for a
 * debugger instead of failing.
 */
#include "harness.h"
#include "stats.h"
#include "traffic.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>

/* test: timeout=300 */

#define MiB (1u << 20)
#define ACC                                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)
#define DEPTH 16
#define SLOT (64u * 1024)
#define MAX_OPS 3000
#define NWORDS 64

/* target buffer layout */
#define W_OFF 0u
#define W_LEN (4u * MiB)
#define R_OFF (4u * MiB)
#define R_LEN (2u * MiB)
#define R_SEED 4242u
#define S_OFF (6u * MiB)
#define S_SLOT (16u * 1024)
#define A_OFF (S_OFF + MAX_OPS * S_SLOT)
#define T_LEN (A_OFF + NWORDS * 8)

enum {
	OP_WRITE,
	OP_READ,
	OP_SEND,
	OP_FAA,
	OP_CAS
};

struct op {
	uint8_t type;
	uint32_t len;
	uint32_t roff; /* WRITE/READ: offset in the area */
	uint32_t word; /* atomics */
	uint64_t add; /* FAA: add; CAS: swap */
	bool cas_hit; /* CAS: compare with the current value (else with a wrong one) */
};

static uint32_t nops = 2000;

/* The plan: the same in every process. */
static struct op plan_op(uint32_t i)
{
	uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull;
	struct op o = {0};
	uint32_t r;

	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	r = (uint32_t)(x % 100);
	o.type = r < 35 ? OP_WRITE : r < 60 ? OP_READ : r < 85 ? OP_SEND : r < 95 ? OP_FAA : OP_CAS;
	x >>= 8;
	switch (o.type) {
	case OP_WRITE:
	case OP_READ:
		/* mostly small, some spanning many packets, an occasional empty one */
		o.len = (x & 7) == 0 ? (uint32_t)(x >> 3) % SLOT : (uint32_t)(x >> 3) % 4500;
		if ((x & 63) == 1)
			o.len = 0;
		o.roff = (uint32_t)((x >> 20) % ((o.type == OP_WRITE ? W_LEN : R_LEN) - SLOT));
		break;
	case OP_SEND:
		o.len = (x & 3) == 0 ? (uint32_t)(x >> 2) % (S_SLOT + 1) :
				       (uint32_t)(x >> 2) % 2000;
		break;
	default:
		o.len = 8;
		o.word = (uint32_t)(x % NWORDS);
		o.add = (x >> 8) & 0xffff;
		o.cas_hit = (x >> 40) & 1;
		break;
	}
	return o;
}

static uint64_t word_init(uint32_t w)
{
	return 1000ull * w + 7;
}

/* What each atomic fetches and the words' final values, by replay. */
static void atomic_model(uint64_t *fetch, uint64_t *words)
{
	for (uint32_t w = 0; w < NWORDS; w++)
		words[w] = word_init(w);
	for (uint32_t i = 0; i < nops; i++) {
		struct op o = plan_op(i);
		uint64_t *v = &words[o.word];

		if (o.type == OP_FAA) {
			fetch[i] = *v;
			*v += o.add;
		} else if (o.type == OP_CAS) {
			fetch[i] = *v;
			if (o.cas_hit)
				*v = o.add;
		}
	}
}

/* Byte `i` of t_fill()'s pattern. */
static uint8_t pat_at(size_t i, unsigned int seed)
{
	return (uint8_t)((i * 131 + seed * 7 + (i >> 8)) ^ seed);
}

/* ---- endpoints ---- */

struct addr {
	uint32_t qpn, rkey;
	uint64_t base;
	union ibv_gid gid;
};

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t len;
};

static int ep_init(struct ep *e, struct ibv_context *ctx, size_t len)
{
	struct ibv_qp_init_attr ia = {0};

	memset(e, 0, sizeof(*e));
	e->ctx = ctx;
	e->len = len;
	e->pd = ibv_alloc_pd(ctx);
	e->cq = ibv_create_cq(ctx, MAX_OPS + 64, NULL, NULL, 0);
	e->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (!CHECK(e->pd && e->cq && e->buf))
		return -1;
	memset(e->buf, 0, len);
	e->mr = ibv_reg_mr(e->pd, e->buf, len, ACC);
	ia.send_cq = e->cq;
	ia.recv_cq = e->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = DEPTH;
	ia.cap.max_recv_wr = MAX_OPS;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	if (!CHECK(e->mr))
		return -1;
	e->qp = ibv_create_qp(e->pd, &ia);
	if (!CHECK(e->qp))
		return -1;
	return t_qp_init(e->qp, ACC);
}

static void ep_fini(struct ep *e)
{
	if (e->qp)
		CHECK_RET(ibv_destroy_qp(e->qp), 0);
	if (e->mr)
		CHECK_RET(ibv_dereg_mr(e->mr), 0);
	if (e->cq)
		CHECK_RET(ibv_destroy_cq(e->cq), 0);
	if (e->pd)
		CHECK_RET(ibv_dealloc_pd(e->pd), 0);
	free(e->buf);
}

static struct addr addr_of(struct ep *e)
{
	struct addr a;

	memset(&a, 0, sizeof(a));
	a.qpn = e->qp->qp_num;
	a.rkey = e->mr->rkey;
	a.base = (uintptr_t)e->buf;
	CHECK_RET(ibv_query_gid(e->ctx, 1, 0, &a.gid), 0);
	return a;
}

static int ep_connect(struct ep *e, const struct addr *peer, uint32_t my_psn, uint32_t peer_psn)
{
	/*
	 * A short ACK timeout (17 ms): losses at the tail of a burst recover
	 * quickly, while retry_cnt timeouts in a row (134 ms) still outlast a
	 * peer that a loaded machine does not schedule for a while.
	 */
	t_timeout = getenv("FI_TIMEOUT") ? (uint8_t)atoi(getenv("FI_TIMEOUT")) : 12;
	t_retry_cnt = 7;
	return t_qp_rts(e->qp, peer->qpn, &peer->gid, peer_psn, my_psn, IBV_MTU_1024);
}

/* ---- results ---- */

struct result {
	uint64_t ops, bytes, bad_ops, bad_bytes;
	int setup_failed;
};

/* ---- target: prepare, then check ---- */

static int target_prepare(struct ep *t)
{
	uint32_t nsend = 0;

	t_fill(t->buf + R_OFF, R_LEN, R_SEED);
	for (uint32_t w = 0; w < NWORDS; w++) {
		uint64_t v = word_init(w);

		memcpy(t->buf + A_OFF + w * 8, &v, 8);
	}
	for (uint32_t i = 0; i < nops; i++) {
		struct op o = plan_op(i);
		struct ibv_sge sge;
		struct ibv_recv_wr wr = {0}, *bad;

		if (o.type != OP_SEND)
			continue;
		sge.addr = (uintptr_t)t->buf + S_OFF + (size_t)nsend * S_SLOT;
		sge.length = S_SLOT;
		sge.lkey = t->mr->lkey;
		wr.wr_id = i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		if (!CHECK_RET(ibv_post_recv(t->qp, &wr, &bad), 0))
			return -1;
		nsend++;
	}
	return 0;
}

static void target_check(struct ep *t, struct result *res)
{
	uint8_t *img = calloc(1, W_LEN), *pat = malloc(SLOT + S_SLOT);
	uint64_t *fetch = calloc(nops, 8), words[NWORDS];
	uint32_t nsend = 0;

	if (!CHECK(img && pat && fetch))
		goto out;
	/* the WRITE area: every WRITE replayed in order */
	for (uint32_t i = 0; i < nops; i++) {
		struct op o = plan_op(i);

		if (o.type == OP_WRITE)
			t_fill(img + o.roff, o.len, i);
	}
	for (size_t k = 0; k < W_LEN; k++)
		res->bad_bytes += img[k] != t->buf[W_OFF + k];
	/* the READ area is unchanged */
	t_fill(img, R_LEN, R_SEED);
	for (size_t k = 0; k < R_LEN; k++)
		res->bad_bytes += img[k] != t->buf[R_OFF + k];
	/* the SENDs: one receive each, in order */
	for (uint32_t i = 0; i < nops; i++) {
		struct op o = plan_op(i);
		struct ibv_wc wc;
		uint8_t *got;

		if (o.type != OP_SEND)
			continue;
		got = t->buf + S_OFF + (size_t)nsend++ * S_SLOT;
		if (t_poll(t->cq, &wc, 1, res->bad_ops ? 0 : 5000) != 1 ||
		    wc.status != IBV_WC_SUCCESS || wc.wr_id != i || wc.byte_len != o.len) {
			if (!res->bad_ops)
				printf("# target: SEND %u: no good completion\n", i);
			res->bad_ops++;
			continue;
		}
		t_fill(pat, o.len, i);
		for (uint32_t k = 0; k < o.len; k++)
			res->bad_bytes += pat[k] != got[k];
	}
	/* the atomic words */
	atomic_model(fetch, words);
	for (uint32_t w = 0; w < NWORDS; w++) {
		uint64_t v;

		memcpy(&v, t->buf + A_OFF + w * 8, 8);
		if (v != words[w]) {
			printf("# target: word %u is %llu, want %llu\n", w, (unsigned long long)v,
			       (unsigned long long)words[w]);
			res->bad_ops++;
		}
	}
out:
	free(img);
	free(pat);
	free(fetch);
}

/* ---- initiator: the plan, DEPTH in flight, every completion checked ---- */

static void initiator(struct ep *e, const struct addr *peer, struct result *res)
{
	uint64_t *fetch = calloc(nops, 8), words[NWORDS];
	uint8_t *pat = malloc(SLOT);
	uint32_t posted = 0, done = 0;
	uint64_t end = t_ms() +
		       (getenv("FI_STALL_MS") ? strtoull(getenv("FI_STALL_MS"), NULL, 10) : 120000);

	if (!CHECK(fetch && pat))
		goto out;
	atomic_model(fetch, words);
	while (done < nops) {
		struct ibv_wc wc[DEPTH];
		int n;

		while (posted < nops && posted - done < DEPTH) {
			struct op o = plan_op(posted);
			uint8_t *slot = e->buf + (size_t)(posted % DEPTH) * SLOT;
			struct ibv_sge sge = {(uintptr_t)slot, o.len, e->mr->lkey};
			struct ibv_send_wr wr, *bad;

			memset(&wr, 0, sizeof(wr));
			wr.wr_id = posted;
			wr.sg_list = &sge;
			wr.num_sge = o.len ? 1 : 0;
			wr.send_flags = IBV_SEND_SIGNALED;
			switch (o.type) {
			case OP_WRITE:
			case OP_SEND:
				t_fill(slot, o.len, posted);
				wr.opcode = o.type == OP_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_SEND;
				wr.wr.rdma.remote_addr = peer->base + W_OFF + o.roff;
				wr.wr.rdma.rkey = peer->rkey;
				break;
			case OP_READ:
				memset(slot, 0, o.len);
				wr.opcode = IBV_WR_RDMA_READ;
				wr.wr.rdma.remote_addr = peer->base + R_OFF + o.roff;
				wr.wr.rdma.rkey = peer->rkey;
				break;
			default:
				memset(slot, 0xff, 8);
				wr.opcode = o.type == OP_FAA ? IBV_WR_ATOMIC_FETCH_AND_ADD :
							       IBV_WR_ATOMIC_CMP_AND_SWP;
				wr.wr.atomic.remote_addr = peer->base + A_OFF + o.word * 8;
				wr.wr.atomic.rkey = peer->rkey;
				if (o.type == OP_FAA) {
					wr.wr.atomic.compare_add = o.add;
				} else {
					wr.wr.atomic.compare_add = fetch[posted] + !o.cas_hit;
					wr.wr.atomic.swap = o.add;
				}
				break;
			}
			if (!CHECK_RET(ibv_post_send(e->qp, &wr, &bad), 0))
				goto out;
			posted++;
		}
		n = ibv_poll_cq(e->cq, DEPTH, wc);
		if (n <= 0) {
			if (n == 0 && t_ms() >= end && getenv("FI_HANG_ON_STALL")) {
				printf("# initiator %d: stuck at %u of %u, waiting for a debugger\n",
				       (int)getpid(), done, nops);
				fflush(stdout);
				pause();
			}
			if (!CHECK_MSG(n == 0 && t_ms() < end, "initiator: stuck at %u of %u", done,
				       nops))
				goto out;
			usleep(20);
			continue;
		}
		for (int k = 0; k < n; k++) {
			struct op o;
			uint8_t *slot;

			if (wc[k].wr_id != done || wc[k].status != IBV_WC_SUCCESS) {
				printf("# initiator: completion %u (type %d, %u bytes): wr_id %llu "
				       "%s\n",
				       done, plan_op(done).type, plan_op(done).len,
				       (unsigned long long)wc[k].wr_id,
				       ibv_wc_status_str(wc[k].status));
				res->bad_ops++;
				if (wc[k].status != IBV_WC_SUCCESS) {
					done = nops; /* the QP is in error: nothing more comes */
					break;
				}
			}
			o = plan_op(done);
			slot = e->buf + (size_t)(done % DEPTH) * SLOT;
			res->ops++;
			res->bytes += o.len;
			if (o.type == OP_READ) {
				for (uint32_t b = 0; b < o.len; b++)
					res->bad_bytes +=
						pat_at((size_t)o.roff + b, R_SEED) != slot[b];
			} else if (o.type == OP_FAA || o.type == OP_CAS) {
				uint64_t v;

				memcpy(&v, slot, 8);
				if (v != fetch[done]) {
					printf("# initiator: atomic %u fetched %llu, want %llu\n",
					       done, (unsigned long long)v,
					       (unsigned long long)fetch[done]);
					res->bad_ops++;
				}
			}
			done++;
		}
	}
out:
	free(fetch);
	free(pat);
}

/* Packets the plan takes without losses (requests and answers, MTU 1024). */
static unsigned long long plan_packets(void)
{
	unsigned long long n = 0;

	for (uint32_t i = 0; i < nops; i++) {
		struct op o = plan_op(i);
		unsigned long long p = o.len ? (o.len + 1023) / 1024 : 1;

		n += o.type == OP_READ ? p + 1 : o.type == OP_FAA || o.type == OP_CAS ? 2 : p + 1;
	}
	return n;
}

/* ---- workers ---- */

enum role {
	ROLE_BOTH,
	ROLE_INITIATOR,
	ROLE_TARGET
};

/* A worker process: its own device with `fault`; results to `out`. */
static int worker(enum role role, const char *fault, int sock, int out)
{
	struct ibv_context *ctx;
	struct result res = {0};
	struct ep a, b;
	struct addr pa, pb;
	char c;

	setenv("SOFTVERBS_FAULT", fault, 1);
	setenv("SOFTVERBS_STATS", "1", 1);
	ctx = t_open_dev(); /* the configuration is read here */
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (!ctx) {
		res.setup_failed = 1;
		goto report;
	}
	if (role == ROLE_BOTH) {
		if (ep_init(&a, ctx, DEPTH * SLOT) || ep_init(&b, ctx, T_LEN) ||
		    target_prepare(&b)) {
			res.setup_failed = 1;
			goto done;
		}
		pa = addr_of(&a);
		pb = addr_of(&b);
		if (ep_connect(&a, &pb, 100, 0xfffff0) || ep_connect(&b, &pa, 0xfffff0, 100)) {
			res.setup_failed = 1;
			goto done;
		}
		initiator(&a, &pb, &res);
		target_check(&b, &res);
	} else if (role == ROLE_INITIATOR) {
		if (ep_init(&a, ctx, DEPTH * SLOT)) {
			res.setup_failed = 1;
			goto done;
		}
		pa = addr_of(&a);
		if (t_xfer(sock, &pb, sizeof(pb), false) || t_xfer(sock, &pa, sizeof(pa), true) ||
		    ep_connect(&a, &pb, 100, 0xfffff0) || t_xfer(sock, &c, 1, false)) {
			res.setup_failed = 1;
			goto done;
		}
		initiator(&a, &pb, &res);
		c = 'c';
		t_xfer(sock, &c, 1, true);
		t_xfer(sock, &c, 1, false); /* the target checked */
	} else {
		if (ep_init(&b, ctx, T_LEN) || target_prepare(&b)) {
			res.setup_failed = 1;
			goto done;
		}
		pb = addr_of(&b);
		if (t_xfer(sock, &pb, sizeof(pb), true) || t_xfer(sock, &pa, sizeof(pa), false) ||
		    ep_connect(&b, &pa, 0xfffff0, 100)) {
			res.setup_failed = 1;
			goto done;
		}
		c = 'r';
		t_xfer(sock, &c, 1, true);
		/* no verbs calls while the initiator works */
		if (t_xfer(sock, &c, 1, false) == 0)
			target_check(&b, &res);
		t_xfer(sock, &c, 1, true);
	}
done:
	ep_fini(&a);
	ep_fini(&b);
	ibv_close_device(ctx); /* the counters go to stderr now */
report:
	fflush(stderr);
	res.bad_ops += (uint64_t)t_st()->failed;
	return write(out, &res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 1;
}

/* What t_proc_spawn() runs (tests/stats.h). */
struct job {
	enum role role;
	const char *fault;
	int sock;
};

static int job_run(void *arg, int out)
{
	const struct job *j = arg;

	return worker(j->role, j->fault, j->sock, out);
}

static int only; /* FI_ONLY=N: run scenario N alone (debugging) */

enum {
	EXPECT_LOSS = 1, /* packets dropped and recovered */
	EXPECT_DUP = 2, /* duplicates sent and seen */
	EXPECT_AGAIN = 4, /* sends refused (full socket) and resumed */
};

static void scenario(const char *name, const char *fault_a, const char *fault_b, int expect)
{
	struct t_proc ps[2];
	struct result res[2];
	struct job jobs[2];
	struct t_stats c = {0};
	struct result tot = {0};
	int n = fault_b ? 2 : 1, sv[2] = {-1, -1}, reports = 0;
	static int num;

	if (only && ++num != only)
		return;
	t_case(name);
	if (getenv("FI_FAULT_A"))
		fault_a = getenv("FI_FAULT_A");
	if (fault_b && getenv("FI_FAULT_B"))
		fault_b = getenv("FI_FAULT_B");
	memset(res, 0, sizeof(res));
	if (n == 2) {
		if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0))
			return;
		jobs[0] = (struct job){ROLE_INITIATOR, fault_a, sv[0]};
		jobs[1] = (struct job){ROLE_TARGET, fault_b, sv[1]};
		CHECK(t_proc_spawn(&ps[0], job_run, &jobs[0], &res[0], sizeof(res[0]), sv[1]) == 0);
		CHECK(t_proc_spawn(&ps[1], job_run, &jobs[1], &res[1], sizeof(res[1]), sv[0]) == 0);
		close(sv[0]);
		close(sv[1]);
	} else {
		jobs[0] = (struct job){ROLE_BOTH, fault_a, -1};
		CHECK(t_proc_spawn(&ps[0], job_run, &jobs[0], &res[0], sizeof(res[0]), -1) == 0);
	}
	for (int i = 0; i < n; i++)
		if (ps[i].pid < 0)
			return;
	CHECK_EQ_INT(t_proc_reap(ps, n, 200000), n);
	for (int i = 0; i < n; i++) {
		struct result *r = &res[i];

		if (ps[i].res_got != sizeof(*r))
			r->setup_failed = ps[i].res_got ? 3 : 2;
		CHECK_MSG(!r->setup_failed, "worker %d: setup failed (%d)", i, r->setup_failed);
		tot.ops += r->ops;
		tot.bytes += r->bytes;
		tot.bad_ops += r->bad_ops;
		tot.bad_bytes += r->bad_bytes;
		reports += t_stats_parse(ps[i].err, &c);
	}
	printf("# %s: %llu ops, %llu payload bytes; %llu packets sent, %llu received\n", name,
	       (unsigned long long)tot.ops, (unsigned long long)tot.bytes, c.tx, c.rx);
	printf("# injected: %llu dropped, %llu duplicated, %llu reordered, %llu sends refused; "
	       "recovered by %llu timeout retransmissions and %llu sequence NAKs; %llu "
	       "duplicates seen\n",
	       c.fault_drops, c.fault_dups, c.fault_reorders, c.tx_again, c.retransmits,
	       c.naks_rx[0], c.duplicates);
	CHECK_EQ_INT(reports, n);
	if (!CHECK_EQ_INT(tot.ops, nops) || tot.bad_ops)
		for (int i = 0; i < n; i++)
			printf("# worker %d counters:\n%s", i, ps[i].err);
	CHECK_MSG(tot.bad_ops == 0 && tot.bad_bytes == 0, "%llu operations and %llu bytes wrong",
		  (unsigned long long)tot.bad_ops, (unsigned long long)tot.bad_bytes);
	if (expect & EXPECT_LOSS) {
		CHECK_MSG(c.fault_drops > 0, "no packet was dropped");
		CHECK_MSG(c.retransmits + c.naks_rx[0] > 0, "nothing was retransmitted");
	}
	if (expect & EXPECT_DUP)
		CHECK_MSG(c.fault_dups > 0 && c.duplicates > 0, "no duplicate was sent and seen");
	if (expect & EXPECT_AGAIN)
		CHECK_MSG(c.tx_again > 0, "no send was refused");
	/*
	 * Recovery resends little: a lost READ response used to make every
	 * response behind it ask again, and each request resent the rest of
	 * the READ (five times the packets the plan needs at 5% loss). Since
	 * the window no longer falls below one message, go-back-N resends a
	 * little more at 5% loss each way: 3.1-3.3 times the plan, with ACKs.
	 */
	CHECK_MSG(c.tx < 4 * plan_packets(), "%llu packets sent for a plan of %llu: a storm", c.tx,
		  plan_packets());
	for (int i = 0; i < n; i++)
		t_proc_free(&ps[i]);
}

int main(void)
{
	const char *pre = getenv("LD_PRELOAD");

	t_start("api_fault_injection");
	if (pre && strstr(pre, "vgpreload"))
		nops = 400; /* valgrind: the same paths, fewer operations */
	if (getenv("FI_ONLY"))
		only = atoi(getenv("FI_ONLY"));
	if (getenv("FI_OPS"))
		nops = (uint32_t)atoi(getenv("FI_OPS"));
	scenario("one process, drop 3% dup 1% reorder 1% on both sides",
		 "drop=0.03,dup=0.01,reorder=0.01,side=both,seed=11", NULL,
		 EXPECT_LOSS | EXPECT_DUP);
	scenario("two processes, initiator tx drop 2% dup 2%, target rx drop 2%",
		 "drop=0.02,dup=0.02,side=tx,seed=12", "drop=0.02,side=rx,seed=13",
		 EXPECT_LOSS | EXPECT_DUP);
	scenario("two processes, drop 5% dup 1% on both sides of both",
		 "drop=0.05,dup=0.01,side=both,seed=14", "drop=0.05,dup=0.01,side=both,seed=15",
		 EXPECT_LOSS | EXPECT_DUP);
	scenario("two processes, drop 2% reorder 2% on both sides of both",
		 "drop=0.02,reorder=0.02,side=both,seed=16",
		 "drop=0.02,reorder=0.02,side=both,seed=17", EXPECT_LOSS);
	scenario("two processes, 10% of sends find the socket full", "again=0.1,side=tx,seed=18",
		 "again=0.1,side=tx,seed=19", EXPECT_AGAIN);
	return t_finish();
}
