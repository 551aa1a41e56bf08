/* SPDX-License-Identifier: MIT */
/*
 * unit_hostile_wire: a hostile peer sends malformed and misdirected
 * packets at an RC and a UD QP of a live device (tests/hostile.h):
 * truncated packets of every length up to the full headers, lengths not
 * a multiple of 4, bad pad counts, bad ICRCs, BTH transport versions
 * 1-15, reserved bits set, unknown opcodes, opcodes of the wrong
 * transport for the QP, wrong destination QPNs, QPs not yet ready, a
 * connected QP's packets from another address (requests and forged
 * ACKs) or another port, and UD Q_Key mismatches.
 *
 * IBTA's header validation drops all of these silently (reserved bits
 * are ignored; the UDP source port is flow entropy): the test proves
 * each drop by a probe whose answer comes next, reads the device's drop
 * counters, and checks that no memory changed, that the QPs keep their
 * state and raise no event, and that an honest pair carried on.
 */
#include "harness.h"

#include "qp_util.h"
#include "hostile.h"

enum {
	PSN0 = 0x1000,
	UD_QKEY = 0x11111111, /* q_attr()'s Q_Key */
};

static struct h_env H, *h = &H;
static struct h_arena ar;
static uint8_t rbuf[8][SW_GRH_LEN + 512];
static struct ibv_mr *rmr;
static uint8_t data[1024];
static struct ibv_qp *v, *u; /* the RC and UD victims */
static uint32_t e = PSN0; /* v's expected PSN */

static unsigned long long drops(void)
{
	return H_CNT(h, drops_malformed) + H_CNT(h, drops_icrc);
}

/* v answers a probe at its expected PSN: whatever was sent before drew nothing. */
#define PROBE() (H_PROBE(h, v, e), e++)

static void post_ud_recv(unsigned int i)
{
	struct ibv_sge s = {(uintptr_t)rbuf[i], sizeof(rbuf[i]), rmr->lkey};
	struct ibv_recv_wr w = {.wr_id = 100 + i, .sg_list = &s, .num_sge = 1}, *bad;

	CHECK_RET(ibv_post_recv(u, &w, &bad), 0);
}

/* A UD SEND ONLY to `qpn` with `qkey` and `len` payload bytes of data + `seed`. */
static size_t build_ud(uint8_t *buf, uint32_t qpn, uint32_t qkey, uint32_t len)
{
	struct sw_pkt p = h_req(u, SW_OP_UD | SW_OP_SEND_ONLY, 0);

	p.dqpn = qpn;
	p.ack_req = false;
	p.qkey = qkey;
	p.sqpn = H_PEER_QPN;
	return h_build(h, buf, &p, data, len);
}

/* u received `len` bytes of data from the peer in receive buffer `i` (reposted). */
static void expect_ud_recv(unsigned int i, uint32_t len)
{
	struct ibv_wc wc;

	if (!CHECK_EQ_INT(q_poll(h->e.rcq, &wc, 1, 1), 1))
		return;
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 100 + i && wc.src_qp == H_PEER_QPN);
	CHECK(wc.byte_len == SW_GRH_LEN + len && (wc.wc_flags & IBV_WC_GRH));
	CHECK(!memcmp(rbuf[i] + SW_GRH_LEN, data, len));
	CHECK(!memcmp(rbuf[i] + SW_GRH_LEN - 8, &h->me.sin_addr, 4)); /* IPv4 source in the GRH */
	post_ud_recv(i);
}

/* A valid RC WRITE ONLY of 8 bytes at `off` to v at PSN e, AckReq set, ICRC for `ic`, into buf. */
static size_t build_write_ic(uint8_t *buf, uint32_t off, const struct sw_icrc_ctx *ic)
{
	struct sw_pkt p = h_req(v, SW_OP_WRITE_ONLY, e);

	p.va = h_va(&ar, off);
	p.rkey = ar.mr->rkey;
	p.dma_len = 8;
	return h_build_ic(buf, &p, data, 8, ic);
}

/* The same from the peer's own address and port. */
static size_t build_write(uint8_t *buf, uint32_t off)
{
	return build_write_ic(buf, off, &h->ic_out);
}

/* The arena holds its shadow (after syncing with v's placements: h_sync()). */
static bool intact(void)
{
	h_sync(v);
	return h_arena_intact(&ar);
}

/* The build_write() at `off` was taken: ACKed, its 8 bytes placed, nothing else. */
static void expect_write_taken(uint32_t off)
{
	H_EXPECT_ACK(h, H_ACK, e);
	e++;
	memcpy(ar.shadow + H_SLACK + off, data, 8);
	CHECK(intact());
}

static void truncations(void)
{
	static const uint8_t rc_ops[] = {
		SW_OP_WRITE_ONLY, SW_OP_WRITE_ONLY_IMM, SW_OP_READ_REQ,	     SW_OP_CMP_SWAP,
		SW_OP_FETCH_ADD,  SW_OP_SEND_ONLY_IMM,	SW_OP_SEND_ONLY_INV, SW_OP_WRITE_FIRST,
	};
	uint8_t buf[SW_PKT_MAX + 64];
	unsigned long long d0 = drops(), sent = 0;
	size_t full;

	t_case("truncated packets, every length below the full headers + ICRC: dropped");
	for (size_t i = 0; i < Q_ARRAY(rc_ops); i++) {
		struct sw_pkt p = h_req(v, rc_ops[i], e);
		size_t hl;

		p.va = h_va(&ar, 0);
		p.rkey = ar.mr->rkey;
		full = h_build(h, buf, &p, NULL, 0);
		hl = full - SW_ICRC_LEN;
		for (size_t k = 0; k < full; k++) {
			uint8_t t[SW_PKT_MAX + 64];

			memcpy(t, buf, k);
			h_send_raw(h, t, k); /* cut short, ICRC and all */
			sent++;
			if (k < hl && k >= 1) { /* cut short, but with a correct ICRC */
				memset(t + k, 0, SW_ICRC_LEN);
				h_reseal(h, t, k + SW_ICRC_LEN);
				h_send_raw(h, t, k + SW_ICRC_LEN);
				sent++;
			}
		}
	}
	full = build_ud(buf, u->qp_num, UD_QKEY, 0);
	for (size_t k = 0; k < full; k++) {
		h_send_raw(h, buf, k);
		sent++;
	}
	PROBE();
	CHECK_EQ_INT(drops() - d0, sent);
	printf("# %llu truncated packets\n", sent);

	t_case("lengths not a multiple of 4, pad counts past the payload: dropped");
	d0 = drops();
	full = build_write(buf, 0);
	for (size_t x = 1; x <= 3; x++) {
		memset(buf + full, 0, x);
		h_send_raw(h, buf, full + x);
	}
	{
		struct sw_pkt p = h_req(v, SW_OP_READ_REQ, e);
		size_t n;

		p.va = h_va(&ar, 0);
		p.rkey = ar.mr->rkey;
		p.dma_len = 8;
		n = h_build(h, buf, &p, NULL, 0);
		for (uint8_t pad = 1; pad <= 3; pad++) { /* a pad on an opcode without payload */
			buf[1] = (uint8_t)((buf[1] & ~0x30) | pad << 4);
			h_send_resealed(h, buf, n);
		}
		p = h_req(v, SW_OP_WRITE_ONLY, e); /* no payload, pad 3 */
		n = h_build(h, buf, &p, NULL, 0);
		buf[1] |= 0x30;
		h_send_resealed(h, buf, n);
	}
	PROBE();
	CHECK_EQ_INT(drops() - d0, 7);
	CHECK(intact());
}

/*
 * A datagram longer than any packet of the device's: its first SW_PKT_MAX
 * bytes form a sealed WRITE ONLY (over the path MTU), the rest is junk.
 * It is dropped as malformed, not read as the shorter packet (which
 * would be NAKed and put the QP in error).
 */
static void oversize(void)
{
	static uint8_t buf[SW_PKT_MAX + 64], junk[SW_PKT_MAX];
	struct sw_pkt p = h_req(v, SW_OP_WRITE_ONLY, e);
	unsigned long long m0 = H_CNT(h, drops_malformed);
	size_t hl, n;

	t_case("a datagram longer than any packet: dropped, not cut short");
	p.va = h_va(&ar, 0);
	p.rkey = ar.mr->rkey;
	p.dma_len = 4;
	hl = h_build(h, buf, &p, junk, 4) - 4 - SW_ICRC_LEN; /* the header length */
	p.dma_len = (uint32_t)(SW_PKT_MAX - hl - SW_ICRC_LEN);
	n = h_build(h, buf, &p, junk, p.dma_len);
	if (!CHECK_EQ_INT(n, SW_PKT_MAX))
		return;
	memset(buf + n, 0xa5, sizeof(buf) - n);
	h_send_raw(h, buf, sizeof(buf));
	PROBE(); /* the QP is still in RTS and takes the next PSN */
	CHECK_EQ_INT(H_CNT(h, drops_malformed) - m0, 1);
	CHECK(intact());
}

static void bad_icrc_and_fields(void)
{
	uint8_t buf[SW_PKT_MAX + 64];
	unsigned long long i0 = H_CNT(h, drops_icrc), m0 = H_CNT(h, drops_malformed);
	size_t n;

	t_case("bad ICRC: a bit flipped in the ICRC, payload, RETH, BTH: dropped");
	n = build_write(buf, 0);
	for (size_t bit = 0; bit < n * 8; bit += 13) {
		uint8_t t[SW_PKT_MAX + 64];

		if (bit / 8 == 4)
			continue; /* BTH byte 4 is masked out of the ICRC */
		memcpy(t, buf, n);
		t[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		h_send_raw(h, t, n);
	}
	PROBE();
	/* one bit of every 13, but for the one in byte 4 */
	CHECK_EQ_INT(H_CNT(h, drops_icrc) - i0 + H_CNT(h, drops_malformed) - m0,
		     (n * 8 + 12) / 13 - 1);
	CHECK(H_CNT(h, drops_icrc) - i0 > 10);
	CHECK(intact());

	t_case("BTH transport version 1..15: dropped");
	m0 = H_CNT(h, drops_malformed);
	for (uint8_t ver = 1; ver <= 15; ver++) {
		n = build_write(buf, 0);
		buf[1] |= ver;
		h_send_resealed(h, buf, n);
	}
	PROBE();
	CHECK_EQ_INT(H_CNT(h, drops_malformed) - m0, 15);
	CHECK(intact());

	t_case("P_Keys of other partitions: dropped; the limited-member default is taken");
	m0 = H_CNT(h, drops_malformed);
	for (unsigned int i = 0; i < 3; i++) {
		static const uint16_t pkeys[] = {0x0000, 0x1234, 0xfffe};

		n = build_write(buf, 0);
		buf[2] = (uint8_t)(pkeys[i] >> 8);
		buf[3] = (uint8_t)pkeys[i];
		h_send_resealed(h, buf, n);
	}
	PROBE();
	CHECK_EQ_INT(H_CNT(h, drops_malformed) - m0, 3);
	n = build_write(buf, 192);
	buf[2] = 0x7f; /* 0x7fff: a limited member of the default partition */
	h_send_resealed(h, buf, n);
	expect_write_taken(192);

	t_case("reserved BTH and DETH bits set: ignored, the packets are taken");
	n = build_write(buf, 128);
	buf[4] = 0xff; /* FECN, BECN, reserved 6 */
	buf[8] |= 0x7f;
	h_send_resealed(h, buf, n);
	expect_write_taken(128);
	n = build_ud(buf, u->qp_num, UD_QKEY, 16);
	buf[4] = 0xff;
	buf[8] = 0x7f;
	buf[SW_BTH_LEN + 4] = 0xff; /* DETH reserved byte */
	h_send_resealed(h, buf, n);
	expect_ud_recv(0, 16);
}

static void misdirected(void)
{
	uint8_t buf[SW_PKT_MAX + 64];
	unsigned long long q0 = H_CNT(h, drops_no_qp), s0 = H_CNT(h, drops_state);
	static const uint32_t bad_qpns[] = {0, 1, 2, 0xffffff, 0xfffffe, H_PEER_QPN};
	struct ibv_qp *reset = q_create(&h->e, IBV_QPT_RC), *init = q_create(&h->e, IBV_QPT_RC);
	size_t n;

	t_case("wrong destination QPNs: dropped");
	for (size_t i = 0; i < Q_ARRAY(bad_qpns); i++) {
		uint32_t q = bad_qpns[i];

		if (q == v->qp_num || q == u->qp_num)
			continue;
		n = build_write(buf, 0);
		buf[5] = (uint8_t)(q >> 16);
		buf[6] = (uint8_t)(q >> 8);
		buf[7] = (uint8_t)q;
		h_send_resealed(h, buf, n);
		q0++; /* one more expected */
	}
	PROBE();
	CHECK_EQ_INT(H_CNT(h, drops_no_qp) - q0, 0);

	t_case("packets for QPs in RESET and INIT: dropped");
	if (CHECK(reset && init) && CHECK_RET(q_bring_up(&h->e, init, IBV_QPS_INIT, 0), 0)) {
		struct ibv_qp *tgt[] = {reset, init};

		for (size_t i = 0; i < 2; i++) {
			struct sw_pkt p = h_req(tgt[i], SW_OP_WRITE_ONLY, 0);

			p.va = h_va(&ar, 0);
			p.rkey = ar.mr->rkey;
			p.dma_len = 8;
			h_send(h, &p, data, 8);
		}
		PROBE();
		CHECK_EQ_INT(H_CNT(h, drops_state) - s0, 2);
		CHECK_EQ_INT(q_state(reset), IBV_QPS_RESET);
		CHECK_EQ_INT(q_state(init), IBV_QPS_INIT);
	}
	if (reset)
		CHECK_RET(ibv_destroy_qp(reset), 0);
	if (init)
		CHECK_RET(ibv_destroy_qp(init), 0);
	CHECK(intact());
}

/* A socket bound to `addr`:`port` (0: any port); -1 on failure. */
static int bound_socket(struct sockaddr_in *sa)
{
	socklen_t sl = sizeof(*sa);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)sa, sizeof(*sa)) ||
	    getsockname(fd, (struct sockaddr *)sa, &sl)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void other_sources(void)
{
	uint8_t buf[SW_PKT_MAX + 64];
	struct sockaddr_in other = h->me, port = h->me;
	struct sw_icrc_ctx ic;
	int ofd = -1, pfd;
	unsigned long long q0;
	struct ibv_qp *r;
	size_t n;

	/* another free address on the same port */
	for (uint32_t a = ntohl(h->me.sin_addr.s_addr) + 1, i = 0; i < 100 && ofd < 0; i++, a++) {
		other.sin_addr.s_addr = htonl(0x7f000000u | (100 + (a - 100) % 154));
		if (other.sin_addr.s_addr != h->dev.sin_addr.s_addr)
			ofd = bound_socket(&other);
	}
	port.sin_port = 0;
	pfd = bound_socket(&port);
	if (!CHECK(ofd >= 0 && pfd >= 0))
		return;

	t_case("a request for a connected QP from another address: dropped");
	q0 = H_CNT(h, drops_no_qp);
	ic = h->ic_out;
	ic.src = other.sin_addr;
	n = build_write_ic(buf, 0, &ic);
	h_send_raw_fd(h, ofd, buf, n);
	PROBE(); /* at the same PSN: the forged request was not taken */
	CHECK_EQ_INT(H_CNT(h, drops_no_qp) - q0, 1);
	CHECK(intact());

	t_case("a forged ACK from another address: dropped, the WQE waits for the real one");
	r = h_rc_victim(h, PSN0);
	if (CHECK(r)) {
		struct ibv_sge s = {(uintptr_t)data, 16, rmr->lkey};
		struct ibv_send_wr w = {.wr_id = 9,
					.sg_list = &s,
					.num_sge = 1,
					.opcode = IBV_WR_RDMA_WRITE,
					.send_flags = IBV_SEND_SIGNALED},
				   *bad;
		struct sw_pkt req, ack;
		struct ibv_wc wc;

		s.addr = (uintptr_t)rbuf[7];
		w.wr.rdma.remote_addr = 0x1000;
		w.wr.rdma.rkey = 0x1234;
		CHECK_RET(ibv_post_send(r, &w, &bad), 0);
		if (CHECK_EQ_INT(h_recv(h, &req, H_WAIT_MS), 0) &&
		    CHECK(req.opcode == SW_OP_WRITE_ONLY && req.dqpn == H_PEER_QPN)) {
			q0 = H_CNT(h, drops_no_qp);
			ack = h_req(r, SW_OP_ACK, req.psn);
			ack.ack_req = false;
			ack.syndrome = H_ACK;
			n = h_build_ic(buf, &ack, NULL, 0, &ic);
			h_send_raw_fd(h, ofd, buf, n);
			H_PROBE(h, r, PSN0); /* r's responder answers after the forged ACK */
			CHECK_EQ_INT(H_CNT(h, drops_no_qp) - q0, 1);
			CHECK_EQ_INT(ibv_poll_cq(h->e.scq, 1, &wc), 0);
			h_send(h, &ack, NULL, 0); /* the real peer's ACK */
			CHECK(q_poll(h->e.scq, &wc, 1, 1) == 1 && wc.wr_id == 9 &&
			      wc.status == IBV_WC_SUCCESS);
		}
		CHECK_EQ_INT(q_state(r), IBV_QPS_RTS);
		CHECK_RET(ibv_destroy_qp(r), 0);
	}

	t_case("a request from the peer's address but another UDP port: taken (flow entropy)");
	ic = h->ic_out;
	ic.sport = ntohs(port.sin_port);
	n = build_write_ic(buf, 256, &ic);
	h_send_raw_fd(h, pfd, buf, n);
	expect_write_taken(256); /* ACKed to the QP's peer address and port */
	close(ofd);
	close(pfd);
}

static void opcodes(void)
{
	uint8_t buf[SW_PKT_MAX + 64];
	static const uint8_t rc_ops[] = {
		SW_OP_SEND_ONLY, SW_OP_WRITE_ONLY, SW_OP_READ_REQ, SW_OP_FETCH_ADD, SW_OP_ACK,
	};
	/* not RC: RC's unsupported opcodes are invalid requests (unit_hostile_rc) */
	static const uint8_t unknown[] = {
		0x2c, 0x2f, 0x20, 0x24, 0x2a, 0x40, 0x44, 0x66, 0x70, 0x80, 0x81, 0xa0, 0xc0, 0xff,
	};
	static const uint8_t rc_unknown[] = {0x15, 0x18, 0x1c, 0x1d, 0x1f};
	unsigned long long m0 = H_CNT(h, drops_malformed);
	size_t n;

	t_case("UD opcodes (DETH) to an RC QP: dropped");
	n = build_ud(buf, v->qp_num, UD_QKEY, 16);
	h_send_raw(h, buf, n);
	buf[0] = SW_OP_UD | SW_OP_SEND_ONLY_IMM;
	h_send_resealed(h, buf, n);
	PROBE();
	CHECK_EQ_INT(H_CNT(h, drops_malformed) - m0, 2);

	t_case("RC opcodes to a UD QP: dropped, the UD QP still receives");
	m0 = H_CNT(h, drops_malformed);
	for (size_t i = 0; i < Q_ARRAY(rc_ops); i++) {
		struct sw_pkt p = h_req(u, rc_ops[i], 0);

		p.va = h_va(&ar, 0);
		p.rkey = ar.mr->rkey;
		p.dma_len = rc_ops[i] == SW_OP_WRITE_ONLY ? 16 : 0;
		p.swap_add = 1;
		h_send(h, &p, data,
		       rc_ops[i] == SW_OP_SEND_ONLY || rc_ops[i] == SW_OP_WRITE_ONLY ? 16 : 0);
	}
	n = build_ud(buf, u->qp_num, UD_QKEY, 64);
	h_send_raw(h, buf, n);
	expect_ud_recv(1, 64);
	CHECK_EQ_INT(H_CNT(h, drops_malformed) - m0, Q_ARRAY(rc_ops));
	CHECK(intact());

	t_case("unknown opcodes (UC reserved, UC to RC and UD QPs, RD, UD reserved, CNP, reserved, "
	       "vendor): dropped");
	m0 = H_CNT(h, drops_malformed);
	for (size_t i = 0; i < Q_ARRAY(unknown); i++) {
		n = build_write(buf, 0);
		buf[0] = unknown[i];
		h_send_resealed(h, buf, n);
		n = build_ud(buf, u->qp_num, UD_QKEY, 16);
		buf[0] = unknown[i];
		h_send_resealed(h, buf, n);
	}
	for (size_t i = 0; i < Q_ARRAY(rc_unknown); i++) { /* to the UD QP: the wrong transport */
		n = build_ud(buf, u->qp_num, UD_QKEY, 16);
		buf[0] = rc_unknown[i];
		h_send_resealed(h, buf, n);
	}
	PROBE();
	CHECK_EQ_INT(H_CNT(h, drops_malformed) - m0, 2 * Q_ARRAY(unknown) + Q_ARRAY(rc_unknown));
	CHECK_EQ_INT(q_state(v), IBV_QPS_RTS);
	CHECK(intact());
}

static void qkeys(void)
{
	static const uint32_t bad[] = {0, UD_QKEY ^ 1, ~(uint32_t)UD_QKEY, 0x80000000u};
	uint8_t buf[SW_PKT_MAX + 64];
	unsigned long long k0 = H_CNT(h, drops_qkey);
	struct ibv_wc wc;

	t_case("UD Q_Key mismatch: dropped, no completion; the right Q_Key is received");
	for (size_t i = 0; i < Q_ARRAY(bad); i++)
		h_send_raw(h, buf, build_ud(buf, u->qp_num, bad[i], 32));
	h_send_raw(h, buf, build_ud(buf, u->qp_num, UD_QKEY, 32));
	expect_ud_recv(2, 32);
	CHECK_EQ_INT(H_CNT(h, drops_qkey) - k0, Q_ARRAY(bad));
	CHECK_EQ_INT(ibv_poll_cq(h->e.rcq, 1, &wc), 0);
	CHECK_EQ_INT(q_state(u), IBV_QPS_RTS);
}

int main(void)
{
	struct h_honest honest;

	t_start("unit_hostile_wire");
	h_open(h);
	h_arena_open(&ar, h->e.pd, 4096,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC);
	rmr = ibv_reg_mr(h->e.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(0x3c ^ (i * 7));
	v = h_rc_victim(h, PSN0);
	u = q_create(&h->e, IBV_QPT_UD);
	if (!CHECK(rmr && v && u) || !CHECK_RET(q_bring_up(&h->e, u, IBV_QPS_RTS, 0), 0))
		return t_finish();
	for (unsigned int i = 0; i < 4; i++)
		post_ud_recv(i);
	h_honest_start(h, &honest);

	/* the honest pair moves data between every two attacks */
	truncations();
	h_honest_tick(&honest);
	oversize();
	h_honest_tick(&honest);
	bad_icrc_and_fields();
	h_honest_tick(&honest);
	misdirected();
	h_honest_tick(&honest);
	other_sources();
	h_honest_tick(&honest);
	opcodes();
	h_honest_tick(&honest);
	qkeys();
	h_honest_tick(&honest);

	t_case("the victims are unharmed, an honest QP pair carried on");
	PROBE();
	CHECK_EQ_INT(q_state(v), IBV_QPS_RTS);
	CHECK_EQ_INT(q_state(u), IBV_QPS_RTS);
	H_EXPECT_EVENT(h, NULL, 0);
	h_honest_stop(&honest);
	CHECK(intact());
	printf("# counters: malformed %llu icrc %llu no_qp %llu state %llu qkey %llu\n",
	       H_CNT(h, drops_malformed), H_CNT(h, drops_icrc), H_CNT(h, drops_no_qp),
	       H_CNT(h, drops_state), H_CNT(h, drops_qkey));

	CHECK_RET(ibv_destroy_qp(v), 0);
	CHECK_RET(ibv_destroy_qp(u), 0);
	CHECK_RET(ibv_dereg_mr(rmr), 0);
	h_arena_close(&ar);
	h_close(h);
	return t_finish();
}
