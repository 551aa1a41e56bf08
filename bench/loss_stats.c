/* SPDX-License-Identifier: MIT */
/*
 * loss_stats.c - the counters of a loss point: what the device prints
 * on stderr with SOFTVERBS_STATS=1 (per QP at destroy, its totals at its
 * last close), caught in a memory file around the teardown and parsed;
 * and the kernel's count of UDP datagrams dropped for a full receive
 * buffer in this network namespace.
 *
 * The lines read (src/sw/transport/engine.c, README "Diagnostics"):
 *
 *   softverbs: NAME QP 0xQPN RC: tx N pkts ...          (per QP)
 *   softverbs:   retransmits N timeouts N ...
 *   softverbs:   resent pkts N, socket overflows N, budget waits N   (newer transports)
 *   softverbs:   faults dropped N ...
 *   softverbs:   completions errors N ...
 */
#define _GNU_SOURCE
#include "loss.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Contract: see loss.h. */
int loss_stats_begin(void)
{
	int mem = memfd_create("sv_bench_stats", MFD_CLOEXEC), saved;

	if (mem < 0)
		return -1;
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	if (saved < 0 || dup2(mem, STDERR_FILENO) < 0) {
		if (saved >= 0)
			close(saved);
		close(mem);
		return -1;
	}
	close(mem);
	return saved;
}

/* Contract: see loss.h. */
int loss_cmp_qpn(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* One line into *st; false when it is none of the counters read. */
static bool parse_line(const char *l, struct loss_stats *st, const uint32_t *tx, size_t n)
{
	unsigned long long a, b, c;
	unsigned int qpn;

	if (sscanf(l, "softverbs:   retransmits %llu timeouts %llu", &a, &b) == 2) {
		st->retransmits += (double)a;
		st->timeouts += (double)b;
	} else if (sscanf(l,
			  "softverbs:   resent pkts %llu, socket overflows %llu, budget waits %llu",
			  &a, &b, &c) == 3) {
		st->resent = (double)a; /* NaN until seen */
		st->overflows = (double)b;
		st->budget_waits = (double)c;
	} else if (sscanf(l, "softverbs:   faults dropped %llu", &a) == 1) {
		st->lost += (double)a;
	} else if (sscanf(l, "softverbs:   completions errors %llu", &a) == 1) {
		st->wc_errors += (double)a;
	} else if (sscanf(l, "softverbs: %*s QP 0x%x RC: tx %llu pkts", &qpn, &a) == 2) {
		if (n && bsearch(&qpn, tx, n, sizeof(*tx), loss_cmp_qpn))
			st->qp_tx_pkts += (double)a;
	} else {
		return !strncmp(l, "softverbs: ", 11); /* the other counter lines */
	}
	return true;
}

/* Contract: see loss.h. The caller's tx_qpns must be sorted (loss_role.c sorts them). */
void loss_stats_end(int saved, struct loss_stats *st, const uint32_t *tx_qpns, size_t n)
{
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	int mem;

	memset(st, 0, sizeof(*st));
	st->resent = st->overflows = st->budget_waits = nan_d();
	if (saved < 0) {
		st->retransmits = st->timeouts = st->lost = st->wc_errors = nan_d();
		st->qp_tx_pkts = nan_d();
		return;
	}
	fflush(stderr);
	mem = dup(STDERR_FILENO);
	dup2(saved, STDERR_FILENO);
	close(saved);
	f = mem >= 0 ? fdopen(mem, "r") : NULL;
	if (!f)
		return;
	rewind(f);
	while (getline(&line, &cap, f) > 0)
		if (!parse_line(line, st, tx_qpns, n))
			fputs(line, stderr); /* an error message, not a counter */
	free(line);
	fclose(f);
}

/* Contract: see loss.h. The Udp header line names the columns, the next holds them. */
double loss_rcvbuf_errors(void)
{
	FILE *f = fopen("/proc/net/snmp", "r");
	char head[512], vals[512];
	double v = nan_d();

	if (!f)
		return v;
	while (fgets(head, sizeof(head), f)) {
		char *hs = NULL, *vs = NULL, *h, *x;

		if (strncmp(head, "Udp: ", 5) || !fgets(vals, sizeof(vals), f))
			continue;
		h = strtok_r(head, " \n", &hs);
		x = strtok_r(vals, " \n", &vs);
		while (h && x) {
			if (!strcmp(h, "RcvbufErrors")) {
				v = strtod(x, NULL);
				break;
			}
			h = strtok_r(NULL, " \n", &hs);
			x = strtok_r(NULL, " \n", &vs);
		}
		break;
	}
	fclose(f);
	return v;
}
