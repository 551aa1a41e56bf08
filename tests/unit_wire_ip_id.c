/* SPDX-License-Identifier: MIT */
/*
 * unit_wire_ip_id: packets from senders that build their own IPv4
 * header, as the kernel's rxe does, are accepted.
 *
 * The ICRC of RoCE v2 covers the IPv4 Identification and flags, which a
 * UDP socket never shows the receiver. A standard sender may put any ID
 * there (rxe: a fresh one per packet) and may leave DF clear. Cases:
 *   - recovery: for random packets, lengths, IDs and DF bits, the ICRC
 *     computed here by an independent bitwise CRC-32 over the real
 *     header (Annex A17 masking) is accepted by sw_icrc_check(), which
 *     gives back the very ID and DF bit; ID 0 with DF matches sw_icrc();
 *   - strength: random corruptions of such packets pass at about the
 *     rate the design promises (2^-15 before the per-sender window),
 *     and no single flipped bit ever passes;
 *   - window: the per-sender ID window (transport/ipid.c) follows a
 *     counter, forgives reordering, refuses far IDs, re-seeds after two
 *     agreeing packets and gives up on random-ID senders;
 *   - live (needs CAP_NET_RAW): a raw IP_HDRINCL peer sends RC WRITEs,
 *     READs and UD SENDs with changing non-zero IDs, DF set and clear,
 *     and a UDP checksum of 0 (as rxe) at a live device: all are taken
 *     and answered, corrupted ones are dropped as ICRC errors, and the
 *     memory holds exactly what was written.
 * The live and recovery cases fail on a receive path that assumes ID 0.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/ip.h>
#include <netinet/udp.h>

#include "qp_util.h"
#include "hostile.h"

/*
 * 300,000 corrupted packets: about 9 s under ASan on a quiet machine; it
 * timed out at the default 120 s in a make check sharing 2 cores with
 * four builds.
 */
/* test: timeout=300 */

enum {
	PSN0 = 0x2000,
	UD_QKEY = 0x11111111, /* q_attr()'s Q_Key */
	CORRUPTIONS = 300000,
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* Bitwise reflected CRC-32 (polynomial 0x04C11DB7), independent of icrc.c. */
static uint32_t ref_crc(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
	}
	return crc;
}

/*
 * The ICRC a sender computes for UDP payload `pkt` of `len` bytes (ICRC
 * included) inside IPv4 header `ip` and UDP header `udp` as sent.
 */
static uint32_t ref_icrc(const uint8_t ip[20], const uint8_t udp[8], const uint8_t *pkt, size_t len)
{
	uint8_t ph[8 + 20 + 8 + 12];
	uint32_t c;

	memset(ph, 0xff, 8);
	memcpy(ph + 8, ip, 20);
	ph[8 + 1] = 0xff; /* TOS */
	ph[8 + 8] = 0xff; /* TTL */
	ph[8 + 10] = ph[8 + 11] = 0xff; /* header checksum */
	memcpy(ph + 28, udp, 8);
	ph[28 + 6] = ph[28 + 7] = 0xff; /* UDP checksum */
	memcpy(ph + 36, pkt, 12);
	ph[36 + 4] = 0xff; /* BTH FECN, BECN, reserved */
	c = ref_crc(~0u, ph, sizeof(ph));
	c = ref_crc(c, pkt + 12, len - 12 - 4);
	return ~c;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* The IPv4 and UDP headers of a datagram as a raw sender builds them. */
static void headers(uint8_t ip[20], uint8_t udp[8], const struct sw_icrc_ctx *c, size_t len,
		    uint16_t id, bool df, uint8_t tos, uint8_t ttl)
{
	memset(ip, 0, 20);
	ip[0] = 0x45;
	ip[1] = tos;
	put16(ip + 2, (uint16_t)(20 + 8 + len));
	put16(ip + 4, id);
	put16(ip + 6, df ? 0x4000 : 0);
	ip[8] = ttl;
	ip[9] = IPPROTO_UDP;
	memcpy(ip + 12, &c->src, 4);
	memcpy(ip + 16, &c->dst, 4);
	put16(udp, c->sport);
	put16(udp + 2, c->dport);
	put16(udp + 4, (uint16_t)(8 + len));
	put16(udp + 6, 0); /* rxe sends no UDP checksum */
}

/* Seal `pkt` as sent with `id` and `df`. */
static void seal(uint8_t *pkt, size_t len, const struct sw_icrc_ctx *c, uint16_t id, bool df)
{
	uint8_t ip[20], udp[8];
	uint32_t v;

	headers(ip, udp, c, len, id, df, (uint8_t)rnd(), (uint8_t)rnd());
	v = htole32(ref_icrc(ip, udp, pkt, len));
	memcpy(pkt + len - 4, &v, 4);
}

/* A random RC WRITE MIDDLE-like packet of `len` bytes (BTH + payload + ICRC). */
static void random_pkt(uint8_t *pkt, size_t len)
{
	for (size_t i = 0; i < len; i++)
		pkt[i] = (uint8_t)rnd();
	pkt[0] = SW_OP_WRITE_MIDDLE;
	pkt[1] = 0; /* no pad, TVer 0 */
}

static void recovery(void)
{
	struct sw_icrc_ctx c = {.sport = 0xc123, .dport = 4791};
	static uint8_t pkt[SW_PKT_MAX];
	unsigned int bad = 0, n = 0;

	t_case("recovery of ID and DF");
	c.src.s_addr = htonl(0x0a4d0002);
	c.dst.s_addr = htonl(0x0a4d0001);
	for (unsigned int i = 0; i < 4000; i++) {
		size_t len = 16 + 4 * (rnd() % ((SW_PKT_MAX - 16) / 4));
		uint16_t id = i < 8 ? (uint16_t)(i * 0x2111) : (uint16_t)rnd();
		bool df = (i & 1) || i >= 3000, ok;
		struct sw_icrc_var var;
		int r;

		c.sport = (uint16_t)(0xc000 | rnd());
		random_pkt(pkt, len);
		seal(pkt, len, &c, id, df);
		if (id == 0 && df) {
			uint32_t ours = htole32(sw_icrc(&c, pkt, len));

			CHECK_MSG(!memcmp(&ours, pkt + len - 4, 4), "ID 0 + DF: sw_icrc differs");
		}
		r = sw_icrc_check(&c, pkt, len, &var);
		ok = !r && var.ip_id == id && var.df == df && var.recovered == (id || !df);
		bad += !ok;
		if (!ok && bad < 5)
			CHECK_MSG(0, "len %zu id %#x df %d: ret %d, got id %#x df %d recovered %d",
				  len, id, df, r, var.ip_id, var.df, var.recovered);
		n++;
	}
	CHECK_MSG(!bad, "%u of %u packets not recovered", bad, n);
	/* other fields of the IPv4 header are not the receiver's to guess */
	random_pkt(pkt, 256);
	{
		uint8_t ip[20], udp[8];
		struct sw_icrc_var var;
		uint32_t v;

		headers(ip, udp, &c, 256, 7, true, 0, 64);
		ip[6] |= 0x20; /* MF: a fragment's header, never a sender's ICRC input */
		v = htole32(ref_icrc(ip, udp, pkt, 256));
		memcpy(pkt + 252, &v, 4);
		CHECK_RET(sw_icrc_check(&c, pkt, 256, &var), -EILSEQ);
		headers(ip, udp, &c, 256, 7, true, 0, 64);
		put16(udp, (uint16_t)(c.sport + 1)); /* another source port than the socket says */
		v = htole32(ref_icrc(ip, udp, pkt, 256));
		memcpy(pkt + 252, &v, 4);
		CHECK_RET(sw_icrc_check(&c, pkt, 256, &var), -EILSEQ);
	}
}

/* The ICRC of `pkt` inside an IPv6 header from `c` (traffic class, flow label, hop limit masked).
 */
static uint32_t ref_icrc6(const struct sw_icrc_ctx *c, const uint8_t *pkt, size_t len)
{
	uint8_t ph[8 + 40 + 8 + 12];
	uint32_t crc;

	memset(ph, 0xff, 8);
	ph[8] = 0x6f; /* version 6, then traffic class and flow label, all masked */
	ph[9] = ph[10] = ph[11] = 0xff;
	put16(ph + 12, (uint16_t)(8 + len));
	ph[14] = IPPROTO_UDP;
	ph[15] = 0xff; /* hop limit */
	memcpy(ph + 16, &c->src6, 16);
	memcpy(ph + 32, &c->dst6, 16);
	put16(ph + 48, c->sport);
	put16(ph + 50, c->dport);
	put16(ph + 52, (uint16_t)(8 + len));
	ph[54] = ph[55] = 0xff;
	memcpy(ph + 56, pkt, 12);
	ph[56 + 4] = 0xff;
	crc = ref_crc(~0u, ph, sizeof(ph));
	crc = ref_crc(crc, pkt + 12, len - 12 - 4);
	return ~crc;
}

/* IPv6: the ICRC over the IPv6 pseudo-header, nothing to recover. */
static void ipv6(void)
{
	struct sw_icrc_ctx c = {.sport = 0xc321, .dport = 4791, .v6 = true};
	static uint8_t pkt[SW_PKT_MAX];
	unsigned int bad = 0;

	t_case("IPv6 ICRC");
	inet_pton(AF_INET6, "fd77:5f7::2", &c.src6);
	inet_pton(AF_INET6, "fd77:5f7::1", &c.dst6);
	for (unsigned int i = 0; i < 500; i++) {
		size_t len = 16 + 4 * (rnd() % ((SW_PKT_MAX - 16) / 4));
		struct sw_icrc_var var;
		uint32_t v;

		random_pkt(pkt, len);
		v = htole32(ref_icrc6(&c, pkt, len));
		memcpy(pkt + len - 4, &v, 4);
		bad += sw_icrc(&c, pkt, len) != le32toh(v) || sw_icrc_check(&c, pkt, len, &var) ||
		       var.recovered;
		pkt[12 + rnd() % (len - 12)] ^= 0x01; /* and no header is recovered on IPv6 */
		bad += sw_icrc_check(&c, pkt, len, &var) != -EILSEQ;
	}
	CHECK_MSG(!bad, "%u IPv6 packets wrong", bad);
}

static void strength(void)
{
	struct sw_icrc_ctx c = {.sport = 0xc001, .dport = 4791};
	static uint8_t pkt[1100], orig[1100];
	unsigned int pass = 0;
	double expect;

	t_case("corruptions pass at about 2^-15");
	c.src.s_addr = htonl(0x0a4d0002);
	c.dst.s_addr = htonl(0x0a4d0001);
	for (unsigned int i = 0; i < CORRUPTIONS; i++) {
		size_t len = 64 + 4 * (rnd() % 250);
		struct sw_icrc_var var;
		unsigned int flips = 1 + rnd() % 8;

		random_pkt(pkt, len);
		seal(pkt, len, &c, (uint16_t)rnd(), rnd() & 1);
		memcpy(orig, pkt, len);
		for (unsigned int f = 0; f < flips; f++) {
			size_t at = 12 + rnd() % (len - 12); /* payload or ICRC */

			pkt[at] ^= (uint8_t)(1u << (rnd() % 8));
		}
		if (!memcmp(orig, pkt, len)) { /* the flips cancelled out */
			i--;
			continue;
		}
		pass += !sw_icrc_check(&c, pkt, len, &var);
	}
	expect = CORRUPTIONS / 32768.0;
	printf("# %u of %u corrupted packets passed the 15-bit check (expected about %.1f)\n", pass,
	       CORRUPTIONS, expect);
	CHECK_MSG(pass <= 3 * expect + 8, "%u corrupted packets passed, expected about %.1f", pass,
		  expect);
}

/*
 * Every single flipped bit of a packet from a sender whose IDs count up
 * with DF set, as rxe's do, is refused by the ICRC or the sender's
 * window; the valid packets around them are all taken. Includes the two
 * bit positions whose flip equals a header difference (icrc.c, ipid.c).
 */
static void single_bits(void)
{
	struct sw_icrc_ctx c = {.sport = 0xc002, .dport = 4791};
	static uint8_t pkt[SW_PKT_MAX];
	static struct sw_ipid_tab t;
	uint16_t id = 0x7000;
	unsigned int taken = 0, valid = 0, refused = 0, flipped = 0;
	uint64_t now = 5000000000ull;

	t_case("single-bit errors from an rxe-like sender: all refused");
	memset(&t, 0, sizeof(t));
	c.src.s_addr = htonl(0x0a4d0002);
	c.dst.s_addr = htonl(0x0a4d0001);
	for (unsigned int i = 0; i < 20000; i++) {
		size_t len = 2048 + 4 * (rnd() % 500);
		bool bad = i % 2, g;
		struct sw_icrc_var var;

		random_pkt(pkt, len);
		seal(pkt, len, &c, id++, true);
		if (bad) {
			/* the two aliasing positions (byte 173 bit 3, byte 1834 bit 6), else random
			 */
			size_t at = i % 6 == 1 ? 173 : i % 6 == 3 ? 1834 : 12 + rnd() % (len - 12);
			unsigned int bit = i % 6 == 1 ? 3 : i % 6 == 3 ? 6 : rnd() % 8;

			pkt[at] ^= (uint8_t)(1u << bit);
			flipped++;
		}
		now += 10000; /* 10 us a packet */
		if (!sw_icrc_check(&c, pkt, len, &var) &&
		    (!var.recovered ||
		     sw_ipid_plausible(&t, c.src.s_addr, var.ip_id, var.df, now, &g))) {
			taken++;
			valid += !bad;
			refused += 0;
		} else {
			refused += bad;
		}
	}
	CHECK_MSG(refused == flipped && valid == taken,
		  "%u of %u flipped refused, %u of %u taken valid", refused, flipped, valid, taken);
	CHECK_EQ_INT(taken, 10000);
}

static void window(void)
{
	static struct sw_ipid_tab t;
	uint32_t a = htonl(0x0a4d0002), b = htonl(0x0a4d0003), z = htonl(0x0a4d0004);
	uint64_t now = 1000000000ull;
	bool g;
	int refused = 0;

	t_case("per-sender ID window");
	memset(&t, 0, sizeof(t));
	CHECK(sw_ipid_plausible(&t, a, 40000, true, now, &g) && !g); /* a new sender */
	for (uint16_t id = 40001; id < 40100; id++)
		refused += !sw_ipid_plausible(&t, a, id, true, now, &g);
	CHECK_EQ_INT(refused, 0);
	CHECK(sw_ipid_plausible(&t, a, 40050, true, now, &g)); /* reordered */
	CHECK(sw_ipid_plausible(&t, a, 40099 + 2000, true, now, &g)); /* losses, other flows */
	CHECK(!sw_ipid_plausible(&t, a, 40099 + 2000 + 9000, true, now, &g)); /* too far */
	CHECK(!sw_ipid_plausible(&t, a, 1234, true, now, &g));
	CHECK(sw_ipid_plausible(&t, a, 40099 + 2001, true, now, &g)); /* back on the counter */
	/* silence lets the counter run ahead: one ID per ms at most */
	now += 20ull * 1000000000ull; /* 20 s */
	CHECK(sw_ipid_plausible(&t, a, (uint16_t)(42100 + 2048 + 19000), true, now, &g));
	/* a jump confirmed by a second packet just after it */
	CHECK(!sw_ipid_plausible(&t, a, 7000, true, now, &g));
	CHECK(sw_ipid_plausible(&t, a, 7003, true, now, &g) && !g);
	CHECK(sw_ipid_plausible(&t, a, 7004, true, now, &g));
	CHECK(!sw_ipid_plausible(&t, a, 30000, true, now, &g));
	/* the wrap of the 16-bit ID */
	CHECK(sw_ipid_plausible(&t, b, 65530, true, now, &g));
	CHECK(sw_ipid_plausible(&t, b, 3, true, now, &g));
	CHECK(!sw_ipid_plausible(&t, b, 65530 - 300, true, now, &g));
	/* random IDs: refused until the window gives up on the sender */
	CHECK(sw_ipid_plausible(&t, b, 4, true, now, &g)); /* on its counter: no strike left */
	refused = 0;
	for (int i = 0; i < 8; i++) {
		bool ok = sw_ipid_plausible(&t, b, (uint16_t)(20000 + i * 4001), true, now, &g);

		refused += !ok;
		CHECK(g == (i == 7));
	}
	CHECK_EQ_INT(refused, 7);
	CHECK(sw_ipid_plausible(&t, b, 999, true, now, &g) && !g);
	/* a change of the DF bit needs a second packet to agree */
	CHECK(!sw_ipid_plausible(&t, a, 104, false, now, &g));
	CHECK(!sw_ipid_plausible(&t, a, 105, true, now, &g)); /* not the candidate's DF */
	CHECK(!sw_ipid_plausible(&t, a, 106, false, now, &g));
	CHECK(sw_ipid_plausible(&t, a, 107, false, now, &g));
	CHECK(!sw_ipid_plausible(&t, a, 108, true, now, &g));
	/*
	 * a sender of ID 0 only: the IDs of its GSO segments (1..15, DF) pass
	 * and leave it a zero sender; any other recovered ID needs a second
	 * packet to agree
	 */
	sw_ipid_zero(&t, z);
	for (uint16_t id = 1; id < SW_TX_BATCH; id++)
		CHECK(sw_ipid_plausible(&t, z, id, true, now, &g) && !g);
	CHECK(!sw_ipid_plausible(&t, z, 3, false, now, &g)); /* DF clear: not a GSO segment */
	CHECK(!sw_ipid_plausible(&t, z, SW_TX_BATCH, true, now, &g));
	CHECK(sw_ipid_plausible(&t, z, 1, true, now, &g)); /* still a zero sender */
	CHECK(!sw_ipid_plausible(&t, z, 30000, true, now, &g));
	CHECK(!sw_ipid_plausible(&t, z, 5000, true, now, &g));
	CHECK(sw_ipid_plausible(&t, z, 5001, true, now, &g));
	CHECK(sw_ipid_plausible(&t, z, 5002, true, now, &g));
	sw_ipid_zero(&t, z); /* a counter's ID 0 does not make it a zero sender */
	CHECK(sw_ipid_plausible(&t, z, 5003, true, now, &g));
}

/*
 * The segments of a UDP GSO send (net.c): sw_icrc_set_ip_id() turns the
 * ICRC sw_pkt_finish() computed for ID 0 into the one the reference CRC
 * gives over the kernel's header for the segment (ID 1, 2, ..., DF), the
 * receiver recovers that ID, and a second call restores ID 0's.
 */
static void gso_ids(void)
{
	struct sw_icrc_ctx c = {.sport = 0xc321, .dport = 4791};
	static uint8_t pkt[SW_PKT_MAX], want[SW_PKT_MAX];
	int bad = 0, lost = 0;

	t_case("GSO segment IDs: the ICRC for the ID the kernel gives");
	c.src.s_addr = htonl(0x7f000001);
	c.dst.s_addr = htonl(0x0a000002);
	for (int i = 0; i < 2000; i++) {
		size_t len = 16 + 4 * (rnd() % ((SW_PKT_MAX - 16) / 4));
		uint16_t id = (uint16_t)(i < 1000 ? 1u + (uint32_t)i % 63 : rnd() | 1);
		struct sw_icrc_var var;

		random_pkt(pkt, len);
		seal(pkt, len, &c, 0, true);
		memcpy(want, pkt, len);
		seal(want, len, &c, id, true);
		sw_icrc_set_ip_id(pkt, len, id);
		bad += memcmp(pkt, want, len) != 0;
		lost += sw_icrc_check(&c, pkt, len, &var) || !var.recovered || var.ip_id != id ||
			!var.df;
		sw_icrc_set_ip_id(pkt, len, id);
		bad += sw_icrc_check(&c, pkt, len, &var) || var.recovered;
	}
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(lost, 0);
}

#include <time.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ns per receive check of `len`-byte packets: today's compare, ID 0, a recovered ID. */
static void cost_at(size_t len)
{
	struct sw_icrc_ctx c = {.sport = 0xc001, .dport = 4791};
	static uint8_t zero[SW_PKT_MAX], some[SW_PKT_MAX];
	double ns[3];
	unsigned int ok = 0;

	c.src.s_addr = htonl(0x0a4d0002);
	c.dst.s_addr = htonl(0x0a4d0001);
	random_pkt(zero, len);
	seal(zero, len, &c, 0, true);
	memcpy(some, zero, len);
	seal(some, len, &c, 0x1234, true);
	for (int m = 0; m < 3; m++) {
		uint8_t *pkt = m == 2 ? some : zero;
		double t0 = now_s(), t;
		long n = 0;

		do {
			for (int k = 0; k < 256; k++) {
				struct sw_icrc_var var;
				uint32_t want;

				if (m == 0) { /* the check before the recovery existed */
					memcpy(&want, pkt + len - 4, 4);
					ok += htole32(sw_icrc(&c, pkt, len)) == want;
				} else {
					ok += !sw_icrc_check(&c, pkt, len, &var);
				}
			}
			n += 256;
			t = now_s() - t0;
		} while (t < 0.1);
		ns[m] = t / (double)n * 1e9;
	}
	printf("# receive check of %zu-byte packets: compare %.0f ns, ID 0 %.0f ns, recovered ID %.0f "
	       "ns (%u)\n",
	       len, ns[0], ns[1], ns[2], ok);
	CHECK(ok > 0);
}

static void cost(void)
{
	t_case("cost per packet (informational)");
	cost_at(64);
	cost_at(1024);
	cost_at(4096 + 32);
}

/* ---- live ---- */

static struct h_env H, *h = &H;
static struct h_arena ar;
static int raw = -1;
static uint16_t next_id = 0xfff0; /* wraps during the test */
static uint8_t rbuf[4][SW_GRH_LEN + 512];

/* Send a built packet of `len` bytes through the raw socket with the next ID. */
static void raw_send(uint8_t *pkt, size_t len, bool df, bool corrupt)
{
	uint8_t dgram[20 + 8 + SW_PKT_MAX + 64], *ip = dgram, *udp = dgram + 20;
	struct sw_icrc_ctx c = h->ic_out;
	uint16_t id = next_id++;
	uint32_t v;
	ssize_t n;

	headers(ip, udp, &c, len, id, df, 0x02 /* ECT(0) */, 17);
	memcpy(dgram + 28, pkt, len);
	v = htole32(ref_icrc(ip, udp, dgram + 28, len));
	memcpy(dgram + 28 + len - 4, &v, 4);
	if (corrupt)
		dgram[28 + len / 2] ^= 0x10;
	n = sendto(raw, dgram, 28 + len, 0, (const struct sockaddr *)&h->dev, sizeof(h->dev));
	CHECK_MSG(n == (ssize_t)(28 + len), "raw sendto: %zd (%s)", n, t_errname(errno));
}

static size_t build(uint8_t *buf, struct sw_pkt *p, const void *payload, uint32_t len)
{
	return h_build(h, buf, p, payload, len);
}

/* A request of `qp` at `psn` with a RETH for `len` bytes at arena offset `off`. */
static struct sw_pkt reth_req(struct ibv_qp *qp, uint8_t opcode, uint32_t psn, size_t off,
			      uint32_t len)
{
	struct sw_pkt p = h_req(qp, opcode, psn);

	p.va = h_va(&ar, (int64_t)off);
	p.rkey = ar.mr->rkey;
	p.dma_len = len;
	return p;
}

static void live(void)
{
	uint8_t pkt[SW_PKT_MAX + 64], data[1024];
	struct ibv_qp *v, *u;
	struct ibv_mr *rmr;
	uint32_t e = PSN0;
	unsigned long long icrc0, ipid0;
	struct sw_pkt p;

	t_case("live: a raw sender's IDs and DF bits");
	raw = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
	if (raw < 0) {
		printf("# SKIP live case: no raw socket (%s): needs CAP_NET_RAW\n",
		       t_errname(errno));
		return;
	}
	h_open(h);
	h_arena_open(&ar, h->e.pd, 4096,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	rmr = ibv_reg_mr(h->e.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	v = h_rc_victim(h, PSN0);
	u = q_create(&h->e, IBV_QPT_UD);
	if (!CHECK(rmr && v && u) || !CHECK_RET(q_bring_up(&h->e, u, IBV_QPS_RTS, 0), 0))
		goto out;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(0x5a ^ (i * 13));
	icrc0 = H_CNT(h, drops_icrc);
	ipid0 = H_CNT(h, rx_ip_id);

	/*
	 * 64 WRITEs, each at its own offset, IDs counting through the wrap,
	 * DF set for the first 32 and clear from then on: the first packet
	 * with the other DF bit is refused (its window), its resend taken.
	 */
	for (unsigned int i = 0; i < 64; i++) {
		p = reth_req(v, SW_OP_WRITE_ONLY, e, i * 64, 64);
		raw_send(pkt, build(pkt, &p, data + i, 64), i < 32, false);
		if (i == 32) {
			H_WAIT_CNT(h, drops_ip_id, 1);
			H_EXPECT_QUIET(h);
			raw_send(pkt, build(pkt, &p, data + i, 64), false, false);
		}
		memcpy(ar.shadow + H_SLACK + i * 64, data + i, 64);
		if (!H_EXPECT_ACK(h, H_ACK, e))
			goto out;
		e++;
	}
	CHECK(h_arena_intact(&ar));

	/* a corrupted WRITE is dropped as an ICRC error, the next one is taken */
	p = reth_req(v, SW_OP_WRITE_ONLY, e, 0, 64);
	raw_send(pkt, build(pkt, &p, data + 200, 64), false, true);
	H_WAIT_CNT(h, drops_icrc, icrc0 + 2); /* and the refused DF change */
	H_EXPECT_QUIET(h);
	CHECK(h_arena_intact(&ar));
	raw_send(pkt, build(pkt, &p, data + 300, 64), false, false);
	memcpy(ar.shadow + H_SLACK, data + 300, 64);
	H_EXPECT_ACK(h, H_ACK, e);
	e++;
	CHECK(h_arena_intact(&ar));

	/* a READ: the response carries the memory */
	p = reth_req(v, SW_OP_READ_REQ, e, 64, 128);
	raw_send(pkt, build(pkt, &p, NULL, 0), false, false);
	{
		int r = h_recv(h, &p, H_WAIT_MS);

		CHECK_MSG(!r && p.opcode == SW_OP_READ_RESP_ONLY && p.psn == e && p.paylen == 128 &&
				  !memcmp(p.payload, ar.shadow + H_SLACK + 64, 128),
			  "READ response: %s, opcode %#x psn %#x len %u", t_errname(-r), p.opcode,
			  p.psn, p.paylen);
	}
	e++;

	/* UD SENDs with changing IDs reach the receive queue */
	for (unsigned int i = 0; i < 4; i++) {
		struct ibv_sge s = {(uintptr_t)rbuf[i], sizeof(rbuf[i]), rmr->lkey};
		struct ibv_recv_wr w = {.wr_id = 100 + i, .sg_list = &s, .num_sge = 1}, *bad;

		CHECK_RET(ibv_post_recv(u, &w, &bad), 0);
	}
	for (unsigned int i = 0; i < 4; i++) {
		struct ibv_wc wc;
		int n = 0;

		p = h_req(u, SW_OP_UD | SW_OP_SEND_ONLY, 0);
		p.ack_req = false;
		p.qkey = UD_QKEY;
		p.sqpn = H_PEER_QPN;
		raw_send(pkt, build(pkt, &p, data + 16 * i, 100), false, false);
		for (int k = 0; k < 5000 && !n; k++) {
			n = ibv_poll_cq(h->e.rcq, 1, &wc);
			if (!n)
				usleep(1000);
		}
		CHECK_MSG(n == 1 && wc.status == IBV_WC_SUCCESS &&
				  wc.byte_len == SW_GRH_LEN + 100 &&
				  !memcmp(rbuf[i] + SW_GRH_LEN, data + 16 * i, 100),
			  "UD receive %u: n %d status %d len %u", i, n, n ? (int)wc.status : -1,
			  n ? wc.byte_len : 0);
		/* the GRH area's IPv4 header shows the sender's ID and DF bit */
		CHECK_MSG(rbuf[i][20 + 4] == (uint8_t)((next_id - 1) >> 8) &&
				  rbuf[i][20 + 5] == (uint8_t)(next_id - 1) && rbuf[i][20 + 6] == 0,
			  "GRH IPv4 ID/flags %02x%02x %02x, sent %04x without DF", rbuf[i][24],
			  rbuf[i][25], rbuf[i][26], (uint16_t)(next_id - 1));
	}
	CHECK_EQ_INT(H_CNT(h, drops_icrc), icrc0 + 2);
	CHECK_EQ_INT(H_CNT(h, drops_ip_id), 1);
	/* every packet but those with ID 0 and DF set needed the recovery */
	CHECK_MSG(H_CNT(h, rx_ip_id) - ipid0 >= 60, "recovered IDs: %llu",
		  (unsigned long long)(H_CNT(h, rx_ip_id) - ipid0));
out:
	if (v)
		ibv_destroy_qp(v);
	if (u)
		ibv_destroy_qp(u);
	if (rmr)
		ibv_dereg_mr(rmr);
	h_arena_close(&ar);
	h_close(h);
	close(raw);
}

int main(void)
{
	t_start("unit_wire_ip_id");
	recovery();
	ipv6();
	strength();
	single_bits();
	window();
	gso_ids();
	cost();
	live();
	return t_finish();
}
