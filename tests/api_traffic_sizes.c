/* SPDX-License-Identifier: MIT */
/*
 * api_traffic_sizes.c - the data path under a wide spread of traffic:
 *
 *   - every RC opcode (SEND, SEND_WITH_IMM, RDMA WRITE, WRITE_WITH_IMM,
 *     RDMA READ) at sizes from 0 to several MiB around every multiple of
 *     the path MTU, for each path MTU 256..4096, at odd buffer offsets;
 *     atomics at every MTU; UD SENDs up to the port MTU;
 *   - SGE lists of up to max_sge entries on both sides (SEND, WRITE, READ);
 *   - signalled and unsignalled mixes, and sq_sig_all;
 *   - IBV_SEND_FENCE: a WRITE fenced behind READs / an atomic carries the
 *     data they fetched;
 *   - solicited events: with ibv_req_notify_cq(cq, 1), an unsolicited
 *     SEND raises no completion event, a solicited one does;
 *   - ibv_qp_ex sessions (ibv_wr_start .. ibv_wr_complete) moving data;
 *   - several QPs sharing an SRQ, and the SRQ limit event under traffic;
 *   - CQ overflow under traffic raising IBV_EVENT_CQ_ERR;
 *   - a QP moved to ERR mid-stream: a prefix succeeds, the rest flushes
 *     with IBV_WC_WR_FLUSH_ERR in order; then both QPs work again after
 *     RESET;
 *   - 64 QP pairs moving data at once;
 *   - across two processes (fork): WRITE, READ and atomics at sizes
 *     around the MTU for each MTU while the target makes no verbs call,
 *     SENDs into receives posted beforehand; the target checks every byte
 *     afterwards.
 * Every received byte is compared, and the bytes after each target range
 * must be untouched. Existing single-size cases live in api_rc_ops.c and
 * api_rc_2proc.c; this file sweeps.
 */
#include "harness.h"
#include "traffic.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

/* test: timeout=300 */

#define MiB (1u << 20)
#define ACC_ALL                                                                                    \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

static struct ibv_context *ctx;
static bool under_valgrind;
static uint64_t n_msgs, n_bytes;

static const enum ibv_mtu mtus[] = {IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024, IBV_MTU_2048,
				    IBV_MTU_4096};

static uint32_t mtu_bytes(enum ibv_mtu m)
{
	return 128u << m;
}

/* ---- endpoints ---- */

struct ep {
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	bool own_cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t len;
	bool own_buf;
};

struct ep_opts {
	size_t len; /* buffer bytes (0: use `buf`/`mr` given) */
	int depth; /* send and receive queue depth */
	int cqe; /* 0: 2 * depth */
	uint32_t sge; /* max_send_sge = max_recv_sge (0: 4) */
	bool sig_all;
	bool channel; /* a completion channel for the CQ */
	uint64_t ops; /* ibv_qp_ex send_ops_flags (0: plain ibv_create_qp) */
	struct ibv_srq *srq;
	struct ibv_cq *cq; /* shared CQ */
	struct ibv_pd *pd; /* shared PD */
	struct ibv_mr *mr; /* shared buffer */
	enum ibv_qp_type type;
};

static struct ibv_pd *gpd;

static int ep_init(struct ep *e, const struct ep_opts *o)
{
	struct ibv_qp_init_attr_ex ia;

	memset(e, 0, sizeof(*e));
	e->pd = o->pd ? o->pd : gpd;
	if (o->channel) {
		e->ch = ibv_create_comp_channel(ctx);
		if (!CHECK(e->ch))
			return -1;
	}
	if (o->cq) {
		e->cq = o->cq;
	} else {
		e->cq = ibv_create_cq(ctx, o->cqe ? o->cqe : 2 * o->depth, NULL, e->ch, 0);
		e->own_cq = true;
		if (!CHECK(e->cq))
			return -1;
	}
	if (o->mr) {
		e->mr = o->mr;
		e->buf = o->mr->addr;
		e->len = o->mr->length;
	} else {
		e->len = o->len;
		e->buf = aligned_alloc(4096, (o->len + 4095) & ~(size_t)4095);
		e->own_buf = true;
		if (!CHECK(e->buf))
			return -1;
		memset(e->buf, 0, o->len);
		e->mr = ibv_reg_mr(e->pd, e->buf, o->len, ACC_ALL);
		if (!CHECK(e->mr))
			return -1;
	}
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->cq;
	ia.recv_cq = e->cq;
	ia.srq = o->srq;
	ia.qp_type = o->type ? o->type : IBV_QPT_RC;
	ia.sq_sig_all = o->sig_all;
	ia.cap.max_send_wr = (uint32_t)o->depth;
	ia.cap.max_recv_wr = o->srq ? 0 : (uint32_t)o->depth;
	ia.cap.max_send_sge = o->sge ? o->sge : 4;
	ia.cap.max_recv_sge = o->srq ? 0 : (o->sge ? o->sge : 4);
	ia.cap.max_inline_data = 64;
	ia.pd = e->pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	if (o->ops) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ia.send_ops_flags = o->ops;
	}
	errno = 0;
	e->qp = ibv_create_qp_ex(ctx, &ia);
	if (!CHECK_MSG(e->qp, "ibv_create_qp_ex: %s", t_errname(errno)))
		return -1;
	if (o->ops) {
		e->qpx = ibv_qp_to_qp_ex(e->qp);
		if (!CHECK(e->qpx))
			return -1;
	}
	if (o->sge)
		CHECK_MSG(ia.cap.max_send_sge >= o->sge, "granted %u SGEs", ia.cap.max_send_sge);
	return t_qp_init(e->qp, ACC_ALL);
}

static void ep_fini(struct ep *e)
{
	if (e->qp)
		CHECK_RET(ibv_destroy_qp(e->qp), 0);
	if (e->own_buf) {
		if (e->mr)
			CHECK_RET(ibv_dereg_mr(e->mr), 0);
		free(e->buf);
	}
	if (e->own_cq && e->cq)
		CHECK_RET(ibv_destroy_cq(e->cq), 0);
	if (e->ch)
		CHECK_RET(ibv_destroy_comp_channel(e->ch), 0);
	memset(e, 0, sizeof(*e));
}

static union ibv_gid gid;

static int ep_connect(struct ep *a, struct ep *b, enum ibv_mtu mtu)
{
	if (t_qp_rts(a->qp, b->qp->qp_num, &gid, 0xfffffa, 17, mtu)) /* b's PSNs wrap */
		return -1;
	return t_qp_rts(b->qp, a->qp->qp_num, &gid, 17, 0xfffffa, mtu);
}

static int post(struct ep *e, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int ret = ibv_post_send(e->qp, wr, &bad);

	return CHECK_MSG(ret == 0, "ibv_post_send: %s", t_errname(ret)) ? 0 : -1;
}

static int post1(struct ep *e, enum ibv_wr_opcode op, uint64_t wr_id, uint8_t *src, uint32_t len,
		 uint64_t raddr, uint32_t rkey, unsigned int flags, uint32_t imm)
{
	struct ibv_sge sge = {(uintptr_t)src, len, e->mr->lkey};
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	n_msgs++;
	n_bytes += len;
	return post(e, &wr);
}

static int recv1(struct ep *e, uint64_t wr_id, uint8_t *dst, uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)dst, len, e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = len ? 1 : 0}, *bad;
	int ret = ibv_post_recv(e->qp, &wr, &bad);

	return CHECK_MSG(ret == 0, "ibv_post_recv: %s", t_errname(ret)) ? 0 : -1;
}

/* Exactly one successful completion, or a failed check. */
static int wait1(struct ibv_cq *cq, struct ibv_wc *wc, const char *what)
{
	if (!CHECK_MSG(t_poll(cq, wc, 1, 10000) == 1, "%s: no completion", what))
		return -1;
	return CHECK_MSG(wc->status == IBV_WC_SUCCESS, "%s: %s", what,
			 ibv_wc_status_str(wc->status)) ?
		       0 :
		       -1;
}

/* First differing byte of `got` against the pattern, or -1. */
static long pattern_diff(const uint8_t *got, size_t n, unsigned int seed)
{
	static uint8_t *want;
	static size_t cap;

	if (!n)
		return -1;
	if (n > cap) {
		free(want);
		want = malloc(n);
		cap = want ? n : 0;
		if (!want)
			return 0;
	}
	t_fill(want, n, seed);
	if (!memcmp(got, want, n))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i])
			return (long)i;
	return 0;
}

/* ---- sizes x MTUs x opcodes ---- */

#define SZ_BUF (8u * MiB)
#define CANARY 0x5a

static uint32_t sizes_for(uint32_t m, uint32_t *s)
{
	uint32_t n = 0;

	s[n++] = 0;
	s[n++] = 1;
	s[n++] = m - 1;
	s[n++] = m;
	s[n++] = m + 1;
	s[n++] = 2 * m - 1;
	s[n++] = 2 * m;
	s[n++] = 2 * m + 1;
	s[n++] = 7 * m + 13;
	s[n++] = 65536 + 3;
	if (!under_valgrind || m == 4096) {
		s[n++] = MiB - 1;
		s[n++] = 3 * MiB + 5; /* several MiB: thousands of packets at MTU 256 */
	}
	return n;
}

static void sweep_one(struct ep *a, struct ep *b, enum ibv_wr_opcode op, uint32_t n, uint32_t mtu,
		      unsigned int seed)
{
	/* odd offsets: the data is not aligned on either side */
	size_t soff = 3 + (n % 61), roff = 5 + (n % 53);
	bool imm = op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
	bool recv = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || imm;
	uint8_t *dst, *src;
	struct ibv_wc wc;
	long bad;

	if (op == IBV_WR_RDMA_READ) { /* a reads b's pattern */
		src = b->buf + roff;
		dst = a->buf + soff;
	} else {
		src = a->buf + soff;
		dst = b->buf + roff;
	}
	t_fill(src, n, seed);
	memset(dst, CANARY, n + 64);
	if (recv && recv1(b, 7, dst, op == IBV_WR_RDMA_WRITE_WITH_IMM ? 0 : n + 64))
		return;
	if (op == IBV_WR_RDMA_READ) {
		if (post1(a, op, 1, dst, n, (uintptr_t)src, b->mr->rkey, IBV_SEND_SIGNALED, 0))
			return;
	} else if (post1(a, op, 1, src, n, (uintptr_t)dst, b->mr->rkey, IBV_SEND_SIGNALED,
			 0x1000000u + n)) {
		return;
	}
	if (wait1(a->cq, &wc, "requester"))
		return;
	if (op == IBV_WR_RDMA_READ)
		CHECK_EQ_INT(wc.byte_len, n);
	if (recv) {
		if (wait1(b->cq, &wc, "responder"))
			return;
		CHECK_EQ_INT(wc.byte_len, n);
		CHECK_EQ_INT(!!(wc.wc_flags & IBV_WC_WITH_IMM), imm);
		if (imm)
			CHECK_EQ_INT(ntohl(wc.imm_data), 0x1000000u + n);
		CHECK(wc.opcode ==
		      (op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV));
	}
	bad = pattern_diff(dst, n, seed);
	CHECK_MSG(bad < 0, "op %d, %u bytes, MTU %u: byte %ld differs", op, n, mtu, bad);
	for (int i = 0; i < 64; i++)
		if (!CHECK_MSG(dst[n + (size_t)i] == CANARY,
			       "op %d, %u bytes, MTU %u: wrote past "
			       "the end (+%d)",
			       op, n, mtu, i))
			break;
}

static void case_sizes(void)
{
	static const enum ibv_wr_opcode ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
						 IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
						 IBV_WR_RDMA_READ};
	struct ep_opts o = {.len = SZ_BUF, .depth = 8};
	struct ep a, b;
	uint32_t s[16];

	t_case("every opcode at sizes across the MTU, for each path MTU 256..4096");
	if (ep_init(&a, &o) || ep_init(&b, &o))
		goto out;
	for (size_t k = 0; k < SV_ARRAY_N(mtus); k++) {
		uint32_t m = mtu_bytes(mtus[k]), ns = sizes_for(m, s);
		struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};

		if (k && (!CHECK_RET(ibv_modify_qp(a.qp, &reset, IBV_QP_STATE), 0) ||
			  !CHECK_RET(ibv_modify_qp(b.qp, &reset, IBV_QP_STATE), 0) ||
			  t_qp_init(a.qp, ACC_ALL) || t_qp_init(b.qp, ACC_ALL)))
			break;
		if (ep_connect(&a, &b, mtus[k]))
			break;
		for (size_t o2 = 0; o2 < SV_ARRAY_N(ops); o2++)
			for (uint32_t i = 0; i < ns; i++)
				sweep_one(&a, &b, ops[o2], s[i], m,
					  (unsigned int)(k * 1000 + o2 * 50 + i));
		/* atomics at this MTU: CAS then FAA on an 8-aligned word of b */
		{
			uint64_t *word = (uint64_t *)(void *)(b.buf + 4096), got;
			struct ibv_send_wr wr;
			struct ibv_sge sge = {(uintptr_t)a.buf, 8, a.mr->lkey};
			struct ibv_wc wc;

			*word = 1000 + k;
			memset(&wr, 0, sizeof(wr));
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
			wr.wr.atomic.remote_addr = (uintptr_t)word;
			wr.wr.atomic.rkey = b.mr->rkey;
			wr.wr.atomic.compare_add = 1000 + k;
			wr.wr.atomic.swap = 77;
			if (!post(&a, &wr) && !wait1(a.cq, &wc, "cmp-and-swap")) {
				memcpy(&got, a.buf, 8);
				CHECK_EQ_INT(got, 1000 + k);
				CHECK_EQ_INT(*word, 77);
			}
			wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr.wr.atomic.compare_add = 23;
			if (!post(&a, &wr) && !wait1(a.cq, &wc, "fetch-and-add")) {
				memcpy(&got, a.buf, 8);
				CHECK_EQ_INT(got, 77);
				CHECK_EQ_INT(*word, 100);
			}
		}
	}
out:
	ep_fini(&a);
	ep_fini(&b);
}

/* UD SENDs at sizes up to the port's MTU, payload after the 40-byte GRH. */
static void case_ud_sizes(void)
{
	struct ep_opts o = {.len = 3 * 4096 + 128, .depth = 8, .type = IBV_QPT_UD};
	struct ibv_port_attr pa;
	struct ep a, b;
	struct ibv_ah *ah = NULL;
	struct ibv_ah_attr aa = t_ah_attr(&gid);

	t_case("UD SEND at sizes up to the port MTU");
	if (!CHECK_RET(ibv_query_port(ctx, 1, &pa), 0) || ep_init(&a, &o) || ep_init(&b, &o) ||
	    t_qp_rts(a.qp, 0, NULL, 0, 0, pa.active_mtu) ||
	    t_qp_rts(b.qp, 0, NULL, 0, 0, pa.active_mtu))
		goto out;
	ah = ibv_create_ah(gpd, &aa);
	if (!CHECK(ah))
		goto out;
	for (uint32_t m = 256; m <= mtu_bytes(pa.active_mtu); m *= 2) {
		uint32_t sz[] = {0, 1, m - 1, m};

		for (size_t i = 0; i < SV_ARRAY_N(sz); i++) {
			uint32_t n = sz[i];
			struct ibv_sge sge = {(uintptr_t)a.buf + 8, n, a.mr->lkey};
			struct ibv_send_wr wr = {.wr_id = n,
						 .sg_list = &sge,
						 .num_sge = n ? 1 : 0,
						 .opcode = IBV_WR_SEND,
						 .send_flags = IBV_SEND_SIGNALED};
			struct ibv_wc wc;
			long bad;

			wr.wr.ud.ah = ah;
			wr.wr.ud.remote_qpn = b.qp->qp_num;
			wr.wr.ud.remote_qkey = 0x11111111;
			t_fill(a.buf + 8, n, n);
			memset(b.buf, CANARY, n + 40 + 64);
			if (recv1(&b, n, b.buf, n + 40) || post(&a, &wr) ||
			    wait1(a.cq, &wc, "UD send") || wait1(b.cq, &wc, "UD recv"))
				goto out;
			n_msgs++;
			n_bytes += n;
			CHECK_EQ_INT(wc.byte_len, n + 40);
			CHECK(wc.src_qp == a.qp->qp_num && (wc.wc_flags & IBV_WC_GRH));
			bad = pattern_diff(b.buf + 40, n, n);
			CHECK_MSG(bad < 0, "UD %u bytes: byte %ld differs", n, bad);
			CHECK(b.buf[n + 40] == CANARY);
		}
	}
out:
	if (ah)
		CHECK_RET(ibv_destroy_ah(ah), 0);
	ep_fini(&a);
	ep_fini(&b);
}

/* ---- SGE lists ---- */

/* `n` SGEs over `base` with irregular lengths summing to `total`, at gaps. */
static uint32_t make_sgl(struct ibv_sge *sg, uint32_t n, uint8_t *base, uint32_t lkey,
			 uint32_t total, unsigned int salt)
{
	uint32_t left = total, off = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t len = i == n - 1 ? left : (total / n) + ((i * 37 + salt) % 97) - 48;

		if (len > left)
			len = left;
		sg[i].addr = (uintptr_t)base + off;
		sg[i].length = len;
		sg[i].lkey = lkey;
		off += len + 1 + (i % 5); /* a gap the data must skip */
		left -= len;
	}
	return off;
}

/* Concatenate an SGE list's bytes. */
static void sgl_collect(const struct ibv_sge *sg, uint32_t n, uint8_t *out)
{
	for (uint32_t i = 0; i < n; i++) {
		memcpy(out, (const void *)(uintptr_t)sg[i].addr, sg[i].length);
		out += sg[i].length;
	}
}

static void case_sge_lists(void)
{
	struct ibv_device_attr da;
	struct ep a, b;
	struct ep_opts o = {.len = 4 * MiB, .depth = 8};
	struct ibv_sge ss[64], rs[64];
	uint8_t *flat = malloc(MiB);
	struct ibv_wc wc;

	t_case("SGE lists of up to max_sge entries: SEND, WRITE, READ across packets");
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (!CHECK(flat) || !CHECK_RET(ibv_query_device(ctx, &da), 0))
		goto out;
	o.sge = (uint32_t)da.max_sge < 64 ? (uint32_t)da.max_sge : 64;
	if (ep_init(&a, &o) || ep_init(&b, &o) || ep_connect(&a, &b, IBV_MTU_1024))
		goto out;
	for (uint32_t nsge = 1; nsge <= o.sge;
	     nsge = nsge < o.sge && nsge * 2 > o.sge ? o.sge : nsge * 2) {
		uint32_t total = 300 * nsge + 5000; /* crosses 1 KiB packets inside SGEs */
		struct ibv_send_wr wr;
		struct ibv_recv_wr rwr, *rbad;
		long bad;

		/* SEND: nsge gather entries into a receive of o.sge scatter entries */
		make_sgl(ss, nsge, a.buf, a.mr->lkey, total, nsge);
		make_sgl(rs, o.sge, b.buf, b.mr->lkey, total, nsge + 3);
		for (uint32_t i = 0; i < nsge; i++)
			t_fill((uint8_t *)(uintptr_t)ss[i].addr, ss[i].length, nsge * 100 + i);
		memset(b.buf, 0, MiB);
		memset(&rwr, 0, sizeof(rwr));
		rwr.sg_list = rs;
		rwr.num_sge = (int)o.sge;
		CHECK_RET(ibv_post_recv(b.qp, &rwr, &rbad), 0);
		memset(&wr, 0, sizeof(wr));
		wr.sg_list = ss;
		wr.num_sge = (int)nsge;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		if (post(&a, &wr) || wait1(a.cq, &wc, "sgl send") || wait1(b.cq, &wc, "sgl recv"))
			goto out;
		CHECK_EQ_INT(wc.byte_len, total);
		{
			uint8_t *x = malloc(total), *y = malloc(total);

			if (CHECK(x && y)) {
				sgl_collect(ss, nsge, x);
				sgl_collect(rs, o.sge, y);
				CHECK_MSG(!memcmp(x, y, total), "SEND with %u SGEs: data differs",
					  nsge);
			}
			free(x);
			free(y);
		}
		/* WRITE: nsge gather entries to one contiguous remote range */
		memset(b.buf + 2 * MiB, 0, total + 16);
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = (uintptr_t)b.buf + 2 * MiB;
		wr.wr.rdma.rkey = b.mr->rkey;
		if (post(&a, &wr) || wait1(a.cq, &wc, "sgl write"))
			goto out;
		sgl_collect(ss, nsge, flat);
		CHECK_MSG(!memcmp(flat, b.buf + 2 * MiB, total) && b.buf[2 * MiB + total] == 0,
			  "WRITE with %u SGEs: data differs", nsge);
		/* READ: one contiguous remote range into nsge scatter entries */
		t_fill(b.buf + 3 * MiB, total, nsge + 9);
		make_sgl(ss, nsge, a.buf + MiB, a.mr->lkey, total, nsge + 7);
		memset(a.buf + MiB, 0, MiB);
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = (uintptr_t)b.buf + 3 * MiB;
		if (post(&a, &wr) || wait1(a.cq, &wc, "sgl read"))
			goto out;
		sgl_collect(ss, nsge, flat);
		bad = pattern_diff(flat, total, nsge + 9);
		CHECK_MSG(bad < 0, "READ with %u SGEs: byte %ld differs", nsge, bad);
		n_msgs += 3;
		n_bytes += 3ull * total;
		if (nsge == o.sge)
			break;
	}
out:
	free(flat);
	ep_fini(&a);
	ep_fini(&b);
}

/* ---- signalled / unsignalled ---- */

static void case_signalled(void)
{
	struct ep_opts o = {.len = 2 * MiB, .depth = 128};
	struct ep a, b, c, d;
	struct ibv_wc wc[128];
	int got;

	t_case("signalled and unsignalled mixes; sq_sig_all signals everything");
	memset(&c, 0, sizeof(c));
	memset(&d, 0, sizeof(d));
	if (ep_init(&a, &o) || ep_init(&b, &o) || ep_connect(&a, &b, IBV_MTU_2048))
		goto out;
	/* 100 WRITEs and SENDs, every 7th and the last signalled */
	for (int i = 0; i < 100; i++) {
		uint32_t len = 1000 + (uint32_t)i * 97;
		bool sig = i % 7 == 6 || i == 99;

		t_fill(a.buf + (size_t)i * 12000, len, (unsigned int)i);
		if (i % 4 == 3) {
			if (recv1(&b, (uint64_t)i, b.buf + (size_t)i * 12000, len))
				goto out;
			if (post1(&a, IBV_WR_SEND, (uint64_t)i, a.buf + (size_t)i * 12000, len, 0,
				  0, sig ? IBV_SEND_SIGNALED : 0, 0))
				goto out;
		} else if (post1(&a, IBV_WR_RDMA_WRITE, (uint64_t)i, a.buf + (size_t)i * 12000, len,
				 (uintptr_t)b.buf + (size_t)i * 12000, b.mr->rkey,
				 sig ? IBV_SEND_SIGNALED : 0, 0)) {
			goto out;
		}
	}
	/* the 25 receive completions are on b's CQ; a gets only the signalled ones */
	got = t_poll(a.cq, wc, 100 / 7 + 1, 10000);
	CHECK_EQ_INT(got, 100 / 7 + 1);
	for (int i = 0; i < got; i++)
		CHECK_MSG(wc[i].status == IBV_WC_SUCCESS &&
				  (wc[i].wr_id % 7 == 6 || wc[i].wr_id == 99) &&
				  (i == 0 || wc[i].wr_id > wc[i - 1].wr_id),
			  "completion %d: wr_id %llu status %s", i, (unsigned long long)wc[i].wr_id,
			  ibv_wc_status_str(wc[i].status));
	CHECK_EQ_INT(t_poll(b.cq, wc, 25, 5000), 25);
	CHECK_EQ_INT(t_poll(a.cq, wc, 1, 50), 0);
	for (int i = 0; i < 100; i++) {
		long bad = pattern_diff(b.buf + (size_t)i * 12000, 1000 + (size_t)i * 97,
					(unsigned int)i);

		if (!CHECK_MSG(bad < 0, "message %d: byte %ld differs", i, bad))
			break;
	}
	/* sq_sig_all: unsignalled requests complete too */
	o.sig_all = true;
	if (ep_init(&c, &o) || ep_init(&d, &o) || ep_connect(&c, &d, IBV_MTU_512))
		goto out;
	for (int i = 0; i < 20; i++)
		if (post1(&c, IBV_WR_RDMA_WRITE, (uint64_t)i, c.buf, 3000, (uintptr_t)d.buf,
			  d.mr->rkey, 0, 0))
			goto out;
	CHECK_EQ_INT(t_poll(c.cq, wc, 20, 10000), 20);
	CHECK_EQ_INT(t_poll(c.cq, wc, 1, 50), 0);
out:
	ep_fini(&a);
	ep_fini(&b);
	ep_fini(&c);
	ep_fini(&d);
}

/* ---- fence ---- */

static void case_fence(void)
{
	struct ep_opts o = {.len = 4 * MiB, .depth = 64};
	struct ep a, b;
	struct ibv_wc wc[8];

	t_case("IBV_SEND_FENCE: a WRITE behind READs and an atomic sends what they fetched");
	if (ep_init(&a, &o) || ep_init(&b, &o) || ep_connect(&a, &b, IBV_MTU_1024))
		goto out;
	for (unsigned int round = 0; round < 10; round++) {
		const uint32_t n = 256 * 1024;
		uint64_t *word = (uint64_t *)(void *)(b.buf + 3 * MiB);
		struct ibv_sge sge = {(uintptr_t)a.buf + 2 * MiB, 8, a.mr->lkey};
		struct ibv_send_wr wr;
		long bad;

		/* b holds a fresh pattern; a's landing zone is stale */
		t_fill(b.buf, n, round + 40);
		memset(a.buf, 0xee, n);
		memset(b.buf + MiB, 0, n);
		*word = 5000 + round;
		memset(a.buf + 2 * MiB, 0, 8);
		/* two READs of halves, then a fenced WRITE of what they fetched */
		if (post1(&a, IBV_WR_RDMA_READ, 1, a.buf, n / 2, (uintptr_t)b.buf, b.mr->rkey, 0,
			  0) ||
		    post1(&a, IBV_WR_RDMA_READ, 2, a.buf + n / 2, n / 2, (uintptr_t)b.buf + n / 2,
			  b.mr->rkey, 0, 0) ||
		    post1(&a, IBV_WR_RDMA_WRITE, 3, a.buf, n, (uintptr_t)b.buf + MiB, b.mr->rkey,
			  IBV_SEND_FENCE | IBV_SEND_SIGNALED, 0))
			goto out;
		/* an atomic, then a fenced WRITE of the value it fetched */
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 4;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = (uintptr_t)word;
		wr.wr.atomic.rkey = b.mr->rkey;
		wr.wr.atomic.compare_add = 1;
		if (post(&a, &wr) || post1(&a, IBV_WR_RDMA_WRITE, 5, a.buf + 2 * MiB, 8,
					   (uintptr_t)b.buf + 3 * MiB + 64, b.mr->rkey,
					   IBV_SEND_FENCE | IBV_SEND_SIGNALED, 0))
			goto out;
		if (!CHECK_EQ_INT(t_poll(a.cq, wc, 2, 10000), 2))
			goto out;
		CHECK(wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 3);
		CHECK(wc[1].status == IBV_WC_SUCCESS && wc[1].wr_id == 5);
		bad = pattern_diff(b.buf + MiB, n, round + 40);
		CHECK_MSG(bad < 0, "round %u: the fenced WRITE sent stale byte %ld", round, bad);
		CHECK_MSG(*(uint64_t *)(void *)(b.buf + 3 * MiB + 64) == 5000 + round,
			  "round %u: the fenced WRITE did not carry the fetched value", round);
		CHECK_EQ_INT(*word, 5001 + round);
	}
out:
	ep_fini(&a);
	ep_fini(&b);
}

/* ---- solicited events ---- */

/* true if a completion event arrives on `ch` within `ms`; acks it */
static bool cq_event(struct ibv_comp_channel *ch, struct ibv_cq *want, int ms)
{
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	struct ibv_cq *cq;
	void *cq_ctx;
	int flags = fcntl(ch->fd, F_GETFL);

	if (poll(&pfd, 1, ms) != 1)
		return false;
	fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK);
	if (ibv_get_cq_event(ch, &cq, &cq_ctx)) {
		fcntl(ch->fd, F_SETFL, flags);
		return false;
	}
	fcntl(ch->fd, F_SETFL, flags);
	CHECK(cq == want);
	ibv_ack_cq_events(cq, 1);
	return true;
}

static void case_solicited(void)
{
	struct ep_opts oa = {.len = MiB, .depth = 16}, ob = oa;
	struct ep a, b;
	struct ibv_wc wc;

	t_case("solicited events: notify(solicited_only) fires for SOLICITED only");
	memset(&b, 0, sizeof(b));
	ob.channel = true;
	if (ep_init(&a, &oa) || ep_init(&b, &ob) || ep_connect(&a, &b, IBV_MTU_1024))
		goto out;
	for (int i = 0; i < 6; i++)
		if (recv1(&b, (uint64_t)i, b.buf + (size_t)i * 8192, 8192))
			goto out;
	CHECK_RET(ibv_req_notify_cq(b.cq, 1), 0);
	/* unsolicited SEND (multi-packet): a completion but no event */
	if (post1(&a, IBV_WR_SEND, 1, a.buf, 5000, 0, 0, IBV_SEND_SIGNALED, 0) ||
	    wait1(a.cq, &wc, "send") || wait1(b.cq, &wc, "recv"))
		goto out;
	CHECK_MSG(!cq_event(b.ch, b.cq, 200), "an unsolicited SEND raised an event");
	/* solicited SEND: an event */
	if (post1(&a, IBV_WR_SEND, 2, a.buf, 5000, 0, 0, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED,
		  0) ||
	    wait1(a.cq, &wc, "solicited send"))
		goto out;
	CHECK_MSG(cq_event(b.ch, b.cq, 5000), "a solicited SEND raised no event");
	wait1(b.cq, &wc, "solicited recv");
	/* the arm is used up: another solicited SEND raises nothing until re-armed */
	if (post1(&a, IBV_WR_SEND, 3, a.buf, 10, 0, 0, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, 0) ||
	    wait1(a.cq, &wc, "send") || wait1(b.cq, &wc, "recv"))
		goto out;
	CHECK_MSG(!cq_event(b.ch, b.cq, 100), "an event without an arm");
	/* solicited WRITE_WITH_IMM under a solicited-only arm */
	CHECK_RET(ibv_req_notify_cq(b.cq, 1), 0);
	if (post1(&a, IBV_WR_RDMA_WRITE_WITH_IMM, 4, a.buf, 3000, (uintptr_t)b.buf + 65536,
		  b.mr->rkey, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, 9) ||
	    wait1(a.cq, &wc, "write imm"))
		goto out;
	CHECK_MSG(cq_event(b.ch, b.cq, 5000), "a solicited WRITE_WITH_IMM raised no event");
	wait1(b.cq, &wc, "write imm recv");
	/* an arm for any completion fires on an unsolicited SEND */
	CHECK_RET(ibv_req_notify_cq(b.cq, 0), 0);
	if (post1(&a, IBV_WR_SEND, 5, a.buf, 100, 0, 0, IBV_SEND_SIGNALED, 0) ||
	    wait1(a.cq, &wc, "send"))
		goto out;
	CHECK_MSG(cq_event(b.ch, b.cq, 5000), "notify(any) raised no event");
	wait1(b.cq, &wc, "recv");
out:
	ep_fini(&a);
	ep_fini(&b);
}

/* ---- ibv_qp_ex ---- */

static void case_qp_ex(void)
{
	struct ep_opts o = {.len = 4 * MiB,
			    .depth = 32,
			    .sge = 4,
			    .ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
				   IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
				   IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				   IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD};
	struct ep a, b;
	struct ibv_wc wc[16];
	struct ibv_qp_ex *x;
	uint64_t *word;
	int got;

	t_case("ibv_qp_ex sessions move data: every opcode in one ibv_wr_complete");
	if (ep_init(&a, &o) || ep_init(&b, &o) || ep_connect(&a, &b, IBV_MTU_1024))
		goto out;
	x = a.qpx;
	word = (uint64_t *)(void *)(b.buf + 3 * MiB);
	*word = 40;
	t_fill(a.buf, 200000, 1);
	t_fill(b.buf + 2 * MiB, 300000, 2);
	if (recv1(&b, 100, b.buf + MiB, 100000) || recv1(&b, 101, b.buf + MiB + 100000, 100) ||
	    recv1(&b, 102, NULL, 0))
		goto out;
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf + 5);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 150001);
	x->wr_id = 2;
	ibv_wr_send(x);
	{
		struct ibv_sge sl[3] = {{(uintptr_t)a.buf, 30000, a.mr->lkey},
					{(uintptr_t)a.buf + 40000, 1, a.mr->lkey},
					{(uintptr_t)a.buf + 50000, 69999, a.mr->lkey}};

		ibv_wr_set_sge_list(x, 3, sl);
	}
	x->wr_id = 3;
	ibv_wr_send_imm(x, htonl(0xfeed));
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 7, 100);
	x->wr_id = 4;
	ibv_wr_rdma_write_imm(x, b.mr->rkey, (uintptr_t)b.buf + 1500000, htonl(0xbeef));
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 1, 4097);
	x->wr_id = 5;
	ibv_wr_rdma_read(x, b.mr->rkey, (uintptr_t)b.buf + 2 * MiB);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 2 * MiB, 300000);
	x->wr_id = 6;
	ibv_wr_atomic_fetch_add(x, b.mr->rkey, (uintptr_t)word, 2);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 3 * MiB, 8);
	x->wr_id = 7;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
	ibv_wr_atomic_cmp_swp(x, b.mr->rkey, (uintptr_t)word, 42, 99);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 3 * MiB + 8, 8);
	if (!CHECK_RET(ibv_wr_complete(x), 0))
		goto out;
	n_msgs += 7;
	got = t_poll(a.cq, wc, 7, 10000);
	CHECK_EQ_INT(got, 7);
	for (int i = 0; i < got; i++)
		CHECK_MSG(wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == (uint64_t)i + 1,
			  "qp_ex completion %d: wr_id %llu %s", i, (unsigned long long)wc[i].wr_id,
			  ibv_wc_status_str(wc[i].status));
	got = t_poll(b.cq, wc, 3, 5000);
	if (CHECK_EQ_INT(got, 3)) {
		CHECK(wc[0].wr_id == 100 && wc[0].byte_len == 100000);
		CHECK(wc[1].wr_id == 101 && wc[1].byte_len == 100 &&
		      ntohl(wc[1].imm_data) == 0xfeed);
		CHECK(wc[2].wr_id == 102 && wc[2].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
		      wc[2].byte_len == 4097 && ntohl(wc[2].imm_data) == 0xbeef);
	}
	CHECK(!memcmp(b.buf + 5, a.buf, 150001));
	CHECK(!memcmp(b.buf + MiB, a.buf, 30000) && b.buf[MiB + 30000] == a.buf[40000] &&
	      !memcmp(b.buf + MiB + 30001, a.buf + 50000, 69999));
	CHECK(!memcmp(b.buf + MiB + 100000, a.buf + 7, 100));
	CHECK(!memcmp(b.buf + 1500000, a.buf + 1, 4097));
	CHECK(!memcmp(a.buf + 2 * MiB, b.buf + 2 * MiB, 300000));
	CHECK_EQ_INT(*(uint64_t *)(void *)(a.buf + 3 * MiB), 40);
	CHECK_EQ_INT(*(uint64_t *)(void *)(a.buf + 3 * MiB + 8), 42);
	CHECK_EQ_INT(*word, 99);
out:
	ep_fini(&a);
	ep_fini(&b);
}

/* ---- async events ---- */

/* Wait for async event `type` (others are acked and skipped). */
static bool async_wait(enum ibv_event_type type, void *elem, int ms)
{
	uint64_t end = t_ms() + (uint64_t)ms;
	int flags = fcntl(ctx->async_fd, F_GETFL);
	bool found = false;

	fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
	while (!found && t_ms() < end) {
		struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
		struct ibv_async_event ev;

		if (poll(&pfd, 1, 50) != 1 || ibv_get_async_event(ctx, &ev))
			continue;
		if (ev.event_type == type) {
			found = true;
			if (type == IBV_EVENT_CQ_ERR)
				CHECK(ev.element.cq == elem);
			else if (type == IBV_EVENT_SRQ_LIMIT_REACHED)
				CHECK(ev.element.srq == elem);
		} else {
			printf("# async event %s while waiting for %s\n",
			       ibv_event_type_str(ev.event_type), ibv_event_type_str(type));
		}
		ibv_ack_async_event(&ev);
	}
	fcntl(ctx->async_fd, F_SETFL, flags);
	return found;
}

/* ---- SRQ ---- */

#define NSRQ_QP 4
#define SRQ_MSGS 24
#define SRQ_SLOT 20000

static void case_srq(void)
{
	struct ep_opts oa = {.len = MiB, .depth = 64}, ob = oa;
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 256, .max_sge = 2}};
	struct ep a[NSRQ_QP], b[NSRQ_QP];
	struct ibv_srq *srq = NULL;
	struct ibv_mr *rmr = NULL;
	uint8_t *rbuf = NULL;
	bool seen[NSRQ_QP][SRQ_MSGS];
	struct ibv_srq_attr qa;
	int total = NSRQ_QP * SRQ_MSGS;

	t_case("SRQ: several QPs share one SRQ under traffic; the limit event fires");
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	memset(seen, 0, sizeof(seen));
	srq = ibv_create_srq(gpd, &sa);
	rbuf = calloc(total + 20, SRQ_SLOT);
	if (!CHECK(srq && rbuf))
		goto out;
	rmr = ibv_reg_mr(gpd, rbuf, (size_t)(total + 20) * SRQ_SLOT, IBV_ACCESS_LOCAL_WRITE);
	if (!CHECK(rmr))
		goto out;
	ob.srq = srq;
	for (int q = 0; q < NSRQ_QP; q++)
		if (ep_init(&a[q], &oa) || ep_init(&b[q], &ob) ||
		    ep_connect(&a[q], &b[q], (enum ibv_mtu)(IBV_MTU_512 + q % 3)))
			goto out;
	/* every slot is a two-SGE receive: 1000 bytes, then the rest */
	for (int i = 0; i < total + 20; i++) {
		struct ibv_sge sg[2] = {{(uintptr_t)rbuf + (size_t)i * SRQ_SLOT, 1000, rmr->lkey},
					{(uintptr_t)rbuf + (size_t)i * SRQ_SLOT + 1000,
					 SRQ_SLOT - 1000, rmr->lkey}};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = sg, .num_sge = 2}, *bad;

		if (!CHECK_RET(ibv_post_srq_recv(srq, &wr, &bad), 0))
			goto out;
	}
	/* arm the limit: it fires when fewer than 30 receives remain (20 will) */
	qa.srq_limit = 30;
	CHECK_RET(ibv_modify_srq(srq, &qa, IBV_SRQ_LIMIT), 0);
	/* all QPs send at once, interleaved; each message names its sender and number */
	for (int m = 0; m < SRQ_MSGS; m++)
		for (int q = 0; q < NSRQ_QP; q++) {
			uint32_t len = 8 + (uint32_t)(m * 731 + q * 97) % (SRQ_SLOT - 8);
			uint8_t *p = a[q].buf + (size_t)m * SRQ_SLOT;

			t_fill(p, len, (unsigned int)(q * 100 + m));
			p[0] = (uint8_t)q;
			p[1] = (uint8_t)m;
			if (post1(&a[q], IBV_WR_SEND, (uint64_t)m, p, len, 0, 0,
				  m == SRQ_MSGS - 1 ? IBV_SEND_SIGNALED : 0, 0))
				goto out;
		}
	for (int q = 0; q < NSRQ_QP; q++) {
		struct ibv_wc wc;

		wait1(a[q].cq, &wc, "last send");
	}
	/* the receives: spread over the b QPs' CQs */
	for (int q = 0; q < NSRQ_QP; q++) {
		struct ibv_wc wc[SRQ_MSGS];
		int got = t_poll(b[q].cq, wc, SRQ_MSGS, 5000);

		CHECK_EQ_INT(got, SRQ_MSGS);
		for (int i = 0; i < got; i++) {
			uint8_t *p = rbuf + wc[i].wr_id * SRQ_SLOT;
			int sq = p[0], sm = p[1];
			uint32_t len = 8 + (uint32_t)(sm * 731 + sq * 97) % (SRQ_SLOT - 8);
			long bad;

			if (!CHECK_MSG(wc[i].status == IBV_WC_SUCCESS &&
					       wc[i].qp_num == b[q].qp->qp_num && sq == q &&
					       sm < SRQ_MSGS && !seen[sq][sm],
				       "SRQ completion %d on QP %d: %s, from %d/%d", i, q,
				       ibv_wc_status_str(wc[i].status), sq, sm))
				continue;
			seen[sq][sm] = true;
			CHECK_MSG(i == 0 || sm > rbuf[wc[i - 1].wr_id * SRQ_SLOT + 1],
				  "QP %d: messages out of order", q);
			CHECK_EQ_INT(wc[i].byte_len, len);
			p[0] = p[1] = 0;
			{
				uint8_t *want = malloc(len);

				if (want) {
					t_fill(want, len, (unsigned int)(sq * 100 + sm));
					want[0] = want[1] = 0;
					bad = memcmp(p, want, len);
					CHECK_MSG(!bad, "SRQ message %d/%d differs", sq, sm);
					free(want);
				}
			}
			p[1] = (uint8_t)sm; /* for the order check of the next one */
		}
	}
	CHECK_MSG(async_wait(IBV_EVENT_SRQ_LIMIT_REACHED, srq, 2000), "no SRQ limit event");
	CHECK_RET(ibv_query_srq(srq, &qa), 0);
	CHECK_MSG(qa.srq_limit == 0, "the limit is still armed: %u", qa.srq_limit);
out:
	for (int q = 0; q < NSRQ_QP; q++) {
		ep_fini(&a[q]);
		ep_fini(&b[q]);
	}
	if (rmr)
		CHECK_RET(ibv_dereg_mr(rmr), 0);
	if (srq)
		CHECK_RET(ibv_destroy_srq(srq), 0);
	free(rbuf);
}

/* ---- CQ overflow ---- */

static void case_cq_overflow(void)
{
	struct ep_opts oa = {.len = MiB, .depth = 64}, ob = {.len = MiB, .depth = 64, .cqe = 4};
	struct ep a, b;
	struct ibv_wc wc[64];

	t_case("CQ overflow under traffic raises IBV_EVENT_CQ_ERR");
	memset(&b, 0, sizeof(b));
	if (ep_init(&a, &oa) || ep_init(&b, &ob) || ep_connect(&a, &b, IBV_MTU_1024))
		goto out;
	for (int i = 0; i < 48; i++)
		if (recv1(&b, (uint64_t)i, b.buf + (size_t)i * 2048, 2048))
			goto out;
	for (int i = 0; i < 48; i++)
		if (post1(&a, IBV_WR_SEND, (uint64_t)i, a.buf, 1500, 0, 0, 0, 0))
			goto out;
	CHECK_MSG(async_wait(IBV_EVENT_CQ_ERR, b.cq, 5000), "no IBV_EVENT_CQ_ERR (cqe %d)",
		  b.cq->cqe);
	/* what the CQ holds is still readable */
	CHECK(t_poll(b.cq, wc, 64, 100) >= 1);
out:
	ep_fini(&a);
	ep_fini(&b);
}

/* ---- ERR mid-stream ---- */

static void case_err_midstream(void)
{
	struct ep_opts o = {.len = 8 * MiB, .depth = 128};
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR}, reset = {.qp_state = IBV_QPS_RESET};
	struct ep a, b;
	struct ibv_wc wc[128];
	int got, ok = 0, flushed = 0, rflushed = 0;

	t_case("a QP moved to ERR mid-stream: a prefix succeeds, the rest flushes in order");
	if (ep_init(&a, &o) || ep_init(&b, &o) || ep_connect(&a, &b, IBV_MTU_1024))
		goto out;
	for (int i = 0; i < 8; i++)
		if (recv1(&a, 1000 + (uint64_t)i, a.buf + 7 * MiB, 4096))
			goto out;
	for (int i = 0; i < 64; i++)
		if (post1(&a, IBV_WR_RDMA_WRITE, (uint64_t)i, a.buf, 128 * 1024,
			  (uintptr_t)b.buf + (size_t)(i % 32) * 128 * 1024, b.mr->rkey,
			  IBV_SEND_SIGNALED, 0))
			goto out;
	usleep(2000); /* let some of it go */
	CHECK_RET(ibv_modify_qp(a.qp, &err, IBV_QP_STATE), 0);
	got = t_poll(a.cq, wc, 72, 10000);
	CHECK_EQ_INT(got, 72);
	for (int i = 0, next = 0; i < got; i++) {
		if (wc[i].wr_id >= 1000) {
			CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR);
			rflushed++;
			continue;
		}
		CHECK_MSG(wc[i].wr_id == (uint64_t)next++, "send completions out of order");
		if (wc[i].status == IBV_WC_SUCCESS) {
			CHECK_MSG(!flushed, "a success after a flush");
			ok++;
		} else {
			CHECK_MSG(wc[i].status == IBV_WC_WR_FLUSH_ERR, "status %s",
				  ibv_wc_status_str(wc[i].status));
			flushed++;
		}
	}
	printf("# ERR mid-stream: %d WRITEs completed, %d flushed, %d receives flushed\n", ok,
	       flushed, rflushed);
	CHECK_EQ_INT(ok + flushed, 64);
	CHECK_EQ_INT(rflushed, 8);
	CHECK_EQ_INT(t_poll(a.cq, wc, 1, 50), 0);
	/* new requests flush at once */
	if (!post1(&a, IBV_WR_RDMA_WRITE, 77, a.buf, 10, (uintptr_t)b.buf, b.mr->rkey, 0, 0))
		CHECK(t_poll(a.cq, wc, 1, 1000) == 1 && wc[0].wr_id == 77 &&
		      wc[0].status == IBV_WC_WR_FLUSH_ERR);
	/* RESET both and start again: the pair works */
	(void)t_poll(b.cq, wc, 128, 100);
	if (!CHECK_RET(ibv_modify_qp(a.qp, &reset, IBV_QP_STATE), 0) ||
	    !CHECK_RET(ibv_modify_qp(b.qp, &reset, IBV_QP_STATE), 0) || t_qp_init(a.qp, ACC_ALL) ||
	    t_qp_init(b.qp, ACC_ALL) || ep_connect(&a, &b, IBV_MTU_4096))
		goto out;
	t_fill(a.buf, 500000, 3);
	if (!post1(&a, IBV_WR_RDMA_WRITE, 5, a.buf, 500000, (uintptr_t)b.buf + MiB, b.mr->rkey,
		   IBV_SEND_SIGNALED, 0) &&
	    !wait1(a.cq, wc, "write after reset"))
		CHECK(pattern_diff(b.buf + MiB, 500000, 3) < 0);
out:
	ep_fini(&a);
	ep_fini(&b);
}

/* ---- many QPs ---- */

#define NPAIRS 64
#define PAIR_SLOT (96 * 1024)

static void case_many_qps(void)
{
	struct ep_opts o = {.depth = 8};
	struct ep a[NPAIRS], b[NPAIRS];
	struct ibv_cq *cqa = ibv_create_cq(ctx, NPAIRS * 8, NULL, NULL, 0);
	struct ibv_cq *cqb = ibv_create_cq(ctx, NPAIRS * 8, NULL, NULL, 0);
	size_t len = (size_t)NPAIRS * PAIR_SLOT;
	uint8_t *ba = aligned_alloc(4096, len), *bb = aligned_alloc(4096, len);
	struct ibv_mr *ma = NULL, *mb = NULL;
	struct ibv_wc *wc = calloc(NPAIRS * 4, sizeof(*wc));
	int got;

	t_case("64 QP pairs move data at the same time");
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	if (!CHECK(cqa && cqb && ba && bb && wc))
		goto out;
	memset(bb, 0, len);
	ma = ibv_reg_mr(gpd, ba, len, ACC_ALL);
	mb = ibv_reg_mr(gpd, bb, len, ACC_ALL);
	if (!CHECK(ma && mb))
		goto out;
	/*
	 * 64 windows at once can overrun the socket buffers, and the losses
	 * are then retransmitted after the ACK timeout: give it 1 s, so that
	 * a slow run (valgrind) does not exhaust retry_cnt.
	 */
	t_timeout = 18;
	for (int i = 0; i < NPAIRS; i++) {
		o.cq = cqa;
		o.mr = ma;
		if (ep_init(&a[i], &o))
			goto out;
		o.cq = cqb;
		o.mr = mb;
		if (ep_init(&b[i], &o) || ep_connect(&a[i], &b[i], mtus[i % 5]))
			goto out;
	}
	/* each pair: a WRITE, a SEND and a READ of its own slot */
	for (int i = 0; i < NPAIRS; i++) {
		uint8_t *sa = ba + (size_t)i * PAIR_SLOT, *sb = bb + (size_t)i * PAIR_SLOT;
		uint32_t n = 20000 + (uint32_t)i * 140;

		t_fill(sa, 30000, (unsigned int)i);
		t_fill(sb + 60000, 30000, (unsigned int)i + 500);
		if (recv1(&b[i], (uint64_t)i, sb + 30000, 30000) ||
		    post1(&a[i], IBV_WR_RDMA_WRITE, (uint64_t)i, sa, n, (uintptr_t)sb, mb->rkey,
			  IBV_SEND_SIGNALED, 0) ||
		    post1(&a[i], IBV_WR_SEND, (uint64_t)i, sa, 29999, 0, 0, IBV_SEND_SIGNALED, 0) ||
		    post1(&a[i], IBV_WR_RDMA_READ, (uint64_t)i, sa + 60000, 30000,
			  (uintptr_t)sb + 60000, mb->rkey, IBV_SEND_SIGNALED, 0))
			goto out;
	}
	got = t_poll(cqa, wc, NPAIRS * 3, 20000);
	CHECK_EQ_INT(got, NPAIRS * 3);
	for (int i = 0; i < got; i++)
		if (!CHECK_MSG(wc[i].status == IBV_WC_SUCCESS, "pair %llu: %s",
			       (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status)))
			break;
	got = t_poll(cqb, wc, NPAIRS, 10000);
	CHECK_EQ_INT(got, NPAIRS);
	for (int i = 0; i < NPAIRS; i++) {
		uint8_t *sa = ba + (size_t)i * PAIR_SLOT, *sb = bb + (size_t)i * PAIR_SLOT;
		uint32_t n = 20000 + (uint32_t)i * 140;

		if (!CHECK_MSG(pattern_diff(sb, n, (unsigned int)i) < 0 &&
				       pattern_diff(sb + 30000, 29999, (unsigned int)i) < 0 &&
				       pattern_diff(sa + 60000, 30000, (unsigned int)i + 500) < 0,
			       "pair %d: data differs", i))
			break;
	}
out:
	t_timeout = 14;
	for (int i = 0; i < NPAIRS; i++) {
		ep_fini(&a[i]);
		ep_fini(&b[i]);
	}
	if (ma)
		CHECK_RET(ibv_dereg_mr(ma), 0);
	if (mb)
		CHECK_RET(ibv_dereg_mr(mb), 0);
	if (cqa)
		CHECK_RET(ibv_destroy_cq(cqa), 0);
	if (cqb)
		CHECK_RET(ibv_destroy_cq(cqb), 0);
	free(ba);
	free(bb);
	free(wc);
}

/* ---- two processes ---- */

/*
 * The target (child) has one QP per MTU and one buffer:
 *   [k * REG, +REG)      WRITE landing zone for MTU k
 *   [5 * REG, +REG)      READ source (pattern 777)
 *   [6 * REG, +REG)      SEND landing slots (RECV_SLOT each)
 *   [7 * REG, +64)       atomic words, one per MTU
 * The plan is the same function in both processes.
 */
#define REG (3u * MiB)
#define T_BUF (7u * REG + 4096)
#define RECV_SLOT (64u * 1024)
#define T_SENDS 6

struct t2_addr {
	uint32_t qpn[5];
	uint32_t rkey;
	uint64_t addr;
	union ibv_gid gid;
};

/* Sizes around MTU m for the two-process case; offset of write j. */
static uint32_t t2_sizes(uint32_t m, uint32_t *s, size_t *off)
{
	uint32_t n = 0;
	size_t o = 0;

	s[n++] = 0;
	s[n++] = 1;
	s[n++] = m - 1;
	s[n++] = m;
	s[n++] = m + 1;
	s[n++] = 3 * m + 5;
	s[n++] = 65536 + 7;
	s[n++] = MiB + 3;
	for (uint32_t i = 0; i < n; i++) {
		off[i] = o;
		o += s[i] + 61;
	}
	return n;
}

static uint32_t t2_send_len(int k, int j)
{
	return (uint32_t)(j * 9001 + k * 17) % RECV_SLOT;
}

/* A setup step of the target failed: say which (its stdout is the test's). */
static int target_fail(int line)
{
	printf("# target: setup failed at line %d: %s\n", line, strerror(errno));
	fflush(stdout);
	return 1;
}

static int target(int sock)
{
	struct ibv_context *tctx = t_open_dev();
	struct ibv_pd *pd = tctx ? ibv_alloc_pd(tctx) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(tctx, 64, NULL, NULL, 0) : NULL;
	uint8_t *buf = aligned_alloc(4096, T_BUF);
	struct ibv_mr *mr = NULL;
	struct ibv_qp *qp[5] = {0};
	struct t2_addr mine, peer;
	struct ibv_wc wc[64];
	int bad = 0, got;
	char cmd;

	if (!cq || !buf)
		return target_fail(__LINE__);
	memset(buf, 0, T_BUF);
	t_fill(buf + 5 * REG, REG, 777);
	mr = ibv_reg_mr(pd, buf, T_BUF, ACC_ALL);
	if (!mr)
		return target_fail(__LINE__);
	memset(&mine, 0, sizeof(mine));
	for (int k = 0; k < 5; k++) {
		struct ibv_qp_init_attr ia = {.send_cq = cq,
					      .recv_cq = cq,
					      .qp_type = IBV_QPT_RC,
					      .cap = {.max_send_wr = 4,
						      .max_recv_wr = 16,
						      .max_send_sge = 1,
						      .max_recv_sge = 1}};

		qp[k] = ibv_create_qp(pd, &ia);
		if (!qp[k] || t_qp_init(qp[k], ACC_ALL))
			return target_fail(__LINE__);
		mine.qpn[k] = qp[k]->qp_num;
	}
	mine.rkey = mr->rkey;
	mine.addr = (uintptr_t)buf;
	if (ibv_query_gid(tctx, 1, 0, &mine.gid))
		return target_fail(__LINE__);
	if (t_xfer(sock, &mine, sizeof(mine), true) || t_xfer(sock, &peer, sizeof(peer), false))
		return target_fail(__LINE__);
	for (int k = 0; k < 5; k++) {
		if (t_qp_rts(qp[k], peer.qpn[k], &peer.gid, 1000u * (uint32_t)k, 0xffff00, mtus[k]))
			return target_fail(__LINE__);
		for (int j = 0; j < T_SENDS; j++) {
			struct ibv_sge sge = {(uintptr_t)buf + 6 * REG +
						      (size_t)(k * T_SENDS + j) * RECV_SLOT,
					      RECV_SLOT, mr->lkey};
			struct ibv_recv_wr wr = {.wr_id = (uint64_t)(k * T_SENDS + j),
						 .sg_list = &sge,
						 .num_sge = 1},
					   *rb;

			if (ibv_post_recv(qp[k], &wr, &rb))
				return target_fail(__LINE__);
		}
	}
	cmd = 'r';
	if (t_xfer(sock, &cmd, 1, true))
		return target_fail(__LINE__);
	/* no verbs calls while the initiator works: asleep in read(2) */
	if (t_xfer(sock, &cmd, 1, false))
		return target_fail(__LINE__);
	for (int k = 0; k < 5; k++) {
		uint32_t s[16], m = mtu_bytes(mtus[k]);
		size_t off[16];
		uint32_t n = t2_sizes(m, s, off);
		uint64_t w;

		for (uint32_t j = 0; j < n; j++)
			if (pattern_diff(buf + (size_t)k * REG + off[j], s[j],
					 (unsigned int)(k * 50 + j)) >= 0 ||
			    buf[(size_t)k * REG + off[j] + s[j]] != 0) {
				printf("# target: MTU %u WRITE %u (%u bytes) differs\n", m, j,
				       s[j]);
				bad++;
			}
		memcpy(&w, buf + 7 * REG + (size_t)k * 8, 8);
		if (w != 10000u * (uint32_t)k + 3 * 7) {
			printf("# target: MTU %u atomic word %llu\n", m, (unsigned long long)w);
			bad++;
		}
	}
	got = t_poll(cq, wc, 5 * T_SENDS, 5000);
	if (got != 5 * T_SENDS) {
		printf("# target: %d receive completions\n", got);
		bad++;
	}
	for (int i = 0; i < got; i++) {
		int k = (int)wc[i].wr_id / T_SENDS, j = (int)wc[i].wr_id % T_SENDS;
		uint32_t len = t2_send_len(k, j);

		if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len != len ||
		    wc[i].qp_num != qp[k]->qp_num ||
		    pattern_diff(buf + 6 * REG + wc[i].wr_id * RECV_SLOT, len,
				 (unsigned int)(900 + k * 10 + j)) >= 0) {
			printf("# target: SEND %d/%d: %s, %u bytes\n", k, j,
			       ibv_wc_status_str(wc[i].status), wc[i].byte_len);
			bad++;
		}
	}
	t_xfer(sock, &bad, sizeof(bad), true);
	t_xfer(sock, &cmd, 1, false);
	for (int k = 0; k < 5; k++)
		ibv_destroy_qp(qp[k]);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(tctx);
	free(buf);
	return bad != 0;
}

/*
 * The target is forked before the parent makes any verbs call, so that it
 * is a clean process (api_regress_fork_device covers a fork after open).
 * It waits for a byte on the socket before it starts.
 */
static int sv[2] = {-1, -1};
static pid_t pid = -1;

static void fork_target(void)
{
	char go;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		if (t_xfer(sv[1], &go, 1, false) || go != 'g')
			_exit(0); /* not needed after all */
		_exit(target(sv[1]));
	}
	close(sv[1]);
}

static void case_two_processes(void)
{
	struct ep_opts o = {.len = 4 * MiB, .depth = 16};
	struct t2_addr mine, peer;
	struct ep e[5];
	struct ibv_wc wc;
	int bad = -1, status;
	char cmd = 'g';

	t_case("two processes: every opcode across the MTU for each MTU, target asleep");
	memset(e, 0, sizeof(e));
	if (!CHECK(pid > 0) || !CHECK(t_xfer(sv[0], &cmd, 1, true) == 0))
		return;
	memset(&mine, 0, sizeof(mine));
	for (int k = 0; k < 5; k++) {
		if (ep_init(&e[k], &o))
			goto out;
		mine.qpn[k] = e[k].qp->qp_num;
	}
	mine.gid = gid;
	if (!CHECK(t_xfer(sv[0], &peer, sizeof(peer), false) == 0) ||
	    !CHECK(t_xfer(sv[0], &mine, sizeof(mine), true) == 0))
		goto out;
	CHECK_MSG(memcmp(&peer.gid, &gid, sizeof(gid)), "the two processes share a GID");
	for (int k = 0; k < 5; k++)
		if (t_qp_rts(e[k].qp, peer.qpn[k], &peer.gid, 0xffff00, 1000u * (uint32_t)k,
			     mtus[k]))
			goto out;
	if (!CHECK(t_xfer(sv[0], &cmd, 1, false) == 0))
		goto out;
	for (int k = 0; k < 5; k++) {
		uint32_t s[16], m = mtu_bytes(mtus[k]);
		size_t off[16];
		uint32_t n = t2_sizes(m, s, off);
		uint64_t tbase = peer.addr + (uint64_t)k * REG;

		/* WRITEs */
		for (uint32_t j = 0; j < n; j++) {
			t_fill(e[k].buf, s[j], (unsigned int)(k * 50 + j));
			if (post1(&e[k], IBV_WR_RDMA_WRITE, j, e[k].buf, s[j], tbase + off[j],
				  peer.rkey, IBV_SEND_SIGNALED, 0) ||
			    wait1(e[k].cq, &wc, "2proc write"))
				goto out;
		}
		/* READs of the target's pattern at sizes and odd offsets */
		for (uint32_t j = 0; j < n; j++) {
			size_t ro = 13 * j;
			long d;

			memset(e[k].buf + MiB, 0, s[j] + 8);
			if (post1(&e[k], IBV_WR_RDMA_READ, j, e[k].buf + MiB, s[j],
				  peer.addr + 5 * REG + ro, peer.rkey, IBV_SEND_SIGNALED, 0) ||
			    wait1(e[k].cq, &wc, "2proc read"))
				goto out;
			{
				uint8_t *want = malloc(ro + s[j] + 1);

				if (!CHECK(want))
					goto out;
				t_fill(want, ro + s[j], 777);
				d = memcmp(e[k].buf + MiB, want + ro, s[j]);
				CHECK_MSG(!d, "MTU %u: READ of %u bytes differs", m, s[j]);
				free(want);
			}
		}
		/* atomics: CAS 0 -> 10000k, then FAA 7 three times */
		{
			struct ibv_sge sge = {(uintptr_t)e[k].buf + 2 * MiB, 8, e[k].mr->lkey};
			struct ibv_send_wr wr, *bw;
			uint64_t got;

			memset(&wr, 0, sizeof(wr));
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
			wr.wr.atomic.remote_addr = peer.addr + 7 * REG + (uint64_t)k * 8;
			wr.wr.atomic.rkey = peer.rkey;
			wr.wr.atomic.compare_add = 0;
			wr.wr.atomic.swap = 10000u * (uint32_t)k;
			if (!CHECK_RET(ibv_post_send(e[k].qp, &wr, &bw), 0) ||
			    wait1(e[k].cq, &wc, "2proc cas"))
				goto out;
			memcpy(&got, e[k].buf + 2 * MiB, 8);
			CHECK_EQ_INT(got, 0);
			for (int i = 0; i < 3; i++) {
				wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
				wr.wr.atomic.compare_add = 7;
				if (!CHECK_RET(ibv_post_send(e[k].qp, &wr, &bw), 0) ||
				    wait1(e[k].cq, &wc, "2proc faa"))
					goto out;
				memcpy(&got, e[k].buf + 2 * MiB, 8);
				CHECK_EQ_INT(got, 10000u * (uint32_t)k + 7u * (uint32_t)i);
			}
		}
		/* SENDs into the receives posted beforehand */
		for (int j = 0; j < T_SENDS; j++) {
			uint32_t len = t2_send_len(k, j);

			t_fill(e[k].buf, len, (unsigned int)(900 + k * 10 + j));
			if (post1(&e[k], IBV_WR_SEND, (uint64_t)j, e[k].buf, len, 0, 0,
				  IBV_SEND_SIGNALED, 0) ||
			    wait1(e[k].cq, &wc, "2proc send"))
				goto out;
		}
	}
	cmd = 'c';
	CHECK(t_xfer(sv[0], &cmd, 1, true) == 0);
	CHECK(t_xfer(sv[0], &bad, sizeof(bad), false) == 0);
	CHECK_MSG(bad == 0, "the target found %d problems", bad);
out:
	cmd = 'q';
	t_xfer(sv[0], &cmd, 1, true);
	t_xfer(sv[0], &cmd, 1, true);
	close(sv[0]);
	sv[0] = -1;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int k = 0; k < 5; k++)
		ep_fini(&e[k]);
}

int main(void)
{
	const char *pre = getenv("LD_PRELOAD");

	t_start("api_traffic_sizes");
	signal(SIGPIPE, SIG_IGN); /* a target that died: t_xfer fails, a CHECK says so */
	/* valgrind's preload: keep the multi-MiB sizes to MTU 4096 there */
	under_valgrind = pre && strstr(pre, "vgpreload");
	if (under_valgrind)
		printf("# under valgrind: multi-MiB messages at MTU 4096 only\n");
	fork_target();
	t_open_first(&ctx);
	gpd = ibv_alloc_pd(ctx);
	if (!CHECK(gpd) || !CHECK_RET(ibv_query_gid(ctx, 1, 0, &gid), 0))
		return t_finish();

	case_sizes();
	case_ud_sizes();
	case_sge_lists();
	case_signalled();
	case_fence();
	case_solicited();
	case_qp_ex();
	case_srq();
	case_cq_overflow();
	case_err_midstream();
	case_many_qps();
	case_two_processes();

	t_case("teardown");
	CHECK_RET(ibv_dealloc_pd(gpd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	printf("# traffic: %llu messages, %llu payload bytes\n", (unsigned long long)n_msgs,
	       (unsigned long long)n_bytes);
	return t_finish();
}
