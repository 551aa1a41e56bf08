/* SPDX-License-Identifier: MIT */
/*
 * api_load_qps: hundreds of RC QPs across several processes at once.
 *
 * NPROC processes (4) each open the device and create NQP (128) RC QPs,
 * spread over 4 CQs. QP j < NQP/2 of process p is connected to QP
 * j + NQP/2 of process (p + 1) % NPROC, so every process talks to two
 * others and every QP has its peer in another process: 512 QPs, 256
 * connections. Every QP runs its own plan of NOPS operations towards its
 * peer (RDMA WRITE, RDMA READ, SEND, fetch-and-add and compare-and-swap,
 * 1 byte to 4 KiB so that many span several packets), 4 in flight,
 * all signalled, while it serves its peer's plan. Checked:
 *
 *   - every completion is successful and in order, on the right QP;
 *   - READ data against the peer's patterned area, as each completes;
 *   - every fetched atomic value against a replay of the plan;
 *   - every SEND, on receipt and in order, against the sender's pattern;
 *   - after a barrier, each WRITE area against a replay of the peer's
 *     WRITEs and each atomic word against the replay of its atomics.
 *
 * The parent process only relays addresses and barriers. Each process
 * reports how long its slowest and fastest QP took (progress-thread
 * fairness). SV_LOAD_QPS and SV_LOAD_NOPS change NQP (even, at most
 * 1024) and NOPS, SV_LOAD_DEPTH (at most 16) and SV_LOAD_MAXLEN (at most
 * 12288) the operations in flight per QP and the largest message.
 * tests/CMakeLists.txt runs it once more at 1024 QPs per process, over
 * UDP and over the same-host link, at 4 x 4 KiB and 8 x 12 KiB in flight
 * (api_load_qps_1024_*): every operation must complete successfully.
 */
#include "harness.h"
#include "traffic.h"

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
/* test: env=SOFTVERBS_UDP_PORT=4794 */

#define NPROC 4
#define MAX_QP 1024
#define NCQ 4
#define MAX_DEPTH 16
#define SLOT (12u * 1024)
#define W_LEN (32u * 1024)
#define R_LEN (16u * 1024)
#define RQD 16
#define ACC                                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* Per-QP buffer: local slots, WRITE area, READ area, receive slots, atomic word. */
#define L_OFF 0u
#define W_OFF (L_OFF + MAX_DEPTH * SLOT)
#define R_OFF (W_OFF + W_LEN)
#define V_OFF (R_OFF + R_LEN)
#define A_OFF (V_OFF + RQD * SLOT)
#define BUF_LEN (A_OFF + 8)

enum {
	OP_WRITE,
	OP_READ,
	OP_SEND,
	OP_FAA,
	OP_CAS
};

struct op {
	uint8_t type;
	bool cas_hit;
	uint32_t len, roff;
	uint64_t arg;
};

/*
 * Per QP in flight and the largest message. Four and 4 KiB in make check:
 * 8 and 12 KiB overflowed the receiving sockets of a loaded machine into
 * IBV_WC_RETRY_EXC_ERR before the retransmit timer backed off.
 */
static uint32_t nqp = 128, nops = 100, depth = 4, maxlen = 4096;

/* Operation i of global QP g (the same in every process). */
static struct op plan(uint32_t g, uint32_t i)
{
	uint64_t x = ((uint64_t)g << 32 | i) * 0x9E3779B97F4A7C15ull;
	struct op o = {0};
	uint32_t r;

	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	r = (uint32_t)(x % 100);
	o.type = r < 35 ? OP_WRITE : r < 55 ? OP_READ : r < 80 ? OP_SEND : r < 92 ? OP_FAA : OP_CAS;
	x >>= 7;
	o.len = 1 + (uint32_t)(x >> 2) % ((x & 3) && maxlen > 1500 ? 1500 : maxlen);
	if (o.type == OP_WRITE)
		o.roff = (uint32_t)(x >> 20) % (W_LEN - o.len + 1);
	if (o.type == OP_READ)
		o.roff = (uint32_t)(x >> 20) % (R_LEN - o.len + 1);
	if (o.type >= OP_FAA) {
		o.len = 8;
		o.arg = (x >> 24) & 0xffffff;
		o.cas_hit = (x >> 50) & 1;
	}
	return o;
}

static unsigned int seed_of(uint32_t g, uint32_t i)
{
	return g * 65536u + i;
}

/* Initial value of the atomic word in the buffer of global QP g. */
static uint64_t word_init(uint32_t g)
{
	return 1000ull * g + 1;
}

/*
 * QP g's plan run on a word starting at `v`: what each of its atomics
 * fetches (into fetch[i], if given) and the word's final value.
 */
static uint64_t atomic_replay(uint32_t g, uint64_t v, uint64_t *fetch)
{
	for (uint32_t i = 0; i < nops; i++) {
		struct op o = plan(g, i);

		if (o.type < OP_FAA)
			continue;
		if (fetch)
			fetch[i] = v;
		if (o.type == OP_FAA)
			v += o.arg;
		else if (o.cas_hit)
			v = o.arg;
	}
	return v;
}

struct qp_ep {
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	uint32_t g, peer_g; /* global ids: process * nqp + index */
	struct t_addr peer; /* traffic.h */
	uint32_t posted, done, recvs, next_send;
	uint64_t *fetch;
	uint64_t t_done; /* ms at which its plan completed */
};

struct proc {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq[NCQ];
	struct qp_ep *q;
	uint32_t p;
	uint64_t bad_ops, bad_bytes, ops, bytes;
};

/* Results the children leave in shared memory. */
struct result {
	uint64_t ops, bytes, bad_ops, bad_bytes, ms_min, ms_max;
	int ok;
};

static struct result *res;

static int proc_open(struct proc *s)
{
	struct ibv_qp_init_attr ia = {0};
	union ibv_gid gid;

	s->ctx = t_open_dev();
	if (!CHECK(s->ctx))
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	if (!CHECK(s->pd) || !CHECK(ibv_query_gid(s->ctx, 1, 0, &gid) == 0))
		return -1;
	for (int c = 0; c < NCQ; c++) {
		s->cq[c] = ibv_create_cq(s->ctx, (int)((nqp / NCQ + 1) * (depth + RQD) + 64), NULL,
					 NULL, 0);
		if (!CHECK(s->cq[c]))
			return -1;
	}
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = depth;
	ia.cap.max_recv_wr = RQD;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	for (uint32_t j = 0; j < nqp; j++) {
		struct qp_ep *e = &s->q[j];

		e->g = s->p * nqp + j;
		e->peer_g = j < nqp / 2 ? ((s->p + 1) % NPROC) * nqp + j + nqp / 2 :
					  ((s->p + NPROC - 1) % NPROC) * nqp + j - nqp / 2;
		e->buf = aligned_alloc(4096, (BUF_LEN + 4095) & ~4095u);
		e->fetch = calloc(nops, sizeof(*e->fetch));
		if (!CHECK(e->buf && e->fetch))
			return -1;
		memset(e->buf, 0, BUF_LEN);
		t_fill(e->buf + R_OFF, R_LEN, e->g);
		atomic_replay(e->g, word_init(e->peer_g), e->fetch);
		{
			uint64_t v = word_init(e->g);

			memcpy(e->buf + A_OFF, &v, 8);
		}
		e->mr = ibv_reg_mr(s->pd, e->buf, BUF_LEN, ACC);
		ia.send_cq = ia.recv_cq = s->cq[j % NCQ];
		e->qp = ibv_create_qp(s->pd, &ia);
		if (!CHECK(e->mr && e->qp) || t_qp_init(e->qp, ACC))
			return -1;
		for (uint32_t r = 0; r < RQD; r++) {
			struct ibv_sge sge = {(uintptr_t)e->buf + V_OFF + r * SLOT, SLOT,
					      e->mr->lkey};
			struct ibv_recv_wr wr = {.wr_id = r, .sg_list = &sge, .num_sge = 1}, *bad;

			if (!CHECK_RET(ibv_post_recv(e->qp, &wr, &bad), 0))
				return -1;
		}
	}
	return 0;
}

static void proc_close(struct proc *s)
{
	for (uint32_t j = 0; s->q && j < nqp; j++) {
		struct qp_ep *e = &s->q[j];

		if (e->qp)
			CHECK_RET(ibv_destroy_qp(e->qp), 0);
		if (e->mr)
			CHECK_RET(ibv_dereg_mr(e->mr), 0);
		free(e->buf);
		free(e->fetch);
	}
	for (int c = 0; c < NCQ; c++)
		if (s->cq[c])
			CHECK_RET(ibv_destroy_cq(s->cq[c]), 0);
	if (s->pd)
		CHECK_RET(ibv_dealloc_pd(s->pd), 0);
	if (s->ctx)
		ibv_close_device(s->ctx);
}

static void bad(struct proc *s, const struct qp_ep *e, uint32_t i, const char *what)
{
	if (s->bad_ops++ < 10)
		printf("# process %u QP %u op %u: %s\n", s->p, e->g, i, what);
}

static int post_next(struct qp_ep *e)
{
	uint32_t i = e->posted;
	struct op o = plan(e->g, i);
	uint8_t *slot = e->buf + L_OFF + (i % depth) * SLOT;
	struct ibv_sge sge = {(uintptr_t)slot, o.len, e->mr->lkey};
	struct ibv_send_wr wr = {0}, *badwr;

	wr.wr_id = i;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.rkey = e->peer.rkey;
	switch (o.type) {
	case OP_WRITE:
	case OP_SEND:
		t_fill(slot, o.len, seed_of(e->g, i));
		wr.opcode = o.type == OP_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_SEND;
		wr.wr.rdma.remote_addr = e->peer.addr + W_OFF + o.roff;
		break;
	case OP_READ:
		memset(slot, 0, o.len);
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = e->peer.addr + R_OFF + o.roff;
		break;
	default:
		memset(slot, 0xee, 8);
		wr.wr.atomic.remote_addr = e->peer.addr + A_OFF;
		wr.wr.atomic.rkey = e->peer.rkey;
		if (o.type == OP_FAA) {
			wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr.wr.atomic.compare_add = o.arg;
		} else {
			wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
			wr.wr.atomic.compare_add = e->fetch[i] + !o.cas_hit;
			wr.wr.atomic.swap = o.arg;
		}
		break;
	}
	if (!CHECK_RET(ibv_post_send(e->qp, &wr, &badwr), 0))
		return -1;
	e->posted++;
	return 0;
}

/* A send-side completion: operation e->done, checked. */
static void send_done(struct proc *s, struct qp_ep *e, const struct ibv_wc *wc, uint8_t *tmp)
{
	uint32_t i = e->done++;
	struct op o = plan(e->g, i);
	const uint8_t *slot = e->buf + L_OFF + (i % depth) * SLOT;

	if (wc->wr_id != i) {
		bad(s, e, i, "completion out of order");
		return;
	}
	s->ops++;
	s->bytes += o.len;
	if (o.type == OP_READ) {
		uint64_t wrong = 0;

		t_fill(tmp, o.roff + o.len, e->peer_g);
		for (uint32_t k = 0; k < o.len; k++)
			wrong += slot[k] != tmp[o.roff + k];
		if (wrong) {
			s->bad_bytes += wrong;
			bad(s, e, i, "READ data wrong");
		}
	} else if (o.type >= OP_FAA) {
		uint64_t v;

		memcpy(&v, slot, 8);
		if (v != e->fetch[i])
			bad(s, e, i, "atomic fetched a wrong value");
	}
}

/* A receive completion: the peer's next SEND, checked, and the receive posted again. */
static int recv_done(struct proc *s, struct qp_ep *e, const struct ibv_wc *wc, uint8_t *tmp)
{
	const uint8_t *got = e->buf + V_OFF + (wc->wr_id % RQD) * SLOT;
	struct ibv_sge sge = {(uintptr_t)got, SLOT, e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wc->wr_id + RQD, .sg_list = &sge, .num_sge = 1}, *badwr;
	struct op o;

	while (e->next_send < nops && plan(e->peer_g, e->next_send).type != OP_SEND)
		e->next_send++;
	o = plan(e->peer_g, e->next_send);
	if (wc->wr_id != e->recvs++ || e->next_send >= nops || wc->byte_len != o.len) {
		bad(s, e, e->next_send, "receive out of order or of the wrong length");
	} else {
		t_fill(tmp, o.len, seed_of(e->peer_g, e->next_send));
		if (memcmp(tmp, got, o.len)) {
			s->bad_bytes += o.len;
			bad(s, e, e->next_send, "SEND data wrong");
		}
	}
	e->next_send++;
	return CHECK_RET(ibv_post_recv(e->qp, &wr, &badwr), 0) ? 0 : -1;
}

/* SENDs in QP g's plan. */
static uint32_t sends_of(uint32_t g)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < nops; i++)
		n += plan(g, i).type == OP_SEND;
	return n;
}

static int run(struct proc *s)
{
	uint8_t *tmp = malloc(SLOT + R_LEN);
	uint64_t start = t_ms(), last = start;
	uint32_t busy = nqp * 2; /* plans to finish + peers' SENDs to receive */
	uint32_t *want_recv = calloc(nqp, sizeof(*want_recv));
	int ret = -1;

	if (!CHECK(tmp && want_recv))
		goto out;
	for (uint32_t j = 0; j < nqp; j++) {
		want_recv[j] = sends_of(s->q[j].peer_g);
		busy -= !want_recv[j];
	}
	while (busy) {
		int progress = 0;

		for (uint32_t j = 0; j < nqp; j++) {
			struct qp_ep *e = &s->q[j];

			while (e->posted < nops && e->posted - e->done < depth)
				if (post_next(e))
					goto out;
		}
		for (int c = 0; c < NCQ; c++) {
			struct ibv_wc wc[32];
			int n = ibv_poll_cq(s->cq[c], 32, wc);

			for (int k = 0; k < n; k++) {
				uint32_t j;
				struct qp_ep *e = NULL;

				for (j = (uint32_t)c; j < nqp; j += NCQ)
					if (s->q[j].qp->qp_num == wc[k].qp_num) {
						e = &s->q[j];
						break;
					}
				if (!e || wc[k].status != IBV_WC_SUCCESS) {
					printf("# process %u: completion on qpn 0x%x: %s\n", s->p,
					       wc[k].qp_num, ibv_wc_status_str(wc[k].status));
					s->bad_ops++;
					goto out;
				}
				progress = 1;
				if (wc[k].opcode & IBV_WC_RECV) {
					if (recv_done(s, e, &wc[k], tmp))
						goto out;
					busy -= e->recvs == want_recv[j];
					continue;
				}
				send_done(s, e, &wc[k], tmp);
				if (e->done == nops) {
					e->t_done = t_ms() - start;
					busy--;
				}
			}
		}
		if (progress) {
			last = t_ms();
		} else if (t_ms() - last > 60000) {
			printf("# process %u: no progress for 60 s\n", s->p);
			for (uint32_t j = 0; j < nqp; j++)
				if (s->q[j].done < nops || s->q[j].recvs < want_recv[j])
					printf("#   QP %u: posted %u done %u, received %u of %u\n",
					       s->q[j].g, s->q[j].posted, s->q[j].done,
					       s->q[j].recvs, want_recv[j]);
			s->bad_ops++;
			goto out;
		}
	}
	ret = 0;
out:
	free(tmp);
	free(want_recv);
	return ret;
}

/* After every process finished: the WRITE areas and atomic words. */
static void check_targets(struct proc *s)
{
	uint8_t *img = malloc(W_LEN);

	if (!CHECK(img))
		goto out;
	for (uint32_t j = 0; j < nqp; j++) {
		struct qp_ep *e = &s->q[j];
		uint64_t v, wrong = 0;

		memset(img, 0, W_LEN);
		for (uint32_t i = 0; i < nops; i++) {
			struct op o = plan(e->peer_g, i);

			if (o.type == OP_WRITE)
				t_fill(img + o.roff, o.len, seed_of(e->peer_g, i));
		}
		for (uint32_t k = 0; k < W_LEN; k++)
			wrong += img[k] != e->buf[W_OFF + k];
		if (wrong) {
			s->bad_bytes += wrong;
			bad(s, e, nops, "WRITE area wrong");
		}
		memcpy(&v, e->buf + A_OFF, 8);
		if (v != atomic_replay(e->peer_g, word_init(e->g), NULL))
			bad(s, e, nops, "atomic word wrong");
	}
out:
	free(img);
}

/* One process: its QPs, its part of the traffic; talks to the parent over `sock`. */
static int child(uint32_t p, int sock)
{
	struct proc s;
	struct t_addr *all = calloc((size_t)NPROC * nqp, sizeof(*all));
	struct result *r = &res[p];
	char c = 0;

	memset(&s, 0, sizeof(s));
	s.p = p;
	s.q = calloc(nqp, sizeof(*s.q));
	if (!CHECK(all && s.q) || proc_open(&s))
		goto out;
	for (uint32_t j = 0; j < nqp; j++) {
		union ibv_gid gid;

		if (!CHECK(ibv_query_gid(s.ctx, 1, 0, &gid) == 0))
			goto out;
		all[j].qpn = s.q[j].qp->qp_num;
		all[j].rkey = s.q[j].mr->rkey;
		all[j].addr = (uintptr_t)s.q[j].buf;
		all[j].gid = gid;
	}
	if (!CHECK(t_xfer(sock, all, nqp * sizeof(*all), true) == 0 &&
		   t_xfer(sock, all, (size_t)NPROC * nqp * sizeof(*all), false) == 0))
		goto out;
	for (uint32_t j = 0; j < nqp; j++) {
		struct qp_ep *e = &s.q[j];

		e->peer = all[e->peer_g];
		/* the PSNs: each side's send PSN is the other's receive PSN */
		if (t_qp_rts(e->qp, e->peer.qpn, &e->peer.gid, e->peer_g * 7 + 5, e->g * 7 + 5,
			     IBV_MTU_1024))
			goto out;
	}
	/* barrier: every QP of every process in RTS */
	if (!CHECK(t_xfer(sock, &c, 1, true) == 0 && t_xfer(sock, &c, 1, false) == 0))
		goto out;
	if (run(&s) == 0) {
		/* barrier: every plan complete, so the WRITE areas are final */
		if (CHECK(t_xfer(sock, &c, 1, true) == 0 && t_xfer(sock, &c, 1, false) == 0))
			check_targets(&s);
	}
	r->ms_min = UINT64_MAX;
	for (uint32_t j = 0; j < nqp; j++) {
		uint64_t t = s.q[j].t_done;

		r->ms_min = t < r->ms_min ? t : r->ms_min;
		r->ms_max = t > r->ms_max ? t : r->ms_max;
	}
	r->ok = 1;
out:
	/* keep the QPs until nobody sends to them any more */
	c = 'e';
	t_xfer(sock, &c, 1, true);
	t_xfer(sock, &c, 1, false);
	proc_close(&s);
	free(s.q);
	free(all);
	r->ops = s.ops;
	r->bytes = s.bytes;
	r->bad_ops = s.bad_ops + (uint64_t)t_st()->failed;
	r->bad_bytes = s.bad_bytes;
	fflush(stdout);
	return 0;
}

/* Parent: relay the addresses, then the barriers, until every child closed. */
static void relay(int *sock)
{
	size_t chunk = nqp * sizeof(struct t_addr);
	uint8_t *all = malloc(NPROC * chunk);
	char c;

	if (!CHECK(all))
		return;
	for (int p = 0; p < NPROC; p++)
		if (!CHECK(t_xfer(sock[p], all + p * chunk, chunk, false) == 0))
			goto out;
	for (int p = 0; p < NPROC; p++)
		CHECK(t_xfer(sock[p], all, NPROC * chunk, true) == 0);
	for (;;) {
		int got = 0;

		/* a barrier: one byte from each child, then one to each */
		for (int p = 0; p < NPROC; p++)
			got += t_xfer(sock[p], &c, 1, false) == 0;
		if (got < NPROC)
			break;
		for (int p = 0; p < NPROC; p++)
			t_xfer(sock[p], &c, 1, true);
	}
out:
	free(all);
}

int main(void)
{
	const char *v;
	int sock[NPROC];
	pid_t pid[NPROC];
	uint64_t t0, ops = 0, bytes = 0, bad_ops = 0, bad_bytes = 0;

	t_start("api_load_qps");
	if ((v = getenv("SV_LOAD_QPS")) && atoi(v) >= 2 && atoi(v) <= MAX_QP)
		nqp = (uint32_t)atoi(v) & ~1u;
	if ((v = getenv("SV_LOAD_NOPS")) && atoi(v) > 0)
		nops = (uint32_t)atoi(v);
	if ((v = getenv("SV_LOAD_DEPTH")) && atoi(v) > 0 && atoi(v) <= MAX_DEPTH)
		depth = (uint32_t)atoi(v);
	if ((v = getenv("SV_LOAD_MAXLEN")) && atoi(v) > 0 && atoi(v) <= (int)SLOT)
		maxlen = (uint32_t)atoi(v);
	res = mmap(NULL, NPROC * sizeof(*res), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		   -1, 0);
	if (res == MAP_FAILED)
		t_skip_all("no shared memory");
	memset(res, 0, NPROC * sizeof(*res));
	printf("# %d processes x %u RC QPs, %u operations per QP, %u in flight, 1 to %u bytes\n",
	       NPROC, nqp, nops, depth, maxlen);
	t0 = t_ms();
	fflush(stdout);
	for (uint32_t p = 0; p < NPROC; p++) {
		int sv[2];

		if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0))
			return t_finish();
		pid[p] = fork();
		if (pid[p] == 0) {
			for (uint32_t k = 0; k < p; k++)
				close(sock[k]);
			close(sv[0]);
			_exit(child(p, sv[1]));
		}
		close(sv[1]);
		sock[p] = sv[0];
	}
	relay(sock);
	for (int p = 0; p < NPROC; p++) {
		int st;

		close(sock[p]);
		CHECK(waitpid(pid[p], &st, 0) == pid[p] && WIFEXITED(st) && WEXITSTATUS(st) == 0);
		CHECK_MSG(res[p].ok, "process %d did not finish its part", p);
		ops += res[p].ops;
		bytes += res[p].bytes;
		bad_ops += res[p].bad_ops;
		bad_bytes += res[p].bad_bytes;
		printf("# process %d: %llu operations; its QPs finished after %llu to %llu ms\n", p,
		       (unsigned long long)res[p].ops, (unsigned long long)res[p].ms_min,
		       (unsigned long long)res[p].ms_max);
	}
	t0 = t_ms() - t0;
	printf("# %llu operations, %llu payload bytes in %.1f s; wrong: %llu operations, %llu "
	       "bytes\n",
	       (unsigned long long)ops, (unsigned long long)bytes, t0 / 1000.0,
	       (unsigned long long)bad_ops, (unsigned long long)bad_bytes);
	CHECK_EQ_INT(ops, (long long)NPROC * nqp * nops);
	CHECK_MSG(bad_ops == 0 && bad_bytes == 0, "operations or bytes wrong");
	munmap(res, NPROC * sizeof(*res));
	return t_finish();
}
