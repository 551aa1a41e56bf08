/* SPDX-License-Identifier: MIT */
/*
 * alloc_reg.c - the cost of getting registered memory, per size from
 * 4 KiB to 1 GiB (x16 steps, and 1 GiB), two ways:
 *
 *   alloc_buf       ibv_alloc_buf + ibv_reg_buf_mr + ibv_dereg_mr + ibv_free_buf
 *   posix_memalign  posix_memalign + ibv_reg_mr + ibv_dereg_mr + free
 *
 * on a plain PD of an ordinary device, and on a CC parent domain
 * (ALLOW_CC_UNPROTECTED_ALLOC) of a device in CC DMA bounce mode
 * (SOFTVERBS_CC_DMA_BOUNCE=1), where ibv_alloc_buf gives fd-backed
 * shared memory and ibv_reg_mr of private memory is refused (the refusal
 * is recorded). Each cycle is timed phase by phase; the medians over as
 * many cycles as fit in a quarter of the point time (at least 3) are
 * reported, each phase's and the whole cycle's. The pages are never touched: this is the verbs' own
 * cost, not the page faults of first use.
 */
#include "bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

enum {
	MAX_REPS = 20000
};

struct cycle {
	double *t[4]; /* alloc, reg, dereg, free: seconds of each cycle */
	unsigned int reps;
	int err; /* errno of the first failure, 0 if none */
};

/* One alloc/reg/dereg/free cycle of `size` bytes; false (c->err) on failure. */
static bool one_cycle(struct ibv_pd *pd, bool use_buf, uint64_t size, struct cycle *c)
{
	struct ibv_buf *b = NULL;
	struct ibv_mr *mr;
	void *p = NULL;
	uint64_t t[5];

	t[0] = now_ns();
	if (use_buf)
		p = ibv_alloc_buf(pd, size, &b);
	else if (posix_memalign(&p, 4096, size))
		p = NULL;
	t[1] = now_ns();
	if (!p) {
		c->err = errno ? errno : ENOMEM;
		return false;
	}
	mr = use_buf ? ibv_reg_buf_mr(pd, b, p, size, ACCESS) : ibv_reg_mr(pd, p, size, ACCESS);
	t[2] = now_ns();
	if (!mr) {
		c->err = errno;
		if (use_buf)
			ibv_free_buf(b);
		else
			free(p);
		return false;
	}
	ibv_dereg_mr(mr);
	t[3] = now_ns();
	if (use_buf)
		ibv_free_buf(b);
	else
		free(p);
	t[4] = now_ns();
	for (int i = 0; i < 4; i++)
		c->t[i][c->reps] = (double)(t[i + 1] - t[i]) / 1e3;
	c->reps++;
	return true;
}

/* qsort order of doubles. */
static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of n values (sorts them). */
static double median(double *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return v[n / 2];
}

/*
 * Cycles for `secs` (at least 3, at most MAX_REPS); the medians of each
 * phase and of the whole cycle, in microseconds.
 */
static void alloc_point(int out, const char *variant, struct ibv_pd *pd, bool use_buf,
			uint64_t size, double secs)
{
	uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
	struct cycle c = {{NULL}, 0, 0};
	double med[4], *tot = calloc(MAX_REPS, sizeof(double));

	for (int i = 0; i < 4; i++)
		c.t[i] = calloc(MAX_REPS, sizeof(double));
	if (!tot || !c.t[0] || !c.t[1] || !c.t[2] || !c.t[3])
		die("out of memory");
	errno = 0;
	while (one_cycle(pd, use_buf, size, &c) && c.reps < MAX_REPS &&
	       (c.reps < 3 || now_ns() < end))
		;
	if (!c.reps) {
		report(out, "alloc variant=%s path=%s size=%llu errno=%d\n", variant,
		       use_buf ? "alloc_buf" : "posix_memalign", (unsigned long long)size, c.err);
	} else {
		for (unsigned int r = 0; r < c.reps; r++)
			tot[r] = c.t[0][r] + c.t[1][r] + c.t[2][r] + c.t[3][r];
		for (int i = 0; i < 4; i++)
			med[i] = median(c.t[i], c.reps);
		report(out,
		       "alloc variant=%s path=%s size=%llu errno=%d reps=%u alloc_us=%.3f "
		       "reg_us=%.3f dereg_us=%.3f free_us=%.3f total_us=%.3f\n",
		       variant, use_buf ? "alloc_buf" : "posix_memalign", (unsigned long long)size,
		       c.err, c.reps, med[0], med[1], med[2], med[3], median(tot, c.reps));
	}
	for (int i = 0; i < 4; i++)
		free(c.t[i]);
	free(tot);
}

/*
 * The child: the device as the environment configures it, every size up
 * to ra->size, both paths; `cc`: on a CC parent domain (bounce device).
 */
void alloc_reg_role(const struct role_args *ra, bool cc)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	struct ibv_pd *pd, *use;
	double secs = ra->secs / 4 < 0.02 ? 0.02 : ra->secs / 4;

	ibv_free_device_list(list);
	if (!ctx)
		die("ibv_open_device: %s", strerror(errno));
	pd = ibv_alloc_pd(ctx);
	use = pd;
	if (!pd)
		die("ibv_alloc_pd: %s", strerror(errno));
	if (cc) {
		struct ibv_parent_domain_init_attr pa = {
			.pd = pd,
			.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC,
		};

		use = ibv_alloc_parent_domain(ctx, &pa);
		if (!use)
			die("ibv_alloc_parent_domain(ALLOW_CC_UNPROTECTED_ALLOC): %s",
			    strerror(errno));
	}
	for (uint64_t size = 4 * KIB; size; size = ladder_next(size, ra->size)) {
		alloc_point(ra->out, cc ? "cc_bounce" : "plain_pd", use, true, size, secs);
		alloc_point(ra->out, cc ? "cc_bounce" : "plain_pd", use, false, size, secs);
	}
	if (use != pd)
		ibv_dealloc_pd(use);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
}

/* ---- orchestrator side ---- */

static int nsizes(void)
{
	int n = 0;

	for (uint64_t size = 4 * KIB; size; size = ladder_next(size, opt.max_alloc))
		n++;
	return n;
}

/* Contract: see bench.h. Two children, two paths, every size. */
double plan_alloc_reg(void)
{
	double per = opt.secs / 4 < 0.02 ? 0.02 : opt.secs / 4;

	return 2 * (2 * nsizes() * per + 0.3);
}

/* Parse the child's lines into "alloc_reg" records. */
static void parse_alloc(const char *res)
{
	for (const char *p = res; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		char variant[32], path[32];
		unsigned long long size;
		struct rec *r;
		int err;

		if (sscanf(p, "alloc variant=%31s path=%31s size=%llu errno=%d", variant, path,
			   &size, &err) != 4)
			continue;
		r = rec_add("alloc_reg", path, variant, size);
		rec_set(r, "total_us", field(p, "total_us"));
		rec_set(r, "alloc_us", field(p, "alloc_us"));
		rec_set(r, "reg_us", field(p, "reg_us"));
		rec_set(r, "dereg_us", field(p, "dereg_us"));
		rec_set(r, "free_us", field(p, "free_us"));
		rec_set(r, "reps", field(p, "reps"));
		rec_set(r, "errno", err);
	}
}

/* Contract: see bench.h. The plain device, then the bounce device. */
void run_alloc_reg(void)
{
	char bounce[] = "SOFTVERBS_CC_DMA_BOUNCE=1", plain[] = "SOFTVERBS_CC_DMA_BOUNCE=0";
	char *env_cc[] = {bounce, NULL}, *env_plain[] = {plain, NULL};
	static char res[16384];
	char s[32];

	size_str(opt.max_alloc, s, sizeof(s));
	progress_step(plan_alloc_reg() / 2, "alloc+reg+dereg+free, 4 KiB to %s, plain PD", s);
	run_one("alloc-plain", opt.max_alloc, env_plain, res, sizeof(res));
	parse_alloc(res);
	progress_step(plan_alloc_reg() / 2, "alloc+reg+dereg+free, 4 KiB to %s, CC bounce device",
		      s);
	run_one("alloc-cc", opt.max_alloc, env_cc, res, sizeof(res));
	parse_alloc(res);
}
