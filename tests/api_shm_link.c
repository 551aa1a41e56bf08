/* SPDX-License-Identifier: MIT */
/*
 * api_shm_link: the same-host link between two processes (each its own
 * device at a known SOFTVERBS_ADDR, SOFTVERBS_STATS=1 read back from
 * stderr). Each round is RC WRITE, READ, compare-and-swap, fetch-and-add
 * and SEND from A to B, then WRITE and SEND from B to A, every byte
 * checked on both sides.
 *
 *   a. default: the rounds go over the link both ways (each side's
 *      "same-host link" tx and rx > 0, links in >= 1, corrupt 0);
 *   b. SOFTVERBS_SHM=0 in both: the same over UDP, link counters 0;
 *   c. SOFTVERBS_SHM=0 in B only: A finds no listener and B never links,
 *      so both directions use UDP;
 *   d. B exits, B' binds the same address: A, whose device stayed open,
 *      closes its links to the dead B and links to B' (B' receives over
 *      the link);
 *   e. root only: B drops to uid 65534 before opening its device: never
 *      linked (another user's device), UDP works;
 *   f. in every case and process: the same number of open fds before
 *      the device was opened and after it was closed, and no ring left
 *      mapped.
 *
 * Links come up asynchronously (the first packets to a new peer go by
 * UDP): the test waits, with a deadline, for both rings of a pair to be
 * mapped in both processes (/proc/self/maps) before it counts on them.
 */
#include "harness.h"
#include "stats.h"
#include "traffic.h"

#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

/* test: timeout=120 */

#define ACC                                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

enum {
	W_OFF = 0, /* the peer's WRITE lands here (64 KiB) */
	R_OFF = 64 << 10, /* the peer READs this (64 KiB) */
	AT_OFF = 128 << 10, /* the atomics' target */
	RCV_OFF = 132 << 10, /* the peer's SEND lands here */
	S_OFF = 192 << 10, /* WRITE source */
	S2_OFF = 256 << 10, /* SEND source */
	D_OFF = 320 << 10, /* READ destination */
	AR_OFF = 384 << 10, /* atomics' results */
	BUF_LEN = 512 << 10,
	XLEN = 64 << 10, /* A's WRITE and READ */
	BLEN = 16 << 10, /* B's WRITE */
	MLEN = 1024, /* SENDs */
	LINK_WAIT_MS = 8000, /* a link comes up within ~1 s (a retried connect) */
};

struct cmd {
	char op; /* T: prepare round, V: verify and answer, M: maps, G: go, Q: quit */
	uint32_t seed;
};

/* What a process found about itself. */
struct report {
	int seen; /* the link line was printed */
	unsigned long long tx, rx, links, corrupt;
	int fd_before, fd_after; /* around the device's lifetime */
	int maps_after; /* rings still mapped after the close */
	int bad; /* problems the process found */
};

struct peer_cfg {
	char addr[INET_ADDRSTRLEN];
	bool shm, drop_uid, wait_go;
};

/* The "same-host link" line of a SOFTVERBS_STATS report into r. */
static void parse_link(const char *text, struct report *r)
{
	const char *p = strstr(text, "same-host link:");

	r->seen =
		p &&
		sscanf(p,
		       "same-host link: sent %llu received %llu packets, links in %llu, corrupt %llu",
		       &r->tx, &r->rx, &r->links, &r->corrupt) == 4;
}

static void set_env(const struct peer_cfg *c)
{
	setenv("SOFTVERBS_ADDR", c->addr, 1);
	setenv("SOFTVERBS_SHM", c->shm ? "1" : "0", 1);
	setenv("SOFTVERBS_STATS", "1", 1);
}

/* Post one WR with one SGE; the atomics take compare/swap_add. */
static int post(struct t_ep *e, enum ibv_wr_opcode op, size_t off, uint32_t len,
		const struct t_addr *peer, uint64_t roff, uint64_t cmp, uint64_t swap)
{
	struct ibv_sge sge = {(uintptr_t)e->buf + off, len, e->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = peer->addr + roff;
		wr.wr.atomic.rkey = peer->rkey;
		wr.wr.atomic.compare_add = op == IBV_WR_ATOMIC_CMP_AND_SWP ? cmp : swap;
		wr.wr.atomic.swap = swap;
	} else if (peer) {
		wr.wr.rdma.remote_addr = peer->addr + roff;
		wr.wr.rdma.rkey = peer->rkey;
	}
	return ibv_post_send(e->qp, &wr, &bad);
}

/* Post and wait for a successful completion; 0 or -1. */
static int run(struct t_ep *e, enum ibv_wr_opcode op, size_t off, uint32_t len,
	       const struct t_addr *peer, uint64_t roff, uint64_t cmp, uint64_t swap)
{
	struct ibv_wc wc;

	if (post(e, op, off, len, peer, roff, cmp, swap))
		return -1;
	return t_poll(e->cq, &wc, 1, 20000) == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

/* True if p holds t_fill(seed) for n bytes. */
static bool filled(const uint8_t *p, size_t n, unsigned int seed)
{
	uint8_t *x = malloc(n);
	bool ok;

	if (!x)
		return false;
	t_fill(x, n, seed);
	ok = !memcmp(p, x, n);
	free(x);
	return ok;
}

/* ---- B, the peer process ---- */

/* B's side of round `seed` ('V'): check what A did, then WRITE and SEND to A. */
static int peer_verify(struct t_ep *e, const struct t_addr *a, uint32_t seed)
{
	struct ibv_wc wc;
	uint64_t at;
	int bad = 0;

	bad += !filled(e->buf + W_OFF, XLEN, seed);
	memcpy(&at, e->buf + AT_OFF, 8);
	bad += at != (uint64_t)seed + 3;
	bad += t_poll(e->cq, &wc, 1, 20000) != 1 || wc.status != IBV_WC_SUCCESS ||
	       wc.opcode != IBV_WC_RECV || wc.byte_len != MLEN;
	bad += !filled(e->buf + RCV_OFF, MLEN, seed + 4);
	t_fill(e->buf + S_OFF, BLEN, seed + 2);
	t_fill(e->buf + S2_OFF, MLEN, seed + 3);
	bad += run(e, IBV_WR_RDMA_WRITE, S_OFF, BLEN, a, W_OFF, 0, 0) != 0;
	bad += run(e, IBV_WR_SEND, S2_OFF, MLEN, NULL, 0, 0, 0) != 0;
	return bad;
}

/* Drop to uid/gid 65534 and stay inspectable (/proc/self/fd); 0 or -1. */
static int drop_uid(void)
{
	if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
		return -1;
	return prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) ? -1 : 0;
}

/* The peer process: serves commands on `sock` until Q, then sends its report. */
static int peer_main(int sock, const struct peer_cfg *c)
{
	static char text[16384];
	struct report r;
	struct t_capture cap;
	struct t_addr mine, a;
	struct t_ep e;
	struct cmd m;

	memset(&r, 0, sizeof(r)); /* padding too: it crosses a socket */
	memset(&m, 0, sizeof(m));

	if (c->drop_uid && drop_uid())
		return 2;
	if (c->wait_go && (t_xfer(sock, &m, sizeof(m), false) || m.op != 'G'))
		return 2;
	set_env(c);
	r.fd_before = t_count_fds();
	if (t_capture_begin(&cap))
		return 2;
	if (t_ep_init(&e, NULL, IBV_QPT_RC, BUF_LEN, ACC, 16)) {
		t_capture_end(&cap, text, sizeof(text));
		fprintf(stderr, "%s", text);
		return 2;
	}
	mine = t_addr_of(&e, 300);
	if (t_xfer(sock, &mine, sizeof(mine), true) || t_xfer(sock, &a, sizeof(a), false) ||
	    t_connect_to(&e, &a, 300, IBV_MTU_4096))
		r.bad++;
	while (!r.bad && !t_xfer(sock, &m, sizeof(m), false) && m.op != 'Q') {
		int v = 0;

		if (m.op == 'T') {
			t_fill(e.buf + R_OFF, XLEN, m.seed + 1);
			memset(e.buf + AT_OFF, 0, 8);
			memset(e.buf + RCV_OFF, 0, MLEN);
			v = t_post_recv(&e, m.seed, RCV_OFF, MLEN);
		} else if (m.op == 'V') {
			v = peer_verify(&e, &a, m.seed);
		} else if (m.op == 'M') {
			v = t_link_maps();
		}
		if (t_xfer(sock, &v, sizeof(v), true))
			r.bad++;
	}
	t_ep_destroy(&e, true);
	t_capture_end(&cap, text, sizeof(text));
	fprintf(stderr, "%s", text); /* the test's log shows B's counters too */
	parse_link(text, &r);
	r.fd_after = t_count_fds();
	r.maps_after = t_link_maps();
	return t_xfer(sock, &r, sizeof(r), true) ? 2 : 0;
}

/* ---- A, the test process ---- */

struct peer {
	pid_t pid;
	int sock;
	struct t_addr addr;
};

/* Fork a peer process with configuration c (before A opens its device). */
static int peer_start(struct peer *p, const struct peer_cfg *c)
{
	int sv[2];

	memset(p, 0, sizeof(*p));
	p->sock = -1;
	if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0))
		return -1;
	fflush(stdout);
	p->pid = fork();
	if (p->pid == 0) {
		close(sv[0]);
		_exit(peer_main(sv[1], c));
	}
	close(sv[1]);
	p->sock = sv[0];
	return CHECK(p->pid > 0) ? 0 : -1;
}

/* Send a command; its int answer, or -1000 if the peer is gone. */
static int peer_cmd(struct peer *p, char op, uint32_t seed)
{
	struct cmd m;
	int v;

	memset(&m, 0, sizeof(m)); /* padding too: it crosses a socket */
	m.op = op;
	m.seed = seed;

	if (t_xfer(p->sock, &m, sizeof(m), true) || t_xfer(p->sock, &v, sizeof(v), false))
		return -1000;
	return v;
}

/* Tell the peer to quit; its report and exit status checked (p->sock stays open). */
static void peer_finish(struct peer *p, struct report *r)
{
	struct cmd m;
	int status = -1;

	memset(&m, 0, sizeof(m));
	m.op = 'Q';
	memset(r, 0, sizeof(*r));
	CHECK(t_xfer(p->sock, &m, sizeof(m), true) == 0);
	CHECK_MSG(t_xfer(p->sock, r, sizeof(*r), false) == 0, "no report from the peer");
	CHECK(waitpid(p->pid, &status, 0) == p->pid);
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "peer exit status %#x", status);
	CHECK_MSG(r->seen, "the peer printed no link counters");
	CHECK_EQ_INT(r->bad, 0);
	CHECK_MSG(r->fd_before >= 0 && r->fd_before == r->fd_after,
		  "peer fds: %d before the device, %d after", r->fd_before, r->fd_after);
	CHECK_EQ_INT(r->maps_after, 0);
}

/* Exchange addresses and connect A's endpoint to the peer. */
static int peer_connect(struct peer *p, struct t_ep *e)
{
	struct t_addr mine = t_addr_of(e, 700);

	if (!CHECK(t_xfer(p->sock, &p->addr, sizeof(p->addr), false) == 0) ||
	    !CHECK(t_xfer(p->sock, &mine, sizeof(mine), true) == 0))
		return -1;
	return t_connect_to(e, &p->addr, 700, IBV_MTU_4096);
}

/* One round of traffic both ways, every byte checked; 0 or -1. */
static int round_trip(struct t_ep *e, struct peer *p, uint32_t seed)
{
	struct ibv_wc wc;
	uint64_t old[4];
	int bad = 0;

	memset(e->buf + RCV_OFF, 0, MLEN);
	memset(e->buf + W_OFF, 0, BLEN);
	if (!CHECK(t_post_recv(e, seed, RCV_OFF, MLEN) == 0) ||
	    !CHECK_EQ_INT(peer_cmd(p, 'T', seed), 0))
		return -1;
	t_fill(e->buf + S_OFF, XLEN, seed);
	t_fill(e->buf + S2_OFF, MLEN, seed + 4);
	bad += !CHECK(run(e, IBV_WR_RDMA_WRITE, S_OFF, XLEN, &p->addr, W_OFF, 0, 0) == 0);
	bad += !CHECK(run(e, IBV_WR_RDMA_READ, D_OFF, XLEN, &p->addr, R_OFF, 0, 0) == 0);
	bad += !CHECK_MSG(filled(e->buf + D_OFF, XLEN, seed + 1), "READ data differs");
	bad += !CHECK(run(e, IBV_WR_ATOMIC_CMP_AND_SWP, AR_OFF, 8, &p->addr, AT_OFF, 0, seed) == 0);
	memcpy(&old[0], e->buf + AR_OFF, 8);
	for (int i = 1; i < 4; i++) {
		bad += !CHECK(run(e, IBV_WR_ATOMIC_FETCH_AND_ADD, AR_OFF, 8, &p->addr, AT_OFF, 0,
				  1) == 0);
		memcpy(&old[i], e->buf + AR_OFF, 8);
	}
	bad += !CHECK(old[0] == 0 && old[1] == seed && old[2] == seed + 1ull &&
		      old[3] == seed + 2ull);
	bad += !CHECK(run(e, IBV_WR_SEND, S2_OFF, MLEN, NULL, 0, 0, 0) == 0);
	bad += !CHECK_MSG(peer_cmd(p, 'V', seed) == 0, "the peer found A's data wrong");
	bad += !CHECK(t_poll(e->cq, &wc, 1, 20000) == 1 && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_RECV && wc.byte_len == MLEN);
	bad += !CHECK_MSG(filled(e->buf + RCV_OFF, MLEN, seed + 3), "B's SEND differs");
	bad += !CHECK_MSG(filled(e->buf + W_OFF, BLEN, seed + 2), "B's WRITE differs");
	return bad ? -1 : 0;
}

/*
 * Rounds until both processes have `want` rings mapped (a link each way:
 * 2), then one more: a ring is mapped a moment before its consumer
 * accepts it, in one step of the thread holding the receive token, so a
 * round handled after both counted runs over accepted rings. At most
 * LINK_WAIT_MS; true if they have.
 */
static bool wait_links(struct t_ep *e, struct peer *p, int want, uint32_t *seed)
{
	uint64_t end = t_ms() + LINK_WAIT_MS;
	int mine = -1, theirs = -1;
	bool counted;

	do {
		counted = mine == want && theirs == want; /* before this round */
		if (round_trip(e, p, (*seed)++))
			return false;
		mine = t_link_maps();
		theirs = peer_cmd(p, 'M', 0);
	} while (!counted && t_ms() < end);
	return CHECK_MSG(counted && mine == want && theirs == want,
			 "rings mapped: A %d, B %d, want %d", mine, theirs, want);
}

/* A's own device: opened with its environment, counters captured until closed. */
struct self {
	struct t_capture cap;
	struct t_ep e;
	int fd_before;
};

static int self_open(struct self *s, const struct peer_cfg *c)
{
	set_env(c);
	s->fd_before = t_count_fds();
	if (!CHECK(t_capture_begin(&s->cap) == 0))
		return -1;
	return t_ep_init(&s->e, NULL, IBV_QPT_RC, BUF_LEN, ACC, 16);
}

static void self_close(struct self *s, struct report *r)
{
	static char text[16384];

	memset(r, 0, sizeof(*r));
	t_ep_destroy(&s->e, true);
	t_capture_end(&s->cap, text, sizeof(text));
	printf("%s", text);
	parse_link(text, r);
	r->fd_after = t_count_fds();
	CHECK_MSG(r->seen, "A printed no link counters");
	CHECK_MSG(s->fd_before >= 0 && s->fd_before == r->fd_after,
		  "A's fds: %d before the device, %d after", s->fd_before, r->fd_after);
	CHECK_EQ_INT(t_link_maps(), 0);
}

static unsigned int net_hi, net_lo; /* this run's 127.hi.lo.x */

static struct peer_cfg cfg(unsigned int host, bool shm)
{
	struct peer_cfg c = {.shm = shm};

	snprintf(c.addr, sizeof(c.addr), "127.%u.%u.%u", net_hi, net_lo, host);
	return c;
}

static void print_counts(const char *who, const struct report *r)
{
	printf("# %s: link tx %llu rx %llu, links in %llu, corrupt %llu\n", who, r->tx, r->rx,
	       r->links, r->corrupt);
}

/* Cases a-c and e: A at host ha with link `sa`, B at hb with `sb`; `linked`: expect a link. */
static void pair_case(const char *name, unsigned int ha, bool sa, unsigned int hb, bool sb,
		      bool drop, bool linked)
{
	struct peer_cfg ca = cfg(ha, sa), cb = cfg(hb, sb);
	struct report ra, rb;
	struct self s;
	struct peer p;
	uint32_t seed = 10;

	t_case(name);
	cb.drop_uid = drop;
	if (peer_start(&p, &cb))
		return;
	if (self_open(&s, &ca) == 0 && peer_connect(&p, &s.e) == 0) {
		if (linked) {
			wait_links(&s.e, &p, 2, &seed);
		} else {
			/* past a retried look-up (1 s): still no link */
			for (uint64_t end = t_ms() + 1300; t_ms() < end; usleep(100 * 1000))
				if (round_trip(&s.e, &p, seed++))
					break;
			CHECK_EQ_INT(t_link_maps(), 0);
			CHECK_EQ_INT(peer_cmd(&p, 'M', 0), 0);
		}
		for (int i = 0; i < 3; i++)
			round_trip(&s.e, &p, seed++);
		printf("# %u verified rounds\n", seed - 10);
	}
	peer_finish(&p, &rb);
	self_close(&s, &ra);
	close(p.sock);
	print_counts("A", &ra);
	print_counts("B", &rb);
	if (linked) {
		CHECK_MSG(ra.tx > 0 && ra.rx > 0 && rb.tx > 0 && rb.rx > 0,
			  "link packets: A tx %llu rx %llu, B tx %llu rx %llu", ra.tx, ra.rx, rb.tx,
			  rb.rx);
		CHECK(ra.links >= 1 && rb.links >= 1);
		/* a side takes out of its ring at most what the other put in */
		CHECK(rb.rx <= ra.tx && ra.rx <= rb.tx);
	} else {
		CHECK_EQ_INT(ra.tx + ra.rx + ra.links, 0);
		CHECK_EQ_INT(rb.tx + rb.rx + rb.links, 0);
	}
	CHECK_EQ_INT(ra.corrupt + rb.corrupt, 0);
}

/* Case d: B exits, B' takes its address, A (still open) links to B'. */
static void restart_case(void)
{
	struct peer_cfg ca = cfg(41, true), cb = cfg(42, true), cb2 = cfg(42, true);
	struct report ra, rb, rb2;
	struct ibv_context *ctx;
	struct cmd go;
	struct self s;
	struct peer p, p2;
	uint32_t seed = 10;
	int maps = -1;

	t_case("d. peer restart: the links to the dead peer close, A links to the new one");
	memset(&go, 0, sizeof(go));
	go.op = 'G';
	cb2.wait_go = true;
	if (peer_start(&p, &cb))
		return;
	if (peer_start(&p2, &cb2)) {
		peer_finish(&p, &rb);
		close(p.sock);
		return;
	}
	if (self_open(&s, &ca) == 0 && peer_connect(&p, &s.e) == 0)
		wait_links(&s.e, &p, 2, &seed);
	peer_finish(&p, &rb);
	print_counts("B", &rb);
	CHECK_MSG(rb.tx > 0 && rb.rx > 0, "B: link tx %llu rx %llu", rb.tx, rb.rx);
	/* B's exit hangs up both links: A unmaps both rings (its sweep: every 100 ms) */
	for (uint64_t end = t_ms() + 3000; (maps = t_link_maps()) != 0 && t_ms() < end;)
		usleep(5000);
	CHECK_MSG(maps == 0, "A still has %d rings mapped after B's exit", maps);
	/* a new QP on the same device for B' */
	ctx = s.e.ctx;
	t_ep_destroy(&s.e, false);
	CHECK(t_xfer(p2.sock, &go, sizeof(go), true) == 0);
	if (ctx && t_ep_init(&s.e, ctx, IBV_QPT_RC, BUF_LEN, ACC, 16) == 0 &&
	    peer_connect(&p2, &s.e) == 0) {
		wait_links(&s.e, &p2, 2, &seed);
		round_trip(&s.e, &p2, seed++);
	}
	printf("# %u verified rounds\n", seed - 10);
	peer_finish(&p2, &rb2);
	self_close(&s, &ra);
	close(p.sock);
	close(p2.sock);
	print_counts("A", &ra);
	print_counts("B'", &rb2);
	CHECK_MSG(rb2.rx > 0 && rb2.tx > 0 && rb2.links >= 1,
		  "B': link tx %llu rx %llu, links in %llu", rb2.tx, rb2.rx, rb2.links);
	CHECK_MSG(ra.links >= 2, "A accepted %llu links (B's and B''s)", ra.links);
	CHECK_EQ_INT(ra.corrupt + rb.corrupt + rb2.corrupt, 0);
}

int main(void)
{
	pid_t pid = getpid();

	t_start("api_shm_link");
	net_hi = 100 + (unsigned int)pid % 100;
	net_lo = 1 + (unsigned int)(pid / 100) % 250;
	pair_case("a. default: both directions go over the link", 11, true, 12, true, false, true);
	pair_case("b. SOFTVERBS_SHM=0 in both: UDP, no link counted", 21, false, 22, false, false,
		  false);
	pair_case("c. SOFTVERBS_SHM=0 in B only: UDP both ways", 31, true, 32, false, false, false);
	restart_case();
	if (geteuid() == 0)
		pair_case("e. a peer of another uid (65534) is never linked", 51, true, 52, true,
			  true, false);
	else
		printf("# skip case e: not root, cannot setresuid to another uid (CAP_SETUID)\n");
	return t_finish();
}
