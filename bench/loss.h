/* SPDX-License-Identifier: MIT */
/*
 * loss.h - what the files of the loss family share:
 *
 *   loss.c        the orchestrator: the points, M processes in a ring, the records
 *   loss_role.c   one process of a point: N QPs out, N in, WRITEs, the final check
 *   loss_stats.c  the device's SOFTVERBS_STATS=1 totals, captured and parsed
 *
 * A point is M processes, rank r writing on N QPs into rank r+1 (mod M)
 * and receiving N QPs from rank r-1; one-way points have M = 2 and only
 * rank 0 writing. The orchestrator relays the addresses and the steps
 * over one socket per process (fd 3); the process's parameters come in
 * SV_BENCH_LOSS (loss_role.c).
 */
#ifndef SV_BENCH_LOSS_H
#define SV_BENCH_LOSS_H

#include "ep.h"

#include <stdio.h>

/*
 * The steps, one byte each, after the addresses: orchestrator -> process
 * LOSS_GO; process -> orchestrator LOSS_WRITTEN or LOSS_UNWRITTEN (the
 * final pattern is in place at the successor, or not); orchestrator ->
 * process LOSS_CHECK or LOSS_SKIP (whether its predecessor wrote it);
 * then the process tears down and sends its result line, and exits.
 */
enum {
	LOSS_READY = 'r',
	LOSS_GO = 'g',
	LOSS_WRITTEN = 'w',
	LOSS_UNWRITTEN = 'u',
	LOSS_CHECK = 'c',
	LOSS_SKIP = 'n',
};

/* What one address message holds before its ep_addr records. */
struct loss_hello {
	uint32_t ntx, nrx;
};

/*
 * The device's totals at its last close (SOFTVERBS_STATS=1). Fields of a
 * line the device did not print are NaN: `resent`, `overflows` and
 * `budget_waits` come from "resent pkts N, socket overflows N, budget
 * waits N", which older transports do not print.
 */
struct loss_stats {
	double retransmits, timeouts, lost, wc_errors;
	double resent, overflows, budget_waits;
	double qp_tx_pkts; /* packets sent by the QPs listed to loss_stats_end() */
};

/* Send stderr to a memory file until loss_stats_end(); -1 when it cannot. */
int loss_stats_begin(void);
/*
 * Restore stderr, parse what the device printed into *st, pass the lines
 * that are not softverbs' counters on to stderr. `tx_qpns` (sorted, n)
 * are the QPs whose "tx N pkts" are summed into st->qp_tx_pkts.
 */
void loss_stats_end(int saved, struct loss_stats *st, const uint32_t *tx_qpns, size_t n);
/* qsort/bsearch order of QP numbers (uint32_t). */
int loss_cmp_qpn(const void *a, const void *b);
/* The namespace's UDP RcvbufErrors (/proc/net/snmp); NaN if unreadable. */
double loss_rcvbuf_errors(void);

/* One process of a point (the role "loss"). */
void loss_role(const struct role_args *ra);

/* What the targets need beyond the records, kept by loss.c as the points run. */
struct loss_tgt {
	bool ran; /* the family ran */
	double worst_resent, worst_excess; /* per packet lost, the worst 1% point */
	bool resent_missing; /* a 1% point had no "resent pkts" line */
	double clean_errs, clean_overflows; /* 1024 QPs x 4 processes over UDP, 0% and 1% */
	bool overflows_from_kernel; /* ... from RcvbufErrors: the device line was absent */
};
extern struct loss_tgt loss_tgt;

/* The loss targets, after the others (results.c): plain text (with the
 * "targets:" heading when `heading`), and JSON members (each after a comma). */
void loss_targets_print(bool heading);
void loss_targets_json(FILE *f);

#endif
