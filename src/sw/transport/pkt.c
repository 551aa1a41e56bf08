/* SPDX-License-Identifier: MIT */
/*
 * pkt.c - RoCE v2 packets: parse (validating everything), build, finish.
 *
 * BTH layout (12 bytes, big-endian fields):
 *   0      opcode
 *   1      SE:1 M:1 PadCnt:2 TVer:4
 *   2-3    P_Key
 *   4      FECN:1 BECN:1 reserved:6 (IB: reserved 8; masked in the ICRC)
 *   5-7    DestQP
 *   8      AckReq:1 reserved:7
 *   9-11   PSN
 * Extension headers: XRCETH reserved(1) XRCSRQ(3); DETH Q_Key(4) reserved(1) SrcQP(3); RETH VA(8)
 * R_Key(4) DMALen(4); AtomicETH VA(8) R_Key(4) SwapAdd(8) Compare(8);
 * AETH Syndrome(1) MSN(3); AtomicAckETH OrigRemDt(8); ImmDt(4); IETH(4).
 *
 * Everything here runs once per packet: no allocation, no locks, memcpy
 * loads and stores (the compiler turns them into plain moves).
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "sw/wire.h"

/* Contract: big-endian loads from `p`, any alignment. */
static inline uint16_t get_be16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static inline uint32_t get_be24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static inline uint32_t get_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v)); /* host order: the link stays on one host */
	return v;
}

static inline uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static inline uint64_t get_be64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

/* Contract: big-endian stores to `p`, any alignment; put_be24 keeps the low 24 bits. */
static inline void put_be16(uint8_t *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void put_be24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void put_be64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, sizeof(v));
}

/* Contract: store the ICRC `v` at `p` in wire order (least significant byte first). */
static inline void put_icrc(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

/* Contract: decode the BTH at `buf` (12 bytes) into `p`. */
static void get_bth(struct sw_pkt *p, const uint8_t *buf)
{
	p->opcode = buf[0];
	p->se = buf[1] >> 7;
	p->mig = (buf[1] >> 6) & 1;
	p->padcnt = (buf[1] >> 4) & 3;
	p->pkey = get_be16(buf + 2);
	p->dqpn = get_be24(buf + 5);
	p->ack_req = buf[8] >> 7;
	p->psn = get_be24(buf + 9);
}

/*
 * sw_pkt_parse(), and for a by-reference record (`ref`, no ICRC) a READ
 * request may have a body: its reference (sw_pkt_take_ref checks it).
 */
static int parse(struct sw_pkt *p, const uint8_t *buf, size_t len, const struct sw_icrc_ctx *icrc,
		 bool ref)
{
	const struct sw_opinfo *info;
	const uint8_t *h;
	uint32_t flags;
	size_t hdr_len, pad;

	if (len < SW_BTH_LEN + SW_ICRC_LEN || len > SW_MAX_UDP_PAYLOAD)
		return -EBADMSG;
	info = sw_opinfo(buf[0]);
	if (!info)
		return -EPROTO;
	if (buf[1] & 0x0f)
		return -EPROTO;
	flags = info->flags;
	hdr_len = info->hdr_len;
	pad = (buf[1] >> 4) & 3;
	if (len < hdr_len + pad + SW_ICRC_LEN)
		return -EBADMSG;
	if (len & 3)
		return -EBADMSG;
	if (!(flags & SW_F_PAYLOAD) && len != hdr_len + SW_ICRC_LEN &&
	    !(ref && (flags & SW_F_READ) && (flags & SW_F_REQ)))
		return -EBADMSG; /* pad or payload on an opcode that has none */
	if (icrc && sw_icrc_check(icrc, buf, len, &p->ipv))
		return -EILSEQ;
	if (!icrc)
		p->ipv = (struct sw_icrc_var){.df = true};

	get_bth(p, buf);

	/* extension headers, in IBA order */
	h = buf + SW_BTH_LEN;
	if (flags & SW_F_XRCETH) {
		p->xrc_srqn = get_be24(h + 1);
		h += SW_XRCETH_LEN;
	}
	if (flags & SW_F_DETH) {
		p->qkey = get_be32(h);
		p->sqpn = get_be24(h + 5);
		h += SW_DETH_LEN;
	}
	if (flags & SW_F_FETH) {
		p->feth = get_be32(h);
		h += SW_FETH_LEN;
	}
	if (flags & SW_F_RETH) {
		p->va = get_be64(h);
		p->rkey = get_be32(h + 8);
		p->dma_len = get_be32(h + 12);
		h += SW_RETH_LEN;
	}
	if (flags & SW_F_ATMETH) {
		p->va = get_be64(h);
		p->rkey = get_be32(h + 8);
		p->swap_add = get_be64(h + 12);
		p->compare = get_be64(h + 20);
		h += SW_ATMETH_LEN;
	}
	if (flags & SW_F_AETH) {
		p->syndrome = h[0];
		p->msn = get_be24(h + 1);
		h += SW_AETH_LEN;
	}
	if (flags & SW_F_ATMACK) {
		p->orig = get_be64(h);
		h += SW_ATMACK_LEN;
	}
	if (flags & (SW_F_IMMDT | SW_F_IETH)) {
		memcpy(&p->imm_be, h, 4);
		h += 4;
	}

	p->payload = h;
	p->paylen = (uint32_t)(len - hdr_len - pad - SW_ICRC_LEN);
	p->ref = NULL;
	p->ref_pkts = 1;
	p->placed = false;
	p->info = info;
	return 0;
}

/* See wire.h. */
size_t sw_pkt_write_ref(uint8_t *buf, struct sw_pkt *p, const struct sw_ref_piece *pc, uint32_t n,
			uint32_t len, uint32_t npkts)
{
	uint32_t hdr[4] = {n, len, npkts, 0};
	size_t hl;

	p->padcnt = 0;
	p->paylen = SW_REF_HDR_LEN + n * (uint32_t)sizeof(pc[0]);
	hl = sw_pkt_write_hdrs(buf, p);
	memcpy(buf + hl, hdr, sizeof(hdr));
	memcpy(buf + hl + sizeof(hdr), pc, (size_t)n * sizeof(pc[0]));
	hl += p->paylen;
	memset(buf + hl, 0, SW_ICRC_LEN); /* no ICRC: never on a wire */
	return hl + SW_ICRC_LEN;
}

/* See wire.h. */
int sw_pkt_parse(struct sw_pkt *p, const uint8_t *buf, size_t len, const struct sw_icrc_ctx *icrc)
{
	return parse(p, buf, len, icrc, false);
}

/* See wire.h. */
int sw_pkt_parse_ref(struct sw_pkt *p, const uint8_t *buf, size_t len)
{
	return parse(p, buf, len, NULL, true);
}

/* A placed READ response (sw_pkt_take_ref): its counts, in place of the bytes. */
static int take_placed(struct sw_pkt *p)
{
	uint32_t len, npkts;

	if (p->padcnt || p->paylen != SW_PLACED_LEN)
		return -EPROTO;
	len = get_u32(p->payload);
	npkts = get_u32(p->payload + 4);
	if (!npkts || npkts > SW_REF_PKTS || len > SW_REF_MAX_BYTES * npkts ||
	    (npkts > 1 && (p->info->flags & SW_F_LAST)))
		return -EPROTO;
	p->placed = true;
	p->payload = NULL;
	p->paylen = len;
	p->ref_pkts = npkts;
	return 0;
}

/* See wire.h. */
int sw_pkt_take_ref(struct sw_pkt *p, const struct sw_ref_src *src)
{
	uint32_t flags = p->info ? p->info->flags : 0, n, total, npkts, max = SW_REF_MAX_BYTES;
	bool read = flags & SW_F_READ;
	uint64_t sum = 0;

	if ((p->opcode & SW_OP_CLASS_MASK) != SW_OP_RC)
		return -EPROTO;
	if (!(flags & SW_F_REQ) && read)
		return take_placed(p);
	if ((flags & SW_F_REQ) && (flags & SW_F_WRITE) && p->paylen == SW_PLACED_LEN) {
		/* a placed WRITE: one packet, no immediate data, its bytes already there */
		if ((flags & (SW_F_FIRST | SW_F_LAST)) != (SW_F_FIRST | SW_F_LAST) ||
		    (flags & (SW_F_IMMDT | SW_F_ATOMIC_WRITE)) || src->pid <= 0 || take_placed(p) ||
		    p->ref_pkts != 1 || p->paylen != p->dma_len || !p->paylen)
			return -EPROTO;
		return 0;
	}
	if (!(flags & SW_F_REQ) || !(flags & (SW_F_SEND | SW_F_WRITE | SW_F_READ)) ||
	    (flags & SW_F_ATOMIC_WRITE) || p->padcnt || src->pid <= 0 || p->paylen < SW_REF_HDR_LEN)
		return -EPROTO;
	n = get_u32(p->payload);
	total = get_u32(p->payload + 4);
	npkts = get_u32(p->payload + 8);
	if (!npkts || npkts > SW_REF_PKTS || get_u32(p->payload + 12) ||
	    (npkts > 1 && (read || (flags & SW_F_LAST))))
		return -EPROTO;
	max *= npkts;
	if (read) {
		if (total != p->dma_len)
			return -EPROTO;
		max = 0x80000000u; /* the largest message, 2^31 bytes */
	}
	if (!n || n > SW_REF_PIECES || !total || total > max ||
	    p->paylen != SW_REF_HDR_LEN + n * sizeof(struct sw_ref_piece))
		return -EPROTO;
	for (uint32_t i = 0; i < n; i++) {
		struct sw_ref_piece pc;

		memcpy(&pc, p->payload + SW_REF_HDR_LEN + i * sizeof(pc), sizeof(pc));
		if (!pc.len || pc.addr + pc.len < pc.addr)
			return -EPROTO;
		sum += pc.len;
	}
	if (sum != total)
		return -EPROTO;
	p->ref = p->payload + SW_REF_HDR_LEN;
	p->ref_n = n;
	p->ref_pkts = npkts;
	p->ref_pid = src->pid;
	p->ref_link = src->link;
	p->ref_gen = src->gen;
	p->ref_pos = src->pos;
	p->payload = NULL;
	p->paylen = read ? 0 : total;
	return 0;
}

/* See wire.h. */
size_t sw_pkt_write_placed(uint8_t *buf, struct sw_pkt *p, uint32_t len, uint32_t npkts)
{
	uint32_t body[2] = {len, npkts};
	size_t hl;

	p->padcnt = 0;
	p->paylen = SW_PLACED_LEN;
	hl = sw_pkt_write_hdrs(buf, p);
	memcpy(buf + hl, body, sizeof(body));
	hl += SW_PLACED_LEN;
	memset(buf + hl, 0, SW_ICRC_LEN); /* no ICRC: never on a wire */
	return hl + SW_ICRC_LEN;
}

/* See wire.h. */
int sw_pkt_parse_bth(struct sw_pkt *p, const uint8_t *buf, size_t len,
		     const struct sw_icrc_ctx *icrc)
{
	if (len < SW_BTH_LEN + SW_ICRC_LEN || len > SW_MAX_UDP_PAYLOAD || (len & 3))
		return -EBADMSG;
	if (buf[1] & 0x0f)
		return -EPROTO;
	if (icrc && sw_icrc_check(icrc, buf, len, &p->ipv))
		return -EILSEQ;
	if (!icrc)
		p->ipv = (struct sw_icrc_var){.df = true};
	get_bth(p, buf);
	p->payload = buf + SW_BTH_LEN;
	p->paylen = (uint32_t)(len - SW_BTH_LEN - SW_ICRC_LEN);
	p->ref = NULL;
	p->ref_pkts = 1;
	p->placed = false;
	p->info = NULL;
	return 0;
}

/* See wire.h. */
size_t sw_pkt_hdr_len(const struct sw_pkt *p)
{
	const struct sw_opinfo *info = sw_opinfo(p->opcode);

	return info ? info->hdr_len : 0;
}

/* See wire.h. */
size_t sw_pkt_write_hdrs(uint8_t *buf, const struct sw_pkt *p)
{
	const struct sw_opinfo *info = sw_opinfo(p->opcode);
	uint32_t flags;
	uint8_t *h;

	if (!info)
		return 0;
	flags = info->flags;

	/* BTH */
	buf[0] = p->opcode;
	buf[1] = (uint8_t)((p->se ? 0x80 : 0) | (p->mig ? 0x40 : 0) | (p->padcnt & 3) << 4);
	put_be16(buf + 2, p->pkey);
	buf[4] = 0;
	put_be24(buf + 5, p->dqpn);
	buf[8] = p->ack_req ? 0x80 : 0;
	put_be24(buf + 9, p->psn);

	h = buf + SW_BTH_LEN;
	if (flags & SW_F_XRCETH) {
		h[0] = 0;
		put_be24(h + 1, p->xrc_srqn);
		h += SW_XRCETH_LEN;
	}
	if (flags & SW_F_DETH) {
		put_be32(h, p->qkey);
		h[4] = 0;
		put_be24(h + 5, p->sqpn);
		h += SW_DETH_LEN;
	}
	if (flags & SW_F_FETH) {
		put_be32(h, p->feth);
		h += SW_FETH_LEN;
	}
	if (flags & SW_F_RETH) {
		put_be64(h, p->va);
		put_be32(h + 8, p->rkey);
		put_be32(h + 12, p->dma_len);
		h += SW_RETH_LEN;
	}
	if (flags & SW_F_ATMETH) {
		put_be64(h, p->va);
		put_be32(h + 8, p->rkey);
		put_be64(h + 12, p->swap_add);
		put_be64(h + 20, p->compare);
		h += SW_ATMETH_LEN;
	}
	if (flags & SW_F_AETH) {
		h[0] = p->syndrome;
		put_be24(h + 1, p->msn);
		h += SW_AETH_LEN;
	}
	if (flags & SW_F_ATMACK) {
		put_be64(h, p->orig);
		h += SW_ATMACK_LEN;
	}
	if (flags & (SW_F_IMMDT | SW_F_IETH)) {
		memcpy(h, &p->imm_be, 4);
		h += 4;
	}
	return (size_t)(h - buf);
}

/* See wire.h. */
size_t sw_pkt_finish(uint8_t *buf, size_t len, const struct sw_icrc_ctx *c)
{
	size_t pad = (buf[1] >> 4) & 3;

	memset(buf + len, 0, pad);
	len += pad + SW_ICRC_LEN;
	put_icrc(buf + len - SW_ICRC_LEN, c ? sw_icrc(c, buf, len) : 0);
	return len;
}

/* See wire.h. */
void sw_pkt_seal(uint8_t *buf, size_t len, const struct sw_icrc_ctx *c)
{
	put_icrc(buf + len - SW_ICRC_LEN, sw_icrc(c, buf, len));
}

/* Contract: see wire.h. */
void sw_pkt_set_ack_req(uint8_t *buf, size_t len)
{
	if (len >= SW_BTH_LEN + SW_ICRC_LEN)
		buf[8] |= 0x80;
}
