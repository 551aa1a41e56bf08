/* SPDX-License-Identifier: MIT */
/*
 * dmah.c - DMA handles:
 *
 *   - ibv_alloc_dmah + ibv_dealloc_dmah pairs per second, for a handle
 *     with PH 1 only, and with PH 1, a CPU id and a memory type (volatile,
 *     persistent): a CPU id starts the worker thread pinned to that CPU
 *     with the first handle naming it and joins it with the last;
 *   - ibv_reg_mr against ibv_reg_mr_ex without and with a DMA handle:
 *     register + deregister of one buffer, microseconds per pair;
 *   - RDMA WRITE bandwidth into an MR registered with a DMA handle
 *     (PH 0; PH 1 = streaming stores; a CPU id = placed by the worker
 *     pinned to it; PM, which comes with a CPU id = cache lines flushed
 *     before the ACK) against a plain MR, in the same run (verbs_bw.c).
 */
#include "bench.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static void dmah_rate(int out, struct ibv_context *ctx, const char *variant,
		      const struct ibv_dmah_init_attr *tmpl, double secs)
{
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(secs * 1e9), n = 0, t;

	do {
		struct ibv_dmah_init_attr a = *tmpl;
		struct ibv_dmah *d = ibv_alloc_dmah(ctx, &a);

		if (!d) {
			report(out, "dmah op=alloc_dealloc variant=%s errno=%d\n", variant, errno);
			return;
		}
		ibv_dealloc_dmah(d);
		n++;
		t = now_ns();
	} while (t < end || n < 3);
	report(out, "dmah op=alloc_dealloc variant=%s errno=0 per_s=%.1f us=%.3f n=%llu\n", variant,
	       (double)n / ((double)(t - t0) / 1e9), (double)(t - t0) / 1e3 / (double)n,
	       (unsigned long long)n);
}

/* reg + dereg of `size` bytes at `buf`, one of three ways, for `secs`. */
static void reg_rate(int out, struct ibv_pd *pd, struct ibv_dmah *dmah, int how, void *buf,
		     uint64_t size, double secs)
{
	static const char *const names[] = {"reg_mr", "reg_mr_ex", "reg_mr_ex_dmah"};
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(secs * 1e9), n = 0, t;

	do {
		struct ibv_mr_init_attr a = {
			.length = size,
			.access = ACCESS,
			.comp_mask = IBV_REG_MR_MASK_ADDR,
			.addr = buf,
		};
		struct ibv_mr *mr;

		if (how == 2) {
			a.comp_mask |= IBV_REG_MR_MASK_DMAH;
			a.dmah = dmah;
		}
		mr = how == 0 ? ibv_reg_mr(pd, buf, size, ACCESS) : ibv_reg_mr_ex(pd, &a);
		if (!mr) {
			report(out, "dmah op=%s variant=ph1 size=%llu errno=%d\n", names[how],
			       (unsigned long long)size, errno);
			return;
		}
		ibv_dereg_mr(mr);
		n++;
		t = now_ns();
	} while (t < end || n < 3);
	report(out, "dmah op=%s variant=%s size=%llu errno=0 us=%.3f n=%llu\n", names[how],
	       how == 2 ? "ph1" : "none", (unsigned long long)size,
	       (double)(t - t0) / 1e3 / (double)n, (unsigned long long)n);
}

/* The child: a plain device; handle rates, then registrations up to ra->size. */
void dmah_role(const struct role_args *ra)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	double secs = ra->secs / 8 < 0.02 ? 0.02 : ra->secs / 8;
	struct ibv_dmah_init_attr ph1 = {.comp_mask = IBV_DMAH_INIT_ATTR_MASK_PH, .ph = 1};
	struct ibv_dmah_init_attr vm = ph1, pm;
	struct ibv_dmah *d;
	struct ibv_pd *pd;
	uint64_t max = ra->size < 64 * MIB ? ra->size : 64 * MIB;
	void *buf = NULL;

	ibv_free_device_list(list);
	if (!ctx)
		die("ibv_open_device: %s", strerror(errno));
	vm.comp_mask |= IBV_DMAH_INIT_ATTR_MASK_CPU_ID | IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE;
	vm.cpu_id = (uint32_t)(sched_getcpu() > 0 ? sched_getcpu() : 0);
	vm.tph_mem_type = IBV_TPH_MEM_TYPE_VM;
	pm = vm;
	pm.tph_mem_type = IBV_TPH_MEM_TYPE_PM;
	dmah_rate(ra->out, ctx, "ph1", &ph1, secs);
	dmah_rate(ra->out, ctx, "ph1_cpu_vm", &vm, secs);
	dmah_rate(ra->out, ctx, "ph1_cpu_pm", &pm, secs);
	pd = ibv_alloc_pd(ctx);
	d = ibv_alloc_dmah(ctx, &ph1);
	if (!pd || !d || posix_memalign(&buf, 4096, max))
		die("PD, DMA handle or %llu-byte buffer: %s", (unsigned long long)max,
		    strerror(errno));
	for (uint64_t size = 4 * KIB; size; size = ladder_next(size, max))
		for (int how = 0; how < 3; how++)
			reg_rate(ra->out, pd, d, how, buf, size, secs);
	free(buf);
	ibv_dealloc_dmah(d);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
}

/* ---- orchestrator side ---- */

/* WRITE sizes into the DMAH MRs: 64 KiB when quick, else 4 KiB, 64 KiB, 1 MiB of the sweep. */
static int bw_sizes(uint64_t *out)
{
	static const uint64_t want[] = {4 * KIB, 64 * KIB, MIB};
	int n = 0;

	if (!opt.quick)
		for (int i = 0; i < opt.nsizes; i++)
			for (size_t w = 0; w < N_OF(want); w++)
				if (opt.sizes[i] == want[w])
					out[n++] = want[w];
	if (!n)
		out[n++] = 64 * KIB;
	return n;
}

/* The planned time of the DMA-handle child (rates and registrations). */
static double ops_weight(void)
{
	uint64_t max = opt.max_alloc < 64 * MIB ? opt.max_alloc : 64 * MIB;
	double per = opt.secs / 8 < 0.02 ? 0.02 : opt.secs / 8;
	int n = 0;

	for (uint64_t size = 4 * KIB; size; size = ladder_next(size, max))
		n++;
	return (3 + 3 * n) * per + 0.2;
}

/* Contract: see bench.h. */
double plan_dmah(void)
{
	uint64_t s[3];

	return ops_weight() + bw_sizes(s) * (MR_DMAH_PM + 1) * bench_point_weight();
}

/* Parse the child's "dmah op=... variant=..." lines into "dmah" records. */
static void parse_dmah(const char *res)
{
	for (const char *p = res; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		char op[32], variant[32];
		double size = field(p, "size");
		struct rec *r;
		int err;

		if (sscanf(p, "dmah op=%31s variant=%31s", op, variant) != 2)
			continue;
		r = rec_add("dmah", op, variant, size == size ? (uint64_t)size : 0);
		err = (int)field(p, "errno");
		rec_set(r, "errno", err);
		if (!strcmp(op, "alloc_dealloc"))
			rec_set(r, "per_s", field(p, "per_s"));
		rec_set(r, "us", field(p, "us"));
		rec_set(r, "n", field(p, "n"));
	}
}

/* Contract: see bench.h. The child's rates, then the WRITE points per MR kind. */
void run_dmah(void)
{
	char plain[] = "SOFTVERBS_CC_DMA_BOUNCE=0", *env[] = {plain, NULL};
	static char res[8192];
	uint64_t sizes[3];
	int n = bw_sizes(sizes);
	char s[32];

	progress_step(ops_weight(), "ibv_alloc_dmah/dealloc rate, ibv_reg_mr_ex with and without");
	run_one("dmah", opt.max_alloc, env, res, sizeof(res));
	parse_dmah(res);
	for (int i = 0; i < n; i++)
		for (int k = 0; k <= MR_DMAH_PM; k++) { /* plain and the DMA handles */
			size_str(sizes[i], s, sizeof(s));
			progress_step(bench_point_weight(), "WRITE bandwidth into a %s MR, %s",
				      mr_names[k], s);
			bw_point("dmah_bw", "WRITE", mr_names[k], T_WRITE_BW, sizes[i],
				 (enum mr_kind)k);
		}
}
