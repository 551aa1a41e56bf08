/* SPDX-License-Identifier: MIT */
/*
 * unit_wire: the RoCE v2 wire layer (src/sw/transport/{opcode,icrc,pkt}.c).
 *
 * The opcode table against the IBA header rules, CRC-32 and ICRC
 * known-answer vectors (the ICRC ones computed by scapy.contrib.roce, an
 * independent implementation), build -> parse round trips for every
 * opcode and payload lengths 0..4096, every malformed case with its
 * documented errno, PSN arithmetic at the 2^24 wrap, and an ICRC
 * throughput figure (printed, not asserted).
 *
 * "unit_wire --pcap FILE" instead writes ~200 packets built by this code
 * to FILE (pcap, LINKTYPE_RAW: IPv4 + UDP + RoCE) and prints one manifest
 * line per packet on stdout; tests/wire_icrc_scapy.sh checks them with
 * scapy and tshark.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdint.h>
#include <time.h>

#include "sw/wire.h"

/* test: timeout=300 */

enum {
	ROCE_PORT = 4791,
	MAX_PAY = 4096,
	BUF_LEN = SW_MAX_HDR_LEN + MAX_PAY + 3 + SW_ICRC_LEN,
};

#define N_ELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- helpers ---- */

static uint64_t rng_state = 0x5eed0f50f7e4b5ull;

/* Contract: splitmix64, deterministic per run. */
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Contract: a random value in [0, n). */
static uint32_t rnd_below(uint32_t n)
{
	return (uint32_t)(rnd() % n);
}

/* Contract: bit-at-a-time reflected CRC-32, the textbook definition. */
static uint32_t ref_crc32(const uint8_t *p, size_t len)
{
	uint32_t c = 0xffffffffu;
	size_t i;
	int k;

	for (i = 0; i < len; i++) {
		c ^= p[i];
		for (k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
	}
	return ~c;
}

/* The opcodes the device must accept. */
static const uint8_t valid_ops[] = {
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
	0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x16, 0x17, 0x1c, 0x1d, 0x20,
	0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x64, 0x65,
	0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac,
	0xad, 0xae, 0xaf, 0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb6, 0xb7,
};

/* Contract: true if `op` is in valid_ops. */
static bool op_valid(uint8_t op)
{
	size_t i;

	for (i = 0; i < N_ELEM(valid_ops); i++)
		if (valid_ops[i] == op)
			return true;
	return false;
}

static void rnd_ctx(struct sw_icrc_ctx *c)
{
	memset(c, 0, sizeof(*c)); /* IPv4 */
	c->src.s_addr = (in_addr_t)rnd();
	c->dst.s_addr = (in_addr_t)rnd();
	c->sport = (uint16_t)rnd();
	c->dport = rnd_below(2) ? ROCE_PORT : (uint16_t)rnd();
}

/* Contract: random values in every field of `p` (24-bit fields with junk above). */
static void rnd_fields(struct sw_pkt *p, uint8_t opcode)
{
	memset(p, 0, sizeof(*p));
	p->opcode = opcode;
	p->se = rnd() & 1;
	p->mig = rnd() & 1;
	p->pkey = (uint16_t)rnd();
	p->dqpn = (uint32_t)rnd();
	p->ack_req = rnd() & 1;
	p->psn = (uint32_t)rnd();
	p->xrc_srqn = (uint32_t)rnd();
	p->qkey = (uint32_t)rnd();
	p->sqpn = (uint32_t)rnd();
	p->va = rnd();
	p->rkey = (uint32_t)rnd();
	p->dma_len = (uint32_t)rnd();
	p->feth = (uint32_t)rnd();
	p->swap_add = rnd();
	p->compare = rnd();
	p->imm_be = (uint32_t)rnd();
	p->syndrome = (uint8_t)rnd();
	p->msn = (uint32_t)rnd();
	p->orig = rnd();
}

/*
 * Contract: build `p` with `paylen` random payload bytes (0 if the opcode
 * has none) into buf; sets p->padcnt/paylen; returns the packet length.
 */
static size_t build(uint8_t *buf, struct sw_pkt *p, uint32_t paylen, const struct sw_icrc_ctx *c)
{
	const struct sw_opinfo *info = sw_opinfo(p->opcode);
	size_t hl, i;

	if (!(info->flags & SW_F_PAYLOAD))
		paylen = 0;
	p->paylen = paylen;
	p->padcnt = sw_pad_for(paylen);
	hl = sw_pkt_write_hdrs(buf, p);
	for (i = 0; i < paylen; i++)
		buf[hl + i] = (uint8_t)rnd();
	/* garbage where the pad goes: finish must zero it */
	memset(buf + hl + paylen, 0xa5, 3 + SW_ICRC_LEN);
	return sw_pkt_finish(buf, hl + paylen, c);
}

/* ---- opcode table ---- */

static void test_opcodes(void)
{
	unsigned int op;

	t_case("opcode table");
	for (op = 0; op < 256; op++) {
		const struct sw_opinfo *info = sw_opinfo((uint8_t)op);
		uint32_t f, hl, n, cls = op & SW_OP_CLASS_MASK, o = op & ~SW_OP_CLASS_MASK;

		if (!CHECK_MSG(!info == !op_valid((uint8_t)op), "opcode 0x%02x: valid %d, info %p",
			       op, op_valid((uint8_t)op), (const void *)info) ||
		    !info)
			continue;
		f = info->flags;
		CHECK_MSG(info->name && !strncmp(info->name,
						 cls == SW_OP_RC ? "RC_" :
						 cls == SW_OP_UC ? "UC_" :
						 cls == SW_OP_UD ? "UD_" :
								   "XRC_",
						 cls == SW_OP_XRC ? 4 : 3),
			  "opcode 0x%02x: name %s", op, info->name);
		hl = SW_BTH_LEN;
		hl += f & SW_F_XRCETH ? SW_XRCETH_LEN : 0;
		hl += f & SW_F_DETH ? SW_DETH_LEN : 0;
		hl += f & SW_F_FETH ? SW_FETH_LEN : 0;
		hl += f & SW_F_RETH ? SW_RETH_LEN : 0;
		hl += f & SW_F_ATMETH ? SW_ATMETH_LEN : 0;
		hl += f & SW_F_IMMDT ? SW_IMMDT_LEN : 0;
		hl += f & SW_F_IETH ? SW_IETH_LEN : 0;
		hl += f & SW_F_AETH ? SW_AETH_LEN : 0;
		hl += f & SW_F_ATMACK ? SW_ATMACK_LEN : 0;
		CHECK_MSG(info->hdr_len == hl && hl <= SW_MAX_HDR_LEN && hl % 4 == 0,
			  "%s: hdr_len %u, flags say %u", info->name, info->hdr_len, hl);
		CHECK_MSG(!(f & SW_F_REQ) != !(f & SW_F_RESP), "%s: REQ xor RESP", info->name);
		n = !!(f & SW_F_SEND) + !!(f & SW_F_WRITE) + !!(f & SW_F_READ) +
		    !!(f & SW_F_ATOMIC) + !!(f & SW_F_FLUSH) + !!(f & SW_F_ATOMIC_WRITE);
		CHECK_MSG(n == (o == SW_OP_ACK ? 0u : 1u), "%s: %u operation kinds", info->name, n);
		n = (f & SW_F_ONLY) == SW_F_ONLY || (f & SW_F_ONLY) == SW_F_FIRST ||
		    (f & SW_F_ONLY) == SW_F_LAST;
		CHECK_MSG(n ^ !!(f & SW_F_MIDDLE), "%s: exactly one of first/middle/last/only",
			  info->name);
		/* payload: everything but READ request, atomics, ACKs */
		CHECK_MSG(!(f & SW_F_PAYLOAD) == (o == 0x0c || o == 0x11 || o == 0x12 ||
						  o == 0x13 || o == 0x14 || (op == 0x1c)),
			  "%s: payload flag", info->name);
		CHECK_MSG(!(f & SW_F_IMMDT) || !(f & SW_F_IETH), "%s: ImmDt and IETH", info->name);
		CHECK_MSG(!(f & SW_F_DETH) == (cls != SW_OP_UD), "%s: DETH iff UD", info->name);
		CHECK_MSG(!(f & SW_F_XRCETH) == !(cls == SW_OP_XRC && (f & SW_F_REQ)),
			  "%s: XRCETH iff an XRC request", info->name);
		CHECK_MSG(!(f & SW_F_AETH) == !((f & SW_F_RESP) && o != SW_OP_READ_RESP_MIDDLE),
			  "%s: AETH on every response but READ_RESP_MIDDLE", info->name);
	}
	CHECK(!strcmp(sw_opinfo(0x00)->name, "RC_SEND_FIRST"));
	CHECK(!strcmp(sw_opinfo(0x64)->name, "UD_SEND_ONLY"));
	CHECK(sw_opinfo(0x0b)->hdr_len == 32);
	CHECK(sw_opinfo(0x12)->hdr_len == 24);
	CHECK(sw_opinfo(0x13)->hdr_len == 40);
	CHECK(sw_opinfo(0x1c)->hdr_len == 32 && (sw_opinfo(0x1c)->flags & SW_F_FETH));
	CHECK(sw_opinfo(0x1d)->hdr_len == 28 && (sw_opinfo(0x1d)->flags & SW_F_PAYLOAD));
	CHECK(sw_opinfo(0x65)->hdr_len == 24);
	CHECK(!strcmp(sw_opinfo(0x24)->name, "UC_SEND_ONLY"));
	CHECK(sw_opinfo(0x2b)->hdr_len == 32 && sw_opinfo(0x23)->hdr_len == 16);
	CHECK(sw_opinfo(0x15) == NULL && sw_opinfo(0x2c) == NULL && sw_opinfo(0x81) == NULL);
	/* XRC: the XRCETH after the BTH of every request, before RETH / AtomicETH / ImmDt */
	CHECK(!strcmp(sw_opinfo(0xa4)->name, "XRC_SEND_ONLY") && sw_opinfo(0xa4)->hdr_len == 16);
	CHECK(sw_opinfo(0xab)->hdr_len == 36 && sw_opinfo(0xb3)->hdr_len == 44);
	CHECK(sw_opinfo(0xb1)->hdr_len == 16 && sw_opinfo(0xb2)->hdr_len == 24);
	CHECK(sw_opinfo(0xb5) == NULL && sw_opinfo(0xb8) == NULL);
}

/* ---- CRC-32 ---- */

static void test_crc32(void)
{
	static const char fox[] = "The quick brown fox jumps over the lazy dog";
	static uint8_t buf[1100];
	size_t len, off, cut;

	t_case("crc32 known answers and slicing");
	CHECK_EQ_INT(sw_crc32(0, "", 0), 0);
	CHECK_EQ_INT(sw_crc32(0, "123456789", 9), 0xcbf43926u);
	CHECK_EQ_INT(sw_crc32(0, fox, strlen(fox)), 0x414fa339u);
	CHECK_EQ_INT(sw_crc32(sw_crc32(0, "12345", 5), "6789", 4), 0xcbf43926u);

	for (len = 0; len < sizeof(buf); len++)
		buf[len] = (uint8_t)rnd();
	/* every length 0..1040 at every misalignment 0..15 against the bitwise reference */
	for (off = 0; off < 16; off++)
		for (len = 0; len + off <= 1056; len++) {
			uint32_t want = ref_crc32(buf + off, len);

			if (!CHECK_MSG(sw_crc32(0, buf + off, len) == want, "crc32 off %zu len %zu",
				       off, len))
				return;
		}
	/* chaining at every cut point */
	for (cut = 0; cut <= 100; cut++)
		CHECK_MSG(sw_crc32(sw_crc32(0, buf, cut), buf + cut, 100 - cut) ==
				  ref_crc32(buf, 100),
			  "cut %zu", cut);
}

/*
 * The carry-less multiplication CRC (when this CPU has PCLMULQDQ, and the
 * 512-bit one when it has AVX-512 VPCLMULQDQ) against the table one:
 * random lengths across the folding thresholds (16, 64, 128, 256 and
 * 512 bytes and every remainder), random alignments and register values,
 * and data of all ones and all zeros.
 */
static void test_crc32_clmul(void)
{
	static uint8_t buf[9216 + 64];
	size_t len, off, i;
	int k;

	t_case("crc32: carry-less multiplication equals the tables");
	if (!sw_crc32_have_clmul())
		printf("# no PCLMULQDQ on this CPU: both are the tables\n");
	else if (!sw_crc32_have_clmul512())
		printf("# no AVX-512 VPCLMULQDQ here: only the 128-bit folding is compared\n");
	else
		printf("# AVX-512 VPCLMULQDQ: 512-bit folding from 256 bytes, 128-bit below\n");
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rnd();
	for (len = 0; len <= 1100; len++)
		for (off = 0; off < 16; off += 5)
			if (!CHECK_MSG(sw_crc32(0, buf + off, len) ==
					       sw_crc32_table(0, buf + off, len),
				       "len %zu off %zu", len, off))
				return;
	for (k = 0; k < 4000; k++) {
		uint32_t seed = rnd();

		off = rnd_below(64);
		len = rnd_below(9216 + 1);
		if (!CHECK_MSG(sw_crc32(seed, buf + off, len) ==
				       sw_crc32_table(seed, buf + off, len),
			       "random: len %zu off %zu seed %08x", len, off, seed))
			return;
	}
	memset(buf, 0xff, sizeof(buf));
	CHECK(sw_crc32(0, buf, 4096) == sw_crc32_table(0, buf, 4096));
	memset(buf, 0, sizeof(buf));
	CHECK(sw_crc32(0, buf, 4096) == sw_crc32_table(0, buf, 4096));
	CHECK(sw_crc32(0xffffffffu, buf, 1000) == sw_crc32_table(0xffffffffu, buf, 1000));
}

/* ---- ICRC known answers (scapy.contrib.roce computed the expected values) ---- */

struct icrc_kat {
	const char *src, *dst;
	uint16_t sport;
	const char *hex; /* the UDP payload without the ICRC */
	size_t pattern; /* >0: then `pattern` bytes (i * 7 + 3) & 0xff follow */
	uint8_t icrc[4]; /* as on the wire */
};

/* clang-format off */
static const struct icrc_kat kats[] = {
	/* RC SEND_ONLY "softverbs" + 3 pad bytes, AckReq */
	{ "192.168.1.1", "192.168.1.2", 49152,
	  "0430ffff0000001280345678736f66747665726273000000", 0, { 0x73, 0xed, 0xc4, 0xc7 } },
	/* RC RDMA WRITE ONLY, RETH, 4 bytes */
	{ "10.0.0.1", "10.0.0.2", 1234,
	  "0a00ffff00abcdef00ffffff00007f1234567000deadbeef0000000401020304", 0,
	  { 0xa7, 0xf8, 0xe3, 0x78 } },
	/* UD SEND_ONLY_WITH_IMMEDIATE, DETH + ImmDt, SE, no payload */
	{ "127.0.0.1", "127.0.0.2", 4791, "6580ffff00000001000000001111111100000001cafef00d", 0,
	  { 0xb3, 0xf9, 0xcb, 0x8f } },
	/* RC ACKNOWLEDGE with BTH byte 4 = 0xff (masked); scapy also had TOS 0xb8, TTL 3 */
	{ "172.16.5.4", "172.16.9.8", 65535, "11008001ff0000ff000001001f000102", 0,
	  { 0x30, 0x15, 0x14, 0xfb } },
	/* RC RDMA READ RESPONSE MIDDLE, 4096 bytes */
	{ "192.0.2.10", "198.51.100.20", 50000, "0e00ffff001234560000abcd", 4096,
	  { 0xef, 0x19, 0x64, 0x69 } },
};
/* clang-format on */

/* Contract: decode hex digits (spaces ignored) into out; returns the byte count. */
static size_t unhex(const char *s, uint8_t *out)
{
	size_t n = 0;
	int hi = -1;

	for (; *s; s++) {
		int v;

		if (*s == ' ')
			continue;
		v = *s <= '9' ? *s - '0' : (*s | 0x20) - 'a' + 10;
		if (hi < 0) {
			hi = v;
		} else {
			out[n++] = (uint8_t)(hi << 4 | v);
			hi = -1;
		}
	}
	return n;
}

static void test_icrc_kat(void)
{
	static uint8_t buf[BUF_LEN];
	size_t i, j;

	t_case("ICRC known answers (scapy)");
	for (i = 0; i < N_ELEM(kats); i++) {
		const struct icrc_kat *k = &kats[i];
		struct sw_icrc_ctx c = {.sport = k->sport, .dport = ROCE_PORT};
		struct sw_pkt p;
		size_t len = unhex(k->hex, buf);
		uint32_t v;

		for (j = 0; j < k->pattern; j++)
			buf[len++] = (uint8_t)(j * 7 + 3);
		inet_pton(AF_INET, k->src, &c.src);
		inet_pton(AF_INET, k->dst, &c.dst);
		memcpy(buf + len, k->icrc, 4);
		len += 4;
		v = sw_icrc(&c, buf, len);
		CHECK_MSG(v == ((uint32_t)k->icrc[0] | (uint32_t)k->icrc[1] << 8 |
				(uint32_t)k->icrc[2] << 16 | (uint32_t)k->icrc[3] << 24),
			  "vector %zu: sw_icrc 0x%08x, wire bytes %02x %02x %02x %02x", i, v,
			  k->icrc[0], k->icrc[1], k->icrc[2], k->icrc[3]);
		CHECK_MSG(sw_pkt_parse(&p, buf, len, &c) == 0, "vector %zu: parse", i);
		/* and sw_pkt_finish stores it in the same byte order (pad included above) */
		memset(buf + len - 4, 0, 4);
		CHECK_MSG(sw_pkt_finish(buf, len - 4 - ((buf[1] >> 4) & 3), &c) == len &&
				  !memcmp(buf + len - 4, k->icrc, 4),
			  "vector %zu: finish", i);
	}
	/* the decoded fields of two of them */
	{
		struct sw_icrc_ctx c = {.sport = 1234, .dport = ROCE_PORT};
		struct sw_pkt p;
		size_t len = unhex(kats[1].hex, buf);

		inet_pton(AF_INET, "10.0.0.1", &c.src);
		inet_pton(AF_INET, "10.0.0.2", &c.dst);
		memcpy(buf + len, kats[1].icrc, 4);
		if (CHECK(sw_pkt_parse(&p, buf, len + 4, &c) == 0)) {
			CHECK(p.opcode == SW_OP_WRITE_ONLY && p.dqpn == 0xabcdef &&
			      p.psn == 0xffffff && !p.ack_req && p.pkey == 0xffff);
			CHECK(p.va == 0x00007f1234567000ull && p.rkey == 0xdeadbeef &&
			      p.dma_len == 4 && p.paylen == 4 && p.payload == buf + 28);
		}
		len = unhex(kats[2].hex, buf);
		memcpy(buf + len, kats[2].icrc, 4);
		inet_pton(AF_INET, "127.0.0.1", &c.src);
		inet_pton(AF_INET, "127.0.0.2", &c.dst);
		c.sport = 4791;
		if (CHECK(sw_pkt_parse(&p, buf, len + 4, &c) == 0)) {
			CHECK(p.opcode == 0x65 && p.se && p.dqpn == 1 && p.psn == 0);
			CHECK(p.qkey == 0x11111111 && p.sqpn == 1 &&
			      ntohl(p.imm_be) == 0xcafef00d && p.paylen == 0);
		}
	}
}

/* ---- round trips ---- */

/* Contract: check that `q` (parsed) carries what `p` (built) said. */
static int same_fields(const struct sw_pkt *p, const struct sw_pkt *q)
{
	uint32_t f = sw_opinfo(p->opcode)->flags;
	int ok = 1;

	ok &= q->opcode == p->opcode && q->se == p->se && q->mig == p->mig &&
	      q->padcnt == p->padcnt && q->pkey == p->pkey && q->dqpn == (p->dqpn & SW_QPN_MASK) &&
	      q->ack_req == p->ack_req && q->psn == (p->psn & SW_PSN_MASK) &&
	      q->paylen == p->paylen && q->info == sw_opinfo(p->opcode);
	if (f & SW_F_XRCETH)
		ok &= q->xrc_srqn == (p->xrc_srqn & SW_QPN_MASK);
	if (f & SW_F_DETH)
		ok &= q->qkey == p->qkey && q->sqpn == (p->sqpn & SW_QPN_MASK);
	if (f & SW_F_FETH)
		ok &= q->feth == p->feth;
	if (f & SW_F_RETH)
		ok &= q->va == p->va && q->rkey == p->rkey && q->dma_len == p->dma_len;
	if (f & SW_F_ATMETH)
		ok &= q->va == p->va && q->rkey == p->rkey && q->swap_add == p->swap_add &&
		      q->compare == p->compare;
	if (f & SW_F_AETH)
		ok &= q->syndrome == p->syndrome && q->msn == (p->msn & 0xffffff);
	if (f & SW_F_ATMACK)
		ok &= q->orig == p->orig;
	if (f & (SW_F_IMMDT | SW_F_IETH))
		ok &= q->imm_be == p->imm_be;
	return ok;
}

static void test_round_trip(void)
{
	static uint8_t buf[BUF_LEN];
	size_t i;
	int iter, fails = 0;

	t_case("build -> parse round trip, every opcode, payload 0..4096");
	for (i = 0; i < N_ELEM(valid_ops); i++) {
		const struct sw_opinfo *info = sw_opinfo(valid_ops[i]);

		for (iter = 0; iter < 300 && fails < 10; iter++) {
			struct sw_icrc_ctx c;
			struct sw_pkt p, q;
			uint32_t paylen;
			size_t len, hl, k;

			/* all small lengths, the top ones, then random */
			paylen = iter < 9  ? (uint32_t)iter :
				 iter < 18 ? MAX_PAY - (uint32_t)(iter - 9) :
					     rnd_below(MAX_PAY + 1);
			rnd_ctx(&c);
			rnd_fields(&p, valid_ops[i]);
			len = build(buf, &p, paylen, &c);
			hl = info->hdr_len;
			CHECK(sw_pkt_hdr_len(&p) == hl);
			if (!(info->flags & SW_F_PAYLOAD))
				CHECK(p.paylen == 0 && p.padcnt == 0);
			if (!CHECK_MSG(len == hl + p.paylen + p.padcnt + SW_ICRC_LEN &&
					       len % 4 == 0,
				       "%s paylen %u: len %zu", info->name, p.paylen, len)) {
				fails++;
				continue;
			}
			for (k = 0; k < p.padcnt; k++)
				CHECK(buf[hl + p.paylen + k] == 0);
			CHECK(buf[4] == 0 && (buf[1] & 0x0f) == 0 && (buf[8] & 0x7f) == 0);
			if (info->flags & SW_F_DETH)
				CHECK(buf[SW_BTH_LEN + 4] == 0);
			memset(&q, 0x5a, sizeof(q));
			if (!CHECK_MSG(sw_pkt_parse(&q, buf, len, &c) == 0, "%s paylen %u: parse",
				       info->name, p.paylen)) {
				fails++;
				continue;
			}
			if (!CHECK_MSG(same_fields(&p, &q), "%s paylen %u: fields differ",
				       info->name, p.paylen))
				fails++;
			CHECK(q.payload == buf + hl);
			/* without the ICRC check too */
			memset(&q, 0x5a, sizeof(q));
			CHECK(sw_pkt_parse(&q, buf, len, NULL) == 0 && same_fields(&p, &q));
		}
	}
	/* unknown opcodes build nothing */
	{
		struct sw_pkt p;

		memset(&p, 0, sizeof(p));
		p.opcode = 0x15;
		buf[0] = 0x77;
		CHECK(sw_pkt_hdr_len(&p) == 0 && sw_pkt_write_hdrs(buf, &p) == 0 && buf[0] == 0x77);
	}
}

/* ---- malformed packets ---- */

/* Contract: the errno parse must give for `buf` cut to `len` bytes (see wire.h). */
static int want_truncated(const uint8_t *buf, size_t len)
{
	const struct sw_opinfo *info;
	size_t pad;

	if (len < SW_BTH_LEN + SW_ICRC_LEN)
		return -EBADMSG;
	info = sw_opinfo(buf[0]);
	pad = (buf[1] >> 4) & 3;
	if (len < info->hdr_len + pad + SW_ICRC_LEN || len % 4)
		return -EBADMSG;
	if (!(info->flags & SW_F_PAYLOAD))
		return -EBADMSG;
	return -EILSEQ;
}

static void test_truncated(void)
{
	static uint8_t buf[BUF_LEN];
	size_t i, cut;

	t_case("truncated at every byte boundary");
	for (i = 0; i < N_ELEM(valid_ops); i++) {
		struct sw_icrc_ctx c;
		struct sw_pkt p, q;
		uint32_t paylen = (uint32_t)i * 3 + 1;
		size_t len;

		rnd_ctx(&c);
		rnd_fields(&p, valid_ops[i]);
		len = build(buf, &p, paylen, &c);
		for (cut = 0; cut < len; cut++) {
			int r = sw_pkt_parse(&q, buf, cut, &c);

			if (!CHECK_MSG(r == want_truncated(buf, cut), "%s cut to %zu of %zu: %d",
				       sw_opinfo(valid_ops[i])->name, cut, len, r))
				break;
		}
		CHECK(sw_pkt_parse(&q, buf, 0, NULL) == -EBADMSG);
	}
	/* longer than any UDP payload: refused before anything is read past 64 KiB */
	{
		static uint8_t big[SW_MAX_UDP_PAYLOAD + 8];
		struct sw_icrc_ctx c;
		struct sw_pkt p, q;
		size_t len;

		rnd_ctx(&c);
		rnd_fields(&p, SW_OP_SEND_ONLY);
		p.padcnt = 0;
		len = sw_pkt_write_hdrs(big, &p);
		memset(big + len, 0x3c, sizeof(big) - len);
		len = SW_MAX_UDP_PAYLOAD & ~(size_t)3;
		sw_pkt_finish(big, len - SW_ICRC_LEN, &c);
		CHECK(sw_pkt_parse(&q, big, len, &c) == 0 && q.paylen == len - 16);
		CHECK(sw_pkt_parse(&q, big, len + 4, NULL) == -EBADMSG);
		CHECK(sw_pkt_parse(&q, big, (size_t)1 << 32, NULL) == -EBADMSG);
	}
}

static void test_bad_headers(void)
{
	static uint8_t buf[BUF_LEN];
	struct sw_icrc_ctx c;
	struct sw_pkt p, q;
	unsigned int op, v;
	size_t len, i;

	t_case("unknown opcodes, transport version, pad");
	rnd_ctx(&c);
	/* unknown opcodes: refused even with a correct ICRC and a plausible size */
	for (op = 0; op < 256; op++) {
		if (op_valid((uint8_t)op))
			continue;
		memset(buf, 0, 64);
		buf[0] = (uint8_t)op;
		for (len = 16; len <= 64; len += 16) {
			sw_pkt_finish(buf, len - 4, &c);
			CHECK_MSG(sw_pkt_parse(&q, buf, len, &c) == -EPROTO,
				  "opcode 0x%02x len %zu", op, len);
		}
	}
	/* transport version != 0 */
	for (i = 0; i < N_ELEM(valid_ops); i++)
		for (v = 1; v < 16; v++) {
			rnd_fields(&p, valid_ops[i]);
			len = build(buf, &p, 8, &c);
			buf[1] |= (uint8_t)v;
			sw_pkt_finish(buf, len - 4 - p.padcnt, &c);
			CHECK_MSG(sw_pkt_parse(&q, buf, len, &c) == -EPROTO, "%s tver %u",
				  sw_opinfo(valid_ops[i])->name, v);
		}
	/* pad and payload on opcodes without payload; pad beyond the packet */
	for (i = 0; i < N_ELEM(valid_ops); i++) {
		const struct sw_opinfo *info = sw_opinfo(valid_ops[i]);
		uint8_t pad;

		rnd_fields(&p, valid_ops[i]);
		if (!(info->flags & SW_F_PAYLOAD)) {
			for (pad = 1; pad < 4; pad++) {
				/* padcnt set, with 4 extra bytes so that the length still fits */
				p.padcnt = pad;
				len = sw_pkt_write_hdrs(buf, &p);
				memset(buf + len, 0, 4 - pad);
				len = sw_pkt_finish(buf, len + 4 - pad, &c);
				CHECK_MSG(sw_pkt_parse(&q, buf, len, &c) == -EBADMSG,
					  "%s padcnt %u", info->name, pad);
				/* padcnt set, nothing extra: the length no longer fits */
				len = sw_pkt_write_hdrs(buf, &p);
				CHECK_MSG(sw_pkt_parse(&q, buf, len + 4, NULL) == -EBADMSG,
					  "%s padcnt %u short", info->name, pad);
			}
			/* no pad, 4 or 8 bytes of payload */
			for (v = 4; v <= 8; v += 4) {
				p.padcnt = 0;
				len = sw_pkt_write_hdrs(buf, &p);
				memset(buf + len, 0x11, v);
				len = sw_pkt_finish(buf, len + v, &c);
				CHECK_MSG(sw_pkt_parse(&q, buf, len, &c) == -EBADMSG,
					  "%s %u payload bytes", info->name, v);
			}
		} else {
			/* zero payload but padcnt 1..3: length not a multiple of 4 or short */
			for (pad = 1; pad < 4; pad++) {
				p.padcnt = pad;
				len = sw_pkt_write_hdrs(buf, &p);
				len = sw_pkt_finish(buf, len, &c);
				CHECK_MSG(sw_pkt_parse(&q, buf, len, &c) == -EBADMSG,
					  "%s empty with padcnt %u", info->name, pad);
			}
			/* pad count bigger than what follows the headers */
			p.padcnt = 3;
			len = sw_pkt_write_hdrs(buf, &p);
			CHECK_MSG(sw_pkt_parse(&q, buf, len + 2 + 4, NULL) == -EBADMSG,
				  "%s pad over the ICRC", info->name);
			/* odd total length */
			p.padcnt = 0;
			len = sw_pkt_write_hdrs(buf, &p);
			memset(buf + len, 0, 5);
			len = sw_pkt_finish(buf, len + 5, &c);
			CHECK_MSG(sw_pkt_parse(&q, buf, len, &c) == -EBADMSG, "%s unaligned length",
				  info->name);
		}
	}
	/* reserved BTH bits are ignored, and not covered by the ICRC only in byte 4 */
	rnd_fields(&p, SW_OP_SEND_ONLY);
	len = build(buf, &p, 100, &c);
	buf[8] |= 0x7f;
	sw_pkt_finish(buf, len - 4 - p.padcnt, &c);
	CHECK(sw_pkt_parse(&q, buf, len, &c) == 0 && q.psn == (p.psn & SW_PSN_MASK) &&
	      q.ack_req == p.ack_req);
}

/* Contract: flip every bit of a fresh `opcode` packet; check each outcome. */
static void flip_all_bits(uint8_t opcode, uint32_t paylen)
{
	static uint8_t buf[BUF_LEN], orig[BUF_LEN];
	struct sw_icrc_ctx c;
	struct sw_pkt p, q, q0;
	size_t len, byte;
	int bit;

	rnd_ctx(&c);
	rnd_fields(&p, opcode);
	len = build(orig, &p, paylen, &c);
	if (!CHECK(sw_pkt_parse(&q0, orig, len, &c) == 0))
		return;
	memcpy(buf, orig, len);
	for (byte = 0; byte < len; byte++)
		for (bit = 0; bit < 8; bit++) {
			int r;

			buf[byte] ^= (uint8_t)(1 << bit);
			r = sw_pkt_parse(&q, buf, len, &c);
			buf[byte] ^= (uint8_t)(1 << bit);
			if (byte == 4) {
				/* FECN/BECN/reserved: masked in the ICRC, ignored by the parser */
				CHECK_MSG(r == 0 && same_fields(&p, &q), "%s byte 4 bit %d: %d",
					  sw_opinfo(opcode)->name, bit, r);
			} else if (byte < 2) {
				/* opcode / pad / version: some error, maybe before the ICRC */
				CHECK_MSG(r == -EPROTO || r == -EBADMSG || r == -EILSEQ,
					  "%s byte %zu bit %d: %d", sw_opinfo(opcode)->name, byte,
					  bit, r);
			} else if (!CHECK_MSG(r == -EILSEQ, "%s byte %zu bit %d: %d",
					      sw_opinfo(opcode)->name, byte, bit, r)) {
				return;
			}
		}
	/* the addresses and ports are covered too */
	for (bit = 0; bit < 32; bit++) {
		struct sw_icrc_ctx d = c;

		d.src.s_addr ^= 1u << bit;
		CHECK_MSG(sw_pkt_parse(&q, orig, len, &d) == -EILSEQ, "src bit %d", bit);
		d = c;
		d.dst.s_addr ^= 1u << bit;
		CHECK_MSG(sw_pkt_parse(&q, orig, len, &d) == -EILSEQ, "dst bit %d", bit);
		if (bit < 16) {
			d = c;
			d.sport ^= (uint16_t)(1u << bit);
			CHECK_MSG(sw_pkt_parse(&q, orig, len, &d) == -EILSEQ, "sport bit %d", bit);
			d = c;
			d.dport ^= (uint16_t)(1u << bit);
			CHECK_MSG(sw_pkt_parse(&q, orig, len, &d) == -EILSEQ, "dport bit %d", bit);
		}
	}
}

static void test_bit_flips(void)
{
	size_t i;

	t_case("a flipped bit anywhere fails the ICRC");
	for (i = 0; i < N_ELEM(valid_ops); i++)
		flip_all_bits(valid_ops[i], 1 + rnd_below(200));
	flip_all_bits(SW_OP_WRITE_ONLY, MAX_PAY);
}

/* ---- PSN arithmetic ---- */

static void test_psn(void)
{
	int i;

	t_case("PSN helpers wrap at 2^24");
	CHECK_EQ_INT(sw_psn_add(0xffffff, 1), 0);
	CHECK_EQ_INT(sw_psn_add(0xfffffe, 5), 3);
	CHECK_EQ_INT(sw_psn_add(5, 0xffffff), 4);
	CHECK_EQ_INT(sw_psn_add(0, 0), 0);
	CHECK_EQ_INT(sw_psn_diff(0, 0xffffff), 1);
	CHECK_EQ_INT(sw_psn_diff(0xffffff, 0), -1);
	CHECK_EQ_INT(sw_psn_diff(3, 0xfffffe), 5);
	CHECK_EQ_INT(sw_psn_diff(0x7fffff, 0), 0x7fffff);
	CHECK_EQ_INT(sw_psn_diff(0x800000, 0), -0x800000);
	CHECK_EQ_INT(sw_psn_diff(100, 100), 0);
	for (i = 0; i < 100000; i++) {
		uint32_t a = rnd_below(1u << 24);
		int32_t n = (int32_t)rnd_below(1u << 24) - (1 << 23);
		uint32_t b = sw_psn_add(a, (uint32_t)n);

		if (!CHECK_MSG(b <= SW_PSN_MASK && sw_psn_diff(b, a) == n &&
				       sw_psn_diff(a, b) == (n == -(1 << 23) ? n : -n),
			       "a %u n %d", a, n))
			break;
	}
}

/* ---- speed ---- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_speed(void)
{
	static uint8_t buf[BUF_LEN];
	struct sw_icrc_ctx c;
	struct sw_pkt p;
	double t0, t;
	uint32_t acc = 0;
	size_t len;
	long n = 0;

	t_case("ICRC throughput (informational)");
	rnd_ctx(&c);
	rnd_fields(&p, SW_OP_WRITE_MIDDLE);
	len = build(buf, &p, MAX_PAY, &c);
	t0 = now_s();
	do {
		int k;

		for (k = 0; k < 64; k++)
			acc += sw_icrc(&c, buf, len);
		n += 64;
		t = now_s() - t0;
	} while (t < 0.2);
	printf("# ICRC over %zu-byte packets: %.0f MB/s, %.0f ns/packet (acc %08x)\n", len,
	       (double)n * (double)len / t / 1e6, t / (double)n * 1e9, acc);
	CHECK(n > 0);
}

/* ---- pcap for the scapy / tshark cross-check ---- */

/* Contract: the IPv4 header checksum of 20 bytes at `h` (checksum field zero). */
static uint16_t ip_csum(const uint8_t *h)
{
	uint32_t s = 0;
	int i;

	for (i = 0; i < 20; i += 2)
		s += (uint32_t)h[i] << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/*
 * Contract: write `npkts` packets to `path` as pcap (LINKTYPE_RAW) and a
 * manifest line per packet to stdout: frame number, opcode, opcode flags,
 * dqpn, psn, paylen, the wire ICRC bytes, pkey, and the RETH / DETH /
 * AETH fields (meaningful when the flags say so). 0 or 1.
 */
static int write_pcap(const char *path, int npkts)
{
	static uint8_t frame[28 + BUF_LEN];
	static const uint8_t tos[] = {0x00, 0x00, 0x02, 0x03, 0x68, 0xb8};
	/* pcap file header in host order (the magic tells readers which) */
	const uint32_t magic = 0xa1b2c3d4u, zone_sigfigs[2] = {0, 0}, snap_link[2] = {65535, 101};
	const uint16_t version[2] = {2, 4};
	FILE *f = fopen(path, "wb");
	int i;

	if (!f) {
		perror(path);
		return 1;
	}
	fwrite(&magic, 4, 1, f);
	fwrite(version, 4, 1, f);
	fwrite(zone_sigfigs, 8, 1, f);
	fwrite(snap_link, 8, 1, f);
	for (i = 0; i < npkts; i++) {
		uint8_t op = valid_ops[(size_t)i % N_ELEM(valid_ops)];
		uint8_t *ip = frame, *udp = frame + 20, *roce = frame + 28;
		struct sw_icrc_ctx c;
		struct sw_pkt p;
		uint32_t paylen, rec[4];
		size_t len;

		/* sizes: small ones, then across the range */
		paylen = i < 50 ? (uint32_t)(i % 9) : rnd_below(MAX_PAY + 1);
		rnd_ctx(&c);
		c.dport = ROCE_PORT;
		/*
		 * a source port in 0xC000-0xFFFF, where RoCE v2 senders take
		 * theirs: below it tshark may hand the datagram to the
		 * dissector of a well-known port (496: auto_rp) instead
		 */
		c.sport |= 0xc000;
		rnd_fields(&p, op);
		len = build(roce, &p, paylen, &c);
		/* FECN/BECN/reserved after the ICRC: masked, both tools must agree */
		if (i % 7 == 3)
			roce[4] = (uint8_t)(0x40u << (i % 2) | (uint32_t)i);

		memset(ip, 0, 20);
		ip[0] = 0x45;
		ip[1] = tos[(size_t)i % sizeof(tos)]; /* masked */
		put16(ip + 2, (uint16_t)(28 + len));
		put16(ip + 6, 0x4000); /* DF, ID 0 */
		ip[8] = i % 11 == 5 ? (uint8_t)(1 + rnd_below(255)) : 64; /* masked */
		ip[9] = 17;
		memcpy(ip + 12, &c.src.s_addr, 4);
		memcpy(ip + 16, &c.dst.s_addr, 4);
		put16(ip + 10, ip_csum(ip));
		put16(udp, c.sport);
		put16(udp + 2, c.dport);
		put16(udp + 4, (uint16_t)(8 + len));
		put16(udp + 6, 0);

		rec[0] = 1700000000u + (uint32_t)i;
		rec[1] = 0;
		rec[2] = rec[3] = (uint32_t)(28 + len);
		fwrite(rec, sizeof(rec), 1, f);
		fwrite(frame, 28 + len, 1, f);
		printf("%d %u %u %u %u %u %02x%02x%02x%02x %u %" PRIu64 " %u %u %u %u %u\n", i + 1,
		       op, sw_opinfo(op)->flags, p.dqpn & SW_QPN_MASK, p.psn & SW_PSN_MASK,
		       p.paylen, roce[len - 4], roce[len - 3], roce[len - 2], roce[len - 1], p.pkey,
		       p.va, p.rkey, p.dma_len, p.qkey, p.sqpn & SW_QPN_MASK, p.msn & SW_QPN_MASK);
	}
	if (fclose(f)) {
		perror(path);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--pcap"))
		return write_pcap(argv[2], 200);
	if (argc != 1) {
		fprintf(stderr, "usage: %s [--pcap FILE]\n", argv[0]);
		return 2;
	}

	t_start("unit_wire");
	test_opcodes();
	test_crc32();
	test_crc32_clmul();
	test_icrc_kat();
	test_round_trip();
	test_truncated();
	test_bad_headers();
	test_bit_flips();
	test_psn();
	test_speed();
	return t_finish();
}
