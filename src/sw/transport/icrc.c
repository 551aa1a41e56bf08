/* SPDX-License-Identifier: MIT */
/*
 * icrc.c - CRC-32 and the RoCE v2 invariant CRC.
 *
 * The CRC is the Ethernet / zlib CRC-32: polynomial 0x04C11DB7 processed
 * bit-reflected (0xEDB88320), register preset to all ones, result
 * complemented. (The SSE4.2 crc32 instruction computes CRC-32C, a
 * different polynomial, and is of no use here.)
 *
 * Two implementations, chosen once at run time:
 *
 * - Carry-less multiplication (x86-64 PCLMULQDQ, when the CPU has it):
 *   the message is folded 64 bytes at a time into four 128-bit
 *   accumulators. A 128-bit chunk A = H x^64 + L that lies D bits before
 *   the end of the data still to come is congruent, mod the polynomial P,
 *   to H (x^(D+64) mod P) + L (x^D mod P): two 64x32-bit carry-less
 *   products that fit in 128 bits again, so the accumulator moves D bits
 *   forward with two multiplies and two XORs. The constants x^n mod P are
 *   computed at start-up, not tabulated. At the end the four accumulators
 *   fold into one, and that one, being congruent to everything processed
 *   so far, goes through the table code as 16 ordinary bytes (with a zero
 *   register): no Barrett reduction is needed. About 5x the table code's
 *   speed on 4 KiB packets.
 * - The same with 512-bit registers (AVX-512 with VPCLMULQDQ, when the
 *   CPU has both), for 256 bytes and more: four accumulators of four
 *   128-bit lanes each fold 256 bytes per step, every lane moving 2048
 *   bits with the constants for that distance in all four lanes; then
 *   the accumulators fold into one (1536, 1024, 512 bits), its lanes
 *   into one (384, 256, 128 bits), and the rest goes on as above. On
 *   4 KiB, 48 GB/s against the 128-bit loop's 13 on the project's
 *   machines, where the CRC on each side had been a fifth of a UDP
 *   stream's time.
 * - Slicing-by-16 tables: sixteen 256-entry tables, where table k maps a
 *   byte to its CRC contribution after k further zero bytes, let the
 *   loop fold 16 input bytes per iteration with 16 independent lookups.
 *   Used for short data, for the tails, and on CPUs without PCLMULQDQ.
 *
 * The tables (16 KiB), the constants and the CPU check are set up once,
 * on first use, under pthread_once. Functions compiled for PCLMULQDQ
 * carry a target attribute, so the library itself needs no -m flag and
 * runs on any x86-64.
 *
 * The ICRC (IBA Annex A17, RoCE v2) covers, in this order:
 *   8 bytes 0xff           the LRH, which RoCE v2 does not have, masked
 *   IPv4 header, 20 bytes  TOS, TTL and header checksum masked to 0xff..
 *   (or IPv6, 40 bytes     traffic class, flow label, hop limit masked)
 *   UDP header, 8 bytes    checksum masked to 0xffff
 *   BTH, 12 bytes          byte 4 (FECN/BECN/reserved) masked to 0xff
 *   the rest of the packet up to the ICRC itself
 * The IPv4 header is rebuilt here, not taken from the socket: the kernel
 * sends ours with version/IHL 0x45, identification 0 and DF set
 * (IP_PMTUDISC_DO on an unconnected UDP socket), no options. The
 * segments of a UDP GSO send (net.c) are the exception: the kernel gives
 * the n-th (from 0) ID n, and sw_icrc_set_ip_id() turns ID 0's ICRC into
 * that one's by the same algebra the receive side uses (below).
 *
 * Received packets. A UDP socket never shows the receiver the sender's
 * IPv4 Identification or its DF bit, and the ICRC covers both (only TOS,
 * TTL and the header checksum are masked). A sender that builds its own
 * IP header, as the kernel's rxe does, puts a fresh ID on every packet.
 * sw_icrc_check() therefore first compares with the ICRC over ID 0 and
 * DF set (every Linux UDP socket sender, softverbs included: the whole
 * 32-bit check). On a mismatch it recovers the header instead of
 * guessing it. The CRC is affine, so the difference D between the stored
 * ICRC and ours is the CRC contribution of the 3 header bytes that
 * differ (ID and flags, bytes 4-6 of the IPv4 header), shifted by the
 * k bytes that follow them: D = E(x) x^(8k+32) mod P. Multiplying D by
 * the inverse power x^-(8k+32) mod P, one carry-less multiply by a
 * per-length factor (cached per packet length), gives E itself. E is a
 * legal header difference only if the bits outside the ID and the DF
 * bit are zero: 15 of the 32 bits are still checked, and the caller
 * gets the ID back to judge it (transport/ipid.c: a per-peer window).
 *
 * On the wire the 32-bit result goes least significant byte first (the
 * order a CRC's bits leave a serial link), i.e. little-endian; see
 * sw_pkt_finish() and tests/wire_icrc_scapy.sh, which checks this against
 * scapy's independent implementation.
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "sw/wire.h"
#include "sw/transport/transport_priv.h" /* SW_PKT_MAX */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SW_CRC_CLMUL 1
#else
#define SW_CRC_CLMUL 0
#endif

#define SW_CRC32_POLY_REFLECTED 0xedb88320u

enum {
	SW_CRC_SLICES = 16,
	SW_ICRC_PSEUDO_LEN = 8 + 20 + 8, /* masked LRH, IPv4, UDP */
	SW_ICRC_PSEUDO6_LEN = 8 + 40 + 8, /* masked LRH, IPv6, UDP */
	SW_CRC_CLMUL_MIN = 64, /* shorter data: tables */
	SW_CRC_CLMUL512_MIN = 256, /* shorter data: 128-bit folding */
	SW_ICRC_VAR_OFF = 8 + 4, /* first header byte a receiver cannot see: IPv4 ID */
	SW_ICRC_VAR_LEN = 3, /* ID (2 bytes) and the flags byte */
	SW_ICRC_FACTORS = SW_MAX_UDP_PAYLOAD / 4 + 1, /* one per length, lengths are 4k */
	SW_XINV_POWS = 20, /* x^-(2^i) for i < 20: exponents below 2^20 */
	SW_ICRC_ALIAS_MAX = 16,
	/* bits of a CRC input of a SW_PKT_MAX-byte packet after the variable bytes */
	SW_ICRC_ALIAS_BITS =
		8 * (SW_ICRC_PSEUDO_LEN + SW_PKT_MAX - SW_ICRC_VAR_OFF - SW_ICRC_VAR_LEN),
};

/*
 * x^-1 mod P, bit-reflected. P = x^32 + Q(x) with Q(0) = 1, so
 * x * (P(x) + 1) / x = P(x) + 1 = 1 mod P: the inverse is (P + 1) / x,
 * whose reflected form is the reflected Q shifted up by one with x^31
 * (bit 0) set.
 */
#define SW_CRC_XINV ((uint32_t)(SW_CRC32_POLY_REFLECTED << 1) | 1u)

static uint32_t crc_tab[SW_CRC_SLICES][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_clmul_ok; /* the CPU has PCLMULQDQ */
static bool crc_clmul512_ok; /* ... and AVX-512 with VPCLMULQDQ, which the OS saves */

/*
 * Folding constants: k[d][0] multiplies the high-order (first) 64 bits
 * of an accumulator, k[d][1] the low-order ones, to move it forward by
 * 128 (d + 1) bits, d = 0..3. In the reflected bit order the 32-bit
 * residue x^n mod P sits in the upper half of the 64-bit operand, and
 * the product comes out one bit lower than a 128-bit chunk's own bit
 * order, hence x^(D+63) and x^(D-1) for a move by D bits.
 */
static uint64_t crc_fold_k[4][2];

/* The same for moves by 512 (d + 1) bits, d = 0..3: the 512-bit loop's. */
static uint64_t crc_fold_k512[4][2];

/* x^-(2^i) mod P (bit-reflected), for the receive-side recovery. */
static uint32_t crc_xinv_pow[SW_XINV_POWS];

/*
 * Per length (index len / 4): x^-(8k+32) mod P, k the bytes of the CRC
 * input after the variable header bytes; 0 until first needed (no power
 * of x is 0). Written with relaxed atomics: two threads may compute the
 * same value.
 */
static _Atomic uint32_t crc_recover_k[SW_ICRC_FACTORS];

/* Per length, the same for sending: x^(8k+32) mod P (sw_icrc_set_ip_id). */
static _Atomic uint32_t crc_forward_k[SW_ICRC_FACTORS];

/*
 * The header differences that a single flipped bit of a packet of up to
 * SW_PKT_MAX bytes would also produce (found at start-up, about one):
 * refused, so every single-bit error still fails the check.
 */
static uint32_t crc_alias[SW_ICRC_ALIAS_MAX];
static unsigned int crc_nalias;

/* Contract: x^n mod P, bit-reflected (bit 31 is x^0). */
static uint32_t crc_xpow(unsigned int n)
{
	uint32_t r = 0x80000000u; /* x^0 */

	while (n--)
		r = (r >> 1) ^ (SW_CRC32_POLY_REFLECTED & (0u - (r & 1))); /* times x */
	return r;
}

/*
 * Contract: a * b mod P, both bit-reflected (bit 31 is x^0). Walks the
 * bits of `a` from x^0 up while `b` is multiplied by x each step.
 */
static uint32_t crc_mulmod(uint32_t a, uint32_t b)
{
	uint32_t r = 0;

	for (uint32_t m = 0x80000000u; m && a; m >>= 1) {
		if (a & m) {
			r ^= b;
			a ^= m;
		}
		b = (b >> 1) ^ (SW_CRC32_POLY_REFLECTED & (0u - (b & 1))); /* times x */
	}
	return r;
}

/* Contract: x^-n mod P for n < 2^SW_XINV_POWS; the tables must be initialised. */
static uint32_t crc_xinv(uint32_t n)
{
	uint32_t r = 0x80000000u; /* x^0 */

	for (unsigned int i = 0; n; i++, n >>= 1)
		if (n & 1)
			r = crc_mulmod(r, crc_xinv_pow[i]);
	return r;
}

/*
 * Contract: is `e`, a recovered difference of the variable header bytes
 * (see sw_icrc_check()), one a legal sender's header can make? The
 * first byte in bits 8-15, the second in 16-23, the flags byte in
 * 24-31; bits 0-7 must be 0, and of the flags only DF may differ.
 */
static inline bool icrc_legal(uint32_t e)
{
	return !(e & 0xffu) && !((e >> 24) & ~0x40u);
}

/* Contract: fill crc_tab and the folding constants, detect PCLMULQDQ; run once. */
static void crc_tab_init(void)
{
	uint32_t i, k, c;

	for (i = 0; i < 256; i++) {
		c = i;
		for (k = 0; k < 8; k++)
			c = (c >> 1) ^ (SW_CRC32_POLY_REFLECTED & (0u - (c & 1)));
		crc_tab[0][i] = c;
	}
	for (k = 1; k < SW_CRC_SLICES; k++)
		for (i = 0; i < 256; i++) {
			c = crc_tab[k - 1][i];
			crc_tab[k][i] = (c >> 8) ^ crc_tab[0][c & 0xff];
		}
	for (k = 0; k < 4; k++) {
		unsigned int d = 128 * (k + 1);

		crc_fold_k[k][0] = (uint64_t)crc_xpow(d + 63) << 32;
		crc_fold_k[k][1] = (uint64_t)crc_xpow(d - 1) << 32;
		crc_fold_k512[k][0] = (uint64_t)crc_xpow(4 * d + 63) << 32;
		crc_fold_k512[k][1] = (uint64_t)crc_xpow(4 * d - 1) << 32;
	}
	crc_xinv_pow[0] = SW_CRC_XINV;
	for (k = 1; k < SW_XINV_POWS; k++)
		crc_xinv_pow[k] = crc_mulmod(crc_xinv_pow[k - 1], crc_xinv_pow[k - 1]);
	/*
	 * A bit flipped d bits after the variable bytes' last bit shows as
	 * the difference x^-d (icrc_legal() judges it): walk d up, dividing
	 * by x each step (add P first when the x^0 coefficient is set).
	 */
	c = 0x80000000u; /* x^0 */
	for (i = 1; i <= SW_ICRC_ALIAS_BITS; i++) {
		c = (c & 0x80000000u) ? (uint32_t)((c ^ SW_CRC32_POLY_REFLECTED) << 1) | 1u :
					c << 1;
		if (icrc_legal(c) && crc_nalias < SW_ICRC_ALIAS_MAX)
			crc_alias[crc_nalias++] = c;
	}
#if SW_CRC_CLMUL
	__builtin_cpu_init();
	crc_clmul_ok = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
	/* the compiler's check of AVX-512 includes the OS's saving of its registers */
	crc_clmul512_ok = crc_clmul_ok && __builtin_cpu_supports("avx512f") &&
			  __builtin_cpu_supports("vpclmulqdq");
#endif
}

/* Contract: 8 bytes at `p` (any alignment) as a little-endian integer. */
static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

/*
 * Contract: advance the raw (uncomplemented) CRC register `crc` over
 * `len` bytes at `p`. The tables must be initialised.
 */
static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t len)
{
	const uint32_t(*t)[256] = (const uint32_t(*)[256])crc_tab;

	while (len >= 16) {
		uint64_t a = load_le64(p) ^ crc;
		uint64_t b = load_le64(p + 8);

		crc = t[15][a & 0xff] ^ t[14][(a >> 8) & 0xff] ^ t[13][(a >> 16) & 0xff] ^
		      t[12][(a >> 24) & 0xff] ^ t[11][(a >> 32) & 0xff] ^ t[10][(a >> 40) & 0xff] ^
		      t[9][(a >> 48) & 0xff] ^ t[8][a >> 56] ^ t[7][b & 0xff] ^
		      t[6][(b >> 8) & 0xff] ^ t[5][(b >> 16) & 0xff] ^ t[4][(b >> 24) & 0xff] ^
		      t[3][(b >> 32) & 0xff] ^ t[2][(b >> 40) & 0xff] ^ t[1][(b >> 48) & 0xff] ^
		      t[0][b >> 56];
		p += 16;
		len -= 16;
	}
	while (len--)
		crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
	return crc;
}

#if SW_CRC_CLMUL
/* Contract: move accumulator `a` forward by the distance of constants `k`, add `data`. */
__attribute__((target("pclmul,sse2"))) static inline __m128i fold(__m128i a, __m128i k,
								  __m128i data)
{
	__m128i hi = _mm_clmulepi64_si128(a, k, 0x00); /* first 64 bits x k[0] */
	__m128i lo = _mm_clmulepi64_si128(a, k, 0x11); /* last 64 bits x k[1] */

	return _mm_xor_si128(_mm_xor_si128(hi, lo), data);
}

/*
 * Contract: fold the 16-byte chunks of the `len` bytes at `p` into the
 * accumulator `x`, congruent to all the bytes before them, then finish
 * its remainder and the last bytes with the tables; the raw register.
 */
__attribute__((target("pclmul,sse2"))) static uint32_t fold_finish(__m128i x, const uint8_t *p,
								   size_t len)
{
	const __m128i k1 = _mm_loadu_si128((const __m128i *)(const void *)crc_fold_k[0]);
	uint8_t rest[16];

	while (len >= 16) {
		x = fold(x, k1, _mm_loadu_si128((const __m128i *)(const void *)p));
		p += 16;
		len -= 16;
	}
	_mm_storeu_si128((__m128i *)(void *)rest, x);
	return crc_update(crc_update(0, rest, sizeof(rest)), p, len);
}

/*
 * Contract: as crc_update(), with PCLMULQDQ; len >= 16. The raw register
 * enters as an XOR into the first four bytes (what a register preset
 * amounts to), and the 128-bit remainder left by folding, congruent to
 * all the bytes folded, is finished by the table code.
 */
__attribute__((target("pclmul,sse2"))) static uint32_t
crc_update_clmul(uint32_t crc, const uint8_t *p, size_t len)
{
	const __m128i k1 = _mm_loadu_si128((const __m128i *)(const void *)crc_fold_k[0]);
	__m128i x0, x1, x2, x3, k;

	x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)p),
			   _mm_cvtsi32_si128((int)crc));
	if (len >= 64) {
		const __m128i k4 = _mm_loadu_si128((const __m128i *)(const void *)crc_fold_k[3]);

		x1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
		x2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
		x3 = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
		p += 64;
		len -= 64;
		while (len >= 64) {
			x0 = fold(x0, k4, _mm_loadu_si128((const __m128i *)(const void *)p));
			x1 = fold(x1, k4, _mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
			x2 = fold(x2, k4, _mm_loadu_si128((const __m128i *)(const void *)(p + 32)));
			x3 = fold(x3, k4, _mm_loadu_si128((const __m128i *)(const void *)(p + 48)));
			p += 64;
			len -= 64;
		}
		/* four accumulators into one: x0 moves 384 bits, x1 256, x2 128 */
		k = _mm_loadu_si128((const __m128i *)(const void *)crc_fold_k[2]);
		x3 = fold(x0, k, x3);
		k = _mm_loadu_si128((const __m128i *)(const void *)crc_fold_k[1]);
		x3 = fold(x1, k, x3);
		x0 = fold(x2, k1, x3);
	} else {
		p += 16;
		len -= 16;
	}
	return fold_finish(x0, p, len);
}

/* Contract: fold() for four 128-bit lanes at once. */
__attribute__((target("avx512f,vpclmulqdq"))) static inline __m512i fold512(__m512i a, __m512i k,
									    __m512i data)
{
	__m512i hi = _mm512_clmulepi64_epi128(a, k, 0x00);
	__m512i lo = _mm512_clmulepi64_epi128(a, k, 0x11);

	return _mm512_ternarylogic_epi64(hi, lo, data, 0x96); /* hi ^ lo ^ data */
}

/* Contract: the constants of crc_fold_k512[d] in all four lanes. */
__attribute__((target("avx512f"))) static inline __m512i k512(unsigned int d)
{
	return _mm512_broadcast_i32x4(
		_mm_loadu_si128((const __m128i *)(const void *)crc_fold_k512[d]));
}

/*
 * Contract: as crc_update_clmul(), with 512-bit registers; len >= 256.
 * Lane 0 of an accumulator holds the first 16 of its 64 bytes.
 */
__attribute__((target("avx512f,vpclmulqdq,pclmul,sse2"))) static uint32_t
crc_update_clmul512(uint32_t crc, const uint8_t *p, size_t len)
{
	const __m128i k1 = _mm_loadu_si128((const __m128i *)(const void *)crc_fold_k[0]);
	const __m512i k4 = k512(3);
	__m512i x0, x1, x2, x3;
	__m128i y;

	x0 = _mm512_xor_si512(
		_mm512_loadu_si512(p),
		_mm512_inserti32x4(_mm512_setzero_si512(), _mm_cvtsi32_si128((int)crc), 0));
	x1 = _mm512_loadu_si512(p + 64);
	x2 = _mm512_loadu_si512(p + 128);
	x3 = _mm512_loadu_si512(p + 192);
	p += 256;
	len -= 256;
	while (len >= 256) {
		x0 = fold512(x0, k4, _mm512_loadu_si512(p));
		x1 = fold512(x1, k4, _mm512_loadu_si512(p + 64));
		x2 = fold512(x2, k4, _mm512_loadu_si512(p + 128));
		x3 = fold512(x3, k4, _mm512_loadu_si512(p + 192));
		p += 256;
		len -= 256;
	}
	/* four accumulators into one: x0 moves 1536 bits, x1 1024, x2 512 */
	x3 = fold512(x0, k512(2), x3);
	x3 = fold512(x1, k512(1), x3);
	x3 = fold512(x2, k512(0), x3);
	/* its four lanes into one: lane 0 moves 384 bits, lane 1 256, lane 2 128 */
	y = _mm512_extracti32x4_epi32(x3, 3);
	y = fold(_mm512_extracti32x4_epi32(x3, 0),
		 _mm_loadu_si128((const __m128i *)(const void *)crc_fold_k[2]), y);
	y = fold(_mm512_extracti32x4_epi32(x3, 1),
		 _mm_loadu_si128((const __m128i *)(const void *)crc_fold_k[1]), y);
	y = fold(_mm512_extracti32x4_epi32(x3, 2), k1, y);
	return fold_finish(y, p, len);
}
#endif

/* Contract: crc_update() by the fastest implementation this CPU has. */
static inline uint32_t crc_update_best(uint32_t crc, const uint8_t *p, size_t len)
{
#if SW_CRC_CLMUL
	if (len >= SW_CRC_CLMUL512_MIN && crc_clmul512_ok)
		return crc_update_clmul512(crc, p, len);
	if (len >= SW_CRC_CLMUL_MIN && crc_clmul_ok)
		return crc_update_clmul(crc, p, len);
#endif
	return crc_update(crc, p, len);
}

/* Contract: zlib-style CRC-32; chain as sw_crc32(sw_crc32(0, a), b). */
uint32_t sw_crc32(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_tab_init);
	return ~crc_update_best(~crc, buf, len);
}

/* Contract: see wire.h (tables only, whatever the CPU). */
uint32_t sw_crc32_table(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_tab_init);
	return ~crc_update(~crc, buf, len);
}

/* Contract: see wire.h. */
bool sw_crc32_have_clmul(void)
{
	pthread_once(&crc_once, crc_tab_init);
	return crc_clmul_ok;
}

/* Contract: see wire.h. */
bool sw_crc32_have_clmul512(void)
{
	pthread_once(&crc_once, crc_tab_init);
	return crc_clmul512_ok;
}

/* Contract: store `v` big-endian in two bytes at `p`. */
static inline void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/*
 * Contract: the ICRC of a UDP payload of `len` bytes (including the 4
 * ICRC bytes, whose content is ignored) sent from c->src:c->sport to
 * c->dst:c->dport. Returns 0 for len < BTH + ICRC, which no valid packet
 * has (the parser rejects those before asking). `len` must not exceed
 * SW_MAX_UDP_PAYLOAD (the IPv4 total length is 16 bits).
 */
uint32_t sw_icrc(const struct sw_icrc_ctx *c, const uint8_t *pkt, size_t len)
{
	uint8_t ph[SW_ICRC_PSEUDO6_LEN + SW_BTH_LEN], *udp;
	size_t plen;
	uint32_t crc;

	if (len < SW_BTH_LEN + SW_ICRC_LEN)
		return 0;

	/* masked LRH */
	memset(ph, 0xff, 8);
	if (!c->v6) {
		/* IPv4: 0x45, TOS*, total length, ID 0, DF, TTL*, UDP, checksum*, src, dst */
		ph[8] = 0x45;
		ph[9] = 0xff;
		put_be16(ph + 10, (uint16_t)(20 + 8 + len));
		put_be16(ph + 12, 0);
		put_be16(ph + 14, 0x4000);
		ph[16] = 0xff;
		ph[17] = IPPROTO_UDP;
		put_be16(ph + 18, 0xffff);
		memcpy(ph + 20, &c->src.s_addr, 4);
		memcpy(ph + 24, &c->dst.s_addr, 4);
		udp = ph + 28;
		plen = SW_ICRC_PSEUDO_LEN;
	} else {
		/* IPv6: version 6, traffic class* and flow label*, payload length, UDP, hop limit*
		 */
		ph[8] = 0x6f;
		ph[9] = ph[10] = ph[11] = 0xff;
		put_be16(ph + 12, (uint16_t)(8 + len));
		ph[14] = IPPROTO_UDP;
		ph[15] = 0xff;
		memcpy(ph + 16, &c->src6, 16);
		memcpy(ph + 32, &c->dst6, 16);
		udp = ph + 48;
		plen = SW_ICRC_PSEUDO6_LEN;
	}
	/* UDP: ports, length, checksum* */
	put_be16(udp, c->sport);
	put_be16(udp + 2, c->dport);
	put_be16(udp + 4, (uint16_t)(8 + len));
	put_be16(udp + 6, 0xffff);
	/* BTH with byte 4 masked */
	memcpy(ph + plen, pkt, SW_BTH_LEN);
	ph[plen + 4] = 0xff;

	pthread_once(&crc_once, crc_tab_init);
	crc = crc_update(~0u, ph, plen + SW_BTH_LEN);
	crc = crc_update_best(crc, pkt + SW_BTH_LEN, len - SW_BTH_LEN - SW_ICRC_LEN);
	return ~crc;
}

/* Contract: the recovery factor for a UDP payload of `len` bytes (a multiple of 4). */
static uint32_t recover_factor(size_t len)
{
	_Atomic uint32_t *slot = &crc_recover_k[len / 4];
	uint32_t f = atomic_load_explicit(slot, memory_order_relaxed);

	if (!f) {
		/* CRC input: pseudo-headers, then the packet without its ICRC */
		size_t after =
			SW_ICRC_PSEUDO_LEN + len - SW_ICRC_LEN - SW_ICRC_VAR_OFF - SW_ICRC_VAR_LEN;

		f = crc_xinv((uint32_t)(8 * after + 32));
		atomic_store_explicit(slot, f, memory_order_relaxed);
	}
	return f;
}

/* Contract: x^n mod P by squaring (bit-reflected; about 2 log2(n) products). */
static uint32_t crc_xpow_fast(uint32_t n)
{
	uint32_t r = 0x80000000u, b = 0x40000000u; /* x^0, x^1 */

	for (; n; n >>= 1) {
		if (n & 1)
			r = crc_mulmod(r, b);
		b = crc_mulmod(b, b);
	}
	return r;
}

/*
 * See wire.h. The ICRC is affine in the header bytes: an ID other than
 * 0 adds E x^(8k+32) mod P to it (sw_icrc_check() runs the same step
 * backwards), E the ID's bits placed as that function reads them back.
 */
void sw_icrc_set_ip_id(uint8_t *pkt, size_t len, uint16_t id)
{
	_Atomic uint32_t *slot;
	uint32_t f, e, v;

	if (!id || len < SW_BTH_LEN + SW_ICRC_LEN || len > SW_MAX_UDP_PAYLOAD || (len & 3))
		return;
	slot = &crc_forward_k[len / 4];
	f = atomic_load_explicit(slot, memory_order_relaxed);
	if (!f) {
		f = crc_xpow_fast((uint32_t)(8 * (SW_ICRC_PSEUDO_LEN + len - SW_ICRC_LEN -
						  SW_ICRC_VAR_OFF - SW_ICRC_VAR_LEN) +
					     32));
		atomic_store_explicit(slot, f, memory_order_relaxed);
	}
	e = (uint32_t)(id >> 8) << 8 | (uint32_t)(id & 0xff) << 16;
	memcpy(&v, pkt + len - SW_ICRC_LEN, 4);
	v = htole32(le32toh(v) ^ crc_mulmod(e, f));
	memcpy(pkt + len - SW_ICRC_LEN, &v, 4);
}

/* See wire.h. */
int sw_icrc_check(const struct sw_icrc_ctx *c, const uint8_t *pkt, size_t len,
		  struct sw_icrc_var *var)
{
	uint32_t stored, e;

	if (len < SW_BTH_LEN + SW_ICRC_LEN || len > SW_MAX_UDP_PAYLOAD || (len & 3))
		return -EILSEQ;
	memcpy(&stored, pkt + len - SW_ICRC_LEN, 4);
	stored = le32toh(stored);
	e = stored ^ sw_icrc(c, pkt, len); /* the header difference, shifted */
	var->recovered = false;
	var->ip_id = 0;
	var->df = true;
	if (!e)
		return 0;
	if (c->v6)
		return -EILSEQ; /* the IPv6 header has nothing the socket does not show */
	/*
	 * E, the XOR of the sender's bytes 4-6 of the IPv4 header with ours
	 * (ID 0, flags 0x40), bit-reflected (icrc_legal()). The reserved
	 * flag and MF must be 0; the fragment offset, in the next byte, is
	 * assumed 0: a sender computes its ICRC before any fragmentation.
	 */
	e = crc_mulmod(e, recover_factor(len));
	if (!icrc_legal(e))
		return -EILSEQ;
	for (unsigned int i = 0; i < crc_nalias; i++)
		if (e == crc_alias[i])
			return -EILSEQ;
	var->recovered = true;
	var->ip_id = (uint16_t)(((e >> 8) & 0xff) << 8 | ((e >> 16) & 0xff));
	var->df = !(e >> 24);
	return 0;
}
