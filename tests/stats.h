/* SPDX-License-Identifier: MIT */
/*
 * stats.h - the device counters that SOFTVERBS_STATS=1 prints on stderr
 * at the last close (src/sw/transport/engine.c), read back by tests; and
 * worker processes whose stderr the parent collects to read them from.
 *
 * t_stats_parse(text, &s) adds every device report found in `text` to
 * `s` (several devices, several processes: their sums) and returns how
 * many reports it found; s.lines says which of a report's lines were
 * seen (T_STATS_ALL: all of them). Per-QP lines are not read here
 * (api_stats reads them itself).
 *
 * t_proc_spawn() forks a worker that runs fn(arg, out) with its stderr
 * on a pipe; fn writes its result to `out` (a pipe too) and returns the
 * exit status. t_proc_reap() collects the workers' stderr and results
 * and waits for them. Workers that report a struct t_wres send it with
 * t_wres_send(); t_wres_check() makes the checks every such run makes.
 * t_link_maps() counts the same-host link's rings mapped in this
 * process. Include after harness.h.
 */
#ifndef SV_TESTS_STATS_H
#define SV_TESTS_STATS_H

#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

struct t_stats {
	unsigned long long tx, tx_bytes, rx, rx_bytes;
	unsigned long long retransmits, timeouts, duplicates, tx_again;
	unsigned long long naks_rx[3], naks_tx[3]; /* seq, rnr, err */
	/* malformed icrc no_qp state qkey no_recv out_of_window */
	unsigned long long drops[7];
	unsigned long long fault_drops, fault_dups, fault_reorders;
	unsigned long long wc_err, wc_flush;
	unsigned long long link_tx, link_rx, link_in, link_corrupt; /* same-host link */
	/* resent packets, socket overflows, budget waits, probes, timer deferrals */
	unsigned long long resent, sock_ovfl, budget_waits, probes, deferrals;
	unsigned long long sleeps; /* the progress thread's sleeps in poll(2) */
	unsigned long long leased_sleeps; /* of them, without the links' doorbells */
	unsigned long long lease_stalls; /* leased wake-ups that found packets waiting */
	unsigned long long ip_id_rx, ip_id_refused; /* recovered IPv4 IDs taken, refused */
	/* UDP offloads: GSO sends, their packets, refusals; GRO datagrams, their packets */
	unsigned long long gso_sends, gso_pkts, gso_refused, gro_recvs, gro_pkts;
	/* receive passes by application threads polling an empty CQ, their packets */
	unsigned long long app_passes, app_pkts;
	unsigned long long socks_paced; /* busy-poll passes that did not read the sockets */
	int lines; /* T_STATS_* bits of the lines seen */
};

enum {
	T_STATS_HEAD = 1,
	T_STATS_RETRANS = 2,
	T_STATS_NAKS = 4,
	T_STATS_DROPS = 8,
	T_STATS_FAULTS = 16,
	T_STATS_WC = 32,
	T_STATS_LINK = 64,
	T_STATS_RESENT = 128, /* resent pkts, socket overflows, budget waits, probes, deferrals */
	T_STATS_PROGRESS = 256, /* progress thread: sleeps */
	T_STATS_IPID = 512, /* ip id: recovered, refused */
	T_STATS_OFFLOAD = 1024, /* udp offload: gso sends, pkts, refused, gro recvs, pkts */
	T_STATS_ALL = 2047,
};

/* Adds the device reports in `text` to *s; returns how many there were. */
static inline int t_stats_parse(const char *text, struct t_stats *s)
{
	int reports = 0;

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		unsigned long long v[7];
		const char *nl = strchr(p, '\n'), *tx = strstr(p, ": tx "),
			   *qp = strstr(p, " QP 0x");

		/* "softverbs: NAME ADDRESS: tx ...", not a QP's "softverbs: NAME QP 0x.. RC: tx" */
		if (!strncmp(p, "softverbs: ", 11) && p[11] != ' ' && tx && (!nl || tx < nl) &&
		    (!qp || qp > tx) &&
		    sscanf(tx, ": tx %llu pkts %llu bytes, rx %llu pkts %llu bytes", &v[0], &v[1],
			   &v[2], &v[3]) == 4) {
			s->tx += v[0];
			s->tx_bytes += v[1];
			s->rx += v[2];
			s->rx_bytes += v[3];
			s->lines |= T_STATS_HEAD;
			reports++;
		} else if (sscanf(p,
				  "softverbs:   retransmits %llu timeouts %llu duplicates %llu "
				  "tx_again %llu",
				  &v[0], &v[1], &v[2], &v[3]) == 4) {
			s->retransmits += v[0];
			s->timeouts += v[1];
			s->duplicates += v[2];
			s->tx_again += v[3];
			s->lines |= T_STATS_RETRANS;
		} else if (
			sscanf(p,
			       "softverbs:   naks rx seq %llu rnr %llu err %llu, tx seq %llu rnr "
			       "%llu err %llu",
			       &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) == 6) {
			for (int i = 0; i < 3; i++) {
				s->naks_rx[i] += v[i];
				s->naks_tx[i] += v[3 + i];
			}
			s->lines |= T_STATS_NAKS;
		} else if (
			sscanf(p,
			       "softverbs:   drops malformed %llu icrc %llu no_qp %llu state %llu "
			       "qkey %llu no_recv %llu out_of_window %llu",
			       &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) == 7) {
			for (int i = 0; i < 7; i++)
				s->drops[i] += v[i];
			s->lines |= T_STATS_DROPS;
		} else if (sscanf(p,
				  "softverbs:   faults dropped %llu duplicated %llu reordered %llu",
				  &v[0], &v[1], &v[2]) == 3) {
			s->fault_drops += v[0];
			s->fault_dups += v[1];
			s->fault_reorders += v[2];
			s->lines |= T_STATS_FAULTS;
		} else if (sscanf(p, "softverbs:   completions errors %llu flushed %llu", &v[0],
				  &v[1]) == 2) {
			s->wc_err += v[0];
			s->wc_flush += v[1];
			s->lines |= T_STATS_WC;
		} else if (sscanf(p,
				  "softverbs:   same-host link: sent %llu received %llu packets, "
				  "links in %llu, corrupt %llu",
				  &v[0], &v[1], &v[2], &v[3]) == 4) {
			s->link_tx += v[0];
			s->link_rx += v[1];
			s->link_in += v[2];
			s->link_corrupt += v[3];
			s->lines |= T_STATS_LINK;
		} else if (
			sscanf(p,
			       "softverbs:   resent pkts %llu, socket overflows %llu, budget waits "
			       "%llu, probes %llu, timer deferrals %llu",
			       &v[0], &v[1], &v[2], &v[3], &v[4]) == 5) {
			s->resent += v[0];
			s->sock_ovfl += v[1];
			s->budget_waits += v[2];
			s->probes += v[3];
			s->deferrals += v[4];
			s->lines |= T_STATS_RESENT;
		} else if (sscanf(p, "softverbs:   progress thread: sleeps %llu", &v[0]) == 1) {
			s->sleeps += v[0];
			s->lines |= T_STATS_PROGRESS;
			v[5] = 0; /* (a report before the count was added) */
			if (sscanf(p,
				   "softverbs:   progress thread: sleeps %*u (leased %llu, stalled "
				   "%llu); application threads: passes %llu packets %llu; socket "
				   "reads paced %llu",
				   &v[3], &v[4], &v[1], &v[2], &v[5]) >= 4) {
				s->leased_sleeps += v[3];
				s->lease_stalls += v[4];
				s->app_passes += v[1];
				s->app_pkts += v[2];
				s->socks_paced += v[5];
			}
		} else if (sscanf(p, "softverbs:   ip id: recovered %llu, refused %llu", &v[0],
				  &v[1]) == 2) {
			s->ip_id_rx += v[0];
			s->ip_id_refused += v[1];
			s->lines |= T_STATS_IPID;
		} else if (
			sscanf(p,
			       "softverbs:   udp offload: gso sends %llu pkts %llu refused %llu, "
			       "gro recvs %llu pkts %llu",
			       &v[0], &v[1], &v[2], &v[3], &v[4]) == 5) {
			s->gso_sends += v[0];
			s->gso_pkts += v[1];
			s->gso_refused += v[2];
			s->gro_recvs += v[3];
			s->gro_pkts += v[4];
			s->lines |= T_STATS_OFFLOAD;
		}
	}
	return reports;
}

/*
 * Close `ctx`, the device's last user, capturing its report (stderr) in
 * `text` and reading it into *st: 0, or -1 (a failed check says why)
 * when stderr could not be captured (ctx closed anyway) or the text is
 * not exactly one report with all of the T_STATS_* `lines`.
 */
static inline int t_close_report(struct ibv_context *ctx, char *text, size_t size,
				 struct t_stats *st, int lines)
{
	struct t_capture cap;

	if (!CHECK(t_capture_begin(&cap) == 0)) {
		ibv_close_device(ctx);
		return -1;
	}
	ibv_close_device(ctx); /* the report, at the last close */
	t_capture_end(&cap, text, size);
	memset(st, 0, sizeof(*st));
	return CHECK_MSG(t_stats_parse(text, st) == 1 && (st->lines & lines) == lines,
			 "no device report with the lines %#x at the close:\n%s", lines, text) ?
		       0 :
		       -1;
}

/* The counters that tell how a run went, on one line (after "# "). */
static inline void t_stats_print(const char *what, const struct t_stats *s)
{
	printf("# %s: tx %llu rx %llu packets (link tx %llu rx %llu); retransmits %llu timeouts %llu "
	       "duplicates %llu tx_again %llu; seq NAKs rx %llu tx %llu; faults dropped %llu; "
	       "completions errors %llu flushed %llu\n",
	       what, s->tx, s->rx, s->link_tx, s->link_rx, s->retransmits, s->timeouts,
	       s->duplicates, s->tx_again, s->naks_rx[0], s->naks_tx[0], s->fault_drops, s->wc_err,
	       s->wc_flush);
}

/* A worker process: its stderr (all of it, NUL-terminated) and its result. */
struct t_proc {
	pid_t pid;
	int res_fd, err_fd;
	char *err;
	size_t errlen, errcap;
	void *res;
	size_t res_len, res_got;
	int exited_ok; /* exit status 0 */
};

/*
 * Fork a worker: fn(arg, out) runs with stderr on a pipe to the parent,
 * writes its result (res_len bytes, into res in the parent) to `out` and
 * returns the worker's exit status. `close_fd` (if >= 0) is closed in the
 * worker (the parent's end of a socketpair). 0, or -1 (pid -1).
 */
static inline int t_proc_spawn(struct t_proc *p, int (*fn)(void *arg, int out), void *arg,
			       void *res, size_t res_len, int close_fd)
{
	int rp[2], ep[2];
	pid_t parent;

	memset(p, 0, sizeof(*p));
	p->pid = -1;
	p->res_fd = p->err_fd = -1;
	p->res = res;
	p->res_len = res_len;
	if (pipe(rp))
		return -1;
	if (pipe(ep)) {
		close(rp[0]);
		close(rp[1]);
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	parent = getpid();
	p->pid = fork();
	if (p->pid == 0) {
		t_die_with(parent);
		close(rp[0]);
		close(ep[0]);
		if (close_fd >= 0)
			close(close_fd);
		dup2(ep[1], 2);
		close(ep[1]);
		t_st()->failed = 0; /* the parent's failures are not this worker's */
		_exit(fn(arg, rp[1]));
	}
	close(rp[1]);
	close(ep[1]);
	if (p->pid < 0) {
		close(rp[0]);
		close(ep[0]);
		return -1;
	}
	p->res_fd = rp[0];
	p->err_fd = ep[0];
	return 0;
}

/*
 * Read the workers' stderr and results until all of them closed both
 * (or `idle_ms` passed without anything to read), then wait for them.
 * Returns the number of workers that gave their whole result and exited 0.
 */
static inline int t_proc_reap(struct t_proc *ps, int n, int idle_ms)
{
	int open = 0, good = 0;

	for (int i = 0; i < n; i++)
		open += (ps[i].err_fd >= 0) + (ps[i].res_fd >= 0);
	while (open > 0) {
		struct pollfd pfd[2 * 8];
		int m = 0;

		for (int i = 0; i < n && m < (int)(sizeof(pfd) / sizeof(pfd[0])) - 1; i++) {
			pfd[m++] = (struct pollfd){.fd = ps[i].err_fd, .events = POLLIN};
			pfd[m++] = (struct pollfd){.fd = ps[i].res_fd, .events = POLLIN};
		}
		if (poll(pfd, (nfds_t)m, idle_ms) <= 0)
			break;
		for (int k = 0; k < m; k++) {
			struct t_proc *p = &ps[k / 2];
			ssize_t r;

			if (pfd[k].fd < 0 || !(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (k % 2 == 0) {
				if (p->errcap - p->errlen < 4096) {
					size_t cap = p->errcap ? p->errcap * 2 : 65536;
					char *e = realloc(p->err, cap);

					if (!e) {
						r = 0;
						goto closed;
					}
					p->err = e;
					p->errcap = cap;
				}
				r = read(p->err_fd, p->err + p->errlen, p->errcap - 1 - p->errlen);
				if (r > 0) {
					p->errlen += (size_t)r;
					continue;
				}
			} else {
				r = p->res_got < p->res_len ?
					    read(p->res_fd, (char *)p->res + p->res_got,
						 p->res_len - p->res_got) :
					    0;
				if (r > 0) {
					p->res_got += (size_t)r;
					continue;
				}
			}
closed:
			close(pfd[k].fd);
			if (k % 2 == 0)
				p->err_fd = -1;
			else
				p->res_fd = -1;
			open--;
		}
	}
	for (int i = 0; i < n; i++) {
		int st;

		if (ps[i].err_fd >= 0)
			close(ps[i].err_fd);
		if (ps[i].res_fd >= 0)
			close(ps[i].res_fd);
		ps[i].err_fd = ps[i].res_fd = -1;
		if (!ps[i].err) {
			ps[i].err = malloc(1);
			ps[i].errcap = ps[i].err ? 1 : 0;
		}
		if (ps[i].err)
			ps[i].err[ps[i].errlen] = '\0';
		if (ps[i].pid > 0 && waitpid(ps[i].pid, &st, 0) == ps[i].pid)
			ps[i].exited_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		good += ps[i].exited_ok && ps[i].res_got == ps[i].res_len;
	}
	return good;
}

/* How many same-host link rings this process has mapped (-1: no /proc). */
static inline int t_link_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "softverbs-link") != NULL;
	fclose(f);
	return n;
}

/*
 * A worker's result, for tests whose workers stream and count: how far
 * it got, how long it took, what was wrong (and the first thing, said).
 */
struct t_wres {
	uint64_t done, ms, bad, bad_bytes;
	int setup_failed, failed_checks, flag;
	char first_error[120];
};

/* Counts one wrong thing; the first one is described. */
__attribute__((format(printf, 2, 3))) static inline void t_wres_bad(struct t_wres *r,
								    const char *fmt, ...)
{
	va_list ap;

	if (!r->bad++) {
		va_start(ap, fmt);
		vsnprintf(r->first_error, sizeof(r->first_error), fmt, ap);
		va_end(ap);
	}
}

/* A worker's last step, after its device closed: its result to `out`; the exit status. */
static inline int t_wres_send(struct t_wres *r, int out)
{
	r->failed_checks = t_st()->failed;
	fflush(stderr);
	return write(out, r, sizeof(*r)) == (ssize_t)sizeof(*r) ? 0 : 1;
}

/*
 * After t_proc_reap() of n workers of which `good` were good: their
 * counters added to *st, their first errors printed, and the checks that
 * each reported, exited 0, set up, failed no check and printed one
 * device report.
 */
static inline void t_wres_check(struct t_proc *ps, const struct t_wres *r, int n, int good,
				struct t_stats *st)
{
	int reports = 0, failed = 0, setup = 0;

	for (int i = 0; i < n; i++) {
		reports += t_stats_parse(ps[i].err ? ps[i].err : "", st);
		if (r[i].first_error[0])
			printf("# worker %d: %s\n", i, r[i].first_error);
		failed += r[i].failed_checks;
		setup += r[i].setup_failed;
	}
	CHECK_MSG(good == n, "a worker failed (%d of %d reported and exited 0)", good, n);
	CHECK_MSG(!setup, "setup failed in %d workers", setup);
	CHECK_MSG(!failed, "%d checks failed in the workers", failed);
	CHECK_EQ_INT(reports, n);
}

/* Frees what t_proc_reap() collected. */
static inline void t_proc_free(struct t_proc *p)
{
	free(p->err);
	p->err = NULL;
	p->errlen = p->errcap = 0;
}

/*
 * Two workers, A and B, joined by a socketpair: `*sock` (a field of
 * `cfg`) is set to B's end before B is spawned with fn_b(cfg), then to
 * A's before A is spawned with fn_a(cfg); both are reaped (`idle_ms`)
 * into p[0] (A) and p[1] (B), and if either failed, both stderrs are
 * printed. True if both exited 0. The caller frees p[0] and p[1].
 */
static inline bool t_pair_run(struct t_proc p[2], int (*fn_a)(void *, int),
			      int (*fn_b)(void *, int), void *cfg, int *sock, int idle_ms)
{
	int sv[2];
	bool ok;

	memset(p, 0, 2 * sizeof(*p));
	if (!CHECK(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)))
		return false;
	*sock = sv[1];
	CHECK(!t_proc_spawn(&p[1], fn_b, cfg, NULL, 0, sv[0]));
	*sock = sv[0];
	CHECK(!t_proc_spawn(&p[0], fn_a, cfg, NULL, 0, sv[1]));
	close(sv[0]);
	close(sv[1]);
	ok = CHECK_EQ_INT(t_proc_reap(p, 2, idle_ms), 2);
	if (!ok) /* say why */
		for (int i = 0; i < 2; i++)
			printf("# %c exited %s; its stderr:\n%s\n", "AB"[i],
			       p[i].exited_ok ? "0" : "with a failure", p[i].err ? p[i].err : "");
	return ok;
}

#endif /* SV_TESTS_STATS_H */
