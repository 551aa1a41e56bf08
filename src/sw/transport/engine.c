/* SPDX-License-Identifier: MIT */
/*
 * engine.c - the transport engine's life cycle and the queue layer's
 * hooks into it (queue.h: sw_transport_*).
 *
 * The engine starts with the device's UDP port (first context) and stops
 * with it (last context).
 *
 * Entering the error state has one order, whichever side starts it: the
 * transport lets go of the QP first (sw_transport_qp_error: timers, the
 * send budget, a receive WQE taken for a message in progress), then the
 * queue layer sets the state and flushes the rings (sw_qp_error_locked).
 * modify_qp calls the two; an error the transport finds (a NAK sent or
 * received, retries exhausted, a bad local SGE) calls sw_transport_fail,
 * which calls the two. The queue layer never calls back into the
 * transport on the way, so no completion is pushed re-entrantly. Its settings (SOFTVERBS_BUSY_POLL,
 * SOFTVERBS_FAULT, SOFTVERBS_STATS) come from ctrl/config.c.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sw/transport/transport_priv.h"

/* Settings come parsed and validated from the device's configuration. */
static void engine_config(struct sw_engine *eng)
{
	const struct sw_config *cfg = &eng->dev->cfg;

	eng->busy_poll = cfg->busy_poll;
	eng->spin_ns = (uint64_t)cfg->spin_us * 1000;
	eng->pull = cfg->single_copy && !cfg->cc_dma_bounce;
	eng->app_rx = cfg->app_progress;
	sw_fault_init(&eng->fault, &cfg->fault);
}

/* Contract: see sw/transport.h. Called with dev->lock held, port open. */
int sw_engine_start(struct sw_dev *dev)
{
	struct sw_engine *eng = calloc(1, sizeof(*eng));
	int ret;

	if (!eng)
		return -ENOMEM;
	eng->dev = dev;
	atomic_init(&eng->timers_at, UINT64_MAX); /* until the first scan */
	engine_config(eng);
	ret = sw_net_setup(dev->port.fd);
	if (ret)
		goto err_free;
	sw_net_offload(eng); /* before the receive buffers: GRO needs large ones */
	ret = sw_progress_init(eng);
	if (ret)
		goto err_free;
	eng->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (eng->wake_fd < 0) {
		ret = -errno;
		goto err_free;
	}
	pthread_mutex_init(&eng->active_lock, NULL);
	pthread_mutex_init(&eng->cqmod_lock, NULL);
	pthread_mutex_init(&eng->budget.lock, NULL);
	pthread_mutex_init(&eng->rx_token, NULL);
	eng->fork_gen = sw_fork_gen_now();
	sem_init(&eng->started, 0, 0);
	ret = sw_mcast_init(eng);
	if (ret)
		goto err_wake;
	if (dev->cfg.shm && (ret = sw_shm_start(eng)))
		goto err_wake;
	dev->eng = eng;
	ret = pthread_create(&eng->thread, NULL, sw_progress_main, eng);
	if (ret) {
		dev->eng = NULL;
		sw_shm_stop(eng);
		ret = -ret;
		goto err_wake;
	}
	while (sem_wait(&eng->started) && errno == EINTR)
		;
	pthread_setname_np(eng->thread, "sv-progress");
	if (dev->cfg.progress_cpu >= 0) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET((size_t)dev->cfg.progress_cpu, &one);
		ret = pthread_setaffinity_np(eng->thread, sizeof(one), &one);
		if (ret) {
			eng->running = true;
			sw_engine_stop(dev);
			return -ret;
		}
	}
	eng->running = true;
	return 0;
err_wake:
	sw_mcast_fini(eng);
	sem_destroy(&eng->started);
	pthread_mutex_destroy(&eng->active_lock);
	pthread_mutex_destroy(&eng->cqmod_lock);
	pthread_mutex_destroy(&eng->budget.lock);
	pthread_mutex_destroy(&eng->rx_token);
	close(eng->wake_fd);
err_free:
	sw_progress_fini(eng);
	free(eng);
	return ret;
}

/*
 * SOFTVERBS_STATS=1: the device's counters on stderr when it stops, or
 * at exit or unload if the program never closed it; once.
 */
static void engine_report(struct sw_engine *eng)
{
	const struct sw_counters *c = &eng->cnt;
	char addr[SW_ADDR_STRLEN];

	if (!eng->dev->cfg.stats || eng->reported)
		return;
	eng->reported = true;
	fprintf(stderr,
		"softverbs: %s %s: tx %llu pkts %llu bytes, rx %llu pkts %llu bytes\n"
		"softverbs:   retransmits %llu timeouts %llu duplicates %llu tx_again %llu\n"
		"softverbs:   resent pkts %llu, socket overflows %llu, budget waits %llu, probes %llu, "
		"timer deferrals %llu, stashed %llu, selective %llu\n"
		"softverbs:   progress thread: sleeps %llu (leased %llu, stalled %llu); application "
		"threads: passes %llu packets %llu; socket reads paced %llu\n"
		"softverbs:   naks rx seq %llu rnr %llu err %llu, tx seq %llu rnr %llu err %llu\n"
		"softverbs:   drops malformed %llu icrc %llu no_qp %llu state %llu qkey %llu "
		"no_recv %llu out_of_window %llu\n"
		"softverbs:   faults dropped %llu duplicated %llu reordered %llu\n"
		"softverbs:   completions errors %llu flushed %llu\n"
		"softverbs:   same-host link: sent %llu received %llu packets, links in %llu, corrupt %llu\n"
		"softverbs:   ip id: recovered %llu, refused %llu, random senders %llu\n"
		"softverbs:   udp offload: gso sends %llu pkts %llu refused %llu, gro recvs %llu "
		"pkts %llu\n",
		eng->dev->core.ibv.name, sw_sa_str(&eng->dev->port.local, addr),
		(unsigned long long)c->tx_pkts, (unsigned long long)c->tx_bytes,
		(unsigned long long)c->rx_pkts, (unsigned long long)c->rx_bytes,
		(unsigned long long)c->retransmits, (unsigned long long)c->timeouts,
		(unsigned long long)c->duplicates, (unsigned long long)c->tx_again,
		(unsigned long long)c->resent_pkts, (unsigned long long)c->sock_overflows,
		(unsigned long long)c->budget_waits, (unsigned long long)c->probes,
		(unsigned long long)c->timer_deferrals, (unsigned long long)c->stashed,
		(unsigned long long)c->selective, (unsigned long long)c->sleeps,
		(unsigned long long)c->leased_sleeps, (unsigned long long)c->lease_stalls,
		(unsigned long long)c->app_passes, (unsigned long long)c->app_pkts,
		(unsigned long long)c->socks_paced, (unsigned long long)c->seq_naks_rx,
		(unsigned long long)c->rnr_naks_rx, (unsigned long long)c->err_naks_rx,
		(unsigned long long)c->seq_naks_tx, (unsigned long long)c->rnr_naks_tx,
		(unsigned long long)c->err_naks_tx, (unsigned long long)c->drops_malformed,
		(unsigned long long)c->drops_icrc, (unsigned long long)c->drops_no_qp,
		(unsigned long long)c->drops_state, (unsigned long long)c->drops_qkey,
		(unsigned long long)c->drops_no_recv, (unsigned long long)c->drops_out_of_window,
		(unsigned long long)c->fault_drops, (unsigned long long)c->fault_dups,
		(unsigned long long)c->fault_reorders, (unsigned long long)eng->dev->wc_errors,
		(unsigned long long)eng->dev->wc_flushed, (unsigned long long)c->shm_tx_pkts,
		(unsigned long long)c->shm_rx_pkts, (unsigned long long)c->shm_links,
		(unsigned long long)c->shm_corrupt, (unsigned long long)c->rx_ip_id,
		(unsigned long long)c->drops_ip_id, (unsigned long long)c->ip_id_random,
		(unsigned long long)c->gso_sends, (unsigned long long)c->gso_pkts,
		(unsigned long long)c->gso_refused, (unsigned long long)c->gro_recvs,
		(unsigned long long)c->gro_pkts);
	fprintf(stderr,
		"softverbs:   single copy: sent %llu received %llu packets by reference; "
		"this process pulled %zu bytes in %zu calls, %zu failed; "
		"pushed %zu bytes in %zu calls, %zu failed; copied %zu bytes from mapped buffers\n",
		(unsigned long long)c->ref_tx_pkts, (unsigned long long)c->ref_rx_pkts,
		atomic_load(&sw_place_stats.pull_bytes), atomic_load(&sw_place_stats.pull_calls),
		atomic_load(&sw_place_stats.pull_errors), atomic_load(&sw_place_stats.push_bytes),
		atomic_load(&sw_place_stats.push_calls), atomic_load(&sw_place_stats.push_errors),
		atomic_load(&sw_place_stats.map_bytes));
	fprintf(stderr, "softverbs:   push directory: wrote %llu WRITEs into peers, %llu refused\n",
		(unsigned long long)c->dir_pushes, (unsigned long long)c->dir_refused);
}

/* Contract: end the progress thread and wait for it, once. */
static void engine_join(struct sw_engine *eng)
{
	if (eng->joined)
		return;
	atomic_store(&eng->stop, true);
	sw_engine_wake(eng);
	pthread_join(eng->thread, NULL);
	eng->joined = true;
}

/* Contract: see sw/transport.h. */
void sw_engine_quiesce(struct sw_dev *dev)
{
	struct sw_engine *eng = dev->eng;

	if (!eng)
		return;
	engine_join(eng);
	engine_report(eng);
}

/* Contract: stop the thread and free the engine. QPs must be gone. */
void sw_engine_stop(struct sw_dev *dev)
{
	struct sw_engine *eng = dev->eng;

	sw_engine_quiesce(dev); /* the thread ends; the totals are printed */
	if (!eng)
		return;
	sw_gsi_detach(eng);
	sw_shm_stop(eng);
	sw_mcast_fini(eng);
	sw_budget_fini(eng);
	dev->eng = NULL;
	close(eng->wake_fd);
	pthread_mutex_destroy(&eng->active_lock);
	pthread_mutex_destroy(&eng->rx_token);
	sem_destroy(&eng->started);
	free(eng->active);
	sw_progress_fini(eng);
	sw_fault_fini(&eng->fault);
	free(eng);
}

/*
 * Contract: see transport_priv.h. The eventfd write (a system call, and a
 * wake-up) is only needed while the thread sleeps in poll(2): awake, it
 * sees wake_pending at the top of its loop. Both flags are sequentially
 * consistent, so of this store-then-load and the thread's mirror image
 * (sleeping, then wake_pending) at least one side sees the other.
 */
void sw_engine_wake(struct sw_engine *eng)
{
	uint64_t one = 1;

	atomic_store(&eng->wake_pending, true);
	if (!atomic_load(&eng->sleeping))
		return;
	if (write(eng->wake_fd, &one, sizeof(one)) < 0)
		(void)0; /* counter saturated: the thread is awake anyway */
}

/*
 * Contract: see transport_priv.h. The thread publishes UINT64_MAX before it
 * scans the QPs' timers (each under its QP's lock) and the earliest
 * deadline after: a timer armed before the scan reached its QP is seen
 * by the scan, one armed after sees UINT64_MAX or the final value.
 */
void sw_engine_wake_for(struct sw_engine *eng, uint64_t deadline)
{
	if (deadline < atomic_load(&eng->timers_at))
		sw_engine_wake(eng);
}

/* Contract: see sw/transport.h. */
void sw_engine_cq_watch(struct sw_dev *dev, struct sw_cq *cq)
{
	struct sw_engine *eng = dev->eng;

	if (!eng)
		return;
	pthread_mutex_lock(&eng->cqmod_lock);
	if (!cq->mod_listed) {
		cq->mod_next = eng->cqmod;
		eng->cqmod = cq;
		cq->mod_listed = true;
	}
	pthread_mutex_unlock(&eng->cqmod_lock);
}

/* Contract: see sw/transport.h. */
void sw_engine_cq_unwatch(struct sw_dev *dev, struct sw_cq *cq)
{
	struct sw_engine *eng = dev->eng;

	if (!eng)
		return;
	pthread_mutex_lock(&eng->cqmod_lock);
	for (struct sw_cq **p = &eng->cqmod; *p; p = &(*p)->mod_next)
		if (*p == cq) {
			*p = cq->mod_next;
			cq->mod_listed = false;
			break;
		}
	pthread_mutex_unlock(&eng->cqmod_lock);
}

/* Contract: see sw/transport.h. */
void sw_engine_cq_deadline(struct sw_dev *dev, uint64_t deadline)
{
	if (dev->eng)
		sw_engine_wake_for(dev->eng, deadline);
}

/* Register `qp` for timer service by the progress thread (idempotent); 0 or -ENOMEM. */
static int engine_activate(struct sw_engine *eng, struct sw_qp *qp)
{
	int ret = 0;

	pthread_mutex_lock(&eng->active_lock);
	for (uint32_t i = 0; i < eng->nactive; i++)
		if (eng->active[i] == qp)
			goto out;
	if (eng->nactive == eng->cap_active) {
		uint32_t cap = eng->cap_active ? eng->cap_active * 2 : 16;
		struct sw_qp **n = realloc(eng->active, cap * sizeof(*n));

		if (!n) {
			ret = -ENOMEM; /* a QP whose timers never run must not exist */
			goto out;
		}
		eng->active = n;
		eng->cap_active = cap;
	}
	eng->active[eng->nactive++] = qp;
out:
	pthread_mutex_unlock(&eng->active_lock);
	return ret;
}

/* Drop it again (QP destroy). */
static void engine_deactivate(struct sw_engine *eng, struct sw_qp *qp)
{
	pthread_mutex_lock(&eng->active_lock);
	for (uint32_t i = 0; i < eng->nactive; i++)
		if (eng->active[i] == qp) {
			eng->active[i] = eng->active[--eng->nactive];
			break;
		}
	pthread_mutex_unlock(&eng->active_lock);
}

/* Free the per-QP transport state, whatever part of it exists; none is left. */
static void transport_free(struct sw_qp *qp)
{
	if (qp->resp) {
		sw_stash_free(qp);
		free(qp->resp->wqe);
		free(qp->resp->res);
	}
	free(qp->req);
	free(qp->resp);
	qp->req = NULL;
	qp->resp = NULL;
}

/* Contract: see sw/transport.h. */
int sw_transport_qp_init(struct sw_qp *qp)
{
	struct sw_engine *eng = sw_engine_of(qp);

	if (!eng)
		return -ENODEV;
	qp->req = calloc(1, sizeof(*qp->req));
	qp->resp = calloc(1, sizeof(*qp->resp));
	if (!qp->req || !qp->resp)
		goto nomem;
	/* room for the largest receive WQE, from the RQ or an SRQ */
	qp->resp->wqe = calloc(1, sizeof(*qp->resp->wqe) + SW_MAX_SGE * sizeof(struct ibv_sge));
	if (!qp->resp->wqe)
		goto nomem;
	/* READ/atomic resources for any max_dest_rd_atomic: RTR cannot fail */
	if (qp->ibv.qp_base.qp_type != IBV_QPT_UD) {
		qp->resp->res = calloc(SW_MAX_QP_RD_ATOM, sizeof(*qp->resp->res));
		if (!qp->resp->res)
			goto nomem;
	}
	qp->req->window = SW_WINDOW_INIT;
	qp->req->acked_since_cut = SW_WINDOW_MAX; /* the first loss is an isolated one */
	if (engine_activate(eng, qp))
		goto nomem;
	return 0;
nomem:
	transport_free(qp);
	return -ENOMEM;
}

/* Contract: see sw/transport.h. The QP is out of the QPN table already (qp->lock held). */
void sw_transport_qp_fini(struct sw_qp *qp)
{
	struct sw_engine *eng = sw_engine_of(qp);

	if (eng) {
		sw_shm_dir_qp(eng, qp, false);
		engine_deactivate(eng, qp);
	}
	if (eng && qp->req)
		sw_budget_release(qp);
	/*
	 * An ACK still owed for the end of the last batch goes out now: the
	 * application may destroy the QP as soon as it sees the completion,
	 * and the peer would otherwise retransmit until its retry count runs
	 * out.
	 */
	if (eng && qp->resp)
		sw_resp_flush_ack(qp);
	transport_free(qp);
}

/* Forget all transport state (RESET, or entering RTR afresh). */
static void transport_reset(struct sw_qp *qp)
{
	struct sw_req *req = qp->req;
	struct sw_resp *resp = qp->resp;
	struct sw_recv_wqe *wqe = resp->wqe;
	struct sw_rd_res *res = resp->res;

	sw_stash_free(qp);
	memset(req, 0, sizeof(*req));
	req->window = SW_WINDOW_INIT;
	req->acked_since_cut = SW_WINDOW_MAX;
	req->send_idx = req->started_idx = qp->sq.cons;
	memset(resp, 0, sizeof(*resp));
	resp->wqe = wqe;
	resp->res = res;
	atomic_store_explicit(&qp->pull_err, 0, memory_order_relaxed);
}

/*
 * An XRC TGT QP's flushed receive WQE completes on the CQ of the XRC SRQ
 * it came from, if that SRQ is still in the domain (else the WQE went
 * with its SRQ). Takes the domain's lock for reading, which the
 * responder may hold already (reader locks nest).
 */
static void push_xrc_flush(struct sw_qp *qp, const struct ibv_wc *wc)
{
	struct sw_xrcd_dom *dom = qp->xrcd->dom;
	struct sw_srq *srq;

	pthread_rwlock_rdlock(&dom->lock);
	srq = sw_xrcd_srq_find(dom, qp->resp->xsrqn);
	if (srq)
		sw_qp_cq_push(qp, srq->cq, wc, false);
	pthread_rwlock_unlock(&dom->lock);
}

/*
 * A receive WQE the responder took for a SEND still in progress left the
 * RQ already: flush it here, before the queue layer flushes the ring, so
 * completions stay in posting order.
 */
static void flush_taken_recv(struct sw_qp *qp)
{
	struct sw_resp *resp = qp->resp;
	struct ibv_wc wc;

	if (!resp->have_wqe)
		return;
	sw_wc_init(&wc, qp, resp->wqe->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV);
	resp->have_wqe = false;
	resp->in_send = false;
	if (qp->ibv.qp_base.qp_type == IBV_QPT_XRC_RECV)
		push_xrc_flush(qp, &wc);
	else
		sw_qp_cq_push(qp, qp->rcq, &wc, false);
}

/* Contract: see sw/transport.h (qp->lock held). */
void sw_transport_qp_error(struct sw_qp *qp)
{
	if (!qp->req || qp->ibv.qp_base.state == IBV_QPS_ERR)
		return;
	sw_shm_dir_qp(sw_engine_of(qp), qp, false); /* peers write into it no more */
	/*
	 * An ACK owed for requests already executed goes out before the QP
	 * stops answering, as at destroy (sw_transport_qp_fini): the
	 * application may see a WRITE's data and move the QP to error before
	 * the end of the batch that placed it.
	 */
	sw_resp_flush_ack(qp);
	sw_budget_release(qp); /* nothing of it is in flight any more */
	qp->req->deadline_ns = 0;
	qp->req->rnr_until_ns = 0;
	flush_taken_recv(qp);
}

enum {
	SETTLE_SWEEPS = 2, /* a pass begun after the request, and its successor */
	SETTLE_MAX_NS = 50 * 1000 * 1000, /* a progress thread kept off the CPU */
};

/* Contract: see sw/transport.h (qp->lock not held). */
void sw_transport_settle(struct sw_qp *qp)
{
	struct sw_engine *eng = sw_engine_of(qp);
	unsigned int s0;
	uint64_t until;
	bool busy;

	/* not from the thread itself, nor in a fork child (where it does not run) */
	if (!eng || atomic_load(&eng->stop) || pthread_equal(pthread_self(), eng->thread) ||
	    eng->dev->pid != getpid())
		return;
	pthread_mutex_lock(&qp->lock);
	busy = qp->req && qp->ibv.qp_base.state != IBV_QPS_ERR &&
	       qp->ibv.qp_base.qp_type != IBV_QPT_UD && sw_req_in_flight(qp->req);
	pthread_mutex_unlock(&qp->lock);
	if (!busy)
		return;
	s0 = atomic_load_explicit(&eng->sweeps, memory_order_acquire);
	until = sw_now_ns() + SETTLE_MAX_NS;
	sw_engine_wake(eng);
	while (atomic_load_explicit(&eng->sweeps, memory_order_acquire) - s0 < SETTLE_SWEEPS &&
	       sw_now_ns() < until)
		sched_yield();
}

/* Contract: see transport_priv.h (qp->lock held). */
void sw_transport_fail(struct sw_qp *qp)
{
	sw_transport_qp_error(qp);
	sw_qp_error_locked(qp);
}

/* Contract: see sw/transport.h (qp->lock held). */
void sw_transport_qp_state(struct sw_qp *qp, enum ibv_qp_state old)
{
	struct sw_resp *resp = qp->resp;
	enum ibv_qp_state now = qp->ibv.qp_base.state;

	if (now != IBV_QPS_RTS && now != IBV_QPS_SQD && now != IBV_QPS_SQE)
		sw_budget_release(qp); /* nothing of it is in flight any more */
	switch (now) {
	case IBV_QPS_RESET:
	case IBV_QPS_INIT:
		transport_reset(qp);
		break;
	case IBV_QPS_RTR:
		if (old != IBV_QPS_RTR) {
			uint32_t n = qp->attr.max_dest_rd_atomic ? qp->attr.max_dest_rd_atomic : 1;

			transport_reset(qp);
			resp->epsn = qp->attr.rq_psn & SW_PSN_MASK;
			if (resp->res) { /* SW_MAX_QP_RD_ATOM >= n entries (RC) */
				resp->nres = n;
				memset(resp->res, 0, n * sizeof(*resp->res));
			}
		}
		break;
	case IBV_QPS_RTS:
		if (old == IBV_QPS_RTR || old == IBV_QPS_INIT) {
			qp->req->psn = qp->attr.sq_psn & SW_PSN_MASK;
			qp->req->una_psn = qp->req->psn;
			qp->req->high_psn = qp->req->psn;
			qp->req->ackreq_psn = sw_psn_add(qp->req->psn, SW_PSN_MASK);
			qp->req->retries = qp->attr.retry_cnt;
			qp->req->rnr_retries = qp->attr.rnr_retry;
		}
		sw_req_run(qp);
		break;
	case IBV_QPS_SQD:
		sw_comp_check_drained(qp);
		break;
	default:
		break;
	}
}

/* Contract: see sw/transport.h (qp->lock held). */
void sw_transport_kick(struct sw_qp *qp)
{
	sw_req_run(qp);
}
