/* SPDX-License-Identifier: MIT */
/*
 * unit_rxe_replay: packets captured from the Linux kernel's rxe are
 * accepted by softverbs' receive path.
 *
 * tests/data/rxe_roce.pcap holds what rxe0 (Debian 12's kernel 6.1, in
 * the QEMU guest of tests/interop) sent to a softverbs device during
 * `tests/interop/interop.sh --capture`: RC SEND, WRITE and READ
 * responses of three packets each (1024-byte MTU), READ requests,
 * FETCH_ADD and CMP_SWAP requests, atomic ACKs, ACKs and UD SENDs. rxe
 * builds its own IPv4 header with a fresh Identification per packet and
 * sends UDP checksum 0. Cases:
 *   - capture: the file is what it claims: RoCE v2 over IPv4 from one
 *     sender, every kind of packet above, non-zero IDs, and each stored
 *     ICRC equal to the one computed here, independently of icrc.c, over
 *     the packet's real headers with the masks of IBA Annex A17;
 *   - parse: sw_pkt_parse() accepts every packet with its captured
 *     addresses and ports and gives back the very IPv4 ID and DF bit the
 *     sender used;
 *   - receive path: each packet fed in capture order through
 *     sw_rx_inject() (the socket's path, minus the socket) on a live
 *     device: none is dropped for its ICRC or as malformed, each reaches
 *     the QP lookup (no such QP here: counted as no_qp);
 *   - corrupted: the same packets with one bit flipped are all dropped
 *     as ICRC errors.
 * Before the receive path recovered the sender's ID from the ICRC, every
 * one of these packets was dropped as an ICRC error.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <stdint.h>

#include "sw/transport/transport_priv.h"

#ifndef SV_TEST_DATA
#error "SV_TEST_DATA (tests/data) is set by tests/CMakeLists.txt"
#endif

enum {
	MAX_PKTS = 256,
	ETH_LEN = 14,
	UDP_LEN = 8,
};

struct cap_pkt {
	struct in_addr src, dst;
	uint16_t sport, dport, ip_id;
	bool df;
	uint8_t ip[20], udp[8]; /* the real headers, for the independent ICRC */
	size_t len; /* UDP payload: BTH to ICRC */
	uint8_t buf[SW_PKT_MAX];
};

static struct cap_pkt pkts[MAX_PKTS];
static unsigned int npkts;

static uint32_t rd32(const uint8_t *p, bool swap)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return swap ? __builtin_bswap32(v) : v;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* Read the pcap (classic format, Ethernet); 0 or -errno. */
static int load(const char *path)
{
	uint8_t gh[24], rh[16], frame[SW_PKT_MAX + 128];
	FILE *f = fopen(path, "rb");
	bool swap;
	uint32_t magic;

	if (!f)
		return -errno;
	if (fread(gh, 1, sizeof(gh), f) != sizeof(gh))
		goto bad;
	memcpy(&magic, gh, 4);
	swap = magic == 0xd4c3b2a1u || magic == 0x4d3cb2a1u;
	if (!swap && magic != 0xa1b2c3d4u && magic != 0xa1b23c4du)
		goto bad;
	if (rd32(gh + 20, swap) != 1) /* LINKTYPE_ETHERNET */
		goto bad;
	while (fread(rh, 1, sizeof(rh), f) == sizeof(rh)) {
		uint32_t incl = rd32(rh + 8, swap), orig = rd32(rh + 12, swap);
		struct cap_pkt *c;
		size_t ulen;

		if (incl > sizeof(frame) || incl != orig || fread(frame, 1, incl, f) != incl)
			goto bad;
		/* IPv4 without options, UDP to the RoCE v2 port */
		if (incl < ETH_LEN + 20 + UDP_LEN || be16(frame + 12) != 0x0800 ||
		    frame[ETH_LEN] != 0x45 || frame[ETH_LEN + 9] != IPPROTO_UDP ||
		    be16(frame + ETH_LEN + 22) != 4791)
			continue;
		ulen = be16(frame + ETH_LEN + 24);
		if (ulen < UDP_LEN || ETH_LEN + 20 + ulen > incl || npkts == MAX_PKTS ||
		    ulen - UDP_LEN > SW_PKT_MAX)
			goto bad;
		c = &pkts[npkts++];
		memcpy(c->ip, frame + ETH_LEN, 20);
		memcpy(c->udp, frame + ETH_LEN + 20, 8);
		memcpy(&c->src, c->ip + 12, 4);
		memcpy(&c->dst, c->ip + 16, 4);
		c->ip_id = be16(c->ip + 4);
		c->df = c->ip[6] & 0x40;
		c->sport = be16(c->udp);
		c->dport = be16(c->udp + 2);
		c->len = ulen - UDP_LEN;
		memcpy(c->buf, frame + ETH_LEN + 20 + UDP_LEN, c->len);
	}
	fclose(f);
	return 0;
bad:
	fclose(f);
	return -EINVAL;
}

/* Bitwise reflected CRC-32, one bit at a time (not icrc.c's tables or folding). */
static uint32_t crc_bits(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--) {
		crc ^= *p++;
		for (int b = 0; b < 8; b++)
			crc = crc & 1 ? (crc >> 1) ^ 0xedb88320u : crc >> 1;
	}
	return crc;
}

/*
 * The ICRC of a captured packet over its real IPv4 and UDP headers,
 * masked as Annex A17 says: 8 bytes of ones for the LRH; IPv4 TOS, TTL
 * and checksum to ones; UDP checksum to ones; BTH byte 4 to ones.
 */
static uint32_t icrc_of(const struct cap_pkt *c)
{
	uint8_t h[8 + 20 + 8 + 12];

	memset(h, 0xff, 8);
	memcpy(h + 8, c->ip, 20);
	h[8 + 1] = 0xff; /* TOS */
	h[8 + 8] = 0xff; /* TTL */
	h[8 + 10] = h[8 + 11] = 0xff; /* header checksum */
	memcpy(h + 28, c->udp, 8);
	h[28 + 6] = h[28 + 7] = 0xff; /* UDP checksum */
	memcpy(h + 36, c->buf, 12);
	h[36 + 4] = 0xff;
	return ~crc_bits(crc_bits(~0u, h, sizeof(h)), c->buf + 12, c->len - 12 - 4);
}

static uint32_t stored_icrc(const struct cap_pkt *c)
{
	const uint8_t *p = c->buf + c->len - 4;

	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static struct sw_icrc_ctx ctx_of(const struct cap_pkt *c)
{
	return (struct sw_icrc_ctx){
		.src = c->src, .dst = c->dst, .sport = c->sport, .dport = c->dport};
}

static void capture(void)
{
	static const uint8_t want[] = {
		SW_OP_SEND_FIRST,
		SW_OP_SEND_MIDDLE,
		SW_OP_SEND_LAST,
		SW_OP_WRITE_FIRST,
		SW_OP_WRITE_MIDDLE,
		SW_OP_WRITE_LAST,
		SW_OP_READ_REQ,
		SW_OP_READ_RESP_FIRST,
		SW_OP_READ_RESP_MIDDLE,
		SW_OP_READ_RESP_LAST,
		SW_OP_ACK,
		SW_OP_ATOMIC_ACK,
		SW_OP_CMP_SWAP,
		SW_OP_FETCH_ADD,
		SW_OP_UD | SW_OP_SEND_ONLY,
	};
	unsigned int zero_id = 0, bad_icrc = 0, id0_match = 0;

	t_case("capture: rxe's packets, ICRCs over their real headers");
	CHECK_MSG(npkts >= 40, "%u packets", npkts);
	for (unsigned int k = 0; k < sizeof(want); k++) {
		bool seen = false;

		for (unsigned int i = 0; i < npkts && !seen; i++)
			seen = pkts[i].buf[0] == want[k];
		CHECK_MSG(seen, "no packet with opcode %#x in the capture", want[k]);
	}
	for (unsigned int i = 0; i < npkts; i++) {
		struct sw_icrc_ctx ic = ctx_of(&pkts[i]);

		CHECK_MSG(pkts[i].src.s_addr == pkts[0].src.s_addr, "packet %u from another sender",
			  i);
		zero_id += !pkts[i].ip_id;
		bad_icrc += icrc_of(&pkts[i]) != stored_icrc(&pkts[i]);
		/* what the receive path checked before: the header rebuilt with ID 0 */
		id0_match += sw_icrc(&ic, pkts[i].buf, pkts[i].len) == stored_icrc(&pkts[i]);
	}
	CHECK_EQ_INT(zero_id, 0);
	CHECK_EQ_INT(bad_icrc, 0);
	CHECK_EQ_INT(id0_match, 0);
	printf("# %u packets from %s, IDs %#06x..%#06x\n", npkts, inet_ntoa(pkts[0].src),
	       pkts[0].ip_id, pkts[npkts - 1].ip_id);
}

static void parse(void)
{
	unsigned int refused = 0, wrong_id = 0;

	t_case("parse: every packet accepted, the sender's ID and DF recovered");
	for (unsigned int i = 0; i < npkts; i++) {
		struct sw_icrc_ctx ic = ctx_of(&pkts[i]);
		struct sw_pkt p;
		int ret = sw_pkt_parse(&p, pkts[i].buf, pkts[i].len, &ic);

		if (ret) {
			refused++;
			printf("# packet %u (opcode %#x, ID %#06x): %s\n", i, pkts[i].buf[0],
			       pkts[i].ip_id, t_errname(-ret));
			continue;
		}
		if (!p.ipv.recovered || p.ipv.ip_id != pkts[i].ip_id || p.ipv.df != pkts[i].df) {
			wrong_id++;
			printf("# packet %u: recovered %d ID %#06x DF %d, sent ID %#06x DF %d\n", i,
			       p.ipv.recovered, p.ipv.ip_id, p.ipv.df, pkts[i].ip_id, pkts[i].df);
		}
	}
	CHECK_EQ_INT(refused, 0);
	CHECK_EQ_INT(wrong_id, 0);
}

/* Feed every packet (one bit flipped when `flip`) through the receive path. */
static void inject_all(struct sw_engine *eng, bool flip)
{
	for (unsigned int i = 0; i < npkts; i++) {
		union sw_sa src = {.v4 = {.sin_family = AF_INET,
					  .sin_port = htons(pkts[i].sport),
					  .sin_addr = pkts[i].src}};
		union sw_sa dst = {.v4 = {.sin_family = AF_INET,
					  .sin_port = htons(pkts[i].dport),
					  .sin_addr = pkts[i].dst}};
		uint8_t b[SW_PKT_MAX];

		memcpy(b, pkts[i].buf, pkts[i].len);
		if (flip) /* a payload bit, or a BTH one for packets without payload */
			b[pkts[i].len > 40 ? pkts[i].len / 2 : 9] ^= 0x10;
		CHECK_RET(sw_rx_inject(eng, b, pkts[i].len, &src, &dst), 0);
	}
}

#define CNT(name) atomic_load(&eng->cnt.name)

static void receive_path(void)
{
	struct ibv_context *ctx;
	struct sw_engine *eng;
	unsigned long long rx0, icrc0, mal0, noqp0, ipid0;

	t_case("receive path: sw_rx_inject takes every packet, then drops every corrupted one");
	t_open_first(&ctx);
	eng = sw_dev_of(ctx)->eng;
	if (!CHECK(eng))
		goto out;
	rx0 = CNT(rx_pkts);
	icrc0 = CNT(drops_icrc);
	mal0 = CNT(drops_malformed);
	noqp0 = CNT(drops_no_qp);
	ipid0 = CNT(rx_ip_id);
	inject_all(eng, false);
	CHECK_EQ_INT(CNT(rx_pkts) - rx0, npkts);
	CHECK_EQ_INT(CNT(drops_icrc) - icrc0, 0);
	CHECK_EQ_INT(CNT(drops_malformed) - mal0, 0);
	CHECK_EQ_INT(CNT(drops_no_qp) - noqp0, npkts); /* validated, then no such QP here */
	CHECK_EQ_INT(CNT(rx_ip_id) - ipid0, npkts);
	CHECK_EQ_INT(CNT(drops_ip_id), 0);

	t_case("corrupted: one flipped bit each, every one an ICRC drop");
	icrc0 = CNT(drops_icrc);
	noqp0 = CNT(drops_no_qp);
	inject_all(eng, true);
	CHECK_EQ_INT(CNT(drops_icrc) - icrc0, npkts);
	CHECK_EQ_INT(CNT(drops_no_qp) - noqp0, 0);
out:
	ibv_close_device(ctx);
}

int main(void)
{
	const char *path = SV_TEST_DATA "/rxe_roce.pcap";
	int ret;

	t_start("unit_rxe_replay");
	ret = load(path);
	if (ret || !npkts) {
		printf("Bail out! %s: %s\n", path, ret ? t_errname(-ret) : "no RoCE v2 packet");
		return 1;
	}
	capture();
	parse();
	receive_path();
	return t_finish();
}
