/* SPDX-License-Identifier: MIT */
/*
 * budget.c - the device-wide send budget and the line of QPs waiting.
 *
 * Every RC QP counts the PSNs it has in flight (sent, or asked for by a
 * READ, and not yet acknowledged) against one budget per device,
 * SW_BUDGET_PKTS. The budget keeps what a device can have on its way
 * into the peers' sockets and same-host rings below what they hold
 * (docs/queue-pairs.md, "Budget"), however many QPs it has: a thousand
 * QPs share it instead of each bringing a window of its own. A packet by
 * reference puts a few bytes per PSN into a ring, not its payload: it
 * may take PSNs up to SW_BUDGET_REF_PKTS in flight.
 *
 * A QP that finds the budget spent, or the socket or ring full, joins
 * the line (FIFO) and stops. While anyone is in line, a QP that was not
 * in it does not send either: it joins at the back. The progress thread
 * serves the line front first whenever acknowledgements free budget, so
 * a QP that waits is served before QPs that came later.
 *
 * Lock order: qp->lock, then the line's lock. The line holds a
 * reference on each QP in it.
 */
#include <stdlib.h>

#include "sw/transport/transport_priv.h"

/* PSNs the QP has outstanding, or 0 when it may not send at all. */
static uint32_t in_flight(const struct sw_qp *qp)
{
	enum ibv_qp_state st = qp->ibv.qp_base.state;
	int32_t d;

	if (st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_SQE)
		return 0;
	d = sw_psn_diff(qp->req->psn, qp->req->una_psn);
	return d > 0 ? (uint32_t)d : 0;
}

static void give_back(struct sw_engine *eng, uint32_t n)
{
	if (!n)
		return;
	atomic_fetch_sub_explicit(&eng->budget.used, n, memory_order_relaxed);
	if (atomic_load_explicit(&eng->budget.nwait, memory_order_relaxed))
		sw_engine_wake(eng); /* the progress thread serves the line */
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_budget_sync(struct sw_qp *qp)
{
	struct sw_req *req = qp->req;
	uint32_t want;

	if (!req || qp->ibv.qp_base.qp_type == IBV_QPT_UD)
		return;
	want = in_flight(qp);
	if (want > SW_WINDOW_MAX)
		want = SW_WINDOW_MAX; /* a READ larger than any window counts as one window */
	if (want < req->held) {
		give_back(sw_engine_of(qp), req->held - want);
		req->held = want;
	}
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_budget_release(struct sw_qp *qp)
{
	if (!qp->req)
		return;
	give_back(sw_engine_of(qp), qp->req->held);
	qp->req->held = 0;
}

/* Contract: see transport_priv.h (qp->lock held). */
bool sw_budget_take(struct sw_qp *qp, uint32_t npsn, bool force, bool ref)
{
	struct sw_engine *eng = sw_engine_of(qp);
	struct sw_req *req = qp->req;
	uint32_t have = in_flight(qp), need, used;

	if (have + npsn > SW_WINDOW_MAX)
		npsn = have < SW_WINDOW_MAX ? SW_WINDOW_MAX - have : 0;
	if (have + npsn <= req->held)
		return true; /* resending what it holds already */
	need = have + npsn - req->held;
	/* an idle device takes any one request, even a READ larger than the budget */
	used = atomic_load_explicit(&eng->budget.used, memory_order_relaxed);
	if (used && used + need > (ref ? SW_BUDGET_REF_PKTS : SW_BUDGET_PKTS) && !force)
		return false;
	atomic_fetch_add_explicit(&eng->budget.used, need, memory_order_relaxed);
	req->held += need;
	return true;
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_budget_wait(struct sw_qp *qp)
{
	struct sw_engine *eng = sw_engine_of(qp);
	struct sw_budget *b = &eng->budget;

	if (qp->req->queued)
		return;
	pthread_mutex_lock(&b->lock);
	if (b->n == b->cap) {
		uint32_t cap = b->cap ? b->cap * 2 : 64;
		struct sw_qp **q = malloc(cap * sizeof(*q));

		if (!q) {
			/* no line: the 1 ms tick of wait_writable retries it */
			pthread_mutex_unlock(&b->lock);
			qp->req->wait_writable = true;
			return;
		}
		for (uint32_t i = 0; i < b->n; i++)
			q[i] = b->q[(b->head + i) % b->cap];
		free(b->q);
		b->q = q;
		b->head = 0;
		b->cap = cap;
	}
	sw_qp_get(qp);
	b->q[(b->head + b->n++) % b->cap] = qp;
	atomic_store_explicit(&b->nwait, b->n, memory_order_relaxed);
	pthread_mutex_unlock(&b->lock);
	qp->req->queued = true;
	atomic_fetch_add_explicit(&eng->cnt.budget_waits, 1, memory_order_relaxed);
	sw_engine_wake(eng);
}

/* Contract: see transport_priv.h (qp->lock held). */
bool sw_budget_must_wait(struct sw_qp *qp)
{
	struct sw_engine *eng = sw_engine_of(qp);

	if (qp->req->serving)
		return false;
	if (qp->req->queued)
		return true;
	return atomic_load_explicit(&eng->budget.nwait, memory_order_relaxed) != 0;
}

static struct sw_qp *pop(struct sw_budget *b)
{
	struct sw_qp *qp = NULL;

	pthread_mutex_lock(&b->lock);
	if (b->n) {
		qp = b->q[b->head];
		b->head = (b->head + 1) % b->cap;
		b->n--;
		atomic_store_explicit(&b->nwait, b->n, memory_order_relaxed);
	}
	pthread_mutex_unlock(&b->lock);
	return qp;
}

/*
 * Contract: see transport_priv.h (progress thread, no lock held). Serves at
 * most the QPs in line when it starts (one that joins again goes to the
 * back), and stops at a full socket or ring: the next QP would find it
 * full too.
 */
void sw_budget_serve(struct sw_engine *eng)
{
	struct sw_budget *b = &eng->budget;
	uint32_t n = atomic_load_explicit(&b->nwait, memory_order_relaxed);

	while (n--) {
		struct sw_qp *qp;
		bool full = false;

		if (atomic_load_explicit(&b->used, memory_order_relaxed) >= SW_BUDGET_PKTS)
			break;
		qp = pop(b);
		if (!qp)
			break;
		pthread_mutex_lock(&qp->lock);
		if (qp->req) {
			qp->req->queued = false;
			qp->req->serving = true;
			sw_req_run(qp);
			qp->req->serving = false;
			full = qp->req->wait_writable;
		}
		pthread_mutex_unlock(&qp->lock);
		sw_qp_put(qp);
		if (full)
			break;
	}
}

/* Contract: see transport_priv.h (the progress thread has stopped). */
void sw_budget_fini(struct sw_engine *eng)
{
	struct sw_qp *qp;

	while ((qp = pop(&eng->budget)))
		sw_qp_put(qp);
	free(eng->budget.q);
	pthread_mutex_destroy(&eng->budget.lock);
}
