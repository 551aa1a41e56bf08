/* SPDX-License-Identifier: MIT */
/*
 * api_mw.c - memory windows through the verbs.
 *
 * In one process (one device, RC pairs x -> y, y the target whose QP
 * binds): the device reports type 1 and 2B windows; ibv_alloc_mw's types;
 * a type 1 window bound by ibv_bind_mw (BIND_MW completion, the rkey
 * ibv_inc_rkey made) takes WRITE, READ and atomics inside it, and gets a
 * remote access error outside it, for an access it does not grant, under
 * the key of the bind before, and once unbound; ibv_bind_mw's own errors;
 * every bind rule (MW_BIND_ERR and the QP in error, the next WR flushed);
 * a type 2 window bound by a BIND_MW work request serves only the QP that
 * bound it, LOCAL_INV and SEND with Invalidate end it (the receive
 * completion has IBV_WC_WITH_INV and the rkey), and what cannot be
 * invalidated is refused (LOC_QP_OP_ERR, REM_INV_REQ_ERR on both sides);
 * ibv_dereg_mr refuses an MR with a window bound (EINVAL) and a PD with a
 * window cannot go (EBUSY); the ibv_wr_* builders; post-time refusals.
 *
 * Then two processes, over the same-host link and with SOFTVERBS_SHM=0
 * over UDP: the target binds a type 1 and a type 2 window, the initiator
 * WRITEs, READs and adds through them, invalidates the type 2 one with a
 * SEND with Invalidate, and its WRITE after that fails with a remote
 * access error.
 */
#include "harness.h"
#include "traffic.h"

#include <sys/socket.h>
#include <sys/wait.h>

/* test: timeout=180 */

#define LEN (64u << 10)
#define WIN_OFF 4096u
#define WIN_LEN 8192u
#define FULL                                                                                       \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)
#define RW (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cx, *cy; /* the initiator's and the target's */
	uint8_t *ibuf, *tbuf;
	struct ibv_mr *imr, *tmr; /* tmr: FULL | MW_BIND */
};

struct pair {
	struct ibv_qp *x, *y;
};

static struct side s;

/* Contract: a connected RC pair x -> y on s.pd (other PD `pd_y` for y if not NULL); 0 or -1. */
static int pair_up(struct pair *p, struct ibv_pd *pd_y)
{
	struct ibv_qp_init_attr ia = {0};
	union ibv_gid gid;

	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 2;
	ia.send_cq = ia.recv_cq = s.cx;
	p->x = ibv_create_qp(s.pd, &ia);
	ia.send_cq = ia.recv_cq = s.cy;
	p->y = ibv_create_qp(pd_y ? pd_y : s.pd, &ia);
	if (!CHECK(p->x && p->y) || ibv_query_gid(s.ctx, 1, t_gid_index(), &gid) ||
	    t_qp_init(p->x, RW) || t_qp_init(p->y, RW))
		return -1;
	if (t_qp_rts(p->x, p->y->qp_num, &gid, 10, 20, IBV_MTU_1024) ||
	    t_qp_rts(p->y, p->x->qp_num, &gid, 20, 10, IBV_MTU_1024))
		return -1;
	return 0;
}

/* Contract: destroy the pair; the CQs are emptied. */
static void pair_down(struct pair *p)
{
	struct ibv_wc wc[16];

	CHECK(ibv_destroy_qp(p->x) == 0);
	CHECK(ibv_destroy_qp(p->y) == 0);
	while (ibv_poll_cq(s.cx, 16, wc) > 0 || ibv_poll_cq(s.cy, 16, wc) > 0)
		;
}

/* Contract: the next completion on `cq` within 10 s has status `st` (and opcode `op` if >= 0). */
static int expect(struct ibv_cq *cq, enum ibv_wc_status st, int op, struct ibv_wc *out)
{
	struct ibv_wc wc;

	if (!CHECK_MSG(t_poll(cq, &wc, 1, 10000) == 1, "no completion (want %s)",
		       ibv_wc_status_str(st)))
		return -1;
	if (out)
		*out = wc;
	if (!CHECK_MSG(wc.status == st, "status %s, want %s", ibv_wc_status_str(wc.status),
		       ibv_wc_status_str(st)))
		return -1;
	if (st == IBV_WC_SUCCESS && op >= 0 && !CHECK_EQ_INT(wc.opcode, op))
		return -1;
	return 0;
}

/* Contract: post `op` of `len` bytes at ibuf + off on qp to (raddr, rkey); 0 or errno. */
static int rdma(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t off, uint32_t len,
		uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {(uintptr_t)s.ibuf + off, len, s.imr->lkey};
	struct ibv_send_wr wr = {.wr_id = op, .sg_list = &sge, .num_sge = 1, .opcode = op}, *bad;

	wr.send_flags = IBV_SEND_SIGNALED;
	if (op != IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
		return ibv_post_send(qp, &wr, &bad);
	}
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = 5;
	return ibv_post_send(qp, &wr, &bad);
}

/* Contract: post a BIND_MW WR on qp; 0 or errno. */
static int bind_wr(struct ibv_qp *qp, struct ibv_mw *mw, uint32_t rkey, struct ibv_mr *mr,
		   uint64_t addr, uint64_t len, unsigned int access)
{
	struct ibv_send_wr wr = {0}, *bad;

	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr_id = 77;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = addr;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = access;
	return ibv_post_send(qp, &wr, &bad);
}

/* Contract: post LOCAL_INV or SEND_WITH_INV (4 bytes from ibuf) of `rkey` on qp; 0 or errno. */
static int inv_wr(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t rkey)
{
	struct ibv_sge sge = {(uintptr_t)s.ibuf, 4, s.imr->lkey};
	struct ibv_send_wr wr = {0}, *bad;

	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = rkey;
	if (op == IBV_WR_SEND_WITH_INV) {
		wr.sg_list = &sge;
		wr.num_sge = 1;
	}
	return ibv_post_send(qp, &wr, &bad);
}

/* Contract: a receive of up to 64 bytes at tbuf + 60000 posted on qp. */
static int recv_wr(struct ibv_qp *qp)
{
	struct ibv_sge sge = {(uintptr_t)s.tbuf + 60000, 64, s.tmr->lkey};
	struct ibv_recv_wr wr = {0}, *bad;

	wr.sg_list = &sge;
	wr.num_sge = 1;
	return ibv_post_recv(qp, &wr, &bad);
}

/* Contract: type 1 bind through ibv_bind_mw on qp; its completion checked. */
static int bind1(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr, uint64_t addr,
		 uint64_t len, unsigned int access)
{
	struct ibv_mw_bind b = {0};

	b.wr_id = 5;
	b.send_flags = IBV_SEND_SIGNALED;
	b.bind_info.mr = mr;
	b.bind_info.addr = addr;
	b.bind_info.length = len;
	b.bind_info.mw_access_flags = access;
	if (!CHECK_RET(ibv_bind_mw(qp, mw, &b), 0))
		return -1;
	return expect(s.cy, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL);
}

static uint64_t win(uint32_t off)
{
	return (uintptr_t)s.tbuf + WIN_OFF + off;
}

static void case_caps_alloc(void)
{
	struct ibv_device_attr_ex a;
	struct ibv_mw *m1, *m2;

	t_case("caps: max_mw, MEM_WINDOW and TYPE_2B; alloc types 1 and 2, others EINVAL");
	CHECK(ibv_query_device_ex(s.ctx, NULL, &a) == 0);
	CHECK(a.orig_attr.max_mw > 0);
	CHECK(a.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	CHECK(a.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	m1 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
	m2 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	if (CHECK(m1 && m2)) {
		CHECK(m1->type == IBV_MW_TYPE_1 && m2->type == IBV_MW_TYPE_2);
		CHECK(m1->rkey && m2->rkey && m1->rkey != m2->rkey && m1->rkey != s.tmr->rkey);
		CHECK(m1->pd == s.pd && m1->context == s.ctx);
		CHECK_RET(ibv_dealloc_mw(m1), 0);
		CHECK_RET(ibv_dealloc_mw(m2), 0);
	}
	CHECK_ERRNO_PTR(ibv_alloc_mw(s.pd, (enum ibv_mw_type)3), EINVAL);
}

static void case_type1(void)
{
	struct ibv_mw *mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
	struct pair p;
	uint32_t old;

	t_case("type 1: ibv_bind_mw, WRITE/READ/fetch-add inside the window");
	if (!CHECK(mw) || pair_up(&p, NULL))
		return;
	old = mw->rkey;
	if (bind1(p.y, mw, s.tmr, win(0), WIN_LEN, RW) == 0) {
		CHECK_EQ_INT(mw->rkey, ibv_inc_rkey(old));
		t_fill(s.ibuf, 256, 3);
		CHECK_RET(rdma(p.x, IBV_WR_RDMA_WRITE, 0, 256, win(100), mw->rkey), 0);
		expect(s.cx, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL);
		CHECK(memcmp(s.tbuf + WIN_OFF + 100, s.ibuf, 256) == 0);
		CHECK_RET(rdma(p.x, IBV_WR_RDMA_READ, 1024, 256, win(100), mw->rkey), 0);
		expect(s.cx, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL);
		CHECK(memcmp(s.ibuf + 1024, s.ibuf, 256) == 0);
		memset(s.tbuf + WIN_OFF + WIN_LEN - 8, 0, 8);
		CHECK_RET(
			rdma(p.x, IBV_WR_ATOMIC_FETCH_AND_ADD, 2048, 8, win(WIN_LEN - 8), mw->rkey),
			0);
		expect(s.cx, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, NULL);
		CHECK(s.tbuf[WIN_OFF + WIN_LEN - 8] == 5);
		/* the MR's own key still works beside the window */
		CHECK_RET(rdma(p.x, IBV_WR_RDMA_WRITE, 0, 16, (uintptr_t)s.tbuf, s.tmr->rkey), 0);
		expect(s.cx, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL);
		/* an MW key is no lkey */
		{
			struct ibv_sge sge = {win(0), 16, mw->rkey};
			struct ibv_send_wr wr = {0}, *bad;

			wr.opcode = IBV_WR_RDMA_WRITE;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.rdma.remote_addr = (uintptr_t)s.tbuf;
			wr.wr.rdma.rkey = s.tmr->rkey;
			CHECK_RET(ibv_post_send(p.x, &wr, &bad), 0);
			expect(s.cx, IBV_WC_LOC_PROT_ERR, -1, NULL);
		}
	}
	pair_down(&p);
	CHECK_RET(ibv_dealloc_mw(mw), 0);
}

/* Contract: one WRITE of `len` at `raddr` under `rkey` on a fresh pair gets REM_ACCESS_ERR. */
static void access_err(const char *what, uint64_t raddr, uint32_t len, uint32_t rkey,
		       enum ibv_wr_opcode op)
{
	struct pair p;

	if (pair_up(&p, NULL))
		return;
	CHECK_RET(rdma(p.x, op, 0, len, raddr, rkey), 0);
	CHECK_MSG(expect(s.cx, IBV_WC_REM_ACCESS_ERR, -1, NULL) == 0, "%s", what);
	pair_down(&p);
}

static void case_type1_errors(void)
{
	struct ibv_mw *mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
	struct ibv_mw *m2 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	struct ibv_pd *pd2 = ibv_alloc_pd(s.ctx);
	struct ibv_mr *mr2 = pd2 ? ibv_reg_mr(pd2, s.tbuf, LEN, FULL | IBV_ACCESS_MW_BIND) : NULL;
	struct ibv_mw_bind b = {0};
	struct pair p;
	uint32_t old;

	t_case("type 1: remote access errors (bounds, access, stale key, unbound)");
	if (!CHECK(mw && m2 && mr2) || pair_up(&p, NULL))
		return;
	if (bind1(p.y, mw, s.tmr, win(0), WIN_LEN, IBV_ACCESS_REMOTE_READ) == 0) {
		access_err("past the end", win(WIN_LEN - 8), 16, mw->rkey, IBV_WR_RDMA_READ);
		access_err("before the start", win(0) - 8, 8, mw->rkey, IBV_WR_RDMA_READ);
		access_err("WRITE on a READ window", win(0), 8, mw->rkey, IBV_WR_RDMA_WRITE);
		access_err("atomic on a READ window", win(0), 8, mw->rkey,
			   IBV_WR_ATOMIC_FETCH_AND_ADD);
		old = mw->rkey;
		if (bind1(p.y, mw, s.tmr, win(0), WIN_LEN, RW) == 0) {
			access_err("the key of the bind before", win(0), 8, old, IBV_WR_RDMA_WRITE);
			CHECK_RET(ibv_dereg_mr(s.tmr), EINVAL);
			b.send_flags = IBV_SEND_SIGNALED;
			if (CHECK_RET(ibv_bind_mw(p.y, mw, &b), 0)) /* unbind: length 0 */
				expect(s.cy, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL);
			access_err("unbound", win(0), 8, mw->rkey, IBV_WR_RDMA_READ);
		}
	}
	t_case("ibv_bind_mw: type 2 EINVAL, an MR of another PD EPERM, ZERO_BASED EINVAL");
	b.bind_info.mr = s.tmr;
	b.bind_info.addr = win(0);
	b.bind_info.length = 64;
	b.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	CHECK_RET(ibv_bind_mw(p.y, m2, &b), EINVAL);
	b.bind_info.mw_access_flags |= IBV_ACCESS_ZERO_BASED;
	CHECK_RET(ibv_bind_mw(p.y, mw, &b), EINVAL);
	b.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	b.bind_info.mr = mr2;
	CHECK_RET(ibv_bind_mw(p.y, mw, &b), EPERM);
	b.bind_info.mr = NULL; /* no MR with a range */
	CHECK_RET(ibv_bind_mw(p.y, mw, &b), EINVAL);
	pair_down(&p);
	CHECK_RET(ibv_dealloc_mw(mw), 0);
	CHECK_RET(ibv_dealloc_mw(m2), 0);
	CHECK_RET(ibv_dereg_mr(mr2), 0);
	CHECK_RET(ibv_dealloc_pd(pd2), 0);
}

/*
 * Contract: on a fresh pair (y on `pd_y`), a bind of `mw` posted on y
 * with the given arguments fails with MW_BIND_ERR, and a WR behind it is
 * flushed.
 */
static void bind_err(const char *what, struct ibv_pd *pd_y, struct ibv_mw *mw, uint32_t rkey,
		     struct ibv_mr *mr, uint64_t addr, uint64_t len, unsigned int access)
{
	struct pair p;

	if (pair_up(&p, pd_y))
		return;
	CHECK_RET(bind_wr(p.y, mw, rkey, mr, addr, len, access), 0);
	CHECK_RET(inv_wr(p.y, IBV_WR_LOCAL_INV, 1), 0);
	CHECK_MSG(expect(s.cy, IBV_WC_MW_BIND_ERR, -1, NULL) == 0, "%s", what);
	expect(s.cy, IBV_WC_WR_FLUSH_ERR, -1, NULL);
	pair_down(&p);
}

static void case_bind_rules(void)
{
	struct ibv_mw *m1 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
	struct ibv_mw *m2 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	struct ibv_mr *nobind = ibv_reg_mr(s.pd, s.tbuf, LEN, FULL);
	struct ibv_mr *ro =
		ibv_reg_mr(s.pd, s.tbuf, LEN, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
	struct ibv_pd *pd2 = ibv_alloc_pd(s.ctx);
	struct pair p;

	t_case("bind rules: MW_BIND_ERR, the QP in error");
	if (!CHECK(m1 && m2 && nobind && ro && pd2))
		return;
	bind_err("MR without MW_BIND", NULL, m2, m2->rkey, nobind, win(0), 64,
		 IBV_ACCESS_REMOTE_READ);
	bind_err("range past the MR", NULL, m2, m2->rkey, s.tmr, (uintptr_t)s.tbuf + LEN - 32, 64,
		 IBV_ACCESS_REMOTE_READ);
	bind_err("range before the MR", NULL, m2, m2->rkey, s.tmr, (uintptr_t)s.tbuf - 64, 128,
		 IBV_ACCESS_REMOTE_READ);
	bind_err("writable window, MR without LOCAL_WRITE", NULL, m2, m2->rkey, ro, win(0), 64,
		 IBV_ACCESS_REMOTE_WRITE);
	bind_err("type 2 of length 0", NULL, m2, m2->rkey, s.tmr, win(0), 0, 0);
	bind_err("type 2 on a QP of another PD", pd2, m2, m2->rkey, s.tmr, win(0), 64,
		 IBV_ACCESS_REMOTE_READ);
	m2->rkey ^= 0x1; /* the WR names the window by mw->rkey: not its key now */
	bind_err("a stale mw->rkey", NULL, m2, m2->rkey, s.tmr, win(0), 64, IBV_ACCESS_REMOTE_READ);
	m2->rkey ^= 0x1;
	bind_err("an unknown access bit", NULL, m2, m2->rkey, s.tmr, win(0), 64, 1u << 30);
	bind_err("type 1 zero-based", NULL, m1, m1->rkey, s.tmr, 0, 64,
		 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED);
	bind_err("no MR for a nonzero length", NULL, m2, m2->rkey, NULL, win(0), 64,
		 IBV_ACCESS_REMOTE_READ);
	/* a bound type 2 window cannot be bound again */
	if (!pair_up(&p, NULL)) {
		CHECK_RET(bind_wr(p.y, m2, ibv_inc_rkey(m2->rkey), s.tmr, win(0), 64,
				  IBV_ACCESS_REMOTE_READ),
			  0);
		expect(s.cy, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL);
		m2->rkey = ibv_inc_rkey(m2->rkey);
		CHECK_RET(bind_wr(p.y, m2, ibv_inc_rkey(m2->rkey), s.tmr, win(0), 64,
				  IBV_ACCESS_REMOTE_READ),
			  0);
		CHECK_MSG(expect(s.cy, IBV_WC_MW_BIND_ERR, -1, NULL) == 0, "bound type 2 again");
		pair_down(&p);
	}
	CHECK_RET(ibv_dealloc_pd(s.pd), EBUSY); /* windows (and MRs) on it */
	CHECK_RET(ibv_dealloc_mw(m1), 0);
	CHECK_RET(ibv_dealloc_mw(m2), 0); /* bound: unbound with it */
	CHECK_RET(ibv_dereg_mr(nobind), 0);
	CHECK_RET(ibv_dereg_mr(ro), 0);
	CHECK_RET(ibv_dealloc_pd(pd2), 0);
}

static void case_type2(void)
{
	struct ibv_mw *mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	struct ibv_wc wc;
	struct pair p, q;
	uint32_t key;

	t_case("type 2: BIND_MW WR, only the binding QP, LOCAL_INV, SEND with Invalidate");
	if (!CHECK(mw) || pair_up(&p, NULL) || pair_up(&q, NULL))
		return;
	key = ibv_inc_rkey(mw->rkey);
	CHECK_RET(bind_wr(p.y, mw, key, s.tmr, win(0), WIN_LEN, RW), 0);
	expect(s.cy, IBV_WC_SUCCESS, IBV_WC_BIND_MW, &wc);
	CHECK_EQ_INT(wc.wr_id, 77);
	t_fill(s.ibuf, 64, 9);
	CHECK_RET(rdma(p.x, IBV_WR_RDMA_WRITE, 0, 64, win(8), key), 0);
	expect(s.cx, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL);
	CHECK(memcmp(s.tbuf + WIN_OFF + 8, s.ibuf, 64) == 0);
	/* q.y did not bind it: a remote access error for q.x */
	CHECK_RET(rdma(q.x, IBV_WR_RDMA_WRITE, 0, 64, win(8), key), 0);
	expect(s.cx, IBV_WC_REM_ACCESS_ERR, -1, NULL);
	pair_down(&q);
	CHECK_RET(ibv_dereg_mr(s.tmr), EINVAL);
	/* LOCAL_INV on the binding QP; then the key resolves nothing */
	CHECK_RET(inv_wr(p.y, IBV_WR_LOCAL_INV, key), 0);
	expect(s.cy, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, NULL);
	CHECK_RET(rdma(p.x, IBV_WR_RDMA_READ, 0, 8, win(8), key), 0);
	expect(s.cx, IBV_WC_REM_ACCESS_ERR, -1, NULL);
	pair_down(&p);

	/* bound again (a new key), invalidated by the peer's SEND with Invalidate */
	if (pair_up(&p, NULL))
		return;
	mw->rkey = key;
	key = ibv_inc_rkey(key);
	CHECK_RET(bind_wr(p.y, mw, key, s.tmr, win(0), WIN_LEN, RW), 0);
	expect(s.cy, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL);
	CHECK_RET(recv_wr(p.y), 0);
	CHECK_RET(inv_wr(p.x, IBV_WR_SEND_WITH_INV, key), 0);
	expect(s.cx, IBV_WC_SUCCESS, IBV_WC_SEND, NULL);
	if (expect(s.cy, IBV_WC_SUCCESS, IBV_WC_RECV, &wc) == 0) {
		CHECK(wc.wc_flags & IBV_WC_WITH_INV);
		CHECK(!(wc.wc_flags & IBV_WC_WITH_IMM));
		CHECK_EQ_INT(wc.invalidated_rkey, key);
		CHECK_EQ_INT(wc.byte_len, 4);
	}
	CHECK_RET(rdma(p.x, IBV_WR_RDMA_WRITE, 0, 8, win(8), key), 0);
	expect(s.cx, IBV_WC_REM_ACCESS_ERR, -1, NULL);
	pair_down(&p);
	CHECK_RET(ibv_dealloc_mw(mw), 0);
}

/* Contract: on a fresh pair, LOCAL_INV of `rkey` on y fails with LOC_QP_OP_ERR. */
static void local_inv_err(const char *what, uint32_t rkey)
{
	struct pair p;

	if (pair_up(&p, NULL))
		return;
	CHECK_RET(inv_wr(p.y, IBV_WR_LOCAL_INV, rkey), 0);
	CHECK_MSG(expect(s.cy, IBV_WC_LOC_QP_OP_ERR, -1, NULL) == 0, "%s", what);
	pair_down(&p);
}

/* Contract: on a fresh pair, SEND with Invalidate of `rkey` fails on both sides. */
static void send_inv_err(const char *what, uint32_t rkey)
{
	struct pair p;

	if (pair_up(&p, NULL))
		return;
	CHECK_RET(recv_wr(p.y), 0);
	CHECK_RET(inv_wr(p.x, IBV_WR_SEND_WITH_INV, rkey), 0);
	CHECK_MSG(expect(s.cx, IBV_WC_REM_INV_REQ_ERR, -1, NULL) == 0, "%s: requester", what);
	CHECK_MSG(expect(s.cy, IBV_WC_REM_INV_REQ_ERR, -1, NULL) == 0, "%s: responder", what);
	pair_down(&p);
}

static void case_inv_errors(void)
{
	struct ibv_mw *m1 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
	struct ibv_mw *m2 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	struct ibv_mw *m3 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	struct pair p;

	t_case("invalidation refused: type 1, an MR, unknown, unbound, another QP's window");
	if (!CHECK(m1 && m2 && m3))
		return;
	local_inv_err("type 1", m1->rkey);
	local_inv_err("an MR's key", s.tmr->rkey);
	local_inv_err("an unknown key", 0x12345678);
	local_inv_err("an unbound type 2", m2->rkey);
	send_inv_err("type 1", m1->rkey);
	send_inv_err("an MR's key", s.tmr->rkey);
	send_inv_err("an unbound type 2", m2->rkey);
	/* m3 bound on one pair; a SEND with Invalidate arriving on another is refused */
	if (!pair_up(&p, NULL)) {
		CHECK_RET(bind_wr(p.y, m3, m3->rkey, s.tmr, win(0), 64, IBV_ACCESS_REMOTE_READ), 0);
		expect(s.cy, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL);
		send_inv_err("a window bound to another QP", m3->rkey);
		pair_down(&p);
	}
	CHECK_RET(ibv_dealloc_mw(m1), 0);
	CHECK_RET(ibv_dealloc_mw(m2), 0);
	CHECK_RET(ibv_dealloc_mw(m3), 0);
}

static void case_wr_api(void)
{
	struct ibv_qp_init_attr_ex ia = {0};
	struct ibv_mw *mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	struct ibv_mw_bind_info bi = {0};
	struct ibv_qp *qx, *uc;
	struct ibv_qp_ex *x;
	struct pair p;
	union ibv_gid gid;
	uint32_t key;

	t_case("ibv_wr_bind_mw, ibv_wr_local_inv, ibv_wr_send_inv; send_ops_flags");
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.send_cq = ia.recv_cq = s.cy;
	ia.pd = s.pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
			    IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE;
	qx = ibv_create_qp_ex(s.ctx, &ia);
	ia.qp_type = IBV_QPT_UC;
	uc = ibv_create_qp_ex(s.ctx, &ia);
	CHECK_MSG(!uc && errno == EOPNOTSUPP, "UC with BIND_MW: %s",
		  uc ? "created" : "other errno");
	if (uc)
		ibv_destroy_qp(uc);
	if (!CHECK(qx && mw) || !CHECK(ibv_query_gid(s.ctx, 1, t_gid_index(), &gid) == 0))
		return;
	/* qx is the target (binds); a plain x QP is its peer */
	memset(&p, 0, sizeof(p));
	{
		struct ibv_qp_init_attr a = {0};

		a.qp_type = IBV_QPT_RC;
		a.cap.max_send_wr = a.cap.max_recv_wr = 8;
		a.cap.max_send_sge = a.cap.max_recv_sge = 1;
		a.send_cq = a.recv_cq = s.cx;
		p.x = ibv_create_qp(s.pd, &a);
	}
	p.y = qx;
	if (!CHECK(p.x) || t_qp_init(p.x, RW) || t_qp_init(p.y, RW) ||
	    t_qp_rts(p.x, p.y->qp_num, &gid, 10, 20, IBV_MTU_1024) ||
	    t_qp_rts(p.y, p.x->qp_num, &gid, 20, 10, IBV_MTU_1024))
		return;
	x = ibv_qp_to_qp_ex(qx);
	key = ibv_inc_rkey(mw->rkey);
	bi.mr = s.tmr;
	bi.addr = win(0);
	bi.length = 64;
	bi.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(x, mw, key, &bi);
	x->wr_id = 2;
	ibv_wr_local_inv(x, key);
	CHECK_RET(ibv_wr_complete(x), 0);
	expect(s.cy, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL);
	expect(s.cy, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, NULL);
	/* qx's SEND with Invalidate of a key p.x has no window for: refused there */
	CHECK_RET(recv_wr(p.x), 0);
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_inv(x, key);
	ibv_wr_set_sge(x, s.tmr->lkey, (uintptr_t)s.tbuf, 4);
	CHECK_RET(ibv_wr_complete(x), 0);
	expect(s.cy, IBV_WC_REM_INV_REQ_ERR, -1, NULL);
	pair_down(&p);
	CHECK_RET(ibv_dealloc_mw(mw), 0);
}

static void case_post_refusals(void)
{
	struct ibv_qp_init_attr ia = {0};
	struct ibv_mw *mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	struct ibv_qp *ud;

	t_case("post: BIND_MW, LOCAL_INV, SEND_WITH_INV on UD EINVAL");
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.send_cq = ia.recv_cq = s.cx;
	ud = ibv_create_qp(s.pd, &ia);
	if (!CHECK(ud && mw) || t_qp_init(ud, 0) || t_qp_rts(ud, 0, NULL, 0, 0, IBV_MTU_1024))
		return;
	CHECK_RET(bind_wr(ud, mw, mw->rkey, s.tmr, win(0), 64, IBV_ACCESS_REMOTE_READ), EINVAL);
	CHECK_RET(inv_wr(ud, IBV_WR_LOCAL_INV, mw->rkey), EINVAL);
	CHECK_RET(inv_wr(ud, IBV_WR_SEND_WITH_INV, mw->rkey), EINVAL);
	CHECK(ibv_destroy_qp(ud) == 0);
	CHECK_RET(ibv_dealloc_mw(mw), 0);
}

/* ---- two processes ---- */

struct info {
	uint64_t addr;
	uint32_t k1, k2; /* type 1 and type 2 windows' keys */
	struct t_addr ep;
};

/* The target: binds two windows on its QP, answers, checks what landed; exit status. */
static int target_main(int sock)
{
	struct t_ep e;
	struct ibv_mw *m1, *m2;
	struct ibv_mw_bind b = {0};
	struct info in = {0}, peer;
	struct ibv_wc wc;
	char go;
	int bad = 0;

	if (t_ep_init(&e, NULL, IBV_QPT_RC, LEN, FULL | IBV_ACCESS_MW_BIND, 16))
		return 2;
	m1 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
	m2 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	in.ep = t_addr_of(&e, 300);
	if (!m1 || !m2 || t_xfer(sock, &in, sizeof(in), true) ||
	    t_xfer(sock, &peer, sizeof(peer), false) ||
	    t_connect_to(&e, &peer.ep, 300, IBV_MTU_1024))
		return 3;
	b.send_flags = IBV_SEND_SIGNALED;
	b.bind_info.mr = e.mr;
	b.bind_info.addr = (uintptr_t)e.buf;
	b.bind_info.length = 4096;
	b.bind_info.mw_access_flags = RW;
	bad |= ibv_bind_mw(e.qp, m1, &b) != 0;
	bad |= t_poll(e.cq, &wc, 1, 10000) != 1 || wc.status || wc.opcode != IBV_WC_BIND_MW;
	{
		struct ibv_send_wr wr = {0}, *bw;

		wr.opcode = IBV_WR_BIND_MW;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.bind_mw.mw = m2;
		wr.bind_mw.rkey = ibv_inc_rkey(m2->rkey);
		wr.bind_mw.bind_info.mr = e.mr;
		wr.bind_mw.bind_info.addr = (uintptr_t)e.buf + 8192;
		wr.bind_mw.bind_info.length = 8192;
		wr.bind_mw.bind_info.mw_access_flags = RW;
		bad |= ibv_post_send(e.qp, &wr, &bw) != 0;
		bad |= t_poll(e.cq, &wc, 1, 10000) != 1 || wc.status || wc.opcode != IBV_WC_BIND_MW;
		in.k2 = wr.bind_mw.rkey;
	}
	{
		struct ibv_sge sge = {(uintptr_t)e.buf + 60000, 64, e.mr->lkey};
		struct ibv_recv_wr rw = {0}, *br;

		rw.sg_list = &sge;
		rw.num_sge = 1;
		bad |= ibv_post_recv(e.qp, &rw, &br) != 0;
	}
	in.k1 = m1->rkey;
	in.addr = (uintptr_t)e.buf;
	if (t_xfer(sock, &in, sizeof(in), true))
		return 4;
	/* the initiator's SEND with Invalidate of k2 */
	bad |= t_poll(e.cq, &wc, 1, 20000) != 1 || wc.status || wc.opcode != IBV_WC_RECV ||
	       !(wc.wc_flags & IBV_WC_WITH_INV) || wc.invalidated_rkey != in.k2;
	if (t_xfer(sock, &go, 1, false)) /* the initiator is done */
		return 5;
	for (uint32_t i = 0; i < 512; i++)
		bad |= e.buf[100 + i] != (uint8_t)(i * 7) ||
		       e.buf[8192 + 200 + i] != (uint8_t)(i * 7);
	bad |= e.buf[4088] != 5;
	CHECK(ibv_dealloc_mw(m1) == 0 && ibv_dealloc_mw(m2) == 0);
	t_ep_destroy(&e, true);
	return bad ? 6 : 0;
}

/* The initiator: WRITE, READ, fetch-add through the windows, SEND with Invalidate, WRITE refused.
 */
static int initiator_main(int sock)
{
	struct t_ep e;
	struct info in, mine = {0};
	struct ibv_wc wc;
	int bad = 0;

	if (t_ep_init(&e, NULL, IBV_QPT_RC, LEN, FULL, 16))
		return 2;
	mine.ep = t_addr_of(&e, 300);
	if (t_xfer(sock, &in, sizeof(in), false) || t_xfer(sock, &mine, sizeof(mine), true) ||
	    t_connect_to(&e, &in.ep, 300, IBV_MTU_1024) || t_xfer(sock, &in, sizeof(in), false))
		return 3;
	for (uint32_t i = 0; i < 512; i++)
		e.buf[i] = (uint8_t)(i * 7);
	s.ibuf = e.buf;
	s.imr = e.mr;
	bad |= rdma(e.qp, IBV_WR_RDMA_WRITE, 0, 512, in.addr + 100, in.k1) != 0;
	bad |= rdma(e.qp, IBV_WR_RDMA_WRITE, 0, 512, in.addr + 8192 + 200, in.k2) != 0;
	bad |= rdma(e.qp, IBV_WR_RDMA_READ, 4096, 512, in.addr + 8192 + 200, in.k2) != 0;
	bad |= rdma(e.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 8192, 8, in.addr + 4088, in.k1) != 0;
	for (int i = 0; i < 4; i++)
		bad |= t_poll(e.cq, &wc, 1, 20000) != 1 || wc.status != IBV_WC_SUCCESS;
	bad |= memcmp(e.buf + 4096, e.buf, 512) != 0;
	bad |= inv_wr(e.qp, IBV_WR_SEND_WITH_INV, in.k2) != 0;
	bad |= t_poll(e.cq, &wc, 1, 20000) != 1 || wc.status != IBV_WC_SUCCESS ||
	       wc.opcode != IBV_WC_SEND;
	bad |= rdma(e.qp, IBV_WR_RDMA_WRITE, 0, 8, in.addr + 8192, in.k2) != 0;
	bad |= t_poll(e.cq, &wc, 1, 20000) != 1 || wc.status != IBV_WC_REM_ACCESS_ERR;
	char go = 'g';

	if (t_xfer(sock, &go, 1, true))
		return 4;
	t_ep_destroy(&e, true);
	return bad ? 5 : 0;
}

/* Run target and initiator in two processes with SOFTVERBS_SHM=`shm`; their exit statuses checked.
 */
static void two_processes(const char *name, const char *shm, int n)
{
	pid_t pid[2];
	int sv[2], st;
	char addr[32];

	t_case(name);
	if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0))
		return;
	fflush(stdout);
	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			snprintf(addr, sizeof(addr), "127.86.%d.%d", n, i + 1);
			setenv("SOFTVERBS_ADDR", addr, 1);
			setenv("SOFTVERBS_SHM", shm, 1);
			close(sv[1 - i]);
			_exit(i ? initiator_main(sv[1]) : target_main(sv[0]));
		}
	}
	close(sv[0]);
	close(sv[1]);
	for (int i = 0; i < 2; i++) {
		CHECK(waitpid(pid[i], &st, 0) == pid[i]);
		CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exit status %#x",
			  i ? "initiator" : "target", st);
	}
}

int main(void)
{
	t_start("api_mw");
	two_processes("two processes over the same-host link", "1", 1);
	two_processes("two processes over UDP (SOFTVERBS_SHM=0)", "0", 2);

	s.ctx = t_open_dev();
	if (!CHECK(s.ctx))
		return t_finish();
	s.pd = ibv_alloc_pd(s.ctx);
	s.cx = ibv_create_cq(s.ctx, 64, NULL, NULL, 0);
	s.cy = ibv_create_cq(s.ctx, 64, NULL, NULL, 0);
	s.ibuf = aligned_alloc(4096, LEN);
	s.tbuf = aligned_alloc(4096, LEN);
	if (!CHECK(s.pd && s.cx && s.cy && s.ibuf && s.tbuf))
		return t_finish();
	memset(s.tbuf, 0, LEN);
	s.imr = ibv_reg_mr(s.pd, s.ibuf, LEN, FULL);
	s.tmr = ibv_reg_mr(s.pd, s.tbuf, LEN, FULL | IBV_ACCESS_MW_BIND);
	if (!CHECK(s.imr && s.tmr))
		return t_finish();

	case_caps_alloc();
	case_type1();
	case_type1_errors();
	case_bind_rules();
	case_type2();
	case_inv_errors();
	case_wr_api();
	case_post_refusals();

	t_case("teardown: dereg succeeds once no window is bound");
	CHECK_RET(ibv_dereg_mr(s.tmr), 0);
	CHECK_RET(ibv_dereg_mr(s.imr), 0);
	CHECK(ibv_destroy_cq(s.cx) == 0 && ibv_destroy_cq(s.cy) == 0);
	CHECK_RET(ibv_dealloc_pd(s.pd), 0);
	CHECK(ibv_close_device(s.ctx) == 0);
	free(s.ibuf);
	free(s.tbuf);
	return t_finish();
}
