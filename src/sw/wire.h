/* SPDX-License-Identifier: MIT */
/*
 * wire.h - RoCE v2 wire format: InfiniBand transport headers carried in
 * UDP (destination port 4791), the opcode table, packet parsing with full
 * validation, header building and the ICRC.
 *
 * A packet as the UDP payload (extension headers in IBA order):
 *   BTH [XRCETH] [DETH] [FETH] [RETH] [AtomicETH] [AETH] [AtomicAckETH] [ImmDt | IETH]
 *   payload, 0-3 pad bytes, ICRC (4 bytes, least significant byte first)
 * All header fields are big-endian. The length of a valid packet is a
 * multiple of 4.
 * Which extension headers follow the BTH is a function of the opcode
 * (transport/opcode.c); the parser accepts nothing else.
 */
#ifndef SV_SW_WIRE_H
#define SV_SW_WIRE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sw/addr.h"

enum {
	SW_BTH_LEN = 12,
	SW_XRCETH_LEN = 4,
	SW_DETH_LEN = 8,
	SW_RETH_LEN = 16,
	SW_FETH_LEN = 4,
	SW_ATMETH_LEN = 28,
	SW_IMMDT_LEN = 4,
	SW_IETH_LEN = 4,
	SW_AETH_LEN = 4,
	SW_ATMACK_LEN = 8,
	SW_ICRC_LEN = 4,
	SW_GRH_LEN = 40,
	SW_MAX_UDP_PAYLOAD = 65535 - 20 - 8, /* largest IPv4 UDP payload */
	SW_MAX_HDR_LEN = SW_BTH_LEN + SW_DETH_LEN + SW_ATMETH_LEN + SW_IMMDT_LEN,
	SW_PSN_MASK = 0xffffff,
	SW_QPN_MASK = 0xffffff,
	SW_QPN_MCAST = 0xffffff, /* the destination QPN of every multicast packet */
};

/* BTH opcodes: transport class in the top 3 bits, operation below. */
enum sw_opcode {
	SW_OP_CLASS_MASK = 0xe0,
	SW_OP_RC = 0x00,
	SW_OP_UC = 0x20,
	SW_OP_UD = 0x60,
	SW_OP_XRC = 0xa0,

	SW_OP_SEND_FIRST = 0x00,
	SW_OP_SEND_MIDDLE = 0x01,
	SW_OP_SEND_LAST = 0x02,
	SW_OP_SEND_LAST_IMM = 0x03,
	SW_OP_SEND_ONLY = 0x04,
	SW_OP_SEND_ONLY_IMM = 0x05,
	SW_OP_WRITE_FIRST = 0x06,
	SW_OP_WRITE_MIDDLE = 0x07,
	SW_OP_WRITE_LAST = 0x08,
	SW_OP_WRITE_LAST_IMM = 0x09,
	SW_OP_WRITE_ONLY = 0x0a,
	SW_OP_WRITE_ONLY_IMM = 0x0b,
	SW_OP_READ_REQ = 0x0c,
	SW_OP_READ_RESP_FIRST = 0x0d,
	SW_OP_READ_RESP_MIDDLE = 0x0e,
	SW_OP_READ_RESP_LAST = 0x0f,
	SW_OP_READ_RESP_ONLY = 0x10,
	SW_OP_ACK = 0x11,
	SW_OP_ATOMIC_ACK = 0x12,
	SW_OP_CMP_SWAP = 0x13,
	SW_OP_FETCH_ADD = 0x14,
	SW_OP_SEND_LAST_INV = 0x16,
	SW_OP_SEND_ONLY_INV = 0x17,
	SW_OP_FLUSH = 0x1c, /* IBTA 1.5: FETH + RETH, answered by an empty READ response */
	SW_OP_ATOMIC_WRITE = 0x1d, /* IBTA 1.5: RETH + 8 payload bytes, answered by an ACK */
};

/*
 * FETH (IBTA 1.5 FLUSH extended transport header), one 32-bit word:
 * placement type in bits 3:0 (a mask: 1 global visibility, 2
 * persistence), selectivity level in bits 5:4 (0 the RETH's range, 1
 * the whole MR); every other bit reserved.
 */
enum {
	SW_FETH_PLT_MASK = 0x0f,
	SW_FETH_SEL_SHIFT = 4,
	SW_FETH_SEL_MASK = 0x30,
	SW_FETH_PLT_GLOBAL = 1,
	SW_FETH_PLT_PERSISTENT = 2,
	SW_FETH_SEL_RANGE = 0,
	SW_FETH_SEL_MR = 1,
};

/* What an opcode carries and means (transport/opcode.c). */
enum sw_op_flag {
	SW_F_DETH = 1 << 0,
	SW_F_RETH = 1 << 1,
	SW_F_ATMETH = 1 << 2,
	SW_F_IMMDT = 1 << 3,
	SW_F_IETH = 1 << 4,
	SW_F_AETH = 1 << 5,
	SW_F_ATMACK = 1 << 6,
	SW_F_PAYLOAD = 1 << 7, /* may carry payload */
	SW_F_REQ = 1 << 8, /* a request (to the responder) */
	SW_F_RESP = 1 << 9, /* a response (to the completer) */
	SW_F_FIRST = 1 << 10, /* first packet of a message */
	SW_F_MIDDLE = 1 << 11,
	SW_F_LAST = 1 << 12, /* last packet of a message */
	SW_F_ONLY = SW_F_FIRST | SW_F_LAST,
	SW_F_SEND = 1 << 13,
	SW_F_WRITE = 1 << 14,
	SW_F_READ = 1 << 15,
	SW_F_ATOMIC = 1 << 16,
	SW_F_XRCETH = 1 << 17, /* XRC requests: the XRCETH follows the BTH */
	SW_F_FETH = 1 << 18,
	SW_F_FLUSH = 1 << 19, /* RDMA FLUSH request */
	SW_F_ATOMIC_WRITE = 1 << 20, /* RDMA ATOMIC WRITE request */
};

struct sw_opinfo {
	const char *name; /* NULL: opcode not valid on the wire here */
	uint32_t flags; /* enum sw_op_flag */
	uint8_t hdr_len; /* BTH + extension headers */
};

/* Table lookup; NULL for opcodes the device does not accept. */
const struct sw_opinfo *sw_opinfo(uint8_t opcode);

/*
 * AETH syndromes. The top 3 bits are the type (0 ACK, 1 RNR NAK, 3 NAK;
 * bit 7 is reserved and always 0), the low 5 bits its value: a credit
 * count, an RNR timer code or a NAK code.
 */
enum {
	SW_AETH_TYPE_MASK = 0xe0,
	SW_AETH_VALUE_MASK = 0x1f,
	SW_AETH_ACK = 0x00, /* value: credit count (0x1f: invalid) */
	/* an ACK without credits: this device has no end-to-end flow control */
	SW_AETH_ACK_NO_CREDIT = SW_AETH_ACK | SW_AETH_VALUE_MASK,
	SW_AETH_RNR_NAK = 0x20, /* value: RNR timer code */
	SW_AETH_NAK_PSN_SEQ = 0x60,
	SW_AETH_NAK_INV_REQ = 0x61,
	SW_AETH_NAK_REM_ACCESS = 0x62,
	SW_AETH_NAK_REM_OP = 0x63,
	SW_AETH_NAK_INV_RD_REQ = 0x64,
};

/* What a received packet's ICRC says of the IPv4 header bytes a socket does not show. */
struct sw_icrc_var {
	bool recovered; /* false: ID 0 and DF, as sw_icrc() assumes */
	bool df; /* the sender's Don't Fragment bit */
	uint16_t ip_id; /* the sender's IPv4 Identification */
};

/*
 * A packet, parsed or to be built. Only the fields of the headers the
 * opcode carries are meaningful.
 */
struct sw_pkt {
	/* BTH */
	uint8_t opcode;
	bool se; /* solicited event */
	bool mig;
	uint8_t padcnt;
	uint16_t pkey;
	uint32_t dqpn;
	bool ack_req;
	uint32_t psn;
	/* XRCETH: reserved byte (ignored), then the XRC SRQ number */
	uint32_t xrc_srqn;
	/* DETH */
	uint32_t qkey;
	uint32_t sqpn;
	/* FETH (the whole word, reserved bits included) */
	uint32_t feth;
	/* RETH / AtomicETH */
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len;
	uint64_t swap_add;
	uint64_t compare;
	/*
	 * ImmDt (network order, as the app sees it) or IETH (the rkey to
	 * invalidate, also in network order: ntohl() it). Either way the
	 * four header bytes as they are on the wire.
	 */
	uint32_t imm_be;
	/* AETH */
	uint8_t syndrome;
	uint32_t msn;
	/* AtomicAckETH */
	uint64_t orig;
	/* payload (parse: points into the buffer) */
	const uint8_t *payload;
	uint32_t paylen;
	/*
	 * By reference (same-host link only, sw_pkt_take_ref): payload is
	 * NULL, paylen the payload's length (0 for a READ request), ref the
	 * ref_n pieces (struct sw_ref_piece, unaligned: read with memcpy) in
	 * process ref_pid: a SEND's or WRITE's payload, or where a READ's
	 * responses go. The record's link and place in its ring (ref_link:
	 * opaque, only for sw_shm_push_begin; ref_gen tells it from a later
	 * link in the same slot; ref_pos: the ring's tail after the record).
	 */
	const uint8_t *ref;
	uint32_t ref_n;
	uint32_t ref_pkts; /* a run (wire.h): the packets the record stands for; else 1 */
	pid_t ref_pid;
	void *ref_link;
	uint64_t ref_gen, ref_pos;
	/*
	 * A READ response whose bytes the responder wrote into the
	 * requester's memory itself, or a WRITE whose bytes the requester
	 * wrote into the responder's (same-host link only): payload NULL,
	 * paylen the bytes it stands for.
	 */
	bool placed;
	const struct sw_opinfo *info; /* NULL after sw_pkt_parse_bth() */
	struct sw_icrc_var ipv; /* parse: the sender's IPv4 header as the ICRC shows it */
};

/*
 * A SEND or WRITE packet by reference (the same-host link's single copy,
 * docs/single-copy.md; never on a wire): the headers as usual, with no
 * pad count, then instead of the payload a u32 piece count n (1 to
 * SW_REF_PIECES), a u32 byte count (the payload's length: the sum of the
 * pieces', at most SW_REF_MAX_BYTES), a u32 packet count (1) and a u32 0,
 * n pieces, and 4 bytes where the ICRC would be (not checked: the link
 * is between processes of one user). Numbers in host order.
 *
 * A *run*: a packet count m of 2 to SW_REF_PKTS makes the record stand
 * for m packets of one SEND or WRITE at PSNs psn to psn + m - 1, each of
 * a full path MTU (so the byte count is m x MTU, at most SW_REF_MAX_BYTES
 * x m), never the message's last: the first with the record's opcode
 * (FIRST or MIDDLE) and headers, the others MIDDLEs of the same kind;
 * AckReq, if set, asks for an ACK of the last. The receiver handles them
 * one by one, as if they had come alone.
 *
 * A READ request by reference is the same, its pieces the requester's
 * memory its responses go to and its byte count the RETH's length (any,
 * up to 2^31): the responder may write the bytes there itself. It then
 * answers with *placed* READ responses: the usual headers, no pad count,
 * a u32 byte count (what the response stands for, at most
 * SW_REF_MAX_BYTES), a u32 packet count (1), and the 4 bytes for the
 * ICRC. A placed run of 2 to SW_REF_PKTS responses, never the READ's
 * last, stands for as many full responses (a FIRST or MIDDLE, then
 * MIDDLEs) at consecutive PSNs, as a run of requests does.
 */
struct sw_ref_piece {
	uint64_t addr; /* in the sender's memory */
	uint32_t len;
	/*
	 * 0, or the tag of the sender's shared buffer that holds the piece
	 * (struct sw_buf_slot, sw/mem.h): the receiver may map it and copy
	 * with memcpy (transport/shm_map.c). Trusted no more than addr: a
	 * wrong tag only makes the receiver fall back to the system call.
	 */
	uint32_t buf;
};

enum {
	SW_REF_PIECES = 16,
	SW_REF_MAX_BYTES = 4096, /* the largest path MTU */
	SW_REF_HDR_LEN = 16,
	SW_REF_PKTS = 16, /* packets a run by reference stands for, at most */
	SW_PLACED_LEN = 8, /* a placed READ response's u32 byte count and u32 packet count */
	SW_REF_MIN_MSG = 4 << 10, /* smaller messages are copied: a pull is a system call */
};

/* Addresses the ICRC covers (the IP and UDP headers, masked). */
struct sw_icrc_ctx {
	struct in_addr src, dst; /* IPv4 */
	uint16_t sport, dport; /* host order */
	bool v6; /* IPv6: the addresses are src6 and dst6 */
	struct in6_addr src6, dst6;
};

/* The ICRC context of a packet from `src` to `dst` (one family). */
static inline void sw_icrc_ctx_set(struct sw_icrc_ctx *c, const union sw_sa *src,
				   const union sw_sa *dst)
{
	memset(c, 0, sizeof(*c));
	c->sport = sw_sa_port(src);
	c->dport = sw_sa_port(dst);
	if (sw_sa_is_v6(src)) {
		c->v6 = true;
		c->src6 = src->v6.sin6_addr;
		c->dst6 = dst->v6.sin6_addr;
	} else {
		c->src = src->v4.sin_addr;
		c->dst = dst->v4.sin_addr;
	}
}

/* zlib-compatible CRC-32 (start with 0; chain by passing the last result). */
uint32_t sw_crc32(uint32_t crc, const void *buf, size_t len);
/* The same by the table implementation only (tests compare the two). */
uint32_t sw_crc32_table(uint32_t crc, const void *buf, size_t len);
/* True when sw_crc32() and sw_icrc() use carry-less multiplication. */
bool sw_crc32_have_clmul(void);
/* True when they also use 512-bit registers (AVX-512 VPCLMULQDQ) for 256 bytes and more. */
bool sw_crc32_have_clmul512(void);

/*
 * ICRC of a RoCE v2 packet: CRC-32 over a masked LRH (eight 0xff bytes),
 * the IPv4 header as the kernel sends it for our socket (DF set, ID 0)
 * with TOS, TTL and checksum masked, the UDP header with its checksum
 * masked, the BTH with its reserved byte masked, and the rest of the
 * packet up to (not including) the ICRC. `len` is the UDP payload length
 * including the 4 ICRC bytes, at most SW_MAX_UDP_PAYLOAD (the IPv4 and
 * UDP length fields). The result goes on the wire least significant byte
 * first (sw_pkt_finish()).
 */
uint32_t sw_icrc(const struct sw_icrc_ctx *c, const uint8_t *pkt, size_t len);

/*
 * Check the ICRC stored in the last 4 bytes of a received UDP payload of
 * `len` bytes (a multiple of 4, BTH + ICRC at least). 0 if it is the
 * ICRC of the packet as sent with some legal IPv4 header: *var tells
 * which (ID 0 with DF: all 32 bits checked; otherwise the ID and DF
 * recovered from the difference, 15 bits checked, and the caller should
 * judge the ID: transport/ipid.c). -EILSEQ otherwise. See icrc.c.
 */
int sw_icrc_check(const struct sw_icrc_ctx *c, const uint8_t *pkt, size_t len,
		  struct sw_icrc_var *var);

/*
 * Change the ICRC of a finished IPv4 packet of `len` bytes (sw_pkt_finish)
 * from the one for IPv4 ID 0 to the one for ID `id`, DF still set: the
 * header the kernel gives the id-th segment of a UDP GSO send (net.c).
 * Applying it twice with the same `id` undoes it; id 0 changes nothing.
 */
void sw_icrc_set_ip_id(uint8_t *pkt, size_t len, uint16_t id);

/*
 * Validate and decode a UDP payload of `len` bytes. Checks, in order:
 * BTH + ICRC <= length <= SW_MAX_UDP_PAYLOAD; opcode known; BTH
 * transport version 0; length covers the opcode's headers, pad and ICRC;
 * length a multiple of 4; pad and payload only on opcodes that carry
 * payload; ICRC (when `icrc` is non-NULL: sw_icrc_check(), its findings
 * in p->ipv; without it p->ipv says ID 0 and DF). Returns 0, or -EBADMSG
 * (malformed), -EPROTO (unknown opcode / version) or -EILSEQ (ICRC).
 * Reserved BTH bits are ignored. On success p->payload points into `buf`
 * and p->info is the opcode's row; on failure `p` is unspecified.
 */
int sw_pkt_parse(struct sw_pkt *p, const uint8_t *buf, size_t len, const struct sw_icrc_ctx *icrc);

/*
 * A by-reference record of the same-host link (no ICRC check), parsed as
 * sw_pkt_parse() parses a packet, but a READ request may have a body (its
 * reference); sw_pkt_take_ref() then checks the rest.
 */
int sw_pkt_parse_ref(struct sw_pkt *p, const uint8_t *buf, size_t len);

/* Where a by-reference record came from (sw_shm_recv): see struct sw_pkt. */
struct sw_ref_src {
	pid_t pid; /* the sender's process; -1 if its link never allowed references */
	void *link;
	uint64_t gen, pos;
};

/*
 * A packet sw_pkt_parse_ref() took from a by-reference record of the
 * same-host link: check its reference and make `p` a
 * packet by reference (payload NULL, paylen the bytes, ref the pieces).
 * An RC SEND or WRITE request: no pad count, 1 to SW_REF_PIECES pieces,
 * none empty or wrapping, whose lengths add up to the byte count, at most
 * SW_REF_MAX_BYTES (times the packet count of a run: a FIRST or MIDDLE
 * only), and exactly fill the packet (any buffer tags); ref_pkts the
 * packet count (the caller checks a run's bytes against its MTU). An RC
 * READ request the same, one packet, with the RETH's length (not 0) as
 * byte count, paylen 0 after. An
 * RC READ response: exactly SW_PLACED_LEN bytes, a packet count of 1 to
 * SW_REF_PKTS (more than 1: a FIRST or MIDDLE) and a byte count of at
 * most SW_REF_MAX_BYTES times it; `p` becomes placed (from any link),
 * ref_pkts the packet count. A placed RC WRITE ONLY request (no
 * immediate data; written by the requester, transport/req_push.c): the
 * same body, a packet count of 1 and a byte count equal to the RETH's
 * length, not 0; from a link that allowed references. 0 or -EPROTO.
 */
int sw_pkt_take_ref(struct sw_pkt *p, const struct sw_ref_src *src);

/* Write placed READ response (or WRITE) `p` for `len` bytes in `npkts` packets into `buf` (see
 * above). */
size_t sw_pkt_write_placed(uint8_t *buf, struct sw_pkt *p, uint32_t len, uint32_t npkts);

/*
 * Write packet `p` by reference into `buf`: its headers (no pad count),
 * the reference to `len` bytes in the `n` pieces `pc` (1 to
 * SW_REF_PIECES) for `npkts` packets (1, or a run's), and 4 zero bytes
 * for the ICRC. Its length.
 */
size_t sw_pkt_write_ref(uint8_t *buf, struct sw_pkt *p, const struct sw_ref_piece *pc, uint32_t n,
			uint32_t len, uint32_t npkts);

/*
 * The BTH alone, for a packet whose opcode sw_opinfo() does not know:
 * length (BTH + ICRC at least, a multiple of 4), transport version 0
 * and ICRC as sw_pkt_parse() checks them; p->info is NULL and the
 * payload is everything between the BTH and the ICRC. 0, -EBADMSG,
 * -EPROTO or -EILSEQ. (The responder answers an RC opcode it does not
 * support with an invalid request NAK.)
 */
int sw_pkt_parse_bth(struct sw_pkt *p, const uint8_t *buf, size_t len,
		     const struct sw_icrc_ctx *icrc);

/* Header bytes `p` needs (BTH and its opcode's extension headers); 0 for an unknown opcode. */
size_t sw_pkt_hdr_len(const struct sw_pkt *p);

/*
 * Write the headers of `p` (opcode, BTH fields and the extension fields)
 * to `buf` (room for sw_pkt_hdr_len() bytes); returns the header length,
 * 0 (nothing written) for an opcode sw_opinfo() does not know. Transport
 * version and reserved bits are written as 0; QPNs and PSN are masked
 * to 24 bits, padcnt to 2. The payload goes right after.
 */
size_t sw_pkt_write_hdrs(uint8_t *buf, const struct sw_pkt *p);

/*
 * Finish a packet of `len` bytes (headers + payload) in `buf`: pad to a
 * multiple of 4 (the pad count must already be in the BTH: use
 * sw_pad_for()), append the ICRC (c NULL: 4 zero bytes, for
 * sw_pkt_seal() to fill if the packet goes on a wire), return the final
 * length. `buf` needs room for len + 3 + SW_ICRC_LEN bytes.
 */
size_t sw_pkt_finish(uint8_t *buf, size_t len, const struct sw_icrc_ctx *c);

/* Store the ICRC of the finished packet of `len` bytes in `buf` (ICRC included). */
void sw_pkt_seal(uint8_t *buf, size_t len, const struct sw_icrc_ctx *c);

/*
 * Set AckReq in the finished packet of `len` bytes (ICRC included) in
 * `buf`; nothing if it is set already. Its ICRC is the socket's (net.c).
 */
void sw_pkt_set_ack_req(uint8_t *buf, size_t len);

static inline uint8_t sw_pad_for(uint32_t paylen)
{
	return (uint8_t)((4 - (paylen & 3)) & 3);
}

/* PSN arithmetic modulo 2^24: a - b as a signed distance. */
static inline int32_t sw_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

static inline uint32_t sw_psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & SW_PSN_MASK;
}

#endif
