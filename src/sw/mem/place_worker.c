/* SPDX-License-Identifier: MIT */
/*
 * place_worker.c - CPU_ID placement: the copy runs on a worker thread
 * pinned to the DMA handle's CPU, so the lines land in that CPU's cache.
 * This file runs the workers; place_queue.c is the producer side.
 *
 * One worker per CPU in use, refcounted by the handles naming it. The
 * hand-off costs no lock and no wait per packet:
 *
 *   - The receiving thread (the progress thread) queues each packet's
 *     copy as a job in the worker's ring and goes on with the next
 *     packet. The job points at the payload in the receive slot, which
 *     is not reused before the fence (progress.c), so nothing is copied
 *     twice; it holds a reference on the MR, dropped once placed.
 *   - Queueing wakes nobody. The progress thread kicks the worker once
 *     per receive batch (sw_place_kick), or only at the fence when it
 *     runs on the worker's CPU itself: there a wake-up would just switch
 *     the CPU to the worker and back again each batch.
 *   - The worker takes the jobs in order. Idle, it spins a little (not
 *     at all after a job from its own CPU), then sleeps on a futex.
 *   - The progress thread fences (sw_place_fence: spin, yield, then a
 *     futex sleep the worker's last job ends) before an ACK, a CQE, a
 *     READ response or an atomic, and before it reuses receive slots. A
 *     stream into a CPU_ID MR receives up to eight batches into fresh
 *     slots before it fences and sends the ACKs owed, so a stream costs
 *     one fence per 256 packets (a megabyte at a 4 KiB MTU).
 *
 * Order: one thread's jobs on one worker run first in first out, and a
 * thread that turns to another worker (or to an unpinned placement)
 * fences first, so its placements land in the order it made them: the
 * last byte of a WRITE, in its last packet's job, is stored after every
 * byte before it is visible, as with any other hint.
 *
 * A worker's thread ends at the last put or at unload (sw_place_quiesce)
 * once it ran what was queued; placements for a worker whose thread has
 * ended run in the caller. The struct stays, so a producer's pointer to
 * it never dangles, and the next handle starts a thread again. A fork
 * child has no worker threads: it neither joins nor waits for the
 * parent's (workers_pid), places in the caller for handles it inherited,
 * and starts its own thread for a CPU it names anew.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "sw/mem/place_worker.h"

static pthread_mutex_t workers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sw_place_worker **workers; /* by CPU; grown, never shrunk */
static uint32_t nworkers;
static pid_t workers_pid; /* the process whose threads they are (a fork child has none) */

static void run_job(struct sw_place_worker *w, struct sw_place_job *j)
{
	int cpu = sched_getcpu();

	sw_place_here(&j->hint, j->dst, j->src, j->len);
	atomic_store_explicit(&sw_place_stats.last_cpu, cpu, memory_order_relaxed);
	atomic_fetch_add_explicit(&sw_place_stats.pinned_jobs, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sw_place_stats.pinned_bytes, j->len, memory_order_relaxed);
	if (cpu != (int)w->cpu)
		atomic_fetch_add_explicit(&sw_place_stats.pinned_off_cpu, 1, memory_order_relaxed);
	w->last_local = j->local;
	if (j->done)
		j->done(j->arg);
	sw_place_job_done(j);
}

static bool job_ready(const struct sw_place_job *j, size_t pos)
{
	return atomic_load_explicit(&j->seq, memory_order_acquire) == pos + 1;
}

/*
 * Nothing at `j` (position pos): spin a little, then sleep until kicked.
 * After a job queued from this CPU, sleep at once: its producer cannot
 * run while this thread spins.
 */
static void idle(struct sw_place_worker *w, const struct sw_place_job *j, size_t pos)
{
	unsigned int k;

	for (int i = 0; !w->last_local && i < SW_PLACE_SPINS; i++) {
		if (job_ready(j, pos) || atomic_load_explicit(&w->stop, memory_order_relaxed))
			return;
		sw_cpu_relax();
	}
	k = atomic_load(&w->kick);
	atomic_store(&w->sleeping, true); /* seq_cst, as the loads below: see kick() */
	if (atomic_load(&j->seq) != pos + 1 && !atomic_load(&w->stop))
		sw_futex_wait(&w->kick, k);
	atomic_store(&w->sleeping, false);
}

static void *worker_main(void *arg)
{
	struct sw_place_worker *w = arg;
	size_t pos = 0;

	for (;;) {
		struct sw_place_job *j = &w->ring[pos % SW_PLACE_RING];

		if (job_ready(j, pos)) {
			run_job(w, j);
			atomic_store_explicit(&j->seq, pos + SW_PLACE_RING, memory_order_release);
			pos++;
			continue;
		}
		/* stopped, and no producer left between its check and its publish */
		if (atomic_load(&w->stop) && !atomic_load(&w->entering) && !job_ready(j, pos))
			break;
		idle(w, j, pos);
	}
	return NULL;
}

/* Start `w`'s thread pinned to its CPU, on an empty ring. workers_lock. */
static int worker_start(struct sw_place_worker *w)
{
	size_t size = CPU_ALLOC_SIZE(w->cpu + 1);
	pthread_attr_t attr;
	cpu_set_t *set;
	int ret;

	set = CPU_ALLOC(w->cpu + 1);
	if (!set)
		return -ENOMEM;
	CPU_ZERO_S(size, set);
	CPU_SET_S(w->cpu, size, set);
	atomic_store(&w->tail, 0);
	for (size_t i = 0; i < SW_PLACE_RING; i++)
		atomic_store(&w->ring[i].seq, i);
	atomic_store(&w->sleeping, false);
	w->last_local = false;
	atomic_store(&w->stop, false);
	pthread_attr_init(&attr);
	ret = pthread_attr_setaffinity_np(&attr, size, set);
	if (!ret)
		ret = pthread_create(&w->thread, &attr, worker_main, w);
	pthread_attr_destroy(&attr);
	CPU_FREE(set);
	atomic_store(&w->stop, ret != 0);
	w->running = !ret;
	return -ret;
}

/*
 * End `w`'s thread once it ran what is queued, and join it; from now on
 * its placements run in the caller. A fork child only marks it ended:
 * the thread is the parent's. workers_lock.
 */
static void worker_end(struct sw_place_worker *w)
{
	if (!w->running)
		return;
	w->running = false;
	atomic_store(&w->stop, true);
	if (workers_pid != getpid())
		return;
	sw_place_worker_wake(w);
	pthread_join(w->thread, NULL);
}

/* Contract: see place_worker.h. */
struct sw_place_worker *sw_place_worker_of(uint32_t cpu)
{
	struct sw_place_worker *w;

	pthread_mutex_lock(&workers_lock);
	w = cpu < nworkers ? workers[cpu] : NULL;
	if (w && !w->refs)
		w = NULL;
	pthread_mutex_unlock(&workers_lock);
	return w;
}

/* The slot of `cpu`, grown to it, with its worker made (not started). workers_lock. */
static struct sw_place_worker *worker_make(uint32_t cpu)
{
	struct sw_place_worker *w;

	if (cpu >= nworkers) {
		struct sw_place_worker **n = realloc(workers, (cpu + 1) * sizeof(*n));

		if (!n)
			return NULL;
		memset(n + nworkers, 0, (cpu + 1 - nworkers) * sizeof(*n));
		workers = n;
		nworkers = cpu + 1;
	}
	w = workers[cpu];
	if (!w) {
		w = aligned_alloc(_Alignof(struct sw_place_worker), sizeof(*w));
		if (!w)
			return NULL;
		memset(w, 0, sizeof(*w));
		w->cpu = cpu;
		atomic_init(&w->stop, true);
		workers[cpu] = w;
	}
	return w;
}

/* Contract: see place.h. */
int sw_place_worker_get(uint32_t cpu)
{
	struct sw_place_worker *w;
	int ret = 0;

	pthread_mutex_lock(&workers_lock);
	if (workers_pid != getpid()) { /* first here, or a fork child: no thread is ours */
		for (uint32_t i = 0; i < nworkers; i++)
			if (workers[i])
				worker_end(workers[i]);
		workers_pid = getpid();
	}
	w = worker_make(cpu);
	if (!w)
		ret = -ENOMEM;
	else if (!w->refs)
		ret = worker_start(w);
	if (!ret)
		w->refs++;
	pthread_mutex_unlock(&workers_lock);
	return ret;
}

/* Contract: see place.h. */
void sw_place_worker_put(uint32_t cpu)
{
	struct sw_place_worker *w;

	pthread_mutex_lock(&workers_lock);
	w = cpu < nworkers ? workers[cpu] : NULL;
	if (w && w->refs && --w->refs == 0)
		worker_end(w);
	pthread_mutex_unlock(&workers_lock);
}

/* Contract: see place.h. */
void sw_place_quiesce(void)
{
	pthread_mutex_lock(&workers_lock);
	for (uint32_t i = 0; i < nworkers; i++)
		if (workers[i])
			worker_end(workers[i]);
	pthread_mutex_unlock(&workers_lock);
}
