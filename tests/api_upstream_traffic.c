/* SPDX-License-Identifier: MIT */
/*
 * api_upstream_traffic: the traffic scenarios of rdma-core's
 * tests/test_buf.py (docs/seed-apis.md 4, scenarios 13-21) and
 * tests/test_dmah.py (28-30), in C, each case named after the upstream
 * test, with upstream's setup:
 *
 *   - two players on the same device and port, each with its own
 *     context, 10 iterations;
 *   - test_buf: an extended CQ (ibv_create_cq_ex, cqe 1000,
 *     IBV_WC_STANDARD_FLAGS, + IBV_CQ_INIT_ATTR_MASK_PD with the CC parent
 *     domain when cc) polled with ibv_start_poll / ibv_next_poll /
 *     ibv_end_poll; the data buffer from ibv_alloc_buf, registered at an
 *     offset by ibv_reg_buf_mr or ibv_reg_mr_ex(ADDR|BUF); the QP on the
 *     parent domain when cc;
 *   - test_dmah: a regular CQ; fresh memory registered with
 *     ibv_reg_mr_ex(ADDR|DMAH) and the default handle (CPU 0, VM, ph 0);
 *   - SGE addresses are the registered VA (+ offset), the remote address
 *     is the peer's VA, never ibv_mr.addr (which is the offset inside a
 *     DMA-buf backed buffer);
 *   - every payload is checked against the peer's fill character ('c'
 *     from the client, 's' from the server), in both directions; UD data
 *     sits after the 40-byte GRH.
 *
 * The set runs twice: on the default device, then on a CC DMA bounce
 * device (SOFTVERBS_CC_DMA_BOUNCE=1, SOFTVERBS_CC_HEAP=builtin; the device
 * list is probed again after setenv). On the bounce device the transport
 * moves data between MRs registered through the fd path (shared memory).
 * Skips follow upstream: get_pd() skips the plain-PD case on a bounce
 * device; the DMAH cases need a regular CQ and ordinary memory, which a
 * bounce device refuses with EOPNOTSUPP (upstream's skip_unsupported);
 * the atomic case skips when atomic_caps is NONE. A parent domain, buffer
 * or MR failing otherwise is a failure here: the software device has them.
 */
#include "harness.h"
#include "traffic.h"
#include "upstream.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* test: timeout=180 */

#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ
#define RA IBV_ACCESS_REMOTE_ATOMIC
#define CC_FLAG IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC
#define GRH 40
#define ITERS 10
#define QKEY 0x11111111u

struct run {
	const char *label;
	struct ibv_device **list;
	bool bounce;
	uint32_t atomic_caps;
	enum ibv_mtu mtu;
};

enum op {
	OP_SEND,
	OP_WRITE,
	OP_WRITE_IMM,
	OP_READ,
	OP_FAA
};

/* One upstream test. */
struct scen {
	const char *name;
	bool cc; /* CC PD (base PD + ALLOW_CC_UNPROTECTED_ALLOC parent domain) */
	bool reg_ex; /* ibv_reg_mr_ex(ADDR|BUF) instead of ibv_reg_buf_mr */
	bool dmah; /* test_dmah: regular CQ, fresh memory, ibv_reg_mr_ex(ADDR|DMAH) */
	enum ibv_qp_type type;
	enum op op;
	uint32_t msg; /* message size */
	size_t buf_size; /* 0: mr_len + offset */
	size_t offset; /* of the MR inside the buffer */
	size_t mr_len; /* 0: msg (+ GRH for UD) */
	int access;
};

struct player {
	struct ibv_context *ctx;
	struct ibv_pd *base, *pd; /* pd: the parent domain when cc, else base */
	struct ibv_cq_ex *cqx; /* test_buf */
	struct ibv_cq *cq; /* what the QP uses */
	struct ibv_qp *qp;
	struct ibv_ah *ah; /* UD: towards the peer */
	struct ibv_buf *b;
	struct ibv_dmah *dmah;
	uint8_t *mem; /* the whole buffer */
	size_t mem_len;
	uint8_t *va; /* mem + offset: what is registered */
	size_t mr_len;
	struct ibv_mr *mr;
	union ibv_gid gid;
	uint64_t ops; /* messages this player sent */
};

struct wcinfo {
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint64_t wr_id;
	uint32_t byte_len;
	__be32 imm;
	unsigned int flags;
};

static size_t page;
static char case_name[256];
static uint64_t total_msgs, total_bytes;

/* ---- setup ---- */

static const char *verb_err(const char *what)
{
	static char b[160];

	snprintf(b, sizeof(b), "%s: %s", what, t_errname(errno));
	return b;
}

/*
 * Returns 0 (ready), 1 (skipped: the case is closed) or -1 (failed).
 * `p` is zeroed first, so player_fini() is always safe.
 */
static int player_init(const struct run *r, const struct scen *s, struct player *p)
{
	struct ibv_qp_init_attr qa;
	size_t mr_len = s->mr_len ? s->mr_len : s->msg + (s->type == IBV_QPT_UD ? GRH : 0);

	memset(p, 0, sizeof(*p));
	errno = 0;
	p->ctx = ibv_open_device(r->list[0]);
	if (!CHECK_MSG(p->ctx, "%s", verb_err("ibv_open_device")))
		return -1;
	if (!s->cc && !s->dmah && r->bounce) {
		/* upstream get_pd() */
		up_skip("a plain PD cannot register memory on a CC DMA bounce device (get_pd)");
		return 1;
	}
	p->base = ibv_alloc_pd(p->ctx);
	if (!CHECK_MSG(p->base, "%s", verb_err("ibv_alloc_pd")))
		return -1;
	p->pd = p->base;
	if (s->cc) {
		struct ibv_parent_domain_init_attr pa = {.pd = p->base, .comp_mask = CC_FLAG};

		errno = 0;
		p->pd = ibv_alloc_parent_domain(p->ctx, &pa);
		if (!CHECK_MSG(p->pd, "%s", verb_err("CC parent domain")))
			return -1;
	}

	/* the CQ */
	if (s->dmah) {
		errno = 0;
		p->cq = ibv_create_cq(p->ctx, 1000, NULL, NULL, 0);
		if (!p->cq && errno == EOPNOTSUPP && r->bounce) {
			up_skip("a bounce device refuses a regular CQ (EOPNOTSUPP; upstream "
				"skip_unsupported)");
			return 1;
		}
		if (!CHECK_MSG(p->cq, "%s", verb_err("ibv_create_cq")))
			return -1;
	} else {
		struct ibv_cq_init_attr_ex ca;

		memset(&ca, 0, sizeof(ca));
		ca.cqe = 1000;
		ca.wc_flags = IBV_WC_STANDARD_FLAGS;
		ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
		if (s->cc) {
			ca.comp_mask |= IBV_CQ_INIT_ATTR_MASK_PD;
			ca.parent_domain = p->pd;
		}
		errno = 0;
		p->cqx = ibv_create_cq_ex(p->ctx, &ca);
		if (!CHECK_MSG(p->cqx, "%s", verb_err("ibv_create_cq_ex")))
			return -1;
		p->cq = ibv_cq_ex_to_cq(p->cqx);
	}

	/* the data buffer and its MR */
	p->mem_len = s->buf_size ? s->buf_size : mr_len + s->offset;
	p->mr_len = mr_len;
	if (s->dmah) {
		struct ibv_dmah_init_attr da;
		struct ibv_mr_init_attr ma;

		memset(&da, 0, sizeof(da));
		da.comp_mask = IBV_DMAH_INIT_ATTR_MASK_CPU_ID |
			       IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE | IBV_DMAH_INIT_ATTR_MASK_PH;
		da.cpu_id = 0;
		da.tph_mem_type = IBV_TPH_MEM_TYPE_VM;
		errno = 0;
		p->dmah = ibv_alloc_dmah(p->ctx, &da);
		if (!CHECK_MSG(p->dmah, "%s", verb_err("ibv_alloc_dmah")))
			return -1;
		p->mem = mmap(NULL, p->mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		if (!CHECK(p->mem != MAP_FAILED)) {
			p->mem = NULL;
			return -1;
		}
		p->va = p->mem + s->offset;
		memset(&ma, 0, sizeof(ma));
		ma.comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH;
		ma.addr = p->va;
		ma.length = mr_len;
		ma.access = (unsigned int)s->access;
		ma.dmah = p->dmah;
		errno = 0;
		p->mr = ibv_reg_mr_ex(p->pd, &ma);
		if (!CHECK_MSG(p->mr, "%s", verb_err("ibv_reg_mr_ex(ADDR|DMAH)")))
			return -1;
	} else {
		errno = 0;
		p->mem = ibv_alloc_buf(p->pd, p->mem_len, &p->b);
		if (!CHECK_MSG(p->mem, "%s", verb_err("ibv_alloc_buf")))
			return -1;
		p->va = p->mem + s->offset;
		errno = 0;
		if (s->reg_ex) {
			struct ibv_mr_init_attr ma;

			memset(&ma, 0, sizeof(ma));
			ma.comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_BUF;
			ma.addr = p->va;
			ma.length = mr_len;
			ma.access = (unsigned int)s->access;
			ma.buf = p->b;
			p->mr = ibv_reg_mr_ex(p->pd, &ma);
		} else {
			p->mr = ibv_reg_buf_mr(p->pd, p->b, p->va, mr_len, s->access);
		}
		if (!CHECK_MSG(p->mr, "%s",
			       verb_err(s->reg_ex ? "ibv_reg_mr_ex(ADDR|BUF)" : "ibv_reg_buf_mr")))
			return -1;
		/* a DMA-buf backed buffer reports the offset inside it, else the VA */
		if (r->bounce)
			CHECK_MSG(p->mr->addr == (void *)(uintptr_t)s->offset, "mr->addr %p",
				  p->mr->addr);
		else
			CHECK_MSG(p->mr->addr == p->va, "mr->addr %p", p->mr->addr);
	}

	/* the QP, on the parent domain when cc */
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = p->cq;
	qa.recv_cq = p->cq;
	qa.qp_type = s->type;
	qa.cap.max_send_wr = 16;
	qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	errno = 0;
	p->qp = ibv_create_qp(p->pd, &qa);
	if (!CHECK_MSG(p->qp, "%s", verb_err("ibv_create_qp")))
		return -1;
	if (!CHECK_RET(ibv_query_gid(p->ctx, 1, 0, &p->gid), 0))
		return -1;
	return t_qp_init(p->qp, s->access);
}

static void player_fini(struct player *p)
{
	if (p->ah)
		CHECK_RET(ibv_destroy_ah(p->ah), 0);
	if (p->qp)
		CHECK_RET(ibv_destroy_qp(p->qp), 0);
	if (p->mr)
		CHECK_RET(ibv_dereg_mr(p->mr), 0);
	if (p->b)
		ibv_free_buf(p->b);
	else if (p->mem)
		munmap(p->mem, p->mem_len);
	if (p->dmah)
		CHECK_RET(ibv_dealloc_dmah(p->dmah), 0);
	if (p->cq)
		CHECK_RET(ibv_destroy_cq(p->cq), 0);
	if (p->pd && p->pd != p->base)
		CHECK_RET(ibv_dealloc_pd(p->pd), 0);
	if (p->base)
		CHECK_RET(ibv_dealloc_pd(p->base), 0);
	if (p->ctx)
		CHECK_RET(ibv_close_device(p->ctx), 0);
	memset(p, 0, sizeof(*p));
}

static int connect_pair(const struct run *r, struct player *c, struct player *s)
{
	if (c->qp->qp_type == IBV_QPT_UD) {
		struct ibv_ah_attr ac = t_ah_attr(&s->gid), as = t_ah_attr(&c->gid);

		c->ah = ibv_create_ah(c->pd, &ac);
		s->ah = ibv_create_ah(s->pd, &as);
		if (!CHECK(c->ah && s->ah))
			return -1;
		if (t_qp_rts(c->qp, 0, NULL, 0, 0, r->mtu) ||
		    t_qp_rts(s->qp, 0, NULL, 0, 0, r->mtu))
			return -1;
		return 0;
	}
	if (t_qp_rts(c->qp, s->qp->qp_num, &s->gid, 200, 100, r->mtu) ||
	    t_qp_rts(s->qp, c->qp->qp_num, &c->gid, 100, 200, r->mtu))
		return -1;
	return 0;
}

/* ---- polling: extended CQ (start/next/end) or ibv_poll_cq ---- */

static int poll_one(struct player *p, struct wcinfo *w, const char *what)
{
	uint64_t end = t_ms() + 5000;

	memset(w, 0, sizeof(*w));
	for (;;) {
		if (p->cqx) {
			struct ibv_poll_cq_attr pa = {0};
			int ret = ibv_start_poll(p->cqx, &pa);

			if (ret == 0) {
				w->status = p->cqx->status;
				w->wr_id = p->cqx->wr_id;
				w->opcode = ibv_wc_read_opcode(p->cqx);
				w->byte_len = ibv_wc_read_byte_len(p->cqx);
				w->flags = ibv_wc_read_wc_flags(p->cqx);
				if (w->flags & IBV_WC_WITH_IMM)
					w->imm = ibv_wc_read_imm_data(p->cqx);
				/* one at a time: a second entry stays for the next call */
				ibv_end_poll(p->cqx);
				break;
			}
			if (!CHECK_MSG(ret == ENOENT, "ibv_start_poll: %s", t_errname(ret)))
				return -1;
		} else {
			struct ibv_wc wc;
			int n = ibv_poll_cq(p->cq, 1, &wc);

			if (!CHECK_MSG(n >= 0, "ibv_poll_cq: %d", n))
				return -1;
			if (n == 1) {
				w->status = wc.status;
				w->wr_id = wc.wr_id;
				w->opcode = wc.opcode;
				w->byte_len = wc.byte_len;
				w->flags = wc.wc_flags;
				w->imm = wc.imm_data;
				break;
			}
		}
		if (t_ms() > end)
			return CHECK_MSG(0, "%s: no completion within 5 s", what), -1;
		usleep(20);
	}
	return CHECK_MSG(w->status == IBV_WC_SUCCESS, "%s: status %s", what,
			 ibv_wc_status_str(w->status)) ?
		       0 :
		       -1;
}

/* Both players' CQs also drain ibv_next_poll: a batch of two completions. */
static int poll_two_ex(struct player *p, struct wcinfo w[2], const char *what)
{
	struct ibv_poll_cq_attr pa = {0};
	uint64_t end = t_ms() + 5000;
	int got = 0, ret;

	memset(w, 0, 2 * sizeof(*w));
	while (got < 2) {
		ret = ibv_start_poll(p->cqx, &pa);
		if (ret == ENOENT) {
			if (t_ms() > end)
				return CHECK_MSG(0, "%s: %d of 2 completions", what, got), -1;
			usleep(20);
			continue;
		}
		if (!CHECK_MSG(ret == 0, "ibv_start_poll: %s", t_errname(ret)))
			return -1;
		do {
			w[got].status = p->cqx->status;
			w[got].wr_id = p->cqx->wr_id;
			w[got].opcode = ibv_wc_read_opcode(p->cqx);
			w[got].byte_len = ibv_wc_read_byte_len(p->cqx);
			got++;
		} while (got < 2 && ibv_next_poll(p->cqx) == 0);
		ibv_end_poll(p->cqx);
	}
	for (int i = 0; i < 2; i++)
		if (!CHECK_MSG(w[i].status == IBV_WC_SUCCESS, "%s: status %s", what,
			       ibv_wc_status_str(w[i].status)))
			return -1;
	return 0;
}

/* ---- posting ---- */

static int post_recv(struct player *p, uint64_t wr_id)
{
	struct ibv_sge sge = {(uintptr_t)p->va, (uint32_t)p->mr_len, p->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;

	return CHECK_RET(ibv_post_recv(p->qp, &wr, &bad), 0) ? 0 : -1;
}

static int post_send(struct player *p, const struct player *peer, enum ibv_wr_opcode op,
		     uint32_t len, uint64_t wr_id, uint32_t imm)
{
	struct ibv_sge sge = {(uintptr_t)p->va, len, p->mr->lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(imm);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = (uintptr_t)peer->va; /* the peer's VA */
		wr.wr.atomic.rkey = peer->mr->rkey;
		wr.wr.atomic.compare_add = 1;
	} else if (p->qp->qp_type == IBV_QPT_UD) {
		wr.wr.ud.ah = p->ah;
		wr.wr.ud.remote_qpn = peer->qp->qp_num;
		wr.wr.ud.remote_qkey = QKEY;
	} else {
		wr.wr.rdma.remote_addr = (uintptr_t)peer->va;
		wr.wr.rdma.rkey = peer->mr->rkey;
	}
	p->ops++;
	return CHECK_RET(ibv_post_send(p->qp, &wr, &bad), 0) ? 0 : -1;
}

static bool all_are(const uint8_t *p, size_t n, uint8_t c)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != c)
			return false;
	return true;
}

/* ---- one direction of one iteration ---- */

static int send_once(const struct scen *s, struct player *from, struct player *to, uint8_t fill,
		     int it)
{
	bool ud = s->type == IBV_QPT_UD;
	size_t at = ud ? GRH : 0;
	struct wcinfo w;

	memset(to->va, 0, to->mr_len);
	if (post_recv(to, 100 + (uint64_t)it))
		return -1;
	memset(from->va, fill, s->msg);
	if (post_send(from, to, IBV_WR_SEND, s->msg, (uint64_t)it, 0) ||
	    poll_one(from, &w, "send completion"))
		return -1;
	CHECK(w.opcode == IBV_WC_SEND && w.wr_id == (uint64_t)it);
	if (poll_one(to, &w, "receive completion"))
		return -1;
	CHECK(w.opcode == IBV_WC_RECV && w.wr_id == 100 + (uint64_t)it);
	CHECK_EQ_INT(w.byte_len, s->msg + at);
	if (ud)
		CHECK(w.flags & IBV_WC_GRH);
	return CHECK_MSG(all_are(to->va + at, s->msg, fill), "iteration %d: payload is not '%c'",
			 it, fill) ?
		       0 :
		       -1;
}

static int write_once(const struct scen *s, struct player *from, struct player *to, uint8_t fill,
		      int it, bool imm)
{
	uint32_t want_imm = 0xc0de0000u + (uint32_t)it;
	struct wcinfo w;

	memset(to->va, 0, to->mr_len);
	if (imm && post_recv(to, 100 + (uint64_t)it))
		return -1;
	memset(from->va, fill, s->msg);
	if (post_send(from, to, imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, s->msg,
		      (uint64_t)it, want_imm) ||
	    poll_one(from, &w, "write completion"))
		return -1;
	CHECK(w.opcode == IBV_WC_RDMA_WRITE);
	if (imm) {
		if (poll_one(to, &w, "write-with-immediate receive"))
			return -1;
		CHECK(w.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
		CHECK(w.flags & IBV_WC_WITH_IMM);
		CHECK_MSG(ntohl(w.imm) == want_imm, "imm 0x%x, want 0x%x", ntohl(w.imm), want_imm);
		CHECK_EQ_INT(w.byte_len, s->msg);
	}
	return CHECK_MSG(all_are(to->va, s->msg, fill), "iteration %d: written data is not '%c'",
			 it, fill) ?
		       0 :
		       -1;
}

static int read_once(const struct scen *s, struct player *reader, struct player *owner,
		     uint8_t fill, int it)
{
	struct wcinfo w;

	memset(owner->va, fill, s->msg);
	memset(reader->va, 0, reader->mr_len);
	if (post_send(reader, owner, IBV_WR_RDMA_READ, s->msg, (uint64_t)it, 0) ||
	    poll_one(reader, &w, "read completion"))
		return -1;
	CHECK(w.opcode == IBV_WC_RDMA_READ);
	CHECK_EQ_INT(w.byte_len, s->msg);
	return CHECK_MSG(all_are(reader->va, s->msg, fill), "iteration %d: read data is not '%c'",
			 it, fill) ?
		       0 :
		       -1;
}

/*
 * FETCH_AND_ADD of 1 on the peer's word. The model: the fetcher's word
 * receives the target's old value, the target's word grows by one; both
 * words in memory must match it afterwards.
 */
static int faa_once(struct player *from, struct player *to, uint64_t *wfrom, uint64_t *wto, int it)
{
	uint64_t old = *wto, got, now;
	struct wcinfo w;

	if (post_send(from, to, IBV_WR_ATOMIC_FETCH_AND_ADD, 8, (uint64_t)it, 0) ||
	    poll_one(from, &w, "fetch-and-add completion"))
		return -1;
	CHECK(w.opcode == IBV_WC_FETCH_ADD);
	CHECK_EQ_INT(w.byte_len, 8);
	*wfrom = old;
	*wto = old + 1;
	memcpy(&got, from->va, 8);
	memcpy(&now, to->va, 8);
	CHECK_MSG(got == *wfrom, "iteration %d: fetched 0x%llx, want 0x%llx", it,
		  (unsigned long long)got, (unsigned long long)*wfrom);
	return CHECK_MSG(now == *wto, "iteration %d: remote 0x%llx, want 0x%llx", it,
			 (unsigned long long)now, (unsigned long long)*wto) ?
		       0 :
		       -1;
}

/* A SEND each way in one batch, so that ibv_next_poll has something to return. */
static void batch_check(const struct scen *s, struct player *c, struct player *sv)
{
	struct wcinfo w[2];

	if (!c->cqx || s->type != IBV_QPT_RC || s->op != OP_SEND)
		return;
	memset(sv->va, 0, sv->mr_len);
	if (post_recv(sv, 500) || post_recv(sv, 501))
		return;
	memset(c->va, 'c', s->msg);
	if (post_send(c, sv, IBV_WR_SEND, s->msg, 1, 0) ||
	    post_send(c, sv, IBV_WR_SEND, s->msg, 2, 0))
		return;
	if (poll_two_ex(c, w, "two sends") || poll_two_ex(sv, w, "two receives"))
		return;
	CHECK(w[0].wr_id == 500 && w[1].wr_id == 501);
	CHECK(all_are(sv->va, s->msg, 'c'));
}

static void run_scen(const struct run *r, const struct scen *s)
{
	struct player c, sv;
	uint64_t ws = 0, wc = 0;
	int ret;

	snprintf(case_name, sizeof(case_name), "%s (%s)", s->name, r->label);
	up_case(case_name);
	ret = player_init(r, s, &c);
	if (!ret)
		ret = player_init(r, s, &sv);
	if (!ret && s->op == OP_FAA && r->atomic_caps == IBV_ATOMIC_NONE) {
		up_skip("the device reports atomic_caps NONE");
		ret = 1;
	}
	if (!ret)
		ret = connect_pair(r, &c, &sv);
	for (int it = 0; !ret && it < ITERS; it++) {
		switch (s->op) {
		case OP_SEND:
			ret = send_once(s, &c, &sv, 'c', it) || send_once(s, &sv, &c, 's', it);
			break;
		case OP_WRITE:
		case OP_WRITE_IMM:
			ret = write_once(s, &c, &sv, 'c', it, s->op == OP_WRITE_IMM) ||
			      write_once(s, &sv, &c, 's', it, s->op == OP_WRITE_IMM);
			break;
		case OP_READ:
			ret = read_once(s, &c, &sv, 's', it) || read_once(s, &sv, &c, 'c', it);
			break;
		case OP_FAA:
			/* the words start as the players' fill characters */
			if (it == 0) {
				memset(sv.va, 's', 8);
				memset(c.va, 'c', 8);
				memcpy(&ws, sv.va, 8);
				memcpy(&wc, c.va, 8);
			}
			ret = faa_once(&c, &sv, &wc, &ws, it) || faa_once(&sv, &c, &ws, &wc, it);
			break;
		}
		if (!ret)
			total_bytes += 2ull * s->msg;
	}
	if (!ret)
		batch_check(s, &c, &sv);
	total_msgs += c.ops + sv.ops;
	player_fini(&c);
	player_fini(&sv);
}

static const struct scen scens[] = {
	/* test_buf.py BufTrafficTest */
	{.name = "test_buf_rc_send_cc_pd_reg_buf_mr",
	 .cc = true,
	 .type = IBV_QPT_RC,
	 .op = OP_SEND,
	 .msg = 1024,
	 .access = LW},
	{.name = "test_buf_rc_send_large_msg_cc_pd_reg_buf_mr",
	 .cc = true,
	 .type = IBV_QPT_RC,
	 .op = OP_SEND,
	 .msg = 16384,
	 .access = LW},
	{.name = "test_buf_rc_send_mr_subrange_cc_pd_reg_buf_mr",
	 .cc = true,
	 .type = IBV_QPT_RC,
	 .op = OP_SEND,
	 .msg = 8192,
	 .buf_size = 0 /* page + 16384, set at run time */,
	 .offset = 0 /* page */,
	 .mr_len = 8192,
	 .access = LW},
	{.name = "test_buf_rc_rdma_write_imm_cc_pd_reg_buf_mr",
	 .cc = true,
	 .type = IBV_QPT_RC,
	 .op = OP_WRITE_IMM,
	 .msg = 1024,
	 .access = LW | RW},
	{.name = "test_buf_rc_rdma_read_cc_pd_reg_buf_mr",
	 .cc = true,
	 .type = IBV_QPT_RC,
	 .op = OP_READ,
	 .msg = 1024,
	 .access = LW | RR},
	{.name = "test_buf_rc_atomic_fetch_add_cc_pd_reg_buf_mr",
	 .cc = true,
	 .type = IBV_QPT_RC,
	 .op = OP_FAA,
	 .msg = 8,
	 .access = LW | RW | RA},
	{.name = "test_buf_ud_send_cc_pd_reg_buf_mr",
	 .cc = true,
	 .type = IBV_QPT_UD,
	 .op = OP_SEND,
	 .msg = 1024,
	 .access = LW},
	{.name = "test_buf_rc_send_plain_pd_reg_buf_mr",
	 .cc = false,
	 .type = IBV_QPT_RC,
	 .op = OP_SEND,
	 .msg = 1024,
	 .access = LW},
	{.name = "test_buf_rc_send_cc_pd_reg_mr_ex",
	 .cc = true,
	 .reg_ex = true,
	 .type = IBV_QPT_RC,
	 .op = OP_SEND,
	 .msg = 1024,
	 .access = LW},
	/* test_dmah.py DmaHandleTrafficTest */
	{.name = "test_dmah_mrex_rc_send",
	 .dmah = true,
	 .type = IBV_QPT_RC,
	 .op = OP_SEND,
	 .msg = 1024,
	 .access = LW},
	{.name = "test_dmah_mrex_rc_rdma_write",
	 .dmah = true,
	 .type = IBV_QPT_RC,
	 .op = OP_WRITE,
	 .msg = 1024,
	 .access = LW | RW},
	{.name = "test_dmah_mrex_rc_atomic",
	 .dmah = true,
	 .type = IBV_QPT_RC,
	 .op = OP_FAA,
	 .msg = 8,
	 .access = LW | RA | RW},
};

static void run_set(const struct run *r)
{
	for (size_t i = 0; i < SV_ARRAY_N(scens); i++) {
		struct scen s = scens[i];

		if (strstr(s.name, "mr_subrange")) {
			s.buf_size = page + 16384;
			s.offset = page;
		}
		run_scen(r, &s);
	}
}

/* Probe the devices as configured now; device 0 and what it reports. */
static bool open_run(struct run *r, bool want_bounce)
{
	struct ibv_device_attr_ex ax;
	struct ibv_port_attr pa;
	struct ibv_context *ctx = NULL;

	r->list = ibv_get_device_list(NULL);
	if (r->list && r->list[0])
		ctx = ibv_open_device(r->list[0]);
	if (!CHECK_MSG(ctx != NULL, "%s: open: %s", r->label, t_errname(errno)))
		return false;
	memset(&ax, 0, sizeof(ax));
	CHECK_RET(ibv_query_device_ex(ctx, NULL, &ax), 0);
	CHECK_RET(ibv_query_port(ctx, 1, &pa), 0);
	r->bounce = ax.device_cap_flags_ex & IBV_DEVICE_CC_DMA_BOUNCE;
	r->atomic_caps = ax.orig_attr.atomic_cap;
	r->mtu = pa.active_mtu;
	CHECK_MSG(r->bounce == want_bounce, "%s: CC_DMA_BOUNCE is %s", r->label,
		  r->bounce ? "set" : "clear");
	CHECK_RET(ibv_close_device(ctx), 0);
	return true;
}

int main(void)
{
	struct run def = {.label = "default device"};
	struct run cc = {.label = "CC bounce, builtin heap"};

	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	unsetenv("SOFTVERBS_CC_HEAP");
	t_start("api_upstream_traffic");
	page = (size_t)sysconf(_SC_PAGESIZE);

	up_case("setup: the default device");
	if (open_run(&def, false))
		run_set(&def);
	ibv_free_device_list(def.list);

	up_case("setup: a CC DMA bounce device");
	setenv("SOFTVERBS_CC_DMA_BOUNCE", "1", 1);
	setenv("SOFTVERBS_CC_HEAP", "builtin", 1);
	if (open_run(&cc, true))
		run_set(&cc);
	ibv_free_device_list(cc.list);
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	unsetenv("SOFTVERBS_CC_HEAP");
	printf("# traffic: %llu messages, %llu payload bytes checked\n",
	       (unsigned long long)total_msgs, (unsigned long long)total_bytes);
	return up_finish();
}
