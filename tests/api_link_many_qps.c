/* SPDX-License-Identifier: MIT */
/*
 * api_link_many_qps: many RC QPs streaming 64 KiB RDMA WRITEs over the
 * same-host link between two processes, with nothing lost, need no
 * retransmission: like `ib_write_bw -q 128 -s 65536` and `-q 1024`.
 *
 * An initiator process and a target process each open a device with the
 * same-host link on (SOFTVERBS_SHM=1, whatever the stage sets), no fault
 * injection, SOFTVERBS_STATS=1, and create NQP RC QPs on one CQ,
 * connected pairwise (MTU 4096, traffic.h's timers: ACK timeout 14, i.e.
 * 67 ms, retry count 7). Before the stream, small WRITEs go back and forth
 * on one more QP (ACK timeout 18: WARM_TIMEOUT) until both processes have
 * the link's two rings mapped, and once more so that both have accepted
 * them (the first packets to a new peer go by UDP).
 * Neither side sends before both have all their QPs in RTS: a first probe
 * once reached the target's probes' QP still in INIT, was dropped, and
 * timed out (2 runs in 90, three at a time: every failure of this test
 * that stop 31's instrumented runs caught). Then every initiator QP
 * posts NWR signalled 64 KiB WRITEs into its own 64 KiB slot of the target, DEPTH in flight per QP.
 * Cases:
 *
 *   1. 128 QPs, 16 in flight each, 200 WRITEs per QP (1.6 GiB);
 *   2. 1024 QPs, 16 in flight each (1 GiB), 24 WRITEs per QP (1.5 GiB);
 *   3. as 1 with 40 WRITEs per QP, the target process stopped (SIGSTOP)
 *      90 ms of every 110 ms while the stream runs, as a loaded host
 *      starves a process: the 67 ms timer expires with the packets still
 *      in the link's ring, and is deferred while its consumer reads on
 *      (docs/queue-pairs.md). Without that rule: 24 and 73 timeouts in two runs.
 *
 * (ib_write_bw keeps 128 in flight per QP by default; 4 in flight at 1024
 * QPs showed as few as 1 timeout on the transport this test was written
 * against, 16 showed hundreds to thousands; with an ACK timeout of 18,
 * 1.07 s, it showed none: packets queued behind the others outlasted the
 * 67 ms timer, nothing was lost.)
 *
 * Checked: every WRITE completes successfully and in order on its QP,
 * within 120 s (no progress for 30 s fails sooner); each target slot then
 * holds its QP's source bytes; and from both devices' counters: 0
 * retransmissions and 0 ACK timeouts (the bound: nothing is lost, so
 * nothing may time out however long the queues), no error completion, no
 * packet dropped, packets went over the link. The throughput is printed.
 * Under ASan and TSan every case writes a quarter of the WRITEs per QP.
 * SV_MQ_NWR=N, SV_MQ_DEPTH=N and SV_MQ_TIMEOUT=N (the ACK timeout
 * exponent) override the case's values, SV_MQ_ONLY=N
 * runs case N alone (debugging). On the transport before the timer
 * guarded only packets in flight, case 1 showed about 130 ACK timeouts
 * under ASan and case 2 1,500-3,700 in every build: a QP whose sent
 * packets were all acknowledged, waiting in the budget's line with a
 * WQE half sent, timed out and resent what its peer already had.
 */
#include "harness.h"
#include "stats.h"
#include "traffic.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/socket.h>

/* test: no-valgrind */
/* test: timeout=300 */
/* test: env=SOFTVERBS_UDP_PORT=4796 */

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define LEN (64u * 1024)
#define MAX_QP 1024
/*
 * The link probes' QP: ACK timeout 18 (1.07 s). The first probes go by
 * UDP, where nothing defers a timer (a starved peer is not a reason to
 * fail this test).
 */
#define WARM_TIMEOUT 18
#define LINK_WAIT_MS 8000
#define RUN_MS 120000
#define STALL_MS 30000
#define STOP_MS 90 /* longer than the 67 ms ACK timeout */
#define RUN_SLICE_MS 20

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NWR_DIV 4
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NWR_DIV 4
#endif
#endif
/*
 * Under ThreadSanitizer a device moves about 8,500 packets a second (118 us
 * each), so the 512 PSNs its budget lets into flight take some 60 ms to
 * drain: the 67 ms timer of timeout 14 is then no longer above the
 * queue's own delay (2 and 154 timeouts in the two cases, nothing lost).
 * There the ACK timeout is 18 (1.07 s), as on a path that slow it would
 * be; ASan (about 0.6 GB/s) keeps 14.
 */
#if defined(__SANITIZE_THREAD__)
#define MQ_TIMEOUT 18
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MQ_TIMEOUT 18
#endif
#endif
#ifndef NWR_DIV
#define NWR_DIV 1
#endif

struct mq_case {
	uint32_t nqp, depth, nwr;
	bool starve; /* the target is stopped STOP_MS of every STOP_MS + RUN_SLICE_MS */
	int sock; /* the worker's end of the socketpair */
};

/* One process's side: a device, NQP RC QPs on one CQ, one buffer of NQP slots. */
struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp[MAX_QP + 1]; /* and the link probes' QP, last (WARM_TIMEOUT) */
	uint8_t *buf;
	uint32_t nqp;
};

static int side_open(struct side *s, const struct mq_case *c)
{
	struct ibv_qp_init_attr ia = {0};
	size_t len = (size_t)c->nqp * LEN;

	memset(s, 0, sizeof(*s));
	setenv("SOFTVERBS_SHM", "1", 1);
	setenv("SOFTVERBS_STATS", "1", 1);
	unsetenv("SOFTVERBS_FAULT");
	s->nqp = c->nqp + 1;
	s->ctx = t_open_dev(); /* the configuration is read here */
	if (!CHECK(s->ctx))
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, (int)(c->nqp * c->depth + 64), NULL, NULL, 0);
	s->buf = aligned_alloc(4096, len);
	if (!CHECK(s->pd && s->cq && s->buf))
		return -1;
	memset(s->buf, 0, len);
	s->mr = ibv_reg_mr(s->pd, s->buf, len, ACC);
	if (!CHECK(s->mr))
		return -1;
	ia.send_cq = ia.recv_cq = s->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = c->depth;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	for (uint32_t q = 0; q < s->nqp; q++) {
		s->qp[q] = ibv_create_qp(s->pd, &ia);
		if (!CHECK(s->qp[q]) || t_qp_init(s->qp[q], ACC))
			return -1;
	}
	return 0;
}

/* Addresses both ways over `sock`, then every QP to RTS towards its peer. */
static int side_connect(struct side *s, int sock, bool first, uint32_t my_psn, uint32_t peer_psn,
			struct t_addr *peer)
{
	struct t_addr *me = calloc(s->nqp, sizeof(*me));
	char ready = 'r';
	size_t n = s->nqp * sizeof(*me);
	int ret = -1;

	if (!CHECK(me))
		return -1;
	for (uint32_t q = 0; q < s->nqp; q++) {
		me[q].qpn = s->qp[q]->qp_num;
		me[q].rkey = s->mr->rkey;
		/* the probes' QP writes into slot 0, which the stream then overwrites */
		me[q].addr = (uintptr_t)s->buf + (size_t)(q + 1 < s->nqp ? q : 0) * LEN;
		if (!CHECK_RET(ibv_query_gid(s->ctx, 1, 0, &me[q].gid), 0))
			goto out;
	}
	if (first ? t_xfer(sock, me, n, true) || t_xfer(sock, peer, n, false) :
		    t_xfer(sock, peer, n, false) || t_xfer(sock, me, n, true))
		goto out;
#ifdef MQ_TIMEOUT
	t_timeout = MQ_TIMEOUT;
#endif
	if (getenv("SV_MQ_TIMEOUT"))
		t_timeout = (uint8_t)atoi(getenv("SV_MQ_TIMEOUT"));
	for (uint32_t q = 0; q < s->nqp; q++) {
		uint8_t timeout = t_timeout;
		int r;

		if (q + 1 == s->nqp)
			t_timeout = WARM_TIMEOUT;
		r = t_qp_rts(s->qp[q], peer[q].qpn, &peer[q].gid, peer_psn, my_psn, IBV_MTU_4096);
		t_timeout = timeout;
		if (r)
			goto out;
	}
	/* no packet before the peer's QPs are ready too: one to a QP in INIT is dropped */
	if (t_xfer(sock, &ready, 1, true) || t_xfer(sock, &ready, 1, false))
		goto out;
	ret = 0;
out:
	free(me);
	return ret;
}

/* The end of a worker: the device closed (its counters to stderr), the result to `out`. */
static int side_report(struct side *s, struct t_wres *res, int out)
{
	for (uint32_t q = 0; q < s->nqp; q++)
		if (s->qp[q])
			CHECK_RET(ibv_destroy_qp(s->qp[q]), 0);
	if (s->mr)
		CHECK_RET(ibv_dereg_mr(s->mr), 0);
	if (s->cq)
		CHECK_RET(ibv_destroy_cq(s->cq), 0);
	if (s->pd)
		CHECK_RET(ibv_dealloc_pd(s->pd), 0);
	if (s->ctx)
		ibv_close_device(s->ctx);
	free(s->buf);
	return t_wres_send(res, out);
}

static int post_write(struct side *s, const struct t_addr *peer, uint32_t q, uint32_t i,
		      uint32_t len)
{
	size_t slot = q + 1 < s->nqp ? q : 0; /* the probes' QP uses slot 0 */
	struct ibv_sge sge = {(uintptr_t)s->buf + slot * LEN, len, s->mr->lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)q << 32 | i;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = peer[q].addr;
	wr.wr.rdma.rkey = peer[q].rkey;
	return CHECK_RET(ibv_post_send(s->qp[q], &wr, &bad), 0) ? 0 : -1;
}

/* ---- initiator ---- */

/* One 8-byte WRITE on the probes' QP and its completion: a round trip. */
static int round_trip(struct side *s, const struct t_addr *peer)
{
	struct ibv_wc wc;

	if (post_write(s, peer, s->nqp - 1, 0, 8))
		return -1;
	return t_poll(s->cq, &wc, 1, 10000) == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

/* The stream: NWR WRITEs per QP, DEPTH in flight each; every completion checked. */
static void stream(struct side *s, const struct t_addr *peer, const struct mq_case *c,
		   struct t_wres *res)
{
	uint32_t *posted = calloc(c->nqp, sizeof(*posted)), *done = calloc(c->nqp, sizeof(*done));
	uint64_t total = (uint64_t)c->nqp * c->nwr, t0 = t_ms(), last = t0;

	if (!CHECK(posted && done))
		goto out;
	for (uint32_t q = 0; q < c->nqp; q++)
		while (posted[q] < c->nwr && posted[q] < c->depth)
			if (post_write(s, peer, q, posted[q]++, LEN))
				goto out;
	while (res->done < total) {
		struct ibv_wc wc[64];
		int n = ibv_poll_cq(s->cq, 64, wc);
		uint64_t now;

		if (n < 0) {
			t_wres_bad(res, "ibv_poll_cq failed");
			break;
		}
		if (n == 0) {
			now = t_ms();
			if (now - last > STALL_MS || now - t0 > RUN_MS) {
				t_wres_bad(
					res,
					"%llu of %llu WRITEs done after %llu ms (no progress for %llu ms)",
					(unsigned long long)res->done, (unsigned long long)total,
					(unsigned long long)(now - t0),
					(unsigned long long)(now - last));
				break;
			}
			usleep(20); /* leave the cores to the progress threads */
			continue;
		}
		last = t_ms();
		for (int k = 0; k < n; k++) {
			uint32_t q = (uint32_t)(wc[k].wr_id >> 32), i = (uint32_t)wc[k].wr_id;

			if (wc[k].status != IBV_WC_SUCCESS || q >= c->nqp || i != done[q] ||
			    wc[k].qp_num != s->qp[q]->qp_num) {
				t_wres_bad(res, "completion of QP %u WRITE %u (want %u): %s", q, i,
					   q < c->nqp ? done[q] : 0,
					   ibv_wc_status_str(wc[k].status));
				goto out;
			}
			done[q]++;
			res->done++;
			if (posted[q] < c->nwr && post_write(s, peer, q, posted[q]++, LEN))
				goto out;
		}
	}
out:
	res->ms = t_ms() - t0;
	free(posted);
	free(done);
}

static int initiator(void *arg, int out)
{
	const struct mq_case *c = arg;
	struct t_wres res = {0};
	struct t_addr *peer = calloc(c->nqp + 1, sizeof(*peer));
	struct side s;
	uint64_t end;
	int theirs = -1, mine = -1;
	bool counted = false;
	char go = 'g';

	if (!CHECK(peer) || side_open(&s, c) || side_connect(&s, c->sock, false, 100, 200, peer)) {
		res.setup_failed = 1;
		goto report;
	}
	for (uint32_t q = 0; q < c->nqp; q++)
		t_fill(s.buf + (size_t)q * LEN, LEN, q);
	/*
	 * Round trips until both processes have both rings of the link mapped,
	 * and one more round trip after that: a ring is mapped before its
	 * consumer accepts it (until then its producer sends by UDP, where a
	 * stopped target's packets wait in its socket and the 67 ms timer
	 * expires: 1 run in 50 under load did). Accepting is one step of the
	 * thread that holds the receive token, so a packet handled after
	 * both processes counted their rings comes after both accepted.
	 */
	end = t_ms() + LINK_WAIT_MS;
	do {
		counted = mine == 2 && theirs == 2; /* before this round trip */
		if (round_trip(&s, peer) || t_xfer(c->sock, &go, 1, true) ||
		    t_xfer(c->sock, &theirs, sizeof(theirs), false)) {
			res.setup_failed = 1;
			goto report;
		}
		mine = t_link_maps();
	} while (!counted && t_ms() < end);
	res.flag = counted && mine == 2 && theirs == 2; /* flag: the link came up */
	if (!res.flag)
		t_wres_bad(&res, "rings mapped: initiator %d, target %d, want 2", mine, theirs);
	go = 's';
	if (t_xfer(c->sock, &go, 1, true)) {
		res.setup_failed = 1;
		goto report;
	}
	stream(&s, peer, c, &res);
	/* the target checks its slots now */
	go = 'c';
	if (t_xfer(c->sock, &go, 1, true) == 0)
		t_xfer(c->sock, &go, 1, false);
report:
	free(peer);
	return side_report(&s, &res, out);
}

/* ---- target ---- */

/*
 * A child that stops its parent (the target) STOP_MS of every
 * STOP_MS + RUN_SLICE_MS, as a loaded host starves a process, until
 * *quit; it continues the parent last. Returns its pid, or -1.
 */
static pid_t starve_start(atomic_int *quit)
{
	pid_t parent = getpid(), pid = fork();

	if (pid != 0)
		return pid;
	while (!atomic_load(quit) && getppid() == parent) {
		kill(parent, SIGSTOP);
		usleep(STOP_MS * 1000);
		kill(parent, SIGCONT);
		usleep(RUN_SLICE_MS * 1000);
	}
	kill(parent, SIGCONT);
	_exit(0);
}

static void starve_stop(pid_t pid, atomic_int *quit)
{
	if (pid <= 0)
		return;
	atomic_store(quit, 1);
	waitpid(pid, NULL, 0);
}

static int target(void *arg, int out)
{
	const struct mq_case *c = arg;
	struct t_wres res = {0};
	struct t_addr *peer = calloc(c->nqp + 1, sizeof(*peer));
	uint8_t *want = malloc(LEN);
	atomic_int *quit = mmap(NULL, sizeof(*quit), PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t starver = -1;
	struct side s;
	char cmd = 0;

	if (!CHECK(peer && want) || side_open(&s, c) ||
	    side_connect(&s, c->sock, true, 200, 100, peer)) {
		res.setup_failed = 1;
		goto report;
	}
	/* answer the initiator's link probes with this process's ring count */
	while (t_xfer(c->sock, &cmd, 1, false) == 0 && cmd == 'g') {
		int maps = t_link_maps();

		if (t_xfer(c->sock, &maps, sizeof(maps), true))
			break;
	}
	/* no verbs calls while the initiator streams (starved or not); then the slots */
	if (cmd == 's' && c->starve && quit != MAP_FAILED)
		starver = starve_start(quit);
	if (cmd == 's' && t_xfer(c->sock, &cmd, 1, false) == 0 && cmd == 'c') {
		starve_stop(starver, quit);
		starver = -1;
		for (uint32_t q = 0; q < c->nqp; q++) {
			t_fill(want, LEN, q);
			if (memcmp(want, s.buf + (size_t)q * LEN, LEN))
				t_wres_bad(&res, "the slot of QP %u differs from its source", q);
		}
		res.done = c->nqp;
		t_xfer(c->sock, &cmd, 1, true);
	}
report:
	starve_stop(starver, quit);
	if (quit != MAP_FAILED)
		munmap(quit, sizeof(*quit));
	free(peer);
	free(want);
	return side_report(&s, &res, out);
}

/* ---- the parent ---- */

static void run_case(uint32_t nqp, uint32_t depth, uint32_t nwr, bool starve)
{
	static char name[2][160];
	static int num;
	struct mq_case ci = {nqp, depth, nwr, starve, -1}, ct;
	struct t_wres res[2];
	struct t_proc ps[2];
	struct t_stats st = {0};
	const char *only = getenv("SV_MQ_ONLY");
	int sv[2], good;
	uint64_t total;
	char *n = name[num++ % 2];

	if (only && atoi(only) != num)
		return;
	if (getenv("SV_MQ_NWR"))
		ci.nwr = (uint32_t)atoi(getenv("SV_MQ_NWR"));
	if (getenv("SV_MQ_DEPTH"))
		ci.depth = (uint32_t)atoi(getenv("SV_MQ_DEPTH"));
	total = (uint64_t)ci.nqp * ci.nwr;
	snprintf(n, sizeof(name[0]),
		 "%u QPs x %u WRITEs of 64 KiB, %u in flight each, over the link%s: no "
		 "retransmission",
		 ci.nqp, ci.nwr, ci.depth, starve ? ", target stopped 90 of every 110 ms" : "");
	t_case(n);
	memset(res, 0, sizeof(res));
	if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0))
		return;
	ct = ci;
	ci.sock = sv[0];
	ct.sock = sv[1];
	CHECK(t_proc_spawn(&ps[0], initiator, &ci, &res[0], sizeof(res[0]), sv[1]) == 0);
	CHECK(t_proc_spawn(&ps[1], target, &ct, &res[1], sizeof(res[1]), sv[0]) == 0);
	close(sv[0]);
	close(sv[1]);
	good = t_proc_reap(ps, 2, RUN_MS + 60000);
	printf("# %llu of %llu WRITEs in %llu ms (%.2f GB/s)\n", (unsigned long long)res[0].done,
	       (unsigned long long)total, (unsigned long long)res[0].ms,
	       res[0].ms ? (double)res[0].done * LEN / 1e6 / (double)res[0].ms : 0.0);
	t_wres_check(ps, res, 2, good, &st);
	t_stats_print("counters", &st);
	printf("# timer expiries deferred while the link was draining: %llu\n", st.deferrals);
	CHECK_MSG(res[0].flag, "the link did not come up in %d ms", LINK_WAIT_MS);
	CHECK_EQ_INT(res[0].done, total);
	CHECK_EQ_INT(res[1].done, ci.nqp);
	CHECK_EQ_INT(res[0].bad + res[1].bad, 0);
	CHECK_MSG(st.retransmits == 0 && st.timeouts == 0,
		  "nothing was lost, yet %llu retransmissions and %llu ACK timeouts",
		  st.retransmits, st.timeouts);
	CHECK_EQ_INT(st.wc_err, 0);
	CHECK_EQ_INT(st.fault_drops, 0);
	CHECK_MSG(st.link_tx > total, "%llu packets over the link for %llu WRITEs", st.link_tx,
		  (unsigned long long)total);
	for (int i = 0; i < 2; i++)
		t_proc_free(&ps[i]);
}

int main(void)
{
	t_start("api_link_many_qps");
	run_case(128, 16, 200 / NWR_DIV, false);
	run_case(1024, 16, 24 / NWR_DIV, false);
	run_case(128, 16, 40 / NWR_DIV, true);
	return t_finish();
}
