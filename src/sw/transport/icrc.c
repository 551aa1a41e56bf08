/* SPDX-License-Identifier: MIT */
/*
 * icrc.c - CRC-32 and the RoCE v2 invariant CRC.
 *
 * The CRC is the Ethernet / zlib CRC-32: polynomial 0x04C11DB7 processed
 * bit-reflected (0xEDB88320), register preset to all ones, result
 * complemented. (The SSE4.2 crc32 instruction computes CRC-32C, a
 * different polynomial, and is of no use here.)
 *
 * Speed comes from slicing-by-16: sixteen 256-entry tables, where table k
 * maps a byte to its CRC contribution after k further zero bytes, let the
 * loop fold 16 input bytes per iteration with 16 independent lookups.
 * The tables (16 KiB) are computed once, on first use, under pthread_once.
 *
 * The ICRC (IBA Annex A17, RoCE v2) covers, in this order:
 *   8 bytes 0xff           the LRH, which RoCE v2 does not have, masked
 *   IPv4 header, 20 bytes  TOS, TTL and header checksum masked to 0xff..
 *   UDP header, 8 bytes    checksum masked to 0xffff
 *   BTH, 12 bytes          byte 4 (FECN/BECN/reserved) masked to 0xff
 *   the rest of the packet up to the ICRC itself
 * The IPv4 header is rebuilt here, not taken from the socket: the kernel
 * sends ours with version/IHL 0x45, identification 0 and DF set
 * (IP_PMTUDISC_DO on an unconnected UDP socket), no options.
 *
 * On the wire the 32-bit result goes least significant byte first (the
 * order a CRC's bits leave a serial link), i.e. little-endian; see
 * sw_pkt_finish() and tests/wire_icrc_scapy.sh, which checks this against
 * scapy's independent implementation.
 */
#include <endian.h>
#include <pthread.h>
#include <string.h>

#include "sw/wire.h"

#define SW_CRC32_POLY_REFLECTED 0xedb88320u

enum {
	SW_CRC_SLICES = 16,
	SW_ICRC_PSEUDO_LEN = 8 + 20 + 8, /* masked LRH, IPv4, UDP */
};

static uint32_t crc_tab[SW_CRC_SLICES][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* Contract: fill crc_tab; run exactly once through pthread_once. */
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

/* Contract: zlib-style CRC-32; chain as sw_crc32(sw_crc32(0, a), b). */
uint32_t sw_crc32(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_tab_init);
	return ~crc_update(~crc, buf, len);
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
	uint8_t ph[SW_ICRC_PSEUDO_LEN + SW_BTH_LEN];
	uint32_t crc;

	if (len < SW_BTH_LEN + SW_ICRC_LEN)
		return 0;

	/* masked LRH */
	memset(ph, 0xff, 8);
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
	/* UDP: ports, length, checksum* */
	put_be16(ph + 28, c->sport);
	put_be16(ph + 30, c->dport);
	put_be16(ph + 32, (uint16_t)(8 + len));
	put_be16(ph + 34, 0xffff);
	/* BTH with byte 4 masked */
	memcpy(ph + SW_ICRC_PSEUDO_LEN, pkt, SW_BTH_LEN);
	ph[SW_ICRC_PSEUDO_LEN + 4] = 0xff;

	pthread_once(&crc_once, crc_tab_init);
	crc = crc_update(~0u, ph, sizeof(ph));
	crc = crc_update(crc, pkt + SW_BTH_LEN, len - SW_BTH_LEN - SW_ICRC_LEN);
	return ~crc;
}
