/* SPDX-License-Identifier: MIT */
/*
 * pp.h - what the files of sv_rc_pingpong share: the options, the state of
 * one side (struct pp), the buffer layout and the lines both sides send,
 * the small helpers (patterns, checksums, slot addresses), and the
 * functions of each file:
 *   main.c    the verbs: device, PD, buffer, MR, CQ and QP; the ping-pongs,
 *             RDMA WRITE, READ and atomics; teardown; main()
 *   args.c    the command line
 *   tcp.c     the TCP connection and what the two sides tell each other
 *   export.c  -E: the helper process that maps the exported buffer fd
 *   report.c  fail(), and the report printed at the end
 */
#ifndef SV_RC_PINGPONG_PP_H
#define SV_RC_PINGPONG_PP_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define PROG "sv_rc_pingpong"
#define DEFAULT_PORT "18600"
#define PROTO "SVPP1" /* first word of every line on the TCP connection */

/*
 * Buffer layout. A header page, then one slot per role of `size` bytes
 * (rounded up to 64). Every side uses the same layout, so the peer's
 * offsets are ours.
 */
#define HDR_BYTES 4096
#define LABEL_OFF 0 /* text naming the owner: what an -E helper reads */
#define LABEL_LEN 64
#define TAG_OFF 64 /* where an -E helper writes its own text */
#define TAG_LEN 64
#define COUNTER_OFF 128 /* 8 bytes: target of the peer's fetch-and-adds */
#define FETCHED_OFF 192 /* 8 bytes: where our fetch-and-add results land */
#define N_ATOMICS 8

enum slot {
	SL_SEND,
	SL_RECV,
	SL_WSRC,
	SL_WDST,
	SL_RSRC,
	SL_RDST,
	SL_COUNT
};

enum {
	OP_WRITE = 1,
	OP_READ = 2,
	OP_ATOMIC = 4,
	OP_ALL = 7
};

/* wr_id of each kind of work request; completions are counted per kind */
enum wr_kind {
	WR_SEND,
	WR_RECV,
	WR_WRITE,
	WR_READ,
	WR_ATOMIC,
	WR_KINDS
};

/* Pattern tags of the one-shot transfers (ping-pongs use their index). */
#define TAG_WRITE 0x5757u
#define TAG_READ 0x5252u

/* A check that was not run, failed or passed. */
enum verdict {
	V_NONE = -1,
	V_BAD = 0,
	V_OK = 1
};

struct opts {
	const char *host; /* NULL: server */
	const char *port;
	const char *dev;
	uint8_t ib_port;
	int gid_idx;
	size_t size;
	unsigned int iters;
	bool check;
	unsigned int ops;
	bool cc;
	bool export;
	bool dmah;
	bool dmah_st; /* CPU id and memory type given (steering tag) */
	uint32_t dmah_cpu;
	uint8_t dmah_ph;
	uint8_t dmah_mem;
	int timeout; /* seconds for any one wait; 0: no limit */
};

/* What one side tells the other. */
struct hello {
	uint32_t qpn, psn, rkey;
	uint64_t va, len;
	union ibv_gid gid;
	uint64_t size;
	unsigned int iters, ops;
};

/* The last line of the exchange: this side's view of the run. */
struct result {
	unsigned int failures; /* everything this side found wrong */
	int write_in; /* enum verdict: the peer's WRITE into our buffer */
	int atomic_in; /* enum verdict: the peer's fetch-and-adds on our counter */
	uint64_t elapsed_ns, avg_ns, p99_ns; /* ping-pong timing (client only) */
};

struct pp {
	struct opts o;
	bool server;
	unsigned int seed, peer_seed; /* pattern seeds: 'S' server, 'C' client */

	struct ibv_context *ctx;
	struct ibv_device_attr_ex dattr;
	struct ibv_port_attr pattr;
	union ibv_gid gid;
	bool bounce;

	struct ibv_pd *base_pd; /* -U: the parent domain's base */
	struct ibv_pd *pd; /* the PD everything uses: parent domain under -U */
	struct ibv_buf *ibuf;
	uint8_t *buf;
	size_t len, slot;
	struct ibv_dmah *dmah;
	struct ibv_mr *mr;
	struct ibv_cq_ex *cq;
	struct ibv_qp *qp;
	uint32_t psn;

	/* what the buffer turned out to be */
	bool fd_backed;
	off_t fd_size;
	char fd_kind[64];
	const char *reg_verb;

	int sock; /* TCP connection to the peer */
	char peer_name[96];
	struct hello peer;

	unsigned long done[WR_KINDS]; /* completions per kind */
	uint32_t last_recv_len;

	/* -E helper */
	pid_t helper;
	int helper_sock;
	char export_line[256];

	/* results */
	unsigned int failures; /* problems found here (all mismatched messages count once) */
	unsigned int bad_msgs; /* messages with wrong data */
	const char *stage; /* what is going on */
	const char *fail_stage; /* what was going on at the first failure */
	bool pingpong_done;
	int write_out, read_out, atomic_out; /* enum verdict of our own ops */
	uint64_t atomic_first, atomic_last;
	struct result mine, theirs;
	bool have_theirs;
	uint64_t elapsed_ns, avg_ns, p99_ns;
};

/* report.c: print a problem on stderr and count it (first one: its stage). */
__attribute__((format(printf, 2, 3))) void fail(struct pp *p, const char *fmt, ...);
void report(struct pp *p, FILE *out);
void verdict(struct pp *p, FILE *out);

/* args.c: 0, or 2 for a bad command line (after the usage on stderr); -h exits 0 */
int parse_args(struct opts *o, int argc, char **argv);

/* tcp.c */
int wait_fd(int fd, short events, int timeout_s);
int send_line(struct pp *p, const char *line);
int recv_line(struct pp *p, const char *word, char *out, size_t n);
int barrier(struct pp *p, const char *word);
int tcp_server(struct pp *p);
int tcp_client(struct pp *p);
int exchange_hello(struct pp *p);
int exchange_results(struct pp *p);

/* export.c */
int start_helper(struct pp *p);
int run_export(struct pp *p);
void stop_helper(struct pp *p);

/* ------------------------------------------------------------------ */
/* small helpers                                                      */

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* Byte j of the message tagged `tag` from the side seeded `seed`. */
static inline uint8_t pattern(unsigned int seed, unsigned int tag, size_t j)
{
	return (uint8_t)(seed * 73u + tag * 29u + j * 7u + (j >> 8) * 13u);
}

static inline void fill(uint8_t *dst, size_t n, unsigned int seed, unsigned int tag)
{
	for (size_t j = 0; j < n; j++)
		dst[j] = pattern(seed, tag, j);
}

/* The index of the first byte that differs from the pattern, or n. */
static inline size_t mismatch(const uint8_t *src, size_t n, unsigned int seed, unsigned int tag)
{
	for (size_t j = 0; j < n; j++)
		if (src[j] != pattern(seed, tag, j))
			return j;
	return n;
}

static inline uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The starting value of the counter of the side seeded `seed`. */
static inline uint64_t counter_init(unsigned int seed)
{
	return (uint64_t)seed << 8;
}

static inline uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void store64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

static inline uint8_t *slot_ptr(const struct pp *p, enum slot s)
{
	return p->buf + HDR_BYTES + (size_t)s * p->slot;
}

static inline uint64_t slot_off(const struct pp *p, enum slot s)
{
	return HDR_BYTES + (uint64_t)s * p->slot;
}

static inline const char *gid_str(const union ibv_gid *g, char *out, size_t n)
{
	if (!inet_ntop(AF_INET6, g->raw, out, (socklen_t)n))
		snprintf(out, n, "?");
	return out;
}

static inline const char *ph_name(uint8_t ph)
{
	static const char *const names[] = {"bidirectional", "requester", "target",
					    "target, priority"};

	return ph < 4 ? names[ph] : "?";
}

#endif
