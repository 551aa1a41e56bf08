/* SPDX-License-Identifier: MIT */
/*
 * upstream.h - for the C ports of rdma-core's Python test scenarios
 * (docs/seed-apis.md 4): cases that may be skipped, the way the upstream
 * suite skips a test on a device that lacks a feature. Include after
 * harness.h.
 *
 * up_case(name) starts a case (the name is copied). up_skip(reason) ends the current case as
 * skipped: it prints "# skipped: reason" and "ok N - name # SKIP reason",
 * and the case counts as skipped, never as passed. A case that already
 * failed a check cannot be skipped: it stays "not ok". up_finish()
 * prints how many cases passed, failed and were skipped, then returns
 * t_finish().
 */
#ifndef SV_TESTS_UPSTREAM_H
#define SV_TESTS_UPSTREAM_H

struct up_tally {
	int passed, failed, skipped;
};

static inline struct up_tally *up_t(void)
{
	static struct up_tally t;
	return &t;
}

/* Count the open case (if any) as passed or failed. */
static inline void up_count(void)
{
	struct t_state *st = t_st();

	if (!st->cas)
		return;
	if (st->case_failed)
		up_t()->failed++;
	else
		up_t()->passed++;
}

/* `name` is copied: a caller may format it in a buffer it reuses. */
static inline void up_case(const char *name)
{
	static char buf[256];

	up_count();
	t_end_case(); /* prints the previous case while its name is still intact */
	snprintf(buf, sizeof(buf), "%s", name);
	t_case(buf);
}

/* End the current case as skipped (see above). Returns 0, for "return up_skip(...)". */
static inline int up_skip(const char *reason)
{
	struct t_state *st = t_st();

	if (!st->cas)
		return 0;
	if (st->case_failed) {
		printf("# not skipped, it already failed: %s\n", reason);
		return 0;
	}
	printf("# skipped: %s\n", reason);
	printf("ok %d - %s # SKIP %s\n", ++st->points, st->cas, reason);
	up_t()->skipped++;
	st->cas = NULL;
	return 0;
}

static inline int up_finish(void)
{
	struct up_tally *t = up_t();

	up_count();
	t_end_case();
	printf("# cases: %d passed, %d failed, %d skipped\n", t->passed, t->failed, t->skipped);
	return t_finish();
}

#endif
