/* SPDX-License-Identifier: MIT */
/*
 * fault.c - fault injection (SOFTVERBS_FAULT): packets lost, duplicated,
 * held back or refused as if the socket were full, on the send side,
 * the receive side or both.
 *
 * Send side: any thread that sends (application threads posting, the
 * progress thread answering) goes through sw_fault_send(), which holds
 * the fault lock while it draws from the send PRNG and while a packet is
 * held back for reordering (the held packet goes out after the next one
 * that is sent, under the same lock, so the two swap places).
 * Receive side: only the progress thread draws, from a PRNG of its own,
 * so sw_fault_rx_drop() takes no lock. Each side's sequence depends only
 * on the seed and on its own packets.
 *
 * Decisions are made per million (ppm), with xorshift64*: cheap and good
 * enough to pick packets, not a source of security.
 */
#include <stdlib.h>
#include <string.h>

#include "sw/transport/transport_priv.h"

/* Contract: the next draw of PRNG `state`, in [0, 1000000). */
static uint32_t fault_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return (uint32_t)((x * 0x2545F4914F6CDD1DULL) >> 32) % 1000000u;
}

/* Contract: see transport_priv.h. */
void sw_fault_init(struct sw_fault_state *s, const struct sw_fault *cfg)
{
	uint64_t seed = cfg->seed ? cfg->seed : 1;

	memset(s, 0, sizeof(*s));
	s->cfg = *cfg;
	pthread_mutex_init(&s->lock, NULL);
	s->tx_rng = seed;
	s->rx_rng = seed ^ 0x9e3779b97f4a7c15ull; /* another sequence, never 0 */
	if (!s->rx_rng)
		s->rx_rng = 1;
}

/* Contract: see transport_priv.h. */
void sw_fault_fini(struct sw_fault_state *s)
{
	free(s->held);
	s->held = NULL;
	pthread_mutex_destroy(&s->lock);
}

/* Contract: see transport_priv.h. */
bool sw_fault_rx_drop(struct sw_engine *eng)
{
	struct sw_fault_state *s = &eng->fault;

	if (!s->cfg.on_rx || !s->cfg.drop_ppm)
		return false;
	if (fault_rand(&s->rx_rng) >= s->cfg.drop_ppm)
		return false;
	atomic_fetch_add_explicit(&eng->cnt.fault_drops, 1, memory_order_relaxed);
	return true;
}

/* Contract: see transport_priv.h. */
int sw_fault_send(struct sw_engine *eng, const uint8_t *pkt, size_t len, const struct sw_av *av)
{
	struct sw_fault_state *s = &eng->fault;
	const struct sw_fault *f = &s->cfg;
	int ret;

	pthread_mutex_lock(&s->lock);
	if (f->again_ppm && fault_rand(&s->tx_rng) < f->again_ppm) {
		atomic_fetch_add_explicit(&eng->cnt.tx_again, 1, memory_order_relaxed);
		pthread_mutex_unlock(&s->lock);
		return -EAGAIN; /* as if the socket were full */
	}
	if (f->drop_ppm && fault_rand(&s->tx_rng) < f->drop_ppm) {
		atomic_fetch_add_explicit(&eng->cnt.fault_drops, 1, memory_order_relaxed);
		pthread_mutex_unlock(&s->lock);
		return 0; /* lost on the wire */
	}
	if (f->reorder_ppm && !s->held && fault_rand(&s->tx_rng) < f->reorder_ppm) {
		s->held = malloc(len);
		if (s->held) {
			memcpy(s->held, pkt, len);
			s->held_len = len;
			s->held_av = *av;
			atomic_fetch_add_explicit(&eng->cnt.fault_reorders, 1,
						  memory_order_relaxed);
			pthread_mutex_unlock(&s->lock);
			return 0; /* goes out after the next packet */
		}
	}
	ret = sw_net_send_raw(eng, pkt, len, av);
	if (!ret && f->dup_ppm && fault_rand(&s->tx_rng) < f->dup_ppm &&
	    !sw_net_send_raw(eng, pkt, len, av))
		atomic_fetch_add_explicit(&eng->cnt.fault_dups, 1, memory_order_relaxed);
	if (s->held && !ret) {
		sw_net_send_raw(eng, s->held, s->held_len, &s->held_av);
		free(s->held);
		s->held = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* Contract: see transport_priv.h. */
uint32_t sw_fault_batch_room(struct sw_engine *eng, uint32_t n)
{
	struct sw_fault_state *s = &eng->fault;

	pthread_mutex_lock(&s->lock);
	if (fault_rand(&s->tx_rng) < s->cfg.again_ppm)
		n = fault_rand(&s->tx_rng) % n;
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* Contract: see transport_priv.h. */
uint32_t sw_fault_tx_kept(struct sw_engine *eng, uint32_t n)
{
	struct sw_fault_state *s = &eng->fault;
	uint32_t k = 0;

	pthread_mutex_lock(&s->lock);
	while (k < n && fault_rand(&s->tx_rng) >= s->cfg.drop_ppm)
		k++;
	pthread_mutex_unlock(&s->lock);
	return k;
}

/* Contract: see transport_priv.h. */
void sw_fault_count_drops(struct sw_engine *eng, uint32_t pkts)
{
	atomic_fetch_add_explicit(&eng->cnt.fault_drops, pkts, memory_order_relaxed);
}

/* Contract: see transport_priv.h. */
uint32_t sw_fault_run_cut(struct sw_qp *qp, uint32_t n, uint8_t *fate)
{
	struct sw_engine *eng = sw_engine_of(qp);
	const struct sw_fault *f = &eng->fault.cfg;
	struct sw_req *req = qp->req;
	uint32_t k;

	*fate = SW_FATE_DRAW;
	if (!f->on_tx || !f->drop_ppm || sw_fault_one_by_one(f))
		return n;
	*fate = SW_FATE_KEEP;
	if (req->lose_set) {
		int32_t d = sw_psn_diff(req->lose_psn, req->psn);

		if (d == 0) {
			req->lose_set = false;
			*fate = SW_FATE_LOSE;
			return 1;
		}
		if (d > 0) /* the PSNs before it were drawn with it, and kept */
			return (uint32_t)d < n ? (uint32_t)d : n;
		req->lose_set = false; /* gone back past it, or sent on: draw afresh */
	}
	k = sw_fault_tx_kept(eng, n);
	if (!k) {
		*fate = SW_FATE_LOSE;
		return 1;
	}
	if (k < n) {
		req->lose_psn = sw_psn_add(req->psn, k);
		req->lose_set = true;
	}
	return k;
}
