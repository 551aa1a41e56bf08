/* SPDX-License-Identifier: MIT */
/*
 * peer_targets.c - softverbs against its peers of the same run (issue
 * 17): the ratio columns the tables carry, and the targets, reported
 * after the others, never enforced:
 *
 *   same host (the same-host link, ordinary malloc memory): WRITE and
 *   READ 64 KiB and 1 MiB >= 1x UCX's cma put bandwidth; WRITE 1 MiB
 *   between two ibv_alloc_buf buffers >= 0.8x memcpy 1 MiB; 8-byte
 *   WRITE one-way latency, busy-poll, <= 1.5x UCX's cma put latency;
 *   with the default settings <= 2x the busy-poll figure; 8-byte WRITE
 *   message rate >= 2 million/s;
 *   over UDP (SOFTVERBS_SHM=0): WRITE 64 KiB and 1 MiB >= 1x UCX's tcp
 *   put bandwidth; 8-byte busy-poll latency <= 2x the UDP busy
 *   ping-pong's.
 *
 * Each target has two ratios: the sweep's (its two figures from the
 * tables, measured minutes apart) and the paired one (paired.c: both
 * sides again, back to back, the median of alternating rounds). A
 * target is judged by the paired ratio when the paired family ran, by
 * the sweep's otherwise; the JSON's "ratio" is the one judged, next to
 * "sweep" and "paired". A side not measured (a peer missing, a size not
 * in the sweep) gives NaN: "not measured", null in the JSON.
 */
#include "peer_targets.h"

#include <stdio.h>
#include <string.h>

const struct peer_target peer_targets[] = {
	{"peer_write64k_vs_ucx_cma",
	 "same host, WRITE 64 KiB / UCX cma put_bw",
	 {"bw", "WRITE", "", 64 * KIB, "gbps", 1},
	 {"ucx", "put_bw", "cma", 64 * KIB, "mbps", 1e-3},
	 1.0,
	 true},
	{"peer_write1m_vs_ucx_cma",
	 "same host, WRITE 1 MiB / UCX cma put_bw",
	 {"bw", "WRITE", "", MIB, "gbps", 1},
	 {"ucx", "put_bw", "cma", MIB, "mbps", 1e-3},
	 1.0,
	 true},
	{"peer_read64k_vs_ucx_cma",
	 "same host, READ 64 KiB / UCX cma put_bw",
	 {"bw", "READ", "", 64 * KIB, "gbps", 1},
	 {"ucx", "put_bw", "cma", 64 * KIB, "mbps", 1e-3},
	 1.0,
	 true},
	{"peer_read1m_vs_ucx_cma",
	 "same host, READ 1 MiB / UCX cma put_bw",
	 {"bw", "READ", "", MIB, "gbps", 1},
	 {"ucx", "put_bw", "cma", MIB, "mbps", 1e-3},
	 1.0,
	 true},
	{"peer_write1m_allocbuf_vs_memcpy",
	 "same host, WRITE 1 MiB alloc_buf / memcpy 1 MiB",
	 {"bw", "WRITE", "alloc_buf", MIB, "gbps", 1},
	 {"memcpy", "memcpy", "", MIB, "gbps", 1},
	 0.8,
	 true},
	{"peer_lat8_busy_vs_ucx_cma",
	 "same host, WRITE 8 B busy-poll / UCX cma put_lat",
	 {"lat", "WRITE", "busy_poll", 8, "median_us", 1},
	 {"ucx", "put_lat", "cma", 8, "median_us", 1},
	 1.5,
	 false},
	{"peer_lat8_default_vs_busy",
	 "same host, WRITE 8 B default / busy-poll",
	 {"lat", "WRITE", "sleeping", 8, "median_us", 1},
	 {"lat", "WRITE", "busy_poll", 8, "median_us", 1},
	 2.0,
	 false},
	{"peer_write8_mmsgs",
	 "same host, WRITE 8 B, million messages/s",
	 {"bw", "WRITE", "", 8, "mmsgs", 1},
	 {NULL, NULL, NULL, 0, NULL, 0},
	 2.0,
	 true},
	{"peer_udp_write64k_vs_ucx_tcp",
	 "over UDP, WRITE 64 KiB / UCX tcp put_bw",
	 {"bw", "WRITE", "udp", 64 * KIB, "gbps", 1},
	 {"ucx", "put_bw", "tcp_lo", 64 * KIB, "mbps", 1e-3},
	 1.0,
	 true},
	{"peer_udp_write1m_vs_ucx_tcp",
	 "over UDP, WRITE 1 MiB / UCX tcp put_bw",
	 {"bw", "WRITE", "udp", MIB, "gbps", 1},
	 {"ucx", "put_bw", "tcp_lo", MIB, "mbps", 1e-3},
	 1.0,
	 true},
	{"peer_udp_lat8_busy_vs_udp",
	 "over UDP, WRITE 8 B busy-poll / UDP busy ping-pong",
	 {"lat", "WRITE", "busy_poll_udp", 8, "median_us", 1},
	 {"udp", "pingpong", "busy_poll", 8, "median_us", 1},
	 2.0,
	 false},
};
const size_t n_peer_targets = N_OF(peer_targets);

/* The value of figure `f`; NaN when not measured. */
static double fig_get(const struct fig *f)
{
	return rec_get(f->fam, f->op, f->variant, f->size, f->key) * f->scale;
}

/* Target `t`'s ratio (or figure) in the sweep; NaN when a side was not measured. */
static double sweep_ratio(const struct peer_target *t)
{
	double n = fig_get(&t->num);

	return t->den.fam ? n / fig_get(&t->den) : n;
}

/* The same from the paired family (paired.c); NaN when it did not run. */
static double paired_ratio(const struct peer_target *t)
{
	return rec_get("paired", t->json, "", 0, "ratio");
}

/* The ratio a target is judged by: the paired one where measured, else the sweep's. */
static double judged_ratio(const struct peer_target *t)
{
	double p = paired_ratio(t);

	return p == p ? p : sweep_ratio(t);
}

/* Sets `key` of `r` to v / peer unless the peer was not measured. */
static void set_vs(struct rec *r, const char *key, double v, double peer)
{
	if (peer == peer && peer > 0)
		rec_set(r, key, v / peer);
}

/* Contract: see bench.h. */
void peer_ratios_bw(struct rec *r, double gbps)
{
	bool udp = !strcmp(r->variant, "udp");

	if (strcmp(r->op, "WRITE") && strcmp(r->op, "READ") && strcmp(r->op, "SEND"))
		return;
	set_vs(r, "vs_ucx", gbps,
	       rec_get("ucx", "put_bw", udp ? "tcp_lo" : "cma", r->size, "mbps") / 1e3);
	if (!udp) {
		set_vs(r, "vs_ucx_posix", gbps,
		       rec_get("ucx", "put_bw", "posix", r->size, "mbps") / 1e3);
		set_vs(r, "vs_vm_writev", gbps,
		       rec_get("vm_copy", "process_vm_writev", "", r->size, "gbps"));
	}
	set_vs(r, "vs_fi", gbps,
	       rec_get("fabric", "pingpong", udp ? "tcp" : "shm", r->size, "mbps") / 1e3);
}

/* Contract: see bench.h. */
void peer_ratios_lat(struct rec *r)
{
	bool udp = !strcmp(r->variant, "busy_poll_udp");
	double v = rec_get("lat", r->op, r->variant, r->size, "median_us");

	set_vs(r, "vs_ucx", v,
	       rec_get("ucx", "put_lat", udp ? "tcp_lo" : "cma", r->size, "median_us"));
	set_vs(r, "vs_fi", v,
	       rec_get("fabric", "pingpong", udp ? "tcp" : "shm", r->size, "one_way_us"));
}

/* Contract: see bench.h. */
void peer_targets_print(bool heading)
{
	if (heading)
		printf("\ntargets:\n");
	for (size_t i = 0; i < n_peer_targets; i++) {
		const struct peer_target *t = &peer_targets[i];
		double r = judged_ratio(t);

		printf("  peers: %-50s %s %.2f: sweep %6.3g, paired %6.3g  %s\n", t->text,
		       t->at_least ? ">=" : "<=", t->goal, sweep_ratio(t), paired_ratio(t),
		       verdict(r, t->goal, t->at_least));
	}
}

/* Contract: see bench.h. */
void peer_targets_json(FILE *f)
{
	for (size_t i = 0; i < n_peer_targets; i++) {
		const struct peer_target *t = &peer_targets[i];
		double r = judged_ratio(t);
		bool met = r == r && (t->at_least ? r >= t->goal : r <= t->goal);

		fprintf(f, ",\n    \"%s\": {\"ratio\": ", t->json);
		json_num(f, r);
		fprintf(f, ", \"sweep\": ");
		json_num(f, sweep_ratio(t));
		fprintf(f, ", \"paired\": ");
		json_num(f, paired_ratio(t));
		fprintf(f, ", \"%s\": %.2f, \"met\": %s}", t->at_least ? "goal_min" : "goal_max",
			t->goal, met ? "true" : "false");
	}
}
