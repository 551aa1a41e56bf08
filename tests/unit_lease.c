/* SPDX-License-Identifier: MIT */
/*
 * unit_lease: the stall rule of the progress thread's leased sleeps
 * (sw_lease_stalled, transport_priv.h; progress.c lease_decide),
 * white-box.
 *
 * A leased sleep spares the links' producers their doorbells while an
 * application thread polls and takes the packets itself; a leased
 * wake-up whose first pass finds packets no application pass took is a
 * stall, and ends leases for milliseconds (doorbells and wake-ups
 * again). Regression (stop 38): every packet found with the last pass
 * older than SW_LEASE_STALE_NS was a stall, the ACKs of a stream whose
 * application posts a batch between its polls too: sv_bench's 8-byte
 * WRITE initiator counted 57-72 stalls a second, each taking leases off
 * for 2-10 ms, and the server rang a doorbell per batch of ACKs
 * meanwhile. Now only requests are, after an older pass: what an
 * application may be waiting for on memory (a WRITE it watches), where
 * an ACK completes work of an application that polls its CQs anyway.
 */
#include "harness.h"

#include "sw/transport/transport_priv.h"

int main(void)
{
	const int64_t fresh = SW_LEASE_STALE_NS / 2, old = SW_LEASE_STALE_NS * 2;

	t_start("unit_lease");

	t_case("nothing found: never a stall");
	CHECK(!sw_lease_stalled(0, 0, false, old));
	CHECK(!sw_lease_stalled(0, 0, true, old));

	t_case("no application pass since the sleep began: any packet is a stall");
	CHECK(sw_lease_stalled(3, 0, false, fresh));
	CHECK(sw_lease_stalled(3, 0, false, old));
	CHECK(sw_lease_stalled(3, 2, false, fresh));

	t_case("a recent pass: nothing waited");
	CHECK(!sw_lease_stalled(3, 0, true, fresh));
	CHECK(!sw_lease_stalled(3, 3, true, fresh));
	CHECK(!sw_lease_stalled(3, 3, true, SW_LEASE_STALE_NS));

	t_case("an older pass: requests are a stall, ACKs and responses are not");
	CHECK(sw_lease_stalled(3, 1, true, old));
	CHECK(sw_lease_stalled(1, 1, true, SW_LEASE_STALE_NS + 1));
	CHECK(!sw_lease_stalled(3, 0, true, old)); /* a stall before stop 38 */
	CHECK(!sw_lease_stalled(64, 0, true, 10 * old));
	return t_finish();
}
