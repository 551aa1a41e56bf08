/* SPDX-License-Identifier: MIT */
/*
 * sv_rc_pingpong - an RC ping-pong between two processes that shows the
 * rdma-core 65 memory APIs at work:
 *
 *   - the data buffer comes from ibv_alloc_buf() and is registered with
 *     ibv_reg_buf_mr(), or with ibv_reg_mr_ex(BUF|ADDR|DMAH) under -H;
 *   - -U puts the buffer, the CQ (ibv_create_cq_ex + MASK_PD) and the QP
 *     on a parent domain with ALLOW_CC_UNPROTECTED_ALLOC, which is what a
 *     program must do on a device that needs DMA bounce (CoCo guests);
 *   - -E exports the buffer's fd (ibv_export_buf_dmabuf_fd) to a helper
 *     process, which maps it and reports what it reads;
 *   - -H / --dmah registers the buffer with a DMA handle (ibv_alloc_dmah)
 *     carrying TPH hints: CPU id, processing hint and memory type.
 *
 * Without a host argument it is the server, with one the client. The two
 * sides swap QPN, PSN, GID, rkey and buffer address over TCP, run -n
 * SEND ping-pongs of -s bytes (the client times them), optionally RDMA
 * WRITE, RDMA READ and fetch-and-add on each other's buffer (-o), check
 * everything, and each prints a short report. Exit status: 0 when every
 * check passed on both sides, 1 on any failure, 2 for a bad command line.
 *
 * Uses nothing but the public verbs API.
 */
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

static const char *const wr_kind_name[WR_KINDS] = {"SEND", "RECV", "RDMA WRITE", "RDMA READ",
						   "fetch-and-add"};

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

/* ------------------------------------------------------------------ */
/* small helpers                                                      */

__attribute__((format(printf, 2, 3))) static void fail(struct pp *p, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (p && !p->failures++)
		p->fail_stage = p->stage ? p->stage : "setup";
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* Byte j of the message tagged `tag` from the side seeded `seed`. */
static uint8_t pattern(unsigned int seed, unsigned int tag, size_t j)
{
	return (uint8_t)(seed * 73u + tag * 29u + j * 7u + (j >> 8) * 13u);
}

static void fill(uint8_t *dst, size_t n, unsigned int seed, unsigned int tag)
{
	for (size_t j = 0; j < n; j++)
		dst[j] = pattern(seed, tag, j);
}

/* The index of the first byte that differs from the pattern, or n. */
static size_t mismatch(const uint8_t *src, size_t n, unsigned int seed, unsigned int tag)
{
	for (size_t j = 0; j < n; j++)
		if (src[j] != pattern(seed, tag, j))
			return j;
	return n;
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The starting value of the counter of the side seeded `seed`. */
static uint64_t counter_init(unsigned int seed)
{
	return (uint64_t)seed << 8;
}

static uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void store64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

static uint8_t *slot_ptr(const struct pp *p, enum slot s)
{
	return p->buf + HDR_BYTES + (size_t)s * p->slot;
}

static uint64_t slot_off(const struct pp *p, enum slot s)
{
	return HDR_BYTES + (uint64_t)s * p->slot;
}

static const char *gid_str(const union ibv_gid *g, char *out, size_t n)
{
	if (!inet_ntop(AF_INET6, g->raw, out, (socklen_t)n))
		snprintf(out, n, "?");
	return out;
}

static const char *ph_name(uint8_t ph)
{
	static const char *const names[] = {"bidirectional", "requester", "target",
					    "target, priority"};

	return ph < 4 ? names[ph] : "?";
}

/* ------------------------------------------------------------------ */
/* command line                                                       */

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " [options]         (server)\n"
		   "       " PROG " [options] HOST    (client)\n"
		   "An RC ping-pong over the verbs API between a server and a client.\n"
		   "  -p, --port=PORT        TCP port of the exchange (default " DEFAULT_PORT
		   "; a server\n"
		   "                         given 0 takes a free one and prints it)\n"
		   "  -d, --ib-dev=NAME      device to use (default: the first one)\n"
		   "  -i, --ib-port=N        port of the device (default 1)\n"
		   "  -g, --gid-idx=N        local GID index (default 0)\n"
		   "  -s, --size=BYTES       message size (default 4096)\n"
		   "  -n, --iters=N          number of ping-pongs (default 1000)\n"
		   "  -c, --chk              check the data of every message received\n"
		   "  -o, --ops=LIST         also write, read, atomic (comma-separated) or all\n"
		   "                         against the peer's buffer\n"
		   "  -U, --allow-cc-unprotected\n"
		   "                         buffer, CQ and QP on a parent domain with\n"
		   "                         ALLOW_CC_UNPROTECTED_ALLOC (needed on a CC DMA\n"
		   "                         bounce device)\n"
		   "  -E, --export           export the buffer's fd to a helper process that\n"
		   "                         maps it (needs an fd-backed buffer: -U on a bounce\n"
		   "                         device)\n"
		   "  -H, --dmah[=CPU,PH,MEM]\n"
		   "                         register with a DMA handle: CPU id, processing hint\n"
		   "                         0-3 and memory type vm or pm; PH alone gives no\n"
		   "                         steering tag (default: first allowed CPU,0,vm)\n"
		   "  -t, --timeout=SEC      give up on any one wait after SEC s (default 60;\n"
		   "                         0: wait forever)\n"
		   "  -h, --help             this help\n"
		   "Both sides must use the same -s, -n and -o.\n");
}

static int first_allowed_cpu(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 0;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			return c;
	return 0;
}

static bool parse_ulong(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

/* "CPU,PH,MEM" or "PH". */
static bool parse_dmah(struct opts *o, const char *arg)
{
	char tmp[64], *f[3] = {NULL, NULL, NULL}, *save = NULL;
	unsigned long v;
	int n = 0;

	o->dmah = true;
	o->dmah_st = true;
	o->dmah_cpu = (uint32_t)first_allowed_cpu();
	o->dmah_ph = 0;
	o->dmah_mem = IBV_TPH_MEM_TYPE_VM;
	if (!arg)
		return true;
	if (strlen(arg) >= sizeof(tmp))
		return false;
	strcpy(tmp, arg);
	for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (n == 3)
			return false;
		f[n++] = t;
	}
	if (n == 1) { /* PH only */
		o->dmah_st = false;
		if (!parse_ulong(f[0], 255, &v))
			return false;
		o->dmah_ph = (uint8_t)v;
		return true;
	}
	if (n != 3 || !parse_ulong(f[0], UINT32_MAX, &v))
		return false;
	o->dmah_cpu = (uint32_t)v;
	if (!parse_ulong(f[1], 255, &v))
		return false;
	o->dmah_ph = (uint8_t)v;
	if (!strcmp(f[2], "vm"))
		o->dmah_mem = IBV_TPH_MEM_TYPE_VM;
	else if (!strcmp(f[2], "pm"))
		o->dmah_mem = IBV_TPH_MEM_TYPE_PM;
	else
		return false;
	return true;
}

static bool parse_ops(struct opts *o, const char *arg)
{
	char tmp[64], *save = NULL;

	if (strlen(arg) >= sizeof(tmp))
		return false;
	strcpy(tmp, arg);
	o->ops = 0;
	for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "write"))
			o->ops |= OP_WRITE;
		else if (!strcmp(t, "read"))
			o->ops |= OP_READ;
		else if (!strcmp(t, "atomic"))
			o->ops |= OP_ATOMIC;
		else if (!strcmp(t, "all"))
			o->ops |= OP_ALL;
		else
			return false;
	}
	return o->ops != 0;
}

/* 0, or 2 after a message on stderr. */
static int parse_args(struct opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"port", required_argument, NULL, 'p'},
		{"ib-dev", required_argument, NULL, 'd'},
		{"ib-port", required_argument, NULL, 'i'},
		{"gid-idx", required_argument, NULL, 'g'},
		{"size", required_argument, NULL, 's'},
		{"iters", required_argument, NULL, 'n'},
		{"chk", no_argument, NULL, 'c'},
		{"ops", required_argument, NULL, 'o'},
		{"allow-cc-unprotected", no_argument, NULL, 'U'},
		{"export", no_argument, NULL, 'E'},
		{"dmah", optional_argument, NULL, 'D'},
		{"timeout", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	unsigned long v;
	int c;

	memset(o, 0, sizeof(*o));
	o->port = DEFAULT_PORT;
	o->ib_port = 1;
	o->size = 4096;
	o->iters = 1000;
	o->timeout = 60;

	while ((c = getopt_long(argc, argv, "p:d:i:g:s:n:co:UEH:t:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (!parse_ulong(optarg, 65535, &v))
				goto bad;
			o->port = optarg;
			break;
		case 'd':
			o->dev = optarg;
			break;
		case 'i':
			if (!parse_ulong(optarg, 255, &v) || v == 0)
				goto bad;
			o->ib_port = (uint8_t)v;
			break;
		case 'g':
			if (!parse_ulong(optarg, INT_MAX, &v))
				goto bad;
			o->gid_idx = (int)v;
			break;
		case 's':
			if (!parse_ulong(optarg, 1ul << 30, &v) || v == 0)
				goto bad;
			o->size = v;
			break;
		case 'n':
			if (!parse_ulong(optarg, 100000000, &v) || v == 0)
				goto bad;
			o->iters = (unsigned int)v;
			break;
		case 'c':
			o->check = true;
			break;
		case 'o':
			if (!parse_ops(o, optarg))
				goto bad;
			break;
		case 'U':
			o->cc = true;
			break;
		case 'E':
			o->export = true;
			break;
		case 'H':
		case 'D':
			if (!parse_dmah(o, optarg))
				goto bad;
			break;
		case 't':
			if (!parse_ulong(optarg, 86400, &v))
				goto bad;
			o->timeout = (int)v;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		o->host = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, PROG ": one host at most\n");
		usage(stderr);
		return 2;
	}
	if (o->host && !strcmp(o->port, "0")) {
		fprintf(stderr, PROG ": a client needs the server's port, not 0\n");
		return 2;
	}
	return 0;
bad:
	fprintf(stderr, PROG ": invalid value for -%c: '%s'\n", c == 'D' ? 'H' : c,
		optarg ? optarg : "");
	usage(stderr);
	return 2;
}

/* ------------------------------------------------------------------ */
/* TCP exchange                                                       */

/* Wait until `fd` is ready for `events`; -1 with errno ETIMEDOUT after the timeout. */
static int wait_fd(int fd, short events, int timeout_s)
{
	struct pollfd pfd = {.fd = fd, .events = events};
	int r;

	do
		r = poll(&pfd, 1, timeout_s ? timeout_s * 1000 : -1);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		errno = ETIMEDOUT;
	return r > 0 ? 0 : -1;
}

static int send_line(struct pp *p, const char *line)
{
	size_t n = strlen(line), done = 0;

	while (done < n) {
		ssize_t r = send(p->sock, line + done, n - done, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fail(p, "sending to the peer: %s", strerror(errno));
			return -1;
		}
		done += (size_t)r;
	}
	return 0;
}

/* One line (without its newline) that starts with `word`. */
static int recv_line(struct pp *p, const char *word, char *out, size_t n)
{
	size_t len = 0;

	for (;;) {
		char ch;
		ssize_t r;

		if (wait_fd(p->sock, POLLIN, p->o.timeout)) {
			fail(p, "waiting for the peer (%s): %s", word, strerror(errno));
			return -1;
		}
		r = recv(p->sock, &ch, 1, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r < 0)
				fail(p, "receiving %s from the peer: %s", word, strerror(errno));
			else
				fail(p, "the peer closed the connection while we waited for %s",
				     word);
			return -1;
		}
		if (ch == '\n')
			break;
		if (len + 1 >= n) {
			fail(p, "over-long line from the peer");
			return -1;
		}
		out[len++] = ch;
	}
	out[len] = '\0';
	if (strncmp(out, word, strlen(word)) || (out[strlen(word)] != ' ' && out[strlen(word)])) {
		fail(p, "unexpected line from the peer: '%.60s' (expected %s)", out, word);
		return -1;
	}
	return 0;
}

/* Both sides say `word` and wait for the other's. */
static int barrier(struct pp *p, const char *word)
{
	char line[64];

	snprintf(line, sizeof(line), "%s\n", word);
	if (send_line(p, line))
		return -1;
	return recv_line(p, word, line, sizeof(line));
}

static void name_peer(struct pp *p, const struct sockaddr *sa, socklen_t salen)
{
	char host[NI_MAXHOST], serv[NI_MAXSERV];

	if (getnameinfo(sa, salen, host, sizeof(host), serv, sizeof(serv),
			NI_NUMERICHOST | NI_NUMERICSERV))
		snprintf(p->peer_name, sizeof(p->peer_name), "?");
	else
		snprintf(p->peer_name, sizeof(p->peer_name), "%.64s port %.8s", host, serv);
}

static int tcp_server(struct pp *p)
{
	struct addrinfo hints = {.ai_flags = AI_PASSIVE,
				 .ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM},
			*res, *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int lfd = -1, one = 1, r;

	r = getaddrinfo(NULL, p->o.port, &hints, &res);
	if (r) {
		fail(p, "TCP port %s: %s", p->o.port, gai_strerror(r));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		lfd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (lfd < 0)
			continue;
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(lfd, ai->ai_addr, ai->ai_addrlen) && !listen(lfd, 1))
			break;
		close(lfd);
		lfd = -1;
	}
	freeaddrinfo(res);
	if (lfd < 0) {
		fail(p, "cannot listen on TCP port %s: %s", p->o.port, strerror(errno));
		return -1;
	}
	if (getsockname(lfd, (struct sockaddr *)&ss, &sl) == 0) {
		char serv[NI_MAXSERV] = "?";

		getnameinfo((struct sockaddr *)&ss, sl, NULL, 0, serv, sizeof(serv),
			    NI_NUMERICSERV);
		printf(PROG ": server waiting for a client on TCP port %s\n", serv);
		fflush(stdout);
	}
	if (wait_fd(lfd, POLLIN, p->o.timeout)) {
		fail(p, "no client came within %d s (-t): %s", p->o.timeout, strerror(errno));
		close(lfd);
		return -1;
	}
	sl = sizeof(ss);
	p->sock = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
	if (p->sock < 0) {
		fail(p, "accept: %s", strerror(errno));
		close(lfd);
		return -1;
	}
	name_peer(p, (struct sockaddr *)&ss, sl);
	close(lfd);
	return 0;
}

static int tcp_client(struct pp *p)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *ai;
	uint64_t end = now_ns() + (uint64_t)p->o.timeout * 1000000000u;
	int r, err = 0;

	r = getaddrinfo(p->o.host, p->o.port, &hints, &res);
	if (r) {
		fail(p, "%s port %s: %s", p->o.host, p->o.port, gai_strerror(r));
		return -1;
	}
	/* the server may still be setting up: retry refused connections */
	for (;;) {
		for (ai = res; ai; ai = ai->ai_next) {
			p->sock = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
					 ai->ai_protocol);
			if (p->sock < 0) {
				err = errno;
				continue;
			}
			if (!connect(p->sock, ai->ai_addr, ai->ai_addrlen))
				break;
			err = errno;
			close(p->sock);
			p->sock = -1;
		}
		if (p->sock >= 0 || err != ECONNREFUSED || (p->o.timeout && now_ns() > end))
			break;
		usleep(100000);
	}
	if (p->sock >= 0)
		name_peer(p, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(res);
	if (p->sock < 0) {
		fail(p, "cannot connect to %s port %s: %s", p->o.host, p->o.port, strerror(err));
		return -1;
	}
	return 0;
}

static int exchange_hello(struct pp *p)
{
	char line[256], gid[33];
	unsigned long long va, len, size;
	struct hello *h = &p->peer;
	int n;

	for (int i = 0; i < 16; i++)
		snprintf(gid + 2 * i, 3, "%02x", p->gid.raw[i]);
	snprintf(line, sizeof(line),
		 PROTO " qpn=%06x psn=%06x rkey=%08x va=%016llx len=%llu gid=%s size=%llu "
		       "iters=%u ops=%u\n",
		 p->qp->qp_num, p->psn, p->mr->rkey, (unsigned long long)(uintptr_t)p->buf,
		 (unsigned long long)p->len, gid, (unsigned long long)p->o.size, p->o.iters,
		 p->o.ops);
	if (send_line(p, line) || recv_line(p, PROTO, line, sizeof(line)))
		return -1;
	n = sscanf(line,
		   PROTO " qpn=%x psn=%x rkey=%x va=%llx len=%llu gid=%32s size=%llu "
			 "iters=%u ops=%u",
		   &h->qpn, &h->psn, &h->rkey, &va, &len, gid, &size, &h->iters, &h->ops);
	if (n != 9 || strlen(gid) != 32) {
		fail(p, "malformed address from the peer: '%.80s'", line);
		return -1;
	}
	h->va = va;
	h->len = len;
	h->size = size;
	for (int i = 0; i < 16; i++) {
		unsigned int byte;

		if (sscanf(gid + 2 * i, "%2x", &byte) != 1) {
			fail(p, "malformed GID from the peer");
			return -1;
		}
		h->gid.raw[i] = (uint8_t)byte;
	}
	if (h->size != p->o.size || h->iters != p->o.iters || h->ops != p->o.ops) {
		fail(p,
		     "the peer runs -s %llu -n %u with ops 0x%x, we run -s %zu -n %u with ops "
		     "0x%x: both sides need the same -s, -n and -o",
		     size, h->iters, h->ops, p->o.size, p->o.iters, p->o.ops);
		return -1;
	}
	if (h->len < p->len) {
		fail(p, "the peer's buffer is too small (%llu B)", len);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* -E: the helper process that maps the exported fd                   */

struct export_req {
	uint64_t len;
};

/* Room for one SCM_RIGHTS fd, aligned for struct cmsghdr. */
union fd_cmsg {
	struct cmsghdr hdr;
	char bytes[CMSG_SPACE(sizeof(int))];
};

struct export_reply {
	int32_t err; /* errno of the step that failed, or 0 */
	int32_t pid;
	int64_t fd_size;
	uint64_t sum;
	char label[LABEL_LEN];
};

/* The helper: gets an fd, maps it, reads, writes its tag, reports. */
static int helper_main(int s)
{
	union fd_cmsg cbuf;
	struct export_req req;
	struct export_reply rep;
	struct iovec iov = {.iov_base = &req, .iov_len = sizeof(req)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf.bytes,
			    .msg_controllen = sizeof(cbuf.bytes)};
	struct cmsghdr *cm;
	ssize_t r;
	uint8_t *m;
	int fd = -1;

	memset(&rep, 0, sizeof(rep));
	rep.pid = getpid();
	do
		r = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return 0; /* nothing was exported */
	if (r != (ssize_t)sizeof(req))
		return 1;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
	if (fd < 0) {
		rep.err = EBADF;
		goto out;
	}
	rep.fd_size = lseek(fd, 0, SEEK_END);
	m = mmap(NULL, req.len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		rep.err = errno;
		goto out;
	}
	memcpy(rep.label, m + LABEL_OFF, LABEL_LEN);
	rep.label[LABEL_LEN - 1] = '\0';
	rep.sum = fnv1a(m, req.len);
	snprintf((char *)m + TAG_OFF, TAG_LEN, "written by helper pid %d", (int)getpid());
	munmap(m, req.len);
out:
	if (fd >= 0)
		close(fd);
	return send(s, &rep, sizeof(rep), MSG_NOSIGNAL) == (ssize_t)sizeof(rep) ? 0 : 1;
}

/* Fork the helper now, while the process has a single thread. */
static int start_helper(struct pp *p)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		fail(p, "socketpair: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	p->helper = fork();
	if (p->helper < 0) {
		fail(p, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (p->helper == 0) {
		close(sv[0]);
		_exit(helper_main(sv[1]));
	}
	close(sv[1]);
	p->helper_sock = sv[0];
	return 0;
}

/* Export the buffer's fd to the helper and check what it saw. */
static int run_export(struct pp *p)
{
	union fd_cmsg cbuf;
	struct export_req req = {.len = p->len};
	struct export_reply rep;
	struct iovec iov = {.iov_base = &req, .iov_len = sizeof(req)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf.bytes,
			    .msg_controllen = sizeof(cbuf.bytes)};
	char tag[TAG_LEN], want[TAG_LEN];
	uint64_t sum;
	ssize_t r;
	int fd;

	p->stage = "export";
	fd = ibv_export_buf_dmabuf_fd(p->ibuf);
	if (fd < 0) {
		int e = errno;

		fail(p, "ibv_export_buf_dmabuf_fd: %s", strerror(e));
		return -1;
	}
	memset(&cbuf, 0, sizeof(cbuf));
	cbuf.hdr.cmsg_level = SOL_SOCKET;
	cbuf.hdr.cmsg_type = SCM_RIGHTS;
	cbuf.hdr.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&cbuf.hdr), &fd, sizeof(fd));
	sum = fnv1a(p->buf, p->len); /* nothing writes into the buffer any more */
	r = sendmsg(p->helper_sock, &mh, MSG_NOSIGNAL);
	if (r != (ssize_t)sizeof(req)) {
		fail(p, "passing the fd to the helper: %s", strerror(errno));
		close(fd);
		return -1;
	}
	if (wait_fd(p->helper_sock, POLLIN, p->o.timeout) ||
	    recv(p->helper_sock, &rep, sizeof(rep), MSG_WAITALL) != (ssize_t)sizeof(rep)) {
		fail(p, "no answer from the helper");
		close(fd);
		return -1;
	}
	if (rep.err) {
		fail(p, "the helper could not map fd %d: %s", fd, strerror(rep.err));
		close(fd);
		return -1;
	}
	memcpy(tag, p->buf + TAG_OFF, TAG_LEN);
	tag[TAG_LEN - 1] = '\0';
	snprintf(want, sizeof(want), "written by helper pid %d", (int)rep.pid);
	snprintf(p->export_line, sizeof(p->export_line),
		 "helper pid %d mapped the fd (SCM_RIGHTS, %lld B): read \"%s\", checksums %s, "
		 "its write %s",
		 (int)rep.pid, (long long)rep.fd_size, rep.label,
		 rep.sum == sum ? "match" : "DIFFER",
		 strcmp(tag, want) ? "NOT seen here" : "seen here");
	if (rep.sum != sum || strcmp(tag, want))
		fail(p, "the helper's view of the exported buffer differs from ours");
	close(fd);
	return 0;
}

static void stop_helper(struct pp *p)
{
	int st;

	if (p->helper <= 0)
		return;
	close(p->helper_sock); /* a helper still waiting sees EOF and exits */
	p->helper_sock = -1;
	if (waitpid(p->helper, &st, 0) == p->helper && (!WIFEXITED(st) || WEXITSTATUS(st)))
		fail(p, "the export helper failed (status 0x%x)", st);
	p->helper = 0;
}

/* ------------------------------------------------------------------ */
/* verbs setup                                                        */

static const char *errhint(const struct pp *p, int e)
{
	if (e == EOPNOTSUPP && p->bounce && !p->o.cc)
		return " (the device needs DMA bounce: ordinary memory and queues are refused; "
		       "use -U)";
	return "";
}

static int open_device(struct pp *p)
{
	struct ibv_device **list;
	struct ibv_device *dev = NULL;
	int n, i;

	list = ibv_get_device_list(&n);
	if (!list) {
		fail(p, "ibv_get_device_list: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++)
		if (!p->o.dev || !strcmp(ibv_get_device_name(list[i]), p->o.dev)) {
			dev = list[i];
			break;
		}
	if (!dev) {
		fail(p, p->o.dev ? "no device called %s" : "no RDMA device found%s",
		     p->o.dev ? p->o.dev : "");
		ibv_free_device_list(list);
		return -1;
	}
	p->ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!p->ctx) {
		fail(p, "ibv_open_device: %s", strerror(errno));
		return -1;
	}
	if (ibv_query_device_ex(p->ctx, NULL, &p->dattr) ||
	    ibv_query_port(p->ctx, p->o.ib_port, &p->pattr) ||
	    ibv_query_gid(p->ctx, p->o.ib_port, p->o.gid_idx, &p->gid)) {
		fail(p, "querying %s port %u GID %d: %s", ibv_get_device_name(p->ctx->device),
		     p->o.ib_port, p->o.gid_idx, strerror(errno));
		return -1;
	}
	p->bounce = (p->dattr.device_cap_flags_ex & IBV_DEVICE_CC_DMA_BOUNCE) != 0;
	if (p->pattr.state != IBV_PORT_ACTIVE) {
		fail(p, "port %u is not active", p->o.ib_port);
		return -1;
	}
	if (p->o.size > p->pattr.max_msg_sz) {
		fail(p, "-s %zu is above the port's largest message (%u B)", p->o.size,
		     p->pattr.max_msg_sz);
		return -1;
	}
	return 0;
}

static int alloc_pd(struct pp *p)
{
	struct ibv_parent_domain_init_attr pa;

	p->pd = ibv_alloc_pd(p->ctx);
	if (!p->pd) {
		fail(p, "ibv_alloc_pd: %s", strerror(errno));
		return -1;
	}
	if (!p->o.cc)
		return 0;
	p->base_pd = p->pd;
	memset(&pa, 0, sizeof(pa));
	pa.pd = p->base_pd;
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC;
	p->pd = ibv_alloc_parent_domain(p->ctx, &pa);
	if (!p->pd) {
		fail(p, "ibv_alloc_parent_domain(ALLOW_CC_UNPROTECTED_ALLOC): %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Find out how the buffer is backed: an exported fd says it all. */
static int probe_backing(struct pp *p)
{
	char path[64], target[128];
	ssize_t n;
	int fd = ibv_export_buf_dmabuf_fd(p->ibuf);

	if (fd < 0) {
		if (errno == ENODATA)
			return 0; /* ordinary memory */
		fail(p, "ibv_export_buf_dmabuf_fd: %s", strerror(errno));
		return -1;
	}
	p->fd_backed = true;
	p->fd_size = lseek(fd, 0, SEEK_END);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	if (!strncmp(target, "/memfd:", 7))
		snprintf(p->fd_kind, sizeof(p->fd_kind), "memfd from softverbs' built-in CC pool");
	else if (strstr(target, "dmabuf"))
		snprintf(p->fd_kind, sizeof(p->fd_kind), "DMA-buf");
	else
		snprintf(p->fd_kind, sizeof(p->fd_kind), "%.60s", n > 0 ? target : "fd");
	close(fd);
	return 0;
}

static int alloc_buffer(struct pp *p)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned int nslots = p->o.ops ? SL_COUNT : SL_WSRC;

	p->slot = align_up(p->o.size, 64);
	p->len = align_up(HDR_BYTES + nslots * p->slot, page);
	p->buf = ibv_alloc_buf(p->pd, p->len, &p->ibuf);
	if (!p->buf) {
		fail(p, "ibv_alloc_buf(%zu): %s", p->len, strerror(errno));
		return -1;
	}
	if (probe_backing(p))
		return -1;
	if (p->o.export && !p->fd_backed) {
		fail(p,
		     "-E: ibv_export_buf_dmabuf_fd: %s (the buffer is ordinary memory; an "
		     "fd-backed one comes from -U on a CC DMA bounce device)",
		     strerror(ENODATA));
		return -1;
	}
	memset(p->buf, 0, p->len);
	snprintf((char *)p->buf + LABEL_OFF, LABEL_LEN, PROG " %s pid %d",
		 p->server ? "server" : "client", (int)getpid());
	store64(p->buf + COUNTER_OFF, counter_init(p->seed));
	if (p->o.ops) {
		fill(slot_ptr(p, SL_WSRC), p->o.size, p->seed, TAG_WRITE);
		fill(slot_ptr(p, SL_RSRC), p->o.size, p->seed, TAG_READ);
	}
	return 0;
}

static int register_buffer(struct pp *p)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_dmah_init_attr da;
	struct ibv_mr_init_attr ma;

	if (!p->o.dmah) {
		p->reg_verb = "ibv_reg_buf_mr";
		p->mr = ibv_reg_buf_mr(p->pd, p->ibuf, p->buf, p->len, access);
		if (!p->mr) {
			int e = errno;

			fail(p, "ibv_reg_buf_mr: %s%s", strerror(e), errhint(p, e));
			return -1;
		}
		return 0;
	}
	memset(&da, 0, sizeof(da));
	da.comp_mask = IBV_DMAH_INIT_ATTR_MASK_PH;
	da.ph = p->o.dmah_ph;
	if (p->o.dmah_st) {
		da.comp_mask |=
			IBV_DMAH_INIT_ATTR_MASK_CPU_ID | IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE;
		da.cpu_id = p->o.dmah_cpu;
		da.tph_mem_type = p->o.dmah_mem;
	}
	p->dmah = ibv_alloc_dmah(p->ctx, &da);
	if (!p->dmah) {
		int e = errno;

		fail(p, "ibv_alloc_dmah(cpu %u, ph %u, mem %s): %s%s", p->o.dmah_cpu, p->o.dmah_ph,
		     p->o.dmah_mem == IBV_TPH_MEM_TYPE_PM ? "pm" : "vm", strerror(e),
		     e == EPERM	 ? " (the CPU is outside this process's affinity mask)" :
		     e == EINVAL ? " (no such CPU, or a processing hint above 3)" :
				   "");
		return -1;
	}
	memset(&ma, 0, sizeof(ma));
	ma.length = p->len;
	ma.access = access;
	ma.comp_mask = IBV_REG_MR_MASK_BUF | IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH;
	ma.addr = p->buf;
	ma.buf = p->ibuf;
	ma.dmah = p->dmah;
	p->reg_verb = "ibv_reg_mr_ex(BUF|ADDR|DMAH)";
	p->mr = ibv_reg_mr_ex(p->pd, &ma);
	if (!p->mr) {
		int e = errno;

		fail(p, "ibv_reg_mr_ex(BUF|ADDR|DMAH): %s%s", strerror(e), errhint(p, e));
		return -1;
	}
	return 0;
}

static int create_queues(struct pp *p)
{
	struct ibv_cq_init_attr_ex ca;
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr a;
	int e;

	memset(&ca, 0, sizeof(ca));
	ca.cqe = 64;
	ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN;
	if (p->o.cc) {
		ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
		ca.parent_domain = p->pd;
	}
	p->cq = ibv_create_cq_ex(p->ctx, &ca);
	if (!p->cq) {
		e = errno;
		fail(p, "ibv_create_cq_ex%s: %s%s", p->o.cc ? "(MASK_PD)" : "", strerror(e),
		     errhint(p, e));
		return -1;
	}
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = ibv_cq_ex_to_cq(p->cq);
	qa.recv_cq = ibv_cq_ex_to_cq(p->cq);
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 16;
	qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	p->qp = ibv_create_qp(p->pd, &qa);
	if (!p->qp) {
		e = errno;
		fail(p, "ibv_create_qp: %s%s", strerror(e), errhint(p, e));
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = p->o.ib_port;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(p->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		fail(p, "ibv_modify_qp(INIT): %s", strerror(errno));
		return -1;
	}
	p->psn = (uint32_t)lrand48() & 0xffffff;
	return 0;
}

static int connect_qp(struct pp *p)
{
	unsigned int rd = p->dattr.orig_attr.max_qp_rd_atom;
	unsigned int init_rd = p->dattr.orig_attr.max_qp_init_rd_atom;
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = p->pattr.active_mtu;
	a.dest_qp_num = p->peer.qpn;
	a.rq_psn = p->peer.psn;
	a.max_dest_rd_atomic = (uint8_t)(rd > 16 ? 16 : rd ? rd : 1);
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = p->peer.gid;
	a.ah_attr.grh.sgid_index = (uint8_t)p->o.gid_idx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = p->o.ib_port;
	if (ibv_modify_qp(p->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER)) {
		fail(p, "ibv_modify_qp(RTR): %s", strerror(errno));
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = p->psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = (uint8_t)(init_rd > 16 ? 16 : init_rd ? init_rd : 1);
	if (ibv_modify_qp(p->qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)) {
		fail(p, "ibv_modify_qp(RTS): %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* data path                                                          */

static int post_recv(struct pp *p)
{
	struct ibv_sge sge = {.addr = (uintptr_t)slot_ptr(p, SL_RECV),
			      .length = (uint32_t)p->o.size,
			      .lkey = p->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = WR_RECV, .sg_list = &sge, .num_sge = 1}, *bad;
	int r = ibv_post_recv(p->qp, &wr, &bad);

	if (r)
		fail(p, "ibv_post_recv: %s", strerror(r));
	return r ? -1 : 0;
}

/* Post one signaled work request of one SGE at `local` (`len` bytes). */
static int post_send(struct pp *p, enum wr_kind kind, uint8_t *local, uint32_t len,
		     uint64_t remote_off, uint64_t add)
{
	struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = p->mr->lkey};
	struct ibv_send_wr wr, *bad;
	int r;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = kind;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	switch (kind) {
	case WR_SEND:
		wr.opcode = IBV_WR_SEND;
		break;
	case WR_WRITE:
	case WR_READ:
		wr.opcode = kind == WR_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = p->peer.va + remote_off;
		wr.wr.rdma.rkey = p->peer.rkey;
		break;
	default:
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = p->peer.va + remote_off;
		wr.wr.atomic.rkey = p->peer.rkey;
		wr.wr.atomic.compare_add = add;
		break;
	}
	r = ibv_post_send(p->qp, &wr, &bad);
	if (r)
		fail(p, "ibv_post_send(%s): %s", wr_kind_name[kind], strerror(r));
	return r ? -1 : 0;
}

/* Take every completion the CQ has; -1 after a failed one. */
static int drain_cq(struct pp *p)
{
	struct ibv_poll_cq_attr attr = {.comp_mask = 0};
	int r, bad = 0;

	r = ibv_start_poll(p->cq, &attr);
	if (r == ENOENT)
		return 0;
	if (r) {
		fail(p, "ibv_start_poll: %s", strerror(r));
		return -1;
	}
	do {
		uint64_t id = p->cq->wr_id;

		if (p->cq->status != IBV_WC_SUCCESS) {
			fail(p, "%s completed with %s (vendor error 0x%x)",
			     id < WR_KINDS ? wr_kind_name[id] : "?",
			     ibv_wc_status_str(p->cq->status), ibv_wc_read_vendor_err(p->cq));
			bad = 1;
		} else if (id >= WR_KINDS) {
			fail(p, "completion with an unknown wr_id %" PRIu64, id);
			bad = 1;
		} else {
			if (id == WR_RECV)
				p->last_recv_len = ibv_wc_read_byte_len(p->cq);
			p->done[id]++;
		}
		r = ibv_next_poll(p->cq);
	} while (!r);
	ibv_end_poll(p->cq);
	if (r != ENOENT) {
		fail(p, "ibv_next_poll: %s", strerror(r));
		bad = 1;
	}
	return bad ? -1 : 0;
}

/* Poll until `count` completions of `kind` arrived. */
static int wait_for(struct pp *p, enum wr_kind kind, unsigned long count)
{
	uint64_t deadline = p->o.timeout ? now_ns() + (uint64_t)p->o.timeout * 1000000000u : 0;
	unsigned int idle = 0;

	while (p->done[kind] < count) {
		if (drain_cq(p))
			return -1;
		if (p->done[kind] >= count)
			break;
		/* spin a little, then let the progress thread have the CPU */
		if (++idle < 64)
			continue;
		sched_yield();
		if ((idle & 1023) == 0 && deadline && now_ns() > deadline) {
			fail(p, "no %s completion within %d s (-t)", wr_kind_name[kind],
			     p->o.timeout);
			return -1;
		}
	}
	return 0;
}

/* The received message `i` against the peer's pattern. */
static void check_recv(struct pp *p, unsigned int i)
{
	size_t at;

	if (p->last_recv_len != p->o.size) {
		if (!p->bad_msgs++)
			fail(p, "message %u: %u B received, %zu expected", i, p->last_recv_len,
			     p->o.size);
		return;
	}
	if (!p->o.check)
		return;
	at = mismatch(slot_ptr(p, SL_RECV), p->o.size, p->peer_seed, i);
	if (at < p->o.size && !p->bad_msgs++)
		fail(p, "message %u, byte %zu: 0x%02x received, 0x%02x expected", i, at,
		     slot_ptr(p, SL_RECV)[at], pattern(p->peer_seed, i, at));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int pingpong_client(struct pp *p)
{
	uint64_t *rtt = calloc(p->o.iters, sizeof(*rtt));
	uint64_t start, sum = 0;
	unsigned int i;
	size_t k;

	if (!rtt) {
		fail(p, "out of memory");
		return -1;
	}
	start = now_ns();
	for (i = 0; i < p->o.iters; i++) {
		uint64_t t0;

		if (wait_for(p, WR_SEND, i))
			goto err;
		if (p->o.check)
			fill(slot_ptr(p, SL_SEND), p->o.size, p->seed, i);
		t0 = now_ns();
		if (post_send(p, WR_SEND, slot_ptr(p, SL_SEND), (uint32_t)p->o.size, 0, 0) ||
		    wait_for(p, WR_RECV, i + 1ul))
			goto err;
		rtt[i] = now_ns() - t0;
		check_recv(p, i);
		if (i + 1 < p->o.iters && post_recv(p))
			goto err;
	}
	if (wait_for(p, WR_SEND, p->o.iters))
		goto err;
	p->elapsed_ns = now_ns() - start;
	for (i = 0; i < p->o.iters; i++)
		sum += rtt[i];
	qsort(rtt, p->o.iters, sizeof(*rtt), cmp_u64);
	k = ((size_t)p->o.iters * 99 + 99) / 100; /* ceil(0.99 n) */
	p->avg_ns = sum / p->o.iters;
	p->p99_ns = rtt[k - 1];
	free(rtt);
	return 0;
err:
	free(rtt);
	return -1;
}

static int pingpong_server(struct pp *p)
{
	uint64_t start = 0;
	unsigned int i;

	for (i = 0; i < p->o.iters; i++) {
		if (wait_for(p, WR_RECV, i + 1ul))
			return -1;
		if (!i)
			start = now_ns();
		check_recv(p, i);
		if (i + 1 < p->o.iters && post_recv(p))
			return -1;
		if (wait_for(p, WR_SEND, i)) /* the previous pong left the send slot */
			return -1;
		if (p->o.check)
			fill(slot_ptr(p, SL_SEND), p->o.size, p->seed, i);
		if (post_send(p, WR_SEND, slot_ptr(p, SL_SEND), (uint32_t)p->o.size, 0, 0))
			return -1;
	}
	if (wait_for(p, WR_SEND, p->o.iters))
		return -1;
	p->elapsed_ns = now_ns() - start;
	return 0;
}

/* WRITE, READ and fetch-and-adds against the peer's buffer. */
static int run_ops(struct pp *p)
{
	if (p->o.ops & OP_WRITE) {
		p->stage = "RDMA WRITE";
		if (post_send(p, WR_WRITE, slot_ptr(p, SL_WSRC), (uint32_t)p->o.size,
			      slot_off(p, SL_WDST), 0) ||
		    wait_for(p, WR_WRITE, 1))
			return -1;
		p->write_out = V_OK; /* the peer checks the data */
	}
	if (p->o.ops & OP_READ) {
		size_t at;

		p->stage = "RDMA READ";
		if (post_send(p, WR_READ, slot_ptr(p, SL_RDST), (uint32_t)p->o.size,
			      slot_off(p, SL_RSRC), 0) ||
		    wait_for(p, WR_READ, 1))
			return -1;
		at = mismatch(slot_ptr(p, SL_RDST), p->o.size, p->peer_seed, TAG_READ);
		p->read_out = at == p->o.size ? V_OK : V_BAD;
		if (p->read_out == V_BAD)
			fail(p, "RDMA READ: byte %zu is 0x%02x, the peer has 0x%02x", at,
			     slot_ptr(p, SL_RDST)[at], pattern(p->peer_seed, TAG_READ, at));
	}
	if ((p->o.ops & OP_ATOMIC) && p->dattr.orig_attr.atomic_cap != IBV_ATOMIC_NONE) {
		uint64_t expect = counter_init(p->peer_seed);

		p->stage = "fetch-and-add";
		p->atomic_out = V_OK;
		p->atomic_first = expect;
		for (unsigned int k = 0; k < N_ATOMICS; k++) {
			uint64_t got;

			store64(p->buf + FETCHED_OFF, ~0ull);
			if (post_send(p, WR_ATOMIC, p->buf + FETCHED_OFF, 8, COUNTER_OFF, k + 1) ||
			    wait_for(p, WR_ATOMIC, k + 1ul))
				return -1;
			got = load64(p->buf + FETCHED_OFF);
			if (got != expect && p->atomic_out == V_OK) {
				p->atomic_out = V_BAD;
				fail(p,
				     "fetch-and-add %u returned 0x%" PRIx64 ", expected 0x%" PRIx64,
				     k, got, expect);
			}
			expect += k + 1;
		}
		p->atomic_last = expect;
	}
	return 0;
}

/* After the peer's ops: what landed in our buffer. */
static void check_incoming(struct pp *p)
{
	if (p->o.ops & OP_WRITE) {
		size_t at = mismatch(slot_ptr(p, SL_WDST), p->o.size, p->peer_seed, TAG_WRITE);

		p->mine.write_in = at == p->o.size ? V_OK : V_BAD;
		if (p->mine.write_in == V_BAD)
			fail(p, "the peer's RDMA WRITE: byte %zu is 0x%02x, 0x%02x expected", at,
			     slot_ptr(p, SL_WDST)[at], pattern(p->peer_seed, TAG_WRITE, at));
	}
	if ((p->o.ops & OP_ATOMIC) && p->dattr.orig_attr.atomic_cap != IBV_ATOMIC_NONE) {
		uint64_t want = counter_init(p->seed) + N_ATOMICS * (N_ATOMICS + 1) / 2;
		uint64_t got = load64(p->buf + COUNTER_OFF);

		p->mine.atomic_in = got == want ? V_OK : V_BAD;
		if (p->mine.atomic_in == V_BAD)
			fail(p,
			     "our counter is 0x%" PRIx64
			     " after the peer's fetch-and-adds, 0x%" PRIx64 " expected",
			     got, want);
	}
}

/* Both sides swap their findings (and the client's timing). */
static int exchange_results(struct pp *p)
{
	char line[256];
	struct result *r = &p->mine, *t = &p->theirs;
	unsigned long long e, a, q;

	r->failures = p->failures;
	r->elapsed_ns = p->elapsed_ns;
	r->avg_ns = p->avg_ns;
	r->p99_ns = p->p99_ns;
	snprintf(line, sizeof(line),
		 PROTO "-DONE failures=%u write=%d atomic=%d elapsed=%llu avg=%llu p99=%llu\n",
		 r->failures, r->write_in, r->atomic_in, (unsigned long long)r->elapsed_ns,
		 (unsigned long long)r->avg_ns, (unsigned long long)r->p99_ns);
	if (send_line(p, line) || recv_line(p, PROTO "-DONE", line, sizeof(line)))
		return -1;
	if (sscanf(line,
		   PROTO "-DONE failures=%u write=%d atomic=%d elapsed=%llu avg=%llu p99=%llu",
		   &t->failures, &t->write_in, &t->atomic_in, &e, &a, &q) != 6) {
		fail(p, "malformed result from the peer: '%.80s'", line);
		return -1;
	}
	t->elapsed_ns = e;
	t->avg_ns = a;
	t->p99_ns = q;
	p->have_theirs = true;
	if (!p->server)
		return 0;
	/* the client timed the ping-pongs */
	p->avg_ns = t->avg_ns;
	p->p99_ns = t->p99_ns;
	if (t->elapsed_ns)
		p->elapsed_ns = t->elapsed_ns;
	return 0;
}

static int run(struct pp *p)
{
	p->stage = "setup";
	if (p->o.export && start_helper(p))
		return -1;
	if (open_device(p) || alloc_pd(p) || alloc_buffer(p) || register_buffer(p) ||
	    create_queues(p) || post_recv(p))
		return -1;
	p->stage = "connection";
	if (p->server ? tcp_server(p) : tcp_client(p))
		return -1;
	if (exchange_hello(p) || connect_qp(p) || barrier(p, PROTO "-GO"))
		return -1;
	p->stage = "ping-pong";
	if (p->server ? pingpong_server(p) : pingpong_client(p))
		return -1;
	p->pingpong_done = true;
	if (p->o.ops) {
		if (run_ops(p) || barrier(p, PROTO "-OPS"))
			return -1;
		check_incoming(p);
	}
	p->stage = "results";
	if (exchange_results(p))
		return -1;
	if (p->o.export && run_export(p))
		return -1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* report and teardown                                                */

static const char *verdict_str(int v, const char *ok)
{
	return v == V_OK ? ok : v == V_BAD ? "FAILED" : "not checked";
}

#define ROW(k, ...)                                                                                \
	do {                                                                                       \
		fprintf(out, "%-11s", k);                                                          \
		fprintf(out, __VA_ARGS__);                                                         \
		fputc('\n', out);                                                                  \
	} while (0)

/* Every line of the report but the verdict; written before the teardown. */
static void report(struct pp *p, FILE *out)
{
	char g[INET6_ADDRSTRLEN], pg[INET6_ADDRSTRLEN];

	ROW("role", "%s%s%s", p->server ? "server" : "client", p->peer_name[0] ? ", peer " : "",
	    p->peer_name);
	if (!p->ctx)
		return;
	ROW("device", "%s port %u, MTU %d, GID %s, CC DMA bounce %s",
	    ibv_get_device_name(p->ctx->device), p->o.ib_port, 128 << p->pattr.active_mtu,
	    gid_str(&p->gid, g, sizeof(g)), p->bounce ? "on" : "off");
	if (p->qp && p->peer.qpn)
		ROW("qp", "RC QPN 0x%06x PSN 0x%06x <-> peer QPN 0x%06x GID %s", p->qp->qp_num,
		    p->psn, p->peer.qpn, gid_str(&p->peer.gid, pg, sizeof(pg)));
	if (p->pd)
		ROW("pd", "%s",
		    p->o.cc ?
			    (p->bounce ? "parent domain (ALLOW_CC_UNPROTECTED_ALLOC); CQ "
					 "(MASK_PD) and QP on it" :
					 "parent domain (ALLOW_CC_UNPROTECTED_ALLOC, no effect: "
					 "the device does not bounce); CQ (MASK_PD) and QP on it") :
			    "ordinary PD");
	if (p->buf) {
		if (p->fd_backed)
			ROW("buffer", "ibv_alloc_buf %zu B: fd-backed shared memory, a %lld B %s",
			    p->len, (long long)p->fd_size, p->fd_kind);
		else
			ROW("buffer", "ibv_alloc_buf %zu B: ordinary memory", p->len);
	}
	if (p->mr) {
		bool fd_path = (uintptr_t)p->mr->addr != (uintptr_t)p->buf;

		char where[48] = "mr->addr = VA";

		if (fd_path)
			snprintf(where, sizeof(where),
				 "mr->addr 0x%" PRIxPTR " = offset, iova = VA",
				 (uintptr_t)p->mr->addr);
		ROW("mr", "%s, %s path: lkey 0x%08x rkey 0x%08x, %s", p->reg_verb,
		    fd_path ? "fd" : "addr", p->mr->lkey, p->mr->rkey, where);
	}
	if (p->dmah) {
		char st[48] = ", no steering tag";

		if (p->o.dmah_st)
			snprintf(st, sizeof(st), ", cpu %u, mem %s", p->o.dmah_cpu,
				 p->o.dmah_mem == IBV_TPH_MEM_TYPE_PM ? "pm" : "vm");
		ROW("dmah", "ibv_alloc_dmah: ph %u (%s)%s", p->o.dmah_ph, ph_name(p->o.dmah_ph),
		    st);
	}
	if (p->export_line[0])
		ROW("export", "%s", p->export_line);
	if (p->pingpong_done) {
		if (p->bad_msgs)
			ROW("send", "%u ping-pongs of %zu B: %u message%s FAILED the check",
			    p->o.iters, p->o.size, p->bad_msgs, p->bad_msgs == 1 ? "" : "s");
		else if (p->o.check)
			ROW("send", "%u ping-pongs of %zu B: every message verified", p->o.iters,
			    p->o.size);
		else
			ROW("send", "%u ping-pongs of %zu B: lengths verified (-c checks the data)",
			    p->o.iters, p->o.size);
	}
	if (p->o.ops & OP_WRITE && p->write_out != V_NONE)
		ROW("write", "%zu B into the peer's buffer: %s", p->o.size,
		    p->have_theirs ? verdict_str(p->theirs.write_in, "verified by the peer") :
				     "not confirmed by the peer");
	if (p->o.ops & OP_READ && p->read_out != V_NONE)
		ROW("read", "%zu B from the peer's buffer: %s", p->o.size,
		    verdict_str(p->read_out, "verified"));
	if (p->o.ops & OP_ATOMIC) {
		if (p->dattr.orig_attr.atomic_cap == IBV_ATOMIC_NONE)
			ROW("atomic", "skipped: the device has no atomics");
		else if (p->atomic_out != V_NONE)
			ROW("atomic",
			    "%d fetch-and-adds on the peer's counter (0x%" PRIx64 " -> 0x%" PRIx64
			    "): %s",
			    N_ATOMICS, p->atomic_first, p->atomic_last,
			    p->atomic_out == V_OK && p->have_theirs ?
				    verdict_str(p->theirs.atomic_in, "verified, and by the peer") :
				    verdict_str(p->atomic_out, "verified"));
	}
	if (p->o.ops & (OP_WRITE | OP_ATOMIC) &&
	    (p->mine.write_in != V_NONE || p->mine.atomic_in != V_NONE))
		ROW("incoming", "the peer's%s%s%s into this buffer: %s",
		    p->mine.write_in != V_NONE ? " write" : "",
		    p->mine.write_in != V_NONE && p->mine.atomic_in != V_NONE ? " and" : "",
		    p->mine.atomic_in != V_NONE ? " atomics" : "",
		    p->mine.write_in != V_BAD && p->mine.atomic_in != V_BAD ? "verified" :
									      "FAILED");
	if (p->pingpong_done && p->elapsed_ns && p->avg_ns) {
		double s = (double)p->elapsed_ns / 1e9;
		double bytes = 2.0 * p->o.iters * (double)p->o.size;

		ROW("throughput", "%.1f MB/s (%.0f B both ways in %.3f s)", bytes / s / 1e6, bytes,
		    s);
		ROW("latency", "avg %.1f us, p99 %.1f us (round trip of %zu B, client's clock)",
		    (double)p->avg_ns / 1e3, (double)p->p99_ns / 1e3, p->o.size);
	}
}

/* The last line, after the teardown. */
static void verdict(struct pp *p, FILE *out)
{
	unsigned int here = p->failures;

	if (!here && p->have_theirs && !p->theirs.failures)
		ROW("result", "PASS");
	else if (here)
		ROW("result", "FAIL (%u problem%s here, in %s; see stderr)", here,
		    here == 1 ? "" : "s", p->fail_stage ? p->fail_stage : "setup");
	else if (p->have_theirs)
		ROW("result", "FAIL (the peer found %u problem%s)", p->theirs.failures,
		    p->theirs.failures == 1 ? "" : "s");
	else
		ROW("result", "FAIL (no result from the peer)");
}

#undef ROW

static void teardown(struct pp *p)
{
	int r;

	if (p->qp && (r = ibv_destroy_qp(p->qp)))
		fail(p, "ibv_destroy_qp: %s", strerror(r));
	if (p->mr && (r = ibv_dereg_mr(p->mr)))
		fail(p, "ibv_dereg_mr: %s", strerror(r));
	if (p->dmah && (r = ibv_dealloc_dmah(p->dmah)))
		fail(p, "ibv_dealloc_dmah: %s", strerror(r));
	if (p->cq && (r = ibv_destroy_cq(ibv_cq_ex_to_cq(p->cq))))
		fail(p, "ibv_destroy_cq: %s", strerror(r));
	if (p->ibuf)
		ibv_free_buf(p->ibuf);
	if (p->pd && (r = ibv_dealloc_pd(p->pd)))
		fail(p, "ibv_dealloc_pd: %s", strerror(r));
	if (p->base_pd && (r = ibv_dealloc_pd(p->base_pd)))
		fail(p, "ibv_dealloc_pd(base): %s", strerror(r));
	if (p->ctx && (r = ibv_close_device(p->ctx)))
		fail(p, "ibv_close_device: %s", strerror(errno));
	if (p->sock >= 0)
		close(p->sock);
	stop_helper(p);
}

int main(int argc, char **argv)
{
	static struct pp pp;
	struct pp *p = &pp;
	char *body = NULL;
	size_t body_len = 0;
	FILE *out;
	int r;

	r = parse_args(&p->o, argc, argv);
	if (r)
		return r;
	p->server = !p->o.host;
	p->seed = p->server ? 'S' : 'C';
	p->peer_seed = p->server ? 'C' : 'S';
	p->sock = -1;
	p->helper_sock = -1;
	p->write_out = p->read_out = p->atomic_out = V_NONE;
	p->mine.write_in = p->mine.atomic_in = V_NONE;
	p->theirs.write_in = p->theirs.atomic_in = V_NONE;
	srand48((long)(getpid() ^ now_ns()));

	run(p);
	/* the report names objects that the teardown frees: keep it until then */
	out = open_memstream(&body, &body_len);
	if (out) {
		report(p, out);
		fclose(out);
	}
	p->stage = "teardown";
	teardown(p);
	if (body)
		fputs(body, stdout);
	free(body);
	verdict(p, stdout);
	return p->failures || !p->have_theirs || p->theirs.failures ? 1 : 0;
}
