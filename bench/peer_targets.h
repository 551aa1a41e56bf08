/* SPDX-License-Identifier: MIT */
/*
 * peer_targets.h - the table of issue 17's targets (peer_targets.c),
 * shared with the paired family (paired.c), which measures each
 * target's two sides again, alternately.
 */
#ifndef SV_BENCH_PEER_TARGETS_H
#define SV_BENCH_PEER_TARGETS_H

#include "bench.h"

/* One figure of the run: a record's value times `scale`. */
struct fig {
	const char *fam, *op, *variant;
	uint64_t size;
	const char *key;
	double scale;
};

struct peer_target {
	const char *json, *text;
	struct fig num, den; /* den.fam NULL: the figure itself */
	double goal;
	bool at_least;
};

extern const struct peer_target peer_targets[];
extern const size_t n_peer_targets;

#endif
