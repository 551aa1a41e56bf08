/* SPDX-License-Identifier: MIT */
/*
 * opcode.c - the BTH opcodes the device accepts, and what each carries.
 *
 * One row per opcode, indexed by the opcode byte itself, so a lookup is a
 * bounds-free array access. Rows left empty (name NULL) are opcodes that
 * are not valid here: RD, CNP, the reserved and manufacturer-specific
 * ranges, and RC RESYNC (0x15), which belongs to RD-style
 * resynchronisation this device does not implement. UC has the SEND and
 * RDMA WRITE rows of RC (the same headers) in its own group, 0x20. XRC
 * (group 0xA0) has every RC row; its requests carry an XRCETH (the
 * 24-bit number of the target's XRC SRQ) right after the BTH, its
 * responses none.
 *
 * RC also has the two IBTA 1.5 memory-placement requests: RDMA FLUSH
 * (0x1c: FETH and RETH, no payload) and RDMA ATOMIC WRITE (0x1d: RETH
 * and exactly 8 payload bytes, which the responder checks).
 *
 * Header lengths follow from the flags: BTH, then in IBA order XRCETH, DETH, FETH, RETH,
 * AtomicETH, AETH, AtomicAckETH, ImmDt, IETH. The table is checked
 * against that sum by tests/unit_wire.c.
 */
#include "sw/wire.h"

/* Shorthands for the table below. */
#define RQ (SW_F_REQ)
#define RS (SW_F_RESP)
#define PL (SW_F_PAYLOAD)

#define L_BTH SW_BTH_LEN
#define XR (SW_F_XRCETH)
#define L_XBTH (SW_BTH_LEN + SW_XRCETH_LEN)

/* clang-format off */
/*
 * The RC group's rows for group `C` with names prefixed `P`: requests
 * get `RQX` and header length `LB` (XRC: the XRCETH), responses as RC's.
 */
#define RC_ROWS(C, P, RQX, LB) \
	/* ---- requests: SEND ---- */ \
	[C | SW_OP_SEND_FIRST] = { \
		P "SEND_FIRST", RQX | PL | SW_F_SEND | SW_F_FIRST, LB }, \
	[C | SW_OP_SEND_MIDDLE] = { \
		P "SEND_MIDDLE", RQX | PL | SW_F_SEND | SW_F_MIDDLE, LB }, \
	[C | SW_OP_SEND_LAST] = { \
		P "SEND_LAST", RQX | PL | SW_F_SEND | SW_F_LAST, LB }, \
	[C | SW_OP_SEND_LAST_IMM] = { \
		P "SEND_LAST_WITH_IMMEDIATE", \
		RQX | PL | SW_F_SEND | SW_F_LAST | SW_F_IMMDT, LB + SW_IMMDT_LEN }, \
	[C | SW_OP_SEND_ONLY] = { \
		P "SEND_ONLY", RQX | PL | SW_F_SEND | SW_F_ONLY, LB }, \
	[C | SW_OP_SEND_ONLY_IMM] = { \
		P "SEND_ONLY_WITH_IMMEDIATE", \
		RQX | PL | SW_F_SEND | SW_F_ONLY | SW_F_IMMDT, LB + SW_IMMDT_LEN }, \
	[C | SW_OP_SEND_LAST_INV] = { \
		P "SEND_LAST_WITH_INVALIDATE", \
		RQX | PL | SW_F_SEND | SW_F_LAST | SW_F_IETH, LB + SW_IETH_LEN }, \
	[C | SW_OP_SEND_ONLY_INV] = { \
		P "SEND_ONLY_WITH_INVALIDATE", \
		RQX | PL | SW_F_SEND | SW_F_ONLY | SW_F_IETH, LB + SW_IETH_LEN }, \
	/* ---- requests: RDMA WRITE ---- */ \
	[C | SW_OP_WRITE_FIRST] = { \
		P "RDMA_WRITE_FIRST", \
		RQX | PL | SW_F_WRITE | SW_F_FIRST | SW_F_RETH, LB + SW_RETH_LEN }, \
	[C | SW_OP_WRITE_MIDDLE] = { \
		P "RDMA_WRITE_MIDDLE", RQX | PL | SW_F_WRITE | SW_F_MIDDLE, LB }, \
	[C | SW_OP_WRITE_LAST] = { \
		P "RDMA_WRITE_LAST", RQX | PL | SW_F_WRITE | SW_F_LAST, LB }, \
	[C | SW_OP_WRITE_LAST_IMM] = { \
		P "RDMA_WRITE_LAST_WITH_IMMEDIATE", \
		RQX | PL | SW_F_WRITE | SW_F_LAST | SW_F_IMMDT, LB + SW_IMMDT_LEN }, \
	[C | SW_OP_WRITE_ONLY] = { \
		P "RDMA_WRITE_ONLY", \
		RQX | PL | SW_F_WRITE | SW_F_ONLY | SW_F_RETH, LB + SW_RETH_LEN }, \
	[C | SW_OP_WRITE_ONLY_IMM] = { \
		P "RDMA_WRITE_ONLY_WITH_IMMEDIATE", \
		RQX | PL | SW_F_WRITE | SW_F_ONLY | SW_F_RETH | SW_F_IMMDT, \
		LB + SW_RETH_LEN + SW_IMMDT_LEN }, \
	/* ---- requests: RDMA READ and atomics (no payload) ---- */ \
	[C | SW_OP_READ_REQ] = { \
		P "RDMA_READ_REQUEST", \
		RQX | SW_F_READ | SW_F_ONLY | SW_F_RETH, LB + SW_RETH_LEN }, \
	[C | SW_OP_CMP_SWAP] = { \
		P "COMPARE_SWAP", \
		RQX | SW_F_ATOMIC | SW_F_ONLY | SW_F_ATMETH, LB + SW_ATMETH_LEN }, \
	[C | SW_OP_FETCH_ADD] = { \
		P "FETCH_ADD", \
		RQX | SW_F_ATOMIC | SW_F_ONLY | SW_F_ATMETH, LB + SW_ATMETH_LEN }, \
	/* ---- responses ---- */ \
	[C | SW_OP_READ_RESP_FIRST] = { \
		P "RDMA_READ_RESPONSE_FIRST", \
		RS | PL | SW_F_READ | SW_F_FIRST | SW_F_AETH, L_BTH + SW_AETH_LEN }, \
	[C | SW_OP_READ_RESP_MIDDLE] = { \
		P "RDMA_READ_RESPONSE_MIDDLE", RS | PL | SW_F_READ | SW_F_MIDDLE, L_BTH }, \
	[C | SW_OP_READ_RESP_LAST] = { \
		P "RDMA_READ_RESPONSE_LAST", \
		RS | PL | SW_F_READ | SW_F_LAST | SW_F_AETH, L_BTH + SW_AETH_LEN }, \
	[C | SW_OP_READ_RESP_ONLY] = { \
		P "RDMA_READ_RESPONSE_ONLY", \
		RS | PL | SW_F_READ | SW_F_ONLY | SW_F_AETH, L_BTH + SW_AETH_LEN }, \
	[C | SW_OP_ACK] = { \
		P "ACKNOWLEDGE", RS | SW_F_ONLY | SW_F_AETH, L_BTH + SW_AETH_LEN }, \
	[C | SW_OP_ATOMIC_ACK] = { \
		P "ATOMIC_ACKNOWLEDGE", \
		RS | SW_F_ATOMIC | SW_F_ONLY | SW_F_AETH | SW_F_ATMACK, \
		L_BTH + SW_AETH_LEN + SW_ATMACK_LEN }

/* One row per opcode, laid out by hand. */
static const struct sw_opinfo sw_optab[256] = {
	RC_ROWS(SW_OP_RC, "RC_", RQ, L_BTH),

	/* ---- RC requests: IBTA 1.5 FLUSH and ATOMIC WRITE ---- */
	[SW_OP_RC | SW_OP_FLUSH] = {
		"RC_FLUSH",
		RQ | SW_F_FLUSH | SW_F_ONLY | SW_F_FETH | SW_F_RETH,
		L_BTH + SW_FETH_LEN + SW_RETH_LEN },
	[SW_OP_RC | SW_OP_ATOMIC_WRITE] = {
		"RC_ATOMIC_WRITE",
		RQ | PL | SW_F_ATOMIC_WRITE | SW_F_ONLY | SW_F_RETH, L_BTH + SW_RETH_LEN },

	/* ---- UC requests: SEND and RDMA WRITE (RC's headers, group 0x20) ---- */
	[SW_OP_UC | SW_OP_SEND_FIRST] = {
		"UC_SEND_FIRST", RQ | PL | SW_F_SEND | SW_F_FIRST, L_BTH },
	[SW_OP_UC | SW_OP_SEND_MIDDLE] = {
		"UC_SEND_MIDDLE", RQ | PL | SW_F_SEND | SW_F_MIDDLE, L_BTH },
	[SW_OP_UC | SW_OP_SEND_LAST] = {
		"UC_SEND_LAST", RQ | PL | SW_F_SEND | SW_F_LAST, L_BTH },
	[SW_OP_UC | SW_OP_SEND_LAST_IMM] = {
		"UC_SEND_LAST_WITH_IMMEDIATE",
		RQ | PL | SW_F_SEND | SW_F_LAST | SW_F_IMMDT, L_BTH + SW_IMMDT_LEN },
	[SW_OP_UC | SW_OP_SEND_ONLY] = {
		"UC_SEND_ONLY", RQ | PL | SW_F_SEND | SW_F_ONLY, L_BTH },
	[SW_OP_UC | SW_OP_SEND_ONLY_IMM] = {
		"UC_SEND_ONLY_WITH_IMMEDIATE",
		RQ | PL | SW_F_SEND | SW_F_ONLY | SW_F_IMMDT, L_BTH + SW_IMMDT_LEN },
	[SW_OP_UC | SW_OP_WRITE_FIRST] = {
		"UC_RDMA_WRITE_FIRST",
		RQ | PL | SW_F_WRITE | SW_F_FIRST | SW_F_RETH, L_BTH + SW_RETH_LEN },
	[SW_OP_UC | SW_OP_WRITE_MIDDLE] = {
		"UC_RDMA_WRITE_MIDDLE", RQ | PL | SW_F_WRITE | SW_F_MIDDLE, L_BTH },
	[SW_OP_UC | SW_OP_WRITE_LAST] = {
		"UC_RDMA_WRITE_LAST", RQ | PL | SW_F_WRITE | SW_F_LAST, L_BTH },
	[SW_OP_UC | SW_OP_WRITE_LAST_IMM] = {
		"UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
		RQ | PL | SW_F_WRITE | SW_F_LAST | SW_F_IMMDT, L_BTH + SW_IMMDT_LEN },
	[SW_OP_UC | SW_OP_WRITE_ONLY] = {
		"UC_RDMA_WRITE_ONLY",
		RQ | PL | SW_F_WRITE | SW_F_ONLY | SW_F_RETH, L_BTH + SW_RETH_LEN },
	[SW_OP_UC | SW_OP_WRITE_ONLY_IMM] = {
		"UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
		RQ | PL | SW_F_WRITE | SW_F_ONLY | SW_F_RETH | SW_F_IMMDT,
		L_BTH + SW_RETH_LEN + SW_IMMDT_LEN },

	/* ---- XRC: every RC row, an XRCETH after the BTH of each request ---- */
	RC_ROWS(SW_OP_XRC, "XRC_", RQ | XR, L_XBTH),

	/* ---- UD: single-packet SENDs only ---- */
	[SW_OP_UD | SW_OP_SEND_ONLY] = {
		"UD_SEND_ONLY",
		RQ | PL | SW_F_SEND | SW_F_ONLY | SW_F_DETH, L_BTH + SW_DETH_LEN },
	[SW_OP_UD | SW_OP_SEND_ONLY_IMM] = {
		"UD_SEND_ONLY_WITH_IMMEDIATE",
		RQ | PL | SW_F_SEND | SW_F_ONLY | SW_F_DETH | SW_F_IMMDT,
		L_BTH + SW_DETH_LEN + SW_IMMDT_LEN },
};
/* clang-format on */

/* Contract: the row of `opcode`, or NULL when the device does not accept it. */
const struct sw_opinfo *sw_opinfo(uint8_t opcode)
{
	const struct sw_opinfo *info = &sw_optab[opcode];

	return info->name ? info : NULL;
}
