/* SPDX-License-Identifier: MIT */
/*
 * progress.c - one line on stderr per step of a run:
 *
 *   sv_bench [ 42%  0m31s elapsed, ETA 0m43s] WRITE bandwidth, 64 KiB
 *
 * The percentage counts the planned time of the steps begun before this
 * one; the ETA scales what is left by how the run has kept to its plan
 * so far. Shown when stderr is a terminal (or with --progress), never
 * with --quiet.
 */
#include "bench.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static struct {
	bool on;
	double total, done;
	uint64_t t0;
} pg;

/* Contract: see bench.h. Decides whether lines are shown at all. */
void progress_begin(double total)
{
	pg.on = !opt.quiet && (opt.progress || isatty(STDERR_FILENO));
	pg.total = total > 0 ? total : 1;
	pg.done = 0;
	pg.t0 = now_ns();
}

/* Seconds as "XmYYs". */
static void mmss(char *buf, size_t cap, double s)
{
	if (s < 0 || s != s)
		s = 0;
	snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)s % 60);
}

/* Contract: see bench.h. */
void progress_step(double weight, const char *fmt, ...)
{
	double elapsed = (double)(now_ns() - pg.t0) / 1e9, pace, left;
	char el[16], eta[16];
	va_list ap;

	if (pg.on) {
		/* how long a planned second really took so far (1 before anything is known) */
		pace = pg.done > 0.5 ? elapsed / pg.done : 1.0;
		left = (pg.total - pg.done) * pace;
		mmss(el, sizeof(el), elapsed);
		mmss(eta, sizeof(eta), left);
		fprintf(stderr, "sv_bench [%3d%%  %s elapsed, ETA %s] ",
			(int)(100.0 * pg.done / pg.total), el, eta);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	pg.done += weight;
	if (pg.done > pg.total)
		pg.done = pg.total;
}

/* Contract: see bench.h. The closing "done" line. */
void progress_end(void)
{
	char el[16];

	if (!pg.on)
		return;
	mmss(el, sizeof(el), (double)(now_ns() - pg.t0) / 1e9);
	fprintf(stderr, "sv_bench [100%%  %s elapsed] done\n", el);
}
