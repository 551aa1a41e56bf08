/* SPDX-License-Identifier: MIT */
/*
 * paired.c - issue 17's targets measured in pairs (family "paired").
 *
 * The sweep measures softverbs first and its peers minutes later. On a
 * shared machine whose speed changes by a factor of two within minutes
 * (UCX's own cma put bandwidth at 64 KiB was 13 GB/s in one run and 22
 * in another), a ratio of two figures taken that far apart says as much
 * about the machine as about softverbs. So at the end of a run each
 * target's two sides are measured again back to back, PAIR_ROUNDS times
 * (one with --quick), the order alternating (softverbs first, then the
 * peer first, ...), and the target's paired ratio is the median of the
 * rounds' ratios. A target that is a figure on its own (the 8-byte
 * message rate) is measured as often, and its median taken.
 *
 * The points measured here are not added to the tables (rec_release):
 * those keep the sweep's figures. Each target gets one "paired" record
 * (op: the target's JSON name): ratio (the median), min and max over
 * the rounds, the medians of the two sides (num, den) and the rounds
 * that gave a ratio. A target whose side cannot be measured (the peers
 * left out or not installed) gets no record: "not measured".
 */
#include "peer_targets.h"

#include <stdlib.h>
#include <string.h>

enum {
	PAIR_ROUNDS = 3,
	PAIR_ROUNDS_QUICK = 1
};

static int rounds(void)
{
	return opt.quick ? PAIR_ROUNDS_QUICK : PAIR_ROUNDS;
}

/* True when figure `f` can be measured in this run. */
static bool fig_possible(const struct fig *f)
{
	char exe[512];

	if (!f->fam)
		return true;
	if (strcmp(f->fam, "ucx"))
		return true;
	return !opt.no_peers && find_exe("ucx_perftest", exe, sizeof(exe));
}

/* Measure figure `f` once more; its value (NaN on failure), no record kept. */
static double measure_fig(const struct fig *f)
{
	int mark = rec_mark();
	double v;

	if (!strcmp(f->fam, "bw")) {
		mmode.no_shm = !strcmp(f->variant, "udp");
		bw_point("bw", f->op, f->variant, bw_op_test(f->op), f->size,
			 strcmp(f->variant, "alloc_buf") ? MR_PLAIN : MR_ALLOC_BUF);
	} else if (!strcmp(f->fam, "lat")) {
		lat_point(f->size, strcmp(f->variant, "sleeping") != 0,
			  !strcmp(f->variant, "busy_poll_pinned"),
			  !strcmp(f->variant, "busy_poll_udp"));
	} else if (!strcmp(f->fam, "ucx")) {
		ucx_one(f->op, f->variant, (uint32_t)f->size);
	} else if (!strcmp(f->fam, "memcpy")) {
		memcpy_point(f->size);
	} else if (!strcmp(f->fam, "udp")) {
		udp_pingpong_point(f->variant);
	} else {
		die("paired: no way to measure family %s", f->fam);
	}
	v = rec_at(mark, f->key) * f->scale;
	rec_release(mark);
	return v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of the n numbers of `v` that are not NaN (sorted in place); NaN if none. */
static double median(double *v, int n, int *kept)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		if (v[i] == v[i])
			v[k++] = v[i];
	*kept = k;
	if (!k)
		return nan_d();
	qsort(v, (size_t)k, sizeof(*v), cmp_double);
	return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

/* Target `t`, every round; its "paired" record. */
static void pair_target(const struct peer_target *t)
{
	double num[PAIR_ROUNDS], den[PAIR_ROUNDS], ratio[PAIR_ROUNDS];
	int n = rounds(), kept, k;
	struct rec *r;
	double med;

	for (int i = 0; i < n; i++) {
		bool num_first = i % 2 == 0;

		progress_step(bench_point_weight() * (t->den.fam ? 2 : 1),
			      "paired, round %d of %d: %s", i + 1, n, t->text);
		den[i] = 1;
		if (t->den.fam && !num_first)
			den[i] = measure_fig(&t->den);
		num[i] = measure_fig(&t->num);
		if (t->den.fam && num_first)
			den[i] = measure_fig(&t->den);
		ratio[i] = den[i] > 0 ? num[i] / den[i] : nan_d();
	}
	r = rec_add("paired", t->json, "", 0);
	med = median(ratio, n, &kept); /* sorted: the extremes are first and last */
	rec_set(r, "ratio", med);
	rec_set(r, "min", kept ? ratio[0] : nan_d());
	rec_set(r, "max", kept ? ratio[kept - 1] : nan_d());
	rec_set(r, "rounds", kept);
	rec_set(r, "num", median(num, n, &k));
	rec_set(r, "den", t->den.fam ? median(den, n, &k) : nan_d());
}

/* Contract: see bench.h. */
double plan_paired(void)
{
	double w = 0;

	for (size_t i = 0; i < n_peer_targets; i++) {
		const struct peer_target *t = &peer_targets[i];

		if (fig_possible(&t->num) && fig_possible(&t->den))
			w += rounds() * bench_point_weight() * (t->den.fam ? 2 : 1);
	}
	return w;
}

/* Contract: see bench.h and the file comment. */
void run_paired(void)
{
	for (size_t i = 0; i < n_peer_targets; i++) {
		const struct peer_target *t = &peer_targets[i];

		if (fig_possible(&t->num) && fig_possible(&t->den))
			pair_target(t);
	}
}
