/* SPDX-License-Identifier: MIT */
/*
 * api_loss_streams: multi-packet RC streams between two processes keep
 * going under random loss. An initiator process streams NMSG (2000)
 * messages of 64 KiB at MTU 4096 (16 packets each), DEPTH (16) in flight,
 * to a target process, as RDMA WRITEs, RDMA READs or SENDs, over UDP
 * (SOFTVERBS_SHM=0 in both) and over the same-host link (the default
 * between processes of one network namespace). For each transport and
 * operation:
 *
 *   1. lossless: the stream's time T0 (first post to last completion),
 *      every payload verified;
 *   2. 0.5% and then 2% of the packets dropped on the send side of both
 *      processes (SOFTVERBS_FAULT=drop=F,side=tx): the stream must finish
 *      within the bound 10 x T0 + 3 s, the initiator gives up at the bound
 *      and reports how far it got. A loaded machine slows the lossless
 *      run too, so the bound scales with it.
 *
 * Every payload is checked: each message's bytes depend on its index
 * (a pattern and the index stamped at both ends). WRITE i lands at
 * offset i x 64 KiB of the target, checked there after the stream; READ i
 * reads one of 64 patterned slots of the target, checked on completion;
 * SEND i is checked by the target as it is received (a ring of 256
 * receives, reposted). Every completion must be successful and in order.
 * Over the link the WRITE runs' MIDDLEs kept behind a gap are drained in
 * one step (run.c, sw_resp_drain_middles: 3,236 times in one run here),
 * so the verified payloads cover that path too.
 * From the devices' SOFTVERBS_STATS=1 reports (stderr of the workers,
 * tests/stats.h): no error completion; over the link, packets went over
 * the link; over UDP, none did; with loss, packets were dropped.
 *
 * Under ASan and TSan NMSG is 500 (the same transport paths, a quarter of
 * the time). SV_LS_MSGS=N overrides NMSG, SV_LS_ONLY=udp|link one
 * transport (debugging).
 */
#include "harness.h"
#include "stats.h"
#include "traffic.h"

#include <sys/socket.h>

/* test: no-valgrind */
/* test: timeout=400 */
/* test: env=SOFTVERBS_UDP_PORT=4795 */

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define LEN (64u * 1024)
#define DEPTH 16
#define NPAT 61 /* patterns of the message bodies (prime: not a multiple of a ring) */
#define RSLOTS 64 /* READ source slots of the target */
#define RQ 256 /* receives the target keeps posted */
#define BOUND_X 10
#define BOUND_PLUS_MS 3000

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DEFAULT_MSGS 500
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DEFAULT_MSGS 500
#endif
#endif
#ifndef DEFAULT_MSGS
#define DEFAULT_MSGS 2000
#endif

enum op {
	S_WRITE,
	S_READ,
	S_SEND
};

static const char *const op_name[] = {"RDMA WRITE", "RDMA READ", "SEND"};

static uint32_t nmsg = DEFAULT_MSGS;
static uint8_t *pat; /* NPAT bodies of LEN bytes */

/* Message i's payload into dst. */
static void msg_make(uint8_t *dst, uint32_t i)
{
	uint64_t a = i, b = ~(uint64_t)i;

	memcpy(dst, pat + (size_t)(i % NPAT) * LEN, LEN);
	memcpy(dst, &a, 8);
	memcpy(dst + LEN - 8, &b, 8);
}

/* Bytes of `got` that are not message i's payload. */
static uint32_t msg_wrong(const uint8_t *got, uint32_t i)
{
	static uint8_t want[LEN];
	uint32_t n = 0;

	msg_make(want, i);
	if (!memcmp(got, want, LEN))
		return 0;
	for (uint32_t k = 0; k < LEN; k++)
		n += got[k] != want[k];
	return n;
}

/* One run: what the parent asks of its workers. */
struct run {
	enum op op;
	bool shm;
	double drop; /* 0: lossless */
	uint32_t seed;
	uint64_t bound_ms; /* the initiator gives up after this */
	int sock; /* the worker's end of the socketpair */
};

/* A fresh device configured for run `r` (read at open), an RC endpoint on it in INIT. */
static int ep_open(struct t_ep *e, const struct run *r, size_t len)
{
	char fault[96];

	setenv("SOFTVERBS_SHM", r->shm ? "1" : "0", 1);
	setenv("SOFTVERBS_STATS", "1", 1);
	if (r->drop > 0) {
		snprintf(fault, sizeof(fault), "drop=%.4f,side=tx,seed=%u", r->drop, r->seed);
		setenv("SOFTVERBS_FAULT", fault, 1);
	} else {
		unsetenv("SOFTVERBS_FAULT");
	}
	/* RQ deep on both sides (the initiator keeps DEPTH in flight itself) */
	return t_ep_init(e, NULL, IBV_QPT_RC, len, ACC, RQ);
}

/* Addresses both ways over `sock` (`first` sends first), then RTS at MTU 4096. */
static int ep_connect(struct t_ep *e, int sock, bool first, uint32_t my_psn, struct t_addr *peer)
{
	struct t_addr me = t_addr_of(e, my_psn);

	if (first ? t_xfer(sock, &me, sizeof(me), true) ||
			    t_xfer(sock, peer, sizeof(*peer), false) :
		    t_xfer(sock, peer, sizeof(*peer), false) || t_xfer(sock, &me, sizeof(me), true))
		return -1;
	return t_connect_to(e, peer, my_psn, IBV_MTU_4096);
}

/* The end of a worker: the device closed (its counters to stderr), the result to `out`. */
static int ep_report(struct t_ep *e, struct t_wres *res, int out)
{
	t_ep_destroy(e, true);
	return t_wres_send(res, out);
}

#define ULL(x) ((unsigned long long)(x))

/* ---- initiator ---- */

/* Post message `i` of the stream. */
static int post_msg(struct t_ep *e, const struct t_addr *peer, enum op op, uint32_t i)
{
	uint8_t *slot = e->buf + (size_t)(i % DEPTH) * LEN;
	struct ibv_sge sge = {(uintptr_t)slot, LEN, e->mr->lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = i;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.rkey = peer->rkey;
	if (op == S_READ) {
		memset(slot, 0, 16);
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = peer->addr + (size_t)(i % RSLOTS) * LEN;
	} else {
		msg_make(slot, i);
		wr.opcode = op == S_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_SEND;
		wr.wr.rdma.remote_addr = peer->addr + (size_t)i * LEN;
	}
	return CHECK_RET(ibv_post_send(e->qp, &wr, &bad), 0) ? 0 : -1;
}

/* The stream, DEPTH in flight, until it is done, fails or runs out of time. */
static void stream_run(struct t_ep *e, const struct t_addr *peer, const struct run *r,
		       struct t_wres *res)
{
	uint32_t posted = 0, done = 0;
	uint64_t t0 = t_ms(), end = t0 + r->bound_ms;

	while (done < nmsg) {
		struct ibv_wc wc[DEPTH];
		int n;

		while (posted < nmsg && posted - done < DEPTH)
			if (post_msg(e, peer, r->op, posted++))
				goto stop;
		n = ibv_poll_cq(e->cq, DEPTH, wc);
		if (n < 0) {
			t_wres_bad(res, "ibv_poll_cq failed at %u of %u", done, nmsg);
			break;
		}
		if (n == 0 && t_ms() >= end)
			break; /* out of time: report how far it got */
		if (n == 0)
			usleep(20); /* leave the cores to the progress threads */
		for (int k = 0; k < n; k++) {
			uint32_t w;

			if (wc[k].status != IBV_WC_SUCCESS || wc[k].wr_id != done) {
				t_wres_bad(res, "completion %u: wr_id %llu %s", done,
					   ULL(wc[k].wr_id), ibv_wc_status_str(wc[k].status));
				goto stop;
			}
			w = r->op == S_READ ? msg_wrong(e->buf + (size_t)(done % DEPTH) * LEN,
							done % RSLOTS) :
					      0;
			if (w) {
				t_wres_bad(res, "READ %u: %u bytes wrong", done, w);
				res->bad_bytes += w;
			}
			done++;
		}
	}
stop:
	res->ms = t_ms() - t0;
	res->done = done;
}

static int initiator(void *arg, int out)
{
	struct run *r = arg;
	struct t_wres res = {0};
	struct t_addr peer;
	struct t_ep e;
	uint32_t done;
	char c;

	if (ep_open(&e, r, (size_t)DEPTH * LEN) || ep_connect(&e, r->sock, false, 100, &peer) ||
	    t_xfer(r->sock, &c, 1, false)) { /* the target is ready */
		res.setup_failed = 1;
		return ep_report(&e, &res, out);
	}
	stream_run(&e, &peer, r, &res);
	/* tell the target how far the stream got; it checks and answers */
	done = (uint32_t)res.done;
	if (t_xfer(r->sock, &done, sizeof(done), true) == 0)
		t_xfer(r->sock, &c, 1, false);
	return ep_report(&e, &res, out);
}

/* ---- target ---- */

static int post_recv(struct t_ep *e, uint64_t id)
{
	struct ibv_sge sge = {(uintptr_t)e->buf + (size_t)(id % RQ) * LEN, LEN, e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;

	return CHECK_RET(ibv_post_recv(e->qp, &wr, &bad), 0) ? 0 : -1;
}

/*
 * SENDs: take receive completions, check each, repost; until `want`, the
 * deadline, or (sock >= 0) the initiator says it finished. -1 on an error.
 */
static int take_recvs(struct t_ep *e, struct t_wres *res, uint32_t *got, uint32_t want, int sock,
		      uint64_t deadline)
{
	struct pollfd pfd = {.fd = sock, .events = POLLIN};

	while (*got < want && t_ms() < deadline) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(e->cq, 16, wc);

		if (n < 0)
			return -1;
		if (n == 0 && sock >= 0 && poll(&pfd, 1, 0) > 0)
			return 0;
		if (n == 0)
			usleep(20);
		for (int k = 0; k < n; k++) {
			uint32_t w;

			if (wc[k].status != IBV_WC_SUCCESS || wc[k].wr_id != *got ||
			    wc[k].byte_len != LEN) {
				t_wres_bad(res, "receive %u: wr_id %llu, %u bytes, %s", *got,
					   ULL(wc[k].wr_id), wc[k].byte_len,
					   ibv_wc_status_str(wc[k].status));
				return -1;
			}
			w = msg_wrong(e->buf + (size_t)(*got % RQ) * LEN, *got);
			if (w) {
				t_wres_bad(res, "SEND %u: %u bytes wrong", *got, w);
				res->bad_bytes += w;
			}
			if (post_recv(e, *got + RQ))
				return -1;
			(*got)++;
		}
	}
	return 0;
}

/* After the stream: `done` messages arrived (WRITE: in place, SEND: received). */
static void target_check(struct t_ep *e, const struct run *r, struct t_wres *res, uint32_t *got,
			 uint32_t done)
{
	if (r->op == S_SEND) {
		take_recvs(e, res, got, done, -1, t_ms() + 5000);
		if (*got < done) {
			t_wres_bad(res, "%u SENDs completed, %u received", done, *got);
		}
		return;
	}
	*got = done;
	for (uint32_t i = 0; r->op == S_WRITE && i < done; i++) {
		uint32_t w = msg_wrong(e->buf + (size_t)i * LEN, i);

		if (w) {
			t_wres_bad(res, "WRITE %u: %u bytes wrong", i, w);
			res->bad_bytes += w;
		}
	}
}

static int target(void *arg, int out)
{
	struct run *r = arg;
	struct t_wres res = {0};
	struct t_addr peer;
	struct t_ep e;
	size_t len = r->op == S_WRITE ? (size_t)nmsg * LEN :
		     r->op == S_READ  ? (size_t)RSLOTS * LEN :
					(size_t)RQ * LEN;
	uint32_t got = 0, done = 0;
	char c = 'r';
	int ok = ep_open(&e, r, len) == 0;

	for (uint32_t s = 0; ok && r->op == S_READ && s < RSLOTS; s++)
		msg_make(e.buf + (size_t)s * LEN, s);
	for (uint32_t i = 0; ok && r->op == S_SEND && i < RQ; i++)
		ok = post_recv(&e, i) == 0;
	ok = ok && ep_connect(&e, r->sock, true, 0xfffff0, &peer) == 0 &&
	     t_xfer(r->sock, &c, 1, true) == 0;
	if (ok && r->op == S_SEND)
		take_recvs(&e, &res, &got, nmsg, r->sock, t_ms() + r->bound_ms + 60000);
	/* how far the initiator got (it says so once it has stopped) */
	ok = ok && t_xfer(r->sock, &done, sizeof(done), false) == 0;
	if (ok && !res.bad)
		target_check(&e, r, &res, &got, done);
	res.setup_failed = !ok;
	res.done = got;
	t_xfer(r->sock, &c, 1, true);
	return ep_report(&e, &res, out);
}

/* ---- the parent ---- */

/*
 * One stream; its time in ms (the initiator's), or 0 if it did not
 * finish. Every check of the run is made here.
 */
static uint64_t stream(enum op op, bool shm, double drop, uint64_t bound_ms)
{
	static uint32_t seed = 100;
	struct run ri = {op, shm, drop, ++seed, bound_ms, -1}, rt = ri;
	struct t_wres res[2];
	struct t_proc ps[2];
	struct t_stats st = {0};
	int sv[2], good;
	const char *tr = shm ? "link" : "UDP";

	memset(res, 0, sizeof(res));
	rt.seed = ++seed;
	if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0))
		return 0;
	ri.sock = sv[0];
	rt.sock = sv[1];
	CHECK(t_proc_spawn(&ps[0], initiator, &ri, &res[0], sizeof(res[0]), sv[1]) == 0);
	CHECK(t_proc_spawn(&ps[1], target, &rt, &res[1], sizeof(res[1]), sv[0]) == 0);
	close(sv[0]);
	close(sv[1]);
	good = t_proc_reap(ps, 2, (int)bound_ms + 120000);
	printf("# %s over %s, %.1f%% loss: %llu of %u messages in %llu ms (bound %llu ms); "
	       "target saw %llu\n",
	       op_name[op], tr, drop * 100, (unsigned long long)res[0].done, nmsg,
	       (unsigned long long)res[0].ms, (unsigned long long)bound_ms,
	       (unsigned long long)res[1].done);
	t_wres_check(ps, res, 2, good, &st);
	t_stats_print("counters", &st);
	CHECK_MSG(res[0].bad + res[1].bad == 0 && res[0].bad_bytes + res[1].bad_bytes == 0,
		  "%llu messages with %llu bytes wrong",
		  (unsigned long long)(res[0].bad + res[1].bad),
		  (unsigned long long)(res[0].bad_bytes + res[1].bad_bytes));
	CHECK_MSG(res[0].done == nmsg,
		  "%s over %s at %.1f%% loss: %llu of %u messages within %llu "
		  "ms (10 x lossless + 3 s)",
		  op_name[op], tr, drop * 100, (unsigned long long)res[0].done, nmsg,
		  (unsigned long long)bound_ms);
	/* a SEND may be received while its ACK is still on the way when the initiator stops */
	CHECK_MSG(res[1].done >= res[0].done, "the target saw %llu messages of the %llu completed",
		  (unsigned long long)res[1].done, (unsigned long long)res[0].done);
	CHECK_EQ_INT(st.wc_err, 0);
	if (shm)
		CHECK_MSG(st.link_tx > 0, "nothing went over the same-host link");
	else
		CHECK_MSG(st.link_tx + st.link_rx == 0, "packets went over the same-host link");
	if (drop > 0)
		CHECK_MSG(st.fault_drops > 0, "no packet was dropped");
	for (int i = 0; i < 2; i++)
		t_proc_free(&ps[i]);
	return res[0].done == nmsg ? (res[0].ms ? res[0].ms : 1) : 0;
}

static void transport(bool shm)
{
	static char name[3][4][96];

	for (int op = S_WRITE; op <= S_SEND; op++) {
		static const double drops[] = {0.005, 0.02};
		uint64_t t0, bound;

		snprintf(name[op][0], sizeof(name[op][0]), "%s over %s, lossless", op_name[op],
			 shm ? "the same-host link" : "UDP");
		t_case(name[op][0]);
		t0 = stream((enum op)op, shm, 0, 120000);
		if (!t0)
			continue;
		bound = BOUND_X * t0 + BOUND_PLUS_MS;
		for (int d = 0; d < 2; d++) {
			snprintf(name[op][1 + d], sizeof(name[op][1 + d]),
				 "%s over %s, %.1f%% loss: within %llu ms", op_name[op],
				 shm ? "the same-host link" : "UDP", drops[d] * 100,
				 (unsigned long long)bound);
			t_case(name[op][1 + d]);
			stream((enum op)op, shm, drops[d], bound);
		}
	}
}

int main(void)
{
	const char *only = getenv("SV_LS_ONLY");

	t_start("api_loss_streams");
	if (getenv("SV_LS_MSGS") && atoi(getenv("SV_LS_MSGS")) > 0)
		nmsg = (uint32_t)atoi(getenv("SV_LS_MSGS"));
	pat = malloc((size_t)NPAT * LEN);
	if (!CHECK(pat))
		return t_finish();
	for (uint32_t p = 0; p < NPAT; p++)
		t_fill(pat + (size_t)p * LEN, LEN, 7 + p);
	printf("# %u messages of %u bytes, %d in flight, MTU 4096; bound 10 x lossless + 3 s\n",
	       nmsg, LEN, DEPTH);
	if (!only || !strcmp(only, "udp"))
		transport(false);
	if (!only || !strcmp(only, "link"))
		transport(true);
	free(pat);
	return t_finish();
}
