/* SPDX-License-Identifier: MIT */
/*
 * unit_pkt_ref: the same-host link's records by reference (wire.h,
 * docs/single-copy.md), as sw_pkt_parse_ref() and sw_pkt_take_ref() take
 * them from a ring the peer writes, which is not trusted:
 *
 *   a. a WRITE by reference: accepted, paylen the byte count; a run (a
 *      FIRST or MIDDLE standing for up to 16 packets): accepted, with its
 *      packet count; refused with 0 or 17 packets, more bytes than its
 *      packets hold, the reserved word set, or a LAST or ONLY opcode;
 *   b. a READ request by reference: accepted with the RETH's length as
 *      byte count (any size, here 1 MiB), paylen 0 after, the pieces and
 *      where the record came from kept; refused when the count is not
 *      the RETH's, the pieces do not add up to it, one is empty, wraps
 *      or has its reserved word set, there are 0 or 17 pieces, the
 *      record is longer than its pieces, or the link never allowed
 *      references (pid <= 0); and sw_pkt_parse() (a packet off a wire)
 *      refuses a READ request with a body;
 *   c. a placed READ response: accepted for up to 4096 bytes (paylen the
 *      count, payload NULL), refused above, with a packet count of 0, or
 *      with a body of another length; an ACK or a UC packet flagged by
 *      reference is refused; a placed run (a FIRST or MIDDLE for up to
 *      16 responses): accepted with its count, refused with more bytes
 *      than its responses hold, 17 of them, or as a LAST.
 */
#include "harness.h"

#include <string.h>

#include "sw/wire.h"

static const struct sw_ref_src from = {.pid = 4242, .link = (void *)&from, .gen = 7, .pos = 64};

/*
 * A READ request of `len` bytes by reference, its `n` pieces `pc`, a byte
 * count `count` and a packet count `npkts`, into buf; its length.
 */
static size_t read_req_run(uint8_t *buf, uint32_t len, const struct sw_ref_piece *pc, uint32_t n,
			   uint32_t count, uint32_t npkts)
{
	struct sw_pkt p = {.opcode = SW_OP_READ_REQ,
			   .psn = 5,
			   .dqpn = 0x12,
			   .va = 0x1000,
			   .rkey = 0x77,
			   .dma_len = len,
			   .ack_req = true,
			   .pkey = 0xffff};

	return sw_pkt_write_ref(buf, &p, pc, n, count, npkts);
}

/* The same, one packet (as every READ request is). */
static size_t read_req(uint8_t *buf, uint32_t len, const struct sw_ref_piece *pc, uint32_t n,
		       uint32_t count)
{
	return read_req_run(buf, len, pc, n, count, 1);
}

/* Parse and take record `buf` of `len` bytes (by reference, from `src`): 0 or the error. */
static int take(struct sw_pkt *p, const uint8_t *buf, size_t len, const struct sw_ref_src *src)
{
	int ret = sw_pkt_parse_ref(p, buf, len);

	return ret ? ret : sw_pkt_take_ref(p, src);
}

static void case_write(void)
{
	struct sw_ref_piece pc[2] = {{.addr = 0x10000, .len = 1000},
				     {.addr = 0x200000, .len = 3096}};
	struct sw_pkt p = {.opcode = SW_OP_WRITE_ONLY,
			   .psn = 9,
			   .dqpn = 0x12,
			   .va = 0x5000,
			   .rkey = 0x99,
			   .dma_len = 4096,
			   .pkey = 0xffff};
	uint8_t buf[4096 + 256];
	size_t len = sw_pkt_write_ref(buf, &p, pc, 2, 4096, 1);
	struct sw_pkt q;

	t_case("a. WRITE by reference, and runs");
	if (CHECK_EQ_INT(take(&q, buf, len, &from), 0))
		CHECK(q.paylen == 4096 && !q.payload && q.ref && q.ref_n == 2 &&
		      q.ref_pid == 4242 && !q.placed && q.ref_pkts == 1);
	/* a run of 16 packets: FIRST or MIDDLE only, 1 to 16 of them, the reserved word 0 */
	pc[1].len = 16 * 4096 - 1000;
	p.opcode = SW_OP_WRITE_FIRST;
	p.dma_len = 1 << 20;
	len = sw_pkt_write_ref(buf, &p, pc, 2, 16 * 4096, 16);
	if (CHECK_EQ_INT(take(&q, buf, len, &from), 0))
		CHECK(q.paylen == 16 * 4096 && q.ref_pkts == 16 && q.ref_n == 2);
	p.opcode = SW_OP_SEND_MIDDLE;
	len = sw_pkt_write_ref(buf, &p, pc, 2, 16 * 4096, 16);
	CHECK_EQ_INT(take(&q, buf, len, &from), 0);
	len = sw_pkt_write_ref(buf, &p, pc, 2, 16 * 4096, 17);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	len = sw_pkt_write_ref(buf, &p, pc, 2, 16 * 4096, 0);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	len = sw_pkt_write_ref(buf, &p, pc, 2, 16 * 4096, 15); /* more bytes than 15 packets hold */
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	len = sw_pkt_write_ref(buf, &p, pc, 2, 16 * 4096, 16);
	buf[len - 4 - 2 * 16 - 1] = 1; /* the header's reserved word */
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	p.opcode = SW_OP_WRITE_LAST; /* a run never holds a message's last packet */
	len = sw_pkt_write_ref(buf, &p, pc, 2, 16 * 4096, 16);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	p.opcode = SW_OP_SEND_ONLY;
	len = sw_pkt_write_ref(buf, &p, pc, 2, 16 * 4096, 16);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
}

static void case_read(void)
{
	struct sw_ref_piece pc[17];
	struct sw_ref_src nopid = from;
	uint8_t buf[4096 + 256];
	struct sw_pkt q;
	size_t len;

	t_case("b. READ request by reference");
	for (int i = 0; i < 17; i++)
		pc[i] = (struct sw_ref_piece){.addr = 0x100000 + (uint64_t)i * 0x10000,
					      .len = 0x10000};
	/* 16 pieces of 64 KiB: a 1 MiB READ */
	len = read_req(buf, 1 << 20, pc, 16, 1 << 20);
	if (CHECK_EQ_INT(take(&q, buf, len, &from), 0))
		CHECK(q.paylen == 0 && !q.payload && q.ref_n == 16 && q.ref_pid == 4242 &&
		      q.ref_link == from.link && q.ref_gen == 7 && q.ref_pos == 64 &&
		      q.dma_len == 1 << 20 && q.rkey == 0x77);
	CHECK_MSG(sw_pkt_parse(&q, buf, len, NULL) != 0, "a READ request with a body off a wire");
	nopid.pid = -1;
	CHECK_EQ_INT(take(&q, buf, len, &nopid), -EPROTO);
	nopid.pid = 0;
	CHECK_EQ_INT(take(&q, buf, len, &nopid), -EPROTO);
	/* a READ is never a run */
	len = read_req_run(buf, 1 << 20, pc, 16, 1 << 20, 2);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	/* a count other than the RETH's (its pieces adding up to it) */
	len = read_req(buf, 1 << 20, pc, 15, 15 << 16);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	len = read_req(buf, 1 << 20, pc, 16, (1 << 20) - 1);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	/* pieces that do not add up to the count */
	len = read_req(buf, (1 << 20) - 0x10000, pc, 16, (1 << 20) - 0x10000);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	/* 17 pieces, and none */
	len = read_req(buf, 17 << 16, pc, 17, 17 << 16);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	len = read_req(buf, 4096, pc, 0, 4096);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	/* an empty piece; one that wraps (a buffer tag is any value: taken) */
	pc[1].len = 0;
	pc[0].len = 0x20000;
	len = read_req(buf, 1 << 20, pc, 16, 1 << 20);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	pc[0].len = pc[1].len = 0x10000;
	pc[15].addr = ~0ull - 0x100;
	len = read_req(buf, 1 << 20, pc, 16, 1 << 20);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	pc[15].addr = 0x900000;
	pc[3].buf = 0xfffffff3u;
	len = read_req(buf, 1 << 20, pc, 16, 1 << 20);
	CHECK_EQ_INT(take(&q, buf, len, &from), 0);
	pc[3].buf = 0;
	/* a record longer than its pieces (the ICRC word moved on by 4) */
	len = read_req(buf, 1 << 20, pc, 16, 1 << 20);
	memset(buf + len, 0, 4);
	CHECK_EQ_INT(take(&q, buf, len + 4, &from), -EPROTO);
	CHECK_EQ_INT(take(&q, buf, len, &from), 0); /* and the same, right: taken */
}

static size_t placed(uint8_t *buf, uint8_t opcode, uint32_t count, uint32_t npkts)
{
	struct sw_pkt p = {.opcode = opcode,
			   .psn = 3,
			   .dqpn = 0x12,
			   .syndrome = 0x1f,
			   .msn = 1,
			   .pkey = 0xffff};

	return sw_pkt_write_placed(buf, &p, count, npkts);
}

static void case_placed(void)
{
	uint8_t buf[4096 + 256];
	struct sw_pkt q;
	size_t len;

	t_case("c. placed READ responses");
	len = placed(buf, SW_OP_READ_RESP_MIDDLE, 4096, 1);
	if (CHECK_EQ_INT(take(&q, buf, len, &from), 0))
		CHECK(q.placed && q.paylen == 4096 && !q.payload && !q.ref && q.ref_pkts == 1);
	len = placed(buf, SW_OP_READ_RESP_LAST, 100, 1);
	if (CHECK_EQ_INT(take(&q, buf, len, &from), 0))
		CHECK(q.placed && q.paylen == 100);
	len = placed(buf, SW_OP_READ_RESP_ONLY, 4097, 1);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	len = placed(buf, SW_OP_READ_RESP_ONLY, 8, 0); /* no packet */
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	len = placed(buf, SW_OP_READ_RESP_ONLY, 8, 1);
	memset(buf + len, 0, 4);
	CHECK_EQ_INT(take(&q, buf, len + 4, &from), -EPROTO); /* a body of 12 bytes */
	len = placed(buf, SW_OP_ACK, 8, 1);
	CHECK(take(&q, buf, len, &from) != 0);
	len = placed(buf, SW_OP_UC | SW_OP_SEND_ONLY, 8, 1);
	CHECK(take(&q, buf, len, &from) != 0);
	/* placed runs: FIRST or MIDDLE, 2 to 16 responses, at most 4096 bytes each */
	len = placed(buf, SW_OP_READ_RESP_FIRST, 16 * 4096, 16);
	if (CHECK_EQ_INT(take(&q, buf, len, &from), 0))
		CHECK(q.placed && q.paylen == 16 * 4096 && q.ref_pkts == 16);
	len = placed(buf, SW_OP_READ_RESP_MIDDLE, 16 * 4096 + 1, 16);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	len = placed(buf, SW_OP_READ_RESP_MIDDLE, 17 * 4096, 17);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
	len = placed(buf, SW_OP_READ_RESP_LAST, 2 * 4096, 2);
	CHECK_EQ_INT(take(&q, buf, len, &from), -EPROTO);
}

int main(void)
{
	t_start("unit_pkt_ref");
	case_write();
	case_read();
	case_placed();
	return t_finish();
}
