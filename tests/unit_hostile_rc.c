/* SPDX-License-Identifier: MIT */
/*
 * unit_hostile_rc: a hostile peer against RC QPs of a live device, on the
 * wire (tests/hostile.h): wrong and guessed rkeys, addresses and lengths
 * out of bounds or wrapping 2^64, lengths over the MR, over the largest
 * message, against the RETH length and over the path MTU, misaligned
 * atomics and atomics without atomic access, opcodes out of sequence,
 * and PSNs outside the window (far ahead, far behind, across 2^24);
 * RDMA ATOMIC WRITE (IBTA 1.5) with RETH lengths and payloads other than
 * 8 bytes, misaligned, without REMOTE_WRITE, beyond its MR, inside a
 * WRITE, and an honest one done once though sent twice; RDMA FLUSH with
 * undefined placement types and levels, over 2^31, without the FLUSH
 * access of the QP or MR, beyond the MR and with an unknown key, and
 * honest ones (an empty READ response; a persistent FLUSH of an MR of a
 * PM DMA handle writes back every line of its range once, a duplicate
 * is answered again without flushing).
 *
 * Every case checks what IBTA requires of the responder: the NAK
 * syndrome read off the wire (remote access error, invalid request,
 * PSN sequence error), the QP's state (error after a class C/J error,
 * unchanged after a sequence error or a duplicate) and the async event
 * (IBV_EVENT_QP_ACCESS_ERR / IBV_EVENT_QP_REQ_ERR); that nothing outside
 * the registered range changed or was read (guard pages, shadow
 * compare); the device's counters; and that an honest QP pair on the
 * same device moved verified data all along.
 */
#include "harness.h"

#include "qp_util.h"
#include "hostile.h"

#include "sw/mem/place.h"

enum {
	ARENA_LEN = 4 * 4096 - 2 * H_SLACK, /* the arena's RW pages exactly */
	PSN0 = 0x345678,
};

static struct h_env H, *h = &H;
static struct h_arena all, ro, wo, noatomic; /* remote access: all, READ, WRITE, WRITE+READ */
static struct ibv_pd *pd2;
static struct h_arena other; /* all access, in another PD */
static uint8_t rbuf[4096];
static struct ibv_mr *rmr;
static uint8_t data[4096];

/* Every arena holds its shadow; `qp` is the QP the peer targeted (see h_sync()). */
static bool arenas_intact(struct ibv_qp *qp)
{
	h_sync(qp);
	return h_arena_intact(&all) && h_arena_intact(&ro) && h_arena_intact(&wo) &&
	       h_arena_intact(&noatomic) && h_arena_intact(&other);
}

/* A fresh victim expecting PSN0 with one receive posted (wr_id 77). */
static struct ibv_qp *victim(void)
{
	return h_rc_victim_recv(h, PSN0, rmr, rbuf, sizeof(rbuf));
}

/*
 * After the attack packet at `psn`: the NAK `syn` for it, the QP in
 * error with the async event IBTA gives the error class, the posted
 * receive flushed, one more error NAK counted, later packets dropped
 * for the state, nothing outside registered ranges (nor inside) touched.
 * Destroys the victim.
 */
static void fatal_at(struct ibv_qp *qp, uint8_t syn, uint32_t psn, unsigned long long naks0,
		     const char *file, int line)
{
	unsigned long long st0;
	struct ibv_wc wc;

	h_expect_ack_at(h, syn, psn, file, line);
	t_check(q_state(qp) == IBV_QPS_ERR, file, line, "QP state %d, want ERR", q_state(qp));
	h_expect_event_at(h, qp,
			  syn == SW_AETH_NAK_REM_ACCESS ? IBV_EVENT_QP_ACCESS_ERR :
							  IBV_EVENT_QP_REQ_ERR,
			  file, line);
	h_expect_event_at(h, qp, 0, file, line);
	h_wait_cnt_at(&h->eng->cnt.err_naks_tx, naks0 + 1, "err_naks_tx", file, line);
	t_check(q_poll(h->e.rcq, &wc, 1, 1) == 1 && wc.wr_id == 77 &&
			wc.status == IBV_WC_WR_FLUSH_ERR,
		file, line, "posted receive not flushed");
	/* the QP in error takes nothing more */
	st0 = H_CNT(h, drops_state);
	h_write(h, qp, psn, h_va(&all, 0), all.mr->rkey, 8, data, 8);
	h_wait_cnt_at(&h->eng->cnt.drops_state, st0 + 1, "drops_state", file, line);
	h_expect_quiet_at(h, file, line);
	t_check(arenas_intact(qp), file, line, "memory changed");
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

/* Start a fatal case: a fresh victim `v` and the error NAK count before. */
#define FATAL_BEGIN()                                                                              \
	struct ibv_qp *v = victim();                                                               \
	unsigned long long naks0 = H_CNT(h, err_naks_tx)
#define FATAL_END(syn, psn) fatal_at(v, (syn), (psn), naks0, __FILE__, __LINE__)

static void write_case(const char *name, uint64_t va, uint32_t rkey, uint32_t dma_len, uint32_t len,
		       uint8_t syn)
{
	t_case(name);
	FATAL_BEGIN();
	h_write(h, v, PSN0, va, rkey, dma_len, data, len);
	FATAL_END(syn, PSN0);
}

static void read_case(const char *name, uint64_t va, uint32_t rkey, uint32_t len, uint8_t syn)
{
	t_case(name);
	FATAL_BEGIN();
	h_read(h, v, PSN0, va, rkey, len);
	FATAL_END(syn, PSN0);
}

static void atomic_case(const char *name, uint8_t op, uint64_t va, uint32_t rkey, uint8_t syn)
{
	t_case(name);
	FATAL_BEGIN();
	h_atomic(h, v, op, PSN0, va, rkey, 1, 0);
	FATAL_END(syn, PSN0);
}

static void keys(void)
{
	static char names[8][64]; /* t_case() keeps the pointer */
	uint32_t stale, k = all.mr->rkey;
	struct ibv_mr *m;

	m = ibv_reg_mr(h->e.pd, data, sizeof(data),
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	stale = m ? m->rkey : 0;
	CHECK(m && ibv_dereg_mr(m) == 0);

	write_case("WRITE, rkey + 1: remote access error", h_va(&all, 0), k + 1, 16, 16,
		   SW_AETH_NAK_REM_ACCESS);
	write_case("WRITE, rkey 0", h_va(&all, 0), 0, 16, 16, SW_AETH_NAK_REM_ACCESS);
	write_case("WRITE, rkey ~0", h_va(&all, 0), ~0u, 16, 16, SW_AETH_NAK_REM_ACCESS);
	write_case("WRITE, a deregistered MR's rkey", (uintptr_t)data, stale, 16, 16,
		   SW_AETH_NAK_REM_ACCESS);
	write_case("WRITE, the rkey of an MR in another PD", h_va(&other, 0), other.mr->rkey, 16,
		   16, SW_AETH_NAK_REM_ACCESS);
	read_case("READ, the rkey of an MR in another PD", h_va(&other, 0), other.mr->rkey, 16,
		  SW_AETH_NAK_REM_ACCESS);
	read_case("READ, rkey with one bit flipped", h_va(&all, 0), k ^ 0x10000, 16,
		  SW_AETH_NAK_REM_ACCESS);
	atomic_case("FETCH_ADD, rkey - 1", SW_OP_FETCH_ADD, h_va(&all, 0), k - 1,
		    SW_AETH_NAK_REM_ACCESS);
	/* guesses: a key is a random 32-bit value, so each costs the peer its QP */
	for (unsigned int i = 0; i < 8; i++) {
		uint32_t g = (uint32_t)random() << 1 ^ (uint32_t)random();

		if (g == k || g == ro.mr->rkey || g == wo.mr->rkey || g == noatomic.mr->rkey)
			continue;
		snprintf(names[i], sizeof(names[i]), "WRITE, guessed rkey %#x", g);
		write_case(names[i], h_va(&all, 0), g, 64, 64, SW_AETH_NAK_REM_ACCESS);
	}
}

static void bounds(void)
{
	uint32_t k = all.mr->rkey;

	write_case("WRITE across the MR's end", h_va(&all, ARENA_LEN - 8), k, 16, 16,
		   SW_AETH_NAK_REM_ACCESS);
	write_case("WRITE one byte past the end", h_va(&all, ARENA_LEN), k, 1, 1,
		   SW_AETH_NAK_REM_ACCESS);
	write_case("WRITE starting before the MR", h_va(&all, -8), k, 16, 16,
		   SW_AETH_NAK_REM_ACCESS);
	write_case("WRITE, va + len wraps 2^64", UINT64_MAX - 7, k, 16, 16, SW_AETH_NAK_REM_ACCESS);
	write_case("WRITE at va 0", 0, k, 16, 16, SW_AETH_NAK_REM_ACCESS);
	read_case("READ longer than the MR", h_va(&all, 0), k, ARENA_LEN + 1,
		  SW_AETH_NAK_REM_ACCESS);
	read_case("READ across the MR's end", h_va(&all, ARENA_LEN - 1), k, 2,
		  SW_AETH_NAK_REM_ACCESS);
	read_case("READ before the MR", h_va(&all, -H_SLACK), k, H_SLACK + 8,
		  SW_AETH_NAK_REM_ACCESS);
	read_case("READ, va + len wraps 2^64", UINT64_MAX - 0xff, k, 0x200, SW_AETH_NAK_REM_ACCESS);
	read_case("READ of 2^31 bytes (the largest message, over the MR)", h_va(&all, 0), k,
		  0x80000000u, SW_AETH_NAK_REM_ACCESS);
	read_case("READ of 2^31 + 1 bytes: length error", h_va(&all, 0), k, 0x80000001u,
		  SW_AETH_NAK_INV_REQ);
	read_case("READ of 2^32 - 1 bytes at the MR's end", h_va(&all, ARENA_LEN), k, UINT32_MAX,
		  SW_AETH_NAK_INV_REQ);
	write_case("WRITE, RETH length 2^31 + 1: length error", h_va(&all, 0), k, 0x80000001u, 16,
		   SW_AETH_NAK_INV_REQ);
	write_case("WRITE, RETH length over the MR", h_va(&all, 0), k, ARENA_LEN + 1, 16,
		   SW_AETH_NAK_REM_ACCESS);
	atomic_case("FETCH_ADD past the end", SW_OP_FETCH_ADD, h_va(&all, ARENA_LEN), k,
		    SW_AETH_NAK_REM_ACCESS);
	atomic_case("CMP_SWAP before the MR", SW_OP_CMP_SWAP, h_va(&all, -8), k,
		    SW_AETH_NAK_REM_ACCESS);
	atomic_case("CMP_SWAP, va wraps 2^64", SW_OP_CMP_SWAP, UINT64_MAX - 7, k,
		    SW_AETH_NAK_REM_ACCESS);
}

static void access_rights(void)
{
	write_case("WRITE to an MR without remote write", h_va(&ro, 0), ro.mr->rkey, 16, 16,
		   SW_AETH_NAK_REM_ACCESS);
	read_case("READ from an MR without remote read", h_va(&wo, 0), wo.mr->rkey, 16,
		  SW_AETH_NAK_REM_ACCESS);
	atomic_case("FETCH_ADD on an MR without remote atomic", SW_OP_FETCH_ADD, h_va(&noatomic, 0),
		    noatomic.mr->rkey, SW_AETH_NAK_REM_ACCESS);
	atomic_case("CMP_SWAP on an MR without remote atomic", SW_OP_CMP_SWAP, h_va(&noatomic, 64),
		    noatomic.mr->rkey, SW_AETH_NAK_REM_ACCESS);
	atomic_case("FETCH_ADD misaligned by 4: invalid request", SW_OP_FETCH_ADD, h_va(&all, 4),
		    all.mr->rkey, SW_AETH_NAK_INV_REQ);
	atomic_case("CMP_SWAP misaligned by 1", SW_OP_CMP_SWAP, h_va(&all, 1), all.mr->rkey,
		    SW_AETH_NAK_INV_REQ);
	atomic_case("FETCH_ADD misaligned across the MR's end", SW_OP_FETCH_ADD,
		    h_va(&all, ARENA_LEN - 4), all.mr->rkey, SW_AETH_NAK_INV_REQ);
}

/* A packet of `op` with `len` payload bytes at PSN0 + `off` (no RETH fields). */
static void send_op(struct ibv_qp *v, uint8_t op, uint32_t off, uint32_t len, bool ack_req)
{
	struct sw_pkt p = h_req(v, op, PSN0 + off);

	p.ack_req = ack_req;
	p.va = h_va(&all, 0);
	p.rkey = all.mr->rkey;
	p.dma_len = 2 * H_MTU;
	h_send(h, &p, data, len);
}

struct named_op {
	const char *name; /* the case */
	uint8_t op;
};

static void lengths_and_sequence(void)
{
	uint32_t k = all.mr->rkey;

	write_case("WRITE ONLY, payload shorter than the RETH length: invalid request",
		   h_va(&all, 0), k, 64, 32, SW_AETH_NAK_INV_REQ);
	write_case("WRITE ONLY, payload longer than the RETH length", h_va(&all, 0), k, 16, 32,
		   SW_AETH_NAK_INV_REQ);
	write_case("WRITE ONLY, payload over the path MTU", h_va(&all, 0), k, 2 * H_MTU, 2 * H_MTU,
		   SW_AETH_NAK_INV_REQ);
	{
		t_case("SEND ONLY, payload over the path MTU: invalid request");
		FATAL_BEGIN();
		send_op(v, SW_OP_SEND_ONLY, 0, 2 * H_MTU, true);
		FATAL_END(SW_AETH_NAK_INV_REQ, PSN0);
	}
	{
		t_case("WRITE FIRST shorter than the path MTU: invalid request");
		FATAL_BEGIN();
		send_op(v, SW_OP_WRITE_FIRST, 0, H_MTU / 2, true);
		FATAL_END(SW_AETH_NAK_INV_REQ, PSN0);
	}
	static const struct named_op orphans[] = {
		{"WRITE MIDDLE without FIRST: invalid request", SW_OP_WRITE_MIDDLE},
		{"WRITE LAST without FIRST", SW_OP_WRITE_LAST},
		{"WRITE LAST with immediate without FIRST", SW_OP_WRITE_LAST_IMM},
		{"SEND MIDDLE without FIRST", SW_OP_SEND_MIDDLE},
		{"SEND LAST without FIRST", SW_OP_SEND_LAST},
		{"SEND LAST with invalidate without FIRST", SW_OP_SEND_LAST_INV},
	};
	for (size_t i = 0; i < Q_ARRAY(orphans); i++) {
		t_case(orphans[i].name);
		FATAL_BEGIN();
		send_op(v, orphans[i].op, 0,
			orphans[i].op == SW_OP_WRITE_MIDDLE || orphans[i].op == SW_OP_SEND_MIDDLE ?
				H_MTU :
				8,
			true);
		FATAL_END(SW_AETH_NAK_INV_REQ, PSN0);
	}
	static const uint8_t unsupported[] = {
		0x15, 0x18, 0x19, 0x1a, 0x1b, 0x1e, 0x1f,
	};
	for (size_t i = 0; i < Q_ARRAY(unsupported); i++) {
		static char names[Q_ARRAY(unsupported)][64]; /* t_case() keeps the pointer */
		uint8_t buf[SW_PKT_MAX + 64];
		size_t n;

		snprintf(names[i], sizeof(names[i]),
			 "RC opcode %#x (RESYNC, reserved): invalid request", unsupported[i]);
		t_case(names[i]);
		FATAL_BEGIN();
		{
			struct sw_pkt p = h_req(v, SW_OP_SEND_ONLY, PSN0);

			n = h_build(h, buf, &p, data, 16);
			buf[0] = unsupported[i];
			h_send_resealed(h, buf, n);
		}
		FATAL_END(SW_AETH_NAK_INV_REQ, PSN0);
	}
	static const struct named_op intruders[] = {
		{"SEND FIRST inside a WRITE: invalid request", SW_OP_SEND_FIRST},
		{"WRITE FIRST inside a WRITE", SW_OP_WRITE_FIRST},
		{"READ inside a WRITE", SW_OP_READ_REQ},
		{"FETCH_ADD inside a WRITE", SW_OP_FETCH_ADD},
		{"SEND MIDDLE inside a WRITE", SW_OP_SEND_MIDDLE},
	};
	for (size_t i = 0; i < Q_ARRAY(intruders); i++) {
		uint8_t op = intruders[i].op;

		t_case(intruders[i].name);
		FATAL_BEGIN();
		/* a valid first packet (no AckReq, so no ACK races the NAK), then the intruder */
		send_op(v, SW_OP_WRITE_FIRST, 0, H_MTU, false);
		memcpy(all.shadow + H_SLACK, data, H_MTU); /* placed, legitimately */
		if (op == SW_OP_FETCH_ADD)
			h_atomic(h, v, op, PSN0 + 1, h_va(&all, 0), k, 1, 0);
		else
			send_op(v, op, 1, op == SW_OP_READ_REQ ? 0 : H_MTU, true);
		FATAL_END(SW_AETH_NAK_INV_REQ, PSN0 + 1);
	}
}

/* A READ response of `len` bytes at `psn` carrying the arena's bytes at `off`. */
static void expect_read_resp(uint32_t psn, uint32_t off, uint32_t len)
{
	struct sw_pkt p;

	if (!CHECK_EQ_INT(h_recv(h, &p, H_WAIT_MS), 0))
		return;
	CHECK(p.opcode == SW_OP_READ_RESP_ONLY && p.psn == psn && p.syndrome == H_ACK);
	CHECK(p.paylen == len && !memcmp(p.payload, all.buf + off, len));
}

static void expect_atomic_ack(uint32_t psn, uint64_t orig)
{
	struct sw_pkt p;

	if (!CHECK_EQ_INT(h_recv(h, &p, H_WAIT_MS), 0))
		return;
	CHECK(p.opcode == SW_OP_ATOMIC_ACK && p.psn == psn && p.syndrome == H_ACK);
	CHECK_MSG(p.orig == orig, "atomic orig %#llx, want %#llx", (unsigned long long)p.orig,
		  (unsigned long long)orig);
}

/* An ATOMIC WRITE at PSN0 to a fresh victim draws NAK `syn` (fatal_at). */
static void aw_case(const char *name, uint64_t va, uint32_t rkey, uint32_t dma_len, uint32_t len,
		    uint8_t syn)
{
	t_case(name);
	FATAL_BEGIN();
	h_reth_op(h, v, SW_OP_ATOMIC_WRITE, PSN0, va, rkey, dma_len, data, len);
	FATAL_END(syn, PSN0);
}

static void atomic_writes(void)
{
	uint32_t k = all.mr->rkey;
	uint64_t word;

	aw_case("ATOMIC WRITE: RETH length 4: invalid request", h_va(&all, 8), k, 4, 8,
		SW_AETH_NAK_INV_REQ);
	aw_case("ATOMIC WRITE: RETH length 16 and 16 bytes: invalid request", h_va(&all, 8), k, 16,
		16, SW_AETH_NAK_INV_REQ);
	aw_case("ATOMIC WRITE: 4 payload bytes: invalid request", h_va(&all, 8), k, 8, 4,
		SW_AETH_NAK_INV_REQ);
	aw_case("ATOMIC WRITE: no payload: invalid request", h_va(&all, 8), k, 8, 0,
		SW_AETH_NAK_INV_REQ);
	aw_case("ATOMIC WRITE: misaligned: invalid request", h_va(&all, 12), k, 8, 8,
		SW_AETH_NAK_INV_REQ);
	aw_case("ATOMIC WRITE: read-only MR: remote access error", h_va(&ro, 8), ro.mr->rkey, 8, 8,
		SW_AETH_NAK_REM_ACCESS);
	aw_case("ATOMIC WRITE: past the MR's end: remote access error", h_va(&all, ARENA_LEN), k, 8,
		8, SW_AETH_NAK_REM_ACCESS);
	aw_case("ATOMIC WRITE: key of another PD: remote access error", h_va(&other, 8),
		other.mr->rkey, 8, 8, SW_AETH_NAK_REM_ACCESS);
	aw_case("ATOMIC WRITE: va reaches 2^64: remote access error", UINT64_MAX - 7, k, 8, 8,
		SW_AETH_NAK_REM_ACCESS);
	{
		t_case("ATOMIC WRITE inside a multi-packet WRITE: invalid request");
		FATAL_BEGIN();
		struct sw_pkt p = h_req(v, SW_OP_WRITE_FIRST, PSN0);

		p.ack_req = false;
		p.va = h_va(&all, 0);
		p.rkey = k;
		p.dma_len = 2 * H_MTU;
		h_send(h, &p, data, H_MTU);
		/* the WRITE's first packet lands: the shadow follows */
		memcpy(all.shadow + H_SLACK, data, H_MTU);
		h_reth_op(h, v, SW_OP_ATOMIC_WRITE, PSN0 + 1, h_va(&all, 8), k, 8, data, 8);
		FATAL_END(SW_AETH_NAK_INV_REQ, PSN0 + 1);
	}
	{
		struct ibv_qp *v = victim();

		t_case("ATOMIC WRITE: lands, ACKed; sent again (a duplicate): ACKed, not redone");
		h_reth_op(h, v, SW_OP_ATOMIC_WRITE, PSN0, h_va(&all, 1024), k, 8, data + 100, 8);
		H_EXPECT_ACK(h, H_ACK, PSN0);
		memcpy(all.shadow + H_SLACK + 1024, data + 100, 8);
		CHECK(arenas_intact(v));
		h_reth_op(h, v, SW_OP_ATOMIC_WRITE, PSN0, h_va(&all, 1024), k, 8, data + 200, 8);
		H_EXPECT_ACK(h, H_ACK, PSN0);
		memcpy(&word, all.buf + 1024, 8);
		CHECK(memcmp(&word, data + 100, 8) == 0);
		CHECK(arenas_intact(v));
		CHECK_EQ_INT(q_state(v), IBV_QPS_RTS);
		H_EXPECT_EVENT(h, v, 0);
		CHECK_RET(ibv_destroy_qp(v), 0);
	}
}

/* ---- RDMA FLUSH ---- */

#define FL_ACC (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define FG IBV_ACCESS_FLUSH_GLOBAL
#define FP IBV_ACCESS_FLUSH_PERSISTENT

static struct h_arena fl; /* FLUSH targets: MRs over its buffer */
static struct ibv_mr *fl_g, *fl_pm; /* FLUSH_GLOBAL; both FLUSH bits on a PM DMA handle */
static struct ibv_dmah *pm_dmah;

/* Register fl_g and fl_pm over fl's buffer (the PM handle pinned to a CPU it may use). */
static void flush_mrs_open(void)
{
	struct ibv_dmah_init_attr da = {.comp_mask = IBV_DMAH_INIT_ATTR_MASK_CPU_ID |
						     IBV_DMAH_INIT_ATTR_MASK_PH |
						     IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE,
					.tph_mem_type = IBV_TPH_MEM_TYPE_PM};
	struct ibv_mr_init_attr ma = {.length = 4096,
				      .access = IBV_ACCESS_LOCAL_WRITE | FL_ACC | FG | FP,
				      .comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH};
	int cpu = sched_getcpu();

	h_arena_open(&fl, h->e.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
	da.cpu_id = cpu < 0 ? 0 : (uint32_t)cpu;
	pm_dmah = ibv_alloc_dmah(h->e.ctx, &da);
	fl_g = ibv_reg_mr(h->e.pd, fl.buf, 4096, IBV_ACCESS_LOCAL_WRITE | FL_ACC | FG);
	ma.addr = fl.buf;
	ma.dmah = pm_dmah;
	fl_pm = pm_dmah ? ibv_reg_mr_ex(h->e.pd, &ma) : NULL;
	if (!pm_dmah || !fl_g || !fl_pm) {
		printf("Bail out! FLUSH MRs: %s\n", t_errname(errno));
		exit(1);
	}
}

static void flush_mrs_close(void)
{
	CHECK_RET(ibv_dereg_mr(fl_pm), 0);
	CHECK_RET(ibv_dereg_mr(fl_g), 0);
	CHECK_RET(ibv_dealloc_dmah(pm_dmah), 0);
	h_arena_close(&fl);
}

/* A victim whose QP grants both FLUSH accesses (RTS->RTS). */
static struct ibv_qp *flush_victim(void)
{
	struct ibv_qp *v = victim();
	struct ibv_qp_attr a = {.qp_access_flags = FL_ACC | IBV_ACCESS_REMOTE_ATOMIC | FG | FP};

	CHECK_RET(ibv_modify_qp(v, &a, IBV_QP_ACCESS_FLAGS), 0);
	return v;
}

/* A FLUSH request: FETH placement type `plt`, level `sel`, RETH va/rkey/len. */
static void h_flush(struct ibv_qp *qp, uint32_t psn, uint32_t plt, uint32_t sel, uint64_t va,
		    uint32_t rkey, uint32_t len)
{
	struct sw_pkt p = h_req(qp, SW_OP_FLUSH, psn);

	p.feth = plt | sel << SW_FETH_SEL_SHIFT;
	p.va = va;
	p.rkey = rkey;
	p.dma_len = len;
	h_send(h, &p, NULL, 0);
}

/* The next packet is the empty READ response that answers a FLUSH at `psn`. */
static void expect_flush_resp(uint32_t psn)
{
	struct sw_pkt p;

	if (!CHECK_EQ_INT(h_recv(h, &p, H_WAIT_MS), 0))
		return;
	CHECK_MSG(p.opcode == SW_OP_READ_RESP_ONLY && p.psn == psn && p.syndrome == H_ACK &&
			  p.paylen == 0,
		  "want an empty READ response of psn %#x, got opcode %#x psn %#x len %u", psn,
		  p.opcode, p.psn, p.paylen);
}

/* A FLUSH at PSN0 to a fresh victim (flush access when `qp_flush`) draws NAK `syn`. */
static void flush_case(const char *name, bool qp_flush, uint32_t plt, uint32_t sel, uint64_t va,
		       uint32_t rkey, uint32_t len, uint8_t syn)
{
	t_case(name);
	struct ibv_qp *v = qp_flush ? flush_victim() : victim();
	unsigned long long naks0 = H_CNT(h, err_naks_tx);

	h_flush(v, PSN0, plt, sel, va, rkey, len);
	FATAL_END(syn, PSN0);
}

/* Lines of 64 bytes [va, va + len) of fl's buffer touches. */
static size_t fl_lines(uint64_t off, uint64_t len)
{
	uintptr_t p = (uintptr_t)fl.buf + off;

	return (p + len - 1) / 64 - p / 64 + 1;
}

static void flushes(void)
{
	uint64_t base;
	uint32_t g, pm;
	size_t before;

	flush_mrs_open();
	g = fl_g->rkey;
	pm = fl_pm->rkey;
	base = h_va(&fl, 0);
	flush_case("FLUSH: placement type 0: invalid request", true, 0, 0, base, g, 64,
		   SW_AETH_NAK_INV_REQ);
	flush_case("FLUSH: placement type 4: invalid request", true, 4, 0, base, g, 64,
		   SW_AETH_NAK_INV_REQ);
	flush_case("FLUSH: selectivity level 2: invalid request", true, 1, 2, base, g, 64,
		   SW_AETH_NAK_INV_REQ);
	flush_case("FLUSH: range over 2^31: invalid request", true, 1, 0, base, g, 0x80000001u,
		   SW_AETH_NAK_INV_REQ);
	flush_case("FLUSH: QP without FLUSH access: remote access error", false, 1, 0, base, g, 64,
		   SW_AETH_NAK_REM_ACCESS);
	flush_case("FLUSH: MR without FLUSH access: remote access error", true, 1, 0, h_va(&all, 0),
		   all.mr->rkey, 64, SW_AETH_NAK_REM_ACCESS);
	flush_case("FLUSH: persistent on a FLUSH_GLOBAL MR: remote access error", true, 2, 0, base,
		   g, 64, SW_AETH_NAK_REM_ACCESS);
	flush_case("FLUSH: beyond the MR: remote access error", true, 1, 0, base + 4000, g, 200,
		   SW_AETH_NAK_REM_ACCESS);
	flush_case("FLUSH: MR level, unknown key: remote access error", true, 1, 1, 0,
		   pm ^ 0x5a5a00u, 0, SW_AETH_NAK_REM_ACCESS);
	{
		struct ibv_qp *v = flush_victim();

		t_case("FLUSH: global, persistent (PM: every line written back), a duplicate, the "
		       "whole MR");
		h_flush(v, PSN0, 1, 0, base + 100, g, 300);
		expect_flush_resp(PSN0);
		before = atomic_load(&sw_place_stats.flushed_lines);
		h_flush(v, PSN0 + 1, 2, 0, base + 100, pm, 300);
		expect_flush_resp(PSN0 + 1);
		CHECK_EQ_INT(atomic_load(&sw_place_stats.flushed_lines) - before,
			     fl_lines(100, 300));
		before = atomic_load(&sw_place_stats.flushed_lines);
		h_flush(v, PSN0 + 1, 2, 0, base + 100, pm, 300); /* a duplicate */
		expect_flush_resp(PSN0 + 1);
		CHECK_EQ_INT(atomic_load(&sw_place_stats.flushed_lines), before);
		h_flush(v, PSN0 + 2, 3, 1, 0, pm, 0); /* the whole MR */
		expect_flush_resp(PSN0 + 2);
		CHECK_EQ_INT(atomic_load(&sw_place_stats.flushed_lines) - before,
			     fl_lines(0, 4096));
		CHECK_EQ_INT(q_state(v), IBV_QPS_RTS);
		CHECK(arenas_intact(v) && h_arena_intact(&fl));
		H_EXPECT_EVENT(h, v, 0);
		CHECK_RET(ibv_destroy_qp(v), 0);
	}
	flush_mrs_close();
}

static void psns(void)
{
	struct ibv_qp *v = victim();
	uint32_t e = PSN0, k = all.mr->rkey;
	unsigned long long seq0 = H_CNT(h, seq_naks_tx), oow0 = H_CNT(h, drops_out_of_window);
	unsigned long long dup0 = H_CNT(h, duplicates);
	uint64_t word;

	t_case("PSN 2^23 - 1 ahead: one sequence NAK of the expected PSN, QP unchanged");
	H_PROBE(h, v, e);
	e++;
	h_write(h, v, e + 0x7fffff, h_va(&all, 0), k, 16, data, 16);
	H_EXPECT_ACK(h, SW_AETH_NAK_PSN_SEQ, e);
	h_write(h, v, e + 5, h_va(&all, 0), k, 16, data, 16);
	H_PROBE(h, v, e); /* no second NAK for the same gap */
	e++;
	CHECK_EQ_INT(H_CNT(h, seq_naks_tx), seq0 + 1);
	CHECK_EQ_INT(H_CNT(h, drops_out_of_window), oow0 + 2);
	CHECK_EQ_INT(q_state(v), IBV_QPS_RTS);
	CHECK(arenas_intact(v));

	t_case("PSN just behind and 2^23 behind: duplicates, re-ACKed, not executed again");
	h_write(h, v, e - 1, h_va(&all, 0), k, 16, data, 16);
	H_EXPECT_ACK(h, H_ACK, e - 1);
	h_write(h, v, e - 0x800000, h_va(&all, 0), k, 16, data, 16);
	H_EXPECT_ACK(h, H_ACK, e - 1);
	CHECK_EQ_INT(H_CNT(h, duplicates), dup0 + 2);
	CHECK(arenas_intact(v));

	t_case("duplicate READ and atomic: the same answer, the atomic done once");
	h_read(h, v, e, h_va(&all, 100), k, 200);
	expect_read_resp(e, 100, 200);
	h_read(h, v, e, h_va(&all, 100), k, 200);
	expect_read_resp(e, 100, 200);
	e++;
	memcpy(&word, all.buf + 64, 8);
	h_atomic(h, v, SW_OP_FETCH_ADD, e, h_va(&all, 64), k, 5, 0);
	expect_atomic_ack(e, word);
	h_atomic(h, v, SW_OP_FETCH_ADD, e, h_va(&all, 64), k, 5, 0);
	expect_atomic_ack(e, word);
	word += 5;
	memcpy(all.shadow + H_SLACK + 64, &word, 8);
	e++;
	/* a READ of a PSN the responder no longer remembers as a READ: dropped */
	h_read(h, v, e - 5, h_va(&all, 0), k, 16);
	H_PROBE(h, v, e);
	e++;
	/* an unsupported opcode: behind, dropped; ahead, a sequence NAK */
	{
		uint8_t buf[SW_PKT_MAX + 64];
		struct sw_pkt p = h_req(v, SW_OP_SEND_ONLY, e - 2);
		size_t n = h_build(h, buf, &p, data, 16);

		buf[0] = 0x1f;
		h_send_resealed(h, buf, n);
		H_PROBE(h, v, e);
		e++;
		p = h_req(v, SW_OP_SEND_ONLY, e + 3);
		n = h_build(h, buf, &p, data, 16);
		buf[0] = 0x1f;
		h_send_resealed(h, buf, n);
		H_EXPECT_ACK(h, SW_AETH_NAK_PSN_SEQ, e);
	}
	H_PROBE(h, v, e);
	e++;
	CHECK(arenas_intact(v));
	CHECK_EQ_INT(q_state(v), IBV_QPS_RTS);
	H_EXPECT_EVENT(h, v, 0);
	CHECK_RET(ibv_destroy_qp(v), 0);

	t_case("PSNs across 2^24: in order, behind and ahead of the wrap");
	v = h_rc_victim(h, 0xfffffe);
	if (!CHECK(v))
		return;
	H_PROBE(h, v, 0xfffffe);
	H_PROBE(h, v, 0xffffff);
	H_PROBE(h, v, 0);
	h_write(h, v, 0xffffff, h_va(&all, 0), k, 16, data, 16); /* behind, across the wrap */
	H_EXPECT_ACK(h, H_ACK, 0);
	h_write(h, v, 0x800000, h_va(&all, 0), k, 16, data, 16); /* 2^23 - 1 ahead of 1 */
	H_EXPECT_ACK(h, SW_AETH_NAK_PSN_SEQ, 1);
	h_write(h, v, 0x800001, h_va(&all, 0), k, 16, data, 16); /* 2^23 from 1: behind */
	H_EXPECT_ACK(h, H_ACK, 0);
	H_PROBE(h, v, 1);
	CHECK_EQ_INT(q_state(v), IBV_QPS_RTS);
	CHECK(arenas_intact(v));
	H_EXPECT_EVENT(h, v, 0);
	CHECK_RET(ibv_destroy_qp(v), 0);
}

int main(void)
{
	struct h_honest honest;
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	t_start("unit_hostile_rc");
	srandom((unsigned int)getpid());
	h_open(h);
	h_arena_open(&all, h->e.pd, ARENA_LEN, rw | IBV_ACCESS_REMOTE_ATOMIC);
	h_arena_open(&ro, h->e.pd, 4096, IBV_ACCESS_REMOTE_READ);
	h_arena_open(&wo, h->e.pd, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	h_arena_open(&noatomic, h->e.pd, 4096, rw);
	pd2 = ibv_alloc_pd(h->e.ctx);
	if (!pd2) {
		printf("Bail out! second PD: %s\n", t_errname(errno));
		return 1;
	}
	h_arena_open(&other, pd2, 4096, rw | IBV_ACCESS_REMOTE_ATOMIC);
	rmr = ibv_reg_mr(h->e.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(0xa5 ^ i);
	if (!rmr)
		return t_finish();
	h_honest_start(h, &honest);

	/* the honest pair moves data between every two groups of attacks */
	keys();
	h_honest_tick(&honest);
	bounds();
	h_honest_tick(&honest);
	access_rights();
	h_honest_tick(&honest);
	lengths_and_sequence();
	h_honest_tick(&honest);
	psns();
	h_honest_tick(&honest);
	atomic_writes();
	h_honest_tick(&honest);
	flushes();
	h_honest_tick(&honest);

	t_case("an honest QP pair on the same device carried on");
	h_honest_stop(&honest);
	CHECK(arenas_intact(NULL));
	printf("# counters: err_naks_tx %llu seq_naks_tx %llu duplicates %llu drops_state %llu "
	       "drops_out_of_window %llu\n",
	       H_CNT(h, err_naks_tx), H_CNT(h, seq_naks_tx), H_CNT(h, duplicates),
	       H_CNT(h, drops_state), H_CNT(h, drops_out_of_window));

	CHECK_RET(ibv_dereg_mr(rmr), 0);
	h_arena_close(&all);
	h_arena_close(&ro);
	h_arena_close(&wo);
	h_arena_close(&noatomic);
	h_arena_close(&other);
	CHECK_RET(ibv_dealloc_pd(pd2), 0);
	h_close(h);
	return t_finish();
}
