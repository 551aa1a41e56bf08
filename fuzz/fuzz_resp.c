/* SPDX-License-Identifier: MIT */
/*
 * fuzz_resp - received packets into the receive path of one QP.
 *
 * Each input sets up a fresh QP (RC, UD, UC or XRC TGT) in one of RESET,
 * INIT, RTR, RTS, SQD or ERR, with receive WQEs or none, if asked a type
 * 2 memory window bound to it and send WQEs outstanding, then hands up
 * to 16 packets to sw_rx_inject() as if they had come off the socket:
 * parser, QPN lookup, responder or completer, and the ACK owed. The
 * device's MRs cover every access kind:
 *
 *   0 RECV   LOCAL_WRITE                      receive buffers; canaries
 *   1 NONE   no access at all                 receive SGEs of layout 2
 *   2 RW     LOCAL_WRITE REMOTE_WRITE          guard pages
 *   3 RD     REMOTE_READ                      guard pages
 *   4 ATOM   LOCAL_WRITE REMOTE_ATOMIC         canaries; DMA handle (PM,
 *            FLUSH_GLOBAL FLUSH_PERSISTENT    a CPU: placed by a worker thread)
 *   5 ALL    everything but FLUSH_PERSISTENT, guard pages; DMA handle
 *            MW_BIND too; iova 0x10000        (ph 1: non-temporal stores)
 *   6 OTHER  everything, on another PD        canaries
 *
 * After each input: no canary byte changed, and NONE, RD and OTHER hold
 * exactly what they held (no remote or local access may write them);
 * ASan and the guard pages catch everything else. Everything the device
 * sends is dropped (fz_open_device), so runs are deterministic.
 *
 * Input: three configuration bytes, then packets.
 *   c0  bits 0-2 state (RESET INIT RTR RTS SQD ERR, 6-7 RTS), bit 3 UD,
 *       bit 4 no receive WQEs, bit 5 path MTU 256 (else 1024), bit 6
 *       post three sends first (RTS), bit 7 max_dest_rd_atomic 0 (else 4)
 *   c1  bits 0-3 QP access flags (LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ,
 *       REMOTE_ATOMIC), bits 4-5 receive SGE layout, bits 6-7 the PSN base
 *   c2  bit 0 the QP takes its receives from an SRQ (limit armed at 2),
 *       bits 1-2 the QP type: 0 as c0 bit 3 says, 1 UC, 2 XRC TGT (its
 *       receives always from the XRC SRQ), 3 RC; bit 3 (RC in RTS)
 *       a type 2 window over [0x11000, 0x12000) of ALL is bound to
 *       the QP first and stands in for OTHER in the fix byte; bit 4 the
 *       QP also grants FLUSH_GLOBAL and FLUSH_PERSISTENT
 *   packet: fix byte, length (2 bytes, big-endian), bytes. Unless the fix
 *       byte says raw (bits), the harness rewrites the packet:
 *       bits 0-2 MR whose rkey goes in the RETH/AtomicETH/IETH (7: raw),
 *       bit 3 raw VA (else MR base + the VA's low 32 bits, signed),
 *       bit 4 raw PSN (else the QP's expected PSN, or its send PSN for a
 *       response, + the PSN's low byte, signed), bit 5 raw destination
 *       QPN and XRCETH SRQ number (else the QP's and the XRC SRQ's), bit 6 raw ICRC (else a correct one), bit 7
 *       raw Q_Key (else the QP's).
 */
#include "fuzz_util.h"

#include <sched.h>

#include "sw/transport/transport_priv.h"

enum { NMR = 7, MR_RECV = 0, MR_NONE, MR_RW, MR_RD, MR_ATOM, MR_ALL, MR_OTHER };
enum { RQ_PSN_0 = 0, MAX_PKTS = 16, QKEY = 0x11111111, SQ_PSN = 0x654321 };
enum { MW_VA = 0x11000, MW_LEN = 4096 }; /* the window: the second page of ALL */
enum { QT_AS_C0 = 0, QT_UC, QT_XRC, QT_RC };

static const struct {
	size_t len;
	bool guard;
	int access;
	uint8_t fill;
	bool constant; /* must never change */
} mr_spec[NMR] = {
	[MR_RECV] = { 8192, false, IBV_ACCESS_LOCAL_WRITE, 0, false },
	[MR_NONE] = { 4096, false, 0, 0x11, true },
	[MR_RW] = { 8192, true, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0, false },
	[MR_RD] = { 4096, true, IBV_ACCESS_REMOTE_READ, 0x33, true },
	[MR_ATOM] = { 4096, false,
		      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_FLUSH_GLOBAL |
			      IBV_ACCESS_FLUSH_PERSISTENT,
		      0, false },
	[MR_ALL] = { 8192, true,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_FLUSH_GLOBAL,
		     0, false },
	[MR_OTHER] = { 4096, false,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			       IBV_ACCESS_REMOTE_ATOMIC,
		       0x66, true },
};

static const uint32_t psn_base[4] = { 0, 0x123456, 0xfffff0, 0x7ffffe };

static struct {
	struct ibv_context *ctx;
	struct sw_dev *dev;
	struct ibv_pd *pd, *pd2;
	struct ibv_cq *scq, *rcq;
	struct ibv_srq *srq;
	struct ibv_xrcd *xrcd;
	struct ibv_srq *xsrq; /* the XRC SRQ of xrcd, on pd, completing on rcq */
	uint32_t xsrqn;
	struct ibv_dmah *dmah_nt, *dmah_pm;
	struct fz_buf buf[NMR];
	struct ibv_mr *mr[NMR];
	uint64_t base[NMR]; /* the MR's first address as the wire names it */
	union sw_sa src;
	struct ibv_mw *mw; /* this input's bound window (c2 bit 3), or NULL */
} g;

/* The XRC domain and its SRQ (fuzz_resp's setup). */
static void setup_xrc(void)
{
	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD |
						      IBV_XRCD_INIT_ATTR_OFLAGS,
					 .fd = -1, .oflags = O_CREAT };
	struct ibv_srq_init_attr_ex sa;

	g.xrcd = ibv_open_xrcd(g.ctx, &xa);
	FUZZ_REQUIRE(g.xrcd);
	memset(&sa, 0, sizeof(sa));
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
		       IBV_SRQ_INIT_ATTR_PD;
	sa.srq_type = IBV_SRQT_XRC;
	sa.xrcd = g.xrcd;
	sa.cq = g.rcq;
	sa.pd = g.pd;
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 2;
	sa.attr.srq_limit = 2;
	g.xsrq = ibv_create_srq_ex(g.ctx, &sa);
	FUZZ_REQUIRE(g.xsrq && ibv_get_srq_num(g.xsrq, &g.xsrqn) == 0);
}

static void setup(void)
{
	g.ctx = fz_open_device();
	g.dev = sw_dev_of(g.ctx);
	g.pd = ibv_alloc_pd(g.ctx);
	g.pd2 = ibv_alloc_pd(g.ctx);
	g.scq = ibv_create_cq(g.ctx, 256, NULL, NULL, 0);
	g.rcq = ibv_create_cq(g.ctx, 256, NULL, NULL, 0);
	g.srq = ibv_create_srq(g.pd, &(struct ibv_srq_init_attr){ .attr = { 16, 2, 0 } });
	FUZZ_REQUIRE(g.pd && g.pd2 && g.scq && g.rcq && g.srq);
	setup_xrc();
	g.dmah_nt = ibv_alloc_dmah(g.ctx, &(struct ibv_dmah_init_attr){
		.comp_mask = IBV_DMAH_INIT_ATTR_MASK_PH, .ph = 1 });
	g.dmah_pm = ibv_alloc_dmah(g.ctx, &(struct ibv_dmah_init_attr){
		.comp_mask = IBV_DMAH_INIT_ATTR_MASK_PH | IBV_DMAH_INIT_ATTR_MASK_CPU_ID |
			     IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE,
		.cpu_id = (uint32_t)sched_getcpu(), .tph_mem_type = IBV_TPH_MEM_TYPE_PM });
	FUZZ_REQUIRE(g.dmah_nt && g.dmah_pm);
	for (int i = 0; i < NMR; i++) {
		struct fz_buf *b = &g.buf[i];
		struct ibv_mr_init_attr a = {
			.length = mr_spec[i].len, .access = mr_spec[i].access,
			.comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH,
		};

		fz_buf_alloc(b, mr_spec[i].len, mr_spec[i].guard, mr_spec[i].fill);
		a.addr = b->p;
		if (i == MR_ALL) {
			a.comp_mask |= IBV_REG_MR_MASK_IOVA;
			a.iova = 0x10000;
			a.dmah = g.dmah_nt;
			g.mr[i] = ibv_reg_mr_ex(g.pd, &a);
			g.base[i] = 0x10000;
		} else if (i == MR_ATOM) {
			a.dmah = g.dmah_pm;
			g.mr[i] = ibv_reg_mr_ex(g.pd, &a);
			g.base[i] = (uintptr_t)b->p;
		} else {
			g.mr[i] = ibv_reg_mr(i == MR_OTHER ? g.pd2 : g.pd, b->p, b->len,
					     mr_spec[i].access);
			g.base[i] = (uintptr_t)b->p;
		}
		FUZZ_REQUIRE(g.mr[i]);
	}
	g.src.v4.sin_family = AF_INET;
	g.src.v4.sin_addr.s_addr = htonl(0x7f0000fa); /* 127.0.0.250 */
	g.src.v4.sin_port = htons(49152);
}

/* Attributes for the transition to `to` (everything a transition may need). */
static struct ibv_qp_attr qp_attr(enum ibv_qp_state to, uint8_t c0, uint8_t c1, uint8_t c2)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = to;
	a.port_num = 1;
	a.qp_access_flags = c1 & 0xf;
	if (c2 & 0x10)
		a.qp_access_flags |= IBV_ACCESS_FLUSH_GLOBAL | IBV_ACCESS_FLUSH_PERSISTENT;
	a.qkey = QKEY;
	a.path_mtu = (c0 & 0x20) ? IBV_MTU_256 : IBV_MTU_1024;
	a.dest_qp_num = 0xabcdef;
	a.rq_psn = psn_base[c1 >> 6];
	a.sq_psn = SQ_PSN;
	a.max_dest_rd_atomic = (c0 & 0x80) ? 0 : 4;
	a.max_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.timeout = 0; /* no retransmit timer: nothing happens behind the input's back */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	/* the peer is where the packets come from: an RC QP takes no others */
	a.ah_attr.grh.dgid.raw[10] = 0xff;
	a.ah_attr.grh.dgid.raw[11] = 0xff;
	memcpy(&a.ah_attr.grh.dgid.raw[12], &g.src.v4.sin_addr, 4);
	a.ah_attr.grh.hop_limit = 64;
	return a;
}

static int step(struct ibv_qp *qp, enum ibv_qp_state to, int mask, const uint8_t *c)
{
	struct ibv_qp_attr a = qp_attr(to, c[0], c[1], c[2]);

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | mask);
}

/* Bring a new QP to the state c[0] names (c: the configuration bytes); the state it reached. */
static enum ibv_qp_state bring_up(struct ibv_qp *qp, const uint8_t *c)
{
	static const enum ibv_qp_state want_of[8] = {
		IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
		IBV_QPS_SQD, IBV_QPS_ERR, IBV_QPS_RTS, IBV_QPS_RTS,
	};
	enum ibv_qp_state want = want_of[c[0] & 7];
	enum ibv_qp_type t = qp->qp_type;
	bool ud = t == IBV_QPT_UD, uc = t == IBV_QPT_UC;
	int init = IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
	int rtr = ud ? 0 : IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	int rts = IBV_QP_SQ_PSN;

	if (!ud && !uc)
		rtr |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (t == IBV_QPT_RC)
		rts |= IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
	if (t == IBV_QPT_RC || t == IBV_QPT_XRC_RECV)
		rts |= IBV_QP_TIMEOUT;
	if (want == IBV_QPS_RESET)
		return want;
	FUZZ_REQUIRE(step(qp, IBV_QPS_INIT, init, c) == 0);
	if (want == IBV_QPS_INIT)
		return want;
	FUZZ_REQUIRE(step(qp, IBV_QPS_RTR, rtr, c) == 0);
	if (want == IBV_QPS_RTR)
		return want;
	FUZZ_REQUIRE(step(qp, IBV_QPS_RTS, rts, c) == 0);
	return want;
}

/* Four receive WQEs of layout `layout` (c1 bits 4-5) on the QP, or on `srq` if not NULL; errors ignored. */
static void post_recvs(struct ibv_qp *qp, unsigned int layout, struct ibv_srq *srq)
{
	uint8_t *recv = g.buf[MR_RECV].p, *rw = g.buf[MR_RW].p;
	uint32_t lk = g.mr[MR_RECV]->lkey;
	struct ibv_sge sge[4][2] = {
		{ { (uintptr_t)recv, 4096, lk } },
		{ { (uintptr_t)recv + 100, 64, lk }, { (uintptr_t)recv + 1000, 300, lk } },
		{ { (uintptr_t)recv, 0, lk }, { (uintptr_t)g.buf[MR_NONE].p, 512, g.mr[MR_NONE]->lkey } },
		{ { (uintptr_t)rw + g.buf[MR_RW].len - 100, 100, g.mr[MR_RW]->lkey } },
	};
	static const int nsge[4] = { 1, 2, 2, 1 };

	for (int i = 0; i < 4; i++) {
		struct ibv_recv_wr wr = { .wr_id = 100 + (uint64_t)i, .sg_list = sge[layout],
					  .num_sge = nsge[layout] },
				   *bad;

		if (srq)
			(void)ibv_post_srq_recv(srq, &wr, &bad);
		else
			(void)ibv_post_recv(qp, &wr, &bad);
	}
}

/* Empty `srq` (a fresh start for the next input) and re-arm its limit. */
static void srq_reset(struct ibv_srq *srq)
{
	struct sw_srq *s = sw_srq(srq);
	struct ibv_srq_attr a = { .srq_limit = 2 };

	pthread_mutex_lock(&s->lock);
	s->ring.cons = s->ring.prod;
	pthread_mutex_unlock(&s->lock);
	(void)ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT);
}

/*
 * Bind a fresh type 2 window over [MW_VA, MW_VA + MW_LEN) of ALL to `qp`
 * (in RTS) with every remote access; g.mw. The bind is executed by the
 * requester: waits for its completion (a second at most).
 */
static void bind_mw(struct ibv_qp *qp)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	int n = 0;

	g.mw = ibv_alloc_mw(g.pd, IBV_MW_TYPE_2);
	FUZZ_REQUIRE(g.mw);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 300;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = g.mw;
	wr.bind_mw.rkey = ibv_inc_rkey(g.mw->rkey);
	wr.bind_mw.bind_info.mr = g.mr[MR_ALL];
	wr.bind_mw.bind_info.addr = MW_VA;
	wr.bind_mw.bind_info.length = MW_LEN;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					       IBV_ACCESS_REMOTE_ATOMIC;
	FUZZ_REQUIRE(ibv_post_send(qp, &wr, &bad) == 0);
	for (int i = 0; i < 100000 && n == 0; i++) {
		n = ibv_poll_cq(g.scq, 1, &wc);
		if (!n)
			sched_yield();
	}
	FUZZ_REQUIRE(n == 1 && wc.wr_id == 300 && wc.status == IBV_WC_SUCCESS);
	g.mw->rkey = wr.bind_mw.rkey;
}

/* The rkey the fix byte's MR index `m` (< NMR) names, and the first address it covers. */
static uint32_t key_of(unsigned int m, uint64_t *base)
{
	if (m == MR_OTHER && g.mw) {
		*base = MW_VA;
		return g.mw->rkey;
	}
	*base = g.base[m];
	return g.mr[m]->rkey;
}

/* A WRITE, a READ and a fetch-and-add towards the (silent) peer. */
static void post_sends(struct ibv_qp *qp)
{
	struct ibv_sge sge = { (uintptr_t)g.buf[MR_RECV].p + 2048, 64, g.mr[MR_RECV]->lkey };
	struct ibv_sge sge8 = { (uintptr_t)g.buf[MR_RECV].p + 4096, 8, g.mr[MR_RECV]->lkey };
	struct ibv_send_wr w[3], *bad;

	memset(w, 0, sizeof(w));
	w[0].opcode = IBV_WR_RDMA_WRITE;
	w[0].sg_list = &sge;
	w[0].num_sge = 1;
	w[0].wr.rdma.remote_addr = 0x20000;
	w[0].wr.rdma.rkey = 0x1234;
	w[1] = w[0];
	w[1].opcode = IBV_WR_RDMA_READ;
	w[2].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	w[2].sg_list = &sge8;
	w[2].num_sge = 1;
	w[2].wr.atomic.remote_addr = 0x20000;
	w[2].wr.atomic.rkey = 0x1234;
	w[2].wr.atomic.compare_add = 1;
	for (int i = 0; i < 3; i++) {
		w[i].wr_id = 200 + (uint64_t)i;
		w[i].send_flags = IBV_SEND_SIGNALED;
		w[i].next = i < 2 ? &w[i + 1] : NULL;
	}
	(void)ibv_post_send(qp, w, &bad);
}

static void put_be24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
	put_be24(p + 1, v);
	p[0] = (uint8_t)(v >> 24);
}

static void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

/* Rewrite the packet in `pkt` as the fix byte asks (see the top). */
static void fix_packet(uint8_t *pkt, size_t len, uint8_t fix, struct ibv_qp *qp, uint32_t rq_psn)
{
	const struct sw_opinfo *info;
	unsigned int m = fix & 7;
	uint64_t base = 0;
	uint32_t key = 0;
	uint8_t *ext;

	if (len < SW_BTH_LEN)
		return;
	info = sw_opinfo(pkt[0]);
	if (!(fix & 0x20))
		put_be24(pkt + 5, qp->qp_num);
	if (!(fix & 0x10)) {
		uint32_t psn0 = info && (info->flags & SW_F_RESP) ? SQ_PSN : rq_psn;

		put_be24(pkt + 9, sw_psn_add(psn0, (uint32_t)(int32_t)(int8_t)pkt[11]));
	}
	if (!info || len < info->hdr_len)
		return;
	ext = pkt + SW_BTH_LEN;
	if (info->flags & SW_F_XRCETH) {
		if (!(fix & 0x20))
			put_be24(ext + 1, g.xsrqn);
		ext += SW_XRCETH_LEN;
	}
	if (info->flags & SW_F_DETH) {
		if (!(fix & 0x80))
			put_be32(ext, QKEY);
		ext += SW_DETH_LEN;
	}
	if (info->flags & SW_F_FETH)
		ext += SW_FETH_LEN;
	if (m < NMR)
		key = key_of(m, &base);
	if (info->flags & (SW_F_RETH | SW_F_ATMETH)) {
		if (!(fix & 0x08) && m < NMR)
			put_be64(ext, base + (uint64_t)(int64_t)(int32_t)get_be32(ext + 4));
		if (m < NMR)
			put_be32(ext + 8, key);
	}
	if ((info->flags & SW_F_IETH) && m < NMR)
		put_be32(pkt + info->hdr_len - SW_IETH_LEN, key);
}

static void check_memory(void)
{
	for (int i = 0; i < NMR; i++) {
		FUZZ_ASSERT(fz_buf_intact(&g.buf[i]));
		if (mr_spec[i].constant)
			FUZZ_ASSERT(fz_buf_is(&g.buf[i], mr_spec[i].fill));
	}
}

/* FUZZ_VERBOSE=1: what an input did (for checking seeds by hand). */
static void report(struct ibv_qp *qp)
{
	struct sw_counters *c = &g.dev->eng->cnt;
	struct ibv_wc wc;

	fprintf(stderr, "qp %#x state %d: rx %llu malformed %llu icrc %llu no_qp %llu state %llu "
			"oow %llu dup %llu err_naks %llu rnr %llu tx_dropped %llu\n",
		qp->qp_num, qp->state, (unsigned long long)c->rx_pkts,
		(unsigned long long)c->drops_malformed, (unsigned long long)c->drops_icrc,
		(unsigned long long)c->drops_no_qp, (unsigned long long)c->drops_state,
		(unsigned long long)c->drops_out_of_window, (unsigned long long)c->duplicates,
		(unsigned long long)c->err_naks_tx, (unsigned long long)c->rnr_naks_tx,
		(unsigned long long)c->fault_drops);
	while (ibv_poll_cq(g.rcq, 1, &wc) == 1 || ibv_poll_cq(g.scq, 1, &wc) == 1)
		fprintf(stderr, "  wc wr_id %llu status %d opcode %d len %u\n",
			(unsigned long long)wc.wr_id, wc.status, wc.opcode, wc.byte_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	struct ibv_qp_init_attr_ex ia;
	struct ibv_srq *srq = NULL;
	struct ibv_qp *qp;
	struct sw_icrc_ctx ic;
	enum ibv_qp_state st;
	uint8_t c[3], c0, c1, c2;
	uint32_t rq_psn;

	if (!g.ctx)
		setup();
	c[0] = c0 = fz_u8(&in);
	c[1] = c1 = fz_u8(&in);
	c[2] = c2 = fz_u8(&in);
	rq_psn = psn_base[c1 >> 6];

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = g.scq;
	ia.recv_cq = g.rcq;
	ia.qp_type = (c0 & 0x08) ? IBV_QPT_UD : IBV_QPT_RC;
	if (((c2 >> 1) & 3) == QT_UC)
		ia.qp_type = IBV_QPT_UC;
	else if (((c2 >> 1) & 3) == QT_RC)
		ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 2;
	ia.cap.max_inline_data = 64;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	ia.pd = g.pd;
	if (((c2 >> 1) & 3) == QT_XRC) {
		memset(&ia, 0, sizeof(ia));
		ia.qp_type = IBV_QPT_XRC_RECV;
		ia.comp_mask = IBV_QP_INIT_ATTR_XRCD;
		ia.xrcd = g.xrcd;
		srq = g.xsrq;
	} else if (c2 & 1) {
		srq = ia.srq = g.srq;
	}
	if (srq)
		srq_reset(srq);
	qp = ibv_create_qp_ex(g.ctx, &ia);
	FUZZ_REQUIRE(qp);
	st = bring_up(qp, c);
	if (st == IBV_QPS_RTS && (c2 & 0x08) && ia.qp_type == IBV_QPT_RC)
		bind_mw(qp);
	if (st == IBV_QPS_SQD) {
		struct ibv_qp_attr a = qp_attr(IBV_QPS_SQD, c0, c1, c2);

		FUZZ_REQUIRE(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
	} else if ((c0 & 7) == 5) {
		struct ibv_qp_attr a = qp_attr(IBV_QPS_ERR, c0, c1, c2);

		FUZZ_REQUIRE(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
	}
	if (!(c0 & 0x10))
		post_recvs(qp, (c1 >> 4) & 3, srq);
	if ((c0 & 0x40) && ia.qp_type == IBV_QPT_RC && (c0 & 7) == 3)
		post_sends(qp);

	sw_icrc_ctx_set(&ic, &g.src, &g.dev->port.local);
	for (int k = 0; k < MAX_PKTS && in.n; k++) {
		uint8_t fix = fz_u8(&in);
		size_t len = fz_u16(&in);
		uint8_t *pkt;

		if (len > in.n)
			len = in.n;
		if (len > SW_PKT_MAX + 64)
			len = SW_PKT_MAX + 64; /* a little past any packet: dropped whole */
		/* an exact allocation, so that ASan sees any read beyond the datagram */
		pkt = malloc(len ? len : 1);
		FUZZ_REQUIRE(pkt);
		memcpy(pkt, in.p, len);
		in.p += len;
		in.n -= len;
		fix_packet(pkt, len, fix, qp, rq_psn);
		if (!(fix & 0x40) && len >= SW_BTH_LEN + SW_ICRC_LEN) {
			uint32_t crc = sw_icrc(&ic, pkt, len);

			memcpy(pkt + len - SW_ICRC_LEN, &(uint32_t){ htole32(crc) }, SW_ICRC_LEN);
		}
		FUZZ_ASSERT(sw_rx_inject(g.dev->eng, pkt, len, &g.src, &g.dev->port.local) == 0);
		free(pkt);
		check_memory();
	}

	if (getenv("FUZZ_VERBOSE"))
		report(qp);
	fz_drain_cq(g.rcq);
	fz_drain_cq(g.scq);
	fz_drain_async(g.ctx);
	FUZZ_ASSERT(ibv_destroy_qp(qp) == 0);
	if (g.mw) {
		FUZZ_ASSERT(ibv_dealloc_mw(g.mw) == 0);
		g.mw = NULL;
	}
	fz_drain_cq(g.rcq);
	fz_drain_cq(g.scq);
	fz_drain_async(g.ctx);
	check_memory();
	return 0;
}
