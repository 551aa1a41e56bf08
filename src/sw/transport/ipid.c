/* SPDX-License-Identifier: MIT */
/*
 * ipid.c - is a recovered IPv4 Identification plausible for its sender?
 *
 * sw_icrc_check() accepts a packet whose ICRC matches some IPv4 ID and
 * DF bit, and then checks 15 of the ICRC's 32 bits (icrc.c). A random
 * corruption passes that with probability 2^-15. Senders that put an ID
 * on every packet do not pick it at random, though: Linux (and so the
 * kernel's rxe) draws it from a counter per source, destination and
 * protocol, which moves forward by one per packet plus at most one per
 * jiffy of silence (the kernel adds a random amount below the number of
 * jiffies since the counter's last use). So the ID of a sender's next
 * packet lies a little ahead of the last one seen, and a corrupted
 * packet's recovered ID, uniform over 2^16 values, mostly does not.
 *
 * Rules, per source address (a direct-mapped table of 64 senders; a new
 * sender evicts the one in its slot):
 *   - a sender first seen with ID 0 and DF (the full 32-bit check
 *     matched: every Linux UDP socket) is noted as such on the hot path
 *     (one load per packet); a recovered ID from it is accepted only
 *     with DF and 1 <= ID < SW_IPID_GSO_SEGS, and changes nothing: those
 *     are the IDs the kernel gives the segments of a UDP GSO send from
 *     an unconnected socket (the first segment 0, the next ones 1, 2,
 *     ... in order, for each send; softverbs sends at most SW_TX_BATCH
 *     packets in one, net.c). Any other recovered ID from it is treated
 *     as far from its window (below);
 *   - a sender first seen with a recovered ID is trusted at once;
 *   - accepted: the DF bit is the one the sender used last, and
 *     d = ID - last (mod 2^16, signed) with
 *     -SW_IPID_BACK <= d <= SW_IPID_FWD + milliseconds since the last
 *     accepted packet (jiffies are at least 1 ms long); `last` moves to
 *     the newest ID. (The two single-bit errors that icrc.c cannot tell
 *     from a sender's own header for some ID both flip DF: a sender
 *     that keeps its DF bit, as every known one does, loses them here);
 *   - otherwise rejected (the caller counts an ICRC drop), unless the
 *     previous packet of the sender was rejected too and this ID lies
 *     just ahead of that one: two packets agree on a new position (a
 *     sender that restarted, or a bucket shared with busy traffic), and
 *     the window moves there;
 *   - after SW_IPID_STRIKES rejections in a row the sender's IDs follow
 *     no counter this rule knows (random IDs, as some stacks use): the
 *     window is off for it, and only the 15 bits protect its packets.
 * The window spans at most a few thousand of the 65536 IDs while the
 * sender is active, so a corrupted packet passes with probability about
 * 2^-15 * 2^-4.5; from a sender of ID 0 (the GSO rule: 15 of the 2^17
 * ID and DF values) about 2^-15 * 2^-13.1. docs/reliability.md gives
 * the arithmetic.
 *
 * The receive token's holder only (or one test thread): no locks of its own.
 */
#include <string.h>

#include "sw/transport/transport_priv.h"

enum {
	SW_IPID_BACK = 256, /* reordering: IDs this far behind the newest are fine */
	SW_IPID_FWD = 2048, /* losses and other flows: this far ahead, plus the time */
	SW_IPID_WIN_MAX = 30000, /* the forward window never covers half the space */
	SW_IPID_STRIKES = 8,
	SW_IPID_GSO_SEGS = SW_TX_BATCH, /* a zero sender's GSO segments: IDs below this */
};

static struct sw_ipid_peer *slot_of(struct sw_ipid_tab *t, uint32_t addr)
{
	uint32_t h = addr * 0x9e3779b1u;

	return &t->peer[h >> (32 - SW_IPID_PEERS_LOG2)];
}

/* Contract: see transport_priv.h. */
void sw_ipid_zero(struct sw_ipid_tab *t, uint32_t addr)
{
	struct sw_ipid_peer *p = slot_of(t, addr);

	if (!p->used || p->addr != addr)
		*p = (struct sw_ipid_peer){.used = true, .zero = true, .df = true, .addr = addr};
}

/* Contract: see transport_priv.h. */
bool sw_ipid_plausible(struct sw_ipid_tab *t, uint32_t addr, uint16_t id, bool df, uint64_t now_ns,
		       bool *gave_up)
{
	struct sw_ipid_peer *p = slot_of(t, addr);
	uint64_t ms;
	int32_t d, fwd;

	*gave_up = false;
	if (!p->used || p->addr != addr) {
		*p = (struct sw_ipid_peer){
			.used = true, .df = df, .addr = addr, .last = id, .last_ns = now_ns};
		return true;
	}
	if (p->random)
		return true;
	if (p->zero && df && id && id < SW_IPID_GSO_SEGS)
		return true; /* a segment of a GSO send: no counter to follow */
	ms = now_ns > p->last_ns ? (now_ns - p->last_ns) / 1000000u : 0;
	fwd = SW_IPID_FWD + (int32_t)(ms < SW_IPID_WIN_MAX ? ms : SW_IPID_WIN_MAX);
	if (fwd > SW_IPID_WIN_MAX)
		fwd = SW_IPID_WIN_MAX;
	d = (int16_t)(uint16_t)(id - p->last);
	if (p->zero || df != p->df || d < -SW_IPID_BACK || d > fwd) {
		int32_t dc = (int16_t)(uint16_t)(id - p->cand);

		if (!p->strikes || df != p->cand_df || dc <= 0 || dc > SW_IPID_FWD) {
			p->cand = id;
			p->cand_df = df;
			if (++p->strikes >= SW_IPID_STRIKES) {
				p->random = true;
				*gave_up = true;
				return true;
			}
			return false;
		}
		d = 1; /* a new position, confirmed by two packets */
	}
	if (d > 0 || p->zero)
		p->last = id;
	p->zero = false;
	p->df = df;
	p->last_ns = now_ns;
	p->strikes = 0;
	return true;
}
