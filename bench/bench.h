/* SPDX-License-Identifier: MIT */
/*
 * bench.h - what the files of sv_bench share.
 *
 *   sv_bench.c    options, the plan of a run, main()
 *   util.c        time, errors, sockets, spawning, statistics
 *   results.c     the result records, the table and the JSON
 *   progress.c    the progress lines on stderr
 *   ep.c          a verbs endpoint (device, PD, CQ, RC QP, MR) and posting
 *   verbs_bw.c    WRITE/READ/SEND/atomic bandwidth and message rate
 *   verbs_lat.c   WRITE ping-pong latency
 *   udp.c         UDP loopback baselines
 *   memcpy_bw.c   memcpy baseline
 *   peer.c        running other projects' programs: find, start, bound, notes
 *   ucx.c         ucx_perftest over posix, cma and tcp
 *   fabric.c      libfabric's fi_pingpong over shm and tcp
 *   vm_copy.c     process_vm_writev baseline
 *   peer_targets.c  the targets against the peers (issue 17; peer_targets.h)
 *   paired.c      each target's two sides measured again, alternately
 *   alloc_reg.c   ibv_alloc_buf + ibv_reg_buf_mr against posix_memalign + ibv_reg_mr
 *   dmah.c        ibv_alloc_dmah rate and registration with a DMA handle
 *   loss.c        WRITE under packet loss; N QPs x M processes (loss.h)
 *
 * Every verbs measurement runs in fresh processes: this program
 * re-executed with --role (measure() and run_one() in util.c), reporting
 * "key=value" lines on fd 4.
 */
#ifndef SV_BENCH_H
#define SV_BENCH_H

#define _GNU_SOURCE
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <infiniband/verbs.h>

#define KIB 1024ull
#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- util.c ---- */

extern int bench_failures; /* points that failed (measure, run_one) */
extern double load_start[3], load_end[3]; /* /proc/loadavg around the run */

uint64_t now_ns(void);
double nan_d(void);
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Read or write exactly n bytes on a stream socket; -1 on EOF or error. */
int xfer(int fd, void *p, size_t n, bool out);
/* The same by `deadline` (now_ns(); UINT64_MAX: none); -1 also when it passes. */
int xfer_by(int fd, void *p, size_t n, bool out, uint64_t deadline);
/* True when `fd` has a byte (or EOF) waiting: the peer is done. */
bool ctl_ready(int fd);
/*
 * A ping-pong's warm-up is over after round `k` (from 0): `rounds` were
 * played, or `secs` passed since `start` (now_ns()). The time bound keeps
 * a point short on a loaded machine, where each round may wait for a
 * time slice (1,000 rounds took the 8-byte UDP baseline past its 30 s
 * deadline in a make check sharing 2 cores with four builds).
 */
bool warm_up_done(uint32_t k, uint32_t rounds, uint64_t start, double secs);
/* Sort round trips (ns); the median and p99 one-way latencies in us. */
void rtt_stats(uint64_t *rtt, size_t n, double *med_us, double *p99_us);
/* A child's result line, on the result fd. */
void report(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "key=value" out of a result line (up to its newline); NaN when absent. */
double field(const char *line, const char *key);
/* True when the comma list `list` holds `name`. */
bool has_token(const char *list, const char *name);
/* "4 KiB", "1 MiB", "8 B" */
void size_str(uint64_t s, char *buf, size_t cap);
/* The size after `size` on the x16 ladder from 4 KiB, ending with `max`; 0 past it. */
uint64_t ladder_next(uint64_t size, uint64_t max);
/* A size with an optional K, M or G suffix (powers of 1024); 0 on error. */
uint64_t parse_size(const char *s);

/* Fork and exec argv with env additions, fds at 3 and 4, stdout and stderr to out_fd. */
pid_t spawn(char *const argv[], char *const env[], int fd3, int fd4, int out_fd);
/* Wait until `deadline` (ns), then kill; exit status or -1; adds CPU seconds. */
int reap_child(pid_t pid, uint64_t deadline, double *cpu_s);
/* Read until EOF or `deadline`; NUL-terminated. */
void read_all(int fd, char *buf, size_t cap, uint64_t deadline);

/* ---- peer.c: the programs of other projects ---- */

enum {
	PEER_MAX_NOTES = 16
};
/* Notes on peers left out or failed, printed under the tables and in the JSON. */
extern char peer_notes[PEER_MAX_NOTES][160];
extern int npeer_notes;

/* The path of program `name` on PATH into `path`; false when it is not there. */
bool find_exe(const char *name, char *path, size_t cap);
void peer_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * Server argv, 0.3 s later client argv, both with env additions
 * (NULL-terminated); the client's stdout and stderr into `out`
 * (NUL-terminated). Both are killed (by pid) if still running
 * `bound_s` after the client started (the server 2 s later). The
 * client's exit status, -1 when killed.
 */
int run_peer_pair(char *const srv[], char *const cli[], char *const env[], double bound_s,
		  char *out, size_t cap);

/* ---- the options of this run (sv_bench.c) ---- */

struct opts {
	double secs; /* measured time per point */
	bool quick, quiet, progress, no_peers; /* no_peers: --no-peers (--no-ucx) */
	const char *only; /* comma list of families */
	uint64_t sizes[16]; /* the message size sweep */
	int nsizes;
	uint64_t max_alloc; /* largest alloc/reg size */
	const char *self; /* this executable */
};
extern struct opts opt;

/* ---- the roles of the child processes ---- */

enum test {
	T_WRITE_BW,
	T_READ_BW,
	T_SEND_BW,
	T_FADD_BW,
	T_CSWAP_BW,
	T_WRITE_LAT,
	T_NTESTS
};
extern const char *const test_names[T_NTESTS];

/* How the server registers its buffer (ep.c). */
enum mr_kind {
	MR_PLAIN, /* ibv_reg_mr */
	MR_DMAH_PH0, /* ibv_reg_mr_ex with a DMA handle: PH 0 */
	MR_DMAH_PH1, /* PH 1: streaming stores */
	MR_DMAH_CPU, /* PH 0, a CPU id and volatile memory: placed by a pinned worker */
	MR_DMAH_PM, /* PH 0, a CPU id and persistent memory: flushed before the ACK */
	MR_ALLOC_BUF, /* ibv_alloc_buf + ibv_reg_buf_mr, in both processes */
	MR_NKINDS
};
extern const char *const mr_names[MR_NKINDS];

struct role_args {
	enum test test;
	enum mr_kind mr;
	uint64_t size;
	double secs;
	int sock, out; /* control socketpair, result fd */
};

void verbs_bw_client(const struct role_args *ra);
void verbs_bw_server(const struct role_args *ra);
void verbs_lat_client(const struct role_args *ra);
void verbs_lat_server(const struct role_args *ra);
void udp_bw_client(const struct role_args *ra);
void udp_bw_server(const struct role_args *ra);
void udp_lat_client(const struct role_args *ra);
void udp_lat_server(const struct role_args *ra);
void alloc_reg_role(const struct role_args *ra, bool cc);
void dmah_role(const struct role_args *ra);

/*
 * How the next measure() runs its two processes; reset by it.
 *   pin        client on CPU 0 and server on CPU 1, each one's progress
 *              thread on the other's CPU (SOFTVERBS_PROGRESS_CPU): a
 *              packet is handled as soon as its sender yields (2+ CPUs)
 *   udp_yield  the UDP ping-pong yields between looks, as the verbs one
 *   udp_handoff  a receive thread hands each datagram to the polling
 *              thread through memory (udp.c: the hand-off floor)
 *   no_shm     the devices talk UDP, not the same-host link (SOFTVERBS_SHM=0)
 */
struct measure_mode {
	bool pin, udp_yield, udp_handoff, no_shm;
};
extern struct measure_mode mmode;

/*
 * One two-process measurement (kind "verbs" or "udp"): client and
 * server with the same arguments and SOFTVERBS_BUSY_POLL=busy, placed as
 * mmode says. The client's result line in `res` (empty on failure), CPU
 * seconds of both.
 */
void measure(const char *kind, enum test test, uint64_t size, bool busy, enum mr_kind mr, char *res,
	     size_t cap, double *cpu_s);
/* One single-process role with extra env (NULL-terminated); its output in res. */
int run_one(const char *role, uint64_t size, char *const env[], char *res, size_t cap);

/* ---- results.c ---- */

enum {
	REC_MAXV = 16
};

struct rec {
	const char *fam; /* "bw", "lat", "memcpy", "udp", "ucx", "alloc_reg", "dmah", ... */
	char op[32]; /* "WRITE", "FETCH_ADD", "put_bw", "alloc_dealloc", ... */
	char variant[32]; /* "", "busy_poll", "plain_pd", "cc_bounce", "dmah_ph1", ... */
	uint64_t size;
	int n;
	const char *key[REC_MAXV];
	double val[REC_MAXV];
};

struct rec *rec_add(const char *fam, const char *op, const char *variant, uint64_t size);
void rec_set(struct rec *r, const char *key, double v);
/* The value of `key` of the matching record; NaN if none. */
double rec_get(const char *fam, const char *op, const char *variant, uint64_t size,
	       const char *key);
/*
 * Records made after rec_mark() are numbered from its value on:
 * rec_at(i, key) is the value of `key` of record i (NaN if none), and
 * rec_release(mark) drops every record made since (the paired family
 * measures points again without adding them to the tables).
 */
int rec_mark(void);
double rec_at(int i, const char *key);
void rec_release(int mark);
void print_tables(void);
/* "met", "MISSED" or "not measured" (NaN) for ratio `r` against a bound. */
const char *verdict(double r, double bound, bool at_least);
int write_json(const char *path, double run_s);
/* A JSON number, or null for NaN and infinities. */
void json_num(FILE *f, double v);
extern bool ucx_present;
extern char ucx_note[128];

/* ---- peer_targets.c ---- */

/* The ratio columns of a "bw" record (its GB/s) and of a "lat" record against the peers. */
void peer_ratios_bw(struct rec *r, double gbps);
void peer_ratios_lat(struct rec *r);
/* The peers' lines of the targets summary, under a "targets:" heading if `heading`. */
void peer_targets_print(bool heading);
/* The peers' targets as members of the JSON "targets" object, each after a comma. */
void peer_targets_json(FILE *f);

/* ---- progress.c ---- */

/* Announce a run of `total` weight units (seconds, roughly). */
void progress_begin(double total);
/* A step of `weight` begins: one line "[ 42%  ETA 1m05s] label". */
void progress_step(double weight, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void progress_end(void);

/* ---- the families, run by the orchestrator ---- */

/* verbs_bw.c: one bandwidth point into a record of family `fam`. */
void bw_point(const char *fam, const char *op, const char *variant, enum test t, uint64_t size,
	      enum mr_kind mr);
/* verbs_bw.c: the bandwidth test of operation `op` ("WRITE", "READ", "SEND"); dies if none. */
enum test bw_op_test(const char *op);
/* The planned time of one two-process point (progress ETA). */
double bench_point_weight(void);
/* verbs_lat.c: one WRITE latency point, a "lat" record (variant from the flags). */
void lat_point(uint64_t size, bool busy, bool pin, bool udp);
/* memcpy_bw.c: memcpy of `size` bytes again and again, a "memcpy" record in GB/s. */
void memcpy_point(uint64_t size);
/* udp.c: the 8-byte UDP ping-pong of `variant` ("busy_poll", ...), a "udp" record. */
void udp_pingpong_point(const char *variant);
/*
 * ucx.c: one ucx_perftest point, `test` ("put_bw", "put_lat") over the
 * transport of record variant `variant` ("posix", "cma", "tcp_lo"); a
 * "ucx" record, or only a note when ucx_perftest is missing or fails.
 */
void ucx_one(const char *test, const char *variant, uint32_t size);

void run_memcpy(void);
void run_udp(void);
void run_bw(void);
void run_lat(void);
void run_ucx(void);
void run_alloc_reg(void);
void run_dmah(void);
void run_loss(void);
void run_fabric(void);
void run_vm_copy(void);
void run_paired(void);
/* Planned weight of each family for the progress ETA. */
double plan_memcpy(void);
double plan_udp(void);
double plan_bw(void);
double plan_lat(void);
double plan_ucx(void);
double plan_alloc_reg(void);
double plan_dmah(void);
double plan_loss(void);
double plan_fabric(void);
double plan_vm_copy(void);
double plan_paired(void);

#endif
