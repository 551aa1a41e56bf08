/* SPDX-License-Identifier: MIT */
/*
 * sv_bench.c - softverbs' benchmark suite: the software device between
 * two processes, next to the loopback limits it depends on (memcpy, UDP)
 * and to UCX's one-sided puts over TCP, all measured in the same run.
 *
 *   sv_bench [--quick] [--secs S] [--sizes LIST] [--max-alloc SIZE]
 *            [--only LIST] [--no-ucx] [--json FILE] [--quiet|--progress]
 *
 * The process started by the user only orchestrates: every verbs
 * measurement runs in fresh processes (this program re-executed with
 * --role), so each point gets its own device (its own 127.0.0.N) and
 * its own SOFTVERBS_* settings. Families (--only takes a comma list):
 *
 *   memcpy     memcpy bandwidth per size (baseline)       memcpy_bw.c
 *   udp        UDP 4 KiB stream, 8-byte busy ping-pong    udp.c
 *   bw         WRITE, READ, SEND bandwidth and message rate per size;
 *              FETCH_ADD, CMP_SWAP message rate            verbs_bw.c
 *   lat        WRITE ping-pong median and p99 per size (busy-poll),
 *              and 8 B with a sleeping progress thread     verbs_lat.c
 *   alloc_reg  ibv_alloc_buf + ibv_reg_buf_mr vs posix_memalign +
 *              ibv_reg_mr, 4 KiB to 1 GiB, plain PD and CC bounce device
 *                                                          alloc_reg.c
 *   dmah       ibv_alloc_dmah rate, ibv_reg_mr_ex with/without a DMA
 *              handle, WRITE bandwidth into DMAH MRs       dmah.c
 *   loss       WRITE 64 KiB and 1 MiB at 0-2% packet loss, over UDP and
 *              the same-host link, against lossless; N QPs x M
 *              processes aggregate WRITE; packets resent per lost  loss.c
 *   vm_copy    process_vm_writev into another process, 64 KiB and
 *              1 MiB (baseline)                            vm_copy.c
 *   ucx        ucx_perftest put_bw/put_lat at 8 B, 64 KiB, 1 MiB over
 *              posix, cma and tcp on lo                    ucx.c
 *   fabric     fi_pingpong at 8 B, 64 KiB, 1 MiB over the shm and tcp
 *              providers                                   fabric.c
 *
 * The peers (ucx, fabric) are left out with a note when their program is
 * missing or fails, and by --no-peers; the targets against them are
 * peer_targets.c's. *
 * Output: plain tables on stdout, JSON with --json, progress lines on
 * stderr (a terminal only, unless --progress; never with --quiet). Exit
 * status 0 when the run completed (a failed point is reported and left
 * empty, and makes the status 1); the targets are reported, never
 * enforced.
 */
#include "bench.h"
#include "loss.h"

#include <sched.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct opts opt = {.secs = 2.0, .max_alloc = GIB};

const char *const test_names[T_NTESTS] = {"write_bw", "read_bw",  "send_bw",
					  "fadd_bw",  "cswap_bw", "write_lat"};

static const uint64_t full_sizes[] = {8, 64, 512, 4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB};
static const uint64_t quick_sizes[] = {8, 4 * KIB, 64 * KIB, MIB};

static const struct family {
	const char *name;
	double (*plan)(void);
	void (*run)(void);
} families[] = {
	{"memcpy", plan_memcpy, run_memcpy},
	{"udp", plan_udp, run_udp},
	{"bw", plan_bw, run_bw},
	{"lat", plan_lat, run_lat},
	{"alloc_reg", plan_alloc_reg, run_alloc_reg},
	{"dmah", plan_dmah, run_dmah},
	{"loss", plan_loss, run_loss},
	{"vm_copy", plan_vm_copy, run_vm_copy},
	{"ucx", plan_ucx, run_ucx},
	{"fabric", plan_fabric, run_fabric},
	{"paired", plan_paired, run_paired},
};

/* True when family `name` runs: named by --only, and not a peer left out by --no-peers. */
static bool family_runs(const char *name)
{
	return has_token(opt.only, name) &&
	       !(opt.no_peers && (!strcmp(name, "ucx") || !strcmp(name, "fabric")));
}

/* The help text, on stdout for --help, else stderr; exits with `status`. */
static void usage(int status)
{
	fprintf(status ? stderr : stdout,
		"usage: sv_bench [options]\n"
		"  --quick          a short run: 0.25 s per point, sizes 8 B, 4 KiB, 64 KiB, 1 MiB,\n"
		"                   alloc/reg up to 16 MiB, loss 8 points (under a minute)\n"
		"  --secs S         measured seconds per point (default 2, quick 0.25)\n"
		"  --sizes LIST     message sizes, comma-separated, K/M suffixes (default\n"
		"                   8,64,512,4K,16K,64K,256K,1M)\n"
		"  --max-alloc SIZE largest alloc/reg size (default 1G, quick 16M)\n"
		"  --only LIST      families: memcpy,udp,bw,lat,alloc_reg,dmah,loss,vm_copy,ucx,\n"
		"                   fabric,paired (default all); loss, vm_copy, ucx, fabric and\n"
		"                   paired have fixed sizes; loss, with --quick, fewer points;\n"
		"                   paired: each target's two sides again, alternately, 3 rounds\n"
		"                   (--quick: 1)\n"
		"  --no-peers       leave out the peers, ucx_perftest and fi_pingpong (--no-ucx:\n"
		"                   the same)\n"
		"  --json FILE      write the results as JSON\n"
		"  --quiet          no progress lines; --progress: progress even when stderr is\n"
		"                   not a terminal\n");
	exit(status);
}

/* --sizes into opt.sizes; exits through usage() on a bad list. */
static void parse_sizes(const char *list)
{
	char *dup = strdup(list), *save = NULL;

	opt.nsizes = 0;
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t v = parse_size(t);

		if (!v || v > 64 * MIB || opt.nsizes == (int)N_OF(opt.sizes))
			usage(2);
		opt.sizes[opt.nsizes++] = v;
	}
	free(dup);
	if (!opt.nsizes)
		usage(2);
}

/* A child process: run the role named on the command line. */
static int run_role(const char *role, const struct role_args *ra)
{
	bool lat = ra->test == T_WRITE_LAT;
	const char *cpu = getenv("SV_BENCH_CPU"); /* measure()'s placement (mmode.pin) */

	if (cpu) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(atoi(cpu), &one);
		if (sched_setaffinity(0, sizeof(one), &one))
			die("sched_setaffinity(%s): %s", cpu, strerror(errno));
	}

	if (!strcmp(role, "verbs-client"))
		lat ? verbs_lat_client(ra) : verbs_bw_client(ra);
	else if (!strcmp(role, "verbs-server"))
		lat ? verbs_lat_server(ra) : verbs_bw_server(ra);
	else if (!strcmp(role, "udp-client"))
		lat ? udp_lat_client(ra) : udp_bw_client(ra);
	else if (!strcmp(role, "udp-server"))
		lat ? udp_lat_server(ra) : udp_bw_server(ra);
	else if (!strcmp(role, "alloc-plain") || !strcmp(role, "alloc-cc"))
		alloc_reg_role(ra, !strcmp(role, "alloc-cc"));
	else if (!strcmp(role, "dmah"))
		dmah_role(ra);
	else if (!strcmp(role, "loss"))
		loss_role(ra);
	else
		usage(2);
	return 0;
}

/* /proc/loadavg's three figures, NaN if unreadable. */
static void loadavg(double l[3])
{
	FILE *f = fopen("/proc/loadavg", "r");

	l[0] = l[1] = l[2] = nan_d();
	if (f) {
		if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3)
			l[0] = nan_d();
		fclose(f);
	}
}

/* Options; a role, or the whole run: plan, families, tables, JSON. */
int main(int argc, char **argv)
{
	struct role_args ra = {.sock = 3, .out = 4, .secs = 2.0};
	const char *json = NULL, *role = NULL, *sizes = NULL;
	bool secs_set = false, alloc_set = false;
	static char exe[4096];
	double total = 0;
	uint64_t t0;
	ssize_t n;
	int rc = 0;

	opt.only = "memcpy,udp,bw,lat,alloc_reg,dmah,loss,vm_copy,ucx,fabric,paired";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--quick")) {
			opt.quick = true;
		} else if (!strcmp(a, "--no-peers") || !strcmp(a, "--no-ucx")) {
			opt.no_peers = true;
		} else if (!strcmp(a, "--quiet")) {
			opt.quiet = true;
		} else if (!strcmp(a, "--progress")) {
			opt.progress = true;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(0);
		} else if (!v) {
			usage(2);
		} else if (!strcmp(a, "--secs")) {
			opt.secs = ra.secs = strtod(v, NULL);
			secs_set = true;
			i++;
		} else if (!strcmp(a, "--sizes")) {
			sizes = v;
			i++;
		} else if (!strcmp(a, "--max-alloc")) {
			opt.max_alloc = parse_size(v);
			alloc_set = true;
			if (opt.max_alloc < 4 * KIB)
				usage(2);
			i++;
		} else if (!strcmp(a, "--json")) {
			json = v;
			i++;
		} else if (!strcmp(a, "--only")) {
			opt.only = v;
			i++;
		} else if (!strcmp(a, "--role")) {
			role = v;
			i++;
		} else if (!strcmp(a, "--size")) {
			ra.size = strtoull(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--mr")) {
			ra.mr = (enum mr_kind)atoi(v);
			if (ra.mr >= MR_NKINDS)
				usage(2);
			i++;
		} else if (!strcmp(a, "--test")) {
			for (size_t t = 0; t < N_OF(test_names); t++)
				if (!strcmp(v, test_names[t]))
					ra.test = (enum test)t;
			i++;
		} else {
			usage(2);
		}
	}
	if (role)
		return run_role(role, &ra);

	if (opt.quick && !secs_set)
		opt.secs = 0.25;
	if (opt.quick && !alloc_set)
		opt.max_alloc = 16 * MIB;
	if (!(opt.secs > 0 && opt.secs <= 60))
		usage(2);
	if (sizes) {
		parse_sizes(sizes);
	} else {
		const uint64_t *s = opt.quick ? quick_sizes : full_sizes;
		size_t ns = opt.quick ? N_OF(quick_sizes) : N_OF(full_sizes);

		for (size_t i = 0; i < ns; i++)
			opt.sizes[opt.nsizes++] = s[i];
	}
	signal(SIGPIPE, SIG_IGN);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	opt.self = n > 0 ? (exe[n] = 0, exe) : argv[0];
	if (opt.no_peers) {
		snprintf(ucx_note, sizeof(ucx_note), "left out (--no-peers)");
		peer_note("peers (ucx_perftest, fi_pingpong) left out (--no-peers)");
	}

	for (size_t f = 0; f < N_OF(families); f++)
		if (family_runs(families[f].name))
			total += families[f].plan();
	loadavg(load_start);
	t0 = now_ns();
	progress_begin(total);
	for (size_t f = 0; f < N_OF(families); f++)
		if (family_runs(families[f].name))
			families[f].run();
	progress_end();
	loadavg(load_end);
	print_tables();
	if (json && write_json(json, (double)(now_ns() - t0) / 1e9))
		rc = 1;
	if (bench_failures) {
		fprintf(stderr, "sv_bench: %d point(s) failed\n", bench_failures);
		rc = 1;
	}
	return rc;
}
