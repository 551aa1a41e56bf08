/* SPDX-License-Identifier: MIT */
/*
 * fuzz_pkt - the RoCE v2 wire parser on arbitrary bytes.
 *
 * The input is a UDP payload. sw_pkt_parse() must accept or refuse it
 * without reading outside it (ASan sees the input's exact allocation),
 * and what it accepts must be consistent:
 *   - the opcode is in the table, the headers, pad and ICRC fit, the
 *     payload lies inside the buffer and ends where pad and ICRC begin;
 *   - writing the parsed headers back reproduces the input's header bytes
 *     (reserved fields excepted);
 *   - a copy finished with sw_pkt_finish() parses with the ICRC check
 *     and gives the same fields; the input itself passes the ICRC check
 *     only if its own ICRC is that one.
 * Also: the carry-less and table CRC-32 agree on the input, and
 * sw_pkt_parse_bth() (the BTH of an opcode the table lacks) keeps the
 * payload inside the datagram.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sw/wire.h"

/* Abort with a message: libFuzzer keeps the input as a crash. */
#define FUZZ_ASSERT(c)                                                                             \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "fuzz_pkt: %s:%d: assertion failed: %s\n", __FILE__,        \
				__LINE__, #c);                                                     \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Header bytes the builder writes as 0 whatever the input holds. */
static void mask_reserved(uint8_t *h, const struct sw_opinfo *info)
{
	h[4] = 0;     /* FECN, BECN, reserved */
	h[8] &= 0x80; /* AckReq */
	if (info->flags & SW_F_DETH)
		h[SW_BTH_LEN + 4] = 0;
	if (info->flags & SW_F_XRCETH)
		h[SW_BTH_LEN] = 0; /* the XRCETH's reserved byte */
}

/* Contract: the fields the parser decodes, compared between two parses. */
static int same_fields(const struct sw_pkt *a, const struct sw_pkt *b)
{
	return a->opcode == b->opcode && a->se == b->se && a->mig == b->mig &&
	       a->padcnt == b->padcnt && a->pkey == b->pkey && a->dqpn == b->dqpn &&
	       a->ack_req == b->ack_req && a->psn == b->psn && a->paylen == b->paylen &&
	       a->info == b->info &&
	       (!(a->info->flags & SW_F_XRCETH) || a->xrc_srqn == b->xrc_srqn);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct sw_icrc_ctx ic = {
		.src = { .s_addr = 0x0100007f }, /* 127.0.0.1 */
		.dst = { .s_addr = 0x0200007f },
		.sport = 49152,
		.dport = 4791,
	};
	struct sw_pkt p, q;
	uint8_t *copy, hdr[SW_MAX_HDR_LEN + 32];
	size_t hl, len;
	int ret, ret_icrc;

	FUZZ_ASSERT(sw_crc32(0, data, size) == sw_crc32_table(0, data, size));
	/* the BTH alone (unsupported RC opcodes): the rest is payload */
	ret = sw_pkt_parse_bth(&p, data, size, NULL);
	FUZZ_ASSERT(ret == 0 || ret == -EBADMSG || ret == -EPROTO);
	if (!ret) {
		FUZZ_ASSERT(!p.info && p.opcode == data[0] && p.payload == data + SW_BTH_LEN);
		FUZZ_ASSERT(SW_BTH_LEN + p.paylen + SW_ICRC_LEN == size && size % 4 == 0);
	}
	ret = sw_pkt_parse(&p, data, size, NULL);
	ret_icrc = sw_pkt_parse(&q, data, size, &ic);
	FUZZ_ASSERT(ret == 0 || ret == -EBADMSG || ret == -EPROTO);
	if (ret) {
		FUZZ_ASSERT(ret_icrc == ret);
		return 0;
	}
	/*
	 * Valid apart from the ICRC: the check decides, and nothing else
	 * differs. An exact ICRC (the sender's IPv4 ID 0 with DF) is taken
	 * as such; any other accepted one is a recovered header, which
	 * sw_icrc_check() reports the same way.
	 */
	FUZZ_ASSERT(ret_icrc == 0 || ret_icrc == -EILSEQ);
	{
		uint32_t stored = (uint32_t)(data[size - 4] | data[size - 3] << 8 |
					     data[size - 2] << 16 | (uint32_t)data[size - 1] << 24);
		struct sw_icrc_var var;
		int rc = sw_icrc_check(&ic, data, size, &var);

		FUZZ_ASSERT(rc == ret_icrc);
		if (sw_icrc(&ic, data, size) == stored)
			FUZZ_ASSERT(!ret_icrc && !q.ipv.recovered && q.ipv.df && !q.ipv.ip_id);
		else
			FUZZ_ASSERT(ret_icrc || (q.ipv.recovered && var.recovered &&
						 q.ipv.ip_id == var.ip_id && q.ipv.df == var.df &&
						 (q.ipv.ip_id || !q.ipv.df)));
	}

	FUZZ_ASSERT(p.info && p.info == sw_opinfo(data[0]));
	hl = p.info->hdr_len;
	FUZZ_ASSERT(hl == sw_pkt_hdr_len(&p));
	FUZZ_ASSERT(p.payload == data + hl);
	FUZZ_ASSERT(hl + p.paylen + p.padcnt + SW_ICRC_LEN == size);
	FUZZ_ASSERT(size % 4 == 0 && size <= SW_MAX_UDP_PAYLOAD);
	FUZZ_ASSERT((p.info->flags & SW_F_PAYLOAD) || (p.paylen == 0 && p.padcnt == 0));
	FUZZ_ASSERT(p.dqpn <= SW_QPN_MASK && p.psn <= SW_PSN_MASK);
	FUZZ_ASSERT(!!(p.info->flags & SW_F_REQ) != !!(p.info->flags & SW_F_RESP));

	/* the builder writes back what the parser read */
	FUZZ_ASSERT(sw_pkt_write_hdrs(hdr, &p) == hl);
	copy = malloc(size + 3 + SW_ICRC_LEN);
	FUZZ_ASSERT(copy);
	memcpy(copy, data, size);
	mask_reserved(copy, p.info);
	mask_reserved(hdr, p.info);
	FUZZ_ASSERT(memcmp(copy, hdr, hl) == 0);

	/* a finished copy carries its ICRC and parses to the same fields */
	len = sw_pkt_finish(copy, hl + p.paylen, &ic);
	FUZZ_ASSERT(len == size);
	FUZZ_ASSERT(sw_pkt_parse(&q, copy, len, &ic) == 0);
	FUZZ_ASSERT(same_fields(&p, &q));
	FUZZ_ASSERT(memcmp(q.payload, p.payload, p.paylen) == 0);
	free(copy);
	return 0;
}
