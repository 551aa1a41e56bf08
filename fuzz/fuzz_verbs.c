/* SPDX-License-Identifier: MIT */
/*
 * fuzz_verbs - the verbs that take structs, with fuzzed contents.
 *
 * An input is a list of operations (at most 64), each an opcode byte and
 * the bytes its struct is decoded from (fuzz_util.h's reader: zeros past
 * the end). Each input starts with a fresh RC, UD and UC QP in
 * RESET, a type 1 and a type 2 memory window, and ends by destroying
 * everything it created, so inputs are independent. The operations:
 *
 *   reg_mr_ex        ibv_mr_init_attr: length, access, comp_mask, iova,
 *                    fd_offset fuzzed; addr inside the harness's buffer
 *                    (guard pages around it) or its read-only buffer;
 *                    fd one of -1, a memfd, the ibv_buf's dma-buf fd or a
 *                    closed number; dmah and buf NULL or the harness's;
 *                    on the PD or one of the input's parent domains
 *   dereg_mr, alloc_dmah (every field raw), dealloc_dmah
 *   alloc_parent_domain  pd the PD, a parent domain or NULL; td NULL or
 *                    the harness's; comp_mask raw; alloc/free hooks NULL
 *                    or the harness's (which may decline or fail)
 *   dealloc_pd, create_qp on a parent domain (the hooks run; RC, UD or UC)
 *   modify_qp        every ibv_qp_attr field raw (the GID raw or the
 *                    device's own), the mask raw or limited to the known
 *                    bits; from whatever state the QP is in
 *   to_state         a valid path to RESET, INIT, RTR, RTS, SQD or ERR
 *   post_send        a list of up to 4 WRs: opcode, flags, num_sge, SGE
 *                    addresses, lengths and lkeys, remote addresses, rkeys,
 *                    atomic operands, UD QPN and Q_Key fuzzed, every
 *                    opcode (BIND_MW: one of the windows, an MR or
 *                    none, range and access fuzzed; FLUSH, ATOMIC
 *                    WRITE, SEND with Invalidate); SGE lists
 *                    are the harness's arrays; inline data always lies in
 *                    the harness's buffer (the library reads it as given)
 *   post_recv        the same for receive WRs
 *   query_qp         a raw mask
 *   bind_mw          ibv_bind_mw of a window (the type 2 one: refused)
 *                    on a QP, MR, range and access fuzzed
 *
 * The harness's pointers are real, so any crash, sanitizer report or
 * write outside a registered buffer is the library's. Registration must
 * refuse what pinning would (-EFAULT): a span reaching into a guard page,
 * or read-only memory for a writable MR; an MR that registers is then
 * usable by every SGE. Everything the device sends is dropped
 * (fz_open_device).
 */
#include "fuzz_util.h"

#include <sys/mman.h>

enum { BUF_LEN = 65536, NMR = 4, NDMAH = 2, NPD = 2, NQP = 5, MAX_OPS = 64, NSGE = 8 };
enum { NQP_FIXED = 3 }; /* RC, UD, UC: created with each input */

static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_td *td;
	struct ibv_cq *cq;
	struct ibv_ah *ah;
	union ibv_gid gid;
	struct fz_buf buf;   /* SGEs and registrations point here; guard pages */
	struct fz_buf ro;    /* read-only after setup; guard pages */
	int memfd;           /* BUF_LEN bytes */
	struct ibv_buf *ibuf;
	void *ibuf_addr;
	int dmabuf_fd;
	int pd_context;
} g;

/* What one input created (freed at its end). */
struct objs {
	struct ibv_mr *mr[NMR];
	struct ibv_dmah *dmah[NDMAH];
	struct ibv_pd *ppd[NPD];
	struct ibv_qp *qp[NQP]; /* 0 RC, 1 UD, 2 UC, 3-4 on parent domains */
	struct ibv_mw *mw[2];   /* type 1, type 2, on the PD */
};

static void setup(void)
{
	struct ibv_ah_attr ah;
	struct ibv_td_init_attr td = { 0 };

	g.ctx = fz_open_device();
	g.pd = ibv_alloc_pd(g.ctx);
	g.td = ibv_alloc_td(g.ctx, &td);
	g.cq = ibv_create_cq(g.ctx, 256, NULL, NULL, 0);
	FUZZ_REQUIRE(g.pd && g.td && g.cq);
	FUZZ_REQUIRE(ibv_query_gid(g.ctx, 1, 0, &g.gid) == 0);
	memset(&ah, 0, sizeof(ah));
	ah.is_global = 1;
	ah.port_num = 1;
	ah.grh.dgid = g.gid;
	ah.grh.hop_limit = 64;
	g.ah = ibv_create_ah(g.pd, &ah);
	FUZZ_REQUIRE(g.ah);
	fz_buf_alloc(&g.buf, BUF_LEN, true, 0);
	fz_buf_alloc(&g.ro, FZ_PAGE, true, 0x5a);
	FUZZ_REQUIRE(mprotect(g.ro.p, FZ_PAGE, PROT_READ) == 0);
	g.memfd = memfd_create("fuzz_verbs", 0);
	FUZZ_REQUIRE(g.memfd >= 0 && ftruncate(g.memfd, BUF_LEN) == 0);
	g.ibuf_addr = ibv_alloc_buf(g.pd, BUF_LEN, &g.ibuf);
	FUZZ_REQUIRE(g.ibuf_addr);
	g.dmabuf_fd = ibv_export_buf_dmabuf_fd(g.ibuf); /* may be unsupported: -1 */
}

/* ---- helpers ---- */

/* FUZZ_VERBOSE=1: what each operation did (for checking seeds by hand). */
static bool verbose;
#define TRACE(...)                                                                                 \
	do {                                                                                       \
		if (verbose)                                                                       \
			fprintf(stderr, __VA_ARGS__);                                              \
	} while (0)

static struct ibv_pd *pick_pd(struct fz_in *in, struct objs *o)
{
	uint8_t v = fz_u8(in) % (NPD + 2);

	if (v < NPD && o->ppd[v])
		return o->ppd[v];
	return v == NPD + 1 ? NULL : g.pd;
}

/* An address in the harness's buffer and a length that stays inside it. */
static void in_buf(struct fz_in *in, uint64_t *addr, uint32_t *len)
{
	uint32_t off = fz_u16(in) % BUF_LEN;
	uint32_t l = fz_u32(in);

	*addr = (uintptr_t)g.buf.p + off;
	*len = l % (BUF_LEN - off + 1);
}

/* An lkey: one of the input's MRs or raw. */
static uint32_t pick_key(struct fz_in *in, struct objs *o, bool remote)
{
	uint8_t v = fz_u8(in);

	if (remote && v >= 0xe0 && v < 0xf0)
		return o->mw[v & 1]->rkey;
	if (v < 0xf0 && o->mr[v % NMR])
		return remote ? o->mr[v % NMR]->rkey : o->mr[v % NMR]->lkey;
	return fz_u32(in);
}

static struct ibv_qp *pick_qp(struct fz_in *in, struct objs *o)
{
	uint8_t v = fz_u8(in) % NQP;

	return o->qp[v] ? o->qp[v] : o->qp[v % NQP_FIXED];
}

/* ---- operations ---- */

static void op_reg_mr_ex(struct fz_in *in, struct objs *o)
{
	struct ibv_mr_init_attr a;
	struct ibv_pd *pd = pick_pd(in, o);
	uint8_t sel = fz_u8(in);
	bool ro = sel & 0x80;
	size_t size = ro ? FZ_PAGE : BUF_LEN;
	uint32_t off = fz_u16(in) % size;
	static const int fds[4] = { -1, 0, 0, 1000 };
	const int writable = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_mr *mr;
	int slot = -1;

	memset(&a, 0, sizeof(a));
	a.addr = (ro ? g.ro.p : g.buf.p) + off;
	a.length = (sel & 1) ? (size_t)fz_u64(in) : fz_u32(in) % (size - off + 1);
	a.access = (int)fz_u32(in);
	a.comp_mask = (sel & 2) ? fz_u64(in) : fz_u8(in) & 0x3f;
	a.iova = fz_u64(in);
	a.fd = fds[(sel >> 2) & 3];
	if (((sel >> 2) & 3) == 1)
		a.fd = g.memfd;
	else if (((sel >> 2) & 3) == 2)
		a.fd = g.dmabuf_fd;
	a.fd_offset = fz_u64(in);
	if ((sel & 0x10) && o->dmah[(sel >> 6) & 1])
		a.dmah = o->dmah[(sel >> 6) & 1];
	if (sel & 0x20) {
		a.buf = g.ibuf;
		a.addr = (uint8_t *)g.ibuf_addr + off; /* BUF wants addr inside the buffer */
		ro = false;
	}
	if (!pd)
		return; /* ibv_reg_mr_ex dereferences the PD as libibverbs does */
	mr = ibv_reg_mr_ex(pd, &a);
	TRACE("reg_mr_ex len %zu access %#x mask %#llx: %s\n", a.length, a.access,
	      (unsigned long long)a.comp_mask, mr ? "ok" : strerror(errno));
	if (!mr)
		return;
	if ((a.comp_mask & (IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_BUF)) ==
	    IBV_REG_MR_MASK_ADDR) {
		if (!(sel & 0x20)) {
			/* between guard pages: only memory pinning would accept */
			FUZZ_ASSERT(a.length <= size - off);
			FUZZ_ASSERT(!ro || !(a.access & writable));
		} else if (a.length > size - off) {
			/* past the ibv_buf lies memory the harness does not own: never use it */
			FUZZ_ASSERT(ibv_dereg_mr(mr) == 0);
			return;
		}
	}
	for (int i = 0; i < NMR; i++)
		if (!o->mr[i]) {
			slot = i;
			break;
		}
	if (slot < 0) {
		FUZZ_ASSERT(ibv_dereg_mr(mr) == 0);
		return;
	}
	o->mr[slot] = mr;
}

static void op_dereg_mr(struct fz_in *in, struct objs *o)
{
	int i = fz_u8(in) % NMR;
	int ret;

	if (!o->mr[i])
		return;
	/* EINVAL while one of the input's windows is bound to it (rxe's rule) */
	ret = ibv_dereg_mr(o->mr[i]);
	FUZZ_ASSERT(ret == 0 || ret == EINVAL);
	if (!ret)
		o->mr[i] = NULL;
}

static void op_alloc_dmah(struct fz_in *in, struct objs *o)
{
	struct ibv_dmah_init_attr a;
	int i = fz_u8(in) % NDMAH;

	a.comp_mask = fz_u32(in);
	a.cpu_id = fz_u32(in);
	a.ph = fz_u8(in);
	a.tph_mem_type = fz_u8(in);
	if (!o->dmah[i]) {
		o->dmah[i] = ibv_alloc_dmah(g.ctx, &a);
		TRACE("alloc_dmah: %s\n", o->dmah[i] ? "ok" : strerror(errno));
	}
}

static void op_dealloc_dmah(struct fz_in *in, struct objs *o)
{
	int i = fz_u8(in) % NDMAH;

	/* EBUSY while an MR uses it; then it stays */
	if (o->dmah[i] && ibv_dealloc_dmah(o->dmah[i]) == 0)
		o->dmah[i] = NULL;
}

/* Parent-domain hooks: behaviour chosen by the byte pd_context points at. */
static void *pd_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
		      uint64_t resource_type)
{
	int mode = *(int *)pd_context;
	void *p = NULL;

	if (mode == 1)
		return IBV_ALLOCATOR_USE_DEFAULT;
	if (mode == 2)
		return NULL;
	if (alignment < sizeof(void *))
		alignment = sizeof(void *);
	if (posix_memalign(&p, alignment, size ? size : 1))
		return NULL;
	return p;
}

static void pd_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type)
{
	if (ptr != IBV_ALLOCATOR_USE_DEFAULT)
		free(ptr);
}

static void op_alloc_parent_domain(struct fz_in *in, struct objs *o)
{
	struct ibv_parent_domain_init_attr a;
	int i = fz_u8(in) % NPD;
	uint8_t sel = fz_u8(in);

	memset(&a, 0, sizeof(a));
	a.pd = pick_pd(in, o);
	a.td = (sel & 1) ? g.td : NULL;
	a.comp_mask = (sel & 2) ? fz_u32(in) : fz_u8(in) & 7;
	if (sel & 4)
		a.alloc = pd_alloc;
	if (sel & 8)
		a.free = pd_free;
	g.pd_context = (sel >> 4) % 3;
	a.pd_context = &g.pd_context;
	if (!a.pd)
		return; /* rdma-core requires a PD */
	if (!o->ppd[i]) {
		o->ppd[i] = ibv_alloc_parent_domain(g.ctx, &a);
		TRACE("alloc_parent_domain: %s\n", o->ppd[i] ? "ok" : strerror(errno));
	}
}

static void op_dealloc_pd(struct fz_in *in, struct objs *o)
{
	int i = fz_u8(in) % NPD;

	/* EBUSY while MRs, QPs or parent domains use it */
	if (o->ppd[i] && ibv_dealloc_pd(o->ppd[i]) == 0)
		o->ppd[i] = NULL;
}

static void op_create_qp(struct fz_in *in, struct objs *o)
{
	struct ibv_qp_init_attr a;
	int i = NQP_FIXED + fz_u8(in) % (NQP - NQP_FIXED);
	struct ibv_pd *pd = o->ppd[fz_u8(in) % NPD];
	uint8_t t;

	memset(&a, 0, sizeof(a));
	a.send_cq = g.cq;
	a.recv_cq = g.cq;
	t = fz_u8(in);
	a.qp_type = (t & 1) ? IBV_QPT_UD : (t & 2) ? IBV_QPT_UC : IBV_QPT_RC;
	a.cap.max_send_wr = fz_u8(in);
	a.cap.max_recv_wr = fz_u8(in);
	a.cap.max_send_sge = fz_u8(in) % 16;
	a.cap.max_recv_sge = fz_u8(in) % 16;
	a.cap.max_inline_data = fz_u16(in);
	if (pd && !o->qp[i]) {
		o->qp[i] = ibv_create_qp(pd, &a);
		TRACE("create_qp: %s\n", o->qp[i] ? "ok" : strerror(errno));
	}
}

static void raw_ah(struct fz_in *in, struct ibv_ah_attr *ah)
{
	uint8_t sel = fz_u8(in);

	ah->dlid = fz_u16(in);
	ah->sl = fz_u8(in);
	ah->src_path_bits = fz_u8(in);
	ah->static_rate = fz_u8(in);
	ah->is_global = (sel & 1) ? fz_u8(in) : 1;
	ah->port_num = (sel & 2) ? fz_u8(in) : 1;
	if (sel & 4)
		for (int i = 0; i < 16; i++)
			ah->grh.dgid.raw[i] = fz_u8(in);
	else
		ah->grh.dgid = g.gid;
	ah->grh.flow_label = fz_u32(in);
	ah->grh.sgid_index = fz_u8(in);
	ah->grh.hop_limit = fz_u8(in);
	ah->grh.traffic_class = fz_u8(in);
}

static void op_modify_qp(struct fz_in *in, struct objs *o)
{
	struct ibv_qp *qp = pick_qp(in, o);
	struct ibv_qp_attr a;
	uint32_t mask;

	memset(&a, 0, sizeof(a));
	a.qp_state = (enum ibv_qp_state)fz_u8(in);
	a.cur_qp_state = (enum ibv_qp_state)fz_u8(in);
	a.path_mtu = (enum ibv_mtu)fz_u8(in);
	a.path_mig_state = (enum ibv_mig_state)fz_u8(in);
	a.qkey = fz_u32(in);
	a.rq_psn = fz_u32(in);
	a.sq_psn = fz_u32(in);
	a.dest_qp_num = fz_u32(in);
	a.qp_access_flags = fz_u32(in);
	a.cap.max_send_wr = fz_u32(in);
	a.cap.max_recv_wr = fz_u32(in);
	raw_ah(in, &a.ah_attr);
	raw_ah(in, &a.alt_ah_attr);
	a.pkey_index = fz_u16(in);
	a.alt_pkey_index = fz_u16(in);
	a.en_sqd_async_notify = fz_u8(in);
	a.sq_draining = fz_u8(in);
	a.max_rd_atomic = fz_u8(in);
	a.max_dest_rd_atomic = fz_u8(in);
	a.min_rnr_timer = fz_u8(in);
	a.port_num = fz_u8(in);
	a.timeout = fz_u8(in);
	a.retry_cnt = fz_u8(in);
	a.rnr_retry = fz_u8(in);
	a.alt_port_num = fz_u8(in);
	a.alt_timeout = fz_u8(in);
	a.rate_limit = fz_u32(in);
	mask = fz_u32(in);
	if (!(mask & 0x80000000u))
		mask &= (IBV_QP_DEST_QPN << 1) - 1;
	TRACE("modify_qp %#x: %d\n", mask, ibv_modify_qp(qp, &a, (int)mask));
}

/* Valid attributes of every transition (a.qp_state set by the caller). */
static struct ibv_qp_attr good_attr(enum ibv_qp_state to)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = to;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	a.qkey = 0x11111111;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = 0xabcdef;
	a.max_dest_rd_atomic = 4;
	a.max_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.timeout = 0;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = g.gid;
	a.ah_attr.grh.hop_limit = 64;
	return a;
}

static void op_to_state(struct fz_in *in, struct objs *o)
{
	static const int init_m = IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	struct ibv_qp *qp = pick_qp(in, o);
	uint8_t want = fz_u8(in) % 6; /* RESET INIT RTR RTS SQD ERR */
	bool ud = qp->qp_type == IBV_QPT_UD, rc = qp->qp_type == IBV_QPT_RC;
	struct ibv_qp_attr a;
	int masks[3] = {
		init_m | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS),
		ud ? 0 : IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
		IBV_QP_SQ_PSN,
	};

	if (rc) {
		masks[1] |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		masks[2] |= IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			    IBV_QP_TIMEOUT;
	}

	a = good_attr(IBV_QPS_RESET);
	(void)ibv_modify_qp(qp, &a, IBV_QP_STATE);
	if (want == 5) {
		a = good_attr(IBV_QPS_ERR);
		(void)ibv_modify_qp(qp, &a, IBV_QP_STATE);
		return;
	}
	for (uint8_t s = 1; s <= want && s <= 3; s++) {
		a = good_attr((enum ibv_qp_state)s);
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | masks[s - 1]))
			return;
	}
	if (want == 4) {
		a = good_attr(IBV_QPS_SQD);
		(void)ibv_modify_qp(qp, &a, IBV_QP_STATE);
	}
	TRACE("to_state %d: now %d\n", want, qp->state);
}

/* Fill `sge[0..n)` from the input; inline: every SGE inside the buffer. */
static void fill_sges(struct fz_in *in, struct objs *o, struct ibv_sge *sge, int n, bool inl)
{
	for (int i = 0; i < n; i++) {
		uint8_t mode = fz_u8(in);
		uint64_t addr;
		uint32_t len;

		in_buf(in, &addr, &len);
		if (!inl && (mode & 1))
			addr = fz_u64(in);
		if (!inl && (mode & 2))
			len = fz_u32(in);
		sge[i].addr = addr;
		sge[i].length = len;
		sge[i].lkey = pick_key(in, o, false);
	}
}

/* One of the input's windows, or NULL. */
static struct ibv_mw *pick_mw(struct fz_in *in, struct objs *o)
{
	uint8_t v = fz_u8(in) % 3;

	return v < 2 ? o->mw[v] : NULL;
}

/* A bind's MR (one of the input's, or NULL), range (in the buffer or raw) and access. */
static void fill_bind(struct fz_in *in, struct objs *o, struct ibv_mw_bind_info *b)
{
	uint8_t mode = fz_u8(in);
	uint32_t len;

	b->mr = o->mr[mode % NMR];
	in_buf(in, &b->addr, &len);
	b->length = len;
	if (mode & 0x10)
		b->addr = fz_u64(in);
	if (mode & 0x20)
		b->length = fz_u64(in);
	b->mw_access_flags = fz_u32(in);
	if (!(mode & 0x40))
		b->mw_access_flags &= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				      IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED;
}

static void op_post_send(struct fz_in *in, struct objs *o)
{
	struct ibv_qp *qp = pick_qp(in, o);
	struct ibv_send_wr wr[4], *bad = NULL;
	struct ibv_sge sge[4][NSGE];
	int n = 1 + fz_u8(in) % 4, ret;

	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < n; i++) {
		struct ibv_send_wr *w = &wr[i];
		uint8_t op = fz_u8(in), fl = fz_u8(in);
		int8_t nsge = (int8_t)fz_u8(in);

		w->wr_id = 1000 + (uint64_t)i;
		w->next = i + 1 < n ? &wr[i + 1] : NULL;
		w->opcode = (enum ibv_wr_opcode)(op < 0xf0 ? op % 16 : op);
		w->send_flags = fl & 0x1f;
		if (fl & 0x80)
			w->send_flags = fz_u32(in);
		if (nsge > NSGE)
			nsge = (int8_t)(nsge % (NSGE + 1));
		w->num_sge = nsge;
		w->sg_list = sge[i];
		fill_sges(in, o, sge[i], nsge > 0 ? nsge : 0, w->send_flags & IBV_SEND_INLINE);
		w->imm_data = fz_u32(in);
		if (qp->qp_type == IBV_QPT_UD) {
			w->wr.ud.ah = g.ah;
			w->wr.ud.remote_qpn = fz_u32(in);
			w->wr.ud.remote_qkey = fz_u32(in);
		} else if (w->opcode == IBV_WR_BIND_MW) {
			fill_bind(in, o, &w->bind_mw.bind_info);
			w->bind_mw.mw = pick_mw(in, o);
			w->bind_mw.rkey = fz_u32(in);
		} else if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
			   w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			w->wr.atomic.remote_addr = fz_u64(in);
			w->wr.atomic.compare_add = fz_u64(in);
			w->wr.atomic.swap = fz_u64(in);
			w->wr.atomic.rkey = pick_key(in, o, true);
		} else {
			w->wr.rdma.remote_addr = fz_u64(in);
			w->wr.rdma.rkey = pick_key(in, o, true);
		}
	}
	ret = ibv_post_send(qp, wr, &bad);
	TRACE("post_send %d WRs: %d\n", n, ret);
	if (ret)
		FUZZ_ASSERT(bad >= wr && bad < wr + n);
}

static void op_post_recv(struct fz_in *in, struct objs *o)
{
	struct ibv_qp *qp = pick_qp(in, o);
	struct ibv_recv_wr wr[4], *bad = NULL;
	struct ibv_sge sge[4][NSGE];
	int n = 1 + fz_u8(in) % 4, ret;

	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < n; i++) {
		int8_t nsge = (int8_t)fz_u8(in);

		if (nsge > NSGE)
			nsge = (int8_t)(nsge % (NSGE + 1));
		wr[i].wr_id = 2000 + (uint64_t)i;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].num_sge = nsge;
		wr[i].sg_list = sge[i];
		fill_sges(in, o, sge[i], nsge > 0 ? nsge : 0, false);
	}
	ret = ibv_post_recv(qp, wr, &bad);
	TRACE("post_recv %d WRs: %d\n", n, ret);
	if (ret)
		FUZZ_ASSERT(bad >= wr && bad < wr + n);
}

static void op_query_qp(struct fz_in *in, struct objs *o)
{
	struct ibv_qp *qp = pick_qp(in, o);
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	(void)ibv_query_qp(qp, &a, (int)fz_u32(in), &ia);
}

static void op_bind_mw(struct fz_in *in, struct objs *o)
{
	struct ibv_qp *qp = pick_qp(in, o);
	struct ibv_mw *mw = o->mw[fz_u8(in) & 1];
	struct ibv_mw_bind bind;
	int ret;

	memset(&bind, 0, sizeof(bind));
	bind.wr_id = 3000;
	bind.send_flags = fz_u8(in);
	fill_bind(in, o, &bind.bind_info);
	ret = ibv_bind_mw(qp, mw, &bind);
	TRACE("bind_mw type %d: %d\n", mw->type, ret);
}

static void (*const ops[])(struct fz_in *, struct objs *) = {
	op_reg_mr_ex, op_dereg_mr, op_alloc_dmah, op_dealloc_dmah,
	op_alloc_parent_domain, op_dealloc_pd, op_create_qp, op_modify_qp,
	op_to_state, op_post_send, op_post_recv, op_query_qp,
	op_bind_mw,
};

/* Destroy what the input created, in dependency order; everything must go. */
static void teardown(struct objs *o)
{
	for (int i = NQP - 1; i >= 0; i--)
		if (o->qp[i])
			FUZZ_ASSERT(ibv_destroy_qp(o->qp[i]) == 0);
	for (int i = 0; i < 2; i++)
		FUZZ_ASSERT(ibv_dealloc_mw(o->mw[i]) == 0);
	for (int i = 0; i < NMR; i++)
		if (o->mr[i])
			FUZZ_ASSERT(ibv_dereg_mr(o->mr[i]) == 0);
	for (int i = 0; i < NDMAH; i++)
		if (o->dmah[i])
			FUZZ_ASSERT(ibv_dealloc_dmah(o->dmah[i]) == 0);
	for (int pass = 0; pass < NPD; pass++) /* a parent domain may sit on another */
		for (int i = 0; i < NPD; i++)
			if (o->ppd[i] && ibv_dealloc_pd(o->ppd[i]) == 0)
				o->ppd[i] = NULL;
	for (int i = 0; i < NPD; i++)
		FUZZ_ASSERT(!o->ppd[i]);
	fz_drain_cq(g.cq);
	fz_drain_async(g.ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	struct ibv_qp_init_attr a;
	struct objs o;

	if (!g.ctx) {
		setup();
		verbose = getenv("FUZZ_VERBOSE") != NULL;
	}
	memset(&o, 0, sizeof(o));
	memset(&a, 0, sizeof(a));
	a.send_cq = g.cq;
	a.recv_cq = g.cq;
	a.cap.max_send_wr = 8;
	a.cap.max_recv_wr = 8;
	a.cap.max_send_sge = 4;
	a.cap.max_recv_sge = 4;
	a.cap.max_inline_data = 128;
	a.qp_type = IBV_QPT_RC;
	o.qp[0] = ibv_create_qp(g.pd, &a);
	a.qp_type = IBV_QPT_UD;
	o.qp[1] = ibv_create_qp(g.pd, &a);
	a.qp_type = IBV_QPT_UC;
	o.qp[2] = ibv_create_qp(g.pd, &a);
	o.mw[0] = ibv_alloc_mw(g.pd, IBV_MW_TYPE_1);
	o.mw[1] = ibv_alloc_mw(g.pd, IBV_MW_TYPE_2);
	FUZZ_REQUIRE(o.qp[0] && o.qp[1] && o.qp[2] && o.mw[0] && o.mw[1]);
	for (int k = 0; k < MAX_OPS && in.n; k++)
		ops[fz_u8(&in) % (sizeof(ops) / sizeof(ops[0]))](&in, &o);
	teardown(&o);
	return 0;
}
