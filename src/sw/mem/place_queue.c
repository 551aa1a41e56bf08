/* SPDX-License-Identifier: MIT */
/*
 * place_queue.c - the producer side of CPU_ID placement (design:
 * place_worker.c): queueing a copy on the pinned worker, kicking it, and
 * the placement fence.
 *
 * Each producer thread counts its queued jobs in tl.pending; the worker
 * counts it down. A fence that has to sleep sets WAITING in it, and the
 * worker's last count-down clears the word and wakes it.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <sched.h>

#include "sw/mem/place_worker.h"

enum {
	YIELDS = 64, /* a fence's sched_yield() calls after its spins, before sleeping */
};

#define WAITING 0x80000000u /* tl.pending: its thread sleeps in sw_place_fence() */

/* This thread as a producer (one thread-local block: one lookup). */
static _Thread_local struct {
	atomic_uint pending; /* its jobs not yet placed */
	struct sw_place_worker *last; /* the worker they are on */
	bool unkicked; /* jobs queued on `last` since the last kick */
} tl;

/*
 * Contract: see place_worker.h. Releases the job's stores to the fence.
 * After the CAS that makes the word 0 it is not touched again (its
 * thread may be gone): the wake is a system call on the address only.
 */
void sw_place_job_done(struct sw_place_job *j)
{
	atomic_uint *p = j->pending;
	unsigned int old = atomic_load_explicit(p, memory_order_relaxed), nv;

	do {
		nv = old - 1;
		if (!(nv & ~WAITING))
			nv = 0;
	} while (!atomic_compare_exchange_weak_explicit(p, &old, nv, memory_order_release,
							memory_order_relaxed));
	if (!nv && (old & WAITING))
		sw_futex_wake(p, INT_MAX);
}

/* Contract: see place_worker.h. */
void sw_place_worker_wake(struct sw_place_worker *w)
{
	atomic_fetch_add(&w->kick, 1);
	sw_futex_wake(&w->kick, 1);
}

/*
 * Wake `w` if it sleeps: it has jobs published before this call. The
 * publish (seq_cst) and this load of `sleeping` pair with idle()'s store
 * of `sleeping` and load of the slot: the worker sees the job or this
 * sees it asleep.
 */
static void kick(struct sw_place_worker *w)
{
	if (atomic_load(&w->sleeping))
		sw_place_worker_wake(w);
}

/* Kick tl.last for the jobs queued on it since the last kick. */
static void kick_queued(void)
{
	if (tl.unkicked) {
		tl.unkicked = false;
		kick(tl.last);
	}
}

/*
 * Contract: see place.h. On the worker's own CPU the kick waits for the
 * fence: now it would only switch this CPU to the worker and back once
 * more per batch.
 */
void sw_place_kick(void)
{
	if (tl.unkicked && sched_getcpu() != (int)tl.last->cpu)
		kick_queued();
}

/* Contract: see place.h. */
bool sw_place_pending(void)
{
	return atomic_load_explicit(&tl.pending, memory_order_relaxed) != 0;
}

/*
 * Contract: see place.h. Spin, then yield, then sleep; on the worker's
 * CPU a spin only delays the worker, so yield to it at once.
 */
void sw_place_fence(void)
{
	atomic_uint *p = &tl.pending;
	unsigned int v;
	int i;

	if (sw_place_pull_pending())
		sw_place_pull_flush(); /* this thread's pulled copies (place_pull.c) */
	v = atomic_load_explicit(p, memory_order_acquire);
	if (!v)
		return;
	kick_queued();
	i = sched_getcpu() == (int)tl.last->cpu ? SW_PLACE_SPINS : 0;
	for (; v && i < SW_PLACE_SPINS + YIELDS; i++) {
		if (i < SW_PLACE_SPINS)
			sw_cpu_relax();
		else
			sched_yield();
		v = atomic_load_explicit(p, memory_order_acquire);
	}
	while (v) {
		if (!(v & WAITING) &&
		    !atomic_compare_exchange_weak_explicit(p, &v, v | WAITING, memory_order_acquire,
							   memory_order_acquire))
			continue; /* v reloaded */
		sw_futex_wait(p, v | WAITING);
		v = atomic_load_explicit(p, memory_order_acquire);
	}
}

/*
 * Queue a copy of `in` on `w` without waking it; false if its thread has
 * ended (nothing queued). A full ring kicks the worker and waits for a
 * slot. Producers reserve a slot with a CAS on the tail and publish it
 * through its sequence number; `entering` lets an ending worker wait for
 * a producer that saw it running.
 */
static bool queue_job(struct sw_place_worker *w, const struct sw_place_job *in)
{
	struct sw_place_job *j;
	size_t pos;

	atomic_fetch_add(&w->entering, 1);
	if (atomic_load(&w->stop)) {
		atomic_fetch_sub(&w->entering, 1);
		return false;
	}
	pos = atomic_load_explicit(&w->tail, memory_order_relaxed);
	for (;;) {
		size_t seq;

		j = &w->ring[pos % SW_PLACE_RING];
		seq = atomic_load_explicit(&j->seq, memory_order_acquire);
		if (seq == pos) { /* free for pos: take it */
			if (atomic_compare_exchange_weak_explicit(&w->tail, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed))
				break;
			continue; /* pos reloaded */
		}
		if (seq < pos) { /* full: the worker is still on pos - RING */
			kick(w);
			sched_yield();
		}
		pos = atomic_load_explicit(&w->tail, memory_order_relaxed);
	}
	j->hint = in->hint;
	j->dst = in->dst;
	j->src = in->src;
	j->len = in->len;
	j->done = in->done;
	j->arg = in->arg;
	j->pending = in->pending;
	j->local = in->local;
	atomic_store(&j->seq, pos + 1); /* seq_cst: see kick() */
	atomic_fetch_sub(&w->entering, 1);
	return true;
}

/* Contract: see place.h. */
int sw_place_defer(const struct sw_place_hint *hint, void *dst, const void *src, size_t len,
		   void (*done)(void *), void *arg)
{
	struct sw_place_job in = {.dst = dst, .src = src, .len = len, .done = done, .arg = arg};
	struct sw_place_worker *w = NULL;

	if (sw_place_pull_pending())
		sw_place_pull_flush(); /* in this thread's order */
	if (hint && hint->has_cpu) {
		w = sw_place_worker_of(hint->cpu_id);
		if (!w)
			return -ENODEV; /* the handle took no worker reference */
	}
	if (w != tl.last && sw_place_pending())
		sw_place_fence(); /* keep this thread's order across workers */
	if (w && len) {
		in.hint = *hint;
		in.pending = &tl.pending;
		in.local = sched_getcpu() == (int)w->cpu;
		atomic_fetch_add_explicit(&tl.pending, 1, memory_order_relaxed);
		tl.last = w;
		if (queue_job(w, &in)) {
			tl.unkicked = true;
			return 0;
		}
		/* its thread ended (unload, or a fork child's): place here, in order */
		atomic_fetch_sub_explicit(&tl.pending, 1, memory_order_relaxed);
		sw_place_fence();
	}
	sw_place_here(hint, dst, src, len);
	if (done)
		done(arg);
	return 0;
}
