/* SPDX-License-Identifier: MIT */
/*
 * loss_role.c - one process of a loss point (loss.h): rank r of M, with
 * N RC QPs writing into rank r+1 and N receiving from rank r-1, one CQ,
 * one registered buffer each way (region j of `size` bytes per QP j).
 *
 * SV_BENCH_LOSS="rank,procs,qps,depth,oneway" (loss.c sets it); the
 * device's settings (SOFTVERBS_FAULT, SOFTVERBS_SHM, SOFTVERBS_STATS)
 * come in the environment too. Every step is bounded in time:
 *
 *   warm-up   a fifth of `secs`, at most 0.5 s, each QP kept `depth` deep
 *   measure   `secs`: completions counted, the longest gap between two
 *   drain     at most loss_drain_s(): what is in flight; a QP left with
 *             requests then, or any error completion, is a stall
 *   final     the buffers rewritten with a second pattern, one WRITE per
 *             QP, bounded the same way; the successor then checks its
 *             regions word by word (LOSS_CHECK)
 *
 * The result line, on the socket: "loss done= ns= maxgap_ns= posted=
 * errs= stalled= verified= ppm= tx_pkts= retx= timeouts= lost= dev_err=
 * resent= overflows= budget=" (verified: 1, 0, or nan when not checked).
 */
#include "ep.h"
#include "loss.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct lrole {
	int rank, procs, qps, depth, oneway;
	uint32_t ntx, nrx, size, ppm; /* ppm: packets per message */
	struct ep e; /* device, PD, CQ */
	struct ibv_mr *tx_mr, *rx_mr;
	uint8_t *tx, *rx;
	struct ibv_qp **txq, **rxq;
	struct ep_addr *peer_tx; /* where each tx QP writes */
	uint32_t *inflight, *tx_qpns;
	uint8_t *dead;
	uint64_t posted, errs;
};

/* Contract: the 64-bit word `k` of region `j` written by rank `r`, generation `g`. */
static uint64_t pattern(int r, uint32_t j, uint64_t k, unsigned int g)
{
	uint64_t x = ((uint64_t)(r + 1) << 48) ^ ((uint64_t)j << 24) ^ k ^ ((uint64_t)g << 62);

	x ^= x >> 31;
	x *= 0x9E3779B97F4A7C15ull;
	x ^= x >> 29;
	return x | 1; /* never the zeroed buffer's word */
}

/* Fill every tx region with generation `g`. */
static void fill(struct lrole *l, unsigned int g)
{
	for (uint32_t j = 0; j < l->ntx; j++) {
		uint64_t *w = (void *)(l->tx + (size_t)j * l->size);

		for (uint64_t k = 0; k < l->size / 8; k++)
			w[k] = pattern(l->rank, j, k, g);
	}
}

/* 1.0 when every rx region holds the predecessor's generation `g`, else 0.0. */
static double check(const struct lrole *l, unsigned int g)
{
	int pred = (l->rank + l->procs - 1) % l->procs;

	for (uint32_t j = 0; j < l->nrx; j++) {
		const uint64_t *w = (const void *)(l->rx + (size_t)j * l->size);

		for (uint64_t k = 0; k < l->size / 8; k++)
			if (w[k] != pattern(pred, j, k, g))
				return 0.0;
	}
	return 1.0;
}

/* A registered, zeroed buffer of `len` bytes (at least a page). */
static uint8_t *buffer(struct lrole *l, size_t len, struct ibv_mr **mr)
{
	size_t cap = (len + 4095) & ~(size_t)4095;
	uint8_t *b = aligned_alloc(4096, cap ? cap : 4096);

	if (!b)
		die("buffer of %zu bytes", len);
	memset(b, 0, cap ? cap : 4096);
	*mr = ibv_reg_mr(l->e.pd, b, cap ? cap : 4096,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!*mr)
		die("ibv_reg_mr of %zu bytes failed", len);
	return b;
}

/* Parameters, device, buffers, QPs in INIT. */
static void setup(struct lrole *l, const struct role_args *ra)
{
	const char *p = getenv("SV_BENCH_LOSS");
	uint32_t mtu;

	memset(l, 0, sizeof(*l));
	if (!p ||
	    sscanf(p, "%d,%d,%d,%d,%d", &l->rank, &l->procs, &l->qps, &l->depth, &l->oneway) != 5 ||
	    l->procs < 2 || l->qps < 1 || l->depth < 1 || ra->size < 8 || ra->size % 8)
		die("SV_BENCH_LOSS or --size malformed");
	l->size = (uint32_t)ra->size;
	l->ntx = l->oneway && l->rank != 0 ? 0 : (uint32_t)l->qps;
	l->nrx = l->oneway && l->rank != 1 ? 0 : (uint32_t)l->qps;
	ep_open(&l->e, (int)(l->ntx * (uint32_t)l->depth) + 64);
	mtu = 128u << l->e.mtu;
	l->ppm = (l->size + mtu - 1) / mtu;
	l->tx = buffer(l, (size_t)l->ntx * l->size, &l->tx_mr);
	l->rx = buffer(l, (size_t)l->nrx * l->size, &l->rx_mr);
	l->txq = calloc(l->ntx + 1, sizeof(*l->txq));
	l->rxq = calloc(l->nrx + 1, sizeof(*l->rxq));
	l->peer_tx = calloc(l->ntx + 1, sizeof(*l->peer_tx));
	l->inflight = calloc(l->ntx + 1, sizeof(*l->inflight));
	l->tx_qpns = calloc(l->ntx + 1, sizeof(*l->tx_qpns));
	l->dead = calloc(l->ntx + 1, 1);
	if (!l->txq || !l->rxq || !l->peer_tx || !l->inflight || !l->tx_qpns || !l->dead)
		die("out of memory");
	for (uint32_t j = 0; j < l->ntx; j++)
		l->txq[j] = ep_rc_qp(&l->e, (uint32_t)l->depth, 1, NULL);
	for (uint32_t j = 0; j < l->nrx; j++)
		l->rxq[j] = ep_rc_qp(&l->e, 1, 1, NULL);
}

/* Our addresses out, the peers' in (tx QPs' peers, then rx QPs'), all QPs to RTS. */
static void connect_all(struct lrole *l, int sock)
{
	struct loss_hello h = {l->ntx, l->nrx};
	struct ep_addr *mine = calloc(l->ntx + l->nrx + 1, sizeof(*mine));
	struct ep_addr *peer = calloc(l->ntx + l->nrx + 1, sizeof(*peer));
	uint32_t n = l->ntx + l->nrx;
	char c = LOSS_READY;

	if (!mine || !peer)
		die("out of memory");
	for (uint32_t i = 0; i < n; i++) {
		struct ibv_qp *qp = i < l->ntx ? l->txq[i] : l->rxq[i - l->ntx];

		mine[i].qpn = qp->qp_num;
		mine[i].psn = (qp->qp_num * 2654435761u) & 0xffffff;
		mine[i].gid = l->e.gid;
		if (i >= l->ntx) {
			mine[i].rkey = l->rx_mr->rkey;
			mine[i].addr = (uintptr_t)l->rx + (uint64_t)(i - l->ntx) * l->size;
		}
	}
	if (xfer(sock, &h, sizeof(h), true) || xfer(sock, mine, n * sizeof(*mine), true) ||
	    xfer(sock, peer, n * sizeof(*peer), false))
		die("address exchange failed");
	for (uint32_t i = 0; i < n; i++) {
		struct ibv_qp *qp = i < l->ntx ? l->txq[i] : l->rxq[i - l->ntx];

		ep_rc_connect(&l->e, qp, mine[i].psn, &peer[i]);
	}
	memcpy(l->peer_tx, peer, l->ntx * sizeof(*peer));
	free(mine);
	free(peer);
	if (xfer(sock, &c, 1, true))
		die("orchestrator went away");
}

/* One signalled WRITE of region j into its peer; false if the QP refused it. */
static bool post(struct lrole *l, uint32_t j)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)l->tx + (uint64_t)j * l->size,
		.length = l->size,
		.lkey = l->tx_mr->lkey,
	};
	struct ibv_send_wr wr = {.wr_id = j, .sg_list = &sge, .num_sge = 1}, *bad = NULL;

	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = l->peer_tx[j].addr;
	wr.wr.rdma.rkey = l->peer_tx[j].rkey;
	if (l->dead[j] || ibv_post_send(l->txq[j], &wr, &bad)) {
		l->dead[j] = 1;
		return false;
	}
	l->inflight[j]++;
	l->posted++;
	return true;
}

/* Poll once; each completion's QP in `done` (up to 64). Errors mark the QP dead. */
static int poll_some(struct lrole *l, uint32_t *done)
{
	struct ibv_wc wc[64];
	int n = ibv_poll_cq(l->e.cq, 64, wc), ok = 0;

	if (n < 0)
		die("ibv_poll_cq failed");
	for (int i = 0; i < n; i++) {
		uint32_t j = (uint32_t)wc[i].wr_id;

		if (j >= l->ntx)
			continue;
		l->inflight[j]--;
		if (wc[i].status != IBV_WC_SUCCESS) {
			l->errs++;
			l->dead[j] = 1;
			continue;
		}
		done[ok++] = j;
	}
	return ok;
}

/* True when nothing is in flight any more, polling until `deadline`. */
static bool drain(struct lrole *l, uint64_t deadline)
{
	uint32_t done[64];

	for (;;) {
		bool idle = true;

		for (uint32_t j = 0; j < l->ntx && idle; j++)
			idle = !l->inflight[j];
		if (idle)
			return true;
		if (now_ns() >= deadline)
			return false;
		poll_some(l, done);
	}
}

/* The bound of a drain or of the final WRITEs: past the QP's retry schedule (about 3.5 s)
 * in a full run, shorter with a short --secs. */
static uint64_t drain_ns(double secs)
{
	double s = 1.0 + 2.0 * secs;

	return (uint64_t)((s < 4.0 ? s : 4.0) * 1e9);
}

struct lrun {
	uint64_t done, ns, maxgap;
	bool stalled;
};

/* Warm-up, the measured interval, the drain. */
static void stream(struct lrole *l, double secs, struct lrun *r)
{
	uint64_t warm = (uint64_t)(secs * 2e8), t0 = now_ns(), t_start, t_end, last, t;
	uint32_t done[64];

	if (warm > 500000000ull)
		warm = 500000000ull;
	t_start = t0 + warm;
	t_end = t_start + (uint64_t)(secs * 1e9);
	memset(r, 0, sizeof(*r));
	for (uint32_t j = 0; j < l->ntx; j++)
		for (int d = 0; d < l->depth && post(l, j); d++)
			;
	last = t_start;
	for (t = t0; t < t_end; t = now_ns()) {
		int n = poll_some(l, done);

		if (n && t >= t_start) {
			r->done += (uint64_t)n;
			if (t - last > r->maxgap)
				r->maxgap = t - last;
			last = t;
		}
		for (int i = 0; i < n; i++)
			post(l, done[i]);
	}
	if (t - last > r->maxgap)
		r->maxgap = t - last;
	r->ns = t - t_start;
	r->stalled = !drain(l, now_ns() + drain_ns(secs)) || l->errs;
}

/* The final pattern: one WRITE per QP, all completed successfully within the bound. */
static bool final_write(struct lrole *l, double secs)
{
	fill(l, 2);
	for (uint32_t j = 0; j < l->ntx; j++)
		if (!post(l, j))
			return false;
	return drain(l, now_ns() + drain_ns(secs)) && !l->errs;
}

/* Everything setup() made, with the device's counters caught on the way. */
static void teardown(struct lrole *l, struct loss_stats *st)
{
	int saved = loss_stats_begin();

	for (uint32_t j = 0; j < l->ntx; j++) {
		l->tx_qpns[j] = l->txq[j]->qp_num;
		ibv_destroy_qp(l->txq[j]);
	}
	for (uint32_t j = 0; j < l->nrx; j++)
		ibv_destroy_qp(l->rxq[j]);
	ibv_dereg_mr(l->tx_mr);
	ibv_dereg_mr(l->rx_mr);
	ibv_destroy_cq(l->e.cq);
	ibv_dealloc_pd(l->e.pd);
	ibv_close_device(l->e.ctx);
	qsort(l->tx_qpns, l->ntx, sizeof(*l->tx_qpns), loss_cmp_qpn);
	loss_stats_end(saved, st, l->tx_qpns, l->ntx);
	free(l->tx);
	free(l->rx);
	free(l->txq);
	free(l->rxq);
	free(l->peer_tx);
	free(l->inflight);
	free(l->tx_qpns);
	free(l->dead);
}

/* Contract: see loss.h and the file comment. */
void loss_role(const struct role_args *ra)
{
	struct lrole l;
	struct lrun r = {0};
	struct loss_stats st;
	double verified = nan_d();
	char c;
	bool ok = true;

	setup(&l, ra);
	fill(&l, 1);
	connect_all(&l, ra->sock);
	if (xfer(ra->sock, &c, 1, false) || c != LOSS_GO)
		die("no go from the orchestrator");
	if (l.ntx) {
		stream(&l, ra->secs, &r);
		ok = !r.stalled && final_write(&l, ra->secs);
		r.stalled = !ok;
	}
	c = ok ? LOSS_WRITTEN : LOSS_UNWRITTEN;
	if (xfer(ra->sock, &c, 1, true) || xfer(ra->sock, &c, 1, false))
		die("orchestrator went away");
	if (c == LOSS_CHECK && l.nrx)
		verified = check(&l, 2);
	teardown(&l, &st);
	report(ra->sock,
	       "loss done=%llu ns=%llu maxgap_ns=%llu posted=%llu errs=%llu stalled=%d verified=%g "
	       "ppm=%u tx_pkts=%g retx=%g timeouts=%g lost=%g dev_err=%g resent=%g overflows=%g "
	       "budget=%g\n",
	       (unsigned long long)r.done, (unsigned long long)r.ns, (unsigned long long)r.maxgap,
	       (unsigned long long)l.posted, (unsigned long long)l.errs, r.stalled ? 1 : 0,
	       verified, l.ppm, st.qp_tx_pkts, st.retransmits, st.timeouts, st.lost, st.wc_errors,
	       st.resent, st.overflows, st.budget_waits);
}
