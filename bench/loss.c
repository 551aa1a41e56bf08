/* SPDX-License-Identifier: MIT */
/*
 * loss.c - the loss family: RDMA WRITE throughput under random packet
 * loss, as a fraction of the lossless figure of the same run, over UDP
 * (SOFTVERBS_SHM=0) and over the same-host link, with the packets sent
 * again per packet lost; and N QPs x M processes aggregate WRITE.
 *
 *   loss      one-way, two processes, one QP: WRITE 64 KiB and 1 MiB at
 *             0, 0.1, 0.5, 1 and 2% loss (--quick: 64 KiB at 0, 0.5, 2%)
 *   loss_qps  M processes in a ring (each writes into the next), N QPs
 *             each way per process, 16 KiB WRITEs, N = 1, 64, 1024, M = 2, 4,
 *             at 0 and 1% loss (--quick: 1024 x 4 over UDP only)
 *
 * Loss is the device's fault injection, SOFTVERBS_FAULT=drop=F,side=tx in
 * every process of the point: each process drops each packet it sends
 * (requests and ACKs alike) with probability F. The counters are the
 * devices' SOFTVERBS_STATS=1 totals, summed over the processes
 * (loss_stats.c); the processes themselves are loss_role.c.
 */
#include "loss.h"

#include <errno.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOSS_MAXP 4 /* processes of a point, at most */

struct lpoint {
	bool udp, oneway;
	double drop; /* fraction of the packets each process sends */
	int procs, qps, depth;
	uint64_t size;
};

/* The sums over a point's processes (NaN: not measured). */
struct lsum {
	double gbps, maxgap_ms, stalled, verified, errs;
	double lost, retx, resent, excess, overflows, rcvbuf;
};

static const double full_drops[] = {0, 0.001, 0.005, 0.01, 0.02};
static const double quick_drops[] = {0, 0.005, 0.02};
static const uint64_t full_sizes[] = {64 * KIB, MIB};
static const int grid_qps[] = {1, 64, 1024};
static const int grid_procs[] = {2, 4};
#define GRID_SIZE (16 * KIB)

/* The processes of a point and their sockets. */
struct lprocs {
	int n, fd[LOSS_MAXP];
	pid_t pid[LOSS_MAXP];
	struct loss_hello h[LOSS_MAXP];
	struct ep_addr *addr[LOSS_MAXP]; /* tx QPs' addresses, then rx QPs' */
};

/* Start the processes of `p`, each with its own socket on fd 3. */
static void start(struct lprocs *ps, const struct lpoint *p)
{
	static char env[LOSS_MAXP][6][96];
	char secs[32], size[32];
	char *argv[] = {(char *)opt.self,
			(char *)"--role",
			(char *)"loss",
			(char *)"--size",
			size,
			(char *)"--secs",
			secs,
			NULL};

	snprintf(secs, sizeof(secs), "%.3f", opt.secs);
	snprintf(size, sizeof(size), "%llu", (unsigned long long)p->size);
	memset(ps, 0, sizeof(*ps));
	ps->n = p->procs;
	for (int r = 0; r < p->procs; r++) {
		char *e[6] = {env[r][0], env[r][1], env[r][2], env[r][3], env[r][4], NULL};
		int sv[2];

		snprintf(env[r][0], 96, "SV_BENCH_LOSS=%d,%d,%d,%d,%d", r, p->procs, p->qps,
			 p->depth, p->oneway);
		snprintf(env[r][1], 96, "SOFTVERBS_FAULT=drop=%g,side=tx", p->drop);
		snprintf(env[r][2], 96, "SOFTVERBS_SHM=%d", p->udp ? 0 : 1);
		snprintf(env[r][3], 96, "SOFTVERBS_STATS=1");
		snprintf(env[r][4], 96, "SOFTVERBS_BUSY_POLL=0");
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			die("socketpair: %s", strerror(errno));
		ps->pid[r] = spawn(argv, e, sv[1], -1, -1);
		close(sv[1]);
		ps->fd[r] = sv[0];
	}
}

/* Kill what still runs, close the sockets, free the addresses. */
static void stop(struct lprocs *ps, uint64_t deadline)
{
	int failed = 0;

	for (int r = 0; r < ps->n; r++) {
		if (reap_child(ps->pid[r], deadline, NULL))
			failed++;
		close(ps->fd[r]);
		free(ps->addr[r]);
	}
	if (failed)
		fprintf(stderr, "sv_bench: loss: %d of %d processes failed\n", failed, ps->n);
}

/* Every process's addresses in, then each one's peers out: rank r's tx QPs
 * write into rank r+1's rx QPs. -1 on a process gone or late. */
static int relay(struct lprocs *ps, uint64_t deadline)
{
	for (int r = 0; r < ps->n; r++) {
		size_t len;

		if (xfer_by(ps->fd[r], &ps->h[r], sizeof(ps->h[r]), false, deadline) ||
		    ps->h[r].ntx > 4096 || ps->h[r].nrx > 4096)
			return -1;
		len = (ps->h[r].ntx + ps->h[r].nrx) * sizeof(struct ep_addr);
		ps->addr[r] = malloc(len + 1);
		if (!ps->addr[r] || xfer_by(ps->fd[r], ps->addr[r], len, false, deadline))
			return -1;
	}
	for (int r = 0; r < ps->n; r++) {
		int next = (r + 1) % ps->n, prev = (r + ps->n - 1) % ps->n;
		const struct loss_hello *h = &ps->h[r];

		if (h->ntx != ps->h[next].nrx || h->nrx != ps->h[prev].ntx)
			return -1;
		if (xfer_by(ps->fd[r], ps->addr[next] + ps->h[next].ntx,
			    h->ntx * sizeof(struct ep_addr), true, deadline) ||
		    xfer_by(ps->fd[r], ps->addr[prev], h->nrx * sizeof(struct ep_addr), true,
			    deadline))
			return -1;
	}
	return 0;
}

/* One byte from every process by `deadline` into c[]; -1 if any is missing. */
static int gather(struct lprocs *ps, char *c, uint64_t deadline)
{
	for (int r = 0; r < ps->n; r++)
		if (xfer_by(ps->fd[r], &c[r], 1, false, deadline))
			return -1;
	return 0;
}

/* Add one process's result line into *s. */
static void add_line(struct lsum *s, const char *line, uint64_t size)
{
	double ns = field(line, "ns"), v = field(line, "verified");

	if (ns > 0)
		s->gbps += field(line, "done") * (double)size / ns;
	if (field(line, "maxgap_ns") / 1e6 > s->maxgap_ms)
		s->maxgap_ms = field(line, "maxgap_ns") / 1e6;
	s->stalled = s->stalled || field(line, "stalled") > 0 ? 1 : 0;
	if (v == 0 || (v == v && s->verified != 0))
		s->verified = v; /* a mismatch wins, then a check */
	s->errs += field(line, "errs");
	s->lost += field(line, "lost");
	s->retx += field(line, "retx");
	s->resent += field(line, "resent");
	s->overflows += field(line, "overflows");
	/* a stalled process's posted requests were not all sent: no figure */
	s->excess += field(line, "stalled") > 0 ?
			     nan_d() :
			     field(line, "tx_pkts") - field(line, "posted") * field(line, "ppm");
}

/*
 * Contract: run point `p`, its sums in *s; false (and a failed point) when
 * a process failed or missed the orchestrator's deadlines, which lie past
 * the processes' own bounds.
 */
static bool run_point(const struct lpoint *p, struct lsum *s)
{
	double secs = opt.secs, rcv0 = loss_rcvbuf_errors();
	uint64_t setup = now_ns() + 30ull * 1000000000ull, run = setup;
	char c[LOSS_MAXP], go[LOSS_MAXP];
	struct lprocs ps;
	bool ok = false;

	memset(s, 0, sizeof(*s));
	s->verified = nan_d();
	start(&ps, p);
	if (relay(&ps, setup) || gather(&ps, c, setup))
		goto out;
	memset(go, LOSS_GO, sizeof(go));
	for (int r = 0; r < ps.n; r++)
		if (xfer_by(ps.fd[r], &go[r], 1, true, setup))
			goto out;
	run = now_ns() + (uint64_t)((secs * 1.2 + 2 * (1 + 2 * secs) + 20) * 1e9);
	if (gather(&ps, c, run))
		goto out;
	for (int r = 0; r < ps.n; r++) {
		int prev = (r + ps.n - 1) % ps.n;

		go[r] = c[prev] == LOSS_WRITTEN && ps.h[prev].ntx ? LOSS_CHECK : LOSS_SKIP;
		if (xfer_by(ps.fd[r], &go[r], 1, true, run))
			goto out;
	}
	ok = true;
	for (int r = 0; r < ps.n; r++) {
		char line[512];

		read_all(ps.fd[r], line, sizeof(line), run + 30ull * 1000000000ull);
		if (strncmp(line, "loss ", 5))
			ok = false;
		else
			add_line(s, line, p->size);
	}
out:
	stop(&ps, run + 35ull * 1000000000ull);
	s->rcvbuf = loss_rcvbuf_errors() - rcv0;
	if (!ok) {
		fprintf(stderr, "sv_bench: loss point %s %d QPs x %d, %llu B, drop %g failed\n",
			p->udp ? "udp" : "shm", p->qps, p->procs, (unsigned long long)p->size,
			p->drop);
		bench_failures++;
	}
	return ok;
}

/* The values both families share, from the sums and the lossless figure `base`. */
static void set_common(struct rec *r, const struct lsum *s, const struct lpoint *p, double base)
{
	rec_set(r, "drop", p->drop);
	rec_set(r, "gbps", s->gbps);
	rec_set(r, "vs_lossless", s->gbps / base);
	rec_set(r, "max_gap_ms", s->maxgap_ms);
	rec_set(r, "stalled", s->stalled);
	rec_set(r, "verified", s->verified);
	rec_set(r, "err_wc", s->errs);
	rec_set(r, "lost", s->lost);
	rec_set(r, "retx_per_lost", s->lost > 0 ? s->retx / s->lost : nan_d());
	rec_set(r, "excess_per_lost", s->lost > 0 ? s->excess / s->lost : nan_d());
	rec_set(r, "resent_per_lost", s->lost > 0 ? s->resent / s->lost : nan_d());
	if (p->drop == 0.01 && s->lost > 0) {
		double rs = s->resent / s->lost, ex = s->excess / s->lost;

		if (rs != rs)
			loss_tgt.resent_missing = true;
		else if (!(loss_tgt.worst_resent >= rs))
			loss_tgt.worst_resent = rs;
		if (!(loss_tgt.worst_excess >= ex))
			loss_tgt.worst_excess = ex;
	}
}

/* A point measured into a record of `fam`; returns its throughput (NaN if it failed). */
static double point(const char *fam, const char *variant, const struct lpoint *p, double base)
{
	struct rec *r = rec_add(fam, "WRITE", variant, p->size);
	struct lsum s;

	if (!run_point(p, &s)) { /* nothing of it is a figure */
		double nan = nan_d();

		s = (struct lsum){nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan};
	}
	set_common(r, &s, p, p->drop == 0 ? s.gbps : base);
	if (!strcmp(fam, "loss_qps")) {
		bool kern = s.overflows != s.overflows;

		rec_set(r, "qps", p->qps);
		rec_set(r, "procs", p->procs);
		rec_set(r, "overflows", s.overflows);
		rec_set(r, "kern_rcvbuf", p->udp ? s.rcvbuf : nan_d());
		if (p->udp && p->qps == 1024 && p->procs == 4) {
			loss_tgt.clean_errs += s.errs;
			loss_tgt.clean_overflows += kern ? s.rcvbuf : s.overflows;
			loss_tgt.overflows_from_kernel = kern;
		}
	}
	return s.gbps;
}

/* The drops of this run. */
static const double *drops(size_t *n)
{
	*n = opt.quick ? N_OF(quick_drops) : N_OF(full_drops);
	return opt.quick ? quick_drops : full_drops;
}

/* The number of points of this run, for the plan. */
static size_t npoints(size_t *grid)
{
	size_t ndrops;

	drops(&ndrops);
	*grid = opt.quick ? 2 : 2 * N_OF(grid_procs) * N_OF(grid_qps) * 2;
	return (opt.quick ? 1 : N_OF(full_sizes)) * ndrops * 2;
}

/* Contract: see bench.h. */
double plan_loss(void)
{
	size_t grid, sweep = npoints(&grid);

	return (double)(sweep + grid) * (opt.secs * 1.2 + 1.0);
}

/* The one-way sweep: per link and size, lossless first. */
static void run_sweep(void)
{
	size_t ndrops, nsz = opt.quick ? 1 : N_OF(full_sizes);
	const double *d = drops(&ndrops);

	for (int udp = 1; udp >= 0; udp--)
		for (size_t z = 0; z < nsz; z++) {
			double base = nan_d();

			for (size_t i = 0; i < ndrops; i++) {
				struct lpoint p = {.udp = udp,
						   .oneway = true,
						   .drop = d[i],
						   .procs = 2,
						   .qps = 1,
						   .size = full_sizes[z]};
				char v[32], s[16];

				p.depth = p.size >= MIB ? 16 : 64;
				size_str(p.size, s, sizeof(s));
				snprintf(v, sizeof(v), "%s %g%%", udp ? "udp" : "shm", d[i] * 100);
				progress_step(opt.secs * 1.2 + 1.0, "WRITE %s, %g%% loss, over %s",
					      s, d[i] * 100, udp ? "UDP" : "the same-host link");
				if (i == 0)
					base = point("loss", v, &p, base);
				else
					point("loss", v, &p, base);
			}
		}
}

/* N QPs x M processes in a ring, 16 KiB WRITEs, lossless then 1%. */
static void run_grid(void)
{
	static const double grid_drops[] = {0, 0.01};

	for (int udp = 1; udp >= 0; udp--)
		for (size_t m = 0; m < N_OF(grid_procs); m++)
			for (size_t q = 0; q < N_OF(grid_qps); q++) {
				double base = nan_d();

				if (opt.quick &&
				    (!udp || grid_procs[m] != 4 || grid_qps[q] != 1024))
					continue;
				for (size_t i = 0; i < N_OF(grid_drops); i++) {
					struct lpoint p = {.udp = udp,
							   .drop = grid_drops[i],
							   .procs = grid_procs[m],
							   .qps = grid_qps[q],
							   .size = GRID_SIZE};
					char v[32];
					double g;

					p.depth = p.qps >= 128 ? 1 : 128 / p.qps;
					snprintf(v, sizeof(v), "%s %dx%d %g%%", udp ? "udp" : "shm",
						 p.qps, p.procs, p.drop * 100);
					progress_step(
						opt.secs * 1.2 + 1.0,
						"WRITE 16 KiB, %d QPs x %d processes, %g%% loss, "
						"over %s",
						p.qps, p.procs, p.drop * 100,
						udp ? "UDP" : "the same-host link");
					g = point("loss_qps", v, &p, base);
					if (i == 0)
						base = g;
				}
			}
}

/* Contract: see bench.h. */
void run_loss(void)
{
	memset(&loss_tgt, 0, sizeof(loss_tgt));
	loss_tgt.ran = true;
	loss_tgt.worst_resent = loss_tgt.worst_excess = nan_d();
	run_sweep();
	run_grid();
}
