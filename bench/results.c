/* SPDX-License-Identifier: MIT */
/*
 * results.c - every figure of a run is a record: a family ("bw",
 * "lat", ...), an operation, a variant, a size, and named values (NaN:
 * not measured). From them come the same-run ratios, the plain tables
 * (stdout) and the JSON (--json), whose shape docs/performance.md and
 * bench/plot.py rely on:
 *
 *   {"tool": "sv_bench", "schema": 2, "mode": "quick"|"full", ...,
 *    "results": {FAMILY: [{"op", "variant", "size", VALUE...}, ...], ...},
 *    "ucx": {"present", "note"}, "peers": {"notes": [...]}, "targets": {...}}
 */
#include "bench.h"
#include "loss.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* Targets of the "Data path" issue, reported (never enforced). */
#define TARGET_WRITE64K_VS_UDP 0.60 /* WRITE 64 KiB >= 60% of UDP 4 KiB stream */
#define TARGET_LAT_VS_UDP 2.0 /* busy-poll WRITE one-way <= 2x UDP busy one-way */

static struct rec recs[1024];
static int nrec;
bool ucx_present;
char ucx_note[128];
double load_start[3], load_end[3];

static const struct {
	const char *fam, *title;
} fams[] = {
	{"bw", "RDMA bandwidth and message rate (GB/s = 1e9 B/s; CPU s/GB: both processes; "
	       "vs_udp: / UDP 4 KiB stream; vs_memcpy: / memcpy of that size)"},
	{"lat", "RDMA WRITE ping-pong latency, one-way (half a round trip), microseconds "
		"(vs_udp: median / UDP busy ping-pong median)"},
	{"dmah_bw", "RDMA WRITE bandwidth into an MR registered with a DMA handle, GB/s "
		    "(vs_plain: / the plain MR of the same size)"},
	{"dmah", "DMA handles: ibv_alloc_dmah+ibv_dealloc_dmah pairs/s and us; ibv_reg_mr vs "
		 "ibv_reg_mr_ex without/with a handle, us per reg+dereg"},
	{"alloc_reg", "alloc + reg + dereg + free, median microseconds per cycle, pages untouched "
		      "(vs_posix: alloc_buf / posix_memalign total)"},
	{"loss", "RDMA WRITE under random packet loss, one QP, one way (SOFTVERBS_FAULT=drop=F,"
		 "side=tx in both processes: requests and ACKs; vs_lossless: / 0% of the same link "
		 "and size; excess: requester packets beyond the WRITEs' own; resent: the "
		 "device's \"resent pkts\" line, - when absent)"},
	{"loss_qps", "RDMA WRITE, N QPs x M processes in a ring, 16 KiB, aggregate (fault "
		     "injection as above; overflows: the device's socket overflows, kern_rcvbuf: "
		     "the namespace's UDP RcvbufErrors)"},
	{"memcpy", "baseline: memcpy in one process, GB/s"},
	{"udp", "baseline: UDP over lo between two processes"},
	{"vm_copy", "baseline: process_vm_writev into another process, GB/s"},
	{"ucx", "peer: UCX ucx_perftest, UCT puts over posix (short/bcopy), cma (zcopy), tcp on lo "
		"(zcopy) (median one-way us, MB/s = 1e6 B/s, msg/s)"},
	{"fabric", "peer: libfabric fi_pingpong, rdm endpoints, shm and tcp providers (its "
		   "usec/xfer: one-way average; its MB/sec: 1e6 B/s)"},
	{"paired", "issue 17's targets, both sides measured again back to back, alternating "
		   "which goes first (ratio: the median of the rounds' ratios; num, den: the "
		   "medians of the two sides)"},
};

/* Contract: see bench.h. A new empty record; dies when the table is full. */
struct rec *rec_add(const char *fam, const char *op, const char *variant, uint64_t size)
{
	struct rec *r;

	if (nrec == (int)N_OF(recs))
		die("too many results");
	r = &recs[nrec++];
	memset(r, 0, sizeof(*r));
	r->fam = fam;
	snprintf(r->op, sizeof(r->op), "%s", op);
	snprintf(r->variant, sizeof(r->variant), "%s", variant);
	r->size = size;
	return r;
}

/* Contract: see bench.h. Sets or replaces `key`; `key` must be a literal. */
void rec_set(struct rec *r, const char *key, double v)
{
	for (int i = 0; i < r->n; i++)
		if (!strcmp(r->key[i], key)) {
			r->val[i] = v;
			return;
		}
	if (r->n == REC_MAXV)
		die("too many values in a record");
	r->key[r->n] = key;
	r->val[r->n++] = v;
}

/* Contract: see bench.h. */
int rec_mark(void)
{
	return nrec;
}

/* Contract: see bench.h. */
double rec_at(int i, const char *key)
{
	if (i < 0 || i >= nrec)
		return nan_d();
	for (int k = 0; k < recs[i].n; k++)
		if (!strcmp(recs[i].key[k], key))
			return recs[i].val[k];
	return nan_d();
}

/* Contract: see bench.h. */
void rec_release(int mark)
{
	if (mark >= 0 && mark < nrec)
		nrec = mark;
}

/* Contract: see bench.h. A NULL op or variant matches any. */
double rec_get(const char *fam, const char *op, const char *variant, uint64_t size, const char *key)
{
	for (int i = 0; i < nrec; i++) {
		const struct rec *r = &recs[i];

		if (strcmp(r->fam, fam) || (op && strcmp(r->op, op)) ||
		    (variant && strcmp(r->variant, variant)) || r->size != size)
			continue;
		for (int k = 0; k < r->n; k++)
			if (!strcmp(r->key[k], key))
				return r->val[k];
	}
	return nan_d();
}

/* The same-run ratios, added to the records they concern. */
static void add_ratios(void)
{
	double udp_bw = rec_get("udp", "stream", "", 4096, "gbps");

	for (int i = 0; i < nrec; i++) {
		struct rec *r = &recs[i];
		double v;

		if (!strcmp(r->fam, "bw")) {
			v = rec_get("bw", r->op, r->variant, r->size, "gbps");
			if (r->size >= 4096 && udp_bw == udp_bw)
				rec_set(r, "vs_udp", v / udp_bw);
			rec_set(r, "vs_memcpy",
				v / rec_get("memcpy", "memcpy", "", r->size, "gbps"));
			peer_ratios_bw(r, v);
		} else if (!strcmp(r->fam, "lat")) {
			peer_ratios_lat(r);
		}
		if (!strcmp(r->fam, "lat") && r->size == 8) {
			/* pinned against pinned, the others against the plain spin */
			bool pin = !strcmp(r->variant, "busy_poll_pinned");
			double u = rec_get("udp", "pingpong",
					   pin ? "busy_poll_pinned" : "busy_poll", 8, "median_us");

			if (u == u)
				rec_set(r, "vs_udp",
					rec_get("lat", r->op, r->variant, 8, "median_us") / u);
		} else if (!strcmp(r->fam, "dmah_bw")) {
			rec_set(r, "vs_plain",
				rec_get("dmah_bw", r->op, r->variant, r->size, "gbps") /
					rec_get("dmah_bw", r->op, "plain", r->size, "gbps"));
		} else if (!strcmp(r->fam, "alloc_reg") && !strcmp(r->op, "alloc_buf")) {
			rec_set(r, "vs_posix",
				rec_get("alloc_reg", "alloc_buf", r->variant, r->size, "total_us") /
					rec_get("alloc_reg", "posix_memalign", r->variant, r->size,
						"total_us"));
		}
	}
}

/*
 * The target ratios (NaN when a side was not measured): bandwidth, and
 * latency unpinned (*r2) and with both sides pinned (*r3), each against
 * the UDP spin placed the same way.
 */
static void targets(double *r1, double *r2, double *r3)
{
	*r1 = rec_get("bw", "WRITE", "", 64 * KIB, "gbps") /
	      rec_get("udp", "stream", "", 4096, "gbps");
	*r2 = rec_get("lat", "WRITE", "busy_poll", 8, "median_us") /
	      rec_get("udp", "pingpong", "busy_poll", 8, "median_us");
	*r3 = rec_get("lat", "WRITE", "busy_poll_pinned", 8, "median_us") /
	      rec_get("udp", "pingpong", "busy_poll_pinned", 8, "median_us");
}

/* Contract: see bench.h. */
const char *verdict(double r, double bound, bool at_least)
{
	if (r != r)
		return "not measured";
	return (at_least ? r >= bound : r <= bound) ? "met" : "MISSED";
}

/* A table cell: "-" for NaN, else 4 significant digits. */
static void num(char *buf, size_t cap, double v)
{
	if (v != v)
		snprintf(buf, cap, "-");
	else if (v != 0 && (v >= 1e6 || v < 1e-3))
		snprintf(buf, cap, "%.3g", v);
	else if (v >= 1000)
		snprintf(buf, cap, "%.0f", v);
	else
		snprintf(buf, cap, "%.4g", v);
}

/* The union of the value names of family `fam`, in first-seen order. */
static int fam_keys(const char *fam, const char **keys, int cap)
{
	int n = 0;

	for (int i = 0; i < nrec; i++) {
		if (strcmp(recs[i].fam, fam))
			continue;
		for (int k = 0; k < recs[i].n; k++) {
			int j = 0;

			while (j < n && strcmp(keys[j], recs[i].key[k]))
				j++;
			if (j == n && n < cap)
				keys[n++] = recs[i].key[k];
		}
	}
	return n;
}

/* The width of the column of value `key`: the name, at least 9 (a number of num()). */
static int col_width(const char *key)
{
	int n = (int)strlen(key);

	return n > 9 ? n : 9;
}

/* Contract: see bench.h. One table per family that has records, then the targets. */
void print_tables(void)
{
	double r1, r2, r3;

	add_ratios();
	printf("\nsoftverbs benchmark: two processes on one host over loopback, %.2f s per point\n",
	       opt.secs);
	printf("load average %.2f at the start, %.2f at the end (a shared machine is noisy: "
	       "compare within one run)\n",
	       load_start[0], load_end[0]);
	for (size_t f = 0; f < N_OF(fams); f++) {
		const char *keys[24];
		int nk = fam_keys(fams[f].fam, keys, 24);

		if (!nk)
			continue;
		printf("\n%s\n%-16s %-17s %8s", fams[f].title, "op", "variant", "size");
		for (int k = 0; k < nk; k++)
			printf(" %*s", col_width(keys[k]), keys[k]);
		printf("\n");
		for (int i = 0; i < nrec; i++) {
			const struct rec *r = &recs[i];
			char s[32], v[32];

			if (strcmp(r->fam, fams[f].fam))
				continue;
			size_str(r->size, s, sizeof(s));
			printf("%-16s %-17s %8s", r->op, r->variant[0] ? r->variant : "-",
			       r->size ? s : "-");
			for (int k = 0; k < nk; k++) {
				double x = nan_d();

				for (int j = 0; j < r->n; j++)
					if (!strcmp(r->key[j], keys[k]))
						x = r->val[j];
				num(v, sizeof(v), x);
				printf(" %*s", col_width(keys[k]), v);
			}
			printf("\n");
		}
	}
	if (npeer_notes)
		printf("\npeers:\n");
	for (int i = 0; i < npeer_notes; i++)
		printf("  %s\n", peer_notes[i]);
	targets(&r1, &r2, &r3);
	if (r1 != r1 && r2 != r2 && r3 != r3) {
		peer_targets_print(true);
		loss_targets_print(false);
		return;
	}
	printf("\ntargets:\n");
	printf("  RDMA WRITE 64 KiB >= %.0f%% of UDP 4 KiB stream:           %5.2f  %s\n",
	       TARGET_WRITE64K_VS_UDP * 100, r1, verdict(r1, TARGET_WRITE64K_VS_UDP, true));
	printf("  busy-poll WRITE 8 B one-way <= %.0fx UDP spin one-way:        %5.2f  %s\n",
	       TARGET_LAT_VS_UDP, r2, verdict(r2, TARGET_LAT_VS_UDP, false));
	printf("  the same, both sides pinned (SOFTVERBS_PROGRESS_CPU): %5.2f  %s\n", r3,
	       verdict(r3, TARGET_LAT_VS_UDP, false));
	printf("  for reference, over UDP instead of the same-host link (SOFTVERBS_SHM=0):\n"
	       "    WRITE 64 KiB / UDP stream %5.2f, busy-poll WRITE 8 B / UDP spin %5.2f\n",
	       rec_get("bw", "WRITE", "udp", 64 * KIB, "gbps") /
		       rec_get("udp", "stream", "", 4096, "gbps"),
	       rec_get("lat", "WRITE", "busy_poll_udp", 8, "median_us") /
		       rec_get("udp", "pingpong", "busy_poll", 8, "median_us"));
	peer_targets_print(false);
	loss_targets_print(false);
}

/* Contract: see bench.h. */
void json_num(FILE *f, double v)
{
	if (v != v || v - v != 0)
		fputs("null", f);
	else
		fprintf(f, "%.6g", v);
}

/* A JSON string of plain text (quotes and backslashes escaped). */
static void jstr(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
	fputc('"', f);
}

/* Contract: see bench.h and the file comment. 0, or -1 with a message. */
int write_json(const char *path, double run_s)
{
	FILE *f = fopen(path, "w");
	struct utsname u;
	double r1, r2, r3;
	bool first_fam = true;

	if (!f) {
		fprintf(stderr, "sv_bench: %s: %s\n", path, strerror(errno));
		return -1;
	}
	uname(&u);
	targets(&r1, &r2, &r3);
	fprintf(f, "{\n  \"tool\": \"sv_bench\",\n  \"schema\": 2,\n  \"mode\": \"%s\",\n",
		opt.quick ? "quick" : "full");
	fprintf(f, "  \"secs_per_point\": %.3f,\n  \"duration_s\": %.1f,\n", opt.secs, run_s);
	fprintf(f, "  \"host\": {\"cpus\": %ld, \"kernel\": ", sysconf(_SC_NPROCESSORS_ONLN));
	jstr(f, u.release);
	fprintf(f, ", \"loadavg_start\": %.2f, \"loadavg_end\": %.2f},\n", load_start[0],
		load_end[0]);
	fprintf(f, "  \"units\": {\"gbps\": \"1e9 bytes/s\", \"mmsgs\": \"1e6 messages/s\", "
		   "\"*_us\": \"microseconds (latency: one-way)\", \"size\": \"bytes\"},\n");
	fprintf(f, "  \"results\": {");
	for (size_t fa = 0; fa < N_OF(fams); fa++) {
		bool first = true;

		for (int i = 0; i < nrec; i++) {
			const struct rec *r = &recs[i];

			if (strcmp(r->fam, fams[fa].fam))
				continue;
			if (first)
				fprintf(f, "%s\n    \"%s\": [", first_fam ? "" : ",", r->fam);
			fprintf(f, "%s\n      {\"op\": ", first ? "" : ",");
			jstr(f, r->op);
			fprintf(f, ", \"variant\": ");
			jstr(f, r->variant);
			fprintf(f, ", \"size\": %llu", (unsigned long long)r->size);
			for (int k = 0; k < r->n; k++) {
				fprintf(f, ", \"%s\": ", r->key[k]);
				json_num(f, r->val[k]);
			}
			fprintf(f, "}");
			first = first_fam = false;
		}
		if (!first)
			fprintf(f, "\n    ]");
	}
	fprintf(f,
		"\n  },\n  \"ucx\": {\"present\": %s, \"note\": ", ucx_present ? "true" : "false");
	jstr(f, ucx_note);
	fprintf(f, "},\n  \"peers\": {\"notes\": [");
	for (int i = 0; i < npeer_notes; i++) {
		fprintf(f, "%s", i ? ", " : "");
		jstr(f, peer_notes[i]);
	}
	fprintf(f, "]},\n  \"targets\": {\n    \"write64k_vs_udp4k\": {\"ratio\": ");
	json_num(f, r1);
	fprintf(f, ", \"goal_min\": %.2f, \"met\": %s},\n", TARGET_WRITE64K_VS_UDP,
		r1 == r1 && r1 >= TARGET_WRITE64K_VS_UDP ? "true" : "false");
	fprintf(f, "    \"busy_lat_vs_udp_busy\": {\"ratio\": ");
	json_num(f, r2);
	fprintf(f, ", \"goal_max\": %.2f, \"met\": %s},\n", TARGET_LAT_VS_UDP,
		r2 == r2 && r2 <= TARGET_LAT_VS_UDP ? "true" : "false");
	fprintf(f, "    \"busy_lat_pinned_vs_udp_pinned\": {\"ratio\": ");
	json_num(f, r3);
	fprintf(f, ", \"goal_max\": %.2f, \"met\": %s}", TARGET_LAT_VS_UDP,
		r3 == r3 && r3 <= TARGET_LAT_VS_UDP ? "true" : "false");
	peer_targets_json(f);
	loss_targets_json(f);
	fprintf(f, "\n  }\n}\n");
	return fclose(f) ? -1 : 0;
}
